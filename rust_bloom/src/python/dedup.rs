//! The dedup kernels' Python face (`crate::dedup`), used by `dolma_pipe.stages.dedup`: a scan
//! plan and the per-file scanner, the decontamination set, and the per-bucket steps. Work
//! happens without the GIL; records cross the boundary as `bytes` in the formats of
//! `crate::dedup::records`.
use super::minhash::{minhash_error, shingler};
use crate::bloom::params::{false_positive_rate, Params};
use crate::bloom::{Bloom, BloomError};
use crate::dedup::error::DedupError;
use crate::dedup::kernels::{self, Verify};
use crate::dedup::keypath::{KeyPath, KeyValue, Step};
use crate::dedup::records;
use crate::dedup::render::{render, RenderSpec};
use crate::dedup::scan::{
    DecontamMode, DecontamSet, DocSpec, Fallback, Filters, MinhashSpec, NgramSpec, ParaSpec, ScanSpec, Scanner,
};
use crate::minhash::cluster::U64Map;
use crate::minhash::shingle::Scratch;
use crate::minhash::Permutations;
use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use std::path::PathBuf;
use std::sync::Arc;

/// A kernel's refusal, as the `ValueError` Python callers catch.
fn value_error(e: DedupError) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn buckets(n: u32, what: &str) -> PyResult<u32> {
    if n == 0 {
        return Err(PyValueError::new_err(format!("{what}: the number of buckets must be at least 1")));
    }
    Ok(n)
}

/// The steps of a key path: field names (str) and indices (int); ValueError if unsupported.
#[pyfunction]
fn key_path_steps(py: Python<'_>, path: &str) -> PyResult<Vec<Py<PyAny>>> {
    let parsed = KeyPath::parse(path).map_err(value_error)?;
    parsed
        .steps
        .iter()
        .map(|s| match s {
            Step::Field(name) => Ok(PyString::new(py, name).into_any().unbind()),
            Step::Index(i) => Ok(i.into_pyobject(py)?.into_any().unbind()),
        })
        .collect()
}

/// The evaluation side of decontamination, built once and shared by every scan of a worker.
#[pyclass(module = "dolma_pipe._rust", name = "DecontamSet", frozen)]
struct PyDecontamSet {
    inner: Arc<DecontamSet>,
}

#[pymethods]
impl PyDecontamSet {
    /// A set read from `DecontamBuilder.to_bytes()`.
    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        py.detach(|| DecontamSet::from_bytes(data)).map(|s| PyDecontamSet { inner: Arc::new(s) }).map_err(value_error)
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    #[getter]
    fn texts(&self) -> u64 {
        self.inner.texts()
    }
}

/// Builds a decontamination set from evaluation texts.
#[pyclass(module = "dolma_pipe._rust", name = "DecontamBuilder")]
struct PyDecontamBuilder {
    set: DecontamSet,
}

#[pymethods]
impl PyDecontamBuilder {
    /// mode "paragraphs" (exact paragraphs of at least min_words words) or "ngrams" (word
    /// n-grams of `ngram` normalised words).
    #[new]
    #[pyo3(signature = (mode, *, separator="\n", min_words=13, ngram=13, lowercase=true, words="word", seed=1))]
    fn new(
        mode: &str,
        separator: &str,
        min_words: usize,
        ngram: usize,
        lowercase: bool,
        words: &str,
        seed: u64,
    ) -> PyResult<Self> {
        let mode = match mode {
            "paragraphs" => DecontamMode::Paragraphs { min_words },
            "ngrams" => DecontamMode::Ngrams { shingler: shingler(ngram, lowercase, words, seed)? },
            other => {
                return Err(PyValueError::new_err(format!("mode must be 'paragraphs' or 'ngrams', got {other:?}")))
            }
        };
        Ok(PyDecontamBuilder { set: DecontamSet::new(mode, separator.to_string()).map_err(value_error)? })
    }

    fn add_texts(&mut self, py: Python<'_>, texts: Vec<Bound<'_, PyString>>) -> PyResult<()> {
        let texts: Vec<&str> = texts.iter().map(|t| t.to_str()).collect::<PyResult<_>>()?;
        let set = &mut self.set;
        py.detach(|| {
            let mut scratch = Scratch::default();
            for t in texts {
                set.add(t, &mut scratch);
            }
        });
        Ok(())
    }

