//! CouchDB's collation of JSON values, the order of view keys:
//! `null < false < true < numbers < strings < arrays < objects`; numbers by value, strings by
//! the Unicode Collation Algorithm with the root collation (as CouchDB's ICU collator),
//! arrays element by element (a prefix first), objects member by member, comparing keys and
//! then values (fewer members first when one is a prefix of the other).
//!
//! [`raw`] is CouchDB's `"collation": "raw"` option: strings by code point (byte order).

use std::cmp::Ordering;
use std::sync::LazyLock;

use icu_collator::options::CollatorOptions;
use icu_collator::{Collator, CollatorBorrowed};
use serde_json::{Number, Value};

/// The collation library and its version (`/_node/{node}/_versions`); a test checks it
/// against `Cargo.lock`.
pub const COLLATION_LIBRARY: (&str, &str) = ("icu4x", "2.4.0");

static ROOT: LazyLock<CollatorBorrowed<'static>> = LazyLock::new(|| {
    Collator::try_new(Default::default(), CollatorOptions::default())
        .expect("the root collation is compiled in")
});

/// Compares two strings as CouchDB's default collation does.
pub fn strings(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() && a == b {
        return Ordering::Equal;
    }
    ROOT.compare(a, b)
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(false) => 1,
        Value::Bool(true) => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::Array(_) => 5,
        Value::Object(_) => 6,
    }
}

/// A number's value for ordering (numbers beyond f64 keep their sign and magnitude order).
/// `-0.0` is `0`, as in CouchDB and in encoded view keys.
fn number(n: &Number) -> f64 {
    let x = n
        .as_f64()
        .unwrap_or_else(|| n.to_string().parse().unwrap_or(0.0));
    if x == 0.0 {
        0.0
    } else {
        x
    }
}

/// Compares two JSON values with CouchDB's default collation.
pub fn compare(a: &Value, b: &Value) -> Ordering {
    compare_with(a, b, strings, rank)
}

/// Compares two JSON values with CouchDB's `raw` collation: Erlang term order, where
/// `numbers < false < null < true < objects < arrays < strings` and strings compare by bytes.
pub fn raw(a: &Value, b: &Value) -> Ordering {
    compare_with(a, b, |x, y| x.as_bytes().cmp(y.as_bytes()), raw_rank)
}

/// Type order under raw collation (Erlang's: numbers, atoms alphabetically, tuples, lists,
/// binaries).
fn raw_rank(v: &Value) -> u8 {
    match v {
        Value::Number(_) => 0,
        Value::Bool(false) => 1,
        Value::Null => 2,
        Value::Bool(true) => 3,
        Value::Object(_) => 4,
        Value::Array(_) => 5,
        Value::String(_) => 6,
    }
}

type Rank = fn(&Value) -> u8;

fn compare_with(a: &Value, b: &Value, text: fn(&str, &str) -> Ordering, rank: Rank) -> Ordering {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => number(x).total_cmp(&number(y)),
        (Value::String(x), Value::String(y)) => text(x, y),
        (Value::Array(x), Value::Array(y)) => {
            for (p, q) in x.iter().zip(y) {
                let o = compare_with(p, q, text, rank);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Object(x), Value::Object(y)) => {
            for ((kp, vp), (kq, vq)) in x.iter().zip(y) {
                let o = text(kp, kq).then_with(|| compare_with(vp, vq, text, rank));
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collation_library_version_is_the_one_built() {
        let lock = include_str!("../../../Cargo.lock");
        let entry = lock
            .split("[[package]]")
            .find(|p| p.contains("name = \"icu_collator\"\n"))
            .expect("icu_collator in Cargo.lock");
        assert!(
            entry.contains(&format!("version = \"{}\"", COLLATION_LIBRARY.1)),
            "{entry}"
        );
    }
    use serde_json::json;

    /// The ordering example from CouchDB's documentation on view collation.
    #[test]
    fn couchdb_documented_order() {
        let ordered = json!([
            null, false, true,
            1, 2, 3.0, 4,
            "a", "A", "aa", "b", "B", "ba", "bb",
            ["a"], ["b"], ["b", "c"], ["b", "c", "a"], ["b", "d"], ["b", "d", "e"],
            {"a": 1}, {"a": 2}, {"b": 1}, {"b": 2}, {"b": 2, "a": 1}, {"b": 2, "c": 2}
        ]);
        let items = ordered.as_array().unwrap();
        for (i, a) in items.iter().enumerate() {
            for (j, b) in items.iter().enumerate() {
                assert_eq!(compare(a, b), i.cmp(&j), "{a} vs {b}");
            }
        }
    }

    #[test]
    fn numbers_compare_by_value_and_strings_by_uca() {
        assert_eq!(compare(&json!(1), &json!(1.0)), Ordering::Equal);
        assert_eq!(compare(&json!(-0.0), &json!(0)), Ordering::Equal);
        assert_eq!(
            compare(&json!(-0.0), &json!(-1e-300)),
            Ordering::Greater,
            "only zero loses its sign"
        );
        assert_eq!(compare(&json!(-5), &json!(2.5)), Ordering::Less);
        assert_eq!(
            compare(
                &json!(123456789012345678901234567890u128 as f64),
                &json!(1e30)
            ),
            Ordering::Less
        );
        assert_eq!(
            strings("résumé", "resume"),
            Ordering::Greater,
            "accents after base letters"
        );
        assert_eq!(strings("resume", "résumé"), Ordering::Less);
        assert_eq!(strings("a", "B"), Ordering::Less, "case is a later level");
        assert_eq!(
            raw(&json!("a"), &json!("B")),
            Ordering::Greater,
            "raw collation is by code point"
        );
        assert_eq!(
            raw(&json!(null), &json!(1)),
            Ordering::Greater,
            "raw collation puts numbers first"
        );
        assert_eq!(
            raw(&json!("a"), &json!(["a"])),
            Ordering::Greater,
            "and strings last"
        );
    }
}
