//! The suffix-array component's Python face (`crate::suffix`), used by `dolma_pipe.suffix`. Texts
//! and arrays are files read in place (memory-mapped): a region of a file, so a work file's
//! content is read without its checksum trailer. Symbols are bytes (`"u8"`), or 16/32-bit token
//! ids (`"u16"`, `"u32"`, little-endian, as token shards hold them). Errors are `ValueError`s or
//! `OSError`s with the file's name; work runs without the GIL.
use crate::suffix::build::{of_bytes, of_u16, of_u32};
use crate::suffix::dups::{char_ranges, key_bounds, repeated_windows, windows_to_ranges, Shard};
use crate::suffix::index::SuffixIndex;
use crate::suffix::{records, SuffixError, Symbol, SEPARATOR, SYMBOLS};
use memmap2::Mmap;
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};
use std::fs::File;
use std::path::{Path, PathBuf};

fn value_error(e: SuffixError) -> PyErr {
    PyValueError::new_err(e.0)
}

fn os_error(path: &Path, e: std::io::Error) -> PyErr {
    PyOSError::new_err(format!("{}: {e}", path.display()))
}

/// A region of a file, memory-mapped.
struct Region {
    map: Option<Mmap>,
    offset: usize,
    len: usize,
}

impl Region {
    fn open(path: &Path, offset: u64, len: Option<u64>) -> PyResult<Region> {
        let file = File::open(path).map_err(|e| os_error(path, e))?;
        let size = file.metadata().map_err(|e| os_error(path, e))?.len();
        let len = len.unwrap_or(size.saturating_sub(offset));
        if offset.checked_add(len).is_none_or(|end| end > size) {
            return Err(PyValueError::new_err(format!(
                "{}: bytes {offset}..{} asked, it holds {size}",
                path.display(),
                offset.saturating_add(len)
            )));
        }
        // An empty file cannot be mapped; an empty region needs no map.
        let map = if size == 0 { None } else { Some(unsafe { Mmap::map(&file) }.map_err(|e| os_error(path, e))?) };
        Ok(Region { map, offset: offset as usize, len: len as usize })
    }

    fn bytes(&self) -> &[u8] {
        match &self.map {
            Some(m) => &m[self.offset..self.offset + self.len],
            None => &[],
        }
    }
}

fn symbol_size(symbol: &str) -> PyResult<usize> {
    match SYMBOLS.iter().find(|(name, _)| *name == symbol) {
        Some(&(_, size)) => Ok(size),
        None => Err(PyValueError::new_err(format!("symbol {symbol:?}: u8, u16 or u32"))),
    }
}

fn as_u16(bytes: &[u8]) -> std::borrow::Cow<'_, [u16]> {
    // SAFETY: the slice is checked to be aligned for u16 and is read as (len / 2) values; u16 has
    // no invalid bit patterns. On a big-endian machine the bytes are swapped in a copy instead.
    if cfg!(target_endian = "little") && (bytes.as_ptr() as usize).is_multiple_of(2) {
        std::borrow::Cow::Borrowed(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const u16, bytes.len() / 2) })
    } else {
        std::borrow::Cow::Owned(bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect())
    }
}

fn as_u32(bytes: &[u8]) -> std::borrow::Cow<'_, [u32]> {
    // SAFETY: as for `as_u16`.
    if cfg!(target_endian = "little") && (bytes.as_ptr() as usize).is_multiple_of(4) {
        std::borrow::Cow::Borrowed(unsafe { std::slice::from_raw_parts(bytes.as_ptr() as *const u32, bytes.len() / 4) })
    } else {
        std::borrow::Cow::Owned(bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
    }
}

/// Builds the suffix array of a text region and writes it packed to ``out`` (with a work file's
/// checksum trailer when ``seal``); ``(symbols, bytes per position, xxh3-64 of the positions
/// written)``.
#[pyfunction]
#[pyo3(signature = (text, symbol, out, *, offset = 0, length = None, seal = false))]
fn build_suffix_array(
    py: Python<'_>,
    text: PathBuf,
    symbol: &str,
    out: PathBuf,
    offset: u64,
    length: Option<u64>,
    seal: bool,
) -> PyResult<(u64, usize, u64)> {
    let size = symbol_size(symbol)?;
    let region = Region::open(&text, offset, length)?;
    if region.len % size != 0 {
        return Err(PyValueError::new_err(format!(
            "{}: {} bytes are not whole {symbol} symbols",
            text.display(),
            region.len
        )));
    }
    let bytes = region.bytes();
    let positions = py
        .detach(|| match size {
            1 => of_bytes(bytes),
            2 => of_u16(&as_u16(bytes)),
            _ => of_u32(&as_u32(bytes)),
        })
        .map_err(|e| PyValueError::new_err(format!("{}: {e}", text.display())))?;
    let (width, digest) = py.detach(|| positions.write(&out, seal)).map_err(|e| os_error(&out, e))?;
    Ok((positions.len() as u64, width, digest))
}