    fn __len__(&self) -> usize {
        self.set.len()
    }

    #[getter]
    fn texts(&self) -> u64 {
        self.set.texts()
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        let b = py.detach(|| self.set.to_bytes());
        PyBytes::new(py, &b)
    }
}

/// What each file's scan does; made once per run and shared by the scanners of a worker.
#[pyclass(module = "dolma_pipe._rust", name = "ScanPlan", frozen)]
struct PyScanPlan {
    spec: Arc<ScanSpec>,
}

#[pymethods]
impl PyScanPlan {
    #[new]
    #[pyo3(signature = (
        *, min_length=0, min_words=0, skip_empty=false,
        document_key=None, document_buckets=1,
        paragraph_separator=None, ngram_length=0, ngram_stride=0, skip_short_paragraphs=false, paragraph_buckets=1,
        minhash=None, decontamination=None,
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        min_length: usize,
        min_words: usize,
        skip_empty: bool,
        document_key: Option<&str>,
        document_buckets: u32,
        paragraph_separator: Option<&str>,
        ngram_length: usize,
        ngram_stride: usize,
        skip_short_paragraphs: bool,
        paragraph_buckets: u32,
        minhash: Option<&Bound<'_, PyDict>>,
        decontamination: Option<&Bound<'_, PyDecontamSet>>,
    ) -> PyResult<Self> {
        let documents = match document_key {
            Some(k) => Some(DocSpec {
                key: KeyPath::parse(k).map_err(value_error)?,
                buckets: buckets(document_buckets, "documents")?,
            }),
            None => None,
        };
        let paragraphs = match paragraph_separator {
            Some("") => return Err(PyValueError::new_err("the paragraph separator must not be empty")),
            Some(sep) => Some(ParaSpec {
                separator: sep.to_string(),
                by_ngram: (ngram_length > 0).then_some(NgramSpec {
                    length: ngram_length,
                    stride: ngram_stride,
                    skip_short: skip_short_paragraphs,
                }),
                buckets: buckets(paragraph_buckets, "paragraphs")?,
            }),
            None => None,
        };
        let minhash = match minhash {
            None => None,
            Some(d) => {
                let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
                    d.get_item(k)?.ok_or_else(|| PyValueError::new_err(format!("minhash plan: missing {k:?}")))
                };
                let num_perm: usize = get("num_perm")?.extract()?;
                let seed: u64 = get("seed")?.extract()?;
                let bands: usize = get("bands")?.extract()?;
                let rows: usize = get("rows")?.extract()?;
                if bands == 0 || rows == 0 || bands * rows > num_perm {
                    return Err(PyValueError::new_err(format!(
                        "minhash: {bands} bands x {rows} rows must be positive and fit num_perm {num_perm}"
                    )));
                }
                let words: String = get("words")?.extract()?;
                Some(MinhashSpec {
                    shingler: shingler(get("ngram")?.extract()?, get("lowercase")?.extract()?, &words, seed)?,
                    perms: Permutations::new(num_perm, seed).map_err(minhash_error)?,
                    bands,
                    rows,
                    band_seed: seed,
                    buckets: buckets(get("buckets")?.extract()?, "minhash")?,
                    keep_signatures: get("keep_signatures")?.extract()?,
                    keep_sets: get("keep_sets")?.extract()?,
                })
            }
        };
        let spec = ScanSpec {
            filters: Filters { min_length, min_words, skip_empty },
            documents,
            paragraphs,
            minhash,
            decontamination: decontamination.map(|d| Arc::clone(&d.get().inner)),
        };
        Ok(PyScanPlan { spec: Arc::new(spec) })
    }
}

/// One input file's scan (see `crate::dedup::scan`).
#[pyclass(module = "dolma_pipe._rust", name = "DedupScanner")]
struct PyDedupScanner {
    inner: Option<Scanner>,
}

impl PyDedupScanner {
    fn scanner(&mut self) -> PyResult<&mut Scanner> {
        self.inner.as_mut().ok_or_else(|| PyRuntimeError::new_err("this scanner has finished"))
    }
}

fn fallback<'py>(py: Python<'py>, f: Option<Fallback>) -> Option<(u64, Bound<'py, PyBytes>)> {
    f.map(|f| (f.line, PyBytes::new(py, &f.raw)))
}

