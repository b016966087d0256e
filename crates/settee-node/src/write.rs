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
        mut docs: Vec<NewDoc>,
        mode: EditMode,
        durability: Durability,
    ) -> Result<Vec<Result<Rev>>> {
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
        let results = db.update(accepted, mode, durability).await?;
        self.views.kick(db);
        self.search.kick(db);
        if !edits.is_empty() {
            let written: Vec<(String, bool)> = edits
                .into_iter()
                .zip(&results)
                .filter(|(_, r)| r.is_ok())
                .map(|(e, _)| e)
                .collect();
            self.after_user_writes(db, &written).await?;
        }
        let mut results = results.into_iter();
        Ok(refused
            .into_iter()
            .map(|refusal| match refusal {
                Some(e) => Err(e),
                None => results
                    .next()
                    .unwrap_or(Err(settee_db::Error::Corrupted("a write without answer")))
                    .map_err(Error::from),
            })
            .collect())
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
