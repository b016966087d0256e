//! Logged trees: changes kept in a log and in memory in front of a tree's nodes.
//!
//! A copy-on-write B+tree rewrites a leaf and the path above it for every key a commit
//! touches, so a commit of a few keys, or of keys spread over a large tree (random document
//! ids), writes many nodes for few changes. A logged tree's commits instead append their
//! changes as one log record, chained to the previous one from the header, and keep them in
//! memory (an [`Overlay`]) where every read finds them. Once enough have gathered, a commit
//! folds them into the nodes in one pass that rewrites each leaf they touch once for all of
//! them; a large fold goes in slices between requests instead ([`FoldLimits::slice`]).
//! Opening a file replays the chain of log records written since the last fold.
//!
//! Reads merge the overlay with the tree, a change shadowing the nodes' entry for its key.
//! Each change remembers the value its key has in the nodes, so a count or a reduction is
//! the nodes', less what the changes replace, plus what they hold; the tree's reducer must
//! be able to take reductions apart ([`crate::Reducer::subtract`]).

use std::ops::Bound as StdBound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::format::{put_bytes, put_varint, Ptr, Reader};
use crate::node::Node;
use crate::runs::{RunMap, RunWalk};
use crate::tree::cursor::Entry;
use crate::tree::{Action, Bound, Direction, Reduction, TreeSpec};

/// When a commit folds the logged changes into their trees' nodes: once any of these is
/// reached. Larger limits fold less often (each leaf rewritten for more changes at once)
/// and cost more memory and a longer replay on opening.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FoldLimits {
    /// Changed keys in one tree.
    pub changes: usize,
    /// Key and value bytes of the changes of all trees.
    pub bytes: u64,
    /// Log records chained back from the header, which opening replays.
    pub records: u64,
    /// How many times `changes` and `bytes` a large tree may gather (see
    /// [`FoldLimits::scale`]); 1 keeps them fixed.
    pub grow: u64,
    /// A fold of more changes than this goes in slices of this many, in key order, on the
    /// writer thread between requests, each slice committed on its own: no request waits
    /// for the whole fold, which takes a large tree of random keys a tenth of a second and
    /// more. Their log is then written again from the changes left, as one record.
    pub slice: usize,
}

impl Default for FoldLimits {
    fn default() -> FoldLimits {
        FoldLimits {
            changes: 8192,
            bytes: 8 << 20,
            records: 1024,
            grow: 16,
            slice: 256,
        }
    }
}

impl FoldLimits {
    /// How many times the limits a tree of `entries` entries gathers before a fold: one
    /// change for every two entries, from the limits up to `grow` times them. Changes to
    /// keys spread over a large tree (random ids) land on as many leaves as there are
    /// changes, and a fold rewrites every leaf it touches: gathered longer, each leaf is
    /// rewritten once for more of them, while a fold's work stays bounded.
    pub fn scale(&self, entries: u64) -> u64 {
        let per = (self.changes as u64).saturating_mul(2).max(1);
        (entries / per).clamp(1, self.grow.max(1))
    }
}

/// The memory that the unfolded changes of every store sharing it may take together (an
/// estimate: keys, values and a fixed cost per change). Each store's limits bound its own
/// changes; this bounds a process with many stores open, each holding some. A commit made
/// while the stores hold more than the limit folds its store's changes.
#[derive(Clone)]
pub struct OverlayBudget(Arc<BudgetState>);

struct BudgetState {
    limit: u64,
    used: AtomicU64,
}

impl OverlayBudget {
    /// A budget of `limit` bytes for the stores opened with clones of it.
    pub fn new(limit: u64) -> OverlayBudget {
        OverlayBudget(Arc::new(BudgetState {
            limit,
            used: AtomicU64::new(0),
        }))
    }

    /// The memory the stores' unfolded changes take now, by the estimate.
    pub fn used(&self) -> u64 {
        self.0.used.load(Ordering::Relaxed)
    }

    fn over(&self) -> bool {
        self.used() > self.0.limit
    }
}

impl Default for OverlayBudget {
    fn default() -> OverlayBudget {
        OverlayBudget::new(256 << 20)
    }
}

impl std::fmt::Debug for OverlayBudget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "OverlayBudget {{ limit: {}, used: {} }}",
            self.0.limit,
            self.used()
        )
    }
}

