//! dolma-pipe's Rust core, one module per component:
//!
//! - `bloom`: a Bloom filter for exact and paragraph-level dedup, with an atomic test-and-set
//!   insert that stays correct when threads or processes share one filter (through a
//!   memory-mapped file), and a checksummed file format;
//! - `text`: CPython-compatible text primitives (character classes, lengths in code points,
//!   word splitting) shared by the kernels;
//! - `text_stats`: the text-statistics kernels of the Gopher and C4 rule taggers;
//! - `document`: the one reader of a Dolma document line (string or integer `id`, `text`), with
//!   the Python reader's quarantine kinds, for dedup, the mixer and the report;
//! - `filters`: the mixer's jq and JSONPath rules and span replacement, with Dolma's semantics;
//! - `minhash`: shingles, MinHash signatures, LSH bands and clustering for near-duplicates;
//! - `dedup`: document and paragraph keys, its fast path over document lines, work-file records and the
//!   per-bucket steps of `dolma-pipe dedup`;
//! - `suffix`: suffix arrays (libsais) and their queries: counts, longest matches, repeated
//!   windows across shards;
//! - `report`: the report's per-document pass, document lines and attribute rows read into columns;
//! - `extract`: HTML main-content extraction (rs-trafilatura) for the warc stage;
//! - `line_filter`: the warc stage's `resiliparse_refined` line features and trees;
//! - `workfile`: the checksum trailer of every work file (what one phase writes for the next).
//!
//! Everything but `python` is plain Rust with no pyo3 in it, so `cargo test` exercises the
//! logic directly; `python` holds the thin bindings, one file per component, that maturin
//! builds into `dolma_pipe._rust`.
/// Every Rust allocation of the core goes through mimalloc (Python's own objects do not): the
/// mixer's and the report's JSON trees and jaq values are many small allocations each document.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod bloom;
pub mod dedup;
pub mod document;
pub mod extract;
pub mod filters;
pub mod line_filter;
pub mod minhash;
mod python;
pub mod report;
pub mod suffix;
pub mod text;
pub mod text_stats;
pub mod workfile;

pub use bloom::{Bloom, BloomError, Params, DEFAULT_SEED};
