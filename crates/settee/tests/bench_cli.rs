//! `settee bench` against a real server (reads, view indexing and word count, answers
//! verified, JSON report) and against a server that answers quickly but wrongly (reported as
//! failures, and the command fails).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Command;

use common::{TestServer, ADMIN};
use serde_json::Value;

fn bench(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_settee"))
        .arg("bench")
        .args(args)
        .output()
        .expect("settee bench runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The server's address with the admin's credentials in it, as `--url` takes them.
fn admin_url(s: &TestServer) -> String {
    s.url
        .replace("http://", &format!("http://{}:{}@", ADMIN.0, ADMIN.1))
}

#[test]
fn every_workload_against_a_real_server() {
    let s = TestServer::start();
    let url = admin_url(&s);
    let (ok, stdout, stderr) = bench(&[
        "--url",
        &url,
        "--clients",
        "4",
        "--requests",
        "25",
        "--docs",
        "500",
        "--large-docs",
        "20",
        "--words",
        "1000",
        "--seconds",
        "0.2",
        "--writers",
        "1,4",
        "--fabric-docs",
        "300",
        "--updates",
        "20",
        "--mixed-docs",
        "2000",
        "--readers",
        "3",
        "--connections",
        "20,300",
        "--c10k-requests",
        "4",
        "--json",
    ]);
    assert!(ok, "{stdout}\n{stderr}");
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}"));
    let reads = &report["results"][0];
    assert_eq!(reads["workload"], "single-doc reads");
    assert_eq!(reads["failures"], 0);
    assert!(reads["requests/s"].as_f64().unwrap() > 0.0);
    assert!(reads["p99 ms"].as_f64().unwrap() >= reads["p50 ms"].as_f64().unwrap());
    assert!(
        reads["elapsed s"].as_f64().unwrap() >= 0.2,
        "reads go on for the time floor: {reads}"
    );
    assert_eq!(
        s.admin().get("/animals/cat").json()["name"],
        "gizmo",
        "the workload's document"
    );
    let names: Vec<&str> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["workload"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "single-doc reads",
            "score docs indexing, JS sum",
            "score docs indexing, _sum",
            "large docs indexing, JS sum",
            "large docs indexing, _sum",
            "word count, _count",
            "word count, JS sum",
            "writes: _bulk_docs, 1000 docs a batch, sequential ids",
            "writes: _bulk_docs, 1000 docs a batch, random ids",
            "writes: single-doc PUTs, 1 client",
            "writes: single-doc PUTs, 4 clients",
            "fabric_bench add docs",
            "fabric_bench random doc gets",
            "fabric_bench _all_docs",
            "fabric_bench _all_docs?include_docs=true",
            "fabric_bench _changes",
            "fabric_bench single-doc updates",
            "fabric_bench mixed, 3 readers",
            "fabric_bench mixed, bulk load",
            "C10K, 20 connections",
            "C10K, 300 connections",
        ]
    );
    for r in report["results"].as_array().unwrap() {
        assert_eq!(r["failures"], 0, "{r}");
    }
    assert!(report["results"][1]["docs/s"].as_f64().unwrap() > 0.0);
    for r in &report["results"].as_array().unwrap()[7..11] {
        assert!(r["docs/s"].as_f64().unwrap() > 0.0, "{r}");
    }
    assert_eq!(
        s.admin().get("/bench_writes").status,
        404,
        "writes clean up"
    );
    assert!(report["results"][5]["groups"].as_f64().unwrap() > 10.0);
    let result = |name: &str| {
        report["results"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["workload"] == name)
            .unwrap()
            .clone()
    };
    assert!(
        result("fabric_bench random doc gets")["gets/s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    for part in ["add docs", "random doc gets", "single-doc updates"] {
        let r = result(&format!("fabric_bench {part}"));
        assert!(r["s"].as_f64().unwrap() >= 0.2, "the time floor: {r}");
    }
    let mixed = result("fabric_bench mixed, 3 readers");
    assert!(mixed["reads/s while loading"].as_f64().unwrap() > 0.0);
    let kept = |m: &str| mixed[m].as_f64().unwrap();
    assert!(
        kept("% kept, lowest round") <= kept("% kept")
            && kept("% kept") <= kept("% kept, highest round"),
        "{mixed}"
    );
    let load = result("fabric_bench mixed, bulk load");
    assert!(
        load["docs"] == 2000.0 && load["docs/s alone"].as_f64().unwrap() > 0.0,
        "{load}"
    );
    assert_eq!(result("C10K, 300 connections")["connect errors"], 0.0);
    for step in ["C10K, 20 connections", "C10K, 300 connections"] {
        let r = result(step);
        assert!(
            r["elapsed s"].as_f64().unwrap() >= 0.2,
            "the time floor: {r}"
        );
    }
    assert!(
        result("C10K, 300 connections")["requests/s"]
            .as_f64()
            .unwrap()
            > 0.0
    );
    assert_eq!(
        s.admin().get("/fabric_bench").status,
        404,
        "fabric_bench cleans up after itself"
    );

    let (ok, stdout, _) = bench(&[
        "--url",
        &url,
        "--compare",
        &url,
        "--clients",
        "2",
        "--requests",
        "10",
        "--seconds",
        "0.2",
        "--workloads",
        "reads",
    ]);
    assert!(ok);
    assert!(
        stdout.lines().next().unwrap().starts_with("workload"),
        "a table: {stdout}"
    );
    assert!(
        stdout.contains("requests/s") && stdout.contains('x'),
        "with ratios: {stdout}"
    );
}

#[test]
fn rounds_report_each_round_and_the_medians_of_their_results() {
    let (a, b) = (TestServer::start(), TestServer::start());
    let (ok, stdout, stderr) = bench(&[
        "--url",
        &admin_url(&a),
        "--compare",
        &admin_url(&b),
        "--workloads",
        "writes",
        "--writers",
        "2",
        "--seconds",
        "0.1",
        "--rounds",
        "3",
        "--json",
    ]);
    assert!(ok, "{stdout}\n{stderr}");
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}"));
    let rounds = report["rounds"].as_array().expect("each round's results");
    assert_eq!(rounds.len(), 3, "{report}");
    let results = report["results"].as_array().unwrap();
    // Three workloads against each server: bulk loads of both kinds, then 2 writers.
    assert_eq!(results.len(), 6, "{report}");
    for (i, row) in results.iter().enumerate() {
        for r in rounds {
            assert_eq!(r[i]["workload"], row["workload"]);
            assert_eq!(r[i]["server"], row["server"]);
        }
        // Every number measured (rates, times) is the median of its three rounds.
        let measured = row.as_object().unwrap().iter().filter(|(_, v)| v.is_f64());
        let mut checked = 0;
        for (name, value) in measured {
            let mut each: Vec<f64> = rounds
                .iter()
                .map(|r| r[i][name].as_f64().unwrap())
                .collect();
            each.sort_by(f64::total_cmp);
            assert_eq!(
                value.as_f64().unwrap(),
                each[1],
                "{name}, the median: {report}"
            );
            checked += 1;
        }
        assert!(checked >= 2, "{row}");
        assert!(row["docs/s"].as_f64().unwrap() > 0.0, "{report}");
        assert_eq!(row["failures"], 0);
    }
    assert_eq!(results[0]["server"], a.url.trim_end_matches('/'));
    assert_eq!(results[3]["server"], b.url.trim_end_matches('/'));
    let (bad, _, stderr) = bench(&["--url", &admin_url(&a), "--rounds", "0"]);
    assert!(!bad, "no rounds is refused");
    assert!(stderr.contains("--rounds"), "{stderr}");
}

