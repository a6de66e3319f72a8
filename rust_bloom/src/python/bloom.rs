//! The Bloom filter's Python face: argument conversion, GIL release around batches, and the
//! mapping of `BloomError` to Python exceptions. No filter logic lives here; it is all in
//! `crate::bloom`.
use crate::bloom::params::{self, Params};
use crate::bloom::{format, Bloom, BloomError, DEFAULT_SEED};
use pyo3::exceptions::{
    PyFileExistsError, PyFileNotFoundError, PyIsADirectoryError, PyMemoryError, PyOSError, PyPermissionError,
    PyTypeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyBytes, PyDict, PyList, PyString, PyTuple, PyType};
use std::io::{ErrorKind, Read};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// `dolma_pipe._rust.BloomFileError(DolmaPipeError, ValueError)`, made once at module init: its
/// first base is a Python class (`dolma_pipe.errors`), which `create_exception!` cannot express.
static BLOOM_FILE_ERROR: PyOnceLock<Py<PyType>> = PyOnceLock::new();

fn bloom_file_error(py: Python<'_>) -> PyResult<&Bound<'_, PyType>> {
    let ty = BLOOM_FILE_ERROR.get_or_try_init(py, || -> PyResult<Py<PyType>> {
        let base = py.import("dolma_pipe.errors")?.getattr("DolmaPipeError")?;
        let bases = PyTuple::new(py, [base, py.get_type::<PyValueError>().into_any()])?;
        let namespace = PyDict::new(py);
        namespace.set_item("__module__", "dolma_pipe._rust")?;
        namespace.set_item(
            "__doc__",
            "A file is not a usable Bloom filter (wrong magic bytes, unsupported version, truncated, \
             corrupted header or bit array, or unsealed). The message names the file and the problem.",
        )?;
        let ty = py.get_type::<PyType>().call1(("BloomFileError", bases, namespace))?;
        Ok(ty.cast_into::<PyType>()?.unbind())
    })?;
    Ok(ty.bind(py))
}

/// Keys are converted and processed this many at a time: bounded memory for huge iterables.
const CHUNK: usize = 1 << 16;

fn to_py(e: BloomError) -> PyErr {
    let msg = e.to_string();
    match e {
        BloomError::Params(_) | BloomError::ReadOnly => PyValueError::new_err(msg),
        BloomError::File { .. } => Python::attach(|py| match bloom_file_error(py) {
            Ok(ty) => PyErr::from_type(ty.clone(), msg),
            Err(e) => e,
        }),
        BloomError::Memory(_) => PyMemoryError::new_err(msg),
        BloomError::Io { path, source } => {
            // (errno, strerror, filename): a regular OSError with .errno and .filename set.
            let strerror = source.to_string();
            let strerror = match strerror.find(" (os error") {
                Some(i) => strerror[..i].to_string(),
                None => strerror,
            };
            let args = (source.raw_os_error().unwrap_or(0), strerror, path.to_string_lossy().into_owned());
            match source.kind() {
                ErrorKind::NotFound => PyFileNotFoundError::new_err(args),
                ErrorKind::AlreadyExists => PyFileExistsError::new_err(args),
                ErrorKind::PermissionDenied => PyPermissionError::new_err(args),
                ErrorKind::IsADirectory => PyIsADirectoryError::new_err(args),
                _ => PyOSError::new_err(args),
            }
        }
    }
}

fn non_negative(name: &str, v: i64) -> PyResult<u64> {
    u64::try_from(v).map_err(|_| PyValueError::new_err(format!("{name} must be >= 0, got {v}")))
}

/// Either (expected_items, fp_rate) or (num_bits, num_hashes); num_hashes may be derived
/// from num_bits and expected_items.
fn build_params(
    expected_items: Option<i64>,
    fp_rate: Option<f64>,
    num_bits: Option<i64>,
    num_hashes: Option<i64>,
) -> PyResult<Params> {
    let n = expected_items.map(|n| non_negative("expected_items", n)).transpose()?;
    let params = match (num_bits, fp_rate) {
        (Some(_), Some(_)) => {
            return Err(PyValueError::new_err(
                "give either expected_items and fp_rate, or num_bits and num_hashes, not both",
            ))
        }
        (None, None) => {
            return Err(PyValueError::new_err("give expected_items and fp_rate (or num_bits and num_hashes)"))
        }
        (None, Some(p)) => {
            if num_hashes.is_some() {
                return Err(PyValueError::new_err("num_hashes goes with num_bits, not with fp_rate"));
            }
            let n = n.ok_or_else(|| PyValueError::new_err("fp_rate needs expected_items"))?;
            Params::optimal(n, p)
        }
        (Some(m), None) => {
            let m = non_negative("num_bits", m)?;
            let k = match (num_hashes, n) {
                (Some(k), _) => u32::try_from(k).unwrap_or(0),
                (None, Some(n)) if n > 0 => params::optimal_hashes(m, n),
                _ => return Err(PyValueError::new_err("num_bits needs num_hashes (or expected_items to derive it)")),
            };
            Params::explicit(m, k)
        }
    };
    params.map_err(to_py)
}

/// Borrows the bytes of one key: the UTF-8 encoding of a str (cached by CPython, no copy for
/// ASCII) or the contents of a bytes object.
fn key_bytes<'a>(obj: &'a Bound<'_, PyAny>) -> PyResult<&'a [u8]> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Ok(s.to_str()?.as_bytes());
    }
    if let Ok(b) = obj.cast::<PyBytes>() {
        return Ok(b.as_bytes());
    }
    Err(PyTypeError::new_err(format!("Bloom filter keys must be str or bytes, not {}", obj.get_type().name()?)))
}

