//! Property tests: every answer of the B+tree equals the answer of a sorted in-memory model,
//! across random batched modifications, reopenings, and queries of every kind.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use proptest::prelude::*;
use settee_store::{
    Action, Bound, Direction, FoldLimits, MemBackend, NodeCache, RangeOptions, Reducer, Store,
    StoreOptions, TreeSpec,
};

/// Sums the first byte of every value; together with the count this catches any reduction
/// that covers the wrong entries.
struct FirstByteSum;

impl Reducer for FirstByteSum {
    fn reduce(&self, entries: &[(&[u8], &[u8])]) -> Result<Vec<u8>, String> {
        let s: u64 = entries
            .iter()
            .map(|(_, v)| u64::from(v.first().copied().unwrap_or(0)))
            .sum();
        Ok(s.to_le_bytes().to_vec())
    }
    fn rereduce(&self, reds: &[&[u8]]) -> Result<Vec<u8>, String> {
        let s: u64 = reds
            .iter()
            .map(|r| u64::from_le_bytes((*r).try_into().unwrap()))
            .sum();
        Ok(s.to_le_bytes().to_vec())
    }
    fn subtract(&self, whole: &[u8], part: &[u8]) -> Option<Vec<u8>> {
        let (w, p) = (
            u64::from_le_bytes(whole.try_into().ok()?),
            u64::from_le_bytes(part.try_into().ok()?),
        );
        Some(
            w.checked_sub(p)
                .expect("a part is never more than the whole")
                .to_le_bytes()
                .to_vec(),
        )
    }
}

