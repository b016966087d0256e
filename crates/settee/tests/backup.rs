//! `settee backup` and `settee restore`: a round trip keeps every revision, conflict,
//! deletion and attachment exactly; a backup stopped midway (its file cut short, or the
//! process killed) resumes without gaps or repeats; bad input fails clearly; files are
//! interchangeable with `@cloudant/couchbackup`'s; and the same commands work against the
//! reference CouchDB.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{base64_bytes, Client, ReferenceCouch, TestServer, ADMIN};
use serde_json::{json, Value};

fn settee(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_settee"))
        .args(args)
        .output()
        .expect("run settee")
}

/// `settee restore` of `input` into `db`.
fn restore(url: &str, db: &str, input: &Path) -> Output {
    settee(&[
        "restore",
        "--url",
        url,
        "--db",
        db,
        "--input",
        path_str(input),
    ])
}

/// `settee backup` of `db` to `output`, with more options.
fn backup(url: &str, db: &str, output: &Path, more: &[&str]) -> Output {
    let args = [
        "backup",
        "--url",
        url,
        "--db",
        db,
        "--output",
        path_str(output),
    ];
    settee(&[&args[..], more].concat())
}

fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "settee failed: {err}");
    err
}

/// The server's URL with the admin's credentials in it.
fn auth_url(url: &str, (user, password): (&str, &str)) -> String {
    url.replacen("http://", &format!("http://{user}:{password}@"), 1)
}

fn path_str(p: &Path) -> &str {
    p.to_str().expect("a UTF-8 path")
}

fn status(r: &common::Resp, want: u16) -> Value {
    assert_eq!(r.status, want, "{}", r.text);
    r.json()
}

/// A database with what a backup must keep: many documents (several lines), edits, a
/// deletion, a conflict whose branches end in a live and a deleted revision, attachments
/// (binary and text, added at different revisions, one on a conflicting branch), a design
/// document, and a local document (which backups leave out, as replication does).
fn fill(c: &Client, db: &str) {
    status(&c.put(&format!("/{db}"), ""), 201);
    let docs: Vec<Value> = (0..120)
        .map(|i| json!({"_id": format!("doc{i:03}"), "n": i, "tags": ["a", i % 3]}))
        .collect();
    status(
        &c.post(
            &format!("/{db}/_bulk_docs"),
            &json!({"docs": docs}).to_string(),
        ),
        201,
    );
    for id in ["doc005", "doc006"] {
        let rev = status(&c.get(&format!("/{db}/{id}")), 200)["_rev"].clone();
        let body = json!({"_rev": rev, "edited": true});
        status(&c.put(&format!("/{db}/{id}"), &body.to_string()), 201);
    }
    let rev = status(&c.get(&format!("/{db}/doc007")), 200)["_rev"].clone();
    status(
        &c.delete(&format!("/{db}/doc007?rev={}", rev.as_str().unwrap())),
        200,
    );
    let binary: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
    let conflict = json!({"new_edits": false, "docs": [
        {"_id": "twin", "_rev": "1-aaaa", "side": "root"},
        {"_id": "twin", "_rev": "2-bbbb", "side": "left",
         "_revisions": {"start": 2, "ids": ["bbbb", "aaaa"]},
         "_attachments": {"left.bin": {"content_type": "application/octet-stream",
                                        "revpos": 2, "data": base64_bytes(&binary)}}},
        {"_id": "twin", "_rev": "3-cccc", "_deleted": true,
         "_revisions": {"start": 3, "ids": ["cccc", "dddd", "aaaa"]}},
    ]});
    status(
        &c.post(&format!("/{db}/_bulk_docs"), &conflict.to_string()),
        201,
    );
    let put_att = |name: &str, rev: Option<&str>, ct: &str, body: &str| {
        let q = rev.map(|r| format!("?rev={r}")).unwrap_or_default();
        let r = c.send(
            "PUT",
            &format!("/{db}/files/{name}{q}"),
            Some(body),
            &[("content-type", ct)],
        );
        status(&r, 201)["rev"].as_str().unwrap().to_string()
    };
    let rev = put_att("notes.txt", None, "text/plain", &"some words ".repeat(200));
    let rev = put_att(
        "raw.bin",
        Some(&rev),
        "application/octet-stream",
        "\u{1}\u{2}\u{3}",
    );
    let mut doc = status(&c.get(&format!("/{db}/files")), 200);
    doc["title"] = json!("files");
    doc["_rev"] = json!(rev);
    status(&c.put(&format!("/{db}/files"), &doc.to_string()), 201);
    let ddoc = json!({"views": {"by_n": {"map": "function(doc) { emit(doc.n, null); }"}}});
    status(
        &c.put(&format!("/{db}/_design/app"), &ddoc.to_string()),
        201,
    );
    status(&c.put(&format!("/{db}/_local/mine"), "{\"x\":1}"), 201);
}

