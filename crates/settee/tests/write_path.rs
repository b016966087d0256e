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
