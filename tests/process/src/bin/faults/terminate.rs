//! `terminate`: `pg_terminate_backend` on a random replica's backends, round after round; every
//! replica connects again.

use crate::prelude::*;

pub(crate) fn terminate(sc: &mut Sc) -> Outcome {
    let n = 3;
    let rounds = if sc.h.quick { 6 } else { 30 };
    let mut out = Outcome::new(
        "every terminated replica has connected again afterwards; (a)-(e) over every slot of the run",
    );
    let nodes = sc.spawn_many(n, &with_common(&["--jobs", "4", "--work-ms", "400"]));
    let pool = sc.pool();
    let from = Utc::now() + chrono_ms(1_000);
    let mut last: BTreeMap<String, DateTime<Utc>> = BTreeMap::new();
    let mut terminated = 0usize;
    for _ in 0..rounds {
        let (instance, done) = terminate_one(sc, &pool, n);
        terminated += done;
        last.insert(instance, Utc::now());
    }
    sleep(Duration::from_millis(STALE_MS) + secs(3));
    let reconnected = require_reconnected(sc, &mut out, &pool, &last);
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    sc.h.rt.block_on(pool.close());
    let expected = expect(&job_names(4), &every(from, to, 1));
    let (report, runs, _) = sc.check(&expected);
    out.fig(
        "runs-by-replica(all/after-last-termination)",
        runs_after(&runs, &last),
    );
    out.fig("replicas-reconnected", reconnected);
    out.fig("rounds", rounds);
    out.fig("backends-terminated", terminated);
    out.fig("slots", expected.len());
    out.invariants(&report);
    out.require(terminated >= rounds / 2, || {
        format!("only {terminated} backends found to terminate")
    });
    out.require_clean(unclean, "replicas");
    out
}

/// Right after a whole second, when claims, then completions, are on the wire: terminates every
/// backend of a random one of the `n` replicas (its pool's, its lock session's and its presence
/// session's: a live replica cut off from all its sessions must not be judged gone). Answers the
/// replica and how many backends were terminated.
fn terminate_one(sc: &mut Sc, pool: &sqlx::PgPool, n: usize) -> (String, usize) {
    let offset = sc.rng.ms(0, 500);
    let at = next_second(Utc::now() + chrono_ms(sc.rng.ms(0, 1_000).as_millis() as i64))
        + chrono::Duration::from_std(offset).expect("small");
    sleep_until(at);
    let instance = format!("n{}", sc.rng.below(n));
    let app = sc.app(&instance);
    let done: Vec<(bool,)> =
        sc.h.rt
            .block_on(
                sqlx::query_as(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                 WHERE application_name = $1 OR application_name LIKE $1 || ' (slotguard %'",
                )
                .bind(&app)
                .fetch_all(pool),
            )
            .expect("terminate");
    (instance, done.iter().filter(|(ok,)| *ok).count())
}

/// Requires each terminated replica's pool to have connected again (its claims need a connection
/// every second); answers how many had.
fn require_reconnected(
    sc: &Sc,
    out: &mut Outcome,
    pool: &sqlx::PgPool,
    last: &BTreeMap<String, DateTime<Utc>>,
) -> usize {
    let mut reconnected = 0;
    for instance in last.keys() {
        let open: i64 =
            sc.h.rt
                .block_on(
                    sqlx::query_scalar(
                        "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1",
                    )
                    .bind(sc.app(instance))
                    .fetch_one(pool),
                )
                .expect("pg_stat_activity");
        if open > 0 {
            reconnected += 1;
        } else {
            out.failures.push(format!(
                "{instance} has no connection after its backends were terminated"
            ));
        }
    }
    reconnected
}

/// Per replica, its attempts in all and those started after its last termination.
fn runs_after(runs: &[RunRecord], last: &BTreeMap<String, DateTime<Utc>>) -> String {
    let mut after: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (instance, at) in last {
        let attempts = runs
            .iter()
            .flat_map(|r| &r.attempts)
            .filter(|a| a.owner == *instance);
        let n = attempts.clone().count();
        let resumed = attempts.filter(|a| a.started_at > *at).count();
        after.insert(instance, (n, resumed));
    }
    after
        .iter()
        .map(|(i, (n, r))| format!("{i}:{n}/{r}"))
        .collect::<Vec<_>>()
        .join(",")
}
