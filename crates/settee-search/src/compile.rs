//! Turns a parsed Lucene query into an index query: words analyzed with their field's
//! analyzer, numbers matched as numbers, wildcards, fuzzy terms, regular expressions and
//! ranges as automata over one field's terms.

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;

use levenshtein_automata::{Distance, LevenshteinAutomatonBuilder, DFA};
use tantivy::query::{
    AllQuery, AutomatonWeight, BooleanQuery, BoostQuery, ConstScorer, EmptyQuery, EnableScoring,
    Explanation, Occur as TOccur, PhraseQuery, Query as TQuery, Scorer, TermQuery, Weight,
};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, DocSet, Score, SegmentReader, TERMINATED};
use tantivy_fst::{Automaton, Regex};

use crate::analyzer::{pair_term, Analyzer};
use crate::error::{Error, Result};
use crate::index::{term, Fields, SEP};
use crate::lucene::{Occur, Query};
use crate::phrase::TwoTermPhrase;

/// A compiled query, boxed.
pub type Compiled = Box<dyn TQuery>;

/// What a query looks for, per field, for highlighting.
#[derive(Default, Debug)]
pub struct Wanted {
    /// `(field, term)` pairs of plain terms and phrases.
    pub terms: Vec<(String, String)>,
}

/// Compiles queries for one index.
pub struct Compiler<'a> {
    fields: &'a Fields,
    analyzer: &'a mut Analyzer,
    pairs: bool,
    /// Wildcards, fuzzy terms and term ranges taken as written, not lower-cased as
    /// Lucene's parser lower-cases them (queries built rather than typed).
    exact: bool,
    /// Terms the query looks for.
    pub wanted: Wanted,
}

