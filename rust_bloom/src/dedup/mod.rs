//! Exact, paragraph and near-duplicate dedup kernels, pure Rust (`python/dedup.rs` binds them):
//!
//! - `digest`: 128-bit key digests, one seed per kind of key so kinds never collide;
//! - `error`: why a kernel refuses its input (`DedupError`);
//! - `keypath`: the JSONPath subset of Dolma's `dedupe.documents.key` (`$.a.b`, `$['a']`, `$.a[0]`);
//! - `jsonline`: the fast path that reads one JSON line's `id`, `text` and key (through
//!   `crate::document`), accepting only lines that `dolma_pipe.documents.read_documents` accepts
//!   the same way (anything else goes back to Python, which decides exactly as every other stage does);
//! - `paragraph`: Dolma's paragraph split with character spans, and its word tokens (Unicode
//!   word boundaries, whitespace dropped) for `min_words` and `by_ngram`;
//! - `records`: the binary work files (bucketed records with an offset table);
//! - `scan`: one input file's pass: per document its key, paragraph and MinHash records, and
//!   decontamination hits;
//! - `kernels`: the per-bucket steps (first occurrence in the global order, band buckets to
//!   candidate pairs, verification, clustering);
//! - `render`: one file's attribute rows as JSON lines.
pub mod digest;
pub mod error;
pub mod jsonline;
pub mod kernels;
pub mod keypath;
pub mod paragraph;
pub mod records;
pub mod render;
pub mod scan;