/// A text and its packed suffix array, read in place; answers counts, ranges and matches.
#[pyclass(module = "dolma_pipe._rust", name = "SuffixIndex", frozen)]
struct PySuffixIndex {
    text: Region,
    sa: Region,
    symbol: usize,
    width: usize,
}

/// A pattern: bytes for a byte text, token ids for a token text.
fn pattern_of(obj: &Bound<'_, PyAny>, symbol: usize) -> PyResult<Vec<u64>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        if symbol != 1 {
            return Err(PyValueError::new_err("a token index is asked with token ids, not bytes"));
        }
        return Ok(b.as_bytes().iter().map(|&x| x as u64).collect());
    }
    let ids: Vec<u64> = obj.extract()?;
    let max = if symbol == 1 {
        0xff
    } else if symbol == 2 {
        0xffff
    } else {
        0xffff_ffff
    };
    if let Some(bad) = ids.iter().find(|&&x| x > max) {
        return Err(PyValueError::new_err(format!("symbol {bad} does not fit the index's {}-byte symbols", symbol)));
    }
    Ok(ids)
}

impl PySuffixIndex {
    /// Runs ``f`` over the index typed by its symbols, the pattern converted to them.
    fn with<R: Send>(&self, py: Python<'_>, f: impl Fn(&dyn Query) -> R + Send + Sync) -> PyResult<R> {
        let (text, sa) = (self.text.bytes(), self.sa.bytes());
        let width = self.width;
        match self.symbol {
            1 => {
                let idx = SuffixIndex::new(text, sa, width).map_err(value_error)?;
                Ok(py.detach(|| f(&idx)))
            }
            2 => {
                let t = as_u16(text);
                let idx = SuffixIndex::new(&t, sa, width).map_err(value_error)?;
                Ok(py.detach(|| f(&idx)))
            }
            _ => {
                let t = as_u32(text);
                let idx = SuffixIndex::new(&t, sa, width).map_err(value_error)?;
                Ok(py.detach(|| f(&idx)))
            }
        }
    }
}

/// The queries, over any symbol type (patterns as u64). A damaged array gives an error, never a panic.
trait Query: Sync {
    fn len(&self) -> usize;
    fn range_of(&self, pattern: &[u64]) -> Result<(usize, usize), SuffixError>;
    fn matches_of(&self, query: &[u64], cap: usize) -> Result<Vec<(usize, usize, usize)>, SuffixError>;
    fn position(&self, i: usize) -> Result<usize, SuffixError>;
    fn symbols(&self, start: usize, end: usize) -> Vec<u64>;
}

impl<T: Symbol + TryFrom<u64>> Query for SuffixIndex<'_, T> {
    fn len(&self) -> usize {
        SuffixIndex::len(self)
    }
    fn range_of(&self, pattern: &[u64]) -> Result<(usize, usize), SuffixError> {
        let p: Vec<T> = pattern.iter().filter_map(|&x| T::try_from(x).ok()).collect();
        self.range(&p)
    }
    fn matches_of(&self, query: &[u64], cap: usize) -> Result<Vec<(usize, usize, usize)>, SuffixError> {
        let q: Vec<T> = query.iter().filter_map(|&x| T::try_from(x).ok()).collect();
        self.longest_matches(&q, cap)
    }
    fn position(&self, i: usize) -> Result<usize, SuffixError> {
        SuffixIndex::position(self, i)
    }
    fn symbols(&self, start: usize, end: usize) -> Vec<u64> {
        let end = end.min(self.text.len());
        self.text[start.min(end)..end].iter().map(|s| s.to_u64()).collect()
    }
}

