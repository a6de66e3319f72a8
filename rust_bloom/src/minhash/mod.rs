//! MinHash near-duplicate kernels, pure Rust (`python/minhash.rs` is the binding):
//!
//! - `shingle`: normalised words (lower-cased runs of `\w` characters, or whitespace-separated
//!   words; every character of a script written without spaces is a word by itself) and the
//!   64-bit hashes of their word n-grams (shingles);
//! - `signature`: MinHash signatures, one multiply-add-shift hash function per permutation,
//!   vectorised where the CPU allows (AVX-512, AVX2) and identical on every CPU;
//! - `lsh`: band hashes, the choice of bands x rows for a Jaccard threshold, exact Jaccard of
//!   shingle sets and the similarity of two signatures;
//! - `error`: why a setting is refused (`MinhashError`);
//! - `cluster`: connected components of candidate pairs with the smallest node as the root,
//!   so that a cluster's survivor is its first document in the global order.
pub mod cluster;
pub mod error;
pub mod lsh;
pub mod shingle;
pub mod signature;

pub use cluster::Components;
pub use error::MinhashError;
pub use lsh::{band_hash, candidate_probability, jaccard_sorted, optimal_bands, signature_similarity};
pub use shingle::{Shingler, Words};
pub use signature::Permutations;

/// splitmix64: the seeded stream every random parameter (permutations) is drawn from, so that
/// a seed fully determines a signature on every machine and in every version.
#[inline]
pub fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}