impl<'a> Compiler<'a> {
    /// A compiler over `fields` analyzing with `analyzer`; `pairs` when the index holds
    /// pairs of adjacent terms.
    pub fn new(fields: &'a Fields, analyzer: &'a mut Analyzer, pairs: bool) -> Compiler<'a> {
        Compiler {
            fields,
            analyzer,
            pairs,
            exact: false,
            wanted: Wanted::default(),
        }
    }

    /// The same, taking wildcards, fuzzy terms and term ranges as written.
    pub fn exact(mut self) -> Compiler<'a> {
        self.exact = true;
        self
    }

    /// `text` as an expanded term: lower-cased unless the compiler is exact.
    fn expanded(&self, text: &str) -> String {
        if self.exact {
            text.to_string()
        } else {
            text.to_lowercase()
        }
    }

    /// The index query for `q` (one that matches nothing when every word was a stop word).
    pub fn compile(&mut self, q: &Query) -> Result<Compiled> {
        Ok(self.node(q)?.unwrap_or_else(|| Box::new(EmptyQuery)))
    }

    fn node(&mut self, q: &Query) -> Result<Option<Compiled>> {
        Ok(match q {
            Query::All => Some(Box::new(AllQuery)),
            Query::Term { field, text } => self.term(field, text),
            Query::Phrase { field, text, slop } => self.phrase(field, text, *slop),
            Query::Wildcard { field, pattern } => {
                let mut re = String::new();
                for c in self.expanded(pattern).chars() {
                    match c {
                        '*' => re.push_str(".*"),
                        '?' => re.push('.'),
                        c => escape_into(&mut re, c),
                    }
                }
                Some(self.regex(field, &re)?)
            }
            Query::Regex { field, pattern } => Some(self.regex(field, pattern)?),
            Query::Fuzzy {
                field,
                text,
                distance,
            } => {
                let dfa = LevenshteinAutomatonBuilder::new(*distance, true)
                    .build_dfa(&self.expanded(text));
                Some(automaton(self.fields.terms, field, Lev(Arc::new(dfa))))
            }
            Query::Range {
                field,
                lower,
                upper,
                incl_lower,
                incl_upper,
            } => Some(self.range(field, lower, upper, *incl_lower, *incl_upper)?),
            Query::Bool(clauses) => {
                let mut out = Vec::new();
                for (occur, c) in clauses {
                    if let Some(q) = self.node(c)? {
                        out.push((occur_of(*occur), q));
                    }
                }
                // One clause that must or should match is that clause, scored alike (as
                // Lucene rewrites it), and a one-term query is answered fastest alone.
                if let [(TOccur::Must | TOccur::Should, _)] = out.as_slice() {
                    return Ok(out.pop().map(|(_, q)| q));
                }
                (!out.is_empty()).then(|| Box::new(BooleanQuery::new(out)) as Compiled)
            }
            Query::Boost(inner, boost) => self
                .node(inner)?
                .map(|q| Box::new(BoostQuery::new(q, *boost)) as Compiled),
        })
    }

    fn term(&mut self, field: &str, text: &str) -> Option<Compiled> {
        let tokens = self.analyzer.analyze(field, text);
        let mut words: Vec<Compiled> = tokens
            .iter()
            .map(|t| {
                self.wanted.terms.push((field.to_string(), t.text.clone()));
                Box::new(TermQuery::new(
                    term(self.fields.terms, field, &t.text),
                    IndexRecordOption::WithFreqs,
                )) as Compiled
            })
            .collect();
        let text_q = match words.len() {
            0 => None,
            1 => words.pop(),
            _ => Some(Box::new(BooleanQuery::new(
                words.into_iter().map(|w| (TOccur::Should, w)).collect(),
            )) as Compiled),
        };
        let number = number(text).map(|x| {
            Box::new(NumRange::new(field, Bound::Included(x), Bound::Included(x))) as Compiled
        });
        match (number, text_q) {
            (Some(n), Some(t)) => Some(Box::new(BooleanQuery::new(vec![
                (TOccur::Should, n),
                (TOccur::Should, t),
            ]))),
            (n, t) => n.or(t),
        }
    }

    fn phrase(&mut self, field: &str, text: &str, slop: u32) -> Option<Compiled> {
        let tokens = self.analyzer.analyze(field, text);
        for t in &tokens {
            self.wanted.terms.push((field.to_string(), t.text.clone()));
        }
        match tokens.len() {
            0 => None,
            1 => Some(Box::new(TermQuery::new(
                term(self.fields.terms, field, &tokens[0].text),
                IndexRecordOption::WithFreqs,
            ))),
            _ => {
                let adjacent = tokens
                    .windows(2)
                    .all(|w| w[1].position == w[0].position + 1);
                if self.pairs && slop == 0 && adjacent {
                    return Some(self.pairs(field, &tokens));
                }
                let first = tokens[0].position;
                if tokens.len() == 2 && slop == 0 {
                    return Some(Box::new(TwoTermPhrase::new(
                        term(self.fields.terms, field, &tokens[0].text),
                        term(self.fields.terms, field, &tokens[1].text),
                        (tokens[1].position - first) as u32,
                    )));
                }
                let terms = tokens
                    .iter()
                    .map(|t| (t.position - first, term(self.fields.terms, field, &t.text)))
                    .collect();
                let mut q = PhraseQuery::new_with_offset(terms);
                q.set_slop(slop);
                Some(Box::new(q))
            }
        }
    }

    /// An exact phrase of adjacent terms through the indexed pairs of adjacent terms: one
    /// pair's postings for two words, a phrase of pairs for more.
    fn pairs(&self, field: &str, tokens: &[crate::analyzer::Term]) -> Compiled {
        let pair = |i: usize| {
            let text = pair_term(field, &tokens[i].text, &tokens[i + 1].text);
            tantivy::Term::from_field_text(self.fields.terms, &text)
        };
        if tokens.len() == 2 {
            return Box::new(TermQuery::new(pair(0), IndexRecordOption::WithFreqs));
        }
        let terms = (0..tokens.len() - 1).map(|i| (i, pair(i))).collect();
        Box::new(PhraseQuery::new_with_offset(terms))
    }

    fn regex(&mut self, field: &str, pattern: &str) -> Result<Compiled> {
        let re = Regex::new(pattern).map_err(|e| {
            Error::QueryParse(format!("invalid regular expression {pattern:?}: {e}"))
        })?;
        Ok(automaton(self.fields.terms, field, Re(Arc::new(re))))
    }

    fn range(
        &mut self,
        field: &str,
        lower: &Option<String>,
        upper: &Option<String>,
        incl_lower: bool,
        incl_upper: bool,
    ) -> Result<Compiled> {
        let num = |b: &Option<String>| b.as_deref().map(range_number);
        match (num(lower), num(upper)) {
            (Some(Some(_)) | None, Some(Some(_)) | None) if lower.is_some() || upper.is_some() => {
                let bound = |b: Option<Option<f64>>, incl: bool| match b {
                    Some(Some(x)) if incl => Bound::Included(x),
                    Some(Some(x)) => Bound::Excluded(x),
                    _ => Bound::Unbounded,
                };
                let (lo, hi) = (bound(num(lower), incl_lower), bound(num(upper), incl_upper));
                Ok(Box::new(NumRange::new(field, lo, hi)))
            }
            _ => {
                let low = |s: &Option<String>| s.as_ref().map(|s| self.expanded(s).into_bytes());
                let r = TermRange {
                    lower: low(lower),
                    upper: low(upper),
                    incl_lower,
                    incl_upper,
                };
                Ok(automaton(self.fields.terms, field, r))
            }
        }
    }

    /// The query for drilldown values of `field` (any of them).
    pub fn drilldown(&self, field: &str, values: &[String]) -> Compiled {
        let any = values
            .iter()
            .map(|v| {
                let t = term(self.fields.facets, field, v);
                (
                    TOccur::Should,
                    Box::new(TermQuery::new(t, IndexRecordOption::Basic)) as Compiled,
                )
            })
            .collect();
        Box::new(BooleanQuery::new(any))
    }
}

