//! JSON that nests deeply, as documents may (CouchDB stores a document nested ten thousand
//! levels deep as readily as a flat one).
//!
//! `serde_json` refuses more than 128 levels by default, and lifting that limit alone lets a
//! deep text overflow the thread's stack: its parser takes about a kilobyte of stack per
//! level. Here the nesting is first measured without recursion, texts deeper than
//! [`MAX_DEPTH`] are refused with a reason that says so, and the rest are parsed on a stack
//! that grows on the heap as needed ([`from_slice`]). Encoding a body ([`write`]), its
//! revision id and dropping it ([`dispose`]) do not recurse on the thread's stack either;
//! other work on a document's value recurses about a hundred bytes a level, which the
//! server's threads have room for at [`MAX_DEPTH`].

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Stack kept free before a recursive step, and the size of each segment added on the heap
/// when less is left.
const RED_ZONE: usize = 64 << 10;
const SEGMENT: usize = 1 << 20;

/// The deepest nesting of arrays and objects accepted in a JSON text.
pub const MAX_DEPTH: usize = 16_384;

/// Why a text could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum DeepError {
    /// Not JSON (or not of the type asked for).
    Invalid,
    /// Valid or not, it nests deeper than [`MAX_DEPTH`].
    TooDeep,
}

impl DeepError {
    /// The reason to give a client, in CouchDB's words where it has them.
    pub fn reason(&self) -> String {
        match self {
            DeepError::Invalid => "invalid UTF-8 JSON".to_string(),
            DeepError::TooDeep => {
                format!("JSON nested more than {MAX_DEPTH} levels deep is not accepted")
            }
        }
    }
}

/// How deeply the arrays and objects of a JSON text nest, counted without recursion (the
/// brackets outside strings; the text need not be valid).
pub fn depth(text: &[u8]) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0usize, false, false);
    for &b in text {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Parses a JSON text of any nesting up to [`MAX_DEPTH`].
pub fn from_slice<T: DeserializeOwned>(text: &[u8]) -> Result<T, DeepError> {
    if depth(text) > MAX_DEPTH {
        return Err(DeepError::TooDeep);
    }
    let mut de = serde_json::Deserializer::from_slice(text);
    de.disable_recursion_limit();
    let value = T::deserialize(serde_stacker::Deserializer::new(&mut de))
        .map_err(|_| DeepError::Invalid)?;
    de.end().map_err(|_| DeepError::Invalid)?;
    Ok(value)
}

/// Runs one step of a recursion over a value, on a new stack segment if this one is nearly
/// used up: recursions that call it at every level never overflow the thread's stack.
pub fn grow<R>(step: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, step)
}

/// Appends `value` as compact JSON, exactly as `serde_json` writes it, at any depth.
pub fn write(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Array(items) => grow(|| {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(out, item);
            }
            out.push(b']');
        }),
        Value::Object(members) => grow(|| {
            out.push(b'{');
            for (i, (key, item)) in members.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key).expect("writing to a Vec cannot fail");
                out.push(b':');
                write(out, item);
            }
            out.push(b'}');
        }),
        scalar => serde_json::to_writer(&mut *out, scalar).expect("writing to a Vec cannot fail"),
    }
}

/// Drops a value of any depth without recursion (dropping it plainly recurses per level).
pub fn dispose(value: Value) {
    let value = match value {
        // A scalar, or a container holding only scalars, drops without deep recursion.
        Value::Array(items) if items.iter().all(is_flat) => return drop(items),
        Value::Object(members) if members.values().all(is_flat) => return drop(members),
        Value::Array(_) | Value::Object(_) => value,
        _ => return,
    };
    let mut pending = vec![value];
    while let Some(value) = pending.pop() {
        match value {
            Value::Array(items) => pending.extend(items),
            Value::Object(members) => pending.extend(members.into_iter().map(|(_, v)| v)),
            _ => {}
        }
    }
}

/// Whether a value holds no array or object.
fn is_flat(value: &Value) -> bool {
    !matches!(value, Value::Array(_) | Value::Object(_))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(levels: usize) -> String {
        "{\"a\":".repeat(levels - 1) + "[1]" + &"}".repeat(levels - 1)
    }

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(depth(b"1"), 0);
        assert_eq!(depth(br#"{"a":[1,{"b":"[[[{{"}],"c":{}}"#), 3);
        assert_eq!(depth(br#"["\"[[", "\\", [[]]]"#), 3);
        assert_eq!(depth(nested(500).as_bytes()), 500);
    }

    #[test]
    fn values_write_as_serde_json_writes_them() {
        let text = r#"{"a":[1,2.50,-3e7,"x\"y\u0001",null,true,{}],"":{"b":[[]],"é":"\ud83d\ude00"},"n":123456789012345678901234567890}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        let mut out = Vec::new();
        write(&mut out, &value);
        assert_eq!(out, serde_json::to_vec(&value).unwrap());
    }

    #[test]
    fn deep_texts_parse_on_a_small_stack_and_deeper_ones_are_refused() {
        let text = nested(MAX_DEPTH);
        // Parsing it plainly would take some sixteen megabytes of stack, and encoding or
        // dropping it plainly one or two.
        let parsed = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(move || {
                from_slice::<Value>(text.as_bytes()).map(|v| {
                    let mut out = Vec::new();
                    write(&mut out, &v);
                    dispose(v);
                    out == text.as_bytes()
                })
            })
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(parsed, Ok(true));
        assert_eq!(
            from_slice::<Value>(nested(MAX_DEPTH + 1).as_bytes()),
            Err(DeepError::TooDeep)
        );
        assert_eq!(from_slice::<Value>(b"{\"a\":"), Err(DeepError::Invalid));
        assert_eq!(from_slice::<Value>(b"{} x"), Err(DeepError::Invalid));
    }
}
