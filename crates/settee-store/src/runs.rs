//! A sorted map of byte keys that snapshots share: a small persistent map of the changes
//! since the last [`RunMap::freeze`], over frozen sorted runs.
//!
//! A persistent B-tree shared with snapshots copies a whole node path for the first change
//! to each of its leaves after every snapshot, so a writer that takes a snapshot per commit
//! of a few keys spread over a large map copies and later drops most of the map again and
//! again. Here a commit freezes its changes into a run, a sorted array, and runs of similar
//! size merge, as a binary counter carries: each entry is copied about once for every time
//! the map doubles, and a snapshot is a handful of shared runs. The merging may wait until
//! the commit is answered ([`RunMap::merge_runs`]). A run's Bloom filter lets a lookup pass
//! over the runs that cannot hold its key.
//!
//! A removed key that an older run holds stays as a tombstone (`None`) that hides it, until
//! a merge into the oldest run drops it.

use std::cmp::Ordering;
use std::hash::BuildHasher;
use std::ops::Bound;
use std::sync::{Arc, LazyLock};

use imbl::OrdMap;

/// A key of the map.
pub(crate) type Key = Arc<[u8]>;

/// Bits a run's filter keeps per entry, and how many it sets per key: about one lookup in
/// sixty of a key a run lacks searches it anyway.
const BLOOM_BITS_PER_KEY: usize = 10;
const BLOOM_PROBES: u64 = 3;

/// A frozen run: its entries sorted by key, each key once; a `None` value hides the key in
/// older runs.
struct Run<V> {
    entries: Vec<(Key, Option<V>)>,
    /// Each entry's key as its [`prefix`], side by side: searches and merges compare these
    /// first and read a key itself only on a tie, so that they pass over the entries
    /// without reaching into each key's own allocation.
    prefixes: Vec<u64>,
    /// Each entry's key hashed, kept for the filters of the runs it is merged into.
    hashes: Vec<u64>,
    bloom: Bloom,
}

/// A key's first eight bytes as a big-endian number, zeros past the end of a shorter key.
/// Keys whose prefixes differ are ordered as their prefixes are; keys with the same prefix
/// must be compared whole.
fn prefix(key: &[u8]) -> u64 {
    let mut bytes = [0; 8];
    let n = key.len().min(8);
    bytes[..n].copy_from_slice(&key[..n]);
    u64::from_be_bytes(bytes)
}

/// The [`prefix`] of each entry's key.
fn prefixes_of<V>(entries: &[(Key, V)]) -> Vec<u64> {
    entries.iter().map(|(k, _)| prefix(k)).collect()
}

/// Orders two keys, given their prefixes.
fn cmp_keys(a: (u64, &[u8]), b: (u64, &[u8])) -> Ordering {
    a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1))
}

/// A Bloom filter over key hashes; one without bits may hold anything.
#[derive(Default)]
struct Bloom {
    words: Vec<u64>,
}

impl Bloom {
    fn new(hashes: &[u64]) -> Bloom {
        let bits = (hashes.len() * BLOOM_BITS_PER_KEY)
            .next_power_of_two()
            .max(64);
        let mut bloom = Bloom {
            words: vec![0; bits / 64],
        };
        for &h in hashes {
            for bit in bloom.probes(h) {
                bloom.words[bit / 64] |= 1 << (bit % 64);
            }
        }
        bloom
    }

    fn probes(&self, hash: u64) -> impl Iterator<Item = usize> {
        let mask = (self.words.len() * 64 - 1) as u64;
        let step = hash.rotate_left(32) | 1;
        (0..BLOOM_PROBES).map(move |i| (hash.wrapping_add(i.wrapping_mul(step)) & mask) as usize)
    }

    fn may_hold(&self, hash: u64) -> bool {
        self.words.is_empty()
            || self
                .probes(hash)
                .all(|bit| self.words[bit / 64] & (1 << (bit % 64)) != 0)
    }
}

/// The hashing the filters use, seeded once a process: a filter needs a well-mixed hash
/// (its probes are drawn from both halves), not one that resists chosen keys, and every key
/// looked up or frozen is hashed, so its speed counts.
static HASHING: LazyLock<foldhash::quality::RandomState> = LazyLock::new(Default::default);

