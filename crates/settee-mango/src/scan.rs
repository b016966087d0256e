//! The stretch of a JSON index a query reads: stored row keys are the encoded array of the
//! indexed values followed by the document id, so the selector's range on each field, taken
//! in the index's order, bounds the rows as byte strings (a superset of the matches; the
//! selector filters the rest).

use serde_json::Value;
use settee_json::viewkey::{self, Collation};
use settee_store::Bound;

use crate::query::Bookmark;
use crate::selector::Range;

/// Above every byte that can follow a complete value in an encoded key.
const AFTER: u8 = 0xFF;

/// The encoded array tag that starts every key.
fn array_start() -> Vec<u8> {
    let mut empty = viewkey::encoded(&Value::Array(Vec::new()), Collation::Unicode);
    empty.truncate(1);
    empty
}

/// The low and high bounds (in ascending order) of the rows whose key fields fall in
/// `ranges`, one per indexed field in order (`None`: unconstrained).
pub fn bounds(ranges: &[Option<Range>]) -> (Bound, Bound) {
    (low(ranges), high(ranges))
}

fn low(ranges: &[Option<Range>]) -> Bound {
    let mut out = array_start();
    for r in ranges {
        match r.as_ref().and_then(|r| r.low.as_ref()) {
            Some((v, inclusive)) => {
                viewkey::encode(v, Collation::Unicode, &mut out);
                if !inclusive {
                    out.push(AFTER);
                    break;
                }
            }
            None => break,
        }
    }
    Bound::Included(out)
}

fn high(ranges: &[Option<Range>]) -> Bound {
    let mut out = array_start();
    for r in ranges {
        match r.as_ref().and_then(|r| r.high.as_ref()) {
            Some((v, inclusive)) => {
                viewkey::encode(v, Collation::Unicode, &mut out);
                if !inclusive {
                    return Bound::Excluded(out);
                }
            }
            None => break,
        }
    }
    out.push(AFTER);
    Bound::Excluded(out)
}

/// The bounds in walk order (`start` first), narrowed to the rows after `after` (a
/// bookmark's row) in that order.
pub fn walk(low: Bound, high: Bound, descending: bool, after: Option<&Bookmark>) -> (Bound, Bound) {
    let at = after.and_then(|b| {
        let mut row = viewkey::encoded_json(&b.key.as_ref()?.to_string(), Collation::Unicode)?;
        viewkey::push_doc_id(&mut row, &b.id, 0);
        Some(row)
    });
    match (descending, at) {
        (false, None) => (low, high),
        (true, None) => (high, low),
        (false, Some(mut row)) => {
            row.push(AFTER);
            (later(low, Bound::Included(row)), high)
        }
        (true, Some(row)) => (earlier(high, Bound::Excluded(row)), low),
    }
}

fn bytes(b: &Bound) -> Option<&[u8]> {
    match b {
        Bound::Included(v) | Bound::Excluded(v) => Some(v),
        Bound::Unbounded => None,
    }
}

/// The higher of two low bounds.
fn later(a: Bound, b: Bound) -> Bound {
    match (bytes(&a), bytes(&b)) {
        (Some(x), Some(y)) if x >= y => a,
        _ => b,
    }
}

/// The lower of two high bounds.
fn earlier(a: Bound, b: Bound) -> Bound {
    match (bytes(&a), bytes(&b)) {
        (Some(x), Some(y)) if x <= y => a,
        _ => b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn key(v: Value, id: &str) -> Vec<u8> {
        let mut k = viewkey::encoded(&v, Collation::Unicode);
        viewkey::push_doc_id(&mut k, id, 0);
        k
    }

    fn inside(k: &[u8], (lo, hi): &(Bound, Bound)) -> bool {
        let above = match lo {
            Bound::Included(b) => k >= b.as_slice(),
            Bound::Excluded(b) => k > b.as_slice(),
            Bound::Unbounded => true,
        };
        let below = match hi {
            Bound::Included(b) => k <= b.as_slice(),
            Bound::Excluded(b) => k < b.as_slice(),
            Bound::Unbounded => true,
        };
        above && below
    }

    fn range(low: Option<(Value, bool)>, high: Option<(Value, bool)>) -> Option<Range> {
        Some(Range { low, high })
    }

    #[test]
    fn bounds_hold_every_row_in_the_ranges_and_leave_out_others() {
        // a == 5, 2 < b <= 4
        let b = bounds(&[
            range(Some((json!(5), true)), Some((json!(5), true))),
            range(Some((json!(2), false)), Some((json!(4), true))),
        ]);
        assert!(inside(&key(json!([5, 3]), "x"), &b));
        assert!(inside(&key(json!([5, 4]), "x"), &b));
        assert!(inside(&key(json!([5, 4, "more"]), "x"), &b));
        assert!(!inside(&key(json!([5, 2]), "x"), &b));
        assert!(!inside(&key(json!([5, 4.5]), "x"), &b));
        assert!(!inside(&key(json!([6, 0]), "x"), &b));
        // "a" < x < "b", anything after.
        let b = bounds(&[
            range(Some((json!("a"), false)), Some((json!("b"), false))),
            None,
        ]);
        assert!(inside(&key(json!(["aa", null]), "x"), &b));
        assert!(!inside(&key(json!(["a", {}]), "x"), &b));
        assert!(!inside(&key(json!(["b", null]), "x"), &b));
        let all = bounds(&[None]);
        assert!(inside(&key(json!([null]), ""), &all));
        assert!(inside(&key(json!([{"z": [1]}]), "zz"), &all));
    }

    #[test]
    fn bookmarks_move_the_walk_past_their_row() {
        let (lo, hi) = bounds(&[None]);
        let at = Bookmark {
            key: Some(json!([3])),
            id: "m".into(),
        };
        let fwd = walk(lo.clone(), hi.clone(), false, Some(&at));
        assert!(!inside(&key(json!([3]), "m"), &fwd));
        assert!(inside(&key(json!([3]), "n"), &fwd));
        assert!(!inside(&key(json!([2]), "z"), &fwd));
        let (start, end) = walk(lo, hi, true, Some(&at));
        let back = (end, start);
        assert!(!inside(&key(json!([3]), "m"), &back));
        assert!(inside(&key(json!([3]), "l"), &back));
        assert!(!inside(&key(json!([4]), "a"), &back));
    }
}
