//! Real CouchDB client libraries against the real server, each used as its documentation
//! shows (issue 27's client matrix): PouchDB (JavaScript, HTTP adapter plus in-memory
//! databases replicating both ways), nano, couchdb-python, cloudant, the IBM Cloudant SDK
//! (`ibmcloudant`, with its defaults: gzipped bodies, session login, views POSTed) and Kivik
//! (Go). `./scripts/test` installs them into `clients/` before running the tests.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{TestServer, ADMIN};

fn clients_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../clients")
}

fn run(s: &TestServer, mut cmd: Command, what: &str) {
    let out = cmd
        .env("SETTEE_URL", &s.url)
        .env("SETTEE_USER", ADMIN.0)
        .env("SETTEE_PASSWORD", ADMIN.1)
        .output()
        .unwrap_or_else(|e| panic!("could not run {what}: {e}"));
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{what} failed:\n{text}");
}

#[test]
fn pouchdb_works_unmodified() {
    let dir = clients_dir().join("js");
    assert!(
        dir.join("node_modules/pouchdb-core").is_dir(),
        "PouchDB is not installed: run ./scripts/test, which installs it into clients/js"
    );
    let s = TestServer::start();
    let mut cmd = Command::new("node");
    cmd.arg("--test").arg("pouchdb.test.js").current_dir(&dir);
    run(&s, cmd, "the PouchDB suite");
}

fn node_suite(file: &str) -> (TestServer, Command) {
    let dir = clients_dir().join("js");
    assert!(
        dir.join("node_modules/nano").is_dir(),
        "the JavaScript clients are not installed: run ./scripts/test, which installs them into clients/js"
    );
    let mut cmd = Command::new("node");
    cmd.arg("--test").arg(file).current_dir(&dir);
    (TestServer::start(), cmd)
}

#[test]
fn nano_works_unmodified() {
    let (s, cmd) = node_suite("nano.test.js");
    run(&s, cmd, "the nano suite");
}

/// PouchDB syncing with a Settee whose own replicator keeps the database in step with a
/// second Settee: a document written in PouchDB reaches the second server, and back.
#[test]
fn pouchdb_syncs_through_settees_replicator() {
    let (s, mut cmd) = node_suite("pouchdb-relay.test.js");
    let second = TestServer::start();
    cmd.env("SETTEE_URL2", &second.url);
    run(&s, cmd, "the PouchDB relay suite");
}

/// PouchDB's live sync both ways, conflicts, large attachments, pouchdb-find, and a server
/// killed (SIGKILL) and restarted on the same port mid-sync: the suite appends `restart` to
/// the file named by `SETTEE_RESTART_FILE`, this harness restarts the server and appends
/// `restarted`.
#[test]
fn pouchdb_sync_survives_a_restart() {
    let (mut s, mut cmd) = node_suite("pouchdb-sync.test.js");
    let signals = s.dir.path().join("restart-signals");
    std::fs::write(&signals, "").unwrap();
    let output = s.dir.path().join("pouchdb-sync.out");
    let out = std::fs::File::create(&output).unwrap();
    let mut child = cmd
        .env("SETTEE_URL", &s.url)
        .env("SETTEE_USER", ADMIN.0)
        .env("SETTEE_PASSWORD", ADMIN.1)
        .env("SETTEE_RESTART_FILE", &signals)
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("run node");
    let mut restarts = 0;
    // The suite's own time limits end it well before this; a hung one fails here.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(600);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let text = std::fs::read_to_string(&output).unwrap_or_default();
            panic!("the PouchDB sync suite did not end within 10 minutes:\n{text}");
        }
        let text = std::fs::read_to_string(&signals).unwrap();
        if text.lines().filter(|l| *l == "restart").count() > restarts {
            restarts += 1;
            s.restart_same_port();
            let mut f = std::fs::OpenOptions::new()
                .append(true)
                .open(&signals)
                .unwrap();
            std::io::Write::write_all(&mut f, b"restarted\n").unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&output).unwrap();
    assert!(status.success(), "the PouchDB sync suite failed:\n{text}");
    assert_eq!(restarts, 1, "the suite asks for one restart:\n{text}");
}

#[test]
fn couchdb_python_works_unmodified() {
    let dir = clients_dir().join("python");
    let python = dir.join(".venv/bin/python");
    assert!(
        python.exists(),
        "couchdb-python is not installed: run ./scripts/test, which creates clients/python/.venv"
    );
    let s = TestServer::start();
    let mut cmd = Command::new(python);
    cmd.arg("test_couchdb_python.py").current_dir(&dir);
    run(&s, cmd, "the couchdb-python script");
}

fn python(s: &TestServer, script: &str) {
    let dir = clients_dir().join("python");
    let python = dir.join(".venv/bin/python");
    assert!(python.exists(), "the Python clients are not installed: run ./scripts/test, which creates clients/python/.venv");
    let mut cmd = Command::new(python);
    cmd.arg(script).current_dir(&dir);
    run(s, cmd, script);
}

#[test]
fn cloudant_works_unmodified() {
    python(&TestServer::start(), "test_cloudant.py");
}

#[test]
fn ibmcloudant_works_unmodified() {
    python(&TestServer::start(), "test_ibmcloudant.py");
}

#[test]
fn kivik_works_unmodified() {
    let s = TestServer::start();
    let mut cmd = Command::new("go");
    cmd.args(["test", "-count=1", "-mod=readonly", "./..."])
        .current_dir(clients_dir().join("go"));
    run(&s, cmd, "the Kivik suite");
}
