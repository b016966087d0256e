//! Helpers for replication tests: seeding a database with the kinds of documents a
//! replication must carry (attachments, a conflict, a deletion) and comparing two
//! databases' whole state.

use serde_json::{json, Value};

use super::{base64_bytes, Client};

/// Documents `range` into `db`: plain ones, every tenth with a binary attachment, one with a
/// conflict and one deleted (both made on the first call).
pub fn seed(c: &Client, db: &str, range: std::ops::Range<u32>) {
    let first = range.start == 0;
    let docs: Vec<Value> = range
        .map(|i| {
            let mut doc = json!({"_id": format!("doc{i:04}"), "i": i, "text": "ü ∑ 😀"});
            if i % 10 == 0 {
                let bytes: Vec<u8> = (0..20_000u32).map(|n| (n * 7 + i) as u8).collect();
                doc["_attachments"] = json!({"blob.bin": {
                    "content_type": "application/octet-stream",
                    "data": base64_bytes(&bytes)
                }});
            }
            doc
        })
        .collect();
    let r = c.post(
        &format!("/{db}/_bulk_docs"),
        &json!({ "docs": docs }).to_string(),
    );
    assert_eq!(r.status, 201, "{}", r.text);
    if first {
        let conflict = json!({"new_edits": false, "docs": [
            {"_id": "doc0001", "_rev": "1-0123456789abcdef0123456789abcdef", "side": "other"}
        ]});
        let r = c.post(&format!("/{db}/_bulk_docs"), &conflict.to_string());
        assert_eq!(r.status, 201, "{}", r.text);
        let r = c.put(&format!("/{db}/gone"), "{}");
        let rev = r.json()["rev"].as_str().unwrap().to_string();
        assert_eq!(c.delete(&format!("/{db}/gone?rev={rev}")).status, 200);
    }
}

/// Runs a one-off replication on the reference CouchDB; its answer.
pub fn replicate(reference: &Client, job: &Value) -> Value {
    let r = reference.post("/_replicate", &job.to_string());
    assert_eq!(r.status, 200, "{job} -> {}", r.text);
    let answer = r.json();
    assert_eq!(answer["ok"], true, "{answer}");
    answer
}

/// Every document of `db` on both servers: ids, winning revisions, bodies, conflicts,
/// attachment digests and lengths, and the deleted document's deletion.
pub fn assert_same(a: &Client, b: &Client, db: &str) {
    assert_same_dbs(a, db, b, db);
}

/// [`assert_same`] for database `adb` on `a` and `bdb` on `b`, every leaf revision
/// (deleted documents' too) included.
pub fn assert_same_dbs(a: &Client, adb: &str, b: &Client, bdb: &str) {
    let (left, right) = (state(a, adb), state(b, bdb));
    assert_eq!(left.len(), right.len(), "{adb}/{bdb}: document counts");
    for (l, r) in left.iter().zip(&right) {
        assert_eq!(l, r, "{adb}/{bdb}");
    }
    assert!(
        leaves(a, adb) == leaves(b, bdb),
        "{adb}/{bdb}: leaf revisions differ"
    );
    for (c, db) in [(a, adb), (b, bdb)] {
        let gone = c.get(&format!("/{db}/gone"));
        assert_eq!(
            (gone.status, gone.json()["reason"].clone()),
            (404, json!("deleted"))
        );
    }
}

pub fn state(c: &Client, db: &str) -> Vec<Value> {
    let r = c.get(&format!("/{db}/_all_docs?include_docs=true&conflicts=true"));
    assert_eq!(r.status, 200, "{}", r.text);
    r.json()["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let mut doc = row["doc"].clone();
            // Compare what the bytes are, not how each server keeps them.
            if let Some(atts) = doc.get_mut("_attachments").and_then(Value::as_object_mut) {
                for att in atts.values_mut() {
                    *att = json!({"digest": att["digest"], "length": att["length"],
                                  "content_type": att["content_type"]});
                }
            }
            doc
        })
        .collect()
}

/// Every leaf revision of every document (deleted ones too), from `_changes?style=all_docs`:
/// `(id, sorted leaves, deleted)` in id order.
pub fn leaves(c: &Client, db: &str) -> Vec<(String, Vec<String>, bool)> {
    let r = c.get(&format!("/{db}/_changes?style=all_docs"));
    assert_eq!(r.status, 200, "{}", r.text);
    let mut out: Vec<(String, Vec<String>, bool)> = r.json()["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            let mut revs: Vec<String> = row["changes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["rev"].as_str().unwrap().to_string())
                .collect();
            revs.sort();
            let deleted = row["deleted"] == true;
            (row["id"].as_str().unwrap().to_string(), revs, deleted)
        })
        .collect();
    out.sort();
    out
}

/// Fails unless `second` (a `_replicate` answer) is a second run that started at `first`'s
/// checkpoint and wrote `written` revisions.
pub fn assert_resumed(first: &Value, second: &Value, written: u64) {
    let history = second["history"].as_array().unwrap();
    assert_eq!(history.len(), 2, "{second}");
    assert_eq!(
        history[0]["start_last_seq"], first["source_last_seq"],
        "{second}"
    );
    assert_eq!(history[0]["docs_written"], written, "{second}");
}
