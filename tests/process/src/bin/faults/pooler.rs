//! `pooler`: three replicas reach the database only through a PgBouncer in transaction mode
//! (`--store pgpooled:`: the backend built with `transaction_pooler(true)`, its lock layer lease
//! rows). PgBouncer is killed and started again, then every server session it holds is ended,
//! then the replica running a body is killed with `-9`.

use slotguard_process_tests::pgbouncer::{PgBouncer, end_sessions};

use crate::prelude::*;

pub(crate) fn pooler(sc: &mut Sc) -> Outcome {
    let mut out = Outcome::new(
        "(a)-(e) through a transaction pooler, across a PgBouncer kill and restart, its server sessions ended and a kill -9 of a replica running a body, whose run is taken over",
    );
    let Some(mut bouncer) = PgBouncer::start(sc.h.cluster.port(), "postgres") else {
        out.failures
            .push("no pgbouncer (Debian: apt-get install pgbouncer)".into());
        return out;
    };
    let common = with_common(&["--jobs", "4", "--work-ms", "600"]);
    let args = |name: &str| {
        let store = format!("pgpooled:{}#{}", sc.url_via(bouncer.port, name), sc.schema);
        let mut args = common.clone();
        args.extend(["--store".to_owned(), store]);
        args
    };
    let names = ["n0", "n1", "n2"];
    let mut nodes: Vec<Node> = names
        .iter()
        .map(|name| sc.launch(name, bouncer.port, &args(name)))
        .collect();
    for node in &mut nodes {
        node.wait_for("ready", secs(60));
    }
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(3) + sc.rng.ms(0, 1_000));
    bouncer.restart();
    sleep(secs(3) + sc.rng.ms(0, 1_000));
    let ended = end_server_sessions(sc);
    sleep(secs(3));
    let since = slot_name(Utc::now());
    let victim = wait_effect(&sc.ledger, secs(10), |e| {
        e.kind == "start" && e.slot > since
    });
    let killed = victim.as_ref().ok().map(|e| {
        sc.kill(e.pid);
        e.instance.clone()
    });
    sleep(Duration::from_millis(STALE_MS) + secs(3));
    let to = Utc::now() - chrono_ms(1_000);
    let pids: Vec<u32> = victim.iter().map(|e| e.pid).collect();
    nodes.retain(|n| !pids.contains(&n.pid()));
    let unclean = stop_all(nodes);
    drop(bouncer);

    let expected = expect(&job_names(4), &every(from, to, 1));
    let (report, runs, _) = sc.check(&expected);
    let taken = killed.as_deref().map_or(0, |name| taken_over(&runs, name));
    out.fig("slots", expected.len());
    out.fig("server-sessions-ended", ended);
    out.fig("killed", killed.as_deref().unwrap_or("nobody"));
    out.fig("attempts-taken-over", taken);
    out.invariants(&report);
    out.require(ended > 0, || "no server session of PgBouncer to end".into());
    out.require(killed.is_some(), || "no body started to kill".into());
    out.require(taken > 0, || {
        "no attempt of the killed replica was taken over".into()
    });
    out.require_clean(unclean, "replicas");
    out
}

/// Ends every server session the replicas hold through PgBouncer (their application names start
/// with the scenario's schema); the number ended.
fn end_server_sessions(sc: &Sc) -> i64 {
    let prefix = format!("{}_", sc.schema);
    sc.h.rt.block_on(end_sessions(&sc.h.cluster.url(), &prefix))
}

/// The attempts of replica `name` that another attempt took over.
fn taken_over(runs: &[RunRecord], name: &str) -> usize {
    runs.iter()
        .flat_map(|r| r.attempts.iter().map(move |a| (r, a)))
        .filter(|(r, a)| {
            a.owner == name
                && a.status == RunStatus::Abandoned
                && r.attempts.last().is_some_and(|l| l.token != a.token)
        })
        .count()
}
