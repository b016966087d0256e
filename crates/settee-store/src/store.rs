//! A store: one file, one writer thread, any number of concurrent readers.
//!
//! Updates are closures run against a [`Txn`] on the writer thread. Closures that arrive
//! while a commit is being synced wait in the queue and are all applied and committed
//! together next (group commit); each caller is answered once its change is durable, or at
//! once for [`Durability::Batch`], whose changes are committed within the batch delay.
//!
//! A caller may instead run its durable update itself when the writer is idle
//! ([`Store::run_or_submit_with`]): a lone writer is then answered without waking the writer
//! thread and being woken back.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use crate::backend::{sync_parent, Backend, FileBackend};
use crate::cache::NodeCache;
use crate::error::{Error, Result};
use crate::file::{recover, StoreFile};
use crate::format::{Header, BLOCK};
use crate::overlay::{Charge, FoldLimits, OverlayBudget};
use crate::placement::{Place, WriterPlace};
use crate::snapshot::{SnapState, Snapshot};
use crate::tree::TreeSpec;
use crate::txn::{Appender, LooseBlob, Savepoint, Txn, WriterState};

/// Default target size of a node's payload, chosen by the node-size benchmark.
pub const DEFAULT_NODE_SIZE: usize = 4096;

/// How a store is opened.
#[derive(Clone)]
pub struct StoreOptions {
    /// One spec per tree slot; the file's headers hold one root per slot.
    pub trees: Vec<TreeSpec>,
    /// The node cache, usually shared by every store of the process.
    pub cache: NodeCache,
    /// Target node payload size in bytes.
    pub node_size: usize,
    /// How long batched (non-durable) changes may wait before they are committed.
    pub batch_delay: Duration,
    /// Whether blobs are lz4-compressed when that saves space.
    pub compress_blobs: bool,
    /// A commit is made early once about this many bytes wait in memory.
    pub max_uncommitted_bytes: u64,
    /// Run first on the writer thread (to name it, lower its priority, ...).
    pub on_writer_start: Option<Arc<dyn Fn() + Send + Sync>>,
    /// Run after each commit is published, by whichever thread committed (the writer thread,
    /// or a caller committing its own update), while it holds the writer's state (to wake
    /// waiting readers, such as change feeds, once new data is visible).
    pub on_commit: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The turn that callers committing their own updates take, shared by every store
    /// opened with a clone of these options.
    pub caller_turn: CallerTurn,
    /// When logged trees' changes are folded into their nodes.
    pub fold: FoldLimits,
    /// The memory that the logged changes of every store opened with a clone of these
    /// options may take together.
    pub overlay_budget: OverlayBudget,
    /// A store that has not committed for this long tidies up once on its writer thread:
    /// it folds its logged changes (a quiet store then holds none in memory and opens
    /// without a replay) and runs `on_writer_quiet`.
    pub quiet_after: Duration,
    /// Run on the writer thread when its store has become quiet (to give back memory that
    /// the thread's allocator keeps for it, for example: an idle thread allocates nothing
    /// that would make the allocator do so itself).
    pub on_writer_quiet: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// One turn at a time for commits run by their callers ([`Store::run_or_submit_with`]),
/// across the stores that share it: the threads that serve requests must not all wait on
/// syncs at once. While one caller commits, others (of any of those stores) queue for their
/// store's writer thread, and many databases each with one writer still sync in parallel.
#[derive(Clone, Default)]
pub struct CallerTurn(Arc<AtomicBool>);

impl CallerTurn {
    /// A turn that is never free: every caller queues for its store's writer thread. For a
    /// process with one thread serving requests, where a caller waiting on its sync would
    /// hold up every other request, and no other could arrive to share the commit.
    pub fn never() -> CallerTurn {
        CallerTurn(Arc::new(AtomicBool::new(true)))
    }

    fn take(&self) -> Option<TurnTaken<'_>> {
        self.0
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .ok()
            .map(|_| TurnTaken(&self.0))
    }
}

