//! Key hashing: one seeded xxh3-128 pass per key, split into two 64-bit halves, and
//! Kirsch–Mitzenmacher double hashing (g_i = h1 + i·h2) for the k bit positions.
//!
//! Filters are persisted, so this mapping from bytes to bit positions is part of the file
//! format (header field `hash_scheme`): xxh3 is specified on bytes, independent of platform
//! and endianness, and the golden test below pins it.
use xxhash_rust::xxh3::xxh3_128_with_seed;

/// The two independent 64-bit hashes of one key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHash {
    pub h1: u64,
    pub h2: u64,
}

#[inline]
pub fn hash_key(key: &[u8], seed: u64) -> KeyHash {
    let h = xxh3_128_with_seed(key, seed);
    // h2 odd: the step never degenerates to 0, so the k positions are not all equal.
    KeyHash { h1: h as u64, h2: ((h >> 64) as u64) | 1 }
}

/// Maps a uniform 64-bit value onto [0, m) with a multiply-shift (Lemire's "fastrange"):
/// no division in the hot loop, and unbiased enough for any m below 2^43.
#[inline]
fn reduce(x: u64, m: u64) -> u64 {
    ((x as u128 * m as u128) >> 64) as u64
}

/// Fills `out[..k]` with the k bit positions of a key in a filter of `m` bits and returns that
/// slice. The caller keeps `out` on its stack: no allocation per key.
#[inline]
pub fn positions(kh: KeyHash, k: u32, m: u64, out: &mut [u64; 32]) -> &[u64] {
    let k = k as usize;
    let mut x = kh.h1;
    for slot in out.iter_mut().take(k) {
        *slot = reduce(x, m);
        x = x.wrapping_add(kh.h2);
    }
    &out[..k]
}

/// The lock stripe that serialises inserts of this key (see `lock.rs`). Any function of the
/// key works for correctness; mixing both halves spreads keys evenly over the stripes.
#[inline]
pub fn stripe(kh: KeyHash, stripes: usize) -> usize {
    reduce(kh.h1.rotate_left(32) ^ kh.h2, stripes as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xxh3_128_reference_value() {
        // The published XXH3_128bits("") test vector: if this changes, persisted filters break.
        let h = xxh3_128_with_seed(b"", 0);
        assert_eq!(h, 0x99aa06d3014798d86001c324468d497f);
    }

    #[test]
    fn positions_are_stable_and_in_range() {
        let mut buf = [0u64; 32];
        let kh = hash_key(b"hello world", 42);
        let pos = positions(kh, 7, 1000, &mut buf).to_vec();
        assert_eq!(pos.len(), 7);
        assert!(pos.iter().all(|&p| p < 1000));
        // Deterministic across calls (and, by construction, across runs and platforms).
        let mut buf2 = [0u64; 32];
        assert_eq!(positions(hash_key(b"hello world", 42), 7, 1000, &mut buf2), &pos[..]);
        // A different seed gives a different filter.
        assert_ne!(hash_key(b"hello world", 43), kh);
    }

    #[test]
    fn reduce_covers_the_range() {
        assert_eq!(reduce(0, 10), 0);
        assert_eq!(reduce(u64::MAX, 10), 9);
        assert_eq!(reduce(1 << 63, 10), 5);
    }

    #[test]
    fn stripes_are_spread() {
        let mut seen = vec![0u32; 64];
        for i in 0u64..64_000 {
            seen[stripe(hash_key(&i.to_le_bytes(), 1), 64)] += 1;
        }
        assert!(seen.iter().all(|&c| (800..1200).contains(&c)), "{seen:?}");
    }
}
