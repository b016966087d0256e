//! Full-text search: documents of about 1 KB of English words (a vocabulary of common
//! words, drawn with a skew so some words are in nearly every document and others in few),
//! a search index over their text built by the first query, one-term queries from many
//! clients, then (once all of those are answered) phrase queries with `counts` from as
//! many. Every answer's total is checked against what the generated documents say it must
//! be; the index's size is reported against the documents'. Then a Mango text index over every field of the same documents: its build,
//! and `_find` with `$text` from many clients, each answer's count checked. A server
//! without full-text search (CouchDB without its search service) is reported as such and
//! skipped.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hyper::Method;
use indicatif::ProgressBar;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{json, Value};
use tokio::sync::Barrier;

use crate::client::{Conn, Target};
use crate::error::{Error, Result};
use crate::report::{quantile_ms, Metric, Outcome};
use crate::workloads::load;

const DB: &str = "bench_search";
/// Words per document (about 1 KB of text).
const WORDS_PER_DOC: usize = 170;
/// Facet values.
const CATEGORIES: usize = 8;

/// Common English words, none of them a stop word of the standard analyzer.
const VOCABULARY: &str = "time year people way day man thing woman life child world school \
    state family student group country problem hand part place case week company system \
    program question work government number night point home water room mother area money \
    story fact month lot right study book eye job word business issue side kind head house \
    service friend father power hour game line end member law car city community name \
    president team minute idea kid body information back parent face others level office \
    door health person art war history party result change morning reason research girl guy \
    moment air teacher force education foot boy age policy process music market sense nation \
    plan college interest death experience effect class control care field development role \
    effort rate heart drug show leader light voice wife police mind price report decision \
    son view relationship town road arm difference value building action model season \
    society tax director position player record paper space ground form event official \
    matter center couple site project activity star table need court oil situation cost \
    industry figure street image phone data picture practice piece land product doctor wall \
    patient worker news test movie north love support technology step baby computer type \
    attention film tree source organization hair window evidence population site garden \
    river ocean mountain forest island valley desert bridge castle village harbor meadow \
    thunder lightning rain snow wind cloud storm sunrise sunset shadow mirror candle \
    lantern compass anchor sail rudder engine wheel bicycle train station ticket journey \
    traveler stranger neighbor cousin uncle aunt grandmother grandfather baker butcher \
    farmer fisherman hunter soldier sailor pilot painter poet singer dancer writer reader \
    kitchen bedroom garage attic cellar balcony chimney roof floor ceiling staircase \
    hallway library museum theater stadium hospital church temple market bakery pharmacy \
    apple banana cherry grape lemon orange peach pear plum melon berry walnut almond \
    carrot potato tomato onion garlic pepper cabbage lettuce spinach pumpkin bread butter \
    cheese honey sugar salt coffee tea milk juice soup salad pasta rice chicken fish \
    silver golden copper iron marble granite crystal velvet silk cotton wool leather \
    quickly slowly quietly loudly gently bravely happily sadly eagerly carefully \
    ancient modern bright dark heavy light narrow wide shallow deep quiet noisy gentle \
    fierce clever foolish humble proud brave curious patient restless hidden famous";

/// The workload's sizes.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// Documents indexed (the size: 200,000).
    pub docs: usize,
    /// Concurrent query clients.
    pub clients: usize,
    /// One-term queries per client.
    pub queries: usize,
    /// Phrase queries with counts, per client.
    pub phrases: usize,
    /// Index pairs of adjacent words too (Settee's `index_phrases`).
    pub index_phrases: bool,
    /// Seconds each kind of query runs at least, past its counts, so that a fast server is
    /// measured long enough.
    pub seconds: f64,
}

impl Params {
    /// The size.
    pub const FULL: Params = Params {
        docs: 200_000,
        clients: 16,
        queries: 200,
        phrases: 50,
        index_phrases: false,
        seconds: 3.0,
    };
    /// Sizes that finish in seconds on a small machine.
    pub const SMALL: Params = Params {
        docs: 20_000,
        clients: 16,
        queries: 100,
        phrases: 25,
        index_phrases: false,
        seconds: 3.0,
    };