fn hash(key: &[u8]) -> u64 {
    HASHING.hash_one(key)
}

impl<V: Clone> Run<V> {
    /// A run of `entries` (sorted, each key once) with their keys' `hashes`.
    fn new(entries: Vec<(Key, Option<V>)>, hashes: Vec<u64>) -> Run<V> {
        let prefixes = prefixes_of(&entries);
        Run::with_prefixes(entries, prefixes, hashes)
    }

    /// A run of `entries` whose keys' prefixes and hashes are known already (a merge
    /// carries them over from the runs it merges).
    fn with_prefixes(
        entries: Vec<(Key, Option<V>)>,
        prefixes: Vec<u64>,
        hashes: Vec<u64>,
    ) -> Run<V> {
        let bloom = Bloom::new(&hashes);
        Run {
            entries,
            prefixes,
            hashes,
            bloom,
        }
    }

    /// A run without a filter, for a walk over the changes not yet frozen.
    fn unfiltered(entries: Vec<(Key, Option<V>)>) -> Run<V> {
        Run {
            prefixes: prefixes_of(&entries),
            entries,
            hashes: Vec::new(),
            bloom: Bloom::default(),
        }
    }

    /// The key of entry `i` with its prefix.
    fn key_at(&self, i: usize) -> (u64, &[u8]) {
        (self.prefixes[i], &self.entries[i].0)
    }

    fn find(&self, key: &[u8], hash: u64) -> Option<&Option<V>> {
        if !self.bloom.may_hold(hash) {
            return None;
        }
        // The entries with the key's prefix, then the key among them.
        let p = prefix(key);
        let start = self.prefixes.partition_point(|&q| q < p);
        let ties = self.prefixes[start..].partition_point(|&q| q == p);
        let i = self.entries[start..start + ties]
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()?;
        Some(&self.entries[start + i].1)
    }

    /// The indexes of the entries between `lo` and `hi`.
    fn span(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> (usize, usize) {
        let start = self.entries.partition_point(|(k, _)| !from(k, lo));
        let end = self.entries.partition_point(|(k, _)| up_to(k, hi));
        (start, end.max(start))
    }

    /// `older` and `newer` as one run, `newer`'s entry winning for a key in both; with
    /// `oldest` (nothing older remains to hide), tombstones go. Entries are cloned as they
    /// are taken: the runs merged are still shared with the snapshots that hold them.
    fn merge(older: &Run<V>, newer: &Run<V>, oldest: bool) -> Run<V> {
        use Ordering::{Equal, Greater, Less};
        let (old, new) = (older.entries.len(), newer.entries.len());
        let len = old + new;
        let mut entries = Vec::with_capacity(len);
        let (mut prefixes, mut hashes) = (Vec::with_capacity(len), Vec::with_capacity(len));
        let (mut i, mut j) = (0, 0);
        while i < old || j < new {
            let order = if i == old {
                Greater
            } else if j == new {
                Less
            } else {
                cmp_keys(older.key_at(i), newer.key_at(j))
            };
            let (run, at) = match order {
                Less => (older, i),
                Equal | Greater => (newer, j),
            };
            i += usize::from(order != Greater);
            j += usize::from(order != Less);
            let entry = &run.entries[at];
            if !oldest || entry.1.is_some() {
                entries.push(entry.clone());
                prefixes.push(run.prefixes[at]);
                hashes.push(run.hashes[at]);
            }
        }
        Run::with_prefixes(entries, prefixes, hashes)
    }
}

/// A sorted map from byte keys to `V` whose clones share everything: cheap to clone for a
/// snapshot after every commit however large it grows (see the module's comment).
pub(crate) struct RunMap<V> {
    /// Changes since the last freeze.
    head: OrdMap<Key, Option<V>>,
    /// Frozen runs, oldest first; once merged, each less than half the size of the one
    /// before.
    runs: Vec<Arc<Run<V>>>,
    /// Keys with a value.
    len: usize,
}

impl<V> Default for RunMap<V> {
    fn default() -> RunMap<V> {
        RunMap {
            head: OrdMap::new(),
            runs: Vec::new(),
            len: 0,
        }
    }
}

impl<V: Clone> Clone for RunMap<V> {
    fn clone(&self) -> RunMap<V> {
        RunMap {
            head: self.head.clone(),
            runs: self.runs.clone(),
            len: self.len,
        }
    }
}

impl<V: Clone> RunMap<V> {
    /// How many keys have a value.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no key has a value.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The value of `key`.
    pub fn get(&self, key: &[u8]) -> Option<&V> {
        if let Some(v) = self.head.get(key) {
            return v.as_ref();
        }
        if self.runs.is_empty() {
            return None;
        }
        let h = hash(key);
        self.runs
            .iter()
            .rev()
            .find_map(|run| run.find(key, h))
            .and_then(Option::as_ref)
    }

