//! Highlights: fragments of a hit's stored text with the query's terms marked, best
//! fragments first, as CouchDB's `highlight_*` parameters ask for them.

use std::collections::HashSet;

use serde_json::{Map, Value};

use crate::analyzer::Analyzer;
use crate::compile::Wanted;
use crate::query::Highlight;

/// Highlighted fragments of every field `h` names, from the hit's stored fields.
pub fn fields(
    h: &Highlight,
    stored: &Map<String, Value>,
    wanted: &Wanted,
    analyzer: &mut Analyzer,
) -> Map<String, Value> {
    let mut out = Map::new();
    for field in &h.fields {
        let terms: HashSet<&str> = wanted
            .terms
            .iter()
            .filter(|(f, _)| f == field || f == "default")
            .map(|(_, t)| t.as_str())
            .collect();
        let texts: Vec<&str> = match stored.get(field) {
            Some(Value::String(s)) => vec![s.as_str()],
            Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        };
        let mut frags: Vec<(usize, String)> = Vec::new();
        for text in texts {
            frags.extend(fragments(h, field, text, &terms, analyzer));
        }
        frags.sort_by_key(|f| std::cmp::Reverse(f.0));
        let list = frags
            .into_iter()
            .take(h.number)
            .map(|(_, s)| Value::String(s))
            .collect();
        out.insert(field.clone(), Value::Array(list));
    }
    out
}

/// The fragments of `text` that hold a wanted term, with their scores (distinct terms
/// matched, then matches).
fn fragments(
    h: &Highlight,
    field: &str,
    text: &str,
    terms: &HashSet<&str>,
    analyzer: &mut Analyzer,
) -> Vec<(usize, String)> {
    let tokens = analyzer.analyze(field, text);
    let size = if h.size == 0 { 100 } else { h.size };
    let mut out = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while start < text.len() {
        let mut end = text.len();
        let mut hits: Vec<(usize, usize)> = Vec::new();
        let mut distinct: HashSet<&str> = HashSet::new();
        while i < tokens.len() {
            let t = &tokens[i];
            if text[start..t.from].chars().count() >= size {
                end = t.from;
                break;
            }
            if terms.contains(t.text.as_str()) {
                hits.push((t.from, t.to));
                distinct.insert(terms.get(t.text.as_str()).copied().unwrap_or_default());
            }
            i += 1;
        }
        if !hits.is_empty() {
            let mut s = String::new();
            let mut at = start;
            for (from, to) in &hits {
                s.push_str(&text[at..*from]);
                s.push_str(&h.pre);
                s.push_str(&text[*from..*to]);
                s.push_str(&h.post);
                at = *to;
            }
            s.push_str(&text[at..end]);
            out.push((distinct.len() * 1000 + hits.len(), s));
        }
        if end == text.len() {
            break;
        }
        start = end;
    }
    out
}
