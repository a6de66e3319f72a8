//! The steps after the scan, each over records the scan wrote:
//!
//! - `first_occurrence`: one bucket's key records from every file, in the global order; every
//!   record whose key was seen before is a duplicate (exact: keys are 128-bit digests);
//! - `bloom_test_and_set`: one file's key records tested-and-set in a Bloom filter, in order
//!   (Bloom mode);
//! - `band_candidates`: one bucket of band records; documents sharing a band are candidate
//!   pairs;
//! - `verify_pairs`: candidate pairs kept when their shingle sets' Jaccard (or their
//!   signatures' agreement) reaches the threshold;
//! - `cluster`: connected components of the verified pairs, the first document of each in
//!   the global order being its survivor.
//!
//! Inputs are `(file index, records)` slices; outputs are bucketed files (`records`), bucketed
//! by file index so that each file's later task reads only its own slice.
use super::error::DedupError;
use super::records::{self, f32_at, u128_at, u32_at, u64_at, Bucketed, WHOLE_DOCUMENT};
use crate::bloom::{Bloom, BloomError};
use crate::minhash::cluster::{Components, U64Map};
use crate::minhash::{jaccard_sorted, signature_similarity};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// Keys are uniform 128-bit digests: their low half is already a good hash.
#[derive(Default)]
struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u128(&mut self, x: u128) {
        self.0 = x as u64;
    }
}

#[inline]
pub fn node(file: u32, doc: u32) -> u64 {
    (u64::from(file) << 32) | u64::from(doc)
}

/// One input slice: a file's index in the global order and its records (in that file's order).
pub type Slice<'a> = (u32, &'a [u8]);

/// Documents to leave out of a first-occurrence pass: (file index, sorted document indices).
pub type Removed<'a> = (u32, &'a [u32]);

/// First occurrences in the global order, fed one file at a time (in file order): memory holds
/// the distinct keys seen, not the records (a key repeated a million times costs one entry).
pub struct FirstSeen {
    record_size: usize,
    files: usize,
    seen: HashSet<u128, BuildHasherDefault<DigestHasher>>,
    out: Bucketed,
    last_file: Option<u32>,
    dups: u64,
    records: u64,
}

impl FirstSeen {
    pub fn new(record_size: usize, files: usize) -> Result<FirstSeen, DedupError> {
        if record_size != records::DOC && record_size != records::PARA {
            return Err(DedupError::UnknownRecordSize { kernel: "first_occurrence", size: record_size });
        }
        Ok(FirstSeen {
            record_size,
            files,
            seen: HashSet::default(),
            out: Bucketed::new(records::DUP, files),
            last_file: None,
            dups: 0,
            records: 0,
        })
    }

    /// The records of file `file` (files in increasing order), leaving out the documents in
    /// `removed` (sorted): a removed document's key is neither a first occurrence nor a duplicate.
    pub fn add(&mut self, file: u32, buf: &[u8], removed: &[u32]) -> Result<(), DedupError> {
        records::check_records(buf, self.record_size, "key records")?;
        if file as usize >= self.files {
            return Err(DedupError::FileOutOfRange { kernel: "first_occurrence", file: file as usize });
        }
        if self.last_file.is_some_and(|last| file <= last) {
            return Err(DedupError::FilesOutOfOrder);
        }
        self.last_file = Some(file);
        for rec in buf.chunks_exact(self.record_size) {
            let doc = u32_at(rec, 16);
            if !removed.is_empty() && removed.binary_search(&doc).is_ok() {
                continue;
            }
            self.records += 1;
            if !self.seen.insert(u128_at(rec, 0)) {
                let para = if self.record_size == records::PARA { u32_at(rec, 20) } else { WHOLE_DOCUMENT };
                let mut dup = [0u8; records::DUP];
                dup[..4].copy_from_slice(&doc.to_le_bytes());
                dup[4..].copy_from_slice(&para.to_le_bytes());
                self.out.push(file as usize, &dup);
                self.dups += 1;
            }
        }
        Ok(())
    }

