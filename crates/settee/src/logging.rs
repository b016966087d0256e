//! The server's log, as CouchDB's: `[log] level` (CouchDB's levels) and `[log] writer`
//! (`stderr`, or `file` with `[log] file`), both changeable while running through
//! `_config`; lines as CouchDB writes them (`[level] time node <pid> request-id text`); one
//! access line per request at `notice`, written by [`write_access`] without an event's
//! dispatch. `RUST_LOG` (or `SETTEE_LOG`), when set, decides the level instead of the
//! configuration. Each message logged is also counted by level (`couch_log/level/…` in
//! `_stats`).

use std::cell::RefCell;
use std::fmt::Write as _;
use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

use settee_http::Config;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, MakeWriter};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{reload, EnvFilter, Layer, Registry};

/// Where log lines go now.
enum Target {
    Stderr,
    File(File),
}

/// The current target and the lines not yet written to it.
struct Sink {
    target: Target,
    pending: Vec<u8>,
}

impl Sink {
    fn flush(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let _ = match &mut self.target {
            Target::Stderr => std::io::stderr().write_all(&self.pending),
            Target::File(f) => f.write_all(&self.pending),
        };
        self.pending.clear();
    }
}

static SINK: Mutex<Sink> = Mutex::new(Sink {
    target: Target::Stderr,
    pending: Vec::new(),
});

/// Lines of `info` and below wait at most this long (or until this many bytes gather) to be
/// written with others; warnings and errors are written at once, with whatever waited.
const FLUSH_EVERY: std::time::Duration = std::time::Duration::from_millis(100);
const FLUSH_BYTES: usize = 64 << 10;

/// The level filter, replaced when the configuration changes.
static FILTER: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// The level the environment asks for (`RUST_LOG`, else `SETTEE_LOG`), which wins over the
/// configuration.
fn from_env() -> Option<String> {
    ["RUST_LOG", "SETTEE_LOG"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|v| !v.trim().is_empty()))
}

/// CouchDB's level names as filter directives (`notice` is `info` here; the access lines
/// are `notice`).
fn directive(level: &str) -> &'static str {
    match level.trim().to_ascii_lowercase().as_str() {
        "debug" => "debug",
        "info" | "notice" => "info",
        "warning" | "warn" => "warn",
        "error" | "critical" | "alert" | "emergency" => "error",
        "none" => "off",
        _ => "info",
    }
}

/// Starts logging (at `info` to stderr until the configuration is read).
pub fn init() {
    let level = from_env().unwrap_or_else(|| "info".into());
    let (filter, handle) = reload::Layer::new(EnvFilter::new(level));
    let _ = FILTER.set(handle);
    settee_http::set_access_writer(write_access);
    let _ = std::thread::Builder::new()
        .name("settee-log".into())
        .spawn(|| loop {
            std::thread::sleep(FLUSH_EVERY);
            SINK.lock().expect("log sink").flush();
        });
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .event_format(CouchFormat)
                .with_writer(Lines),
        )
        .with(CountLevels)
        .init();
}

/// Writes the lines still waiting (before the process exits).
pub fn flush() {
    SINK.lock().expect("log sink").flush();
}

/// Applies `[log]` (a `NodeOptions::on_config` hook: at start and after every change).
pub fn apply(config: &Config) {
    if from_env().is_none() {
        let level = directive(config.get("log", "level").unwrap_or("info"));
        if let Some(handle) = FILTER.get() {
            let _ = handle.reload(EnvFilter::new(level));
        }
    }
    let target = match config.get("log", "writer").unwrap_or("stderr") {
        "file" => {
            let path = config.get("log", "file").unwrap_or("./couch.log");
            match std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
            {
                Ok(f) => Target::File(f),
                Err(e) => {
                    eprintln!("[error] cannot open the log file {path}: {e}; logging to stderr");
                    Target::Stderr
                }
            }
        }
        _ => Target::Stderr,
    };
    let mut sink = SINK.lock().expect("log sink");
    sink.flush();
    sink.target = target;
}

/// Hands each formatted line to the sink: at once for warnings and errors, gathered with
/// others for the rest (see [`FLUSH_EVERY`]).
struct Lines;

impl<'a> MakeWriter<'a> for Lines {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line {
            text: Vec::with_capacity(256),
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &tracing::Metadata<'_>) -> Line {
        Line {
            text: Vec::with_capacity(256),
            urgent: *meta.level() <= Level::WARN,
        }
    }
}

/// One line, handed over when dropped.
struct Line {
    text: Vec<u8>,
    urgent: bool,
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.text.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if self.text.is_empty() {
            return;
        }
        let mut sink = SINK.lock().expect("log sink");
        sink.pending.extend_from_slice(&self.text);
        if self.urgent || sink.pending.len() >= FLUSH_BYTES {
            sink.flush();
        }
    }
}

/// Writes one access line (its text as the server put it together, request id first) as
/// CouchDB writes it, at `notice`, and counts it as [`CountLevels`] counts a message. The
/// server has already asked the filter whether access lines are logged.
fn write_access(text: &str) {
    settee_metrics::inc(settee_metrics::Metric::CouchLogLevelNotice);
    thread_local! {
        static LINE: RefCell<String> = const { RefCell::new(String::new()) };
    }
    LINE.with_borrow_mut(|line| {
        line.clear();
        line.push_str("[notice] ");
        let _ = write_now(line);
        for part in [
            " ",
            settee_http::NODE_NAME,
            " <0.0.0> ",
            &escaped(text),
            "\n",
        ] {
            line.push_str(part);
        }
        let mut sink = SINK.lock().expect("log sink");
        sink.pending.extend_from_slice(line.as_bytes());
        if sink.pending.len() >= FLUSH_BYTES {
            sink.flush();
        }
    });
}

