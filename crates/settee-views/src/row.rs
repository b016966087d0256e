//! A view row as stored: the tree key is the collation-encoded key followed by the document
//! id; the value holds the key's JSON text (sort keys cannot be turned back into text) and
//! the emitted value's JSON text.

use settee_store::format::{put_varint, Reader};

use crate::error::{Error, Result};

/// Stored value of a row: `varint(len(key)) key value`.
pub fn encode_value(key_json: &str, value_json: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(key_json.len() + value_json.len() + 2);
    put_varint(&mut out, key_json.len() as u64);
    out.extend_from_slice(key_json.as_bytes());
    out.extend_from_slice(value_json.as_bytes());
    out
}

/// The key and value JSON texts of a stored row value.
pub fn split_value(stored: &[u8]) -> Result<(&str, &str)> {
    let mut r = Reader::new(stored, 0);
    let n = r.varint().map_err(|_| Error::Corrupted("row value"))? as usize;
    let rest = &stored[r.pos()..];
    if rest.len() < n {
        return Err(Error::Corrupted("row value"));
    }
    let (k, v) = rest.split_at(n);
    let k = std::str::from_utf8(k).map_err(|_| Error::Corrupted("row value"))?;
    let v = std::str::from_utf8(v).map_err(|_| Error::Corrupted("row value"))?;
    Ok((k, v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_split_back() {
        let v = encode_value("[\"a\",1]", "{\"x\":null}");
        assert_eq!(split_value(&v).unwrap(), ("[\"a\",1]", "{\"x\":null}"));
        assert!(split_value(&[200]).is_err());
        assert!(split_value(&[5, b'a']).is_err());
    }
}
