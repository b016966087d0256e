//! Replication logs: the `_local/<replication id>` document a replication writes to both
//! its source and its target at each checkpoint, in CouchDB's format (so CouchDB and
//! PouchDB read Settee's and the other way round), and how a new run finds its starting
//! sequence from the two.
//!
//! Each run has a random `session_id`. When both logs end with the same session, the run
//! starts from that session's `source_last_seq`. Otherwise one log is older (a failed write
//! to one side, or one side restored from a backup): the two histories are walked together,
//! newest first, until a session recorded on both sides is found, and the run starts from
//! that session's `recorded_seq`. With no common session it starts from the beginning.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// The replication id scheme the logs are written under (CouchDB 3's).
pub const REPLICATION_ID_VERSION: u64 = 4;

/// How many past sessions a log keeps (CouchDB keeps 50).
pub const MAX_HISTORY: usize = 50;

/// One endpoint's replication log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplicationLog {
    /// The run that wrote the log last.
    pub session_id: String,
    /// The source sequence everything before which is on the target.
    #[serde(default = "lowest_seq")]
    pub source_last_seq: Value,
    /// The replication id scheme.
    #[serde(default)]
    pub replication_id_version: u64,
    /// Past checkpoints, newest first.
    #[serde(default)]
    pub history: Vec<Session>,
    /// Members this version does not use, kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// One checkpointed run in a log's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Session {
    /// The run.
    pub session_id: String,
    /// The source sequence the checkpoint recorded.
    #[serde(default = "lowest_seq")]
    pub recorded_seq: Value,
    /// Members this version does not use (times, counts), kept as they were.
    #[serde(flatten)]
    pub other: Map<String, Value>,
}

/// Where a run starts.
#[derive(Debug, Clone, PartialEq)]
pub struct StartPoint {
    /// The source sequence to read changes since.
    pub since: Value,
    /// The history the run's checkpoints go on from (newest first).
    pub history: Vec<Session>,
}

/// The sequence before everything: a run with no common checkpoint starts there.
fn lowest_seq() -> Value {
    Value::from(0)
}

/// Where a run starts, from the logs found on its source and target (`None` where there
/// was none).
pub fn start_point(source: Option<&ReplicationLog>, target: Option<&ReplicationLog>) -> StartPoint {
    let beginning = StartPoint {
        since: lowest_seq(),
        history: Vec::new(),
    };
    let (Some(source), Some(target)) = (source, target) else {
        return beginning;
    };
    if source.session_id == target.session_id {
        return StartPoint {
            since: source.source_last_seq.clone(),
            history: source.history.clone(),
        };
    }
    common_session(&source.history, &target.history).unwrap_or(beginning)
}

/// Walks both histories together, newest first: the first session of one side that the
/// other side has at or after the same step wins.
fn common_session(source: &[Session], target: &[Session]) -> Option<StartPoint> {
    let has = |list: &[Session], id: &str| list.iter().any(|s| s.session_id == id);
    let (mut s, mut t) = (source, target);
    while let (Some((s_head, s_rest)), Some((t_head, t_rest))) = (s.split_first(), t.split_first())
    {
        if has(t, &s_head.session_id) {
            return Some(StartPoint {
                since: s_head.recorded_seq.clone(),
                history: s_rest.to_vec(),
            });
        }
        if has(s_rest, &t_head.session_id) {
            return Some(StartPoint {
                since: t_head.recorded_seq.clone(),
                history: t_rest.to_vec(),
            });
        }
        (s, t) = (s_rest, t_rest);
    }
    None
}

