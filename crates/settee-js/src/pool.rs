//! A fixed set of threads, each owning one engine, that run jobs in the order they arrive:
//! map batches from indexers spread over every core.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use crate::engine::{Engine, Limits};
use crate::error::{Error, Result};

type Job = Box<dyn FnOnce(Result<&mut Engine>) + Send>;

/// Limits shared by the pool and its workers; a change applies from the next job.
#[derive(Debug)]
struct SharedLimits {
    timeout_ms: AtomicU64,
    memory: AtomicUsize,
}

impl SharedLimits {
    fn get(&self) -> Limits {
        Limits {
            timeout: Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed)),
            memory: self.memory.load(Ordering::Relaxed),
        }
    }
}

/// A pool of JavaScript engines, one per worker thread.
pub struct Pool {
    jobs: Mutex<Sender<Job>>,
    limits: Arc<SharedLimits>,
    workers: usize,
}

impl Pool {
    /// Starts `workers` threads (at least one), each with its own engine.
    pub fn new(workers: usize, limits: Limits) -> Pool {
        let (tx, rx) = channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let shared = Arc::new(SharedLimits {
            timeout_ms: AtomicU64::new(0),
            memory: AtomicUsize::new(0),
        });
        let pool = Pool {
            jobs: Mutex::new(tx),
            limits: shared,
            workers: workers.max(1),
        };
        pool.set_limits(limits);
        for n in 0..pool.workers {
            let (rx, limits) = (rx.clone(), pool.limits.clone());
            thread::Builder::new()
                .name(format!("settee-js-{n}"))
                .stack_size(8 << 20)
                .spawn(move || work(&rx, &limits))
                .expect("a JavaScript worker thread");
        }
        pool
    }

    /// How many engines run jobs at once.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Changes the limits (CouchDB's `os_process_timeout` and the heap limit).
    pub fn set_limits(&self, limits: Limits) {
        self.limits.timeout_ms.store(
            limits.timeout.as_millis().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
        self.limits.memory.store(limits.memory, Ordering::Relaxed);
    }

    /// The limits jobs run under.
    pub fn limits(&self) -> Limits {
        self.limits.get()
    }

    /// Queues `f` to run on some worker's engine; the returned receiver yields its result.
    pub fn submit<R, F>(&self, f: F) -> Receiver<Result<R>>
    where
        R: Send + 'static,
        F: FnOnce(&mut Engine) -> Result<R> + Send + 'static,
    {
        let (tx, rx) = sync_channel(1);
        let job: Job = Box::new(move |engine| {
            let _ = tx.send(engine.and_then(f));
        });
        let sent = self
            .jobs
            .lock()
            .map(|jobs| jobs.send(job).is_ok())
            .unwrap_or(false);
        if !sent {
            let (tx, rx) = sync_channel(1);
            let _ = tx.send(Err(Error::Engine("the JavaScript pool has stopped".into())));
            return rx;
        }
        rx
    }

    /// Runs `f` on some worker's engine and waits for its result.
    pub fn run<R, F>(&self, f: F) -> Result<R>
    where
        R: Send + 'static,
        F: FnOnce(&mut Engine) -> Result<R> + Send + 'static,
    {
        wait(self.submit(f))
    }
}

/// Waits for a submitted job's result.
pub fn wait<R>(rx: Receiver<Result<R>>) -> Result<R> {
    rx.recv()
        .unwrap_or_else(|_| Err(Error::Engine("a JavaScript worker stopped".into())))
}

fn work(rx: &Mutex<Receiver<Job>>, limits: &SharedLimits) {
    let mut engine: Option<Engine> = None;
    loop {
        let job = match rx.lock() {
            Ok(rx) => match rx.recv() {
                Ok(job) => job,
                Err(_) => return,
            },
            Err(_) => return,
        };
        let wanted = limits.get();
        if engine.is_none() {
            engine = Engine::new(wanted)
                .map_err(|e| tracing::error!("cannot start a JavaScript engine: {e}"))
                .ok();
        }
        match engine.as_mut() {
            Some(e) => {
                e.set_limits(wanted);
                job(Ok(e));
            }
            None => job(Err(Error::Engine(
                "no JavaScript engine could be started".into(),
            ))),
        }
        // An engine a call failed on is replaced before the next job.
        if engine.as_ref().is_some_and(Engine::is_spent) {
            engine = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_run_on_every_worker_and_return_results() {
        let pool = Pool::new(2, Limits::default());
        let pending: Vec<_> = (0..8)
            .map(|n| {
                pool.submit(move |e| {
                    let key = format!("p{n}");
                    let src = format!("function(doc) {{ emit(doc.x * {n}, null); }}");
                    e.load_map(&key, &[src.as_str()], "null")?;
                    e.map_docs(&key, r#"[{"x":2}]"#.to_string())
                })
            })
            .collect();
        for (n, rx) in pending.into_iter().enumerate() {
            assert_eq!(wait(rx).unwrap(), format!("[[[[{},null]]]]", 2 * n));
        }
    }

    #[test]
    fn limits_apply_to_later_jobs() {
        let pool = Pool::new(1, Limits::default());
        pool.set_limits(Limits {
            timeout: Duration::from_millis(100),
            ..Limits::default()
        });
        let out = pool.run(|e| {
            e.load_map("spin", &["function(doc) { for (;;) {} }"], "null")?;
            e.map_docs("spin", "[{}]".into())
        });
        assert_eq!(out, Err(Error::Timeout(Duration::from_millis(100))));
    }

    #[test]
    fn an_engine_a_function_filled_is_replaced_before_the_next_job() {
        let pool = Pool::new(
            1,
            Limits {
                memory: 16 << 20,
                ..Limits::default()
            },
        );
        // Each document's exception is caught by the environment, so the call succeeds,
        // leaving the heap full of what the global holds.
        let hoard = "function(doc) { globalThis.h = globalThis.h || []; while (true) { globalThis.h.push(new Array(1000).fill(1)); } }";
        let out = pool.run(move |e| {
            e.load_map("hoard", &[hoard], "null")?;
            e.map_docs("hoard", "[{},{}]".into())
        });
        assert_eq!(out.unwrap(), "[[[]],[[]]]");
        let out = pool.run(|e| {
            e.load_map(
                "after",
                &["function(doc) { emit(typeof globalThis.h, new Array(1000).fill(2).length); }"],
                "null",
            )?;
            e.map_docs("after", "[{}]".into())
        });
        assert_eq!(
            out.unwrap(),
            r#"[[[["undefined",1000]]]]"#,
            "a fresh engine"
        );
    }

    #[test]
    fn functions_cannot_hide_that_the_heap_ran_out() {
        let pool = Pool::new(
            1,
            Limits {
                memory: 16 << 20,
                ..Limits::default()
            },
        );
        let hoard = "function(doc) { try { __note = function () {}; __exhausted = function () {}; } catch (e) {} globalThis.h = globalThis.h || []; while (true) { globalThis.h.push(new Array(1000).fill(1)); } }";
        pool.run(move |e| {
            e.load_map("hoard", &[hoard], "null")?;
            e.map_docs("hoard", "[{}]".into())
        })
        .unwrap();
        let out = pool.run(|e| {
            e.load_map(
                "after",
                &["function(doc) { emit(typeof globalThis.h, null); }"],
                "null",
            )?;
            e.map_docs("after", "[{}]".into())
        });
        assert_eq!(
            out.unwrap(),
            r#"[[[["undefined",null]]]]"#,
            "a fresh engine"
        );
    }
}
