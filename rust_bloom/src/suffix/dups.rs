//! Repeated windows of byte texts held in several shards, found by merging the shards' suffix
//! arrays (the shards are never joined into one array: each was built alone, as AllenAI's
//! `bsade` builds them).
//!
//! A *window* is ``length`` bytes at one position, inside one document (a window holding the
//! separator byte is none). The k-way merge of the shards' arrays, ordered by each suffix's first
//! ``length`` bytes, lists every window next to its equals; a run of equal windows is a repeated
//! string, and its occurrences are reported: all of them but the first in the global order
//! (shard, then position) with ``keep_first``, else all of them (what
//! `deduplicate-text-datasets` removes).
//!
//! The work splits by the suffixes' first two bytes (a *key*): a run of equal windows shares
//! its key, so key ranges are independent tasks, each reading only its part of every array.
use super::{packed_at, SuffixError};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// One shard: its text and packed suffix array.
#[derive(Clone, Copy)]
pub struct Shard<'a> {
    pub text: &'a [u8],
    pub sa: &'a [u8],
    pub width: usize,
}

impl<'a> Shard<'a> {
    pub fn new(text: &'a [u8], sa: &'a [u8], width: usize) -> Result<Self, SuffixError> {
        if !(1..=8).contains(&width) || sa.len() != text.len() * width {
            return Err(SuffixError(format!(
                "the suffix array holds {} bytes of {width}-byte positions, the text {} bytes",
                sa.len(),
                text.len()
            )));
        }
        Ok(Shard { text, sa, width })
    }

    /// The text position of the `i`th suffix; an error for a position past the text (a damaged
    /// array: checked on every read, never a panic).
    fn position(&self, i: usize) -> Result<usize, SuffixError> {
        let p = packed_at(self.sa, self.width, i);
        if p < self.text.len() {
            Ok(p)
        } else {
            Err(SuffixError(format!(
                "the suffix array is damaged: its entry {i} is position {p}, past the text's {} bytes",
                self.text.len()
            )))
        }
    }

    fn key(&self, i: usize) -> Result<u32, SuffixError> {
        Ok(key_at(self.text, self.position(i)?))
    }

    /// The suffixes (in sorted order) whose key is in ``[lo, hi)``.
    pub fn key_range(&self, lo: u32, hi: u32) -> Result<(usize, usize), SuffixError> {
        let n = self.text.len();
        let first = |k: u32| -> Result<usize, SuffixError> {
            let (mut a, mut b) = (0, n);
            while a < b {
                let mid = (a + b) / 2;
                if self.key(mid)? < k {
                    a = mid + 1;
                } else {
                    b = mid;
                }
            }
            Ok(a)
        };
        Ok((first(lo)?, first(hi)?))
    }
}

/// The number of keys: a key is the first two bytes of a suffix, ``b0 * 257 + b1 + 1`` (a suffix
/// of one byte, which sorts before every longer one starting with it, is ``b0 * 257``).
pub const KEYS: u32 = 256 * 257;

#[inline]
fn key_at(text: &[u8], p: usize) -> u32 {
    let b0 = text[p] as u32 * 257;
    match text.get(p + 1) {
        Some(&b1) => b0 + b1 as u32 + 1,
        None => b0,
    }
}

/// Key boundaries that split a shard's suffixes into ``parts`` nearly equal runs: ``parts + 1``
/// values from 0 to ``KEYS``, non-decreasing (a key shared by many suffixes is never split).
pub fn key_bounds(shard: &Shard<'_>, parts: usize) -> Result<Vec<u32>, SuffixError> {
    let n = shard.text.len();
    let mut out = vec![0u32];
    for j in 1..parts.max(1) {
        let k = if n == 0 { KEYS } else { shard.key(j * n / parts)? };
        out.push(k.max(*out.last().unwrap()));
    }
    out.push(KEYS);
    Ok(out)
}

struct Head<'a> {
    // The window's first 8 bytes, big-endian (zero-padded): most comparisons end here, without
    // reading the windows again.
    prefix: u64,
    window: &'a [u8],
    shard: u32,
    index: usize,
    position: usize,
}

#[inline]
fn prefix_of(window: &[u8]) -> u64 {
    let mut buf = [0u8; 8];
    let n = window.len().min(8);
    buf[..n].copy_from_slice(&window[..n]);
    u64::from_be_bytes(buf)
}