/// One store's share of an [`OverlayBudget`], given back when the store's state goes.
pub(crate) struct Charge {
    budget: OverlayBudget,
    charged: u64,
}

impl Charge {
    pub fn new(budget: OverlayBudget) -> Charge {
        Charge { budget, charged: 0 }
    }

    /// Makes the store's share `bytes`.
    pub fn set(&mut self, bytes: u64) {
        let used = &self.budget.0.used;
        if bytes >= self.charged {
            used.fetch_add(bytes - self.charged, Ordering::Relaxed);
        } else {
            used.fetch_sub(self.charged - bytes, Ordering::Relaxed);
        }
        self.charged = bytes;
    }

    /// Whether the stores sharing the budget hold more than it allows.
    pub fn over(&self) -> bool {
        self.budget.over()
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.set(0);
    }
}

/// What a change costs in memory besides its key and values, about: the map's entry and
/// its share of the map's nodes, the key's and the one-entry leaf's allocations.
const CHANGE_COST: u64 = 256;

/// A key's change since the last fold.
#[derive(Clone)]
pub(crate) struct Change {
    /// The key's entry now, as a one-entry leaf that reads hand out; `None` once removed.
    pub now: Option<Arc<Node>>,
    /// The key's value in the tree's nodes.
    pub was: Option<Arc<[u8]>>,
}

impl Change {
    fn bytes(key: &[u8], now: Option<&Arc<Node>>) -> u64 {
        (key.len() + now.map_or(0, |n| n.value(0).len())) as u64
    }

    /// The memory the change of `key` takes, estimated: the key is held by the map and by
    /// the leaf.
    fn memory(&self, key: &[u8]) -> u64 {
        Change::bytes(key, self.now.as_ref())
            + (key.len() + self.was.as_ref().map_or(0, |w| w.len())) as u64
            + CHANGE_COST
    }
}

/// The entry `action` leaves for its key, as a one-entry leaf; `None` for a removal.
fn leaf_of(action: &Action) -> Option<Arc<Node>> {
    match action {
        Action::Put(k, v) => Some(Arc::new(Node::build_leaf(&[(k, v)]))),
        Action::Delete(_) => None,
    }
}

/// The next changes of a fold made in slices ([`Overlay::slice`]).
pub(crate) struct Slice {
    /// What makes the nodes hold the changes, in key order.
    pub actions: Vec<Action>,
    /// Key and value bytes the changes hold.
    bytes: u64,
    /// The memory the changes take, by the estimate of [`OverlayBudget`].
    memory: u64,
}

/// The smallest and largest of some keys.
type KeySpan = (Arc<[u8]>, Arc<[u8]>);

/// One tree's changes since the last fold. Cheap to clone: snapshots share it, once the
/// changes since the last clone kept are frozen ([`Overlay::freeze`]).
#[derive(Clone, Default)]
pub(crate) struct Overlay {
    changes: RunMap<Change>,
    /// The smallest and largest key whose changes netted to nothing (a key put and removed
    /// again, or removed while absent) and were dropped. The log still holds their
    /// actions, which opening replays over the nodes, so the nodes must not change under
    /// these keys before the next fold either ([`Overlay::shadows`]).
    netted: Option<KeySpan>,
    /// Key and value bytes the changes hold, for the fold threshold.
    bytes: u64,
    /// The memory the changes take, by the estimate of [`OverlayBudget`].
    memory: u64,
}

impl Overlay {
    /// Whether there is no change.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// How many keys have changed.
    pub fn len(&self) -> usize {
        self.changes.len()
    }

    /// Key and value bytes the changes hold.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The memory the changes take, estimated (see [`OverlayBudget`]).
    pub fn memory(&self) -> u64 {
        self.memory
    }

    /// The keys with a change, in order.
    pub fn keys(&self) -> impl Iterator<Item = Arc<[u8]>> {
        self.changes.keys()
    }

    /// Freezes the changes made since the last freeze, so that clones share them: call
    /// before a clone that is kept (a commit's snapshot).
    pub fn freeze(&mut self) {
        self.changes.freeze();
    }

    /// Merges the frozen changes so that they stay few runs (see
    /// [`crate::runs::RunMap::merge_runs`]); the overlay reads the same before and after.
    /// Whether any were merged.
    pub fn merge_runs(&mut self) -> bool {
        self.changes.merge_runs()
    }

