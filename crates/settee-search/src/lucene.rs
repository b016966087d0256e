//! Lucene's query syntax, as CouchDB's search and nouveau indexes take it in `q`: terms,
//! `field:` prefixes and groups, quoted phrases with `~slop`, `*` and `?` wildcards, `~`
//! fuzzy terms, `/regex/`, `[a TO b]` and `{a TO b}` ranges, `^` boosts, `+`/`-`,
//! `AND`/`OR`/`NOT` (also `&&`, `||`, `!`), and `*:*`. Parsed into a tree the compiler turns
//! into index queries; a clause's occurrence follows Lucene's classic parser.

use crate::error::{Error, Result};

/// Whether a clause must, should or must not match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Occur {
    /// Required.
    Must,
    /// Optional; adds to the score.
    Should,
    /// Excluded.
    MustNot,
}

/// A parsed query.
#[derive(Clone, Debug, PartialEq)]
pub enum Query {
    /// A word as written (escapes removed); the compiler analyzes it.
    Term {
        /// Field searched.
        field: String,
        /// Text.
        text: String,
    },
    /// A quoted phrase.
    Phrase {
        /// Field searched.
        field: String,
        /// Text between the quotes.
        text: String,
        /// `~n` after the closing quote.
        slop: u32,
    },
    /// A term with `*` or `?`.
    Wildcard {
        /// Field searched.
        field: String,
        /// The pattern.
        pattern: String,
    },
    /// `term~n`.
    Fuzzy {
        /// Field searched.
        field: String,
        /// The term.
        text: String,
        /// Most edits.
        distance: u8,
    },
    /// `/regex/`.
    Regex {
        /// Field searched.
        field: String,
        /// The pattern.
        pattern: String,
    },
    /// `[a TO b]`, `{a TO b}`; `*` is open.
    Range {
        /// Field searched.
        field: String,
        /// Lower bound.
        lower: Option<String>,
        /// Upper bound.
        upper: Option<String>,
        /// `[` rather than `{`.
        incl_lower: bool,
        /// `]` rather than `}`.
        incl_upper: bool,
    },
    /// `*:*`.
    All,
    /// Clauses.
    Bool(Vec<(Occur, Query)>),
    /// `^n`.
    Boost(Box<Query>, f32),
}

/// Parses `q` with `default_field` for terms without a field.
pub fn parse(q: &str, default_field: &str) -> Result<Query> {
    let tokens = lex(q)?;
    let mut p = Parser { tokens, at: 0 };
    let query = p.query(default_field)?;
    if p.at < p.tokens.len() {
        return Err(p.error("unexpected ')'"));
    }
    Ok(query)
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Word(String, bool),
    Quoted(String),
    Regex(String),
    Open,
    Close,
    RangeOpen(bool),
    RangeClose(bool),
    Colon,
    Caret,
    Tilde,
    Plus,
    Minus,
    And,
    Or,
    Not,
}

fn special(c: char) -> bool {
    matches!(
        c,
        '+' | '-' | '!' | '(' | ')' | ':' | '^' | '[' | ']' | '"' | '{' | '}' | '~' | '\\' | '/'
    ) || c.is_whitespace()
}