/// Asks the CPU to bring the bytes at ``p`` into cache: the merge reads each shard's suffixes in
/// array order, so their text is scattered, and a shard's next window is read only after the
/// other shards' heads have had their turn.
#[inline]
fn prefetch(bytes: &[u8]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = bytes.first() {
        // SAFETY: a prefetch is a hint; it reads nothing and cannot fault.
        unsafe { std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>((b as *const u8).cast::<i8>()) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = bytes;
}

impl PartialEq for Head<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Head<'_> {}
impl PartialOrd for Head<'_> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Head<'_> {
    // Reversed: BinaryHeap pops the largest, the merge wants the smallest window first.
    fn cmp(&self, other: &Self) -> Ordering {
        other.prefix.cmp(&self.prefix).then_with(|| other.window.cmp(self.window)).then(other.shard.cmp(&self.shard))
    }
}

/// Every occurrence to remove of a window of ``length`` bytes repeated in the shards, among the
/// suffixes whose key is in ``[key_lo, key_hi)``: ``(shard, position)`` pairs, unsorted. A window
/// holding ``separator`` is none.
pub fn repeated_windows(
    shards: &[Shard<'_>],
    length: usize,
    key_lo: u32,
    key_hi: u32,
    keep_first: bool,
    separator: Option<u8>,
) -> Result<Vec<(u32, u64)>, SuffixError> {
    if length < 2 {
        return Err(SuffixError("the window length must be at least 2 bytes".into()));
    }
    let ranges: Vec<(usize, usize)> = shards.iter().map(|s| s.key_range(key_lo, key_hi)).collect::<Result<_, _>>()?;
    let window = |s: usize, i: usize| -> Result<(&[u8], usize), SuffixError> {
        let text = shards[s].text;
        let p = shards[s].position(i)?;
        Ok((&text[p..(p + length).min(text.len())], p))
    };
    let head = |s: usize, i: usize| -> Result<Head, SuffixError> {
        if i + 1 < ranges[s].1 {
            prefetch(window(s, i + 1)?.0);
        }
        let (w, position) = window(s, i)?;
        Ok(Head { prefix: prefix_of(w), window: w, shard: s as u32, index: i, position })
    };
    let mut heap = BinaryHeap::with_capacity(shards.len());
    for (s, &(lo, hi)) in ranges.iter().enumerate() {
        if lo < hi {
            heap.push(head(s, lo)?);
        }
    }
    let mut out = Vec::new();
    let mut run: Vec<(u32, u64)> = Vec::new();
    let mut run_window: &[u8] = &[];
    let flush = |run: &mut Vec<(u32, u64)>, w: &[u8], out: &mut Vec<(u32, u64)>| {
        let valid = w.len() == length && separator.is_none_or(|sep| !w.contains(&sep));
        if run.len() >= 2 && valid {
            if keep_first {
                let first = *run.iter().min().unwrap();
                out.extend(run.iter().filter(|&&x| x != first));
            } else {
                out.extend_from_slice(run);
            }
        }
        run.clear();
    };
    while let Some(mut top) = heap.peek_mut() {
        let s = top.shard as usize;
        if top.window != run_window {
            flush(&mut run, run_window, &mut out);
            run_window = top.window;
        }
        run.push((top.shard, top.position as u64));
        let next = top.index + 1;
        if next < ranges[s].1 {
            *top = head(s, next)?; // replaced in place: one sift down instead of a pop and a push
        } else {
            std::collections::binary_heap::PeekMut::pop(top);
        }
    }
    flush(&mut run, run_window, &mut out);
    Ok(out)
}

/// Windows of ``length`` bytes at ``starts`` (any order) as their union: sorted ``(shard, start,
/// end)`` byte ranges, each as long as the windows it joins.
pub fn windows_to_ranges(mut starts: Vec<(u32, u64)>, length: usize) -> Vec<(u32, u64, u64)> {
    starts.sort_unstable();
    let mut out: Vec<(u32, u64, u64)> = Vec::new();
    for (s, p) in starts {
        let end = p + length as u64;
        match out.last_mut() {
            Some(last) if last.0 == s && p <= last.2 => last.2 = last.2.max(end),
            _ => out.push((s, p, end)),
        }
    }
    out
}

/// Byte ranges of a text of documents (``doc_starts``: each document's first byte; a document
/// ends one byte before the next starts, at its separator) as character ranges within their
/// documents: ``(document, first char, end char)``. A range is cut to the whole characters inside
/// it (a window may start or end inside a multi-byte character); ranges are sorted and within
/// one document each, and an empty one is dropped.
pub fn char_ranges(
    text: &[u8],
    doc_starts: &[u64],
    ranges: &[(u64, u64)],
) -> Result<Vec<(u32, u64, u64)>, SuffixError> {
    let n = text.len() as u64;
    if let Some(&(a, b)) = ranges.iter().find(|&&(a, b)| a > b || a >= n) {
        return Err(SuffixError(format!("byte range {a}..{b} is not within the text's {n} bytes")));
    }
    if let Some(w) = doc_starts.windows(2).find(|w| w[0] > w[1]) {
        return Err(SuffixError(format!("document starts {} then {}: not in order", w[0], w[1])));
    }
    if let Some(&d) = doc_starts.iter().find(|&&d| d > n) {
        return Err(SuffixError(format!("a document starts at byte {d}, past the text's {n} bytes")));
    }
    if let Some(w) = ranges.windows(2).find(|w| w[1].0 < w[0].1) {
        return Err(SuffixError(format!(
            "byte ranges {}..{} and {}..{}: not sorted and disjoint",
            w[0].0, w[0].1, w[1].0, w[1].1
        )));
    }
    match (doc_starts.first(), ranges.first()) {
        (None, Some(_)) => return Err(SuffixError("byte ranges of a text without documents".into())),
        (Some(&d), Some(&(a, _))) if a < d => {
            return Err(SuffixError(format!("byte range from {a} is before the first document (at {d})")))
        }
        _ => {}
    }
    Ok(char_ranges_checked(text, doc_starts, ranges))
}

fn char_ranges_checked(text: &[u8], doc_starts: &[u64], ranges: &[(u64, u64)]) -> Vec<(u32, u64, u64)> {
    let is_start = |b: u8| (b & 0xC0) != 0x80; // not a UTF-8 continuation byte
    let mut out = Vec::new();
    let mut doc = 0usize;
    let mut chars_before = 0u64; // characters of the current document before `pos`
    let mut pos = 0usize; // a byte position inside the current document
    for &(a, b) in ranges {
        let (a, b) = (a as usize, (b as usize).min(text.len()));
        while doc + 1 < doc_starts.len() && doc_starts[doc + 1] as usize <= a {
            doc += 1;
            pos = doc_starts[doc] as usize;
            chars_before = 0;
        }
        if pos < doc_starts[doc] as usize {
            pos = doc_starts[doc] as usize;
        }
        // Round inward: the first character starting at or after a, the last one ending by b.
        let mut start = a;
        while start < b && !is_start(text[start]) {
            start += 1;
        }
        let mut end = b;
        while end > start && end < text.len() && !is_start(text[end]) {
            end -= 1;
        }
        if start >= end {
            continue;
        }
        chars_before += text[pos..start].iter().filter(|&&x| is_start(x)).count() as u64;
        let inside = text[start..end].iter().filter(|&&x| is_start(x)).count() as u64;
        out.push((doc as u32, chars_before, chars_before + inside));
        chars_before += inside;
        pos = end;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::build::of_bytes;
    use super::super::width_for;
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    fn shard_of(text: &[u8]) -> (Vec<u8>, usize) {
        let sa = of_bytes(text).unwrap();
        let w = width_for(sa.len() as u64);
        (sa.packed(w), w)
    }

    /// Every window (shard, position) whose bytes occurred at an earlier (shard, position).
    fn naive(texts: &[&[u8]], length: usize, keep_first: bool) -> BTreeSet<(u32, u64)> {
        let mut seen: BTreeMap<&[u8], Vec<(u32, u64)>> = BTreeMap::new();
        for (s, t) in texts.iter().enumerate() {
            for p in 0..t.len().saturating_sub(length - 1) {
                let w = &t[p..p + length];
                if !w.contains(&0xff) {
                    seen.entry(w).or_default().push((s as u32, p as u64));
                }
            }
        }
        let mut out = BTreeSet::new();
        for (_, mut occ) in seen {
            if occ.len() >= 2 {
                occ.sort();
                out.extend(occ.into_iter().skip(if keep_first { 1 } else { 0 }));
            }
        }
        out
    }

    #[test]
    fn merged_windows_across_shards_match_a_scan_for_any_split() {
        let a = b"the quick brown fox jumps\xffover the lazy dog; the quick brown cat\xffjumps".to_vec();
        let b = b"a lazy dog jumps over\xffthe quick brown fox again and the lazy dog".to_vec();
        let c = b"nothing here repeats at all, or does it? the quick brown".to_vec();
        let texts: Vec<&[u8]> = vec![&a, &b, &c];
        let built: Vec<(Vec<u8>, usize)> = texts.iter().map(|t| shard_of(t)).collect();
        let shards: Vec<Shard> = texts.iter().zip(&built).map(|(t, (sa, w))| Shard::new(t, sa, *w).unwrap()).collect();
        for length in [2, 5, 9, 15] {
            for keep_first in [true, false] {
                let want = naive(&texts, length, keep_first);
                for parts in [1, 3, 7] {
                    let bounds = key_bounds(&shards[0], parts).unwrap();
                    let mut got = BTreeSet::new();
                    for pair in bounds.windows(2) {
                        for x in repeated_windows(&shards, length, pair[0], pair[1], keep_first, Some(0xff)).unwrap() {
                            assert!(got.insert(x), "{x:?} twice");
                        }
                    }
                    assert_eq!(got, want, "length {length} keep_first {keep_first} parts {parts}");
                }
            }
        }
    }

    #[test]
    fn windows_join_into_ranges() {
        let got = windows_to_ranges(vec![(1, 10), (0, 5), (0, 0), (0, 30), (1, 13)], 4);
        assert_eq!(got, vec![(0, 0, 4), (0, 5, 9), (0, 30, 34), (1, 10, 17)]);
        assert_eq!(windows_to_ranges(vec![(0, 0), (0, 4)], 4), vec![(0, 0, 8)]);
    }

    #[test]
    fn byte_ranges_become_whole_characters_in_their_documents() {
        // Two documents: "aé€b" (1 + 2 + 3 + 1 bytes) then "xyz", each followed by 0xff.
        let mut text = "aé€b".as_bytes().to_vec();
        text.push(0xff);
        let second = text.len() as u64;
        text.extend_from_slice(b"xyz\xff");
        let starts = [0u64, second];
        // Bytes 1..6 are "é€" whole; 2..7 starts inside é, so it keeps "€b"; 2..4 holds no whole character.
        assert_eq!(char_ranges(&text, &starts, &[(1, 6)]).unwrap(), vec![(0, 1, 3)]);
        assert_eq!(char_ranges(&text, &starts, &[(2, 7)]).unwrap(), vec![(0, 2, 4)]);
        assert_eq!(char_ranges(&text, &starts, &[(2, 4)]).unwrap(), vec![]);
        assert_eq!(
            char_ranges(&text, &starts, &[(0, 1), (6, 7), (second + 1, second + 3)]).unwrap(),
            vec![(0, 0, 1), (0, 3, 4), (1, 1, 3)]
        );
    }

    #[test]
    fn damaged_arrays_and_bad_ranges_are_errors_never_panics() {
        let text = b"the quick brown fox\xffjumps over the quick brown dog\xffthe end".to_vec();
        let (good, w) = shard_of(&text);
        let mut seed = 11u64;
        for round in 0..300 {
            let mut sa = good.clone();
            crate::suffix::flip_random_bytes(&mut sa, 1 + round % 3, &mut seed);
            let shard = Shard::new(&text, &sa, w).unwrap();
            let _ = key_bounds(&shard, 3);
            let _ = repeated_windows(&[shard, shard], 4, 0, KEYS, true, Some(0xff));
        }
        let mut sa = good.clone();
        for b in sa.iter_mut() {
            *b = 0xff;
        }
        let shard = Shard::new(&text, &sa, w).unwrap();
        assert!(repeated_windows(&[shard], 4, 0, KEYS, true, None).unwrap_err().0.contains("damaged"));
        let starts = [0u64, 20];
        assert!(char_ranges(&text, &starts, &[(100, 104)]).is_err());
        assert!(char_ranges(&text, &starts, &[(5, 9), (7, 12)]).is_err());
        assert!(char_ranges(&text, &[3, 20], &[(0, 2)]).is_err());
        assert!(char_ranges(&text, &[], &[(0, 2)]).is_err());
    }

    #[test]
    fn a_long_run_keeps_only_its_first_window() {
        let text = vec![b'a'; 40];
        let (sa, w) = shard_of(&text);
        let shard = Shard::new(&text, &sa, w).unwrap();
        let mut got = repeated_windows(&[shard], 10, 0, KEYS, true, None).unwrap();
        got.sort();
        assert_eq!(got, (1..=30).map(|p| (0u32, p as u64)).collect::<Vec<_>>());
    }
}
