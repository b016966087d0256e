//! One engine per thread for work that runs where it is needed rather than in the pool
//! (reduce functions called by a tree writer or a query's thread).

use std::cell::RefCell;

use crate::engine::{Engine, Limits};
use crate::error::Result;

thread_local! {
    static ENGINE: RefCell<Option<Engine>> = const { RefCell::new(None) };
}

/// Runs `f` on this thread's engine (made on first use), under `limits`.
pub fn with_local_engine<R>(limits: Limits, f: impl FnOnce(&mut Engine) -> Result<R>) -> Result<R> {
    ENGINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(Engine::new(limits)?);
        }
        let engine = slot.as_mut().expect("made above");
        engine.set_limits(limits);
        let out = f(engine);
        // An engine a call failed on is replaced before the next call.
        if engine.is_spent() {
            *slot = None;
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_engine_is_kept_per_thread() {
        let src = "function(k, v) { return sum(v); }";
        let out = with_local_engine(Limits::default(), |e| {
            e.load_reduce(src)?;
            e.reduce(src, None, "[1,2]".into(), true)
        });
        assert_eq!(out.unwrap(), "3");
        let again = with_local_engine(Limits::default(), |e| {
            e.reduce(src, None, "[4]".into(), true)
        });
        assert_eq!(again.unwrap(), "4", "the compiled function is still loaded");
    }
}
