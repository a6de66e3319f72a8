//! Striped spin locks that make `insert` one atomic test-and-set per key, between threads and
//! between processes (the lock words live next to the bits, in the shared mapping).
//!
//! Why locks at all: a key's k bits sit in up to k different 64-bit words, and no sequence of
//! plain `fetch_or`s can decide "new" for exactly one of two concurrent inserters. Take k = 2,
//! bits a and b both clear, threads T1 and T2 both setting a then b: T1 flips a, T2 sees a
//! set, T2 flips b, T1 sees b set. T1 observed (0, 1) and T2 observed (1, 0), exactly what a
//! lone inserter sees when the other bit was set earlier by a different key, and a lone
//! inserter must answer "new". So both answer "new". Any "claim bit" rule fails the same way
//! because the claim bit may already be set by another key. Serialising inserts *of the same
//! key* is enough: every inserter of a key takes the lock of the key's stripe, so the first
//! one to hold it sees a clear bit (if the key was absent) and sets all k, and every later
//! holder sees all k set.
//!
//! The critical section is k `fetch_or`s (tens of nanoseconds), so a spin lock is right. A
//! lock word holds the owner's process id; a waiter that has spun for `STALE_AFTER` asks the
//! kernel whether that process still exists and takes the lock over if it died (killed
//! mid-insert), so a crash never wedges the file.
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Stripes per filter. 1024 keeps unrelated keys from contending (a handful of workers
/// collide on a stripe with probability ~workers/1024 per insert) in 4 KiB of file.
pub const STRIPES: usize = 1024;

/// How long a waiter spins before checking whether the holder is still alive.
const STALE_AFTER: Duration = Duration::from_millis(500);

/// The value a process writes into a lock it holds: its pid (never 0, which means "free").
/// Computed once per batch by the caller: `getpid` is a system call.
pub fn owner_token() -> u32 {
    std::process::id().max(1)
}

/// Holds one stripe lock; releases it when dropped.
pub struct StripeGuard<'a> {
    lock: &'a AtomicU32,
}

impl Drop for StripeGuard<'_> {
    fn drop(&mut self) {
        // Release: every fetch_or of the critical section happens-before the next holder's
        // Acquire, so the next inserter of the same key sees all of our bits.
        self.lock.store(0, Ordering::Release);
    }
}

#[inline]
pub fn acquire(lock: &AtomicU32, me: u32) -> StripeGuard<'_> {
    if lock.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed).is_ok() {
        return StripeGuard { lock };
    }
    acquire_slow(lock, me)
}

#[cold]
fn acquire_slow(lock: &AtomicU32, me: u32) -> StripeGuard<'_> {
    let start = Instant::now();
    let mut spins: u32 = 0;
    loop {
        let holder = lock.load(Ordering::Relaxed);
        if holder == 0 {
            if lock.compare_exchange_weak(0, me, Ordering::Acquire, Ordering::Relaxed).is_ok() {
                return StripeGuard { lock };
            }
            continue;
        }
        spins = spins.wrapping_add(1);
        if spins < 64 {
            std::hint::spin_loop();
            continue;
        }
        // The holder is descheduled (more workers than cores): let it run.
        std::thread::yield_now();
        if spins.is_multiple_of(256)
            && start.elapsed() > STALE_AFTER
            && holder != me
            && !process_alive(holder)
            && lock.compare_exchange(holder, me, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            // Taking over from a dead process is safe: its half-done insert only set bits, and
            // it never reported the key to anyone.
            return StripeGuard { lock };
        }
    }
}

#[cfg(unix)]
fn process_alive(pid: u32) -> bool {
    // kill(pid, 0) sends nothing; it only checks existence. EPERM means "exists, not ours".
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(not(unix))]
fn process_alive(_pid: u32) -> bool {
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_releases() {
        let lock = AtomicU32::new(0);
        {
            let _g = acquire(&lock, 7);
            assert_eq!(lock.load(Ordering::Relaxed), 7);
        }
        assert_eq!(lock.load(Ordering::Relaxed), 0);
    }

    #[cfg(unix)]
    #[test]
    fn lock_of_a_dead_process_is_taken_over() {
        // Find a pid that does not exist: fork a child that exits at once and reap it.
        let dead = unsafe {
            let pid = libc::fork();
            if pid == 0 {
                libc::_exit(0);
            }
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            pid as u32
        };
        assert!(!process_alive(dead));
        let lock = AtomicU32::new(dead);
        let t = Instant::now();
        let _g = acquire(&lock, owner_token());
        assert!(t.elapsed() >= STALE_AFTER);
        assert_eq!(lock.load(Ordering::Relaxed), owner_token());
    }
}
