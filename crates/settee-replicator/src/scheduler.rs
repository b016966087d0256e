//! The replication scheduler: every job of this node, whether from `POST /_replicate` or a
//! document of a `_replicator` database, in CouchDB's states (`pending`, `running`,
//! `crashing`, `error`, `completed`, `failed`). At most `[replicator] max_jobs` run at once;
//! every `interval` up to `max_churn` running jobs make way for waiting ones; a job that
//! fails with a transient error is retried with exponential backoff, one that fails for good
//! is `failed`. Replication documents are watched through their databases' changes: a new
//! document starts a job, an update restarts it, a deletion stops it, and one-shot jobs
//! record `completed` or `failed` in their document, as CouchDB does.

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use settee_auth::User;
use settee_config::registry;
use settee_db::{ChangesOptions, Database, DocOptions, Durability, EditMode, NewDoc, SeqVector};
use settee_node::{is_replicator_db, Node};
use tokio::sync::{watch, Notify};

use crate::endpoint::{Endpoint, Filter};
use crate::error::{Error, Result};
use crate::job::{Job, Stats};
use crate::local::LocalDb;
use crate::remote::RemoteDb;
use crate::spec::{ReplicationSpec, Settings};

/// A job's state, as `_scheduler/docs` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobState {
    /// Waiting for a slot.
    Pending,
    /// Running.
    Running,
    /// Failed with a transient error; retried after a backoff.
    Crashing,
    /// A one-shot replication that finished.
    Completed,
    /// Could not be run at all (a malformed document).
    Failed,
}

impl JobState {
    /// CouchDB's name of the state.
    pub fn name(self) -> &'static str {
        match self {
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Crashing => "crashing",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
        }
    }
}

/// Where a job came from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Origin {
    /// A document of a replicator database.
    Doc { db: String, doc_id: String },
    /// `POST /_replicate`.
    Replicate,
}

/// What changes while a job lives.
struct Status {
    state: JobState,
    reason: Option<String>,
    error_count: u32,
    /// Newest first: `(time, type, reason)`.
    history: VecDeque<(String, &'static str, Option<String>)>,
    start_time: String,
    last_updated: String,
    started_on: u64,
    updated_on: u64,
    next_try: Option<Instant>,
    running_since: Option<Instant>,
    stop: Option<watch::Sender<bool>>,
    /// Set once the job is gone (document deleted or changed, replication cancelled): it
    /// must not start again.
    retired: bool,
}

/// One job of the scheduler.
struct Entry {
    /// How many events its history keeps (`[replicator] max_history`).
    max_history: usize,
    origin: Origin,
    spec: Option<ReplicationSpec>,
    user: Option<User>,
    rep_id: Mutex<Option<String>>,
    stats: Arc<Mutex<Stats>>,
    status: Mutex<Status>,
}

/// A one-shot `_replicate` job's place in the list, removed when dropped.
struct Listed<'a> {
    jobs: &'a Mutex<BTreeMap<String, Arc<Entry>>>,
    key: String,
}

impl Drop for Listed<'_> {
    fn drop(&mut self) {
        self.jobs.lock().expect("jobs").remove(&self.key);
    }
}

/// The node's replicator.
pub struct Replicator {
    node: Arc<Node>,
    jobs: Mutex<BTreeMap<String, Arc<Entry>>>,
    watched: Mutex<HashSet<String>>,
    wake: Notify,
    last_rotation: Mutex<Instant>,
}

