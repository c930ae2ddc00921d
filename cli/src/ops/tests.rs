//! The checks of the arguments, and a property: no operation panics.

use chrono::Utc;
use slotguard::store::RunStatus;
use slotguard_admin::{Admin, AdminError, MAX_REASON_BYTES, parse, parse_page};

use super::args::{Op, Why};
use super::failure::{Failure, SCHEDULE_ARGS, SKIP_ARGS, argument, fields};
use super::plan::{Plan, at as instant, range};
use super::show;
use crate::exit;

fn page(limit: &str) -> Result<usize, Failure> {
    parse_page(limit).map_err(argument("--limit"))
}

fn status(value: &str) -> Result<RunStatus, Failure> {
    parse::status("--status", value).map_err(argument("--status"))
}

fn rate(value: &str) -> Result<f64, Failure> {
    parse::rate("--per-second", value).map_err(argument("--per-second"))
}

/// The admin error of a parser, as the CLI reports it.
#[test]
fn a_parser_refusal_names_the_argument() {
    let failure = argument("SLOT")(AdminError::Invalid {
        field: "scheduleSlot",
        problem: "`x` is not an instant".into(),
    });
    assert_eq!(failure.code, exit::USAGE);
    assert_eq!(failure.message, "SLOT: `x` is not an instant");
}

/// A refusal of a schedule's field names the argument as the CLI writes it.
#[test]
fn a_schedule_field_is_named_as_its_argument() {
    let refused = |field| AdminError::Invalid {
        field,
        problem: "bad".into(),
    };
    let named = fields(SCHEDULE_ARGS);
    assert_eq!(named(refused("cron")).message, "--cron: bad");
    assert_eq!(named(refused("startAt")).message, "--start-at: bad");
    assert_eq!(named(refused("id")).message, "ID: bad");
    assert_eq!(named(refused("reason")).message, "invalid reason: bad");
    assert_eq!(named(refused("cron")).code, exit::USAGE);
    let named = fields(SKIP_ARGS);
    assert_eq!(named(refused("scheduleSlot")).message, "SLOT: bad");
    let stale = named(AdminError::StaleVersion {
        id: "a".into(),
        asked: 1,
        current: 2,
    });
    assert_eq!(stale.code, super::STALE_VERSION);
}

fn why(reason: &str) -> Why {
    Why {
        reason: reason.to_owned(),
        actor: Some("ops".to_owned()),
    }
}

#[test]
fn reasons_are_checked_by_the_admin_api_before_the_store_is_opened() {
    for (reason, problem) in [
        ("", "must not be empty"),
        ("  ", "must not be empty"),
        ("a\u{7}b", "contains control characters"),
    ] {
        let err = why(reason).request().unwrap_err();
        assert_eq!(err.code, exit::USAGE);
        assert_eq!(err.message, format!("invalid reason: {problem}"));
    }
    let long = "x".repeat(MAX_REASON_BYTES + 1);
    let err = why(&long).request().unwrap_err();
    assert_eq!(
        err.message,
        "invalid reason: is 1025 bytes; at most 1024 are accepted"
    );
    assert!(why("two\nlines\tand a tab").request().is_ok());
    assert!(why(&"x".repeat(MAX_REASON_BYTES)).request().is_ok());
}

#[test]
fn limits_and_statuses() {
    assert_eq!(page("1").unwrap(), 1);
    assert_eq!(page("1000").unwrap(), 1000);
    for bad in [
        "0",
        "-1",
        "1001",
        "100000",
        "-9223372036854775808",
        "ten",
        "",
    ] {
        let err = page(bad).unwrap_err();
        assert_eq!(err.code, exit::USAGE, "{bad}");
        assert!(err.message.starts_with("--limit: "), "{}", err.message);
    }
    assert_eq!(status("Failed").unwrap(), RunStatus::Failed);
    let err = status("fail\ned").unwrap_err();
    assert!(err.message.contains("`fail\\ned`"), "{}", err.message);
}

