//! Choosing the index a query runs on, as CouchDB chooses: among the JSON indexes whose
//! fields the selector requires (sort fields excepted) and whose order can give the sort,
//! the one whose leading fields the selector narrows most, then the one with the fewest
//! fields, then by design document and name. Indexes with a partial filter serve only
//! queries that name them in `use_index`. With no usable index, CouchDB's special `_all_docs`
//! index serves the query (with a warning), unless a sort or `allow_fallback` forbids it.

use std::cmp::Ordering;

use serde_json::{json, Value};

use crate::def::JsonIndex;
use crate::selector::Range;
use crate::text::TextIndex;
use crate::text_query::TextQuery;
use crate::{field_path, Error, FindQuery, Result};

/// What CouchDB says when a query runs on the `_all_docs` index.
pub const NO_INDEX: &str = "No matching index found, create an index to optimize query time.";

/// The index a query runs on.
#[derive(Debug, Clone, PartialEq)]
pub enum Chosen {
    /// None can give the sort asked for (`_find` refuses the query; `_explain` shows
    /// `"index": null`).
    Nothing,
    /// CouchDB's special index: every document by id.
    AllDocs,
    /// A JSON index, with the selector's range on each of its fields (in order).
    Json(JsonIndex, Vec<Option<Range>>),
    /// A text index.
    Text(TextIndex),
}

/// Why an index was or was not chosen, as `_explain` lists it.
#[derive(Debug, Clone)]
pub struct Candidate {
    /// The index (`None`: `_all_docs`, or the text index).
    pub index: Option<JsonIndex>,
    /// The text index, when it is one.
    pub text: Option<TextIndex>,
    /// Whether it could serve the query.
    pub usable: bool,
    /// CouchDB's names for why it was not chosen.
    pub reasons: Vec<&'static str>,
    /// Its place among the usable indexes (1 is the chosen one), 0 when unusable.
    pub ranking: usize,
    /// Whether it holds every field the query needs.
    pub covering: bool,
}

/// A query's plan.
#[derive(Debug)]
pub struct Plan {
    /// The index it runs on.
    pub chosen: Chosen,
    /// Warnings for the answer.
    pub warnings: Vec<String>,
    /// Whether the chosen index answers without reading documents.
    pub covering: bool,
    /// Every index considered, for `_explain`.
    pub candidates: Vec<Candidate>,
    /// Why the query cannot run, when it cannot.
    pub refusal: Option<Error>,
}

/// CouchDB's name for an index `use_index` names.
fn named_index(ddoc: &str, name: Option<&String>) -> String {
    match name {
        None => ddoc.to_string(),
        Some(n) => format!("{ddoc}, {n}"),
    }
}

/// Whether `use_index` names the index `name` of design document `ddoc`.
fn names(q: &FindQuery, ddoc: &str, name: &str) -> bool {
    match &q.use_index {
        None => false,
        Some((d, n)) => d == ddoc && n.as_ref().is_none_or(|n| n == name),
    }
}

/// The text indexes that can serve `q`, and a candidate for each text index.
fn text_candidates(texts: &[TextIndex], q: &FindQuery) -> (Vec<TextIndex>, Vec<Candidate>) {
    // Most databases have no text index: their queries are not translated at all.
    if texts.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let wanted = TextQuery::new(&q.selector.to_json()).map(|t| t.indexable_fields());
    let mut usable = Vec::new();
    let candidates = texts
        .iter()
        .map(|t| {
            let reasons = if t.partitioned == q.partition.is_empty() {
                vec!["scope_mismatch"]
            } else if t.partial().is_some() && !names(q, &t.ddoc, &t.name) {
                vec!["is_partial"]
            } else if q.selector.is_empty() {
                vec!["empty_selector"]
            } else {
                match (t.columns(), &wanted) {
                    (_, Err(_)) => vec!["field_mismatch"],
                    (None, Ok(_)) => vec![],
                    (Some(cols), Ok(w)) if w.iter().all(|f| cols.contains(f)) => vec![],
                    (Some(_), Ok(_)) => vec!["field_mismatch"],
                }
            };
            if reasons.is_empty() {
                usable.push(t.clone());
            }
            Candidate {
                index: None,
                text: Some(t.clone()),
                usable: reasons.is_empty(),
                reasons,
                ranking: 0,
                covering: false,
            }
        })
        .collect();
    (usable, candidates)
}

