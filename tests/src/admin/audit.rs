//! The audit trail.

use slotguard::store::AdminStoreExt as _;
use slotguard::store::Backend;

use super::{definition, entry};

/// The audit trail: newest first (by id, and never back in time), per job, with a page size that is
/// capped rather than refused; job names are not patterns.
pub async fn the_audit_trail_is_newest_first_per_job_and_capped(backend: &dyn Backend) {
    backend
        .register_jobs(&[
            definition("a", "* * * * *", 1),
            definition("b", "* * * * *", 2),
        ])
        .await
        .expect("register");
    // Each change changes something: a job is paused, then resumed (a second pause, or the resume
    // of an active job, writes nothing).
    for (i, job) in ["a", "a", "b", "b", "a"].into_iter().enumerate() {
        let action = if i % 2 == 0 { "pause" } else { "resume" };
        let audit = entry(action, "ops", &format!("change {i}"));
        assert!(
            backend
                .set_paused(job, i % 2 == 0, &audit)
                .await
                .expect("pause")
        );
    }
    let all = backend.audit_log(None, 100).await.expect("audit");
    let reasons: Vec<&str> = all.iter().map(|a| a.entry.reason.as_str()).collect();
    assert_eq!(
        reasons,
        ["change 4", "change 3", "change 2", "change 1", "change 0"]
    );
    assert!(
        all.windows(2)
            .all(|w| w[0].id > w[1].id && w[0].at >= w[1].at)
    );
    let only_a: Vec<(String, String, String)> = backend
        .audit_log(Some("a"), 100)
        .await
        .expect("audit")
        .into_iter()
        .map(|a| (a.job, a.entry.action, a.entry.reason))
        .collect();
    let expected: Vec<(String, String, String)> = [(4, "pause"), (1, "resume"), (0, "pause")]
        .iter()
        .map(|(i, action)| ("a".to_owned(), (*action).to_owned(), format!("change {i}")))
        .collect();
    assert_eq!(only_a, expected);
    let newest = backend.audit_log(Some("a"), 2).await.expect("audit");
    let reasons: Vec<&str> = newest.iter().map(|a| a.entry.reason.as_str()).collect();
    assert_eq!(reasons, ["change 4", "change 1"]);
    assert_eq!(newest[0].id, all[0].id);
    assert_eq!(
        backend.audit_log(None, usize::MAX).await.expect("audit"),
        all,
        "capped, not refused"
    );
    assert!(backend.audit_log(None, 0).await.expect("audit").is_empty());
    // Pages continue from the last id of the previous one, for every job and for one.
    let mut paged = Vec::new();
    let mut before = None;
    loop {
        let page = backend.audit_page(None, before, 2).await.expect("audit");
        let Some(last) = page.last() else { break };
        before = Some(last.id);
        paged.extend(page);
    }
    assert_eq!(paged, all, "pages of 2 hold the whole trail, in order");
    let older = backend
        .audit_page(Some("a"), Some(newest[1].id), 10)
        .await
        .expect("audit");
    let reasons: Vec<&str> = older.iter().map(|a| a.entry.reason.as_str()).collect();
    assert_eq!(reasons, ["change 0"]);
    for nobody in ["%", "nobody", "_"] {
        assert!(
            backend
                .audit_log(Some(nobody), 100)
                .await
                .expect("audit")
                .is_empty(),
            "{nobody}"
        );
    }
}