/// A Bloom filter over str/bytes keys; see `dolma_pipe.bloom` for the documented API.
#[pyclass(module = "dolma_pipe._rust", name = "BloomFilter", frozen)]
pub struct PyBloomFilter {
    // Each call clones the Arc under the mutex (nanoseconds) and works on the clone with no
    // lock held, so `close()` never waits for, or deadlocks with, a batch running without
    // the GIL in another thread: the memory stays valid until the last clone is dropped.
    inner: Mutex<Option<Arc<Bloom>>>,
}

impl PyBloomFilter {
    fn wrap(bloom: Bloom) -> Self {
        PyBloomFilter { inner: Mutex::new(Some(Arc::new(bloom))) }
    }

    fn get(&self) -> PyResult<Arc<Bloom>> {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| PyValueError::new_err("operation on a closed BloomFilter"))
    }

    /// Runs `op` over the keys in chunks, without the GIL, collecting one bool per key.
    fn batch<'py>(
        &self,
        keys: &Bound<'py, PyAny>,
        op: impl Fn(&Bloom, &[&[u8]], &mut Vec<bool>) -> Result<(), BloomError> + Sync,
    ) -> PyResult<Bound<'py, PyList>> {
        let py = keys.py();
        if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err(
                "expected an iterable of keys, got a single str/bytes (use insert()/contains() for one key)",
            ));
        }
        let bloom = self.get()?;
        let mut out: Vec<bool> = Vec::with_capacity(keys.len().unwrap_or(0));
        let mut iter = keys.try_iter()?;
        // Owned references keep every key alive (and its UTF-8 buffer in place) while the
        // GIL is released, even if another thread mutates the caller's list meanwhile.
        let mut items: Vec<Bound<'py, PyAny>> = Vec::with_capacity(CHUNK);
        loop {
            items.clear();
            for item in iter.by_ref().take(CHUNK) {
                items.push(item?);
            }
            if items.is_empty() {
                break;
            }
            let slices = items.iter().map(key_bytes).collect::<PyResult<Vec<&[u8]>>>()?;
            py.detach(|| op(&bloom, &slices, &mut out)).map_err(to_py)?;
            if items.len() < CHUNK {
                break;
            }
        }
        PyList::new(py, out)
    }
}

#[pymethods]
impl PyBloomFilter {
    /// BloomFilter(expected_items=None, fp_rate=None, *, num_bits=None, num_hashes=None, seed=DEFAULT_SEED)
    /// A private in-memory filter sized for expected_items at fp_rate, or given num_bits/num_hashes.
    #[new]
    #[pyo3(signature = (expected_items=None, fp_rate=None, *, num_bits=None, num_hashes=None, seed=DEFAULT_SEED))]
    fn new(
        py: Python<'_>,
        expected_items: Option<i64>,
        fp_rate: Option<f64>,
        num_bits: Option<i64>,
        num_hashes: Option<i64>,
        seed: u64,
    ) -> PyResult<Self> {
        let params = build_params(expected_items, fp_rate, num_bits, num_hashes)?;
        py.detach(|| Bloom::new(params, seed)).map(Self::wrap).map_err(to_py)
    }

    /// Create a filter file at `path` and map it shared (FileExistsError unless overwrite=True).
    #[staticmethod]
    #[pyo3(signature = (path, expected_items=None, fp_rate=None, *, num_bits=None, num_hashes=None, seed=DEFAULT_SEED, overwrite=false))]
    #[allow(clippy::too_many_arguments)] // one argument per keyword of the Python signature
    fn create_shared(
        py: Python<'_>,
        path: PathBuf,
        expected_items: Option<i64>,
        fp_rate: Option<f64>,
        num_bits: Option<i64>,
        num_hashes: Option<i64>,
        seed: u64,
        overwrite: bool,
    ) -> PyResult<Self> {
        let params = build_params(expected_items, fp_rate, num_bits, num_hashes)?;
        py.detach(|| Bloom::create_shared(&path, params, seed, overwrite)).map(Self::wrap).map_err(to_py)
    }

