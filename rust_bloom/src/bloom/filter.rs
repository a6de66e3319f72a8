//! `Bloom`: the filter as the rest of the crate and the Python face see it. It ties the
//! parameters, the storage (heap or shared map) and the file format together: create,
//! load/save, open/seal shared files, and the batched insert/contains used by dedup.
use super::core::BitsView;
use super::error::{BloomError, Result};
use super::format::{self, Header, BITS_OFFSET, FLAG_SEALED, HEADER_BYTES, OFF_CHECKSUM, OFF_COUNT, OFF_FLAGS};
use super::lock::{self, STRIPES};
use super::params::Params;
use super::storage::{zeroed, Map, Mapped, Storage};
use memmap2::MmapOptions;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Default hash seed (any fixed value; stored in every file, so changing it later is safe).
pub const DEFAULT_SEED: u64 = 0x0d01_a0b1_00f1_17e2;

pub struct Bloom {
    params: Params,
    seed: u64,
    storage: Storage,
}

fn read_header(file: &mut File, path: &Path) -> Result<Header> {
    let file_len = file.metadata().map_err(|e| BloomError::io(path, e))?.len();
    let mut head = Vec::with_capacity(HEADER_BYTES as usize);
    file.take(HEADER_BYTES).read_to_end(&mut head).map_err(|e| BloomError::io(path, e))?;
    Header::decode(&head, file_len, path)
}

fn not_sealed(path: &Path) -> BloomError {
    BloomError::file(
        path,
        "it is not sealed, so its checksum cannot be verified: a shared filter gets its \
         checksum from seal() once all writers are done (a crashed writer leaves it unsealed); \
         open it with verify=False to use it anyway",
    )
}

impl Bloom {
    /// A private, zeroed in-memory filter.
    pub fn new(params: Params, seed: u64) -> Result<Bloom> {
        let storage = Storage::Heap {
            words: zeroed(params.num_words() as usize)?,
            locks: zeroed(STRIPES)?,
            count: AtomicU64::new(0),
        };
        Ok(Bloom { params, seed, storage })
    }

