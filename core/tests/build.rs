//! `build()` rejects every bad job with a typed error that names it, and never panics.

use slotguard::{
    BuildError, ConfigError, Field, GuardLevel, Job, JobContext, ParseError, ScheduleError,
    Scheduler,
};

fn job(name: &str, cron: &str) -> Job {
    Job::new(name, cron, |_ctx: JobContext| async {})
}

fn problems(builder: slotguard::SchedulerBuilder) -> Vec<ConfigError> {
    match builder.build() {
        Ok(_) => panic!("build should fail"),
        Err(BuildError { problems }) => problems,
    }
}

#[test]
fn every_problem_is_listed_with_its_job() {
    let found = problems(
        Scheduler::builder()
            .job(job("bad_minute", "61 * * * *"))
            .job(job("bad_zone", "0 2 * * *").tz("Asia/Seol"))
            .job(job("twice", "0 2 * * *"))
            .job(job("twice", "0 3 * * *"))
            .job(job("never", "0 0 30 2 *"))
            .job(job("fine", "0 4 * * *")),
    );
    assert_eq!(found.len(), 4, "{found:#?}");
    assert!(matches!(
        &found[0],
        ConfigError::Schedule { job, source: ScheduleError::Cron(ParseError::Field { field: Field::Minute, .. }) } if job == "bad_minute"
    ));
    assert_eq!(
        found[1].to_string(),
        "job `bad_zone`: unknown time zone `Asia/Seol`; did you mean `Asia/Seoul`?"
    );
    assert!(matches!(&found[2], ConfigError::DuplicateName { job } if job == "twice"));
    assert!(matches!(
        &found[3],
        ConfigError::Schedule {
            source: ScheduleError::Cron(ParseError::NeverFires(_)),
            ..
        }
    ));
}

#[test]
fn field_counts_and_hostile_expressions() {
    let many = vec!["*"; 200].join(" ");
    let found = problems(
        Scheduler::builder()
            .job(job("zero", ""))
            .job(job("four", "* * * *"))
            .job(job("many", &many))
            .job(job("nul", "0\0 * * * *"))
            .job(job("long", &"9".repeat(10_000))),
    );
    assert_eq!(found.len(), 5);
    assert!(found[0].to_string().contains("empty cron expression"));
    assert!(found[1].to_string().contains("found 4"));
    assert!(found[2].to_string().contains("found 200"));
    assert!(found[3].to_string().contains("\\0"), "{}", found[3]);
    assert!(found[4].to_string().len() < 300, "{}", found[4]);
}

#[test]
fn hostile_names_are_rejected_readably() {
    let long = "n".repeat(10_000);
    let found = problems(
        Scheduler::builder()
            .job(job(&long, "* * * * *"))
            .job(job("nul\0byte", "* * * * *"))
            .job(job("", "* * * * *"))
            .job(job("a:b", "* * * * *")),
    );
    assert_eq!(found.len(), 4);
    for p in &found {
        assert!(matches!(p, ConfigError::InvalidName { .. }), "{p:?}");
        assert!(p.to_string().len() < 200, "{p}");
    }
    assert!(found[0].to_string().contains("10000 characters"));
    assert!(found[1].to_string().contains("nul\\0byte"));
    // SQL-looking and unicode names are fine: they are data.
    let ok = Scheduler::builder()
        .job(job("x'); DROP TABLE job_runs;--", "* * * * *"))
        .job(job("정산-일일", "* * * * *"))
        .build();
    assert!(ok.is_ok());
}

