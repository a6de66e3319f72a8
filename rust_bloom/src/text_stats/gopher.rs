//! The Gopher measures of the `gopher_v1` tagger (taggers/builtin/gopher.py `GopherTagger.attributes`).
use crate::text::{char_len, for_each_word, is_letter, is_space, is_word, rstrip, strip};
use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use xxhash_rust::xxh3::xxh3_64;

/// Hasher for keys that are already 64-bit hashes (identity).
#[derive(Default)]
pub struct IdentityHasher(u64);

impl Hasher for IdentityHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ u64::from(b) ^ (self.0 >> 56);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type U64Map<V> = HashMap<u64, V, BuildHasherDefault<IdentityHasher>>;

/// Hasher for string keys: xxh3 of the bytes.
#[derive(Default)]
pub struct XxHasher(u64);

impl Hasher for XxHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = self.0.rotate_left(17) ^ xxh3_64(bytes);
    }
    fn write_u8(&mut self, i: u8) {
        self.0 = self.0.rotate_left(5) ^ u64::from(i);
    }
}

type StrMap<'a, V> = HashMap<&'a str, V, BuildHasherDefault<XxHasher>>;

const BULLETS: [char; 16] = [
    '-', '*', '\u{2022}', '\u{2023}', '\u{2043}', '\u{2219}', '\u{25aa}', '\u{25ab}', '\u{25cf}', '\u{25cb}',
    '\u{25e6}', '\u{25a0}', '\u{25a1}', '\u{00b7}', '\u{2013}', '\u{27a2}',
];
const BULLET_ARROW: char = '\u{2192}';

/// ASCII punctuation except `_` (gopher.py `_ASCII_PUNCT`).
#[inline]
fn is_ascii_punct_not_underscore(b: u8) -> bool {
    b.is_ascii_punctuation() && b != b'_'
}

/// One language's stop words: `alternatives` in the order of gopher.py's regex (longest first,
/// lower-cased), `set` the lower-cased words for the ASCII token path.
#[derive(Debug, Clone)]
pub struct StopWords {
    pub alternatives: Vec<String>,
    pub set: HashSet<String>,
    /// The ASCII words of `set` (the only ones an ASCII token can equal), and their longest length.
    ascii_words: Vec<String>,
    ascii_max: usize,
    /// Whether every alternative is made of `\w` characters (then a match is a whole `\w` run).
    word_alternatives: bool,
    alternatives_max: usize,
}

impl StopWords {
    pub fn new(alternatives: Vec<String>, set: HashSet<String>) -> Self {
        let ascii_words: Vec<String> = set.iter().filter(|w| w.is_ascii() && !w.is_empty()).cloned().collect();
        let ascii_max = ascii_words.iter().map(|w| w.len()).max().unwrap_or(0);
        let word_alternatives = alternatives.iter().all(|a| !a.is_empty() && a.chars().all(is_word));
        let alternatives_max = alternatives.iter().map(|a| a.len()).max().unwrap_or(0);
        StopWords { alternatives, set, ascii_words, ascii_max, word_alternatives, alternatives_max }
    }

    /// Whether an ASCII token, lower-cased, is one of the words.
    #[inline]
    fn has_ascii_token(&self, t: &str) -> bool {
        t.len() <= self.ascii_max && self.ascii_words.iter().any(|w| w.len() == t.len() && t.eq_ignore_ascii_case(w))
    }

    /// Matches of `\b(?:alternatives)\b` in lower-cased text.
    fn count_in_lower(&self, lower: &str) -> u64 {
        if !self.word_alternatives {
            return count_alternatives(lower, &self.alternatives);
        }
        // Every alternative is word characters: a match is a maximal \w run equal to one.
        let mut count = 0;
        for run in lower.split(|c: char| !is_word(c)) {
            if !run.is_empty() && run.len() <= self.alternatives_max && self.alternatives.iter().any(|a| a == run) {
                count += 1;
            }
        }
        count
    }
}