    /// (DUP records bucketed by file, duplicates, records considered, distinct keys).
    pub fn finish(self) -> (Bucketed, u64, u64, u64) {
        (self.out, self.dups, self.records, self.seen.len() as u64)
    }
}

/// DUP records (bucketed by file) of every key record whose key occurred before it in the
/// global order. `record_size` is `records::DOC` or `records::PARA`. Records of documents in
/// `removed` take no part: a removed document's paragraph is neither a first occurrence nor a
/// duplicate, so a paragraph survives in the first document that survives.
pub fn first_occurrence(
    slices: &[Slice],
    record_size: usize,
    files: usize,
    removed: &[Removed],
) -> Result<(Bucketed, u64), DedupError> {
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by_key(|&i| slices[i].0);
    let mut fs = FirstSeen::new(record_size, files)?;
    for i in order {
        let (file, buf) = slices[i];
        let skip = removed.iter().find(|r| r.0 == file).map_or(&[][..], |r| r.1);
        fs.add(file, buf, skip)?;
    }
    let (out, dups, _, _) = fs.finish();
    Ok((out, dups))
}

/// Bloom mode: tests-and-sets the key of each record of one file in `bloom`, in order, leaving
/// out the documents in `skip` (sorted). Returns the DUP records of the keys found present and
/// the number of keys tested. `record_size` is `records::DOC` or `records::PARA`.
///
/// A key repeated within the file is present at every later copy whatever else the filter
/// holds (its first copy set its bits, and a Bloom filter has no false negatives) and setting
/// its bits again changes nothing: so only the first copy of each key in the file goes to the
/// filter. The answers, the bits and the count are those of testing-and-setting every record,
/// with fewer random accesses to the filter (Dolma's paragraphs repeat within a file: about a
/// third of the bench corpus's paragraph keys).
pub fn bloom_test_and_set(
    bloom: &Bloom,
    buf: &[u8],
    record_size: usize,
    skip: &[u32],
) -> Result<(Vec<u8>, u64), BloomError> {
    let kept: Vec<&[u8]> = buf
        .chunks_exact(record_size)
        .filter(|rec| skip.is_empty() || skip.binary_search(&u32_at(rec, 16)).is_err())
        .collect();
    let mut seen: HashSet<u128, BuildHasherDefault<DigestHasher>> =
        HashSet::with_capacity_and_hasher(kept.len(), BuildHasherDefault::default());
    let mut repeated = Vec::with_capacity(kept.len());
    let mut firsts: Vec<&[u8]> = Vec::with_capacity(kept.len());
    for rec in &kept {
        let first = seen.insert(u128_at(rec, 0));
        repeated.push(!first);
        if first {
            firsts.push(&rec[..16]);
        }
    }
    drop(seen);
    // One batch: the filter hashes keys and prefetches their bits ahead of the inserts.
    let mut present = Vec::with_capacity(firsts.len());
    bloom.insert_batch(&firsts, &mut present)?;
    let mut answers = present.into_iter();
    let mut out = Vec::new();
    for (rec, repeat) in kept.iter().zip(repeated) {
        // A repeat takes no answer: the filter's answers are for the first copies, in order.
        if repeat || answers.next().unwrap_or(false) {
            out.extend_from_slice(&rec[16..20]);
            let para = if record_size == records::PARA { u32_at(rec, 20) } else { WHOLE_DOCUMENT };
            out.extend_from_slice(&para.to_le_bytes());
        }
    }
    Ok((out, kept.len() as u64))
}

