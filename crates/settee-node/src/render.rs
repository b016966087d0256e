//! Design-document functions that answer requests: `shows`, `lists`, `updates` and
//! `rewrites` (a function). JavaScript runs on the calling thread's embedded engine; other
//! languages go through their query server with CouchDB's `ddoc` commands (and, for lists,
//! `list_row` and `list_end`). Every function here blocks: run them on a blocking thread.

use serde_json::{json, Value};
use settee_js::{ListIo, Render};
use settee_queryserver::{Error as QsError, QueryServers};

use crate::error::{Error, Result};
use crate::Node;

/// One function of a design document, found by kind and name.
#[derive(Clone, Debug)]
pub struct DesignFunction {
    /// The design document, as stored (its `_id` and `_rev` included).
    pub ddoc: Value,
    kind: Render,
    name: String,
    language: String,
    source: String,
}

/// The member of a design document holding functions of `kind`.
fn member(kind: Render) -> &'static str {
    match kind {
        Render::Show => "shows",
        Render::List => "lists",
        Render::Update => "updates",
        Render::Rewrite => "rewrites",
    }
}

impl DesignFunction {
    /// The function `name` of `kind` in `ddoc` (for rewrites, `rewrites` itself when it is
    /// a function's source); CouchDB's `not_found` naming the missing member otherwise.
    pub fn find(ddoc: Value, kind: Render, name: &str) -> Result<DesignFunction> {
        let field = member(kind);
        let source = match kind {
            Render::Rewrite => ddoc.get(field),
            _ => ddoc.get(field).and_then(|m| m.get(name)),
        };
        let Some(Value::String(source)) = source else {
            // CouchDB names the member it did not find.
            let missing = if ddoc.get(field).is_none() {
                field
            } else {
                name
            };
            return Err(Error::NotFound(format!("missing json key: {missing}")));
        };
        let language = ddoc
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or("javascript")
            .to_string();
        Ok(DesignFunction {
            source: source.clone(),
            kind,
            name: name.to_string(),
            language,
            ddoc,
        })
    }

    /// The engine's cache key: the design document's revision and the function.
    fn key(&self) -> String {
        let text = |k: &str| self.ddoc.get(k).and_then(Value::as_str).unwrap_or_default();
        format!(
            "{}:{}:{}:{}",
            member(self.kind),
            text("_id"),
            text("_rev"),
            self.name
        )
    }

    /// The `ddoc` command path of the function.
    fn path(&self) -> Vec<&str> {
        match self.kind {
            Render::Rewrite => vec!["rewrites"],
            kind => vec![member(kind), &self.name],
        }
    }
}

impl Node {
    /// Runs a show function over `doc` (JSON, `null` for none); the response object
    /// (`code`, `headers`, `body` or `json` or `base64`).
    pub fn show(&self, f: &DesignFunction, doc: &str, req: &Value) -> Result<Value> {
        let args = vec![doc.to_string(), req.to_string()];
        let answer = self.call(f, args, |p, timeout| {
            let doc: Value = serde_json::from_str(doc).unwrap_or(Value::Null);
            p.ddoc(&f.ddoc, &f.path(), &json!([doc, req]), timeout)
        })?;
        match answer {
            // The query server's answer is `["resp", response]`.
            Value::Array(mut parts) if parts.len() == 2 && parts[0] == "resp" => {
                Ok(parts.pop().unwrap_or_default())
            }
            resp @ Value::Object(_) => Ok(resp),
            other => Err(render_error(format!("not a response: {other}"))),
        }
    }

    /// Runs an update function over `doc` (JSON, `null` for none); the document to save
    /// (`null` for none) and the response object.
    pub fn update(&self, f: &DesignFunction, doc: &str, req: &Value) -> Result<(Value, Value)> {
        let args = vec![doc.to_string(), req.to_string()];
        let answer = self.call(f, args, |p, timeout| {
            let doc: Value = serde_json::from_str(doc).unwrap_or(Value::Null);
            p.ddoc(&f.ddoc, &f.path(), &json!([doc, req]), timeout)
        })?;
        let mut parts = match answer {
            Value::Array(parts) => parts,
            other => return Err(render_error(format!("not an update answer: {other}"))),
        };
        // The query server's answer is `["up", doc, response]`; the engine's `[doc, response]`.
        if parts.len() == 3 && parts[0] == "up" {
            parts.remove(0);
        }
        match <[Value; 2]>::try_from(parts) {
            Ok([doc, resp]) if resp.is_object() => Ok((doc, resp)),
            _ => Err(render_error(
                "undefined response from update function".into(),
            )),
        }
    }

    /// Runs a rewrite function: where the request goes (`path`, `query`, `method`,
    /// `headers`, `body`), or a response to send (`code`, `headers`, `body`); `None` when
    /// the function has no rule for it.
    pub fn rewrite(&self, f: &DesignFunction, req: &Value) -> Result<Option<Value>> {
        let answer = self.call(f, vec![req.to_string()], |p, timeout| {
            p.ddoc(&f.ddoc, &f.path(), &json!([req]), timeout)
        })?;
        match answer {
            Value::Null => Ok(None),
            Value::Array(mut parts) if parts.first() == Some(&json!("ok")) && parts.len() == 2 => {
                match parts.pop().unwrap_or_default() {
                    Value::String(path) => Ok(Some(json!({"path": path, "method": req["method"]}))),
                    other => Ok(Some(other)),
                }
            }
            Value::Array(parts) if parts.first() == Some(&json!("no_dispatch_rule")) => Ok(None),
            other => Ok(Some(other)),
        }
    }

