//! `/{db}/_design/{ddoc}/_rewrite/{path}`: a design document's `rewrites` send the request
//! on to another path, where it is handled from the start as if the client had asked for it
//! (access checks included). `rewrites` is an array of rules (`from`, `to`, `method`,
//! `query`, `formats`) matched in order, or the source of a function given the request.

use std::sync::Arc;

use serde_json::{Map, Value};
use settee_js::Render;
use settee_node::DesignFunction;

use crate::db::{join_error, open};
use crate::error::{HttpError, HttpResult};
use crate::render::{design_json, request_object};
use crate::reply::{self, Response};
use crate::request::{segments, Query, Req};
use crate::server::{route, State};

/// Rewrites one request may go through (`[httpd] rewrite_limit`'s default).
const REWRITE_LIMIT: u32 = 100;

/// Query parameters a rule reads and writes as JSON.
const JSON_PARAMS: [&str; 6] = ["key", "startkey", "start_key", "endkey", "end_key", "keys"];

/// `/{db}/_design/{ddoc}/_rewrite/…`, any method.
pub async fn rewrite(
    state: &Arc<State>,
    req: &mut Req,
    name: &str,
    ddoc: &str,
) -> HttpResult<Response> {
    req.rewrites += 1;
    if req.rewrites > REWRITE_LIMIT {
        return Err(HttpError::bad_request("Exceeded rewrite recursion limit"));
    }
    let db = open(state, name)?;
    let design = design_json(&db, ddoc)?;
    let prefix = vec![name.to_string(), "_design".to_string(), ddoc.to_string()];
    match design.get("rewrites") {
        Some(Value::Array(rules)) => {
            let rules = rules
                .iter()
                .map(Rule::compile)
                .collect::<HttpResult<Vec<_>>>()?;
            let path = req.segments[4..].to_vec();
            let (to, query) = dispatch(&rules, req, &path)?;
            go_to(state, req, &prefix, &to, query).await
        }
        Some(Value::String(_)) => {
            let f = DesignFunction::find(design, Render::Rewrite, "rewrites")?;
            let reqobj = request_object(state, req, &db, None, true).await?;
            let node = state.node.clone();
            let answer = tokio::task::spawn_blocking(move || node.rewrite(&f, &reqobj))
                .await
                .map_err(join_error)??;
            let Some(answer) = answer else {
                return Err(invalid_path());
            };
            follow(state, req, &prefix, answer).await
        }
        Some(_) => Err(HttpError::not_found("missing")),
        None => Err(invalid_path()),
    }
}

fn invalid_path() -> HttpError {
    HttpError::new(404, "rewrite_error", "Invalid path.")
}

fn rewrite_error(reason: &str) -> HttpError {
    HttpError::new(500, "rewrite_error", reason)
}

/// Query parameters, in order.
type Params = Vec<(String, String)>;

/// What a rule bound: its path variables, and the segments its `*` matched.
type Bound = (Params, Vec<String>);

/// One rule of a `rewrites` array.
struct Rule {
    from: Vec<String>,
    to: Vec<String>,
    method: Option<String>,
    query: Map<String, Value>,
    formats: Map<String, Value>,
}

/// A path's non-empty parts.
fn parts(path: &str) -> Vec<String> {
    path.split('/')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect()
}

impl Rule {
    /// Reads a rule; every rule of a design document is read before any is matched, so one
    /// bad rule fails every request (as in CouchDB).
    fn compile(rule: &Value) -> HttpResult<Rule> {
        let text = |k: &str| rule.get(k).and_then(Value::as_str);
        let Some(to) = text("to") else {
            return Err(HttpError::new(500, "error", "invalid_rewrite_target"));
        };
        let to = parts(to);
        if to.iter().filter(|p| *p == "..").count() > 2 {
            return Err(HttpError::new(
                500,
                "insecure_rewrite_rule",
                "too many ../.. segments",
            ));
        }
        let object = |k: &str| {
            rule.get(k)
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default()
        };
        Ok(Rule {
            from: parts(text("from").unwrap_or("*")),
            to,
            method: text("method").map(str::to_string),
            query: object("query"),
            formats: object("formats"),
        })
    }

