//! Starting a node: the configuration read (the first admin created, plaintext admin
//! passwords hashed, the node's uuid and cookie secret made once), the data directory
//! opened with the system databases, the view engines and query servers configured.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, RwLock};

use settee_auth::password::{hash_password, is_hashed, random_hex};
use settee_config::registry as setting;
use settee_config::Config;
use settee_db::{Catalog, CatalogOptions, DocLimits};
use settee_js::Limits;
use settee_queryserver::QueryServers;
use settee_store::{CallerTurn, NodeCache, StoreOptions};
use settee_views::{Views, ViewsConfig};

use crate::policy::{users_db, Policy};
use crate::replicator::REPLICATOR;
use crate::security::ADMIN_ONLY;
use crate::uuids::Uuids;
use crate::Node;

/// Where a node keeps its data and finds its configuration.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// The data directory.
    pub data_dir: PathBuf,
    /// The configuration file.
    pub config_path: PathBuf,
    /// Gives back to the system the memory the calling thread's allocator keeps for it;
    /// run by a database's writer thread once the database has gone quiet. The allocator is
    /// the binary's choice, so the binary says how.
    pub release_memory: Option<fn()>,
    /// Applies what the process owns in the configuration (logging), at start and after
    /// every change; the binary owns the process, so it says how.
    pub on_config: Option<fn(&Config)>,
    /// How many threads serve requests. With more than one, a lone small write may be
    /// committed by the thread that read it (no hand-off to the writer and back); with one,
    /// writes always go to their database's writer thread, since that thread waiting on
    /// the sync would hold up every other request.
    pub request_threads: usize,
}

/// A node just started, and an admin password generated on the first start, to show once.
pub struct Started {
    /// The node.
    pub node: Arc<Node>,
    /// `(name, password)` of an admin created with a generated password.
    pub generated_admin: Option<(String, String)>,
}

impl Node {
    /// Loads the configuration, creates the first admin if there is none (from `admin`,
    /// `user:password`, else with a random password), hashes plaintext admin passwords, and
    /// opens the data directory with the users and replicator databases.
    pub fn start(opts: &NodeOptions, admin: Option<String>) -> Result<Started, String> {
        crate::stats::mark_start();
        let mut config = Config::load(&opts.config_path)
            .map_err(|e| format!("reading {}: {e}", opts.config_path.display()))?;
        let save_err = |e: std::io::Error| format!("writing {}: {e}", opts.config_path.display());
        let generated_admin = first_admin(&mut config, admin).map_err(save_err)?;
        hash_plaintext_admins(&mut config).map_err(save_err)?;
        for (section, key, len) in [("couchdb", "uuid", 16), ("chttpd_auth", "secret", 32)] {
            if config.get(section, key).is_none() {
                config
                    .set(section, key, &random_hex(len))
                    .map_err(save_err)?;
            }
        }
        let db_events = Arc::new(crate::db_updates::Pending::default());
        let catalog = open_catalog(opts, &config, db_events.listener())?;
        for system in [users_db(&config), REPLICATOR.to_string()] {
            if catalog.get(&system).is_err() {
                catalog
                    .create_secured(&system, Some(1), ADMIN_ONLY.to_vec())
                    .map_err(|e| format!("creating {system}: {e}"))?;
            }
        }
        let servers = Arc::new(QueryServers::default());
        configure_query_servers(&servers, &config);
        let views = Views::new(ViewsConfig {
            workers: std::thread::available_parallelism().map_or(2, |n| n.get()),
            limits: js_limits(&config),
            reduce_limit: reduce_limit(&config),
            store: catalog.store_options().clone(),
            servers,
            natives: settee_mango::native_languages(),
        });
        let algorithm = config.get("uuids", "algorithm").unwrap_or("sequential");
        let search = settee_search::Search::new(views.pool().clone())
            .with_native(Arc::new(settee_mango::text_fields));
        let node = Node {
            catalog,
            views,
            search,
            limits: doc_limits(&config),
            uuids: Mutex::new(Uuids::new(algorithm)),
            policy: arc_swap::ArcSwap::from_pointee(Policy::from_config(&config)),
            smoosh: arc_swap::ArcSwap::from_pointee(crate::smoosh::Plan::from_config(&config)),
            config: RwLock::new(config),
            db_events,
            on_config: opts.on_config,
        };
        if let Some(apply) = node.on_config {
            apply(&node.config.read().expect("config lock"));
        }
        Ok(Started {
            node: Arc::new(node),
            generated_admin,
        })
    }

    /// Applies configuration that takes effect while running (after a configuration change).
    pub fn apply_config(&self) {
        let config = self.config.read().expect("config lock");
        self.views.pool().set_limits(js_limits(&config));
        self.views.set_reduce_limit(reduce_limit(&config));
        configure_query_servers(self.views.servers(), &config);
        self.policy.store(Arc::new(Policy::from_config(&config)));
        self.smoosh
            .store(Arc::new(crate::smoosh::Plan::from_config(&config)));
        if let Some(apply) = self.on_config {
            apply(&config);
        }
    }

    /// How many files the open databases may hold at once: each its shards and, say, one
    /// index file (for sizing the other limits of the process around them).
    pub fn database_files(&self) -> usize {
        let config = self.config.read().expect("config lock");
        let q = config.value::<usize>(&setting::CLUSTER_Q).max(1);
        let open = config.value::<usize>(&setting::MAX_DBS_OPEN).max(1);
        open.saturating_mul(q + 1)
    }
}

