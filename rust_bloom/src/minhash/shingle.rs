//! Shingles: word n-grams of normalised words, each reduced to a 64-bit hash.
//!
//! A word is, by default, a maximal run of `\w` characters (Python's `re` definition, from
//! `crate::text`), lower-cased; with `Words::Whitespace` it is a maximal run of non-space
//! characters instead. In both modes every character of a script written without spaces
//! between words (Han, kana, Thai, Lao, Tibetan, Myanmar, Khmer: `text::is_unspaced`) is a word
//! by itself, so such text yields shingles instead of one giant "word" per sentence.
//!
//! Each word is hashed (a seeded 64-bit hash of its normalised UTF-8); a shingle of n consecutive
//! words is an order-sensitive fold of their hashes, finished by a 64-bit mixer. A text with at
//! least one word but fewer than n is one shingle of all its words; a text without words has
//! none.
use super::MinhashError;
use crate::text::{is_space, is_unspaced, is_word};
use std::sync::OnceLock;

/// How words are delimited before shingling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Words {
    /// Runs of `\w` characters (letters, digits, underscore); punctuation separates words.
    WordChars,
    /// Runs of non-space characters (`str.split()`), punctuation kept inside words.
    Whitespace,
}

/// Turns texts into shingle hashes; cheap to clone and to share between threads.
#[derive(Debug, Clone)]
pub struct Shingler {
    pub ngram: usize,
    pub lowercase: bool,
    pub words: Words,
    pub seed: u64,
}

/// Reusable buffers of one thread (no allocation per document once warm).
#[derive(Default)]
pub struct Scratch {
    word: String,
    hashes: Vec<u64>,
}

/// The finaliser of MurmurHash3: a bijective 64-bit mixer.
#[inline]
pub fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^ (k >> 33)
}

/// ASCII classes for the word scanner: whether a byte belongs to a word (Python's `\w`, or
/// not `str.isspace`) and whether it is an upper-case letter.
const IN_WORD: u8 = 1;
const UPPER: u8 = 2;
static ASCII_WORD_CLASS: [u8; 256] = ascii_classes(false);
static ASCII_SPACE_CLASS: [u8; 256] = ascii_classes(true);

const fn ascii_classes(whitespace_words: bool) -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 128 {
        let b = i as u8;
        let space = matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r' | 0x1c..=0x1f);
        let word = b.is_ascii_alphanumeric() || b == b'_';
        let in_word = if whitespace_words { !space } else { word };
        t[i] = ((in_word as u8) * IN_WORD) | ((b.is_ascii_uppercase() as u8) * UPPER);
        i += 1;
    }
    t
}

/// Character classes and simple lower-case mappings of the Basic Multilingual Plane, looked up
/// in one step (the range tables of `crate::text` and `char::to_lowercase` take a binary search
/// per character). Built once per process, in about a millisecond.
struct Bmp {
    class: Box<[u8]>,
    lower: Box<[u16]>,
}

const WORD: u8 = 1;
const SPACE: u8 = 2;
const UNSPACED: u8 = 4;
/// `lower` value of a character whose lower case is not one BMP character (e.g. 'İ').
const COMPLEX: u16 = 0;

fn bmp() -> &'static Bmp {
    static TABLE: OnceLock<Bmp> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut class = vec![0u8; 0x10000].into_boxed_slice();
        let mut lower = vec![COMPLEX; 0x10000].into_boxed_slice();
        for cp in 0..0x10000u32 {
            let Some(c) = char::from_u32(cp) else { continue };
            class[cp as usize] =
                ((is_word(c) as u8) * WORD) | ((is_space(c) as u8) * SPACE) | ((is_unspaced(c) as u8) * UNSPACED);
            let mut it = c.to_lowercase();
            if let (Some(l), None) = (it.next(), it.next()) {
                if (l as u32) < 0x10000 && l as u32 != 0 {
                    lower[cp as usize] = l as u16;
                }
            }
        }
        Bmp { class, lower }
    })
}