#[pymethods]
impl PyDedupScanner {
    #[new]
    fn new(plan: &Bound<'_, PyScanPlan>) -> Self {
        PyDedupScanner { inner: Some(Scanner::new(Arc::clone(&plan.get().spec))) }
    }

    /// Appends plain (decompressed) bytes of the file.
    fn push(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let scanner = self.scanner()?;
        py.detach(|| scanner.push(data));
        Ok(())
    }

    /// Appends gzip bytes of the file, decompressed here; ValueError (with what the
    /// decompressor said) on corrupt data, after keeping what came before it.
    fn push_gzip(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let scanner = self.scanner()?;
        py.detach(|| scanner.push_gzip(data)).map_err(value_error)
    }

    /// Whether the gzip bytes pushed so far end inside a member.
    #[getter]
    fn gzip_truncated(&self) -> PyResult<bool> {
        self.inner.as_ref().map(|s| s.gzip_truncated()).ok_or_else(|| PyRuntimeError::new_err("finished"))
    }

    /// Processes the complete lines pushed so far; returns None, or (line number, raw line) for
    /// a line the caller must read itself (then call drain again).
    fn drain<'py>(&mut self, py: Python<'py>) -> PyResult<Option<(u64, Bound<'py, PyBytes>)>> {
        let scanner = self.scanner()?;
        let f = py.detach(|| scanner.drain());
        Ok(fallback(py, f))
    }

    /// The end of the input: an unfinished last line, if the caller must read it.
    fn end_of_input<'py>(&mut self, py: Python<'py>) -> PyResult<Option<(u64, Bound<'py, PyBytes>)>> {
        let scanner = self.scanner()?;
        let f = py.detach(|| scanner.end_of_input());
        Ok(fallback(py, f))
    }

    /// A document the caller read: key is the key's value (str), None (missing), or any other
    /// object (a value that is not a string).
    #[pyo3(signature = (line, id, text, key=None))]
    fn add_document(
        &mut self,
        py: Python<'_>,
        line: u64,
        id: &str,
        text: &str,
        key: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let key = match key {
            None => KeyValue::Missing,
            Some(k) if k.is_none() => KeyValue::Missing,
            Some(k) => match k.cast::<PyString>() {
                Ok(s) => KeyValue::Str(s.to_str()?.to_string()),
                Err(_) => KeyValue::NotString,
            },
        };
        let scanner = self.scanner()?;
        py.detach(|| scanner.add_document(line, id, text, key));
        Ok(())
    }

    #[getter]
    fn last_line(&self) -> PyResult<u64> {
        self.inner.as_ref().map(|s| s.last_line()).ok_or_else(|| PyRuntimeError::new_err("finished"))
    }

    /// The outputs: a dict of bytes (meta, documents, paragraphs, bands, signatures, sets; None
    /// for passes not asked for), counts (a dict of ints) and last_line.
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let scanner = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("this scanner has finished"))?;
        let out = py.detach(|| scanner.finish());
        let d = PyDict::new(py);
        let bytes = |b: &Option<Vec<u8>>| b.as_ref().map(|b| PyBytes::new(py, b));
        d.set_item("meta", PyBytes::new(py, &out.meta))?;
        d.set_item("documents", bytes(&out.documents))?;
        d.set_item("paragraphs", bytes(&out.paragraphs))?;
        d.set_item("bands", bytes(&out.bands))?;
        d.set_item("signatures", bytes(&out.signatures))?;
        d.set_item("sets", bytes(&out.sets))?;
        d.set_item("last_line", out.last_line)?;
        let c = &out.counts;
        let counts = PyDict::new(py);
        for (k, v) in [
            ("lines", c.lines),
            ("blank_lines", c.blank_lines),
            ("documents", c.documents),
            ("python_lines", c.python_lines),
            ("document_keys", c.document_keys),
            ("documents_without_key", c.documents_without_key),
            ("documents_key_skipped", c.documents_key_skipped),
            ("paragraphs", c.paragraphs),
            ("paragraph_keys", c.paragraph_keys),
            ("paragraphs_skipped", c.paragraphs_skipped),
            ("minhash_documents", c.minhash_documents),
            ("documents_without_shingles", c.documents_without_shingles),
            ("decontaminated_paragraphs", c.decontaminated_paragraphs),
        ] {
            counts.set_item(k, v)?;
        }
        d.set_item("counts", counts)?;
        Ok(d)
    }
}

