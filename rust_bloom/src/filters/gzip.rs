//! gzip for the document files: output members by libdeflate (one complete gzip member per call,
//! header with mtime 0 and no name, so equal input gives equal bytes) and a push-style reader of
//! inputs by zlib-rs (any number of concatenated members, fed chunk by chunk: libdeflate only
//! inflates whole buffers of known size).
use flate2::write::MultiGzDecoder;
use libdeflater::{CompressionLvl, Compressor};
use std::cell::RefCell;
use std::io::Write;

/// libdeflate's highest level; a config's gzip level above it means it.
const MAX_LEVEL: u32 = 12;

thread_local! {
    // A compressor's tables are allocated with it (up to about 1 MB at high levels): one per level
    // and thread, kept, rather than one per member.
    static COMPRESSORS: RefCell<Vec<(u32, Compressor)>> = const { RefCell::new(Vec::new()) };
}

/// `data` as one gzip member at `level` (0 stores, 1-12 libdeflate's levels; above 12 is 12).
pub fn member(data: &[u8], level: u32) -> Vec<u8> {
    let level = level.min(MAX_LEVEL);
    COMPRESSORS.with(|cell| {
        let mut cached = cell.borrow_mut();
        let at = match cached.iter().position(|(l, _)| *l == level) {
            Some(at) => at,
            None => {
                // In range by the min above, so `new` cannot refuse it.
                let lvl = CompressionLvl::new(level as i32).unwrap_or_default();
                cached.push((level, Compressor::new(lvl)));
                cached.len() - 1
            }
        };
        let comp = &mut cached[at].1;
        let mut out = vec![0u8; comp.gzip_compress_bound(data.len())];
        // The bound is libdeflate's own worst case, so the output always fits.
        let n = comp.gzip_compress(data, &mut out).unwrap_or(0);
        out.truncate(n);
        out
    })
}

/// Decompresses a gzip file (one or more members) from the chunks it is fed.
pub struct Inflater {
    dec: MultiGzDecoder<Vec<u8>>,
}

impl Default for Inflater {
    fn default() -> Self {
        Inflater { dec: MultiGzDecoder::new(Vec::new()) }
    }
}

impl Inflater {
    /// The bytes `chunk` completes; `Err` when the data is not gzip or is corrupt.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<Vec<u8>, String> {
        // JSON lines inflate 3-5x: room for that up front, not a Vec doubled (and copied) from empty.
        self.dec.get_mut().reserve(chunk.len().saturating_mul(4));
        self.dec.write_all(chunk).map_err(|e| e.to_string())?;
        Ok(std::mem::take(self.dec.get_mut()))
    }

    /// The last bytes; `Err` when the stream ended inside a member (a truncated file).
    pub fn finish(&mut self) -> Result<Vec<u8>, String> {
        self.dec.try_finish().map_err(|e| e.to_string())?;
        Ok(std::mem::take(self.dec.get_mut()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::read::MultiGzDecoder;
    use std::io::Read;

    #[test]
    fn members_concatenate_into_one_stream() {
        let mut joined = member(b"{\"a\":1}\n", 6);
        joined.extend(member(b"{\"b\":2}\n", 1));
        joined.extend(member(b"", 6));
        let mut out = String::new();
        MultiGzDecoder::new(joined.as_slice()).read_to_string(&mut out).unwrap();
        assert_eq!(out, "{\"a\":1}\n{\"b\":2}\n");
        assert_eq!(member(b"same", 6), member(b"same", 6));
    }

    #[test]
    fn every_level_round_trips_with_mtime_zero() {
        let data: Vec<u8> = (0..200_000u32).flat_map(|i| format!("{{\"n\":{}}}\n", i % 977).into_bytes()).collect();
        for level in [0, 1, 5, 9, 12, 19] {
            let packed = member(&data, level);
            assert_eq!(&packed[..4], &[0x1f, 0x8b, 8, 0], "level {level}");
            assert_eq!(&packed[4..8], &[0, 0, 0, 0], "mtime, level {level}");
            let mut out = Vec::new();
            MultiGzDecoder::new(packed.as_slice()).read_to_end(&mut out).unwrap();
            assert_eq!(out, data, "level {level}");
        }
        assert!(member(&data, 9).len() < member(&data, 1).len());
    }

    #[test]
    fn inflater_reads_members_in_chunks_and_sees_truncation() {
        let mut data = member(b"hello\nworld\n", 6);
        data.extend(member(b"more\n", 6));
        let mut inf = Inflater::default();
        let mut out = Vec::new();
        for chunk in data.chunks(5) {
            out.extend(inf.feed(chunk).unwrap());
        }
        out.extend(inf.finish().unwrap());
        assert_eq!(out, b"hello\nworld\nmore\n");
        let mut inf = Inflater::default();
        inf.feed(&data[..data.len() - 4]).unwrap();
        assert!(inf.finish().is_err());
        let mut bad = data.clone();
        bad[12] ^= 0xff;
        assert!(Inflater::default().feed(&bad).is_err());
    }
}
