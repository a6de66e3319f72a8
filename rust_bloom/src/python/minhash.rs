//! MinHash's Python face (`crate::minhash`): signatures and shingles of texts (batches without
//! the GIL), the bands x rows choice, the S-curve and Jaccard. `dolma_pipe.minhash` types it.
use crate::minhash::lsh::band_hashes as lsh_band_hashes;
use crate::minhash::shingle::Scratch;
use crate::minhash::{candidate_probability as lsh_probability, jaccard_sorted, optimal_bands as lsh_optimal};
use crate::minhash::{MinhashError, Permutations, Shingler, Words};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyString;

pub(crate) fn words_mode(words: &str) -> PyResult<Words> {
    match words {
        "word" => Ok(Words::WordChars),
        "whitespace" => Ok(Words::Whitespace),
        other => Err(PyValueError::new_err(format!("words must be 'word' or 'whitespace', got {other:?}"))),
    }
}

/// A refused MinHash setting, as a `ValueError`.
pub(crate) fn minhash_error(e: MinhashError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

pub(crate) fn shingler(ngram: usize, lowercase: bool, words: &str, seed: u64) -> PyResult<Shingler> {
    Shingler::new(ngram, lowercase, words_mode(words)?, seed).map_err(minhash_error)
}

/// A MinHash signer: shingling settings plus `num_perm` seeded hash functions.
#[pyclass(module = "dolma_pipe._rust", name = "MinHasher", frozen)]
struct PyMinHasher {
    shingler: Shingler,
    perms: Permutations,
    words: String,
}

#[pymethods]
impl PyMinHasher {
    #[new]
    #[pyo3(signature = (num_perm=128, *, ngram=5, lowercase=true, words="word", seed=1))]
    fn new(num_perm: usize, ngram: usize, lowercase: bool, words: &str, seed: u64) -> PyResult<Self> {
        let shingler = shingler(ngram, lowercase, words, seed)?;
        let perms = Permutations::new(num_perm, seed).map_err(minhash_error)?;
        Ok(PyMinHasher { shingler, perms, words: words.to_string() })
    }

    #[getter]
    fn num_perm(&self) -> usize {
        self.perms.len()
    }
    #[getter]
    fn ngram(&self) -> usize {
        self.shingler.ngram
    }
    #[getter]
    fn lowercase(&self) -> bool {
        self.shingler.lowercase
    }
    #[getter]
    fn words(&self) -> &str {
        &self.words
    }
    #[getter]
    fn seed(&self) -> u64 {
        self.perms.seed()
    }

    /// The normalised words of a text.
    fn words_of(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        self.shingler.for_each_word(text, &mut String::new(), |w| out.push(w.to_string()));
        out
    }

    /// The shingle hashes of a text, in order (repeats included).
    fn shingles(&self, py: Python<'_>, text: &str) -> Vec<u64> {
        py.detach(|| {
            let mut out = Vec::new();
            self.shingler.shingles(text, &mut Scratch::default(), &mut out);
            out
        })
    }

    /// The sorted distinct 32-bit shingle values exact verification compares.
    fn shingle_set(&self, py: Python<'_>, text: &str) -> Vec<u32> {
        py.detach(|| {
            let mut out = Vec::new();
            self.shingler.shingle_set32(text, &mut Scratch::default(), &mut out);
            out
        })
    }

    /// The Jaccard similarity of two texts' shingle sets.
    fn jaccard(&self, py: Python<'_>, a: &str, b: &str) -> f64 {
        py.detach(|| {
            let mut scratch = Scratch::default();
            let (mut sa, mut sb) = (Vec::new(), Vec::new());
            self.shingler.shingle_set32(a, &mut scratch, &mut sa);
            self.shingler.shingle_set32(b, &mut scratch, &mut sb);
            jaccard_sorted(&sa, &sb)
        })
    }

    /// The signature of one text (all 2**32 - 1 for a text without words).
    fn signature(&self, py: Python<'_>, text: &str) -> Vec<u32> {
        py.detach(|| {
            let mut shingles = Vec::new();
            self.shingler.shingles(text, &mut Scratch::default(), &mut shingles);
            self.perms.signature(&shingles)
        })
    }

    /// The signatures of many texts, computed without the GIL.
    fn signatures(&self, py: Python<'_>, texts: Vec<Bound<'_, PyString>>) -> PyResult<Vec<Vec<u32>>> {
        let texts: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
        Ok(py.detach(|| {
            let mut scratch = Scratch::default();
            let mut shingles = Vec::new();
            texts
                .iter()
                .map(|t| {
                    self.shingler.shingles(t, &mut scratch, &mut shingles);
                    self.perms.signature(&shingles)
                })
                .collect()
        }))
    }

    fn __repr__(&self) -> String {
        format!(
            "MinHasher(num_perm={}, ngram={}, lowercase={}, words={:?}, seed={})",
            self.perms.len(),
            self.shingler.ngram,
            if self.shingler.lowercase { "True" } else { "False" },
            self.words,
            self.perms.seed()
        )
    }
}

/// Bands x rows (bands * rows <= num_perm) minimising the weighted areas of false positives
/// below the threshold and false negatives above it.
#[pyfunction]
#[pyo3(signature = (threshold, num_perm, fp_weight=0.5, fn_weight=0.5))]
fn optimal_bands(
    py: Python<'_>,
    threshold: f64,
    num_perm: usize,
    fp_weight: f64,
    fn_weight: f64,
) -> PyResult<(usize, usize)> {
    py.detach(|| lsh_optimal(threshold, num_perm, fp_weight, fn_weight)).map_err(minhash_error)
}

/// The probability that two sets of Jaccard `j` share a band.
#[pyfunction]
fn candidate_probability(j: f64, bands: usize, rows: usize) -> f64 {
    lsh_probability(j, bands, rows)
}

/// The band hashes of a signature.
#[pyfunction]
fn band_hashes(signature: Vec<u32>, bands: usize, rows: usize, seed: u64) -> PyResult<Vec<u64>> {
    if bands * rows > signature.len() || bands == 0 || rows == 0 {
        return Err(PyValueError::new_err(format!(
            "{bands} bands x {rows} rows do not fit a signature of {} values",
            signature.len()
        )));
    }
    let mut out = Vec::new();
    lsh_band_hashes(&signature, bands, rows, seed, &mut out);
    Ok(out)
}

/// |A ∩ B| / |A ∪ B| of two sorted distinct integer lists (as `MinHasher.shingle_set` gives).
#[pyfunction]
fn jaccard(a: Vec<u32>, b: Vec<u32>) -> PyResult<f64> {
    if a.windows(2).any(|w| w[0] >= w[1]) || b.windows(2).any(|w| w[0] >= w[1]) {
        return Err(PyValueError::new_err("jaccard takes sorted lists without repeats"));
    }
    Ok(jaccard_sorted(&a, &b))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyMinHasher>()?;
    m.add_function(wrap_pyfunction!(optimal_bands, m)?)?;
    m.add_function(wrap_pyfunction!(candidate_probability, m)?)?;
    m.add_function(wrap_pyfunction!(band_hashes, m)?)?;
    m.add_function(wrap_pyfunction!(jaccard, m)?)?;
    Ok(())
}
