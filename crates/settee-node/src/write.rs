//! The one way documents are written. Every path that writes a document (PUT, POST,
//! `_bulk_docs`, `new_edits=false`, COPY, attachment PUT and DELETE, form uploads, and later
//! the replicator) calls [`Node::update_docs`], which runs, in order and for each document:
//! a partitioned database's id rules (for the whole write), the design-document checks, the
//! users database's rules with password hashing,
//! `_replicator` ownership and every `validate_doc_update`; saves what passed; then wakes the
//! indexers and keeps per-user databases in step with the user documents written.

use std::sync::Arc;

use settee_auth::User;
use settee_db::{is_local, Database, Durability, EditMode, NewDoc, DESIGN_PREFIX};
use settee_json::Rev;

use crate::error::{Error, Result};
use crate::replicator::is_replicator_db;
use crate::security::{is_db_admin, security};
use crate::Node;

impl Node {
    /// Writes `docs` to `db` as `user`: one answer per document, in their order (the new
    /// revision, or why it was refused or failed). The outer error is the database failing
    /// the whole write.
    pub async fn update_docs(
        self: &Arc<Self>,
        user: Option<&User>,
        db: &Arc<Database>,
        docs: Vec<NewDoc>,
        mode: EditMode,
        durability: Durability,
    ) -> Result<Vec<Result<Rev>>> {
        self.update_docs_then(user, db, docs, mode, durability, |answers| answers)
            .await
    }

    /// [`Node::update_docs`], handing the answers to `then` as soon as every edit is
    /// applied, which for a large write is before its commits are synced (see
    /// [`Database::update_then`]): what `then` makes of them (an HTTP answer) is ready when
    /// the edits are durable, and returned only then.
    pub async fn update_docs_then<T>(
        self: &Arc<Self>,
        user: Option<&User>,
        db: &Arc<Database>,
        mut docs: Vec<NewDoc>,
        mode: EditMode,
        durability: Durability,
        then: impl FnOnce(Vec<Result<Rev>>) -> T,
    ) -> Result<T> {
        // As CouchDB: one id that breaks a partitioned database's rules refuses the write.
        if db.partitioned() {
            for doc in &docs {
                settee_db::validate_partitioned_id(&doc.id)?;
            }
        }
        let refused = self.check_writes(user, db, &mut docs).await;
        // In place: a thousand documents are a few hundred kilobytes, which a write that
        // refuses none does not move at all.
        let mut keep = refused.iter().map(Option::is_none);
        docs.retain(|_| keep.next().unwrap_or(false));
        let accepted = docs;
        // Only user documents need their ids after the write (for per-user databases).
        let edits: Vec<(String, bool)> = if self.watches_users(db) {
            accepted.iter().map(|d| (d.id.clone(), d.deleted)).collect()
        } else {
            Vec::new()
        };
        let (answer, written) = db
            .update_then(accepted, mode, durability, |results| {
                let written: Vec<(String, bool)> = edits
                    .into_iter()
                    .zip(&results)
                    .filter(|(_, r)| r.is_ok())
                    .map(|(e, _)| e)
                    .collect();
                (then(merge_answers(refused, results)), written)
            })
            .await?;
        self.views.kick(db);
        self.search.kick(db);
        if !written.is_empty() {
            self.after_user_writes(db, &written).await?;
        }
        Ok(answer)
    }

    /// [`Node::update_docs`] for one document: its new revision, or why it was not written.
    pub async fn update_doc(
        self: &Arc<Self>,
        user: Option<&User>,
        db: &Arc<Database>,
        doc: NewDoc,
        mode: EditMode,
        durability: Durability,
    ) -> Result<Rev> {
        self.update_docs(user, db, vec![doc], mode, durability)
            .await?
            .pop()
            .expect("one answer per document")
    }

    /// Checks and prepares document writes before they are saved; one answer per document,
    /// `None` for those that may be saved. Design documents need a database admin and must
    /// be valid; documents of the users database follow its rules and have passwords hashed;
    /// replication documents belong to their writer; every other document passes the
    /// `validate_doc_update` functions.
    async fn check_writes(
        &self,
        user: Option<&User>,
        db: &Arc<Database>,
        docs: &mut [NewDoc],
    ) -> Vec<Option<Error>> {
        let admin = match is_db_admin(user, db) {
            Ok(a) => a,
            Err(e) => return vec![Some(e); docs.len()],
        };
        let mut out = if admin {
            crate::design::check(self, db, docs).await
        } else {
            design_writes_refused(user, db, docs)
        };
        // Documents that the database's own rules apply to (not design or local ones).
        let ruled = |doc: &NewDoc| !doc.id.starts_with(DESIGN_PREFIX) && !is_local(&doc.id);
        if self.is_users_db(db.name()) {
            let iterations = self.policy().iterations;
            for (doc, slot) in docs.iter_mut().zip(out.iter_mut()) {
                if slot.is_none() && ruled(doc) {
                    *slot = crate::users::prepare_write(db, doc, user, admin, iterations)
                        .await
                        .err();
                }
            }
        }
        if is_replicator_db(db.name()) && !admin {
            for (doc, slot) in docs.iter_mut().zip(out.iter_mut()) {
                if slot.is_none() && ruled(doc) {
                    *slot = crate::replicator::own(db, doc, user).err();
                }
            }
        }
        if let Err(e) = crate::validate::run(self, user, db, docs, &mut out).await {
            return vec![Some(e); docs.len()];
        }
        out
    }
}

/// Each document's answer, in order: its refusal, or the database's result for it
/// (`results` hold those of the documents not refused, in order).
fn merge_answers(
    refused: Vec<Option<Error>>,
    results: Vec<settee_db::EditResult>,
) -> Vec<Result<Rev>> {
    let mut results = results.into_iter();
    refused
        .into_iter()
        .map(|refusal| match refusal {
            Some(e) => Err(e),
            None => results
                .next()
                .unwrap_or(Err(settee_db::Error::Corrupted("a write without answer")))
                .map_err(Error::from),
        })
        .collect()
}

/// For a caller who does not administer `db`: every design document of `docs` refused.
fn design_writes_refused(
    user: Option<&User>,
    db: &Database,
    docs: &[NewDoc],
) -> Vec<Option<Error>> {
    let err = security(db)
        .and_then(|s| Ok(s.check_admin(user)?))
        .err()
        .unwrap_or_else(|| Error::Forbidden("You are not a db or server admin.".into()));
    docs.iter()
        .map(|d| d.id.starts_with(DESIGN_PREFIX).then(|| err.clone()))
        .collect()
}