/// Bloom mode's test-and-set in the global order: a filter (loaded, or new with the given
/// shape) into which each file's key records are inserted in order; the records whose key was
/// (probably) present already come back as DUP records.
#[pyclass(module = "dolma_pipe._rust", name = "BloomSetter")]
struct PyBloomSetter {
    inner: Bloom,
}

fn bloom_error(e: BloomError) -> PyErr {
    match e {
        BloomError::Io { .. } => PyOSError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

#[pymethods]
impl PyBloomSetter {
    /// `path`: an existing filter file (verified); None: a new filter of `num_bits` and `num_hashes`.
    #[new]
    #[pyo3(signature = (path, num_bits, num_hashes, seed))]
    fn new(py: Python<'_>, path: Option<PathBuf>, num_bits: u64, num_hashes: u32, seed: u64) -> PyResult<Self> {
        let inner = py
            .detach(|| match &path {
                Some(p) => Bloom::load(p, true),
                None => Params::explicit(num_bits, num_hashes).and_then(|params| Bloom::new(params, seed)),
            })
            .map_err(bloom_error)?;
        Ok(PyBloomSetter { inner })
    }

    /// Inserts the key (first 16 bytes) of each record of one file, in order, skipping the records
    /// of `skip` documents; returns (DUP records of the keys found present, keys inserted).
    fn insert<'py>(
        &self,
        py: Python<'py>,
        records: &[u8],
        record_size: usize,
        skip: Vec<u32>,
    ) -> PyResult<(Bound<'py, PyBytes>, u64)> {
        if record_size != records::DOC && record_size != records::PARA {
            return Err(PyValueError::new_err(format!("unknown record size {record_size}")));
        }
        records::check_records(records, record_size, "key records").map_err(value_error)?;
        let bloom = &self.inner;
        let (out, inserted) = py
            .detach(|| {
                let mut skip = skip;
                skip.sort_unstable();
                kernels::bloom_test_and_set(bloom, records, record_size, &skip)
            })
            .map_err(bloom_error)?;
        Ok((PyBytes::new(py, &out), inserted))
    }

    /// Saves the filter (sealed, with its checksum) at `path`, atomically.
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        py.detach(|| self.inner.save(&path)).map_err(bloom_error)
    }

    /// The expected false-positive rate at the current number of distinct keys.
    fn current_fp_rate(&self) -> f64 {
        let p = self.inner.params();
        false_positive_rate(p.num_bits, p.num_hashes, self.inner.count())
    }

    #[getter]
    fn num_bits(&self) -> u64 {
        self.inner.params().num_bits
    }

    #[getter]
    fn num_hashes(&self) -> u32 {
        self.inner.params().num_hashes
    }
}

/// One file's attribute rows as JSON lines: (bytes, {documents, paragraphs, near_duplicates,
/// contaminated}: marks written).
#[pyfunction]
#[pyo3(signature = (meta, *, documents=None, paragraphs=None, by_ngram=false, threshold=1.0, minhash=None, decontamination=None, substrings=None, doc_dups=Vec::new(), para_dups=Vec::new(), members=Vec::new(), substring_spans=Vec::new()))]
#[allow(clippy::too_many_arguments)]
fn render_attributes<'py>(
    py: Python<'py>,
    meta: &[u8],
    documents: Option<String>,
    paragraphs: Option<String>,
    by_ngram: bool,
    threshold: f64,
    minhash: Option<String>,
    decontamination: Option<String>,
    substrings: Option<String>,
    doc_dups: Vec<u8>,
    para_dups: Vec<u8>,
    members: Vec<u8>,
    substring_spans: Vec<u8>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyDict>)> {
    let spec = RenderSpec { documents, paragraphs, by_ngram, threshold, minhash, decontamination, substrings };
    let (out, marked) =
        py.detach(|| render(meta, &spec, &doc_dups, &para_dups, &members, &substring_spans)).map_err(value_error)?;
    let d = PyDict::new(py);
    d.set_item("documents", marked.documents)?;
    d.set_item("paragraphs", marked.paragraphs)?;
    d.set_item("near_duplicates", marked.near_duplicates)?;
    d.set_item("contaminated", marked.contaminated)?;
    d.set_item("substrings", marked.substrings)?;
    d.set_item("substring_chars", marked.substring_chars)?;
    Ok((PyBytes::new(py, &out), d))
}