    /// Map an existing filter file shared; a sealed file's checksum is verified unless verify=False.
    #[staticmethod]
    #[pyo3(signature = (path, *, readonly=false, verify=true))]
    fn open_shared(py: Python<'_>, path: PathBuf, readonly: bool, verify: bool) -> PyResult<Self> {
        py.detach(|| Bloom::open_shared(&path, readonly, verify)).map(Self::wrap).map_err(to_py)
    }

    /// Read a filter file into private memory; it must be sealed and match its checksum unless verify=False.
    #[staticmethod]
    #[pyo3(signature = (path, *, verify=true))]
    fn load(py: Python<'_>, path: PathBuf, verify: bool) -> PyResult<Self> {
        py.detach(|| Bloom::load(&path, verify)).map(Self::wrap).map_err(to_py)
    }

    /// Write a sealed, checksummed snapshot to `path` (atomically: temp file + rename).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        let bloom = self.get()?;
        py.detach(|| bloom.save(&path)).map_err(to_py)
    }

    /// Add the key (str or bytes); return True if it was already present. Atomic per key.
    fn insert(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.get()?.insert(key_bytes(key)?).map_err(to_py)
    }

    /// True if the key is (probably) present.
    fn contains(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        Ok(self.get()?.contains(key_bytes(key)?))
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.contains(key)
    }

    /// insert() each key in order without the GIL; returns one "was present" flag per key.
    fn insert_many<'py>(&self, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        self.batch(keys, |b, k, out| b.insert_batch(k, out))
    }

    /// contains() for each key, without the GIL.
    fn contains_many<'py>(&self, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
        self.batch(keys, |b, k, out| {
            b.contains_batch(k, out);
            Ok(())
        })
    }

    /// Shared filters: write the checksum and mark the file sealed. Call when no process is inserting.
    fn seal(&self, py: Python<'_>) -> PyResult<()> {
        let bloom = self.get()?;
        py.detach(|| bloom.seal()).map_err(to_py)
    }

    /// Shared filters: msync the mapping to disk. Not needed for other processes to see inserts.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let bloom = self.get()?;
        py.detach(|| bloom.flush()).map_err(to_py)
    }

    /// Flush and release the filter; later calls raise ValueError. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let taken = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take();
        match taken {
            Some(bloom) => py.detach(|| bloom.flush()).map_err(to_py),
            None => Ok(()),
        }
    }

    fn __enter__(slf: Bound<'_, Self>) -> Bound<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    #[getter]
    fn num_bits(&self) -> PyResult<u64> {
        Ok(self.get()?.params().num_bits)
    }
    #[getter]
    fn num_hashes(&self) -> PyResult<u32> {
        Ok(self.get()?.params().num_hashes)
    }
    #[getter]
    fn seed(&self) -> PyResult<u64> {
        Ok(self.get()?.seed())
    }
    #[getter]
    fn size_bytes(&self) -> PyResult<u64> {
        Ok(self.get()?.params().num_words() * 8)
    }
    #[getter]
    fn path(&self) -> PyResult<Option<String>> {
        Ok(self.get()?.path().map(|p| p.to_string_lossy().into_owned()))
    }
    #[getter]
    fn is_shared(&self) -> PyResult<bool> {
        Ok(self.get()?.path().is_some())
    }
    #[getter]
    fn readonly(&self) -> PyResult<bool> {
        Ok(self.get()?.readonly())
    }
    #[getter]
    fn sealed(&self) -> PyResult<bool> {
        Ok(self.get()?.is_sealed())
    }
    #[getter]
    fn closed(&self) -> bool {
        self.inner.lock().unwrap_or_else(|p| p.into_inner()).is_none()
    }
    #[getter]
    fn count(&self) -> PyResult<u64> {
        Ok(self.get()?.count())
    }

    /// Number of bits set.
    fn bits_set(&self, py: Python<'_>) -> PyResult<u64> {
        let bloom = self.get()?;
        Ok(py.detach(|| bloom.bits_set()))
    }

    /// -m/k ln(1 - X/m), X the number of set bits (Swamidass & Baldi).
    fn estimated_count(&self, py: Python<'_>) -> PyResult<f64> {
        let bloom = self.get()?;
        let x = py.detach(|| bloom.bits_set()) as f64;
        let (m, k) = (bloom.params().num_bits as f64, bloom.params().num_hashes as f64);
        Ok(if x >= m { f64::INFINITY } else { -m / k * (1.0 - x / m).ln() })
    }

    /// The probability that an absent key is reported present now: (X/m)^k.
    fn current_fp_rate(&self, py: Python<'_>) -> PyResult<f64> {
        let bloom = self.get()?;
        let x = py.detach(|| bloom.bits_set()) as f64;
        let p = bloom.params();
        Ok((x / p.num_bits as f64).powi(p.num_hashes as i32))
    }

    /// Shared filters pickle as "reopen this file" (for multiprocessing); private ones do not
    /// pickle: copying a large bit array through a pipe is never what one wants.
    fn __reduce__<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyAny>, (String, bool))> {
        let bloom = self.get()?;
        let Some(path) = bloom.path() else {
            return Err(PyTypeError::new_err(
                "a private BloomFilter cannot be pickled: use BloomFilter.create_shared() to share \
                 it between processes, or save() it and load() it in the other process",
            ));
        };
        let reopen = py.import("dolma_pipe._rust")?.getattr("_reopen_shared")?;
        Ok((reopen, (path.to_string_lossy().into_owned(), bloom.readonly())))
    }

    fn __repr__(&self) -> String {
        match self.get() {
            Err(_) => "<BloomFilter closed>".into(),
            Ok(b) => {
                let p = b.params();
                let place = match b.path() {
                    Some(path) => {
                        format!(", shared={:?}{}", path.to_string_lossy(), if b.readonly() { ", readonly" } else { "" })
                    }
                    None => String::new(),
                };
                format!("<BloomFilter num_bits={} num_hashes={} count={}{place}>", p.num_bits, p.num_hashes, b.count())
            }
        }
    }
}

