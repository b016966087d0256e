//! Small in-memory indexes for the query modules' tests.

use tantivy::indexer::NoMergePolicy;
use tantivy::schema::{Schema, INDEXED, TEXT};
use tantivy::{doc, Index, IndexWriter, Term};

/// An index with a `body` text field holding `texts` and an `n` field numbering them,
/// committed in `segments` parts (never merged), without the documents numbered in
/// `deleted`.
pub(crate) fn build(texts: &[String], segments: usize, deleted: &[usize]) -> Index {
    let mut schema = Schema::builder();
    let body = schema.add_text_field("body", TEXT);
    let n = schema.add_u64_field("n", INDEXED);
    let index = Index::create_in_ram(schema.build());
    let mut writer: IndexWriter = index.writer_with_num_threads(1, 15_000_000).unwrap();
    writer.set_merge_policy(Box::new(NoMergePolicy));
    let per = texts.len().div_ceil(segments.max(1)).max(1);
    for (i, text) in texts.iter().enumerate() {
        writer
            .add_document(doc!(body => text.as_str(), n => i as u64))
            .unwrap();
        if (i + 1) % per == 0 {
            writer.commit().unwrap();
        }
    }
    for d in deleted {
        writer.delete_term(Term::from_field_u64(n, *d as u64));
    }
    writer.commit().unwrap();
    index
}
