//! 128-bit digests of dedup keys (seeded xxh3-128). Exact mode compares digests, so a false
//! duplicate needs a 128-bit collision (about 2^-64 for 10^10 keys). Each kind of key has its
//! own seed: a one-paragraph document's text and that paragraph are different keys.
use xxhash_rust::xxh3::xxh3_128_with_seed;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum Kind {
    /// `dedupe.documents.key` values.
    Document = 0x6470_6b65_795f_646f,
    /// Whole paragraphs (`dedupe.paragraphs`, and paragraphs too short for `by_ngram`).
    Paragraph = 0x6470_6b65_795f_7061,
    /// `by_ngram` word n-grams (tokens joined by 0xFF, a byte UTF-8 never contains).
    Ngram = 0x6470_6b65_795f_6e67,
    /// Decontamination paragraphs (evaluation and training sides alike).
    Decontamination = 0x6470_6b65_795f_6463,
}

#[inline]
pub fn digest(bytes: &[u8], kind: Kind) -> u128 {
    xxh3_128_with_seed(bytes, kind as u64)
}

/// Digest of a token sequence: each token's bytes followed by 0xFF.
pub fn digest_tokens(tokens: &[&str], kind: Kind, buf: &mut Vec<u8>) -> u128 {
    buf.clear();
    for t in tokens {
        buf.extend_from_slice(t.as_bytes());
        buf.push(0xFF);
    }
    digest(buf, kind)
}

/// Bucket of a 64-bit hash among `buckets` equal hash ranges.
#[inline]
pub fn bucket_of(h: u64, buckets: u32) -> usize {
    ((u128::from(h) * u128::from(buckets)) >> 64) as usize
}

#[inline]
pub fn high64(d: u128) -> u64 {
    (d >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_token_boundaries_differ() {
        assert_ne!(digest(b"a b", Kind::Paragraph), digest(b"a b", Kind::Document));
        let mut buf = Vec::new();
        let ab = digest_tokens(&["a", "b"], Kind::Ngram, &mut buf);
        assert_ne!(ab, digest_tokens(&["ab"], Kind::Ngram, &mut buf));
        assert_eq!(ab, digest_tokens(&["a", "b"], Kind::Ngram, &mut buf));
        assert_eq!(bucket_of(0, 7), 0);
        assert_eq!(bucket_of(u64::MAX, 7), 6);
    }
}
