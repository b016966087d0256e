//! Replication ids, derived as CouchDB 3 derives them (version 4): the MD5 of the Erlang
//! term `[ServerUuid, Source, Target | Filter]`, where an endpoint is its user, host,
//! non-default port, path and headers (not its password), and `+continuous` and
//! `+create_target` follow. The same replication described again, on the same server, gets
//! the same id across restarts, and so finds its checkpoints.

use base64::Engine as _;
use serde_json::Value;
use settee_json::Term;

use crate::endpoint::Filter;
use crate::spec::{EndpointSpec, ReplicationSpec};

/// Headers CouchDB's replicator sends itself, left out of the id.
const DEFAULT_HEADERS: [&str; 2] = ["Accept", "User-Agent"];

fn chars(s: &str) -> Term {
    Term::Chars(s.to_string())
}

fn atom(s: &str) -> Term {
    Term::Atom(s.to_string())
}

/// The user a basic `Authorization` header names.
fn basic_user(value: &str) -> Option<String> {
    let token = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    Some(text.split_once(':')?.0.to_string())
}

/// An endpoint as its part of the id.
fn endpoint_term(spec: &EndpointSpec) -> Term {
    if spec.is_local() {
        return Term::Tuple(vec![
            atom("local"),
            Term::Binary(spec.url.clone().into_bytes()),
        ]);
    }
    let Ok(url) = reqwest::Url::parse(&spec.url) else {
        return Term::Tuple(vec![atom("remote"), atom("undefined"), chars(&spec.url)]);
    };
    let mut header_user = None;
    let mut headers: Vec<(String, String)> = Vec::new();
    for (k, v) in &spec.headers {
        if k.eq_ignore_ascii_case("authorization") && basic_user(v).is_some() {
            header_user = basic_user(v);
        } else if !DEFAULT_HEADERS.contains(&k.as_str()) {
            headers.push((k.clone(), v.clone()));
        }
    }
    headers.sort();
    let url_user = (!url.username().is_empty()).then(|| {
        percent_encoding::percent_decode_str(url.username())
            .decode_utf8_lossy()
            .to_string()
    });
    let user = url_user
        .or(header_user)
        .or_else(|| spec.basic.as_ref().map(|(u, _)| u.clone()));
    let port = match (url.scheme(), url.port_or_known_default()) {
        ("https", Some(443)) | ("http", Some(80)) | ("http", Some(5984)) => atom("default"),
        (_, Some(p)) => Term::Int(i64::from(p)),
        (_, None) => atom("default"),
    };
    // CouchDB reads a database URL with a trailing slash.
    let mut path = url.path().to_string();
    if !path.ends_with('/') {
        path.push('/');
    }
    Term::Tuple(vec![
        atom("remote"),
        user.as_deref().map_or_else(|| atom("undefined"), chars),
        chars(url.host_str().unwrap_or("")),
        port,
        chars(&path),
        Term::List(
            headers
                .iter()
                .map(|(k, v)| Term::Tuple(vec![chars(k), chars(v)]))
                .collect(),
        ),
        atom("undefined"),
    ])
}

/// The id of `spec` on the server whose uuid is `server_uuid`: the base id and the id with
/// its option suffixes. `filter_code` is the source of the design filter, if it has one.
pub fn replication_id(
    server_uuid: &str,
    spec: &ReplicationSpec,
    filter_code: Option<&str>,
) -> (String, String) {
    base_and_suffix(
        Term::Binary(server_uuid.as_bytes().to_vec()),
        spec,
        filter_code,
    )
}

fn base_and_suffix(
    uuid: Term,
    spec: &ReplicationSpec,
    filter_code: Option<&str>,
) -> (String, String) {
    let mut parts = vec![
        uuid,
        endpoint_term(&spec.source),
        endpoint_term(&spec.target),
    ];
    match &spec.filter {
        Filter::All => {}
        Filter::Design { query_params, .. } => {
            parts.push(Term::Binary(filter_code.unwrap_or("").as_bytes().to_vec()));
            parts.push(Term::Json(Value::Object(query_params.clone())));
        }
        Filter::DocIds(ids) => parts.push(Term::Json(serde_json::json!(ids))),
        Filter::Selector(sel) => parts.push(Term::Json(sel.clone())),
    }
    if spec.winning_revs_only {
        parts.push(atom("winning_revs_only"));
    }
    if let Some(since) = &spec.since_seq {
        parts.push(Term::Json(since.clone()));
    }
    let base = Term::List(parts).md5_hex();
    let mut full = base.clone();
    if spec.continuous {
        full.push_str("+continuous");
    }
    if spec.create_target {
        full.push_str("+create_target");
    }
    (base, full)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Settings;
    use serde_json::json;

    #[test]
    fn ids_match_couchdb_3() {
        // The example CouchDB's own tests check against an id computed by CouchDB 3.x.
        let spec = ReplicationSpec::parse(
            &json!({
                "source": "http://adm:pass@127.0.0.1/abc",
                "target": "http://adm:pass@127.0.0.1/xyz",
                "create_target": true,
                "continuous": true
            }),
            &Settings::default(),
        )
        .unwrap();
        let (base, full) = base_and_suffix(chars("somefixedid"), &spec, None);
        assert_eq!(base, "ff71e1208f93ba054eb60e7ca8683fe4");
        assert_eq!(
            full,
            "ff71e1208f93ba054eb60e7ca8683fe4+continuous+create_target"
        );
    }

    #[test]
    fn passwords_do_not_change_the_id_but_filters_do() {
        let id = |body: Value| {
            let spec = ReplicationSpec::parse(&body, &Settings::default()).unwrap();
            replication_id("u", &spec, Some("function(){}")).1
        };
        let a = id(json!({"source": "http://a:1@h/x", "target": "y"}));
        assert_eq!(a, id(json!({"source": "http://a:2@h/x", "target": "y"})));
        assert_ne!(a, id(json!({"source": "http://b:1@h/x", "target": "y"})));
        assert_ne!(
            a,
            id(json!({"source": "http://a:1@h/x", "target": "y", "doc_ids": ["1"]}))
        );
        assert_ne!(a, id(json!({"source": "http://a:1@h/x", "target": "z"})));
        assert!(
            id(json!({"source": "x", "target": "y", "continuous": true})).ends_with("+continuous")
        );
    }
}
