//! Where the words live: a zeroed heap allocation (private filters) or a shared read-write or
//! read-only memory map of a filter file (`format.rs` layout). Both are handed out as slices of
//! atomics, so `core.rs` never knows the difference.
use super::error::{BloomError, Result};
use super::format::{BITS_OFFSET, LOCKS_OFFSET, OFF_COUNT, OFF_FLAGS};
use memmap2::{Mmap, MmapMut};
use std::alloc::{alloc_zeroed, Layout};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64};

pub enum Storage {
    Heap { words: Box<[AtomicU64]>, locks: Box<[AtomicU32]>, count: AtomicU64 },
    Mapped(Mapped),
}

pub enum Map {
    ReadWrite(MmapMut),
    ReadOnly(Mmap),
}

pub struct Mapped {
    pub map: Map,
    pub path: PathBuf,
    pub num_words: usize,
    pub lock_stripes: usize,
}

/// A zeroed array of `n` atomics, allocated fallibly: a filter too large for memory is a
/// `MemoryError`, not an abort. `alloc_zeroed` gets lazily zeroed pages from the OS, so a
/// large, mostly empty filter costs no time to create.
pub fn zeroed<T>(n: usize) -> Result<Box<[T]>> {
    let n = n.max(1);
    let layout = Layout::array::<T>(n).map_err(|_| BloomError::Memory(format!("cannot allocate {n} words")))?;
    // SAFETY: the layout is non-zero-sized; all-zero bytes are a valid AtomicU64/AtomicU32;
    // Box<[T]> frees with the same Layout::array::<T>(n).
    unsafe {
        let ptr = alloc_zeroed(layout) as *mut T;
        if ptr.is_null() {
            return Err(BloomError::Memory(format!("cannot allocate {} bytes for the Bloom filter", layout.size())));
        }
        Ok(Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr, n)))
    }
}

impl Mapped {
    fn base(&self) -> *const u8 {
        match &self.map {
            Map::ReadWrite(m) => m.as_ptr(),
            Map::ReadOnly(m) => m.as_ptr(),
        }
    }

    pub fn readonly(&self) -> bool {
        matches!(self.map, Map::ReadOnly(_))
    }

    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: the map is page-aligned and its length was checked against the header
        // (BITS_OFFSET + 8 * num_words) before this struct was built; AtomicU64 has the layout
        // of u64 and the map lives as long as `self`. Other processes touch these bytes only
        // through atomics too.
        unsafe { std::slice::from_raw_parts(self.base().add(BITS_OFFSET as usize) as *const AtomicU64, self.num_words) }
    }

    pub fn locks(&self) -> &[AtomicU32] {
        // SAFETY: as for `words`; the lock region is 4096 bytes at LOCKS_OFFSET and
        // lock_stripes * 4 <= 4096 was checked by Header::decode.
        unsafe {
            std::slice::from_raw_parts(self.base().add(LOCKS_OFFSET as usize) as *const AtomicU32, self.lock_stripes)
        }
    }

    pub fn header_word(&self, offset: usize) -> &AtomicU64 {
        debug_assert!(offset == OFF_FLAGS || offset == OFF_COUNT || offset == super::format::OFF_CHECKSUM);
        // SAFETY: 8-aligned offset inside the header page of a mapping at least 8192 bytes long.
        unsafe { &*(self.base().add(offset) as *const AtomicU64) }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}
