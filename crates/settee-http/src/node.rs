//! Server-level endpoints: welcome, `_up`, `_uuids`, `_session`, `_all_dbs`, `_dbs_info`,
//! `_active_tasks`, `_membership` and `_node/_local[/_config]`.

use std::sync::Arc;

use hyper::header::SET_COOKIE;
use hyper::Method;
use serde_json::{json, Value};

use settee_config::registry as setting;

use crate::auth;
use crate::db::db_info;
use crate::error::{HttpError, HttpResult};
use crate::reply::{self, Response};
use crate::request::Req;
use crate::server::State;

/// This node's name.
pub const NODE: &str = "settee@127.0.0.1";

pub fn only(req: &Req, methods: &[Method], allow: &'static str) -> HttpResult<()> {
    if methods.contains(&req.method) {
        Ok(())
    } else {
        Err(HttpError::method_not_allowed(allow))
    }
}

/// `GET /`.
pub fn welcome(state: &State, req: &Req) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET,HEAD")?;
    Ok(reply::json_bytes(200, state.welcome.to_vec()))
}

/// `GET /_up`.
pub fn up(req: &Req) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET,HEAD")?;
    Ok(reply::json_bytes(
        200,
        br#"{"status":"ok","seeds":{}}"#.to_vec(),
    ))
}

/// `GET /_uuids?count=N`, with CouchDB's texts for a bad count and its headers that keep
/// caches from handing the same ids out twice.
pub fn uuids(state: &State, req: &Req) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET")?;
    let max = state
        .node
        .config
        .read()
        .expect("config lock")
        .value::<u64>(&setting::UUIDS_MAX_COUNT);
    let too_large = || HttpError::bad_request("count parameter too large");
    let count = match req.query.get("count") {
        None => 1,
        Some(v) => match v.parse::<u64>() {
            Ok(n) if n <= max => n,
            Ok(_) => return Err(too_large()),
            // Digits past what fits are a count too large, as CouchDB's bignums make them.
            Err(_) if !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()) => {
                return Err(too_large())
            }
            Err(_) => return Err(HttpError::bad_request("count must be a positive integer")),
        },
    };
    let ids: Vec<String> = {
        let mut gen = state.node.uuids.lock().expect("uuid lock");
        (0..count).map(|_| gen.next_id()).collect()
    };
    let etag = {
        use md5::{Digest, Md5};
        let mut h = Md5::new();
        ids.iter().for_each(|id| h.update(id.as_bytes()));
        reply::hashed_etag(h.finalize().into())
    };
    let mut resp = reply::json(200, &json!({"uuids": ids}));
    for (name, value) in [
        ("cache-control", "no-cache"),
        ("pragma", "no-cache"),
        ("expires", "Mon, 01 Jan 1990 00:00:00 GMT"),
        ("etag", etag.as_str()),
    ] {
        resp = reply::with_header(resp, hyper::header::HeaderName::from_static(name), value);
    }
    Ok(resp)
}

/// `/_session`: log in (JSON or form), see who you are, log out.
pub async fn session(state: &Arc<State>, req: &mut Req) -> HttpResult<Response> {
    match req.method {
        Method::GET | Method::HEAD => {
            // `basic=true` asks to be made to log in rather than be told nobody is.
            if req.user.is_none() && req.query.get("basic") == Some("true") {
                return Err(HttpError::new(401, "unauthorized", "Please login."));
            }
            let (name, roles) = req
                .user
                .as_ref()
                .map_or((Value::Null, vec![]), |u| (json!(u.name), u.roles.clone()));
            let mut info = json!({"authentication_handlers": state.settings.load().handlers});
            if let Some(how) = req.auth_handler {
                info["authenticated"] = json!(how);
            }
            // As CouchDB: named when the configuration names it, even as `_users`.
            let config = state.node.config.read().expect("config lock");
            if let Some(db) = config.get("chttpd_auth", "authentication_db") {
                info["authentication_db"] = json!(db);
            }
            Ok(reply::json(
                200,
                &json!({"ok": true, "userCtx": {"name": name, "roles": roles}, "info": info}),
            ))
        }
        Method::POST => login(state, req).await,
        Method::DELETE => Ok(reply::with_header(
            reply::ok(),
            SET_COOKIE,
            &settee_auth::cookie::clearing(&state.cookie_attributes(req.tls), true, auth::now()),
        )),
        _ => Err(HttpError::method_not_allowed("GET,HEAD,POST,DELETE")),
    }
}

