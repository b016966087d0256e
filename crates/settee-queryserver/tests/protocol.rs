//! The line protocol against a real child process (tests/query_server.py).

use std::collections::HashMap;
use std::time::Duration;

use serde_json::{json, Value};
use settee_queryserver::{Error, QueryServers};

fn servers() -> QueryServers {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/query_server.py");
    let servers = QueryServers::default();
    servers.set_commands(HashMap::from([(
        "python".to_string(),
        format!("python3 {script}"),
    )]));
    servers
}

const T: Duration = Duration::from_secs(10);

#[test]
fn maps_documents_with_every_loaded_function() {
    let qs = servers();
    let mut p = qs.checkout("python").unwrap();
    let funs = [
        "def f(doc):\n  log('mapping ' + doc['_id'])\n  yield doc['_id'], doc['n']",
        "def g(doc):\n  if doc['n'] > 1:\n    yield [doc['n']], None",
    ];
    p.load("sig", &funs, &Value::Null, &qs.reset_config(), T)
        .unwrap();
    let out: Value = serde_json::from_str(&p.map_doc(br#"{"_id":"a","n":1}"#, T).unwrap()).unwrap();
    assert_eq!(out, json!([[["a", 1]], []]), "log lines are not answers");
    let out: Value = serde_json::from_str(&p.map_doc(br#"{"_id":"b","n":2}"#, T).unwrap()).unwrap();
    assert_eq!(out, json!([[["b", 2]], [[[2], null]]]));
}

#[test]
fn libraries_are_sent_before_the_functions() {
    let qs = servers();
    let mut p = qs.checkout("python").unwrap();
    let lib = json!({"double": "def double(x):\n  return 2 * x"});
    let funs = ["def f(doc):\n  yield None, require('views/lib/double')['double'](doc['n'])"];
    p.load("sig", &funs, &lib, &qs.reset_config(), T).unwrap();
    assert_eq!(p.map_doc(br#"{"n":21}"#, T).unwrap(), "[[[null, 42]]]");
}

#[test]
fn reduce_and_rereduce() {
    let qs = servers();
    let mut p = qs.checkout("python").unwrap();
    let src = "def r(keys, values, rereduce):\n  return sum(values) if rereduce else len(keys) * 100 + sum(values)";
    assert_eq!(
        p.reduce(src, r#"[[["k","id1"],1],[["k","id2"],2]]"#, false, T)
            .unwrap(),
        json!(203)
    );
    assert_eq!(p.reduce(src, "[203,7]", true, T).unwrap(), json!(210));
}

#[test]
fn design_document_functions_are_taught_once_per_revision() {
    let qs = servers();
    let mut p = qs.checkout("python").unwrap();
    let ddoc = json!({"_id": "_design/d", "_rev": "1-a", "filters": {"odd": "def f(doc, req):\n  return doc['n'] % 2 == int(req['query']['r'])"}});
    let args = json!([[{"n": 1}, {"n": 2}, {"n": 3}], {"query": {"r": "1"}}]);
    assert_eq!(
        p.ddoc(&ddoc, &["filters", "odd"], &args, T).unwrap(),
        json!([true, [true, false, true]])
    );
    let args = json!([[{"n": 1}, {"n": 2}], {"query": {"r": "0"}}]);
    assert_eq!(
        p.ddoc(&ddoc, &["filters", "odd"], &args, T).unwrap(),
        json!([true, [false, true]])
    );
    let newer = json!({"_id": "_design/d", "_rev": "2-b", "filters": {"odd": "def f(doc, req):\n  return True"}});
    assert_eq!(
        p.ddoc(&newer, &["filters", "odd"], &args, T).unwrap(),
        json!([true, [true, true]]),
        "a new revision is taught"
    );
    assert_eq!(
        p.ddoc(&ddoc, &["filters", "odd"], &args, T).unwrap(),
        json!([true, [false, true]]),
        "and the old one again"
    );
}

#[test]
fn compile_errors_are_raised_and_leave_the_process_usable() {
    let qs = servers();
    let mut p = qs.checkout("python").unwrap();
    let err = p
        .load(
            "bad",
            &["def f(doc) yield 1"],
            &Value::Null,
            &qs.reset_config(),
            T,
        )
        .unwrap_err();
    assert!(
        matches!(&err, Error::Raised { error, .. } if error == "compilation_error"),
        "{err:?}"
    );
    assert!(!p.is_broken());
    p.load(
        "good",
        &["def f(doc):\n  yield 1, 2"],
        &Value::Null,
        &qs.reset_config(),
        T,
    )
    .unwrap();
    assert_eq!(p.map_doc(b"{}", T).unwrap(), "[[[1, 2]]]");
}

#[test]
fn a_process_that_does_not_answer_is_killed_and_replaced() {
    let qs = servers();
    let first = {
        let mut p = qs.checkout("python").unwrap();
        p.load(
            "loop",
            &["def f(doc):\n  while True: pass\n  yield 1, 1"],
            &Value::Null,
            &qs.reset_config(),
            T,
        )
        .unwrap();
        let err = p.map_doc(b"{}", Duration::from_millis(300)).unwrap_err();
        assert!(matches!(err, Error::Timeout(_)), "{err:?}");
        assert!(p.is_broken());
        p.id()
    };
    assert_eq!(qs.idle("python"), 0, "a timed-out process is not reused");
    assert!(
        !std::path::Path::new(&format!("/proc/{first}/status")).exists() || zombie_or_gone(first),
        "the process is killed"
    );
    let mut p = qs.checkout("python").unwrap();
    assert_ne!(p.id(), first);
    p.load(
        "ok",
        &["def f(doc):\n  yield 1, 1"],
        &Value::Null,
        &qs.reset_config(),
        T,
    )
    .unwrap();
    assert_eq!(p.map_doc(b"{}", T).unwrap(), "[[[1, 1]]]");
}

fn zombie_or_gone(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/status")).map_or(true, |s| s.contains("State:\tZ"))
}

#[test]
fn a_process_that_exits_is_an_error() {
    let qs = servers();
    let mut p = qs.checkout("python").unwrap();
    p.load(
        "exit",
        &["def f(doc):\n  raise SystemExit(3)"],
        &Value::Null,
        &qs.reset_config(),
        T,
    )
    .unwrap();
    let err = p.map_doc(b"{}", T).unwrap_err();
    assert!(
        matches!(&err, Error::Process(m) if m.contains("exit status: 3")),
        "{err:?}"
    );
    assert!(p.is_broken());
    drop(p);
    assert_eq!(qs.idle("python"), 0);
}

#[test]
fn processes_are_reused_and_unknown_languages_refused() {
    let qs = servers();
    let id = qs.checkout("python").unwrap().id();
    assert_eq!(qs.idle("python"), 1);
    let again = qs.checkout("python").unwrap();
    assert_eq!(again.id(), id, "the idle process is lent again");
    assert!(matches!(qs.checkout("ruby"), Err(Error::UnknownLanguage(l)) if l == "ruby"));
    drop(again);
    qs.set_commands(HashMap::new());
    assert_eq!(
        qs.idle("python"),
        0,
        "processes of a removed language are stopped"
    );
}

/// A busy child is killed with the server: this test runs itself as a helper process that
/// starts a query server, sets it looping forever, and exits at once; the query server must
/// not outlive it.
#[test]
fn a_busy_process_dies_with_the_server() {
    if std::env::var("SETTEE_QS_ORPHAN_PARENT").is_ok() {
        let qs: &'static QueryServers = Box::leak(Box::new(servers()));
        let mut p = qs.checkout("python").unwrap();
        println!("child={}", p.id());
        p.load(
            "loop",
            &["def f(doc):\n  while True: pass\n  yield 1, 1"],
            &Value::Null,
            &qs.reset_config(),
            T,
        )
        .unwrap();
        std::thread::spawn(move || p.map_doc(b"{}", Duration::from_secs(600)));
        std::thread::sleep(Duration::from_millis(300));
        std::process::exit(0);
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_busy_process_dies_with_the_server",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SETTEE_QS_ORPHAN_PARENT", "1")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let child: u32 = text
        .split("child=")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no child: {text}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !zombie_or_gone(child) {
        assert!(
            std::time::Instant::now() < deadline,
            "query server {child} outlived its server"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn many_documents_are_mapped_without_waiting_for_each_answer() {
    let qs = servers();
    let mut p = qs.checkout("python").unwrap();
    let f = "def f(doc):\n  if doc['n'] == 3:\n    raise SystemError('no threes')\n  log('doc %d' % doc['n'])\n  yield doc['n'], None";
    p.load("sig", &[f], &Value::Null, &qs.reset_config(), T)
        .unwrap();
    let docs: Vec<Vec<u8>> = (0..500)
        .map(|n| format!(r#"{{"n":{n}}}"#).into_bytes())
        .collect();
    let answers = p.map_docs(docs.iter().map(Vec::as_slice), T).unwrap();
    assert_eq!(answers.len(), 500);
    for (n, a) in answers.iter().enumerate() {
        let want = if n == 3 {
            "[[]]".to_string()
        } else {
            format!("[[[{n}, null]]]")
        };
        assert_eq!(
            a.as_ref().unwrap(),
            &want,
            "answers stay in order past log lines and failures"
        );
    }
}
