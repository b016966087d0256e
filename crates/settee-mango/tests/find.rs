//! `_find` on a real database: matching, paging by bookmark, skip and limit, `_id` sorts,
//! projections, warnings and CouchDB's refusals; checked against the same query done by hand.

mod common;

use common::{catalog_and_views, views_of};
use serde_json::{json, Map, Value};
use settee_db::{Database, DocLimits, Durability, EditMode, NewDoc};
use settee_mango::{find, Error, FindQuery, FindSettings, Found};
use settee_views::Views;

const SETTINGS: FindSettings = FindSettings {
    scan_warning_threshold: 10,
};

async fn people() -> (tempfile::TempDir, std::sync::Arc<Database>, Views) {
    let (dir, catalog) = catalog_and_views();
    let views = views_of(&catalog);
    let db = catalog.create("people", Some(3)).unwrap();
    let mut docs: Vec<NewDoc> = (0..50)
        .map(|i| {
            let v = json!({"_id": format!("p{i:02}"), "age": i, "town": if i % 3 == 0 { "Oslo" } else { "Rome" }, "pet": {"kind": "cat", "name": format!("c{i}")}});
            NewDoc::from_json(v, None, String::new, &DocLimits::default()).unwrap()
        })
        .collect();
    let ddoc = json!({"_id": "_design/d", "age": 10, "town": "Oslo"});
    docs.push(NewDoc::from_json(ddoc, None, String::new, &DocLimits::default()).unwrap());
    for r in db
        .update(docs, EditMode::Interactive, Durability::Durable)
        .await
        .unwrap()
    {
        r.unwrap();
    }
    (dir, db, views)
}

fn query(body: Value) -> Result<FindQuery, Error> {
    let Value::Object(map) = body else {
        panic!("an object")
    };
    FindQuery::parse(&map, 25)
}

/// `_find` over `views` (and no text indexes).
async fn find_on(
    views: &Views,
    db: &std::sync::Arc<Database>,
    q: FindQuery,
) -> Result<Found, Error> {
    let search = settee_search::Search::new(views.pool().clone());
    let engines = settee_mango::Engines {
        views,
        search: &search,
    };
    find(engines, db, q, SETTINGS).await
}

async fn run(views: &Views, db: &std::sync::Arc<Database>, body: Value) -> Found {
    find_on(views, db, query(body).unwrap()).await.unwrap()
}

async fn planning_refusal(views: &Views, db: &std::sync::Arc<Database>, body: Value) -> String {
    match find_on(views, db, query(body).unwrap()).await {
        Err(Error::Query { error, .. }) => error.to_string(),
        other => panic!("refused expected, got {:?}", other.map(|_| ())),
    }
}

fn ids(found: &Found) -> Vec<String> {
    found
        .docs
        .iter()
        .map(|d| d["_id"].as_str().unwrap().to_string())
        .collect()
}

fn refusal(body: Value) -> (&'static str, String) {
    match query(body) {
        Err(Error::Query { error, reason }) => (error, reason),
        Err(Error::Selector(reason)) => ("bad_request", reason),
        other => panic!("refused expected, got {:?}", other.map(|_| ())),
    }
}

