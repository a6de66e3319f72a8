//! Building a suffix array with `libsais` (SA-IS, single-threaded: parallelism comes from one task
//! per shard), and writing it packed.
//!
//! `libsais` takes bytes and 16-bit symbols as they are; 32-bit tokens go through its large-
//! alphabet entry (a copy of the text as `i32`, values below 2^31). Positions are built as `i32`
//! while the text (with the library's working space) fits, else as `i64`. Every requirement the
//! library would panic on is checked first and returned as an error.
use super::{width_for, SuffixError};
use crate::workfile::Sealer;
use libsais::SuffixArrayConstruction;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use xxhash_rust::xxh3::Xxh3;

/// Texts longer than this get 64-bit positions during construction (the library adds working
/// space after the text, which must also be addressable with the position type).
const I32_LIMIT: usize = (i32::MAX as usize) - (1 << 24);
/// Positions packed and written at a time.
const CHUNK: usize = 1 << 20;

fn failed(e: libsais::LibsaisError) -> SuffixError {
    SuffixError(format!("suffix array construction failed ({e:?})"))
}

/// The suffix array of a text of bytes or 16-bit symbols (libsais's small alphabets), as positions.
fn of_small<I: libsais::SmallAlphabet>(text: &[I]) -> Result<Positions, SuffixError>
where
    i32: libsais::IsValidOutputFor<I>,
    i64: libsais::IsValidOutputFor<I>,
{
    if text.is_empty() {
        return Ok(Positions::I32(Vec::new()));
    }
    if text.len() <= I32_LIMIT {
        let sa = SuffixArrayConstruction::for_text(text).in_owned_buffer32().single_threaded().run().map_err(failed)?;
        Ok(Positions::I32(sa.into_vec()))
    } else {
        let sa = SuffixArrayConstruction::for_text(text).in_owned_buffer64().single_threaded().run().map_err(failed)?;
        Ok(Positions::I64(sa.into_vec()))
    }
}

/// The suffix array of a byte text, as positions.
pub fn of_bytes(text: &[u8]) -> Result<Positions, SuffixError> {
    of_small(text)
}

/// The suffix array of a text of 16-bit symbols.
pub fn of_u16(text: &[u16]) -> Result<Positions, SuffixError> {
    of_small(text)
}

/// The suffix array of a text of 32-bit symbols (token ids below 2^31).
pub fn of_u32(text: &[u32]) -> Result<Positions, SuffixError> {
    if text.is_empty() {
        return Ok(Positions::I32(Vec::new()));
    }
    if let Some(bad) = text.iter().find(|&&t| t > i32::MAX as u32) {
        return Err(SuffixError(format!("symbol {bad} is above 2^31 - 1; token ids that large cannot be indexed")));
    }
    if text.len() <= I32_LIMIT {
        let mut copy: Vec<i32> = text.iter().map(|&t| t as i32).collect();
        let sa = SuffixArrayConstruction::for_text_mut(&mut copy)
            .in_owned_buffer32()
            .single_threaded()
            .run()
            .map_err(failed)?;
        Ok(Positions::I32(sa.into_vec()))
    } else {
        let mut copy: Vec<i64> = text.iter().map(|&t| t as i64).collect();
        let sa = SuffixArrayConstruction::for_text_mut(&mut copy)
            .in_owned_buffer64()
            .single_threaded()
            .run()
            .map_err(failed)?;
        Ok(Positions::I64(sa.into_vec()))
    }
}

/// Positions as the library gives them.
pub enum Positions {
    I32(Vec<i32>),
    I64(Vec<i64>),
}

impl Positions {
    pub fn len(&self) -> usize {
        match self {
            Positions::I32(v) => v.len(),
            Positions::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn get(&self, i: usize) -> u64 {
        match self {
            Positions::I32(v) => v[i] as u64,
            Positions::I64(v) => v[i] as u64,
        }
    }

    /// The positions packed `width` bytes each, little-endian.
    pub fn packed(&self, width: usize) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.len() * width);
        for i in 0..self.len() {
            out.extend_from_slice(&self.get(i).to_le_bytes()[..width]);
        }
        out
    }

    /// Writes the positions packed (the width that holds the text's length) to ``path``, with a
    /// work file's checksum trailer when ``seal``; returns the width and the xxh3-64 of the
    /// positions as they were written (the trailer left out): what the file must hash to.
    pub fn write(&self, path: &Path, seal: bool) -> std::io::Result<(usize, u64)> {
        let width = width_for(self.len() as u64);
        let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let mut sealer = seal.then(|| Sealer::new(crate::workfile::DEFAULT_BLOCK));
        let mut digest = Xxh3::new();
        let mut buf = Vec::with_capacity(CHUNK * width);
        for start in (0..self.len()).step_by(CHUNK) {
            buf.clear();
            for i in start..(start + CHUNK).min(self.len()) {
                buf.extend_from_slice(&self.get(i).to_le_bytes()[..width]);
            }
            if let Some(s) = sealer.as_mut() {
                s.update(&buf);
            }
            digest.update(&buf);
            out.write_all(&buf)?;
        }
        if let Some(s) = sealer {
            out.write_all(&s.finish())?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok((width, digest.digest()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive<T: Ord>(text: &[T]) -> Vec<u64> {
        let mut sa: Vec<usize> = (0..text.len()).collect();
        sa.sort_by(|&a, &b| text[a..].cmp(&text[b..]));
        sa.into_iter().map(|p| p as u64).collect()
    }

    fn all(p: &Positions) -> Vec<u64> {
        (0..p.len()).map(|i| p.get(i)).collect()
    }

    #[test]
    fn arrays_match_sorting_every_suffix() {
        let bytes = b"abracadabra\xffabracadabra banana\xffbanana";
        assert_eq!(all(&of_bytes(bytes).unwrap()), naive(bytes));
        let words: Vec<u16> = (0..500u32).map(|i| ((i * 7919) % 13) as u16 * 1000).collect();
        assert_eq!(all(&of_u16(&words).unwrap()), naive(&words));
        let big: Vec<u32> = (0..500u32).map(|i| (i * 31) % 17 * 100_000).collect();
        assert_eq!(all(&of_u32(&big).unwrap()), naive(&big));
        assert!(of_bytes(b"").unwrap().is_empty());
    }

    #[test]
    fn huge_token_ids_are_refused() {
        assert!(of_u32(&[1, u32::MAX]).is_err());
    }

    #[test]
    fn packed_positions_round_trip() {
        let p = of_bytes(b"mississippi").unwrap();
        let width = width_for(p.len() as u64);
        let packed = p.packed(width);
        let back: Vec<u64> = (0..p.len()).map(|i| super::super::packed_at(&packed, width, i) as u64).collect();
        assert_eq!(back, naive(b"mississippi"));
        let dir = std::env::temp_dir().join(format!("dp-sa-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("x.sa");
        assert_eq!(p.write(&path, true).unwrap(), (width, xxhash_rust::xxh3::xxh3_64(&packed)));
        let file = std::fs::read(&path).unwrap();
        assert_eq!(crate::workfile::check_whole(&file).unwrap(), &packed[..]);
        assert_eq!(p.write(&path, false).unwrap().1, xxhash_rust::xxh3::xxh3_64(&std::fs::read(&path).unwrap()));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