/// The measures of one document, in gopher.py's attribute order.
#[derive(Debug, Clone, PartialEq)]
pub struct GopherStats {
    pub character_count: u64,
    pub word_count: u64,
    pub mean_word_length: f64,
    pub median_word_length: f64,
    pub hash_to_word_ratio: f64,
    pub ellipsis_to_word_ratio: f64,
    pub symbol_to_word_ratio: f64,
    pub fraction_of_words_with_alpha_character: f64,
    /// None when the language has no stop-word list (the rule does not apply).
    pub required_word_count: Option<u64>,
    pub fraction_of_lines_starting_with_bullet_point: f64,
    pub fraction_of_lines_ending_with_ellipsis: f64,
    pub fraction_of_duplicate_lines: f64,
    pub fraction_of_characters_in_duplicate_lines: f64,
    pub fraction_of_duplicate_paragraphs: f64,
    pub fraction_of_characters_in_duplicate_paragraphs: f64,
    /// n = 2..4: most common n-gram; n = 5..10: duplicated n-grams.
    pub ngrams: [f64; 9],
    pub unspaced_words: u64,
}

/// The Gopher kernel: stop-word lists by language, fixed at construction.
#[derive(Debug, Clone, Default)]
pub struct Gopher {
    pub stop_words: HashMap<String, StopWords>,
}

/// (fraction of items repeating an earlier one, fraction of their characters): gopher.py `_duplicates`.
fn duplicates<'a>(items: &[&'a str], ascii: bool) -> (f64, f64) {
    if items.is_empty() {
        return (0.0, 0.0);
    }
    let mut seen: StrMap<'a, ()> = StrMap::with_capacity_and_hasher(items.len(), Default::default());
    let mut total: u64 = 0;
    let mut unique_chars: u64 = 0;
    for &it in items {
        let n = if ascii { it.len() } else { char_len(it) } as u64;
        total += n;
        if seen.insert(it, ()).is_none() {
            unique_chars += n;
        }
    }
    let dup = (items.len() - seen.len()) as f64 / items.len() as f64;
    let denom = if total == 0 { 1 } else { total };
    (dup, (total - unique_chars) as f64 / denom as f64)
}

/// Pieces of `re.split(r"\n[^\S\n]*\n\s*", text)`.
fn paragraph_pieces(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut pieces = Vec::new();
    let mut last = 0usize;
    let mut i = 0usize;
    while let Some(off) = memchr::memchr(b'\n', &bytes[i..]) {
        let nl = i + off;
        let mut j = nl + 1;
        // [^\S\n]*
        let rest = &text[j..];
        let skipped = rest.len() - rest.trim_start_matches(|c: char| c != '\n' && is_space(c)).len();
        j += skipped;
        if j < bytes.len() && bytes[j] == b'\n' {
            j += 1;
            let rest = &text[j..];
            j += rest.len() - rest.trim_start_matches(is_space).len();
            pieces.push(&text[last..nl]);
            last = j;
            i = j;
        } else {
            i = nl + 1;
        }
        if i >= bytes.len() {
            break;
        }
    }
    pieces.push(&text[last..]);
    pieces
}

/// Multiplier of the polynomial n-gram hash over the words' 64-bit hashes (as gopher.py).
const NGRAM_MULT: u64 = 0x100000001B3;

/// Hash of an n-gram: polynomial in the (pseudo-random, xxh3) word hashes, finalised.
#[inline]
fn ngram_hash(unigrams: &[u64]) -> u64 {
    let mut h = 0u64;
    for &u in unigrams {
        h = h.wrapping_mul(NGRAM_MULT).wrapping_add(u);
    }
    h
}

/// `prev` (hashes of the (n-1)-grams) extended by one word: hashes of the n-grams.
#[inline]
fn extend_hashes(prev: &mut Vec<u64>, unigram: &[u64], n: usize) {
    let m = unigram.len() + 1 - n;
    for p in 0..m {
        prev[p] = prev[p].wrapping_mul(NGRAM_MULT).wrapping_add(unigram[p + n - 1]);
    }
    prev.truncate(m);
}

