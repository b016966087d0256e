//! One run of a replication: verify the peers, find the common checkpoint, then read the
//! source's changes in batches that several workers copy at once (`_revs_diff`, fetch the
//! missing revisions, write them with `new_edits=false`), and checkpoint as batches finish.
//! A checkpoint only ever records a sequence every change before which is written: batches
//! are numbered as they are read, and the checkpoint moves to the end of the longest run of
//! finished batches from the start.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Map, Value};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

use crate::checkpoint::{
    checkpointed, start_point, ReplicationLog, Session, REPLICATION_ID_VERSION,
};
use crate::endpoint::{Change, ChangesRequest, Endpoint, Missing, Wanted};
use crate::error::{Error, Result};
use crate::spec::ReplicationSpec;

/// How long a continuous job's read of an idle source waits for a change before it asks
/// again (a remote source's answer keeps the connection alive with heartbeats meanwhile).
const IDLE_WAIT: Duration = Duration::from_secs(60);

/// Most revisions fetched in one request.
const FETCH_CHUNK: usize = 100;

/// A job's counters, as `_active_tasks` and `_scheduler/jobs` show them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Revisions listed by the source's changes and checked against the target.
    pub revisions_checked: u64,
    /// Revisions the target lacked.
    pub missing_revisions_found: u64,
    /// Revisions read from the source.
    pub docs_read: u64,
    /// Revisions written to the target.
    pub docs_written: u64,
    /// Revisions the target refused.
    pub doc_write_failures: u64,
    /// Revisions read with `_bulk_get`.
    pub bulk_get_docs: u64,
    /// `_bulk_get` requests made.
    pub bulk_get_attempts: u64,
    /// Changes the source had after the last page read.
    pub changes_pending: Option<u64>,
    /// The source's sequence as last read.
    pub source_seq: Value,
    /// The sequence up to which everything is written.
    pub through_seq: Value,
    /// The sequence of the last checkpoint.
    pub checkpointed_source_seq: Value,
}

impl Stats {
    /// Counters as [`Stats::to_json`] wrote them (a completed document's
    /// `_replication_stats`).
    pub fn from_json(v: &Value) -> Stats {
        let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
        let seq = |k: &str| v.get(k).cloned().unwrap_or(Value::Null);
        Stats {
            revisions_checked: n("revisions_checked"),
            missing_revisions_found: n("missing_revisions_found"),
            docs_read: n("docs_read"),
            docs_written: n("docs_written"),
            doc_write_failures: n("doc_write_failures"),
            bulk_get_docs: n("bulk_get_docs"),
            bulk_get_attempts: n("bulk_get_attempts"),
            changes_pending: v.get("changes_pending").and_then(Value::as_u64),
            source_seq: seq("source_seq"),
            through_seq: seq("through_seq"),
            checkpointed_source_seq: seq("checkpointed_source_seq"),
        }
    }

    /// The counters as CouchDB names them in `_active_tasks` and `_scheduler/jobs`.
    pub fn to_json(&self) -> Value {
        json!({
            "revisions_checked": self.revisions_checked,
            "missing_revisions_found": self.missing_revisions_found,
            "docs_read": self.docs_read,
            "docs_written": self.docs_written,
            "doc_write_failures": self.doc_write_failures,
            "bulk_get_docs": self.bulk_get_docs,
            "bulk_get_attempts": self.bulk_get_attempts,
            "changes_pending": self.changes_pending,
            "source_seq": self.source_seq,
            "through_seq": self.through_seq,
            "checkpointed_source_seq": self.checkpointed_source_seq,
        })
    }
}

/// A replication ready to run.
pub struct Job {
    /// What it does.
    pub spec: ReplicationSpec,
    /// The id without option suffixes, under which both logs are kept.
    pub base_id: String,
    /// Where documents come from.
    pub source: Arc<dyn Endpoint>,
    /// Where they go.
    pub target: Arc<dyn Endpoint>,
    /// Its counters, read while it runs.
    pub stats: Arc<Mutex<Stats>>,
}