#[pymethods]
impl PySuffixIndex {
    /// The text ``text[offset:offset+length]`` of ``symbol``s and the array at ``sa[sa_offset:...]``.
    #[new]
    #[pyo3(signature = (text, symbol, sa, width, *, offset = 0, length = None, sa_offset = 0))]
    fn new(
        text: PathBuf,
        symbol: &str,
        sa: PathBuf,
        width: usize,
        offset: u64,
        length: Option<u64>,
        sa_offset: u64,
    ) -> PyResult<Self> {
        let size = symbol_size(symbol)?;
        let text_region = Region::open(&text, offset, length)?;
        if text_region.len % size != 0 {
            return Err(PyValueError::new_err(format!(
                "{}: {} bytes are not whole {symbol} symbols",
                text.display(),
                text_region.len
            )));
        }
        let n = (text_region.len / size) as u64;
        if !(1..=8).contains(&width) {
            return Err(PyValueError::new_err(format!(
                "{}: {width}-byte positions are not ones this build writes",
                sa.display()
            )));
        }
        let sa_region = Region::open(&sa, sa_offset, Some(n * width as u64)).map_err(|e| {
            PyValueError::new_err(format!("{}: not the suffix array of {} ({e})", sa.display(), text.display()))
        })?;
        Ok(PySuffixIndex { text: text_region, sa: sa_region, symbol: size, width })
    }

    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |q| q.len())
    }

    /// ``(lo, hi)``: the sorted suffixes that start with ``pattern``.
    fn range(&self, py: Python<'_>, pattern: &Bound<'_, PyAny>) -> PyResult<(usize, usize)> {
        let p = pattern_of(pattern, self.symbol)?;
        self.with(py, |q| q.range_of(&p))?.map_err(value_error)
    }

    fn count(&self, py: Python<'_>, pattern: &Bound<'_, PyAny>) -> PyResult<usize> {
        let (lo, hi) = self.range(py, pattern)?;
        Ok(hi - lo)
    }

    /// Text positions of sorted suffixes ``lo..hi`` (at most ``limit``).
    #[pyo3(signature = (lo, hi, limit = None))]
    fn positions(&self, py: Python<'_>, lo: usize, hi: usize, limit: Option<usize>) -> PyResult<Vec<usize>> {
        let hi = limit.map_or(hi, |l| hi.min(lo.saturating_add(l)));
        self.with(py, |q| (lo..hi.min(q.len())).map(|i| q.position(i)).collect::<Result<Vec<_>, _>>())?
            .map_err(value_error)
    }

    /// Per start of ``query``: (longest match length, lo, hi), lengths at most ``cap``.
    #[pyo3(signature = (query, cap = 1 << 20))]
    fn longest_matches(
        &self,
        py: Python<'_>,
        query: &Bound<'_, PyAny>,
        cap: usize,
    ) -> PyResult<Vec<(usize, usize, usize)>> {
        let q = pattern_of(query, self.symbol)?;
        self.with(py, |idx| idx.matches_of(&q, cap))?.map_err(value_error)
    }

    /// Per start of ``query``: the longest match's length (at most ``cap``), as little-endian
    /// u32s (a numpy array's bytes: no Python object per start).
    #[pyo3(signature = (query, cap = 1 << 20))]
    fn match_lengths<'py>(
        &self,
        py: Python<'py>,
        query: &Bound<'_, PyAny>,
        cap: usize,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let q = pattern_of(query, self.symbol)?;
        let lengths = self.with(py, |idx| idx.matches_of(&q, cap))?.map_err(value_error)?;
        Ok(PyBytes::new(py, &records::match_lengths(&lengths)))
    }

    /// The text's symbols ``start..end`` (bytes for a byte text).
    fn symbols<'py>(&self, py: Python<'py>, start: usize, end: usize) -> PyResult<Bound<'py, PyAny>> {
        let s = self.with(py, |q| q.symbols(start, end))?;
        if self.symbol == 1 {
            let b: Vec<u8> = s.iter().map(|&x| x as u8).collect();
            return Ok(PyBytes::new(py, &b).into_any());
        }
        Ok(PyList::new(py, s)?.into_any())
    }
}

/// One shard for the duplicate finder: (text path, text offset, text length, array path, width).
type ShardSpec = (PathBuf, u64, u64, PathBuf, usize);

fn open_shards(specs: &[ShardSpec]) -> PyResult<Vec<(Region, Region, usize)>> {
    specs
        .iter()
        .map(|(tp, off, len, sp, width)| {
            let text = Region::open(tp, *off, Some(*len))?;
            let sa = Region::open(sp, 0, Some(len * *width as u64))?;
            Ok((text, sa, *width))
        })
        .collect()
}

/// Each opened shard's text and suffix array as a [`Shard`] (a bad width or length is a ValueError).
fn shard_views(opened: &[(Region, Region, usize)]) -> PyResult<Vec<Shard<'_>>> {
    opened.iter().map(|(t, s, w)| Shard::new(t.bytes(), s.bytes(), *w)).collect::<Result<_, _>>().map_err(value_error)
}

/// The occurrences to remove of every window of ``length`` bytes repeated in the shards, among
/// suffixes whose key is in ``[key_lo, key_hi)``: 12-byte records (u32 shard, u64 position).
#[pyfunction]
#[pyo3(signature = (shards, length, key_lo, key_hi, keep_first, separator = None))]
fn suffix_repeated_windows<'py>(
    py: Python<'py>,
    shards: Vec<ShardSpec>,
    length: usize,
    key_lo: u32,
    key_hi: u32,
    keep_first: bool,
    separator: Option<u8>,
) -> PyResult<Bound<'py, PyBytes>> {
    let opened = open_shards(&shards)?;
    let views = shard_views(&opened)?;
    let out = py
        .detach(|| {
            repeated_windows(&views, length, key_lo, key_hi, keep_first, separator).map(|w| records::windows(&w))
        })
        .map_err(value_error)?;
    Ok(PyBytes::new(py, &out))
}