fn occur_of(o: Occur) -> TOccur {
    match o {
        Occur::Must => TOccur::Must,
        Occur::Should => TOccur::Should,
        Occur::MustNot => TOccur::MustNot,
    }
}

fn escape_into(re: &mut String, c: char) {
    if !c.is_alphanumeric() {
        re.push('\\');
    }
    re.push(c);
}

/// A number as a query term: digits with an optional sign, fraction and exponent.
pub fn number(text: &str) -> Option<f64> {
    let t = text.strip_prefix('-').unwrap_or(text);
    let ok = !t.is_empty()
        && t.chars()
            .next()
            .is_some_and(|c| c.is_ascii_digit() || c == '.')
        && t.chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
    if ok {
        text.parse().ok()
    } else {
        None
    }
}

/// A range bound: a number, or `Infinity`.
pub fn range_number(text: &str) -> Option<f64> {
    match text {
        "Infinity" | "+Infinity" => Some(f64::INFINITY),
        "-Infinity" => Some(f64::NEG_INFINITY),
        t => number(t),
    }
}

fn automaton<A>(terms: Field, field: &str, inner: A) -> Compiled
where
    A: Automaton + Clone + fmt::Debug + Send + Sync + 'static,
    A::State: Clone,
{
    let mut prefix = field.as_bytes().to_vec();
    prefix.extend(SEP.to_string().as_bytes());
    Box::new(AutomatonQuery {
        field: terms,
        automaton: Arc::new(Fielded { prefix, inner }),
    })
}

/// A query matching the terms an automaton accepts.
#[derive(Clone, Debug)]
struct AutomatonQuery<A> {
    field: Field,
    automaton: Arc<A>,
}

impl<A> TQuery for AutomatonQuery<A>
where
    A: Automaton + Clone + fmt::Debug + Send + Sync + 'static,
    A::State: Clone,
{
    fn weight(&self, _: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(AutomatonWeight::<A>::new(
            self.field,
            self.automaton.clone(),
        )))
    }
}

/// Terms of one field: its name and the separator, then what `inner` accepts.
#[derive(Clone, Debug)]
struct Fielded<A> {
    prefix: Vec<u8>,
    inner: A,
}

/// Where a [`Fielded`] automaton is.
#[derive(Clone)]
enum FState<S> {
    Prefix(usize),
    Inner(S),
    Dead,
}

