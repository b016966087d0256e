//! One query server process and the commands of CouchDB's line protocol: one JSON array per
//! line in, one JSON value per line out, with `["log", message]` lines allowed before an
//! answer.
//!
//! Reading and writing happen on two threads of their own, so that a process that stops
//! reading or stops answering can never block the caller past the time limit: on timeout
//! the process is killed and the caller gets [`Error::Timeout`].

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::thread;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{Error, Result};

/// A running query server.
pub struct Process {
    child: Child,
    command: String,
    to_child: Sender<Vec<u8>>,
    from_child: Receiver<std::io::Result<String>>,
    /// The tag of the functions loaded by the last `reset`/`add_fun` run.
    loaded: Option<String>,
    /// The revision of each design document taught with `["ddoc", "new", …]` (the process
    /// keeps only the last one taught per id).
    ddocs: HashMap<String, String>,
    broken: bool,
}

impl Process {
    /// Starts `command` (a program and its arguments, separated by spaces).
    pub fn spawn(command: &str) -> Result<Process> {
        let mut words = command.split_whitespace();
        let program = words.next().ok_or_else(|| Error::Spawn {
            command: command.into(),
            source: std::io::ErrorKind::NotFound.into(),
        })?;
        let mut cmd = Command::new(program);
        cmd.args(words)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = spawn_tied(cmd).map_err(|source| Error::Spawn {
            command: command.into(),
            source,
        })?;
        let (stdin, stdout, stderr) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take());
        let (to_child, lines_out) = channel::<Vec<u8>>();
        let (lines_in, from_child) = channel();
        let name = format!("settee-qs-{}", child.id());
        if let Some(mut stdin) = stdin {
            thread::Builder::new().name(name.clone()).spawn(move || {
                for line in lines_out {
                    if stdin.write_all(&line).and_then(|()| stdin.flush()).is_err() {
                        break;
                    }
                }
            })
        } else {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        .map_err(|source| Error::Spawn {
            command: command.into(),
            source,
        })?;
        if let Some(stdout) = stdout {
            thread::Builder::new()
                .name(name.clone())
                .spawn(move || {
                    for line in BufReader::new(stdout).lines() {
                        if lines_in.send(line).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|source| Error::Spawn {
                    command: command.into(),
                    source,
                })?;
        }
        if let Some(stderr) = stderr {
            let program = program.to_string();
            thread::Builder::new()
                .name(name)
                .spawn(move || {
                    for line in BufReader::new(stderr)
                        .lines()
                        .map_while(std::result::Result::ok)
                    {
                        tracing::info!(query_server = program, "{line}");
                    }
                })
                .map_err(|source| Error::Spawn {
                    command: command.into(),
                    source,
                })?;
        }
        ALIVE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(Process {
            child,
            command: command.into(),
            to_child,
            from_child,
            loaded: None,
            ddocs: HashMap::new(),
            broken: false,
        })
    }

    /// The command line this process was started with.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// The operating system's id of the process.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process failed and must not be used again.
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    /// Sends one command (a JSON array, without the newline) and returns the answer's text.
    /// Log lines are passed to the server log; an error answer is [`Error::Raised`].
    pub fn prompt_raw(&mut self, command: Vec<u8>, timeout: Duration) -> Result<String> {
        self.send(command)?;
        self.receive(timeout)
    }

    /// Sends one command without waiting for its answer; answers come back in the order
    /// the commands were sent, each read by [`Process::receive`].
    pub fn send(&mut self, command: Vec<u8>) -> Result<()> {
        if self.broken {
            return Err(Error::Process("the process failed earlier".into()));
        }
        let mut line = command;
        line.push(b'\n');
        if self.to_child.send(line).is_err() {
            return Err(self.fail(Error::Process("the process stopped reading".into())));
        }
        Ok(())
    }

    /// The answer to the oldest command not yet answered.
    pub fn receive(&mut self, timeout: Duration) -> Result<String> {
        loop {
            let answer = match self.from_child.recv_timeout(timeout) {
                Ok(Ok(answer)) => answer,
                Ok(Err(e)) => {
                    return Err(self.fail(Error::Process(format!("reading its output: {e}"))))
                }
                Err(RecvTimeoutError::Timeout) => return Err(self.fail(Error::Timeout(timeout))),
                Err(RecvTimeoutError::Disconnected) => {
                    let status = self.exit_status();
                    return Err(self.fail(Error::Process(status)));
                }
            };
            let answer = answer.trim();
            if answer.starts_with("[\"log\"") {
                log_line(answer);
                continue;
            }
            if answer.starts_with("[\"error\"") || answer.starts_with("{\"error\"") {
                return Err(raised(answer));
            }
            if answer.starts_with("[\"fatal\"") {
                let e = raised(answer);
                return Err(self.fail(e));
            }
            return Ok(answer.to_string());
        }
    }

    /// Sends one command and parses the answer.
    pub fn prompt(&mut self, command: &Value, timeout: Duration) -> Result<Value> {
        let answer = self.prompt_raw(command.to_string().into_bytes(), timeout)?;
        serde_json::from_str(&answer)
            .map_err(|_| self.fail(Error::Process(format!("not JSON: {answer}"))))
    }

    /// Makes `functions` the loaded ones (`reset`, `add_lib` when `lib` has modules, one
    /// `add_fun` each), unless the functions tagged `tag` are loaded already.
    pub fn load(
        &mut self,
        tag: &str,
        functions: &[&str],
        lib: &Value,
        config: &Value,
        timeout: Duration,
    ) -> Result<()> {
        if self.loaded.as_deref() == Some(tag) {
            return Ok(());
        }
        self.loaded = None;
        self.expect_true(&json!(["reset", config]), timeout)?;
        if lib.as_object().is_some_and(|l| !l.is_empty()) {
            self.expect_true(&json!(["add_lib", lib]), timeout)?;
        }
        for f in functions {
            self.expect_true(&json!(["add_fun", f]), timeout)?;
        }
        self.loaded = Some(tag.to_string());
        Ok(())
    }

    /// Maps one document (its JSON text) with the loaded functions; the answer is a JSON
    /// array holding, per function, an array of `[key, value]` pairs.
    pub fn map_doc(&mut self, doc_json: &[u8], timeout: Duration) -> Result<String> {
        self.prompt_raw(map_doc_command(doc_json), timeout)
    }

    /// Maps many documents, sending each `map_doc` without waiting for the previous answer
    /// so the process never idles on a round trip. The outer error is a process failure;
    /// an inner one is the process refusing one document.
    pub fn map_docs<'d>(
        &mut self,
        docs: impl Iterator<Item = &'d [u8]>,
        timeout: Duration,
    ) -> Result<Vec<Result<String>>> {
        let mut sent = 0;
        for doc in docs {
            self.send(map_doc_command(doc))?;
            sent += 1;
        }
        let mut answers = Vec::with_capacity(sent);
        for _ in 0..sent {
            match self.receive(timeout) {
                Ok(a) => answers.push(Ok(a)),
                Err(e @ Error::Raised { .. }) if !self.broken => answers.push(Err(e)),
                Err(e) => return Err(e),
            }
        }
        Ok(answers)
    }

    /// `reduce` over `rows_json`, a JSON array of `[[key, id], value]` pairs, or with
    /// `rereduce`, over a JSON array of earlier results; the one function's result.
    pub fn reduce(
        &mut self,
        source: &str,
        rows_json: &str,
        rereduce: bool,
        timeout: Duration,
    ) -> Result<Value> {
        let name = if rereduce { "rereduce" } else { "reduce" };
        let mut command = json!([name, [source]]).to_string().into_bytes();
        command.pop();
        command.push(b',');
        command.extend_from_slice(rows_json.as_bytes());
        command.push(b']');
        let answer = self.prompt_raw(command, timeout)?;
        match serde_json::from_str::<Value>(&answer) {
            Ok(Value::Array(mut parts)) if parts.len() == 2 && parts[0] == Value::Bool(true) => {
                match parts.pop() {
                    Some(Value::Array(mut results)) if results.len() == 1 => {
                        Ok(results.pop().unwrap_or(Value::Null))
                    }
                    _ => Err(self.fail(Error::Process(format!(
                        "unexpected reduce answer: {answer}"
                    )))),
                }
            }
            _ => Err(self.fail(Error::Process(format!(
                "unexpected reduce answer: {answer}"
            )))),
        }
    }

    /// Calls a design document function (`["ddoc", id, path, args]`), first teaching the
    /// process the design document (`["ddoc", "new", id, ddoc]`) if it does not know this
    /// revision of it.
    pub fn ddoc(
        &mut self,
        ddoc: &Value,
        path: &[&str],
        args: &Value,
        timeout: Duration,
    ) -> Result<Value> {
        let id = ddoc.get("_id").and_then(Value::as_str).unwrap_or_default();
        let rev = ddoc.get("_rev").and_then(Value::as_str).unwrap_or_default();
        if self.ddocs.get(id).map(String::as_str) != Some(rev) {
            self.expect_true(&json!(["ddoc", "new", id, ddoc]), timeout)?;
            self.ddocs.insert(id.to_string(), rev.to_string());
        }
        self.prompt(&json!(["ddoc", id, path, args]), timeout)
    }

    /// Stops the process and keeps it from going back to the pool: it was left in the
    /// middle of a conversation (a list stopped early).
    pub fn discard(&mut self) {
        let _ = self.fail(Error::Process("discarded".into()));
    }

    fn expect_true(&mut self, command: &Value, timeout: Duration) -> Result<()> {
        match self.prompt(command, timeout)? {
            Value::Bool(true) => Ok(()),
            other => Err(self.fail(Error::Process(format!("expected true, got {other}")))),
        }
    }

    /// Marks the process unusable and stops it; returns `e` for the caller.
    fn fail(&mut self, e: Error) -> Error {
        self.broken = true;
        let _ = self.child.kill();
        let _ = self.child.wait();
        e
    }

    /// How the process ended, once its output has closed (waiting briefly for it to exit).
    fn exit_status(&mut self) -> String {
        for _ in 0..50 {
            match self.child.try_wait() {
                Ok(Some(status)) => return format!("the process exited ({status})"),
                Ok(None) => thread::sleep(Duration::from_millis(10)),
                Err(e) => return format!("the process ended: {e}"),
            }
        }
        "the process closed its output".into()
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        ALIVE.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Query server processes alive now (`_system`'s `os_proc_count`).
static ALIVE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// How many query server processes are alive.
pub fn alive() -> usize {
    ALIVE.load(std::sync::atomic::Ordering::Relaxed)
}

fn map_doc_command(doc_json: &[u8]) -> Vec<u8> {
    let mut command = Vec::with_capacity(doc_json.len() + 16);
    command.extend_from_slice(b"[\"map_doc\",");
    command.extend_from_slice(doc_json);
    command.push(b']');
    command
}

type SpawnRequest = (Command, Sender<std::io::Result<Child>>);

/// Starts `cmd` so that it is killed if this server dies, even while the child is busy and
/// not reading its input. Linux ties the child to the thread that started it, so every
/// child is started by one thread that lives as long as the server.
fn spawn_tied(cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: std::sync::OnceLock<std::sync::Mutex<Sender<SpawnRequest>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = channel::<SpawnRequest>();
        let started = thread::Builder::new()
            .name("settee-qs-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(spawn_with_death_signal(&mut cmd));
                }
            });
        if let Err(e) = started {
            tracing::error!("cannot start the query server spawner: {e}");
        }
        std::sync::Mutex::new(tx)
    });
    let (reply, answer) = channel();
    let sent = spawner
        .lock()
        .map(|tx| tx.send((cmd, reply)).is_ok())
        .unwrap_or(false);
    if !sent {
        return Err(std::io::Error::other(
            "the query server spawner is not running",
        ));
    }
    answer
        .recv()
        .map_err(|_| std::io::Error::other("the query server spawner stopped"))?
}