fn lex(q: &str) -> Result<Vec<Tok>> {
    let chars: Vec<char> = q.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let bad = |m: &str| Error::QueryParse(format!("Cannot parse '{q}': {m}"));
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        i += 1;
        let tok = match c {
            c if c.is_whitespace() => continue,
            '(' => Tok::Open,
            ')' => Tok::Close,
            '[' | '{' => {
                out.push(Tok::RangeOpen(c == '['));
                i = range_goop(&chars, i, &mut out);
                continue;
            }
            ']' => Tok::RangeClose(true),
            '}' => Tok::RangeClose(false),
            ':' => Tok::Colon,
            '^' => Tok::Caret,
            '~' => Tok::Tilde,
            '+' => Tok::Plus,
            '-' => Tok::Minus,
            '!' => Tok::Not,
            '&' if next == Some('&') => {
                i += 1;
                Tok::And
            }
            '|' if next == Some('|') => {
                i += 1;
                Tok::Or
            }
            '"' | '/' => {
                let mut s = String::new();
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(bad(if c == '"' {
                                "Lexical error: unterminated quoted phrase"
                            } else {
                                "Lexical error: unterminated regular expression"
                            }))
                        }
                        Some('\\') if chars.get(i + 1).is_some() => {
                            if c == '/' {
                                s.push('\\');
                            }
                            s.push(chars[i + 1]);
                            i += 2;
                        }
                        Some(&e) if e == c => {
                            i += 1;
                            break;
                        }
                        Some(&e) => {
                            s.push(e);
                            i += 1;
                        }
                    }
                }
                if c == '"' {
                    Tok::Quoted(s)
                } else {
                    Tok::Regex(s)
                }
            }
            _ => {
                let mut s = String::new();
                let mut wild = false;
                let mut ch = Some(c);
                i -= 1;
                while let Some(c) = ch {
                    if c == '\\' {
                        let Some(&e) = chars.get(i + 1) else {
                            return Err(bad("Lexical error: escape at the end"));
                        };
                        s.push(e);
                        i += 2;
                    } else if special(c) && !(c == '-' || c == '+')
                        || (c == '-' || c == '+') && s.is_empty()
                    {
                        break;
                    } else {
                        wild |= c == '*' || c == '?';
                        s.push(c);
                        i += 1;
                    }
                    ch = chars.get(i).copied();
                }
                match s.as_str() {
                    "AND" => Tok::And,
                    "OR" => Tok::Or,
                    "NOT" => Tok::Not,
                    _ => Tok::Word(s, wild),
                }
            }
        };
        out.push(tok);
    }
    Ok(out)
}

/// A range's bounds, lexed as Lucene lexes them: anything but white space and the
/// closing brackets (so `[-5 TO 5]` works), or quoted; returns where the range ends.
fn range_goop(chars: &[char], mut i: usize, out: &mut Vec<Tok>) -> usize {
    loop {
        while chars.get(i).is_some_and(|c| c.is_whitespace()) {
            i += 1;
        }
        match chars.get(i) {
            None => return i,
            Some(']') | Some('}') => return i,
            Some('"') => {
                let mut s = String::new();
                i += 1;
                while let Some(&c) = chars.get(i) {
                    i += 1;
                    match c {
                        '"' => break,
                        '\\' if i < chars.len() => {
                            s.push(chars[i]);
                            i += 1;
                        }
                        c => s.push(c),
                    }
                }
                out.push(Tok::Quoted(s));
            }
            Some(_) => {
                let mut s = String::new();
                while let Some(&c) = chars.get(i) {
                    if c.is_whitespace() || c == ']' || c == '}' {
                        break;
                    }
                    s.push(c);
                    i += 1;
                }
                out.push(Tok::Word(s, false));
            }
        }
    }
}

struct Parser {
    tokens: Vec<Tok>,
    at: usize,
}

#[derive(Clone, Copy, PartialEq)]
enum Conj {
    None,
    And,
    Or,
}

