//! Connection errors name the server, never the password.

use std::time::Duration;

use slotguard::store::StoreError;
use slotguard_postgres::{PgBackend, PgError};

const SECRET: &str = "hunter2-s3cret";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_is_redacted_from_connect_errors() {
    // Nothing listens on port 1.
    let url = format!("postgres://app:{SECRET}@127.0.0.1:1/test");
    let builder = PgBackend::builder(&url).connect_timeout(Duration::from_secs(3));
    assert!(!format!("{builder:?}").contains(SECRET));
    let err = builder
        .connect()
        .await
        .expect_err("nothing listens on port 1");
    assert!(matches!(err, PgError::Connect { .. }), "{err:?}");
    assert!(err.is_unavailable());
    let (text, debug) = (err.to_string(), format!("{err:?}"));
    assert!(
        !text.contains(SECRET) && !debug.contains(SECRET),
        "{text} / {debug}"
    );
    assert!(
        text.contains("postgres://app:***@127.0.0.1:1/test"),
        "{text}"
    );
    let store: StoreError = err.into();
    assert!(matches!(store, StoreError::Unavailable { .. }));
    assert!(!store.to_string().contains(SECRET));
    // The cause is kept: the chain of sources reaches the driver's error, through the run-once
    // error that wraps it too.
    let once = slotguard::RunOnceError::Store(store.clone());
    for top in [&store as &dyn std::error::Error, &once] {
        let mut cause = top.source();
        let mut found = false;
        while let Some(e) = cause {
            found |= e.downcast_ref::<sqlx::Error>().is_some();
            cause = e.source();
        }
        assert!(found, "the sources of {top} reach sqlx::Error");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_is_redacted_from_url_errors() {
    for url in [
        format!("postgres://app:{SECRET}@127.0.0.1:99999/test"),
        format!("postgres://127.0.0.1/test?password={SECRET}&sslmode=nonsense"),
    ] {
        let err = PgBackend::connect(&url).await.expect_err("invalid URL");
        assert!(matches!(err, PgError::InvalidUrl { .. }), "{url}: {err:?}");
        let (text, debug) = (err.to_string(), format!("{err:?}"));
        assert!(
            !text.contains(SECRET) && !debug.contains(SECRET),
            "{text} / {debug}"
        );
        assert!(text.contains("***"), "{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_does_not_print_its_password() {
    let schema = crate::common::TestSchema::new();
    let backend = crate::common::Connect::backend(&schema).await;
    let debug = format!("{backend:?}");
    assert!(debug.contains(&schema.name), "{debug}");
    backend.close().await;
}

/// Issue 21, point 8: a server error reads as the server's message, not as "… at line 948" (the
/// line of the PostgreSQL source file that raised it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_do_not_end_in_a_server_source_line() {
    let mut url = slotguard_tests::pg::database_url();
    let at = url.rfind('/').expect("a database in the URL");
    url.truncate(at);
    url.push_str("/sg_no_such_database_21");
    let err = PgBackend::connect(&url)
        .await
        .expect_err("no such database");
    let text = err.to_string();
    assert!(text.contains("sg_no_such_database_21"), "{text}");
    assert!(!text.contains(" at line "), "{text}");
    assert!(text.contains("3D000"), "the SQLSTATE is kept: {text}");
}
