//! An exact phrase of two terms, matched by walking both terms' postings side by side.
//!
//! The general phrase scorer finds the documents holding both terms by seeking one term's
//! postings to the other's next document, and reads a document's positions by summing the
//! term frequencies of every earlier document in the block. For two words that are each in
//! most documents (the commonest phrases), nearly every posting is a seek and a sum. Here
//! both terms' postings are read block by block, in step, each keeping a running count of
//! the positions before its current document, so positions are read in one forward pass.
//! The matches, their phrase counts and their scores are exactly the general scorer's; where
//! one term is much rarer than the other (so seeking skips most of the postings) or the
//! index's files cannot be read this way, the general scorer answers.

use std::io;
use std::path::PathBuf;

use tantivy::directory::{Directory, FileSlice};
use tantivy::fieldnorm::FieldNormReader;
use tantivy::positions::PositionReader;
use tantivy::postings::{BlockSegmentPostings, TermInfo};
use tantivy::query::{
    Bm25Weight, EmptyScorer, EnableScoring, Explanation, PhraseQuery, Query, Scorer, Weight,
};
use tantivy::schema::{Field, IndexRecordOption, Term};
use tantivy::{DocId, DocSet, Index, InvertedIndexReader, Score, SegmentReader, TERMINATED};
use tantivy_common::{BinarySerializable, HasLen, VInt};

/// Above this ratio of the two terms' document counts, seeking the commoner term's postings
/// (the general scorer) beats reading all of them.
const MAX_SPARSITY: u32 = 16;

/// The exact phrase `first second`, `second` standing `gap` positions after `first`.
#[derive(Clone, Debug)]
pub struct TwoTermPhrase {
    first: Term,
    second: Term,
    gap: u32,
}

impl TwoTermPhrase {
    /// The phrase of `first` then `second` `gap` positions later (1 for adjacent words),
    /// both of the same field, which must index positions.
    pub fn new(first: Term, second: Term, gap: u32) -> TwoTermPhrase {
        TwoTermPhrase { first, second, gap }
    }

    /// The same phrase as the general phrase query.
    fn general(&self) -> PhraseQuery {
        PhraseQuery::new_with_offset(vec![
            (0, self.first.clone()),
            (self.gap as usize, self.second.clone()),
        ])
    }
}

impl Query for TwoTermPhrase {
    fn weight(&self, scoring: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        let general = self.general().weight(scoring)?;
        let bm25 = match scoring {
            EnableScoring::Enabled {
                statistics_provider,
                ..
            } => Some(Bm25Weight::for_terms(
                statistics_provider,
                &[self.first.clone(), self.second.clone()],
            )?),
            EnableScoring::Disabled { .. } => None,
        };
        Ok(Box::new(PhraseWeight {
            phrase: self.clone(),
            index: scoring.searcher().map(|s| s.index().clone()),
            bm25,
            general,
        }))
    }

    fn query_terms<'a>(&'a self, visitor: &mut dyn FnMut(&'a Term, bool)) {
        visitor(&self.first, true);
        visitor(&self.second, true);
    }
}

/// The phrase's weight: its BM25 weight (none without scoring), and the general phrase
/// weight for explanations and for segments this one leaves to it.
struct PhraseWeight {
    phrase: TwoTermPhrase,
    index: Option<Index>,
    bm25: Option<Bm25Weight>,
    general: Box<dyn Weight>,
}

impl PhraseWeight {
    /// The matches in `reader`'s segment, or `None` where the general scorer should answer
    /// (its terms' positions not readable here, among them).
    fn matches(&self, reader: &SegmentReader) -> io::Result<Option<Vec<(DocId, u32)>>> {
        let field = self.phrase.first.field();
        let inverted = reader.inverted_index(field).map_err(io::Error::other)?;
        let (Some(a), Some(b)) = (
            inverted.get_term_info(&self.phrase.first)?,
            inverted.get_term_info(&self.phrase.second)?,
        ) else {
            return Ok(Some(Vec::new()));
        };
        let (few, many) = (a.doc_freq.min(b.doc_freq), a.doc_freq.max(b.doc_freq));
        if few.saturating_mul(MAX_SPARSITY) < many {
            return Ok(None);
        }
        let Some(positions) = self.positions(reader, field)? else {
            return Ok(None);
        };
        let (Ok(first), Ok(second)) = (
            Side::open(&inverted, &a, &positions),
            Side::open(&inverted, &b, &positions),
        ) else {
            return Ok(None);
        };
        Ok(Some(walk(first, second, self.phrase.gap)))
    }

