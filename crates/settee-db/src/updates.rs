//! Index updates shared by everyone waiting for them: one update of an index runs at a
//! time, on a thread of its own; clients that need the index current wait for that run
//! (starting another when it ends short of what they need), and a failure reaches the
//! clients whose wait it ended. Views and search indexes both build this way.

use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The updates of one index; `E` is its error.
pub struct Updates<E> {
    inner: Arc<Inner<E>>,
}

struct Inner<E> {
    state: Mutex<State<E>>,
    /// Bumped after every batch an update writes and when it ends.
    changed: watch::Sender<u64>,
}

struct State<E> {
    running: bool,
    started: u64,
    last_error: Option<(u64, Arc<E>)>,
    waiting: u64,
}

/// Why a wait ended without the index current.
#[derive(Debug)]
pub enum WaitError<E> {
    /// The update started for this wait failed with this error.
    Failed(Arc<E>),
    /// The check of whether the index is current failed.
    Check(E),
}

impl<E> Default for Updates<E> {
    fn default() -> Updates<E> {
        Updates {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    running: false,
                    started: 0,
                    last_error: None,
                    waiting: 0,
                }),
                changed: watch::Sender::new(0),
            }),
        }
    }
}

/// Counts a client as waiting while it lives.
struct Waiting<'a, E>(&'a Inner<E>);

impl<E> Drop for Waiting<'_, E> {
    fn drop(&mut self) {
        if let Ok(mut st) = self.0.state.lock() {
            st.waiting = st.waiting.saturating_sub(1);
        }
    }
}

impl<E: Send + Sync + 'static> Updates<E> {
    /// Starts `run` on a thread named `thread` unless an update runs; the run's number
    /// (the running one's when one runs). `run` logs its own failure, with what it knows.
    pub fn start(&self, thread: &str, run: impl FnOnce() -> Result<(), E> + Send + 'static) -> u64 {
        let mut st = self.inner.state.lock().expect("updates lock");
        if st.running {
            return st.started;
        }
        st.running = true;
        st.started += 1;
        let number = st.started;
        drop(st);
        let inner = self.inner.clone();
        std::thread::Builder::new()
            .name(thread.into())
            // Native maps compile selectors, which recurse per level of nesting.
            .stack_size(16 << 20)
            .spawn(move || {
                let result = run();
                let mut st = inner.state.lock().expect("updates lock");
                st.running = false;
                if let Err(e) = result {
                    st.last_error = Some((number, Arc::new(e)));
                }
                drop(st);
                inner.changed.send_modify(|v| *v += 1);
            })
            .expect("an index update thread");
        number
    }

    /// Tells waiting clients that the index moved.
    pub fn moved(&self) {
        self.inner.changed.send_modify(|v| *v += 1);
    }

    /// Waits until `current` says the index is current, starting updates with `start` (which
    /// calls [`Updates::start`]) as long as one is needed.
    pub async fn wait(
        &self,
        current: impl Fn() -> Result<bool, E>,
        start: impl Fn() -> u64,
    ) -> Result<(), WaitError<E>> {
        let inner = &self.inner;
        inner.state.lock().expect("updates lock").waiting += 1;
        let _waiting = Waiting(inner);
        loop {
            let mut rx = inner.changed.subscribe();
            if current().map_err(WaitError::Check)? {
                return Ok(());
            }
            let run = start();
            loop {
                // The sender lives as long as `self`: `changed` cannot fail while we wait.
                let _ = rx.changed().await;
                if current().map_err(WaitError::Check)? {
                    return Ok(());
                }
                let st = inner.state.lock().expect("updates lock");
                if let Some((failed, e)) = &st.last_error {
                    if *failed >= run {
                        return Err(WaitError::Failed(e.clone()));
                    }
                }
                if !st.running {
                    break;
                }
            }
        }
    }

    /// Whether an update runs.
    pub fn running(&self) -> bool {
        self.inner.state.lock().expect("updates lock").running
    }

    /// Clients waiting for the index.
    pub fn waiting(&self) -> u64 {
        self.inner.state.lock().expect("updates lock").waiting
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[tokio::test]
    async fn waiters_share_one_run_and_see_its_failure() {
        let updates: Arc<Updates<String>> = Arc::new(Updates::default());
        let position = Arc::new(AtomicU64::new(0));
        let runs = Arc::new(AtomicU64::new(0));
        let start = || {
            let (p, r) = (position.clone(), runs.clone());
            updates.start("test-update", move || {
                r.fetch_add(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(50));
                p.store(10, Ordering::SeqCst);
                Ok(())
            })
        };
        let current = || Ok(position.load(Ordering::SeqCst) >= 10);
        let (a, b) = tokio::join!(updates.wait(current, start), updates.wait(current, start));
        assert!(a.is_ok() && b.is_ok());
        assert_eq!(runs.load(Ordering::SeqCst), 1);
        assert_eq!(updates.waiting(), 0);
        let fail = || updates.start("test-update", || Err("broken".to_string()));
        let never = || Ok(false);
        match updates.wait(never, fail).await {
            Err(WaitError::Failed(e)) => assert_eq!(*e, "broken"),
            other => panic!("{other:?}"),
        }
        assert!(!updates.running());
    }
}