    /// Gives `key` the value `f` makes of its current one, or removes it if `f` makes
    /// none; returns the value it had. The key is searched for once.
    pub fn update<E>(
        &mut self,
        key: &[u8],
        f: impl FnOnce(Option<&V>) -> Result<Option<V>, E>,
    ) -> Result<Option<V>, E> {
        let old = self.get(key).cloned();
        let new = f(old.as_ref())?;
        self.len = self.len + usize::from(new.is_some()) - usize::from(old.is_some());
        match (&old, &new) {
            // Nothing to hide or show (a tombstone the head may hold stays).
            (None, None) => {}
            (Some(_), None) if self.runs.is_empty() => {
                self.head.remove(key);
            }
            // A removal leaves a tombstone over the older runs.
            _ => {
                self.head.insert(Arc::from(key), new);
            }
        }
        Ok(old)
    }

    /// Gives `key`, which has no value, the value `value` without searching for it (the
    /// caller knows it has none): what [`RunMap::update`] does then.
    pub fn insert_absent(&mut self, key: &[u8], value: V) {
        debug_assert!(self.get(key).is_none(), "inserting over a value");
        self.len += 1;
        self.head.insert(Arc::from(key), Some(value));
    }

    /// Removes `key`, which has a value, without searching for it (the caller has just read
    /// it): what [`RunMap::update`] does when it makes no value of one.
    pub fn hide(&mut self, key: &[u8]) {
        debug_assert!(self.get(key).is_some(), "hiding a key without a value");
        self.len -= 1;
        if self.runs.is_empty() {
            self.head.remove(key);
        } else {
            self.head.insert(Arc::from(key), None);
        }
    }

    /// Freezes the changes since the last freeze into a run, and merges runs of similar
    /// size: both steps at once, for the tests.
    #[cfg(test)]
    pub fn seal(&mut self) {
        self.freeze();
        self.merge_runs();
    }

    /// Freezes the changes since the last freeze into a run: call before taking a clone
    /// that will be kept (a commit's snapshot), which then shares every change. The runs
    /// are merged apart ([`RunMap::merge_runs`]), so that a commit can publish its
    /// snapshot and answer first.
    pub fn freeze(&mut self) {
        if self.head.is_empty() {
            return;
        }
        let oldest = self.runs.is_empty();
        let entries: Vec<(Key, Option<V>)> = std::mem::take(&mut self.head)
            .into_iter()
            .filter(|(_, v)| !oldest || v.is_some())
            .collect();
        let hashes = entries.iter().map(|(k, _)| hash(k)).collect();
        self.runs.push(Arc::new(Run::new(entries, hashes)));
    }

    /// Merges the newest runs while the one before is no more than twice the size of the
    /// last, as a binary counter carries, so that the runs stay few and each entry is
    /// copied about once for every time the map doubles. The map reads the same before and
    /// after. Whether any runs were merged.
    pub fn merge_runs(&mut self) -> bool {
        let mut merged = false;
        while let [.., before, last] = &self.runs[..] {
            if before.entries.len() > 2 * last.entries.len() {
                break;
            }
            let newer = self.runs.pop().expect("two runs");
            let older = self.runs.pop().expect("two runs");
            let oldest = self.runs.is_empty();
            self.runs.push(Arc::new(Run::merge(&older, &newer, oldest)));
            merged = true;
        }
        merged
    }

