//! The Gopher measures, in two modes of one kernel: the paper's rules of our `gopher` tagger
//! (taggers/builtin/gopher.py `GopherTagger.attributes`, its Python reference) and Dolma
//! 1.2.1's definitions of `gopher_v1`/`gopher_v2` (`Gopher::dolma_stats`; the reference is Dolma's
//! own code, mirrored by gopher.py `dolma_attributes`).
use crate::text::{char_len, for_each_word, is_alpha, is_letter, is_space, is_word, rstrip, strip};
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

/// The measures of Dolma 1.2.1's `gopher_v1` / `gopher_v2` (`dolma/taggers/gopher.py`
/// `get_attributes`), by Dolma's definitions (see `Gopher::dolma_stats`).
#[derive(Debug, Clone, PartialEq)]
pub struct DolmaGopherStats {
    /// `len(text)`: the value of `character_count` and the end of every span.
    pub character_count: u64,
    pub word_count: u64,
    pub median_word_length: f64,
    pub symbol_to_word_ratio: f64,
    pub fraction_of_words_with_alpha_character: f64,
    pub required_word_count: u64,
    pub fraction_of_lines_starting_with_bullet_point: f64,
    pub fraction_of_lines_ending_with_ellipsis: f64,
    pub fraction_of_duplicate_lines: f64,
    pub fraction_of_characters_in_duplicate_lines: f64,
    /// n = 2..4: most common n-gram; n = 5..10: duplicated n-grams; None: fewer than n words.
    pub ngrams: [Option<f64>; 9],
}

/// Which definitions the Gopher kernel computes: the paper's (our `gopher` tagger) or Dolma
/// 1.2.1's (`gopher_v1`, and `gopher_v2` whose lines are `re.split(r"\n+", text)`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GopherMode {
    Paper,
    Dolma { ignore_empty_lines: bool },
}

/// Dolma's `REQUIRED_ENGLISH_WORDS`, matched case-sensitively against whole `split()` words.
const DOLMA_REQUIRED_WORDS: [&str; 8] = ["the", "be", "to", "of", "and", "that", "have", "with"];

/// Python's `statistics.median` of word lengths (0.0 for none), as a float.
fn median(lengths: &[u64]) -> f64 {
    let n = lengths.len();
    if n == 0 {
        return 0.0;
    }
    let mut sorted = lengths.to_vec();
    let half = n / 2;
    let (below, &mut mid, _) = sorted.select_nth_unstable(half);
    if n % 2 == 1 {
        mid as f64
    } else {
        (below.iter().copied().max().unwrap_or(mid) + mid) as f64 / 2.0
    }
}

/// The Gopher kernel: stop-word lists by language (paper mode), fixed at construction. One
/// kernel for both modes: the word splitting, the n-gram grouping (`NgramScan`) and the line
/// walk are shared; `stats` applies the paper's definitions, `dolma_stats` Dolma's.
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

/// Hash of an n-gram: polynomial in the (pseudo-random, xxh3) word hashes.
#[inline]
fn ngram_hash(unigrams: &[u64]) -> u64 {
    let mut h = 0u64;
    for &u in unigrams {
        h = h.wrapping_mul(NGRAM_MULT).wrapping_add(u);
    }
    h
}

/// The n-grams starting at some positions, grouped by identity: `ids[i]` is the group of the
/// n-gram at `positions[i]`, groups are numbered in order of first occurrence, `counts[g]` is
/// how often group `g` occurs among the positions and `first[g]` where it first starts.
///
/// Exact: n-grams are looked up by their 64-bit hash, and every hit is checked word by word;
/// on a hash collision (never seen in practice) the grouping is redone keyed by the words.
/// Shared by both modes: the paper's union coverage and Dolma's `Counter`-based sums.
#[derive(Debug, Default)]
struct Groups {
    ids: Vec<u32>,
    counts: Vec<u32>,
    first: Vec<usize>,
}

impl Groups {
    fn build(words: &[&str], n: usize, positions: &[usize], hashes: &[u64], map: &mut U64Map<u32>) -> Groups {
        let mut g = Groups { ids: Vec::with_capacity(positions.len()), counts: Vec::new(), first: Vec::new() };
        map.clear();
        map.reserve(positions.len());
        for (&p, &h) in positions.iter().zip(hashes) {
            let next = g.counts.len() as u32;
            let id = *map.entry(h).or_insert(next);
            if id == next {
                g.counts.push(1);
                g.first.push(p);
            } else {
                let q = g.first[id as usize];
                if words[q..q + n] != words[p..p + n] {
                    return Groups::build_exact(words, n, positions);
                }
                g.counts[id as usize] += 1;
            }
            g.ids.push(id);
        }
        g
    }

