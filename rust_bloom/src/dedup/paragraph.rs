//! Paragraphs as Dolma's deduper cuts them, with spans in characters (code points), and its
//! word tokens.
//!
//! `text.split(separator)` gives the paragraphs (Python's `str.split`, so a trailing separator
//! leaves an empty last paragraph). Paragraph i spans `[start, end)` where `end` includes the
//! separator that follows it, clipped to the text: `end = min(start + len(p) + len(sep),
//! len(text))`. Dolma counts one character for the separator whatever its length and mixes
//! bytes with characters near the end of a text; here every offset is a character offset.
//!
//! Words are Dolma's `tokenize`: the segments of Unicode word boundaries (UAX #29) that
//! contain a non-whitespace character (so punctuation marks count as words, as in Dolma).
use crate::text::char_len;
use unicode_segmentation::UnicodeSegmentation;

/// One paragraph: its text (without separator) and its character span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Paragraph<'a> {
    pub text: &'a str,
    pub chars: usize,
    pub start: usize,
    pub end: usize,
}

/// The paragraphs of a non-empty text (an empty text has none).
pub fn split<'a>(text: &'a str, separator: &str, out: &mut Vec<Paragraph<'a>>) {
    out.clear();
    if text.is_empty() {
        return;
    }
    let sep = char_len(separator);
    let mut start = 0;
    let mut push = |piece: &'a str, last: bool| {
        let chars = char_len(piece);
        // Every piece but the last is followed by a whole separator; the last ends the text.
        let end = if last { start + chars } else { start + chars + sep };
        out.push(Paragraph { text: piece, chars, start, end });
        start = end;
    };
    if let &[byte] = separator.as_bytes() {
        // A one-byte (ASCII) separator, the usual "\n": memchr, several times faster than the
        // general substring search of `str::split`, with the same pieces.
        let mut from = 0;
        for at in memchr::memchr_iter(byte, text.as_bytes()) {
            push(&text[from..at], false);
            from = at + 1;
        }
        push(&text[from..], true);
    } else {
        let mut pieces = text.split(separator).peekable();
        while let Some(piece) = pieces.next() {
            push(piece, pieces.peek().is_none());
        }
    }
}

#[inline]
fn is_token(segment: &str) -> bool {
    segment.chars().any(|c| !c.is_whitespace())
}

/// Dolma's word tokens of `text`.
pub fn tokens<'a>(text: &'a str, out: &mut Vec<&'a str>) {
    out.clear();
    out.extend(text.split_word_bounds().filter(|s| is_token(s)));
}

/// The number of Dolma word tokens, stopping early once `at_least` is reached.
pub fn has_words(text: &str, at_least: usize) -> bool {
    at_least == 0 || text.split_word_bounds().filter(|s| is_token(s)).take(at_least).count() >= at_least
}

/// Whether a text is empty once Unicode whitespace is trimmed (Rust's `trim`, as Dolma).
#[inline]
pub fn is_blank(text: &str) -> bool {
    text.trim().is_empty()
}

/// The token indices where the n-grams `by_ngram` looks at start, exactly as Dolma selects them
/// (so that overlap scores are Dolma's): every start `s` while `last == 0 || s - last >= stride`,
/// `last` being the previous selected start (initially 0). That takes starts 0 and 1, then every
/// `stride`-th from 1 (0, 1, 1 + stride, ...); a stride of 0 or 1 takes every start.
pub fn ngram_starts(tokens: usize, ngram: usize, stride: usize) -> Vec<usize> {
    let mut out = Vec::new();
    if ngram == 0 || tokens < ngram {
        return out;
    }
    let mut last = 0;
    for s in 0..=tokens - ngram {
        if last == 0 || s - last >= stride {
            last = s;
            out.push(s);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(text: &str, sep: &str) -> Vec<(usize, usize)> {
        let mut out = Vec::new();
        split(text, sep, &mut out);
        out.iter().map(|p| (p.start, p.end)).collect()
    }

    #[test]
    fn spans_include_the_separator_in_characters() {
        assert_eq!(spans("ab\ncd", "\n"), vec![(0, 3), (3, 5)]);
        assert_eq!(spans("ab\ncd\n", "\n"), vec![(0, 3), (3, 6), (6, 6)]);
        assert_eq!(spans("é😀\nx", "\n"), vec![(0, 3), (3, 4)]);
        assert_eq!(spans("a\n\nb", "\n\n"), vec![(0, 3), (3, 4)]);
        assert_eq!(spans("a\n\nb", "\n"), vec![(0, 2), (2, 3), (3, 4)]);
        assert_eq!(spans("", "\n"), vec![]);
        let text = "one tt two tt";
        let mut ps = Vec::new();
        split(text, "tt", &mut ps);
        let chars: Vec<char> = text.chars().collect();
        for p in &ps {
            let s: String = chars[p.start..p.end].iter().collect();
            assert!(s.starts_with(p.text));
        }
    }

    #[test]
    fn one_byte_separators_cut_as_str_split() {
        for text in ["", "a", "\n", "\n\n", "é\nx\n", "ab|cd||", "|é😀|", "no separator"] {
            for sep in ["\n", "|", "x"] {
                let mut ps = Vec::new();
                split(text, sep, &mut ps);
                let want: Vec<&str> = if text.is_empty() { vec![] } else { text.split(sep).collect() };
                assert_eq!(ps.iter().map(|p| p.text).collect::<Vec<_>>(), want, "{text:?} {sep:?}");
                if let Some(last) = ps.last() {
                    assert_eq!(last.end, char_len(text));
                }
            }
        }
    }

    #[test]
    fn tokens_are_unicode_words_without_whitespace() {
        let mut t = Vec::new();
        tokens("You can follow the RSS 2.0 feed, ok?", &mut t);
        assert_eq!(t, vec!["You", "can", "follow", "the", "RSS", "2.0", "feed", ",", "ok", "?"]);
        assert!(has_words("a b c", 3) && !has_words("a b", 3) && has_words("", 0));
        assert!(is_blank(" \t\u{3000}") && !is_blank(" x "));
    }

    #[test]
    fn ngram_starts_are_dolmas() {
        assert_eq!(ngram_starts(10, 3, 3), vec![0, 1, 4, 7]);
        assert_eq!(ngram_starts(5, 3, 0), vec![0, 1, 2]);
        assert_eq!(ngram_starts(5, 3, 1), vec![0, 1, 2]);
        assert!(ngram_starts(2, 3, 1).is_empty());
        assert_eq!(ngram_starts(3, 3, 5), vec![0]);
        assert_eq!(ngram_starts(30, 20, 5), vec![0, 1, 6]);
    }
}