    /// The change of `key`, if it has one.
    pub fn get(&self, key: &[u8]) -> Option<&Change> {
        self.changes.get(key)
    }

    /// The entry of `key`, if it has a change: `Some(None)` if the change removed it.
    pub fn entry(&self, key: &[u8]) -> Option<Option<Entry>> {
        self.get(key)
            .map(|c| c.now.clone().map(|leaf| Entry::new(leaf, 0)))
    }

    /// Records `action`. `in_nodes` finds a key's value in the tree's nodes; it is asked
    /// only about a key without a change yet. Returns the key's value just before.
    pub fn record(
        &mut self,
        action: &Action,
        in_nodes: impl FnOnce(&[u8]) -> Result<Option<Vec<u8>>>,
    ) -> Result<Option<Vec<u8>>> {
        let (key, now) = (action.key(), leaf_of(action));
        let (mut before, mut added) = (None, None);
        let old = self.changes.update(key, |current| {
            let was = match current {
                Some(c) => {
                    before = c.now.as_ref().map(|n| n.value(0).to_vec());
                    c.was.clone()
                }
                None => {
                    before = in_nodes(key)?;
                    before.as_deref().map(Arc::from)
                }
            };
            if now.is_none() && was.is_none() {
                return Ok(None);
            }
            let change = Change { now, was };
            added = Some((Change::bytes(key, change.now.as_ref()), change.memory(key)));
            Ok(Some(change))
        })?;
        match added {
            Some((bytes, memory)) => {
                self.bytes += bytes;
                self.memory += memory;
            }
            None => self.widen_netted(key),
        }
        if let Some(old) = old {
            self.bytes -= Change::bytes(key, old.now.as_ref());
            self.memory -= old.memory(key);
        }
        Ok(before)
    }

    /// [`Overlay::record`] for a key known to have no change, whose value in the tree's nodes
    /// is `in_nodes` (read since the key last changed): the changes are not searched for it.
    /// Returns that value.
    pub fn record_unchanged(
        &mut self,
        action: &Action,
        in_nodes: Option<Vec<u8>>,
    ) -> Option<Vec<u8>> {
        let (key, now) = (action.key(), leaf_of(action));
        let was = in_nodes.as_deref().map(Arc::from);
        if now.is_none() && was.is_none() {
            self.widen_netted(key);
            return in_nodes;
        }
        let change = Change { now, was };
        self.bytes += Change::bytes(key, change.now.as_ref());
        self.memory += change.memory(key);
        self.changes.insert_absent(key, change);
        in_nodes
    }

    fn widen_netted(&mut self, key: &[u8]) {
        self.netted = Some(match self.netted.take() {
            None => (Arc::from(key), Arc::from(key)),
            Some((lo, hi)) => (
                if key < &lo[..] { Arc::from(key) } else { lo },
                if key > &hi[..] { Arc::from(key) } else { hi },
            ),
        });
    }

    /// Whether the log since the last fold may name a key of `actions`, whose smallest and
    /// largest keys are `span`: one has a change, or `span` meets the span of keys whose
    /// changes netted to nothing. The nodes must not change under such a key before the
    /// next fold, since opening replays the log over them.
    pub fn shadows(&self, (min, max): (&[u8], &[u8]), actions: &[Action]) -> bool {
        if self
            .netted
            .as_ref()
            .is_some_and(|(lo, hi)| min <= &hi[..] && max >= &lo[..])
        {
            return true;
        }
        !self.changes.is_empty() && actions.iter().any(|a| self.changes.get(a.key()).is_some())
    }

    /// The actions that make the nodes hold what the changes show, in key order.
    pub fn actions(&self) -> Vec<Action> {
        self.slice(None, usize::MAX).actions
    }

    /// [`Overlay::actions`] for at most `max` changes, from the first key after `after`
    /// (from the first key when `None`): the next slice of a fold made in slices.
    pub fn slice(&self, after: Option<&[u8]>, max: usize) -> Slice {
        let from = after.map_or(StdBound::Unbounded, StdBound::Excluded);
        let (mut bytes, mut memory) = (0, 0);
        let actions = self
            .changes
            .range(from, StdBound::Unbounded, true)
            .take(max)
            .map(|(k, c)| {
                bytes += Change::bytes(&k, c.now.as_ref());
                memory += c.memory(&k);
                match &c.now {
                    Some(leaf) => Action::Put(k.to_vec(), leaf.value(0).to_vec()),
                    None => Action::Delete(k.to_vec()),
                }
            })
            .collect();
        Slice {
            actions,
            bytes,
            memory,
        }
    }