    /// The entries between `lo` and `hi` with a value, in key order either way, cloned as
    /// they are taken (the walk holds the map's runs, not a borrow).
    pub fn range(&self, lo: Bound<&[u8]>, hi: Bound<&[u8]>, forward: bool) -> RunWalk<V> {
        let mut sources = Vec::with_capacity(self.runs.len() + 1);
        if !self.head.is_empty() {
            // Filtered rather than ranged: the head is small, and bounds that cross are
            // an empty walk rather than a panic.
            let entries = self
                .head
                .iter()
                .filter(|(k, _)| within(k, lo, hi))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            sources.push(Source::new(Arc::new(Run::unfiltered(entries)), lo, hi));
        }
        sources.extend(
            self.runs
                .iter()
                .rev()
                .map(|r| Source::new(r.clone(), lo, hi)),
        );
        sources.retain(|s| s.start < s.end);
        RunWalk { sources, forward }
    }

    /// Every key with a value, in order.
    pub fn keys(&self) -> impl Iterator<Item = Key> {
        self.range(Bound::Unbounded, Bound::Unbounded, true)
            .map(|(k, _)| k)
    }
}

fn within(key: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    from(key, lo) && up_to(key, hi)
}

/// Whether `key` is at or past the lower bound `lo`.
fn from(key: &[u8], lo: Bound<&[u8]>) -> bool {
    match lo {
        Bound::Included(l) => key >= l,
        Bound::Excluded(l) => key > l,
        Bound::Unbounded => true,
    }
}

/// Whether `key` is at or before the upper bound `hi`.
fn up_to(key: &[u8], hi: Bound<&[u8]>) -> bool {
    match hi {
        Bound::Included(h) => key <= h,
        Bound::Excluded(h) => key < h,
        Bound::Unbounded => true,
    }
}

/// What is left of one run in a walk: the entries from `start` up to `end`.
struct Source<V> {
    run: Arc<Run<V>>,
    start: usize,
    end: usize,
}

impl<V: Clone> Source<V> {
    fn new(run: Arc<Run<V>>, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Source<V> {
        let (start, end) = run.span(lo, hi);
        Source { run, start, end }
    }

    /// The index of the entry next in the walk's direction.
    fn next_index(&self, forward: bool) -> usize {
        if forward {
            self.start
        } else {
            self.end - 1
        }
    }

    /// The key next in the walk's direction, with its prefix.
    fn next_key(&self, forward: bool) -> (u64, &[u8]) {
        self.run.key_at(self.next_index(forward))
    }

    /// Passes the next entry.
    fn advance(&mut self, forward: bool) {
        if forward {
            self.start += 1;
        } else {
            self.end -= 1;
        }
    }
}

/// A walk over a [`RunMap`]'s entries in a range: the runs merged, the newest entry of a key
/// winning, tombstones passed over.
pub(crate) struct RunWalk<V> {
    /// Newest first.
    sources: Vec<Source<V>>,
    forward: bool,
}

impl<V: Clone> RunWalk<V> {
    /// The source whose next key comes first in the walk; of sources with the same key,
    /// the newest.
    fn first(&self) -> Option<usize> {
        let forward = self.forward;
        let first = if forward {
            Ordering::Less
        } else {
            Ordering::Greater
        };
        (0..self.sources.len()).reduce(|best, i| {
            let (k, bk) = (
                self.sources[i].next_key(forward),
                self.sources[best].next_key(forward),
            );
            if cmp_keys(k, bk) == first {
                i
            } else {
                best
            }
        })
    }
}

impl<V: Clone> Iterator for RunWalk<V> {
    type Item = (Key, V);

