//! A search index without a database: documents built from fields, searched with each
//! parameter, checked against what the documents hold.

use serde_json::{json, Value};
use settee_db::SeqVector;
use settee_search::analyzer::Flavor;
use settee_search::{
    build_doc, Grouping, Highlight, IndexDef, IndexMeta, Indexed, SearchIndex, SearchRequest,
    SortKey,
};

fn field(name: &str, value: Value, opts: Value) -> Indexed {
    Indexed::from_json(&json!(["auto", name, value, opts])).unwrap()
}

const WORDS: &[&str] = &[
    "apple", "banana", "cherry", "damson", "elder", "fig", "grape",
];

/// 1,000 documents: `title` (two words), `n` (a number), `kind` (a facet), `body` stored.
fn index(dir: &std::path::Path) -> SearchIndex {
    index_with(dir, false)
}

/// The same, with pairs of adjacent terms indexed (`index_phrases`) or not.
fn index_with(dir: &std::path::Path, pairs: bool) -> SearchIndex {
    let ddoc = json!({"indexes": {"i": {"index": "function(d){}", "index_phrases": pairs}}});
    let def = IndexDef::find("_design/d", &ddoc, "i", Flavor::Search, false).unwrap();
    let index = SearchIndex::open(dir, def.clone(), 1).unwrap();
    let mut batch = Vec::new();
    for i in 0..1000u64 {
        let id = format!("doc{i:04}");
        let title = format!("{} {}", WORDS[i as usize % 7], WORDS[i as usize % 5]);
        let fields = vec![
            field("default", json!(title), json!({})),
            field("title", json!(title), json!({"store": true})),
            field("n", json!(i), json!({"store": true, "facet": true})),
            field("kind", json!(format!("k{}", i % 3)), json!({"facet": true})),
            field(
                "body",
                json!(format!("The quick brown fox number {i} jumps")),
                json!({"store": true}),
            ),
        ];
        batch.push((
            id.clone(),
            Some(build_doc(index.fields(), &id, None, &fields)),
        ));
    }
    index.add(batch).unwrap();
    index
        .commit(IndexMeta {
            seq: SeqVector(vec![1000]),
            purge_seq: 0,
        })
        .unwrap();
    index
}

fn req(q: &str) -> SearchRequest {
    SearchRequest {
        q: q.into(),
        limit: 25,
        ..SearchRequest::default()
    }
}

#[test]
fn terms_numbers_phrases_and_booleans() {
    for pairs in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        queries_answer(&index_with(dir.path(), pairs));
    }
}

fn queries_answer(ix: &SearchIndex) {
    // apple: i % 7 == 0 (143), or i % 5 == 0 (no: index 0 of WORDS is apple for %5 too).
    let expect = (0..1000).filter(|i| i % 7 == 0 || i % 5 == 0).count() as u64;
    assert_eq!(ix.search(&req("apple")).unwrap().total, expect);
    assert_eq!(ix.search(&req("title:APPLE")).unwrap().total, expect);
    assert_eq!(ix.search(&req("n:42")).unwrap().total, 1);
    assert_eq!(ix.search(&req("n:[10 TO 19]")).unwrap().total, 10);
    assert_eq!(ix.search(&req("n:{10 TO 19}")).unwrap().total, 8);
    assert_eq!(ix.search(&req("n:[990 TO *]")).unwrap().total, 10);
    let both = (0..1000)
        .filter(|i| (i % 7 == 1 && i % 5 == 2) || (i % 7 == 2 && i % 5 == 1))
        .count() as u64;
    assert_eq!(ix.search(&req("banana AND cherry")).unwrap().total, both);
    assert_eq!(
        ix.search(&req("+banana -cherry")).unwrap().total,
        (0..1000)
            .filter(|i| (i % 7 == 1 || i % 5 == 1) && !(i % 7 == 2 || i % 5 == 2))
            .count() as u64
    );
    assert_eq!(ix.search(&req("body:\"brown fox\"")).unwrap().total, 1000);
    assert_eq!(ix.search(&req("body:\"fox brown\"")).unwrap().total, 0);
    assert_eq!(ix.search(&req("body:\"quick fox\"~1")).unwrap().total, 1000);
    assert_eq!(ix.search(&req("body:\"number 7 jumps\"")).unwrap().total, 1);
    // Stop words leave gaps that phrases keep.
    assert_eq!(
        ix.search(&req("body:\"the quick brown\"")).unwrap().total,
        1000
    );
    assert_eq!(
        ix.search(&req("body:\"quick the brown\"")).unwrap().total,
        0
    );
    assert_eq!(
        ix.search(&req("body:\"quick the brown\"~1")).unwrap().total,
        1000
    );
    // Phrases do not span two fields' values, nor match pairs as words.
    assert_eq!(ix.search(&req("\"apple jumps\"")).unwrap().total, 0);
    assert_eq!(ix.search(&req("body:brown*")).unwrap().total, 1000);
    assert_eq!(
        ix.search(&req("body:[brown TO brown]")).unwrap().total,
        1000
    );
    assert_eq!(
        ix.search(&req("title:ban*")).unwrap().total,
        ix.search(&req("banana")).unwrap().total
    );
    assert_eq!(
        ix.search(&req("title:b?nana")).unwrap().total,
        ix.search(&req("banana")).unwrap().total
    );
    assert_eq!(
        ix.search(&req("title:bananna~1")).unwrap().total,
        ix.search(&req("banana")).unwrap().total
    );
    assert_eq!(
        ix.search(&req("title:/ch.rry/")).unwrap().total,
        ix.search(&req("cherry")).unwrap().total
    );
    assert_eq!(ix.search(&req("*:*")).unwrap().total, 1000);
    assert_eq!(ix.search(&req("the")).unwrap().total, 0);
    assert_eq!(ix.search(&req("kind:k1")).unwrap().total, 333);
    assert!(ix.search(&req("title:(apple")).is_err());
}

