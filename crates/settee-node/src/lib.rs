//! A CouchDB node below HTTP: the databases and what a node does with them.
//!
//! [`Node`] holds the databases catalog, the configuration, the views registry with its
//! JavaScript engines and query servers, and the rules every document write and read
//! follows: security objects, the users database (passwords hashed), `_replicator`
//! ownership, `validate_doc_update` and per-user databases. Documents are written only
//! through [`Node::update_docs`], and shown through [`Node::visible_doc`], so the HTTP edge,
//! the replicator and later a cluster coordinator all follow the same rules. Background
//! services (automatic compaction) run here too.

#![deny(missing_docs)]

mod background;
mod config;
pub mod db_updates;
mod design;
mod error;
mod indexes;
mod peruser;
mod policy;
mod read;
mod render;
mod replicator;
pub mod security;
pub mod smoosh;
mod start;
pub mod stats;
mod users;
mod uuids;
mod validate;
mod write;

use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwap;
use settee_config::Config;
use settee_db::{Catalog, DocLimits};
use settee_views::Views;

pub use background::run as run_in_background;
pub use background::start as start_in_background;
pub use background::threads as background_threads;
pub use config::check_config_key;
pub use error::{Error, Result};
pub use peruser::db_name as peruser_db_name;
pub use policy::{users_db, PerUser, Policy};
pub use read::Visibility;
pub use render::DesignFunction;
pub use replicator::{is_replicator_db, strip_userinfo, REPLICATOR};
pub use start::{plaintext_admins, NodeOptions, Started};
pub use uuids::Uuids;

/// One CouchDB node: its databases and the services and rules around them.
pub struct Node {
    /// The databases.
    pub catalog: Catalog,
    /// The configuration file.
    pub config: RwLock<Config>,
    /// Map/reduce views, the JavaScript engines and the external query servers.
    pub views: Views,
    /// Full-text search indexes (`_search`, `_nouveau`), on the views' engines.
    pub search: settee_search::Search,
    /// Document limits and the attachment policy.
    pub limits: DocLimits,
    /// Document id generator (`[uuids] algorithm`).
    pub uuids: Mutex<Uuids>,
    /// What the document rules read, parsed again when the configuration changes.
    policy: ArcSwap<Policy>,
    /// What automatic compaction follows, parsed again when the configuration changes.
    smoosh: ArcSwap<smoosh::Plan>,
    /// Database events not yet written to `_global_changes` (`_db_updates`).
    db_events: Arc<db_updates::Pending>,
    /// What the binary applies after each configuration change (logging).
    on_config: Option<fn(&settee_config::Config)>,
}

impl Node {
    /// The document rules' settings as of the last configuration change.
    pub fn policy(&self) -> Arc<Policy> {
        self.policy.load_full()
    }

    /// A new document id.
    pub fn new_uuid(&self) -> String {
        self.uuids.lock().expect("uuid lock").next_id()
    }
}
