//! The best hits of a query for one term, found faster than the general top-hits collector.
//!
//! A one-term query is the commonest search, and for a word in most documents the general
//! block-skipping loop still scores nearly every posting: it skips a block of postings only
//! when the block's best possible score is below the page's worst, never when it merely
//! equals it, and with scores that take few distinct values (whole term counts over fields
//! of similar length) the best blocks tie with the page's worst. A document that only ties
//! the page's worst cannot make the page (ties go to the lower document number, and
//! documents come in increasing order), so here the scorer is asked for the next score above
//! the page's worst, which passes over such blocks without decoding them, and the page's worst
//! is known from the first full page on. The hits, their scores and their order are exactly
//! the general collector's.

use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;

use tantivy::query::{EnableScoring, Query, TermQuery};
use tantivy::{DocId, Score, Searcher, SegmentOrdinal};

use crate::error::Result;

/// One hit: its score, segment and document number in the segment.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TermHit {
    /// The BM25 score, as the general collector computes it.
    pub score: Score,
    /// The hit's segment.
    pub seg: SegmentOrdinal,
    /// The hit's document number within its segment.
    pub doc: DocId,
}

/// A hit ordered best first: higher score, then lower segment and document.
struct Ranked(TermHit);

impl Ranked {
    fn key(&self) -> (Score, Reverse<(SegmentOrdinal, DocId)>) {
        (self.0.score, Reverse((self.0.seg, self.0.doc)))
    }
}

impl PartialEq for Ranked {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Ranked {}

impl PartialOrd for Ranked {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ranked {
    fn cmp(&self, other: &Self) -> Ordering {
        let (a, b) = (self.key(), other.key());
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
    }
}

/// The page being filled: a min-heap of the best hits so far, the worst on top.
struct Page {
    limit: usize,
    heap: BinaryHeap<Reverse<Ranked>>,
}

impl Page {
    fn full(&self) -> bool {
        self.heap.len() >= self.limit
    }

    /// The score a hit must beat to make a full page.
    fn bar(&self) -> Score {
        self.heap.peek().map_or(Score::MIN, |w| w.0 .0.score)
    }

    /// The lowest score that can still make the page: any score while it is not full,
    /// then the next one above its worst. The scorer passes over blocks whose best is below
    /// it, so blocks that could only tie the worst are passed over too.
    fn needed(&self) -> Score {
        if self.full() {
            self.bar().next_up()
        } else {
            Score::MIN
        }
    }

    fn offer(&mut self, hit: TermHit) {
        if !self.full() {
            self.heap.push(Reverse(Ranked(hit)));
        } else if hit.score > self.bar() {
            self.heap.pop();
            self.heap.push(Reverse(Ranked(hit)));
        }
    }
}

/// The best `limit` live documents of a one-term query by BM25 score, best first, ties to
/// the lower segment and document: exactly what tantivy's `TopDocs` answers for `query`,
/// in less time.
pub fn best_of_term(searcher: &Searcher, query: &TermQuery, limit: usize) -> Result<Vec<TermHit>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let mut page = Page {
        limit,
        heap: BinaryHeap::with_capacity(limit + 1),
    };
    let weight = query.weight(EnableScoring::enabled_from_searcher(searcher))?;
    for (seg, reader) in searcher.segment_readers().iter().enumerate() {
        let seg = seg as SegmentOrdinal;
        let alive = reader.alive_bitset();
        weight.for_each_pruning(page.needed(), reader, &mut |doc, score| {
            if alive.is_none_or(|a| a.is_alive(doc)) {
                page.offer(TermHit { score, seg, doc });
            }
            page.needed()
        })?;
    }
    // Ascending under `Reverse` is best first.
    Ok(page
        .heap
        .into_sorted_vec()
        .into_iter()
        .map(|r| r.0 .0)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tantivy::collector::TopDocs;
    use tantivy::schema::IndexRecordOption;
    use tantivy::{Index, Term};

    /// An index of `docs` (each a count of "a" and of filler words), committed in
    /// `segments` parts, with the documents numbered in `deleted` removed.
    fn index(docs: &[(u8, u8)], segments: usize, deleted: &[usize]) -> (Index, Searcher) {
        let texts: Vec<String> = docs
            .iter()
            .map(|(a, filler)| "a ".repeat(*a as usize) + &"z ".repeat(*filler as usize))
            .collect();
        let index = crate::test_index::build(&texts, segments, deleted);
        let searcher = index.reader().unwrap().searcher();
        (index, searcher)
    }

    fn query(term: &Term) -> TermQuery {
        TermQuery::new(term.clone(), IndexRecordOption::WithFreqs)
    }

    fn general(searcher: &Searcher, term: &Term, limit: usize) -> Vec<TermHit> {
        if limit == 0 {
            return Vec::new();
        }
        searcher
            .search(&query(term), &TopDocs::with_limit(limit))
            .unwrap()
            .into_iter()
            .map(|(score, at)| TermHit {
                score,
                seg: at.segment_ord,
                doc: at.doc_id,
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Any documents, segments, deletions and page size: the same hits, scores and
        /// order as the general collector.
        #[test]
        fn hits_are_the_general_collectors(
            docs in prop::collection::vec((0u8..6, 0u8..4), 1..700),
            segments in 1usize..4,
            deleted in prop::collection::vec(0usize..700, 0..40),
            limit in 0usize..40,
        ) {
            let (index, searcher) = index(&docs, segments, &deleted);
            let body = index.schema().get_field("body").unwrap();
            for word in ["a", "z", "absent"] {
                let term = Term::from_field_text(body, word);
                prop_assert_eq!(
                    best_of_term(&searcher, &query(&term), limit).unwrap(),
                    general(&searcher, &term, limit)
                );
            }
        }
    }

    #[test]
    fn tied_blocks_are_passed_over_but_a_better_late_hit_is_found() {
        // 2,000 documents with "a" twice, then one with "a" five times: the page fills
        // with the first documents, and only the last one beats them.
        let mut docs = vec![(2u8, 1u8); 2_000];
        docs.push((5, 0));
        let (index, searcher) = index(&docs, 1, &[]);
        let term = Term::from_field_text(index.schema().get_field("body").unwrap(), "a");
        let hits = best_of_term(&searcher, &query(&term), 3).unwrap();
        let docs: Vec<DocId> = hits.iter().map(|h| h.doc).collect();
        assert_eq!(docs, vec![2_000, 0, 1]);
        assert_eq!(hits, general(&searcher, &term, 3));
    }
}
