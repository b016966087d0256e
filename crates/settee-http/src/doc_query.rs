//! The query of a document read (`GET /{db}/{docid}`), parsed as CouchDB parses it: a flag
//! is on when any of its values is exactly `true` and other values are ignored, revisions
//! are checked wherever they appear, and `open_revs` and `atts_since` are JSON lists.

use serde_json::Value;
use settee_db::DocOptions;
use settee_json::Rev;

use crate::doc::parse_rev;
use crate::error::{HttpError, HttpResult};
use crate::request::Query;

/// Which revisions an `open_revs` read asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenRevs {
    /// Every leaf.
    All,
    /// These revisions (never empty: an empty list is a plain read).
    List(Vec<Rev>),
}

/// Everything a document read's query asks for.
#[derive(Debug, Clone, Default)]
pub struct DocQuery {
    /// `rev`: the revision to read instead of the winner.
    pub rev: Option<Rev>,
    /// `open_revs`: several revisions at once.
    pub open_revs: Option<OpenRevs>,
    /// `latest`: the winner despite `rev`, or the leaves below each of `open_revs`.
    pub latest: bool,
    /// `deleted`: a deleted winner is read rather than reported as `deleted`.
    pub deleted: bool,
    /// What to show; `atts_since` (which turns on `attachments`) applies to plain reads only.
    pub opts: DocOptions,
    /// `atts_since`, kept apart until it is known to apply.
    atts_since: Option<Vec<Rev>>,
}

impl DocQuery {
    /// Reads the query, refusing what CouchDB refuses: a bad revision anywhere, and
    /// `open_revs` or `atts_since` that are not JSON lists of revisions.
    pub fn parse(q: &Query) -> HttpResult<DocQuery> {
        let on = |key: &str| q.0.iter().any(|(k, v)| k == key && v == "true");
        let meta = on("meta");
        let mut out = DocQuery {
            latest: on("latest"),
            deleted: on("deleted"),
            opts: DocOptions {
                revs: on("revs"),
                revs_info: on("revs_info") || meta,
                conflicts: on("conflicts") || meta,
                deleted_conflicts: on("deleted_conflicts") || meta,
                local_seq: on("local_seq"),
                attachments: on("attachments"),
                att_encoding_info: on("att_encoding_info"),
                atts_since: None,
            },
            ..DocQuery::default()
        };
        for (k, v) in &q.0 {
            match k.as_str() {
                "rev" => out.rev = Some(parse_rev(v)?),
                "open_revs" if v == "all" => out.open_revs = Some(OpenRevs::All),
                "open_revs" => out.open_revs = Some(OpenRevs::List(rev_list(v)?)),
                "atts_since" => out.atts_since = Some(rev_list(v)?),
                _ => {}
            }
        }
        if out.open_revs == Some(OpenRevs::List(Vec::new())) {
            out.open_revs = None;
        }
        if out.open_revs.is_none() {
            if let Some(since) = out.atts_since.take() {
                out.opts.attachments = true;
                out.opts.atts_since = Some(since);
            }
        }
        Ok(out)
    }

    /// The revision a plain read opens: none (the winner) when `latest` asks for the newest.
    pub fn rev_to_open(&self) -> Option<&Rev> {
        self.rev.as_ref().filter(|_| !self.latest)
    }
}

/// A JSON list of revisions in a query parameter.
fn rev_list(text: &str) -> HttpResult<Vec<Rev>> {
    match serde_json::from_str::<Value>(text) {
        Err(_) => Err(HttpError::bad_request("invalid UTF-8 JSON")),
        Ok(Value::Array(items)) => items
            .iter()
            .map(|r| {
                r.as_str()
                    .ok_or_else(|| HttpError::bad_request("Invalid rev format"))
                    .and_then(parse_rev)
            })
            .collect(),
        Ok(_) => Err(HttpError::bad_request("Invalid list of revisions")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> HttpResult<DocQuery> {
        DocQuery::parse(&Query::parse(Some(query)))
    }

    #[test]
    fn flags_are_on_only_for_true_and_any_true_wins() {
        let q =
            parse("revs=true&conflicts=maybe&local_seq=1&latest=true&latest=false&deleted=true")
                .unwrap();
        assert!(q.opts.revs && q.latest && q.deleted);
        assert!(!q.opts.conflicts && !q.opts.local_seq && !q.opts.attachments);
        let meta = parse("meta=true").unwrap().opts;
        assert!(meta.revs_info && meta.conflicts && meta.deleted_conflicts && !meta.revs);
    }

    #[test]
    fn revisions_are_checked_wherever_they_appear() {
        assert_eq!(
            parse("rev=garbage&open_revs=all").unwrap_err().reason,
            "Invalid rev format"
        );
        assert_eq!(
            parse("open_revs=nope").unwrap_err().reason,
            "invalid UTF-8 JSON"
        );
        assert_eq!(
            parse("open_revs=%5B1%5D").unwrap_err().reason,
            "Invalid rev format"
        );
        assert_eq!(
            parse("open_revs=%7B%7D").unwrap_err().reason,
            "Invalid list of revisions"
        );
        assert_eq!(
            parse("atts_since=%22x%22").unwrap_err().reason,
            "Invalid list of revisions"
        );
        let q = parse("open_revs=%5B%221-a%22%5D&rev=2-b").unwrap();
        assert_eq!(
            q.open_revs,
            Some(OpenRevs::List(vec![Rev::parse("1-a").unwrap()]))
        );
        assert_eq!(q.rev, Some(Rev::parse("2-b").unwrap()));
    }

    #[test]
    fn an_empty_open_revs_is_a_plain_read_and_atts_since_applies_only_to_one() {
        let q = parse("open_revs=%5B%5D&atts_since=%5B%221-a%22%5D").unwrap();
        assert_eq!(q.open_revs, None);
        assert!(q.opts.attachments);
        assert_eq!(q.opts.atts_since, Some(vec![Rev::parse("1-a").unwrap()]));
        let q = parse("open_revs=all&atts_since=%5B%221-a%22%5D").unwrap();
        assert!(!q.opts.attachments && q.opts.atts_since.is_none());
    }

    #[test]
    fn latest_opens_the_winner_despite_rev() {
        assert_eq!(parse("rev=1-a&latest=true").unwrap().rev_to_open(), None);
        assert_eq!(
            parse("rev=1-a").unwrap().rev_to_open(),
            Some(&Rev::parse("1-a").unwrap())
        );
    }
}