    /// Creates a filter file and maps it shared: other processes `open_shared` the same path
    /// and all of them insert into the same bits. Fails if the file exists unless `overwrite`.
    pub fn create_shared(path: &Path, params: Params, seed: u64, overwrite: bool) -> Result<Bloom> {
        check_endianness(path)?;
        // Overwriting builds a new file and renames it over the old one, so that processes
        // still mapping the old file keep a valid (old) inode instead of faulting on a
        // truncated one. Without overwrite, create_new refuses an existing file atomically.
        let build_at = if overwrite { temp_sibling(path) } else { path.to_path_buf() };
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&build_at)
            .map_err(|e| BloomError::io(path, e))?;
        let header = Header::new(params, seed);
        let made = (|| {
            file.write_all(&header.encode())?;
            // The rest (locks and bits) is zero: a sparse extension, no bytes written.
            file.set_len(header.file_len())?;
            file.sync_all()?;
            if overwrite {
                std::fs::rename(&build_at, path)?;
            }
            Ok(())
        })();
        if let Err(e) = made {
            let _ = std::fs::remove_file(&build_at);
            return Err(BloomError::io(path, e));
        }
        Self::map(file, path, header, false)
    }

    /// Maps an existing filter file shared. With `verify`, a sealed file's checksum is checked
    /// first (an unsealed one, i.e. in use or never sealed, cannot be). A read-write handle
    /// unseals the file at its first insert.
    pub fn open_shared(path: &Path, readonly: bool, verify: bool) -> Result<Bloom> {
        check_endianness(path)?;
        let mut file =
            OpenOptions::new().read(true).write(!readonly).open(path).map_err(|e| BloomError::io(path, e))?;
        let header = read_header(&mut file, path)?;
        let bloom = Self::map(file, path, header, readonly)?;
        if verify && bloom.is_sealed() && bloom.compute_checksum() != header.checksum {
            return Err(BloomError::file(path, "checksum mismatch: the bit array is corrupted"));
        }
        Ok(bloom)
    }

    fn map(file: File, path: &Path, header: Header, readonly: bool) -> Result<Bloom> {
        // SAFETY (mmap): the file may be changed by other processes, which is the point; they
        // change it only through atomics at word granularity. Truncating it under a live
        // mapping would fault, as with any mmap, and is documented as unsupported.
        let map = unsafe {
            if readonly {
                MmapOptions::new().map(&file).map(Map::ReadOnly)
            } else {
                MmapOptions::new().map_mut(&file).map(Map::ReadWrite)
            }
        }
        .map_err(|e| BloomError::io(path, e))?;
        let mapped = Mapped {
            map,
            path: path.to_path_buf(),
            num_words: header.params.num_words() as usize,
            lock_stripes: header.lock_stripes as usize,
        };
        let len = match &mapped.map {
            Map::ReadWrite(m) => m.len(),
            Map::ReadOnly(m) => m.len(),
        };
        // The file could have shrunk between reading the header and mapping it.
        if (len as u64) < header.file_len() {
            return Err(BloomError::file(path, "truncated while being opened"));
        }
        Ok(Bloom { params: header.params, seed: header.seed, storage: Storage::Mapped(mapped) })
    }

    /// Reads a filter file into private memory. With `verify`, the file must be sealed and its
    /// checksum must match.
    pub fn load(path: &Path, verify: bool) -> Result<Bloom> {
        let mut file = File::open(path).map_err(|e| BloomError::io(path, e))?;
        let header = read_header(&mut file, path)?;
        if verify && !header.is_sealed() {
            return Err(not_sealed(path));
        }
        let words: Box<[AtomicU64]> = zeroed(header.params.num_words() as usize)?;
        file.seek(SeekFrom::Start(BITS_OFFSET)).map_err(|e| BloomError::io(path, e))?;
        {
            // SAFETY: we own `words` exclusively here; AtomicU64 is a u64 in an UnsafeCell,
            // so writing its bytes through a raw pointer is allowed.
            let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_ptr() as *mut u8, words.len() * 8) };
            file.read_exact(bytes).map_err(|e| match e.kind() {
                std::io::ErrorKind::UnexpectedEof => BloomError::file(path, "truncated while being read"),
                _ => BloomError::io(path, e),
            })?;
        }
        if cfg!(target_endian = "big") {
            for w in words.iter() {
                w.store(u64::from_le(w.load(Ordering::Relaxed)), Ordering::Relaxed);
            }
        }
        if verify && format::checksum(&words, header.count) != header.checksum {
            return Err(BloomError::file(path, "checksum mismatch: the bit array is corrupted"));
        }
        let storage = Storage::Heap { words, locks: zeroed(STRIPES)?, count: AtomicU64::new(header.count) };
        Ok(Bloom { params: header.params, seed: header.seed, storage })
    }

    /// Writes a sealed snapshot to `path`, atomically: a temporary file in the same directory
    /// renamed over `path` once complete, so readers never see half a filter.
    pub fn save(&self, path: &Path) -> Result<()> {
        let tmp = temp_sibling(path);
        let result = (|| -> std::io::Result<()> {
            let mut out = std::io::BufWriter::with_capacity(1 << 20, File::create(&tmp)?);
            let mut header = Header::new(self.params, self.seed);
            header.count = self.count();
            // Header placeholder and the (zero) lock page, then the bits, then the real header.
            out.write_all(&header.encode())?;
            out.write_all(&vec![0u8; (BITS_OFFSET - HEADER_BYTES) as usize])?;
            header.checksum = format::write_words(&mut out, self.view().words, header.count)?;
            header.flags = FLAG_SEALED;
            let mut file = out.into_inner().map_err(|e| e.into_error())?;
            file.seek(SeekFrom::Start(0))?;
            file.write_all(&header.encode())?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        result.map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            BloomError::io(path, e)
        })
    }

    pub fn params(&self) -> Params {
        self.params
    }
    pub fn seed(&self) -> u64 {
        self.seed
    }
    pub fn path(&self) -> Option<&Path> {
        match &self.storage {
            Storage::Heap { .. } => None,
            Storage::Mapped(m) => Some(m.path()),
        }
    }
    pub fn readonly(&self) -> bool {
        matches!(&self.storage, Storage::Mapped(m) if m.readonly())
    }

    fn view(&self) -> BitsView<'_> {
        let (words, locks): (&[AtomicU64], &[AtomicU32]) = match &self.storage {
            Storage::Heap { words, locks, .. } => (words, locks),
            Storage::Mapped(m) => (m.words(), m.locks()),
        };
        BitsView { words, locks, num_bits: self.params.num_bits, num_hashes: self.params.num_hashes, seed: self.seed }
    }

    fn count_word(&self) -> &AtomicU64 {
        match &self.storage {
            Storage::Heap { count, .. } => count,
            Storage::Mapped(m) => m.header_word(OFF_COUNT),
        }
    }

    /// Number of inserts that reported "new": the number of distinct keys inserted, minus
    /// those lost to false positives.
    pub fn count(&self) -> u64 {
        self.count_word().load(Ordering::Relaxed)
    }

    pub fn bits_set(&self) -> u64 {
        self.view().bits_set()
    }

    pub fn is_sealed(&self) -> bool {
        match &self.storage {
            Storage::Heap { .. } => false,
            Storage::Mapped(m) => m.header_word(OFF_FLAGS).load(Ordering::Acquire) & FLAG_SEALED != 0,
        }
    }

    /// Called before any write: refuses read-only handles and clears the sealed flag, since
    /// the checksum stops describing the bits as soon as one changes.
    fn prepare_write(&self) -> Result<()> {
        if let Storage::Mapped(m) = &self.storage {
            if m.readonly() {
                return Err(BloomError::ReadOnly);
            }
            let flags = m.header_word(OFF_FLAGS);
            if flags.load(Ordering::Relaxed) & FLAG_SEALED != 0 {
                flags.fetch_and(!FLAG_SEALED, Ordering::AcqRel);
            }
        }
        Ok(())
    }

    pub fn contains(&self, key: &[u8]) -> bool {
        self.view().contains(key)
    }

    /// Inserts one key; true if it was already present. See `BitsView::insert`.
    pub fn insert(&self, key: &[u8]) -> Result<bool> {
        self.prepare_write()?;
        let present = self.view().insert(key, lock::owner_token());
        if !present {
            self.count_word().fetch_add(1, Ordering::Relaxed);
        }
        Ok(present)
    }

    /// Inserts keys in order, appending "was present" flags to `out`. A key repeated within the
    /// batch is new at most once, at its first occurrence.
    pub fn insert_batch<K: AsRef<[u8]>>(&self, keys: &[K], out: &mut Vec<bool>) -> Result<()> {
        self.prepare_write()?;
        out.reserve(keys.len());
        let added = self.view().insert_many(keys, lock::owner_token(), out);
        // One shared-counter update per batch, not per key: it is a contended cache line.
        self.count_word().fetch_add(added, Ordering::Relaxed);
        Ok(())
    }

    pub fn contains_batch<K: AsRef<[u8]>>(&self, keys: &[K], out: &mut Vec<bool>) {
        out.reserve(keys.len());
        self.view().contains_many(keys, out);
    }

    fn compute_checksum(&self) -> u64 {
        format::checksum(self.view().words, self.count())
    }

    /// Shared filters: writes the checksum into the header and marks the file sealed, then
    /// flushes. Call it when no process is inserting any more (typically the coordinator after
    /// its workers finished); a later insert through any handle unseals the file again.
    /// A private filter has no file: nothing to do (`save` always writes a sealed file).
    pub fn seal(&self) -> Result<()> {
        let Storage::Mapped(m) = &self.storage else { return Ok(()) };
        if self.is_sealed() {
            return Ok(());
        }
        if m.readonly() {
            return Err(BloomError::ReadOnly);
        }
        let sum = self.compute_checksum();
        m.header_word(OFF_CHECKSUM).store(sum, Ordering::Relaxed);
        // Release: a reader that sees the flag sees the checksum stored before it.
        m.header_word(OFF_FLAGS).fetch_or(FLAG_SEALED, Ordering::Release);
        self.flush()
    }

    /// Shared filters: asks the kernel to write the mapped pages to disk (msync). Other
    /// processes see inserts immediately without it; this is about surviving a machine crash.
    pub fn flush(&self) -> Result<()> {
        match &self.storage {
            Storage::Mapped(Mapped { map: Map::ReadWrite(mm), path, .. }) => {
                mm.flush().map_err(|e| BloomError::io(path, e))
            }
            _ => Ok(()),
        }
    }
}