/// CouchDB's line: `[level] time node <pid> -------- text` (access lines, which carry a
/// request id, are [`write_access`]'s).
struct CouchFormat;

impl<S, N> FormatEvent<S, N> for CouchFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let level = match *event.metadata().level() {
            Level::ERROR => "error",
            Level::WARN => "warning",
            Level::INFO => "info",
            _ => "debug",
        };
        write!(writer, "[{level}] ")?;
        write_now(&mut writer)?;
        write!(writer, " {} <0.0.0> -------- ", settee_http::NODE_NAME)?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// `text` with the characters a terminal could act on (C0 controls, DEL, C1 controls)
/// written as escapes, so that no request can forge a line or drive the reader's terminal
/// (a user name, for one, may hold any character).
fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    let acts = |c: char| c < ' ' || ('\u{7f}'..='\u{9f}').contains(&c);
    // Bytes first, every one (a loop without an early exit runs many at a time): C1
    // controls are the characters whose UTF-8 starts with 0xC2 0x80-0x9F.
    let may_act = text.bytes().fold(false, |seen, b| {
        seen | (b < b' ') | (b == 0x7f) | (b == 0xc2)
    });
    if !may_act || !text.contains(acts) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if acts(c) {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// The time as CouchDB's lines give it, `2026-11-30T03:09:10.679839Z` (UTC, microseconds),
/// with the date worked out once a second.
fn write_now(writer: &mut impl std::fmt::Write) -> std::fmt::Result {
    let since = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    thread_local! {
        /// The second last written and its text up to the fraction's point.
        static SECOND: RefCell<(u64, String)> = const { RefCell::new((u64::MAX, String::new())) };
    }
    SECOND.with_borrow_mut(|(second, text)| {
        if *second != since.as_secs() {
            *second = since.as_secs();
            *text = utc_second(*second);
        }
        let mut fraction = *b".000000Z";
        let mut micros = since.subsec_micros();
        for digit in fraction[1..7].iter_mut().rev() {
            *digit = b'0' + (micros % 10) as u8;
            micros /= 10;
        }
        writer.write_str(text)?;
        writer.write_str(std::str::from_utf8(&fraction).expect("ASCII digits"))
    })
}

/// `YYYY-MM-DDTHH:MM:SS` for seconds since 1970 (UTC).
fn utc_second(secs: u64) -> String {
    let (year, month, day) = settee_auth::cookie::civil_date((secs / 86_400) as i64);
    let rest = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}",
        rest / 3_600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Counts each message logged by its level, as CouchDB's `couch_log/level/…` statistics.
struct CountLevels;

impl<S: Subscriber> Layer<S> for CountLevels {
    fn on_event(&self, event: &Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        use settee_metrics::Metric;
        settee_metrics::inc(match *event.metadata().level() {
            Level::ERROR => Metric::CouchLogLevelError,
            Level::WARN => Metric::CouchLogLevelWarning,
            Level::INFO => Metric::CouchLogLevelInfo,
            _ => Metric::CouchLogLevelDebug,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::fmt::time::{FormatTime, SystemTime};

    #[test]
    fn the_time_of_a_line_is_the_utc_calendar_second() {
        for (secs, text) in [
            (0, "1970-01-01T00:00:00"),
            (951_782_400, "2000-02-29T00:00:00"),
            (1_709_164_800, "2024-02-29T00:00:00"),
            (1_796_008_150, "2026-11-30T03:09:10"),
            (4_102_444_799, "2099-12-31T23:59:59"),
        ] {
            assert_eq!(utc_second(secs), text);
        }
        // The same as the general formatter writes now, to the second (tried again if a
        // second ended between the two).
        let same_second = (0..3).any(|_| {
            let (mut general, mut fast) = (String::new(), String::new());
            SystemTime
                .format_time(&mut Writer::new(&mut general))
                .unwrap();
            write_now(&mut Writer::new(&mut fast)).unwrap();
            assert_eq!(fast.len(), general.len(), "{fast} {general}");
            fast[..20] == general[..20]
        });
        assert!(same_second);
    }

    #[test]
    fn characters_a_terminal_acts_on_are_escaped() {
        assert!(matches!(
            escaped("GET /db 200"),
            std::borrow::Cow::Borrowed(_)
        ));
        assert_eq!(
            escaped("a\nb\u{1b}[31m\u{7f}\u{85}é"),
            "a\\x0ab\\x1b[31m\\x7f\\x85é"
        );
        // Characters whose UTF-8 starts as a C1 control's does, but which are none.
        assert_eq!(escaped("\u{9f}\u{a0}©"), "\\x9f\u{a0}©");
        assert!(matches!(escaped("\u{a0}©"), std::borrow::Cow::Borrowed(_)));
    }

    #[test]
    fn couchdb_levels_become_filters() {
        assert_eq!(directive("notice"), "info");
        assert_eq!(directive("Warning"), "warn");
        assert_eq!(directive("critical"), "error");
        assert_eq!(directive("none"), "off");
        assert_eq!(directive("nonsense"), "info");
    }
}