#[inline]
fn class_of(c: char) -> u8 {
    let cp = c as u32;
    if cp < 0x10000 {
        bmp().class[cp as usize]
    } else {
        ((is_word(c) as u8) * WORD) | ((is_space(c) as u8) * SPACE) | ((is_unspaced(c) as u8) * UNSPACED)
    }
}

#[inline]
fn push_lower(buf: &mut String, c: char) {
    let cp = c as u32;
    if cp < 0x10000 {
        let l = bmp().lower[cp as usize];
        if l != COMPLEX {
            if let Some(l) = char::from_u32(u32::from(l)) {
                buf.push(l);
                return;
            }
        }
    }
    buf.extend(c.to_lowercase());
}

/// Decodes the character starting at byte `i` of valid UTF-8 (its lead byte is >= 0x80).
#[inline]
fn decode_at(b: &[u8], i: usize) -> (char, usize) {
    let b0 = u32::from(b[i]);
    let (cp, len) = if b0 >= 0xF0 {
        (
            (b0 & 0x07) << 18
                | (u32::from(b[i + 1]) & 0x3F) << 12
                | (u32::from(b[i + 2]) & 0x3F) << 6
                | (u32::from(b[i + 3]) & 0x3F),
            4,
        )
    } else if b0 >= 0xE0 {
        ((b0 & 0x0F) << 12 | (u32::from(b[i + 1]) & 0x3F) << 6 | (u32::from(b[i + 2]) & 0x3F), 3)
    } else {
        ((b0 & 0x1F) << 6 | (u32::from(b[i + 1]) & 0x3F), 2)
    };
    (char::from_u32(cp).unwrap_or('\u{FFFD}'), len)
}

const ONES: u64 = 0x0101_0101_0101_0101;

/// Bit masks of a block of 64 ASCII bytes: which bytes belong to words, which are upper-case
/// letters. `table` is the same classification byte by byte (the fallback).
#[inline(always)]
fn classify64(block: &[u8], table: &[u8; 256], whitespace: bool) -> (u64, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: AVX2 is available (checked above) and `block` holds 64 readable bytes.
            return unsafe { classify64_avx2(block, whitespace) };
        }
    }
    classify64_table(block, table)
}

#[inline(always)]
fn classify64_table(block: &[u8], table: &[u8; 256]) -> (u64, u64) {
    let mut words = 0u64;
    let mut uppers = 0u64;
    for (j, &byte) in block[..64].iter().enumerate() {
        let c = u64::from(table[byte as usize]);
        words |= (c & 1) << j;
        uppers |= ((c >> 1) & 1) << j;
    }
    (words, uppers)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn classify64_avx2(block: &[u8], whitespace: bool) -> (u64, u64) {
    use std::arch::x86_64::*;
    assert!(block.len() >= 64);
    // Every byte is below 0x80 (the caller checked), so signed byte comparisons are exact.
    macro_rules! within {
        ($v:expr, $lo:expr, $hi:expr) => {
            _mm256_and_si256(
                _mm256_cmpgt_epi8($v, _mm256_set1_epi8(($lo - 1) as i8)),
                _mm256_cmpgt_epi8(_mm256_set1_epi8(($hi + 1) as i8), $v),
            )
        };
    }
    let mut out = [(0u32, 0u32); 2];
    for (half, slot) in out.iter_mut().enumerate() {
        let v = _mm256_loadu_si256(block.as_ptr().add(32 * half) as *const __m256i);
        let upper = within!(v, b'A', b'Z');
        let word = if whitespace {
            let space = _mm256_or_si256(within!(v, 9u8, 13u8), within!(v, 28u8, 32u8));
            _mm256_xor_si256(space, _mm256_set1_epi8(-1))
        } else {
            let alnum = _mm256_or_si256(_mm256_or_si256(upper, within!(v, b'a', b'z')), within!(v, b'0', b'9'));
            _mm256_or_si256(alnum, _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'_' as i8)))
        };
        *slot = (_mm256_movemask_epi8(word) as u32, _mm256_movemask_epi8(upper) as u32);
    }
    (u64::from(out[0].0) | u64::from(out[1].0) << 32, u64::from(out[0].1) | u64::from(out[1].1) << 32)
}