    /// When a kind of query that starts now has run long enough.
    fn until(&self) -> Instant {
        Instant::now() + Duration::from_secs_f64(self.seconds.max(0.0))
    }
}

/// What the generated documents say: per word and per adjacent pair of words, the number
/// of documents holding it; a sample of adjacent pairs to ask for; the documents' bytes.
struct Expected {
    words: Vec<&'static str>,
    docs_with: Vec<u32>,
    pairs: HashMap<(u16, u16), u32>,
    sample_pairs: Vec<(u16, u16)>,
}

/// The documents and what queries over them must answer.
fn documents(n: usize, seed: u64) -> (Vec<Value>, Expected) {
    let mut seen = HashSet::new();
    let words: Vec<&'static str> = VOCABULARY
        .split_whitespace()
        .filter(|w| seen.insert(*w))
        .collect();
    let mut rng = StdRng::seed_from_u64(seed);
    let mut e = Expected {
        docs_with: vec![0; words.len()],
        pairs: HashMap::new(),
        sample_pairs: Vec::new(),
        words: words.clone(),
    };
    let docs = (0..n)
        .map(|i| {
            let picks: Vec<u16> = (0..WORDS_PER_DOC)
                .map(|_| {
                    let u: f64 = rng.gen();
                    ((u * u * words.len() as f64) as usize).min(words.len() - 1) as u16
                })
                .collect();
            let distinct: HashSet<u16> = picks.iter().copied().collect();
            for w in distinct {
                e.docs_with[w as usize] += 1;
            }
            let pairs: HashSet<(u16, u16)> = picks.windows(2).map(|p| (p[0], p[1])).collect();
            for p in pairs {
                *e.pairs.entry(p).or_default() += 1;
            }
            if i % 97 == 0 {
                let at = rng.gen_range(0..WORDS_PER_DOC - 1);
                e.sample_pairs.push((picks[at], picks[at + 1]));
            }
            let text: Vec<&str> = picks.iter().map(|w| words[*w as usize]).collect();
            json!({
                "_id": format!("s{i:08}"),
                "text": text.join(" "),
                "category": format!("c{}", i % CATEGORIES),
                "n": i,
            })
        })
        .collect();
    (docs, e)
}

/// The design document, with `index_phrases` as asked.
fn ddoc(index_phrases: bool) -> String {
    json!({"indexes": {"text": {
        "index": "function(doc) { if (doc.text) { index('default', doc.text); \
            index('category', doc.category, {facet: true}); index('n', doc.n); } }",
        "index_phrases": index_phrases,
    }}})
    .to_string()
}

/// Whether the server offers `_search` (its welcome names the feature).
async fn has_search(c: &mut Conn) -> Result<bool> {
    let answer = c.expect(Method::GET, "/", None, &[200]).await?;
    let welcome: Value = serde_json::from_slice(&answer.body).unwrap_or(Value::Null);
    Ok(welcome["features"]
        .as_array()
        .is_some_and(|f| f.iter().any(|x| x == "search")))
}

/// What the query clients check of an answer: its total, its page's length, and its counts.
/// Read into this rather than a whole JSON tree, so that checking costs the client little
/// of the cores it shares with the server.
#[derive(serde::Deserialize)]
struct Checked {
    total_rows: u64,
    rows: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    counts: HashMap<String, HashMap<String, u64>>,
}

async fn query<T: serde::de::DeserializeOwned>(c: &mut Conn, q: &str) -> Result<T> {
    let answer = c
        .expect(
            Method::GET,
            &format!("/{DB}/_design/s/_search/text?{q}"),
            None,
            &[200],
        )
        .await?;
    serde_json::from_slice(&answer.body)
        .map_err(|_| Error::WrongAnswer("a search answer is not JSON".into()))
}

