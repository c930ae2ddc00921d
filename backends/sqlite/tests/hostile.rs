//! Job names and partitions are bound parameters, stored and read back verbatim.

use std::time::Duration;

use slotguard::store::{Claim, SlotStore};
use slotguard_sqlite::SqliteBackend;
use slotguard_tests::request;

#[tokio::test]
async fn hostile_names_round_trip() {
    let dir = tempfile::tempdir().expect("temp dir");
    let backend = SqliteBackend::open(dir.path().join("hostile.db"))
        .await
        .expect("open");
    let names = [
        "x'); DROP TABLE job_runs;--".to_owned(),
        "x'); DROP TABLE slotguard_job_runs;--".to_owned(),
        "\"; DELETE FROM slotguard_fencing; --".to_owned(),
        "정산 · 日次バッチ · ñandú 🦀".to_owned(),
        "nul\0byte and\nnewline".to_owned(),
        "%_ LIKE wildcards \\".to_owned(),
        "é".repeat(200),
    ];
    assert_eq!(names[6].chars().count(), 200);
    let stale = Duration::from_secs(60);
    let requests: Vec<_> = names
        .iter()
        .map(|name| {
            let mut r = request(name, "2026-01-01T00:00:00Z", stale);
            r.key.partition = format!("{name}/partition");
            r.zone = "Asia/Seoul".to_owned();
            r.fingerprint = u64::MAX - 1;
            r
        })
        .collect();
    let claims = backend.claim("owner'--", &requests).await.expect("claim");
    assert!(
        claims.iter().all(|c| matches!(c, Claim::Won(_))),
        "{claims:?}"
    );
    // Claimed again: found as the same rows, not as new ones.
    let again = backend.claim("other", &requests).await.expect("claim");
    assert!(
        again.iter().all(|c| matches!(c, Claim::Taken { .. })),
        "{again:?}"
    );

    for (name, request) in names.iter().zip(&requests) {
        let runs = backend.runs(Some(name)).await.expect("runs");
        assert_eq!(runs.len(), 1, "{name:?}");
        let run = &runs[0];
        assert_eq!(run.key, request.key);
        assert_eq!(run.owner.as_deref(), Some("owner'--"));
        assert_eq!(run.zone, "Asia/Seoul");
        assert_eq!(run.fingerprint, u64::MAX - 1);
        assert_eq!(run.wall_time, request.wall);
        assert_eq!(run.business_date, request.business_date);
        assert_eq!(run.stale_after, stale);
    }
    assert_eq!(backend.runs(None).await.expect("runs").len(), names.len());
    // Wildcards are not patterns: a name filter matches exactly.
    assert!(backend.runs(Some("%")).await.expect("runs").is_empty());
    let tables: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name LIKE 'slotguard\\_%' ESCAPE '\\'",
    )
    .fetch_one(backend.pool())
    .await
    .expect("tables");
    assert_eq!(tables, 10, "every table is still there");
}
