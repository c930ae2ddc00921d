//! `restart`: the database stops and starts again while runs are going; the replicas resume, and the
//! slots no one could record are those `Admin::missed` lists.

use slotguard_admin::Admin;

use crate::prelude::*;

pub(crate) fn restart(sc: &mut Sc) -> Outcome {
    let restarts = if sc.h.quick { 1 } else { 3 };
    let mut out = Outcome::new(
        "replicas run slots again within 10 s of the database being back; every slot outside [down - 1 s, back + 5 s] recorded; those inside that were not recorded are listed by Admin::missed; (a)-(e)",
    );
    let nodes = sc.spawn_many(3, &with_common(&["--jobs", "5", "--work-ms", "400"]));
    let from = Utc::now() + chrono_ms(1_000);
    sleep(secs(4));
    let outages: Vec<_> = (0..restarts).map(|_| outage(sc)).collect();
    let to = Utc::now() - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let excused = |t: DateTime<Utc>| {
        outages
            .iter()
            .any(|(d, b)| t > *d - chrono_ms(1_000) && t <= *b + chrono_ms(5_000))
    };
    let slots: Vec<_> = every(from, to, 1);
    let kept: Vec<_> = slots.iter().copied().filter(|t| !excused(*t)).collect();
    let expected = expect(&job_names(5), &kept);
    let (report, runs, _) = sc.check(&expected);
    let rows = index(&runs);
    let lost = expect(
        &job_names(5),
        &slots
            .iter()
            .copied()
            .filter(|t| excused(*t))
            .collect::<Vec<_>>(),
    )
    .iter()
    .filter(|k| !rows.contains_key(*k))
    .count();
    let listed = listed_missed(sc, &outages);
    let worst = resumed_max(&mut out, &runs, &outages);
    out.fig("restarts", restarts);
    out.fig(
        "downtime",
        outages
            .iter()
            .map(|(d, b)| secs_f(*b - *d))
            .collect::<Vec<_>>()
            .join("/"),
    );
    out.fig("resumed-max", secs_f(worst));
    out.fig("slots-unrecorded-in-outage", lost);
    out.fig("listed-by-admin-missed", listed);
    out.require(listed == lost, || {
        format!("{lost} slots unrecorded in the outage, {listed} listed by Admin::missed")
    });
    out.fig("slots-checked", expected.len());
    out.invariants(&report);
    out.require(worst <= chrono_ms(10_000), || {
        format!("resumed only after {}", secs_f(worst))
    });
    out.require_clean(unclean, "replicas");
    out
}

/// While the runs of the last whole second are going, the database stops for 1-4 s and starts
/// again; 8 s later, answers when it went down and when it was back.
fn outage(sc: &mut Sc) -> (DateTime<Utc>, DateTime<Utc>) {
    let down_for = sc.rng.ms(1_000, 4_000);
    let offset = sc.rng.ms(50, 300);
    sleep_until(next_second(Utc::now()) + chrono::Duration::from_std(offset).expect("small"));
    let down = Utc::now();
    sc.h.cluster.stop();
    sleep(down_for);
    sc.h.cluster.restart();
    let back = Utc::now();
    sleep(secs(8));
    (down, back)
}

/// The slots no one could record are those the admin API lists as missed: how many it lists over
/// the outages' windows.
fn listed_missed(sc: &Sc, outages: &[(DateTime<Utc>, DateTime<Utc>)]) -> usize {
    let backend = sc.backend(1);
    let admin = Admin::new(backend.clone());
    let mut listed = 0;
    for job in job_names(5) {
        for (d, b) in outages {
            listed +=
                sc.h.rt
                    .block_on(admin.missed(&job, *d - chrono_ms(999), *b + chrono_ms(5_001)))
                    .map_or(0, |m| m.len());
        }
    }
    sc.h.rt.block_on(backend.close());
    listed
}

/// The longest wait from the database being back to the next attempt; a failure for an outage
/// after which nothing ran.
fn resumed_max(
    out: &mut Outcome,
    runs: &[RunRecord],
    outages: &[(DateTime<Utc>, DateTime<Utc>)],
) -> chrono::Duration {
    let mut worst = chrono::Duration::zero();
    for (_, back) in outages {
        let first = runs
            .iter()
            .flat_map(|r| &r.attempts)
            .map(|a| a.started_at)
            .filter(|t| t > back)
            .min();
        match first {
            Some(t) => worst = worst.max(t - *back),
            None => out
                .failures
                .push("nothing ran after the database came back".into()),
        }
    }
    worst
}