    /// The positions of `field`'s terms in `reader`'s segment.
    fn positions(&self, reader: &SegmentReader, field: Field) -> io::Result<Option<FileSlice>> {
        let Some(index) = &self.index else {
            return Ok(None);
        };
        let path = PathBuf::from(format!("{}.pos", reader.segment_id().uuid_string()));
        let Ok(file) = index.directory().open_read(&path) else {
            return Ok(None);
        };
        field_part(&file, field)
    }

    fn fieldnorms(&self, reader: &SegmentReader) -> tantivy::Result<FieldNormReader> {
        let field = self.phrase.first.field();
        if self.bm25.is_some() {
            if let Some(norms) = reader.fieldnorms_readers().get_field(field)? {
                return Ok(norms);
            }
        }
        Ok(FieldNormReader::constant(reader.max_doc(), 1))
    }
}

impl Weight for PhraseWeight {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let Some(matches) = self.matches(reader)? else {
            return self.general.scorer(reader, boost);
        };
        if matches.is_empty() {
            return Ok(Box::new(EmptyScorer));
        }
        Ok(Box::new(Matches {
            matches,
            at: 0,
            bm25: self.bm25.as_ref().map(|w| w.boost_by(boost)),
            fieldnorms: self.fieldnorms(reader)?,
        }))
    }

    fn explain(&self, reader: &SegmentReader, doc: DocId) -> tantivy::Result<Explanation> {
        self.general.explain(reader, doc)
    }
}

/// The part of a segment's positions file (one part per field, and a footer of where each
/// starts) holding `field`'s positions; `None` when the file is not laid out so.
fn field_part(file: &FileSlice, field: Field) -> io::Result<Option<FileSlice>> {
    let Some(footer_len_at) = file.len().checked_sub(4) else {
        return Ok(None);
    };
    let len_bytes = file.slice_from(footer_len_at).read_bytes()?;
    let footer_len = u32::deserialize(&mut len_bytes.as_slice())? as usize;
    let Some(footer_at) = footer_len_at.checked_sub(footer_len) else {
        return Ok(None);
    };
    let footer = file.slice(footer_at..footer_len_at).read_bytes()?;
    let mut rest = footer.as_slice();
    let parts = VInt::deserialize(&mut rest)?.0 as usize;
    let mut starts = Vec::with_capacity(parts);
    let mut at = 0usize;
    for _ in 0..parts {
        at += VInt::deserialize(&mut rest)?.0 as usize;
        let part_field = u32::deserialize(&mut rest)?;
        let idx = VInt::deserialize(&mut rest)?.0;
        starts.push((at, part_field == field.field_id() && idx == 0));
    }
    let Some(i) = starts.iter().position(|(_, ours)| *ours) else {
        return Ok(None);
    };
    let end = starts.get(i + 1).map_or(footer_at, |(s, _)| *s);
    if starts[i].0 > end || end > footer_at {
        return Ok(None);
    }
    Ok(Some(file.slice(starts[i].0..end)))
}

/// One term's postings, read forward a block at a time, with where each document's
/// positions start; a block's positions are read once, from the first document that needs
/// them to the block's end.
struct Side {
    block: BlockSegmentPostings,
    /// The term's documents after the current block.
    after: u32,
    /// The current document's index in the block.
    i: usize,
    /// No document is left.
    done: bool,
    /// Where each document's positions start among the block's (one more entry than the
    /// block has documents, the last the block's total).
    starts: Vec<u32>,
    /// The term's positions before the block.
    offset: u64,
    /// The block's position deltas from the `buffered`th on.
    buf: Vec<u32>,
    buffered: Option<u32>,
    positions: PositionReader,
}

impl Side {
    fn open(inverted: &InvertedIndexReader, info: &TermInfo, file: &FileSlice) -> io::Result<Side> {
        let range = info.positions_range.clone();
        if range.end > file.len() {
            return Err(io::Error::other("positions beyond their file"));
        }
        let mut side = Side {
            block: inverted.read_block_postings_from_terminfo(
                info,
                IndexRecordOption::WithFreqsAndPositions,
            )?,
            after: info.doc_freq,
            i: 0,
            done: info.doc_freq == 0,
            starts: Vec::with_capacity(129),
            offset: 0,
            buf: Vec::new(),
            buffered: None,
            positions: PositionReader::open(file.read_bytes_slice(range)?)?,
        };
        side.enter();
        Ok(side)
    }

