//! Suffix arrays over a corpus, one per shard (`libsais` builds them), and what they answer:
//! occurrences of a pattern (count and positions), the longest match at every position of a
//! text (what tracing a model's output to its training data needs), and the repeated windows
//! of a set of shards (substring deduplication), found by merging the shards' arrays without
//! ever building one array over all of them.
//!
//! A shard's text is a sequence of symbols: bytes (documents' UTF-8 text, documents separated by
//! the byte 0xFF, which UTF-8 never holds) or 16/32-bit tokens (a token shard, read in place).
//! A suffix array is stored packed: `width` little-endian bytes per position, the fewest that
//! hold the text's length (4 for up to 4 Gi symbols).
//!
//! - `build`: the array of a text, written packed to a file (optionally with a work file's
//!   checksum trailer, `crate::workfile`);
//! - `index`: a text and its array, read in place (memory-mapped), and the queries;
//! - `dups`: the repeated windows of several shards, by a k-way merge of their arrays;
//! - `records`: the layouts of the records handed to Python (windows, ranges, match lengths).
pub mod build;
pub mod dups;
pub mod index;
pub mod records;

/// The byte between documents of a byte text: no byte of UTF-8, so no match runs across it.
pub const SEPARATOR: u8 = 0xFF;

/// A text's symbol types by name, with their size in bytes.
pub const SYMBOLS: [(&str, usize); 3] = [("u8", 1), ("u16", 2), ("u32", 4)];

/// Why a suffix array cannot be built or used; the message says what (the caller adds the path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SuffixError(pub String);

impl std::fmt::Display for SuffixError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SuffixError {}

/// A symbol of a text: a byte or a token id.
pub trait Symbol: Copy + Ord + Eq + Send + Sync + std::fmt::Debug + 'static {
    const BYTES: usize;
    fn to_u64(self) -> u64;
}

impl Symbol for u8 {
    const BYTES: usize = 1;
    fn to_u64(self) -> u64 {
        self as u64
    }
}

impl Symbol for u16 {
    const BYTES: usize = 2;
    fn to_u64(self) -> u64 {
        self as u64
    }
}

impl Symbol for u32 {
    const BYTES: usize = 4;
    fn to_u64(self) -> u64 {
        self as u64
    }
}

/// Bytes per packed position for a text of `n` symbols: the fewest that hold every position
/// 0..=n (at least 1).
pub fn width_for(n: u64) -> usize {
    let bits = 64 - n.leading_zeros() as usize;
    bits.div_ceil(8).max(1)
}

/// The `i`th position of a packed array.
#[inline]
pub fn packed_at(sa: &[u8], width: usize, i: usize) -> usize {
    let base = i * width;
    // One 8-byte load and a mask where 8 bytes are there to read (all but the last few
    // positions): a copy of `width` bytes is a call to memmove, in the innermost loop of every search.
    if let Some(chunk) = sa.get(base..base + 8) {
        let v = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        return if width >= 8 { v as usize } else { (v & ((1u64 << (8 * width)) - 1)) as usize };
    }
    let mut buf = [0u8; 8];
    buf[..width].copy_from_slice(&sa[base..base + width]);
    u64::from_le_bytes(buf) as usize
}

/// Test support: flips `count` bytes of `bytes` at places drawn from `seed` (a linear congruential
/// step each), as a damaged array on disk has them: positions out of range or out of order.
#[cfg(test)]
pub(crate) fn flip_random_bytes(bytes: &mut [u8], count: usize, seed: &mut u64) {
    for _ in 0..count {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let at = (*seed >> 33) as usize % bytes.len();
        bytes[at] ^= 0xff;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_hold_every_position() {
        assert_eq!(width_for(0), 1);
        assert_eq!(width_for(255), 1);
        assert_eq!(width_for(256), 2);
        assert_eq!(width_for((1 << 32) - 1), 4);
        assert_eq!(width_for(1 << 32), 5);
        let sa = [1u8, 2, 3, 4, 5, 6];
        assert_eq!(packed_at(&sa, 3, 1), 0x060504);
    }
}
