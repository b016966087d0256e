//! Settee's replicator: CouchDB's replication protocol between two endpoints, each a
//! database of this node or of any CouchDB-compatible server.
//!
//! - [`spec`] reads what a replication is asked to do (`_replicate` bodies, `_replicator`
//!   documents) and [`id`] derives its replication id as CouchDB 3 does;
//! - [`endpoint`] is what the protocol needs of a database, with [`local`] and [`remote`]
//!   implementations;
//! - [`job`] runs one replication (workers, checkpoints), keeping its logs in CouchDB's
//!   format ([`checkpoint`]);
//! - [`scheduler`] runs the node's jobs: `_replicate`, replicator documents, CouchDB's job
//!   states, backoff and limits, and what `/_scheduler` and `/_active_tasks` show.

#![deny(missing_docs)]

pub mod checkpoint;
mod continuous;
pub mod endpoint;
pub mod error;
pub mod id;
pub mod job;
pub mod local;
pub mod remote;
pub mod scheduler;
pub mod spec;

pub use error::{Error, Result};
pub use scheduler::Replicator;
pub use settee_node::is_replicator_db;
pub use spec::{ReplicationSpec, Settings};
