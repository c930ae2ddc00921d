//! `GET /replicas`: every recorded process, and which run each job.

use crate::support::*;

/// `GET /replicas` lists every recorded process, alive or gone, and `GET /jobs` says which live
/// replicas run each job.
#[tokio::test]
async fn lists_replicas_and_which_run_each_job() {
    let (backend, app) = setup().await;
    let answer = get(&app, "/internal/replicas").await;
    answer.expect(StatusCode::OK);
    assert_eq!(answer.body, json!({"replicas": []}));
    let jobs = get(&app, "/internal/jobs").await.body;
    assert!(
        jobs["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["active"] == false && j["replicas"] == json!([]))
    );

    let replica = |id: &str, gone_after: Duration| ReplicaInfo {
        id: id.to_owned(),
        host: "web-1".to_owned(),
        pid: 17,
        version: "0.1.0".to_owned(),
        roles: vec!["all".to_owned()],
        jobs: vec![SETTLEMENT.to_owned()],
        runs_held: 2,
        gone_after,
    };
    backend
        .record_replica(&replica("web-1:17:ab12", Duration::from_secs(30)))
        .await
        .unwrap();
    backend
        .record_replica(&replica("web-2:9:cd34", Duration::ZERO))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;

    let answer = get(&app, "/internal/replicas").await;
    answer.expect(StatusCode::OK);
    let listed = answer.body["replicas"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    let live = &listed[0];
    assert_eq!(live["id"], "web-1:17:ab12");
    assert_eq!(live["host"], "web-1");
    assert_eq!(live["pid"], 17);
    assert_eq!(live["version"], "0.1.0");
    assert_eq!(live["roles"], json!(["all"]));
    assert_eq!(live["jobs"], json!([SETTLEMENT]));
    assert_eq!(live["runsHeld"], 2);
    assert_eq!(live["goneAfterMs"], 30_000);
    assert_eq!(live["alive"], true);
    assert!(at(live["heartbeatAt"].as_str().unwrap()) >= at(live["startedAt"].as_str().unwrap()));
    assert_eq!(
        listed[1]["alive"], false,
        "a zero threshold is gone at once"
    );

    let jobs = get(&app, "/internal/jobs").await.body;
    let jobs = jobs["jobs"].as_array().unwrap();
    let settlement = jobs.iter().find(|j| j["name"] == SETTLEMENT).unwrap();
    assert_eq!(settlement["active"], true);
    assert_eq!(settlement["replicas"], json!(["web-1:17:ab12"]));
    let other = jobs.iter().find(|j| j["name"] == EVERY_SECOND).unwrap();
    assert_eq!(other["active"], false);

    post(&app, "/internal/replicas", json!({}))
        .await
        .expect(StatusCode::METHOD_NOT_ALLOWED);
}
