//! The checksum trailer every work file carries: what a phase's tasks write for a later phase
//! (dedup's key records, tokenize's token runs, the mixer's members) is checked when it is read
//! back, so a file damaged or cut short between the two is found instead of used.
//!
//! The trailer follows the file's content, which is left as it was (readers seek and memory-map
//! it as before):
//!
//! ```text
//! offset        size      field
//!      0           n      content
//!      n      8 * B       xxh3-64 of each block of `block` bytes of content (the last may be shorter);
//!                         B = ceil(n / block)
//! n + 8B           8      content length n (u64)
//!   + 8            4      block size (u32)
//!   + 12           4      format version (u32)
//!   + 16           8      xxh3-64 of the digest table followed by the 16 bytes above
//!   + 24           8      magic b"DPWSUM\0\x01"
//! ```
//!
//! All integers little-endian. A reader of a byte range checks only the blocks that hold it, so a
//! task that reads one bucket of a large file reads at most two blocks more than its slice.
use xxhash_rust::xxh3::xxh3_64;

pub const MAGIC: [u8; 8] = *b"DPWSUM\0\x01";
pub const FOOTER_LEN: usize = 32;
pub const VERSION: u32 = 1;
/// 64 KiB: 8 bytes of digest per 64 KiB of content (0.01%), and little read beyond a slice.
pub const DEFAULT_BLOCK: u32 = 1 << 16;

/// Why a work file cannot be used; the message says what is wrong (the caller adds the path).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// No trailer at the end: the file was cut short, or is not a work file of this format.
    NoTrailer,
    /// The file's length is not the one its trailer gives.
    Length { actual: u64, expected: u64 },
    /// The trailer itself does not add up.
    Trailer(String),
    /// A block of content fails its checksum.
    Block { index: u64, start: u64, end: u64 },
}

impl std::fmt::Display for CheckError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckError::NoTrailer => write!(f, "truncated (its checksum trailer is missing)"),
            CheckError::Length { actual, expected } => {
                let how = if actual < expected { "truncated" } else { "damaged" };
                write!(f, "{how} ({actual} bytes, its trailer says {expected})")
            }
            CheckError::Trailer(why) => write!(f, "damaged (its checksum trailer {why})"),
            CheckError::Block { index, start, end } => {
                write!(f, "damaged (bytes {start}..{end}, block {index}, fail their checksum)")
            }
        }
    }
}

impl std::error::Error for CheckError {}

impl CheckError {
    /// "truncated" or "damaged": what a user is told happened to the file.
    pub fn kind(&self) -> &'static str {
        match self {
            CheckError::NoTrailer => "truncated",
            CheckError::Length { actual, expected } if actual < expected => "truncated",
            _ => "damaged",
        }
    }
}

fn blocks_of(len: u64, block: u32) -> u64 {
    len.div_ceil(block as u64)
}

/// The trailer's last 32 bytes, read first: they say how long the content and the table are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub content_len: u64,
    pub block: u32,
    digest: u64,
}

impl Footer {
    pub fn parse(bytes: &[u8]) -> Result<Footer, CheckError> {
        if bytes.len() != FOOTER_LEN || bytes[24..32] != MAGIC {
            return Err(CheckError::NoTrailer);
        }
        let content_len = u64::from_le_bytes(bytes[0..8].try_into().unwrap());
        let block = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        let version = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
        if version != VERSION {
            return Err(CheckError::Trailer(format!("has format version {version}, this build reads {VERSION}")));
        }
        if block == 0 || content_len > u64::MAX / 2 {
            return Err(CheckError::Trailer("holds impossible sizes".into()));
        }
        Ok(Footer { content_len, block, digest: u64::from_le_bytes(bytes[16..24].try_into().unwrap()) })
    }

    pub fn blocks(&self) -> u64 {
        blocks_of(self.content_len, self.block)
    }

    pub fn table_len(&self) -> u64 {
        8 * self.blocks()
    }

    /// The whole file's length: content, digest table and footer.
    pub fn file_len(&self) -> u64 {
        self.content_len + self.table_len() + FOOTER_LEN as u64
    }

