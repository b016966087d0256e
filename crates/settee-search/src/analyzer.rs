//! Analyzers: how text becomes the terms an index holds and a query looks for, named as
//! CouchDB's search and nouveau indexes name them.
//!
//! Each analyzer is a tokenizer (Unicode word boundaries, letters, whitespace, the whole
//! value, or the classic and e-mail rules) followed by filters (lower case, stop words, a
//! Snowball stemmer). `perfield` picks an analyzer by field name.

use std::collections::HashMap;
use std::sync::OnceLock;

use regex::Regex;
use serde_json::Value;
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, Stemmer, StopWordFilter, TextAnalyzer, Token,
    TokenStream, Tokenizer,
};
use unicode_segmentation::UnicodeSegmentation;

use crate::error::{Error, Result};

/// Longest term kept, in bytes (longer tokens are dropped, as Lucene's standard tokenizer
/// drops them past its maximum).
const MAX_TERM: usize = 255;

/// English stop words of the standard, classic and e-mail analyzers of search indexes.
const ENGLISH_STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is", "it",
    "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there", "these",
    "they", "this", "to", "was", "will", "with",
];

/// The language analyzers, by CouchDB's names, and the stemmer each uses.
pub const LANGUAGES: &[(&str, Language)] = &[
    ("arabic", Language::Arabic),
    ("danish", Language::Danish),
    ("dutch", Language::Dutch),
    ("english", Language::English),
    ("finnish", Language::Finnish),
    ("french", Language::French),
    ("german", Language::German),
    ("greek", Language::Greek),
    ("hungarian", Language::Hungarian),
    ("italian", Language::Italian),
    ("norwegian", Language::Norwegian),
    ("portuguese", Language::Portuguese),
    ("romanian", Language::Romanian),
    ("russian", Language::Russian),
    ("spanish", Language::Spanish),
    ("swedish", Language::Swedish),
    ("turkish", Language::Turkish),
];

/// Which family of indexes an analyzer belongs to: search indexes' standard analyzer removes
/// English stop words, nouveau's does not.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flavor {
    /// `indexes` in a design document (`_search`).
    Search,
    /// `nouveau` in a design document (`_nouveau`).
    Nouveau,
}

/// How text is cut into tokens before the filters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Split {
    /// Unicode word boundaries (UAX #29), keeping words, numbers and ideographs.
    Words,
    /// Runs of letters.
    Letters,
    /// Runs of anything but white space.
    Whitespace,
    /// The whole value as one token.
    Keyword,
    /// Words, with e-mail addresses, host names, acronyms and apostrophes kept whole.
    Classic,
    /// Words, with e-mail addresses and URLs kept whole.
    Email,
}

/// One named analyzer: a split and its filters.
#[derive(Clone, Debug, PartialEq)]
struct Named {
    split: Split,
    lower: bool,
    stop: Stop,
    stem: Option<Language>,
}

/// Which stop words an analyzer removes.
#[derive(Clone, Debug, PartialEq)]
enum Stop {
    None,
    Words(Vec<String>),
    Language(Language),
}

impl Named {
    fn parse(name: &str, stopwords: Option<Vec<String>>, flavor: Flavor) -> Result<Named> {
        let english = || Stop::Words(ENGLISH_STOP.iter().map(|s| s.to_string()).collect());
        let plain = |split, lower| Named {
            split,
            lower,
            stop: Stop::None,
            stem: None,
        };
        let named = match name {
            "standard" => Named {
                stop: if flavor == Flavor::Search {
                    english()
                } else {
                    Stop::None
                },
                ..plain(Split::Words, true)
            },
            "classic" => Named {
                stop: english(),
                ..plain(Split::Classic, true)
            },
            "email" => Named {
                stop: english(),
                ..plain(Split::Email, true)
            },
            "simple" => plain(Split::Letters, true),
            "whitespace" => plain(Split::Whitespace, false),
            "keyword" => plain(Split::Keyword, false),
            _ => {
                let Some((_, lang)) = LANGUAGES.iter().find(|(n, _)| *n == name) else {
                    return Err(Error::UnknownAnalyzer(name.to_string()));
                };
                let stop = if *lang == Language::English {
                    english()
                } else {
                    Stop::Language(*lang)
                };
                Named {
                    stop,
                    stem: Some(*lang),
                    ..plain(Split::Words, true)
                }
            }
        };
        Ok(match stopwords {
            Some(words) if named.split != Split::Keyword => Named {
                stop: Stop::Words(words),
                ..named
            },
            _ => named,
        })
    }