/// The log a checkpoint of run `session` at source sequence `seq` writes to both sides:
/// `entry` (the checkpoint's own record, with its times and counts) first in the history,
/// then `history`, kept to [`MAX_HISTORY`] entries.
pub fn checkpointed(
    session: &str,
    seq: Value,
    entry: Session,
    history: &[Session],
) -> ReplicationLog {
    let mut sessions = Vec::with_capacity(MAX_HISTORY);
    sessions.push(entry);
    sessions.extend(history.iter().take(MAX_HISTORY - 1).cloned());
    ReplicationLog {
        session_id: session.to_string(),
        source_last_seq: seq,
        replication_id_version: REPLICATION_ID_VERSION,
        history: sessions,
        other: Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn session(id: &str, seq: u64) -> Session {
        Session {
            session_id: id.to_string(),
            recorded_seq: json!(seq),
            other: Map::new(),
        }
    }

    fn strs(ids: &[String]) -> Vec<&str> {
        ids.iter().map(String::as_str).collect()
    }

    /// The log after checkpoints of sessions `ids` (oldest first), session `n` at seq 10n.
    fn log(ids: &[&str]) -> ReplicationLog {
        let mut history: Vec<Session> = Vec::new();
        let mut last = None;
        for (n, id) in ids.iter().enumerate() {
            let seq = 10 * (n as u64 + 1);
            let written = checkpointed(id, json!(seq), session(id, seq), &history);
            history = written.history.clone();
            last = Some(written);
        }
        last.expect("at least one session")
    }

    #[test]
    fn logs_read_and_write_couchdbs_format() {
        let stored = json!({
            "session_id": "s2", "source_last_seq": "20-g1AAAA", "replication_id_version": 4,
            "history": [
                {"session_id": "s2", "recorded_seq": "20-g1AAAA", "docs_written": 3,
                 "start_time": "Thu, 26 Nov 2026 10:00:00 GMT"},
                {"session_id": "s1", "recorded_seq": 10}
            ],
            "_id": "_local/abc", "_rev": "0-3"
        });
        let parsed: ReplicationLog = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(parsed.history[1].recorded_seq, json!(10));
        assert_eq!(
            serde_json::to_value(&parsed).unwrap(),
            stored,
            "nothing lost"
        );
    }

    #[test]
    fn the_start_follows_couchdbs_rules() {
        let both = log(&["a", "b", "c"]);
        // The same last session: its source_last_seq and history.
        let start = start_point(Some(&both), Some(&both));
        assert_eq!((start.since, start.history.len()), (json!(30), 3));
        // No log on one side, or nothing in common: from the beginning.
        assert_eq!(start_point(None, Some(&both)).since, json!(0));
        assert_eq!(
            start_point(Some(&both), Some(&log(&["x", "y"]))).since,
            json!(0)
        );
        // The target missed the last checkpoint: the newest session both have.
        let older = log(&["a", "b"]);
        assert_eq!(start_point(Some(&both), Some(&older)).since, json!(20));
        assert_eq!(start_point(Some(&older), Some(&both)).since, json!(20));
        // A history is kept to MAX_HISTORY sessions.
        let ids: Vec<String> = (0..80).map(|i| format!("s{i}")).collect();
        let long = log(&strs(&ids));
        assert_eq!(long.history.len(), MAX_HISTORY);
        assert_eq!(long.history[0].session_id, "s79");
    }

    proptest! {
        /// Two sides that shared a run of sessions, then diverged (one side's checkpoints
        /// failed or it was restored from a backup): the run starts from a session both
        /// have, never from one only one side recorded, and from the beginning only when
        /// they share none.
        #[test]
        fn the_start_is_a_session_both_sides_recorded(
            shared in 0usize..8, only_source in 0usize..5, only_target in 0usize..5,
        ) {
            let ids = |prefix: &str, n: usize| (0..n).map(|i| format!("{prefix}{i}")).collect::<Vec<_>>();
            let common = ids("c", shared);
            let mut source_ids = common.clone();
            source_ids.extend(ids("s", only_source));
            let mut target_ids = common.clone();
            target_ids.extend(ids("t", only_target));
            prop_assume!(!source_ids.is_empty() && !target_ids.is_empty());
            let (source, target) = (log(&strs(&source_ids)), log(&strs(&target_ids)));
            let start = start_point(Some(&source), Some(&target));
            // The newest common session, recorded by both sides at ten times its place.
            prop_assert_eq!(start.since, json!(10 * shared as u64));
        }
    }
}