async fn login(state: &Arc<State>, req: &mut Req) -> HttpResult<Response> {
    let (name, password) = login_form(req).await?;
    let (st, peer) = (state.clone(), req.peer);
    let checked = tokio::task::spawn_blocking(move || {
        st.guarded_login(peer, &name, true, |account| {
            account.filter(|a| a.verify(&password))
        })
    })
    .await
    .map_err(|_| HttpError::new(500, "unknown_error", "login failed"))?;
    let account = match checked {
        Ok(account) => account,
        Err(e) if e.status == 401 => {
            let resp = reply::error(&e);
            let resp = reply::with_header(
                resp,
                SET_COOKIE,
                &settee_auth::cookie::clearing(
                    &state.cookie_attributes(req.tls),
                    false,
                    auth::now(),
                ),
            );
            return redirect(state, req, resp, "fail");
        }
        Err(e) => return Err(e),
    };
    let now = auth::now();
    let cookie = settee_auth::cookie::make(
        &state.secret,
        &account.fingerprint(),
        &account.user.name,
        now,
    );
    let resp = reply::json(
        200,
        &json!({"ok": true, "name": account.user.name, "roles": account.user.roles}),
    );
    let resp = reply::with_header(
        resp,
        SET_COOKIE,
        &settee_auth::cookie::header(&cookie, &state.cookie_attributes(req.tls), now),
    );
    redirect(state, req, resp, "next")
}

/// The name and password a login names, as CouchDB reads them: from a form or a JSON
/// object, the name as `name` or `username` (both, only if they agree).
async fn login_form(req: &mut Req) -> HttpResult<(String, String)> {
    let content_type = req
        .header("content-type")
        .unwrap_or("")
        .to_ascii_lowercase();
    let fields: Vec<(String, Option<String>)> =
        if content_type.starts_with("application/x-www-form-urlencoded") {
            let body = req.bytes(1 << 20).await?;
            let q = crate::request::Query::parse(Some(&String::from_utf8_lossy(&body)));
            ["name", "username", "password"]
                .iter()
                .map(|k| (k.to_string(), q.get(k).map(str::to_string)))
                .collect()
        } else if content_type.starts_with("application/json") {
            let body = req.json_object(1 << 20).await?;
            ["name", "username", "password"]
                .iter()
                .map(|k| {
                    (
                        k.to_string(),
                        body.get(*k).and_then(Value::as_str).map(str::to_string),
                    )
                })
                .collect()
        } else {
            return Err(HttpError::new(
                415,
                "bad_content_type",
                "Content-Type must be 'application/x-www-form-urlencoded' or 'application/json'",
            ));
        };
    let [(_, name), (_, username), (_, password)] =
        <[_; 3]>::try_from(fields).expect("three fields");
    let name = match (name, username) {
        (Some(a), Some(b)) if a != b => {
            return Err(HttpError::bad_request(
                "request body contains different usernames",
            ))
        }
        (Some(n), _) | (None, Some(n)) => n,
        (None, None) => {
            return Err(HttpError::bad_request(
                "request body must contain a username",
            ))
        }
    };
    Ok((name, password.unwrap_or_default()))
}