/// What `Shingler::scan_words` gives each word to.
trait WordSink {
    fn word(&mut self, text: &str, start: usize, end: usize, upper: bool, wide: bool);
}

/// ASCII upper-case letters of 8 bytes (each below 0x80) turned lower-case, all at once.
#[inline(always)]
fn ascii_lower8(v: u64) -> u64 {
    let ge_a = v.wrapping_add((0x80 - u64::from(b'A')) * ONES);
    let gt_z = v.wrapping_add((0x80 - u64::from(b'Z') - 1) * ONES);
    v | (((ge_a ^ gt_z) & (0x80 * ONES)) >> 2)
}

/// 8 bytes of `buf` from `at`, of which the first `len` (1..=8) are kept and the rest zeroed.
/// Reads past the word inside `buf` when it can (a copy is slow: a store then a wider load).
#[inline(always)]
fn load_masked(buf: &[u8], at: usize, len: usize) -> u64 {
    let v = if at + 8 <= buf.len() {
        let c = &buf[at..at + 8];
        u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])
    } else {
        let mut tail = [0u8; 8];
        let avail = (buf.len() - at).min(8);
        tail[..avail].copy_from_slice(&buf[at..at + avail]);
        u64::from_le_bytes(tail)
    };
    if len >= 8 {
        v
    } else {
        v & ((1u64 << (8 * len)) - 1)
    }
}

