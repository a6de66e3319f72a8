//! The on-disk format, one layout for both `save`/`load` files and memory-mapped shared
//! filters (so either kind of file opens either way):
//!
//! ```text
//! offset  size  field (all integers little-endian)
//!      0     8  magic  b"DPBLOOM\0"
//!      8     4  format version (1)
//!     12     4  k, number of hash functions
//!     16     8  m, number of bits
//!     24     8  hash seed
//!     32     8  number of 64-bit words in the bit array, ceil(m / 64)
//!     40     8  offset of the bit array (8192)
//!     48     4  number of lock stripes (1024)
//!     52     4  hash scheme (1 = xxh3-128 + Kirsch–Mitzenmacher + multiply-shift)
//!     56     8  xxh3-64 of bytes 0..56: the fields above never change after creation
//!     64     8  flags (bit 0: sealed, i.e. the checksum below is valid)      } mutable, updated
//!     72     8  count: inserts that reported "new"                           } atomically in a
//!     80     8  checksum: xxh3-64 of the bit array bytes followed by count    } shared mapping
//!     88  4008  zero
//!   4096  4096  lock stripes (u32 each), shared filters only; zero in saved files
//!   8192  8·W   bit array: W words, bit i is bit (i mod 64) of word (i div 64)
//! ```
//! The header is a whole page so that the bit array is page- and word-aligned in a mapping.
use super::error::{BloomError, Result};
use super::lock::STRIPES;
use super::params::Params;
use std::convert::Infallible;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use xxhash_rust::xxh3::{xxh3_64, Xxh3Default};

pub const MAGIC: [u8; 8] = *b"DPBLOOM\0";
pub const VERSION: u32 = 1;
pub const HASH_SCHEME: u32 = 1;
pub const HEADER_BYTES: u64 = 4096;
pub const LOCKS_OFFSET: u64 = 4096;
pub const BITS_OFFSET: u64 = 8192;
pub const FLAG_SEALED: u64 = 1;
pub const OFF_FLAGS: usize = 64;
pub const OFF_COUNT: usize = 72;
pub const OFF_CHECKSUM: usize = 80;
const IMMUTABLE_END: usize = 56;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub params: Params,
    pub seed: u64,
    pub lock_stripes: u32,
    pub flags: u64,
    pub count: u64,
    pub checksum: u64,
}

/// Little-endian integers at fixed header offsets. `decode` checks the length first; a short
/// buffer would read as 0 (then refused as a bad version), never panic.
fn u32_at(b: &[u8], off: usize) -> u32 {
    b.get(off..off + 4).and_then(|s| s.try_into().ok()).map_or(0, u32::from_le_bytes)
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    b.get(off..off + 8).and_then(|s| s.try_into().ok()).map_or(0, u64::from_le_bytes)
}

impl Header {
    pub fn new(params: Params, seed: u64) -> Header {
        Header { params, seed, lock_stripes: STRIPES as u32, flags: 0, count: 0, checksum: 0 }
    }

    pub fn file_len(&self) -> u64 {
        BITS_OFFSET + self.params.num_words() * 8
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut b = vec![0u8; HEADER_BYTES as usize];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION.to_le_bytes());
        b[12..16].copy_from_slice(&self.params.num_hashes.to_le_bytes());
        b[16..24].copy_from_slice(&self.params.num_bits.to_le_bytes());
        b[24..32].copy_from_slice(&self.seed.to_le_bytes());
        b[32..40].copy_from_slice(&self.params.num_words().to_le_bytes());
        b[40..48].copy_from_slice(&BITS_OFFSET.to_le_bytes());
        b[48..52].copy_from_slice(&self.lock_stripes.to_le_bytes());
        b[52..56].copy_from_slice(&HASH_SCHEME.to_le_bytes());
        let hc = xxh3_64(&b[..IMMUTABLE_END]);
        b[56..64].copy_from_slice(&hc.to_le_bytes());
        b[OFF_FLAGS..OFF_FLAGS + 8].copy_from_slice(&self.flags.to_le_bytes());
        b[OFF_COUNT..OFF_COUNT + 8].copy_from_slice(&self.count.to_le_bytes());
        b[OFF_CHECKSUM..OFF_CHECKSUM + 8].copy_from_slice(&self.checksum.to_le_bytes());
        b
    }

    /// Parses and validates a header. `head` is the first (up to) 4096 bytes of the file and
    /// `file_len` its full length, so truncation is reported as such. Every failure names
    /// what is wrong; the caller's path is attached to the error.
    pub fn decode(head: &[u8], file_len: u64, path: &Path) -> Result<Header> {
        let bad = |reason: String| Err(BloomError::file(path, reason));
        let n = head.len().min(8);
        if n == 0 {
            return bad("the file is empty".into());
        }
        if head[..n] != MAGIC[..n] {
            return bad(format!(
                "bad magic bytes {:?} (expected {:?}); this is not a dolma-pipe Bloom filter",
                String::from_utf8_lossy(&head[..n]),
                String::from_utf8_lossy(&MAGIC)
            ));
        }
        if file_len < HEADER_BYTES || (head.len() as u64) < HEADER_BYTES {
            return bad(format!(
                "truncated: the file is {file_len} bytes, shorter than its {HEADER_BYTES}-byte header"
            ));
        }
        let version = u32_at(head, 8);
        if version != VERSION {
            return bad(format!("format version {version} is not supported (this build reads version {VERSION})"));
        }
        if xxh3_64(&head[..IMMUTABLE_END]) != u64_at(head, 56) {
            return bad("header checksum mismatch: the header is corrupted".into());
        }
        let scheme = u32_at(head, 52);
        if scheme != HASH_SCHEME {
            return bad(format!("hash scheme {scheme} is not supported"));
        }
        let params = Params::explicit(u64_at(head, 16), u32_at(head, 12))
            .map_err(|e| BloomError::file(path, format!("invalid parameters in header: {e}")))?;
        if u64_at(head, 32) != params.num_words() || u64_at(head, 40) != BITS_OFFSET {
            return bad("inconsistent layout fields in header".into());
        }
        let lock_stripes = u32_at(head, 48);
        if lock_stripes == 0 || lock_stripes as u64 * 4 > BITS_OFFSET - LOCKS_OFFSET {
            return bad(format!("invalid number of lock stripes {lock_stripes}"));
        }
        let header = Header {
            params,
            seed: u64_at(head, 24),
            lock_stripes,
            flags: u64_at(head, OFF_FLAGS),
            count: u64_at(head, OFF_COUNT),
            checksum: u64_at(head, OFF_CHECKSUM),
        };
        let expected = header.file_len();
        if file_len < expected {
            return bad(format!(
                "truncated: the file is {file_len} bytes, a filter of {} bits needs {expected}",
                params.num_bits
            ));
        }
        if file_len > expected {
            return bad(format!(
                "{} unexpected trailing bytes after the bit array (expected {expected} bytes)",
                file_len - expected
            ));
        }
        Ok(header)
    }

    pub fn is_sealed(&self) -> bool {
        self.flags & FLAG_SEALED != 0
    }
}