    /// Forgets the changes of `slice` (an [`Overlay::slice`]), now folded into the nodes.
    /// The log still names their keys until it is written again without them, so their
    /// span joins the keys the nodes must not change under otherwise ([`Overlay::shadows`]).
    /// The slice must have been taken from the overlay as it still is: each of its keys
    /// is then known to have a change, so none is searched for.
    pub fn folded(&mut self, slice: &Slice) {
        let actions = &slice.actions;
        for action in actions {
            self.changes.hide(action.key());
        }
        self.bytes -= slice.bytes;
        self.memory -= slice.memory;
        if let (Some(first), Some(last)) = (actions.first(), actions.last()) {
            self.widen_netted(first.key());
            self.widen_netted(last.key());
        }
    }

    /// Forgets which keys the log names without a change here: the log is written again
    /// from the changes alone (see [`Overlay::shadows`]).
    pub fn relogged(&mut self) {
        self.netted = None;
    }

    /// `nodes`, the count and reduction of the tree's nodes between `lo` and `hi`, with
    /// the changes in that range taken into account.
    pub fn adjust(
        &self,
        spec: &TreeSpec,
        nodes: Reduction,
        lo: &Bound,
        hi: &Bound,
    ) -> Result<Reduction> {
        if self.is_empty() {
            return Ok(nodes);
        }
        let changes: Vec<(Arc<[u8]>, Change)> = self
            .changes
            .range(std_bound(lo), std_bound(hi), true)
            .collect();
        let (mut now, mut was) = (Vec::new(), Vec::new());
        for (k, c) in &changes {
            if let Some(leaf) = &c.now {
                now.push((&k[..], leaf.value(0)));
            }
            if let Some(v) = &c.was {
                was.push((&k[..], &v[..]));
            }
        }
        let reducer = &spec.reducer;
        let mut value = nodes.value;
        if !now.is_empty() {
            let added = reducer.reduce(&now).map_err(Error::Reduce)?;
            value = reducer.rereduce(&[&value, &added]).map_err(Error::Reduce)?;
        }
        if !was.is_empty() {
            let replaced = reducer.reduce(&was).map_err(Error::Reduce)?;
            value = reducer.subtract(&value, &replaced).ok_or_else(|| {
                Error::Reduce("a logged tree's reducer cannot take reductions apart".into())
            })?;
        }
        let count = (nodes.count + now.len() as u64).saturating_sub(was.len() as u64);
        Ok(Reduction { count, value })
    }

    /// A walk over the changes in a range, for merging with the nodes' entries.
    pub fn walk(&self, start: &Bound, end: &Bound, dir: Direction) -> OverlayWalk {
        let (lo, hi) = match dir {
            Direction::Forward => (start, end),
            Direction::Backward => (end, start),
        };
        self.changes
            .range(std_bound(lo), std_bound(hi), dir == Direction::Forward)
    }
}

fn std_bound(b: &Bound) -> StdBound<&[u8]> {
    match b {
        Bound::Unbounded => StdBound::Unbounded,
        Bound::Included(k) => StdBound::Included(k),
        Bound::Excluded(k) => StdBound::Excluded(k),
    }
}

/// The changes of a range in walk order, taken one at a time without borrowing the map.
pub(crate) type OverlayWalk = RunWalk<Change>;

/// The changes of one commit to logged trees, as a log record's payload is built.
#[derive(Default)]
pub(crate) struct LogBuf {
    bytes: Vec<u8>,
}

impl LogBuf {
    /// Whether nothing was logged.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Bytes logged.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Forgets what was logged after the first `len` bytes.
    pub fn truncate(&mut self, len: usize) {
        self.bytes.truncate(len);
    }

    /// Gives back the room the buffer kept.
    pub fn shrink(&mut self) {
        self.bytes.shrink_to_fit();
    }

