//! The work-file trailer's Python face (`crate::workfile`), used by `dolma_pipe.workdir`, which
//! does the I/O (local or S3) and calls these to digest what it writes and check what it reads.
//! Content is passed as `bytes` (pieces of any size: a large file is checked in chunks) and
//! digested without the GIL; a failed check is a `ValueError` whose args are the problem
//! ("truncated" or "damaged") and what is wrong (the caller names the file).
use crate::workfile::{self, CheckError, Footer, Sealer, Table};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn check_error(e: CheckError) -> PyErr {
    PyValueError::new_err((e.kind(), e.to_string()))
}

/// Digests content as it is written; ``finish()`` gives the trailer to write after it.
#[pyclass(module = "dolma_pipe._rust", name = "WorkFileSealer")]
struct PySealer {
    inner: Option<Sealer>,
}

#[pymethods]
impl PySealer {
    #[new]
    #[pyo3(signature = (block = workfile::DEFAULT_BLOCK))]
    fn new(block: u32) -> PyResult<Self> {
        if block == 0 {
            return Err(PyValueError::new_err("block must be at least 1 byte"));
        }
        Ok(PySealer { inner: Some(Sealer::new(block)) })
    }

    fn update(&mut self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let sealer = self.inner.as_mut().ok_or_else(|| PyValueError::new_err("the sealer is finished"))?;
        py.detach(|| sealer.update(data));
        Ok(())
    }

    /// Content bytes digested so far.
    #[getter]
    fn length(&self) -> u64 {
        self.inner.as_ref().map_or(0, |s| s.len())
    }

    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let sealer = self.inner.take().ok_or_else(|| PyValueError::new_err("the sealer is finished"))?;
        Ok(PyBytes::new(py, &py.detach(|| sealer.finish())))
    }
}

/// ``(content length, block size, digest table length)`` from a file's last WORKFILE_FOOTER_LEN
/// bytes; ``file_len`` (the file's size) is checked against them.
#[pyfunction]
fn workfile_footer(footer: &[u8], file_len: u64) -> PyResult<(u64, u32, u64)> {
    let f = Footer::parse(footer).map_err(check_error)?;
    f.check_file_len(file_len).map_err(check_error)?;
    Ok((f.content_len, f.block, f.table_len()))
}

/// A file's digest table, checked against its footer; checks ranges of whole blocks.
#[pyclass(module = "dolma_pipe._rust", name = "WorkFileTable", frozen)]
struct PyTable {
    inner: Table,
}

#[pymethods]
impl PyTable {
    #[new]
    fn new(footer: &[u8], table: &[u8]) -> PyResult<Self> {
        let f = Footer::parse(footer).map_err(check_error)?;
        Ok(PyTable { inner: Table::parse(f, table).map_err(check_error)? })
    }

    #[getter]
    fn content_len(&self) -> u64 {
        self.inner.footer.content_len
    }

    #[getter]
    fn block(&self) -> u32 {
        self.inner.footer.block
    }

    /// ``(first block, end block)`` holding content bytes ``[start, start + length)``.
    fn blocks_for(&self, start: u64, length: u64) -> (u64, u64) {
        self.inner.blocks_for(start, length)
    }

    /// Checks ``data``, whole blocks of content from block ``first`` on.
    fn check(&self, py: Python<'_>, first: u64, data: &[u8]) -> PyResult<()> {
        py.detach(|| self.inner.check(first, data)).map_err(check_error)
    }
}

/// The trailer of ``content`` in one call.
#[pyfunction]
#[pyo3(signature = (content, block = workfile::DEFAULT_BLOCK))]
fn workfile_seal<'py>(py: Python<'py>, content: &[u8], block: u32) -> PyResult<Bound<'py, PyBytes>> {
    let mut sealer = PySealer::new(block)?;
    sealer.update(py, content)?;
    sealer.finish(py)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySealer>()?;
    m.add_class::<PyTable>()?;
    m.add_function(wrap_pyfunction!(workfile_footer, m)?)?;
    m.add_function(wrap_pyfunction!(workfile_seal, m)?)?;
    m.add("WORKFILE_MAGIC", PyBytes::new(m.py(), &workfile::MAGIC))?;
    m.add("WORKFILE_FOOTER_LEN", workfile::FOOTER_LEN)?;
    m.add("WORKFILE_VERSION", workfile::VERSION)?;
    m.add("WORKFILE_BLOCK", workfile::DEFAULT_BLOCK)?;
    Ok(())
}