#[test]
fn lock_and_slot_need_a_backend_and_distinct_keys() {
    let found = problems(
        Scheduler::builder()
            .job(job("needs_store", "* * * * *").guard(GuardLevel::Slot))
            .job(job("local_is_fine", "* * * * *").guard(GuardLevel::Local)),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].to_string(),
        "job `needs_store`: guard level `slot` needs a backend (SchedulerBuilder::backend)"
    );
    let found = problems(
        Scheduler::builder()
            .backend(slotguard::MemoryBackend::new())
            .job(job("a", "* * * * *").lock_key(42))
            .job(job("b", "* * * * *").lock_key(42)),
    );
    assert!(matches!(
        &found[0],
        ConfigError::LockKeyCollision { key: 42, first, second } if first == "a" && second == "b"
    ));
}

#[test]
fn a_lock_store_gives_the_lock_level_but_not_the_slot_level() {
    let found =
        problems(Scheduler::builder().job(job("needs_lock", "* * * * *").guard(GuardLevel::Lock)));
    assert_eq!(
        found[0].to_string(),
        "job `needs_lock`: guard level `lock` needs a backend or a lock store \
         (SchedulerBuilder::backend or SchedulerBuilder::lock_store)"
    );
    let found = problems(
        Scheduler::builder()
            .lock_store(slotguard::MemoryBackend::new())
            .job(job("locked", "* * * * *").guard(GuardLevel::Lock))
            .job(job("needs_rows", "* * * * *").guard(GuardLevel::Slot)),
    );
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].to_string(),
        "job `needs_rows`: guard level `slot` needs a backend (SchedulerBuilder::backend)"
    );
    let scheduler = Scheduler::builder()
        .lock_store(slotguard::MemoryBackend::new())
        .job(job("a", "* * * * *"))
        .build()
        .unwrap();
    assert_eq!(scheduler.jobs().next().unwrap().guard, GuardLevel::Lock);
    let scheduler = Scheduler::builder()
        .lock_store(slotguard::MemoryBackend::new())
        .backend(slotguard::MemoryBackend::new())
        .job(job("a", "* * * * *"))
        .build()
        .unwrap();
    assert_eq!(scheduler.jobs().next().unwrap().guard, GuardLevel::Slot);
}

#[test]
fn defaults_follow_the_backend() {
    let without = Scheduler::builder()
        .job(job("a", "* * * * *"))
        .build()
        .unwrap();
    assert_eq!(without.jobs().next().unwrap().guard, GuardLevel::Local);
    let with = Scheduler::builder()
        .backend(slotguard::MemoryBackend::new())
        .default_tz("Asia/Seoul")
        .job(job("a", "* * * * *"))
        .build()
        .unwrap();
    let info = with.jobs().next().unwrap();
    assert_eq!(info.guard, GuardLevel::Slot);
    assert_eq!(info.schedule.zone().name(), "Asia/Seoul");
    assert_eq!(info.lock_key, slotguard::derive_lock_key("default", "a"));
    let bad_default = problems(Scheduler::builder().default_tz("Mars/Olympus"));
    assert!(matches!(bad_default[0], ConfigError::DefaultZone(_)));
}

#[test]
fn derived_lock_keys_are_stable() {
    // Pinned to FNV-1a 64 of "default/daily_settlement", computed independently: a change here would
    // make two versions of a binary disagree on lock keys.
    assert_eq!(
        slotguard::derive_lock_key("default", "daily_settlement"),
        4_074_187_381_539_163_826
    );
    assert_ne!(
        slotguard::derive_lock_key("a", "job"),
        slotguard::derive_lock_key("b", "job")
    );
}

#[tokio::test]
async fn two_binaries_sharing_a_store_cannot_share_a_lock_key() {
    let store = slotguard::MemoryBackend::new();
    let first = Scheduler::builder()
        .backend(store.clone())
        .lock_namespace("billing")
        .job(job("invoices", "0 2 * * *").lock_key(77))
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    first.shutdown().await;
    // The same binary again is fine.
    let again = Scheduler::builder()
        .backend(store.clone())
        .lock_namespace("billing")
        .job(job("invoices", "0 2 * * *").lock_key(77))
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap();
    again.shutdown().await;
    let err = Scheduler::builder()
        .backend(store)
        .lock_namespace("reports")
        .job(job("weekly", "0 3 * * 1").lock_key(77))
        .build()
        .unwrap()
        .try_start()
        .await
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("invoices") && msg.contains("weekly"), "{msg}");
}

