//! Mango JSON indexes are design documents: creating one adds a view to its design document,
//! deleting one removes it (and the design document with its last index). Both write through
//! [`Node::update_docs`] as the caller, so every design-document rule holds.

use std::sync::Arc;

use serde_json::{json, Value};
use settee_auth::User;
use settee_db::{Database, DocOptions, Durability, EditMode, NewDoc};
use settee_mango::NewIndex;

use crate::error::{Error, Result};
use crate::Node;

impl Node {
    /// Creates the index `new` in `db` as `user`; false when it existed already.
    pub async fn create_index(
        self: &Arc<Self>,
        user: Option<&User>,
        db: &Arc<Database>,
        new: &NewIndex,
    ) -> Result<bool> {
        let id = new.ddoc();
        let current = current_ddoc(db, id)?;
        let updated = new.add_to(current.as_ref())?;
        if current.as_ref() == Some(&updated) {
            return Ok(false);
        }
        self.save_ddoc(user, db, id, updated).await?;
        Ok(true)
    }

    /// Deletes index `index` (its type, `json` or `text`, and name) of design document
    /// `ddoc` in `db` as `user` (every Mango index of it when `None`), deleting the design
    /// document when nothing else is left. A design document or index that is not there, or
    /// a view that is not a JSON index, is CouchDB's `missing`.
    pub async fn delete_indexes(
        self: &Arc<Self>,
        user: Option<&User>,
        db: &Arc<Database>,
        ddoc: &str,
        index: Option<(&str, &str)>,
    ) -> Result<()> {
        let missing = || Error::NotFound("missing".into());
        let current = current_ddoc(db, ddoc)?.ok_or_else(missing)?;
        let indexes = settee_mango::index_names(ddoc, &current);
        let names: Vec<(&str, String)> = match index {
            Some((k, n)) if indexes.iter().any(|(ik, i)| *ik == k && i == n) => {
                vec![(k, n.to_string())]
            }
            Some(_) => return Err(missing()),
            None => indexes,
        };
        if names.is_empty() {
            return Err(missing());
        }
        let mut body = Some(current.clone());
        for (k, n) in &names {
            let Some(b) = body.as_ref() else { break };
            body = settee_mango::remove_from_ddoc(b, k, n).map_err(|_| missing())?;
        }
        let body = body.unwrap_or_else(
            || json!({"_rev": current.get("_rev").cloned().unwrap_or(Value::Null), "_deleted": true}),
        );
        self.save_ddoc(user, db, ddoc, body).await
    }

    /// Writes design document `id` as `user`.
    async fn save_ddoc(
        self: &Arc<Self>,
        user: Option<&User>,
        db: &Arc<Database>,
        id: &str,
        body: Value,
    ) -> Result<()> {
        let doc = NewDoc::from_json(body, Some(id), String::new, &self.limits)?;
        self.update_doc(user, db, doc, EditMode::Interactive, Durability::Durable)
            .await?;
        Ok(())
    }
}

/// The current body of design document `id`, if it exists.
fn current_ddoc(db: &Database, id: &str) -> Result<Option<Value>> {
    match db.snapshot().open_doc(id, None, &DocOptions::default()) {
        Ok(bytes) => Ok(Some(settee_json::deep::from_slice(&bytes).map_err(
            |_| Error::from(settee_db::Error::Corrupted("a design document")),
        )?)),
        Err(settee_db::Error::NotFound(_)) => Ok(None),
        Err(e) => Err(e.into()),
    }
}