/// The one text index among `usable` (CouchDB refuses to choose among several).
fn one_text(usable: &[TextIndex]) -> Result<TextIndex> {
    match usable {
        [one] => Ok(one.clone()),
        _ => Err(Error::query(
            "multiple_text_indexes",
            "You must specify an index with the `use_index` parameter.",
        )),
    }
}

/// The plan of a query on text index `text`, which `use_index` named.
fn text_plan(text: TextIndex, mut candidates: Vec<Candidate>) -> Plan {
    for c in candidates.iter_mut() {
        let chosen = c.text.as_ref() == Some(&text);
        if c.usable && !chosen {
            c.reasons.push("excluded_by_user");
        }
        c.ranking = if chosen { 1 } else { 2 };
    }
    Plan {
        chosen: Chosen::Text(text),
        warnings: Vec::new(),
        covering: false,
        candidates,
        refusal: None,
    }
}

/// Chooses the index for `q` among the JSON and text indexes of a database
/// (`partitioned` or not), in CouchDB's order: a JSON index if one can serve the query, else
/// a text index, else `_all_docs`. A partition query uses partitioned indexes only, any
/// other query global ones only.
pub fn plan(
    indexes: &[JsonIndex],
    texts: &[TextIndex],
    q: &FindQuery,
    partitioned: bool,
) -> Result<Plan> {
    let (usable_text, mut text_candidates) = text_candidates(texts, q);
    let named_text: Vec<TextIndex> = usable_text
        .iter()
        .filter(|t| names(q, &t.ddoc, &t.name))
        .cloned()
        .collect();
    if !named_text.is_empty() {
        return Ok(text_plan(one_text(&named_text)?, text_candidates));
    }
    let named = |i: &JsonIndex| names(q, &i.ddoc, &i.name);
    let mut candidates: Vec<Candidate> = indexes
        .iter()
        .map(|i| {
            // A partial index serves only the queries that name it, whatever their fields.
            let reasons = if i.partitioned == q.partition.is_empty() {
                vec!["scope_mismatch"]
            } else if i.partial.is_some() && !named(i) {
                vec!["is_partial"]
            } else {
                unusable_reasons(i, q)
            };
            Candidate {
                covering: holds_fields(i, q),
                usable: reasons.is_empty(),
                index: Some(i.clone()),
                text: None,
                reasons,
                ranking: 0,
            }
        })
        .collect();
    let mut warnings = Vec::new();
    let wanted: Vec<usize> = (0..candidates.len())
        .filter(|&c| candidates[c].usable && named(candidates[c].index.as_ref().expect("json")))
        .collect();
    let pool: Vec<usize> = if !wanted.is_empty() {
        wanted
    } else {
        if let Some((ddoc, name)) = &q.use_index {
            if !q.allow_fallback {
                return Err(Error::query(
                    "invalid_index",
                    format!(
                        "{} specified by `use_index` could not be found or it is not suitable.",
                        named_index(ddoc, name.as_ref())
                    ),
                ));
            }
            warnings.push(match name {
                None => format!(
                    "{ddoc} was not used because it does not contain a valid index for this query."
                ),
                Some(n) => {
                    format!(
                        "{ddoc}, {n} was not used because it is not a valid index for this query."
                    )
                }
            });
        }
        (0..candidates.len())
            .filter(|&c| candidates[c].usable)
            .collect()
    };
    let mut ranked: Vec<usize> = pool;
    ranked.sort_by(|&a, &b| {
        let (a, b) = (&candidates[a], &candidates[b]);
        better(
            a.index.as_ref().expect("json"),
            b.index.as_ref().expect("json"),
            q,
        )
    });
    for (place, &c) in ranked.iter().enumerate().skip(1) {
        let best = candidates[ranked[0]].index.clone().expect("json");
        let this = candidates[c].index.clone().expect("json");
        candidates[c].ranking = place;
        candidates[c].reasons.push(why_not(&best, &this, q));
    }
    let honoured = ranked
        .first()
        .is_some_and(|&c| named(candidates[c].index.as_ref().expect("json")));
    for c in candidates.iter_mut().filter(|c| c.usable && c.ranking == 0) {
        c.reasons.push("excluded_by_user");
        c.ranking = 1;
    }
    let all_docs = all_docs_allowed(q, partitioned);
    let mut refusal = None;
    let chosen = match ranked.first() {
        Some(&best) => {
            let index = candidates.remove(best).index.expect("json");
            // Selectors compare `_id` byte by byte but index keys collate it: bounds on it
            // would not hold every match, so an `_id` field is read whole.
            let ranges = index
                .columns()
                .iter()
                .map(|c| {
                    (c.as_slice() != ["_id"])
                        .then(|| q.selector.range(c))
                        .flatten()
                })
                .collect();
            Chosen::Json(index, ranges)
        }
        None if !usable_text.is_empty() => {
            let text = one_text(&usable_text)?;
            for c in text_candidates.iter_mut() {
                c.ranking = if c.text.as_ref() == Some(&text) { 1 } else { 2 };
            }
            Chosen::Text(text)
        }
        None if all_docs.is_ok() => {
            if !q.allow_fallback && q.use_index.is_none() {
                return Err(Error::query(
                    "invalid_index",
                    "You must specify an index with the `use_index` parameter.",
                ));
            }
            warnings.push(NO_INDEX.to_string());
            Chosen::AllDocs
        }
        None => {
            refusal = all_docs.err();
            Chosen::Nothing
        }
    };
    let covering = matches!(&chosen, Chosen::Json(i, _) if covers(i, q));
    let mut candidates = order_for_explain(candidates);
    if matches!(chosen, Chosen::Json(..)) {
        for c in text_candidates.iter_mut().filter(|c| c.usable) {
            c.reasons.push("unfavored_type");
            c.ranking = ranked.len() + 1;
        }
    }
    candidates.extend(text_candidates);
    if chosen != Chosen::AllDocs {
        let usable = refusal.is_none() && all_docs_allowed(q, partitioned).is_ok();
        let usable_json = ranked.len().saturating_sub(1);
        let (reason, ranking) = match (usable, honoured) {
            (false, _) => ("field_mismatch", 1),
            (true, true) => ("excluded_by_user", 1),
            (true, false) => ("unfavored_type", usable_json + 1),
        };
        candidates.push(Candidate {
            index: None,
            text: None,
            usable,
            reasons: vec![reason],
            ranking,
            covering: false,
        });
    }
    // Unusable indexes rank after the usable ones, those left out for their partial filter
    // last, as CouchDB ranks them.
    let last_usable = candidates
        .iter()
        .filter(|c| c.usable)
        .map(|c| c.ranking)
        .max()
        .unwrap_or(0);
    for c in candidates.iter_mut().filter(|c| !c.usable) {
        c.ranking = last_usable + 1 + usize::from(c.reasons == ["is_partial"]);
    }
    Ok(Plan {
        chosen,
        warnings,
        covering,
        candidates,
        refusal,
    })
}