    /// The same grouping keyed by the words themselves (the collision fallback).
    #[cold]
    fn build_exact(words: &[&str], n: usize, positions: &[usize]) -> Groups {
        let mut map: HashMap<&[&str], u32> = HashMap::with_capacity(positions.len());
        let mut g = Groups::default();
        for &p in positions {
            let next = g.counts.len() as u32;
            let id = *map.entry(&words[p..p + n]).or_insert(next);
            if id == next {
                g.counts.push(0);
                g.first.push(p);
            }
            g.counts[id as usize] += 1;
            g.ids.push(id);
        }
        g
    }

    /// The most frequent group; ties go to the one seen first (Python's `Counter.most_common`).
    fn most_common(&self) -> Option<usize> {
        let mut best: Option<usize> = None;
        for (id, &c) in self.counts.iter().enumerate() {
            if best.is_none_or(|b| c > self.counts[b]) {
                best = Some(id);
            }
        }
        best
    }
}

/// The most common n-gram of one n (ties: the first seen) and which n-grams repeat.
#[derive(Debug, Default)]
struct Level {
    /// Occurrences of the most common n-gram and where it first starts.
    best_count: u32,
    best_first: usize,
    /// Where the most common n-gram starts, every occurrence (sorted).
    best_starts: Vec<usize>,
    /// repeated[p]: the n-gram starting at p occurs more than once.
    repeated: Vec<bool>,
}

impl Level {
    /// The level of the n-grams starting at `candidates` (every n-gram that can repeat; the
    /// others occur once), with their hashes; `m` n-grams in all.
    fn new(words: &[&str], n: usize, m: usize, candidates: &[usize], hashes: &[u64], map: &mut U64Map<u32>) -> Level {
        let g = Groups::build(words, n, candidates, hashes, map);
        let mut level = Level { best_count: 1, best_first: 0, best_starts: vec![0], repeated: vec![false; m] };
        for (&p, &id) in candidates.iter().zip(&g.ids) {
            level.repeated[p] = g.counts[id as usize] > 1;
        }
        if let Some(best) = g.most_common().filter(|&b| g.counts[b] > 1) {
            level.best_count = g.counts[best];
            level.best_first = g.first[best];
            level.best_starts =
                candidates.iter().zip(&g.ids).filter(|(_, &id)| id as usize == best).map(|(&p, _)| p).collect();
        }
        // Otherwise every n-gram occurs once and the first seen is the most common.
        level
    }
}

/// What the n-gram rules of both modes start from: the words' hashes, the 2-, 3- and 4-gram
/// levels (as many as the words allow) and where runs of repeated 4-grams start.
///
/// Only n-grams that can repeat are grouped: an n-gram occurring twice is made of two
/// (n-1)-grams that each occur twice (at p and p+1), so the 3-grams are only looked up where two
/// repeated 2-grams start in a row, the 4-grams where two repeated 3-grams do, and an n-gram for
/// n >= 5 where n-3 repeated 4-grams start in a row (in most documents there are none).
struct NgramScan<'w, 'a> {
    words: &'w [&'a str],
    unigram: Vec<u64>,
    /// Levels of the 2-, 3- and 4-grams.
    short: Vec<Level>,
    /// run[p]: how many repeated 4-grams start at p, p+1, ... in a row.
    run: Vec<usize>,
    map: U64Map<u32>,
}

impl<'w, 'a> NgramScan<'w, 'a> {
    fn new(words: &'w [&'a str]) -> Self {
        let n_words = words.len();
        let unigram: Vec<u64> = words.iter().map(|w| xxh3_64(w.as_bytes())).collect();
        let mut map = U64Map::default();
        let mut short: Vec<Level> = Vec::with_capacity(3);
        for n in 2..=4usize {
            if n_words < n {
                break;
            }
            let m = n_words - n + 1;
            let candidates: Vec<usize> = match short.last() {
                None => (0..m).collect(),
                Some(prev) => (0..m).filter(|&p| prev.repeated[p] && prev.repeated[p + 1]).collect(),
            };
            let hashes: Vec<u64> = candidates.iter().map(|&p| ngram_hash(&unigram[p..p + n])).collect();
            short.push(Level::new(words, n, m, &candidates, &hashes, &mut map));
        }
        let mut run = vec![0usize; n_words + 1];
        if let Some(l4) = short.get(2) {
            for p in (0..l4.repeated.len()).rev() {
                run[p] = if l4.repeated[p] { run[p + 1] + 1 } else { 0 };
            }
        }
        NgramScan { words, unigram, short, run, map }
    }

    /// Start positions of the repeated n-grams (n >= 5), in order.
    fn repeated(&mut self, n: usize) -> Vec<usize> {
        let n_words = self.words.len();
        if n_words < n {
            return Vec::new();
        }
        let m = n_words - n + 1;
        let candidates: Vec<usize> = (0..m).filter(|&p| self.run[p] >= 2 && self.run[p] >= n - 3).collect();
        if candidates.len() < 2 {
            return Vec::new();
        }
        let hashes: Vec<u64> = candidates.iter().map(|&p| ngram_hash(&self.unigram[p..p + n])).collect();
        let g = Groups::build(self.words, n, &candidates, &hashes, &mut self.map);
        candidates.iter().zip(&g.ids).filter(|(_, &id)| g.counts[id as usize] > 1).map(|(&p, _)| p).collect()
    }
}