#[test]
fn sorting_and_bookmarks_page_without_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let ix = index(dir.path());
    let mut r = req("*:*");
    r.sort = vec![SortKey::parse("-n").unwrap()];
    r.limit = 7;
    let mut seen = Vec::new();
    loop {
        let res = ix.search(&r).unwrap();
        assert_eq!(res.total, 1000);
        if res.hits.is_empty() {
            break;
        }
        seen.extend(res.hits.iter().map(|h| h.fields["n"].as_u64().unwrap()));
        r.bookmark = Some(res.bookmark);
    }
    assert_eq!(seen, (0..1000).rev().collect::<Vec<u64>>());
    // Relevance with ties pages through every hit once.
    let mut r = req("apple OR banana");
    r.limit = 13;
    let mut ids = Vec::new();
    loop {
        let res = ix.search(&r).unwrap();
        if res.hits.is_empty() {
            break;
        }
        ids.extend(res.hits.iter().map(|h| h.id.clone()));
        r.bookmark = Some(res.bookmark);
    }
    let total = ix.search(&req("apple OR banana")).unwrap().total as usize;
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!((ids.len(), unique.len()), (total, total));
    // Strings.
    let mut r = req("*:*");
    r.sort = vec![
        SortKey::parse("title<string>").unwrap(),
        SortKey::parse("-n").unwrap(),
    ];
    let res = ix.search(&r).unwrap();
    assert_eq!(res.hits[0].fields["title"], "apple apple");
    assert_eq!(res.hits[0].order[0], "apple apple");
    assert_eq!(res.hits[0].fields["n"], 980);
    assert!(SortKey::parse("n<date>").is_err());
    assert!(SortKey::parse("a b").is_err());
    let mut r = req("*:*");
    r.bookmark = Some("not a bookmark".into());
    assert!(ix.search(&r).is_err());
}