/// The turn, given back when dropped.
struct TurnTaken<'a>(&'a AtomicBool);

impl Drop for TurnTaken<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

impl Default for StoreOptions {
    fn default() -> StoreOptions {
        StoreOptions {
            trees: vec![TreeSpec::default()],
            cache: NodeCache::default(),
            node_size: DEFAULT_NODE_SIZE,
            batch_delay: Duration::from_millis(50),
            compress_blobs: true,
            max_uncommitted_bytes: 64 << 20,
            on_writer_start: None,
            on_commit: None,
            caller_turn: CallerTurn::default(),
            fold: FoldLimits::default(),
            overlay_budget: OverlayBudget::default(),
            quiet_after: Duration::from_secs(10),
            on_writer_quiet: None,
        }
    }
}

/// When an update's caller is answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Durability {
    /// After the change is committed and synced to disk.
    Durable,
    /// As soon as the change is applied; it is committed within the batch delay (CouchDB's
    /// `batch=ok`), and lost if the process dies first.
    Batch,
}

/// Called once a job's fate is known: `None` if its change is committed (or, for batched
/// jobs, applied), the commit's error otherwise.
type Completion = Box<dyn FnOnce(Option<&Error>) + Send>;
/// A job runs in the writer's place (on its thread, or on a caller's with the writer's
/// state held); it reports whether it succeeded and how to answer.
type Job = Box<dyn FnOnce(&mut Txn) -> (bool, Completion) + Send>;
/// Work that needs the writer thread to itself (the last step of a compaction).
pub(crate) type Exclusive = Box<dyn FnOnce(&mut WriterState, &Shared) + Send>;

enum Request {
    Update {
        job: Job,
        durability: Durability,
    },
    Exclusive(Exclusive),
    /// Nothing to do: the writer looks again at when it should tidy up (a caller committed
    /// on its own thread after the writer had tidied and gone to sleep without a timer).
    Wake,
}

pub(crate) struct Shared {
    pub current: ArcSwap<SnapState>,
    /// Set while a compaction runs; only one may.
    pub compacting: AtomicBool,
    pub path: PathBuf,
    pub options: StoreOptions,
    pub schema: Arc<[TreeSpec]>,
}

impl Shared {
    /// Makes the writer's last commit the state new snapshots see; returns the state they
    /// saw until now.
    pub fn publish(&self, state: &WriterState) -> Arc<SnapState> {
        let overlays = state.committed_overlays.clone();
        self.current.swap(Arc::new(SnapState::new(
            state.app.file.clone(),
            state.header.clone(),
            self.schema.clone(),
            overlays,
        )))
    }
}

/// What applies updates and commits: held by the writer thread while it works through its
/// queue, or by a caller running its own update while the writer is idle.
struct Core {
    state: Mutex<WriterState>,
    /// Requests sent to the writer thread and not yet applied. A caller may run its own
    /// update only while this is zero, so that it never overtakes an earlier one.
    queued: AtomicUsize,
    /// The writer thread, for callers that steer its next wake-up.
    place: WriterPlace,
}

impl Core {
    /// The writer's state, if nothing is queued for it and nobody holds it; `None` also once
    /// a commit has panicked, which leaves the state unusable and stops the writer thread.
    fn idle(&self) -> Option<MutexGuard<'_, WriterState>> {
        if self.queued.load(Ordering::Acquire) != 0 {
            return None;
        }
        let state = self.state.try_lock().ok()?;
        // Rechecked while held: the writer thread counts a request off only once applied.
        (self.queued.load(Ordering::Acquire) == 0).then_some(state)
    }
}

/// An open store file. Dropping it commits pending batched changes and stops the writer.
pub struct Store {
    shared: Arc<Shared>,
    core: Arc<Core>,
    tx: Mutex<Option<mpsc::Sender<Request>>>,
    writer: Mutex<Option<JoinHandle<()>>>,
}

/// The answer to a submitted update: wait for it, or `.await` it.
pub struct Pending<T, E> {
    rx: oneshot::Receiver<Result<T, E>>,
}

