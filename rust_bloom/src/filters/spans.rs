//! Dolma's span replacement: spans are `[start, end)` in characters (code points) of the text;
//! each chosen span is replaced by its replacement, in which `{}` stands for the span's text, and
//! an empty replacement deletes the span.
//!
//! The walk is Dolma's (`shard.rs`), whose edge cases decide which text comes out: spans are
//! sorted by start (stably); a span that starts inside an earlier chosen span is dropped when
//! that span ends; a span reaching past the end of the text is replaced at the end with the
//! text from its start; a zero-length span stops the walk over later spans. Dolma steps through
//! every character; here the characters between two span boundaries are copied (or skipped) as
//! one slice, which gives the same text (the test below compares both walks on random spans).
use std::borrow::Cow;

/// One span to replace.
#[derive(Debug, Clone, PartialEq)]
pub struct Replacement<'a> {
    pub start: usize,
    pub end: usize,
    pub text: Cow<'a, str>,
}

/// Byte offset of the character `n` characters after byte offset `from`.
fn advance(text: &str, ascii: bool, from: usize, n: usize) -> usize {
    if ascii {
        return (from + n).min(text.len());
    }
    text[from..].char_indices().nth(n).map_or(text.len(), |(o, _)| from + o)
}

/// `old` with `replacements` applied (they are sorted here).
pub fn apply(old: &str, replacements: &mut [Replacement<'_>]) -> String {
    replacements.sort_by_key(|r| r.start);
    let reps = &*replacements;
    let ascii = old.is_ascii();
    let total = if ascii { old.len() } else { old.chars().count() };
    let mut out = String::with_capacity(old.len());
    let (mut k, mut span_start_byte) = (0usize, 0usize);
    let (mut i, mut b) = (0usize, 0usize); // character index and its byte offset
    while i < total {
        if k >= reps.len() {
            out.push_str(&old[b..]);
            break;
        }
        let (s, e) = (reps[k].start, reps[k].end);
        let event = [s, e].into_iter().filter(|&x| x >= i).min().unwrap_or(total).min(total);
        if event > i {
            // No boundary of span k in [i, event): every character there is inside it or not.
            let eb = advance(old, ascii, b, event - i);
            if !(s <= i && i < e) {
                out.push_str(&old[b..eb]);
            }
            (i, b) = (event, eb);
            continue;
        }
        // A boundary of span k at character i: Dolma's step for this one character.
        let next = advance(old, ascii, b, 1);
        let inside = s <= i && i < e;
        if i == s {
            span_start_byte = b;
        }
        if !inside {
            if i == e {
                if !reps[k].text.is_empty() {
                    out.push_str(&reps[k].text.replace("{}", &old[span_start_byte..b]));
                }
                while k < reps.len() && reps[k].start < i {
                    k += 1;
                }
            }
            if k < reps.len() && reps[k].start == i {
                span_start_byte = b;
            } else {
                out.push_str(&old[b..next]);
            }
        }
        (i, b) = (i + 1, next);
    }
    if k < reps.len() && !reps[k].text.is_empty() {
        out.push_str(&reps[k].text.replace("{}", &old[span_start_byte..]));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rep(start: usize, end: usize, text: &str) -> Replacement<'static> {
        Replacement { start, end, text: Cow::Owned(text.to_string()) }
    }

    /// Dolma's loop, character by character, as `shard.rs` has it: the reference for `apply`.
    fn dolma(old: &str, replacements: &mut [Replacement<'_>]) -> String {
        replacements.sort_by_key(|r| r.start);
        let reps = &*replacements;
        let mut out = String::new();
        let (mut span, mut span_start_byte) = (0usize, 0usize);
        for (i, (byte, c)) in old.char_indices().enumerate() {
            if span < reps.len() {
                let inside = i >= reps[span].start && i < reps[span].end;
                if i == reps[span].start {
                    span_start_byte = byte;
                }
                if !inside {
                    if i == reps[span].end {
                        if !reps[span].text.is_empty() {
                            out.push_str(&reps[span].text.replace("{}", &old[span_start_byte..byte]));
                        }
                        while span < reps.len() && reps[span].start < i {
                            span += 1;
                        }
                    }
                    if span < reps.len() && reps[span].start == i {
                        span_start_byte = byte;
                    } else {
                        out.push(c);
                    }
                }
            } else {
                out.push(c);
            }
        }
        if span < reps.len() && !reps[span].text.is_empty() {
            out.push_str(&reps[span].text.replace("{}", &old[span_start_byte..]));
        }
        out
    }

    #[test]
    fn replaces_and_deletes_in_characters() {
        let text = "héllo wörld, bye";
        assert_eq!(apply(text, &mut [rep(6, 11, "[{}]")]), "héllo [wörld], bye");
        assert_eq!(apply(text, &mut [rep(5, 11, "")]), "héllo, bye");
        assert_eq!(apply(text, &mut [rep(13, 16, "<{}>"), rep(0, 5, "X")]), "X wörld, <bye>");
    }

    #[test]
    fn adjacent_and_overlapping_spans() {
        let text = "aaaa bbbb cccc";
        assert_eq!(apply(text, &mut [rep(0, 5, ""), rep(5, 10, "")]), "cccc");
        // The later span starting inside the first is dropped when the first ends.
        assert_eq!(apply(text, &mut [rep(0, 7, "X"), rep(5, 14, "Y")]), "Xbb cccc");
    }

    #[test]
    fn span_to_the_end_and_past_it() {
        assert_eq!(apply("abc def", &mut [rep(4, 7, "[{}]")]), "abc [def]");
        assert_eq!(apply("abc def", &mut [rep(4, 99, "[{}]")]), "abc [def]");
        assert_eq!(apply("abc", &mut []), "abc");
    }

    #[test]
    fn same_text_as_dolmas_walk_on_random_spans() {
        // A small xorshift: the test needs no dependency and is the same on every run.
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % n as u64) as usize
        };
        let texts =
            ["", "a", "plain ascii text, with a few words.", "héllo wörld ünïcödé — ok", "日本語のテキストです。abc"];
        let fills = ["", "X", "[{}]", "{}{}", "<é>"];
        for _ in 0..20_000 {
            let text = texts[next(texts.len())];
            let n = text.chars().count() + 3;
            let mut reps: Vec<Replacement> = (0..next(5))
                .map(|_| {
                    let start = next(n + 1);
                    // Mostly well-formed spans, some empty or reversed ones (Dolma takes them too).
                    let end = if next(8) == 0 { next(n + 1) } else { start + next(n + 1 - start.min(n)) };
                    rep(start, end, fills[next(fills.len())])
                })
                .collect();
            let mut copy = reps.clone();
            assert_eq!(apply(text, &mut reps), dolma(text, &mut copy), "{text:?} {copy:?}");
        }
    }
}
