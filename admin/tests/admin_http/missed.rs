//! `GET /jobs/{job}/missed` and `GET /missed`: slots with no row.

use crate::support::*;

#[tokio::test]
async fn lists_missed_slots() {
    let (backend, app) = setup().await;
    // Slots at 17:00 UTC of the 5 days before `to`; one of them ran.
    let from = days_ago(10);
    let to = days_ago(5);
    succeeded(
        &backend,
        SETTLEMENT,
        days_ago(8) + chrono::Duration::hours(17),
    )
    .await;

    let uri = format!(
        "/internal/jobs/daily-settlement/missed?from={}&to={}",
        from.to_rfc3339(),
        to.to_rfc3339()
    );
    let answer = get(&app, &uri).await;
    answer.expect(StatusCode::OK);
    let missed = answer.body["missed"].as_array().unwrap();
    assert_eq!(missed.len(), 4, "{}", answer.raw);
    assert_eq!(
        at(missed[0]["scheduledAt"].as_str().unwrap()),
        from + chrono::Duration::hours(17)
    );
    assert_eq!(
        missed[0]["wallTime"].as_str().unwrap().get(10..),
        Some("T02:00:00")
    );
    let business: NaiveDate = missed[0]["businessDate"].as_str().unwrap().parse().unwrap();
    assert_eq!(business, (from + chrono::Duration::days(1)).date_naive());

    // `to` defaults to now.
    let uri = format!(
        "/internal/jobs/daily-settlement/missed?from={}",
        encode(&days_ago(3).to_rfc3339())
    );
    let answer = get(&app, &uri).await;
    answer.expect(StatusCode::OK);
    let count = answer.body["missed"].as_array().unwrap().len();
    assert!((3..=4).contains(&count), "{}", answer.raw);

    let answer = get(&app, "/internal/jobs/daily-settlement/missed").await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "from");
    missed_slots_of_every_job(&app, from, to).await;
}

/// `/missed` answers every job, a page of 50 slots: the settlement's four slots, then the first 46
/// of the every-second job's 432,000, and a cursor to continue.
async fn missed_slots_of_every_job(app: &Router, from: DateTime<Utc>, to: DateTime<Utc>) {
    let uri = format!(
        "/internal/missed?from={}&to={}",
        encode(&from.to_rfc3339()),
        encode(&to.to_rfc3339())
    );
    let answer = get(app, &uri).await;
    answer.expect(StatusCode::OK);
    let jobs = answer.body["jobs"].as_array().unwrap();
    let part = |name: &str| {
        let found = jobs.iter().find(|j| j["job"] == name);
        found.unwrap_or_else(|| panic!("{name} in {}", answer.raw))
    };
    let settlement = part(SETTLEMENT);
    assert_eq!(settlement["missed"].as_array().unwrap().len(), 4);
    assert!(settlement.get("error").is_none(), "{}", answer.raw);
    let every_second = part(EVERY_SECOND);
    assert_eq!(every_second["missed"].as_array().unwrap().len(), 46);
    assert!(every_second.get("error").is_none(), "{}", answer.raw);
    let next = answer.body["next"].as_str().unwrap();
    let resume = from + chrono::Duration::seconds(46);
    assert_eq!(
        next,
        format!(
            "{EVERY_SECOND}:{}",
            resume.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        )
    );
    let backwards = format!(
        "/internal/missed?from={}&to={}",
        encode(&to.to_rfc3339()),
        encode(&from.to_rfc3339())
    );
    let answer = get(app, &backwards).await;
    answer.expect(StatusCode::BAD_REQUEST);
    assert_eq!(answer.body["field"], "range");
    get(app, "/internal/missed")
        .await
        .expect(StatusCode::BAD_REQUEST);
}