#[test]
fn instants_and_ranges() {
    assert_eq!(
        show::ts(&instant("SLOT", "2026-03-09T02:00:00+09:00").unwrap()),
        "2026-03-08T17:00:00Z"
    );
    let err = instant("SLOT", &"9".repeat(10_000)).unwrap_err();
    assert_eq!(err.code, exit::USAGE);
    assert!(err.message.len() < 200, "{}", err.message);
    let a = instant("--from", "2026-03-08T00:00:00Z").unwrap();
    assert!(range(Some(a), Some(a)).is_err());
    assert!(range(Some(a), None).is_ok());
}

#[test]
fn backfill_rates_are_bounded() {
    assert_eq!(rate(" 0.5 ").unwrap(), 0.5);
    assert_eq!(rate("0.001").unwrap(), 0.001);
    assert_eq!(rate("1000").unwrap(), 1000.0);
    for bad in [
        "1e-300", "1e-12", "1e-10", "0", "-1", "1000.5", "inf", "NaN",
    ] {
        let err = rate(bad).unwrap_err();
        assert_eq!(err.code, exit::USAGE, "{bad}");
        assert!(
            err.message.starts_with("--per-second: "),
            "{bad}: {}",
            err.message
        );
    }
    assert!(rate("fast").unwrap_err().message.contains("`fast`"));
}

mod no_panic {
    use super::*;
    use clap::Parser;
    use proptest::prelude::*;
    use slotguard::MemoryBackend;
    use slotguard::store::{AdminStore, JobDefinition};

    #[derive(Parser)]
    struct Line {
        #[command(subcommand)]
        op: Op,
    }

    const JOB: &str = "daily-settlement";

    /// The admin API over a memory store with one job, every hour in Seoul.
    async fn admin() -> Admin {
        let backend = MemoryBackend::new();
        let cron = "0 * * * *";
        let definition = JobDefinition {
            name: JOB.to_owned(),
            cron: cron.to_owned(),
            zone: "Asia/Seoul".to_owned(),
            dst: "vixie".to_owned(),
            guard: "slot".to_owned(),
            fingerprint: slotguard::Schedule::parse(cron, "Asia/Seoul")
                .unwrap()
                .fingerprint(),
            calendar: None,
        };
        backend.register_jobs(&[definition]).await.unwrap();
        Admin::new(backend)
    }

    fn job() -> impl Strategy<Value = String> {
        prop_oneof![3 => Just(JOB.to_owned()), 1 => any::<String>()]
    }