/// Every document of `db`: each leaf revision with its history and attachments, and the
/// database's counts. `strip_digests` leaves digests out (servers that store attachments
/// compressed digest the compressed bytes).
fn snapshot(c: &Client, db: &str, strip_digests: bool) -> Value {
    let changes = status(&c.get(&format!("/{db}/_changes?style=all_docs")), 200);
    let mut ids: Vec<String> = changes["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    let mut docs = serde_json::Map::new();
    for id in ids {
        let path = format!("/{db}/{id}?open_revs=all&revs=true&attachments=true");
        let r = c.send("GET", &path, None, &[("accept", "application/json")]);
        let mut revs: Vec<Value> = status(&r, 200)
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["ok"].clone())
            .collect();
        revs.sort_by_key(|d| d["_rev"].as_str().unwrap().to_string());
        if strip_digests {
            for rev in &mut revs {
                if let Some(Value::Object(atts)) = rev.get_mut("_attachments") {
                    for att in atts.values_mut() {
                        att.as_object_mut().unwrap().remove("digest");
                    }
                }
            }
        }
        docs.insert(id, json!(revs));
    }
    let info = status(&c.get(&format!("/{db}")), 200);
    json!({"doc_count": info["doc_count"], "doc_del_count": info["doc_del_count"], "docs": docs})
}

/// Two snapshots are equal; when not, the first document that differs is shown.
fn assert_same(got: &Value, want: &Value) {
    if got == want {
        return;
    }
    for (id, revs) in want["docs"].as_object().unwrap() {
        assert_eq!(&got["docs"][id], revs, "document {id}");
    }
    assert_eq!(got, want);
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .expect("read the backup")
        .lines()
        .map(str::to_string)
        .collect()
}

/// Each revision the backup holds, as `id rev`, in order.
fn revisions_in(path: &Path) -> Vec<String> {
    lines(path)[1..]
        .iter()
        .flat_map(|l| serde_json::from_str::<Vec<Value>>(l).expect("a line of documents"))
        .map(|d| {
            format!(
                "{} {}",
                d["_id"].as_str().unwrap(),
                d["_rev"].as_str().unwrap()
            )
        })
        .collect()
}