    /// Runs a list function with the view's `head`, its rows read from and output written
    /// to `io`; answers the last chunk.
    pub fn list(
        &self,
        f: &DesignFunction,
        head: &Value,
        req: &Value,
        io: Box<dyn ListIo>,
    ) -> Result<String> {
        if f.language == "javascript" {
            let limits = self.views.pool().limits();
            let (head, req) = (head.to_string(), req.to_string());
            return settee_js::with_local_engine(limits, move |e| {
                e.load_render(&f.key(), Render::List, &f.source, &f.ddoc.to_string())?;
                let (out, _) = e.list(&f.key(), head, req, io);
                out
            })
            .map_err(js_error);
        }
        external_list(self.views.servers(), f, head, req, io).map_err(qs_error)
    }

    /// Runs `f` with JSON-text `args` in-process, or through its query server with `prompt`.
    fn call(
        &self,
        f: &DesignFunction,
        args: Vec<String>,
        prompt: impl FnOnce(
            &mut settee_queryserver::Process,
            std::time::Duration,
        ) -> Result<Value, QsError>,
    ) -> Result<Value> {
        if f.language == "javascript" {
            let limits = self.views.pool().limits();
            let text = settee_js::with_local_engine(limits, |e| {
                e.load_render(&f.key(), f.kind, &f.source, &f.ddoc.to_string())?;
                e.render(&f.key(), args)
            })
            .map_err(js_error)?;
            return serde_json::from_str(&text)
                .map_err(|_| render_error(format!("not JSON: {text}")));
        }
        let servers = self.views.servers();
        let mut process = servers.checkout(&f.language).map_err(qs_error)?;
        let timeout = process.timeout();
        prompt(&mut process, timeout).map_err(qs_error)
    }
}

/// A list through a query server: `["lists", name]` answers `["start", chunks, response]`,
/// then each row is sent as `["list_row", row]` (answered `["chunks", …]`, or `["end", …]`
/// to stop early) and the end as `["list_end"]` (answered `["end", chunks]`).
fn external_list(
    servers: &QueryServers,
    f: &DesignFunction,
    head: &Value,
    req: &Value,
    mut io: Box<dyn ListIo>,
) -> Result<String, QsError> {
    let mut process = servers.checkout(&f.language)?;
    let timeout = process.timeout();
    let answer = process.ddoc(&f.ddoc, &f.path(), &json!([head, req]), timeout)?;
    let (kind, chunks, resp) = list_answer(answer)?;
    if kind != "start" {
        process.discard();
        return Err(QsError::Process(format!("list answered {kind}, not start")));
    }
    let resp = resp.unwrap_or_else(|| json!({}));
    if !io.start(resp.to_string(), chunks) {
        process.discard();
        return Ok(String::new());
    }
    loop {
        let (command, last) = match io.next_row() {
            Some(row) => (format!("[\"list_row\",{row}]"), false),
            None => ("[\"list_end\"]".to_string(), true),
        };
        let answer = process.prompt_raw(command.into_bytes(), timeout)?;
        let answer: Value = serde_json::from_str(&answer)
            .map_err(|_| QsError::Process(format!("not JSON: {answer}")))?;
        let (kind, chunks, _) = list_answer(answer)?;
        match kind.as_str() {
            "end" => {
                if !last {
                    // Stopped early: the process still waits for the rest of the list.
                    process.discard();
                }
                return Ok(chunks);
            }
            "chunks" if !last => {
                if !io.send(chunks) {
                    process.discard();
                    return Ok(String::new());
                }
            }
            other => {
                process.discard();
                return Err(QsError::Process(format!("unexpected list answer {other}")));
            }
        }
    }
}

/// A list answer's kind, its chunks joined, and its response object if any.
fn list_answer(answer: Value) -> Result<(String, String, Option<Value>), QsError> {
    let bad = || QsError::Process(format!("not a list answer: {answer}"));
    let parts = answer.as_array().ok_or_else(bad)?;
    let kind = parts.first().and_then(Value::as_str).ok_or_else(bad)?;
    let chunks = parts
        .get(1)
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).collect::<String>())
        .unwrap_or_default();
    Ok((kind.to_string(), chunks, parts.get(2).cloned()))
}

fn render_error(reason: String) -> Error {
    Error::Refused {
        error: "render_error".into(),
        reason,
    }
}

/// A function's own error (`{error, reason}` it threw) keeps its name; the engine's
/// failures (time, memory) are the views' errors.
fn js_error(e: settee_js::Error) -> Error {
    match e {
        settee_js::Error::Raised { error, reason } => Error::Refused { error, reason },
        other => Error::Views(std::sync::Arc::new(other.into())),
    }
}

fn qs_error(e: QsError) -> Error {
    match e {
        QsError::Raised { error, reason } => Error::Refused { error, reason },
        other => other.into(),
    }
}
