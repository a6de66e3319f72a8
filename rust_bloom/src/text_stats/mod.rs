//! Text-statistics kernels of the rule taggers: the Gopher measures, the C4 line and page rules,
//! and the candidate lines of the regex PII patterns (`pii`). Each kernel has modes, not copies: Dolma 1.2.1's definitions for the taggers under
//! Dolma's names (`gopher_v1`, `gopher_v2`, `c4_v1`, `c4_v2`) and the papers' rules with our
//! verdicts for our own names (`gopher`, `c4`). Pure Rust (no pyo3), so `cargo test` covers
//! them; the Python taggers in `taggers/builtin/{gopher,c4}.py` keep a Python reference of every
//! mode, the tests compare both on the sample corpus, and a committed fixture of Dolma's own
//! output (tests/taggers/test_dolma_parity.py) pins the Dolma modes.
//!
//! Semantics follow the Python code exactly: whitespace, `\w`, `[^\W\d_]` are CPython's
//! (`crate::text`), lengths and offsets are in code points (Python `len`), lower-casing is done by
//! Python (`str.lower`) for non-ASCII text and passed in, so it is never re-implemented here.
mod c4;
mod gopher;
mod pii;

pub use c4::{keep as c4_keep, C4Mode, C4Result, C4};
pub use gopher::{
    dolma_ngram_fractions, ngram_fractions, DolmaGopherStats, Gopher, GopherMode, GopherStats, StopWords,
};
pub use pii::{pii_windows, PiiWindows};

/// Python's `round(score, 5)`, what Dolma writes (`TAGGER_SCORE_PRECISION`) and what
/// `taggers.base.Tagger.group` applies: the double nearest to the decimal `score` correctly
/// rounded to 5 places, ties to even on the exact binary value (both Rust's `{:.5}` formatting
/// and CPython's `round` work on the exact value; `round(0.015625, 5)` is 0.01562).
pub fn round_score(score: f64) -> f64 {
    if score.fract() == 0.0 || !score.is_finite() {
        return score;
    }
    let mut buf = String::with_capacity(24);
    let _ = std::fmt::Write::write_fmt(&mut buf, format_args!("{score:.5}"));
    buf.parse().unwrap_or(score)
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_score_is_pythons_round() {
        // (value, Python's round(value, 5)), ties on exact binary values included.
        for (x, r) in [
            (0.015625, 0.01562),
            (0.046875, 0.04688),
            (1.0 / 3.0, 0.33333),
            (2.0 / 3.0, 0.66667),
            (0.000005, 1e-05),
            (2.5e-06, 0.0),
            (123456.789015625, 123456.78902),
            (-0.000015, -2e-05),
            (7.0, 7.0),
            (0.999995, 0.99999),
        ] {
            assert_eq!(super::round_score(x), r, "{x}");
        }
    }
}