#[test]
fn a_round_trip_keeps_every_revision_conflict_deletion_and_attachment() {
    let s = TestServer::start();
    let c = s.admin();
    fill(&c, "src");
    let url = auth_url(&s.url, ADMIN);
    let out = s.dir.path().join("src.ndjson");
    let report = ok(&backup(&url, "src", &out, &["--batch-size", "7"]));
    assert!(report.contains("backed up 124 revisions"), "{report}");
    let text = lines(&out);
    let meta: Value = serde_json::from_str(&text[0]).unwrap();
    assert_eq!(meta["mode"], "full");
    assert_eq!(meta["attachments"], true);
    assert!(text.len() > 10, "seven documents per line");
    let mut revs = revisions_in(&out);
    assert_eq!(
        revs.len(),
        124,
        "120 documents (one deleted), two twins, files, ddoc"
    );
    revs.sort();
    revs.dedup();
    assert_eq!(revs.len(), 124, "no revision twice");
    assert!(
        !text.concat().contains("_local/mine"),
        "local documents are not backed up"
    );

    ok(&restore(&url, "copy", &out));
    let before = snapshot(&c, "src", false);
    assert_eq!(
        before["docs"]["twin"].as_array().unwrap().len(),
        2,
        "both leaves"
    );
    assert_same(&snapshot(&c, "copy", false), &before);
    assert_eq!(c.get("/copy/_local/mine").status, 404);
    let view = c.get("/copy/_design/app/_view/by_n?limit=2");
    assert_eq!(
        status(&view, 200)["total_rows"],
        121,
        "119 with n, files and twin"
    );

    // Restoring again changes nothing: revisions present are left as they are.
    let seq = status(&c.get("/copy"), 200)["update_seq"].clone();
    ok(&restore(&url, "copy", &out));
    assert_eq!(status(&c.get("/copy"), 200)["update_seq"], seq);
    assert_same(&snapshot(&c, "copy", false), &before);

    // Standard output and standard input work as the files do.
    let piped = settee(&["backup", "--url", &url, "--db", "src"]);
    ok(&piped);
    let mut restore = Command::new(env!("CARGO_BIN_EXE_settee"))
        .args(["restore", "--url", &url, "--db", "piped"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    restore
        .stdin
        .take()
        .unwrap()
        .write_all(&piped.stdout)
        .unwrap();
    ok(&restore.wait_with_output().unwrap());
    assert_same(&snapshot(&c, "piped", false), &before);
}

#[test]
fn an_interrupted_backup_resumes_without_gaps_or_repeats() {
    let s = TestServer::start();
    let c = s.admin();
    fill(&c, "src");
    let url = auth_url(&s.url, ADMIN);
    let dir = s.dir.path();
    let whole = dir.join("whole.ndjson");
    ok(&backup(&url, "src", &whole, &["--batch-size", "10"]));
    let log = std::fs::read_to_string(dir.join("whole.ndjson.log")).unwrap();
    let log_lines: Vec<&str> = log.lines().collect();
    assert!(log_lines.len() > 5);
    assert_eq!(*log_lines.last().unwrap(), "{\"complete\":true}");

    // Stopped after four batches, in the middle of writing the fifth line and its log line.
    let cut = dir.join("cut.ndjson");
    let fourth: Value = serde_json::from_str(log_lines[3]).unwrap();
    let offset = fourth["offset"].as_u64().unwrap() as usize;
    let bytes = std::fs::read(&whole).unwrap();
    std::fs::write(&cut, &bytes[..offset + 40]).unwrap();
    let partial = format!("{}\n{}", log_lines[..4].join("\n"), &log_lines[4][..12]);
    std::fs::write(dir.join("cut.ndjson.log"), partial).unwrap();
    ok(&backup(
        &url,
        "src",
        &cut,
        &["--batch-size", "10", "--resume"],
    ));
    assert_eq!(
        std::fs::read(&cut).unwrap(),
        bytes,
        "the resumed backup is the whole one"
    );
    let again = ok(&backup(&url, "src", &cut, &["--resume"]));
    assert!(again.contains("nothing to do"), "{again}");
    assert_eq!(std::fs::read(&cut).unwrap(), bytes);

    // A real stop: the process killed while it works, then resumed.
    let docs: Vec<Value> = (0..3000)
        .map(|i| json!({"_id": format!("more{i:05}"), "pad": "x".repeat(200)}))
        .collect();
    status(
        &c.post("/src/_bulk_docs", &json!({"docs": docs}).to_string()),
        201,
    );
    let killed = dir.join("killed.ndjson");
    let killed_log = dir.join("killed.ndjson.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_settee"))
        .args([
            "backup",
            "--url",
            &url,
            "--db",
            "src",
            "--output",
            path_str(&killed),
            "--batch-size",
            "5",
        ])
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while std::fs::read_to_string(&killed_log).map_or(0, |t| t.lines().count()) < 3
        && started.elapsed() < Duration::from_secs(30)
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let stopped = std::fs::read_to_string(&killed_log).unwrap();
    println!("killed after {} log lines", stopped.lines().count());
    assert!(!stopped.contains("complete"), "killed before it finished");
    ok(&backup(
        &url,
        "src",
        &killed,
        &["--batch-size", "5", "--resume"],
    ));
    let mut revs = revisions_in(&killed);
    assert_eq!(revs.len(), 3124);
    revs.sort();
    revs.dedup();
    assert_eq!(revs.len(), 3124, "no revision twice");
    ok(&restore(&url, "copy", &killed));
    assert_same(&snapshot(&c, "copy", false), &snapshot(&c, "src", false));
}

#[test]
fn bad_input_fails_clearly_and_writes_nothing() {
    let s = TestServer::start();
    let c = s.admin();
    let url = auth_url(&s.url, ADMIN);
    let dir = s.dir.path();
    let out = dir.join("none.ndjson");
    let r = backup(&url, "missing", &out, &[]);
    assert!(!r.status.success());
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("could not open"),
        "{r:?}"
    );
    assert!(!out.exists(), "nothing written for a missing database");
    let r = settee(&["backup", "--url", &url, "--db", "missing", "--resume"]);
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("only a backup to a file"),
        "{r:?}"
    );
    let wrong = auth_url(&s.url, ("admin", "wrong"));
    let r = settee(&["backup", "--url", &wrong, "--db", "_users"]);
    assert!(!r.status.success());
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("unauthorized"),
        "{r:?}"
    );

    let garbage = dir.join("garbage.ndjson");
    std::fs::write(
        &garbage,
        "{\"name\":\"settee\",\"version\":\"1\",\"mode\":\"full\"}\n[{\"_id\":",
    )
    .unwrap();
    let r = restore(&url, "target", &garbage);
    assert!(!r.status.success());
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("line 2 of the backup is not JSON"),
        "{r:?}"
    );
    std::fs::write(&garbage, "{\"_id\":\"x\"}\n").unwrap();
    let r = restore(&url, "target", &garbage);
    assert!(
        String::from_utf8_lossy(&r.stderr).contains("neither a list of documents"),
        "{r:?}"
    );
    assert_eq!(status(&c.get("/target"), 200)["doc_count"], 0);

    // Revisions the target refuses are listed, and the command fails.
    let vdu = json!({"validate_doc_update": "function(doc) { if (doc.n === 3) throw({forbidden: 'not three'}); }"});
    status(&c.put("/target/_design/guard", &vdu.to_string()), 201);
    let docs: Vec<Value> = (1..=4)
        .map(|n| json!({"_id": format!("d{n}"), "_rev": format!("1-{n:032x}"), "n": n}))
        .collect();
    std::fs::write(&garbage, format!("{}\n", json!(docs))).unwrap();
    let r = restore(&url, "target", &garbage);
    assert!(!r.status.success());
    let err = String::from_utf8_lossy(&r.stderr);
    assert!(
        err.contains("d3 refused: forbidden: not three")
            && err.contains("1 revisions were refused"),
        "{err}"
    );
    assert_eq!(
        status(&c.get("/target"), 200)["doc_count"],
        4,
        "three and the design document"
    );
}

