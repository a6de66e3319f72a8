//! The Bloom filter of exact and paragraph-level dedup: an atomic test-and-set insert that stays
//! correct when threads or processes share one filter (through a memory-mapped file), and a
//! checksummed file format. Pure Rust; `python/bloom.rs` is its binding.
pub mod core;
pub mod error;
pub mod filter;
pub mod format;
pub mod hashing;
pub mod lock;
pub mod params;
pub mod storage;

pub use error::BloomError;
pub use filter::{Bloom, DEFAULT_SEED};
pub use params::Params;
