//! History retention: what is pruned, what is kept.

use slotguard::store::{AdminStoreExt as _, SlotStoreExt as _};
use std::time::Duration;

use slotguard::ErrorClass;
use slotguard::store::{Backend, Finish, PruneSpec, RunFilter, RunRecord, RunStatus, Trigger};

use super::{STALE, claim_one, definition, enqueue, entry, finished, request, store_now};

/// How long the check's job keeps its runs.
const KEEP: Duration = Duration::from_secs(1);

fn spec(job: &str) -> PruneSpec {
    PruneSpec {
        job: job.to_owned(),
        keep: KEEP,
    }
}

async fn runs_of(backend: &dyn Backend, job: &str) -> Vec<RunRecord> {
    slotguard::store::AdminStore::runs(
        backend,
        &RunFilter {
            job: Some(job.to_owned()),
            limit: 100,
            ..RunFilter::default()
        },
    )
    .await
    .expect("runs")
}

/// The slots of `runs`, as `HH:MM`, oldest first.
fn times(runs: &[RunRecord]) -> Vec<String> {
    let mut out: Vec<String> = runs
        .iter()
        .map(|r| r.key.scheduled_at.format("%H:%M").to_string())
        .collect();
    out.sort();
    out
}

fn slot(minute: u32) -> String {
    format!("2026-01-01T00:{minute:02}:00Z")
}

/// Leaves, finished before the retention starts counting: minute 0 succeeded (with a checkpoint),
/// 1 failed, 2 skipped, 3 dead, 4 abandoned with no next attempt, 5 a manual run cancelled (two
/// audit records); and, never prunable: 6 failed with a retry planned, 7 abandoned with a next
/// attempt, 8 running. Answers the checkpointed run's id.
async fn old_history(backend: &dyn Backend, job: &str) -> i64 {
    let req = request(job, &slot(0), STALE);
    let lease = claim_one(backend, "w", &req).await;
    assert!(
        backend
            .save_checkpoint("w", &lease, "page 3")
            .await
            .expect("checkpoint")
    );
    assert!(
        backend
            .finish_one("w", &lease, &Finish::succeeded())
            .await
            .expect("finish")
    );
    let fail = Finish::failed(ErrorClass::Transient, "503", None);
    finished(backend, "w", &request(job, &slot(1), STALE), &fail).await;
    backend
        .record_skipped(&[request(job, &slot(2), STALE)], "paused")
        .await
        .expect("skip");
    let dead = Finish::failed(ErrorClass::Permanent, "bad input", None);
    finished(backend, "w", &request(job, &slot(3), STALE), &dead).await;
    let replaced = Finish::abandoned("replaced by a newer slot", None);
    finished(backend, "w", &request(job, &slot(4), STALE), &replaced).await;
    let now = store_now(backend).await;
    let manual = enqueue(job, "2026-01-01T00:05:00.001Z", Trigger::Manual, now);
    let by = entry("trigger", "ops", "by hand");
    backend
        .enqueue(std::slice::from_ref(&manual), &by)
        .await
        .expect("enqueue");
    let cancel = entry("cancel", "ops", "not needed");
    backend
        .cancel(&manual.request.key, &cancel)
        .await
        .expect("cancel");
    let retry = Finish::failed(
        ErrorClass::Transient,
        "503",
        Some(Duration::from_secs(3600)),
    );
    finished(backend, "w", &request(job, &slot(6), STALE), &retry).await;
    let handed = Finish::abandoned("shutdown", Some(Duration::from_secs(3600)));
    finished(backend, "w", &request(job, &slot(7), STALE), &handed).await;
    claim_one(backend, "w", &request(job, &slot(8), STALE)).await;
    lease.run_id
}

/// Runs that finished longer ago than their job's retention are deleted in batches, oldest
/// finished first, with their checkpoints and audit records; runs that may still run again, newer
/// runs, the newest scheduled slot of a job and the runs of jobs not asked about are kept.
pub async fn finished_runs_past_their_retention_are_pruned(backend: &dyn Backend) {
    backend
        .register_jobs(&[definition("per-second", "* * * * * *", 1)])
        .await
        .expect("register");
    let checkpointed = old_history(backend, "per-second").await;
    let ok = Finish::succeeded();
    finished(backend, "w", &request("quiet", &slot(0), STALE), &ok).await;
    finished(backend, "w", &request("quiet", &slot(1), STALE), &ok).await;
    finished(backend, "w", &request("other", &slot(0), STALE), &ok).await;
    let pause = entry("pause", "ops", "maintenance");
    assert!(
        backend
            .set_paused("per-second", true, &pause)
            .await
            .expect("pause")
    );
    assert_eq!(
        backend
            .prune_runs(&[spec("per-second")], 500)
            .await
            .expect("prune"),
        [],
        "nothing is older than a second yet"
    );
    tokio::time::sleep(KEEP + Duration::from_millis(500)).await;
    // Finished within the retention: kept. Minute 9 is the job's newest scheduled slot.
    finished(backend, "w", &request("per-second", &slot(9), STALE), &ok).await;

    let specs = [spec("per-second"), spec("quiet")];
    let first = backend.prune_runs(&specs, 2).await.expect("prune");
    assert_eq!(first.iter().map(|p| p.runs).sum::<u64>(), 2, "{first:?}");
    let rest = backend.prune_runs(&specs, 500).await.expect("prune");
    let mut counts: Vec<(String, u64)> = first
        .into_iter()
        .chain(rest)
        .map(|p| (p.job, p.runs))
        .collect();
    counts.sort();
    let merged: Vec<(String, u64)> = ["per-second", "quiet"]
        .iter()
        .map(|job| {
            let n = counts
                .iter()
                .filter(|(j, _)| j == job)
                .map(|(_, n)| n)
                .sum();
            ((*job).to_owned(), n)
        })
        .collect();
    assert_eq!(
        merged,
        [("per-second".to_owned(), 6), ("quiet".to_owned(), 1)]
    );
    assert_eq!(
        backend.prune_runs(&specs, 500).await.expect("prune"),
        [],
        "nothing left to prune"
    );

    let kept = runs_of(backend, "per-second").await;
    assert_eq!(times(&kept), ["00:06", "00:07", "00:08", "00:09"]);
    // Listed newest slot first.
    let statuses: Vec<RunStatus> = kept.iter().rev().map(|r| r.status).collect();
    assert_eq!(
        statuses,
        [
            RunStatus::Pending,
            RunStatus::Abandoned,
            RunStatus::Running,
            RunStatus::Succeeded
        ]
    );
    assert_eq!(
        times(&runs_of(backend, "quiet").await),
        ["00:01"],
        "its watermark"
    );
    assert_eq!(
        times(&runs_of(backend, "other").await),
        ["00:00"],
        "not asked"
    );
    assert_eq!(
        backend
            .load_checkpoint(checkpointed)
            .await
            .expect("checkpoint"),
        None,
        "the checkpoint went with its run"
    );
    let trail: Vec<String> = backend
        .audit_log(Some("per-second"), 100)
        .await
        .expect("audit")
        .into_iter()
        .map(|a| a.entry.action)
        .collect();
    assert_eq!(trail, ["pause"], "the pruned run's records went with it");
}
