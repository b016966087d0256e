//! Running background tasks (compactions now; indexing and replication later), listed by
//! `/_active_tasks` with CouchDB's field names.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};

/// One running task.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskInfo {
    /// CouchDB's task type, e.g. `database_compaction`.
    pub kind: &'static str,
    /// The database it works on.
    pub database: String,
    /// The design document whose index it builds (indexer tasks).
    pub design_document: Option<String>,
    /// Work done so far.
    pub changes_done: u64,
    /// Work in total, as far as known.
    pub total_changes: u64,
    /// Unix seconds when it started.
    pub started_on: u64,
    /// Unix seconds of its latest progress.
    pub updated_on: u64,
}

impl TaskInfo {
    /// CouchDB's JSON for the task.
    pub fn to_json(&self, id: u64) -> Value {
        let progress = (self.changes_done * 100)
            .checked_div(self.total_changes)
            .unwrap_or(0)
            .min(100);
        let mut task = json!({
            "type": self.kind,
            "database": self.database,
            "changes_done": self.changes_done,
            "total_changes": self.total_changes,
            "progress": progress,
            "started_on": self.started_on,
            "updated_on": self.updated_on,
            "pid": format!("<0.{id}.0>"),
            "node": "settee@127.0.0.1",
        });
        if let Some(ddoc) = &self.design_document {
            task["design_document"] = json!(ddoc);
        }
        task
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The registry of running tasks.
#[derive(Default)]
pub struct Tasks {
    running: Mutex<BTreeMap<u64, TaskInfo>>,
    next: AtomicU64,
}

impl Tasks {
    /// Registers a task; it is listed until the handle is dropped.
    pub fn start(self: &Arc<Self>, kind: &'static str, database: &str) -> TaskHandle {
        self.start_for(kind, database, None, 0)
    }

    /// Registers a task working for one design document (an index build), with the changes
    /// it has to go through when they are known, so that it is never listed with none.
    pub fn start_for(
        self: &Arc<Self>,
        kind: &'static str,
        database: &str,
        design_document: Option<&str>,
        total_changes: u64,
    ) -> TaskHandle {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let t = now();
        let design_document = design_document.map(str::to_string);
        let info = TaskInfo {
            kind,
            database: database.to_string(),
            design_document,
            changes_done: 0,
            total_changes,
            started_on: t,
            updated_on: t,
        };
        self.running.lock().expect("tasks lock").insert(id, info);
        TaskHandle {
            tasks: self.clone(),
            id,
        }
    }

    /// The running tasks as CouchDB's JSON list.
    pub fn to_json(&self) -> Value {
        Value::Array(
            self.running
                .lock()
                .expect("tasks lock")
                .iter()
                .map(|(id, t)| t.to_json(*id))
                .collect(),
        )
    }

    /// The running tasks.
    pub fn list(&self) -> Vec<TaskInfo> {
        self.running
            .lock()
            .expect("tasks lock")
            .values()
            .cloned()
            .collect()
    }
}

/// A registered task; dropping it removes the task from the list.
pub struct TaskHandle {
    tasks: Arc<Tasks>,
    id: u64,
}

impl TaskHandle {
    /// Records progress.
    pub fn update(&self, done: u64, total: u64) {
        if let Some(t) = self
            .tasks
            .running
            .lock()
            .expect("tasks lock")
            .get_mut(&self.id)
        {
            t.changes_done = done;
            t.total_changes = total;
            t.updated_on = now();
        }
    }
}

impl Drop for TaskHandle {
    fn drop(&mut self) {
        self.tasks
            .running
            .lock()
            .expect("tasks lock")
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tasks_are_listed_while_their_handle_lives() {
        let tasks = Arc::new(Tasks::default());
        let a = tasks.start("database_compaction", "db");
        a.update(5, 10);
        let listed = tasks.to_json();
        assert_eq!(listed[0]["type"], "database_compaction");
        assert_eq!(listed[0]["progress"], 50);
        assert_eq!(listed[0]["database"], "db");
        assert!(listed[0].get("design_document").is_none());
        let b = tasks.start_for("indexer", "other", Some("_design/d"), 40);
        assert_eq!(tasks.to_json()[1]["design_document"], "_design/d");
        assert_eq!(tasks.to_json()[1]["total_changes"], 40);
        assert_eq!(tasks.list().len(), 2);
        drop(a);
        assert_eq!(tasks.list()[0].database, "other");
        drop(b);
        assert!(tasks.list().is_empty());
    }
}