impl Parser {
    fn error(&self, m: &str) -> Error {
        Error::QueryParse(format!("Cannot parse query: {m}"))
    }

    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.at)
    }

    fn bump(&mut self) -> Option<Tok> {
        let t = self.tokens.get(self.at).cloned();
        self.at += 1;
        t
    }

    /// Clauses until `)` or the end, with Lucene's occurrence rules (default OR).
    fn query(&mut self, field: &str) -> Result<Query> {
        let mut clauses: Vec<(Occur, Query)> = Vec::new();
        loop {
            let conj = match self.peek() {
                None | Some(Tok::Close) => break,
                Some(Tok::And) => {
                    self.at += 1;
                    Conj::And
                }
                Some(Tok::Or) => {
                    self.at += 1;
                    Conj::Or
                }
                _ => Conj::None,
            };
            let (required, prohibited) = match self.peek() {
                Some(Tok::Plus) => {
                    self.at += 1;
                    (true, false)
                }
                Some(Tok::Minus | Tok::Not) => {
                    self.at += 1;
                    (false, true)
                }
                _ => (false, false),
            };
            if matches!(self.peek(), None | Some(Tok::Close)) {
                return Err(self.error("Encountered \"<EOF>\""));
            }
            let clause = self.clause(field)?;
            if conj == Conj::And {
                if let Some(last) = clauses.last_mut() {
                    if last.0 != Occur::MustNot {
                        last.0 = Occur::Must;
                    }
                }
            }
            let required = required || (conj == Conj::And && !prohibited);
            let occur = if prohibited {
                Occur::MustNot
            } else if required {
                Occur::Must
            } else {
                Occur::Should
            };
            clauses.push((occur, clause));
        }
        if clauses.is_empty() {
            return Err(self.error("Encountered \"<EOF>\""));
        }
        if clauses.len() == 1 && clauses[0].0 != Occur::MustNot {
            return Ok(clauses.pop().expect("a clause").1);
        }
        Ok(Query::Bool(clauses))
    }

    /// `[field:] (term | phrase | range | (query)) [~n] [^boost]`.
    fn clause(&mut self, field: &str) -> Result<Query> {
        let mut field = field.to_string();
        if let (Some(Tok::Word(name, _)), Some(Tok::Colon)) =
            (self.tokens.get(self.at), self.tokens.get(self.at + 1))
        {
            field = name.clone();
            self.at += 2;
        }
        let q = match self.bump() {
            Some(Tok::Open) => {
                let q = self.query(&field)?;
                if self.bump() != Some(Tok::Close) {
                    return Err(self.error("Encountered \"<EOF>\", expecting \")\""));
                }
                q
            }
            Some(Tok::Quoted(text)) => {
                let slop = self.tilde()?.map_or(0, |n| n as u32);
                Query::Phrase { field, text, slop }
            }
            Some(Tok::Regex(pattern)) => Query::Regex { field, pattern },
            Some(Tok::RangeOpen(incl_lower)) => self.range(field, incl_lower)?,
            Some(Tok::Word(text, wild)) => {
                if text == "*" && field == "*" {
                    Query::All
                } else if let Some(d) = self.tilde()? {
                    let distance = if d >= 1.0 { d.min(2.0) as u8 } else { 2 };
                    Query::Fuzzy {
                        field,
                        text,
                        distance,
                    }
                } else if wild {
                    Query::Wildcard {
                        field,
                        pattern: text,
                    }
                } else {
                    Query::Term { field, text }
                }
            }
            other => return Err(self.error(&format!("Encountered {other:?}"))),
        };
        if self.peek() == Some(&Tok::Caret) {
            self.at += 1;
            let Some(Tok::Word(n, _)) = self.bump() else {
                return Err(self.error("a boost must be a number"));
            };
            let boost: f32 = n
                .parse()
                .map_err(|_| self.error(&format!("'{n}' is not a boost")))?;
            return Ok(Query::Boost(Box::new(q), boost));
        }
        Ok(q)
    }

    /// `~` and its optional number: `Some(2.0)` for a bare `~`.
    fn tilde(&mut self) -> Result<Option<f32>> {
        if self.peek() != Some(&Tok::Tilde) {
            return Ok(None);
        }
        self.at += 1;
        if let Some(Tok::Word(n, false)) = self.peek() {
            if let Ok(v) = n.parse::<f32>() {
                self.at += 1;
                return Ok(Some(v));
            }
        }
        Ok(Some(2.0))
    }

    fn range(&mut self, field: String, incl_lower: bool) -> Result<Query> {
        let bound = |t: Option<Tok>| match t {
            Some(Tok::Word(w, _)) if w == "*" => Some(None),
            Some(Tok::Word(w, _)) | Some(Tok::Quoted(w)) => Some(Some(w)),
            _ => None,
        };
        let two = || Error::QueryParse("Cannot parse query: a range needs two bounds".into());
        let lower = bound(self.bump()).ok_or_else(two)?;
        if !matches!(self.bump(), Some(Tok::Word(w, _)) if w == "TO") {
            return Err(self.error("a range needs TO"));
        }
        let upper = bound(self.bump()).ok_or_else(two)?;
        let Some(Tok::RangeClose(incl_upper)) = self.bump() else {
            return Err(self.error("a range must end with ] or }"));
        };
        Ok(Query::Range {
            field,
            lower,
            upper,
            incl_lower,
            incl_upper,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn term(f: &str, t: &str) -> Query {
        Query::Term {
            field: f.into(),
            text: t.into(),
        }
    }

    #[test]
    fn terms_fields_and_default_or() {
        assert_eq!(parse("fox", "default").unwrap(), term("default", "fox"));
        assert_eq!(
            parse("title:fox dog", "default").unwrap(),
            Query::Bool(vec![
                (Occur::Should, term("title", "fox")),
                (Occur::Should, term("default", "dog")),
            ])
        );
    }

    #[test]
    fn and_or_not_follow_lucene() {
        assert_eq!(
            parse("a AND b OR c", "d").unwrap(),
            Query::Bool(vec![
                (Occur::Must, term("d", "a")),
                (Occur::Must, term("d", "b")),
                (Occur::Should, term("d", "c")),
            ])
        );
        assert_eq!(
            parse("+a -b NOT c", "d").unwrap(),
            Query::Bool(vec![
                (Occur::Must, term("d", "a")),
                (Occur::MustNot, term("d", "b")),
                (Occur::MustNot, term("d", "c")),
            ])
        );
        assert_eq!(
            parse("a && !b", "d").unwrap(),
            Query::Bool(vec![
                (Occur::Must, term("d", "a")),
                (Occur::MustNot, term("d", "b"))
            ])
        );
    }

    #[test]
    fn groups_phrases_ranges_boosts() {
        assert_eq!(
            parse("title:(a b)", "d").unwrap(),
            Query::Bool(vec![
                (Occur::Should, term("title", "a")),
                (Occur::Should, term("title", "b"))
            ])
        );
        assert_eq!(
            parse("\"quick fox\"~2", "d").unwrap(),
            Query::Phrase {
                field: "d".into(),
                text: "quick fox".into(),
                slop: 2
            }
        );
        assert_eq!(
            parse("n:[1 TO *}", "d").unwrap(),
            Query::Range {
                field: "n".into(),
                lower: Some("1".into()),
                upper: None,
                incl_lower: true,
                incl_upper: false
            }
        );
        assert_eq!(
            parse("a^2.5", "d").unwrap(),
            Query::Boost(Box::new(term("d", "a")), 2.5)
        );
        assert_eq!(parse("*:*", "d").unwrap(), Query::All);
        assert!(matches!(
            parse("n:[-5 TO \"5\"]", "d").unwrap(),
            Query::Range { lower: Some(l), upper: Some(u), .. } if l == "-5" && u == "5"
        ));
    }

    #[test]
    fn wildcards_fuzzy_regex_escapes() {
        assert_eq!(
            parse("fo*", "d").unwrap(),
            Query::Wildcard {
                field: "d".into(),
                pattern: "fo*".into()
            }
        );
        assert_eq!(
            parse("fox~1", "d").unwrap(),
            Query::Fuzzy {
                field: "d".into(),
                text: "fox".into(),
                distance: 1
            }
        );
        assert_eq!(
            parse("/f.x/", "d").unwrap(),
            Query::Regex {
                field: "d".into(),
                pattern: "f.x".into()
            }
        );
        assert_eq!(parse(r"a\:b", "d").unwrap(), term("d", "a:b"));
        assert_eq!(parse("wi-fi", "d").unwrap(), term("d", "wi-fi"));
        assert!(!parse("price:-3", "d").unwrap_err().to_string().is_empty());
    }

    #[test]
    fn malformed_queries_fail() {
        for q in [
            "", "(a", "a)", "\"open", "title:", "a AND", "[1 TO 2", "a^x", "n:[1 2]",
        ] {
            assert!(parse(q, "d").is_err(), "{q}");
        }
    }
}
