//! dolma-pipe's Rust core, one module per component:
//!
//! - `bloom`: a Bloom filter for exact and paragraph-level dedup, with an atomic test-and-set
//!   insert that stays correct when threads or processes share one filter (through a
//!   memory-mapped file), and a checksummed file format;
//! - `text`: CPython-compatible text primitives (character classes, lengths in code points,
//!   word splitting) shared by the kernels;
//! - `text_stats`: the text-statistics kernels of the Gopher and C4 rule taggers;
//! - `filters`: the mixer's jq and JSONPath rules and span replacement, with Dolma's semantics.
//!
//! Everything but `python` is plain Rust with no pyo3 in it, so `cargo test` exercises the
//! logic directly; `python` holds the thin bindings, one file per component, that maturin
//! builds into `dolma_pipe._rust`.
pub mod bloom;
pub mod filters;
mod python;
pub mod text;
pub mod text_stats;

pub use bloom::{Bloom, BloomError, Params, DEFAULT_SEED};