/// As ``suffix_repeated_windows``, the windows joined into byte ranges: sorted 20-byte records
/// (u32 shard, u64 start, u64 end).
#[pyfunction]
#[pyo3(signature = (shards, length, key_lo, key_hi, keep_first, separator = None))]
fn suffix_repeated_ranges<'py>(
    py: Python<'py>,
    shards: Vec<ShardSpec>,
    length: usize,
    key_lo: u32,
    key_hi: u32,
    keep_first: bool,
    separator: Option<u8>,
) -> PyResult<Bound<'py, PyBytes>> {
    let opened = open_shards(&shards)?;
    let views = shard_views(&opened)?;
    let out = py
        .detach(|| {
            repeated_windows(&views, length, key_lo, key_hi, keep_first, separator)
                .map(|w| records::ranges(&windows_to_ranges(w, length)))
        })
        .map_err(value_error)?;
    Ok(PyBytes::new(py, &out))
}

/// Byte ranges (16-byte records: u64 start, u64 end; sorted, disjoint) of a text region of
/// documents starting at ``doc_starts``, as whole-character ranges within their documents:
/// 20-byte records (u32 document, u64 first char, u64 end char).
#[pyfunction]
fn suffix_char_ranges<'py>(
    py: Python<'py>,
    text: PathBuf,
    offset: u64,
    length: u64,
    doc_starts: Vec<u64>,
    ranges: &[u8],
) -> PyResult<Bound<'py, PyBytes>> {
    let pairs =
        records::read_byte_ranges(ranges).ok_or_else(|| PyValueError::new_err("byte ranges are 16-byte records"))?;
    let region = Region::open(&text, offset, Some(length))?;
    let out = py
        .detach(|| char_ranges(region.bytes(), &doc_starts, &pairs).map(|found| records::ranges(&found)))
        .map_err(value_error)?;
    Ok(PyBytes::new(py, &out))
}

/// Key boundaries splitting one shard's suffixes into ``parts`` nearly equal runs.
#[pyfunction]
fn suffix_key_bounds(shard: ShardSpec, parts: usize) -> PyResult<Vec<u32>> {
    let opened = open_shards(std::slice::from_ref(&shard))?;
    let views = shard_views(&opened)?;
    key_bounds(&views[0], parts).map_err(value_error)
}

/// The xxh3-64 of a whole file (what an index records of the shards it was built from, and of
/// its own files), read without the GIL.
#[pyfunction]
fn file_xxh3(py: Python<'_>, path: PathBuf) -> PyResult<u64> {
    let region = Region::open(&path, 0, None)?;
    Ok(py.detach(|| xxhash_rust::xxh3::xxh3_64(region.bytes())))
}

/// The xxh3-64 of bytes (what a file written from them must hash to).
#[pyfunction]
fn bytes_xxh3(py: Python<'_>, data: &[u8]) -> u64 {
    py.detach(|| xxhash_rust::xxh3::xxh3_64(data))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(file_xxh3, m)?)?;
    m.add_function(wrap_pyfunction!(bytes_xxh3, m)?)?;
    m.add_function(wrap_pyfunction!(build_suffix_array, m)?)?;
    m.add_class::<PySuffixIndex>()?;
    m.add_function(wrap_pyfunction!(suffix_repeated_windows, m)?)?;
    m.add_function(wrap_pyfunction!(suffix_key_bounds, m)?)?;
    m.add_function(wrap_pyfunction!(suffix_repeated_ranges, m)?)?;
    m.add_function(wrap_pyfunction!(suffix_char_ranges, m)?)?;
    let py = m.py();
    // The formats `dolma_pipe.suffix` reads (suffix/records.rs, suffix/mod.rs): each record as
    // (field, numpy type) pairs, a text's symbol sizes, the byte between documents.
    m.add("SUFFIX_KEYS", crate::suffix::dups::KEYS)?;
    m.add("SUFFIX_SEPARATOR", SEPARATOR)?;
    let symbols = PyDict::new(py);
    for (name, size) in SYMBOLS {
        symbols.set_item(name, size)?;
    }
    m.add("SUFFIX_SYMBOL_BYTES", symbols)?;
    let layouts = PyDict::new(py);
    for (name, layout) in records::LAYOUTS {
        layouts.set_item(name, layout.to_vec())?;
    }
    m.add("SUFFIX_RECORDS", layouts)?;
    Ok(())
}