/// A batch of changes for a worker, numbered in reading order.
type Batch = (u64, Vec<Change>);

/// Batches read but not all written yet, in reading order.
#[derive(Default)]
struct Progress {
    /// Batch number → the source sequence after it.
    open: BTreeMap<u64, Value>,
    finished: BTreeSet<u64>,
    next: u64,
}

impl Progress {
    fn open(&mut self, seq: Value) -> u64 {
        let n = self.next;
        self.next += 1;
        self.open.insert(n, seq);
        n
    }

    /// Marks batch `n` written; the new through sequence if it moved.
    fn finish(&mut self, n: u64) -> Option<Value> {
        self.finished.insert(n);
        let mut through = None;
        while let Some((&first, _)) = self.open.first_key_value() {
            if !self.finished.remove(&first) {
                break;
            }
            through = self.open.remove(&first);
        }
        through
    }

    fn is_empty(&self) -> bool {
        self.open.is_empty()
    }
}

/// What a worker or the reader reports to the job.
enum Event {
    /// Batch `n` is written.
    Done(u64),
    /// The reader reached the end of a one-shot feed.
    End,
    /// The reader or a worker failed.
    Failed(Error),
}

/// The run's place in its logs.
struct Logs {
    session_id: String,
    start_seq: Value,
    history: Vec<Session>,
    start_time: String,
    /// What each side's log document looks like now (`_rev` included).
    source_doc: Option<Value>,
    target_doc: Option<Value>,
}

fn http_date() -> String {
    httpdate::fmt_http_date(SystemTime::now())
}