fn sum_of(entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<u8> {
    let s: u64 = entries
        .iter()
        .map(|(_, v)| u64::from(v.first().copied().unwrap_or(0)))
        .sum();
    s.to_le_bytes().to_vec()
}

type Cmp = fn(&[u8], &[u8]) -> Ordering;

fn bytewise(a: &[u8], b: &[u8]) -> Ordering {
    a.cmp(b)
}

/// How a tree under test orders its keys: the store's own bytewise order, which has search
/// paths of its own, or a comparator it is handed.
#[derive(Clone, Copy)]
enum Order {
    Native,
    By(Cmp),
    /// Bytewise, with changes logged in front of the nodes and folded in now and then.
    Logged,
}

impl Order {
    fn cmp(self) -> Cmp {
        match self {
            Order::Native | Order::Logged => bytewise,
            Order::By(c) => c,
        }
    }

    fn spec(self) -> TreeSpec {
        match self {
            Order::Native => TreeSpec::bytewise(FirstByteSum),
            Order::By(c) => TreeSpec::new(c, FirstByteSum),
            Order::Logged => TreeSpec::logged(FirstByteSum),
        }
    }
}

/// A non-bytewise order: by length first, then reversed bytes.
fn odd_order(a: &[u8], b: &[u8]) -> Ordering {
    a.len().cmp(&b.len()).then_with(|| b.cmp(a))
}

#[derive(Debug, Clone)]
enum Op {
    Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    Reopen,
}

#[derive(Debug, Clone)]
struct Query {
    lo: (u8, Vec<u8>),
    hi: (u8, Vec<u8>),
    backward: bool,
    skip: u64,
    limit: Option<u64>,
}

fn key() -> BoxedStrategy<Vec<u8>> {
    key_in(b"abcdef", 1..4)
}

/// Keys of up to 12 bytes over two letters: many share their first eight bytes and many are
/// prefixes of others, which a bytewise search must decide by more than key prefixes.
fn long_key() -> BoxedStrategy<Vec<u8>> {
    key_in(b"ab", 1..13)
}

fn key_in(alphabet: &'static [u8], len: std::ops::Range<usize>) -> BoxedStrategy<Vec<u8>> {
    prop::collection::vec(prop::sample::select(alphabet.to_vec()), len).boxed()
}

fn op() -> impl Strategy<Value = Op> {
    op_with(key())
}

fn op_with(key: BoxedStrategy<Vec<u8>>) -> impl Strategy<Value = Op> {
    let action = (
        key,
        prop::option::weighted(0.75, prop::collection::vec(any::<u8>(), 0..24)),
    );
    prop_oneof![
        8 => prop::collection::vec(action, 1..120).prop_map(Op::Batch),
        1 => Just(Op::Reopen),
    ]
}

/// Batches that mostly append: batch `i` puts most of its keys after every key of the batches
/// before it (prefixed with `i + 1`), the rest anywhere before them (prefixed with 0), so
/// leaves fill at the right edge and overflow, as sequence numbers and rising ids make them.
fn appending_ops() -> impl Strategy<Value = Vec<Op>> {
    let action = (
        key(),
        prop::option::weighted(0.9, prop::collection::vec(any::<u8>(), 1..24)),
    );
    let batch = prop::collection::vec((prop::bool::weighted(0.85), action), 1..60);
    prop::collection::vec(
        prop_oneof![8 => batch.prop_map(Some), 1 => Just(None)],
        1..16,
    )
    .prop_map(|batches| {
        batches
            .into_iter()
            .enumerate()
            .map(|(i, batch)| match batch {
                None => Op::Reopen,
                Some(actions) => Op::Batch(
                    actions
                        .into_iter()
                        .map(|(append, (k, v))| {
                            let mut key = vec![if append { i as u8 + 1 } else { 0 }];
                            key.extend(k);
                            (key, v)
                        })
                        .collect(),
                ),
            })
            .collect()
    })
}

/// Queries over the key space of [`appending_ops`].
fn prefixed_query() -> impl Strategy<Value = Query> {
    let bound = || {
        (
            0u8..3,
            (0u8..18, key()).prop_map(|(p, k)| [vec![p], k].concat()),
        )
    };
    (
        bound(),
        bound(),
        any::<bool>(),
        prop_oneof![Just(0u64), 0u64..80],
        prop::option::of(0u64..60),
    )
        .prop_map(|(lo, hi, backward, skip, limit)| Query {
            lo,
            hi,
            backward,
            skip,
            limit,
        })
}

fn query() -> impl Strategy<Value = Query> {
    query_with(key())
}

fn query_with(key: BoxedStrategy<Vec<u8>>) -> impl Strategy<Value = Query> {
    (
        (0u8..3, key.clone()),
        (0u8..3, key),
        any::<bool>(),
        prop_oneof![Just(0u64), 0u64..40],
        prop::option::of(0u64..30),
    )
        .prop_map(|(lo, hi, backward, skip, limit)| Query {
            lo,
            hi,
            backward,
            skip,
            limit,
        })
}

fn bound((kind, k): &(u8, Vec<u8>)) -> Bound {
    match kind {
        0 => Bound::Unbounded,
        1 => Bound::Included(k.clone()),
        _ => Bound::Excluded(k.clone()),
    }
}

/// Whether `k` is above the lower bound `b` (or below the upper bound, with `upper`).
fn admits(cmp: Cmp, b: &Bound, k: &[u8], upper: bool) -> bool {
    let (bk, incl) = match b {
        Bound::Unbounded => return true,
        Bound::Included(x) => (x, true),
        Bound::Excluded(x) => (x, false),
    };
    match (cmp(k, bk), upper) {
        (Ordering::Equal, _) => incl,
        (Ordering::Greater, false) | (Ordering::Less, true) => true,
        _ => false,
    }
}

struct Model {
    cmp: Cmp,
    map: BTreeMap<Vec<u8>, Vec<u8>>,
}

impl Model {
    fn sorted(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<_> = self
            .map
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        v.sort_by(|a, b| (self.cmp)(&a.0, &b.0));
        v
    }

    fn in_range(&self, lo: &Bound, hi: &Bound) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.sorted()
            .into_iter()
            .filter(|(k, _)| admits(self.cmp, lo, k, false) && admits(self.cmp, hi, k, true))
            .collect()
    }
}

fn options(order: Order, node_size: usize, cache: &NodeCache) -> StoreOptions {
    StoreOptions {
        trees: vec![order.spec(), order.spec()],
        cache: cache.clone(),
        node_size,
        // Small enough that runs fold now and then, and replay logs of several records.
        fold: FoldLimits {
            changes: 150,
            bytes: 4096,
            records: 4,
            grow: 4,
            // Folds go in slices of a few keys, reopened and read in between.
            slice: 16,
        },
        ..StoreOptions::default()
    }
}