impl<T, E: From<Error>> Pending<T, E> {
    /// Blocks until the update is answered.
    pub fn wait(self) -> Result<T, E> {
        self.rx.recv().unwrap_or_else(|_| Err(lost().into()))
    }
}

impl<T, E: From<Error>> std::future::Future for Pending<T, E> {
    type Output = Result<T, E>;
    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        std::pin::Pin::new(&mut self.rx)
            .poll(cx)
            .map(|r| r.unwrap_or_else(|_| Err(lost().into())))
    }
}

fn lost() -> Error {
    Error::Panicked("the update closure panicked; its changes were rolled back".into())
}

/// Whether the bytes from `start` to `end` are all zero, as the appender's reserve is:
/// a tail no longer than a reserve is read to tell, a longer one is taken as damage.
fn zeros_only(backend: &dyn Backend, start: u64, end: u64) -> Result<bool> {
    const STEP: u64 = 1 << 20;
    if end - start > crate::txn::MAX_RESERVE + BLOCK {
        return Ok(false);
    }
    let mut buf = vec![0u8; STEP.min(end - start) as usize];
    let mut pos = start;
    while pos < end {
        let n = STEP.min(end - pos) as usize;
        backend
            .read_exact_at(&mut buf[..n], pos)
            .map_err(Error::io("read file tail"))?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        pos += n as u64;
    }
    Ok(true)
}

fn random_salt() -> [u8; 16] {
    let mut salt = [0u8; 16];
    for half in salt.chunks_mut(8) {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(Instant::now().elapsed().as_nanos() ^ u128::from(std::process::id()));
        half.copy_from_slice(&h.finish().to_le_bytes());
    }
    salt
}

/// Writes the first header of a new file and syncs it; returns it and where it ends.
pub(crate) fn init_file(backend: &dyn Backend, slots: usize) -> Result<(Header, u64)> {
    let header = Header {
        salt: random_salt(),
        flags: 0,
        generation: 0,
        data_start: 0,
        region_crc: crc32fast::hash(&[]),
        roots: vec![None; slots],
        meta: Vec::new(),
        log: None,
    };
    let bytes = header.encode();
    backend
        .write_all_at(&bytes, 0)
        .map_err(Error::io("create"))?;
    backend.sync().map_err(Error::io("create"))?;
    Ok((header, bytes.len() as u64))
}

impl Store {
    /// Creates a new store file at `path`; fails if something is there already. The file
    /// appears under its name only once complete.
    pub fn create(path: &Path, options: StoreOptions) -> Result<Store> {
        let tmp = path.with_extension("creating");
        let _ = std::fs::remove_file(&tmp);
        {
            let backend = FileBackend::create(&tmp).map_err(Error::io("create"))?;
            init_file(&backend, options.trees.len())?;
        }
        let linked = std::fs::hard_link(&tmp, path).map_err(Error::io("create"));
        let _ = std::fs::remove_file(&tmp);
        linked?;
        sync_parent(path).map_err(Error::io("sync directory"))?;
        Store::open(path, options)
    }

    /// Opens an existing store file at its newest valid commit, cutting off any torn tail.
    ///
    /// The file is locked while open: a second open of the same file, in this process or
    /// another, fails until the store and every snapshot of it are dropped.
    pub fn open(path: &Path, options: StoreOptions) -> Result<Store> {
        let backend = FileBackend::open(path).map_err(Error::io("open"))?;
        // Holding the lock, any compaction copy left beside the file is a dead one's.
        crate::compact::remove_leftover_copies(path);
        Store::open_backend(Arc::new(backend), path, options)
    }

    /// Makes an empty backend a new store and opens it (tests use the in-memory backend).
    pub fn create_backend(
        backend: Arc<dyn Backend>,
        path: &Path,
        options: StoreOptions,
    ) -> Result<Store> {
        if backend.len().map_err(Error::io("create"))? != 0 {
            let exists =
                std::io::Error::new(std::io::ErrorKind::AlreadyExists, "backend is not empty");
            return Err(Error::Io {
                op: "create",
                source: exists,
            });
        }
        init_file(backend.as_ref(), options.trees.len())?;
        Store::open_backend(backend, path, options)
    }

