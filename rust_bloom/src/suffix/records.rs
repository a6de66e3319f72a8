//! The records the suffix component hands to Python and takes from it: packed little-endian
//! fields (no padding), each layout stated once here as `(field, numpy type)` pairs, which
//! `python/suffix.rs` exports (`SUFFIX_RECORDS`) for `dolma_pipe.suffix` to build its dtypes from.
//!
//! - `window` (12 B): a window to remove, as `dups::repeated_windows` finds it;
//! - `range` (20 B): a byte range of a shard (windows joined, `dups::windows_to_ranges`);
//! - `byte_range` (16 B): a byte range of one text (what `dups::char_ranges` takes);
//! - `char_range` (20 B): a character range of one document (what `dups::char_ranges` gives);
//! - `match_length` (4 B): the longest match at one start of a query (`SuffixIndex::longest_matches`).

/// A record's fields in order: name and numpy type (`<u4`: little-endian u32, `<u8`: u64).
pub type Layout = &'static [(&'static str, &'static str)];

pub const WINDOW: Layout = &[("shard", "<u4"), ("pos", "<u8")];
pub const RANGE: Layout = &[("shard", "<u4"), ("start", "<u8"), ("end", "<u8")];
pub const BYTE_RANGE: Layout = &[("start", "<u8"), ("end", "<u8")];
pub const CHAR_RANGE: Layout = &[("doc", "<u4"), ("start", "<u8"), ("end", "<u8")];
pub const MATCH_LENGTH: Layout = &[("length", "<u4")];

/// Every layout by the name Python knows it by.
pub const LAYOUTS: [(&str, Layout); 5] = [
    ("window", WINDOW),
    ("range", RANGE),
    ("byte_range", BYTE_RANGE),
    ("char_range", CHAR_RANGE),
    ("match_length", MATCH_LENGTH),
];

/// Bytes per record of `layout`.
pub const fn size(layout: Layout) -> usize {
    let mut total = 0;
    let mut i = 0;
    while i < layout.len() {
        // "<u4" or "<u8": the digit is the field's width in bytes.
        total += (layout[i].1.as_bytes()[2] - b'0') as usize;
        i += 1;
    }
    total
}

/// `window` records of (shard, position) pairs.
pub fn windows(found: &[(u32, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(found.len() * size(WINDOW));
    for &(shard, pos) in found {
        out.extend_from_slice(&shard.to_le_bytes());
        out.extend_from_slice(&pos.to_le_bytes());
    }
    out
}

/// `range` or `char_range` records (a u32 then two u64s: shard or document, start, end).
pub fn ranges(found: &[(u32, u64, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(found.len() * size(RANGE));
    for &(at, start, end) in found {
        out.extend_from_slice(&at.to_le_bytes());
        out.extend_from_slice(&start.to_le_bytes());
        out.extend_from_slice(&end.to_le_bytes());
    }
    out
}

/// `byte_range` records read back: `None` when the bytes are not whole records.
pub fn read_byte_ranges(bytes: &[u8]) -> Option<Vec<(u64, u64)>> {
    let width = size(BYTE_RANGE);
    if !bytes.len().is_multiple_of(width) {
        return None;
    }
    let u64_at = |c: &[u8], at: usize| u64::from_le_bytes(c[at..at + 8].try_into().expect("8 bytes"));
    Some(bytes.chunks_exact(width).map(|c| (u64_at(c, 0), u64_at(c, 8))).collect())
}

/// `match_length` records of the lengths of `(length, lo, hi)` matches (lengths past u32 capped).
pub fn match_lengths(matches: &[(usize, usize, usize)]) -> Vec<u8> {
    matches.iter().flat_map(|&(n, _, _)| (n.min(u32::MAX as usize) as u32).to_le_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_their_layouts() {
        assert_eq!(
            LAYOUTS.map(|(_, l)| size(l)),
            [12, 20, 16, 20, 4],
            "window, range, byte_range, char_range, match_length"
        );
        assert_eq!(windows(&[(1, 2)]).len(), size(WINDOW));
        let r = ranges(&[(1, 2, 3)]);
        assert_eq!((r.len(), &r[..4], &r[4..12]), (size(RANGE), &[1u8, 0, 0, 0][..], &[2u8, 0, 0, 0, 0, 0, 0, 0][..]));
        let pairs = [(1u64, 5u64), (9, 1 << 40)];
        let bytes: Vec<u8> = pairs.iter().flat_map(|&(a, b)| [a.to_le_bytes(), b.to_le_bytes()].concat()).collect();
        assert_eq!(read_byte_ranges(&bytes), Some(pairs.to_vec()));
        assert_eq!(read_byte_ranges(&bytes[1..]), None);
        assert_eq!(match_lengths(&[(7, 0, 0), (usize::MAX, 0, 0)]), [7, 0, 0, 0, 255, 255, 255, 255]);
    }
}
