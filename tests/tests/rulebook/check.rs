//! One sequence, step by step, on the model and on every store.

use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use slotguard::store::SlotStoreExt as _;
use slotguard::store::rules::Mode;
use slotguard::store::{Backend, Claim, Lease, RunStatus, SlotKey};

use super::capture::Events;
use super::model::Model;
use super::ops::{AGE, DELAY, OWNERS, Op};
use super::stores::{RowView, Store};

/// What a call answered, with the store's own ids and tokens taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Claims(Vec<SeenClaim>),
    Due(Vec<(SlotKey, u32)>),
    Jobs(Vec<String>),
    /// The leases (by the order they were handed out) a heartbeat still holds.
    Held(Vec<usize>),
    Finished(bool),
    Nothing,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SeenClaim {
    Won { attempt: u32 },
    Taken(RunStatus),
    NotDue,
    Queued,
    Busy,
}

/// A lease handed out by a step: its holder, and its lease in the model and in each store.
struct Issued {
    owner: &'static str,
    leases: Vec<Lease>,
}

/// The stores that outlive a sequence (the memory store and the model are made anew for each).
pub(crate) struct Stores {
    sqlite: Store,
    postgres: Store,
    partitioned: Store,
}

/// Where a step runs: the model (index 0) or a store (1 memory, 2 SQLite, 3 PostgreSQL, 4
/// PostgreSQL with a partitioned history).
struct Ctx<'a> {
    base: DateTime<Utc>,
    future: DateTime<Utc>,
    issued: &'a [Issued],
    at: usize,
}

impl Stores {
    pub(crate) async fn open() -> Self {
        Stores {
            sqlite: Store::sqlite().await,
            postgres: Store::postgres(false).await,
            partitioned: Store::postgres(true).await,
        }
    }

    /// Runs `ops` everywhere; the first difference from the model, described.
    pub(crate) async fn check(&self, ops: &[Op], events: &Events) -> Result<(), String> {
        let now = Utc::now()
            .duration_trunc(TimeDelta::seconds(1))
            .expect("a second");
        let memory = Store::memory(now);
        self.sqlite.reset().await;
        self.postgres.reset().await;
        self.partitioned.reset().await;
        let stores = [&memory, &self.sqlite, &self.postgres, &self.partitioned];
        let mut model = Model::new(now);
        let mut issued: Vec<Issued> = Vec::new();
        let mut last_token = [0_i64; 4];
        for (step, op) in ops.iter().enumerate() {
            let ctx = |at| Ctx {
                base: now - TimeDelta::days(1),
                future: now + TimeDelta::days(30),
                issued: &issued,
                at,
            };
            events.take();
            let (want, mut handed, want_events) = model_step(&mut model, op, &ctx(0));
            for (i, store) in stores.iter().enumerate() {
                events.take();
                let (seen, leases) = store_step(store, op, &ctx(i + 1)).await?;
                let seen_events = events.take();
                let at = |what: &str| format!("step {step} ({op:?}): {} {what}", store.name());
                if seen != want {
                    return Err(at(&format!("answered {seen:?}, the rulebook {want:?}")));
                }
                if seen_events != want_events {
                    return Err(at(&format!(
                        "logged {seen_events:?}, the rulebook {want_events:?}"
                    )));
                }
                // Every token of a call is above every token handed out before it (within one
                // call the order is the store's).
                if let Some(low) = leases.iter().map(|l| l.token).min()
                    && low <= last_token[i]
                {
                    return Err(at(&format!(
                        "handed out token {low} after {}",
                        last_token[i]
                    )));
                }
                last_token[i] = leases.iter().map(|l| l.token).fold(last_token[i], i64::max);
                handed.push(leases);
            }
            let owner = owner_of(op);
            issued.extend((0..handed[0].len()).map(|n| Issued {
                owner,
                leases: handed.iter().map(|leases| leases[n].clone()).collect(),
            }));
            let want_rows = model.snapshot();
            for store in stores {
                let rows = store.snapshot().await;
                if rows != want_rows {
                    return Err(format!(
                        "after step {step} ({op:?}) {} holds rows the rulebook does not:\n{}",
                        store.name(),
                        row_diff(&rows, &want_rows)
                    ));
                }
            }
        }
        Ok(())
    }
}

