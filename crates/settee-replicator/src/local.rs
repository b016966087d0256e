//! A database of this node as a replication endpoint: read from snapshots, written through
//! [`Node::update_docs`] as the job's user, so security, `validate_doc_update` and the
//! users and replicator databases' rules hold for replicated writes as for HTTP ones.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{json, Map, Value};
use settee_auth::User;
use settee_db::{
    ChangesOptions, Database, DbSnapshot, DocFilter, DocOptions, Durability, EditMode, NewDoc,
    SeqVector,
};
use settee_json::Rev;
use settee_node::Node;

use crate::endpoint::{
    Change, ChangesPage, ChangesRequest, DbInfo, Endpoint, Filter, Missing, Revision, Wanted,
    WriteFailure,
};
use crate::error::{Error, Result};

/// A database of this node, used as `user`.
pub struct LocalDb {
    node: Arc<Node>,
    name: String,
    user: Option<User>,
}

impl LocalDb {
    /// The database `name` of `node`, read and written as `user`.
    pub fn new(node: Arc<Node>, name: &str, user: Option<User>) -> LocalDb {
        LocalDb {
            node,
            name: name.to_string(),
            user,
        }
    }

    /// Opens the database (off the async threads), checking that the user may use it.
    async fn open(&self) -> Result<Arc<Database>> {
        // Open already (the usual case): no blocking task for the lookup.
        let db = match self.node.catalog.get_open(&self.name) {
            Some(db) => db,
            None => {
                let node = self.node.clone();
                let name = self.name.clone();
                tokio::task::spawn_blocking(move || node.catalog.get(&name))
                    .await
                    .map_err(|_| Error::Unreachable("opening a database failed".into()))?
                    .map_err(|e| match e {
                        settee_db::Error::NoDatabase => Error::DbNotFound(self.name.clone()),
                        e => e.into(),
                    })?
            }
        };
        settee_node::security::check_member(self.user.as_ref(), &db).map_err(|e| match e {
            settee_node::Error::Forbidden(_) => Error::Peer {
                status: 403,
                error: "forbidden".into(),
                reason: self.name.clone(),
            },
            _ => Error::Unauthorized(self.name.clone()),
        })?;
        Ok(db)
    }

    /// A snapshot of the database for reads that show whole revisions, which only those
    /// who see the database's documents whole may make.
    async fn readable(&self) -> Result<(Arc<Database>, DbSnapshot)> {
        let db = self.open().await?;
        self.node
            .visibility(self.user.as_ref(), &db)?
            .check_read(false)?;
        let snap = db.snapshot();
        Ok((db, snap))
    }

    fn doc_filter(&self, db: &Database, filter: &Filter) -> Result<ChangesFilter> {
        Ok(match filter {
            Filter::All => ChangesFilter::default(),
            Filter::DocIds(ids) => ChangesFilter {
                doc_ids: Some(ids.iter().cloned().collect()),
                doc_filter: None,
            },
            Filter::Selector(sel) => {
                let selector = settee_mango::Selector::parse(sel)
                    .map_err(|e| Error::BadRequest(format!("Invalid selector: {e}")))?;
                ChangesFilter {
                    doc_ids: None,
                    doc_filter: Some(DocFilter(Arc::new(move |doc| Ok(selector.matches(doc))))),
                }
            }
            Filter::Design { name, query_params } => {
                let request = filter_request(db.name(), query_params, self.user.as_ref());
                let f = self
                    .node
                    .views
                    .design_filter(db, name, request)
                    .map_err(|e| Error::BadRequest(e.to_string()))?;
                ChangesFilter {
                    doc_ids: None,
                    doc_filter: Some(DocFilter(Arc::new(move |doc| {
                        f(doc).map_err(|e| settee_db::FilterError {
                            error: "error".into(),
                            reason: e.to_string(),
                        })
                    }))),
                }
            }
        })
    }
}

/// The parts of [`ChangesOptions`] a filter sets.
#[derive(Default, Clone)]
struct ChangesFilter {
    doc_ids: Option<HashSet<String>>,
    doc_filter: Option<DocFilter>,
}

/// The request object a design filter sees in a replication: its `query_params` as
/// `req.query`, the job's user as `req.userCtx`.
fn filter_request(db: &str, query: &Map<String, Value>, user: Option<&User>) -> Value {
    json!({
        "info": {"db_name": db},
        "id": null,
        "method": "GET",
        "path": [db, "_changes"],
        "query": query,
        "headers": {},
        "body": "undefined",
        "form": {},
        "cookie": {},
        "userCtx": {
            "db": db,
            "name": user.map(|u| u.name.clone()),
            "roles": user.map_or_else(Vec::new, |u| u.roles.clone()),
        },
        "secObj": {},
    })
}

/// A sequence given as `since`: `0` or an encoded sequence of this database.
fn parse_since(since: &Value, q: usize) -> Result<SeqVector> {
    match since {
        Value::Number(n) if n.as_u64() == Some(0) => Ok(SeqVector::zero(q)),
        Value::String(s) if s == "0" || s.is_empty() => Ok(SeqVector::zero(q)),
        Value::String(s) => Ok(SeqVector::parse(s, q)?),
        other => Ok(SeqVector::parse(&other.to_string(), q)?),
    }
}

