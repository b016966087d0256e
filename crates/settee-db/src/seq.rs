//! Database sequences: one counter per shard, shown to clients as an opaque string
//! `"<sum>-<base64url of the per-shard counters>"`, as CouchDB 2+ does. A `since` taken from
//! any response resumes every shard exactly where that response left it.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;

use crate::codec::{put_varint, Reader};
use crate::error::{Error, Result};

/// A position in every shard's sequence.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct SeqVector(pub Vec<u64>);

impl SeqVector {
    /// The start of a database with `q` shards.
    pub fn zero(q: usize) -> SeqVector {
        SeqVector(vec![0; q])
    }

    /// The sum of the shard counters (the number before the dash).
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// Whether every shard has reached `want` (an index at `self` holds every change of a
    /// database at `want`).
    pub fn covers(&self, want: &SeqVector) -> bool {
        self.0.len() == want.0.len() && self.0.iter().zip(&want.0).all(|(h, w)| h >= w)
    }

    /// The opaque string clients see.
    pub fn encode(&self) -> String {
        let mut raw = Vec::with_capacity(self.0.len() * 3 + 1);
        put_varint(&mut raw, self.0.len() as u64);
        for &s in &self.0 {
            put_varint(&mut raw, s);
        }
        format!("{}-{}", self.total(), URL_SAFE_NO_PAD.encode(raw))
    }

    /// Reads a sequence this server issued for a database with `q` shards; `"0"` is the start.
    pub fn parse(s: &str, q: usize) -> Result<SeqVector> {
        if s == "0" {
            return Ok(SeqVector::zero(q));
        }
        let (total, opaque) = s.split_once('-').ok_or(Error::BadSequence)?;
        let raw = URL_SAFE_NO_PAD
            .decode(opaque)
            .map_err(|_| Error::BadSequence)?;
        let mut r = Reader::new(&raw, "sequence");
        let bad = |_| Error::BadSequence;
        if r.varint().map_err(bad)? != q as u64 {
            return Err(Error::BadSequence);
        }
        let seqs = (0..q)
            .map(|_| r.varint().map_err(bad))
            .collect::<Result<Vec<u64>>>()?;
        let v = SeqVector(seqs);
        if !r.is_empty() || total.parse::<u64>().ok() != Some(v.total()) {
            return Err(Error::BadSequence);
        }
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_foreign_sequences() {
        let v = SeqVector(vec![3, 0, 300]);
        let s = v.encode();
        assert!(s.starts_with("303-"));
        assert_eq!(SeqVector::parse(&s, 3).unwrap(), v);
        assert_eq!(SeqVector::parse("0", 2).unwrap(), SeqVector(vec![0, 0]));
        for bad in ["", "5", "x-y", "303-!!", &s.replacen("303", "304", 1)] {
            assert!(SeqVector::parse(bad, 3).is_err(), "{bad}");
        }
        assert!(SeqVector::parse(&s, 2).is_err(), "another shard count");
    }
}