/// A hidden temporary name next to `path` (same directory, so a rename is atomic).
fn temp_sibling(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}

fn check_endianness(path: &Path) -> Result<()> {
    if cfg!(target_endian = "big") {
        return Err(BloomError::file(path, "shared filters need a little-endian machine; use load()"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmpdir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("rust_bloom_test_{name}_{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn keys(range: std::ops::Range<u64>) -> Vec<Vec<u8>> {
        range.map(|i| format!("key-{i}").into_bytes()).collect()
    }

    #[test]
    fn false_positive_rate_is_as_configured() {
        let n = 200_000u64;
        let bloom = Bloom::new(Params::optimal(n, 0.01).unwrap(), DEFAULT_SEED).unwrap();
        let mut out = Vec::new();
        bloom.insert_batch(&keys(0..n), &mut out).unwrap();
        let mut hits = Vec::new();
        bloom.contains_batch(&keys(n..2 * n), &mut hits);
        let rate = hits.iter().filter(|&&h| h).count() as f64 / n as f64;
        assert!((0.0075..0.0125).contains(&rate), "measured {rate}");
        // Every inserted key is found: no false negatives.
        let mut found = Vec::new();
        bloom.contains_batch(&keys(0..n), &mut found);
        assert!(found.iter().all(|&f| f));
    }

    #[test]
    fn batch_reports_duplicates_within_the_batch() {
        let bloom = Bloom::new(Params::optimal(100, 0.001).unwrap(), 1).unwrap();
        let mut out = Vec::new();
        bloom.insert_batch(&[b"a", b"b", b"a", b"c", b"b"], &mut out).unwrap();
        assert_eq!(out, [false, false, true, false, true]);
        assert_eq!(bloom.count(), 3);
    }

    #[test]
    fn save_load_round_trip_and_corruption() {
        let dir = tmpdir("save");
        let path = dir.join("f.bloom");
        let bloom = Bloom::new(Params::optimal(1000, 0.01).unwrap(), 77).unwrap();
        let mut out = Vec::new();
        bloom.insert_batch(&keys(0..1000), &mut out).unwrap();
        bloom.save(&path).unwrap();
        let loaded = Bloom::load(&path, true).unwrap();
        assert_eq!(loaded.params(), bloom.params());
        assert_eq!(loaded.seed(), 77);
        assert_eq!(loaded.count(), bloom.count());
        let mut found = Vec::new();
        loaded.contains_batch(&keys(0..1000), &mut found);
        assert!(found.iter().all(|&f| f));

        let mut bytes = std::fs::read(&path).unwrap();
        bytes[BITS_OFFSET as usize + 5] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let e = Bloom::load(&path, true).err().unwrap().to_string();
        assert!(e.contains("checksum mismatch") && e.contains("f.bloom"), "{e}");
        assert!(Bloom::load(&path, false).is_ok());
        assert!(Bloom::open_shared(&path, true, true).is_err());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn shared_filter_lifecycle() {
        let dir = tmpdir("shared");
        let path = dir.join("s.bloom");
        let a = Bloom::create_shared(&path, Params::optimal(1000, 0.01).unwrap(), 3, false).unwrap();
        assert!(Bloom::create_shared(&path, a.params(), 3, false).is_err(), "exists");
        let b = Bloom::open_shared(&path, false, true).unwrap();
        assert!(!a.insert(b"x").unwrap());
        assert!(b.insert(b"x").unwrap(), "b sees a's insert through the mapping");
        assert_eq!(b.count(), 1);
        // Unsealed: load(verify) refuses, open_shared(verify) accepts.
        assert!(Bloom::load(&path, true).err().unwrap().to_string().contains("not sealed"));
        a.seal().unwrap();
        assert!(b.is_sealed());
        let loaded = Bloom::load(&path, true).unwrap();
        assert!(loaded.contains(b"x"));
        // Readers cannot write; writers unseal.
        let r = Bloom::open_shared(&path, true, true).unwrap();
        assert!(matches!(r.insert(b"y"), Err(BloomError::ReadOnly)));
        b.insert(b"y").unwrap();
        assert!(!a.is_sealed());
        assert!(r.contains(b"y"));
        // Overwriting replaces the file; handles on the old one keep working on the old bits.
        let fresh = Bloom::create_shared(&path, Params::explicit(640, 3).unwrap(), 3, true).unwrap();
        assert!(!fresh.contains(b"x") && a.contains(b"x") && r.contains(b"y"));
        assert!(b.insert(b"w").is_ok());
        assert_eq!(Bloom::open_shared(&path, true, true).unwrap().params().num_bits, 640);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file left");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