/// Creates the index and times the first query, which builds it.
async fn build(c: &mut Conn, n: usize, index_phrases: bool) -> Result<Outcome> {
    let started = Instant::now();
    c.expect(
        Method::PUT,
        &format!("/{DB}/_design/s"),
        Some(Bytes::from(ddoc(index_phrases))),
        &[201, 202],
    )
    .await?;
    let v: Checked = query(c, "q=*:*&limit=1").await?;
    let seconds = started.elapsed().as_secs_f64();
    Ok(Outcome {
        workload: format!(
            "search index build, {n} docs of ~1 KB{}",
            if index_phrases { ", index_phrases" } else { "" }
        ),
        metrics: vec![
            Metric::cost("build+query s", seconds),
            Metric::rate("docs/s", n as f64 / seconds),
        ],
        failures: u64::from(v.total_rows != n as u64),
        series: Vec::new(),
    })
}

/// One query client: its one-term queries, then (once every client has sent its own) its
/// phrase queries; the latencies of each and the wrong answers.
async fn client(
    target: Target,
    p: Params,
    seed: u64,
    e: Arc<Expected>,
    between: Arc<Barrier>,
    progress: ProgressBar,
) -> (Vec<Duration>, Vec<Duration>, u64) {
    let mut rng = StdRng::seed_from_u64(seed);
    let Ok(mut c) = Conn::open(&target).await else {
        between.wait().await;
        return (Vec::new(), Vec::new(), (p.queries + p.phrases) as u64);
    };
    let mut ask = Asker {
        c: &mut c,
        rng: &mut rng,
        e: &e,
        progress: &progress,
    };
    let (terms, wrong_terms) = ask.timed(p.queries, false, p.until()).await;
    between.wait().await;
    let (phrases, wrong_phrases) = ask.timed(p.phrases, true, p.until()).await;
    (terms, phrases, wrong_terms + wrong_phrases)
}

/// What one client asks with.
struct Asker<'a> {
    c: &'a mut Conn,
    rng: &'a mut StdRng,
    e: &'a Expected,
    progress: &'a ProgressBar,
}

impl Asker<'_> {
    /// At least `n` one-term queries, or phrases, and more until `until`: each answer's
    /// latency, and how many were wrong.
    async fn timed(&mut self, n: usize, phrases: bool, until: Instant) -> (Vec<Duration>, u64) {
        let (mut took, mut wrong) = (Vec::with_capacity(n), 0);
        while took.len() < n || Instant::now() < until {
            let started = Instant::now();
            let ok = if phrases {
                phrase(self.c, self.rng, self.e).await
            } else {
                one_term(self.c, self.rng, self.e).await
            };
            took.push(started.elapsed());
            wrong += u64::from(!ok);
            self.progress.inc(1);
        }
        (took, wrong)
    }
}

/// A random word of the vocabulary; whether the answer's total and page are right.
async fn one_term(c: &mut Conn, rng: &mut StdRng, e: &Expected) -> bool {
    let w = rng.gen_range(0..e.words.len());
    let want = e.docs_with[w] as u64;
    query(c, &format!("q={}", e.words[w]))
        .await
        .is_ok_and(|v: Checked| v.total_rows == want && v.rows.len() as u64 == want.min(25))
}

/// A sampled pair of adjacent words as a phrase, with `counts`; whether the answer's total
/// and the counts' sum are right.
async fn phrase(c: &mut Conn, rng: &mut StdRng, e: &Expected) -> bool {
    let (a, b) = e.sample_pairs[rng.gen_range(0..e.sample_pairs.len())];
    let q = format!(
        "q=%22{}%20{}%22&counts=%5B%22category%22%5D",
        e.words[a as usize], e.words[b as usize]
    );
    let want = e.pairs.get(&(a, b)).copied().unwrap_or(0) as u64;
    query(c, &q).await.is_ok_and(|v: Checked| {
        let counted: u64 = v.counts.get("category").map_or(0, |m| m.values().sum());
        v.total_rows == want && counted == want
    })
}