    fn build(&self) -> TextAnalyzer {
        let mut b = TextAnalyzer::builder(Splitter(self.split))
            .filter(RemoveLongFilter::limit(MAX_TERM + 1))
            .dynamic();
        if self.lower {
            b = b.filter_dynamic(LowerCaser);
        }
        match &self.stop {
            Stop::None => {}
            Stop::Words(words) => {
                b = b.filter_dynamic(StopWordFilter::remove(words.iter().cloned()));
            }
            Stop::Language(lang) => {
                if let Some(filter) = StopWordFilter::new(*lang) {
                    b = b.filter_dynamic(filter);
                }
            }
        }
        if let Some(lang) = self.stem {
            b = b.filter_dynamic(Stemmer::new(lang));
        }
        b.build()
    }
}

/// An analyzer definition as a design document gives it: a name, or `perfield` with a
/// default and per-field analyzers; parsed once, turned into [`Analyzer`]s per thread.
#[derive(Clone, Debug, PartialEq)]
pub struct AnalyzerSpec {
    default: Named,
    fields: Vec<(String, Named)>,
}

impl AnalyzerSpec {
    /// Parses `{"name": …, "stopwords": […]}`, a bare name, or `perfield` with `default`
    /// and `fields`; `None` is the standard analyzer.
    pub fn parse(def: Option<&Value>, flavor: Flavor) -> Result<AnalyzerSpec> {
        let Some(def) = def else {
            return Ok(AnalyzerSpec {
                default: one("standard", None, flavor)?,
                fields: Vec::new(),
            });
        };
        let (name, stop, default, fields) = match def {
            Value::String(name) => (name.as_str(), None, None, None),
            Value::Object(o) => (
                o.get("name").and_then(Value::as_str).unwrap_or("standard"),
                o.get("stopwords"),
                o.get("default"),
                o.get("fields"),
            ),
            _ => {
                return Err(Error::BadAnalyzer(
                    "analyzer must be a string or an object".into(),
                ))
            }
        };
        let stop = stop.map(stop_words).transpose()?;
        if name != "perfield" {
            return Ok(AnalyzerSpec {
                default: one(name, stop, flavor)?,
                fields: Vec::new(),
            });
        }
        let default = match default {
            Some(d) => AnalyzerSpec::parse(Some(d), flavor)?.default,
            None => one("standard", None, flavor)?,
        };
        let mut per = Vec::new();
        if let Some(fields) = fields {
            let Some(fields) = fields.as_object() else {
                return Err(Error::BadAnalyzer(
                    "perfield fields must be an object".into(),
                ));
            };
            for (field, def) in fields {
                per.push((
                    field.clone(),
                    AnalyzerSpec::parse(Some(def), flavor)?.default,
                ));
            }
        }
        Ok(AnalyzerSpec {
            default,
            fields: per,
        })
    }

    /// Nouveau's form: `default_analyzer` and `field_analyzers`.
    pub fn parse_nouveau(default: Option<&Value>, fields: Option<&Value>) -> Result<AnalyzerSpec> {
        let mut spec = AnalyzerSpec::parse(default, Flavor::Nouveau)?;
        if let Some(fields) = fields {
            let Some(fields) = fields.as_object() else {
                return Err(Error::BadAnalyzer(
                    "field_analyzers must be an object".into(),
                ));
            };
            for (field, def) in fields {
                let a = AnalyzerSpec::parse(Some(def), Flavor::Nouveau)?.default;
                spec.fields.push((field.clone(), a));
            }
        }
        Ok(spec)
    }

    /// Analyzers ready to run (one set per thread: running one needs it mutably).
    pub fn build(&self) -> Analyzer {
        Analyzer {
            default: self.default.build(),
            fields: self
                .fields
                .iter()
                .map(|(f, n)| (f.clone(), n.build()))
                .collect(),
        }
    }
}