fn owner_of(op: &Op) -> &'static str {
    match op {
        Op::Claim { owner, .. } | Op::Future { owner, .. } | Op::ClaimDue { owner, .. } => {
            OWNERS[*owner]
        }
        _ => "",
    }
}

fn claims(answers: &[Claim]) -> (Seen, Vec<Lease>) {
    let mut leases = Vec::new();
    let seen = answers
        .iter()
        .map(|answer| match answer {
            Claim::Won(lease) => {
                leases.push(lease.clone());
                SeenClaim::Won {
                    attempt: lease.attempt,
                }
            }
            Claim::Taken { status } => SeenClaim::Taken(*status),
            Claim::NotDue => SeenClaim::NotDue,
            Claim::Queued => SeenClaim::Queued,
            Claim::Busy => SeenClaim::Busy,
            other => panic!("an answer this test does not know: {other:?}"),
        })
        .collect();
    (Seen::Claims(seen), leases)
}

fn held(ctx: &Ctx<'_>, owner: &str, tokens: &[i64]) -> Seen {
    let mut held: Vec<usize> = ctx
        .issued
        .iter()
        .enumerate()
        .filter(|(_, i)| i.owner == owner && tokens.contains(&i.leases[ctx.at].token))
        .map(|(n, _)| n)
        .collect();
    held.sort_unstable();
    Seen::Held(held)
}

fn tokens_of(ctx: &Ctx<'_>, owner: &str) -> Vec<i64> {
    ctx.issued
        .iter()
        .filter(|i| i.owner == owner)
        .map(|i| i.leases[ctx.at].token)
        .collect()
}

/// One step on the model: its answer, the leases it handed out and the events it implies.
fn model_step(model: &mut Model, op: &Op, ctx: &Ctx<'_>) -> (Seen, Vec<Vec<Lease>>, Vec<String>) {
    let (seen, leases, mut events) = match op {
        Op::Claim {
            owner,
            slot,
            overlap,
            ahead,
            defer,
        } => {
            let (answers, events) = model.claim(
                OWNERS[*owner],
                &[slot.claim(ctx.base, *overlap, (*ahead, *defer))],
                Mode::Claim,
            );
            let (seen, leases) = claims(&answers);
            (seen, leases, events)
        }
        Op::Enqueue { slot, overlap } | Op::EnqueueAhead { slot, overlap } => {
            let request = slot.request(ctx.base, *overlap);
            let (answers, events) = model.claim("", std::slice::from_ref(&request), Mode::Enqueue);
            if matches!(op, Op::EnqueueAhead { .. }) {
                model.delay(&request.key, DELAY);
            }
            (claims(&answers).0, Vec::new(), events)
        }
        Op::Skip { slot } => {
            model.record_skipped(
                &[slot.request(ctx.base, slotguard::Overlap::Skip)],
                "running here",
            );
            (Seen::Nothing, Vec::new(), Vec::new())
        }
        Op::Future { owner, slot } => {
            let (answers, events) = model.claim(
                OWNERS[*owner],
                &[slot.request(ctx.future, slotguard::Overlap::Skip)],
                Mode::Claim,
            );
            let (seen, leases) = claims(&answers);
            (seen, leases, events)
        }
        Op::ClaimDue { owner, due } => {
            let (claimed, events) = model.claim_due(OWNERS[*owner], &due.specs(), due.limit);
            let seen = claimed
                .iter()
                .map(|(k, l)| (k.clone(), l.attempt))
                .collect();
            (
                Seen::Due(seen),
                claimed.into_iter().map(|(_, l)| l).collect(),
                events,
            )
        }
        Op::DueJobs { due } => (
            Seen::Jobs(model.due_jobs(&due.specs())),
            Vec::new(),
            Vec::new(),
        ),
        Op::Heartbeat { owner } => {
            let owner = OWNERS[*owner];
            let tokens = model.heartbeat(owner, &tokens_of(ctx, owner));
            (held(ctx, owner, &tokens), Vec::new(), Vec::new())
        }
        Op::Finish { lease, end } => match ctx.issued.get(lease % ctx.issued.len().max(1)) {
            Some(issued) => {
                let done = model.finish(issued.owner, &issued.leases[0], &end.finish());
                (Seen::Finished(done), Vec::new(), Vec::new())
            }
            None => (Seen::Nothing, Vec::new(), Vec::new()),
        },
        Op::Age => {
            model.now += AGE;
            (Seen::Nothing, Vec::new(), Vec::new())
        }
    };
    let mut events: Vec<String> = events.drain(..).map(str::to_owned).collect();
    events.sort();
    (seen, vec![leases], events)
}

