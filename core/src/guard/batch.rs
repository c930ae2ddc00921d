//! Group commit for the release path: runs that end together share one store call.
//!
//! A release submits its item and waits for the answer. One task per batcher takes the first waiting
//! item, then every other item already queued, and makes one call for them all; items that arrive
//! during the call go into the next one. An idle process makes no call and holds no task awake; a lone
//! release waits for nothing but its own call.

use std::future::Future;
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
        }
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
        tx.send((item, answer)).ok()?;
        wait.await.ok()
    }
}

async fn drain<T, R>(call: Call<T, R>, mut rx: mpsc::UnboundedReceiver<(T, oneshot::Sender<R>)>) {
    while let Some(first) = rx.recv().await {
        let mut waiting = vec![first];
        while waiting.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(next) => waiting.push(next),
                Err(_) => break,
            }
        }
        let (items, answers): (Vec<T>, Vec<oneshot::Sender<R>>) = waiting.into_iter().unzip();
        let results = call(items).await;
        for (answer, result) in answers.into_iter().zip(results) {
            let _ = answer.send(result);
        }
    }
}