    /// Logs `action` on `tree`.
    pub fn push(&mut self, tree: usize, action: &Action) {
        put_varint(&mut self.bytes, tree as u64);
        match action {
            Action::Delete(k) => {
                self.bytes.push(0);
                put_bytes(&mut self.bytes, k);
            }
            Action::Put(k, v) => {
                self.bytes.push(1);
                put_bytes(&mut self.bytes, k);
                put_bytes(&mut self.bytes, v);
            }
        }
    }

    /// The log record payload that chains these changes after `prev`, the `records`-th of
    /// its chain; empties the buffer.
    pub fn take_record(&mut self, prev: Option<Ptr>, records: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len() + 24);
        match prev {
            None => put_varint(&mut out, 0),
            Some(p) => {
                put_varint(&mut out, p.offset + 1);
                put_varint(&mut out, u64::from(p.len));
            }
        }
        put_varint(&mut out, records);
        out.extend_from_slice(&self.bytes);
        self.bytes.clear();
        out
    }
}

/// A decoded log record.
pub(crate) struct LogRecord {
    /// The record before it in the chain.
    pub prev: Option<Ptr>,
    /// Records in the chain up to this one.
    pub records: u64,
    /// Its changes, in the order made.
    pub changes: Vec<(usize, Action)>,
}