#[test]
fn counts_ranges_drilldown_groups_highlights() {
    let dir = tempfile::tempdir().unwrap();
    let ix = index(dir.path());
    let mut r = req("apple");
    r.counts = Some(vec!["kind".into()]);
    r.ranges = Some(vec![(
        "n".into(),
        vec![
            (
                "low".into(),
                settee_search::compile::NumRange::new(
                    "n",
                    std::ops::Bound::Unbounded,
                    std::ops::Bound::Excluded(500.0),
                ),
            ),
            (
                "high".into(),
                settee_search::compile::NumRange::new(
                    "n",
                    std::ops::Bound::Included(500.0),
                    std::ops::Bound::Unbounded,
                ),
            ),
        ],
    )]);
    let res = ix.search(&r).unwrap();
    let apples: Vec<u64> = (0..1000).filter(|i| i % 7 == 0 || i % 5 == 0).collect();
    let kinds = res.counts.unwrap();
    for k in 0..3 {
        let n = apples.iter().filter(|i| *i % 3 == k).count() as u64;
        assert_eq!(kinds["kind"][format!("k{k}")], n);
    }
    let ranges = res.ranges.unwrap();
    assert_eq!(
        ranges["n"]["low"],
        apples.iter().filter(|i| **i < 500).count() as u64
    );
    assert_eq!(
        ranges["n"]["high"],
        apples.iter().filter(|i| **i >= 500).count() as u64
    );
    let mut r = req("apple");
    r.drilldown = vec![("kind".into(), vec!["k1".into(), "k2".into()])];
    assert_eq!(
        ix.search(&r).unwrap().total,
        apples.iter().filter(|i| *i % 3 != 0).count() as u64
    );
    let mut r = req("apple");
    r.limit = 2;
    r.sort = vec![SortKey::parse("n").unwrap()];
    r.group = Some(Grouping {
        field: "kind".into(),
        limit: 2,
        sort: vec![SortKey::parse("n").unwrap()],
    });
    let res = ix.search(&r).unwrap();
    let groups = res.groups.unwrap();
    assert_eq!(groups.len(), 2);
    assert_eq!(groups[0].by, "k0");
    assert_eq!(
        groups[0]
            .hits
            .iter()
            .map(|h| h.fields["n"].as_u64().unwrap())
            .collect::<Vec<_>>(),
        [0, 15]
    );
    // k2's first apple (5) comes before k1's (7).
    assert_eq!(groups[1].by, "k2");
    assert_eq!(
        groups[1].total,
        apples.iter().filter(|i| *i % 3 == 2).count() as u64
    );
    let mut r = req("body:jumps AND n:7");
    r.highlight = Some(Highlight {
        fields: vec!["body".into()],
        pre: "<b>".into(),
        post: "</b>".into(),
        number: 1,
        size: 100,
    });
    let res = ix.search(&r).unwrap();
    assert_eq!(
        res.hits[0].highlights.as_ref().unwrap()["body"],
        json!(["The quick brown fox number 7 <b>jumps</b>"])
    );
}

/// A one-term first page is answered on the caller's thread with exactly what the general
/// path answers; anything else is left to it, except a query that does not parse.
#[test]
fn quick_searches_are_one_term_first_pages_answered_alike() {
    let dir = tempfile::tempdir().unwrap();
    let ix = index(dir.path());
    for q in ["apple", "title:cherry", "body:fox", "missing"] {
        for limit in [0, 1, 7, 25, 200] {
            let r = SearchRequest { limit, ..req(q) };
            let quick = ix.search_if_quick(&r).expect("one term is quick").unwrap();
            assert_eq!(quick, ix.search(&r).unwrap(), "{q} {limit}");
        }
    }
    // A boolean query of one clause that must or should match is that clause (as Mango's
    // `$text` builds them): quick, and scored as the clause alone.
    use settee_search::lucene::{parse, Occur, Query};
    for occur in [Occur::Must, Occur::Should] {
        let built = SearchRequest {
            query: Some(Query::Bool(vec![(
                occur,
                parse("apple", "default").unwrap(),
            )])),
            ..req("")
        };
        let quick = ix.search_if_quick(&built).expect("one clause").unwrap();
        assert_eq!(quick, ix.search(&req("apple")).unwrap());
    }
    let none = SearchRequest {
        query: Some(Query::Bool(vec![(
            Occur::MustNot,
            parse("apple", "default").unwrap(),
        )])),
        ..req("")
    };
    assert!(ix.search_if_quick(&none).is_none());
    let sorted = SearchRequest {
        sort: vec![SortKey::Field {
            name: "n".into(),
            desc: false,
            string: false,
        }],
        ..req("apple")
    };
    let counted = SearchRequest {
        counts: Some(vec!["kind".into()]),
        ..req("apple")
    };
    for slow in [
        req("\"apple banana\""),
        req("apple OR fig"),
        sorted,
        counted,
    ] {
        assert!(ix.search_if_quick(&slow).is_none(), "{}", slow.q);
    }
    assert!(matches!(ix.search_if_quick(&req("ap(ple")), Some(Err(_))));
}
