//! MinHash signatures: for each of K hash functions h_i, the minimum of h_i over a set of
//! shingle hashes. h_i(x) = high 32 bits of (a_i * x + b_i) mod 2^64, with a_i odd and b_i
//! drawn from splitmix64(seed): Dietzfelbinger's multiply-add-shift family, cheap enough to
//! evaluate K times per shingle. The loop is compiled three times (AVX-512, AVX2, baseline)
//! and chosen at run time; all three compute the same integers, so signatures do not depend
//! on the CPU.
use super::{splitmix64, MinhashError};

/// The K hash functions of a signature (K = bands x rows).
#[derive(Debug, Clone)]
pub struct Permutations {
    a: Vec<u64>,
    b: Vec<u64>,
    seed: u64,
}

type UpdateFn = fn(&mut [u32], &[u64], &[u64], &[u64]);

#[inline(always)]
fn update_generic(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    let k = sig.len();
    let (a, b) = (&a[..k], &b[..k]);
    for &x in shingles {
        for ((s, &ai), &bi) in sig.iter_mut().zip(a).zip(b) {
            let v = (ai.wrapping_mul(x).wrapping_add(bi) >> 32) as u32;
            *s = (*s).min(v);
        }
    }
}

fn update_baseline(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    update_generic(sig, a, b, shingles)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn update_avx2_inner(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    update_generic(sig, a, b, shingles)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512dq,avx512vl")]
fn update_avx512_inner(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    update_generic(sig, a, b, shingles)
}

#[cfg(target_arch = "x86_64")]
fn update_avx2(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    // SAFETY: only chosen by `pick` after the CPU reported AVX2.
    unsafe { update_avx2_inner(sig, a, b, shingles) }
}

#[cfg(target_arch = "x86_64")]
fn update_avx512(sig: &mut [u32], a: &[u64], b: &[u64], shingles: &[u64]) {
    // SAFETY: only chosen by `pick` after the CPU reported AVX-512 F, DQ and VL.
    unsafe { update_avx512_inner(sig, a, b, shingles) }
}

fn pick() -> UpdateFn {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            return update_avx512;
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            return update_avx2;
        }
    }
    update_baseline
}

impl Permutations {
    pub fn new(num_perm: usize, seed: u64) -> Result<Permutations, MinhashError> {
        if num_perm == 0 || num_perm > 4096 {
            return Err(MinhashError::PermutationCount(num_perm));
        }
        let mut state = seed;
        let mut a = Vec::with_capacity(num_perm);
        let mut b = Vec::with_capacity(num_perm);
        for _ in 0..num_perm {
            a.push(splitmix64(&mut state) | 1);
            b.push(splitmix64(&mut state));
        }
        Ok(Permutations { a, b, seed })
    }

    pub fn len(&self) -> usize {
        self.a.len()
    }

    pub fn is_empty(&self) -> bool {
        self.a.is_empty()
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The signature of a set of shingle hashes (repeats do not matter) into `out`, which must
    /// hold `len()` values. An empty set gives all `u32::MAX`.
    pub fn signature_into(&self, shingles: &[u64], out: &mut [u32]) {
        assert_eq!(out.len(), self.a.len(), "signature buffer of the wrong length");
        out.fill(u32::MAX);
        self.update(shingles, out);
    }

    /// Folds more shingles into an existing signature.
    pub fn update(&self, shingles: &[u64], sig: &mut [u32]) {
        // `pick` reads cached CPU flags: a few nanoseconds per call.
        pick()(sig, &self.a, &self.b, shingles)
    }

    pub fn signature(&self, shingles: &[u64]) -> Vec<u32> {
        let mut out = vec![0u32; self.a.len()];
        self.signature_into(shingles, &mut out);
        out
    }

    /// The baseline (non-vectorised) computation, to check the fast paths against.
    pub fn signature_baseline(&self, shingles: &[u64]) -> Vec<u32> {
        let mut out = vec![u32::MAX; self.a.len()];
        update_baseline(&mut out, &self.a, &self.b, shingles);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhash::signature_similarity;

    fn random_set(state: &mut u64, n: usize) -> Vec<u64> {
        (0..n).map(|_| splitmix64(state)).collect()
    }

    #[test]
    fn same_on_every_code_path_and_seeded() {
        let p = Permutations::new(128, 42).unwrap();
        let set = random_set(&mut 1, 1000);
        assert_eq!(p.signature(&set), p.signature_baseline(&set));
        assert_eq!(p.signature(&set), Permutations::new(128, 42).unwrap().signature(&set));
        assert_ne!(p.signature(&set), Permutations::new(128, 43).unwrap().signature(&set));
        assert!(p.signature(&[]).iter().all(|&v| v == u32::MAX));
        assert!(Permutations::new(0, 1).is_err());
    }

    #[test]
    fn order_and_repeats_do_not_matter() {
        let p = Permutations::new(64, 7).unwrap();
        let mut set = random_set(&mut 2, 300);
        let sig = p.signature(&set);
        set.reverse();
        set.extend_from_slice(&set.clone()[..50]);
        assert_eq!(p.signature(&set), sig);
    }

    #[test]
    fn similarity_estimates_jaccard() {
        // Sets sharing `common` of their elements: J = common / (2n - common).
        let p = Permutations::new(256, 3).unwrap();
        let mut state = 5u64;
        for &(n, common) in &[(400usize, 400usize), (400, 300), (400, 200), (400, 50)] {
            let shared = random_set(&mut state, common);
            let mut a = shared.clone();
            a.extend(random_set(&mut state, n - common));
            let mut b = shared;
            b.extend(random_set(&mut state, n - common));
            let j = common as f64 / (2 * n - common) as f64;
            let est = signature_similarity(&p.signature(&a), &p.signature(&b));
            assert!((est - j).abs() < 0.09, "J={j} estimated {est}");
        }
    }
}
