//! `catchup`: every replica down for a while, then started again; one job per catch-up policy
//! (`all`, `latest`, `skip`).

use slotguard_admin::Admin;

use crate::prelude::*;

/// The catch-up rate the replicas run at, in starts per second.
const RATE: f64 = 20.0;

/// One job's view of the outage.
struct Gap<'r> {
    job: &'r String,
    /// Its rows.
    mine: Vec<&'r RunRecord>,
    /// Its newest slot before the outage, and its first scheduled slot after it.
    watermark: DateTime<Utc>,
    resumed: DateTime<Utc>,
    /// The slots between: missed.
    gap: Vec<DateTime<Utc>>,
    gap_set: BTreeSet<DateTime<Utc>>,
    /// Its catch-up rows.
    catch_up: Vec<&'r RunRecord>,
}

impl<'r> Gap<'r> {
    fn of(job: &'r String, runs: &'r [RunRecord], down: DateTime<Utc>) -> Option<Gap<'r>> {
        let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.key.job == *job).collect();
        let watermark = mine
            .iter()
            .filter(|r| r.key.scheduled_at <= down)
            .map(|r| r.key.scheduled_at)
            .max()?;
        let resumed = mine
            .iter()
            .filter(|r| r.trigger == Trigger::Schedule && r.key.scheduled_at > down)
            .map(|r| r.key.scheduled_at)
            .min()?;
        let gap: Vec<_> = every(watermark + chrono_ms(1_000), resumed - chrono_ms(1_000), 1);
        let catch_up = mine
            .iter()
            .copied()
            .filter(|r| r.trigger == Trigger::CatchUp)
            .collect();
        Some(Gap {
            job,
            mine,
            watermark,
            resumed,
            gap_set: gap.iter().copied().collect(),
            gap,
            catch_up,
        })
    }

    /// The slots of `all` outside the gap: those a policy that does not catch up must have.
    fn outside(&self, all: &[DateTime<Utc>]) -> Vec<DateTime<Utc>> {
        all.iter()
            .copied()
            .filter(|t| !self.gap_set.contains(t))
            .collect()
    }
}

pub(crate) fn catchup(sc: &mut Sc) -> Outcome {
    let down_for = if sc.h.quick { 6 } else { 20 };
    let mut out = Outcome::new(
        "all: every missed slot runs once (catch_up) at no more than rate + 1 starts per second; latest: only the newest missed slot runs; skip: none runs and Admin::missed lists them all; (a)-(e)",
    );
    let args = with_common(&[
        "--jobs",
        "3",
        "--work-ms",
        "50",
        "--catch-up",
        "all:600:1000,latest,skip",
        "--catch-up-rate",
        "20",
    ]);
    let Outage {
        from,
        down,
        nodes,
        mut unclean,
    } = full_outage(sc, &args, down_for);
    let back = Utc::now();
    sleep(secs((down_for as f64 / RATE) as u64 + 4));
    let to = Utc::now() - chrono_ms(1_000);
    unclean += stop_all(nodes);
    let names = job_names(3);
    let (runs, _) = sc.runs();
    let all = every(from, to, 1);
    let mut expected = BTreeSet::new();
    let mut caught_up_starts: Vec<DateTime<Utc>> = Vec::new();
    for (job, policy) in names.iter().zip(["all", "latest", "skip"]) {
        let Some(g) = Gap::of(job, &runs, down) else {
            out.failures
                .push(format!("{job}: no rows before or after the outage"));
            continue;
        };
        let kept = match policy {
            "all" => {
                caught_up_starts.extend(judge_all(&mut out, &g));
                all.clone()
            }
            "latest" => {
                judge_latest(&mut out, &g);
                g.outside(&all)
            }
            _ => {
                judge_skip(sc, &mut out, &g);
                g.outside(&all)
            }
        };
        expected.extend(expect(std::slice::from_ref(job), &kept));
    }
    caught_up_starts.sort();
    let burst = most_within_a_second(&caught_up_starts);
    let span = match (caught_up_starts.first(), caught_up_starts.last()) {
        (Some(_), Some(last)) => *last - back,
        _ => chrono::Duration::zero(),
    };
    let (report, _, _) = sc.check(&expected);
    out.fig("downtime", format!("{down_for}s"));
    out.fig("catch-up-done-after-restart", secs_f(span));
    out.fig("catch-up-max-starts-per-1s", burst);
    out.invariants(&report);
    out.require(burst <= RATE as usize + 1, || {
        format!("{burst} catch-up starts within one second at rate {RATE}")
    });
    out.require_clean(unclean, "replicas");
    out
}