/// Characters covered by n-grams starting at `starts` (sorted), over `lengths`.
fn covered_chars(starts: &[usize], n: usize, lengths: &[u64]) -> u64 {
    let mut sum = 0u64;
    let mut until = 0usize; // words before this index are already counted
    for &s in starts {
        let from = s.max(until);
        let to = s + n;
        if from < to {
            sum += lengths[from..to].iter().sum::<u64>();
            until = to;
        }
    }
    sum
}

/// gopher.py `ngram_fractions`, with exact word identity (64-bit hashes) instead of Python's
/// `hash`: the nine fractions for n = 2..10.
pub fn ngram_fractions(words: &[&str], lengths: &[u64]) -> [f64; 9] {
    let mut out = [0.0f64; 9];
    let n_words = words.len();
    if n_words < 2 {
        return out;
    }
    let unigram: Vec<u64> = words.iter().map(|w| xxh3_64(w.as_bytes())).collect();
    let total_len: u64 = lengths.iter().sum();
    let total = if total_len == 0 { 1.0 } else { total_len as f64 };
    let rows = (n_words - 1).min(9); // n = 2 ..= rows + 1
    let top = rows.min(3);
    let mut repeated4: Vec<bool> = Vec::new();
    let mut hashes: Vec<u64> = unigram.clone();
    let mut counts: U64Map<(u32, u32)> = U64Map::default();
    for (r, fraction) in out.iter_mut().enumerate().take(top) {
        let n = r + 2;
        let m = n_words - n + 1;
        extend_hashes(&mut hashes, &unigram, n);
        counts.clear();
        counts.reserve(m);
        for (p, &h) in hashes.iter().enumerate() {
            counts.entry(h).or_insert((0, p as u32)).0 += 1;
        }
        // Most common; ties: the one seen first.
        let (mut best_h, mut best_c, mut best_p) = (0u64, 0u32, u32::MAX);
        for (&h, &(c, p)) in counts.iter() {
            if c > best_c || (c == best_c && p < best_p) {
                best_h = h;
                best_c = c;
                best_p = p;
            }
        }
        let starts: Vec<usize> = (0..m).filter(|&p| hashes[p] == best_h).collect();
        *fraction = covered_chars(&starts, n, lengths) as f64 / total;
        if r == 2 {
            repeated4 = hashes.iter().map(|h| counts[h].0 > 1).collect();
        }
    }
    if rows > 3 {
        // run[p]: how many repeated 4-grams start at p, p+1, ... in a row.
        let mut run = vec![0usize; n_words + 1];
        for p in (0..repeated4.len()).rev() {
            run[p] = if repeated4[p] { run[p + 1] + 1 } else { 0 };
        }
        if run.iter().any(|&x| x >= 2) {
            let mut seen: U64Map<u32> = U64Map::default();
            for (r, fraction) in out.iter_mut().enumerate().take(rows).skip(3) {
                let n = r + 2;
                let m = n_words - n + 1;
                let candidates: Vec<usize> = (0..m).filter(|&p| run[p] >= 2 && run[p] >= n - 3).collect();
                if candidates.len() < 2 {
                    break;
                }
                seen.clear();
                let hs: Vec<u64> = candidates.iter().map(|&p| ngram_hash(&unigram[p..p + n])).collect();
                for &h in &hs {
                    *seen.entry(h).or_insert(0) += 1;
                }
                let repeated: Vec<usize> =
                    candidates.iter().zip(&hs).filter(|(_, h)| seen[*h] > 1).map(|(&p, _)| p).collect();
                if repeated.is_empty() {
                    break;
                }
                *fraction = covered_chars(&repeated, n, lengths) as f64 / total;
            }
        }
    }
    out
}

