//! A small pool of low-priority threads for CPU-heavy work on behalf of bulk requests (parsing
//! a thousand documents, say), so that it yields the CPU to the event loop's short requests:
//! reads keep their rate while a bulk load runs.

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

type Work = Box<dyn FnOnce() + Send>;

/// Niceness of the pool's threads (higher is lower priority).
const NICENESS: i32 = 10;

fn pool() -> &'static Mutex<mpsc::Sender<Work>> {
    static POOL: OnceLock<Mutex<mpsc::Sender<Work>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Work>();
        let rx = std::sync::Arc::new(Mutex::new(rx));
        let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
        for i in 0..threads {
            let rx = rx.clone();
            std::thread::Builder::new()
                .name(format!("settee-bg-{i}"))
                .spawn(move || {
                    lower_priority();
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

/// Lowers the calling thread's scheduling priority (bulk work and database writer threads:
/// reads, answered on the event loop, go first when the CPU is short).
pub fn lower_priority() {
    // SAFETY: setpriority on this thread's id only changes its scheduling niceness.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, libc::gettid() as libc::id_t, NICENESS);
    }
}

/// Runs `f` on a low-priority thread and waits for its answer; `None` if it panicked.
pub async fn run<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Option<T> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Work = Box::new(move || {
        let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(out.ok());
    });
    pool().lock().expect("pool sender").send(job).ok()?;
    rx.await.ok().flatten()
}