/// CouchDB's error name for a node error on a replicated write.
fn error_name(e: &settee_node::Error) -> (String, String) {
    use settee_node::Error as N;
    match e {
        N::Forbidden(r) => ("forbidden".into(), r.clone()),
        N::Unauthorized(r) => ("unauthorized".into(), r.clone()),
        N::Refused { error, reason } => (error.clone(), reason.clone()),
        other => ("error".into(), other.to_string()),
    }
}

fn read_changes(
    snap: &DbSnapshot,
    since: &SeqVector,
    limit: u64,
    filter: ChangesFilter,
    winning_only: bool,
) -> Result<ChangesPage> {
    let opts = ChangesOptions {
        limit: Some(limit),
        all_leaves: !winning_only,
        doc_ids: filter.doc_ids,
        doc_filter: filter.doc_filter,
        ..Default::default()
    };
    let mut changes = snap.changes(since, opts)?;
    let mut rows = Vec::new();
    for row in changes.by_ref() {
        let row = row?;
        rows.push(Change {
            seq: Value::String(row.seq.encode()),
            id: row.id,
            revs: row.revs.iter().map(ToString::to_string).collect(),
            deleted: row.deleted,
        });
    }
    let position = changes.position().clone();
    Ok(ChangesPage {
        rows,
        pending: snap.pending(&position).ok(),
        last_seq: Value::String(position.encode()),
    })
}

/// The revisions `w` asks for, as replication sends them.
fn fetch_one(snap: &DbSnapshot, w: &Wanted) -> Result<Vec<Revision>> {
    let Some(rec) = snap.record(&w.id)? else {
        return Ok(Vec::new());
    };
    let since: Vec<Rev> = w
        .atts_since
        .iter()
        .filter_map(|r| Rev::parse(r).ok())
        .collect();
    let opts = DocOptions {
        revs: true,
        attachments: true,
        atts_since: (!since.is_empty()).then_some(since),
        ..Default::default()
    };
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for rev in w.revs.iter().filter_map(|r| Rev::parse(r).ok()) {
        let Some(i) = rec.tree.find(&rev) else {
            continue;
        };
        for leaf in rec.tree.leaves_below(i) {
            if rec.tree.nodes[leaf].info.is_none() || !seen.insert(leaf) {
                continue;
            }
            let bytes = snap.render(&w.id, &rec, leaf, &opts)?;
            let text =
                String::from_utf8(bytes).map_err(|_| settee_db::Error::Corrupted("stored body"))?;
            let json = RawValue::from_string(text)
                .map_err(|_| settee_db::Error::Corrupted("stored body"))?;
            out.push(Revision::new(json)?);
        }
    }
    Ok(out)
}

#[async_trait::async_trait]
impl Endpoint for LocalDb {
    fn display(&self) -> String {
        self.name.clone()
    }

    async fn info(&self) -> Result<DbInfo> {
        let db = self.open().await?;
        let seq = db.snapshot().seq()?;
        Ok(DbInfo {
            update_seq: Value::String(seq.encode()),
            instance_start_time: "0".into(),
        })
    }