/// Creates the first admin when `[admins]` is empty: `user:password` from `admin`, else
/// `admin` with a random password, which is returned to be shown once.
fn first_admin(
    config: &mut Config,
    admin: Option<String>,
) -> std::io::Result<Option<(String, String)>> {
    if !config.section("admins").is_none_or(<[_]>::is_empty) {
        return Ok(None);
    }
    let iterations = config.value::<u32>(&setting::ITERATIONS);
    let (name, password, generated) = match admin.as_deref().and_then(|v| v.split_once(':')) {
        Some((n, p)) if !n.is_empty() && !p.is_empty() => (n.to_string(), p.to_string(), false),
        _ => ("admin".to_string(), random_hex(12), true),
    };
    config.set("admins", &name, &hash_password(&password, iterations))?;
    Ok(generated.then_some((name, password)))
}

/// The `[admins]` whose passwords are in plaintext (written into the file by hand), with
/// those passwords.
pub fn plaintext_admins(config: &Config) -> Vec<(String, String)> {
    config
        .section("admins")
        .unwrap_or(&[])
        .iter()
        .filter(|(_, v)| !is_hashed(v))
        .cloned()
        .collect()
}

/// Replaces the plaintext passwords of `[admins]` by their hashes, in the file too, as
/// CouchDB does when it reads them.
fn hash_plaintext_admins(config: &mut Config) -> std::io::Result<()> {
    let iterations = config.value::<u32>(&setting::ITERATIONS);
    for (name, password) in plaintext_admins(config) {
        config.set("admins", &name, &hash_password(&password, iterations))?;
    }
    Ok(())
}

/// Opens the data directory's databases, telling `events` of what happens to them.
fn open_catalog(
    opts: &NodeOptions,
    config: &Config,
    events: settee_db::DbEvents,
) -> Result<Catalog, String> {
    let cache_mb = config.value::<u64>(&setting::CACHE_MB);
    let options = CatalogOptions {
        q: config.value::<usize>(&setting::CLUSTER_Q).max(1),
        max_dbs_open: config.value::<usize>(&setting::MAX_DBS_OPEN).max(1),
        store: StoreOptions {
            cache: NodeCache::new(cache_mb << 20),
            on_writer_start: Some(Arc::new(crate::background::lower_priority)),
            caller_turn: if opts.request_threads > 1 {
                CallerTurn::default()
            } else {
                CallerTurn::never()
            },
            on_writer_quiet: opts
                .release_memory
                .map(|f| Arc::new(f) as Arc<dyn Fn() + Send + Sync>),
            ..StoreOptions::default()
        },
        events: Some(events),
    };
    Catalog::open(&opts.data_dir, options)
        .map_err(|e| format!("opening {}: {e}", opts.data_dir.display()))
}

/// Document limits and the attachment policy (`[couchdb] max_document_size` and
/// `max_document_id_length`, `[attachments]`).
fn doc_limits(config: &Config) -> DocLimits {
    let mut atts = settee_db::AttPolicy::default();
    if let Some(types) = config.get("attachments", "compressible_types") {
        atts.compressible_types = types
            .split(',')
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .collect();
    }
    atts.compression_level = config.value(&setting::COMPRESSION_LEVEL);
    DocLimits {
        max_document_size: config.value::<usize>(&setting::MAX_DOCUMENT_SIZE),
        atts,
        // `infinity`, CouchDB's default, or anything else that is not a length: no limit.
        max_document_id_length: config
            .get("couchdb", "max_document_id_length")
            .and_then(|v| v.trim().parse().ok()),
    }
}

/// JavaScript limits from `[couchdb] os_process_timeout` (ms) and `[settee] js_memory_mb`.
fn js_limits(config: &Config) -> Limits {
    Limits {
        timeout: std::time::Duration::from_millis(
            config.value::<u64>(&setting::OS_PROCESS_TIMEOUT).max(1),
        ),
        memory: config.value::<usize>(&setting::JS_MEMORY_MB).max(8) << 20,
    }
}

/// `[query_server_config] reduce_limit`: on unless `false` (or `log`, which only logs).
fn reduce_limit(config: &Config) -> bool {
    config
        .get("query_server_config", "reduce_limit")
        .is_none_or(|v| v.trim() == "true")
}

/// External query servers by language: `COUCHDB_QUERY_SERVER_{LANG}` environment variables,
/// overridden by the `[query_servers]` section. JavaScript always runs in-process.
fn query_servers(config: &Config) -> HashMap<String, String> {
    let mut servers: HashMap<String, String> = std::env::vars()
        .filter_map(|(k, v)| {
            let lang = k.strip_prefix("COUCHDB_QUERY_SERVER_")?;
            Some((lang.to_ascii_lowercase(), v))
        })
        .collect();
    for (lang, command) in config.section("query_servers").unwrap_or_default() {
        servers.insert(lang.to_ascii_lowercase(), command.clone());
    }
    servers.retain(|lang, command| lang != "javascript" && !command.trim().is_empty());
    servers
}

/// Applies the query-server settings of `config` to `servers`.
fn configure_query_servers(servers: &QueryServers, config: &Config) {
    servers.set_commands(query_servers(config));
    let timeout =
        std::time::Duration::from_millis(config.value::<u64>(&setting::OS_PROCESS_TIMEOUT).max(1));
    servers.set_limits(
        timeout,
        reduce_limit(config),
        config.value::<usize>(&setting::OS_PROCESS_SOFT_LIMIT),
    );
}