/// A login's answer sent on as a 302 to the page named by the query parameter `param`
/// (`next` after a success, `fail` after a failure) when there is one, as HTML forms use
/// `/_session`; the body and the cookie stay.
fn redirect(state: &State, req: &Req, mut resp: Response, param: &str) -> HttpResult<Response> {
    let Some(path) = req.query.get(param) else {
        return Ok(resp);
    };
    let location = hyper::header::HeaderValue::from_str(&absolute_uri(state, req, path))
        .map_err(|_| HttpError::bad_request(format!("Invalid `{param}` location")))?;
    *resp.status_mut() = hyper::StatusCode::FOUND;
    resp.headers_mut().insert(hyper::header::LOCATION, location);
    Ok(resp)
}

/// The host (and port) the client asked for: the forwarded host or the `Host` header.
pub(crate) fn client_host(state: &State, req: &Req) -> String {
    forwarded_host(&state.settings.load().forwarded, req).to_string()
}

/// The host the forwarding header named `named.host` gives, else the `Host` header.
fn forwarded_host<'r>(named: &crate::settings::Forwarded, req: &'r Req) -> &'r str {
    forwarded(req, &named.host)
        .or_else(|| req.header(hyper::header::HOST))
        .unwrap_or("127.0.0.1")
}

/// The value of the forwarding header `name`, if the configuration names one.
fn forwarded<'r>(req: &'r Req, name: &Option<hyper::header::HeaderName>) -> Option<&'r str> {
    name.as_ref().and_then(|name| req.header(name))
}

/// `path` on this server as the client reached it: the forwarded host or the `Host` header,
/// and https when the request came over TLS or a proxy says it did, as CouchDB builds it.
pub(crate) fn absolute_uri(state: &State, req: &Req, path: &str) -> String {
    let settings = state.settings.load();
    let named = &settings.forwarded;
    let https = req.tls
        || forwarded(req, &named.ssl) == Some("on")
        || forwarded(req, &named.proto) == Some("https");
    let scheme = if https { "https://" } else { "http://" };
    [scheme, forwarded_host(named, req), path].concat()
}

/// Admin-only server endpoints.
pub async fn route(state: &Arc<State>, req: &mut Req) -> HttpResult<Response> {
    let segs: Vec<String> = req.segments.clone();
    match segs.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["_all_dbs"] => all_dbs(state, req),
        ["_dbs_info"] => dbs_info(state, req).await,
        ["_active_tasks"] => {
            only(req, &[Method::GET, Method::HEAD], "GET,HEAD")?;
            let mut tasks = state.node.catalog.tasks().to_json();
            if let Value::Array(list) = &mut tasks {
                list.extend(state.replicator.active_tasks());
            }
            Ok(reply::json(200, &tasks))
        }
        ["_membership"] => {
            only(req, &[Method::GET, Method::HEAD], "GET,HEAD")?;
            Ok(reply::json(
                200,
                &json!({"all_nodes": [NODE], "cluster_nodes": [NODE]}),
            ))
        }
        ["_node", node] if is_local(node) => {
            only(req, &[Method::GET, Method::HEAD], "GET,HEAD")?;
            Ok(reply::json(200, &json!({"name": NODE})))
        }
        ["_node", node, "_config", ref rest @ ..] if is_local(node) => {
            config(state, req, rest).await
        }
        ["_node", node, ..] if !is_local(node) => {
            Err(HttpError::not_found(format!("no such node: {node}")))
        }
        ["_node", _, "_stats", ref rest @ ..] => crate::stats::stats(state, req, rest),
        ["_node", _, "_prometheus"] => crate::stats::prometheus(state, req),
        ["_node", _, "_system"] => crate::stats::system(state, req),
        ["_node", _, "_versions"] => crate::stats::versions(req),
        ["_node", _, "_smoosh", ..] => Err(unbuilt(req, "_smoosh", "GET")),
        ["_node", _, "_restart", ..] => Err(unbuilt(req, "_restart", "POST")),
        ["_scheduler", ref rest @ ..] => crate::replicate::scheduler(state, req, rest),
        ["_db_updates"] => Box::pin(crate::changes::db_updates(state, req)).await,
        ["_reshard", ref rest @ ..] => Err(unbuilt(req, "_reshard", reshard_methods(rest))),
        [which @ ("_search_analyze" | "_nouveau_analyze")] => {
            let which = which.to_string();
            Box::pin(crate::search::analyze(state, req, &which)).await
        }
        [first, ..] => match NOT_BUILT.iter().find(|(name, _)| *name == first) {
            Some((name, methods)) => Err(unbuilt(req, name, methods)),
            None => not_a_database(req, first),
        },
        [] => Err(HttpError::not_found("Database does not exist.")),
    }
}

