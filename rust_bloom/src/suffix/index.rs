//! A text and its packed suffix array, read in place, and what they answer: the range of suffixes
//! that start with a pattern (so its count and positions), and for every start of a query the
//! longest prefix that occurs in the text (matching statistics, for tracing).
use super::{packed_at, SuffixError, Symbol};
use std::cmp::Ordering;

pub struct SuffixIndex<'a, T: Symbol> {
    pub text: &'a [T],
    sa: &'a [u8],
    width: usize,
}

impl<'a, T: Symbol> SuffixIndex<'a, T> {
    pub fn new(text: &'a [T], sa: &'a [u8], width: usize) -> Result<Self, SuffixError> {
        if !(1..=8).contains(&width) {
            return Err(SuffixError(format!("a suffix array of {width}-byte positions is not one this build writes")));
        }
        if sa.len() != text.len() * width {
            return Err(SuffixError(format!(
                "the suffix array holds {} bytes, {} symbols of text need {}",
                sa.len(),
                text.len(),
                text.len() * width
            )));
        }
        Ok(SuffixIndex { text, sa, width })
    }

    pub fn len(&self) -> usize {
        self.text.len()
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The text position of the `i`th suffix in sorted order; an error where the array holds a
    /// position past the text (a damaged file: every read of it is checked, never a panic).
    #[inline]
    pub fn position(&self, i: usize) -> Result<usize, SuffixError> {
        let p = packed_at(self.sa, self.width, i);
        if p < self.text.len() {
            Ok(p)
        } else {
            Err(damaged(i, p, self.text.len()))
        }
    }

    /// The suffix at ``p`` against ``pattern``, over the pattern's length (a suffix that is a
    /// proper prefix of the pattern sorts before it).
    fn cmp_prefix(&self, p: usize, pattern: &[T]) -> Ordering {
        let suffix = &self.text[p..];
        let n = suffix.len().min(pattern.len());
        match suffix[..n].cmp(&pattern[..n]) {
            Ordering::Equal if n < pattern.len() => Ordering::Less,
            other => other,
        }
    }

    /// ``[lo, hi)``: the suffixes that start with ``pattern`` (empty when it does not occur).
    pub fn range(&self, pattern: &[T]) -> Result<(usize, usize), SuffixError> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.cmp_prefix(self.position(mid)?, pattern) == Ordering::Less {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let start = lo;
        hi = self.len();
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.cmp_prefix(self.position(mid)?, pattern) == Ordering::Greater {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Ok((start, lo))
    }

    /// Within ``[lo, hi)``, whose suffixes all share their first ``depth`` symbols, those whose
    /// next symbol is ``s``.
    pub fn narrow(&self, lo: usize, hi: usize, depth: usize, s: T) -> Result<(usize, usize), SuffixError> {
        // The symbol at `depth`, None where the suffix ends first (it sorts first).
        let at = |i: usize| -> Result<Option<T>, SuffixError> { Ok(self.text.get(self.position(i)? + depth).copied()) };
        let (mut a, mut b) = (lo, hi.min(self.len()));
        while a < b {
            let mid = (a + b) / 2;
            if at(mid)? < Some(s) {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        let start = a;
        b = hi.min(self.len());
        while a < b {
            let mid = (a + b) / 2;
            if at(mid)? <= Some(s) {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        Ok((start, a))
    }

    pub fn count(&self, pattern: &[T]) -> Result<u64, SuffixError> {
        let (lo, hi) = self.range(pattern)?;
        Ok((hi - lo) as u64)
    }

    /// For every start ``i`` of ``query``: the length of the longest prefix of ``query[i..]`` that
    /// occurs in the text (at most ``cap``) and the range of its suffixes. Each start goes on from
    /// the one before (a match of ``m`` at ``i`` leaves one of at least ``m - 1`` at ``i + 1``).
    pub fn longest_matches(&self, query: &[T], cap: usize) -> Result<Vec<(usize, usize, usize)>, SuffixError> {
        let mut out = Vec::with_capacity(query.len());
        let mut previous = 0usize;
        for i in 0..query.len() {
            // After a match as long as the cap, the next start most often matches as far: one
            // search for the whole window instead of one for all but its last symbol and a
            // narrowing step.
            if previous == cap && i + cap <= query.len() {
                let (lo, hi) = self.range(&query[i..i + cap])?;
                if lo < hi {
                    out.push((cap, lo, hi));
                    continue;
                }
            }
            let mut len = previous.saturating_sub(1).min(cap);
            let (mut lo, mut hi) = if len > 0 { self.range(&query[i..i + len])? } else { (0, self.len()) };
            while i + len < query.len() && len < cap && lo < hi {
                let (a, b) = self.narrow(lo, hi, len, query[i + len])?;
                if a == b {
                    break;
                }
                lo = a;
                hi = b;
                len += 1;
            }
            if len == 0 {
                (lo, hi) = (0, 0);
            }
            out.push((len, lo, hi));
            previous = len;
        }
        Ok(out)
    }
}

/// The error of a position past the text: the array is not this text's (a damaged file).
fn damaged(i: usize, p: usize, n: usize) -> SuffixError {
    SuffixError(format!("the suffix array is damaged: its entry {i} is position {p}, past the text's {n} symbols"))
}

#[cfg(test)]
mod tests {
    use super::super::build::of_u16;
    use super::super::width_for;
    use super::*;

    fn index_of(text: &[u16]) -> (Vec<u8>, usize) {
        let sa = of_u16(text).unwrap();
        let w = width_for(sa.len() as u64);
        (sa.packed(w), w)
    }

    fn naive_count(text: &[u16], pattern: &[u16]) -> u64 {
        if pattern.is_empty() {
            return text.len() as u64;
        }
        text.windows(pattern.len()).filter(|w| *w == pattern).count() as u64
    }

    #[test]
    fn counts_and_positions_match_a_scan() {
        let text: Vec<u16> = (0..3000u32).map(|i| ((i * i + 7 * i) % 11) as u16).collect();
        let (sa, w) = index_of(&text);
        let idx = SuffixIndex::new(&text, &sa, w).unwrap();
        for start in (0..2990).step_by(37) {
            for len in [1, 2, 3, 5, 8] {
                let pattern = &text[start..start + len];
                assert_eq!(idx.count(pattern).unwrap(), naive_count(&text, pattern));
                let (lo, hi) = idx.range(pattern).unwrap();
                let mut found: Vec<usize> = (lo..hi).map(|i| idx.position(i).unwrap()).collect();
                found.sort();
                let want: Vec<usize> = (0..=text.len() - len).filter(|&p| &text[p..p + len] == pattern).collect();
                assert_eq!(found, want);
            }
        }
        assert_eq!(idx.count(&[99]).unwrap(), 0);
        assert_eq!(idx.count(&[1, 99]).unwrap(), 0);
    }

    #[test]
    fn longest_matches_match_a_scan() {
        let text: Vec<u16> = (0..2000u32).map(|i| ((i * 31 + i / 7) % 9) as u16).collect();
        let (sa, w) = index_of(&text);
        let idx = SuffixIndex::new(&text, &sa, w).unwrap();
        let mut query: Vec<u16> = text[500..560].to_vec();
        query.extend([42, 42]);
        query.extend(&text[100..140]);
        query.push(7);
        let got = idx.longest_matches(&query, 1000).unwrap();
        for (i, &(len, lo, hi)) in got.iter().enumerate() {
            let best = (0..=query.len() - i).rev().find(|&m| naive_count(&text, &query[i..i + m]) > 0).unwrap();
            assert_eq!(len, best, "start {i}");
            assert_eq!((hi - lo) as u64, if len == 0 { 0 } else { naive_count(&text, &query[i..i + len]) });
        }
        assert!(idx.longest_matches(&query, 5).unwrap().iter().all(|m| m.0 <= 5));
    }

    #[test]
    fn positions_past_the_text_are_errors_never_panics() {
        let text: Vec<u16> = (0..600u32).map(|i| ((i * 13 + i / 5) % 7) as u16).collect();
        let (good, w) = index_of(&text);
        let mut seed = 7u64;
        for round in 0..200 {
            let mut sa = good.clone();
            crate::suffix::flip_random_bytes(&mut sa, 1 + round % 4, &mut seed);
            let idx = SuffixIndex::new(&text, &sa, w).unwrap();
            for start in (0..590).step_by(53) {
                let _ = idx.count(&text[start..start + 3]);
                let _ = idx.longest_matches(&text[start..start + 10], 64);
                if let Ok((lo, hi)) = idx.range(&text[start..start + 2]) {
                    for i in lo..hi {
                        let _ = idx.position(i);
                    }
                }
            }
        }
        let mut sa = good.clone();
        sa[..w].copy_from_slice(&[0xff; 8][..w]);
        let idx = SuffixIndex::new(&text, &sa, w).unwrap();
        let err = (0..text.len()).find_map(|i| idx.position(i).err()).unwrap();
        assert!(err.0.contains("damaged"), "{}", err.0);
    }

    #[test]
    fn a_mismatched_array_is_refused() {
        let text = [1u16, 2, 3];
        assert!(SuffixIndex::new(&text, &[0u8; 5], 1).is_err());
    }
}