impl<A: Automaton> Automaton for Fielded<A>
where
    A::State: Clone,
{
    type State = FState<A::State>;
    fn start(&self) -> Self::State {
        FState::Prefix(0)
    }
    fn is_match(&self, s: &Self::State) -> bool {
        matches!(s, FState::Inner(x) if self.inner.is_match(x))
    }
    fn can_match(&self, s: &Self::State) -> bool {
        match s {
            FState::Dead => false,
            FState::Prefix(_) => true,
            FState::Inner(x) => self.inner.can_match(x),
        }
    }
    fn accept(&self, s: &Self::State, b: u8) -> Self::State {
        match s {
            FState::Prefix(i) if self.prefix[*i] == b => {
                if i + 1 == self.prefix.len() {
                    FState::Inner(self.inner.start())
                } else {
                    FState::Prefix(i + 1)
                }
            }
            FState::Inner(x) => FState::Inner(self.inner.accept(x, b)),
            _ => FState::Dead,
        }
    }
}

/// A regular expression over a term.
#[derive(Clone)]
struct Re(Arc<Regex>);

impl fmt::Debug for Re {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Re")
    }
}

impl Automaton for Re {
    type State = <Regex as Automaton>::State;
    fn start(&self) -> Self::State {
        self.0.start()
    }
    fn is_match(&self, s: &Self::State) -> bool {
        self.0.is_match(s)
    }
    fn can_match(&self, s: &Self::State) -> bool {
        self.0.can_match(s)
    }
    fn accept(&self, s: &Self::State, b: u8) -> Self::State {
        self.0.accept(s, b)
    }
}

/// Terms within an edit distance.
#[derive(Clone)]
struct Lev(Arc<DFA>);

impl fmt::Debug for Lev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Lev")
    }
}

impl Automaton for Lev {
    type State = u32;
    fn start(&self) -> u32 {
        self.0.initial_state()
    }
    fn is_match(&self, s: &u32) -> bool {
        matches!(self.0.distance(*s), Distance::Exact(_))
    }
    fn can_match(&self, s: &u32) -> bool {
        *s != levenshtein_automata::SINK_STATE
    }
    fn accept(&self, s: &u32, b: u8) -> u32 {
        self.0.transition(*s, b)
    }
}

/// Terms between two bounds, byte-wise.
#[derive(Clone, Debug)]
struct TermRange {
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    incl_lower: bool,
    incl_upper: bool,
}

/// How far a term read so far is from a bound: equal so far, or already past it.
#[derive(Clone, Copy, PartialEq)]
enum Side {
    Equal,
    Past,
}

impl Automaton for TermRange {
    /// Bytes read, the lower and upper sides; `None` once out of range.
    type State = Option<(usize, Side, Side)>;
    fn start(&self) -> Self::State {
        let side = |b: &Option<Vec<u8>>| if b.is_some() { Side::Equal } else { Side::Past };
        Some((0, side(&self.lower), side(&self.upper)))
    }
    fn is_match(&self, s: &Self::State) -> bool {
        let Some((n, lo, hi)) = *s else {
            return false;
        };
        let len = |b: &Option<Vec<u8>>| b.as_ref().map_or(0, Vec::len);
        // Equal so far and ended: equal to the bound, or a prefix of it (so below it).
        let lo_ok = lo == Side::Past || (n == len(&self.lower) && self.incl_lower);
        let hi_ok =
            hi == Side::Past || n < len(&self.upper) || (n == len(&self.upper) && self.incl_upper);
        lo_ok && hi_ok
    }
    fn can_match(&self, s: &Self::State) -> bool {
        s.is_some()
    }
    fn accept(&self, s: &Self::State, b: u8) -> Self::State {
        let (n, mut lo, mut hi) = (*s)?;
        if lo == Side::Equal {
            let l = self.lower.as_ref().expect("a lower bound");
            match l.get(n) {
                None => lo = Side::Past,
                Some(&x) if b > x => lo = Side::Past,
                Some(&x) if b < x => return None,
                _ => {}
            }
        }
        if hi == Side::Equal {
            let u = self.upper.as_ref().expect("an upper bound");
            match u.get(n) {
                None => return None,
                Some(&x) if b < x => hi = Side::Past,
                Some(&x) if b > x => return None,
                _ => {}
            }
        }
        Some((n + 1, lo, hi))
    }
}