/// A server path that names nothing Settee or CouchDB has.
fn not_a_database(req: &Req, name: &str) -> HttpResult<Response> {
    match req.segments.len() {
        // As CouchDB, which takes any other name as a database's: none exists by it, and
        // none can be made.
        1 if req.method == Method::PUT => {
            Err(settee_db::Error::IllegalDatabaseName(name.to_string()).into())
        }
        _ => Err(HttpError::not_found("Database does not exist.")),
    }
}

/// CouchDB's server endpoints that Settee does not have (docs/COMPATIBILITY.md), with the
/// methods CouchDB's handlers take.
const NOT_BUILT: &[(&str, &str)] = &[("_cluster_setup", "GET,POST")];

/// The methods of CouchDB's `_reshard` handlers, by the path after `_reshard`.
fn reshard_methods(rest: &[&str]) -> &'static str {
    match rest {
        [] => "GET,HEAD",
        ["state"] | ["jobs", _, "state"] => "GET,HEAD,PUT",
        ["jobs"] => "GET,HEAD,POST",
        ["jobs", _] => "GET,HEAD,DELETE",
        _ => "GET,HEAD",
    }
}

/// The answer for a CouchDB endpoint Settee does not have, asked with one of the methods
/// CouchDB's handler takes (`allowed`, as its `Allow` header lists them; `*` for any): saying
/// so beats answering as if the path named a document or database. Other methods are refused
/// with 405, as CouchDB refuses them.
pub fn unbuilt(req: &Req, endpoint: &str, allowed: &'static str) -> HttpError {
    let method = if req.method == Method::HEAD {
        "GET"
    } else {
        req.method.as_str()
    };
    if allowed != "*" && !allowed.split(',').any(|m| m.trim() == method) {
        return HttpError::method_not_allowed(allowed);
    }
    HttpError::new(
        501,
        "not_implemented",
        format!("`{endpoint}` is not implemented by this server"),
    )
}

fn is_local(node: &str) -> bool {
    node == "_local" || node == NODE
}

fn all_dbs(state: &State, req: &Req) -> HttpResult<Response> {
    only(req, &[Method::GET, Method::HEAD], "GET,HEAD")?;
    let q = &req.query;
    // As CouchDB's _all_docs over its database list.
    let (start, end) = q.key_range()?.id_bounds();
    let inclusive_end = q.bool("inclusive_end")?.unwrap_or(true);
    let descending = q.flag("descending")?;
    let mut names = state.node.catalog.list()?;
    if descending {
        names.reverse();
    }
    let within = |n: &String| {
        let from_start = start
            .as_ref()
            .is_none_or(|s| if descending { n <= s } else { n >= s });
        let to_end = end
            .as_ref()
            .is_none_or(|e| (if descending { n > e } else { n < e }) || (inclusive_end && n == e));
        from_start && to_end
    };
    let skip = q.u64("skip")?.unwrap_or(0) as usize;
    let limit = q.u64("limit")?.map_or(usize::MAX, |l| l as usize);
    let names: Vec<&String> = names
        .iter()
        .filter(|n| within(n))
        .skip(skip)
        .take(limit)
        .collect();
    Ok(reply::json(200, &json!(names)))
}

