//! The binary work files of a dedup run. All integers little-endian.
//!
//! A *bucketed* file holds fixed-size records grouped into buckets, so that a task that owns
//! one bucket (a hash range, or one input file) reads only its slice:
//!
//! ```text
//! offset      size      field
//!      0         8      magic b"DPBKT\0\0\x01"
//!      8         4      record size in bytes
//!     12         4      number of buckets B
//!     16   8 (B+1)      cumulative record counts: bucket b holds records [off[b], off[b+1])
//! 24+8B        ...      the records, bucket after bucket, each bucket in the order written
//! ```
//!
//! Records (fields in order):
//! - `DOC` (20 B): key digest u128, document index u32
//! - `PARA` (24 B): key digest u128, document index u32, paragraph index u32
//! - `BAND` (16 B): band hash u64, band u32, document index u32
//! - `DUP` (8 B): document index u32, paragraph index u32 (u32::MAX for a whole document)
//! - `PAIR` (12 B): earlier file u32, earlier document u32, later document u32
//! - `VERIFIED` (16 B): `PAIR` and its similarity f32
//! - `MEMBER` (16 B): document u32, cluster u32, cluster size u32, survivor flag u32
use super::error::DedupError;

pub const MAGIC: [u8; 8] = *b"DPBKT\0\0\x01";
pub const DOC: usize = 20;
pub const PARA: usize = 24;
pub const BAND: usize = 16;
pub const DUP: usize = 8;
pub const PAIR: usize = 12;
pub const VERIFIED: usize = 16;
pub const MEMBER: usize = 16;
pub const WHOLE_DOCUMENT: u32 = u32::MAX;

/// Records collected per bucket, then written as one bucketed file.
#[derive(Debug, Clone)]
pub struct Bucketed {
    record_size: usize,
    buckets: Vec<Vec<u8>>,
}

impl Bucketed {
    pub fn new(record_size: usize, buckets: usize) -> Bucketed {
        Bucketed { record_size, buckets: vec![Vec::new(); buckets.max(1)] }
    }

    #[inline]
    pub fn push(&mut self, bucket: usize, record: &[u8]) {
        debug_assert_eq!(record.len(), self.record_size);
        self.buckets[bucket].extend_from_slice(record);
    }

    pub fn bucket_mut(&mut self, bucket: usize) -> &mut Vec<u8> {
        &mut self.buckets[bucket]
    }

    pub fn records(&self) -> usize {
        self.buckets.iter().map(|b| b.len()).sum::<usize>() / self.record_size
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let total: usize = self.buckets.iter().map(|b| b.len()).sum();
        let mut out = Vec::with_capacity(16 + 8 * (self.buckets.len() + 1) + total);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&(self.record_size as u32).to_le_bytes());
        out.extend_from_slice(&(self.buckets.len() as u32).to_le_bytes());
        let mut n = 0u64;
        out.extend_from_slice(&n.to_le_bytes());
        for b in &self.buckets {
            n += (b.len() / self.record_size) as u64;
            out.extend_from_slice(&n.to_le_bytes());
        }
        for b in &self.buckets {
            out.extend_from_slice(b);
        }
        out
    }
}

/// A bucketed file read whole (tests and small files); tasks read slices through Python.
pub struct BucketedView<'a> {
    pub record_size: usize,
    offsets: Vec<u64>,
    data: &'a [u8],
}

impl<'a> BucketedView<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<BucketedView<'a>, DedupError> {
        if bytes.len() < 16 || bytes[..8] != MAGIC {
            return Err(DedupError::Damaged("not a dolma-pipe bucketed work file (bad magic)"));
        }
        let record_size = u32_at(bytes, 8) as usize;
        let buckets = u32_at(bytes, 12) as usize;
        let head = 16 + 8 * (buckets + 1);
        if record_size == 0 || bytes.len() < head {
            return Err(DedupError::Damaged("truncated bucketed work file"));
        }
        let offsets: Vec<u64> = (0..=buckets).map(|i| u64_at(bytes, 16 + 8 * i)).collect();
        let data = &bytes[head..];
        if data.len() as u64 != offsets[buckets] * record_size as u64 {
            return Err(DedupError::Damaged("bucketed work file size does not match its offsets"));
        }
        Ok(BucketedView { record_size, offsets, data })
    }

    pub fn buckets(&self) -> usize {
        self.offsets.len() - 1
    }

    pub fn bucket(&self, b: usize) -> &'a [u8] {
        let rs = self.record_size as u64;
        &self.data[(self.offsets[b] * rs) as usize..(self.offsets[b + 1] * rs) as usize]
    }
}

#[inline]
pub fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}

#[inline]
pub fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(x)
}

#[inline]
pub fn u128_at(b: &[u8], off: usize) -> u128 {
    let mut x = [0u8; 16];
    x.copy_from_slice(&b[off..off + 16]);
    u128::from_le_bytes(x)
}

#[inline]
pub fn f32_at(b: &[u8], off: usize) -> f32 {
    f32::from_bits(u32_at(b, off))
}

/// Checks that a record buffer is whole records.
pub fn check_records(buf: &[u8], record_size: usize, what: &'static str) -> Result<(), DedupError> {
    if !buf.len().is_multiple_of(record_size) {
        return Err(DedupError::PartialRecords { what, bytes: buf.len(), record_size });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = Bucketed::new(8, 3);
        b.push(2, &[1; 8]);
        b.push(0, &[2; 8]);
        b.push(2, &[3; 8]);
        assert_eq!(b.records(), 3);
        let bytes = b.to_bytes();
        let v = BucketedView::parse(&bytes).unwrap();
        assert_eq!(v.buckets(), 3);
        assert_eq!(v.bucket(0), &[2; 8]);
        assert!(v.bucket(1).is_empty());
        assert_eq!(v.bucket(2), [[1u8; 8], [3u8; 8]].concat().as_slice());
        assert!(BucketedView::parse(&bytes[..bytes.len() - 1]).is_err());
        assert!(BucketedView::parse(b"nonsense").is_err());
    }
}