/// The records of (file, bytes) slices, borrowed from the bytes objects (which stay alive and
/// immutable through the call): no copy of what can be hundreds of megabytes.
fn borrow_slices<'a>(slices: &'a [(u32, Bound<'_, PyBytes>)]) -> Vec<(u32, &'a [u8])> {
    slices.iter().map(|(f, b)| (*f, b.as_bytes())).collect()
}

/// First occurrences of one hash range's keys, fed file by file in the global order.
#[pyclass(module = "dolma_pipe._rust", name = "FirstOccurrence")]
struct PyFirstOccurrence {
    inner: Option<kernels::FirstSeen>,
}

#[pymethods]
impl PyFirstOccurrence {
    #[new]
    fn new(record_size: usize, files: usize) -> PyResult<Self> {
        Ok(PyFirstOccurrence { inner: Some(kernels::FirstSeen::new(record_size, files).map_err(value_error)?) })
    }

    /// One file's key records (files in increasing order), without the documents in `removed`.
    #[pyo3(signature = (file, records, removed=Vec::new()))]
    fn add(&mut self, py: Python<'_>, file: u32, records: &[u8], removed: Vec<u32>) -> PyResult<()> {
        let inner = self.inner.as_mut().ok_or_else(|| PyRuntimeError::new_err("finished"))?;
        py.detach(|| {
            let mut removed = removed;
            removed.sort_unstable();
            inner.add(file, records, &removed)
        })
        .map_err(value_error)
    }

    /// (DUP records bucketed by file, duplicates, records considered, distinct keys).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<(Bound<'py, PyBytes>, u64, u64, u64)> {
        let inner = self.inner.take().ok_or_else(|| PyRuntimeError::new_err("finished"))?;
        let (out, dups, records, keys) = py.detach(|| inner.finish());
        Ok((PyBytes::new(py, &out.to_bytes()), dups, records, keys))
    }
}

/// PAIR records (bucketed by the later document's file) of documents sharing a band.
#[pyfunction]
fn band_candidates<'py>(
    py: Python<'py>,
    slices: Vec<(u32, Bound<'py, PyBytes>)>,
    files: usize,
    max_group: usize,
) -> PyResult<(Bound<'py, PyBytes>, u64)> {
    let s = borrow_slices(&slices);
    let (bytes, n) = py
        .detach(|| kernels::band_candidates(&s, files, max_group).map(|(b, n)| (b.to_bytes(), n)))
        .map_err(value_error)?;
    Ok((PyBytes::new(py, &bytes), n))
}

/// VERIFIED records of the pairs of each later file `(hi file, [PAIR buffers])`; returns per
/// file (records, distinct pairs, kept). `values[i]` holds the u32 values of document `nodes[i]`.
#[pyfunction]
fn verify_pairs<'py>(
    py: Python<'py>,
    groups: Vec<(u32, Vec<Bound<'py, PyBytes>>)>,
    nodes: Vec<u64>,
    values: Vec<Bound<'py, PyBytes>>,
    mode: &str,
    threshold: f64,
) -> PyResult<Vec<(Bound<'py, PyBytes>, u64, u64)>> {
    let mode = match mode {
        "jaccard" => Verify::Jaccard,
        "signature" => Verify::Signature,
        other => return Err(PyValueError::new_err(format!("mode must be 'jaccard' or 'signature', got {other:?}"))),
    };
    if nodes.len() != values.len() {
        return Err(PyValueError::new_err("nodes and values differ in length"));
    }
    // Borrowed, not copied: the bytes objects stay alive (and immutable) through the call.
    let value_slices: Vec<&[u8]> = values.iter().map(|b| b.as_bytes()).collect();
    let group_slices: Vec<(u32, Vec<&[u8]>)> =
        groups.iter().map(|(f, bufs)| (*f, bufs.iter().map(|b| b.as_bytes()).collect())).collect();
    let results = py
        .detach(|| {
            let mut map: U64Map<&[u8]> = U64Map::default();
            for (n, v) in nodes.iter().zip(&value_slices) {
                map.insert(*n, v);
            }
            kernels::verify_pairs(&group_slices, &map, mode, threshold)
        })
        .map_err(value_error)?;
    Ok(results.into_iter().map(|(b, n, k)| (PyBytes::new(py, &b), n, k)).collect())
}