    /// Opens a store over any backend (tests use the in-memory one). `path` names it in errors.
    pub fn open_backend(
        backend: Arc<dyn Backend>,
        path: &Path,
        options: StoreOptions,
    ) -> Result<Store> {
        let found = recover(backend.as_ref(), path)?;
        let len = backend.len().map_err(Error::io("file length"))?;
        let reserved = len > found.end && zeros_only(backend.as_ref(), found.end, len)?;
        if len > found.end && !reserved {
            backend
                .truncate(found.end)
                .map_err(Error::io("truncate torn tail"))?;
            backend.sync().map_err(Error::io("truncate torn tail"))?;
        }
        let file = Arc::new(StoreFile::new(backend, options.cache.clone(), found.end));
        let schema: Arc<[TreeSpec]> = options.trees.clone().into();
        let app = Appender::new(file, found.end, if reserved { len } else { found.end });
        let mut state = WriterState::new(
            app,
            schema.clone(),
            found.header,
            options.node_size,
            options.compress_blobs,
        );
        state.fold = options.fold;
        state.quiet_after = options.quiet_after;
        state.charge = Some(Charge::new(options.overlay_budget.clone()));
        state.replay_log(path)?;
        state.charge_overlays();
        let overlays = state.committed_overlays.clone();
        let shared = Arc::new(Shared {
            current: ArcSwap::from_pointee(SnapState::new(
                state.app.file.clone(),
                state.header.clone(),
                schema.clone(),
                overlays,
            )),
            compacting: AtomicBool::new(false),
            path: path.to_path_buf(),
            options,
            schema,
        });
        let (tx, rx) = mpsc::channel();
        let core = Arc::new(Core {
            state: Mutex::new(state),
            queued: AtomicUsize::new(0),
            place: WriterPlace::default(),
        });
        let (thread_shared, thread_core) = (shared.clone(), core.clone());
        let on_start = thread_shared.options.on_writer_start.clone();
        let writer = std::thread::Builder::new()
            .name("settee-store-writer".into())
            .spawn(move || {
                if let Some(f) = on_start {
                    f();
                }
                thread_core.place.started();
                run_writer(&thread_core, rx, &thread_shared);
                thread_core.place.stopped();
            })
            .map_err(Error::io("start writer thread"))?;
        Ok(Store {
            shared,
            core,
            tx: Mutex::new(Some(tx)),
            writer: Mutex::new(Some(writer)),
        })
    }