/// Unpickling a shared filter: reopen the file (the sender trusted it, so no re-verification).
#[pyfunction]
fn _reopen_shared(py: Python<'_>, path: PathBuf, readonly: bool) -> PyResult<PyBloomFilter> {
    PyBloomFilter::open_shared(py, path, readonly, false)
}

/// (num_bits, num_hashes) for `expected_items` keys at false-positive rate `fp_rate`.
#[pyfunction]
fn optimal_parameters(expected_items: i64, fp_rate: f64) -> PyResult<(u64, u32)> {
    let p = build_params(Some(expected_items), Some(fp_rate), None, None)?;
    Ok((p.num_bits, p.num_hashes))
}

/// Expected false-positive rate of a filter of this shape after `items` distinct inserts.
#[pyfunction]
fn false_positive_rate(num_bits: i64, num_hashes: i64, items: i64) -> PyResult<f64> {
    let p = build_params(None, None, Some(num_bits), Some(num_hashes))?;
    Ok(params::false_positive_rate(p.num_bits, p.num_hashes, non_negative("items", items)?))
}

/// The fields of a filter file's header, read and checked by the format's own code (the bit
/// array is neither read nor checked): what callers need without loading the filter.
#[pyfunction]
fn bloom_file_header<'py>(py: Python<'py>, path: PathBuf) -> PyResult<Bound<'py, PyDict>> {
    let read = py.detach(|| -> Result<(Vec<u8>, u64), BloomError> {
        let mut file = std::fs::File::open(&path).map_err(|e| BloomError::io(&path, e))?;
        let len = file.metadata().map_err(|e| BloomError::io(&path, e))?.len();
        let mut head = Vec::with_capacity(format::HEADER_BYTES as usize);
        std::io::Read::by_ref(&mut file)
            .take(format::HEADER_BYTES)
            .read_to_end(&mut head)
            .map_err(|e| BloomError::io(&path, e))?;
        Ok((head, len))
    });
    let (head, len) = read.map_err(to_py)?;
    let h = format::Header::decode(&head, len, &path).map_err(to_py)?;
    let d = PyDict::new(py);
    d.set_item("num_hashes", h.params.num_hashes)?;
    d.set_item("num_bits", h.params.num_bits)?;
    d.set_item("seed", h.seed)?;
    d.set_item("sealed", h.is_sealed())?;
    d.set_item("count", h.count)?;
    d.set_item("checksum", h.checksum)?;
    Ok(d)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyBloomFilter>()?;
    m.add_function(wrap_pyfunction!(bloom_file_header, m)?)?;
    m.add("BloomFileError", bloom_file_error(m.py())?)?;
    m.add_function(wrap_pyfunction!(optimal_parameters, m)?)?;
    m.add_function(wrap_pyfunction!(false_positive_rate, m)?)?;
    m.add_function(wrap_pyfunction!(_reopen_shared, m)?)?;
    m.add("DEFAULT_SEED", DEFAULT_SEED)?;
    m.add("FORMAT_VERSION", format::VERSION)?;
    m.add("MAX_HASHES", params::MAX_HASHES)?;
    m.add("MAX_BITS", params::MAX_BITS)?;
    Ok(())
}