/// The candidates as `_explain` lists them: by design document and name, last first.
fn order_for_explain(mut candidates: Vec<Candidate>) -> Vec<Candidate> {
    candidates.sort_by(|a, b| {
        let key = |c: &Candidate| c.index.as_ref().map(|i| (i.ddoc.clone(), i.name.clone()));
        key(b).cmp(&key(a))
    });
    candidates
}

/// Whether `_all_docs` can give the sort `q` asks for: only `_id`, with `_id` bounded. The
/// refusal names the kind of index missing in a `partitioned` database, as CouchDB's does.
fn all_docs_allowed(q: &FindQuery, partitioned: bool) -> Result<()> {
    // Every document would match `$text` there: only a text index can answer it.
    if q.selector.has_text() {
        return Err(Error::query(
            "no_usable_index",
            "No text index exists for this query, try creating one.",
        ));
    }
    if !q.sort.is_empty()
        && (q.sort.iter().any(|f| f != "_id") || !crate::query::bounds_id(&q.selector_json))
    {
        let kind = match (partitioned, q.partition.is_empty()) {
            (false, _) => "",
            (true, false) => " partitioned",
            (true, true) => " global",
        };
        return Err(Error::query(
            "no_usable_index",
            format!("No{kind} index exists for this sort, try indexing by the sort fields."),
        ));
    }
    Ok(())
}

