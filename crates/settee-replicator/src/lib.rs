//! Settee's replicator: CouchDB's replication protocol between two endpoints.
//!
//! Built in steps (issue 29). So far: the replication logs (checkpoints) both endpoints keep
//! under `_local/<replication id>`, in CouchDB's format, and how a replication finds where
//! to start from them ([`checkpoint`]).

#![deny(missing_docs)]

pub mod checkpoint;