#[tokio::test]
async fn queries_match_page_and_project_as_couchdb_does() {
    let (_dir, db, views) = people().await;
    // The same selection by hand: Oslo, over 20, in id order; design documents never.
    let expected: Vec<String> = (0..50)
        .filter(|i| i % 3 == 0 && *i > 20)
        .map(|i| format!("p{i:02}"))
        .collect();
    let selector = json!({"town": "Oslo", "age": {"$gt": 20}});
    let all = run(&views, &db, json!({"selector": selector})).await;
    assert_eq!(ids(&all), expected);
    assert!(all
        .summary
        .warnings
        .iter()
        .any(|w| w.starts_with("No matching index found")));

    // Pages of 3 by bookmark cover the same documents once each.
    let mut paged = Vec::new();
    let mut bookmark = Value::Null;
    loop {
        let page = run(
            &views,
            &db,
            json!({"selector": selector, "limit": 3, "bookmark": bookmark}),
        )
        .await;
        if page.docs.is_empty() {
            // A page that moved nothing answers the bookmark it was given.
            assert_eq!(Value::String(page.summary.bookmark), bookmark);
            break;
        }
        paged.extend(ids(&page));
        bookmark = Value::String(page.summary.bookmark);
    }
    assert_eq!(paged, expected);

    // skip and limit; descending by _id when the selector bounds _id.
    let some = run(
        &views,
        &db,
        json!({"selector": selector, "skip": 2, "limit": 2}),
    )
    .await;
    assert_eq!(ids(&some), expected[2..4]);
    let down = run(
        &views,
        &db,
        json!({"selector": {"_id": {"$gt": "p40"}}, "sort": [{"_id": "desc"}]}),
    )
    .await;
    assert_eq!(
        ids(&down),
        ["p49", "p48", "p47", "p46", "p45", "p44", "p43", "p42", "p41"]
    );

    // fields: dotted paths build nested objects.
    let cut = run(
        &views,
        &db,
        json!({"selector": {"_id": "p07"}, "fields": ["age", "pet.name"]}),
    )
    .await;
    assert_eq!(cut.docs, [json!({"age": 7, "pet": {"name": "c7"}})]);

    // Many documents read per result: the scan warning; execution_stats count them.
    let one = run(
        &views,
        &db,
        json!({"selector": {"age": 33}, "execution_stats": true}),
    )
    .await;
    // Every row read counts, the design document's too, as CouchDB counts them.
    assert_eq!(one.summary.docs_examined, 51);
    assert!(one
        .summary
        .warnings
        .iter()
        .any(|w| w.contains("examined is high")));
    let stats = &one.to_json(true)["execution_stats"];
    assert_eq!(
        (
            stats["total_docs_examined"].clone(),
            stats["results_returned"].clone()
        ),
        (json!(51), json!(1))
    );
}

#[test]
fn malformed_queries_get_couchdbs_errors() {
    let cases: Vec<(Value, &str)> = vec![
        (json!({}), "missing_required_key"),
        (json!({"selector": [1]}), "invalid_selector_json"),
        (json!({"selector": {}, "colour": 1}), "invalid_key"),
        (
            json!({"selector": {}, "limit": -1}),
            "invalid_non_neg_integer",
        ),
        (json!({"selector": {}, "fields": "a"}), "invalid_fields"),
        (
            json!({"selector": {}, "bookmark": "%%"}),
            "invalid_bookmark",
        ),
        (
            json!({"selector": {"_id": "a"}, "sort": [{"_id": "up"}]}),
            "invalid_sort_field",
        ),
        (
            json!({"selector": {}, "conflicts": "yes"}),
            "invalid_boolean",
        ),
        (json!({"selector": {"a": {"$exists": 1}}}), "bad_arg"),
    ];
    for (body, error) in cases {
        assert_eq!(refusal(body.clone()).0, error, "{body}");
    }
    let (_, reason) = refusal(json!({"selector": {"a": {"$exists": 1}}}));
    assert_eq!(reason, "Bad argument for operator $exists: 1");
    let mut map = Map::new();
    map.insert("selector".into(), json!({}));
    map.insert("use_index".into(), json!("by_age"));
    let q = FindQuery::parse(&map, 25).unwrap();
    assert_eq!(q.use_index, Some(("_design/by_age".to_string(), None)));
    assert_eq!(q.limit, 25, "the default limit");
}

#[tokio::test]
async fn sorts_without_an_index_are_refused_and_use_index_warns() {
    let (_dir, db, views) = people().await;
    for body in [
        json!({"selector": {}, "sort": ["age"]}),
        json!({"selector": {}, "sort": [{"_id": "asc"}]}),
        json!({"selector": {"_id": {"$gt": null}}, "sort": ["age"]}),
    ] {
        assert_eq!(planning_refusal(&views, &db, body).await, "no_usable_index");
    }
    let found = run(
        &views,
        &db,
        json!({"selector": {"age": 3}, "use_index": "by_age"}),
    )
    .await;
    assert_eq!(
        found.summary.warnings[0],
        "_design/by_age was not used because it does not contain a valid index for this query."
    );
    let body = json!({"selector": {"age": 3}, "use_index": "by_age", "allow_fallback": false});
    assert_eq!(planning_refusal(&views, &db, body).await, "invalid_index");
}