/// `all`: every missed slot caught up, once, on attempt 1. Answers the catch-up runs' starts.
fn judge_all(out: &mut Outcome, g: &Gap) -> Vec<DateTime<Utc>> {
    let ok = g
        .catch_up
        .iter()
        .filter(|r| g.gap_set.contains(&r.key.scheduled_at))
        .filter(|r| r.status == RunStatus::Succeeded && r.attempt == 1)
        .count();
    out.require(ok == g.gap.len() && g.catch_up.len() == g.gap.len(), || {
        format!(
            "all: {ok} of {} missed slots caught up ({} catch-up rows)",
            g.gap.len(),
            g.catch_up.len()
        )
    });
    out.fig("all", format!("missed:{} caught-up:{ok}", g.gap.len()));
    g.catch_up
        .iter()
        .filter_map(|r| r.attempts.first().map(|a| a.started_at))
        .collect()
}

/// `latest`: only the newest missed slot ran, and it is the only row in the gap.
fn judge_latest(out: &mut Outcome, g: &Gap) {
    let catch_up = &g.catch_up;
    let newest = g.gap.last().copied();
    out.require(
        catch_up.len() == 1
            && catch_up[0].key.scheduled_at == newest.unwrap_or(g.watermark)
            && catch_up[0].status == RunStatus::Succeeded,
        || {
            format!(
                "latest: catch-up rows {:?}, newest missed {newest:?}",
                catch_up
                    .iter()
                    .map(|r| (r.key.scheduled_at, r.status))
                    .collect::<Vec<_>>()
            )
        },
    );
    let others = g
        .mine
        .iter()
        .filter(|r| g.gap_set.contains(&r.key.scheduled_at))
        .count();
    out.require(others == 1, || {
        format!("latest: {others} rows in the gap (want 1)")
    });
    out.fig(
        "latest",
        format!("missed:{} ran:{}", g.gap.len(), catch_up.len()),
    );
}

/// `skip`: nothing caught up, and `Admin::missed` lists every missed slot.
fn judge_skip(sc: &Sc, out: &mut Outcome, g: &Gap) {
    out.require(g.catch_up.is_empty(), || {
        format!("skip: {} catch-up rows", g.catch_up.len())
    });
    let backend = sc.backend(1);
    let listed = sc
        .h
        .rt
        .block_on(Admin::new(backend.clone()).missed(g.job, g.watermark + chrono_ms(1), g.resumed))
        .map(|m| m.len());
    sc.h.rt.block_on(backend.close());
    out.require(listed.as_ref().is_ok_and(|n| *n == g.gap.len()), || {
        format!(
            "skip: Admin::missed listed {listed:?} of {} missed slots",
            g.gap.len()
        )
    });
    out.fig(
        "skip",
        format!(
            "missed:{} ran:{} listed-by-missed:{}",
            g.gap.len(),
            g.catch_up.len(),
            listed.unwrap_or(0)
        ),
    );
}

/// The most of the sorted instants `starts` within one second.
fn most_within_a_second(starts: &[DateTime<Utc>]) -> usize {
    let mut burst = 0;
    for (i, t) in starts.iter().enumerate() {
        let n = starts[i..]
            .iter()
            .take_while(|u| **u < *t + chrono_ms(1_000))
            .count();
        burst = burst.max(n);
    }
    burst
}
