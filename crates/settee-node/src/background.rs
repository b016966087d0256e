//! A small pool of low-priority threads for CPU-heavy work on behalf of bulk requests (parsing
//! a thousand documents, say), so that it yields the CPU to the event loop's short requests:
//! reads keep their rate while a bulk load runs.

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

type Work = Box<dyn FnOnce() + Send>;

/// Niceness of database writer threads: below the event loop, so reads go first, but not as
/// low as bulk work, since interactive writes commit on them too (at 19, single-document
/// writes beside 120 saturating readers took twice as long at the 99th percentile). A lone
/// small write that finds its writer idle commits on the request's own thread instead.
const WRITER_NICENESS: i32 = 10;

/// How many threads the pool has: one per processor this process may use. Worked out once,
/// since asking the system reads its control-group files each time (about 10 µs).
pub fn threads() -> usize {
    static THREADS: OnceLock<usize> = OnceLock::new();
    *THREADS.get_or_init(|| std::thread::available_parallelism().map_or(2, |n| n.get()))
}

fn pool() -> &'static Mutex<mpsc::Sender<Work>> {
    static POOL: OnceLock<Mutex<mpsc::Sender<Work>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Work>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        let threads = threads();
        let cpus = allowed_cpus();
        for i in 0..threads {
            let rx = rx.clone();
            let cpu = (!cpus.is_empty()).then(|| cpus[i % cpus.len()]);
            std::thread::Builder::new()
                .name(format!("settee-bg-{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        keep_to(cpu);
                    }
                    run_only_when_idle();
                    loop {
                        let job = rx.lock().expect("pool queue").recv();
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                })
                .expect("spawn a background thread");
        }
        Mutex::new(tx)
    })
}

/// The processors this process may run on (empty if unknown).
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; sched_getaffinity fills it for the
    // calling thread, whose set the whole process shares when the pool starts.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

/// Keeps the calling thread to one processor. The pool's threads run in the idle class, and
/// the system counts a processor that runs only such threads as idle: a thread woken by
/// another would often be queued behind it on the same processor, and the parts of a body
/// would be parsed one after another. One thread per processor parses them side by side; a
/// thread whose processor is busy takes fewer parts (see the bulk parser).
fn keep_to(cpu: usize) {
    // SAFETY: as in `allowed_cpus`; sched_setaffinity only changes where the calling thread
    // may run, within the set the process already has.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Lowers the calling thread's scheduling priority to a database writer's: reads, answered
/// on the event loop, go first when the CPU is short.
pub fn lower_priority() {
    set_niceness(WRITER_NICENESS);
}

/// Puts the calling thread in the idle scheduling class, for work done only for bulk
/// requests: it runs when nothing else wants the CPU and gives way at once when a request
/// arrives (a low niceness alone still lets it keep the CPU for a whole time slice).
fn run_only_when_idle() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler on the calling thread (0) only changes its scheduling
    // class; moving to a lower class needs no privilege.
    let set = unsafe { libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) };
    if set != 0 {
        set_niceness(19);
    }
}

fn set_niceness(niceness: i32) {
    // SAFETY: setpriority on this thread's id only changes its scheduling niceness.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, niceness);
    }
}

/// Runs `f` on a low-priority thread and waits for its answer; `None` if it panicked.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    start(f).await
}

/// Hands `f` to a low-priority thread now, before the answer is awaited, so that several
/// pieces of one request's work run side by side; the future answers `None` if it panicked.
pub fn start<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> impl std::future::Future<Output = Option<T>> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Work = Box::new(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(out.ok());
    });
    let sent = pool().lock().expect("pool sender").send(job).is_ok();
    async move {
        if !sent {
            return None;
        }
        rx.await.ok().flatten()
    }
}
