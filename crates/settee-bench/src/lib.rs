//! `settee bench`: CouchDB's published performance workloads against any CouchDB-compatible
//! server (Settee, Apache CouchDB, pouchdb-server, ...), one server or two side by side, with
//! every answer verified: a fast wrong answer is a failure, not a result.
//!
//! * [`client`]: one keep-alive HTTP/1.1 connection per virtual client.
//! * [`workloads`]: the workloads, each with its published parameters.
//! * [`report`]: results as a table with ratios, or JSON.

#![deny(missing_docs)]

pub mod client;
mod error;
pub mod report;
pub mod workloads;

pub use error::{Error, Result};
