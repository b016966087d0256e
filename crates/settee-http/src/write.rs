//! The one way documents are written. Every path that writes a document (PUT, POST,
//! `_bulk_docs`, `new_edits=false`, COPY, attachment PUT and DELETE, form uploads) calls
//! [`update_docs`], which runs, in order and for each document: the design-document checks,
//! the users database's rules with password hashing, `_replicator` ownership and every
//! `validate_doc_update`; saves what passed; then wakes the indexers and keeps per-user
//! databases in step with the user documents written.

use std::sync::Arc;

use settee_db::{Database, Durability, EditMode, NewDoc};
use settee_json::Rev;

use crate::error::{HttpError, HttpResult};
use crate::request::Req;
use crate::server::State;

/// Writes `docs` to `db` as the caller of `req`: one answer per document, in their order (the
/// new revision, or why it was refused or failed). The outer error is the database failing
/// the whole write.
pub async fn update_docs(
    state: &Arc<State>,
    req: &Req,
    db: &Arc<Database>,
    mut docs: Vec<NewDoc>,
    mode: EditMode,
    durability: Durability,
) -> HttpResult<Vec<HttpResult<Rev>>> {
    let refused = crate::access::check_writes(state, req, db, &mut docs).await;
    let accepted: Vec<NewDoc> = docs
        .into_iter()
        .zip(&refused)
        .filter(|(_, r)| r.is_none())
        .map(|(d, _)| d)
        .collect();
    // Only user documents need their ids after the write (for per-user databases).
    let edits: Vec<(String, bool)> = if crate::peruser::watches(state, db) {
        accepted.iter().map(|d| (d.id.clone(), d.deleted)).collect()
    } else {
        Vec::new()
    };
    let results = db.update(accepted, mode, durability).await?;
    state.views.kick(db);
    if !edits.is_empty() {
        let written: Vec<(String, bool)> = edits
            .into_iter()
            .zip(&results)
            .filter(|(_, r)| r.is_ok())
            .map(|(e, _)| e)
            .collect();
        crate::peruser::after_writes(state, db, &written).await?;
    }
    let mut results = results.into_iter();
    Ok(refused
        .into_iter()
        .map(|refusal| match refusal {
            Some(e) => Err(e),
            None => results
                .next()
                .unwrap_or(Err(settee_db::Error::Corrupted("a write without answer")))
                .map_err(HttpError::from),
        })
        .collect())
}

/// [`update_docs`] for one document: its new revision, or why it was not written.
pub async fn update_doc(
    state: &Arc<State>,
    req: &Req,
    db: &Arc<Database>,
    doc: NewDoc,
    mode: EditMode,
    durability: Durability,
) -> HttpResult<Rev> {
    update_docs(state, req, db, vec![doc], mode, durability)
        .await?
        .pop()
        .expect("one answer per document")
}