/// A server that accepts everything and always answers `{"_id":"cat","name":"tom"}`.
fn wrong_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                loop {
                    let mut length = 0usize;
                    let mut line = String::new();
                    let mut method = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if method.is_empty() {
                            method = line.split(' ').next().unwrap_or("").to_string();
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    let _ = reader.read_exact(&mut body);
                    let status = if method == "PUT" {
                        "201 Created"
                    } else {
                        "200 OK"
                    };
                    let answer = r#"{"_id":"cat","name":"tom"}"#;
                    let reply = format!("HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{answer}", answer.len());
                    if stream.write_all(reply.as_bytes()).is_err() {
                        return;
                    }
                }
            });
        }
    });
    url
}

#[test]
fn fast_wrong_answers_are_failures() {
    let url = wrong_server();
    let (ok, stdout, stderr) = bench(&[
        "--url",
        &url,
        "--clients",
        "2",
        "--requests",
        "10",
        "--seconds",
        "0",
        "--workloads",
        "reads",
        "--json",
    ]);
    assert!(!ok, "wrong answers fail the command: {stdout}");
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}\n{stderr}"));
    assert_eq!(report["results"][0]["failures"], 20);
    assert_eq!(
        report["results"][0]["requests/s"], 0.0,
        "wrong answers are not counted as served"
    );
    assert!(stderr.contains("20 wrong or failed answers"), "{stderr}");

    let (ok, stdout, stderr) = bench(&[
        "--url",
        &url,
        "--workloads",
        "c10k",
        "--connections",
        "5",
        "--c10k-requests",
        "2",
        "--seconds",
        "0",
        "--json",
    ]);
    assert!(!ok, "{stdout}");
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}\n{stderr}"));
    assert_eq!(
        report["results"][0]["failures"], 10,
        "a welcome without a version and the wrong cat"
    );
    assert_eq!(report["results"][0]["requests/s"], 0.0);

    let (ok, _, stderr) = bench(&[
        "--url",
        &url,
        "--workloads",
        "fabric",
        "--fabric-docs",
        "10",
    ]);
    assert!(!ok);
    assert!(stderr.contains("wrong answer: fabric_bench: "), "{stderr}");
}

#[test]
fn one_shot_replications_repeat_for_the_time_floor() {
    let s = TestServer::start();
    let url = admin_url(&s);
    let (ok, stdout, stderr) = bench(&[
        "--url",
        &url,
        "--workloads",
        "replication",
        "--replication-docs",
        "200",
        "--seconds",
        "0.5",
        "--json",
    ]);
    assert!(ok, "{stdout}\n{stderr}");
    let report: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|_| panic!("not JSON: {stdout}"));
    for (i, name) in [
        "replicate 200 docs",
        "replicate 200 docs with 100 KB attachments",
    ]
    .iter()
    .enumerate()
    {
        let r = &report["results"][i];
        assert_eq!(r["workload"], *name);
        assert_eq!(r["failures"], 0);
        assert!(
            r["elapsed s"].as_f64().unwrap() >= 0.5,
            "the time floor: {r}"
        );
        let copies = r["copies"].as_f64().unwrap();
        assert!(copies >= 1.0, "{r}");
        assert!(r["docs/s"].as_f64().unwrap() > 0.0, "{r}");
    }
    let small = &report["results"][0];
    assert!(
        small["copies"].as_f64().unwrap() >= 2.0,
        "200 small documents copy in well under half a second: {small}"
    );
    assert_eq!(
        s.admin().get("/bench-repl-tgt").status,
        200,
        "the first copy stays"
    );
    assert_eq!(
        s.admin().get("/bench-repl-tgt-2").status,
        404,
        "later copies are deleted once checked"
    );
}