/// Matches of `\b(?:alt1|alt2|...)\b` in `lower` (non-overlapping, leftmost, alternatives in order).
fn count_alternatives(lower: &str, alternatives: &[String]) -> u64 {
    let bytes = lower.as_bytes();
    let word_before = |p: usize| lower[..p].chars().next_back().map(is_word).unwrap_or(false);
    let word_at = |p: usize| lower[p..].chars().next().map(is_word).unwrap_or(false);
    let mut count = 0u64;
    let mut p = 0usize;
    let mut prev_word = false;
    while p <= bytes.len() {
        let cur_word = word_at(p);
        let mut advanced = false;
        if prev_word != cur_word {
            for alt in alternatives {
                if lower[p..].starts_with(alt.as_str()) {
                    let e = p + alt.len();
                    if word_before(e) != word_at(e) {
                        count += 1;
                        p = e;
                        prev_word = word_before(e);
                        advanced = true;
                        break;
                    }
                }
            }
        }
        if advanced {
            continue;
        }
        match lower[p..].chars().next() {
            Some(c) => {
                p += c.len_utf8();
                prev_word = cur_word;
            }
            None => break,
        }
    }
    count
}

impl Gopher {
    pub fn new(stop_words: HashMap<String, StopWords>) -> Self {
        Gopher { stop_words }
    }

