//! No request panics: every request type, with values near and past every bound.

use crate::support::*;
use proptest::prelude::*;

/// A job name: a registered one, or anything.
fn job() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => Just(SETTLEMENT.to_owned()),
        2 => Just(EVERY_SECOND.to_owned()),
        1 => Just("a\0b".to_owned()),
        2 => any::<String>(),
    ]
}

/// An instant as text: recent days (ranges that hold slots), the ends of RFC 3339, any instant
/// of years 0 to 9999 in any offset, or anything.
fn instant() -> impl Strategy<Value = String> {
    let any_instant = (
        0i32..=9999,
        1u32..=12,
        1u32..=28,
        0u32..86_400,
        0u32..1000,
        -1439i32..=1439,
    )
        .prop_map(|(y, mo, d, s, ms, off)| {
            let sign = if off < 0 { '-' } else { '+' };
            let (h, m) = (off.abs() / 60, off.abs() % 60);
            format!(
                "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}{sign}{h:02}:{m:02}",
                s / 3600,
                s / 60 % 60,
                s % 60
            )
        });
    prop_oneof![
        4 => (1i64..12).prop_map(|d| days_ago(d).to_rfc3339()),
        1 => Just("0000-01-01T00:00:00Z".to_owned()),
        1 => Just("9999-12-31T23:59:59.999+00:00".to_owned()),
        1 => Just("0000-01-01T00:00:00+23:59".to_owned()),
        2 => any_instant,
        1 => any::<String>(),
    ]
}

/// A number as JSON: tiny, huge, negative, integral, or not a number at all.
fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => prop::sample::select(vec![1e-300, 5e-324, 1e-12, 1e-10, 1e-3, 1e3, 1e300, f64::MAX, -1.0, 0.0]).prop_map(Value::from),
        2 => any::<f64>().prop_map(Value::from),
        1 => any::<i64>().prop_map(Value::from),
        1 => any::<String>().prop_map(Value::from),
        1 => Just(Value::Null),
    ]
}

/// A query value: a page size, a status, an instant, or anything.
fn query_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        any::<i64>().prop_map(|n| n.to_string()),
        any::<u128>().prop_map(|n| n.to_string()),
        Just("failed".to_owned()),
        instant(),
        any::<String>(),
    ]
}

fn text() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => Just(Value::from("proptest")),
        1 => any::<String>().prop_map(Value::from),
        1 => Just(Value::Null),
    ]
}

/// A request of any route: a method, a path with query, and a body (`None` for a GET).
fn request() -> impl Strategy<Value = (String, Option<Value>)> {
    let q = |key: &'static str| {
        prop::option::of(query_value()).prop_map(move |v| {
            v.map(|v| format!("{key}={}&", encode(&v)))
                .unwrap_or_default()
        })
    };
    let runs = (
        job(),
        q("status"),
        q("from"),
        q("to"),
        q("partition"),
        q("limit"),
    )
        .prop_map(|(j, a, b, c, d, e)| {
            (format!("/jobs/{}/runs?{a}{b}{c}{d}{e}", encode(&j)), None)
        });
    // The only run is finished, so no wait outlasts a read.
    let wait = prop::option::of(prop_oneof![
        4 => prop::sample::select(vec!["0", "0.05", "3600", "3601", "-1", "1e300", "NaN", "inf"]).prop_map(str::to_owned),
        1 => any::<String>(),
    ])
    .prop_map(|v| v.map(|v| format!("wait={}&", encode(&v))).unwrap_or_default());
    let run = (job(), instant(), q("partition"), wait).prop_map(|(j, s, p, w)| {
        (
            format!("/jobs/{}/runs/{}?{p}{w}", encode(&j), encode(&s)),
            None,
        )
    });
    let retry_failed = (
        job(),
        instant(),
        instant(),
        text(),
        prop::option::of(any::<String>()),
    )
        .prop_map(|(j, from, to, reason, partition)| {
            let body = json!({"from": from, "to": to, "reason": reason, "partition": partition});
            (format!("/jobs/{}/retry-failed", encode(&j)), Some(body))
        });
    let missed = (job(), q("from"), q("to"))
        .prop_map(|(j, a, b)| (format!("/jobs/{}/missed?{a}{b}", encode(&j)), None));
    let audit = (q("job"), q("limit")).prop_map(|(a, b)| (format!("/audit?{a}{b}"), None));
    let slot_change = (
        job(),
        prop::sample::select(vec!["retry", "cancel"]),
        instant(),
        text(),
        text(),
        prop::option::of(any::<String>()),
    )
        .prop_map(|(j, action, slot, reason, actor, partition)| {
            let body = json!({"scheduleSlot": slot, "reason": reason, "actor": actor, "partition": partition});
            (format!("/jobs/{}/{action}", encode(&j)), Some(body))
        });
    let change = (
        job(),
        prop::sample::select(vec!["trigger", "pause", "resume"]),
        text(),
        text(),
    )
        .prop_map(|(j, action, reason, actor)| {
            (
                format!("/jobs/{}/{action}", encode(&j)),
                Some(json!({"reason": reason, "actor": actor})),
            )
        });
    let backfill = (job(), instant(), instant(), prop::option::of(any::<bool>()), number(), text())
        .prop_map(|(j, from, to, dry_run, per_second, reason)| {
            let body = json!({"from": from, "to": to, "dryRun": dry_run.map_or(Value::Bool(false), Value::Bool), "perSecond": per_second, "reason": reason});
            (format!("/jobs/{}/backfill", encode(&j)), Some(body))
        });
    // Boxed: the union of nine unboxed strategies overflows a test thread's stack in debug.
    prop_oneof![
        1 => Just(("/jobs".to_owned(), None)).boxed(),
        1 => runs.boxed(),
        1 => run.boxed(),
        1 => missed.boxed(),
        1 => audit.boxed(),
        1 => slot_change.boxed(),
        1 => retry_failed.boxed(),
        1 => change.boxed(),
        4 => backfill.boxed(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the request, the answer is JSON with a 2xx or 4xx status, and nothing panics.
    #[test]
    fn no_request_panics((path, body) in request()) {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let answer = runtime.block_on(async {
            let (backend, app) = setup().await;
            failed(&backend, SETTLEMENT, days_ago(3) - chrono::Duration::hours(7), "").await;
            let uri = format!("/internal{path}");
            match body {
                None => get(&app, &uri).await,
                Some(body) => post(&app, &uri, body).await,
            }
        });
        prop_assert!(
            answer.status.is_success() || answer.status.is_client_error(),
            "{path}: {} {}", answer.status, answer.raw
        );
        // `field` names a key as the request writes it: camelCase, never snake_case.
        if let Some(field) = answer.body["field"].as_str() {
            prop_assert!(!field.contains('_'), "{path}: {}", answer.raw);
        }
    }
}