/// CouchDB's reasons an index cannot serve `q` (none when it can).
fn unusable_reasons(i: &JsonIndex, q: &FindQuery) -> Vec<&'static str> {
    if q.selector.has_text() {
        return vec!["field_mismatch"];
    }
    let columns = i.columns();
    let sort: Vec<Vec<String>> = q.sort.iter().map(|f| field_path(f)).collect();
    let mut out = Vec::new();
    let fields_ok = columns.iter().all(|c| {
        sort.contains(c)
            || matches!(c.as_slice(), [f] if f == "_id" || f == "_rev")
            || q.selector.requires(c)
    });
    // The first reason only, as CouchDB names it.
    if !fields_ok {
        out.push("field_mismatch");
    } else if !can_use_sort(&columns, &sort, q) {
        out.push("sort_order_mismatch");
    }
    out
}

/// Whether the index's order gives the sort: the sort fields are a prefix of the index's
/// fields after the fields the selector holds constant.
fn can_use_sort(columns: &[Vec<String>], sort: &[Vec<String>], q: &FindQuery) -> bool {
    let mut cols = columns;
    loop {
        match (cols.first(), sort.first()) {
            (_, None) => return true,
            (None, Some(_)) => return false,
            (Some(c), Some(s)) if c == s => return cols.starts_with(sort),
            (Some(c), _) => {
                if !q.selector.range(c).is_some_and(|r| r.is_constant()) {
                    return false;
                }
                cols = &cols[1..];
            }
        }
    }
}

/// How many leading fields of the index the selector narrows.
fn prefix(i: &JsonIndex, q: &FindQuery) -> usize {
    i.columns()
        .iter()
        .take_while(|c| q.selector.range(c).is_some())
        .count()
}

/// How many of the fields the selector gives a range the index's leading fields leave
/// out (CouchDB's prefix difference; fewer is better).
fn overlap_gap(i: &JsonIndex, q: &FindQuery) -> usize {
    q.selector.ranged_fields().saturating_sub(prefix(i, q))
}

/// `a` before `b` when `a` is the better index for `q`: the smaller prefix difference,
/// then fewer fields, then by design document and name.
fn better(a: &JsonIndex, b: &JsonIndex, q: &FindQuery) -> Ordering {
    overlap_gap(a, q)
        .cmp(&overlap_gap(b, q))
        .then(a.fields.len().cmp(&b.fields.len()))
        .then_with(|| a.ddoc.cmp(&b.ddoc))
        .then_with(|| a.name.cmp(&b.name))
}

/// CouchDB's reason a usable index lost to `best`: `less_overlap` for any index that
/// leaves out a ranged field, else more fields, else the name.
fn why_not(best: &JsonIndex, this: &JsonIndex, q: &FindQuery) -> &'static str {
    if overlap_gap(this, q) > 0 {
        "less_overlap"
    } else if this.fields.len() > best.fields.len() {
        "too_many_fields"
    } else {
        "alphabetically_comes_after"
    }
}

/// Whether index `i` holds every field `q` reads and returns, so that its rows answer
/// without reading documents (CouchDB 3.4+): `fields` given, each an indexed field or
/// `_id`, the selector reading only such fields, and no `_conflicts` asked for.
pub fn covers(i: &JsonIndex, q: &FindQuery) -> bool {
    holds_fields(i, q) && q.selector.fields().iter().all(|f| held(i, f))
}

/// Whether index `i` holds every field `q` returns (how `_explain`'s candidates judge
/// covering: by `fields` alone).
fn holds_fields(i: &JsonIndex, q: &FindQuery) -> bool {
    let Some(fields) = q.fields.as_ref().filter(|f| !f.is_empty()) else {
        return false;
    };
    !q.conflicts && fields.iter().all(|f| held(i, f))
}

/// Whether field `f` is `_id` or one of the index's.
fn held(i: &JsonIndex, f: &str) -> bool {
    f == "_id" || i.fields.iter().any(|(c, _)| c == f)
}

impl Candidate {
    /// The candidate as `_explain`'s `index_candidates` lists it.
    pub fn to_json(&self) -> Value {
        let (index, covering) = match (&self.index, &self.text) {
            (Some(i), _) => (i.to_json(), json!(self.covering)),
            (None, Some(t)) => (t.to_json(), json!(false)),
            (None, None) => (crate::index::all_docs_json(), Value::Null),
        };
        let reasons: Vec<Value> = self.reasons.iter().map(|r| json!({"name": r})).collect();
        json!({"index": index, "analysis": {"usable": self.usable, "reasons": reasons,
            "ranking": self.ranking, "covering": covering}})
    }
}