async fn dbs_info(state: &State, req: &mut Req) -> HttpResult<Response> {
    let keys: Vec<Value> = match req.method {
        Method::GET | Method::HEAD => state
            .node
            .catalog
            .list()?
            .into_iter()
            .map(Value::String)
            .collect(),
        Method::POST => {
            req.require_json()?;
            let body = req.json_object(state.max_request).await?;
            let keys = match body.get("keys") {
                Some(Value::Array(keys)) => keys.clone(),
                Some(_) => return Err(HttpError::bad_request("`keys` member must be an array.")),
                None => return Err(HttpError::bad_request("`keys` member must exist.")),
            };
            let most = state
                .node
                .config
                .read()
                .expect("config lock")
                .value::<usize>(&setting::MAX_DB_NUMBER_FOR_DBS_INFO_REQ);
            if keys.len() > most {
                return Err(HttpError::bad_request("too_many_keys"));
            }
            keys
        }
        _ => return Err(HttpError::method_not_allowed("GET,HEAD,POST")),
    };
    let mut out = Vec::with_capacity(keys.len());
    for key in keys {
        match key.as_str().map(|name| state.node.catalog.get(name)) {
            Some(Ok(db)) => out.push(json!({"key": key, "info": db_info(&db)?})),
            _ => out.push(json!({"key": key, "error": "not_found"})),
        }
    }
    Ok(reply::json(200, &json!(out)))
}

async fn config(state: &State, req: &mut Req, rest: &[&str]) -> HttpResult<Response> {
    let node = &state.node;
    match (&req.method, rest) {
        // Forgets the changes made in memory only, and takes in changes made to the file.
        (&Method::POST, ["_reload"]) => {
            state.reload_config()?;
            Ok(reply::json(200, &json!({"ok": true})))
        }
        (_, ["_reload"]) => Err(HttpError::method_not_allowed("POST")),
        (&Method::GET | &Method::HEAD, []) => {
            let config = node.config.read().expect("config lock");
            let all: serde_json::Map<String, Value> = config
                .sections()
                .iter()
                .map(|(s, kv)| (s.clone(), section_json(kv)))
                .collect();
            Ok(reply::json(200, &Value::Object(all)))
        }
        (&Method::GET | &Method::HEAD, [section]) => {
            let config = node.config.read().expect("config lock");
            Ok(reply::json(
                200,
                &section_json(config.section(section).unwrap_or(&[])),
            ))
        }
        (&Method::GET | &Method::HEAD, [section, key]) => {
            let config = node.config.read().expect("config lock");
            let v = config
                .get(section, key)
                .ok_or_else(|| HttpError::not_found("unknown_config_value"))?;
            Ok(reply::json(200, &json!(v)))
        }
        (&Method::PUT, [section, key]) => {
            // Refused before the value is read, as CouchDB refuses it.
            settee_node::check_config_key(section, key)?;
            let value = match req.json(1 << 20).await? {
                Value::String(s) => s.trim().to_string(),
                _ => return Err(HttpError::bad_request("config values must be strings")),
            };
            let old = node.set_config(section, key, &value, persist(req))?;
            state.apply_config();
            Ok(reply::json(200, &json!(old.unwrap_or_default())))
        }
        (&Method::DELETE, [section, key]) => {
            let old = node.delete_config(section, key, persist(req))?;
            state.apply_config();
            Ok(reply::json(200, &json!(old.unwrap_or_default())))
        }
        (_, [_, _]) => Err(HttpError::method_not_allowed("GET,PUT,DELETE")),
        _ => Err(HttpError::method_not_allowed("GET")),
    }
}

/// Whether a configuration change goes to the file: unless `X-Couch-Persist: false` asks
/// for it to stay in memory, as CouchDB reads that header.
fn persist(req: &Req) -> bool {
    req.header("x-couch-persist") != Some("false")
}

fn section_json(kv: &[(String, String)]) -> Value {
    Value::Object(kv.iter().map(|(k, v)| (k.clone(), json!(v))).collect())
}
