//! Automatic compaction, configured as CouchDB's "smoosh" daemon is: databases and view
//! indexes whose files hold enough garbage are compacted in the background, without anyone
//! asking, so that a database taking single-document writes does not grow without end.
//!
//! Each second the daemon looks at the open databases and their open view indexes. A file
//! that changed since it was last weighed, and was not weighed within `[smoosh] staleness`
//! minutes, is offered to the channels named in `[smoosh] db_channels` (or `view_channels`)
//! in turn; the first whose rules (`[smoosh.<channel>]`) accept it queues it by priority.
//! Each channel compacts up to `concurrency` files at once, highest priority first, within
//! its `from`/`to` window, and none before `[smoosh] wait_secs` after the start. A file is
//! weighed by its committed length (the zeros written ahead of appends are not garbage:
//! the next write needs them again) against its live data (`sizes.active`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use settee_db::Database;
use settee_views::Index;

use settee_config::registry as setting;

use settee_config::Config;

use crate::Node;

/// How often the daemon looks at the open files.
const TICK: Duration = Duration::from_secs(1);

/// Starts the daemon on a thread of its own (weighing a file reads its inner nodes).
pub fn start(node: Arc<Node>) {
    let spawned = std::thread::Builder::new()
        .name("settee-smoosh".into())
        .spawn(move || {
            let mut daemon = Daemon::new();
            loop {
                std::thread::sleep(TICK);
                // A failure while looking is logged and forgotten; the next tick starts afresh.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| daemon.tick(&node)))
                    .is_err()
                {
                    tracing::error!("automatic compaction failed while looking at the open files");
                    daemon.lanes.clear();
                    daemon.weighed.clear();
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!("automatic compaction could not start: {e}");
    }
}

/// How a channel weighs a file.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Weigh {
    /// `file / active`.
    Ratio,
    /// `file - active`, in bytes.
    Slack,
}

/// One channel's rules, from `[smoosh.<name>]` over CouchDB's defaults.
#[derive(Clone, Debug, PartialEq)]
struct Channel {
    name: String,
    weigh: Weigh,
    min_priority: f64,
    max_priority: f64,
    min_size: u64,
    max_size: u64,
    concurrency: usize,
    capacity: usize,
    /// Minutes of the day (UTC) from which and until which it may start compactions.
    window: Option<(u32, u32)>,
}

impl Channel {
    /// The channel `name` as configured; the channels CouchDB ships start from its shipped
    /// thresholds, any other from the generic defaults.
    fn from_config(config: &Config, name: &str) -> Channel {
        let section = format!("smoosh.{name}");
        let shipped = match name {
            "ratio_dbs" | "ratio_views" => Some((Weigh::Ratio, 2.0)),
            "slack_dbs" | "slack_views" => Some((Weigh::Slack, 536_870_912.0)),
            _ => None,
        };
        let weigh = match config.get(&section, "priority") {
            Some("slack") => Weigh::Slack,
            Some(_) => Weigh::Ratio,
            None => shipped.map_or(Weigh::Ratio, |(w, _)| w),
        };
        let default_min = match (shipped, weigh) {
            (Some((w, min)), _) if w == weigh => min,
            (_, Weigh::Ratio) => 5.0,
            (_, Weigh::Slack) => 16.0 * 1024.0 * 1024.0,
        };
        // Each side on its own, as CouchDB reads them: from midnight, until midnight.
        let side = |key: &str, default: u32| match config.get(&section, key) {
            None => Some(default),
            Some(text) => minute_of_day(text).or_else(|| {
                tracing::warn!(
                    "[{section}] {key} = {text:?} is not HH:MM; the channel keeps no window"
                );
                None
            }),
        };
        let window = match (side("from", 0), side("to", 24 * 60)) {
            (Some(from), Some(to)) if (from, to) != (0, 24 * 60) => Some((from, to)),
            _ => None,
        };
        Channel {
            name: name.to_string(),
            weigh,
            min_priority: config.get_or(&section, "min_priority", default_min),
            max_priority: config.value_in::<f64>(&setting::SMOOSH_MAX_PRIORITY, &section),
            min_size: config.value_in::<u64>(&setting::SMOOSH_MIN_SIZE, &section),
            max_size: config.value_in::<u64>(&setting::SMOOSH_MAX_SIZE, &section),
            concurrency: config.value_in::<usize>(&setting::SMOOSH_CONCURRENCY, &section),
            capacity: config.value_in::<usize>(&setting::SMOOSH_CAPACITY, &section),
            window,
        }
    }

    /// The file's priority in this channel, if the channel takes it.
    fn accepts(&self, file: u64, active: u64) -> Option<f64> {
        let priority = match self.weigh {
            Weigh::Ratio => file as f64 / active.max(1) as f64,
            Weigh::Slack => file.saturating_sub(active) as f64,
        };
        let fits = (self.min_size..=self.max_size).contains(&file)
            && priority >= self.min_priority
            && priority < self.max_priority;
        fits.then_some(priority)
    }

    /// Whether the channel may start compactions at `minute` of the day (UTC). A window
    /// from a time to the same time is the whole day.
    fn open_at(&self, minute: u32) -> bool {
        match self.window {
            None => true,
            Some((from, to)) if from == to => true,
            Some((from, to)) if from < to => (from..to).contains(&minute),
            Some((from, to)) => minute >= from || minute < to,
        }
    }
}

/// `HH:MM` as minutes since midnight; `24:00` is the end of the day.
fn minute_of_day(text: &str) -> Option<u32> {
    let (h, m) = text.trim().split_once(':')?;
    let (h, m): (u32, u32) = (h.parse().ok()?, m.parse().ok()?);
    (m < 60 && (h < 24 || (h, m) == (24, 0))).then_some(h * 60 + m)
}

/// A setting in seconds as a duration; negative, infinite or absurd values are clamped.
fn seconds(value: f64) -> Duration {
    Duration::try_from_secs_f64(value.max(0.0)).unwrap_or(Duration::MAX)
}

/// The channels of a list such as `db_channels`. The upgrade and cleanup channels have
/// nothing to do here (one file format; `_view_cleanup` removes unused index files).
fn channels(config: &Config, key: &str, default: &str) -> Vec<Channel> {
    let names = config.get("smoosh", key).unwrap_or(default);
    names
        .split(',')
        .map(str::trim)
        .filter(|n| !n.is_empty() && !n.starts_with("upgrade_") && *n != "index_cleanup")
        .map(|n| Channel::from_config(config, n))
        .collect()
}

/// A file the daemon may compact, open.
#[derive(Clone)]
enum Target {
    Db(Arc<Database>),
    View(Arc<Database>, Arc<Index>),
}

/// A queued file, by name: the queue holds no database open (there may be thousands).
#[derive(Clone, Debug, PartialEq)]
struct Queued {
    db: String,
    /// The view index's signature, for an index.
    signature: Option<String>,
}

impl Queued {
    fn key(&self) -> String {
        match &self.signature {
            None => self.db.clone(),
            Some(sig) => format!("{}/{sig}", self.db),
        }
    }

    /// The file, opened again; `None` if its database or index is gone.
    fn open(&self, node: &Node) -> Option<Target> {
        let db = node.catalog.get(&self.db).ok()?;
        match &self.signature {
            None => Some(Target::Db(db)),
            Some(sig) => {
                let index = settee_views::Views::open_indexes(&db)
                    .into_iter()
                    .find(|i| i.signature() == sig)?;
                Some(Target::View(db, index))
            }
        }
    }
}

impl Target {
    fn queued(&self) -> Queued {
        match self {
            Target::Db(db) => Queued {
                db: db.name().to_string(),
                signature: None,
            },
            Target::View(db, index) => Queued {
                db: db.name().to_string(),
                signature: Some(index.signature().to_string()),
            },
        }
    }

    fn key(&self) -> String {
        self.queued().key()
    }

    /// Committed bytes and live bytes.
    fn weigh(&self) -> settee_db::Result<(u64, u64)> {
        match self {
            Target::Db(db) => Ok((self.committed(), db.snapshot().active_bytes()?)),
            Target::View(_, index) => Ok((
                self.committed(),
                index
                    .store()
                    .snapshot()
                    .nodes_bytes()
                    .map_err(settee_db::Error::Store)?,
            )),
        }
    }

    fn committed(&self) -> u64 {
        match self {
            Target::Db(db) => db.shards().iter().map(|s| s.store().committed_len()).sum(),
            Target::View(_, index) => index.store().committed_len(),
        }
    }

    fn running(&self) -> bool {
        match self {
            Target::Db(db) => db.compact_running(),
            Target::View(_, index) => index.state().2,
        }
    }

    /// Starts compacting it; false if a compaction of it already runs.
    fn start(&self, node: &Node) -> bool {
        match self {
            Target::Db(db) => db.start_compaction(),
            Target::View(db, index) => node.views.compact(db, index),
        }
    }
}

/// The daemon's configuration, parsed when the configuration changes
/// ([`Node::apply_config`]), not on every look.
pub(crate) struct Plan {
    db_channels: Vec<Channel>,
    view_channels: Vec<Channel>,
    /// How long a weighed file that changed waits before it is weighed again.
    staleness: Duration,
    /// How long after the start no compaction begins.
    wait: Duration,
}

impl Plan {
    /// The plan `[smoosh]` and its channel sections describe.
    pub(crate) fn from_config(config: &Config) -> Plan {
        Plan {
            db_channels: channels(config, "db_channels", "upgrade_dbs,ratio_dbs,slack_dbs"),
            view_channels: channels(
                config,
                "view_channels",
                "upgrade_views,ratio_views,slack_views",
            ),
            staleness: seconds(config.value::<f64>(&setting::SMOOSH_STALENESS) * 60.0),
            wait: seconds(config.value::<f64>(&setting::SMOOSH_WAIT_SECS)),
        }
    }
}

/// A channel's queue and what it runs.
#[derive(Default)]
struct Lane {
    queued: Vec<(f64, Queued)>,
    running: Vec<Target>,
}

struct Daemon {
    started: Instant,
    /// Per file: its committed length and when it was last weighed.
    weighed: HashMap<String, (u64, Instant)>,
    lanes: HashMap<String, Lane>,
}

impl Daemon {
    fn new() -> Daemon {
        Daemon {
            started: Instant::now(),
            weighed: HashMap::new(),
            lanes: HashMap::new(),
        }
    }

    fn tick(&mut self, node: &Node) {
        let plan = node.smoosh.load_full();
        let (db_channels, view_channels, staleness) =
            (&plan.db_channels, &plan.view_channels, plan.staleness);
        let mut seen = std::collections::HashSet::new();
        for db in node.catalog.open_databases() {
            let views = settee_views::Views::open_indexes(&db);
            let db_target = Target::Db(db.clone());
            seen.insert(db_target.key());
            self.offer(db_target, db_channels, staleness);
            for index in views {
                let view = Target::View(db.clone(), index);
                seen.insert(view.key());
                self.offer(view, view_channels, staleness);
            }
        }
        // A file that was closed is weighed again when it is open again.
        self.weighed.retain(|key, _| seen.contains(key));
        if self.started.elapsed() >= plan.wait {
            let minute = (std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs())
                / 60
                % 1440) as u32;
            for channel in db_channels.iter().chain(view_channels) {
                self.run(node, channel, minute);
            }
        }
    }

    /// Weighs `target` if it changed and was not weighed lately, and queues it in the first
    /// channel that takes it.
    fn offer(&mut self, target: Target, channels: &[Channel], staleness: Duration) {
        let key = target.key();
        let committed = target.committed();
        if self
            .weighed
            .get(&key)
            .is_some_and(|&(len, at)| len == committed || at.elapsed() < staleness)
        {
            return;
        }
        self.weighed
            .insert(key.clone(), (committed, Instant::now()));
        let (file, active) = match target.weigh() {
            Ok(sizes) => sizes,
            Err(e) => return tracing::warn!("automatic compaction could not weigh {key}: {e}"),
        };
        let Some((channel, priority)) = channels
            .iter()
            .find_map(|c| c.accepts(file, active).map(|p| (c, p)))
        else {
            return;
        };
        let lane = self.lanes.entry(channel.name.clone()).or_default();
        if lane.queued.iter().any(|(_, q)| q.key() == key)
            || lane.running.iter().any(|t| t.key() == key)
        {
            return;
        }
        lane.queued.push((priority, target.queued()));
        lane.queued.sort_by(|a, b| b.0.total_cmp(&a.0));
        lane.queued.truncate(channel.capacity);
    }

    /// Retires finished compactions of `channel` and starts queued ones while it has room.
    fn run(&mut self, node: &Node, channel: &Channel, minute: u32) {
        let Some(lane) = self.lanes.get_mut(&channel.name) else {
            return;
        };
        let weighed = &mut self.weighed;
        lane.running.retain(|target| {
            // A compaction just finished: its new length is weighed already, so that the
            // headers and padding of a small file do not queue it again before it changes.
            if target.running() {
                return true;
            }
            weighed.insert(target.key(), (target.committed(), Instant::now()));
            false
        });
        while lane.running.len() < channel.concurrency
            && channel.open_at(minute)
            && !lane.queued.is_empty()
        {
            let (_, queued) = lane.queued.remove(0);
            let Some(target) = queued.open(node) else {
                continue;
            };
            // Weighed again: a compaction asked for meanwhile may have done the work.
            let still = target
                .weigh()
                .is_ok_and(|(file, active)| channel.accepts(file, active).is_some());
            if still && target.start(node) {
                tracing::info!(channel = %channel.name, file = %target.key(), "automatic compaction started");
                lane.running.push(target);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(lines: &[(&str, &str, &str)]) -> Config {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Config::load(&dir.path().join("t.ini")).unwrap();
        for (section, key, value) in lines {
            c.set(section, key, value).unwrap();
        }
        c
    }

    #[test]
    fn shipped_channels_and_their_thresholds() {
        let c = config(&[]);
        let dbs = channels(&c, "db_channels", "upgrade_dbs,ratio_dbs,slack_dbs");
        assert_eq!(
            dbs.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["ratio_dbs", "slack_dbs"]
        );
        let (ratio, slack) = (&dbs[0], &dbs[1]);
        assert_eq!(
            (
                ratio.weigh,
                ratio.min_priority,
                ratio.min_size,
                ratio.concurrency
            ),
            (Weigh::Ratio, 2.0, 1 << 20, 1)
        );
        assert_eq!(
            (slack.weigh, slack.min_priority),
            (Weigh::Slack, 536_870_912.0)
        );
        // Twice its live data and at least 1 MiB: queued, by its ratio.
        assert_eq!(ratio.accepts(4 << 20, 1 << 20), Some(4.0));
        assert_eq!(ratio.accepts(3 << 20, 2 << 20), None, "below the ratio");
        assert_eq!(ratio.accepts(900 << 10, 1), None, "below min_size");
        assert_eq!(slack.accepts(3 << 30, 1 << 30), Some((2u64 << 30) as f64));
        assert_eq!(slack.accepts(600 << 20, 300 << 20), None);
    }

    #[test]
    fn channels_follow_their_sections() {
        let c = config(&[
            ("smoosh", "db_channels", "big_only, ratio_dbs"),
            ("smoosh.big_only", "priority", "slack"),
            ("smoosh.big_only", "max_size", "1000000"),
            ("smoosh.big_only", "concurrency", "3"),
            ("smoosh.ratio_dbs", "min_priority", "1.5"),
            ("smoosh.ratio_dbs", "max_priority", "10"),
            ("smoosh.ratio_dbs", "min_size", "0"),
        ]);
        let dbs = channels(&c, "db_channels", "unused");
        let (big, ratio) = (&dbs[0], &dbs[1]);
        assert_eq!(
            (big.weigh, big.min_priority, big.concurrency),
            (Weigh::Slack, 16.0 * 1024.0 * 1024.0, 3),
            "generic slack default"
        );
        assert_eq!(big.accepts(2_000_000, 0), None, "above max_size");
        assert_eq!(ratio.accepts(300, 200), Some(1.5));
        assert_eq!(ratio.accepts(3000, 200), None, "at or above max_priority");
        let none = config(&[("smoosh", "db_channels", "")]);
        assert!(
            channels(&none, "db_channels", "ratio_dbs").is_empty(),
            "an empty list turns automatic compaction off"
        );
    }

    #[test]
    fn windows_may_wrap_midnight() {
        let night = Channel::from_config(
            &config(&[("smoosh.n", "from", "20:00"), ("smoosh.n", "to", "06:30")]),
            "n",
        );
        assert_eq!(night.window, Some((1200, 390)));
        assert!(night.open_at(23 * 60) && night.open_at(0) && night.open_at(390 - 1));
        assert!(!night.open_at(390) && !night.open_at(12 * 60));
        let day = Channel::from_config(
            &config(&[("smoosh.d", "from", "09:00"), ("smoosh.d", "to", "17:00")]),
            "d",
        );
        assert!(day.open_at(9 * 60) && !day.open_at(17 * 60) && !day.open_at(3 * 60));
        let bad = Channel::from_config(
            &config(&[("smoosh.b", "from", "25:00"), ("smoosh.b", "to", "06:00")]),
            "b",
        );
        assert!(
            bad.window.is_none() && bad.open_at(0),
            "an unreadable window is no window"
        );
        let evening = Channel::from_config(&config(&[("smoosh.e", "from", "18:00")]), "e");
        assert!(
            evening.open_at(23 * 60 + 59) && !evening.open_at(17 * 60),
            "until midnight when only `from` is set"
        );
        let morning = Channel::from_config(&config(&[("smoosh.m", "to", "06:00")]), "m");
        assert!(
            morning.open_at(0) && !morning.open_at(6 * 60),
            "from midnight when only `to` is set"
        );
        let late = Channel::from_config(
            &config(&[("smoosh.l", "from", "22:00"), ("smoosh.l", "to", "24:00")]),
            "l",
        );
        assert!(
            late.open_at(23 * 60) && !late.open_at(21 * 60),
            "24:00 ends the day"
        );
        let same = Channel::from_config(
            &config(&[("smoosh.s", "from", "05:00"), ("smoosh.s", "to", "05:00")]),
            "s",
        );
        assert!(
            same.open_at(0) && same.open_at(5 * 60) && same.open_at(12 * 60),
            "the same time twice is the whole day"
        );
    }

    #[test]
    fn absurd_durations_are_clamped() {
        assert_eq!(seconds(-3.0), Duration::ZERO);
        assert_eq!(seconds(f64::INFINITY), Duration::MAX);
        assert_eq!(seconds(f64::NAN), Duration::ZERO);
        assert_eq!(seconds(1.5), Duration::from_millis(1500));
    }
}