/// The hash of a word's (normalised) bytes `buf[start..end]`: 8 bytes at a time (zero-padded
/// at the end), each mixed in by a multiply, then finalised. With `lower`, ASCII letters are
/// lower-cased on the fly (the same hash as lower-casing first: every byte must be ASCII).
#[inline(always)]
fn word_hash(buf: &[u8], start: usize, end: usize, seed: u64, lower: bool) -> u64 {
    let len = end - start;
    let mut h = seed ^ (len as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut at = start;
    while at < end {
        let mut v = load_masked(buf, at, end - at);
        if lower {
            v = ascii_lower8(v);
        }
        h = (h ^ v).wrapping_mul(0xff51_afd7_ed55_8ccd).rotate_left(31);
        at += 8;
    }
    fmix64(h)
}

#[inline]
fn fold(words: &[u64]) -> u64 {
    let mut h = 0x243F_6A88_85A3_08D3u64 ^ words.len() as u64;
    for &w in words {
        h = (h.rotate_left(23) ^ w).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fmix64(h)
}

impl Shingler {
    pub fn new(ngram: usize, lowercase: bool, words: Words, seed: u64) -> Result<Shingler, MinhashError> {
        if ngram == 0 {
            return Err(MinhashError::NgramSize);
        }
        Ok(Shingler { ngram, lowercase, words, seed })
    }

    #[inline(always)]
    fn in_word(&self, class: u8) -> bool {
        match self.words {
            Words::WordChars => class & WORD != 0,
            Words::Whitespace => class & SPACE == 0,
        }
    }

    /// Gives `sink` each word of `text`, in order, as a byte range with two flags: whether it
    /// has upper-case ASCII letters and whether it has non-ASCII characters (the sink normalises).
    ///
    /// Runs of 64 ASCII bytes are classified at once into bit masks (word bytes, upper-case
    /// bytes) and their words found with bit scans, without a branch per byte; other text goes
    /// one character at a time.
    #[inline(always)]
    fn scan_words<S: WordSink>(&self, text: &str, sink: &mut S) {
        let b = text.as_bytes();
        let n = b.len();
        let table: &[u8; 256] = match self.words {
            Words::WordChars => &ASCII_WORD_CLASS,
            Words::Whitespace => &ASCII_SPACE_CLASS,
        };
        const NONE: usize = usize::MAX;
        let mut start = NONE;
        let mut upper = false;
        let mut wide = false;
        let mut i = 0;
        while i < n {
            if i + 64 <= n {
                let block = &b[i..i + 64];
                let mut high = 0u64;
                for c in block.chunks_exact(8) {
                    high |= u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
                }
                if high & (0x80 * ONES) == 0 {
                    let (words, uppers) = classify64(block, table, self.words == Words::Whitespace);
                    let mut cur = 0u32;
                    loop {
                        let from = if cur >= 64 { 0 } else { !0u64 << cur };
                        if start == NONE {
                            let m = words & from;
                            if m == 0 {
                                break;
                            }
                            cur = m.trailing_zeros();
                            start = i + cur as usize;
                            upper = false;
                            wide = false;
                            continue;
                        }
                        let ends = !words & from;
                        if ends == 0 {
                            // The word goes on past this block.
                            upper |= uppers & from != 0;
                            break;
                        }
                        let e = ends.trailing_zeros();
                        upper |= uppers & from & ((1u64 << e) - 1) != 0;
                        sink.word(text, start, i + e as usize, upper, wide);
                        start = NONE;
                        cur = e;
                    }
                    i += 64;
                    continue;
                }
            }
            // One character at a time up to the end of this 64-byte stretch.
            let limit = (i + 64).min(n);
            while i < limit {
                let byte = b[i];
                if byte < 0x80 {
                    let c = table[byte as usize];
                    if c & IN_WORD != 0 {
                        if start == NONE {
                            start = i;
                            upper = false;
                            wide = false;
                        }
                        upper |= c & UPPER != 0;
                    } else if start != NONE {
                        sink.word(text, start, i, upper, wide);
                        start = NONE;
                    }
                    i += 1;
                    continue;
                }
                // A multi-byte character (valid UTF-8: `i` is a character boundary).
                let (c, len) = decode_at(b, i);
                let class = class_of(c);
                if class & UNSPACED != 0 {
                    if start != NONE {
                        sink.word(text, start, i, upper, wide);
                        start = NONE;
                    }
                    // A character of an unspaced script is a word by itself (if it is a word
                    // character at all in WordChars mode: CJK punctuation is not).
                    if self.words == Words::Whitespace || class & WORD != 0 {
                        sink.word(text, i, i + len, false, true);
                    }
                } else if self.in_word(class) {
                    if start == NONE {
                        start = i;
                        upper = false;
                    }
                    wide = true;
                } else if start != NONE {
                    sink.word(text, start, i, upper, wide);
                    start = NONE;
                }
                i += len;
            }
        }
        if start != NONE {
            sink.word(text, start, n, upper, wide);
        }
    }

    /// A word as shingles see it: lower-cased into `buf` when needed, else the word itself.
    #[inline(always)]
    fn normalised<'a>(&self, word: &'a str, upper: bool, wide: bool, buf: &'a mut String) -> &'a str {
        if !self.lowercase || !(upper || wide) {
            return word;
        }
        buf.clear();
        if wide {
            for c in word.chars() {
                push_lower(buf, c);
            }
        } else {
            buf.push_str(word);
            buf.make_ascii_lowercase();
        }
        buf
    }

    /// Calls `f` with each normalised word of `text`, in order.
    pub fn for_each_word(&self, text: &str, buf: &mut String, f: impl FnMut(&str)) {
        struct Each<'a, F: FnMut(&str)> {
            shingler: &'a Shingler,
            buf: &'a mut String,
            f: F,
        }
        impl<F: FnMut(&str)> WordSink for Each<'_, F> {
            #[inline(always)]
            fn word(&mut self, text: &str, start: usize, end: usize, upper: bool, wide: bool) {
                let w = self.shingler.normalised(&text[start..end], upper, wide, self.buf);
                (self.f)(w);
            }
        }
        self.scan_words(text, &mut Each { shingler: self, buf, f });
    }

    /// The hash of every normalised word, in order.
    pub fn word_hashes(&self, text: &str, scratch: &mut Scratch, out: &mut Vec<u64>) {
        struct Hashes<'a> {
            shingler: &'a Shingler,
            buf: &'a mut String,
            out: &'a mut Vec<u64>,
        }
        impl WordSink for Hashes<'_> {
            #[inline(always)]
            fn word(&mut self, text: &str, start: usize, end: usize, upper: bool, wide: bool) {
                let sh = self.shingler;
                let h = if wide {
                    let w = sh.normalised(&text[start..end], upper, wide, self.buf).as_bytes();
                    word_hash(w, 0, w.len(), sh.seed, false)
                } else {
                    // ASCII: lower-cased 8 bytes at a time while hashing, no copy.
                    word_hash(text.as_bytes(), start, end, sh.seed, sh.lowercase && upper)
                };
                self.out.push(h);
            }
        }
        out.clear();
        out.reserve(text.len() / 5);
        self.scan_words(text, &mut Hashes { shingler: self, buf: &mut scratch.word, out });
    }

    /// The shingle hashes of `text` in order (repeats included), appended to `out`.
    pub fn shingles(&self, text: &str, scratch: &mut Scratch, out: &mut Vec<u64>) {
        out.clear();
        let mut hashes = std::mem::take(&mut scratch.hashes);
        self.word_hashes(text, scratch, &mut hashes);
        self.shingles_of_words(&hashes, out);
        scratch.hashes = hashes;
    }

    /// Shingle hashes from word hashes, appended to `out`.
    pub fn shingles_of_words(&self, words: &[u64], out: &mut Vec<u64>) {
        let n = self.ngram;
        if words.is_empty() {
            return;
        }
        if words.len() < n {
            out.push(fold(words));
            return;
        }
        out.reserve(words.len() + 1 - n);
        out.extend(words.windows(n).map(fold));
    }

    /// The distinct shingles of `text` as sorted 32-bit values (the high half of each hash):
    /// what exact Jaccard verification compares.
    pub fn shingle_set32(&self, text: &str, scratch: &mut Scratch, out: &mut Vec<u32>) {
        let mut shingles = Vec::new();
        self.shingles(text, scratch, &mut shingles);
        set32(&shingles, out);
    }
}