impl LogRecord {
    /// Decodes a log record's payload read from `offset`.
    pub fn decode(payload: &[u8], offset: u64) -> Result<LogRecord> {
        let mut r = Reader::new(payload, offset);
        let prev = match r.varint()? {
            0 => None,
            at => {
                let len = u32::try_from(r.varint()?)
                    .map_err(|_| Error::corrupted(offset, "log record: length"))?;
                Some(Ptr {
                    offset: at - 1,
                    len,
                })
            }
        };
        if prev.is_some_and(|p| p.offset >= offset) {
            return Err(Error::corrupted(offset, "log record: chain points forward"));
        }
        let records = r.varint()?;
        let mut changes = Vec::new();
        while !r.is_empty() {
            let tree = usize::try_from(r.varint()?)
                .map_err(|_| Error::corrupted(offset, "log record: tree"))?;
            let action = match r.u8()? {
                0 => Action::Delete(r.bytes()?.to_vec()),
                1 => Action::Put(r.bytes()?.to_vec(), r.bytes()?.to_vec()),
                _ => return Err(Error::corrupted(offset, "log record: bad change tag")),
            };
            changes.push((tree, action));
        }
        Ok(LogRecord {
            prev,
            records,
            changes,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::SizeReduce;

    fn put(k: &str, v: &str) -> Action {
        Action::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
    }

    #[test]
    fn changes_remember_the_value_in_the_nodes_and_adjust_reductions() {
        let spec = TreeSpec::logged(SizeReduce);
        let mut o = Overlay::default();
        let nodes = |k: &[u8]| Ok((k == b"b").then(|| b"old".to_vec()));
        assert_eq!(o.record(&put("a", "1"), nodes).unwrap(), None);
        assert_eq!(
            o.record(&put("b", "22"), nodes).unwrap(),
            Some(b"old".to_vec())
        );
        assert_eq!(
            o.record(&put("b", "333"), |_| panic!("asked again"))
                .unwrap(),
            Some(b"22".to_vec())
        );
        // Put then removed, never in the nodes: no change at all, but the log names "c",
        // so the nodes must not change under it before the next fold.
        o.record(&put("c", "x"), nodes).unwrap();
        o.record(&Action::Delete(b"c".to_vec()), nodes).unwrap();
        assert!(o.get(b"c").is_none());
        assert_eq!(o.len(), 2);
        assert_eq!(o.bytes(), 2 + 4);
        let shadows = |o: &Overlay, keys: &[&str]| {
            let actions: Vec<Action> = keys.iter().map(|k| put(k, "y")).collect();
            o.shadows(
                (keys[0].as_bytes(), keys[keys.len() - 1].as_bytes()),
                &actions,
            )
        };
        assert!(shadows(&o, &["c"]) && shadows(&o, &["a"]) && shadows(&o, &["bb", "d"]));
        assert!(!shadows(&o, &["ca", "d"]));
        o.record(&Action::Delete(b"e".to_vec()), nodes).unwrap();
        assert!(
            shadows(&o, &["d"]),
            "the span grows to take in every netted key"
        );
        // The nodes hold "b"=old and "z"=9 (sizes 4 and 2).
        let base = Reduction {
            count: 2,
            value: 6u64.to_le_bytes().to_vec(),
        };
        let all = o
            .adjust(&spec, base.clone(), &Bound::Unbounded, &Bound::Unbounded)
            .unwrap();
        assert_eq!(
            (all.count, SizeReduce::decode(&all.value)),
            (3, 6 - 4 + 2 + 4)
        );
        let only_a = o
            .adjust(
                &spec,
                Reduction {
                    count: 0,
                    value: 0u64.to_le_bytes().to_vec(),
                },
                &Bound::Unbounded,
                &Bound::Excluded(b"b".to_vec()),
            )
            .unwrap();
        assert_eq!((only_a.count, SizeReduce::decode(&only_a.value)), (1, 2));
    }

    #[test]
    fn a_folded_slice_leaves_the_overlay_but_its_keys_stay_shadowed_until_relogged() {
        let mut o = Overlay::default();
        for k in ["a", "b", "c", "d", "e"] {
            o.record(&put(k, "vv"), |_| Ok(None)).unwrap();
        }
        o.freeze();
        o.merge_runs();
        let keys = |actions: &[Action]| -> Vec<Vec<u8>> {
            actions.iter().map(|a| a.key().to_vec()).collect()
        };
        let first = o.slice(None, 2);
        assert_eq!(keys(&first.actions), [b"a".to_vec(), b"b".to_vec()]);
        assert!(matches!(&first.actions[0], Action::Put(_, v) if v == b"vv"));
        o.folded(&first);
        let next = o.slice(Some(b"b"), 2);
        assert_eq!(keys(&next.actions), [b"c".to_vec(), b"d".to_vec()]);
        assert_eq!((o.len(), o.bytes()), (3, 3 * 3));
        assert!(o.get(b"a").is_none() && o.get(b"c").is_some());
        // The log still names "a" and "b": nothing may go straight to the nodes under them,
        // nor between them, but past them it may.
        let shadows =
            |o: &Overlay, k: &str| o.shadows((k.as_bytes(), k.as_bytes()), &[put(k, "w")]);
        assert!(shadows(&o, "a") && shadows(&o, "ab") && shadows(&o, "b"));
        assert!(!shadows(&o, "bb"));
        o.folded(&next);
        o.folded(&o.slice(Some(b"d"), 2));
        assert!(o.is_empty() && o.bytes() == 0 && o.memory() == 0);
        assert!(shadows(&o, "e"));
        // Written again without them, the log names none of those keys.
        o.relogged();
        assert!(!shadows(&o, "a") && !shadows(&o, "e"));
    }

    #[test]
    fn walks_go_both_ways_within_bounds() {
        let mut o = Overlay::default();
        for k in ["a", "b", "c", "d"] {
            o.record(&put(k, k), |_| Ok(None)).unwrap();
        }
        let keys = |w: OverlayWalk| {
            w.map(|(k, _)| String::from_utf8(k.to_vec()).unwrap())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            keys(o.walk(
                &Bound::Included(b"b".to_vec()),
                &Bound::Unbounded,
                Direction::Forward
            )),
            ["b", "c", "d"]
        );
        assert_eq!(
            keys(o.walk(
                &Bound::Excluded(b"d".to_vec()),
                &Bound::Included(b"b".to_vec()),
                Direction::Backward
            )),
            ["c", "b"]
        );
    }

    #[test]
    fn log_records_round_trip() {
        let mut buf = LogBuf::default();
        buf.push(0, &put("k", "v"));
        buf.push(3, &Action::Delete(b"gone".to_vec()));
        let prev = Ptr {
            offset: 4096,
            len: 30,
        };
        let payload = buf.take_record(Some(prev), 7);
        assert!(buf.is_empty());
        let rec = LogRecord::decode(&payload, 9000).unwrap();
        assert_eq!((rec.prev, rec.records), (Some(prev), 7));
        assert_eq!(
            rec.changes,
            vec![(0, put("k", "v")), (3, Action::Delete(b"gone".to_vec()))]
        );
        assert!(
            LogRecord::decode(&payload, 100).is_err(),
            "a chain must point back"
        );
        assert!(LogRecord::decode(&payload[..payload.len() - 1], 9000).is_err());
    }
}