/// The query clients side by side: all their one-term queries, then all their phrases, so
/// each kind is timed among its own kind.
async fn queries(
    target: &Target,
    p: Params,
    e: Arc<Expected>,
    progress: &ProgressBar,
) -> Result<Vec<Outcome>> {
    progress.set_length((p.clients * (p.queries + p.phrases)) as u64);
    progress.set_position(0);
    let between = Arc::new(Barrier::new(p.clients + 1));
    let started = Instant::now();
    let tasks: Vec<_> = (0..p.clients)
        .map(|i| {
            tokio::spawn(client(
                target.clone(),
                p,
                500 + i as u64,
                e.clone(),
                between.clone(),
                progress.clone(),
            ))
        })
        .collect();
    between.wait().await;
    let terms_took = started.elapsed().as_secs_f64();
    let (mut terms, mut phrases, mut failures) = (Vec::new(), Vec::new(), 0);
    for t in tasks {
        let (a, b, f) = t.await.map_err(|e| Error::Io(e.to_string()))?;
        terms.extend(a);
        phrases.extend(b);
        failures += f;
    }
    let phrases_took = started.elapsed().as_secs_f64() - terms_took;
    terms.sort_unstable();
    phrases.sort_unstable();
    Ok(vec![
        Outcome {
            workload: format!("search one-term queries, {} clients", p.clients),
            metrics: vec![
                Metric::rate("queries/s", terms.len() as f64 / terms_took),
                Metric::cost("p50 ms", quantile_ms(&terms, 0.5)),
                Metric::cost("p99 ms", quantile_ms(&terms, 0.99)),
            ],
            failures,
            series: Vec::new(),
        },
        Outcome {
            workload: format!("search phrase queries with counts, {} clients", p.clients),
            metrics: vec![
                Metric::rate("queries/s", phrases.len() as f64 / phrases_took),
                Metric::cost("p50 ms", quantile_ms(&phrases, 0.5)),
                Metric::cost("p99 ms", quantile_ms(&phrases, 0.99)),
            ],
            failures: 0,
            series: Vec::new(),
        },
    ])
}

/// The index's size on disk against the documents' (JSON) size.
async fn sizes(c: &mut Conn) -> Result<Outcome> {
    let info = c
        .expect(
            Method::GET,
            &format!("/{DB}/_design/s/_search_info/text"),
            None,
            &[200],
        )
        .await?;
    let info: Value = serde_json::from_slice(&info.body).unwrap_or(Value::Null);
    let db = c
        .expect(Method::GET, &format!("/{DB}"), None, &[200])
        .await?;
    let db: Value = serde_json::from_slice(&db.body).unwrap_or(Value::Null);
    let index = info["search_index"]["disk_size"].as_f64().unwrap_or(0.0);
    let docs = db["sizes"]["external"].as_f64().unwrap_or(0.0);
    Ok(Outcome {
        workload: "search index size".into(),
        metrics: vec![
            Metric::cost("index MB", index / 1e6),
            Metric::cost("docs MB", docs / 1e6),
            Metric::cost("index/docs", if docs > 0.0 { index / docs } else { 0.0 }),
        ],
        failures: u64::from(index == 0.0 || docs == 0.0),
        series: Vec::new(),
    })
}

/// `_find` with `selector`, the number of documents answered.
async fn find_count(c: &mut Conn, selector: Value) -> Result<usize> {
    let body = json!({"selector": selector, "limit": 25}).to_string();
    let answer = c
        .expect(
            Method::POST,
            &format!("/{DB}/_find"),
            Some(Bytes::from(body)),
            &[200],
        )
        .await?;
    /// All a client checks of a `_find` answer: how many documents it holds.
    #[derive(serde::Deserialize)]
    struct Found {
        docs: Vec<serde::de::IgnoredAny>,
    }
    let v: Found = serde_json::from_slice(&answer.body)
        .map_err(|_| Error::WrongAnswer("a _find answer is not JSON".into()))?;
    Ok(v.docs.len())
}

