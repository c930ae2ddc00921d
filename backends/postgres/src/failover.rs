//! What every new connection does about failovers: it raises the fencing-token floor, so that a
//! token is never granted twice even when the database went back in time (a failover to an
//! asynchronous standby loses the last commits, and the sequence's last values with them), and it
//! notices a failover, from the server's identity (system identifier and WAL timeline) and from a
//! token counter behind a token this process has already seen.
//!
//! A failover is reported with a warning (`store_failover`) and the counter
//! `store_failovers_total{signal}`: `timeline` (a standby was promoted), `system` (another database
//! cluster answers at the same address) or `tokens_went_back` (commits were lost). See
//! docs/high-availability.md.

use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering};

use sqlx::{AssertSqlSafe, Connection, PgConnection};

/// Who answers a connection: the cluster's system identifier and its current WAL timeline (`None`
/// on a standby, which has none of its own).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    system: i64,
    timeline: Option<String>,
}

/// What one backend has seen of its database, across all of its connections.
#[derive(Debug, Default)]
pub(crate) struct Watch {
    /// The highest fencing token this process was granted.
    max_token: AtomicI64,
    /// The server's identity at the last connection that reported one.
    identity: Mutex<Option<Identity>>,
}

/// The answer of `raise_token_floor()`.
#[derive(Debug)]
struct Raised {
    before: i64,
    floor: i64,
    system_identifier: i64,
    timeline: Option<String>,
}

impl Watch {
    /// Notes that this process was granted `token`.
    pub(crate) fn saw_token(&self, token: i64) {
        self.max_token.fetch_max(token, Ordering::Relaxed);
    }

    /// Runs on every new pool connection: raises the token floor and compares what the server
    /// says with what was seen before. A failure is logged and the connection is used anyway (a
    /// role that may only read, a standby): claims on it would fail on their own.
    pub(crate) async fn on_connect(&self, conn: &mut PgConnection, schema: &str, prepared: bool) {
        let answer = raise_floor(conn, schema, prepared).await;
        match answer {
            Ok((before, floor, system_identifier, timeline)) => self.check(&Raised {
                before,
                floor,
                system_identifier,
                timeline,
            }),
            Err(error) => tracing::warn!(
                event = "store_token_floor_failed",
                %error,
                "could not raise the fencing-token floor on a new connection"
            ),
        }
    }

    fn check(&self, raised: &Raised) {
        let seen = self.max_token.load(Ordering::Relaxed);
        if raised.before < seen {
            report(
                "tokens_went_back",
                &format!(
                    "the fencing-token counter is at {}, below token {seen} this process was \
                     granted: commits were lost (a failover to a standby that lagged); tokens \
                     continue from {}",
                    raised.before, raised.floor
                ),
            );
        }
        let now = Identity {
            system: raised.system_identifier,
            timeline: raised.timeline.clone(),
        };
        let mut last = self.identity.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(before) = last.as_ref()
            && let Some(signal) = changed(before, &now)
        {
            report(
                signal,
                &format!("the database changed under this process: {before:?} -> {now:?}"),
            );
        }
        if now.timeline.is_some() || last.is_none() {
            *last = Some(now);
        }
    }
}

/// What changed between two identities, if it is a failover: another cluster, or a new timeline
/// of the same one. A standby's answer (no timeline) is not a change.
/// `raise_token_floor()` in a transaction of its own (which keeps it on one server session through
/// a transaction pooler), prepared and kept when `prepared`.
async fn raise_floor(
    conn: &mut PgConnection,
    schema: &str,
    prepared: bool,
) -> Result<(i64, i64, i64, Option<String>), sqlx::Error> {
    let sql = format!("SELECT * FROM {schema}.raise_token_floor()");
    let mut tx = conn.begin().await?;
    let answer = sqlx::query_as(AssertSqlSafe(sql))
        .persistent(prepared)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(answer)
}

fn changed(before: &Identity, now: &Identity) -> Option<&'static str> {
    if before.system != now.system {
        return Some("system");
    }
    match (&before.timeline, &now.timeline) {
        (Some(a), Some(b)) if a != b => Some("timeline"),
        _ => None,
    }
}

fn report(signal: &'static str, message: &str) {
    tracing::warn!(event = "store_failover", signal, "{message}");
    metrics::counter!("store_failovers_total", "signal" => signal).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(system: i64, timeline: Option<&str>) -> Identity {
        Identity {
            system,
            timeline: timeline.map(str::to_owned),
        }
    }

    #[test]
    fn a_new_timeline_or_another_cluster_is_a_failover_and_a_standby_is_not() {
        let primary = id(7, Some("00000001"));
        assert_eq!(changed(&primary, &id(7, Some("00000001"))), None);
        assert_eq!(
            changed(&primary, &id(7, Some("00000002"))),
            Some("timeline")
        );
        assert_eq!(changed(&primary, &id(8, Some("00000001"))), Some("system"));
        assert_eq!(changed(&primary, &id(7, None)), None);
    }
}