    fn next(&mut self) -> Option<(Key, V)> {
        let forward = self.forward;
        loop {
            let first = &self.sources[self.first()?];
            let at = first.next_index(forward);
            let p = first.run.prefixes[at];
            let (key, value) = first.run.entries[at].clone();
            for s in &mut self.sources {
                if s.next_key(forward) == (p, &key[..]) {
                    s.advance(forward);
                }
            }
            self.sources.retain(|s| s.start < s.end);
            if let Some(value) = value {
                return Some((key, value));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::btree_map::Entry;
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn insert(map: &mut RunMap<u32>, key: &[u8], value: u32) -> Option<u32> {
        map.update(key, |_| Ok::<_, ()>(Some(value))).unwrap()
    }

    fn remove(map: &mut RunMap<u32>, key: &[u8]) -> Option<u32> {
        map.update(key, |_| Ok::<_, ()>(None)).unwrap()
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8, u32),
        Remove(u8),
        /// Remove a key known to have a value, without searching ([`RunMap::hide`]).
        Hide(u8),
        /// Insert a key known to have no value, without searching
        /// ([`RunMap::insert_absent`]).
        InsertAbsent(u8, u32),
        Seal,
        /// Freeze the head without merging ([`RunMap::freeze`]).
        Freeze,
        /// Merge the runs apart ([`RunMap::merge_runs`]).
        MergeRuns,
        /// Keep a clone, which must not change as the map goes on.
        Keep,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u8..48, any::<u32>()).prop_map(|(k, v)| Op::Insert(k, v)),
            3 => (0u8..48).prop_map(Op::Remove),
            2 => (0u8..48).prop_map(Op::Hide),
            2 => (0u8..48, any::<u32>()).prop_map(|(k, v)| Op::InsertAbsent(k, v)),
            2 => Just(Op::Seal),
            2 => Just(Op::Freeze),
            1 => Just(Op::MergeRuns),
            1 => Just(Op::Keep),
        ]
    }

    fn key(k: u8) -> Vec<u8> {
        // Keys of different lengths, some the prefix of others, some alike in their first
        // eight bytes and different after.
        [b'a' + k % 7]
            .into_iter()
            .chain(vec![b'k'; usize::from(k % 5) * 3])
            .chain([k])
            .collect()
    }

    /// A range's two bounds, each a kind (unbounded, included, excluded) and a key.
    type RangeOf = ((u8, u8), (u8, u8));

    fn bound(b: &(u8, u8)) -> Bound<Vec<u8>> {
        match b.0 % 3 {
            0 => Bound::Unbounded,
            1 => Bound::Included(key(b.1)),
            _ => Bound::Excluded(key(b.1)),
        }
    }

    fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
        match b {
            Bound::Included(k) => Bound::Included(k),
            Bound::Excluded(k) => Bound::Excluded(k),
            Bound::Unbounded => Bound::Unbounded,
        }
    }

    /// Checks every lookup, the length and walks over `ranges` both ways.
    fn check(
        map: &RunMap<u32>,
        model: &BTreeMap<Vec<u8>, u32>,
        ranges: &[RangeOf],
    ) -> Result<(), TestCaseError> {
        prop_assert_eq!(map.len(), model.len());
        for k in 0..48 {
            prop_assert_eq!(map.get(&key(k)), model.get(&key(k)));
        }
        for (lo, hi) in ranges {
            let (lo, hi) = (bound(lo), bound(hi));
            let want: Vec<(Vec<u8>, u32)> = if range_is_empty(&lo, &hi) {
                Vec::new()
            } else {
                model
                    .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
                    .map(|(k, v)| (k.clone(), *v))
                    .collect()
            };
            let got: Vec<(Vec<u8>, u32)> = map
                .range(as_ref(&lo), as_ref(&hi), true)
                .map(|(k, v)| (k.to_vec(), v))
                .collect();
            prop_assert_eq!(&got, &want);
            let mut back: Vec<(Vec<u8>, u32)> = map
                .range(as_ref(&lo), as_ref(&hi), false)
                .map(|(k, v)| (k.to_vec(), v))
                .collect();
            back.reverse();
            prop_assert_eq!(&back, &want);
        }
        Ok(())
    }

