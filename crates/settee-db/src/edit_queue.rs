//! Document edits waiting for a shard's writer, gathered so that the requests that arrive
//! while a commit is being synced are applied as one job: one pass over each tree per group
//! commit instead of one per request, as CouchDB's updater merges concurrent writes.
//!
//! The first request to find its queue idle submits a job; the job takes whatever has
//! queued by the time the writer runs it, applies it all in order (a later edit of an id sees
//! the earlier one, exactly as one after the other), and answers each request with its own
//! results once the commit is durable. A bad edit fails only its own document. If applying
//! them all at once panics, that is undone and each request is applied alone, so that the
//! panic fails only the request that caused it. The job fails as a whole only for failures
//! of the store itself (I/O, damage), as a failed group commit does.
//!
//! A request of one small document (the caller says so) that finds the writer idle, while
//! requests are not arriving together, is applied and committed on its own thread instead,
//! which then waits for the sync (see [`Store::run_or_submit_with`]): one client writing one
//! document after another is answered without two thread hand-offs per write.
//!
//! A large request may instead be answered in two stages ([`Answering::Staged`]): its
//! results as soon as its edits are applied, then whether their commit is durable. Its
//! caller can then prepare its answer while the commit is being synced, and send it only
//! once the second stage says the edits are on disk.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use settee_store::{Durability, Store, Txn};
use tokio::sync::oneshot;

use crate::doc::NewDoc;
use crate::error::{Error, Result};
use crate::shard::{EditMode, EditResult};

/// Jobs of a single request that must follow one of several before a request may commit
/// alone again.
const CROWDED_FOR: usize = 16;

/// One queue per way of applying edits (mode and durability), since one job applies one way.
#[derive(Default)]
pub(crate) struct EditQueues {
    queues: [Mutex<Queue>; 4],
    /// How many more jobs must take a single request before a request may commit alone:
    /// set when a job takes several (requests are arriving together, so each should queue
    /// for a shared commit), counted down by each job that takes one. A single job of one
    /// request in a busy spell is no sign that the spell has ended.
    crowded: AtomicUsize,
}

#[derive(Default)]
struct Queue {
    waiting: Vec<Waiting>,
    /// A job is submitted that has not yet taken the queue.
    scheduled: bool,
}

/// A request's edits and where its answer goes.
struct Waiting {
    docs: Edits,
    answer: Answer,
}

/// When and where a request is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answering {
    /// With its results once their commit is durable, by the writer.
    Committed,
    /// As `Committed`, but a request of one small document that finds the writer idle may
    /// be applied and committed on the caller's thread.
    Alone,
    /// Twice: with its results as soon as they are applied (before their commit), then
    /// with whether the commit is durable.
    Staged,
}

/// Where a request's answers go: its results, unless already sent, and for a staged
/// request, its commit's outcome.
struct Answer {
    results: Option<oneshot::Sender<Result<Vec<EditResult>>>>,
    durable: Option<oneshot::Sender<Result<()>>>,
}

impl Answer {
    /// Its results, as soon as they are applied, if the request is staged.
    fn applied(&mut self, results: &mut Result<Vec<EditResult>>) {
        if self.durable.is_some() {
            if let Some(tx) = self.results.take() {
                let _ = tx.send(std::mem::replace(results, Ok(Vec::new())));
            }
        }
    }

    /// The request's results (unless sent already) once the commit is durable.
    fn committed(self, results: Result<Vec<EditResult>>) {
        if let Some(tx) = self.results {
            let _ = tx.send(results);
        }
        if let Some(tx) = self.durable {
            let _ = tx.send(Ok(()));
        }
    }

    /// The job's failure, to whichever answer is still owed.
    fn failed(self, e: &Error) {
        if let Some(tx) = self.results {
            let _ = tx.send(Err(e.duplicate()));
        }
        if let Some(tx) = self.durable {
            let _ = tx.send(Err(e.duplicate()));
        }
    }
}

/// Where the answer of each request a job took goes.
type Answers = Vec<Answer>;

/// The requests a running job took.
type Taken = Arc<Mutex<Option<Answers>>>;

