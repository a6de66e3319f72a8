//! Text-statistics kernels of the rule taggers: the Gopher measures (`gopher_v1`) and the C4 line
//! and page rules (`c4_v1`/`c4_v2`). Pure Rust (no pyo3), so `cargo test` covers them; the
//! Python taggers in `taggers/builtin/{gopher,c4}.py` keep the reference implementation and the
//! parity tests compare both on the sample corpus.
//!
//! Semantics follow the Python code exactly: whitespace, `\w`, `[^\W\d_]` are CPython's
//! (`pyunicode`), lengths and offsets are in code points (Python `len`), lower-casing is done by
//! Python (`str.lower`) for non-ASCII text and passed in, so it is never re-implemented here.
use crate::pyunicode::{is_letter, is_space, is_word, rstrip, strip};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
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

#[inline]
fn char_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

// ------------------------------------------------------------------------------------------
// Gopher
// ------------------------------------------------------------------------------------------

/// Whether `c` belongs to a script written without spaces (gopher.py `_UNSPACED`).
#[inline]
pub fn is_unspaced(c: char) -> bool {
    let cp = c as u32;
    if cp < 0x0E00 {
        return false;
    }
    matches!(cp,
        0x0E00..=0x0EFF
        | 0x0F00..=0x0FFF
        | 0x1000..=0x109F
        | 0x1780..=0x17FF
        | 0x2E80..=0x2FDF
        | 0x3005..=0x3007
        | 0x3021..=0x3029
        | 0x3031..=0x3035
        | 0x3038..=0x303C
        | 0x3040..=0x30FF
        | 0x31F0..=0x31FF
        | 0x3400..=0x4DBF
        | 0x4E00..=0x9FFF
        | 0xF900..=0xFAFF
        | 0xFF66..=0xFF9F
        | 0x20000..=0x3134F)
}

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
    for r in 0..top {
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
        out[r] = covered_chars(&starts, n, lengths) as f64 / total;
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
            for r in 3..rows {
                let n = r + 2;
                let m = n_words - n + 1;
                let candidates: Vec<usize> = (0..m).filter(|&p| run[p] >= 2 && run[p] >= n - 3).collect();
                if candidates.len() < 2 {
                    break;
                }
                seen.clear();
                let hs: Vec<u64> = candidates
                    .iter()
                    .map(|&p| ngram_hash(&unigram[p..p + n]))
                    .collect();
                for &h in &hs {
                    *seen.entry(h).or_insert(0) += 1;
                }
                let repeated: Vec<usize> = candidates
                    .iter()
                    .zip(&hs)
                    .filter(|(_, h)| seen[*h] > 1)
                    .map(|(&p, _)| p)
                    .collect();
                if repeated.is_empty() {
                    break;
                }
                out[r] = covered_chars(&repeated, n, lengths) as f64 / total;
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
        if ascii {
            let b = text.as_bytes();
            let mut i = 0;
            while i < b.len() {
                while i < b.len() && is_space(b[i] as char) {
                    i += 1;
                }
                if i >= b.len() {
                    break;
                }
                let s = i;
                let mut letter = false;
                while i < b.len() && !is_space(b[i] as char) {
                    letter |= is_letter(b[i] as char);
                    i += 1;
                }
                words.push(&text[s..i]);
                lengths.push((i - s) as u64);
                with_letter += letter as u64;
            }
        } else {
            let mut start: Option<usize> = None;
            let mut n_chars = 0u64;
            let mut letter = false;
            for (i, c) in text.char_indices() {
                let unsp = is_unspaced(c);
                if unsp || is_space(c) {
                    if let Some(s) = start.take() {
                        words.push(&text[s..i]);
                        lengths.push(n_chars);
                        with_letter += letter as u64;
                    }
                    if unsp {
                        words.push(&text[i..i + c.len_utf8()]);
                        lengths.push(1);
                        with_letter += is_letter(c) as u64;
                        unspaced += 1;
                    }
                } else {
                    if start.is_none() {
                        start = Some(i);
                        n_chars = 0;
                        letter = false;
                    }
                    n_chars += 1;
                    letter |= is_letter(c);
                }
            }
            if let Some(s) = start {
                words.push(&text[s..]);
                lengths.push(n_chars);
                with_letter += letter as u64;
            }
        }
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
                text.split(|c: char| {
                    c.is_ascii_whitespace() || c == '\x0b' || is_ascii_punct_not_underscore(c as u8)
                })
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
            if s.is_empty() {
                continue;
            }
            lines.push(s);
            let first = s.chars().next().unwrap();
            if BULLETS.contains(&first) || first == BULLET_ARROW {
                bullets += 1;
            }
            let r = rstrip(seg);
            if r.ends_with("...") || r.ends_with('\u{2026}') {
                ellipsis_lines += 1;
            }
        }
        let per_line = if lines.is_empty() {
            0.0
        } else {
            1.0 / lines.len() as f64
        };
        let (dup_lines, dup_line_chars) = duplicates(&lines, ascii);
        let (dup_paras, dup_para_chars) = if text.as_bytes().contains(&b'\n') {
            let paragraphs: Vec<&str> = paragraph_pieces(text)
                .into_iter()
                .map(strip)
                .filter(|p| !p.is_empty())
                .collect();
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

// ------------------------------------------------------------------------------------------
// C4
// ------------------------------------------------------------------------------------------

const POLICY_SUBSTRINGS: [&str; 6] = [
    "terms of use",
    "privacy policy",
    "cookie policy",
    "uses cookies",
    "use of cookies",
    "use cookies",
];

/// The C4 result of one document. Line spans are (start, end) in code points, the newline inside.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct C4Result {
    pub no_punct: Vec<(u64, u64)>,
    pub few_words: Vec<(u64, u64)>,
    pub ellipsis: Vec<(u64, u64)>,
    pub js_lines: Vec<(u64, u64)>,
    pub policy_lines: Vec<(u64, u64)>,
    pub has_naughty_word: bool,
    pub has_javascript: bool,
    pub has_lorem_ipsum: bool,
    pub has_curly_brace: bool,
    pub has_policy: bool,
    pub line_count: u64,
    pub sentences: u64,
    pub n_chars: u64,
}

#[derive(Debug, Clone, Default)]
struct Roles {
    /// An entry of the bad-word list without a space (must be a whole token or a hyphen part).
    word: bool,
    /// Not made of `[\w&\-]` characters: any substring occurrence is a hit.
    odd: bool,
    /// Indices of phrases whose first word this is.
    first_of: Vec<usize>,
    /// Index of the phrase this pattern is.
    phrase: Option<usize>,
}

/// The C4 kernel: the bad-word automaton and the per-line word minimum.
#[derive(Debug, Clone)]
pub struct C4 {
    min_words: usize,
    ac: AhoCorasick,
    roles: Vec<Roles>,
    n_phrases: usize,
}

/// c4.py `_ASCII_SEPARATORS`: ASCII punctuation except `&`, `-` and `_`.
#[inline]
fn is_ascii_separator(c: char) -> bool {
    c.is_ascii_punctuation() && c != '&' && c != '-' && c != '_'
}

/// Matches of `[.!?]+["'\u201d\u2019)\]]*(?=\s|$)` in a stripped line.
fn count_sentence_ends(s: &str) -> u64 {
    let closer = |c: char| matches!(c, '"' | '\'' | '\u{201d}' | '\u{2019}' | ')' | ']');
    let mut count = 0;
    let mut it = s.char_indices().peekable();
    while let Some((_, c)) = it.next() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        while let Some(&(_, c)) = it.peek() {
            if matches!(c, '.' | '!' | '?') {
                it.next();
            } else {
                break;
            }
        }
        while let Some(&(_, c)) = it.peek() {
            if closer(c) {
                it.next();
            } else {
                break;
            }
        }
        match it.peek() {
            None => count += 1,
            Some(&(_, c)) if is_space(c) => count += 1,
            _ => {}
        }
    }
    count
}

