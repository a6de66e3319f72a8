//! dolma-pipe's Rust core. So far: a Bloom filter for exact and paragraph-level dedup, with an
//! atomic test-and-set insert that stays correct when threads or processes share one filter
//! (through a memory-mapped file), and a checksummed file format; and the text-statistics
//! kernels of the Gopher and C4 rule taggers (`text_stats`).
//!
//! Everything but `python` is plain Rust with no pyo3 in it, so `cargo test` exercises the
//! logic directly; `python` is the thin binding that maturin builds into
//! `dolma_pipe._rust_bloom`.
pub mod core;
pub mod error;
pub mod filter;
pub mod format;
pub mod hashing;
pub mod lock;
pub mod params;
pub mod pyunicode;
pub mod storage;
pub mod text_stats;
mod python;

pub use error::BloomError;
pub use filter::{Bloom, DEFAULT_SEED};
pub use params::Params;