/// One request's edits for one shard: the request's edits, shared by all its shards (so
/// that grouping them by shard moves none), and which of them are this shard's. The request
/// keeps a share of a large one, so that it, not a writer, frees them (see
/// `Database::update`).
pub(crate) struct Edits {
    all: Arc<Vec<NewDoc>>,
    /// Positions in `all`, in order.
    picks: Vec<usize>,
}

impl Edits {
    /// The edits of `all` at `picks`.
    pub fn picked(all: Arc<Vec<NewDoc>>, picks: Vec<usize>) -> Edits {
        Edits { all, picks }
    }

    /// Every edit of `all`.
    #[cfg(test)]
    pub fn every(all: Vec<NewDoc>) -> Edits {
        let picks = (0..all.len()).collect();
        Edits::picked(Arc::new(all), picks)
    }

    fn len(&self) -> usize {
        self.picks.len()
    }

    fn iter(&self) -> impl Iterator<Item = &NewDoc> {
        self.picks.iter().map(|&i| &self.all[i])
    }
}

/// The type of the function that applies a batch of edits in the writer's place.
pub(crate) type Apply = fn(&mut Txn, &[&NewDoc], EditMode) -> Result<Vec<EditResult>>;

impl EditQueues {
    fn index(mode: EditMode, durability: Durability) -> usize {
        usize::from(mode == EditMode::Replicated) * 2 + usize::from(durability == Durability::Batch)
    }

    /// Queues `docs` and makes sure a job will apply them; answers when they are applied
    /// (and durable, for durable edits), as `answering` says.
    pub fn push(
        self: &Arc<Self>,
        store: &Store,
        docs: Edits,
        mode: EditMode,
        durability: Durability,
        apply: Apply,
        answering: Answering,
    ) -> EditsPending {
        let (results, rx) = oneshot::channel();
        let (durable, durable_rx) = match answering {
            Answering::Staged => {
                let (tx, rx) = oneshot::channel();
                (Some(tx), Some(rx))
            }
            _ => (None, None),
        };
        let answer = Answer {
            results: Some(results),
            durable,
        };
        let i = Self::index(mode, durability);
        let alone = answering == Answering::Alone && self.crowded.load(Ordering::Relaxed) == 0;
        let first = {
            let mut q = self.queues[i].lock().expect("edit queue lock");
            q.waiting.push(Waiting { docs, answer });
            !std::mem::replace(&mut q.scheduled, true)
        };
        if first {
            self.submit(store, i, mode, durability, apply, alone);
        }
        EditsPending {
            rx,
            durable: durable_rx,
        }
    }

    /// Schedules a job for queue `i`; `alone` lets it run on this thread if the writer is idle.
    fn submit(
        self: &Arc<Self>,
        store: &Store,
        i: usize,
        mode: EditMode,
        durability: Durability,
        apply: Apply,
        alone: bool,
    ) {
        let taken: Taken = Arc::default();
        let (queues, in_job) = (self.clone(), taken.clone());
        let job = move |txn: &mut Txn| {
            let (requests, mut answers): (Vec<_>, Answers) = queues
                .take(i)
                .into_iter()
                .map(|w| (w.docs, w.answer))
                .unzip();
            queues.note_taken(requests.len());
            let mut results = apply_apart(txn, &requests, mode, apply);
            // Staged requests learn their results now, while the commit is still to come.
            if let Ok(results) = &mut results {
                for (answer, result) in answers.iter_mut().zip(results) {
                    answer.applied(result);
                }
            }
            *in_job.lock().expect("taken lock") = Some(answers);
            results
        };
        let queues = self.clone();
        let done = move |results: Result<Vec<Result<Vec<EditResult>>>>| {
            // A job that never ran (the store is closed) leaves its requests queued.
            let taken = taken
                .lock()
                .expect("taken lock")
                .take()
                .unwrap_or_else(|| answers_of(queues.take(i)));
            answer(taken, results);
        };
        if alone {
            store.run_or_submit_with(durability, job, done);
        } else {
            store.submit_with(durability, job, done);
        }
    }