/// Candidate pairs (PAIR records bucketed by the later document's file) of documents sharing
/// a band. A group of up to `max_group` documents gives all its pairs; a larger one (a band
/// shared by thousands, e.g. boilerplate) gives each member paired with the group's first
/// document and with its predecessor, which connects the group without a quadratic blow-up.
pub fn band_candidates(slices: &[Slice], files: usize, max_group: usize) -> Result<(Bucketed, u64), DedupError> {
    let mut entries: Vec<(u32, u64, u64)> = Vec::new();
    for &(file, buf) in slices {
        records::check_records(buf, records::BAND, "band records")?;
        if file as usize >= files {
            return Err(DedupError::FileOutOfRange { kernel: "band_candidates", file: file as usize });
        }
        entries.reserve(buf.len() / records::BAND);
        for rec in buf.chunks_exact(records::BAND) {
            entries.push((u32_at(rec, 8), u64_at(rec, 0), node(file, u32_at(rec, 12))));
        }
    }
    entries.sort_unstable();
    let mut pairs: Vec<(u64, u64)> = Vec::new();
    let mut i = 0;
    while i < entries.len() {
        let mut j = i + 1;
        while j < entries.len() && entries[j].0 == entries[i].0 && entries[j].1 == entries[i].1 {
            j += 1;
        }
        let group: Vec<u64> = entries[i..j].iter().map(|e| e.2).collect();
        if group.len() <= max_group.max(2) {
            for a in 0..group.len() {
                for b in a + 1..group.len() {
                    pairs.push((group[a], group[b]));
                }
            }
        } else {
            for b in 1..group.len() {
                pairs.push((group[0], group[b]));
                if b > 1 {
                    pairs.push((group[b - 1], group[b]));
                }
            }
        }
        i = j;
    }
    pairs.sort_unstable();
    pairs.dedup();
    let mut out = Bucketed::new(records::PAIR, files);
    for &(lo, hi) in &pairs {
        let mut rec = [0u8; records::PAIR];
        rec[..4].copy_from_slice(&((lo >> 32) as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&(lo as u32).to_le_bytes());
        rec[8..12].copy_from_slice(&(hi as u32).to_le_bytes());
        out.push((hi >> 32) as usize, &rec);
    }
    Ok((out, pairs.len() as u64))
}

/// How candidate pairs are checked before they join a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verify {
    /// Exact Jaccard of the two shingle sets (u32 values, in any order, repeats allowed).
    Jaccard,
    /// The fraction of equal signature values (an estimate of the Jaccard).
    Signature,
}

/// For each later file (`(hi file, PAIR record buffers)`: pairs in any order, repeats allowed),
/// its pairs whose similarity reaches `threshold`, as sorted distinct `VERIFIED` records, with the
/// number of distinct pairs and of kept ones. `values` maps each document node to its shingle
/// values or signature (u32s); each document's values are decoded once for all files.
pub fn verify_pairs(
    groups: &[(u32, Vec<&[u8]>)],
    values: &U64Map<&[u8]>,
    mode: Verify,
    threshold: f64,
) -> Result<Vec<(Vec<u8>, u64, u64)>, DedupError> {
    // Each document's values once: shingle values are stored as they came (unsorted, repeated)
    // and become a sorted set here; signatures stay in order.
    let mut decoded: U64Map<Vec<u32>> = U64Map::default();
    let mut results = Vec::with_capacity(groups.len());
    for (hi_file, pairs) in groups {
        let mut all: Vec<(u64, u64)> = Vec::new();
        for buf in pairs {
            records::check_records(buf, records::PAIR, "pair records")?;
            for rec in buf.chunks_exact(records::PAIR) {
                all.push((node(u32_at(rec, 0), u32_at(rec, 4)), node(*hi_file, u32_at(rec, 8))));
            }
        }
        all.sort_unstable();
        all.dedup();
        for &(lo, hi) in &all {
            for n in [lo, hi] {
                if decoded.contains_key(&n) {
                    continue;
                }
                let Some(raw) = values.get(&n) else {
                    return Err(DedupError::NoValues { node: n });
                };
                let mut v: Vec<u32> =
                    raw.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
                if mode == Verify::Jaccard {
                    v.sort_unstable();
                    v.dedup();
                }
                decoded.insert(n, v);
            }
        }
        let mut out = Vec::new();
        let mut kept = 0u64;
        for &(lo, hi) in &all {
            let (a, b) = (&decoded[&lo], &decoded[&hi]);
            let sim = match mode {
                Verify::Jaccard => jaccard_sorted(a, b),
                Verify::Signature => signature_similarity(a, b),
            };
            if sim >= threshold {
                out.extend_from_slice(&((lo >> 32) as u32).to_le_bytes());
                out.extend_from_slice(&(lo as u32).to_le_bytes());
                out.extend_from_slice(&(hi as u32).to_le_bytes());
                out.extend_from_slice(&(sim as f32).to_le_bytes());
                kept += 1;
            }
        }
        results.push((out, all.len() as u64, kept));
    }
    Ok(results)
}