/// Words are copied out with atomic loads in chunks of this many (64 KiB), so that a snapshot
/// taken while other threads insert is free of data races.
const CHUNK_WORDS: usize = 8192;

/// Streams the bit array as little-endian bytes through `sink`, chunk by chunk.
fn for_each_chunk<E>(
    words: &[AtomicU64],
    mut sink: impl FnMut(&[u8]) -> std::result::Result<(), E>,
) -> std::result::Result<(), E> {
    let mut buf = vec![0u8; CHUNK_WORDS * 8];
    for chunk in words.chunks(CHUNK_WORDS) {
        for (dst, w) in buf.chunks_exact_mut(8).zip(chunk) {
            dst.copy_from_slice(&w.load(Ordering::Relaxed).to_le_bytes());
        }
        sink(&buf[..chunk.len() * 8])?;
    }
    Ok(())
}

/// The checksum stored in a sealed file: xxh3-64 over the bit array bytes, then the count.
pub fn checksum(words: &[AtomicU64], count: u64) -> u64 {
    let mut h = Xxh3Default::new();
    let Ok(()) = for_each_chunk::<Infallible>(words, |b| {
        h.update(b);
        Ok(())
    });
    h.update(&count.to_le_bytes());
    h.digest()
}

/// Writes the bit array to `out` and returns its checksum (one pass over memory, so the
/// checksum describes exactly the bytes written even if inserts continue meanwhile).
pub fn write_words(out: &mut impl Write, words: &[AtomicU64], count: u64) -> std::io::Result<u64> {
    let mut h = Xxh3Default::new();
    for_each_chunk(words, |b| {
        h.update(b);
        out.write_all(b)
    })?;
    h.update(&count.to_le_bytes());
    Ok(h.digest())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header() -> Header {
        Header::new(Params::explicit(1000, 7).unwrap(), 5)
    }

    #[test]
    fn round_trip() {
        let mut h = header();
        h.flags = FLAG_SEALED;
        h.count = 12;
        h.checksum = 99;
        let b = h.encode();
        assert_eq!(Header::decode(&b, h.file_len(), Path::new("x")).unwrap(), h);
        assert_eq!(h.file_len(), 8192 + 16 * 8);
    }

    fn err(b: &[u8], len: u64) -> String {
        Header::decode(b, len, Path::new("f.bloom")).unwrap_err().to_string()
    }

    #[test]
    fn refusals_say_why() {
        let h = header();
        let good = h.encode();
        assert!(err(b"", 0).contains("empty"));
        assert!(err(b"PK\x03\x04", 4).contains("bad magic"));
        assert!(err(&good[..100], 100).contains("truncated"));
        assert!(err(&good, h.file_len() - 8).contains("truncated"));
        assert!(err(&good, h.file_len() + 3).contains("trailing"));
        let mut b = good.clone();
        b[16] ^= 1; // m
        assert!(err(&b, h.file_len()).contains("header checksum"));
        let mut b = good.clone();
        b[8] = 9; // version
        assert!(err(&b, h.file_len()).contains("version 9"));
        // A prefix of the magic is a truncated filter, not a foreign file.
        assert!(err(&good[..1], 1).contains("truncated"));
    }

    #[test]
    fn checksum_depends_on_bits_and_count() {
        let words: Vec<AtomicU64> = (0..20_000).map(AtomicU64::new).collect();
        let c = checksum(&words, 3);
        assert_eq!(c, checksum(&words, 3));
        assert_ne!(c, checksum(&words, 4));
        words[19_999].fetch_xor(1 << 40, Ordering::Relaxed);
        assert_ne!(c, checksum(&words, 3));
        let mut out = Vec::new();
        let c2 = write_words(&mut out, &words, 3).unwrap();
        assert_eq!(c2, checksum(&words, 3));
        assert_eq!(out.len(), 20_000 * 8);
    }
}