/// Documents with a number of field `name` in a range (CouchDB's numeric queries).
#[derive(Clone, Debug)]
pub struct NumRange {
    column: String,
    lo: Bound<f64>,
    hi: Bound<f64>,
}

impl NumRange {
    /// Numbers of field `name` between `lo` and `hi`.
    pub fn new(name: &str, lo: Bound<f64>, hi: Bound<f64>) -> NumRange {
        NumRange {
            column: Fields::column(name),
            lo,
            hi,
        }
    }

    /// Whether `x` is in the range.
    pub fn contains(&self, x: f64) -> bool {
        let above = match self.lo {
            Bound::Included(l) => x >= l,
            Bound::Excluded(l) => x > l,
            Bound::Unbounded => true,
        };
        let below = match self.hi {
            Bound::Included(h) => x <= h,
            Bound::Excluded(h) => x < h,
            Bound::Unbounded => true,
        };
        above && below
    }
}

impl TQuery for NumRange {
    fn weight(&self, _: EnableScoring<'_>) -> tantivy::Result<Box<dyn Weight>> {
        Ok(Box::new(self.clone()))
    }
}

impl Weight for NumRange {
    fn scorer(&self, reader: &SegmentReader, boost: Score) -> tantivy::Result<Box<dyn Scorer>> {
        let mut docs: Vec<DocId> = Vec::new();
        if let Some(col) = reader.fast_fields().column_opt::<f64>(&self.column)? {
            for doc in 0..reader.max_doc() {
                if col.values_for_doc(doc).any(|x| self.contains(x)) {
                    docs.push(doc);
                }
            }
        }
        Ok(Box::new(ConstScorer::new(Docs { docs, at: 0 }, boost)))
    }

    fn explain(&self, _: &SegmentReader, _: DocId) -> tantivy::Result<Explanation> {
        Ok(Explanation::new("numeric range", 1.0))
    }
}

/// Documents listed in order.
struct Docs {
    docs: Vec<DocId>,
    at: usize,
}

impl DocSet for Docs {
    fn advance(&mut self) -> DocId {
        self.at += 1;
        self.doc()
    }
    fn doc(&self) -> DocId {
        self.docs.get(self.at).copied().unwrap_or(TERMINATED)
    }
    fn size_hint(&self) -> u32 {
        (self.docs.len() - self.at.min(self.docs.len())) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run<A: Automaton>(a: &A, s: &[u8]) -> bool {
        let mut st = a.start();
        for b in s {
            if !a.can_match(&st) {
                return false;
            }
            st = a.accept(&st, *b);
        }
        a.is_match(&st)
    }

    #[test]
    fn term_ranges_are_bytewise() {
        let r = TermRange {
            lower: Some(b"b".to_vec()),
            upper: Some(b"d".to_vec()),
            incl_lower: true,
            incl_upper: false,
        };
        for (t, want) in [
            ("a", false),
            ("b", true),
            ("ba", true),
            ("c", true),
            ("d", false),
            ("cz", true),
            ("da", false),
        ] {
            assert_eq!(run(&r, t.as_bytes()), want, "{t}");
        }
        let open = TermRange {
            lower: None,
            upper: Some(b"b".to_vec()),
            incl_lower: true,
            incl_upper: true,
        };
        assert!(run(&open, b"") && run(&open, b"a") && run(&open, b"b") && !run(&open, b"ba"));
    }

    #[test]
    fn fielded_automata_stay_in_their_field() {
        let dfa = LevenshteinAutomatonBuilder::new(1, true).build_dfa("fox");
        let a = Fielded {
            prefix: b"tag\0".to_vec(),
            inner: Lev(Arc::new(dfa)),
        };
        assert!(run(&a, b"tag\0fix") && run(&a, b"tag\0fox"));
        assert!(!run(&a, b"tags\0fox") && !run(&a, b"tag\0fxx1"));
    }

    #[test]
    fn numbers_are_recognised() {
        assert_eq!(number("42"), Some(42.0));
        assert_eq!(number("-1.5e3"), Some(-1500.0));
        assert_eq!(number("inf"), None);
        assert_eq!(number("nan"), None);
        assert_eq!(number("12abc"), None);
        assert_eq!(range_number("Infinity"), Some(f64::INFINITY));
    }
}
