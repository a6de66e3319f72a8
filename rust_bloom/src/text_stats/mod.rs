//! Text-statistics kernels of the rule taggers: the Gopher measures (`gopher_v1`) and the C4 line
//! and page rules (`c4_v1`/`c4_v2`). Pure Rust (no pyo3), so `cargo test` covers them; the
//! Python taggers in `taggers/builtin/{gopher,c4}.py` keep the reference implementation and the
//! parity tests compare both on the sample corpus.
//!
//! Semantics follow the Python code exactly: whitespace, `\w`, `[^\W\d_]` are CPython's
//! (`crate::text`), lengths and offsets are in code points (Python `len`), lower-casing is done by
//! Python (`str.lower`) for non-ASCII text and passed in, so it is never re-implemented here.
mod c4;
mod gopher;

pub use c4::{keep as c4_keep, C4Result, C4};
pub use gopher::{ngram_fractions, Gopher, GopherStats, StopWords};