/// Sorted distinct high halves of 64-bit shingle hashes.
pub fn set32(shingles: &[u64], out: &mut Vec<u32>) {
    out.clear();
    out.extend(shingles.iter().map(|&h| (h >> 32) as u32));
    out.sort_unstable();
    out.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &Shingler, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        s.for_each_word(text, &mut String::new(), |w| out.push(w.to_string()));
        out
    }

    #[test]
    fn words_are_lowercased_word_character_runs() {
        let s = Shingler::new(5, true, Words::WordChars, 1).unwrap();
        assert_eq!(words(&s, "Hello, World! it's snake_case 42"), ["hello", "world", "it", "s", "snake_case", "42"]);
        assert_eq!(words(&s, "Ünïcode ÉTÉ—déjà"), ["ünïcode", "été", "déjà"]);
        let ws = Shingler::new(5, false, Words::Whitespace, 1).unwrap();
        assert_eq!(words(&ws, " it's  A\ttest. "), ["it's", "A", "test."]);
    }

    #[test]
    fn lookup_tables_agree_with_the_text_module() {
        for cp in 0..0x3_0000u32 {
            let Some(c) = char::from_u32(cp) else { continue };
            let class = class_of(c);
            assert_eq!(class & WORD != 0, is_word(c), "{c:?}");
            assert_eq!(class & SPACE != 0, is_space(c), "{c:?}");
            assert_eq!(class & UNSPACED != 0, is_unspaced(c), "{c:?}");
            if cp < 128 {
                assert_eq!(ASCII_WORD_CLASS[cp as usize] & IN_WORD != 0, is_word(c));
                assert_eq!(ASCII_SPACE_CLASS[cp as usize] & IN_WORD != 0, !is_space(c));
            }
            let mut fast = String::new();
            push_lower(&mut fast, c);
            assert_eq!(fast, c.to_lowercase().collect::<String>(), "{c:?}");
        }
        assert_eq!(decode_at("é😀".as_bytes(), 0), ('é', 2));
        assert_eq!(decode_at("é😀".as_bytes(), 2), ('😀', 4));
    }

    #[test]
    fn on_the_fly_lowercasing_hashes_like_lowercasing_first() {
        for w in ["A", "Hello", "MIXEDcase_WORDS_longer_than_16", "@[`{az09AZ_", "abcdefgh", "ABCDEFGHI"] {
            let lowered = w.to_ascii_lowercase();
            let padded = format!("{w}xyzxyzxyz");
            let ours = word_hash(w.as_bytes(), 0, w.len(), 3, true);
            assert_eq!(ours, word_hash(lowered.as_bytes(), 0, w.len(), 3, false), "{w}");
            assert_eq!(
                ours,
                word_hash(padded.as_bytes(), 0, w.len(), 3, true),
                "reading past the word changes nothing: {w}"
            );
        }
        for b in 0u8..128 {
            let v = ascii_lower8(u64::from_le_bytes([b; 8]));
            assert_eq!(v.to_le_bytes(), [b.to_ascii_lowercase(); 8], "{b}");
        }
        assert_ne!(word_hash(b"ab", 0, 2, 1, false), word_hash(b"ab\0", 0, 3, 1, false), "the length is hashed");
    }

    #[test]
    fn block_classification_agrees_with_the_tables() {
        let mut block = [0u8; 64];
        for start in (0u8..128).step_by(64) {
            for (j, b) in block.iter_mut().enumerate() {
                *b = start + j as u8;
            }
            for (table, ws) in [(&ASCII_WORD_CLASS, false), (&ASCII_SPACE_CLASS, true)] {
                assert_eq!(classify64(&block, table, ws), classify64_table(&block, table), "{start} {ws}");
            }
        }
    }

    #[test]
    fn unspaced_scripts_are_one_word_per_character() {
        let s = Shingler::new(2, true, Words::WordChars, 1).unwrap();
        assert_eq!(words(&s, "中文abc。日本"), ["中", "文", "abc", "日", "本"]);
        let mut out = Vec::new();
        s.shingles("中文abc日本", &mut Scratch::default(), &mut out);
        assert_eq!(out.len(), 4);
    }

    #[test]
    fn short_texts_are_one_shingle_and_empty_texts_none() {
        let s = Shingler::new(5, true, Words::WordChars, 1).unwrap();
        let mut scratch = Scratch::default();
        let mut out = Vec::new();
        s.shingles("two words", &mut scratch, &mut out);
        assert_eq!(out.len(), 1);
        s.shingles(" ,;! ", &mut scratch, &mut out);
        assert!(out.is_empty());
        s.shingles("a b c d e f g", &mut scratch, &mut out);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn shingles_depend_on_order_and_seed_but_not_on_case_or_punctuation() {
        let s = Shingler::new(2, true, Words::WordChars, 7).unwrap();
        let mut scratch = Scratch::default();
        let (mut a, mut b, mut c) = (Vec::new(), Vec::new(), Vec::new());
        s.shingles("The cat sat", &mut scratch, &mut a);
        s.shingles("the CAT, sat!", &mut scratch, &mut b);
        s.shingles("sat cat the", &mut scratch, &mut c);
        assert_eq!(a, b);
        assert_ne!(a, c);
        let other = Shingler::new(2, true, Words::WordChars, 8).unwrap();
        let mut d = Vec::new();
        other.shingles("The cat sat", &mut scratch, &mut d);
        assert_ne!(a, d);
        assert!(Shingler::new(0, true, Words::WordChars, 1).is_err());
    }
}