    /// Takes in the block just loaded.
    fn enter(&mut self) {
        let freqs = self.block.freqs();
        self.starts.clear();
        self.starts.push(0);
        let mut at = 0;
        for f in freqs {
            at += f;
            self.starts.push(at);
        }
        self.after = self.after.saturating_sub(freqs.len() as u32);
        self.i = 0;
        self.buffered = None;
        self.done |= freqs.is_empty();
    }

    /// Documents in the block.
    fn len(&self) -> usize {
        self.starts.len() - 1
    }

    /// On to the next block, or done.
    fn pass_block(&mut self) {
        self.offset += u64::from(self.starts[self.len()]);
        if self.after == 0 {
            self.done = true;
            return;
        }
        self.block.advance();
        self.enter();
    }

    /// The position deltas (the first absolute) of the block's document `i`, at or after
    /// every document asked for before in the block.
    #[inline(always)]
    fn deltas(&mut self, i: usize) -> &[u32] {
        let base = match self.buffered {
            Some(base) => base,
            None => self.buffer_from(i),
        };
        let (from, to) = (self.starts[i] - base, self.starts[i + 1] - base);
        &self.buf[from as usize..to as usize]
    }

    /// Reads the block's positions from document `i`'s on; where they start.
    #[inline(never)]
    fn buffer_from(&mut self, i: usize) -> u32 {
        let base = self.starts[i];
        let count = (self.starts[self.len()] - base) as usize;
        if self.buf.len() < count {
            self.buf.resize(count, 0);
        }
        self.positions
            .read(self.offset + u64::from(base), &mut self.buf[..count]);
        self.buffered = Some(base);
        base
    }
}

/// The documents holding `second` `gap` positions after `first`, with how many times.
fn walk(mut first: Side, mut second: Side, gap: u32) -> Vec<(DocId, u32)> {
    let mut found = Vec::new();
    let (mut at_first, mut at_second) = ([0u8; 128], [0u8; 128]);
    let mut table = vec![0u8; TABLE];
    let mut marks = [0u8; MARKS];
    while !first.done && !second.done {
        let (from_first, from_second) = (first.i, second.i);
        let (taken, pairs) = pair_up(
            &first.block.docs()[from_first..],
            &second.block.docs()[from_second..],
            &mut table,
            (&mut at_first, &mut at_second),
        );
        first.i += taken.0;
        second.i += taken.1;
        for k in 0..pairs {
            let i = from_first + usize::from(at_first[k]);
            let j = from_second + usize::from(at_second[k]);
            let n = count(first.deltas(i), second.deltas(j), gap, &mut marks);
            if n > 0 {
                found.push((first.block.doc(i), n));
            }
        }
        if first.i == first.len() {
            first.pass_block();
        }
        if second.i == second.len() {
            second.pass_block();
        }
    }
    found
}

/// Document spans up to this long are paired through a table rather than by merging.
const TABLE: usize = 4096;

/// The documents common to `x` and `y` (each ascending, at most 128 long) up to the
/// smaller of their last documents: how many of each were looked at, and how many pairs
/// were found, their indexes in `at`. `table` is all zeros, and is left so.
fn pair_up(
    x: &[DocId],
    y: &[DocId],
    table: &mut [u8],
    at: (&mut [u8; 128], &mut [u8; 128]),
) -> ((usize, usize), usize) {
    let (Some(&x_last), Some(&y_last)) = (x.last(), y.last()) else {
        return ((0, 0), 0);
    };
    let end = x_last.min(y_last);
    let xs = &x[..x.partition_point(|d| *d <= end)];
    let ys = &y[..y.partition_point(|d| *d <= end)];
    let taken = (xs.len(), ys.len());
    let (Some(&lo), false) = (xs.first().min(ys.first()), ys.is_empty()) else {
        return (taken, 0);
    };
    if (end - lo) as usize >= table.len() {
        return (taken, merge_pairs(xs, ys, at));
    }
    for (k, d) in ys.iter().enumerate() {
        table[(d - lo) as usize] = k as u8 + 1;
    }
    let mut n = 0;
    for (k, d) in xs.iter().enumerate() {
        let t = table[(d - lo) as usize];
        at.0[n] = k as u8;
        at.1[n] = t.wrapping_sub(1);
        n += usize::from(t != 0);
    }
    for d in ys {
        table[(d - lo) as usize] = 0;
    }
    (taken, n)
}

/// [`pair_up`]'s pairs of `x` and `y` by merging them.
fn merge_pairs(x: &[DocId], y: &[DocId], at: (&mut [u8; 128], &mut [u8; 128])) -> usize {
    let (mut i, mut j, mut k) = (0, 0, 0);
    while i < x.len() && j < y.len() {
        let (a, b) = (x[i], y[j]);
        at.0[k] = i as u8;
        at.1[k] = j as u8;
        k += usize::from(a == b);
        i += usize::from(a <= b);
        j += usize::from(b <= a);
    }
    k
}