    /// The path variables this rule binds for `path`, and what `*` matched; `None` when it
    /// does not match.
    fn bind(&self, method: &str, path: &[String]) -> Option<Bound> {
        if self.method.as_deref().is_some_and(|m| m != method) {
            return None;
        }
        let mut vars = Vec::new();
        for (i, part) in self.from.iter().enumerate() {
            if part == "*" {
                return Some((vars, path.get(i..).unwrap_or_default().to_vec()));
            }
            let seg = path.get(i)?;
            match part.strip_prefix(':') {
                Some(var) => vars.push((var.to_string(), seg.clone())),
                None if part == seg => {}
                None => return None,
            }
        }
        (path.len() == self.from.len()).then_some((vars, Vec::new()))
    }
}

/// The first rule matching the request: where it goes (relative to the design document)
/// and its query; 404 `missing` when none matches.
fn dispatch(rules: &[Rule], req: &Req, path: &[String]) -> HttpResult<(Vec<Segment>, Params)> {
    let method = req.method.as_str();
    for rule in rules {
        let Some((vars, rest)) = rule.bind(method, path) else {
            continue;
        };
        let to = target(&rule.to, &vars, &rest);
        let query = rule_query(rule, &req.query, &vars, &rest)?;
        return Ok((to, query));
    }
    Err(HttpError::not_found("missing"))
}

/// One segment of a rewritten path: the rule's own (where `.` and `..` move), or one the
/// request's path filled in (a name, whatever it says, so no request climbs out).
#[derive(Clone, Debug, PartialEq)]
enum Segment {
    Rule(String),
    Given(String),
}

/// A rule's `to` with its variables and `*` filled in.
fn target(to: &[String], vars: &[(String, String)], rest: &[String]) -> Vec<Segment> {
    let mut out = Vec::new();
    for part in to {
        if part == "*" {
            out.extend(rest.iter().cloned().map(Segment::Given));
        } else if let Some(var) = part.strip_prefix(':') {
            let value = vars.iter().find(|(k, _)| k == var).map(|(_, v)| v.as_str());
            out.push(Segment::Given(value.unwrap_or("undefined").to_string()));
        } else {
            out.push(Segment::Rule(part.clone()));
        }
    }
    out
}

/// The rewritten request's query: the rule's parameters (`:var` and `*` values filled in
/// from the path and the request's query), then the request's own parameters the rule does
/// not set, then the path's variables.
fn rule_query(
    rule: &Rule,
    query: &Query,
    vars: &[(String, String)],
    rest: &[String],
) -> HttpResult<Vec<(String, String)>> {
    let mut given: Vec<(String, Value)> = Vec::new();
    for (k, v) in &query.0 {
        let value = if JSON_PARAMS.contains(&k.as_str()) {
            serde_json::from_str(v).unwrap_or_else(|_| Value::String(v.clone()))
        } else {
            Value::String(v.clone())
        };
        given.push((k.clone(), value));
    }
    let lookup = |name: &str| -> Option<Value> {
        vars.iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| Value::String(v.clone()))
            .or_else(|| {
                given
                    .iter()
                    .rev()
                    .find(|(k, _)| k == name)
                    .map(|(_, v)| v.clone())
            })
    };
    let fill = |v: &Value| -> Value {
        match v {
            Value::String(s) if s == "*" && !rest.is_empty() => Value::String(rest.join("/")),
            Value::String(s) => match s.strip_prefix(':') {
                Some(name) => lookup(name).unwrap_or_else(|| v.clone()),
                None => v.clone(),
            },
            other => other.clone(),
        }
    };
    let mut out = Vec::new();
    for (k, v) in &rule.query {
        let mut value = match v {
            Value::Array(items) => Value::Array(items.iter().map(fill).collect()),
            other => fill(other),
        };
        if let Some(format) = rule.formats.get(k).and_then(Value::as_str) {
            value = formatted(value, format);
        }
        out.push((k.clone(), param_text(k, &value)?));
    }
    for (k, v) in given.iter().rev() {
        if !rule.query.contains_key(k) {
            out.push((k.clone(), param_text(k, v)?));
        }
    }
    for (k, v) in vars {
        if !rule.query.contains_key(k) {
            out.push((k.clone(), v.clone()));
        }
    }
    Ok(out)
}

/// A rule's `formats` conversion of a filled-in value (`int`, `bool`).
fn formatted(value: Value, format: &str) -> Value {
    let Value::String(text) = &value else {
        return value;
    };
    match format {
        "int" => text.parse::<i64>().map_or(value.clone(), Value::from),
        "bool" => match text.as_str() {
            "true" => Value::Bool(true),
            "false" => Value::Bool(false),
            _ => value,
        },
        _ => value,
    }
}

