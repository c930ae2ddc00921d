//! `overrun`: work 2.5 times the interval under each overlap policy (`skip`, `allow`, `buffer_one`,
//! `replace`), one job each.

use crate::prelude::*;

const POLICIES: [&str; 4] = ["skip", "allow", "buffer_one", "replace"];

pub(crate) fn overrun(sc: &mut Sc) -> Outcome {
    let run_for = if sc.h.quick { 20 } else { 60 };
    let mut out = Outcome::new(
        "skip: one run at a time, overlapping slots recorded skipped; allow: runs overlap, every slot finished before the stop succeeded; buffer_one: one run at a time, at most one waiting, superseded slots skipped; replace: one run at a time, every replaced run told (`lost`) and none accepted; (a)-(e)",
    );
    let nodes = sc.spawn_many(
        2,
        &with_common(&[
            "--jobs",
            "4",
            "--cron",
            "*/2 * * * * *",
            "--work-ms",
            "5000",
            "--overlap",
            &POLICIES.join(","),
        ]),
    );
    let from = Utc::now() + chrono_ms(1_000);
    let waiting = sample_waiting(sc, run_for);
    let stop_at = Utc::now();
    let to = stop_at - chrono_ms(1_000);
    let unclean = stop_all(nodes);
    let names = job_names(4);
    let expected = expect(&names, &every(from, to, 2));
    let (report, runs, effects) = sc.check(&expected);
    let (_, now) = sc.runs();
    for (job, policy) in names.iter().zip(POLICIES) {
        let mine: Vec<&RunRecord> = runs.iter().filter(|r| r.key.job == *job).collect();
        let judged = Judged {
            concurrency: max_concurrency(mine.iter().copied(), now),
            max_waiting: waiting.get(job).copied().unwrap_or(0),
            mine,
        };
        judged.judge(&mut out, policy, (from, stop_at), &effects);
    }
    out.invariants(&report);
    out.require_clean(unclean, "replicas");
    out
}

/// For `run_for` seconds, samples the runs waiting for their turn (`pending`, no retry time) per
/// job; answers the most seen at once.
fn sample_waiting(sc: &Sc, run_for: u64) -> BTreeMap<String, i64> {
    let pool = sc.pool();
    let sample = format!(
        "SELECT job_name, count(*) FROM \"{}\".job_runs \
         WHERE status = 'pending' AND next_attempt_at IS NULL GROUP BY job_name",
        sc.schema
    );
    let mut waiting: BTreeMap<String, i64> = BTreeMap::new();
    let until = Instant::now() + secs(run_for);
    while Instant::now() < until {
        let rows: Vec<(String, i64)> =
            sc.h.rt
                .block_on(sqlx::query_as(sqlx::AssertSqlSafe(sample.clone())).fetch_all(&pool))
                .expect("sample");
        for (job, n) in rows {
            let max = waiting.entry(job).or_insert(0);
            *max = (*max).max(n);
        }
        sleep(Duration::from_millis(400));
    }
    sc.h.rt.block_on(pool.close());
    waiting
}

const REPLACED: &str = "replaced by a newer slot";

/// One policy's job: its rows, the most attempts open at once, the most runs waiting at once.
struct Judged<'r> {
    mine: Vec<&'r RunRecord>,
    concurrency: usize,
    max_waiting: i64,
}

impl Judged<'_> {
    fn count(&self, f: impl Fn(&RunRecord) -> bool) -> usize {
        self.mine.iter().filter(|r| f(r)).count()
    }

    fn replaced(r: &RunRecord) -> bool {
        r.status == RunStatus::Abandoned && r.error_message.as_deref() == Some(REPLACED)
    }

    /// The figure for `policy` and its pass conditions; `(from, stop_at)` is the run's window.
    fn judge(
        &self,
        out: &mut Outcome,
        policy: &str,
        (from, stop_at): (DateTime<Utc>, DateTime<Utc>),
        effects: &[Effect],
    ) {
        let (concurrency, max_waiting) = (self.concurrency, self.max_waiting);
        let succeeded = self.count(|r| r.status == RunStatus::Succeeded);
        let skipped = self.count(|r| r.status == RunStatus::Skipped);
        let replaced = self.count(Self::replaced);
        let superseded = self
            .count(|r| r.error_message.as_deref() == Some("overlap: superseded by a newer slot"));
        out.fig(
            policy,
            format!(
                "rows:{} succeeded:{succeeded} skipped:{skipped} superseded:{superseded} replaced:{replaced} max-concurrent:{concurrency} max-waiting:{max_waiting}",
                self.mine.len()
            ),
        );
        match policy {
            "allow" => {
                out.require(concurrency >= 2, || {
                    format!("allow: runs never overlapped ({concurrency})")
                });
                let cut = stop_at - chrono_ms(5_000 + 1_500);
                let unfinished = self.count(|r| {
                    r.key.scheduled_at < cut
                        && r.key.scheduled_at >= from
                        && r.status != RunStatus::Succeeded
                });
                out.require(unfinished == 0, || {
                    format!("allow: {unfinished} slots finished before the stop did not succeed")
                });
            }
            _ => out.require(concurrency == 1, || {
                format!("{policy}: {concurrency} runs at once")
            }),
        }
        match policy {
            "skip" => out.require(skipped >= 1, || "skip: nothing skipped".into()),
            "buffer_one" => {
                out.require(max_waiting <= 1, || {
                    format!("buffer_one: {max_waiting} slots waiting at once")
                });
                out.require(superseded >= 1, || "buffer_one: nothing superseded".into());
            }
            "replace" => {
                out.require(replaced >= 1, || "replace: nothing replaced".into());
                out.require(succeeded == 0, || {
                    format!("replace: {succeeded} runs longer than the interval succeeded")
                });
                self.require_told(out, effects);
            }
            _ => {}
        }
    }

    /// `replace`: every replaced run whose body started was told (`lost`).
    fn require_told(&self, out: &mut Outcome, effects: &[Effect]) {
        for r in self.mine.iter().filter(|r| Self::replaced(r)) {
            let token = r.attempts.last().map(|a| a.token).unwrap_or(r.token);
            let started = effects
                .iter()
                .any(|e| e.kind == "start" && e.token == token);
            let told = effects.iter().any(|e| e.kind == "lost" && e.token == token);
            out.require(!started || told, || {
                format!(
                    "replace: the replaced run of {} was never told",
                    slot_name(r.key.scheduled_at)
                )
            });
        }
    }
}