    /// Keeps [`EditQueues::crowded`] for a job that took `requests` requests.
    fn note_taken(&self, requests: usize) {
        let left = match requests {
            0 | 1 => self.crowded.load(Ordering::Relaxed).saturating_sub(1),
            _ => CROWDED_FOR,
        };
        self.crowded.store(left, Ordering::Relaxed);
    }

    /// Everything queued at `i`; the next request schedules a new job.
    fn take(&self, i: usize) -> Vec<Waiting> {
        let mut q = self.queues[i].lock().expect("edit queue lock");
        q.scheduled = false;
        std::mem::take(&mut q.waiting)
    }
}

/// Where each request's answer goes; the edits themselves are dropped once applied.
fn answers_of(waiting: Vec<Waiting>) -> Answers {
    waiting.into_iter().map(|w| w.answer).collect()
}

/// Applies every request's edits in one pass, answering per request. If that pass panics,
/// it is undone and each request is applied alone, so that the panic fails only its own.
fn apply_apart(
    txn: &mut Txn,
    requests: &[Edits],
    mode: EditMode,
    apply: Apply,
) -> Result<Vec<Result<Vec<EditResult>>>> {
    let all: Vec<&NewDoc> = requests.iter().flat_map(|docs| docs.iter()).collect();
    match txn.attempt(|t| apply(t, &all, mode)) {
        Ok(Ok(results)) => {
            let mut results = results.into_iter();
            Ok(requests
                .iter()
                .map(|docs| Ok(results.by_ref().take(docs.len()).collect()))
                .collect())
        }
        Ok(Err(e)) => Err(e),
        Err(_) => Ok(requests
            .iter()
            .map(|docs| {
                let docs: Vec<&NewDoc> = docs.iter().collect();
                match txn.attempt(|t| apply(t, &docs, mode)) {
                    Ok(answer) => answer,
                    Err(message) => Err(Error::Store(settee_store::Error::Panicked(format!(
                        "applying the edits panicked ({message}); they were rolled back"
                    )))),
                }
            })
            .collect()),
    }
}

/// Hands each request its answer, in the order they were taken, or the job's error.
fn answer(taken: Answers, results: Result<Vec<Result<Vec<EditResult>>>>) {
    match results {
        Ok(results) => {
            for (answer, result) in taken.into_iter().zip(results) {
                answer.committed(result);
            }
        }
        Err(e) => {
            for answer in taken {
                answer.failed(&e);
            }
        }
    }
}

/// A staged request's commit that never answered: the writer stopped before it.
fn unfinished() -> settee_store::Error {
    settee_store::Error::Panicked("the commit of the applied edits did not finish".into())
}

fn rolled_back() -> settee_store::Error {
    settee_store::Error::Panicked("applying the edits panicked; they were rolled back".into())
}

/// The answer to queued edits: each edit's result, in the order given. For a staged
/// request, the results come once applied, and [`EditsPending::durable`] tells whether
/// their commit is on disk.
pub struct EditsPending {
    rx: oneshot::Receiver<Result<Vec<EditResult>>>,
    durable: Option<oneshot::Receiver<Result<()>>>,
}

impl EditsPending {
    /// The second stage of a staged request's answer (already settled for any other).
    pub(crate) fn durable(&mut self) -> Durable {
        Durable(self.durable.take())
    }
}

/// Whether a staged request's commit is durable.
pub(crate) struct Durable(Option<oneshot::Receiver<Result<()>>>);

impl Durable {
    /// Waits for the commit: `Ok` once the edits are on disk.
    pub async fn wait(self) -> Result<()> {
        match self.0 {
            None => Ok(()),
            Some(rx) => rx.await.unwrap_or_else(|_| Err(Error::Store(unfinished()))),
        }
    }
}