fn one(name: &str, stop: Option<Vec<String>>, flavor: Flavor) -> Result<Named> {
    Named::parse(name, stop, flavor)
}

fn stop_words(v: &Value) -> Result<Vec<String>> {
    let bad = || Error::BadAnalyzer("stopwords must be an array of strings".into());
    v.as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|w| w.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

/// Analyzers built from an [`AnalyzerSpec`].
#[derive(Clone)]
pub struct Analyzer {
    default: TextAnalyzer,
    fields: HashMap<String, TextAnalyzer>,
}

/// One term of analyzed text: where it came from and its position.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    /// The term.
    pub text: String,
    /// Byte offsets of the source text it came from.
    pub from: usize,
    /// End of those bytes.
    pub to: usize,
    /// Its position (stop words removed leave gaps).
    pub position: usize,
}

impl Analyzer {
    /// The terms of `text` in field `field`.
    pub fn analyze(&mut self, field: &str, text: &str) -> Vec<Term> {
        let a = match self.fields.get_mut(field) {
            Some(a) => a,
            None => &mut self.default,
        };
        let mut stream = a.token_stream(text);
        let mut out = Vec::new();
        while let Some(t) = stream.next() {
            out.push(Term {
                text: t.text.clone(),
                from: t.offset_from,
                to: t.offset_to,
                position: t.position,
            });
        }
        out
    }
}

/// The index's tokenizer for field values: each value arrives as [`FieldTokenizer::encode`]
/// made it (how to analyze it, the field's name, the text), and leaves as terms
/// `name \0 term` with their positions, analyzed by the field's analyzer; so tantivy's
/// indexing threads do the analysis. With `pairs`, each two adjacent terms are also
/// indexed as one ([`pair_term`]).
#[derive(Clone)]
pub struct FieldTokenizer {
    analyzer: Analyzer,
    pairs: bool,
}

impl FieldTokenizer {
    /// A tokenizer analyzing with `spec`, indexing pairs of adjacent terms with `pairs`.
    pub fn new(spec: &AnalyzerSpec, pairs: bool) -> FieldTokenizer {
        FieldTokenizer {
            analyzer: spec.build(),
            pairs,
        }
    }

    /// A value of field `name` as the tokenizer reads it: analyzed, or kept whole (`exact`).
    pub fn encode(exact: bool, name: &str, text: &str) -> String {
        let mut s = String::with_capacity(name.len() + text.len() + 2);
        s.push(if exact { 'k' } else { 'a' });
        s.push_str(name);
        s.push('\0');
        s.push_str(text);
        s
    }
}

/// The terms of one field value, made as tantivy asks for them into one reused token.
pub struct FieldTokens<'a> {
    inner: Option<tantivy::tokenizer::BoxTokenStream<'a>>,
    /// `name \0`.
    prefix: String,
    exact: Option<&'a str>,
    pairs: bool,
    /// The previous term and its position, for pairs.
    last: Option<(String, usize)>,
    /// A pair to hand out before the next term.
    pending: Option<(String, usize)>,
    token: Token,
}

impl FieldTokens<'_> {
    fn set(&mut self, text: &str, position: usize, pair: Option<&str>) {
        let t = &mut self.token;
        t.text.clear();
        if let Some(first) = pair {
            t.text.push('\u{1}');
            t.text.push_str(&self.prefix);
            t.text.push_str(first);
            t.text.push('\0');
        } else {
            t.text.push_str(&self.prefix);
        }
        t.text.push_str(text);
        t.position = position;
    }
}

