//! Locality-sensitive hashing over signatures: band hashes, the choice of bands x rows for a
//! Jaccard threshold, and the two similarity measures used to verify candidate pairs.
use super::MinhashError;
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// The hash of each band of `rows` consecutive signature values (bands x rows <= sig.len()),
/// appended to `out`. Band `i` is hashed with its own seed, so equal hashes mean the same band.
pub fn band_hashes(sig: &[u32], bands: usize, rows: usize, seed: u64, out: &mut Vec<u64>) {
    assert!(bands * rows <= sig.len(), "bands x rows exceeds the signature length");
    out.clear();
    let mut bytes = Vec::with_capacity(rows * 4);
    for band in 0..bands {
        bytes.clear();
        for v in &sig[band * rows..(band + 1) * rows] {
            bytes.extend_from_slice(&v.to_le_bytes());
        }
        out.push(band_hash(&bytes, band as u32, seed));
    }
}

/// The hash of one band's bytes (its rows as little-endian u32).
#[inline]
pub fn band_hash(bytes: &[u8], band: u32, seed: u64) -> u64 {
    xxh3_64_with_seed(bytes, seed ^ (u64::from(band).wrapping_add(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

/// The probability that two sets of Jaccard similarity `j` share at least one band.
pub fn candidate_probability(j: f64, bands: usize, rows: usize) -> f64 {
    1.0 - (1.0 - j.powi(rows as i32)).powi(bands as i32)
}

fn integrate(f: impl Fn(f64) -> f64, a: f64, b: f64) -> f64 {
    // Composite Simpson's rule; the integrands are smooth polynomials.
    const N: usize = 256;
    if b <= a {
        return 0.0;
    }
    let h = (b - a) / N as f64;
    let mut sum = f(a) + f(b);
    for i in 1..N {
        let x = a + i as f64 * h;
        sum += if i % 2 == 1 { 4.0 } else { 2.0 } * f(x);
    }
    sum * h / 3.0
}

/// Bands x rows (with bands x rows <= num_perm) minimising
/// `fp_weight * P(candidate | J < t) + fn_weight * P(not candidate | J >= t)`, each term the
/// area under the S-curve on its side of the threshold (the rule datasketch uses).
pub fn optimal_bands(
    threshold: f64,
    num_perm: usize,
    fp_weight: f64,
    fn_weight: f64,
) -> Result<(usize, usize), MinhashError> {
    if !(threshold > 0.0 && threshold < 1.0) {
        return Err(MinhashError::Threshold(threshold));
    }
    if num_perm == 0 {
        return Err(MinhashError::NoPermutations);
    }
    if !(fp_weight >= 0.0 && fn_weight >= 0.0 && fp_weight + fn_weight > 0.0) {
        return Err(MinhashError::Weights);
    }
    let mut best = (f64::INFINITY, 1usize, 1usize);
    for bands in 1..=num_perm {
        for rows in 1..=num_perm / bands {
            let fp = integrate(|s| candidate_probability(s, bands, rows), 0.0, threshold);
            let fn_ = integrate(|s| 1.0 - candidate_probability(s, bands, rows), threshold, 1.0);
            let err = fp_weight * fp + fn_weight * fn_;
            if err < best.0 - 1e-15 {
                best = (err, bands, rows);
            }
        }
    }
    Ok((best.1, best.2))
}

/// |A ∩ B| / |A ∪ B| of two sorted, duplicate-free sets (1.0 for two empty sets).
pub fn jaccard_sorted(a: &[u32], b: &[u32]) -> f64 {
    if a.is_empty() && b.is_empty() {
        return 1.0;
    }
    let (mut i, mut j, mut common) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                common += 1;
                i += 1;
                j += 1;
            }
        }
    }
    common as f64 / (a.len() + b.len() - common) as f64
}

/// The fraction of equal positions of two signatures: an estimate of their sets' Jaccard.
pub fn signature_similarity(a: &[u32], b: &[u32]) -> f64 {
    let n = a.len().min(b.len());
    if n == 0 {
        return 0.0;
    }
    a.iter().zip(b).filter(|(x, y)| x == y).count() as f64 / n as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn s_curve() {
        assert!((candidate_probability(1.0, 10, 5) - 1.0).abs() < 1e-12);
        assert_eq!(candidate_probability(0.0, 10, 5), 0.0);
        let p = candidate_probability(0.8, 20, 5);
        assert!((p - (1.0 - (1.0 - 0.8f64.powi(5)).powi(20))).abs() < 1e-12);
    }

    #[test]
    fn optimal_bands_moves_with_the_threshold_and_weights() {
        let (b, r) = optimal_bands(0.8, 128, 0.5, 0.5).unwrap();
        assert!(b * r <= 128);
        let (b2, r2) = optimal_bands(0.5, 128, 0.5, 0.5).unwrap();
        assert!(r2 < r || b2 > b, "a lower threshold needs fewer rows or more bands");
        // Favouring recall puts more probability above the threshold.
        let (b3, r3) = optimal_bands(0.8, 128, 0.1, 0.9).unwrap();
        assert!(candidate_probability(0.8, b3, r3) >= candidate_probability(0.8, b, r));
        assert!(optimal_bands(1.0, 128, 0.5, 0.5).is_err());
        assert!(optimal_bands(0.5, 0, 0.5, 0.5).is_err());
    }

    #[test]
    fn jaccard_of_sorted_sets() {
        assert_eq!(jaccard_sorted(&[1, 2, 3], &[2, 3, 4]), 0.5);
        assert_eq!(jaccard_sorted(&[], &[]), 1.0);
        assert_eq!(jaccard_sorted(&[1], &[]), 0.0);
        assert_eq!(signature_similarity(&[1, 2, 3, 4], &[1, 0, 3, 0]), 0.5);
    }

    #[test]
    fn bands_hash_their_own_rows() {
        let sig = [1u32, 2, 3, 4, 1, 2, 3, 4];
        let mut out = Vec::new();
        band_hashes(&sig, 2, 4, 9, &mut out);
        assert_eq!(out.len(), 2);
        assert_ne!(out[0], out[1], "equal rows in different bands hash differently");
        let mut again = Vec::new();
        band_hashes(&[1, 2, 3, 4, 9, 9, 9, 9], 2, 4, 9, &mut again);
        assert_eq!(out[0], again[0]);
        assert_ne!(out[1], again[1]);
    }
}