fn check_queries(
    store: &Store,
    model: &Model,
    queries: &[Query],
    logged: bool,
) -> Result<(), TestCaseError> {
    let snap = store.snapshot();
    let all = model.sorted();
    prop_assert_eq!(snap.count(0).unwrap(), all.len() as u64);
    prop_assert_eq!(snap.total(0).unwrap().value, sum_of(&all));
    // Many lookups at once: the queries' bound keys (present or not) and every other key
    // stored, in an order that is not the tree's.
    let mut keys: Vec<Vec<u8>> = queries
        .iter()
        .flat_map(|q| [q.lo.1.clone(), q.hi.1.clone()])
        .collect();
    keys.extend(all.iter().step_by(2).rev().map(|(k, _)| k.clone()));
    let got: Vec<Option<Vec<u8>>> = snap
        .get_many(0, &keys)
        .unwrap()
        .into_iter()
        .map(|e| e.map(|e| e.value().to_vec()))
        .collect();
    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.map.get(k).cloned()).collect();
    prop_assert_eq!(got, want);
    for q in queries {
        let (lo, hi) = (bound(&q.lo), bound(&q.hi));
        let mut expected = model.in_range(&lo, &hi);
        let dir = if q.backward {
            Direction::Backward
        } else {
            Direction::Forward
        };
        if q.backward {
            expected.reverse();
        }
        let (start, end) = if q.backward {
            (hi.clone(), lo.clone())
        } else {
            (lo.clone(), hi.clone())
        };
        let opts = RangeOptions {
            start: start.clone(),
            end: end.clone(),
            direction: dir,
            skip: q.skip,
            limit: q.limit,
        };
        let got: Vec<(Vec<u8>, Vec<u8>)> = snap
            .range(0, opts.clone())
            .unwrap()
            .map(|e| e.map(|e| (e.key().to_vec(), e.value().to_vec())))
            .collect::<Result<_, _>>()
            .unwrap();
        let want: Vec<_> = expected
            .iter()
            .skip(q.skip as usize)
            .take(q.limit.map_or(usize::MAX, |l| l as usize))
            .cloned()
            .collect();
        prop_assert_eq!(&got, &want, "range {:?}", q);

        let in_range = model.in_range(&lo, &hi);
        let red = snap.reduce(0, &lo, &hi).unwrap();
        prop_assert_eq!(red.count, in_range.len() as u64, "reduce count {:?}", q);
        prop_assert_eq!(red.value, sum_of(&in_range), "reduce value {:?}", q);

        if logged {
            // Grouped reductions are not offered for logged trees while they hold changes.
            continue;
        }
        // Grouped by first byte (contiguous in both orders used here).
        let mut groups: Vec<(Vec<u8>, u64, Vec<u8>)> = Vec::new();
        let by_first = |a: &[u8], b: &[u8]| a.len() == b.len() && a[0] == b[0];
        let group_by: &dyn settee_store::GroupBy =
            if std::ptr::fn_addr_eq(model.cmp, bytewise as Cmp) {
                &|a: &[u8], b: &[u8]| a[0] == b[0]
            } else {
                &by_first
            };
        snap.fold_groups(0, &opts, group_by, &mut |g| {
            groups.push((g.first.key().to_vec(), g.reduction.count, g.reduction.value));
            Ok(true)
        })
        .unwrap();
        let mut want_groups: Vec<(Vec<u8>, u64, Vec<u8>)> = Vec::new();
        let mut members: Vec<Vec<(Vec<u8>, Vec<u8>)>> = Vec::new();
        for (k, v) in &expected {
            match want_groups.last() {
                Some((first, _, _)) if group_by.same_group(first, k) => {
                    members.last_mut().unwrap().push((k.clone(), v.clone()))
                }
                _ => {
                    want_groups.push((k.clone(), 0, Vec::new()));
                    members.push(vec![(k.clone(), v.clone())]);
                }
            }
        }
        for (g, m) in want_groups.iter_mut().zip(&members) {
            g.1 = m.len() as u64;
            g.2 = sum_of(m);
        }
        prop_assert_eq!(groups, want_groups, "groups {:?}", q);
    }
    // Point lookups of every bound's key.
    for k in queries.iter().flat_map(|q| [&q.lo.1, &q.hi.1]) {
        let got = snap.get(0, k).unwrap().map(|e| e.value().to_vec());
        prop_assert_eq!(got, model.map.get(k).cloned());
    }
    Ok(())
}

