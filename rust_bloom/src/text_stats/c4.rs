//! The C4 line and page rules of the `c4_v1`/`c4_v2` taggers (taggers/builtin/c4.py `C4Tagger.predict_python`).
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
        Ok(C4 { min_words, ac, roles, n_phrases })
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
                owned = if text.is_ascii() { text.to_ascii_lowercase() } else { text.to_lowercase() };
                &owned
            }
        };
        let ascii = text.is_ascii();
        let has_js = lower.contains("javascript");
        let has_policy = POLICY_SUBSTRINGS.iter().any(|p| lower.contains(p));
        let mut r = C4Result { has_javascript: has_js, has_policy, ..Default::default() };
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
            start = end;
        }
        r.length = start;
        r.line_count = n_lines;
        r.kept_sentence_count = sentences;
        r.has_naughty_word = self.has_bad_word(lower);
        r.has_lorem_ipsum = lower.contains("lorem ipsum");
        r.has_curly_brace = text.as_bytes().contains(&b'{');
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c4_lines_and_words() {
        let entries = vec!["ass".to_string(), "blue waffle".to_string(), "2g1c".to_string()];
        let c4 = C4::new(&entries, 3).unwrap();
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
    fn sentence_ends() {
        assert_eq!(count_sentence_ends("A. B?! C.\") d.x e"), 3);
    }
}