/// Clusters of pairs: (MEMBER records bucketed by file, members as 24-byte records of node u64,
/// survivor u64, cluster u32, size u32 in (cluster, global order) order).
#[pyfunction]
fn cluster_pairs<'py>(
    py: Python<'py>,
    slices: Vec<(u32, Bound<'py, PyBytes>)>,
    record_size: usize,
    files: usize,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>)> {
    let s = borrow_slices(&slices);
    let (members, clustered) = py
        .detach(|| {
            kernels::cluster(&s, record_size, files).map(|(b, c)| {
                let mut flat = Vec::with_capacity(c.len() * 24);
                for m in &c {
                    flat.extend_from_slice(&m.node.to_le_bytes());
                    flat.extend_from_slice(&m.survivor.to_le_bytes());
                    flat.extend_from_slice(&m.cluster.to_le_bytes());
                    flat.extend_from_slice(&m.size.to_le_bytes());
                }
                (b.to_bytes(), flat)
            })
        })
        .map_err(value_error)?;
    Ok((PyBytes::new(py, &members), PyBytes::new(py, &clustered)))
}

/// A bucketed work file of one bucket holding ``records`` (``record_size`` bytes each).
#[pyfunction]
fn bucketed_file<'py>(py: Python<'py>, records: &[u8], record_size: usize) -> PyResult<Bound<'py, PyBytes>> {
    if record_size == 0 || !records.len().is_multiple_of(record_size) {
        return Err(PyValueError::new_err(format!("{} bytes are not records of {record_size} bytes", records.len())));
    }
    let mut b = records::Bucketed::new(record_size, 1);
    b.bucket_mut(0).extend_from_slice(records);
    Ok(PyBytes::new(py, &py.detach(|| b.to_bytes())))
}

/// A bucketed work file of ``buckets`` buckets holding ``records`` (``record_size`` bytes each),
/// each in the bucket its first u32 names (records of one bucket stay in their order).
#[pyfunction]
fn bucketed_by_first_u32<'py>(
    py: Python<'py>,
    records: &[u8],
    record_size: usize,
    buckets: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    if record_size < 4 || !records.len().is_multiple_of(record_size) {
        return Err(PyValueError::new_err(format!("{} bytes are not records of {record_size} bytes", records.len())));
    }
    let mut b = records::Bucketed::new(record_size, buckets);
    for r in records.chunks_exact(record_size) {
        let k = records::u32_at(r, 0) as usize;
        if k >= buckets.max(1) {
            return Err(PyValueError::new_err(format!("a record names bucket {k}, there are {buckets}")));
        }
        b.push(k, r);
    }
    Ok(PyBytes::new(py, &py.detach(|| b.to_bytes())))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(bucketed_by_first_u32, m)?)?;
    let py = m.py();
    // The work files' formats (records.rs, scan.rs), for the Python side that reads them.
    m.add("DEDUP_BUCKET_MAGIC", PyBytes::new(py, &records::MAGIC))?;
    m.add("DEDUP_META_MAGIC", PyBytes::new(py, &crate::dedup::scan::META_MAGIC))?;
    m.add("DEDUP_SETS_MAGIC", PyBytes::new(py, &crate::dedup::scan::SETS_MAGIC))?;
    let sizes = PyDict::new(py);
    for (name, size) in [
        ("doc", records::DOC),
        ("para", records::PARA),
        ("band", records::BAND),
        ("dup", records::DUP),
        ("pair", records::PAIR),
        ("verified", records::VERIFIED),
        ("member", records::MEMBER),
    ] {
        sizes.set_item(name, size)?;
    }
    m.add("DEDUP_RECORD_SIZES", sizes)?;
    m.add("DEDUP_WHOLE_DOCUMENT", records::WHOLE_DOCUMENT)?;
    m.add_function(wrap_pyfunction!(bucketed_file, m)?)?;
    m.add_class::<PyScanPlan>()?;
    m.add_class::<PyDedupScanner>()?;
    m.add_class::<PyDecontamSet>()?;
    m.add_class::<PyDecontamBuilder>()?;
    m.add_class::<PyBloomSetter>()?;
    m.add_function(wrap_pyfunction!(key_path_steps, m)?)?;
    m.add_class::<PyFirstOccurrence>()?;
    m.add_function(wrap_pyfunction!(band_candidates, m)?)?;
    m.add_function(wrap_pyfunction!(verify_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(cluster_pairs, m)?)?;
    m.add_function(wrap_pyfunction!(render_attributes, m)?)?;
    Ok(())
}