    async fn create(&self, params: &Map<String, Value>) -> Result<()> {
        if self.open().await.is_ok() {
            return Ok(());
        }
        settee_node::security::check_server_admin(self.user.as_ref())
            .map_err(|_| Error::Unauthorized(self.name.clone()))?;
        let q = params
            .get("q")
            .and_then(|v| v.as_u64().or_else(|| v.as_str()?.parse().ok()))
            .map(|q| q as usize);
        let partitioned = params
            .get("partitioned")
            .is_some_and(|v| v.as_bool() == Some(true) || v.as_str() == Some("true"));
        let node = self.node.clone();
        let name = self.name.clone();
        let how = settee_db::Creation {
            q,
            partitioned,
            security: Some(node.default_security()),
        };
        let made = tokio::task::spawn_blocking(move || node.catalog.create_with(&name, how))
            .await
            .map_err(|_| Error::Unreachable("creating a database failed".into()))?;
        match made {
            Ok(_) | Err(settee_db::Error::DatabaseExists) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn get_local(&self, id: &str) -> Result<Option<Value>> {
        let db = self.open().await?;
        let Some((n, body)) = db.snapshot().local(id)? else {
            return Ok(None);
        };
        let mut doc: Map<String, Value> = serde_json::from_slice(&body)
            .map_err(|_| settee_db::Error::Corrupted("local document"))?;
        doc.insert("_id".into(), json!(id));
        doc.insert("_rev".into(), json!(format!("0-{n}")));
        Ok(Some(Value::Object(doc)))
    }

    async fn put_local(&self, id: &str, doc: &Value) -> Result<()> {
        let db = self.open().await?;
        let mut doc = doc.clone();
        // Replaces what is there: the job is the only writer of its log.
        let current = db.snapshot().local(id)?.map(|(n, _)| format!("0-{n}"));
        doc["_rev"] = current.map_or(Value::Null, Value::String);
        if doc["_rev"].is_null() {
            doc.as_object_mut().map(|d| d.remove("_rev"));
        }
        let new = NewDoc::from_json(doc, Some(id), String::new, &self.node.limits)?;
        self.node
            .update_doc(
                self.user.as_ref(),
                &db,
                new,
                EditMode::Interactive,
                Durability::Durable,
            )
            .await?;
        Ok(())
    }

    async fn changes(&self, req: ChangesRequest<'_>) -> Result<ChangesPage> {
        let db = self.open().await?;
        let since = parse_since(req.since, db.q())?;
        let filter = self.doc_filter(&db, req.filter)?;
        let mut updates = db.subscribe();
        let deadline = req.wait.map(|w| tokio::time::Instant::now() + w);
        loop {
            let snap = db.snapshot();
            let (since, filter, limit, winning) =
                (since.clone(), filter.clone(), req.limit, req.winning_only);
            let page = tokio::task::spawn_blocking(move || {
                read_changes(&snap, &since, limit, filter, winning)
            })
            .await
            .map_err(|_| Error::Unreachable("reading changes failed".into()))??;
            let Some(deadline) = deadline.filter(|_| page.rows.is_empty()) else {
                return Ok(page);
            };
            // Nothing yet: wait for a write, or until the deadline.
            match tokio::time::timeout_at(deadline, updates.changed()).await {
                Ok(Ok(())) => continue,
                _ => return Ok(page),
            }
        }
    }

    async fn revs_diff(
        &self,
        revs: BTreeMap<String, Vec<String>>,
    ) -> Result<BTreeMap<String, Missing>> {
        let db = self.open().await?;
        let snap = db.snapshot();
        let mut out = BTreeMap::new();
        for (id, list) in revs {
            let parsed: Vec<Rev> = list
                .iter()
                .map(|r| Rev::parse(r))
                .collect::<Result<_, _>>()
                .map_err(|_| Error::BadRequest(format!("Invalid revision for {id}")))?;
            if let Some((missing, ancestors)) = snap.revs_diff(&id, &parsed)? {
                let names = |v: Vec<Rev>| v.iter().map(ToString::to_string).collect();
                out.insert(
                    id,
                    Missing {
                        missing: names(missing),
                        possible_ancestors: names(ancestors),
                    },
                );
            }
        }
        Ok(out)
    }

    async fn fetch(&self, wanted: Vec<Wanted>) -> Result<Vec<Revision>> {
        let (_db, snap) = self.readable().await?;
        tokio::task::spawn_blocking(move || {
            let mut docs = Vec::new();
            for w in &wanted {
                docs.extend(fetch_one(&snap, w)?);
            }
            Ok(docs)
        })
        .await
        .map_err(|_| Error::Unreachable("reading documents failed".into()))?
    }

    async fn write(&self, docs: Vec<Revision>) -> Result<Vec<WriteFailure>> {
        let db = self.open().await?;
        let mut failures = Vec::new();
        let mut parsed = Vec::with_capacity(docs.len());
        for Revision { id, json, .. } in docs {
            let doc = settee_json::deep::from_slice(json.get().as_bytes())
                .map_err(|_| Error::Garbage(format!("revision of {id} is not JSON")))?;
            match NewDoc::from_json(doc, None, String::new, &self.node.limits) {
                Ok(d) => parsed.push(d),
                Err(e) => failures.push(WriteFailure {
                    id,
                    error: "bad_request".into(),
                    reason: e.to_string(),
                }),
            }
        }
        let ids: Vec<String> = parsed.iter().map(|d| d.id.clone()).collect();
        let results = self
            .node
            .update_docs(
                self.user.as_ref(),
                &db,
                parsed,
                EditMode::Replicated,
                Durability::Durable,
            )
            .await?;
        for (id, result) in ids.into_iter().zip(results) {
            if let Err(e) = result {
                let (error, reason) = error_name(&e);
                failures.push(WriteFailure { id, error, reason });
            }
        }
        Ok(failures)
    }

    async fn ensure_full_commit(&self) -> Result<()> {
        // Every acknowledged write of this node is on disk already.
        Ok(())
    }

    async fn filter_code(&self, ddoc: &str, name: &str) -> Result<String> {
        let db = self.open().await?;
        let id = format!("_design/{ddoc}");
        let bytes = db
            .snapshot()
            .open_doc(&id, None, &DocOptions::default())
            .map_err(|_| Error::BadRequest(format!("Could not find filter {name}")))?;
        let doc: Value = serde_json::from_slice(&bytes)
            .map_err(|_| settee_db::Error::Corrupted("design document"))?;
        crate::remote::filter_source(&doc, name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_values_are_read() {
        assert_eq!(parse_since(&json!(0), 2).unwrap(), SeqVector::zero(2));
        assert_eq!(parse_since(&json!("0"), 2).unwrap(), SeqVector::zero(2));
        let seq = SeqVector(vec![3, 4]);
        assert_eq!(parse_since(&json!(seq.encode()), 2).unwrap(), seq);
        assert!(parse_since(&json!("garbage"), 2).is_err());
    }
}