fn run(
    order: Order,
    node_size: usize,
    cache_bytes: u64,
    ops: Vec<Op>,
    queries: Vec<Query>,
) -> Result<(), TestCaseError> {
    let cache = NodeCache::new(cache_bytes);
    let backend = MemBackend::new();
    let path = Path::new("model.settee");
    let open = |backend: &MemBackend| {
        let b: Arc<dyn settee_store::Backend> = Arc::new(backend.clone());
        Store::open_backend(b, path, options(order, node_size, &cache))
    };
    assert!(
        matches!(open(&backend), Err(settee_store::Error::NotAStore { .. })),
        "an empty file is not a store"
    );
    let mut store = create_mem(&backend, order, node_size, &cache);
    let mut model = Model {
        cmp: order.cmp(),
        map: BTreeMap::new(),
    };
    for op in ops {
        match op {
            Op::Reopen => {
                drop(store);
                store = open(&backend).unwrap();
            }
            Op::Batch(batch) => {
                let actions: Vec<Action> = batch
                    .iter()
                    .map(|(k, v)| match v {
                        Some(v) => Action::Put(k.clone(), v.clone()),
                        None => Action::Delete(k.clone()),
                    })
                    .collect();
                let mut want_old = Vec::new();
                for (k, v) in &batch {
                    want_old.push(match v {
                        Some(v) => model.map.insert(k.clone(), v.clone()),
                        None => model.map.remove(k),
                    });
                }
                let old = store
                    .update(settee_store::Durability::Durable, move |txn| {
                        txn.modify(0, &actions)
                    })
                    .unwrap();
                prop_assert_eq!(old, want_old);
            }
        }
        check_queries(&store, &model, &queries, matches!(order, Order::Logged))?;
    }
    Ok(())
}

/// A new store on an in-memory backend.
fn create_mem(backend: &MemBackend, order: Order, node_size: usize, cache: &NodeCache) -> Store {
    let b: Arc<dyn settee_store::Backend> = Arc::new(backend.clone());
    Store::create_backend(
        b,
        Path::new("model.settee"),
        options(order, node_size, cache),
    )
    .unwrap()
}

/// Keys with their new values (none: removed), in the order they change.
type Changes = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// Changes as actions of the test's tree.
fn actions_of(changes: &Changes) -> Vec<Action> {
    changes
        .iter()
        .map(|(k, v)| match v {
            Some(v) => Action::Put(k.clone(), v.clone()),
            None => Action::Delete(k.clone()),
        })
        .collect()
}

/// The writer's many lookups at once, inside an update that has changes of its own (held
/// for a plain tree, logged for a logged one), against one lookup after another and the
/// model: committed batches first, then the update's own changes, then the probes.
fn writer_lookups(
    order: Order,
    committed: Vec<Changes>,
    pending: Changes,
    probes: Vec<Vec<u8>>,
) -> Result<(), TestCaseError> {
    let cache = NodeCache::new(1 << 20);
    let store = create_mem(&MemBackend::new(), order, 96, &cache);
    let mut model = BTreeMap::new();
    for batch in committed {
        let actions = actions_of(&batch);
        store
            .update(settee_store::Durability::Durable, move |txn| {
                txn.apply(0, &actions)?;
                Ok::<_, settee_store::Error>(())
            })
            .unwrap();
        for (k, v) in batch {
            match v {
                Some(v) => model.insert(k, v),
                None => model.remove(&k),
            };
        }
    }
    for (k, v) in &pending {
        match v {
            Some(v) => model.insert(k.clone(), v.clone()),
            None => model.remove(k),
        };
    }
    let (actions, keys) = (actions_of(&pending), probes.clone());
    let value = |e: Option<settee_store::Entry>| e.map(|e| e.value().to_vec());
    let (many, singles) = store
        .update(settee_store::Durability::Durable, move |txn| {
            txn.apply(0, &actions)?;
            let many: Vec<_> = txn.get_many(0, &keys)?.into_iter().map(value).collect();
            let singles = keys
                .iter()
                .map(|k| txn.get(0, k).map(value))
                .collect::<settee_store::Result<Vec<_>>>()?;
            Ok::<_, settee_store::Error>((many, singles))
        })
        .unwrap();
    let want: Vec<Option<Vec<u8>>> = probes.iter().map(|k| model.get(k).cloned()).collect();
    prop_assert_eq!(&many, &want);
    prop_assert_eq!(&singles, &want);
    Ok(())
}