/// Whether `s` has at least `k` whitespace-separated words.
#[inline]
fn has_words(s: &str, k: usize) -> bool {
    s.split(is_space).filter(|w| !w.is_empty()).take(k).count() >= k
}

impl C4 {
    /// `entries`: the lower-cased, stripped bad-word list. `min_words`: c4.py `min_words_per_line`.
    pub fn new(entries: &[String], min_words: usize) -> Result<Self, String> {
        let token_like = |w: &str| !w.is_empty() && w.chars().all(|c| is_word(c) || c == '&' || c == '-');
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut patterns: Vec<String> = Vec::new();
        let mut roles: Vec<Roles> = Vec::new();
        let mut slot = |p: &str, patterns: &mut Vec<String>, roles: &mut Vec<Roles>| -> usize {
            *index.entry(p.to_string()).or_insert_with(|| {
                patterns.push(p.to_string());
                roles.push(Roles::default());
                patterns.len() - 1
            })
        };
        let mut n_phrases = 0;
        for e in entries {
            if e.is_empty() {
                continue;
            }
            if e.contains(' ') {
                let first = e.split(' ').next().unwrap_or("");
                let k = slot(e, &mut patterns, &mut roles);
                roles[k].phrase = Some(n_phrases);
                if !first.is_empty() {
                    let f = slot(first, &mut patterns, &mut roles);
                    roles[f].first_of.push(n_phrases);
                }
                n_phrases += 1;
            } else {
                let k = slot(e, &mut patterns, &mut roles);
                roles[k].word = true;
                roles[k].odd |= !token_like(e);
            }
        }
        let ac = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)
            .map_err(|e| format!("c4: cannot build the bad-word automaton: {e}"))?;
        Ok(C4 {
            min_words,
            ac,
            roles,
            n_phrases,
        })
    }

    /// c4.py `has_bad_word(lower)`.
    pub fn has_bad_word(&self, lower: &str) -> bool {
        let ascii = lower.is_ascii();
        let tok = |c: char| {
            if ascii {
                !is_space(c) && !is_ascii_separator(c)
            } else {
                is_word(c) || c == '&' || c == '-'
            }
        };
        // Whether lower[a..b] (= w) is a token or a hyphen part of a token.
        let in_tokens = |a: usize, b: usize| -> bool {
            let w = &lower[a..b];
            if !w.chars().all(tok) {
                return false;
            }
            let hyphen_ok = !w.contains('-');
            let ok = |c: Option<char>| match c {
                None => true,
                Some(c) => !tok(c) || (c == '-' && hyphen_ok),
            };
            ok(lower[..a].chars().next_back()) && ok(lower[b..].chars().next())
        };
        let wb = |c: Option<char>| c.map(is_word).unwrap_or(false);
        let mut phrase_found = vec![false; self.n_phrases];
        let mut first_found = vec![false; self.n_phrases];
        for m in self.ac.find_overlapping_iter(lower) {
            let (a, b) = (m.start(), m.end());
            let role = &self.roles[m.pattern().as_usize()];
            if role.odd {
                return true;
            }
            if (role.word || !role.first_of.is_empty()) && in_tokens(a, b) {
                if role.word {
                    return true;
                }
                for &k in &role.first_of {
                    first_found[k] = true;
                }
            }
            if let Some(k) = role.phrase {
                let w = &lower[a..b];
                if wb(lower[..a].chars().next_back()) != wb(w.chars().next())
                    && wb(w.chars().next_back()) != wb(lower[b..].chars().next())
                {
                    phrase_found[k] = true;
                }
            }
        }
        phrase_found.iter().zip(&first_found).any(|(p, f)| *p && *f)
    }

    /// c4.py `C4Tagger.predict`. `lower` is Python's `text.lower()` (None for ASCII text).
    pub fn predict(&self, text: &str, lower: Option<&str>) -> C4Result {
        let owned;
        let lower: &str = match lower {
            Some(l) => l,
            None => {
                owned = if text.is_ascii() {
                    text.to_ascii_lowercase()
                } else {
                    text.to_lowercase()
                };
                &owned
            }
        };
        let ascii = text.is_ascii();
        let has_js = lower.contains("javascript");
        let has_policy = POLICY_SUBSTRINGS.iter().any(|p| lower.contains(p));
        let mut r = C4Result {
            has_javascript: has_js,
            has_policy,
            ..Default::default()
        };
        let mut lower_lines = lower.split('\n');
        let mut sentences = 0u64;
        let mut start = 0u64;
        let mut n_lines = 0u64;
        let mut segs = text.split('\n').peekable();
        while let Some(line) = segs.next() {
            let low = lower_lines.next().unwrap_or("");
            n_lines += 1;
            let len = if ascii { line.len() } else { char_len(line) } as u64;
            let end = start + len + segs.peek().is_some() as u64;
            let s = strip(line);
            let mut removed = false;
            if !(s.ends_with('.') || s.ends_with('?') || s.ends_with('!') || s.ends_with('"')) {
                r.no_punct.push((start, end));
                removed = true;
            } else if s.ends_with("...") {
                r.ellipsis.push((start, end));
                removed = true;
            }
            if self.min_words > 0 && !has_words(s, self.min_words) {
                r.few_words.push((start, end));
                removed = true;
            }
            if has_js && low.contains("javascript") {
                r.js_lines.push((start, end));
                removed = true;
            }
            if has_policy && POLICY_SUBSTRINGS.iter().any(|p| low.contains(p)) {
                r.policy_lines.push((start, end));
                removed = true;
            }
            if !removed {
                sentences += count_sentence_ends(s);
            }
            start = end;
        }
        r.n_chars = start;
        r.line_count = n_lines;
        r.sentences = sentences;
        r.has_naughty_word = self.has_bad_word(lower);
        r.has_lorem_ipsum = lower.contains("lorem ipsum");
        r.has_curly_brace = text.as_bytes().contains(&b'{');
        r
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

    #[test]
    fn c4_lines_and_words() {
        let entries = vec!["ass".to_string(), "blue waffle".to_string(), "2g1c".to_string()];
        let c4 = C4::new(&entries, 3).unwrap();
        let r = c4.predict("Hello there world.\nno\nOne two three...", None);
        assert_eq!(r.no_punct, vec![(19, 22)]);
        assert_eq!(r.few_words, vec![(19, 22)]);
        assert_eq!(r.ellipsis, vec![(22, 38)]);
        assert_eq!(r.sentences, 1);
        assert_eq!(r.line_count, 3);
        assert!(c4.has_bad_word("a dumb-ass thing"));
        assert!(!c4.has_bad_word("class assignment"));
        assert!(c4.has_bad_word("a blue waffle."));
        assert!(!c4.has_bad_word("a&blue waffle"));
        assert!(!c4.has_bad_word("blue waffles"));
    }

    #[test]
    fn sentence_ends() {
        assert_eq!(count_sentence_ends("A. B?! C.\") d.x e"), 3);
    }
}
