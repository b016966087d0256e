//! Revision identifiers: `<pos>-<id>`, where `pos` is the depth of the revision in its
//! document's tree and `id` is usually a 16-byte MD5 rendered as 32 lowercase hex digits.

use std::cmp::Ordering;
use std::fmt;

use crate::Error;

/// The part of a revision after the dash.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RevId {
    /// A 16-byte hash, written as 32 lowercase hex digits.
    Hash([u8; 16]),
    /// Any other text, kept verbatim (CouchDB accepts e.g. `1-abc` from replication).
    Text(Box<str>),
}

impl RevId {
    /// The bytes CouchDB compares and hashes: the raw hash, or the text's UTF-8.
    pub fn bytes(&self) -> &[u8] {
        match self {
            RevId::Hash(h) => h,
            RevId::Text(t) => t.as_bytes(),
        }
    }

    /// Parses the text after the dash: 32 hex digits become a hash, anything else is kept.
    pub fn parse(s: &str) -> Result<RevId, Error> {
        if s.len() != 32 {
            return Ok(RevId::Text(s.into()));
        }
        let mut out = [0u8; 16];
        for (i, pair) in s.as_bytes().chunks(2).enumerate() {
            out[i] = (hex_digit(pair[0])? << 4) | hex_digit(pair[1])?;
        }
        Ok(RevId::Hash(out))
    }
}

fn hex_digit(c: u8) -> Result<u8, Error> {
    match c {
        b'0'..=b'9' => Ok(c - b'0'),
        b'a'..=b'f' => Ok(c - b'a' + 10),
        b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => Err(Error::BadRev),
    }
}

impl Ord for RevId {
    fn cmp(&self, other: &RevId) -> Ordering {
        self.bytes().cmp(other.bytes())
    }
}

impl PartialOrd for RevId {
    fn partial_cmp(&self, other: &RevId) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for RevId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RevId::Hash(h) => {
                f.write_str(std::str::from_utf8(&hex(h)).expect("hex digits are ASCII"))
            }
            RevId::Text(t) => f.write_str(t),
        }
    }
}

/// A hash id in lowercase hex, as CouchDB writes revision ids.
fn hex(h: &[u8; 16]) -> [u8; 32] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 32];
    for (i, b) in h.iter().enumerate() {
        out[2 * i] = HEX[usize::from(b >> 4)];
        out[2 * i + 1] = HEX[usize::from(b & 15)];
    }
    out
}

/// A full revision: depth and id. Orders by depth, then id, as CouchDB ranks leaves.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Rev {
    /// Depth in the document's revision tree; 1 for a document's first revision.
    pub pos: u64,
    /// The id at that depth.
    pub id: RevId,
}

impl Rev {
    /// Parses `"<pos>-<id>"`, refusing what CouchDB refuses with "Invalid rev format".
    pub fn parse(s: &str) -> Result<Rev, Error> {
        let (pos, id) = s.split_once('-').ok_or(Error::BadRev)?;
        if pos.is_empty() || !pos.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Error::BadRev);
        }
        let pos = pos.parse().map_err(|_| Error::BadRev)?;
        Ok(Rev {
            pos,
            id: RevId::parse(id)?,
        })
    }

    /// Appends the revision's text, as `Display` writes it, without the formatting
    /// machinery: every document read writes its revision into an `ETag`.
    pub fn push_to(&self, out: &mut String) {
        self.write_parts(|part| {
            out.push_str(std::str::from_utf8(part).expect("digits, hex or the id's own text"))
        });
    }

    /// [`Rev::push_to`] for a byte buffer: a `_bulk_docs` answer writes a revision a row.
    pub fn push_bytes_to(&self, out: &mut Vec<u8>) {
        self.write_parts(|part| out.extend_from_slice(part));
    }

    /// Hands the revision's text to `put` in pieces: the position, `-`, the id.
    fn write_parts(&self, mut put: impl FnMut(&[u8])) {
        let mut digits = [0u8; 20];
        let (mut n, mut at) = (self.pos, digits.len());
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        put(&digits[at..]);
        put(b"-");
        match &self.id {
            RevId::Hash(h) => put(&hex(h)),
            RevId::Text(t) => put(t.as_bytes()),
        }
    }
}

impl fmt::Display for Rev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.pos, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_to_writes_what_display_writes() {
        for text in [
            "1-967a00dff5e02add41819138abb3284d",
            "0-0",
            "10-abc",
            "18446744073709551615-00ff00ff00ff00ff00ff00ff00ff00ff",
            "7-not-hex",
        ] {
            let rev = Rev::parse(text).unwrap();
            let mut out = String::from("\"");
            rev.push_to(&mut out);
            assert_eq!(out, format!("\"{rev}"));
            assert_eq!(&out[1..], text);
            let mut bytes = b"\"".to_vec();
            rev.push_bytes_to(&mut bytes);
            assert_eq!(bytes, out.as_bytes());
        }
    }

    #[test]
    fn parses_and_prints_hash_revs() {
        let s = "3-967a00dff5e02add41819138abb3284d";
        let rev = Rev::parse(s).unwrap();
        assert_eq!(rev.pos, 3);
        assert!(matches!(rev.id, RevId::Hash(_)));
        assert_eq!(rev.to_string(), s);
        assert_eq!(
            Rev::parse("3-967A00DFF5E02ADD41819138ABB3284D").unwrap(),
            rev,
            "hex is case-insensitive"
        );
    }

    #[test]
    fn keeps_other_ids_verbatim() {
        assert_eq!(Rev::parse("1-abc").unwrap().to_string(), "1-abc");
        assert_eq!(Rev::parse("2-").unwrap().id, RevId::Text("".into()));
    }

    #[test]
    fn refuses_bad_formats() {
        for bad in [
            "",
            "abc",
            "-1",
            "x-abc",
            "1",
            " 1-a",
            "1a-b",
            "3-zz7a00dff5e02add41819138abb3284d",
        ] {
            assert_eq!(Rev::parse(bad), Err(Error::BadRev), "{bad:?}");
        }
    }

    #[test]
    fn orders_by_depth_then_id() {
        let a = Rev::parse("2-aa").unwrap();
        let b = Rev::parse("2-ab").unwrap();
        let c = Rev::parse("10-00").unwrap();
        assert!(a < b && b < c);
    }
}