impl TokenStream for FieldTokens<'_> {
    fn advance(&mut self) -> bool {
        if let Some(word) = self.exact.take() {
            self.set(word, 0, None);
            return true;
        }
        if let Some((second, position)) = self.pending.take() {
            let first = self
                .last
                .as_ref()
                .map(|(f, _)| f.clone())
                .unwrap_or_default();
            self.set(&second, position, Some(&first));
            self.last = Some((second, position + 1));
            return true;
        }
        let Some(inner) = self.inner.as_mut() else {
            return false;
        };
        if !inner.advance() {
            return false;
        }
        if !self.pairs {
            let (t, from) = (&mut self.token, inner.token());
            t.text.clear();
            t.text.push_str(&self.prefix);
            t.text.push_str(&from.text);
            t.position = from.position;
            return true;
        }
        let (text, position) = (inner.token().text.clone(), inner.token().position);
        self.set(&text, position, None);
        {
            match &self.last {
                // The pair goes at the first term's position, after this term.
                Some((_, p)) if *p + 1 == position => {
                    self.pending = Some((text, position - 1));
                }
                _ => self.last = Some((text, position)),
            }
        }
        true
    }
    fn token(&self) -> &Token {
        &self.token
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

impl Tokenizer for FieldTokenizer {
    type TokenStream<'a> = FieldTokens<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> FieldTokens<'a> {
        let exact = text.starts_with('k');
        let parsed = text.get(1..).and_then(|t| t.split_once('\0'));
        let (prefix, exact, inner) = match parsed {
            None => (String::new(), None, None),
            Some((name, value)) => {
                let prefix = format!("{name}\0");
                if exact {
                    (prefix, Some(value), None)
                } else {
                    let a = match self.analyzer.fields.get_mut(name) {
                        Some(a) => a,
                        None => &mut self.analyzer.default,
                    };
                    (prefix, None, Some(a.token_stream(value)))
                }
            }
        };
        FieldTokens {
            inner,
            prefix,
            exact,
            pairs: self.pairs,
            last: None,
            pending: None,
            token: Token::default(),
        }
    }
}

/// The term indexed for two adjacent terms `a b` of field `name`, so that two-word phrases
/// are one term's postings rather than positions compared document by document. It starts
/// with `\u{1}`, which no field's own terms do, so no wildcard, range or fuzzy term of a
/// field ever matches it.
pub fn pair_term(name: &str, a: &str, b: &str) -> String {
    let mut s = String::with_capacity(name.len() + a.len() + b.len() + 3);
    s.push('\u{1}');
    s.push_str(name);
    s.push('\0');
    s.push_str(a);
    s.push('\0');
    s.push_str(b);
    s
}

/// A tantivy tokenizer over our splits.
#[derive(Clone, Copy)]
struct Splitter(Split);

/// A token's span in its text, and its text when it is not that slice.
type Span = (usize, usize, Option<String>);

/// Tokens found in one go and handed out one at a time through one reused token.
pub struct Tokens<'a> {
    text: &'a str,
    spans: Vec<Span>,
    next: usize,
    token: Token,
}

impl TokenStream for Tokens<'_> {
    fn advance(&mut self) -> bool {
        let Some((from, to, own)) = self.spans.get(self.next) else {
            return false;
        };
        let t = &mut self.token;
        t.offset_from = *from;
        t.offset_to = *to;
        t.position = self.next;
        t.position_length = 1;
        t.text.clear();
        t.text
            .push_str(own.as_deref().unwrap_or(&self.text[*from..*to]));
        self.next += 1;
        true
    }
    fn token(&self) -> &Token {
        &self.token
    }
    fn token_mut(&mut self) -> &mut Token {
        &mut self.token
    }
}

impl Tokenizer for Splitter {
    type TokenStream<'a> = Tokens<'a>;
    fn token_stream<'a>(&'a mut self, text: &'a str) -> Tokens<'a> {
        Tokens {
            text,
            spans: split(self.0, text),
            next: 0,
            token: Token::default(),
        }
    }
}

/// The spans of `text` a split makes (a token's own text only where it is not its span).
fn split(kind: Split, text: &str) -> Vec<Span> {
    let span = |(i, s): (usize, &str)| (i, i + s.len(), None);
    let own = |(from, to, s): (usize, usize, String)| (from, to, Some(s));
    match kind {
        Split::Keyword => {
            if text.is_empty() {
                Vec::new()
            } else {
                vec![(0, text.len(), None)]
            }
        }
        Split::Whitespace => runs(text, |c| !c.is_whitespace()).map(span).collect(),
        Split::Letters => runs(text, char::is_alphabetic).map(span).collect(),
        Split::Words => words(text, 0).into_iter().map(span).collect(),
        Split::Classic => classic(text).into_iter().map(own).collect(),
        Split::Email => with_whole(text, email_or_url())
            .into_iter()
            .map(own)
            .collect(),
    }
}

