//! The mixer's document rules with Dolma's semantics: include/exclude filters in jq (jaq, the
//! engine and version Dolma 1.2.1 compiles in) or JSONPath (jsonpath-rust 0.3.5, likewise), span
//! selection and replacement, and the per-document pipeline that merges attribute rows into a
//! document, filters it, replaces spans, drops fields, checks its length and records provenance.
//!
//! - `jq`: compiling jq programs (errors with their position) and Dolma's truthiness of outputs;
//! - `jsonpath`: JSONPath rules, with one deliberate fix: numbers compare by value, so `1 >= 1.0`
//!   and `1.0 == 1` hold (Dolma's engine compares `1` and `1.0` as different values, so a rule
//!   `>= 1.0` silently never matches a score written as the integer `1`);
//! - `selector`: the span selectors of `span_replacement` (jq or JSONPath) and replacements;
//! - `spans`: Dolma's span replacement in character offsets, `{}` standing for the span's text;
//! - `mixer`: the pipeline over a batch of raw document lines and attribute rows;
//! - `references`: the attribute names a jq or JSONPath rule reads (checked when a config loads);
//! - `gzip`: the gzip members the mixer's outputs are made of.
//!
//! jaq's values hold `Rc`s, so these types are not `Send`: each worker process builds its own.
pub mod error;
pub mod gzip;
pub mod jq;
pub mod jsonpath;
pub mod mixer;
pub mod references;
pub mod selector;
pub mod spans;

pub use error::FilterError;
pub use mixer::{BadDocument, BatchError, BatchOutput, FilterRules, MixRules, SpanRule, Syntax};