    /// Creates the store if the file does not exist, else opens it.
    pub fn open_or_create(path: &Path, options: StoreOptions) -> Result<Store> {
        if path.exists() {
            Store::open(path, options)
        } else {
            Store::create(path, options)
        }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Bytes of the file up to the end of its newest commit. The file itself may be longer
    /// by the zeros its writer lays down ahead of its appends.
    pub fn committed_len(&self) -> u64 {
        self.shared.current.load().file.committed()
    }

    /// The damaged records met so far in the file (opening, reads and writes note them): a
    /// damaged record costs what is reached through it, and the store goes on serving and
    /// writing the rest.
    pub fn damage(&self) -> Vec<crate::file::Damaged> {
        self.shared.current.load().file.damage()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Steers the processor that the writer thread wakes on for its next job (see
    /// [`crate::place_fan_out`]); false if it could not be steered (one processor, or a
    /// writer at work, which is left where it is). The next job must be submitted right
    /// after.
    pub fn place_next_job(&self, place: Place) -> bool {
        self.core.place.steer(place)
    }

    /// The newest committed state. Never waits for the writer.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot {
            state: self.shared.current.load_full(),
        }
    }

    fn send(&self, req: Request) -> Result<()> {
        let tx = self.tx.lock().expect("sender lock");
        let tx = tx.as_ref().ok_or(Error::Closed)?;
        self.core.queued.fetch_add(1, Ordering::AcqRel);
        tx.send(req).map_err(|_| {
            self.core.queued.fetch_sub(1, Ordering::AcqRel);
            Error::Closed
        })
    }

    /// Queues an update; the closure runs on the writer thread. If it returns an error or
    /// panics, its changes are rolled back and the other updates of its group are unaffected.
    pub fn submit<T, E, F>(&self, durability: Durability, f: F) -> Pending<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&mut Txn) -> Result<T, E> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel();
        self.submit_with(durability, f, move |answer| {
            let _ = tx.send(answer);
        });
        Pending { rx }
    }

    /// Queues an update as [`Store::submit`] does, and calls `done` with its answer once it
    /// is durable (or failed), on the writer thread, or at once if the store is closed. A
    /// caller answering many waiters from one update needs no task of its own to wait. If the
    /// update panics, `done` is dropped uncalled.
    pub fn submit_with<T, E, F, D>(&self, durability: Durability, f: F, done: D)
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&mut Txn) -> Result<T, E> + Send + 'static,
        D: FnOnce(Result<T, E>) + Send + 'static,
    {
        // Shared with the job only so that a store already closed can still answer.
        let done = Arc::new(Mutex::new(Some(done)));
        let in_job = done.clone();
        let job = job_answering(f, move |answer| {
            if let Some(done) = in_job.lock().expect("answer lock").take() {
                done(answer);
            }
        });
        if let Err(e) = self.send(Request::Update { job, durability }) {
            if let Some(done) = done.lock().expect("answer lock").take() {
                done(Err(E::from(e)));
            }
        }
    }

    /// Does what [`Store::submit_with`] does, but if the update is durable, the writer is
    /// idle (nothing queued, no commit under way) and the options' [`CallerTurn`] is free,
    /// runs it and commits it on the calling thread, which waits for the sync; `done` has
    /// been called when this returns, unless the update panicked (it is then dropped, as
    /// [`Store::submit_with`] would). `done` runs after the writer's state is let go.
    ///
    /// For a caller that is alone: its answer then needs no thread to be woken. A caller that
    /// is one of many should queue, so that their updates share a commit.
    pub fn run_or_submit_with<T, E, F, D>(&self, durability: Durability, f: F, done: D)
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&mut Txn) -> Result<T, E> + Send + 'static,
        D: FnOnce(Result<T, E>) + Send + 'static,
    {
        let turn = if durability == Durability::Durable {
            self.shared.options.caller_turn.take()
        } else {
            None
        };
        let idle = turn.as_ref().and_then(|_| self.core.idle());
        let Some(mut state) = idle else {
            return self.submit_with(durability, f, done);
        };
        // Once tidied, the writer sleeps until a request comes; this commit starts a new
        // quiet spell that it must time.
        let rearm = state.has_tidied();
        match apply(&mut state, job_answering(f, done)) {
            Applied::Done(completion) => {
                let failed = commit(&mut state, &self.shared);
                // A fold in slices goes on on the writer thread.
                let rearm = rearm || state.sweeping();
                drop((state, turn));
                if rearm {
                    let _ = self.send(Request::Wake);
                }
                completion(failed.as_ref());
            }
            // Nothing of its own to commit: anything batched waits for the writer's delay.
            Applied::Failed(completion) => {
                drop((state, turn));
                completion(None);
            }
            Applied::Panicked => drop((state, turn)),
        }
        // What this commit, or the writer's last if this caller took the state first, left
        // for after its answer.
        finish_after_answer(&self.core, &self.shared);
    }

    /// Runs an update and waits for its answer.
    pub fn update<T, E, F>(&self, durability: Durability, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&mut Txn) -> Result<T, E> + Send + 'static,
    {
        self.submit(durability, f).wait()
    }

    /// Appends a blob without asking for a commit, for streaming large data in before the
    /// update that refers to it; that update calls [`Txn::adopt`] and its commit makes the
    /// blob durable.
    pub fn append_blob(&self, data: Vec<u8>) -> Result<LooseBlob> {
        self.update(Durability::Batch, move |txn| txn.write_loose_blob(&data))
    }

    /// Commits whatever batched changes are pending and waits until they are durable.
    pub fn flush(&self) -> Result<()> {
        self.update(Durability::Durable, |_| Ok(()))
    }

    pub(crate) fn exclusive(&self, work: Exclusive) -> Result<()> {
        self.send(Request::Exclusive(work))
    }
}