/// Runs of characters for which `keep` holds.
fn runs(text: &str, keep: impl Fn(char) -> bool) -> impl Iterator<Item = (usize, &str)> {
    let mut start = None;
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        match (keep(c), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                out.push((s, &text[s..i]));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, &text[s..]));
    }
    out.into_iter()
}

/// UAX #29 words of `text` that hold a letter, digit or ideograph; offsets start at `base`.
fn words(text: &str, base: usize) -> Vec<(usize, &str)> {
    if text.is_ascii() {
        return ascii_words(text, base);
    }
    text.split_word_bound_indices()
        .filter(|(_, w)| w.chars().any(char::is_alphanumeric))
        .map(|(i, w)| (base + i, w))
        .collect()
}

/// The same for ASCII text, by UAX #29's rules as they apply to ASCII (the general
/// segmenter's table lookups were an eighth of an index build): letters, digits and `_`
/// join; `:`, `.` and `'` join two letters; `,`, `;`, `.` and `'` join two digits; anything
/// else ends a word.
fn ascii_words(text: &str, base: usize) -> Vec<(usize, &str)> {
    let b = text.as_bytes();
    let joins = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if !joins(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        i += 1;
        while i < b.len() {
            if joins(b[i]) {
                i += 1;
                continue;
            }
            let (prev, mid, next) = (b[i - 1], b[i], b.get(i + 1).copied().unwrap_or(0));
            let letters = prev.is_ascii_alphabetic()
                && next.is_ascii_alphabetic()
                && matches!(mid, b':' | b'.' | b'\'');
            let digits = prev.is_ascii_digit()
                && next.is_ascii_digit()
                && matches!(mid, b',' | b';' | b'.' | b'\'');
            if !(letters || digits) {
                break;
            }
            i += 2;
        }
        let word = &text[start..i];
        if word.bytes().any(|c| c.is_ascii_alphanumeric()) {
            out.push((base + start, word));
        }
    }
    out
}

/// Words, with the matches of `whole` kept as single tokens.
fn with_whole(text: &str, whole: &Regex) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut at = 0;
    for m in whole.find_iter(text) {
        for (i, w) in words(&text[at..m.start()], at) {
            out.push((i, i + w.len(), w.to_string()));
        }
        out.push((m.start(), m.end(), m.as_str().to_string()));
        at = m.end();
    }
    for (i, w) in words(&text[at..], at) {
        out.push((i, i + w.len(), w.to_string()));
    }
    out
}

fn email_or_url() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?x)
            [\w.%+-]+@[\w-]+(?:\.[\w-]+)+
            | (?:https?|ftp)://[^\s<>\x22]+[^\s<>\x22.,;:!?)]
            | www\.[\w-]+(?:\.[\w-]+)+(?:/[^\s<>\x22]*[^\s<>\x22.,;:!?)])?",
        )
        .expect("e-mail and URL pattern")
    })
}