    /// Recent instants (ranges with missing slots), the ends of RFC 3339, or anything.
    fn instant() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => (1i64..72).prop_map(|h| (Utc::now() - chrono::Duration::hours(h)).to_rfc3339()),
            1 => Just("0000-01-01T00:00:00Z".to_owned()),
            1 => Just("9999-12-31T23:59:59.999Z".to_owned()),
            1 => any::<String>(),
        ]
    }

    /// A number as text: tiny, huge, negative, not finite, or anything.
    fn number() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => prop::sample::select(vec!["1e-300", "5e-324", "1e-12", "1e-10", "0.001", "1000", "1e300", "-1", "0", "inf"]).prop_map(str::to_owned),
            2 => any::<f64>().prop_map(|n| n.to_string()),
            1 => any::<i64>().prop_map(|n| n.to_string()),
            1 => any::<String>(),
        ]
    }

    /// A cron expression: a good one, or anything.
    fn cron() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => prop::sample::select(vec!["0 * * * *", "@daily", "30 2 * * *", "61 * * * *", "* * * * * * *"]).prop_map(str::to_owned),
            1 => any::<String>(),
        ]
    }

    /// A zone: a real one, a misspelt one, or anything.
    fn zone() -> impl Strategy<Value = String> {
        prop_oneof![
            2 => prop::sample::select(vec!["UTC", "Asia/Seoul", "America/New_York", "Asia/Seol"]).prop_map(str::to_owned),
            1 => any::<String>(),
        ]
    }

    /// The arguments of any operation.
    fn args() -> impl Strategy<Value = Vec<String>> {
        let s = |v: &str| v.to_owned();
        prop_oneof![
            1 => Just(vec![s("jobs")]),
            1 => (job(), instant(), instant(), number(), prop::option::of(any::<String>())).prop_map(move |(j, f, t, n, p)| {
                let mut a = vec![s("runs"), j, s("--from"), f, s("--to"), t, s("--limit"), n];
                a.extend(p.map(|p| [s("--partition"), p]).into_iter().flatten());
                a
            }),
            1 => (job(), instant(), prop::option::of(instant())).prop_map(move |(j, f, t)| {
                let mut a = vec![s("missed"), j, s("--from"), f];
                a.extend(t.map(|t| [s("--to"), t]).into_iter().flatten());
                a
            }),
            1 => (prop::sample::select(vec!["retry", "cancel"]), job(), instant(), any::<String>(), any::<String>()).prop_map(move |(op, j, slot, p, r)| {
                vec![s(op), j, slot, s("--partition"), p, s("--reason"), r]
            }),
            1 => (prop::sample::select(vec!["trigger", "pause", "resume"]), job(), any::<String>()).prop_map(move |(op, j, r)| {
                vec![s(op), j, s("--reason"), r]
            }),
            1 => (job(), instant(), any::<String>(), any::<bool>()).prop_map(move |(j, slot, p, json)| {
                let mut a = vec![s("run"), j, slot, s("--partition"), p];
                if json {
                    a.push(s("--json"));
                }
                a
            }),
            1 => (job(), instant(), instant(), prop::option::of(any::<String>()), any::<String>()).prop_map(move |(j, f, t, p, r)| {
                let mut a = vec![s("retry"), j, s("--failed"), s("--from"), f, s("--to"), t, s("--reason"), r];
                a.extend(p.map(|p| [s("--partition"), p]).into_iter().flatten());
                a
            }),
            // A timeout that ends at once: nothing runs the manual run on a memory store.
            1 => (job(), prop::sample::select(vec!["0", "-1", "3601", "NaN", "inf", "soon"])).prop_map(move |(j, t)| {
                vec![s("trigger"), j, s("--reason"), s("proptest"), s("--wait"), s("--timeout"), s(t)]
            }),
            4 => (job(), instant(), instant(), any::<bool>(), number()).prop_map(move |(j, f, t, execute, n)| {
                let mut a = vec![s("backfill"), j, s("--from"), f, s("--to"), t, s("--per-second"), n, s("--reason"), s("proptest")];
                if execute {
                    a.push(s("--execute"));
                }
                a
            }),
            1 => (prop::option::of(job()), number()).prop_map(move |(j, n)| {
                let mut a = vec![s("audit"), s("--limit"), n];
                a.extend(j);
                a
            }),
            2 => (prop::sample::select(vec!["add", "preview"]), job(), cron(), zone(), number()).prop_map(move |(op, j, c, z, n)| {
                let mut a = vec![s("schedule"), s(op)];
                if op == "add" {
                    a.extend([s("acme"), s("--reason"), s("proptest")]);
                }
                a.extend([s("--job"), j, s("--cron"), c, s("--tz"), z, s("--remaining-runs"), n]);
                a
            }),
            1 => (any::<String>(), number(), cron(), instant()).prop_map(move |(id, v, c, t)| {
                vec![s("schedule"), s("set"), id, s("--version"), v, s("--cron"), c, s("--end-at"), t, s("--reason"), s("proptest")]
            }),
            1 => (prop::sample::select(vec!["skip", "unskip"]), job(), instant(), any::<String>()).prop_map(move |(op, j, slot, p)| {
                vec![s(op), j, slot, s("--partition"), p, s("--reason"), s("proptest")]
            }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Whatever the arguments, an operation ends in an answer or a failure with its exit
        /// code, never in a panic (exit 101).
        #[test]
        fn no_operation_panics(args in args()) {
            let Ok(line) = Line::try_parse_from(std::iter::once("slotguard".to_owned()).chain(args)) else {
                return Ok(());
            };
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            let result = Plan::new(line.op)
                .and_then(|plan| runtime.block_on(async { plan.execute(&admin().await).await }));
            if let Err(failure) = result {
                prop_assert_ne!(failure.code, exit::FAILURE, "{}", failure.message);
            }
        }
    }
}
