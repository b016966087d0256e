//! Document edits waiting for a shard's writer, gathered so that the requests that arrive
//! while a commit is being synced are applied as one job: one pass over each tree per group
//! commit instead of one per request, as CouchDB's updater merges concurrent writes.
//!
//! The first request to find its queue idle submits a job; the job takes whatever has
//! queued by the time the writer runs it, applies it all in order (a later edit of an id sees
//! the earlier one, exactly as one after the other), and answers each request with its own
//! results once the commit is durable. The job succeeds or fails as a whole only for
//! failures of the store itself (I/O, damage) or a panic, which fail every request it took,
//! as a failed group commit already did; a bad edit fails only its own document.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use settee_store::{Durability, Store, Txn};
use tokio::sync::oneshot;

use crate::doc::NewDoc;
use crate::error::{Error, Result};
use crate::shard::{EditMode, EditResult};

/// One queue per way of applying edits (mode and durability), since one job applies one way.
#[derive(Default)]
pub(crate) struct EditQueues {
    queues: [Mutex<Queue>; 4],
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// A job is submitted that has not yet taken the queue.
    scheduled: bool,
}

/// A request's edits and where its answer goes.
struct Waiting {
    docs: Vec<Arc<NewDoc>>,
    answer: oneshot::Sender<Result<Vec<EditResult>>>,
}

/// Per request a job took: how many edits it had, and where its answer goes.
type Answers = Vec<(usize, oneshot::Sender<Result<Vec<EditResult>>>)>;

/// The requests a running job took.
type Taken = Arc<Mutex<Option<Answers>>>;

/// The type of the function that applies a batch of edits on the writer thread.
pub(crate) type Apply = fn(&mut Txn, &[Arc<NewDoc>], EditMode) -> Result<Vec<EditResult>>;

impl EditQueues {
    fn index(mode: EditMode, durability: Durability) -> usize {
        usize::from(mode == EditMode::Replicated) * 2 + usize::from(durability == Durability::Batch)
    }

    /// Queues `docs` and makes sure a job will apply them; answers when they are applied
    /// (and durable, for durable edits).
    pub fn push(self: &Arc<Self>, store: &Store, docs: Vec<Arc<NewDoc>>, mode: EditMode, durability: Durability, apply: Apply) -> EditsPending {
        let (answer, rx) = oneshot::channel();
        let i = Self::index(mode, durability);
        let first = {
            let mut q = self.queues[i].lock().expect("edit queue lock");
            q.waiting.push(Waiting { docs, answer });
            !std::mem::replace(&mut q.scheduled, true)
        };
        if first {
            self.submit(store, i, mode, durability, apply);
        }
        EditsPending { rx }
    }

    fn submit(self: &Arc<Self>, store: &Store, i: usize, mode: EditMode, durability: Durability, apply: Apply) {
        let taken: Taken = Arc::default();
        let (queues, in_job) = (self.clone(), taken.clone());
        let job = move |txn: &mut Txn| {
            let waiting = queues.take(i);
            let docs: Vec<Arc<NewDoc>> = waiting.iter().flat_map(|w| w.docs.iter().cloned()).collect();
            *in_job.lock().expect("taken lock") = Some(answers_of(waiting));
            apply(txn, &docs, mode)
        };
        let queues = self.clone();
        let done = move |results: Result<Vec<EditResult>>| {
            // A job that never ran (the store is closed) leaves its requests queued.
            let taken = taken.lock().expect("taken lock").take().unwrap_or_else(|| answers_of(queues.take(i)));
            answer(taken, results);
        };
        store.submit_with(durability, job, done);
    }

    /// Everything queued at `i`; the next request schedules a new job.
    fn take(&self, i: usize) -> Vec<Waiting> {
        let mut q = self.queues[i].lock().expect("edit queue lock");
        q.scheduled = false;
        std::mem::take(&mut q.waiting)
    }
}

/// Where each request's answer goes, and how many results it takes; the edits themselves
/// are dropped once applied.
fn answers_of(waiting: Vec<Waiting>) -> Answers {
    waiting.into_iter().map(|w| (w.docs.len(), w.answer)).collect()
}

/// Hands each request its share of `results`, in the order they were taken, or the job's
/// error.
fn answer(taken: Answers, results: Result<Vec<EditResult>>) {
    match results {
        Ok(results) => {
            let mut results = results.into_iter();
            for (n, tx) in taken {
                let _ = tx.send(Ok(results.by_ref().take(n).collect()));
            }
        }
        Err(e) => {
            for (_, tx) in taken {
                let _ = tx.send(Err(e.duplicate()));
            }
        }
    }
}

fn rolled_back() -> settee_store::Error {
    settee_store::Error::Panicked("applying the edits panicked; they were rolled back".into())
}

/// The answer to queued edits: each edit's result, in the order given.
pub struct EditsPending {
    rx: oneshot::Receiver<Result<Vec<EditResult>>>,
}

impl Future for EditsPending {
    type Output = Result<Vec<EditResult>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A job that panicked drops its answers: the edits were rolled back.
        Pin::new(&mut self.rx).poll(cx).map(|r| r.unwrap_or_else(|_| Err(Error::Store(rolled_back()))))
    }
}