#[cfg(target_os = "linux")]
fn spawn_with_death_signal(cmd: &mut Command) -> std::io::Result<Child> {
    use std::os::unix::process::CommandExt;
    // SAFETY: the closure runs in the child between fork and exec and only makes the
    // async-signal-safe prctl system call.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

#[cfg(not(target_os = "linux"))]
fn spawn_with_death_signal(cmd: &mut Command) -> std::io::Result<Child> {
    cmd.spawn()
}

fn log_line(line: &str) {
    let message = serde_json::from_str::<Value>(line)
        .ok()
        .and_then(|v| v.get(1).cloned())
        .unwrap_or(Value::Null);
    match message {
        Value::String(s) => tracing::info!(target: "settee::query_server", "{s}"),
        other => tracing::info!(target: "settee::query_server", "{other}"),
    }
}

/// The error an error answer (`["error"|"fatal", id, reason]` or `{"error", "reason"}`) carries.
fn raised(answer: &str) -> Error {
    let text = |v: Option<&Value>| match v {
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
        None => "unknown_error".to_string(),
    };
    match serde_json::from_str::<Value>(answer) {
        Ok(Value::Array(parts)) => Error::Raised {
            error: text(parts.get(1)),
            reason: text(parts.get(2)),
        },
        Ok(obj @ Value::Object(_)) => Error::Raised {
            error: text(obj.get("error")),
            reason: text(obj.get("reason")),
        },
        _ => Error::Raised {
            error: "unknown_error".into(),
            reason: answer.to_string(),
        },
    }
}
