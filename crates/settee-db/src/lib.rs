//! Databases as CouchDB defines them, on Settee's storage engine.
//!
//! A [`Catalog`] owns the databases of a data directory. A [`Database`] is `q` shard files;
//! each shard keeps documents by id with their full revision trees, a by-sequence index for
//! change feeds, and local documents (see `shard` and `record` for the stored formats).
//! Edits are validated ([`NewDoc`]), routed to their shard, and applied on the shard's writer
//! thread, where concurrent edits share one durable commit. Reads go through a
//! [`DbSnapshot`] and never wait for a writer.
//!
//! This crate knows CouchDB's document model; it knows nothing of HTTP.

#![deny(missing_docs)]

mod att;
mod catalog;
mod codec;
mod database;
mod doc;
mod edit_queue;
mod error;
mod read;
mod record;
mod revtree;
mod salvage;
mod seq;
mod shard;
mod tasks;
mod updates;
mod upload;

pub use att::{
    check_att_name, decode_bytes, AttInfo, AttPolicy, AttSource, Encoding, NewAtt, CHUNK,
};
pub use catalog::{
    database_dir, validate_name, Catalog, CatalogOptions, Creation, DbEvent, DbEvents,
    SYSTEM_DATABASES,
};
pub use database::{shard_index, Database};
pub use doc::{
    is_local, partition_of, validate_id, validate_partition, validate_partitioned_id, DocLimits,
    NewDoc, DESIGN_PREFIX, LOCAL_PREFIX,
};
pub use error::{Error, Result};
pub use read::{
    partition_range, sends_data, AllDocs, AllDocsOptions, ChangeRow, Changes, ChangesOptions,
    DbSnapshot, DocFilter, DocOptions, DocRow, FilterError, DESIGN_END,
};
pub use record::{Body, Counts, DocRecord, RevInfo};
pub use revtree::{Merged, RevNode, RevTree};
pub use salvage::{
    check_database, salvage_database, salvage_shard, FileCheck, Salvaged, ShardSalvage,
};
pub use seq::SeqVector;
pub use settee_store::Durability;
pub use shard::{EditMode, EditResult, ShardMeta};
pub use tasks::{TaskHandle, TaskInfo, Tasks};
pub use updates::{Updates, WaitError};
pub use upload::Uploader;
