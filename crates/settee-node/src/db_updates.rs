//! The global feed of database events behind `GET /_db_updates`, kept as CouchDB keeps it:
//! in the `_global_changes` database, one document `{type}:{db}` per database and kind of
//! event (`created`, `updated`, `deleted`), written again at each such event, so that the
//! database's changes feed is the feed of events, durable and resumable across restarts.
//!
//! Events are gathered as they happen (a write only notes its database's name) and written
//! together a moment later, as CouchDB's `[global_changes] max_event_delay` batches them:
//! a database written a thousand times in that moment makes one `updated` change.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use settee_db::{Database, DbEvent, DbEvents, Durability, EditMode, NewDoc};

use crate::Node;

/// The database that holds the feed.
pub const GLOBAL_CHANGES: &str = "_global_changes";

/// How long events gather before they are written.
const DELAY: Duration = Duration::from_millis(25);

/// Events noted and not yet written: per database, the kinds seen (one bit each), looked
/// up by name without allocating, as every write asks.
#[derive(Default)]
pub struct Pending {
    events: Mutex<HashMap<String, u8>>,
    wake: tokio::sync::Notify,
}

/// An event's kind, in the order a batch writes them (a database created and written in
/// one batch shows `created` first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    Created,
    Updated,
    Deleted,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Created => "created",
            Kind::Updated => "updated",
            Kind::Deleted => "deleted",
        }
    }
}

impl Pending {
    /// The catalog's listener: notes each event (the feed's own database is left out).
    pub fn listener(self: &Arc<Self>) -> DbEvents {
        let me = self.clone();
        Arc::new(move |db: &str, event: DbEvent| {
            if db == GLOBAL_CHANGES {
                return;
            }
            let kind = match event {
                DbEvent::Created => Kind::Created,
                DbEvent::Updated => Kind::Updated,
                DbEvent::Deleted => Kind::Deleted,
            };
            let bit = 1u8 << kind as u8;
            let mut events = me.events.lock().expect("events lock");
            let new = match events.get_mut(db) {
                Some(kinds) if *kinds & bit != 0 => false,
                Some(kinds) => {
                    *kinds |= bit;
                    true
                }
                None => {
                    events.insert(db.to_string(), bit);
                    true
                }
            };
            drop(events);
            if new {
                me.wake.notify_one();
            }
        })
    }

    /// The events noted so far, in the order a batch writes them: by kind, then name.
    fn take(&self) -> Vec<(String, Kind)> {
        let events = std::mem::take(&mut *self.events.lock().expect("events lock"));
        let mut out: Vec<(String, Kind)> = events
            .into_iter()
            .flat_map(|(db, kinds)| {
                [Kind::Created, Kind::Updated, Kind::Deleted]
                    .into_iter()
                    .filter(move |k| kinds & (1 << *k as u8) != 0)
                    .map(move |k| (db.clone(), k))
            })
            .collect();
        out.sort_by(|a, b| a.1.cmp(&b.1).then_with(|| a.0.cmp(&b.0)));
        out
    }
}

impl Node {
    /// Writes noted database events into `_global_changes` for as long as the node runs
    /// (on the current tokio runtime). Without that database, events are dropped, as
    /// CouchDB records none without it.
    pub fn start_db_updates(self: &Arc<Self>) {
        let node = self.clone();
        tokio::spawn(async move {
            loop {
                node.db_events.wake.notified().await;
                tokio::time::sleep(DELAY).await;
                let events = node.db_events.take();
                if let Err(e) = node.record_events(events).await {
                    tracing::warn!(error = %e, "recording database events failed");
                }
            }
        });
    }

    async fn record_events(&self, events: Vec<(String, Kind)>) -> crate::Result<()> {
        let Ok(feed) = self.catalog.get(GLOBAL_CHANGES) else {
            return Ok(());
        };
        let docs = event_docs(&feed, &events)?;
        for r in feed
            .update(docs, EditMode::Interactive, Durability::Durable)
            .await?
        {
            r?;
        }
        Ok(())
    }
}

/// The documents that record `events`: each `{type}:{db}`, over its last revision.
fn event_docs(feed: &Database, events: &[(String, Kind)]) -> crate::Result<Vec<NewDoc>> {
    let snap = feed.snapshot();
    let mut docs = Vec::with_capacity(events.len());
    for (db, kind) in events {
        let id = format!("{}:{db}", kind.name());
        let mut body = serde_json::json!({ "_id": id });
        if let Ok((record, winner)) = snap.resolve_winner(&id) {
            body["_rev"] = serde_json::json!(record.tree.nodes[winner].rev.to_string());
        }
        let doc = NewDoc::from_json(body, None, String::new, &Default::default())?;
        docs.push(doc);
    }
    Ok(docs)
}