/// One clustered document for the clusters file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clustered {
    pub node: u64,
    pub survivor: u64,
    pub cluster: u32,
    pub size: u32,
}

/// Clusters of verified pairs given per later file (`(hi file, VERIFIED records)`; pass
/// unverified `PAIR` records with `record_size = records::PAIR`). Returns the `MEMBER` records
/// bucketed by file, and every member in (cluster, global order) order.
pub fn cluster(slices: &[Slice], record_size: usize, files: usize) -> Result<(Bucketed, Vec<Clustered>), DedupError> {
    if record_size != records::VERIFIED && record_size != records::PAIR {
        return Err(DedupError::UnknownRecordSize { kernel: "cluster", size: record_size });
    }
    let mut comps = Components::new();
    for &(hi_file, buf) in slices {
        records::check_records(buf, record_size, "pair records")?;
        for rec in buf.chunks_exact(record_size) {
            if record_size == records::VERIFIED && f32_at(rec, 12).is_nan() {
                return Err(DedupError::NoSimilarity);
            }
            comps.union(node(u32_at(rec, 0), u32_at(rec, 4)), node(hi_file, u32_at(rec, 8)));
        }
    }
    let members = comps.members();
    let mut out = Bucketed::new(records::MEMBER, files);
    let mut clustered = Vec::with_capacity(members.len());
    let mut cluster = 0u32;
    for (i, m) in members.iter().enumerate() {
        if i > 0 && members[i - 1].root != m.root {
            cluster += 1;
        }
        let file = (m.node >> 32) as usize;
        if file >= files {
            return Err(DedupError::FileOutOfRange { kernel: "cluster", file });
        }
        let mut rec = [0u8; records::MEMBER];
        rec[..4].copy_from_slice(&(m.node as u32).to_le_bytes());
        rec[4..8].copy_from_slice(&cluster.to_le_bytes());
        rec[8..12].copy_from_slice(&m.size.to_le_bytes());
        rec[12..16].copy_from_slice(&u32::from(m.node == m.root).to_le_bytes());
        out.push(file, &rec);
        clustered.push(Clustered { node: m.node, survivor: m.root, cluster, size: m.size });
    }
    // Within a file, members must be in document order for its attribute writer.
    for f in 0..files {
        let bucket = out.bucket_mut(f);
        let mut recs: Vec<[u8; records::MEMBER]> = bucket
            .chunks_exact(records::MEMBER)
            .map(|c| {
                let mut r = [0u8; records::MEMBER];
                r.copy_from_slice(c);
                r
            })
            .collect();
        recs.sort_unstable_by_key(|r| u32_at(r, 0));
        bucket.clear();
        for r in recs {
            bucket.extend_from_slice(&r);
        }
    }
    Ok((out, clustered))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::records::BucketedView;

    fn doc_rec(h: u128, doc: u32) -> Vec<u8> {
        let mut r = h.to_le_bytes().to_vec();
        r.extend_from_slice(&doc.to_le_bytes());
        r
    }

    #[test]
    fn bloom_test_and_set_answers_as_every_record_tested() {
        use crate::bloom::Params;
        const MIX: u128 = 0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835;
        // Paragraph records: keys with repeats within the file, over documents 0..20; a small
        // filter so that false positives occur too.
        let mut buf = Vec::new();
        let mut keys = Vec::new();
        for i in 0..600u32 {
            let key = u128::from(i * 7 % 250).wrapping_mul(MIX);
            let doc = i / 30;
            buf.extend_from_slice(&key.to_le_bytes());
            buf.extend_from_slice(&doc.to_le_bytes());
            buf.extend_from_slice(&(i % 30).to_le_bytes());
            keys.push((key, doc, i % 30));
        }
        for skip in [vec![], vec![3u32, 7, 8]] {
            let params = Params::explicit(2048, 3).unwrap();
            let (a, b) = (Bloom::new(params, 5).unwrap(), Bloom::new(params, 5).unwrap());
            // Earlier files' keys in both filters.
            let mut flags = Vec::new();
            for x in [&a, &b] {
                x.insert_batch(&[9u128.to_le_bytes(), 14u128.wrapping_mul(MIX).to_le_bytes()], &mut flags).unwrap();
            }
            let (out, tested) = bloom_test_and_set(&a, &buf, records::PARA, &skip).unwrap();
            let kept: Vec<_> = keys.iter().filter(|k| !skip.contains(&k.1)).collect();
            let all: Vec<[u8; 16]> = kept.iter().map(|k| k.0.to_le_bytes()).collect();
            let mut present = Vec::new();
            b.insert_batch(&all, &mut present).unwrap();
            let mut want = Vec::new();
            for (k, p) in kept.iter().zip(present) {
                if p {
                    want.extend_from_slice(&k.1.to_le_bytes());
                    want.extend_from_slice(&k.2.to_le_bytes());
                }
            }
            assert_eq!(out, want);
            assert!(out.len() / records::DUP >= kept.len() - 250, "repeats are found present");
            assert_eq!(tested, kept.len() as u64);
            assert_eq!(a.count(), b.count());
            let dir = std::env::temp_dir().join(format!("dp-bloom-tas-{}-{}", std::process::id(), skip.len()));
            std::fs::create_dir_all(&dir).unwrap();
            a.save(&dir.join("a")).unwrap();
            b.save(&dir.join("b")).unwrap();
            assert_eq!(std::fs::read(dir.join("a")).unwrap(), std::fs::read(dir.join("b")).unwrap());
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }

    #[test]
    fn first_occurrence_follows_the_global_order_not_the_slice_order() {
        let f0: Vec<u8> = [doc_rec(1, 0), doc_rec(2, 1), doc_rec(1, 2)].concat();
        let f1: Vec<u8> = [doc_rec(2, 0), doc_rec(3, 1)].concat();
        let (out, n) = first_occurrence(&[(1, &f1), (0, &f0)], records::DOC, 2, &[]).unwrap();
        assert_eq!(n, 2);
        let bytes = out.to_bytes();
        let v = BucketedView::parse(&bytes).unwrap();
        assert_eq!(u32_at(v.bucket(0), 0), 2, "file 0's third document repeats its first");
        assert_eq!(u32_at(v.bucket(1), 0), 0, "file 1's first document repeats file 0's second");
        // Leaving file 0's document 1 out makes file 1's copy the first one.
        let (_, n) = first_occurrence(&[(0, &f0), (1, &f1)], records::DOC, 2, &[(0, &[1])]).unwrap();
        assert_eq!(n, 1);
        assert!(first_occurrence(&[(0, &f0), (0, &f0)], records::DOC, 2, &[]).is_err());
        assert!(first_occurrence(&[(0, &f0[..5])], records::DOC, 1, &[]).is_err());
    }

    fn band(h: u64, band: u32, doc: u32) -> Vec<u8> {
        [h.to_le_bytes().as_slice(), &band.to_le_bytes(), &doc.to_le_bytes()].concat()
    }

    #[test]
    fn bands_give_pairs_and_clusters_keep_the_first() {
        let f0 = [band(9, 0, 0), band(9, 1, 1), band(7, 0, 2)].concat();
        let f1 = [band(9, 0, 0), band(7, 0, 1), band(7, 1, 2)].concat();
        let (out, n) = band_candidates(&[(0, &f0), (1, &f1)], 2, 10).unwrap();
        assert_eq!(n, 2, "(0:0, 1:0) share band 0 hash 9; (0:2, 1:1) share band 0 hash 7");
        let bytes = out.to_bytes();
        let v = BucketedView::parse(&bytes).unwrap();
        assert!(v.bucket(0).is_empty());
        let verified: Vec<u8> =
            v.bucket(1).chunks_exact(records::PAIR).flat_map(|r| [r, &1.0f32.to_le_bytes()].concat()).collect();
        let (members, clustered) = cluster(&[(1, &verified)], records::VERIFIED, 2).unwrap();
        assert_eq!(clustered.len(), 4);
        assert_eq!(clustered[0], Clustered { node: node(0, 0), survivor: node(0, 0), cluster: 0, size: 2 });
        assert_eq!(clustered[3], Clustered { node: node(1, 1), survivor: node(0, 2), cluster: 1, size: 2 });
        let mb = members.to_bytes();
        let m = BucketedView::parse(&mb).unwrap();
        assert_eq!(m.bucket(0).len() / records::MEMBER, 2);
        assert_eq!(u32_at(m.bucket(0), 12), 1, "file 0's members are survivors");
        assert_eq!(u32_at(m.bucket(1), 12), 0);
    }

    #[test]
    fn big_groups_stay_connected_without_all_pairs() {
        let f0: Vec<u8> = (0..100).flat_map(|d| band(5, 0, d)).collect();
        let (_, n) = band_candidates(&[(0, &f0)], 1, 10).unwrap();
        assert_eq!(n, 99 + 98);
        let (_, n) = band_candidates(&[(0, &f0)], 1, 1000).unwrap();
        assert_eq!(n, 100 * 99 / 2);
    }

    #[test]
    fn verification_uses_the_threshold() {
        let pair = [0u32.to_le_bytes(), 0u32.to_le_bytes(), 1u32.to_le_bytes()].concat();
        let a: Vec<u8> = [1u32, 2, 3, 4].iter().flat_map(|x| x.to_le_bytes()).collect();
        let b: Vec<u8> = [5u32, 1, 3, 2, 3].iter().flat_map(|x| x.to_le_bytes()).collect();
        let mut values: U64Map<&[u8]> = U64Map::default();
        values.insert(node(0, 0), &a);
        values.insert(node(0, 1), &b);
        let one = |pairs: Vec<&[u8]>, values: &U64Map<&[u8]>, mode, t| {
            verify_pairs(&[(0, pairs)], values, mode, t).map(|mut r| r.remove(0))
        };
        let (out, n, kept) = one(vec![&pair, &pair], &values, Verify::Jaccard, 0.61).unwrap();
        assert_eq!((n, kept), (1, 0), "J = 3/5");
        assert!(out.is_empty());
        let (out, _, kept) = one(vec![&pair], &values, Verify::Jaccard, 0.6).unwrap();
        assert_eq!(kept, 1, "the stored values are made a set first (order and repeats do not count)");
        assert_eq!(f32_at(&out, 12), 0.6);
        let sig: Vec<u8> = [1u32, 0, 3, 4].iter().flat_map(|x| x.to_le_bytes()).collect();
        values.insert(node(0, 1), &sig);
        let (out, _, kept) = one(vec![&pair], &values, Verify::Signature, 0.75).unwrap();
        assert_eq!(kept, 1);
        assert_eq!(f32_at(&out, 12), 0.75);
        values.remove(&node(0, 1));
        assert!(one(vec![&pair], &values, Verify::Jaccard, 0.5).is_err());
    }
}