/// A job that runs `f` and hands its answer to `done` once the commit's fate is known.
fn job_answering<T, E, F, D>(f: F, done: D) -> Job
where
    T: Send + 'static,
    E: From<Error> + Send + 'static,
    F: FnOnce(&mut Txn) -> Result<T, E> + Send + 'static,
    D: FnOnce(Result<T, E>) + Send + 'static,
{
    Box::new(move |txn| match f(txn) {
        Ok(v) => (
            true,
            Box::new(move |err: Option<&Error>| match err {
                None => done(Ok(v)),
                Some(e) => done(Err(E::from(e.duplicate()))),
            }) as Completion,
        ),
        Err(e) => (
            false,
            Box::new(move |_: Option<&Error>| done(Err(e))) as Completion,
        ),
    })
}

impl Drop for Store {
    fn drop(&mut self) {
        self.tx.lock().expect("sender lock").take();
        if let Some(handle) = self.writer.lock().expect("writer lock").take() {
            let _ = handle.join();
        }
    }
}

impl Error {
    /// A copy of an error for each caller of a failed group commit (I/O errors keep their
    /// kind and message).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, source } => Error::Io {
                op,
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corrupted { offset, what } => Error::Corrupted {
                offset: *offset,
                what: what.clone(),
            },
            Error::NotAStore { path } => Error::NotAStore { path: path.clone() },
            Error::UnsupportedVersion { path, version } => Error::UnsupportedVersion {
                path: path.clone(),
                version: *version,
            },
            Error::Reduce(s) => Error::Reduce(s.clone()),
            Error::TooLarge { len } => Error::TooLarge { len: *len },
            Error::StaleBlob => Error::StaleBlob,
            Error::NoSuchTree(t) => Error::NoSuchTree(*t),
            Error::Closed => Error::Closed,
            Error::CompactionRunning => Error::CompactionRunning,
            Error::Panicked(s) => Error::Panicked(s.clone()),
        }
    }
}

