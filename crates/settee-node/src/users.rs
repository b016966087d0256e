//! The users database's rules: who may write which user document (with the password hashed
//! before it is stored), and what a caller who does not administer the database may read.

use std::sync::Arc;

use serde_json::{Map, Value};
use settee_auth::{users, User};
use settee_db::{Database, DocOptions, NewDoc, DESIGN_PREFIX};

use crate::error::{join_error, Error, Result};

/// The users database's rules for one document write, with its password hashed (off the
/// event loop: hashing is slow by design).
pub(crate) async fn prepare_write(
    db: &Arc<Database>,
    doc: &mut NewDoc,
    user: Option<&User>,
    admin: bool,
    iterations: u32,
) -> Result<()> {
    if !users::may_write(user, &doc.id, admin) {
        return Err(Error::NotFound("missing".into()));
    }
    let body: Map<String, Value> = settee_json::deep::from_slice(&doc.body)
        .map_err(|_| Error::BadRequest("Document must be a JSON object".into()))?;
    let mut body = tokio::task::spawn_blocking(move || {
        let mut body = body;
        users::hash_password(&mut body, iterations);
        body
    })
    .await
    .map_err(join_error)?;
    let old = db
        .snapshot()
        .open_doc(&doc.id, None, &DocOptions::default())
        .ok()
        .and_then(|b| settee_json::deep::from_slice::<Value>(&b).ok());
    if !admin {
        users::keep_credentials(&mut body, old.as_ref());
    }
    users::validate(&doc.id, doc.deleted, &body, old.as_ref(), user, admin)
        .map_err(|e| Error::Forbidden(e.to_string()))?;
    doc.set_body(&body);
    Ok(())
}

/// What `user`, who does not administer the users database, may see of user document `id`
/// (rendered as `doc`): their own document whole, others only through `public_fields`,
/// design documents not at all.
pub(crate) fn visible(
    user: Option<&User>,
    public_fields: &[String],
    id: &str,
    doc: &[u8],
) -> Result<Vec<u8>> {
    if id.starts_with(DESIGN_PREFIX) {
        return Err(Error::Forbidden(
            "Only administrators can view design docs in the users database.".into(),
        ));
    }
    let value: Value = settee_json::deep::from_slice(doc)
        .map_err(|_| Error::Failed("a stored document is not valid JSON".into()))?;
    let shown = users::visible(id, value, user, false, public_fields)
        .ok_or_else(|| Error::NotFound("missing".into()))?;
    Ok(serde_json::to_vec(&shown).expect("json"))
}