    pub fn check_file_len(&self, actual: u64) -> Result<(), CheckError> {
        if actual != self.file_len() {
            return Err(CheckError::Length { actual, expected: self.file_len() });
        }
        Ok(())
    }
}

fn footer_bytes(content_len: u64, block: u32, table: &[u8]) -> [u8; FOOTER_LEN] {
    let mut out = [0u8; FOOTER_LEN];
    out[0..8].copy_from_slice(&content_len.to_le_bytes());
    out[8..12].copy_from_slice(&block.to_le_bytes());
    out[12..16].copy_from_slice(&VERSION.to_le_bytes());
    let mut covered = Vec::with_capacity(table.len() + 16);
    covered.extend_from_slice(table);
    covered.extend_from_slice(&out[0..16]);
    out[16..24].copy_from_slice(&xxh3_64(&covered).to_le_bytes());
    out[24..32].copy_from_slice(&MAGIC);
    out
}

/// The digest table, checked against its footer: what range checks compare blocks with.
#[derive(Debug, Clone)]
pub struct Table {
    pub footer: Footer,
    digests: Vec<u64>,
}

impl Table {
    pub fn parse(footer: Footer, table: &[u8]) -> Result<Table, CheckError> {
        if table.len() as u64 != footer.table_len() {
            return Err(CheckError::Trailer(format!(
                "has {} bytes of digests, its footer says {}",
                table.len(),
                footer.table_len()
            )));
        }
        if footer_bytes(footer.content_len, footer.block, table)[16..24] != footer.digest.to_le_bytes() {
            return Err(CheckError::Trailer("fails its own checksum".into()));
        }
        let digests = table.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
        Ok(Table { footer, digests })
    }

    /// The blocks (first, end exclusive) that hold content bytes [start, start + len).
    pub fn blocks_for(&self, start: u64, len: u64) -> (u64, u64) {
        let b = self.footer.block as u64;
        if len == 0 {
            let first = (start / b).min(self.footer.blocks());
            return (first, first);
        }
        (start / b, (start + len).div_ceil(b).min(self.footer.blocks()))
    }

    /// Checks ``data``: whole blocks of content from block ``first`` on (the content's last block
    /// may be shorter). Anything else (a slice that does not start or end on a block) is an error.
    pub fn check(&self, first: u64, data: &[u8]) -> Result<(), CheckError> {
        let b = self.footer.block as u64;
        let n = self.footer.content_len;
        let start = first.saturating_mul(b);
        let end = start + data.len() as u64;
        let whole = end.is_multiple_of(b) || end == n;
        if start > n || end > n || !whole {
            return Err(CheckError::Trailer(format!("does not cover bytes {start}..{end} as whole blocks")));
        }
        for (i, chunk) in data.chunks(b as usize).enumerate() {
            let index = first + i as u64;
            if xxh3_64(chunk) != self.digests[index as usize] {
                let s = index * b;
                return Err(CheckError::Block { index, start: s, end: s + chunk.len() as u64 });
            }
        }
        Ok(())
    }
}

/// Digests content as it is written, in pieces of any size; ``finish`` gives the trailer.
#[derive(Debug, Clone)]
pub struct Sealer {
    block: usize,
    pending: Vec<u8>,
    table: Vec<u8>,
    len: u64,
}

impl Sealer {
    pub fn new(block: u32) -> Sealer {
        let block = block.max(1) as usize;
        Sealer { block, pending: Vec::with_capacity(block), table: Vec::new(), len: 0 }
    }

    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if !self.pending.is_empty() {
            let take = (self.block - self.pending.len()).min(data.len());
            self.pending.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.pending.len() == self.block {
                self.table.extend_from_slice(&xxh3_64(&self.pending).to_le_bytes());
                self.pending.clear();
            }
        }
        let mut chunks = data.chunks_exact(self.block);
        for chunk in &mut chunks {
            self.table.extend_from_slice(&xxh3_64(chunk).to_le_bytes());
        }
        self.pending.extend_from_slice(chunks.remainder());
    }

    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The trailer to write after the content.
    pub fn finish(mut self) -> Vec<u8> {
        if !self.pending.is_empty() {
            self.table.extend_from_slice(&xxh3_64(&self.pending).to_le_bytes());
        }
        let footer = footer_bytes(self.len, self.block as u32, &self.table);
        let mut out = self.table;
        out.extend_from_slice(&footer);
        out
    }
}