/// A parameter as query text: JSON for the key parameters, else the string (an array's
/// strings joined); anything else cannot be a parameter (CouchDB's `badarg`).
fn param_text(key: &str, value: &Value) -> HttpResult<String> {
    if JSON_PARAMS.contains(&key) {
        return Ok(value.to_string());
    }
    let badarg = || HttpError::new(500, "unknown_error", "badarg");
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Array(items) => items
            .iter()
            .map(|i| i.as_str().map(str::to_string).ok_or_else(badarg))
            .collect(),
        _ => Err(badarg()),
    }
}

/// `parts` after `base`, with the rule's `.` and `..` resolved (never above the root).
fn normalise(base: &[String], parts: &[Segment]) -> Vec<String> {
    let mut out = base.to_vec();
    for part in parts {
        match part {
            Segment::Rule(p) if p == "." => {}
            Segment::Rule(p) if p == ".." => {
                out.pop();
            }
            Segment::Rule(p) | Segment::Given(p) => out.push(p.clone()),
        }
    }
    out
}

/// Sends the request on to `to` (relative to the design document) with `query`.
async fn go_to(
    state: &Arc<State>,
    req: &mut Req,
    prefix: &[String],
    to: &[Segment],
    query: Vec<(String, String)>,
) -> HttpResult<Response> {
    let path = normalise(prefix, to);
    let encoded: Vec<String> = path.iter().map(|p| crate::request::url_encode(p)).collect();
    let mut raw = format!("/{}", encoded.join("/"));
    let query_text = encode_query(&query);
    if !query_text.is_empty() {
        raw.push('?');
        raw.push_str(&query_text);
    }
    tracing::debug!(to = %raw, "rewrite");
    req.segments = segments(&raw[..raw.find('?').unwrap_or(raw.len())]);
    req.query = Query(query);
    req.raw_path = raw;
    Box::pin(route(state, req)).await
}

