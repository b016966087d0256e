//! Design documents are checked before they are saved, as CouchDB checks them: malformed
//! views are `invalid_design_doc`, functions that do not compile are `compilation_error`.

use serde_json::Value;
use settee_db::{Database, NewDoc, DESIGN_PREFIX};
use settee_views::{DesignDoc, Reduce};

use crate::error::{join_error, Error, Result};
use crate::Node;

/// One answer per document of `docs` for `db`: why a design document may not be saved,
/// `None` for documents that may.
pub(crate) async fn check(node: &Node, db: &Database, docs: &[NewDoc]) -> Vec<Option<Error>> {
    let mut out = vec![None; docs.len()];
    for (i, doc) in docs.iter().enumerate() {
        if doc.deleted || !doc.id.starts_with(DESIGN_PREFIX) {
            continue;
        }
        let Ok(body) = settee_json::deep::from_slice::<Value>(&doc.body) else {
            continue;
        };
        out[i] = match DesignDoc::parse(&doc.id, &body, db.partitioned()) {
            Err(e) => Some(Error::from(e)),
            Ok(ddoc) if ddoc.language == "javascript" && !ddoc.views.is_empty() => {
                compile(node, ddoc).await.err()
            }
            Ok(ddoc) if !ddoc.views.is_empty() && node.views.servers().has(&ddoc.language) => {
                compile_external(node, ddoc).await.err()
            }
            Ok(_) => None,
        };
    }
    out
}

/// CouchDB's reason for a function that does not compile.
fn not_compiled(kind: &str, view: &str, reason: impl std::fmt::Display) -> Error {
    Error::Compilation(format!(
        "Compilation of the {kind} function in the '{view}' view failed: {reason}"
    ))
}

/// Compiles every map and JavaScript reduce function of `ddoc` on the engine pool.
async fn compile(node: &Node, ddoc: DesignDoc) -> Result<()> {
    let pending = node.views.pool().submit(move |engine| {
        for v in &ddoc.views {
            let key = format!("validate:{}", v.map);
            if let Err(e) = engine.load_map(&key, &[v.map.as_str()], "null") {
                return Ok(Err(("map", v.name.clone(), e)));
            }
            if let Some(Reduce::Function(src)) = &v.reduce {
                if let Err(e) = engine.load_reduce(src) {
                    return Ok(Err(("reduce", v.name.clone(), e)));
                }
            }
        }
        Ok(Ok(()))
    });
    let result = tokio::task::spawn_blocking(move || settee_js::wait(pending))
        .await
        .map_err(join_error)?;
    match result {
        Ok(Ok(())) => Ok(()),
        Ok(Err((kind, view, settee_js::Error::Compile(m)))) => Err(not_compiled(kind, &view, m)),
        Ok(Err((kind, view, other))) => Err(not_compiled(kind, &view, other)),
        Err(e) => Err(Error::from(settee_views::Error::from(e))),
    }
}

/// Compiles every map and reduce function of `ddoc` in a process of its language's query
/// server (`reset`, then `add_fun` each), as CouchDB does before saving.
async fn compile_external(node: &Node, ddoc: DesignDoc) -> Result<()> {
    let servers = node.views.servers().clone();
    let checked = tokio::task::spawn_blocking(move || -> Result<()> {
        let mut process = servers.checkout(&ddoc.language)?;
        let (timeout, config) = (process.timeout(), process.reset_config());
        for v in &ddoc.views {
            let reduce = match &v.reduce {
                Some(Reduce::Function(src)) => Some(&**src),
                _ => None,
            };
            let functions =
                std::iter::once(("map", v.map.as_str())).chain(reduce.map(|r| ("reduce", r)));
            for (kind, src) in functions {
                let key = format!("validate:{src}");
                match process.load(&key, &[src], &Value::Null, &config, timeout) {
                    Ok(()) => {}
                    Err(settee_queryserver::Error::Raised { error, reason })
                        if error == "compilation_error" =>
                    {
                        return Err(not_compiled(kind, &v.name, reason))
                    }
                    Err(settee_queryserver::Error::Process(reason)) => {
                        return Err(not_compiled(kind, &v.name, reason))
                    }
                    Err(e) => return Err(e.into()),
                }
            }
        }
        Ok(())
    });
    checked.await.map_err(join_error)?
}