impl Future for EditsPending {
    type Output = Result<Vec<EditResult>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // A job that panicked drops its answers: the edits were rolled back.
        Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|_| Err(Error::Store(rolled_back()))))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Barrier;

    use settee_json::Rev;
    use settee_store::{Action, SizeReduce, StoreOptions, TreeSpec};

    use super::*;
    use crate::doc::DocLimits;

    /// Writes each document's id, and panics on the id `boom`.
    fn write_ids(txn: &mut Txn, docs: &[&NewDoc], _: EditMode) -> Result<Vec<EditResult>> {
        docs.iter()
            .map(|d| {
                assert_ne!(d.id, "boom", "a planned panic");
                txn.apply(0, &[Action::Put(d.id.as_bytes().to_vec(), b"x".to_vec())])?;
                Ok(Ok(Rev::parse("1-abc").expect("a valid revision")))
            })
            .collect()
    }

    fn docs(ids: &[&str]) -> Edits {
        Edits::every(
            ids.iter()
                .map(|id| {
                    NewDoc::from_json(
                        serde_json::json!({"_id": id}),
                        None,
                        String::new,
                        &DocLimits::default(),
                    )
                    .expect("a valid document")
                })
                .collect(),
        )
    }

    fn alone_if(alone: bool) -> Answering {
        if alone {
            Answering::Alone
        } else {
            Answering::Committed
        }
    }

    /// A staged request learns its results before its commit is synced, and then whether
    /// that commit is durable: a sync that fails fails the second stage, and nothing was
    /// kept.
    #[tokio::test]
    async fn a_staged_request_is_answered_once_applied_then_once_durable() {
        let backend = settee_store::MemBackend::new();
        let options = || StoreOptions {
            trees: vec![TreeSpec::bytewise(SizeReduce)],
            ..StoreOptions::default()
        };
        let path = std::path::Path::new("s");
        let store = Store::create_backend(Arc::new(backend.clone()), path, options()).unwrap();
        let queues = Arc::new(EditQueues::default());
        let push = |ids: &[&str]| {
            let (mode, durability) = (EditMode::Interactive, Durability::Durable);
            queues.push(
                &store,
                docs(ids),
                mode,
                durability,
                write_ids,
                Answering::Staged,
            )
        };
        let mut pending = push(&["a", "b"]);
        let durable = pending.durable();
        assert_eq!(pending.await.unwrap().len(), 2);
        durable.wait().await.unwrap();

        // The next sync fails: the results still come once applied, the second stage fails.
        backend.fail_syncs(1);
        let mut pending = push(&["c"]);
        let durable = pending.durable();
        let results = pending.await.unwrap();
        assert!(results[0].is_ok(), "applied");
        assert!(durable.wait().await.is_err(), "but not durable");
        drop(store);
        let reopened = Store::open_backend(
            Arc::new(settee_store::MemBackend::from_bytes(
                backend.durable_bytes(),
            )),
            path,
            options(),
        )
        .unwrap();
        let keys: Vec<Vec<u8>> = reopened
            .snapshot()
            .range(0, settee_store::RangeOptions::default())
            .unwrap()
            .map(|e| e.unwrap().key().to_vec())
            .collect();
        assert_eq!(
            keys,
            [b"a".to_vec(), b"b".to_vec()],
            "c never reached the disk"
        );
    }

    /// Holds the store's writer in a job until the returned barrier is waited on, so that
    /// whatever is pushed meanwhile queues.
    fn hold_writer(
        store: &Store,
    ) -> (settee_store::Pending<(), settee_store::Error>, Arc<Barrier>) {
        let (gate, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let (g, r) = (gate.clone(), release.clone());
        let blocker = store.submit(
            Durability::Durable,
            move |_| -> std::result::Result<(), settee_store::Error> {
                g.wait();
                r.wait();
                Ok(())
            },
        );
        gate.wait();
        (blocker, release)
    }

    #[tokio::test]
    async fn a_request_whose_edits_panic_fails_alone() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            trees: vec![TreeSpec::bytewise(SizeReduce)],
            ..StoreOptions::default()
        };
        let store = Store::create(&dir.path().join("s"), options).unwrap();
        // Hold the writer until every request below is queued, so that one job takes them all.
        let (blocker, release) = hold_writer(&store);
        let queues = Arc::new(EditQueues::default());
        let pending: Vec<EditsPending> = [&["a1", "a2"][..], &["boom"], &["c1"]]
            .into_iter()
            .map(|ids| {
                queues.push(
                    &store,
                    docs(ids),
                    EditMode::Interactive,
                    Durability::Durable,
                    write_ids,
                    alone_if(ids.len() == 1),
                )
            })
            .collect();
        release.wait();
        blocker.await.unwrap();
        let mut answers = Vec::new();
        for p in pending {
            answers.push(p.await);
        }
        assert_eq!(
            answers[0]
                .as_ref()
                .expect("the first request is applied")
                .len(),
            2
        );
        assert!(
            matches!(&answers[1], Err(Error::Store(settee_store::Error::Panicked(m))) if m.contains("a planned panic")),
            "{:?}",
            answers[1].as_ref().err()
        );
        assert_eq!(
            answers[2]
                .as_ref()
                .expect("the last request is applied")
                .len(),
            1
        );
        let snap = store.snapshot();
        for (id, present) in [("a1", true), ("a2", true), ("boom", false), ("c1", true)] {
            assert_eq!(
                snap.get(0, id.as_bytes()).unwrap().is_some(),
                present,
                "{id}"
            );
        }
    }

    /// The name of the thread that applied each document, by id.
    static APPLIED_ON: Mutex<Vec<(String, Option<String>)>> = Mutex::new(Vec::new());

    fn write_ids_noting_thread(
        txn: &mut Txn,
        docs: &[&NewDoc],
        mode: EditMode,
    ) -> Result<Vec<EditResult>> {
        let thread = std::thread::current().name().map(str::to_owned);
        APPLIED_ON
            .lock()
            .unwrap()
            .extend(docs.iter().map(|d| (d.id.clone(), thread.clone())));
        write_ids(txn, docs, mode)
    }

    fn applied_on(id: &str) -> Option<String> {
        APPLIED_ON
            .lock()
            .unwrap()
            .iter()
            .find(|(i, _)| i == id)
            .expect("applied")
            .1
            .clone()
    }

    /// A single-document request applies itself while requests come one at a time, and
    /// queues for the writer's shared commit once they arrive together, until
    /// [`CROWDED_FOR`] jobs in a row have taken one request each.
    #[tokio::test]
    async fn lone_requests_commit_on_their_own_thread_crowds_share_the_writer() {
        let dir = tempfile::tempdir().unwrap();
        let options = StoreOptions {
            trees: vec![TreeSpec::bytewise(SizeReduce)],
            ..StoreOptions::default()
        };
        let store = Store::create(&dir.path().join("s"), options).unwrap();
        let queues = Arc::new(EditQueues::default());
        let push = |ids: &[&str]| {
            queues.push(
                &store,
                docs(ids),
                EditMode::Interactive,
                Durability::Durable,
                write_ids_noting_thread,
                alone_if(ids.len() == 1),
            )
        };
        let here = std::thread::current().name().map(str::to_owned);
        let writer = Some("settee-store-writer".to_owned());

        push(&["lone1"]).await.unwrap();
        assert_eq!(applied_on("lone1"), here, "a lone request commits itself");

        let (blocker, release) = hold_writer(&store);
        let crowd: Vec<EditsPending> = ["crowd1", "crowd2", "crowd3"]
            .into_iter()
            .map(|id| push(&[id]))
            .collect();
        release.wait();
        blocker.await.unwrap();
        for p in crowd {
            p.await.unwrap();
        }
        assert_eq!(applied_on("crowd1"), writer, "the writer was busy");
        // The writer answers only once idle again, so nothing but the crowd's size sends
        // the next request to it.

        for k in 0..CROWDED_FOR {
            let id = format!("after_crowd{k}");
            push(&[id.as_str()]).await.unwrap();
            assert_eq!(
                applied_on(&id),
                writer,
                "for a while after a crowd, a request queues for the writer"
            );
        }
        push(&["lone2"]).await.unwrap();
        assert_eq!(
            applied_on("lone2"),
            here,
            "alone again once enough jobs in a row took one request"
        );
        push(&["two", "docs"]).await.unwrap();
        assert_eq!(
            applied_on("two"),
            writer,
            "only a request said to be alone commits itself"
        );
        assert_eq!(
            store
                .snapshot()
                .get(0, b"lone2")
                .unwrap()
                .map(|e| e.value().to_vec()),
            Some(b"x".to_vec())
        );
    }
}