/// The classic tokenizer's rules: e-mail addresses, host names and acronyms with dots,
/// words with apostrophes, then plain words; possessives and acronym dots are dropped.
fn classic(text: &str) -> Vec<(usize, usize, String)> {
    static RE: OnceLock<Regex> = OnceLock::new();
    let re = RE.get_or_init(|| {
        Regex::new(
            r"(?x)
            (?P<email>[\w.%+-]+@[\w-]+(?:\.[\w-]+)+)
            | (?P<acronym>(?:\p{L}\.){2,})
            | (?P<host>\w+(?:\.\w+)+)
            | (?P<apos>\w+(?:'\w+)+)
            | (?P<word>\w+)",
        )
        .expect("classic pattern")
    });
    re.captures_iter(text)
        .map(|c| {
            let m = c.get(0).expect("whole match");
            let mut t = m.as_str().to_string();
            if c.name("acronym").is_some() {
                t.retain(|ch| ch != '.');
            } else if c.name("apos").is_some() {
                if let Some(stripped) = t.strip_suffix("'s").or_else(|| t.strip_suffix("'S")) {
                    t = stripped.to_string();
                }
            }
            (m.start(), m.end(), t)
        })
        .collect()
}

/// The analyzer names known, for error messages and documentation.
pub fn names() -> Vec<&'static str> {
    let mut n = vec![
        "standard",
        "classic",
        "email",
        "simple",
        "whitespace",
        "keyword",
        "perfield",
    ];
    n.extend(LANGUAGES.iter().map(|(name, _)| *name));
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn terms(def: Value, text: &str) -> Vec<String> {
        let spec = AnalyzerSpec::parse(Some(&def), Flavor::Search).unwrap();
        spec.build()
            .analyze("f", text)
            .into_iter()
            .map(|t| t.text)
            .collect()
    }

    #[test]
    fn standard_lowercases_and_drops_english_stop_words() {
        assert_eq!(
            terms(json!("standard"), "The Quick brown-fox isn't 3.14 here"),
            ["quick", "brown", "fox", "isn't", "3.14", "here"]
        );
    }

    #[test]
    fn nouveau_standard_keeps_stop_words() {
        let spec = AnalyzerSpec::parse(Some(&json!("standard")), Flavor::Nouveau).unwrap();
        let t: Vec<String> = spec
            .build()
            .analyze("f", "The fox")
            .into_iter()
            .map(|t| t.text)
            .collect();
        assert_eq!(t, ["the", "fox"]);
    }

    #[test]
    fn simple_whitespace_keyword() {
        assert_eq!(
            terms(json!("simple"), "Hello, World42x"),
            ["hello", "world", "x"]
        );
        assert_eq!(
            terms(json!("whitespace"), "Hello, World"),
            ["Hello,", "World"]
        );
        assert_eq!(terms(json!("keyword"), "Hello, World"), ["Hello, World"]);
    }

    #[test]
    fn email_and_classic_keep_addresses_whole() {
        assert_eq!(
            terms(
                json!("email"),
                "Mail Bob@Example.com or see https://x.org/a?b=1."
            ),
            ["mail", "bob@example.com", "see", "https://x.org/a?b=1"]
        );
        assert_eq!(
            terms(
                json!("classic"),
                "I.B.M. sent bob@x.com John's www.site.com"
            ),
            ["ibm", "sent", "bob@x.com", "john", "www.site.com"]
        );
    }

    #[test]
    fn language_analyzers_stem() {
        assert_eq!(terms(json!("english"), "running dogs the"), ["run", "dog"]);
        assert_eq!(terms(json!("german"), "Häuser"), ["haus"]);
    }

    #[test]
    fn perfield_and_stopwords() {
        let def = json!({"name": "perfield", "default": "keyword", "fields": {"f": "english"}});
        let spec = AnalyzerSpec::parse(Some(&def), Flavor::Search).unwrap();
        let mut a = spec.build();
        assert_eq!(a.analyze("g", "Running Dogs")[0].text, "Running Dogs");
        assert_eq!(a.analyze("f", "Running Dogs")[0].text, "run");
        assert_eq!(
            terms(
                json!({"name": "standard", "stopwords": ["fox"]}),
                "the fox jumps"
            ),
            ["the", "jumps"]
        );
    }

    #[test]
    fn unknown_analyzers_are_refused() {
        let e = AnalyzerSpec::parse(Some(&json!("klingon")), Flavor::Search).unwrap_err();
        assert!(matches!(e, Error::UnknownAnalyzer(n) if n == "klingon"));
    }

    #[test]
    fn positions_keep_gaps_for_stop_words() {
        let spec = AnalyzerSpec::parse(None, Flavor::Search).unwrap();
        let t = spec.build().analyze("f", "quick the fox");
        assert_eq!((t[0].position, t[1].position), (0, 2));
        assert_eq!((t[1].from, t[1].to), (10, 13));
    }

    proptest::proptest! {
        #[test]
        fn ascii_words_are_uax29_words(text in "[a-zA-Z0-9_.,;:' \"\n\t!-]{0,40}") {
            let general: Vec<(usize, &str)> = text
                .split_word_bound_indices()
                .filter(|(_, w)| w.chars().any(char::is_alphanumeric))
                .map(|(i, w)| (i + 3, w))
                .collect();
            proptest::prop_assert_eq!(ascii_words(&text, 3), general);
        }
    }
}
