//! `kill9`: `kill -9` of a random replica at a random point of claim, run or complete, and a
//! restart; every interrupted attempt is taken over.

use crate::prelude::*;

pub(crate) fn kill9(sc: &mut Sc) -> Outcome {
    let n = 3;
    let iterations = if sc.h.quick { 20 } else { 200 };
    let work: u64 = 300;
    let mut out = Outcome::new(
        "(a)-(e) over every slot of the run; each interrupted attempt recovered by another attempt within stale (2 s) + 5 s, plus stale + 2 s for each interrupted attempt of its job it waited behind",
    );
    let args = with_common(&["--jobs", "4", "--work-ms", &work.to_string()]);
    let mut nodes = sc.spawn_many(n, &args);
    let from = Utc::now() + chrono_ms(1_000);
    let mut kills: Vec<(u32, DateTime<Utc>)> = Vec::new();
    for _ in 0..iterations {
        let i = sc.rng.below(n);
        // Slots fall due on whole seconds: claim, run and complete happen in the `work + 150 ms`
        // after one.
        let offset = sc.rng.ms(0, work + 150);
        let at = next_second(Utc::now() + chrono_ms(200))
            + chrono::Duration::from_std(offset).expect("small");
        sleep_until(at);
        let pid = nodes[i].pid();
        kills.push((pid, sc.kill(pid)));
        nodes[i] = sc.spawn(&format!("n{i}"), &args);
    }
    let to = Utc::now() - chrono_ms(1_000);
    // Every interrupted attempt goes stale and is taken over.
    sleep(Duration::from_millis(STALE_MS) + secs(3));
    let unclean = stop_all(nodes);
    let expected = expect(&job_names(4), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);

    let taken = interrupted_by(&kills, &runs, &effects);
    let late = taken.late(chrono_ms(STALE_MS as i64));
    let Interrupted {
        count: interrupted,
        after_end,
        unrecovered,
        ref latencies,
        ref behind,
    } = taken;
    let worst = latencies.iter().max().copied().unwrap_or_default();
    out.fig("kills", kills.len());
    out.fig("slots", expected.len());
    out.fig("interrupted-executions", interrupted);
    out.fig("killed-between-end-and-complete", after_end);
    out.fig("recovery-max", secs_f(worst));
    out.fig("recovery-max-alone", secs_f(taken.worst_alone()));
    out.fig(
        "longest-wait-behind",
        behind.iter().max().copied().unwrap_or(0),
    );
    out.fig(
        "recovery-mean",
        secs_f(
            latencies
                .iter()
                .copied()
                .sum::<chrono::Duration>()
                .checked_div(latencies.len().max(1) as i32)
                .unwrap_or_default(),
        ),
    );
    out.invariants(&report);
    out.require(unrecovered == 0, || {
        format!("{unrecovered} interrupted attempts never taken over")
    });
    out.require(late.is_empty(), || {
        let (latency, allowed) = late[0];
        format!(
            "{} recoveries too slow, e.g. {} where {} was allowed",
            late.len(),
            secs_f(latency),
            secs_f(allowed)
        )
    });
    out.require_clean(unclean, "replicas");
    out
}