/// The trailer of ``content`` in one call.
pub fn seal(content: &[u8], block: u32) -> Vec<u8> {
    let mut s = Sealer::new(block);
    s.update(content);
    s.finish()
}

/// Checks a whole sealed file; returns its content (without the trailer).
pub fn check_whole(file: &[u8]) -> Result<&[u8], CheckError> {
    if file.len() < FOOTER_LEN {
        return Err(CheckError::NoTrailer);
    }
    let footer = Footer::parse(&file[file.len() - FOOTER_LEN..])?;
    footer.check_file_len(file.len() as u64)?;
    let n = footer.content_len as usize;
    let table = Table::parse(footer, &file[n..file.len() - FOOTER_LEN])?;
    table.check(0, &file[..n])?;
    Ok(&file[..n])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sealed(content: &[u8], block: u32) -> Vec<u8> {
        let mut out = content.to_vec();
        out.extend(seal(content, block));
        out
    }

    fn content(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 + i / 13) as u8).collect()
    }

    #[test]
    fn whole_files_of_every_length_check_and_give_their_content_back() {
        for n in [0, 1, 63, 64, 65, 127, 128, 129, 1000] {
            let c = content(n);
            let f = sealed(&c, 64);
            assert_eq!(check_whole(&f).unwrap(), &c[..], "n={n}");
            assert_eq!(f.len(), n + 8 * n.div_ceil(64) + FOOTER_LEN);
        }
    }

    #[test]
    fn pieces_of_any_size_give_the_same_trailer() {
        let c = content(1000);
        for step in [1, 3, 63, 64, 65, 500, 1000] {
            let mut s = Sealer::new(64);
            for piece in c.chunks(step) {
                s.update(piece);
            }
            assert_eq!(s.finish(), seal(&c, 64), "step={step}");
        }
    }

    #[test]
    fn a_flipped_byte_anywhere_is_found() {
        let c = content(700);
        let f = sealed(&c, 64);
        for at in 0..f.len() {
            let mut g = f.clone();
            g[at] ^= 0x40;
            assert!(check_whole(&g).is_err(), "flip at {at} passed");
        }
    }

    #[test]
    fn a_file_cut_short_is_truncated_and_a_longer_one_damaged() {
        let f = sealed(&content(700), 64);
        for keep in [0, 10, 700, f.len() - 1] {
            let e = check_whole(&f[..keep]).unwrap_err();
            assert_eq!(e.kind(), "truncated", "keep={keep}: {e}");
        }
        let mut longer = content(5);
        longer.extend(&f);
        assert_eq!(check_whole(&longer).unwrap_err().kind(), "damaged");
    }

    #[test]
    fn ranges_check_only_their_blocks() {
        let c = content(1000);
        let f = sealed(&c, 64);
        let footer = Footer::parse(&f[f.len() - FOOTER_LEN..]).unwrap();
        let table = Table::parse(footer, &f[1000..f.len() - FOOTER_LEN]).unwrap();
        assert_eq!(table.blocks_for(130, 10), (2, 3));
        assert_eq!(table.blocks_for(128, 64), (2, 3));
        assert_eq!(table.blocks_for(990, 10), (15, 16));
        assert_eq!(table.blocks_for(1000, 0), (15, 15));
        table.check(2, &c[128..192]).unwrap();
        table.check(15, &c[960..1000]).unwrap();
        assert!(table.check(2, &c[128..190]).is_err(), "a part of a block is refused");
        let mut bad = c[128..256].to_vec();
        bad[70] ^= 1;
        assert_eq!(table.check(2, &bad).unwrap_err(), CheckError::Block { index: 3, start: 192, end: 256 });
    }

    #[test]
    fn a_trailer_from_another_file_or_version_is_refused() {
        let f = sealed(&content(300), 64);
        let mut g = f.clone();
        let at = g.len() - FOOTER_LEN + 12;
        g[at] = 9;
        assert!(matches!(check_whole(&g), Err(CheckError::Trailer(_))));
    }
}
