//! Group commit for the release path: runs that end together share one store call.
//!
//! A release submits its item and waits for the answer. One task per batcher takes the first waiting
//! item, then every other item already queued or queued while it yields to the tasks already woken,
//! and makes one call for them all; items that arrive during the call go into the next one. An idle process makes no call and holds no task awake; a lone
//! release waits for nothing but its own call.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

/// The largest batch one call carries.
const MAX_BATCH: usize = 512;

type Call<T, R> = Arc<dyn Fn(Vec<T>) -> BoxFuture<'static, Vec<R>> + Send + Sync>;

/// Batches items of type `T` into calls that answer one `R` per item, in order.
pub(crate) struct Batcher<T, R> {
    call: Call<T, R>,
    tx: OnceLock<mpsc::UnboundedSender<(T, oneshot::Sender<R>)>>,
    /// Items submitted and not yet answered.
    in_flight: AtomicUsize,
}

impl<T: Send + 'static, R: Send + 'static> Batcher<T, R> {
    pub(crate) fn new<F, Fut>(call: F) -> Self
    where
        F: Fn(Vec<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<R>> + Send + 'static,
    {
        Batcher {
            call: Arc::new(move |items| Box::pin(call(items))),
            tx: OnceLock::new(),
            in_flight: AtomicUsize::new(0),
        }
    }

    /// How many submitted items wait for their answer (queued or in a call).
    pub(crate) fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// Submits one item and waits for its answer; `None` if the batching task is gone (the runtime is
    /// shutting down).
    pub(crate) async fn submit(&self, item: T) -> Option<R> {
        let tx = self.tx.get_or_init(|| {
            // Started on first use, inside the runtime that runs the jobs.
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(drain(Arc::clone(&self.call), rx));
            tx
        });
        let (answer, wait) = oneshot::channel();
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        let _answered = Answered(&self.in_flight);
        tx.send((item, answer)).ok()?;
        wait.await.ok()
    }
}

/// Counts an item out of [`Batcher::in_flight`] when its submitter stops waiting, however it stops.
struct Answered<'a>(&'a AtomicUsize);

impl Drop for Answered<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn drain<T, R>(call: Call<T, R>, mut rx: mpsc::UnboundedReceiver<(T, oneshot::Sender<R>)>) {
    while let Some(first) = rx.recv().await {
        let mut waiting = vec![first];
        // Bodies that started together end together: while yielding to the tasks already woken
        // brings more items, keep taking them (on the multi-threaded runtime this about doubles a
        // worker's finish batch: docs/PERFORMANCE.md, "The floor").
        loop {
            tokio::task::yield_now().await;
            let before = waiting.len();
            while waiting.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(next) => waiting.push(next),
                    Err(_) => break,
                }
            }
            if waiting.len() == before || waiting.len() == MAX_BATCH {
                break;
            }
        }
        let (items, answers): (Vec<T>, Vec<oneshot::Sender<R>>) = waiting.into_iter().unzip();
        let results = call(items).await;
        for (answer, result) in answers.into_iter().zip(results) {
            let _ = answer.send(result);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tokio::sync::Semaphore;

    use super::Batcher;

    /// Items count as in flight from their submission until their answer, through a call that
    /// takes its time; then none is.
    #[tokio::test]
    async fn items_are_in_flight_until_answered() {
        let gate = Arc::new(Semaphore::new(0));
        let held = Arc::clone(&gate);
        let batcher = Arc::new(Batcher::new(move |items: Vec<u32>| {
            let held = Arc::clone(&held);
            async move {
                let _pass = held.acquire().await;
                items.into_iter().map(|i| i + 1).collect()
            }
        }));
        let tasks: Vec<_> = (0..3u32)
            .map(|i| {
                let batcher = Arc::clone(&batcher);
                tokio::spawn(async move { batcher.submit(i).await })
            })
            .collect();
        let counted = async {
            while batcher.in_flight() < 3 {
                tokio::task::yield_now().await;
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(5), counted)
            .await
            .expect("three items in flight");
        assert_eq!(batcher.in_flight(), 3);
        gate.add_permits(3);
        for (i, task) in (0..3u32).zip(tasks) {
            assert_eq!(task.await.unwrap(), Some(i + 1));
        }
        assert_eq!(batcher.in_flight(), 0);
    }
}