/// Unix seconds now.
fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `2026-11-26T23:30:13Z`, as the scheduler's timestamps are written.
pub fn iso_time(unix: u64) -> String {
    let (year, month, day) = settee_auth::cookie::civil_date((unix / 86_400) as i64);
    let secs = unix % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// How long a job must run before a crash counts as its first again.
const HEALTHY: Duration = Duration::from_secs(30);

fn doc_key(db: &str, doc_id: &str) -> String {
    format!("doc\u{0}{db}\u{0}{doc_id}")
}

/// Waits before the `n`th retry of a crashing job: 1 s doubling, at most 10 minutes.
fn backoff(n: u32) -> Duration {
    Duration::from_secs((1u64 << n.saturating_sub(1).min(10)).min(600))
}

impl Entry {
    fn new(
        origin: Origin,
        spec: Option<ReplicationSpec>,
        user: Option<User>,
        max_history: usize,
    ) -> Entry {
        let now = unix_now();
        Entry {
            max_history,
            origin,
            spec,
            user,
            rep_id: Mutex::new(None),
            stats: Arc::new(Mutex::new(Stats::default())),
            status: Mutex::new(Status {
                state: JobState::Pending,
                reason: None,
                error_count: 0,
                history: VecDeque::from([(iso_time(now), "added", None)]),
                start_time: iso_time(now),
                last_updated: iso_time(now),
                started_on: now,
                updated_on: now,
                next_try: None,
                running_since: None,
                stop: None,
                retired: false,
            }),
        }
    }

    fn set(&self, state: JobState, event: &'static str, reason: Option<String>) {
        let mut s = self.status.lock().expect("status");
        let now = unix_now();
        s.state = state;
        s.reason = reason.clone();
        s.last_updated = iso_time(now);
        s.updated_on = now;
        s.history.push_front((iso_time(now), event, reason));
        s.history.truncate(self.max_history.max(1));
    }

    /// Stops the job if it runs (to start again later).
    fn stop(&self) {
        if let Some(stop) = self.status.lock().expect("status").stop.take() {
            stop.send(true).ok();
        }
    }

    /// Stops the job for good.
    fn retire(&self) {
        let mut s = self.status.lock().expect("status");
        s.retired = true;
        if let Some(stop) = s.stop.take() {
            stop.send(true).ok();
        }
    }

    fn state(&self) -> JobState {
        self.status.lock().expect("status").state
    }

    fn endpoints(&self) -> (Value, Value) {
        let show = |e: Option<&crate::spec::EndpointSpec>| {
            e.map_or(Value::Null, |e| {
                let d = e.display();
                json!(if e.is_local() || d.ends_with('/') {
                    d
                } else {
                    d + "/"
                })
            })
        };
        let spec = self.spec.as_ref();
        (show(spec.map(|s| &s.source)), show(spec.map(|s| &s.target)))
    }
}

impl Replicator {
    /// The replicator of `node`; [`Replicator::start`] sets it going.
    pub fn new(node: Arc<Node>) -> Arc<Replicator> {
        Arc::new(Replicator {
            node,
            jobs: Mutex::new(BTreeMap::new()),
            watched: Mutex::new(HashSet::new()),
            wake: Notify::new(),
            last_rotation: Mutex::new(Instant::now()),
        })
    }

    /// Starts the scheduler and the watch on replicator databases (on the current tokio
    /// runtime).
    pub fn start(self: &Arc<Self>) {
        let me = self.clone();
        tokio::spawn(async move { me.schedule_loop().await });
        let me = self.clone();
        tokio::spawn(async move { me.discover_loop().await });
    }

    /// A `[replicator]` number (the registry's default when unset or unreadable).
    fn number(&self, setting: &settee_config::Setting) -> u64 {
        self.node.config.read().expect("config lock").value(setting)
    }

    /// How many events a job's history keeps (`[replicator] max_history`).
    fn max_history(&self) -> usize {
        self.number(&registry::REPLICATOR_MAX_HISTORY) as usize
    }

    /// The job settings `[replicator]` gives.
    pub fn settings(&self) -> Settings {
        Settings::from_config(&self.node.config.read().expect("config lock"))
    }

    fn server_uuid(&self) -> String {
        let config = self.node.config.read().expect("config lock");
        config.get("couchdb", "uuid").unwrap_or("").to_string()
    }

    fn endpoint(
        &self,
        spec: &crate::spec::EndpointSpec,
        settings: &Settings,
        user: &Option<User>,
    ) -> Result<Arc<dyn Endpoint>> {
        Ok(if spec.is_local() {
            Arc::new(LocalDb::new(self.node.clone(), &spec.url, user.clone()))
        } else {
            Arc::new(RemoteDb::new(spec, settings)?)
        })
    }

    /// A job for `spec` run as `user`, with its replication id.
    async fn make_job(
        &self,
        spec: &ReplicationSpec,
        user: &Option<User>,
        stats: Arc<Mutex<Stats>>,
    ) -> Result<(Job, String)> {
        let source = self.endpoint(&spec.source, &spec.settings, user)?;
        let target = self.endpoint(&spec.target, &spec.settings, user)?;
        let code = match &spec.filter {
            Filter::Design { name, .. } => {
                let (ddoc, f) = name.split_once('/').unwrap_or((name, ""));
                Some(source.filter_code(ddoc, f).await?)
            }
            _ => None,
        };
        let (base_id, full_id) =
            crate::id::replication_id(&self.server_uuid(), spec, code.as_deref());
        let job = Job {
            spec: spec.clone(),
            base_id,
            source,
            target,
            stats,
        };
        Ok((job, full_id))
    }

    /// `POST /_replicate` as `user`: the status and body of CouchDB's answer.
    pub async fn replicate(
        self: &Arc<Self>,
        body: &Value,
        user: Option<User>,
    ) -> Result<(u16, Value)> {
        let spec = ReplicationSpec::parse(body, &self.settings())?;
        if spec.cancel {
            return self.cancel(&spec, &user).await;
        }
        let mut entry = Entry::new(
            Origin::Replicate,
            Some(spec.clone()),
            user.clone(),
            self.max_history(),
        );
        let (job, id) = self.make_job(&spec, &user, entry.stats.clone()).await?;
        *entry.rep_id.get_mut().expect("id") = Some(id.clone());
        if spec.continuous {
            entry.stats = Arc::new(Mutex::new(Stats::default()));
            let mut jobs = self.jobs.lock().expect("jobs");
            jobs.entry(id.clone()).or_insert(Arc::new(entry));
            drop(jobs);
            self.wake.notify_one();
            return Ok((202, json!({"ok": true, "_local_id": id})));
        }
        // A one-shot replication runs here, listed while it runs.
        let entry = Arc::new(entry);
        let key = format!("once\u{0}{id}\u{0}{}", crate::job::new_session_id());
        let (stop_tx, stop_rx) = watch::channel(false);
        entry.status.lock().expect("status").stop = Some(stop_tx);
        entry.set(JobState::Running, "started", None);
        self.jobs.lock().expect("jobs").insert(key.clone(), entry);
        // Unlisted when done, and also when the client goes away and the run is dropped.
        let _listed = Listed {
            jobs: &self.jobs,
            key,
        };
        let result = Arc::new(job).run(stop_rx).await;
        Ok((200, result?))
    }

    /// `_replicate` with `cancel`: stops the job described or named.
    async fn cancel(&self, spec: &ReplicationSpec, user: &Option<User>) -> Result<(u16, Value)> {
        let id = match &spec.replication_id {
            Some(id) => id.clone(),
            None => {
                let stats = Arc::new(Mutex::new(Stats::default()));
                self.make_job(spec, user, stats).await?.1
            }
        };
        let entry = self.jobs.lock().expect("jobs").remove(&id);
        match entry {
            Some(e) => {
                e.retire();
                Ok((200, json!({"ok": true, "_local_id": id})))
            }
            None => Err(Error::Peer {
                status: 404,
                error: "not_found".into(),
                reason: "missing".into(),
            }),
        }
    }

    async fn schedule_loop(self: Arc<Self>) {
        loop {
            self.schedule();
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = self.wake.notified() => {}
            }
        }
    }

    /// Starts what may start, and rotates running jobs when others wait.
    fn schedule(self: &Arc<Self>) {
        let max_jobs = self.number(&registry::REPLICATOR_MAX_JOBS) as usize;
        let interval = Duration::from_millis(self.number(&registry::REPLICATOR_INTERVAL));
        let max_churn = self.number(&registry::REPLICATOR_MAX_CHURN) as usize;
        let now = Instant::now();
        let jobs: Vec<Arc<Entry>> = self.jobs.lock().expect("jobs").values().cloned().collect();
        let mut running: Vec<&Arc<Entry>> = jobs
            .iter()
            .filter(|e| e.state() == JobState::Running)
            .collect();
        let mut waiting: Vec<&Arc<Entry>> = jobs
            .iter()
            .filter(|e| {
                let s = e.status.lock().expect("status");
                s.state == JobState::Pending
                    || (s.state == JobState::Crashing && s.next_try.is_none_or(|t| t <= now))
            })
            .collect();
        waiting.sort_by_key(|e| e.status.lock().expect("status").updated_on);
        let mut waiting = waiting.into_iter();
        while running.len() < max_jobs {
            let Some(e) = waiting.next() else { break };
            self.launch(e.clone());
            running.push(e);
        }
        let left: Vec<&Arc<Entry>> = waiting.collect();
        let mut last = self.last_rotation.lock().expect("rotation");
        if left.is_empty() || last.elapsed() < interval {
            return;
        }
        *last = now;
        running.sort_by_key(|e| e.status.lock().expect("status").running_since);
        for (old, new) in running
            .into_iter()
            // Only continuous jobs make way; one-shot ones run to the end.
            .filter(|e| e.spec.as_ref().is_some_and(|s| s.continuous))
            .zip(left)
            .take(max_churn)
        {
            old.stop();
            old.set(JobState::Pending, "stopped", None);
            settee_metrics::inc(settee_metrics::Metric::CouchReplicatorJobsStops);
            self.launch(new.clone());
        }
    }

    /// Runs `entry`'s job.
    fn launch(self: &Arc<Self>, entry: Arc<Entry>) {
        let (stop_tx, stop_rx) = watch::channel(false);
        {
            let mut s = entry.status.lock().expect("status");
            if s.retired {
                return;
            }
            s.stop = Some(stop_tx);
            s.running_since = Some(Instant::now());
        }
        entry.set(JobState::Running, "started", None);
        settee_metrics::inc(settee_metrics::Metric::CouchReplicatorJobsStarts);
        let me = self.clone();
        tokio::spawn(async move {
            let result = me.run_entry(&entry, stop_rx).await;
            me.after(&entry, result).await;
        });
    }

    async fn run_entry(&self, entry: &Entry, stop: watch::Receiver<bool>) -> Result<Value> {
        let spec = entry.spec.as_ref().expect("a job has a spec");
        let (job, id) = self
            .make_job(spec, &entry.user, entry.stats.clone())
            .await?;
        *entry.rep_id.lock().expect("id") = Some(id);
        Arc::new(job).run(stop).await
    }

    /// Records how a job ended.
    async fn after(self: &Arc<Self>, entry: &Arc<Entry>, result: Result<Value>) {
        match result {
            Err(Error::Cancelled) => {}
            Ok(_) => {
                entry.set(JobState::Completed, "completed", None);
                if let Origin::Doc { db, doc_id } = &entry.origin {
                    let stats = entry.stats.lock().expect("stats").to_json();
                    let start = entry.status.lock().expect("status").start_time.clone();
                    let mut stats = stats;
                    stats["start_time"] = json!(start);
                    self.record_state(db, doc_id, "completed", None, Some(stats))
                        .await;
                }
            }
            Err(e) if e.is_transient() => {
                let n = {
                    let mut s = entry.status.lock().expect("status");
                    // A job that ran well for a while starts its count of crashes again.
                    if s.running_since.is_some_and(|t| t.elapsed() >= HEALTHY) {
                        s.error_count = 0;
                    }
                    s.error_count += 1;
                    s.next_try = Some(Instant::now() + backoff(s.error_count));
                    s.error_count
                };
                let (_, error, reason) = e.couch();
                tracing::info!(error = %error, reason = %reason, retries = n, "replication crashed");
                settee_metrics::inc(settee_metrics::Metric::CouchReplicatorJobsCrashes);
                entry.set(
                    JobState::Crashing,
                    "crashed",
                    Some(format!("{error}: {reason}")),
                );
            }
            Err(e) => {
                let (_, error, reason) = e.couch();
                let text = format!("{error}: {reason}");
                entry.set(JobState::Failed, "crashed", Some(text.clone()));
                if let Origin::Doc { db, doc_id } = &entry.origin {
                    self.record_state(db, doc_id, "failed", Some(text), None)
                        .await;
                }
            }
        }
        self.wake.notify_one();
    }

    /// Finds replicator databases (made later, too) and watches each.
    async fn discover_loop(self: Arc<Self>) {
        loop {
            let node = self.node.clone();
            let names = tokio::task::spawn_blocking(move || node.catalog.list())
                .await
                .ok()
                .and_then(std::result::Result::ok)
                .unwrap_or_default();
            for name in names.into_iter().filter(|n| is_replicator_db(n)) {
                if self.watched.lock().expect("watched").insert(name.clone()) {
                    let me = self.clone();
                    tokio::spawn(async move {
                        me.watch_db(&name).await;
                        me.watched.lock().expect("watched").remove(&name);
                        me.forget_db(&name);
                    });
                }
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    }

    /// Stops the jobs of a replicator database that is gone.
    fn forget_db(&self, name: &str) {
        let mut jobs = self.jobs.lock().expect("jobs");
        jobs.retain(|_, e| match &e.origin {
            Origin::Doc { db, .. } if db == name => {
                e.retire();
                false
            }
            _ => true,
        });
    }

    /// Follows one replicator database's changes until it is deleted.
    async fn watch_db(self: &Arc<Self>, name: &str) {
        let node = self.node.clone();
        let n = name.to_string();
        let Ok(Ok(db)) = tokio::task::spawn_blocking(move || node.catalog.get(&n)).await else {
            return;
        };
        let mut since = SeqVector::zero(db.q());
        let mut updates = db.subscribe();
        loop {
            let snap = db.snapshot();
            let opts = ChangesOptions {
                include_docs: true,
                ..Default::default()
            };
            let rows: Vec<settee_db::ChangeRow> = match snap.changes(&since, opts) {
                Ok(mut changes) => {
                    let rows = changes
                        .by_ref()
                        .filter_map(std::result::Result::ok)
                        .collect();
                    since = changes.position().clone();
                    rows
                }
                Err(_) => return,
            };
            for row in rows {
                if !row.id.starts_with("_design/") {
                    self.on_doc(&db, &row.id, row.deleted, row.doc.as_deref())
                        .await;
                }
            }
            if db.is_deleted() || updates.changed().await.is_err() {
                return;
            }
        }
    }

    /// A replication document was written or deleted.
    async fn on_doc(
        self: &Arc<Self>,
        db: &Arc<Database>,
        id: &str,
        deleted: bool,
        doc: Option<&[u8]>,
    ) {
        let key = doc_key(db.name(), id);
        let old = self.jobs.lock().expect("jobs").remove(&key);
        if let Some(old) = old {
            settee_metrics::inc(settee_metrics::Metric::CouchReplicatorJobsRemoves);
            old.retire();
        }
        let doc: Option<Map<String, Value>> = doc.and_then(|d| serde_json::from_slice(d).ok());
        let Some(doc) = doc.filter(|_| !deleted) else {
            return;
        };
        let origin = Origin::Doc {
            db: db.name().to_string(),
            doc_id: id.to_string(),
        };
        let user = doc_user(&doc);
        let state = doc.get("_replication_state").and_then(Value::as_str);
        let spec = ReplicationSpec::parse(&Value::Object(doc.clone()), &self.settings());
        let entry = match (state, spec) {
            (Some(s @ ("completed" | "failed")), spec) => {
                let e = Entry::new(origin, spec.ok(), user, self.max_history());
                if let Some(stats) = doc.get("_replication_stats") {
                    *e.stats.lock().expect("stats") = Stats::from_json(stats);
                }
                let reason = doc
                    .get("_replication_state_reason")
                    .and_then(Value::as_str)
                    .map(str::to_string);
                if s == "completed" {
                    e.set(JobState::Completed, "completed", None);
                } else {
                    e.set(JobState::Failed, "crashed", reason);
                }
                e
            }
            (_, Ok(spec)) => Entry::new(origin, Some(spec), user, self.max_history()),
            (_, Err(e)) => {
                let (_, error, reason) = e.couch();
                let text = format!("{error}: {reason}");
                self.record_state(db.name(), id, "failed", Some(text), None)
                    .await;
                return;
            }
        };
        self.jobs.lock().expect("jobs").insert(key, Arc::new(entry));
        settee_metrics::inc(settee_metrics::Metric::CouchReplicatorJobsAdds);
        self.wake.notify_one();
    }

    /// Writes a terminal state into a replication document, as CouchDB does.
    async fn record_state(
        &self,
        db: &str,
        doc_id: &str,
        state: &str,
        reason: Option<String>,
        stats: Option<Value>,
    ) {
        let Some(db) = self.node.catalog.get_open(db) else {
            return;
        };
        let Ok(bytes) = db.snapshot().open_doc(doc_id, None, &DocOptions::default()) else {
            return;
        };
        let Ok(Value::Object(mut doc)) = serde_json::from_slice::<Value>(&bytes) else {
            return;
        };
        doc.insert("_replication_state".into(), json!(state));
        doc.insert(
            "_replication_state_time".into(),
            json!(iso_time(unix_now())),
        );
        match reason {
            Some(r) => doc.insert("_replication_state_reason".into(), json!(r)),
            None => doc.remove("_replication_state_reason"),
        };
        if let Some(stats) = stats {
            doc.insert("_replication_stats".into(), stats);
        }
        let Ok(new) = NewDoc::from_json(
            Value::Object(doc),
            Some(doc_id),
            String::new,
            &self.node.limits,
        ) else {
            return;
        };
        let admin = User::admin("_replicator");
        if let Err(e) = self
            .node
            .update_doc(
                Some(&admin),
                &db,
                new,
                EditMode::Interactive,
                Durability::Durable,
            )
            .await
        {
            tracing::info!(doc = doc_id, error = %e, "replication state not recorded");
        }
    }

    /// `GET /_scheduler/jobs`: the jobs that run or wait to.
    pub fn jobs_json(&self, limit: Option<usize>, skip: usize) -> Value {
        let jobs = self.jobs.lock().expect("jobs");
        let live: Vec<&Arc<Entry>> = jobs
            .values()
            .filter(|e| !matches!(e.state(), JobState::Completed | JobState::Failed))
            .collect();
        let total = live.len();
        let rows: Vec<Value> = live
            .into_iter()
            .skip(skip)
            .take(limit.unwrap_or(usize::MAX))
            .map(|e| self.job_json(e))
            .collect();
        json!({"total_rows": total, "offset": skip, "jobs": rows})
    }

    fn job_json(&self, e: &Entry) -> Value {
        let s = e.status.lock().expect("status");
        let (source, target) = e.endpoints();
        let (database, doc_id) = match &e.origin {
            Origin::Doc { db, doc_id } => (json!(db), json!(doc_id)),
            Origin::Replicate => (Value::Null, Value::Null),
        };
        let history: Vec<Value> = s
            .history
            .iter()
            .map(|(t, kind, reason)| {
                let mut h = json!({"timestamp": t, "type": kind});
                if let Some(r) = reason {
                    h["reason"] = json!(r);
                }
                h
            })
            .collect();
        let running = s.state == JobState::Running;
        json!({
            "database": database,
            "id": *e.rep_id.lock().expect("id"),
            "pid": running.then(|| format!("<0.{}.0>", s.started_on % 100_000)),
            "source": source,
            "target": target,
            "user": e.user.as_ref().map(|u| u.name.clone()),
            "doc_id": doc_id,
            "info": running.then(|| e.stats.lock().expect("stats").to_json()),
            "history": history,
            "node": "settee@127.0.0.1",
            "start_time": s.start_time,
        })
    }

    fn doc_json(&self, e: &Entry) -> Option<Value> {
        let Origin::Doc { db, doc_id } = &e.origin else {
            return None;
        };
        let s = e.status.lock().expect("status");
        let (source, target) = e.endpoints();
        let info = match s.state {
            JobState::Crashing | JobState::Failed => {
                json!({"error": s.reason})
            }
            JobState::Pending if s.reason.is_none() => Value::Null,
            _ => e.stats.lock().expect("stats").to_json(),
        };
        let terminal = matches!(s.state, JobState::Completed | JobState::Failed);
        Some(json!({
            "database": db,
            "doc_id": doc_id,
            "id": if terminal { Value::Null } else { json!(*e.rep_id.lock().expect("id")) },
            "node": "settee@127.0.0.1",
            "source": source,
            "target": target,
            "state": s.state.name(),
            "info": info,
            "error_count": s.error_count,
            "last_updated": s.last_updated,
            "start_time": s.start_time,
            "source_proxy": null,
            "target_proxy": null,
        }))
    }

    /// `GET /_scheduler/docs[/{db}]`: the jobs of replication documents, of one
    /// replicator database when `db` is given.
    pub fn docs_json(&self, db: Option<&str>, limit: Option<usize>, skip: usize) -> Value {
        let jobs = self.jobs.lock().expect("jobs");
        let docs: Vec<Value> = jobs
            .values()
            .filter_map(|e| self.doc_json(e))
            .filter(|d| db.is_none_or(|db| d["database"] == db))
            .collect();
        let total = docs.len();
        let docs: Vec<Value> = docs
            .into_iter()
            .skip(skip)
            .take(limit.unwrap_or(usize::MAX))
            .collect();
        json!({"total_rows": total, "offset": skip, "docs": docs})
    }

    /// `GET /_scheduler/docs/{db}/{docid}`.
    /// A document written but not yet seen by the scheduler is `initializing`, as in
    /// CouchDB.
    pub fn doc_state(&self, db: &str, doc_id: &str) -> Option<Value> {
        let known = {
            let jobs = self.jobs.lock().expect("jobs");
            jobs.get(&doc_key(db, doc_id))
                .and_then(|e| self.doc_json(e))
        };
        known.or_else(|| self.unseen_doc(db, doc_id))
    }

    /// A replication document of `db` the scheduler has not taken in yet.
    fn unseen_doc(&self, db: &str, doc_id: &str) -> Option<Value> {
        let bytes = self
            .node
            .catalog
            .get_open(db)?
            .snapshot()
            .open_doc(doc_id, None, &DocOptions::default())
            .ok()?;
        let doc: Value = serde_json::from_slice(&bytes).ok()?;
        let spec = ReplicationSpec::parse(&doc, &self.settings()).ok();
        let entry = Entry::new(
            Origin::Doc {
                db: db.to_string(),
                doc_id: doc_id.to_string(),
            },
            spec,
            None,
            1,
        );
        let mut shown = self.doc_json(&entry)?;
        shown["state"] = json!("initializing");
        shown["info"] = Value::Null;
        Some(shown)
    }

    /// Sets the scheduler's job gauges (`couch_replicator/jobs/…`) to what is there now.
    pub fn count_jobs(&self) {
        use settee_metrics::{set, Metric};
        let jobs: Vec<Arc<Entry>> = self.jobs.lock().expect("jobs").values().cloned().collect();
        let states: Vec<JobState> = jobs.iter().map(|e| e.state()).collect();
        let count = |s: JobState| states.iter().filter(|&&x| x == s).count() as u64;
        set(Metric::CouchReplicatorJobsTotal, states.len() as u64);
        set(Metric::CouchReplicatorJobsRunning, count(JobState::Running));
        set(Metric::CouchReplicatorJobsPending, count(JobState::Pending));
        set(
            Metric::CouchReplicatorJobsCrashed,
            count(JobState::Crashing),
        );
    }

    /// The running replications as `/_active_tasks` lists them.
    pub fn active_tasks(&self) -> Vec<Value> {
        let jobs = self.jobs.lock().expect("jobs");
        jobs.values()
            .filter(|e| e.state() == JobState::Running)
            .map(|e| {
                let s = e.status.lock().expect("status");
                let (source, target) = e.endpoints();
                let mut task = e.stats.lock().expect("stats").to_json();
                let spec = e.spec.as_ref();
                for (k, v) in [
                    ("type", json!("replication")),
                    ("node", json!("settee@127.0.0.1")),
                    ("pid", json!(format!("<0.{}.0>", s.started_on % 100_000))),
                    ("process_status", json!("waiting")),
                    ("replication_id", json!(*e.rep_id.lock().expect("id"))),
                    ("source", source),
                    ("target", target),
                    ("continuous", json!(spec.is_some_and(|s| s.continuous))),
                    ("checkpoint_interval", json!(spec.map_or(0, |s| s.settings.checkpoint_interval.as_millis() as u64))),
                    ("user", json!(e.user.as_ref().map(|u| u.name.clone()))),
                    ("started_on", json!(s.started_on)),
                    ("updated_on", json!(unix_now())),
                ] {
                    task[k] = v;
                }
                if let Origin::Doc { db, doc_id } = &e.origin {
                    task["database"] = json!(db);
                    task["doc_id"] = json!(doc_id);
                }
                task
            })
            .collect()
    }
}

/// Who a replication document's job runs as: its owner, or a server admin when it has
/// none (written by an admin).
fn doc_user(doc: &Map<String, Value>) -> Option<User> {
    match doc.get("owner").and_then(Value::as_str) {
        Some(owner) => Some(User {
            name: owner.to_string(),
            roles: Vec::new(),
        }),
        None => Some(User::admin("_replicator")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_written_as_couchdb_writes_them() {
        assert_eq!(iso_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso_time(1_795_735_814), "2026-11-26T23:30:14Z");
        assert_eq!(iso_time(951_782_400), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn crashing_jobs_back_off_exponentially() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(40), Duration::from_secs(600));
    }
}