/// The writer loop: apply every queued request, commit once, answer, repeat. It ends when
/// the store is dropped, or when a caller's commit panicked with the state in its hands.
fn run_writer(core: &Core, rx: mpsc::Receiver<Request>, shared: &Shared) {
    let mut deadline: Option<Instant> = None;
    // When the store, quiet since its last commit, should tidy up.
    let mut tidy_at = core.state.lock().ok().and_then(|state| state.tidy_at());
    loop {
        core.place.wait();
        let first = match deadline.or(tidy_at) {
            None => rx.recv().map_err(|_| RecvTimeoutError::Disconnected),
            Some(d) => rx.recv_timeout(d.saturating_duration_since(Instant::now())),
        };
        core.place.settle();
        let Ok(mut state) = core.state.lock() else {
            return;
        };
        if !state.dirty {
            // A caller's commit took what was batched: no delay is running any more.
            deadline = None;
        }
        let first = match first {
            Ok(req) => req,
            Err(RecvTimeoutError::Timeout) => {
                let quiet = !state.dirty && state.tidy_at().is_some_and(|at| at <= Instant::now());
                if quiet {
                    state.ask_fold();
                }
                // A quiet fold that failed is tried again after another quiet spell (the
                // failed commit started one).
                let tidied = commit(&mut state, shared).is_none() && quiet;
                finish(&mut state, shared);
                deadline = None;
                if tidied {
                    state.tidied();
                }
                tidy_at = state.tidy_at();
                drop(state);
                if let Some(f) = shared.options.on_writer_quiet.as_ref().filter(|_| tidied) {
                    // A panicking hook must not end the writer.
                    let _ = catch_unwind(AssertUnwindSafe(|| f()));
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => {
                commit(&mut state, shared);
                return;
            }
        };
        let (taken, waiting) = apply_queued(
            &mut state,
            shared,
            std::iter::once(first).chain(rx.try_iter()),
            &mut deadline,
        );
        let overdue = deadline.is_some_and(|d| d <= Instant::now());
        let mut failed = None;
        if !waiting.is_empty() || overdue {
            failed = commit(&mut state, shared);
            deadline = None;
        } else if state.dirty && deadline.is_none() {
            deadline = Some(Instant::now() + shared.options.batch_delay);
        }
        core.queued.fetch_sub(taken, Ordering::AcqRel);
        tidy_at = state.tidy_at();
        // Answered once idle, so that a caller answered can run its next update itself.
        drop(state);
        answer(waiting, failed.as_ref());
        finish_after_answer(core, shared);
        fold_slices(core, shared);
    }
}

/// Does what the commit just answered left for after its answer ([`finish`]), unless the
/// state is taken: whoever holds it commits next, which does it first.
fn finish_after_answer(core: &Core, shared: &Shared) {
    if let Ok(mut state) = core.state.try_lock() {
        finish(&mut state, shared);
    }
}

/// Does what the last commit left for after its answer ([`WriterState::finish_commit`]),
/// and publishes the overlays with their runs merged if they are still what it committed,
/// so that the runs merged away are let go rather than kept beside the merged ones.
fn finish(state: &mut WriterState, shared: &Shared) {
    if state.finish_commit() {
        shared.publish(state);
    }
}

/// How long the writer folds slices before it commits them and looks for requests again.
const SLICES_FOR: Duration = Duration::from_millis(2);

/// While a fold goes in slices ([`crate::FoldLimits::slice`]), folds the next ones and
/// commits them, for [`SLICES_FOR`] at a time until a request waits (one slice at least,
/// so that a busy store's fold still ends). Slices folded when a request comes are
/// committed with it.
fn fold_slices(core: &Core, shared: &Shared) {
    loop {
        let Ok(mut state) = core.state.lock() else {
            return;
        };
        if !state.sweeping() {
            return;
        }
        let started = Instant::now();
        while state.sweeping() {
            if state.fold_slice().is_err()
                || started.elapsed() >= SLICES_FOR
                || core.queued.load(Ordering::Acquire) > 0
            {
                break;
            }
        }
        if core.queued.load(Ordering::Acquire) > 0 {
            // The request's commit writes these slices too: one sync, not two in a row.
            return;
        }
        let failed = commit(&mut state, shared);
        finish(&mut state, shared);
        if failed.is_some() || !state.sweeping() {
            return;
        }
    }
}

/// Applies a run of queued requests; returns how many there were and the durable jobs
/// waiting for the next commit. Batched jobs are answered at once; a long group commits
/// early to bound its memory, and exclusive work runs after a commit of what came before.
fn apply_queued(
    state: &mut WriterState,
    shared: &Shared,
    requests: impl Iterator<Item = Request>,
    deadline: &mut Option<Instant>,
) -> (usize, Vec<Completion>) {
    let mut taken = 0;
    let mut waiting: Vec<Completion> = Vec::new();
    for req in requests {
        taken += 1;
        match req {
            Request::Update { job, durability } => {
                match (apply(state, job), durability) {
                    (Applied::Done(c), Durability::Durable) => waiting.push(c),
                    (Applied::Done(c), Durability::Batch) | (Applied::Failed(c), _) => c(None),
                    (Applied::Panicked, _) => {}
                }
                if state.uncommitted_bytes() >= shared.options.max_uncommitted_bytes {
                    // Every durable job this commit covers (this one included) is answered.
                    commit_and_answer(state, shared, std::mem::take(&mut waiting));
                    *deadline = None;
                }
            }
            Request::Exclusive(work) => {
                commit_and_answer(state, shared, std::mem::take(&mut waiting));
                // The work answers its caller itself; a panic in it must not end the writer.
                let _ = catch_unwind(AssertUnwindSafe(|| work(state, shared)));
            }
            Request::Wake => {}
        }
    }
    (taken, waiting)
}

/// What became of a job.
enum Applied {
    /// Its changes are applied; answer it once their commit's fate is known.
    Done(Completion),
    /// It failed and was undone; answer it now.
    Failed(Completion),
    /// It panicked and was undone; its caller learns of it from the dropped answer.
    Panicked,
}

/// Runs one job; a job that fails or panics is undone.
fn apply(state: &mut WriterState, job: Job) -> Applied {
    let saved = state.savepoint();
    let outcome = catch_unwind(AssertUnwindSafe(|| job(&mut Txn { state: &mut *state })));
    match outcome {
        Ok((true, completion)) => {
            state.held.update_done();
            Applied::Done(completion)
        }
        Ok((false, completion)) => {
            undo(state, saved);
            Applied::Failed(completion)
        }
        Err(_) => {
            undo(state, saved);
            Applied::Panicked
        }
    }
}

/// Restores the state a failed job started from. With nothing else uncommitted, the roots
/// are the last commit's again and the job's in-memory nodes can go now.
fn undo(state: &mut WriterState, saved: Savepoint) {
    state.rollback_to(saved);
    if !state.dirty {
        state.clear_virtual();
    }
}

/// Commits what is applied and answers the jobs it covers.
fn commit_and_answer(state: &mut WriterState, shared: &Shared, waiting: Vec<Completion>) {
    let failed = commit(state, shared);
    answer(waiting, failed.as_ref());
    finish(state, shared);
}

/// Commits and publishes whatever is applied, if anything; the error if that failed.
///
/// A failed sync leaves nothing written since the last good one to be trusted, whatever a
/// later sync says (the system may have dropped those pages): the writer then reads the file
/// again from its newest valid header, as opening does, and goes on from there. While it
/// cannot, it takes no writes: each group is refused and the reading tried again.
fn commit(state: &mut WriterState, shared: &Shared) -> Option<Error> {
    if !state.dirty {
        return None;
    }
    if state.reopen_needed {
        state.abandon();
        let refused = || {
            Error::io("sync")(std::io::Error::other(
                "an earlier sync of this file failed and it could not yet be read again",
            ))
        };
        return Some(reopen(state, shared).err().unwrap_or_else(refused));
    }
    let failed = state
        .commit(0)
        .map(|_| {
            let seen = shared.publish(state);
            state.retire(seen);
        })
        .err();
    match &failed {
        None => {
            if let Some(f) = &shared.options.on_commit {
                f();
            }
        }
        Some(Error::Io { op: "sync", .. }) => {
            let _ = reopen(state, shared);
        }
        Some(_) => {}
    }
    failed
}

/// Reads the file again from its newest valid header (see [`commit`]), and publishes it.
fn reopen(state: &mut WriterState, shared: &Shared) -> Result<()> {
    match state.reopen(&shared.path) {
        Ok(()) => {
            state.reopen_needed = false;
            shared.publish(state);
            Ok(())
        }
        Err(e) => {
            state.reopen_needed = true;
            say_unreadable(&shared.path, &e);
            Err(e)
        }
    }
}

/// Says on standard error that a file could not be read again after a failed sync (the store
/// logs nothing else: this is the one condition an operator must hear of).
fn say_unreadable(path: &Path, e: &Error) {
    eprintln!("settee-store: {}: could not read the file again after a failed sync ({e}); its writes are refused until it can", path.display());
}

/// Tells each job of a commit how it went.
fn answer(waiting: Vec<Completion>, failed: Option<&Error>) {
    for c in waiting {
        c(failed);
    }
}
