//! External query servers: design documents whose `language` is not JavaScript run in child
//! processes (such as `couchpy` for Python) that speak CouchDB's line protocol (`reset`,
//! `add_lib`, `add_fun`, `map_doc`, `reduce`, `rereduce`, `ddoc`).
//!
//! * [`QueryServers`]: the command of each language (from `[query_servers]`) and a pool of
//!   idle processes per language, so that a process is started once and reused.
//! * [`Process`]: one child process; every command runs under `os_process_timeout`, and a
//!   process that times out or breaks the protocol is killed, never reused.

#![deny(missing_docs)]

mod error;
mod process;
mod servers;

pub use error::{Error, Result};
pub use process::{alive, Process};
pub use servers::{Lease, QueryServers};
