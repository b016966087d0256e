//! Changes-feed filters from design documents: `filter=ddoc/name` (the design document's
//! `filters.name` function, in JavaScript or through its language's query server) and
//! `filter=_view` (documents the view's map function emits a row for). The feed calls a
//! [`Filter`] on each document; the caller supplies the request object filter functions see.

use std::sync::Arc;

use serde_json::{json, Value};
use settee_db::{Database, DocOptions};

use crate::{DesignDoc, Error, Result, Views};

/// Whether a document passes; an error ends the feed with it.
pub type Filter = Arc<dyn Fn(&Value) -> Result<bool> + Send + Sync>;

impl Views {
    /// `filter=_view&view=ddoc/view`: documents for which the view's map function emits at
    /// least one row.
    pub fn view_filter(&self, db: &Database, view: &str) -> Result<Filter> {
        let (ddoc_name, view_name) = view.split_once('/').ok_or_else(|| {
            Error::BadRequest("`view` must be of the form `designname/viewname`".into())
        })?;
        let body = design_json(db, ddoc_name)?;
        json_key(&body, &["views", view_name])?;
        let ddoc = DesignDoc::parse(&format!("_design/{ddoc_name}"), &body, db.partitioned())?;
        let (_, def) = ddoc
            .view(view_name)
            .ok_or(Error::NotFound("missing_named_view"))?;
        let key = format!("viewfilter:{}:{}", ddoc.signature(), def.name);
        let map = def.map.clone();
        if ddoc.language != "javascript" {
            return self.external_view_filter(&ddoc, map, key);
        }
        let (ddoc_text, limits) = (body.to_string(), self.pool().limits());
        Ok(Arc::new(move |doc: &Value| {
            let out = settee_js::with_local_engine(limits, |e| {
                e.load_view_filter(&key, &map, &ddoc_text)?;
                e.filter_docs(&key, format!("[{doc}]"), "{}".to_string())
            })?;
            Ok(out.first() == Some(&true))
        }))
    }

    /// `filter=ddoc/name`: the design document's `filters.name` function, called with each
    /// document and `request` (the request object, as CouchDB builds it).
    pub fn design_filter(&self, db: &Database, filter: &str, request: Value) -> Result<Filter> {
        let (ddoc_name, name) = filter.split_once('/').ok_or_else(|| {
            Error::BadRequest("`filter` must be of the form `designname/filtername`".into())
        })?;
        let ddoc = design_json(db, ddoc_name)?;
        let source = json_key(&ddoc, &["filters", name])?
            .as_str()
            .ok_or_else(|| Error::BadRequest(format!("filter {name} is not a function")))?
            .to_string();
        let language = ddoc
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or("javascript")
            .to_string();
        if language != "javascript" {
            return self.external_filter(ddoc, &language, name, request);
        }
        let key = format!("filter:{ddoc_name}:{name}:{:x}", md5_of(&source));
        let (ddoc_text, limits) = (ddoc.to_string(), self.pool().limits());
        let request = request.to_string();
        Ok(Arc::new(move |doc: &Value| {
            let out = settee_js::with_local_engine(limits, |e| {
                e.load_filter(&key, &source, &ddoc_text)?;
                e.filter_docs(&key, format!("[{doc}]"), request.clone())
            })?;
            Ok(out.first() == Some(&true))
        }))
    }

    /// `filter=_view` for a view in another language: `map_doc` on its query server.
    fn external_view_filter(&self, ddoc: &DesignDoc, map: String, key: String) -> Result<Filter> {
        let servers = self.servers().clone();
        if !servers.has(&ddoc.language) {
            let language = ddoc.language.clone();
            return Err(settee_queryserver::Error::UnknownLanguage(language).into());
        }
        let (language, lib) = (ddoc.language.clone(), ddoc.lib.clone());
        Ok(Arc::new(move |doc: &Value| {
            let mut p = servers.checkout(&language)?;
            let (timeout, config) = (p.timeout(), p.reset_config());
            p.load(&key, &[map.as_str()], &lib, &config, timeout)?;
            let text = p.map_doc(doc.to_string().as_bytes(), timeout)?;
            // One function: `[[...rows...]]`; any row means it passes.
            Ok(serde_json::from_str::<Value>(&text)
                .ok()
                .is_some_and(|rows| rows[0].as_array().is_some_and(|r| !r.is_empty())))
        }))
    }

    /// `filter=ddoc/name` for a design document in another language: the `ddoc` command of
    /// its query server, with each document and the request.
    fn external_filter(
        &self,
        ddoc: Value,
        language: &str,
        name: &str,
        request: Value,
    ) -> Result<Filter> {
        let servers = self.servers().clone();
        if !servers.has(language) {
            let language = language.to_string();
            return Err(settee_queryserver::Error::UnknownLanguage(language).into());
        }
        let (language, name) = (language.to_string(), name.to_string());
        Ok(Arc::new(move |doc: &Value| {
            let mut p = servers.checkout(&language)?;
            let timeout = p.timeout();
            let args = json!([[doc], request]);
            Ok(p.ddoc(&ddoc, &["filters", &name], &args, timeout)? == json!([true, [true]]))
        }))
    }
}

/// Reads `_design/{name}` as JSON, with CouchDB's `not_found` errors.
fn design_json(db: &Database, name: &str) -> Result<Value> {
    let body = db
        .snapshot()
        .open_doc(&format!("_design/{name}"), None, &DocOptions::default())?;
    settee_json::deep::from_slice(&body)
        .map_err(|_| settee_db::Error::Corrupted("stored design document is not JSON").into())
}

/// The member at `path` in a design document, or CouchDB's 404 naming the first key missing.
fn json_key<'a>(ddoc: &'a Value, path: &[&str]) -> Result<&'a Value> {
    path.iter().try_fold(ddoc, |v, key| {
        v.get(key).ok_or_else(|| Error::MissingKey(key.to_string()))
    })
}

fn md5_of(text: &str) -> u128 {
    use md5::{Digest, Md5};
    u128::from_be_bytes(Md5::digest(text.as_bytes()).into())
}