/// `couchbackup` and `couchrestore`, installed by ./scripts/test.
fn couchbackup_bin(name: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../clients/js/node_modules/.bin")
        .join(name);
    assert!(
        path.exists(),
        "{name} is not installed: run ./scripts/test, which installs clients/js"
    );
    path
}

#[test]
fn files_are_interchangeable_with_couchbackup() {
    let s = TestServer::start();
    let c = s.admin();
    fill(&c, "src");
    let url = auth_url(&s.url, ADMIN);
    let theirs = s.dir.path().join("theirs.ndjson");
    let r = Command::new(couchbackup_bin("couchbackup"))
        .args([
            "--url",
            &url,
            "--db",
            "src",
            "--attachments",
            "--output",
            path_str(&theirs),
        ])
        .args(["--log", path_str(&s.dir.path().join("theirs.log"))])
        .output()
        .unwrap();
    ok(&r);
    ok(&restore(&url, "from_theirs", &theirs));
    let before = snapshot(&c, "src", false);
    assert_same(&snapshot(&c, "from_theirs", false), &before);

    let ours = s.dir.path().join("ours.ndjson");
    ok(&backup(&url, "src", &ours, &[]));
    status(&c.put("/from_ours", ""), 201);
    let r = Command::new(couchbackup_bin("couchrestore"))
        .args(["--url", &url, "--db", "from_ours", "--attachments"])
        .stdin(std::fs::File::open(&ours).unwrap())
        .output()
        .unwrap();
    ok(&r);
    assert_same(&snapshot(&c, "from_ours", false), &before);
}

#[test]
fn backups_of_couchdb_restore_into_settee_and_back() {
    let Some(couch) = ReferenceCouch::start("backups_of_couchdb_restore_into_settee_and_back")
    else {
        return;
    };
    let s = TestServer::start();
    let couch_url = auth_url(&couch.url, ("admin", "admin"));
    let url = auth_url(&s.url, ADMIN);
    fill(&couch.admin(), "src");
    let file = s.dir.path().join("couch.ndjson");
    ok(&backup(&couch_url, "src", &file, &["--batch-size", "9"]));
    ok(&restore(&url, "src", &file));
    let original = snapshot(&couch.admin(), "src", true);
    assert_same(&snapshot(&s.admin(), "src", true), &original);

    let back = s.dir.path().join("settee.ndjson");
    ok(&backup(&url, "src", &back, &[]));
    ok(&restore(&couch_url, "again", &back));
    assert_same(&snapshot(&couch.admin(), "again", true), &original);
}