/// A catch-up rate outside the backfill bounds is refused at `build()`, not a panic later.
#[test]
fn absurd_catch_up_rates_and_spreads_are_refused() {
    for rate in [1e-300, 0.0, -1.0, f64::NAN, f64::INFINITY, 1e9] {
        let found = problems(
            Scheduler::builder()
                .job(job("fine", "0 4 * * *"))
                .catch_up_rate(rate),
        );
        assert!(
            matches!(
                &found[..],
                [ConfigError::Setting {
                    setting: "catch_up_rate",
                    ..
                }]
            ),
            "{rate}: {found:?}"
        );
    }
    let found = problems(
        Scheduler::builder()
            .job(job("fine", "0 4 * * *"))
            .load_spread(std::time::Duration::from_secs(5)),
    );
    assert!(
        matches!(
            &found[..],
            [ConfigError::Setting {
                setting: "load_spread",
                ..
            }]
        ),
        "{found:?}"
    );
}

/// A retention under a second or over a century is refused at `build()`, for the scheduler and per
/// job, naming the job; a job's own retention needs the `slot` level, which alone keeps history.
#[test]
fn retentions_out_of_range_are_refused() {
    use std::time::Duration;
    for keep in [Duration::ZERO, Duration::from_millis(999), Duration::MAX] {
        let found = problems(
            Scheduler::builder()
                .job(job("fine", "0 4 * * *"))
                .retention(keep),
        );
        assert!(
            matches!(
                &found[..],
                [ConfigError::Setting {
                    setting: "retention",
                    ..
                }]
            ),
            "{keep:?}: {found:?}"
        );
        let found = problems(
            Scheduler::builder()
                .backend(slotguard::MemoryBackend::new())
                .job(job("kept", "0 4 * * *").retention(keep)),
        );
        match &found[..] {
            [
                ConfigError::Setting {
                    setting: "retention",
                    problem,
                },
            ] => {
                assert!(problem.contains("`kept`"), "{problem}");
            }
            other => panic!("{keep:?}: {other:?}"),
        }
    }
    let found = problems(
        Scheduler::builder().job(job("local", "0 4 * * *").retention(Duration::from_secs(60))),
    );
    assert!(
        matches!(
            &found[..],
            [ConfigError::NeedsSlotLevel {
                what: "a retention",
                ..
            }]
        ),
        "{found:?}"
    );
    let fine = Scheduler::builder()
        .backend(slotguard::MemoryBackend::new())
        .retention(Duration::from_secs(1))
        .job(job("kept", "0 4 * * *").retention(Duration::from_secs(100 * 365 * 24 * 3600)))
        .build();
    assert!(fine.is_ok(), "{fine:?}");
}

/// Issue 21, point 8: every problem of one job is listed, not only the first one found.
#[test]
fn every_problem_of_one_job_is_listed() {
    let found = problems(
        Scheduler::builder().job(
            job("bad:zone", "61 * * * *")
                .tz("Mars/Olympus")
                .guard(GuardLevel::Slot),
        ),
    );
    let text: Vec<String> = found.iter().map(ToString::to_string).collect();
    assert_eq!(found.len(), 4, "{text:#?}");
    assert!(
        matches!(&found[0], ConfigError::InvalidName { .. }),
        "{text:#?}"
    );
    assert!(text[1].contains("Mars/Olympus"), "{text:#?}");
    assert!(text[2].contains("minute"), "{text:#?}");
    assert!(text[3].contains("needs a backend"), "{text:#?}");
    assert!(
        text.iter().all(|t| t.starts_with("job `bad:zone`")),
        "{text:#?}"
    );
}