    /// Bounds that `BTreeMap::range` refuses (it panics on them); the walk gives nothing.
    fn range_is_empty(lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
        match (lo, hi) {
            (Bound::Included(l) | Bound::Excluded(l), Bound::Included(h) | Bound::Excluded(h)) => {
                l > h || (l == h && !matches!((lo, hi), (Bound::Included(_), Bound::Included(_))))
            }
            _ => false,
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// The map reads as a `BTreeMap` given the same changes, whatever the seals
        /// between them, and a clone kept reads as the model did when it was taken.
        #[test]
        fn reads_as_a_sorted_map(
            ops in prop::collection::vec(op(), 1..300),
            ranges in prop::collection::vec(((0u8..6, 0u8..48), (0u8..6, 0u8..48)), 4),
        ) {
            let (mut map, mut model) = (RunMap::default(), BTreeMap::new());
            let mut kept = Vec::new();
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        prop_assert_eq!(insert(&mut map, &key(k), v), model.insert(key(k), v));
                    }
                    Op::Remove(k) => {
                        prop_assert_eq!(remove(&mut map, &key(k)), model.remove(&key(k)))
                    }
                    Op::Hide(k) => {
                        if model.remove(&key(k)).is_some() {
                            map.hide(&key(k));
                        }
                    }
                    Op::InsertAbsent(k, v) => {
                        if let Entry::Vacant(absent) = model.entry(key(k)) {
                            absent.insert(v);
                            map.insert_absent(&key(k), v);
                        }
                    }
                    Op::Seal => map.seal(),
                    Op::Freeze => map.freeze(),
                    Op::MergeRuns => {
                        map.merge_runs();
                    }
                    Op::Keep => kept.push((map.clone(), model.clone())),
                }
            }
            check(&map, &model, &ranges)?;
            for (map, model) in &kept {
                check(map, model, &ranges)?;
            }
        }
    }

    proptest! {
        /// Prefixes order keys as the keys order themselves, short keys, zero bytes and
        /// keys alike in their first eight bytes included.
        #[test]
        fn prefixes_order_keys_as_bytes_do(
            a in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..12),
            b in prop::collection::vec(prop_oneof![Just(0u8), Just(1u8), any::<u8>()], 0..12),
            shared in 0usize..10,
        ) {
            // Often the same first bytes, so that the tie is reached.
            let b: Vec<u8> = a.iter().take(shared).chain(&b).copied().collect();
            prop_assert_eq!(cmp_keys((prefix(&a), &a), (prefix(&b), &b)), a.cmp(&b));
            if prefix(&a) != prefix(&b) {
                prop_assert_eq!(prefix(&a).cmp(&prefix(&b)), a.cmp(&b));
            }
        }
    }

    /// A run's filter sends few lookups of keys it lacks to the run: about one in sixty
    /// by its sizing, far under one in twenty however the process's seed falls.
    #[test]
    fn a_filter_passes_over_most_keys_its_run_lacks() {
        let held: Vec<(Key, Option<u32>)> = (0u32..1000)
            .map(|i| (Key::from(format!("{i:032x}").as_bytes()), Some(i)))
            .collect();
        let hashes = held.iter().map(|(k, _)| hash(k)).collect();
        let run = Run::new(held, hashes);
        for i in 0u32..1000 {
            let k = format!("{i:032x}");
            assert_eq!(run.find(k.as_bytes(), hash(k.as_bytes())), Some(&Some(i)));
        }
        let searched = (1000u32..11_000)
            .filter(|i| run.bloom.may_hold(hash(format!("{i:032x}").as_bytes())))
            .count();
        assert!(searched < 500, "{searched} of 10,000 absent keys searched");
    }

    /// Runs frozen at each commit but merged only now and then (a commit answers before it
    /// merges, and a busy writer may commit again first) still end as few.
    #[test]
    fn runs_frozen_apart_from_their_merging_stay_few() {
        let mut map = RunMap::default();
        for i in 0u32..4096 {
            insert(&mut map, &i.to_be_bytes(), i);
            if i % 16 == 15 {
                map.freeze();
            }
            if i % 64 == 63 {
                map.merge_runs();
            }
        }
        assert!(map.runs.len() <= 9, "{} runs", map.runs.len());
        assert_eq!(map.len(), 4096);
        assert!(map
            .keys()
            .map(|k| k.to_vec())
            .eq((0u32..4096).map(|i| i.to_be_bytes().to_vec())));
    }

    #[test]
    fn runs_stay_few_and_tombstones_leave_with_the_oldest_run() {
        let mut map = RunMap::default();
        for i in 0u32..4096 {
            insert(&mut map, &i.to_be_bytes(), i);
            if i % 16 == 15 {
                map.seal();
            }
        }
        assert!(map.runs.len() <= 9, "{} runs", map.runs.len());
        for i in 0u32..4096 {
            remove(&mut map, &i.to_be_bytes());
            if i % 16 == 15 {
                map.seal();
            }
        }
        assert!(map.is_empty());
        assert!(
            map.runs.iter().map(|r| r.entries.len()).sum::<usize>() < 4096,
            "tombstones merged into the oldest run are gone"
        );
    }
}
