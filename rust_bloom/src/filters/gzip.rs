//! gzip for the mixer's files, by zlib-rs: output members (one complete gzip member per call,
//! header with mtime 0 and no name, so equal input gives equal bytes) and a push-style reader of
//! inputs (any number of concatenated members, fed chunk by chunk).
use flate2::write::MultiGzDecoder;
use flate2::{Compression, GzBuilder};
use std::io::Write;

/// `data` as one gzip member at `level` (0-9).
pub fn member(data: &[u8], level: u32) -> Vec<u8> {
    let out = Vec::with_capacity(data.len() / 3 + 64);
    let mut enc = GzBuilder::new().mtime(0).write(out, Compression::new(level.min(9)));
    // Writing into a Vec cannot fail.
    let _ = enc.write_all(data);
    enc.finish().unwrap_or_default()
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
