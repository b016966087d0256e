//! Design document JavaScript, run in-process: CouchDB's map/reduce environment (`emit`,
//! `log`, `sum`, `toJSON`, `isArray`, CommonJS `require` over `views.lib`) on embedded
//! QuickJS engines.
//!
//! Documents cross into an engine in batches, as JSON text that the engine parses itself,
//! and emitted rows come back as one JSON text per batch: no per-document round trip through
//! a generic value tree, and no external process. Every call runs under a time limit
//! (CouchDB's `os_process_timeout`) and every engine under a heap limit; JavaScript has no
//! file, network or process access.
//!
//! * [`Engine`]: one runtime, owned by one thread.
//! * [`Pool`]: one engine per worker thread, for mapping in parallel.
//! * [`with_local_engine`]: the calling thread's own engine, for reduce functions.

#![deny(missing_docs)]

mod engine;
mod error;
mod local;
mod pool;

pub use engine::{Engine, Limits, ListIo, Render};
pub use error::{Error, Result};
pub use local::with_local_engine;
pub use pool::{wait, Pool};

/// The embedded QuickJS engine's version (`/_node/{node}/_versions`).
pub fn engine_version() -> String {
    // SAFETY: `JS_GetVersion` returns a pointer to a static NUL-terminated string.
    let version = unsafe { std::ffi::CStr::from_ptr(rquickjs::qjs::JS_GetVersion()) };
    version.to_string_lossy().into_owned()
}
