//! A real `settee` server on a random loopback port with a temporary data directory, and a
//! small JSON client for driving it. A server log line at `[error]` fails the test that started
//! it, unless the test said it expects one.

#![allow(dead_code)]

pub mod replication;

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

/// The admin every test server is created with.
pub const ADMIN: (&str, &str) = ("admin", "secret");

/// A running server process.
pub struct TestServer {
    pub child: Option<Child>,
    pub dir: tempfile::TempDir,
    pub url: String,
    pub log: PathBuf,
    pub allow_errors: bool,
    /// Environment variables the process starts with, again at each restart.
    pub env: Vec<(String, String)>,
}

impl TestServer {
    /// Starts a server on a new data directory.
    pub fn start() -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        TestServer::start_in(dir)
    }

    /// Starts a server on `dir` (which may hold data from an earlier server).
    pub fn start_in(dir: tempfile::TempDir) -> TestServer {
        let log = dir
            .path()
            .join(format!("server-{}.log", rand::random::<u32>()));
        let (child, url) = spawn(dir.path(), &log, None, &[], 0);
        TestServer {
            child: Some(child),
            dir,
            url,
            log,
            allow_errors: false,
            env: Vec::new(),
        }
    }

    /// Starts a server on a new data directory with environment variables set.
    pub fn start_with_env(env: &[(&str, &str)]) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("server.log");
        let env: Vec<(String, String)> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let (child, url) = spawn(dir.path(), &log, None, &env, 0);
        TestServer {
            child: Some(child),
            dir,
            url,
            log,
            allow_errors: false,
            env,
        }
    }

    /// Starts a server on a new data directory that may hold at most `n` open files.
    pub fn start_with_open_files(n: u32) -> TestServer {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = dir.path().join("server.log");
        let (child, url) = spawn(dir.path(), &log, Some(n), &[], 0);
        TestServer {
            child: Some(child),
            dir,
            url,
            log,
            allow_errors: false,
            env: Vec::new(),
        }
    }

    /// Sends the process signal `name` (`TERM`, `INT`, `HUP`).
    pub fn signal(&self, name: &str) {
        let pid = self.child.as_ref().expect("a running server").id();
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(pid.to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{name} {pid}");
    }

    /// Waits up to `limit` for the process to exit by itself; its exit status, or `None`
    /// if it was still running (it is then left running).
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = std::time::Instant::now() + limit;
        loop {
            let child = self.child.as_mut().expect("a server process");
            if let Some(status) = child.try_wait().expect("wait for the server") {
                self.child = None;
                return Some(status);
            }
            if std::time::Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts the server again on its data directory after it exited.
    pub fn start_again(&mut self) {
        assert!(self.child.is_none(), "the server is still running");
        let (child, url) = spawn(self.dir.path(), &self.log, None, &self.env, 0);
        self.child = Some(child);
        self.url = url;
    }

    /// Kills the process with SIGKILL (no chance to flush anything).
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Kills and starts again on the same data directory.
    pub fn restart(&mut self) {
        self.kill();
        let (child, url) = spawn(self.dir.path(), &self.log, None, &self.env, 0);
        self.child = Some(child);
        self.url = url;
    }

    /// Kills and starts again on the same data directory and the same port, as an
    /// operator's restart looks to a client that keeps the URL.
    pub fn restart_same_port(&mut self) {
        self.kill();
        let port = self
            .url
            .rsplit(':')
            .next()
            .and_then(|p| p.trim_end_matches('/').parse().ok());
        let port = port.expect("the server's URL ends in its port");
        let (child, url) = spawn(self.dir.path(), &self.log, None, &self.env, port);
        self.child = Some(child);
        self.url = url;
    }

    /// A client authenticated as the admin.
    pub fn admin(&self) -> Client {
        Client::new(&self.url, Some(ADMIN))
    }

    /// Sends raw bytes on a new connection and returns everything the server answers
    /// (for methods and malformed requests an HTTP client library will not send).
    pub fn raw(&self, request: &str) -> String {
        use std::io::Write;
        let addr = self.url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        stream.write_all(request.as_bytes()).expect("send");
        let mut out = Vec::new();
        let _ = stream.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    }

    /// An anonymous client.
    pub fn anon(&self) -> Client {
        Client::new(&self.url, None)
    }
}

// The child is handed to `TestServer`, whose `Drop` kills and waits for it.
#[allow(clippy::zombie_processes)]
fn spawn(
    dir: &Path,
    log: &Path,
    open_files: Option<u32>,
    env: &[(String, String)],
    port: u16,
) -> (Child, String) {
    let err = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .expect("log file");
    let mut command = match open_files {
        Some(n) => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--nofile={n}:{n}"))
                .arg("--")
                .arg(env!("CARGO_BIN_EXE_settee"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_settee")),
    };
    let mut child = command
        .args(["serve", "--data"])
        .arg(dir)
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .env("SETTEE_ADMIN", format!("{}:{}", ADMIN.0, ADMIN.1))
        .env("SETTEE_LOG", "warn")
        .env("SETTEE_TEST_PANIC", "1")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::piped())
        .stderr(Stdio::from(err))
        .spawn()
        .expect("start settee");
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    loop {
        line.clear();
        if out.read_line(&mut line).expect("read server output") == 0 {
            let _ = child.wait();
            panic!(
                "server exited before listening; log: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        if let Some(url) = line.trim().split("listening on ").nth(1) {
            let url = url.to_string();
            std::thread::spawn(move || {
                let mut sink = String::new();
                let _ = out.read_to_string(&mut sink);
            });
            return (child, url);
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        if !self.allow_errors && !std::thread::panicking() {
            let errors: Vec<&str> = log.lines().filter(|l| l.starts_with("[error]")).collect();
            assert!(
                errors.is_empty(),
                "unexpected server errors:\n{}",
                errors.join("\n")
            );
        }
    }
}

/// A response: status, headers and body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub text: String,
}

impl Resp {
    /// The body as JSON (panics with the body if it is not).
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.text)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.text))
    }

    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Asserts the status and CouchDB error name.
    pub fn error(&self, status: u16, error: &str) -> &Resp {
        assert_eq!(self.status, status, "{}", self.text);
        assert_eq!(self.json()["error"], error, "{}", self.text);
        self
    }
}

