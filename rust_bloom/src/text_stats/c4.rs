//! The C4 line and page rules, in three modes of one kernel: the C4 paper's rules with our
//! verdict (the `c4` tagger; taggers/builtin/c4.py `C4Tagger.predict_python` is its Python
//! reference) and Dolma 1.2.1's `c4_v1` and `c4_v2` (`dolma/taggers/c4.py`; c4.py
//! `dolma_c4_python` mirrors it). The line walk is shared; the modes differ in which rules run
//! and in how the bad-word list matches.
use crate::text::{char_len, has_words, is_space, is_word, strip};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use std::collections::HashMap;

const POLICY_SUBSTRINGS: [&str; 6] =
    ["terms of use", "privacy policy", "cookie policy", "uses cookies", "use of cookies", "use cookies"];

/// The C4 result of one document, fields named as the attribute types of c4.py. Line spans are
/// (start, end) in code points, the newline inside.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct C4Result {
    pub lines_with_no_ending_punctuation: Vec<(u64, u64)>,
    pub lines_with_too_few_words: Vec<(u64, u64)>,
    pub lines_ending_with_ellipsis: Vec<(u64, u64)>,
    pub lines_with_javascript: Vec<(u64, u64)>,
    pub lines_with_policy: Vec<(u64, u64)>,
    pub has_naughty_word: bool,
    pub has_javascript: bool,
    pub has_lorem_ipsum: bool,
    pub has_curly_brace: bool,
    pub has_policy: bool,
    pub line_count: u64,
    /// Sentences left in the lines C4 keeps (the lines of no span above).
    pub kept_sentence_count: u64,
    /// `len(text)` in code points.
    pub length: u64,
}

/// The C4 page verdict, the one definition of the rule (c4.py's reference calls it through
/// `dolma_pipe._rust.c4_keep`): a page is dropped for a bad word, lorem ipsum or a curly brace,
/// or when fewer than `min_sentences` sentences are left in the lines C4 keeps.
pub fn keep(
    has_naughty_word: bool,
    has_lorem_ipsum: bool,
    has_curly_brace: bool,
    kept_sentence_count: u64,
    min_sentences: u64,
) -> bool {
    !(has_naughty_word || has_lorem_ipsum || has_curly_brace || kept_sentence_count < min_sentences)
}

impl C4Result {
    /// `keep` for this page.
    pub fn keep(&self, min_sentences: u64) -> bool {
        keep(self.has_naughty_word, self.has_lorem_ipsum, self.has_curly_brace, self.kept_sentence_count, min_sentences)
    }
}

/// Which definitions the kernel applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum C4Mode {
    /// The C4 paper's rules (our `c4`): every line rule, bad words on word boundaries, `keep`.
    Paper,
    /// Dolma's `c4_v1`: the two line rules; flags per line (`javascript` as a whole word).
    DolmaV1,
    /// Dolma's `c4_v2`: the two line rules; flags as substrings of the lower-cased text.
    DolmaV2,
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

/// The C4 kernel: the bad-word automaton, the per-line word minimum and the mode.
#[derive(Debug, Clone)]
pub struct C4 {
    mode: C4Mode,
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

impl C4 {
    /// Paper mode: `entries` the lower-cased, stripped bad-word list, `min_words` c4.py
    /// `min_words_per_line`. Dolma modes: `entries` the lines of Dolma's list as they are (an
    /// entry with a space is a phrase, any other a word), `min_words` Dolma's 3.
    pub fn new(entries: &[String], min_words: usize, mode: C4Mode) -> Result<Self, String> {
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
                continue; // never a word of split(), and no phrase
            }
            if mode != C4Mode::Paper {
                // Dolma: a word must equal a whole split() word; a phrase may occur anywhere.
                let k = slot(e, &mut patterns, &mut roles);
                if e.contains(' ') {
                    roles[k].phrase = Some(n_phrases);
                    n_phrases += 1;
                } else {
                    roles[k].word = true;
                }
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
        Ok(C4 { mode, min_words, ac, roles, n_phrases })
    }