/// A Mango text index over every field: its build (timed by the first `_find`), then
/// one-word `$text` queries from every client, each answer's count checked.
async fn mango_text(
    target: &Target,
    c: &mut Conn,
    p: Params,
    e: Arc<Expected>,
    progress: &ProgressBar,
) -> Result<Vec<Outcome>> {
    let started = Instant::now();
    let body = json!({"index": {}, "type": "text", "ddoc": "mt", "name": "mt"}).to_string();
    c.expect(
        Method::POST,
        &format!("/{DB}/_index"),
        Some(Bytes::from(body)),
        &[200],
    )
    .await?;
    let all = find_count(c, json!({"n": {"$gte": 0}})).await?;
    let seconds = started.elapsed().as_secs_f64();
    let build = Outcome {
        workload: format!("mango text index build, {} docs, all fields", p.docs),
        metrics: vec![
            Metric::cost("build+query s", seconds),
            Metric::rate("docs/s", p.docs as f64 / seconds),
        ],
        failures: u64::from(all != p.docs.min(25)),
        series: Vec::new(),
    };
    progress.set_length((p.clients * p.queries) as u64);
    progress.set_position(0);
    let started = Instant::now();
    let tasks: Vec<_> = (0..p.clients)
        .map(|i| {
            let (target, e, progress) = (target.clone(), e.clone(), progress.clone());
            tokio::spawn(async move {
                let mut rng = StdRng::seed_from_u64(900 + i as u64);
                let (mut times, mut failures) = (Vec::new(), 0u64);
                let Ok(mut c) = Conn::open(&target).await else {
                    return (times, p.queries as u64);
                };
                let until = p.until();
                while times.len() < p.queries || Instant::now() < until {
                    let w = rng.gen_range(0..e.words.len());
                    let at = Instant::now();
                    let got = find_count(&mut c, json!({"$text": e.words[w]})).await;
                    times.push(at.elapsed());
                    let want = (e.docs_with[w] as usize).min(25);
                    failures += u64::from(!got.is_ok_and(|n| n == want));
                    progress.inc(1);
                }
                (times, failures)
            })
        })
        .collect();
    let (mut times, mut failures) = (Vec::new(), 0);
    for t in tasks {
        let (a, f) = t.await.map_err(|e| Error::Io(e.to_string()))?;
        times.extend(a);
        failures += f;
    }
    let elapsed = started.elapsed().as_secs_f64();
    times.sort_unstable();
    let queries = Outcome {
        workload: format!("mango $text queries, {} clients", p.clients),
        metrics: vec![
            Metric::rate("queries/s", times.len() as f64 / elapsed),
            Metric::cost("p50 ms", quantile_ms(&times, 0.5)),
            Metric::cost("p99 ms", quantile_ms(&times, 0.99)),
        ],
        failures,
        series: Vec::new(),
    };
    Ok(vec![build, queries])
}

/// Runs the workload.
pub async fn run(target: &Target, p: Params, progress: ProgressBar) -> Result<Vec<Outcome>> {
    let mut c = Conn::open(target).await?;
    if !has_search(&mut c).await? {
        progress.finish_and_clear();
        eprintln!(
            "{}: no full-text search (welcome features lack `search`); skipped",
            target.display
        );
        return Ok(Vec::new());
    }
    let (docs, expected) = documents(p.docs, 40);
    progress.set_length(p.docs as u64);
    load(&mut c, DB, docs.into_iter(), &progress).await?;
    let mut out = vec![build(&mut c, p.docs, p.index_phrases).await?];
    let expected = Arc::new(expected);
    out.extend(queries(target, p, expected.clone(), &progress).await?);
    out.push(sizes(&mut c).await?);
    out.extend(mango_text(target, &mut c, p, expected, &progress).await?);
    progress.finish_and_clear();
    let _ = c.call(Method::DELETE, &format!("/{DB}"), None).await;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expectations_follow_the_documents() {
        let (docs, e) = documents(300, 1);
        for (w, word) in e.words.iter().enumerate().step_by(37) {
            let n = docs
                .iter()
                .filter(|d| d["text"].as_str().unwrap().split(' ').any(|x| x == *word))
                .count();
            assert_eq!(e.docs_with[w] as usize, n, "{word}");
        }
        let (a, b) = e.sample_pairs[0];
        let pair = format!(" {} {} ", e.words[a as usize], e.words[b as usize]);
        let n = docs
            .iter()
            .filter(|d| format!(" {} ", d["text"].as_str().unwrap()).contains(&pair))
            .count();
        assert_eq!(e.pairs[&(a, b)] as usize, n);
        let len = docs[0]["text"].as_str().unwrap().len();
        assert!((700..1600).contains(&len), "{len}");
        let unique: HashSet<&str> = e.words.iter().copied().collect();
        assert!(unique.len() > 350, "{}", unique.len());
    }
}