/// A JSON HTTP client for one server.
pub struct Client {
    base: String,
    agent: ureq::Agent,
    auth: Option<String>,
    pub extra: Vec<(String, String)>,
}

impl Client {
    pub fn new(base: &str, auth: Option<(&str, &str)>) -> Client {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let auth = auth.map(|(u, p)| format!("Basic {}", base64(&format!("{u}:{p}"))));
        Client {
            base: base.to_string(),
            agent,
            auth,
            extra: Vec::new(),
        }
    }

    /// Sends a request with an optional body (JSON unless a content type header says otherwise).
    pub fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Resp {
        self.try_send(method, path, body, headers)
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Like [`Client::send`], but a failed connection is an error rather than a panic.
    pub fn try_send(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Result<Resp, ureq::Error> {
        let mut b = ureq::http::Request::builder()
            .method(method)
            .uri(format!("{}{}", self.base, path));
        if let Some(a) = &self.auth {
            b = b.header("Authorization", a);
        }
        for (k, v) in &self.extra {
            b = b.header(k.as_str(), v.as_str());
        }
        let has_ct = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        if body.is_some() && !has_ct {
            b = b.header("Content-Type", "application/json");
        }
        let req = b.body(body.unwrap_or("").to_string()).expect("request");
        let mut resp = self.agent.run(req)?;
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string()?;
        Ok(Resp {
            status,
            headers,
            text,
        })
    }

    pub fn get(&self, path: &str) -> Resp {
        self.send("GET", path, None, &[])
    }
    pub fn put(&self, path: &str, body: &str) -> Resp {
        self.send("PUT", path, Some(body), &[])
    }
    pub fn post(&self, path: &str, body: &str) -> Resp {
        self.send("POST", path, Some(body), &[])
    }
    pub fn delete(&self, path: &str) -> Resp {
        self.send("DELETE", path, None, &[])
    }
}

/// Sets a config value through `/_node/_local/_config` (as the admin client `admin`).
pub fn set_config(admin: &Client, section: &str, key: &str, value: &str) {
    let r = admin.put(
        &format!("/_node/_local/_config/{section}/{key}"),
        &serde_json::json!(value).to_string(),
    );
    assert_eq!(r.status, 200, "{}", r.text);
}

/// The admin's `Authorization` header value.
pub fn admin_auth() -> String {
    format!("Basic {}", base64(&format!("{}:{}", ADMIN.0, ADMIN.1)))
}

/// Standard base64 of some bytes.
pub fn base64_bytes(b: &[u8]) -> String {
    const T: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(T[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base64(s: &str) -> String {
    base64_bytes(s.as_bytes())
}

/// A real CouchDB 3.5 beside the server under test, started by `../shared/couchdb/start` on a
/// free port and stopped when dropped.
pub struct ReferenceCouch {
    /// `http://127.0.0.1:PORT` (server admin `admin`/`admin`).
    pub url: String,
    port: u16,
    scripts: PathBuf,
    /// Its release, data and log, removed when it stops (each is tens of megabytes).
    home: PathBuf,
}

impl ReferenceCouch {
    /// Starts one, or says in one line why the calling test is skipped and answers `None`.
    pub fn start(test: &str) -> Option<ReferenceCouch> {
        let scripts = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/couchdb");
        if !scripts.join("start").exists() {
            println!(
                "{test}: skipped, ../shared/couchdb/start is absent (no CouchDB to compare with)"
            );
            return None;
        }
        // A port can be taken between choosing it and CouchDB binding it (an outgoing
        // connection's ephemeral port, or another test's server), so a failed start is
        // retried on another port; ports are drawn below the ephemeral range to make
        // that rare.
        let mut failures = Vec::new();
        for attempt in 0..4u32 {
            let port = free_port_below_ephemeral(attempt);
            let couch = ReferenceCouch {
                url: format!("http://127.0.0.1:{port}"),
                port,
                scripts: scripts.clone(),
                home: std::env::temp_dir().join(format!("couchdb-ref-{port}")),
            };
            match couch.launch() {
                Ok(()) => return Some(couch),
                Err(why) => failures.push(format!("port {port}: {why}")),
            }
        }
        panic!("CouchDB did not start:\n{}", failures.join("\n"));
    }

    /// Runs the start script on this one's port with a fresh data directory, answering the
    /// script's complaint and the end of CouchDB's log when it does not come up.
    fn launch(&self) -> Result<(), String> {
        // A fresh data directory every time: an earlier run that drew the same port
        // must not leave its databases behind for this one to trip over.
        let _ = Command::new(self.scripts.join("stop"))
            .arg(self.port.to_string())
            .output();
        let data = self.home.join("data");
        let _ = std::fs::remove_dir_all(&data);
        let out = Command::new(self.scripts.join("start"))
            .arg(self.port.to_string())
            .arg(&data)
            .output()
            .expect("run ../shared/couchdb/start");
        if out.status.success() {
            return Ok(());
        }
        let log = std::fs::read_to_string(self.home.join("log/couchdb.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(8).collect();
        let why = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
        Err(why) // dropping self stops what is left of it and removes its home
    }

    /// A client for its server admin.
    pub fn admin(&self) -> Client {
        Client::new(&self.url, Some(("admin", "admin")))
    }
}

/// A port that is free now, drawn from 20000-32767 (below Linux's ephemeral range, where
/// outgoing connections take theirs) and varied by process, time and attempt.
fn free_port_below_ephemeral(attempt: u32) -> u16 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let mut seed = nanos ^ std::process::id().rotate_left(16) ^ attempt.wrapping_mul(7919);
    for _ in 0..1000 {
        seed = seed.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        let port = 20_000 + (seed >> 8) as u16 % 12_768;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port between 20000 and 32767");
}

impl Drop for ReferenceCouch {
    fn drop(&mut self) {
        let _ = Command::new(self.scripts.join("stop"))
            .arg(self.port.to_string())
            .output();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}