    /// Dolma's bad-word test on lower-cased text: a word of the list equal to a word of
    /// `lower.split()`, or a phrase of the list anywhere in `lower` (`has_naughty_word`).
    pub fn has_bad_word_dolma(&self, lower: &str) -> bool {
        let boundary = |c: Option<char>| c.is_none_or(is_space);
        for m in self.ac.find_overlapping_iter(lower) {
            let role = &self.roles[m.pattern().as_usize()];
            if role.phrase.is_some() {
                return true;
            }
            if role.word
                && boundary(lower[..m.start()].chars().next_back())
                && boundary(lower[m.end()..].chars().next())
            {
                return true;
            }
        }
        false
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

    /// The C4 result of one document in the kernel's mode. `lower` is Python's `text.lower()`
    /// (None: lower-cased here, which paper mode asks for ASCII text only).
    ///
    /// The Dolma modes pass None for every text: there the lower-cased text is only searched for
    /// ASCII words and phrases and one emoji, and for those Rust's `to_lowercase` (Unicode's
    /// full case mapping, as CPython's) agrees with `str.lower` on every character: the only
    /// non-ASCII characters whose lower-case holds an ASCII character are U+0130 ("i" and
    /// U+0307) and U+212A ("k"), the same in both; no character lower-cases to a space; other
    /// characters may differ between Unicode versions only in non-ASCII letters, which never
    /// match an ASCII entry. (tests/taggers/test_c4.py checks the Python side of this on every
    /// code point.)
    ///
    /// Line spans are offsets into `text` in code points, one per line of `text.split("\n")`,
    /// the newline inside the span (the last line has none). In Dolma's `c4_v2` they are offsets
    /// into `text.lower()`, which is longer than `text` when a character lower-cases to two
    /// ("İ" to "i̇"): there the spans are not character offsets of the text and the last one
    /// ends past it. Every mode here gives the offsets of the text (the data contract).
    pub fn predict(&self, text: &str, lower: Option<&str>) -> C4Result {
        let owned;
        let lower: &str = match lower {
            Some(l) => l,
            None => {
                owned = if text.is_ascii() { text.to_ascii_lowercase() } else { text.to_lowercase() };
                &owned
            }
        };
        match self.mode {
            C4Mode::Paper => self.predict_paper(text, lower),
            C4Mode::DolmaV1 | C4Mode::DolmaV2 => self.predict_dolma(text, lower),
        }
    }

    /// Dolma's `c4_v1` / `c4_v2`: the two line rules over the stripped line (no terminal `.?!"`;
    /// fewer than `min_words` words) and the flags. `has_naughty_word`, `has_lorem_ipsum` and
    /// `has_curly_brace` are the same in both; `has_javascript` is "javascript" as a whole word
    /// of a line in v1 and anywhere in the lower-cased text in v2.
    fn predict_dolma(&self, text: &str, lower: &str) -> C4Result {
        let has_javascript = match self.mode {
            C4Mode::DolmaV1 => {
                let boundary = |c: Option<char>| c.is_none_or(is_space);
                lower.match_indices("javascript").any(|(a, w)| {
                    boundary(lower[..a].chars().next_back()) && boundary(lower[a + w.len()..].chars().next())
                })
            }
            _ => lower.contains("javascript"),
        };
        let mut r = C4Result { has_javascript, ..Default::default() };
        walk_lines(text, |start, end, line| {
            let s = strip(line);
            if !ends_with_mark(s) {
                r.lines_with_no_ending_punctuation.push((start, end));
            }
            if !has_words(s, self.min_words) {
                r.lines_with_too_few_words.push((start, end));
            }
            r.line_count += 1;
            r.length = end;
        });
        r.has_naughty_word = self.has_bad_word_dolma(lower);
        r.has_lorem_ipsum = lower.contains("lorem ipsum");
        r.has_curly_brace = lower.as_bytes().contains(&b'{');
        r
    }

    /// The paper's rules (c4.py `C4Tagger.predict_python`).
    fn predict_paper(&self, text: &str, lower: &str) -> C4Result {
        let has_js = lower.contains("javascript");
        let has_policy = POLICY_SUBSTRINGS.iter().any(|p| lower.contains(p));
        let mut r = C4Result { has_javascript: has_js, has_policy, ..Default::default() };
        let mut lower_lines = lower.split('\n');
        let mut sentences = 0u64;
        walk_lines(text, |start, end, line| {
            let low = lower_lines.next().unwrap_or("");
            r.line_count += 1;
            r.length = end;
            let s = strip(line);
            let mut removed = false;
            if !ends_with_mark(s) {
                r.lines_with_no_ending_punctuation.push((start, end));
                removed = true;
            } else if s.ends_with("...") {
                r.lines_ending_with_ellipsis.push((start, end));
                removed = true;
            }
            if self.min_words > 0 && !has_words(s, self.min_words) {
                r.lines_with_too_few_words.push((start, end));
                removed = true;
            }
            if has_js && low.contains("javascript") {
                r.lines_with_javascript.push((start, end));
                removed = true;
            }
            if has_policy && POLICY_SUBSTRINGS.iter().any(|p| low.contains(p)) {
                r.lines_with_policy.push((start, end));
                removed = true;
            }
            if !removed {
                sentences += count_sentence_ends(s);
            }
        });
        r.kept_sentence_count = sentences;
        r.has_naughty_word = self.has_bad_word(lower);
        r.has_lorem_ipsum = lower.contains("lorem ipsum");
        r.has_curly_brace = text.as_bytes().contains(&b'{');
        r
    }
}

/// Whether a stripped line ends with C4's terminal punctuation (`.`, `?`, `!` or `"`).
#[inline]
fn ends_with_mark(s: &str) -> bool {
    matches!(s.as_bytes().last(), Some(b'.' | b'?' | b'!' | b'"'))
}

/// Calls `f(start, end, line)` for every line of `text.split("\n")`, with (start, end) its code
/// point offsets, the newline inside (the last line has none).
#[inline]
fn walk_lines<'a>(text: &'a str, mut f: impl FnMut(u64, u64, &'a str)) {
    let ascii = text.is_ascii();
    let mut start = 0u64;
    let mut segs = text.split('\n').peekable();
    while let Some(line) = segs.next() {
        let len = if ascii { line.len() } else { char_len(line) } as u64;
        let end = start + len + segs.peek().is_some() as u64;
        f(start, end, line);
        start = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c4_lines_and_words() {
        let entries = vec!["ass".to_string(), "blue waffle".to_string(), "2g1c".to_string()];
        let c4 = C4::new(&entries, 3, C4Mode::Paper).unwrap();
        let r = c4.predict("Hello there world.\nno\nOne two three...", None);
        assert_eq!(r.lines_with_no_ending_punctuation, vec![(19, 22)]);
        assert_eq!(r.lines_with_too_few_words, vec![(19, 22)]);
        assert_eq!(r.lines_ending_with_ellipsis, vec![(22, 38)]);
        assert_eq!(r.kept_sentence_count, 1);
        assert_eq!(r.line_count, 3);
        assert!(!r.keep(3) && r.keep(1));
        assert!(c4.has_bad_word("a dumb-ass thing"));
        assert!(!c4.has_bad_word("class assignment"));
        assert!(c4.has_bad_word("a blue waffle."));
        assert!(!c4.has_bad_word("a&blue waffle"));
        assert!(!c4.has_bad_word("blue waffles"));
    }

    #[test]
    fn dolma_modes() {
        let entries = vec!["ass".to_string(), "blue waffle".to_string(), "\u{1f595}".to_string()];
        let v1 = C4::new(&entries, 3, C4Mode::DolmaV1).unwrap();
        let v2 = C4::new(&entries, 3, C4Mode::DolmaV2).unwrap();
        // Words: whole split() words only ("ass," and "dumb-ass" are not "ass"); phrases anywhere.
        assert!(v2.has_bad_word_dolma("an ass here") && v2.has_bad_word_dolma("ass"));
        assert!(!v2.has_bad_word_dolma("an ass, a dumb-ass, class"));
        assert!(v2.has_bad_word_dolma("blue waffles") && v2.has_bad_word_dolma("xblue waffle"));
        assert!(v2.has_bad_word_dolma("ok \u{1f595}") && !v2.has_bad_word_dolma("ok\u{1f595}"));
        // Line spans of text.split("\n"), newline inside, and the flags.
        let text = "JavaScripts {here}\nOne two three.\n";
        let r = v2.predict(text, None);
        assert_eq!(r.lines_with_no_ending_punctuation, vec![(0, 19), (34, 34)]);
        assert_eq!(r.lines_with_too_few_words, vec![(0, 19), (34, 34)]);
        assert!(r.has_javascript && r.has_curly_brace && !r.has_naughty_word && !r.has_lorem_ipsum);
        assert_eq!((r.line_count, r.length), (3, 34));
        // v1: "javascript" must be a whole word of a line.
        assert!(!v1.predict(text, None).has_javascript);
        assert!(v1.predict("use\njavascript", None).has_javascript);
        // No paper-only rule runs in a Dolma mode.
        let r = v2.predict("Ends here...\nOur privacy policy applies. Twice. Thrice.", None);
        assert!(r.lines_ending_with_ellipsis.is_empty() && r.lines_with_policy.is_empty() && !r.has_policy);
    }

    #[test]
    fn lowercase_of_the_characters_that_lower_to_ascii() {
        // CPython: "\u{130}".lower() == "i\u{307}", "\u{212a}".lower() == "k" (see predict).
        assert_eq!("\u{130}".to_lowercase(), "i\u{307}");
        assert_eq!("\u{212a}".to_lowercase(), "k");
        let v2 = C4::new(&["kill".to_string()], 3, C4Mode::DolmaV2).unwrap();
        assert!(v2.predict("\u{212a}ILL them", None).has_naughty_word);
        assert!(!v2.predict("K\u{130}LL them", None).has_naughty_word);
    }

    #[test]
    fn sentence_ends() {
        assert_eq!(count_sentence_ends("A. B?! C.\") d.x e"), 3);
    }
}
