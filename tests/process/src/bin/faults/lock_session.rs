//! `locksession`: only the advisory-lock session of the replica that runs the jobs is terminated
//! (`pg_terminate_backend`), while its slot rows stay its own.

use crate::busy::{BUSY_STALE_MS, busy_rounds};
use crate::prelude::*;

/// The lock session of `instance`: its backend (by `application_name`, see `PgBackend`) that holds
/// granted session advisory locks, with their `bigint` keys (`pg_locks` shows a key's high half in
/// `classid` and its low half in `objid`, with `objsubid = 1`; see `backends/postgres/src/locks.rs`).
fn lock_session(sc: &Sc, pool: &sqlx::PgPool, instance: &str) -> Option<(i32, Vec<i64>)> {
    sc.h.rt
        .block_on(
            sqlx::query_as(
                "SELECT a.pid, array_agg((l.classid::bigint << 32) | l.objid::bigint) \
                 FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid \
                 WHERE a.application_name LIKE $1 || ' (slotguard locks)%' \
                   AND l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 \
                 GROUP BY a.pid",
            )
            .bind(sc.app(instance))
            .fetch_optional(pool),
        )
        .expect("pg_locks")
}

pub(crate) fn locksession(sc: &mut Sc) -> Outcome {
    let rounds = if sc.h.quick { 4 } else { 12 };
    let mut out = Outcome::new(
        "each round terminates the lock session of the replica that runs job bodies right now and holds their advisory locks (at least half the rounds find one); no slot executed more than once; no attempt recorded abandoned or failed because its lock was lost; (a)-(e)",
    );
    let (mut terminated, mut keys_of_running_jobs) = (0, 0);
    let busy = busy_rounds(sc, &mut out, rounds, &mut |sc, pool, _, i, jobs| {
        let Some((pid, keys)) = lock_session(sc, pool, &format!("n{i}")) else {
            return false;
        };
        keys_of_running_jobs += jobs
            .iter()
            .filter(|j| keys.contains(&slotguard::derive_lock_key(&sc.schema, j)))
            .count();
        let done: bool =
            sc.h.rt
                .block_on(
                    sqlx::query_scalar("SELECT pg_terminate_backend($1)")
                        .bind(pid)
                        .fetch_one(pool),
                )
                .expect("pg_terminate_backend");
        terminated += usize::from(done);
        // A retry of a slot whose run was cancelled would come within a recovery poll or two.
        sleep(Duration::from_millis(BUSY_STALE_MS));
        done
    });
    let twice: Vec<_> = executions(&busy.effects)
        .into_iter()
        .filter(|(_, n)| *n > 1)
        .collect();
    let lost_attempts = ended_lost(&busy.runs);
    let told = busy.effects.iter().filter(|e| e.kind == "lost").count();
    out.fig("lock-sessions-terminated", terminated);
    out.fig("running-jobs-whose-key-it-held", keys_of_running_jobs);
    out.fig("bodies-told-lost", told);
    out.fig("attempts-ended-lost", lost_attempts.len());
    out.fig("slots-executed-twice", twice.len());
    out.invariants(&busy.report);
    for ((job, slot), n) in &twice {
        out.failures
            .push(format!("({job}, {slot}): the body ran {n} times"));
    }
    for a in &lost_attempts {
        out.failures
            .push(format!("{a}: ended because its lock session died"));
    }
    out
}

/// The attempts recorded `abandoned` or `failed` because ownership was lost.
fn ended_lost(runs: &[RunRecord]) -> Vec<String> {
    runs.iter()
        .flat_map(|r| r.attempts.iter().map(move |a| (r, a)))
        .filter(|(_, a)| matches!(a.status, RunStatus::Abandoned | RunStatus::Failed))
        .filter(|(_, a)| a.message.as_deref().is_some_and(|m| m.contains("lost")))
        .map(|(r, a)| {
            format!(
                "{} {} attempt {} {} ({})",
                r.key.job,
                slot_name(r.key.scheduled_at),
                a.attempt,
                a.status,
                a.message.as_deref().unwrap_or_default()
            )
        })
        .collect()
}