pub(crate) fn new_session_id() -> String {
    (0..16)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

impl Job {
    /// Runs the job until a one-shot replication is done (its result: CouchDB's history
    /// object) or a continuous one is stopped through `stop` or fails.
    pub async fn run(self: Arc<Self>, mut stop: watch::Receiver<bool>) -> Result<Value> {
        self.verify_peers().await?;
        let mut logs = self.read_logs().await?;
        self.stats.lock().expect("stats").through_seq = logs.start_seq.clone();
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let (batches_tx, batches_rx) = mpsc::channel::<Batch>(self.spec.settings.worker_processes);
        let progress = Arc::new(Mutex::new(Progress::default()));
        let mut tasks = JoinSet::new();
        tasks.spawn(self.clone().read(
            logs.start_seq.clone(),
            batches_tx,
            progress.clone(),
            events_tx.clone(),
        ));
        let batches_rx = Arc::new(tokio::sync::Mutex::new(batches_rx));
        for _ in 0..self.spec.settings.worker_processes {
            settee_metrics::inc(settee_metrics::Metric::CouchReplicatorWorkersStarted);
            tasks.spawn(self.clone().work(batches_rx.clone(), events_tx.clone()));
        }
        drop(events_tx);
        let mut ended = false;
        let mut last_checkpoint = Instant::now();
        let mut wrote_any = false;
        loop {
            let interval = self.spec.settings.checkpoint_interval;
            let due = tokio::time::sleep(interval.saturating_sub(last_checkpoint.elapsed()));
            tokio::select! {
                _ = stop.changed() => {
                    // Nothing more is copied once stopped; what was written is recorded.
                    tasks.abort_all();
                    while tasks.join_next().await.is_some() {}
                    self.checkpoint(&mut logs).await.ok();
                    return Err(Error::Cancelled);
                }
                _ = due => {
                    self.checkpoint(&mut logs).await?;
                    last_checkpoint = Instant::now();
                }
                event = events.recv() => match event {
                    Some(Event::Done(n)) => {
                        wrote_any = true;
                        if let Some(seq) = progress.lock().expect("progress").finish(n) {
                            self.stats.lock().expect("stats").through_seq = seq;
                        }
                    }
                    Some(Event::End) => ended = true,
                    Some(Event::Failed(e)) => return Err(e),
                    None => ended = true,
                },
            }
            if ended && progress.lock().expect("progress").is_empty() {
                break;
            }
        }
        tasks.abort_all();
        self.finish(&mut logs, wrote_any).await
    }

    /// Checks that both databases are there, making the target when asked to.
    async fn verify_peers(&self) -> Result<()> {
        let info = self.source.info().await?;
        self.stats.lock().expect("stats").source_seq = info.update_seq;
        match self.target.info().await {
            Err(Error::DbNotFound(_)) if self.spec.create_target => {
                self.target.create(&self.spec.create_target_params).await?;
                self.target.info().await.map(|_| ())
            }
            other => other.map(|_| ()),
        }
    }

    fn log_id(&self) -> String {
        format!("_local/{}", self.base_id)
    }

    async fn read_logs(&self) -> Result<Logs> {
        let id = self.log_id();
        let source_doc = self.source.get_local(&id).await?;
        let target_doc = self.target.get_local(&id).await?;
        let parse = |d: &Option<Value>| {
            d.as_ref()
                .and_then(|v| serde_json::from_value::<ReplicationLog>(v.clone()).ok())
        };
        let start = if self.spec.settings.use_checkpoints {
            start_point(parse(&source_doc).as_ref(), parse(&target_doc).as_ref())
        } else {
            start_point(None, None)
        };
        let start_seq = self.spec.since_seq.clone().unwrap_or(start.since);
        self.stats.lock().expect("stats").checkpointed_source_seq = start_seq.clone();
        Ok(Logs {
            session_id: new_session_id(),
            start_seq,
            history: start.history,
            start_time: http_date(),
            source_doc,
            target_doc,
        })
    }

    /// Reads the source's changes and hands them to the workers in batches.
    async fn read(
        self: Arc<Self>,
        mut since: Value,
        batches: mpsc::Sender<Batch>,
        progress: Arc<Mutex<Progress>>,
        events: mpsc::UnboundedSender<Event>,
    ) {
        let batch = self.spec.settings.worker_batch_size;
        let limit = (batch * self.spec.settings.worker_processes).max(1) as u64;
        loop {
            let req = ChangesRequest {
                since: &since,
                limit,
                filter: &self.spec.filter,
                wait: self.spec.continuous.then_some(IDLE_WAIT),
                winning_only: self.spec.winning_revs_only,
            };
            let page = match self.source.changes(req).await {
                Ok(p) => p,
                Err(e) => {
                    events.send(Event::Failed(e)).ok();
                    return;
                }
            };
            {
                let mut stats = self.stats.lock().expect("stats");
                stats.changes_pending = page.pending;
                stats.source_seq = page.last_seq.clone();
            }
            let rows_read = page.rows.len();
            let full = rows_read as u64 >= limit;
            let mut rows = page.rows;
            while !rows.is_empty() {
                let rest = rows.split_off(rows.len().min(batch));
                let seq = if rest.is_empty() {
                    page.last_seq.clone()
                } else {
                    rows.last().expect("a row").seq.clone()
                };
                let n = progress.lock().expect("progress").open(seq);
                if batches
                    .send((n, std::mem::replace(&mut rows, rest)))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            if rows_read == 0 && since != page.last_seq {
                // A page of nothing to copy (filtered out) still moves the checkpoint.
                let n = progress
                    .lock()
                    .expect("progress")
                    .open(page.last_seq.clone());
                events.send(Event::Done(n)).ok();
            }
            since = page.last_seq;
            if !self.spec.continuous && !full {
                events.send(Event::End).ok();
                return;
            }
        }
    }

    /// Copies batches until there are none.
    async fn work(
        self: Arc<Self>,
        batches: Arc<tokio::sync::Mutex<mpsc::Receiver<Batch>>>,
        events: mpsc::UnboundedSender<Event>,
    ) {
        loop {
            let next = batches.lock().await.recv().await;
            let Some((n, rows)) = next else {
                return;
            };
            let event = match self.copy(rows).await {
                Ok(()) => Event::Done(n),
                Err(e) => Event::Failed(e),
            };
            if events.send(event).is_err() {
                return;
            }
        }
    }

    /// Copies what the target lacks of one batch of changes.
    async fn copy(&self, rows: Vec<Change>) -> Result<()> {
        let mut revs: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut checked = 0;
        for row in rows {
            checked += row.revs.len() as u64;
            let list = revs.entry(row.id).or_default();
            for r in row.revs {
                if !list.contains(&r) {
                    list.push(r);
                }
            }
        }
        self.stats.lock().expect("stats").revisions_checked += checked;
        let missing = self.target.revs_diff(revs).await?;
        let found: u64 = missing.values().map(|m| m.missing.len() as u64).sum();
        self.stats.lock().expect("stats").missing_revisions_found += found;
        let wanted: Vec<Wanted> = missing
            .into_iter()
            .map(
                |(
                    id,
                    Missing {
                        missing,
                        possible_ancestors,
                    },
                )| Wanted {
                    id,
                    revs: missing,
                    atts_since: possible_ancestors,
                },
            )
            .collect();
        for chunk in wanted.chunks(FETCH_CHUNK) {
            let docs = self.source.fetch(chunk.to_vec()).await?;
            let read = docs.len() as u64;
            {
                let mut stats = self.stats.lock().expect("stats");
                stats.docs_read += read;
                stats.bulk_get_docs += read;
                stats.bulk_get_attempts += 1;
            }
            let failures = self.target.write(docs).await?;
            for f in &failures {
                tracing::warn!(id = %f.id, error = %f.error, reason = %f.reason, "replicated write refused");
            }
            let mut stats = self.stats.lock().expect("stats");
            stats.doc_write_failures += failures.len() as u64;
            stats.docs_written += read - failures.len() as u64;
        }
        Ok(())
    }

    /// This checkpoint's entry in the history.
    fn session_entry(&self, logs: &Logs, seq: &Value) -> Session {
        let s = self.stats.lock().expect("stats").clone();
        let mut other = Map::new();
        for (k, v) in [
            ("start_time", json!(logs.start_time)),
            ("end_time", json!(http_date())),
            ("start_last_seq", logs.start_seq.clone()),
            ("end_last_seq", seq.clone()),
            ("missing_checked", json!(s.revisions_checked)),
            ("missing_found", json!(s.missing_revisions_found)),
            ("docs_read", json!(s.docs_read)),
            ("docs_written", json!(s.docs_written)),
            ("doc_write_failures", json!(s.doc_write_failures)),
            ("bulk_get_docs", json!(s.bulk_get_docs)),
            ("bulk_get_attempts", json!(s.bulk_get_attempts)),
        ] {
            other.insert(k.into(), v);
        }
        Session {
            session_id: logs.session_id.clone(),
            recorded_seq: seq.clone(),
            other,
        }
    }

    /// Writes the log to both sides when everything up to a newer sequence is written.
    async fn checkpoint(&self, logs: &mut Logs) -> Result<Option<ReplicationLog>> {
        use settee_metrics::{inc, Metric};
        let written = self.write_checkpoint(logs).await;
        match &written {
            Ok(Some(_)) => inc(Metric::CouchReplicatorCheckpointsSuccess),
            Ok(None) => {}
            Err(_) => inc(Metric::CouchReplicatorCheckpointsFailure),
        }
        written
    }

    /// [`Job::checkpoint`]'s work.
    async fn write_checkpoint(&self, logs: &mut Logs) -> Result<Option<ReplicationLog>> {
        let (through, recorded) = {
            let s = self.stats.lock().expect("stats");
            (s.through_seq.clone(), s.checkpointed_source_seq.clone())
        };
        if !self.spec.settings.use_checkpoints || through == recorded {
            return Ok(None);
        }
        self.target.ensure_full_commit().await?;
        let entry = self.session_entry(logs, &through);
        let log = checkpointed(&logs.session_id, through.clone(), entry, &logs.history);
        let mut doc = serde_json::to_value(&log).expect("json");
        let id = self.log_id();
        doc["_id"] = json!(id);
        for (endpoint, previous) in [
            (&self.source, &mut logs.source_doc),
            (&self.target, &mut logs.target_doc),
        ] {
            let mut written = doc.clone();
            if let Some(rev) = previous.as_ref().and_then(|d| d.get("_rev")) {
                written["_rev"] = rev.clone();
            }
            endpoint.put_local(&id, &written).await?;
            *previous = endpoint.get_local(&id).await?;
        }
        self.stats.lock().expect("stats").checkpointed_source_seq = through;
        Ok(Some(log))
    }

    /// The last checkpoint of a one-shot run, and its answer: the log written, or, when
    /// there was nothing to copy, the log found (CouchDB's `no_changes` answer).
    async fn finish(&self, logs: &mut Logs, wrote_any: bool) -> Result<Value> {
        let written = self.checkpoint(logs).await?;
        let found = logs
            .source_doc
            .as_ref()
            .and_then(|d| serde_json::from_value::<ReplicationLog>(d.clone()).ok());
        let (log, no_changes) = match (written, found) {
            (Some(log), _) => (log, false),
            (None, Some(mut log)) if !wrote_any => {
                log.other.retain(|k, _| !k.starts_with('_'));
                (log, true)
            }
            (None, _) => {
                let through = self.stats.lock().expect("stats").through_seq.clone();
                let mut history = vec![self.session_entry(logs, &through)];
                history.extend(logs.history.iter().cloned());
                let log = ReplicationLog {
                    session_id: logs.session_id.clone(),
                    source_last_seq: through,
                    replication_id_version: REPLICATION_ID_VERSION,
                    history,
                    other: Map::new(),
                };
                (log, !wrote_any)
            }
        };
        let mut answer = Map::new();
        answer.insert("ok".into(), json!(true));
        if no_changes {
            answer.insert("no_changes".into(), json!(true));
        }
        if let Value::Object(log) = serde_json::to_value(&log).expect("json") {
            answer.extend(log);
        }
        Ok(Value::Object(answer))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::strategy::Strategy;

    #[test]
    fn the_checkpoint_never_passes_an_unwritten_batch() {
        let mut p = Progress::default();
        let a = p.open(json!(1));
        let b = p.open(json!(2));
        let c = p.open(json!(3));
        assert_eq!(p.finish(b), None);
        assert_eq!(p.finish(c), None);
        assert_eq!(p.finish(a), Some(json!(3)));
        assert!(p.is_empty());
        let d = p.open(json!(4));
        assert_eq!(p.finish(d), Some(json!(4)));
    }

    proptest::proptest! {
        /// Batches finishing in any order: the through sequence is always the last of the
        /// batches finished without a gap from the first.
        #[test]
        fn any_finishing_order_is_safe(
            order in proptest::strategy::Just((0u64..20).collect::<Vec<_>>())
                .prop_shuffle()
        ) {
            let mut p = Progress::default();
            for i in 0..20u64 {
                p.open(json!(i));
            }
            let mut through = None;
            let mut done = BTreeSet::new();
            for n in order {
                done.insert(n);
                if let Some(seq) = p.finish(n) {
                    through = Some(seq);
                }
                let run = (0..20u64).take_while(|i| done.contains(i)).count() as u64;
                let expected = run.checked_sub(1).map(|r| json!(r));
                proptest::prop_assert_eq!(through.clone(), expected);
            }
            proptest::prop_assert!(p.is_empty());
        }
    }
}