/// One step on a store: its answer and the leases it handed out.
async fn store_step(store: &Store, op: &Op, ctx: &Ctx<'_>) -> Result<(Seen, Vec<Lease>), String> {
    let b: &dyn Backend = store.backend();
    let failed = |e: slotguard::store::StoreError| format!("{} failed: {e}", store.name());
    Ok(match op {
        Op::Claim {
            owner,
            slot,
            overlap,
            ahead,
            defer,
        } => claims(
            &b.claim(
                OWNERS[*owner],
                &[slot.claim(ctx.base, *overlap, (*ahead, *defer))],
            )
            .await
            .map_err(failed)?,
        ),
        Op::Enqueue { slot, overlap } | Op::EnqueueAhead { slot, overlap } => {
            let request = slot.request(ctx.base, *overlap);
            let answers = b
                .enqueue_slots(std::slice::from_ref(&request), &[])
                .await
                .map_err(failed)?;
            if matches!(op, Op::EnqueueAhead { .. }) {
                store.delay(&request.key, DELAY).await;
            }
            (claims(&answers).0, Vec::new())
        }
        Op::Skip { slot } => {
            b.record_skipped(
                &[slot.request(ctx.base, slotguard::Overlap::Skip)],
                "running here",
            )
            .await
            .map_err(failed)?;
            (Seen::Nothing, Vec::new())
        }
        Op::Future { owner, slot } => claims(
            &b.claim(
                OWNERS[*owner],
                &[slot.request(ctx.future, slotguard::Overlap::Skip)],
            )
            .await
            .map_err(failed)?,
        ),
        Op::ClaimDue { owner, due } => {
            let claimed = b
                .claim_due(OWNERS[*owner], &due.specs(), due.limit)
                .await
                .map_err(failed)?;
            let seen = claimed
                .iter()
                .map(|c| (c.key.clone(), c.lease.attempt))
                .collect();
            (
                Seen::Due(seen),
                claimed.iter().map(|c| c.lease.clone()).collect(),
            )
        }
        Op::DueJobs { due } => {
            let mut jobs = b.due_jobs(&due.specs()).await.map_err(failed)?;
            jobs.sort();
            (Seen::Jobs(jobs), Vec::new())
        }
        Op::Heartbeat { owner } => {
            let owner = OWNERS[*owner];
            let tokens = b
                .heartbeat(owner, &tokens_of(ctx, owner))
                .await
                .map_err(failed)?;
            (held(ctx, owner, &tokens), Vec::new())
        }
        Op::Finish { lease, end } => match ctx.issued.get(lease % ctx.issued.len().max(1)) {
            Some(issued) => {
                let done = b
                    .finish_one(issued.owner, &issued.leases[ctx.at], &end.finish())
                    .await
                    .map_err(failed)?;
                (Seen::Finished(done), Vec::new())
            }
            None => (Seen::Nothing, Vec::new()),
        },
        Op::Age => {
            store.age(AGE).await;
            (Seen::Nothing, Vec::new())
        }
    })
}

/// The rows that differ, each as the store holds it and as the rulebook would.
fn row_diff(rows: &[RowView], want: &[RowView]) -> String {
    let keys: std::collections::BTreeSet<&SlotKey> =
        rows.iter().chain(want).map(|r| &r.key).collect();
    let find = |set: &[RowView], key: &SlotKey| set.iter().find(|r| r.key == *key).cloned();
    keys.into_iter()
        .filter_map(|key| {
            let (seen, wanted) = (find(rows, key), find(want, key));
            (seen != wanted).then(|| format!("  store:    {seen:?}\n  rulebook: {wanted:?}"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
