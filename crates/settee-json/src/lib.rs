//! The JSON side of CouchDB's document model, shared by the database layer and the HTTP API.
//!
//! * [`Rev`] and [`RevId`]: revision identifiers as CouchDB writes and parses them
//!   (`"3-1a2b…"`), ordered the way CouchDB picks a winning revision.
//! * [`new_rev_id`]: the content-derived revision id, computed as CouchDB does (an MD5 of the
//!   Erlang external term of the edit), so the same edit gives the same id on any server.
//! * [`body`]: stored document bodies are compact JSON objects without the `_`-prefixed
//!   metadata; [`body::splice`] puts `_id`/`_rev` back in front without parsing them.
//!
//! * [`deep`]: parsing JSON that nests deeply (documents may) without overflowing a stack.
//! * [`transcode`]: a document's text read in one pass into its stored body and revision
//!   term, for the plain documents bulk writes bring by the thousand.
//! * [`outline`]: where an object's members and an array's items are in a text, found
//!   without building values (a bulk body split into its documents' texts).
//! * [`collate`]: CouchDB's collation of JSON values (view keys, Mango comparisons).
//! * [`viewkey`]: view keys encoded so that byte order is that collation.
//!
//! This crate knows JSON and CouchDB's conventions; it knows nothing of storage or HTTP.

#![deny(missing_docs)]

pub mod body;
pub mod collate;
pub mod deep;
mod error;
pub mod outline;
mod rev;
mod term;
pub mod transcode;
pub mod viewkey;

pub use error::Error;
pub use rev::{Rev, RevId};
pub use term::{new_rev_id, presume_many, AttDigest, EditTerm, Term};

/// Re-exported so dependants name one JSON value type.
pub use serde_json::{Map, Value};
