//! `catchupkill`: replicas killed with `kill -9` while the cluster drains catch-up runs.

use crate::prelude::*;

/// The catch-up rate, in starts per second.
const RATE: f64 = 4.0;

pub(crate) fn catchupkill(sc: &mut Sc) -> Outcome {
    let down_for: u64 = if sc.h.quick { 8 } else { 20 };
    let wanted_kills = if sc.h.quick { 2 } else { 5 };
    let mut out = Outcome::new(
        "every missed slot has one catch_up row, which ends succeeded; every catch-up attempt interrupted by kill -9 is taken over within stale (2 s) + 5 s, plus stale + 2 s for each interrupted attempt of its job it waited behind; (a)-(e)",
    );
    // 800 ms of work, planned at 4 starts per second; the job's runs go one at a time (overlap
    // `skip`), so the store hands the catch-up runs out between scheduled slots.
    let args = with_common(&[
        "--jobs",
        "1",
        "--work-ms",
        "800",
        "--catch-up",
        "all:600:1000",
        "--catch-up-rate",
        "4",
    ]);
    let Outage {
        from,
        down,
        mut nodes,
        mut unclean,
    } = full_outage(sc, &args, down_for);
    let drain_until = Utc::now() + chrono_ms((down_for as f64 / RATE * 1_000.0) as i64);
    let kills = kill_holders(sc, &mut nodes, &args, wanted_kills, drain_until);
    await_drained(sc, down_for);
    let to = Utc::now() - chrono_ms(1_000);
    unclean += stop_all(nodes);

    let job = "job000".to_owned();
    let expected = expect(std::slice::from_ref(&job), &every(from, to, 1));
    let (report, runs, effects) = sc.check(&expected);
    let Some((gap, catch_up)) = gap_and_catch_up(&runs, down) else {
        out.failures
            .push("no scheduled rows before or after the outage".to_owned());
        return out;
    };
    let caught_up = gap
        .iter()
        .filter(|t| {
            catch_up
                .get(t)
                .is_some_and(|r| r.status == RunStatus::Succeeded)
        })
        .count();
    let retaken = catch_up.values().filter(|r| r.attempt > 1).count();

    let taken = interrupted_by(&kills, &runs, &effects);
    let late = taken.late(chrono_ms(STALE_MS as i64));
    let Interrupted {
        count: interrupted,
        unrecovered,
        ref latencies,
        ..
    } = taken;
    let worst = latencies.iter().max().copied().unwrap_or_default();
    out.fig("downtime", format!("{down_for}s"));
    out.fig("missed", gap.len());
    out.fig("caught-up", caught_up);
    out.fig("kills", kills.len());
    out.fig("interrupted-catch-up-executions", interrupted);
    out.fig("catch-up-runs-on-attempt-2+", retaken);
    out.fig("recovery-max", secs_f(worst));
    out.invariants(&report);
    let (missed, rows) = (gap.len(), catch_up.len());
    out.require(caught_up == missed && rows == missed, || {
        format!("{caught_up} of {missed} missed slots caught up ({rows} catch-up rows)")
    });
    out.require(!kills.is_empty(), || {
        "no replica held a catch-up run to kill".to_owned()
    });
    out.require(unrecovered == 0, || {
        format!("{unrecovered} interrupted catch-up attempts never taken over")
    });
    out.require(late.is_empty(), || {
        let (latency, allowed) = late[0];
        format!(
            "a take-over took {} where {} was allowed",
            secs_f(latency),
            secs_f(allowed)
        )
    });
    out.require_clean(unclean, "replicas");
    out
}

/// While the catch-up runs drain (until `drain_until`), up to `wanted` times: `kill -9` a replica
/// that holds one, and start it again on `args`. Answers the kills.
fn kill_holders(
    sc: &mut Sc,
    nodes: &mut [Node],
    args: &[String],
    wanted: usize,
    drain_until: DateTime<Utc>,
) -> Vec<(u32, DateTime<Utc>)> {
    let mut kills: Vec<(u32, DateTime<Utc>)> = Vec::new();
    while kills.len() < wanted && Utc::now() < drain_until {
        sleep(sc.rng.ms(200, 700));
        let (runs, _) = sc.runs();
        let holders: Vec<usize> = runs
            .iter()
            .filter(|r| r.trigger == Trigger::CatchUp && r.status == RunStatus::Running)
            .filter_map(|r| r.attempts.last())
            .filter_map(|a| (0..nodes.len()).find(|i| a.owner == format!("n{i}")))
            .collect();
        if holders.is_empty() {
            continue;
        }
        let i = holders[sc.rng.below(holders.len())];
        let pid = nodes[i].pid();
        kills.push((pid, sc.kill(pid)));
        nodes[i] = sc.spawn(&format!("n{i}"), args);
    }
    kills
}

/// Every interrupted attempt goes stale and is taken over; the drain finishes. A `skip` job runs
/// one body at a time, so catch-up runs take turns with the scheduled slots: allow each missed slot
/// two seconds (a turn), and stop waiting as soon as every catch-up row has ended.
fn await_drained(sc: &Sc, down_for: u64) {
    let drained_by = Instant::now() + Duration::from_millis(STALE_MS) + secs(5 + 2 * down_for);
    while Instant::now() < drained_by {
        sleep(secs(1));
        let (runs, _) = sc.runs();
        let open = runs.iter().any(|r| {
            r.trigger == Trigger::CatchUp
                && matches!(
                    r.status,
                    RunStatus::Pending | RunStatus::Running | RunStatus::Abandoned
                )
        });
        if !open && runs.iter().any(|r| r.trigger == Trigger::CatchUp) {
            break;
        }
    }
}

/// The catch-up rows by slot.
type CatchUpRows<'r> = BTreeMap<DateTime<Utc>, &'r RunRecord>;

/// The slots missed in the outage (between the newest scheduled slot before `down` and the first
/// after it), and the catch-up rows by slot.
fn gap_and_catch_up(
    runs: &[RunRecord],
    down: DateTime<Utc>,
) -> Option<(Vec<DateTime<Utc>>, CatchUpRows<'_>)> {
    let scheduled = runs.iter().filter(|r| r.trigger == Trigger::Schedule);
    let watermark = scheduled
        .clone()
        .filter(|r| r.key.scheduled_at <= down)
        .map(|r| r.key.scheduled_at)
        .max()?;
    let resumed = scheduled
        .filter(|r| r.key.scheduled_at > down)
        .map(|r| r.key.scheduled_at)
        .min()?;
    let gap = every(watermark + chrono_ms(1_000), resumed - chrono_ms(1_000), 1);
    let catch_up = runs
        .iter()
        .filter(|r| r.trigger == Trigger::CatchUp)
        .map(|r| (r.key.scheduled_at, r))
        .collect();
    Some((gap, catch_up))
}
