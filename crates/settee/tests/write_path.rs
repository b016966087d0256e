//! One write path (issue 28): a `validate_doc_update` function refuses a write whichever way
//! it arrives, and the per-user database hook follows every write of a user document,
//! attachment writes included.

mod common;

use common::{set_config, TestServer};
use serde_json::{json, Value};

const REFUSAL: &str = "no writes of refused documents";

fn rev_of(r: &common::Resp) -> String {
    r.json()["rev"].as_str().expect("a revision").to_string()
}

#[test]
fn a_validation_function_refuses_writes_by_every_path() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/db", "");
    let vdu = format!(
        "function(newDoc, oldDoc, userCtx) {{ if (newDoc.refuse || (oldDoc && oldDoc.frozen)) throw({{forbidden: '{REFUSAL}'}}); }}"
    );
    let r = c.put(
        "/db/_design/v",
        &json!({ "validate_doc_update": vdu }).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    let forbidden = |r: common::Resp, path: &str| {
        assert_eq!(
            (r.status, r.json()),
            (403, json!({"error": "forbidden", "reason": REFUSAL})),
            "{path}"
        );
    };
    // A frozen document: every later edit of it is refused.
    let frozen = rev_of(&c.put(
        "/db/f",
        r#"{"frozen":true,"_attachments":{"a.txt":{"content_type":"text/plain","data":"YQ=="}}}"#,
    ));
    forbidden(c.put("/db/x", r#"{"refuse":true}"#), "PUT");
    forbidden(c.post("/db", r#"{"refuse":true}"#), "POST /db");
    let bulk = c.post(
        "/db/_bulk_docs",
        r#"{"docs":[{"_id":"b1","refuse":true},{"_id":"b2"}]}"#,
    );
    assert_eq!(
        bulk.json()[0],
        json!({"id": "b1", "error": "forbidden", "reason": REFUSAL})
    );
    assert_eq!(bulk.json()[1]["ok"], true);
    let replicated = c.post(
        "/db/_bulk_docs",
        r#"{"new_edits":false,"docs":[{"_id":"r1","_rev":"1-0123456789abcdef0123456789abcdef","refuse":true}]}"#,
    );
    assert_eq!(
        replicated.json()[0]["error"],
        "forbidden",
        "{}",
        replicated.text
    );
    let copy = s.raw(&format!(
        "COPY /db/b2 HTTP/1.1\r\nHost: x\r\nAuthorization: {}\r\nDestination: f?rev={frozen}\r\nConnection: close\r\n\r\n",
        common::admin_auth()
    ));
    assert!(
        copy.starts_with("HTTP/1.1 403") && copy.contains(REFUSAL),
        "COPY onto a frozen document: {copy}"
    );
    let put_att = c.send(
        "PUT",
        &format!("/db/f/b.txt?rev={frozen}"),
        Some("bytes"),
        &[("Content-Type", "text/plain")],
    );
    forbidden(put_att, "attachment PUT");
    forbidden(
        c.delete(&format!("/db/f/a.txt?rev={frozen}")),
        "attachment DELETE",
    );
    forbidden(c.delete(&format!("/db/f?rev={frozen}")), "DELETE");
    let host = s.url.trim_start_matches("http://").to_string();
    let form = format!(
        "--XyZ\r\nContent-Disposition: form-data; name=\"_rev\"\r\n\r\n{frozen}\r\n\
         --XyZ\r\nContent-Disposition: form-data; name=\"_attachments\"; filename=\"n.txt\"\r\n\
         Content-Type: text/plain\r\n\r\nnew\r\n--XyZ--\r\n"
    );
    let referer = format!("http://{host}/");
    forbidden(
        c.send(
            "POST",
            "/db/f",
            Some(&form),
            &[
                ("Content-Type", "multipart/form-data; boundary=XyZ"),
                ("Referer", &referer),
            ],
        ),
        "form upload",
    );
    // Nothing refused was written.
    for id in ["x", "b1", "r1"] {
        assert_eq!(c.get(&format!("/db/{id}")).status, 404, "{id}");
    }
    let f: Value = c.get("/db/f").json();
    assert_eq!(f["_rev"], frozen.as_str());
    assert_eq!(f["_attachments"].as_object().unwrap().len(), 1);
}

#[test]
fn attachment_writes_to_user_documents_keep_per_user_databases_in_step() {
    let s = TestServer::start();
    let c = s.admin();
    let user = json!({"name": "ann", "password": "pw", "roles": [], "type": "user"});
    let rev = rev_of(&c.put("/_users/org.couchdb.user:ann", &user.to_string()));
    set_config(&c, "couch_peruser", "enable", "true");
    let userdb = "/userdb-616e6e";
    assert_eq!(c.get(userdb).status, 404, "made only by a later write");
    let r = c.send(
        "PUT",
        &format!("/_users/org.couchdb.user:ann/avatar.txt?rev={rev}"),
        Some("hello"),
        &[("Content-Type", "text/plain")],
    );
    assert_eq!(r.status, 201, "{}", r.text);
    assert_eq!(c.get(userdb).status, 200, "the attachment write made it");
    let security = c.get(&format!("{userdb}/_security")).json();
    assert_eq!(security["members"]["names"], json!(["ann"]));
}

/// A document of the large-body test: nested members, numbers of every shape, escapes.
fn assorted(i: usize) -> Value {
    json!({
        "_id": format!("d{i:04}"),
        "n": i,
        "f": 1.5e3 + i as f64,
        "big": 123456789012345678901234567890u128.to_string().parse::<Value>().unwrap(),
        "text": format!("caf\u{e9} \"{i}\" \\ \u{1}"),
        "nested": {"a": [1, {"b": null, "c": [true, false]}], "": {}},
        "list": [],
        "pad": "x".repeat(40),
    })
}

fn bulk_body(docs: &[Value]) -> String {
    json!({ "docs": docs }).to_string()
}

/// Large `_bulk_docs` bodies are read in parts side by side; what they store, the
/// revisions they make, the ids the server gives out and the errors they get must be those
/// of the same documents sent in small bodies (read whole).
#[test]
fn large_bulk_bodies_read_in_parts_as_small_ones_are_read_whole() {
    let s = TestServer::start();
    let c = s.admin();
    c.put("/big", "");
    c.put("/small", "");
    let docs: Vec<Value> = (0..600).map(assorted).collect();
    let body = bulk_body(&docs);
    assert!(body.len() > 64 << 10, "a body large enough to be split");
    let big = c.post("/big/_bulk_docs", &body);
    assert_eq!(big.status, 201, "{}", big.text);
    let big = big.json();
    for (i, doc) in docs.iter().enumerate() {
        let one = c.post("/small/_bulk_docs", &bulk_body(std::slice::from_ref(doc)));
        assert_eq!(one.json()[0], big[i], "the same revision for document {i}");
    }
    for i in [0, 1, 299, 300, 599] {
        let path = format!("d{i:04}");
        assert_eq!(
            c.get(&format!("/big/{path}")).text,
            c.get(&format!("/small/{path}")).text
        );
    }

    // Ids the server gives out follow the body's order.
    let mut docs: Vec<Value> = (0..600)
        .map(|i| json!({"n": i, "pad": "y".repeat(80)}))
        .collect();
    docs[5]["_id"] = json!("named");
    let rows = c.post("/big/_bulk_docs", &bulk_body(&docs)).json();
    let ids: Vec<&str> = rows
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), 600);
    assert_eq!(ids[5], "named");
    let given: Vec<&str> = ids.iter().copied().filter(|id| *id != "named").collect();
    assert!(
        given.windows(2).all(|w| w[0] < w[1]),
        "ascending: {given:?}"
    );

    // Refusals are those of a small body, and nothing is written.
    let count = |db: &str| c.get(&format!("/{db}")).json()["doc_count"].clone();
    let before = count("big");
    let mut bad: Vec<Value> = (1000..1600).map(assorted).collect();
    bad[450]["_id"] = json!(5);
    let refused = c.post("/big/_bulk_docs", &bulk_body(&bad));
    let alone = c.post("/small/_bulk_docs", &bulk_body(&bad[450..451]));
    assert_eq!(
        (refused.status, refused.json()),
        (alone.status, alone.json())
    );
    assert_eq!(refused.status, 400);
    let mut unknown: Vec<Value> = (1000..1600).map(assorted).collect();
    unknown[599]["_bogus"] = json!(1);
    let refused = c.post("/big/_bulk_docs", &bulk_body(&unknown));
    assert_eq!(refused.status, 400, "{}", refused.text);
    assert_eq!(refused.json()["error"], "doc_validation");
    let docs: Vec<Value> = (2000..2600).map(assorted).collect();
    let replicated = json!({"docs": docs, "new_edits": false}).to_string();
    let refused = c.post("/big/_bulk_docs", &replicated);
    assert_eq!(refused.status, 400);
    assert!(refused.json()["reason"].as_str().unwrap().contains("_rev"));
    let odd = json!({"docs": docs, "new_edits": null}).to_string();
    let refused = c.post("/big/_bulk_docs", &odd);
    assert_eq!(
        (refused.status, refused.json()["reason"].clone()),
        (400, json!("`new_edits` parameter must be a boolean."))
    );
    assert_eq!(count("big"), before, "no refused body wrote anything");

    // A member given twice counts as its last value, as when read whole.
    let twice = format!(
        r#"{{"docs":[{{"_id":"first"}}],"docs":{}}}"#,
        json!((3000..3600).map(assorted).collect::<Vec<_>>())
    );
    let rows = c.post("/big/_bulk_docs", &twice).json();
    assert_eq!(rows.as_array().unwrap().len(), 600);
    assert_eq!(c.get("/big/first").status, 404);
}
