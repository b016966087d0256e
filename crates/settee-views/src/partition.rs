//! Partitioned views: every row key of a partitioned design document starts with its
//! document's partition (the partition's exact bytes, encoded as a string under raw
//! collation, so it is self-delimiting), then the key and the document id as in any view.
//! A partition's rows are then one contiguous range, in key order, and their reductions come
//! from the tree as for a whole view. Queries to such a view name one partition.

use serde_json::Value;
use settee_json::viewkey::{self, Collation};
use settee_store::{Bound, RangeOptions};

/// Above every byte that can follow a partition prefix (key tags are lower).
const PAST: u8 = 0xFF;

/// The bytes every row key of `partition` starts with.
pub fn prefix(partition: &str) -> Vec<u8> {
    viewkey::encoded(&Value::String(partition.to_string()), Collation::Raw)
}

/// A stored row key without its partition prefix.
pub(crate) fn strip(row_key: &[u8]) -> Option<&[u8]> {
    viewkey::value_len(row_key, Collation::Raw).map(|n| &row_key[n..])
}

/// The tree range from `start` to `end` in walk order (`start` is the high end when
/// `descending`), within `partition`'s rows when one is named.
pub(crate) fn range(
    start: Bound,
    end: Bound,
    descending: bool,
    partition: Option<&str>,
) -> RangeOptions {
    match partition {
        Some(p) => {
            let prefix = prefix(p);
            let (start, end) = (
                scoped(start, &prefix, descending),
                scoped(end, &prefix, !descending),
            );
            RangeOptions::between(start, end, descending)
        }
        None => RangeOptions::between(start, end, descending),
    }
}

/// A bound on row keys within one partition: `bound` on the keys after `prefix`, where an
/// unbounded side becomes that end of the partition (`high` for the end past its last row).
fn scoped(bound: Bound, prefix: &[u8], high: bool) -> Bound {
    let with = |b: Vec<u8>| [prefix, &b].concat();
    match bound {
        Bound::Unbounded if high => Bound::Included(with(vec![PAST])),
        Bound::Unbounded => Bound::Included(prefix.to_vec()),
        Bound::Included(b) => Bound::Included(with(b)),
        Bound::Excluded(b) => Bound::Excluded(with(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_partition_is_one_range_and_strips_back() {
        let key = viewkey::encoded(&json!(["a", 1]), Collation::Unicode);
        let row = |p: &str| [prefix(p), key.clone()].concat();
        assert_eq!(strip(&row("p1")), Some(&key[..]));
        // Every row of p1 is inside p1's bounds, no row of a partition it prefixes is.
        let (lo, hi) = (
            scoped(Bound::Unbounded, &prefix("p1"), false),
            scoped(Bound::Unbounded, &prefix("p1"), true),
        );
        let inside = |k: &[u8]| match (&lo, &hi) {
            (Bound::Included(l), Bound::Included(h)) => l.as_slice() <= k && k <= h.as_slice(),
            _ => unreachable!(),
        };
        assert!(inside(&row("p1")));
        for other in ["p", "p10", "p2", "P1", ""] {
            assert!(!inside(&row(other)), "{other}");
        }
    }
}
