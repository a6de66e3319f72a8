//! Sizing: how many bits (m) and hash functions (k) a filter needs for n items at a
//! false-positive rate p, and the rate a given shape achieves.
use super::error::{BloomError, Result};
use std::f64::consts::LN_2;

/// Bounds on k: 1 is the degenerate minimum; past ~32 each extra hash costs a cache miss and
/// buys almost nothing (p = 2^-32 already needs k = 32).
pub const MIN_HASHES: u32 = 1;
pub const MAX_HASHES: u32 = 32;
/// 2^43 bits = 1 TiB of bit array: larger is surely a units mistake, refuse it up front
/// rather than die in the allocator.
pub const MAX_BITS: u64 = 1 << 43;

/// The shape of a filter: number of bits and number of hash functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub num_bits: u64,
    pub num_hashes: u32,
}

impl Params {
    /// A shape given directly; both values are validated.
    pub fn explicit(num_bits: u64, num_hashes: u32) -> Result<Params> {
        if num_bits == 0 || num_bits > MAX_BITS {
            return Err(BloomError::Params(format!("num_bits must be in [1, {MAX_BITS}], got {num_bits}")));
        }
        if !(MIN_HASHES..=MAX_HASHES).contains(&num_hashes) {
            return Err(BloomError::Params(format!(
                "num_hashes must be in [{MIN_HASHES}, {MAX_HASHES}], got {num_hashes}"
            )));
        }
        Ok(Params { num_bits, num_hashes })
    }

    /// The textbook optimum: m = -n ln p / (ln 2)^2, k = (m / n) ln 2, k clamped to [1, 32].
    pub fn optimal(expected_items: u64, fp_rate: f64) -> Result<Params> {
        if expected_items == 0 {
            return Err(BloomError::Params("expected_items must be >= 1, got 0".into()));
        }
        // Written as a negated range test so that NaN is refused too.
        if !(fp_rate > 0.0 && fp_rate < 1.0) {
            return Err(BloomError::Params(format!("fp_rate must be strictly between 0 and 1, got {fp_rate}")));
        }
        let n = expected_items as f64;
        let m = (-n * fp_rate.ln() / (LN_2 * LN_2)).ceil();
        if m > MAX_BITS as f64 {
            return Err(BloomError::Params(format!(
                "{expected_items} items at fp_rate {fp_rate} need {m:.0} bits, over the {MAX_BITS}-bit limit"
            )));
        }
        let num_bits = (m as u64).max(1);
        Ok(Params { num_bits, num_hashes: optimal_hashes(num_bits, expected_items) })
    }

    /// Bytes of bit array (whole 64-bit words).
    pub fn num_words(&self) -> u64 {
        self.num_bits.div_ceil(64)
    }
}

/// k = (m / n) ln 2, rounded and clamped to [MIN_HASHES, MAX_HASHES].
pub fn optimal_hashes(num_bits: u64, expected_items: u64) -> u32 {
    let k = (num_bits as f64 / expected_items.max(1) as f64 * LN_2).round();
    (k as u32).clamp(MIN_HASHES, MAX_HASHES)
}

/// Expected false-positive rate after n distinct insertions: (1 - e^{-kn/m})^k.
pub fn false_positive_rate(num_bits: u64, num_hashes: u32, items: u64) -> f64 {
    let k = num_hashes as f64;
    let fill = 1.0 - (-k * items as f64 / num_bits as f64).exp();
    fill.powf(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optimal_matches_textbook_numbers() {
        // 1M items at 1%: 9,585,059 bits (~1.14 MiB), k = 7.
        let p = Params::optimal(1_000_000, 0.01).unwrap();
        assert_eq!(p.num_bits, 9_585_059);
        assert_eq!(p.num_hashes, 7);
        let rate = false_positive_rate(p.num_bits, p.num_hashes, 1_000_000);
        assert!((rate - 0.01).abs() < 0.0005, "{rate}");
    }

    #[test]
    fn k_is_clamped() {
        assert_eq!(Params::optimal(10, 1e-300).unwrap().num_hashes, MAX_HASHES);
        assert_eq!(Params::optimal(1000, 0.9).unwrap().num_hashes, MIN_HASHES);
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(Params::optimal(0, 0.01).is_err());
        for p in [0.0, 1.0, -0.5, 1.5, f64::NAN] {
            assert!(Params::optimal(100, p).is_err(), "{p}");
        }
        assert!(Params::optimal(u64::MAX, 1e-9).is_err());
        assert!(Params::explicit(0, 3).is_err());
        assert!(Params::explicit(64, 0).is_err());
        assert!(Params::explicit(64, 33).is_err());
        assert!(Params::explicit(64, 32).is_ok());
    }
}