/// Keys read within an update and then changed in it (a document update reads the document
/// first): the changes remember the values read instead of searching the log's changes, and
/// must still give back the values they replace and leave the tree as the model does, its
/// reductions included, and so again once reopened from its log.
fn read_then_changed(
    committed: Vec<Changes>,
    pending: Changes,
    extra: Vec<Vec<u8>>,
    queries: Vec<Query>,
) -> Result<(), TestCaseError> {
    let cache = NodeCache::new(1 << 20);
    let backend = MemBackend::new();
    let store = create_mem(&backend, Order::Logged, 96, &cache);
    let mut model = Model {
        cmp: Order::Logged.cmp(),
        map: BTreeMap::new(),
    };
    for (i, batch) in committed.into_iter().chain([pending]).enumerate() {
        let want_old: Vec<Option<Vec<u8>>> = batch
            .iter()
            .map(|(k, v)| match v {
                Some(v) => model.map.insert(k.clone(), v.clone()),
                None => model.map.remove(k),
            })
            .collect();
        // Every other batch asks for the values its changes replace.
        let modify = i % 2 == 1;
        // Each batch reads its own keys and some others, then changes its keys.
        let reads: Vec<Vec<u8>> = batch
            .iter()
            .map(|(k, _)| k.clone())
            .chain(extra.clone())
            .collect();
        let actions = actions_of(&batch);
        let old = store
            .update(settee_store::Durability::Durable, move |txn| {
                txn.get_many(0, &reads)?;
                for k in reads.iter().step_by(3) {
                    txn.get(0, k)?;
                }
                if modify {
                    txn.modify(0, &actions)
                } else {
                    txn.apply(0, &actions).map(|()| Vec::new())
                }
            })
            .unwrap();
        if modify {
            prop_assert_eq!(old, want_old);
        }
        check_queries(&store, &model, &queries, true)?;
    }
    drop(store);
    let b: Arc<dyn settee_store::Backend> = Arc::new(backend.clone());
    let store = Store::open_backend(
        b,
        Path::new("model.settee"),
        options(Order::Logged, 96, &cache),
    )
    .unwrap();
    check_queries(&store, &model, &queries, true)
}

fn changes() -> impl Strategy<Value = Changes> {
    let change = (
        key(),
        prop::option::weighted(0.8, prop::collection::vec(any::<u8>(), 0..24)),
    );
    prop::collection::vec(change, 0..80)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn a_plain_writers_many_lookups_match_model(committed in prop::collection::vec(changes(), 0..6), pending in changes(), probes in prop::collection::vec(key(), 0..60)) {
        writer_lookups(Order::Native, committed, pending, probes)?;
    }

    #[test]
    fn a_logged_writer_changes_keys_it_read_as_the_model_does(committed in prop::collection::vec(changes(), 0..6), pending in changes(), extra in prop::collection::vec(key(), 0..20), queries in prop::collection::vec(query(), 1..6)) {
        read_then_changed(committed, pending, extra, queries)?;
    }

    #[test]
    fn a_logged_writers_many_lookups_match_model(committed in prop::collection::vec(changes(), 0..6), pending in changes(), probes in prop::collection::vec(key(), 0..60)) {
        writer_lookups(Order::Logged, committed, pending, probes)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    #[test]
    fn bytewise_tree_matches_model(ops in prop::collection::vec(op(), 1..14), queries in prop::collection::vec(query(), 1..10)) {
        run(Order::Native, 96, 1 << 20, ops, queries)?;
    }

    #[test]
    fn long_keys_tree_matches_model(ops in prop::collection::vec(op_with(long_key()), 1..10), queries in prop::collection::vec(query_with(long_key()), 1..8)) {
        run(Order::Native, 96, 4096, ops, queries)?;
    }

    #[test]
    fn bytewise_comparator_tree_matches_model(ops in prop::collection::vec(op(), 1..8), queries in prop::collection::vec(query(), 1..6)) {
        run(Order::By(bytewise), 96, 1 << 20, ops, queries)?;
    }

    #[test]
    fn custom_order_tree_matches_model(ops in prop::collection::vec(op(), 1..10), queries in prop::collection::vec(query(), 1..8)) {
        run(Order::By(odd_order), 64, 1 << 20, ops, queries)?;
    }

    #[test]
    fn appending_tree_matches_model(ops in appending_ops(), queries in prop::collection::vec(prefixed_query(), 1..8)) {
        run(Order::Native, 128, 1 << 20, ops, queries)?;
    }

    #[test]
    fn logged_tree_matches_model(ops in prop::collection::vec(op(), 1..24), queries in prop::collection::vec(query(), 1..10)) {
        run(Order::Logged, 96, 1 << 20, ops, queries)?;
    }

    #[test]
    fn logged_appending_tree_matches_model(ops in appending_ops(), queries in prop::collection::vec(prefixed_query(), 1..8)) {
        run(Order::Logged, 128, 1 << 20, ops, queries)?;
    }

    #[test]
    fn tiny_cache_matches_model(ops in prop::collection::vec(op(), 1..8), queries in prop::collection::vec(query(), 1..6)) {
        run(Order::Native, 128, 2048, ops, queries)?;
    }
}