/// Characters covered by n-grams starting at `starts` (sorted), over `lengths`: each word once.
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

/// The paper's n-gram measures (gopher.py `ngram_fractions`): for n = 2..4 the characters covered
/// by the occurrences of the most frequent n-gram, for n = 5..10 the characters covered by
/// n-grams occurring more than once, each word counted once, over the characters of all words.
pub fn ngram_fractions(words: &[&str], lengths: &[u64]) -> [f64; 9] {
    let mut out = [0.0f64; 9];
    if words.len() < 2 {
        return out;
    }
    let total_len: u64 = lengths.iter().sum();
    let total = if total_len == 0 { 1.0 } else { total_len as f64 };
    let mut scan = NgramScan::new(words);
    for (r, level) in scan.short.iter().enumerate() {
        out[r] = covered_chars(&level.best_starts, r + 2, lengths) as f64 / total;
    }
    for n in 5..=10usize {
        let repeated = scan.repeated(n);
        if repeated.is_empty() {
            break; // no repeated n-gram, no repeated longer one
        }
        out[n - 2] = covered_chars(&repeated, n, lengths) as f64 / total;
    }
    out
}

/// Dolma's n-gram measures (`dolma/taggers/gopher.py` `get_attributes`), `None` where the text
/// has fewer than n words (Dolma writes no span for that n). With `chars` the characters of all
/// words (at least 1):
/// * n = 2..4: occurrences of the most common n-gram (ties: the first seen) times its
///   characters, over `chars`: overlapping occurrences count again, so values above 1 happen;
/// * n = 5..10: the characters of every occurrence of an n-gram that occurs more than once,
///   over the characters of all n-gram occurrences.
pub fn dolma_ngram_fractions(words: &[&str], lengths: &[u64]) -> [Option<f64>; 9] {
    let mut out = [None; 9];
    let n_words = words.len();
    if n_words < 2 {
        return out;
    }
    let mut prefix = Vec::with_capacity(n_words + 1);
    prefix.push(0u64);
    for &l in lengths {
        prefix.push(prefix[prefix.len() - 1] + l);
    }
    let chars = |p: usize, n: usize| prefix[p + n] - prefix[p];
    let total = prefix[n_words].max(1) as f64;
    let mut scan = NgramScan::new(words);
    for (r, level) in scan.short.iter().enumerate() {
        out[r] = Some((u64::from(level.best_count) * chars(level.best_first, r + 2)) as f64 / total);
    }
    for n in 5..=10usize {
        if n_words < n {
            break;
        }
        let m = n_words - n + 1;
        // All occurrences' characters: each word counts once per n-gram holding it.
        let all: u64 = (0..m).map(|p| chars(p, n)).sum();
        let repeated: u64 = scan.repeated(n).iter().map(|&p| chars(p, n)).sum();
        out[n - 2] = Some(repeated as f64 / all.max(1) as f64);
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
        let median = median(&lengths);
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

    /// Dolma 1.2.1's `get_attributes(text, ignore_empty_lines)`, definition for definition:
    /// * words are `text.split()`; `word_count`, `median_word_length` (`statistics.median`);
    /// * `symbol_to_word_ratio`: words containing `#` or `…` (U+2026; not `...`) per word;
    /// * `fraction_of_words_with_alpha_character`: words with a `str.isalpha` character;
    /// * `required_word_count`: words equal to one of the paper's eight English stop words,
    ///   case-sensitively and without stripping punctuation ("The" and "the," do not count);
    /// * lines are `text.split("\n")` (`ignore_empty_lines`: `re.split(r"\n+", text)`), empty
    ///   ones included; a bullet line starts with `*` or `-` (no space skipped), an ellipsis
    ///   line ends with `…` only; duplicate lines count every copy of a line seen more than once
    ///   (the first too) over all lines, and their characters over the characters of the words;
    /// * the n-gram measures of `dolma_ngram_fractions`.
    pub fn dolma_stats(text: &str, ignore_empty_lines: bool) -> DolmaGopherStats {
        let ascii = text.is_ascii();
        let character_count = if ascii { text.len() } else { text.chars().count() } as u64;
        let mut words: Vec<&str> = Vec::with_capacity(text.len() / 5 + 1);
        let mut lengths: Vec<u64> = Vec::with_capacity(text.len() / 5 + 1);
        let (mut with_symbol, mut with_alpha, mut required) = (0u64, 0u64, 0u64);
        // One pass: the split() words, their lengths in code points, and per word whether it
        // holds a symbol (# or U+2026) and a str.isalpha character.
        let mut word = |w: &'_ str, n: u64, symbol: bool, alpha: bool| {
            required += (w.len() <= 4 && DOLMA_REQUIRED_WORDS.contains(&w)) as u64;
            with_symbol += symbol as u64;
            with_alpha += alpha as u64;
            n
        };
        if ascii {
            let b = text.as_bytes();
            let mut i = 0;
            while i < b.len() {
                while i < b.len() && is_space(b[i] as char) {
                    i += 1;
                }
                let start = i;
                let (mut symbol, mut alpha) = (false, false);
                while i < b.len() && !is_space(b[i] as char) {
                    symbol |= b[i] == b'#';
                    alpha |= b[i].is_ascii_alphabetic();
                    i += 1;
                }
                if i > start {
                    let w = &text[start..i];
                    lengths.push(word(w, (i - start) as u64, symbol, alpha));
                    words.push(w);
                }
            }
        } else {
            let (mut start, mut n, mut symbol, mut alpha) = (None, 0u64, false, false);
            for (i, c) in text.char_indices() {
                if is_space(c) {
                    if let Some(s) = start.take() {
                        let w = &text[s..i];
                        lengths.push(word(w, n, symbol, alpha));
                        words.push(w);
                    }
                    continue;
                }
                if start.is_none() {
                    (start, n, symbol, alpha) = (Some(i), 0, false, false);
                }
                n += 1;
                symbol |= c == '#' || c == '\u{2026}';
                alpha = alpha || is_alpha(c);
            }
            if let Some(s) = start {
                let w = &text[s..];
                lengths.push(word(w, n, symbol, alpha));
                words.push(w);
            }
        }
        let n_words = words.len() as u64;
        let per_word = n_words.max(1) as f64;
        let word_chars: u64 = lengths.iter().sum();

        let mut n_lines = 0u64;
        let (mut bullets, mut ellipses) = (0u64, 0u64);
        let mut counts: StrMap<'_, u32> = StrMap::default();
        let mut segments = text.split('\n').peekable();
        let mut first = true;
        while let Some(line) = segments.next() {
            let last = segments.peek().is_none();
            // re.split(r"\n+"): a run of newlines is one separator, so the empty pieces between
            // two newlines vanish (a leading or trailing empty piece stays).
            if ignore_empty_lines && line.is_empty() && !first && !last {
                continue;
            }
            first = false;
            n_lines += 1;
            bullets += line.starts_with(['*', '-']) as u64;
            ellipses += line.ends_with('\u{2026}') as u64;
            *counts.entry(line).or_insert(0) += 1;
        }
        let (mut dup_lines, mut dup_chars) = (0u64, 0u64);
        for (line, &c) in &counts {
            if c > 1 {
                dup_lines += u64::from(c);
                dup_chars += if ascii { line.len() } else { char_len(line) } as u64 * u64::from(c);
            }
        }
        let per_line = n_lines.max(1) as f64;
        DolmaGopherStats {
            character_count,
            word_count: n_words,
            median_word_length: median(&lengths),
            symbol_to_word_ratio: with_symbol as f64 / per_word,
            fraction_of_words_with_alpha_character: with_alpha as f64 / per_word,
            required_word_count: required,
            fraction_of_lines_starting_with_bullet_point: bullets as f64 / per_line,
            fraction_of_lines_ending_with_ellipsis: ellipses as f64 / per_line,
            fraction_of_duplicate_lines: dup_lines as f64 / per_line,
            fraction_of_characters_in_duplicate_lines: dup_chars as f64 / word_chars.max(1) as f64,
            ngrams: dolma_ngram_fractions(&words, &lengths),
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

    fn round5(x: f64) -> f64 {
        format!("{x:.5}").parse().unwrap()
    }

    #[test]
    fn dolma_mode_values() {
        // The values Dolma 1.2.1's gopher_v1 writes for this text (rounded to 5 decimals).
        let s = Gopher::dolma_stats("Hello world.\n\n- item one two\n* x\nthe the be to \u{2026}\n", false);
        assert_eq!((s.character_count, s.word_count, s.required_word_count), (49, 13, 4));
        assert_eq!(s.median_word_length, 3.0);
        let got: Vec<f64> = [
            s.symbol_to_word_ratio,
            s.fraction_of_words_with_alpha_character,
            s.fraction_of_lines_starting_with_bullet_point,
            s.fraction_of_lines_ending_with_ellipsis,
            s.fraction_of_duplicate_lines,
            s.fraction_of_characters_in_duplicate_lines,
        ]
        .into_iter()
        .map(round5)
        .collect();
        assert_eq!(got, vec![0.07692, 0.76923, 0.33333, 0.16667, 0.33333, 0.0]);
        let ngrams: Vec<Option<f64>> = s.ngrams.iter().map(|v| v.map(round5)).collect();
        assert_eq!(ngrams[..3], [Some(0.31429), Some(0.34286), Some(0.45714)]);
        assert!(ngrams[3..].iter().all(|v| *v == Some(0.0)));
        // Fewer words than n: no value for that n; an empty text has none at all.
        let s = Gopher::dolma_stats("a b c d e f", false);
        assert!(s.ngrams[..5].iter().all(Option::is_some) && s.ngrams[5..].iter().all(Option::is_none));
        assert!(Gopher::dolma_stats("", false).ngrams.iter().all(Option::is_none));
    }

    #[test]
    fn dolma_mode_definitions() {
        // Overlapping repeats count again: "a a a a" has 3 copies of "a a" over 4 characters.
        let s = Gopher::dolma_stats("a a a a", false);
        assert_eq!(s.ngrams[0], Some(1.5));
        // Duplicate 5-grams: every occurrence of a repeated one, over all occurrences.
        let s = Gopher::dolma_stats("x y z w v x y z w v q", false);
        assert_eq!(s.ngrams[3], Some(10.0 / 35.0));
        // Case-sensitive stop words, whole split() words only; # and U+2026 symbols, not "...".
        let s = Gopher::dolma_stats("The the the, to ## a... b\u{2026}", false);
        assert_eq!(s.required_word_count, 2); // "the" and "to"
        assert_eq!(s.symbol_to_word_ratio, 2.0 / 7.0);
        // str.isalpha: superscripts and fractions are not letters.
        assert_eq!(
            Gopher::dolma_stats("\u{b2} \u{bd} \u{e9}2", false).fraction_of_words_with_alpha_character,
            1.0 / 3.0
        );
        // Lines: split("\n") (v1) keeps empty lines, re.split(r"\n+") (v2) does not.
        let v1 = Gopher::dolma_stats("a\n\n\nb\n", false);
        let v2 = Gopher::dolma_stats("a\n\n\nb\n", true);
        assert_eq!(v1.fraction_of_duplicate_lines, 3.0 / 5.0); // the three empty lines
        assert_eq!(v2.fraction_of_duplicate_lines, 0.0); // "a", "b", ""
        assert_eq!(Gopher::dolma_stats("\n\n", true).fraction_of_duplicate_lines, 1.0);
        // Bullets at the very start of a line only; duplicate line characters over word characters.
        let s = Gopher::dolma_stats("- ab\n - ab\n- ab", false);
        assert_eq!(s.fraction_of_lines_starting_with_bullet_point, 2.0 / 3.0);
        assert_eq!(s.fraction_of_characters_in_duplicate_lines, 8.0 / 9.0);
        assert_eq!(Gopher::dolma_stats("abc de", false).median_word_length, 2.5);
    }

    #[test]
    fn groups_are_exact() {
        let words = ["a", "b", "a", "b", "c"];
        let hashes = [7u64; 4]; // every bigram collides: the fallback groups by the words
        let g = Groups::build(&words, 2, &[0, 1, 2, 3], &hashes, &mut U64Map::default());
        assert_eq!((g.ids, g.counts, g.first), (vec![0, 1, 0, 2], vec![2, 1, 1], vec![0, 1, 3]));
    }

    #[test]
    fn paragraphs() {
        assert_eq!(paragraph_pieces("a\n \nb\n\n\nc\nd"), vec!["a", "b", "c\nd"]);
    }
}