    /// Every measure of gopher.py `GopherTagger.attributes`. `lower` is Python's `text.lower()`,
    /// needed only for non-ASCII text with a stop-word list (ASCII text is lower-cased here).
    pub fn stats(&self, text: &str, lower: Option<&str>, lang: Option<&str>) -> GopherStats {
        let ascii = text.is_ascii();
        // Words: each unspaced-script character alone, else runs of non-space characters.
        let mut words: Vec<&str> = Vec::with_capacity(text.len() / 5 + 1);
        let mut lengths: Vec<u64> = Vec::with_capacity(text.len() / 5 + 1);
        let mut with_letter = 0u64;
        let mut unspaced = 0u64;
        for_each_word(text, |w, n, is_unspaced| {
            words.push(w);
            lengths.push(n);
            // gopher.py `[^\W\d_]\S*`: words holding a letter (most start with one).
            with_letter +=
                if ascii { w.bytes().any(|b| b.is_ascii_alphabetic()) } else { w.chars().any(is_letter) } as u64;
            unspaced += is_unspaced as u64;
        });
        let n_words = words.len();
        let per_word = if n_words > 0 { 1.0 / n_words as f64 } else { 0.0 };
        let median = if n_words > 0 {
            let mut sorted = lengths.clone();
            let half = n_words / 2;
            let (below, &mut mid, _) = sorted.select_nth_unstable(half);
            if n_words % 2 == 1 {
                mid as f64
            } else {
                (below.iter().copied().max().unwrap_or(mid) + mid) as f64 / 2.0
            }
        } else {
            0.0
        };
        let total_len: u64 = lengths.iter().sum();
        let hashes = memchr::memchr_iter(b'#', text.as_bytes()).count() as f64 * per_word;
        let ellipses = (text.matches("...").count() + text.matches('\u{2026}').count()) as f64 * per_word;

        let required_word_count = lang.and_then(|l| self.stop_words.get(l)).map(|sw| {
            if ascii {
                // bytes.split(): only b" \t\n\r\x0b\x0c" are whitespace (not \x1c..\x1f).
                text.split(|c: char| c.is_ascii_whitespace() || c == '\x0b' || is_ascii_punct_not_underscore(c as u8))
                    .filter(|t| !t.is_empty() && sw.has_ascii_token(t))
                    .count() as u64
            } else {
                match lower {
                    Some(l) => sw.count_in_lower(l),
                    None => sw.count_in_lower(&text.to_lowercase()),
                }
            }
        });

        // Lines (non-empty after strip), bullets and ellipses per "\n"-segment.
        let mut lines: Vec<&str> = Vec::new();
        let mut bullets = 0u64;
        let mut ellipsis_lines = 0u64;
        for seg in text.split('\n') {
            let s = strip(seg);
            let Some(first) = s.chars().next() else {
                continue; // an empty line
            };
            lines.push(s);
            if BULLETS.contains(&first) || first == BULLET_ARROW {
                bullets += 1;
            }
            let r = rstrip(seg);
            if r.ends_with("...") || r.ends_with('\u{2026}') {
                ellipsis_lines += 1;
            }
        }
        let per_line = if lines.is_empty() { 0.0 } else { 1.0 / lines.len() as f64 };
        let (dup_lines, dup_line_chars) = duplicates(&lines, ascii);
        let (dup_paras, dup_para_chars) = if text.as_bytes().contains(&b'\n') {
            let paragraphs: Vec<&str> =
                paragraph_pieces(text).into_iter().map(strip).filter(|p| !p.is_empty()).collect();
            duplicates(&paragraphs, ascii)
        } else {
            (0.0, 0.0)
        };
        let ngrams = ngram_fractions(&words, &lengths);
        GopherStats {
            character_count: if ascii { text.len() } else { text.chars().count() } as u64,
            word_count: n_words as u64,
            mean_word_length: total_len as f64 * per_word,
            median_word_length: median,
            hash_to_word_ratio: hashes,
            ellipsis_to_word_ratio: ellipses,
            symbol_to_word_ratio: hashes.max(ellipses),
            fraction_of_words_with_alpha_character: with_letter as f64 * per_word,
            required_word_count,
            fraction_of_lines_starting_with_bullet_point: bullets as f64 * per_line,
            fraction_of_lines_ending_with_ellipsis: ellipsis_lines as f64 * per_line,
            fraction_of_duplicate_lines: dup_lines,
            fraction_of_characters_in_duplicate_lines: dup_line_chars,
            fraction_of_duplicate_paragraphs: dup_paras,
            fraction_of_characters_in_duplicate_paragraphs: dup_para_chars,
            ngrams,
            unspaced_words: unspaced,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gopher_en() -> Gopher {
        let words = ["the", "be", "to", "of", "and", "that", "have", "with"];
        let mut alts: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        alts.sort_by_key(|w| std::cmp::Reverse(w.chars().count()));
        let set = words.iter().map(|w| w.to_string()).collect();
        let mut m = HashMap::new();
        m.insert("en".to_string(), StopWords::new(alts, set));
        Gopher::new(m)
    }

    #[test]
    fn words_and_counts() {
        let g = gopher_en();
        let s = g.stats("The cat, the dog.\n\n- item...\n- item...", None, Some("en"));
        assert_eq!(s.word_count, 8);
        assert_eq!(s.character_count, 38);
        assert_eq!(s.required_word_count, Some(2));
        assert!((s.fraction_of_lines_starting_with_bullet_point - 2.0 / 3.0).abs() < 1e-12);
        assert!((s.fraction_of_lines_ending_with_ellipsis - 2.0 / 3.0).abs() < 1e-12);
        assert!((s.fraction_of_duplicate_lines - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(g.stats("x", None, Some("xx")).required_word_count, None);
    }

    #[test]
    fn unspaced_scripts() {
        let g = gopher_en();
        let s = g.stats("中文字 abc", None, None);
        assert_eq!(s.word_count, 4);
        assert_eq!(s.unspaced_words, 3);
        assert_eq!(s.character_count, 7);
    }

    #[test]
    fn stop_words_non_ascii() {
        let g = gopher_en();
        let s = g.stats("Thé the", Some("thé the"), Some("en"));
        assert_eq!(s.required_word_count, Some(1));
        assert_eq!(count_alternatives("théthe the_ the", &["the".to_string()]), 1);
    }

    #[test]
    fn ngrams() {
        let words = ["a", "b", "a", "b", "c"];
        let lengths = [1u64; 5];
        let f = ngram_fractions(&words, &lengths);
        assert!((f[0] - 0.8).abs() < 1e-12); // "a b" twice covers 4 of 5
        let words: Vec<&str> = "x y z w v x y z w v q".split(' ').collect();
        let f = ngram_fractions(&words, &vec![1u64; words.len()]);
        assert!((f[3] - 10.0 / 11.0).abs() < 1e-12); // duplicate 5-gram
        assert_eq!(f[4], 0.0);
    }

    #[test]
    fn paragraphs() {
        assert_eq!(paragraph_pieces("a\n \nb\n\n\nc\nd"), vec!["a", "b", "c\nd"]);
    }
}
