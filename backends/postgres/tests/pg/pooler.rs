//! Through a transaction-mode pooler: a real PgBouncer (`pool_mode = transaction`) between the
//! backend and the test database. slotguard needs a server session of its own per connection (its
//! prepared statements, its session locks); through such a pooler the driver's prepared statements
//! land on server sessions that do not have them, and every such failure must say what is wrong.

use slotguard::store::{SlotKey, SlotStore};

use crate::bouncer::start;
use crate::common::TestSchema;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_a_transaction_pooler_every_failure_names_the_pooler() {
    let Some(bouncer) = start() else {
        println!("skipped: no pgbouncer (Debian: apt-get install pgbouncer)");
        return;
    };
    let schema = TestSchema::new();
    let url = format!("postgres://postgres@127.0.0.1:{}/test", bouncer.port);
    let connected = slotguard_postgres::PgBackend::builder(&url)
        .schema(schema.name.clone())
        .pool_size(4)
        .connect()
        .await;
    let errors = match connected {
        Err(e) => vec![e.to_string()],
        Ok(backend) => statements(&backend).await,
    };
    assert!(
        !errors.is_empty(),
        "40 statements through the pooler all worked"
    );
    for error in &errors {
        assert!(error.contains("transaction-mode pooler"), "{error}");
    }
}

/// 40 reads from 8 tasks at once through `backend`'s pool: the errors they met.
async fn statements(backend: &slotguard_postgres::PgBackend) -> Vec<String> {
    let key = SlotKey {
        job: "pooled".into(),
        scheduled_at: chrono::Utc::now(),
        partition: String::new(),
    };
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (backend, key) = (backend.clone(), key.clone());
        set.spawn(async move {
            let mut errors = Vec::new();
            for _ in 0..5 {
                if let Err(e) = backend.existing_slots(std::slice::from_ref(&key)).await {
                    errors.push(e.to_string());
                }
            }
            errors
        });
    }
    set.join_all().await.into_iter().flatten().collect()
}