/// How many positions `p` of one document have `p + gap` among another's, from the two
/// lists of position deltas (each list's first delta absolute, all ascending): through
/// `marks` (all zeros, and left so), one byte per position, where the first list's
/// positions are all below its length, else by merging the two lists.
fn count(x: &[u32], y: &[u32], gap: u32, marks: &mut [u8; MARKS]) -> u32 {
    let mut p = u64::from(gap);
    for &d in x {
        p += u64::from(d);
        if p >= MARKS as u64 {
            unmark(x, gap, marks);
            return merged_count(x, y, gap);
        }
        marks[p as usize] = 1;
    }
    let (mut q, mut n) = (0u64, 0);
    for &d in y {
        q += u64::from(d);
        if q >= MARKS as u64 {
            break;
        }
        n += u32::from(marks[q as usize]);
    }
    unmark(x, gap, marks);
    n
}

/// Clears the marks [`count`] made for `x`.
fn unmark(x: &[u32], gap: u32, marks: &mut [u8; MARKS]) {
    let mut p = u64::from(gap);
    for &d in x {
        p += u64::from(d);
        if p >= MARKS as u64 {
            return;
        }
        marks[p as usize] = 0;
    }
}

/// Positions below this are counted through marks, one byte each.
const MARKS: usize = 1024;

/// [`count`] by merging the two lists.
fn merged_count(x: &[u32], y: &[u32], gap: u32) -> u32 {
    let (Some(&x0), Some(&y0)) = (x.first(), y.first()) else {
        return 0;
    };
    let (mut i, mut j, mut n) = (0, 0, 0);
    let (mut p, mut q) = (u64::from(x0) + u64::from(gap), u64::from(y0));
    loop {
        n += u32::from(p == q);
        let (step_x, step_y) = (p <= q, q <= p);
        i += usize::from(step_x);
        j += usize::from(step_y);
        if i == x.len() || j == y.len() {
            return n;
        }
        p += if step_x { u64::from(x[i]) } else { 0 };
        q += if step_y { u64::from(y[j]) } else { 0 };
    }
}

/// A segment's matches, in document order, scored as the general phrase scorer scores them.
struct Matches {
    matches: Vec<(DocId, u32)>,
    at: usize,
    bm25: Option<Bm25Weight>,
    fieldnorms: FieldNormReader,
}

impl DocSet for Matches {
    fn advance(&mut self) -> DocId {
        self.at += 1;
        self.doc()
    }

    fn seek(&mut self, target: DocId) -> DocId {
        let rest = &self.matches[self.at.min(self.matches.len())..];
        self.at += rest.partition_point(|(d, _)| *d < target);
        self.doc()
    }

    fn doc(&self) -> DocId {
        self.matches.get(self.at).map_or(TERMINATED, |(d, _)| *d)
    }

    fn size_hint(&self) -> u32 {
        self.matches.len() as u32
    }
}

