//! The per-key operations over a bit array of atomic 64-bit words: membership test and the
//! atomic test-and-set `insert`. Storage-agnostic: the words may live on the heap or in a
//! shared memory map.
use crate::hashing::{hash_key, positions, stripe};
use crate::lock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// A borrowed view of a filter's state: everything an insert or a lookup touches.
#[derive(Clone, Copy)]
pub struct BitsView<'a> {
    pub words: &'a [AtomicU64],
    pub locks: &'a [AtomicU32],
    pub num_bits: u64,
    pub num_hashes: u32,
    pub seed: u64,
}

#[inline]
fn is_set(words: &[AtomicU64], pos: u64) -> bool {
    words[(pos >> 6) as usize].load(Ordering::Relaxed) & (1u64 << (pos & 63)) != 0
}

impl BitsView<'_> {
    /// True if all k bits of the key are set (present, or a false positive).
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        let mut buf = [0u64; 32];
        let pos = positions(hash_key(key, self.seed), self.num_hashes, self.num_bits, &mut buf);
        pos.iter().all(|&p| is_set(self.words, p))
    }

    /// Sets the key's k bits; returns true if they were all set already ("was present").
    ///
    /// Among any number of concurrent inserters of one key (threads or processes sharing the
    /// words), at most one gets `false`, and exactly one if the key was absent before:
    /// - fast path, no lock: if all k bits are already set, answer "present". Bits are never
    ///   cleared, so the key was present (or is a false positive) before this call returned;
    ///   this path never answers "new", so it cannot create a second winner.
    /// - slow path: under the key's stripe lock, `fetch_or` each bit; "new" iff one of them
    ///   was clear. Inserters of the same key hold the same lock one after another; the first
    ///   to find a clear bit sets all k, so every later holder finds all k set (the lock's
    ///   Release/Acquire orders them, and read-modify-writes read the latest value anyway).
    ///
    /// `token` is `lock::owner_token()`, computed once per batch.
    #[inline]
    pub fn insert(&self, key: &[u8], token: u32) -> bool {
        let kh = hash_key(key, self.seed);
        let mut buf = [0u64; 32];
        let pos = positions(kh, self.num_hashes, self.num_bits, &mut buf);
        // Reading first also keeps duplicates (the common case in dedup) from dirtying
        // cache lines that other cores and processes are reading.
        if pos.iter().all(|&p| is_set(self.words, p)) {
            return true;
        }
        let _guard = lock::acquire(&self.locks[stripe(kh, self.locks.len())], token);
        let mut was_present = true;
        for &p in pos {
            let mask = 1u64 << (p & 63);
            // Relaxed: the stripe lock orders inserts of this key; other keys only need the
            // atomicity of the read-modify-write.
            if self.words[(p >> 6) as usize].fetch_or(mask, Ordering::Relaxed) & mask == 0 {
                was_present = false;
            }
        }
        was_present
    }

    /// Number of bits set (for fill-ratio based estimates).
    pub fn bits_set(&self) -> u64 {
        self.words.iter().map(|w| w.load(Ordering::Relaxed).count_ones() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Params;

    fn zeroed<T: Default>(n: usize) -> Vec<T> {
        (0..n).map(|_| T::default()).collect()
    }

    #[test]
    fn insert_then_contains() {
        let p = Params::optimal(1000, 0.01).unwrap();
        let words: Vec<AtomicU64> = zeroed(p.num_words() as usize);
        let locks: Vec<AtomicU32> = zeroed(lock::STRIPES);
        let v = BitsView { words: &words, locks: &locks, num_bits: p.num_bits, num_hashes: p.num_hashes, seed: 9 };
        let me = lock::owner_token();
        assert!(!v.contains(b"a"));
        assert!(!v.insert(b"a", me));
        assert!(v.insert(b"a", me));
        assert!(v.contains(b"a"));
        assert!(v.bits_set() >= 1 && v.bits_set() <= p.num_hashes as u64);
    }

    #[test]
    fn concurrent_inserts_of_the_same_keys_have_one_winner_each() {
        // Four threads insert the same keys in the same order, so they race key by key.
        let n = 50_000u64;
        let p = Params::optimal(n, 1e-9).unwrap();
        let words: Vec<AtomicU64> = zeroed(p.num_words() as usize);
        let locks: Vec<AtomicU32> = zeroed(lock::STRIPES);
        let v = BitsView { words: &words, locks: &locks, num_bits: p.num_bits, num_hashes: p.num_hashes, seed: 1 };
        let barrier = std::sync::Barrier::new(4);
        let wins: Vec<Vec<bool>> = std::thread::scope(|s| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let me = lock::owner_token();
                        barrier.wait();
                        (0..n).map(|i| !v.insert(&i.to_le_bytes(), me)).collect::<Vec<bool>>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for i in 0..n as usize {
            let winners = wins.iter().filter(|w| w[i]).count();
            assert_eq!(winners, 1, "key {i} was new for {winners} threads");
        }
    }
}