/// A query string for `pairs`.
fn encode_query(pairs: &[(String, String)]) -> String {
    let enc = |s: &str| {
        percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string()
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// Where a rewrite function sent the request: on to its `path` (with its `query`,
/// `method`, `headers` and `body` in place of the request's), or answered with its `code`,
/// `headers` and `body`.
async fn follow(
    state: &Arc<State>,
    req: &mut Req,
    prefix: &[String],
    answer: Value,
) -> HttpResult<Response> {
    let Value::Object(answer) = answer else {
        return Err(rewrite_error("bad rewrite"));
    };
    if let Some(code) = answer.get("code") {
        return respond(code, &answer);
    }
    let Some(Value::String(path)) = answer.get("path") else {
        return Err(rewrite_error("Rewrite result must produce a new path."));
    };
    if let Some(method) = answer.get("method") {
        let method = method.as_str().ok_or_else(|| rewrite_error("bad method"))?;
        req.method = hyper::Method::from_bytes(method.as_bytes())
            .map_err(|_| rewrite_error("bad method"))?;
    }
    if let Some(headers) = answer.get("headers") {
        insert_headers(&mut req.headers, headers)?;
    }
    if let Some(body) = answer.get("body") {
        let body = body.as_str().ok_or_else(|| rewrite_error("bad body"))?;
        req.preread = Some(bytes::Bytes::copy_from_slice(body.as_bytes()));
    }
    let (path, inline_query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(Query::parse(Some(q)))),
        None => (path.as_str(), None),
    };
    let query = match answer.get("query") {
        Some(q) => Query(strings(q, "bad query")?),
        None => inline_query.unwrap_or_else(|| req.query.clone()),
    };
    // A rewrite function's path is its own: its `..` move.
    let to: Vec<Segment> = segments(path).into_iter().map(Segment::Rule).collect();
    go_to(state, req, prefix, &to, query.0).await
}

/// An object of strings as pairs; CouchDB's `rewrite_error` for anything else.
fn strings(v: &Value, what: &str) -> HttpResult<Vec<(String, String)>> {
    let Value::Object(map) = v else {
        return Err(rewrite_error(what));
    };
    map.iter()
        .map(|(k, v)| match v {
            Value::String(s) => Ok((k.clone(), s.clone())),
            other => Err(rewrite_error(&format!(
                "object key/value must be strings <<\"{k}\">>={other}"
            ))),
        })
        .collect()
}

/// Sets the headers of a rewrite function's `headers` object in `map`.
fn insert_headers(map: &mut hyper::HeaderMap, headers: &Value) -> HttpResult<()> {
    for (k, v) in strings(headers, "bad headers")? {
        let name = hyper::header::HeaderName::from_bytes(k.as_bytes())
            .map_err(|_| rewrite_error("bad headers"))?;
        let value =
            hyper::header::HeaderValue::from_str(&v).map_err(|_| rewrite_error("bad headers"))?;
        map.insert(name, value);
    }
    Ok(())
}

/// A rewrite function's own answer: `code` (200-599), `headers`, `body`, as given.
fn respond(code: &Value, answer: &Map<String, Value>) -> HttpResult<Response> {
    let code = code
        .as_u64()
        .filter(|c| (200..600).contains(c))
        .ok_or_else(|| rewrite_error("bad code"))? as u16;
    let body = match answer.get("body") {
        None => Vec::new(),
        Some(Value::String(s)) => s.as_bytes().to_vec(),
        Some(_) => return Err(rewrite_error("bad body")),
    };
    let mut resp = reply::bytes(code, body);
    resp.headers_mut().remove(hyper::header::CONTENT_TYPE);
    if let Some(headers) = answer.get("headers") {
        insert_headers(resp.headers_mut(), headers)?;
    }
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rule(v: Value) -> Rule {
        Rule::compile(&v).unwrap()
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn rules_bind_variables_and_the_rest() {
        let r = rule(json!({"from": "/doc/:id", "to": "../../:id"}));
        let (vars, rest) = r.bind("GET", &s(&["doc", "a"])).unwrap();
        assert_eq!(vars, vec![("id".to_string(), "a".to_string())]);
        assert!(rest.is_empty());
        let to = target(&r.to, &vars, &rest);
        assert_eq!(normalise(&s(&["db", "_design", "d"]), &to), s(&["db", "a"]));
        assert!(r.bind("GET", &s(&["doc"])).is_none());
        assert!(r.bind("GET", &s(&["doc", "a", "b"])).is_none());
        let star = rule(json!({"from": "/files/*", "to": "../../*", "method": "GET"}));
        let (_, rest) = star.bind("GET", &s(&["files", "x", "y"])).unwrap();
        let to = target(&star.to, &[], &rest);
        assert_eq!(
            normalise(&s(&["db", "_design", "d"]), &to),
            s(&["db", "x", "y"])
        );
        let (_, climb) = star.bind("GET", &s(&["files", "..", ".."])).unwrap();
        let to = target(&star.to, &[], &climb);
        assert_eq!(
            normalise(&s(&["db", "_design", "d"]), &to),
            s(&["db", "..", ".."]),
            "the request's `..` are names"
        );
        assert!(
            star.bind("PUT", &s(&["files", "x"])).is_none(),
            "methods match exactly"
        );
    }

    #[test]
    fn bad_rules_are_refused() {
        let e = Rule::compile(&json!({"from": "x"})).err().unwrap();
        assert_eq!(
            (e.status, e.reason.as_str()),
            (500, "invalid_rewrite_target")
        );
        let e = Rule::compile(&json!({"to": "../../../x"})).err().unwrap();
        assert_eq!(e.error, "insecure_rewrite_rule");
    }

    #[test]
    fn queries_fill_in_variables_as_json_where_couchdb_does() {
        let r = rule(
            json!({"from": "/by/:tag", "to": "_view/v", "query": {"key": ":tag", "limit": ":n", "include_docs": "true"}}),
        );
        let q = Query::parse(Some("n=5&x=1"));
        let (vars, rest) = r.bind("GET", &s(&["by", "red"])).unwrap();
        let query = rule_query(&r, &q, &vars, &rest).unwrap();
        let pairs: Vec<(&str, &str)> = query
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("key", "\"red\""),
                ("limit", "5"),
                ("include_docs", "true"),
                ("x", "1"),
                ("n", "5"),
                ("tag", "red")
            ]
        );
        let bad = rule(json!({"to": "x", "query": {"limit": 3}}));
        assert_eq!(
            rule_query(&bad, &Query::default(), &[], &[])
                .unwrap_err()
                .reason,
            "badarg"
        );
    }
}
