//! Why a MinHash setting is refused; `python/minhash.rs` and `python/dedup.rs` raise each as a
//! `ValueError` with this message.
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum MinhashError {
    /// The LSH similarity threshold is not strictly between 0 and 1.
    Threshold(f64),
    /// No permutations to split into bands.
    NoPermutations,
    /// The false-positive and false-negative weights are negative, or both zero.
    Weights,
    /// Shingles of no words.
    NgramSize,
    /// A number of permutations outside [1, 4096].
    PermutationCount(usize),
}

impl fmt::Display for MinhashError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MinhashError::Threshold(t) => write!(f, "threshold must be strictly between 0 and 1, got {t}"),
            MinhashError::NoPermutations => f.write_str("num_perm must be at least 1"),
            MinhashError::Weights => f.write_str("weights must be non-negative and not both zero"),
            MinhashError::NgramSize => f.write_str("ngram size must be at least 1"),
            MinhashError::PermutationCount(n) => {
                write!(f, "the number of permutations must be in [1, 4096], got {n}")
            }
        }
    }
}

impl std::error::Error for MinhashError {}
