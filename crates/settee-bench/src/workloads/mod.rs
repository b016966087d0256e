//! The published workloads, and what they share: loading documents in checked batches.

pub mod c10k;
pub mod fabric;
pub mod mango;
pub mod reads;
pub mod replication;
pub mod search;
pub mod views;
pub mod writes;

use bytes::Bytes;
use hyper::Method;
use indicatif::ProgressBar;
use serde_json::Value;

use crate::client::Conn;
use crate::error::{Error, Result};

/// Most bytes of documents in one `_bulk_docs` request (some servers refuse large bodies).
const BATCH_BYTES: usize = 4 << 20;

/// Deletes and creates `db`, then loads `docs` in batches of 1,000 (fewer for large
/// documents), checking every result. Each document is serialized once, straight into the
/// request body: the load generator shares the machine with the server it measures.
pub(crate) async fn load(
    c: &mut Conn,
    db: &str,
    docs: impl Iterator<Item = Value>,
    progress: &ProgressBar,
) -> Result<()> {
    load_bodies(c, db, bulk_bodies(docs), progress).await
}

/// `docs` as `_bulk_docs` request bodies of 1,000 documents (fewer for large documents),
/// each with its document count, made as they are taken; collect them to make them ahead
/// of a timed run.
pub(crate) fn bulk_bodies(
    docs: impl Iterator<Item = Value>,
) -> impl Iterator<Item = (Bytes, usize)> {
    let mut docs = docs.peekable();
    std::iter::from_fn(move || {
        docs.peek()?;
        let mut body = b"{\"docs\":[".to_vec();
        let mut count = 0;
        while count < 1000 && body.len() < BATCH_BYTES {
            let Some(doc) = docs.next() else { break };
            if count > 0 {
                body.push(b',');
            }
            serde_json::to_writer(&mut body, &doc).expect("writing to a Vec");
            count += 1;
        }
        body.extend_from_slice(b"]}");
        Some((Bytes::from(body), count))
    })
}

/// Deletes and creates `db`, then posts the `_bulk_docs` `bodies`, checking every result.
pub(crate) async fn load_bodies(
    c: &mut Conn,
    db: &str,
    bodies: impl Iterator<Item = (Bytes, usize)>,
    progress: &ProgressBar,
) -> Result<()> {
    let _ = c.call(Method::DELETE, &format!("/{db}"), None).await?;
    c.expect(Method::PUT, &format!("/{db}"), None, &[201, 202])
        .await?;
    for (body, count) in bodies {
        let answer = c
            .expect(
                Method::POST,
                &format!("/{db}/_bulk_docs"),
                Some(body),
                &[201, 202],
            )
            .await?;
        let results: Vec<Value> = serde_json::from_slice(&answer.body)
            .map_err(|_| Error::WrongAnswer("_bulk_docs answer is not a JSON array".into()))?;
        if results.len() != count
            || results
                .iter()
                .any(|r| r.get("ok") != Some(&Value::Bool(true)))
        {
            return Err(Error::WrongAnswer(format!(
                "_bulk_docs into {db} did not save every document"
            )));
        }
        progress.inc(count as u64);
    }
    Ok(())
}