impl Scorer for Matches {
    fn score(&mut self) -> Score {
        let Some(&(doc, n)) = self.matches.get(self.at) else {
            return 0.0;
        };
        match &self.bm25 {
            Some(w) => w.score(self.fieldnorms.fieldnorm_id(doc), n),
            None => 1.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tantivy::collector::{Count, TopDocs};
    use tantivy::{DocAddress, Searcher};

    const WORDS: [&str; 4] = ["a", "b", "c", "d"];

    /// An index of `docs` (each a list of word numbers; a long one repeated past the
    /// positions [`count`] marks), committed in `segments` parts, without the documents
    /// numbered in `deleted`.
    fn index(docs: &[(Vec<u8>, bool)], segments: usize, deleted: &[usize]) -> Searcher {
        let texts: Vec<String> = docs
            .iter()
            .map(|(words, long)| {
                let repeat = if *long {
                    MARKS / words.len().max(1) + 2
                } else {
                    1
                };
                let text: Vec<&str> = words.iter().map(|w| WORDS[*w as usize]).collect();
                vec![text.join(" "); repeat].join(" ")
            })
            .collect();
        let index = crate::test_index::build(&texts, segments, deleted);
        index.reader().unwrap().searcher()
    }

    /// Every hit with its score, in document order.
    fn hits(searcher: &Searcher, q: &dyn Query) -> Vec<(DocAddress, u32)> {
        let mut all = searcher
            .search(q, &TopDocs::with_limit(100_000))
            .unwrap()
            .into_iter()
            .map(|(score, at)| (at, score.to_bits()))
            .collect::<Vec<_>>();
        all.sort();
        all
    }

    /// Two dense words in every segment are matched here, not left to the general scorer.
    #[test]
    fn dense_words_take_this_path() {
        let docs: Vec<(Vec<u8>, bool)> = (0..300)
            .map(|i| (vec![0, 1, (i % 4) as u8], false))
            .collect();
        let searcher = index(&docs, 3, &[]);
        let body = searcher.schema().get_field("body").unwrap();
        let phrase = TwoTermPhrase::new(
            Term::from_field_text(body, "a"),
            Term::from_field_text(body, "b"),
            1,
        );
        let weight = PhraseWeight {
            index: Some(searcher.index().clone()),
            bm25: None,
            general: phrase
                .general()
                .weight(EnableScoring::disabled_from_searcher(&searcher))
                .unwrap(),
            phrase,
        };
        assert_eq!(searcher.segment_readers().len(), 3);
        for reader in searcher.segment_readers() {
            let matches = weight.matches(reader).unwrap().expect("matched here");
            assert_eq!(matches.len() as u32, reader.max_doc());
            assert!(matches.iter().all(|(_, n)| *n == 1));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any documents, segments, deletions, words and gap: the same hits, scores and
        /// count as the general phrase query.
        #[test]
        fn matches_are_the_general_phrase_querys(
            docs in prop::collection::vec(
                (prop::collection::vec(0u8..4, 0..30), prop::bool::weighted(0.05)),
                1..400,
            ),
            segments in 1usize..4,
            deleted in prop::collection::vec(0usize..400, 0..30),
            first in 0u8..4,
            second in 0u8..4,
            gap in 1u32..4,
        ) {
            let searcher = index(&docs, segments, &deleted);
            let body = searcher.schema().get_field("body").unwrap();
            let word = |w: u8| Term::from_field_text(body, WORDS[w as usize]);
            let ours = TwoTermPhrase::new(word(first), word(second), gap);
            let general = ours.general();
            prop_assert_eq!(hits(&searcher, &ours), hits(&searcher, &general));
            prop_assert_eq!(
                searcher.search(&ours, &Count).unwrap(),
                searcher.search(&general, &Count).unwrap()
            );
        }

        /// Pairing two blocks of documents finds exactly their common documents up to the
        /// smaller last one, through the table or by merging.
        #[test]
        fn pairs_are_the_common_documents(
            x in prop::collection::btree_set(0u32..9_000, 1..128),
            y in prop::collection::btree_set(0u32..9_000, 1..128),
        ) {
            let (x, y): (Vec<u32>, Vec<u32>) = (x.into_iter().collect(), y.into_iter().collect());
            let end = x[x.len() - 1].min(y[y.len() - 1]);
            let mut table = vec![0u8; TABLE];
            let mut at = ([0u8; 128], [0u8; 128]);
            let (taken, n) = pair_up(&x, &y, &mut table, (&mut at.0, &mut at.1));
            prop_assert_eq!(taken.0, x.iter().filter(|d| **d <= end).count());
            prop_assert_eq!(taken.1, y.iter().filter(|d| **d <= end).count());
            let found: Vec<(u32, u32)> = (0..n)
                .map(|k| (x[at.0[k] as usize], y[at.1[k] as usize]))
                .collect();
            let model: Vec<(u32, u32)> = x
                .iter()
                .filter(|d| **d <= end && y.contains(d))
                .map(|d| (*d, *d))
                .collect();
            prop_assert_eq!(found, model);
            prop_assert!(table.iter().all(|t| *t == 0));
        }

        /// Counting through marks or by merging: how many positions of one list have
        /// `gap` more in the other.
        #[test]
        fn counts_are_the_models(
            x in prop::collection::btree_set(0u32..1_500, 0..60),
            y in prop::collection::btree_set(0u32..1_500, 0..60),
            gap in 1u32..4,
        ) {
            let deltas = |s: &std::collections::BTreeSet<u32>| {
                let mut last = 0;
                s.iter().map(|p| { let d = p - last; last = *p; d }).collect::<Vec<u32>>()
            };
            let model = x.iter().filter(|p| y.contains(&(*p + gap))).count() as u32;
            let mut marks = [0u8; MARKS];
            prop_assert_eq!(count(&deltas(&x), &deltas(&y), gap, &mut marks), model);
            prop_assert_eq!(merged_count(&deltas(&x), &deltas(&y), gap), model);
            prop_assert!(marks.iter().all(|m| *m == 0));
        }
    }
}
