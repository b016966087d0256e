//! The configured query servers and their idle processes: a process is lent to one caller
//! at a time and comes back to the pool when the caller is done, unless it failed.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{Error, Result};
use crate::process::Process;

/// Every external query server, by language.
pub struct QueryServers {
    commands: RwLock<HashMap<String, String>>,
    idle: Mutex<HashMap<String, Vec<Process>>>,
    timeout_ms: AtomicU64,
    reduce_limit: AtomicBool,
    /// Most idle processes kept per language (CouchDB's `os_process_soft_limit`).
    keep_idle: AtomicUsize,
}

impl Default for QueryServers {
    fn default() -> QueryServers {
        QueryServers {
            commands: RwLock::default(),
            idle: Mutex::default(),
            timeout_ms: AtomicU64::new(5000),
            reduce_limit: AtomicBool::new(true),
            keep_idle: AtomicUsize::new(100),
        }
    }
}

impl QueryServers {
    /// Sets the command line of every language; processes of a language whose command
    /// changed are stopped as they come back.
    pub fn set_commands(&self, commands: HashMap<String, String>) {
        *self.commands.write().expect("commands lock") = commands
            .into_iter()
            .map(|(lang, command)| (lang.to_ascii_lowercase(), command))
            .collect();
        let commands = self.commands.read().expect("commands lock");
        self.idle
            .lock()
            .expect("idle lock")
            .retain(|lang, _| commands.contains_key(lang));
    }

    /// Sets CouchDB's `os_process_timeout` (every command's time limit), `reduce_limit` (told
    /// to processes on `reset`) and `os_process_soft_limit` (idle processes kept).
    pub fn set_limits(&self, timeout: Duration, reduce_limit: bool, keep_idle: usize) {
        self.timeout_ms.store(
            timeout.as_millis().min(u128::from(u64::MAX)) as u64,
            Ordering::Relaxed,
        );
        self.reduce_limit.store(reduce_limit, Ordering::Relaxed);
        self.keep_idle.store(keep_idle, Ordering::Relaxed);
    }

    /// Whether `language` has a query server (languages are case-insensitive).
    pub fn has(&self, language: &str) -> bool {
        self.commands
            .read()
            .expect("commands lock")
            .contains_key(&language.to_ascii_lowercase())
    }

    /// The time limit of one command.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.load(Ordering::Relaxed))
    }

    /// The configuration sent with `reset`.
    pub fn reset_config(&self) -> Value {
        json!({"reduce_limit": self.reduce_limit.load(Ordering::Relaxed), "timeout": self.timeout_ms.load(Ordering::Relaxed)})
    }

    /// A process for `language`: an idle one, or a new one.
    pub fn checkout(&self, language: &str) -> Result<Lease<'_>> {
        let language = &language.to_ascii_lowercase();
        let command = self
            .commands
            .read()
            .expect("commands lock")
            .get(language)
            .cloned()
            .ok_or_else(|| Error::UnknownLanguage(language.into()))?;
        let reused = {
            let mut idle = self.idle.lock().expect("idle lock");
            let list = idle.entry(language.to_string()).or_default();
            list.retain(|p| p.command() == command);
            list.pop()
        };
        let process = match reused {
            Some(p) => p,
            None => Process::spawn(&command)?,
        };
        Ok(Lease {
            servers: self,
            language: language.to_string(),
            process: Some(process),
        })
    }

    fn give_back(&self, language: String, process: Process) {
        if process.is_broken() {
            return;
        }
        let mut idle = self.idle.lock().expect("idle lock");
        let list = idle.entry(language).or_default();
        if list.len() < self.keep_idle.load(Ordering::Relaxed) {
            list.push(process);
        }
    }

    /// Idle processes kept for `language` (for tests and `_active_tasks`-like reports).
    pub fn idle(&self, language: &str) -> usize {
        self.idle
            .lock()
            .expect("idle lock")
            .get(&language.to_ascii_lowercase())
            .map_or(0, Vec::len)
    }
}

/// A process lent to one caller; it goes back to the pool when dropped.
pub struct Lease<'a> {
    servers: &'a QueryServers,
    language: String,
    process: Option<Process>,
}

impl Lease<'_> {
    /// The time limit of one command.
    pub fn timeout(&self) -> Duration {
        self.servers.timeout()
    }

    /// The configuration sent with `reset`.
    pub fn reset_config(&self) -> Value {
        self.servers.reset_config()
    }
}

impl Deref for Lease<'_> {
    type Target = Process;
    fn deref(&self) -> &Process {
        self.process.as_ref().expect("a lent process")
    }
}

impl DerefMut for Lease<'_> {
    fn deref_mut(&mut self) -> &mut Process {
        self.process.as_mut().expect("a lent process")
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(p) = self.process.take() {
            self.servers
                .give_back(std::mem::take(&mut self.language), p);
        }
    }
}
