//! The report's per-document columns (`crate::report`) for `summarize.py`: batches of raw lines
//! in, columns out as little-endian bytes for `numpy.frombuffer`. A batch this pass does not read
//! is a ValueError naming why (the caller then reads the file with its Python pass).
use crate::report::DocumentColumns;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

fn le_u32<'py>(py: Python<'py>, v: &[u32]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

fn le_u64<'py>(py: Python<'py>, v: &[u64]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

fn le_f64<'py>(py: Python<'py>, v: &[f64]) -> Bound<'py, PyBytes> {
    PyBytes::new(py, &v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>())
}

#[pyclass(module = "dolma_pipe._rust", name = "DocumentColumns")]
struct PyDocumentColumns {
    inner: DocumentColumns,
}

#[pymethods]
impl PyDocumentColumns {
    /// `sample_bytes`: per source, the texts of its first documents are kept until this many bytes.
    #[new]
    fn new(sample_bytes: u64) -> Self {
        PyDocumentColumns { inner: DocumentColumns::new(sample_bytes) }
    }

    /// Read a batch of document lines and, per attribute set, as many rows; the documents' ids.
    fn add<'py>(
        &mut self,
        py: Python<'py>,
        docs: Vec<Bound<'py, PyBytes>>,
        attrs: Vec<Vec<Bound<'py, PyBytes>>>,
    ) -> PyResult<Vec<String>> {
        let doc_refs: Vec<&[u8]> = docs.iter().map(|b| b.as_bytes()).collect();
        let attr_refs: Vec<Vec<&[u8]>> = attrs.iter().map(|set| set.iter().map(|b| b.as_bytes()).collect()).collect();
        let inner = &mut self.inner;
        py.detach(|| inner.add(&doc_refs, &attr_refs)).map(|b| b.ids).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    #[getter]
    fn docs(&self) -> usize {
        self.inner.docs()
    }

    #[getter]
    fn sources(&self) -> Vec<String> {
        self.inner.sources.clone()
    }

    #[getter]
    fn keys(&self) -> Vec<String> {
        self.inner.keys.clone()
    }

    /// Per document: source index (u32), characters and bytes (u64).
    fn documents<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("src", le_u32(py, &self.inner.src))?;
        d.set_item("chars", le_u64(py, &self.inner.chars))?;
        d.set_item("bytes", le_u64(py, &self.inner.bytes))?;
        Ok(d)
    }

    /// Key `k`'s columns: document indices as u32, scores as f64, lengths as u64.
    fn column<'py>(&self, py: Python<'py>, k: usize) -> PyResult<Bound<'py, PyDict>> {
        let c = self.inner.columns.get(k).ok_or_else(|| PyValueError::new_err(format!("no key {k}")))?;
        let d = PyDict::new(py);
        d.set_item("present", le_u32(py, &c.present))?;
        d.set_item("score_docs", le_u32(py, &c.score_docs))?;
        d.set_item("scores", le_f64(py, &c.scores))?;
        d.set_item("span_docs", le_u32(py, &c.span_docs))?;
        d.set_item("span_lengths", le_u64(py, &c.span_lengths))?;
        d.set_item("covered_docs", le_u32(py, &c.covered_docs))?;
        d.set_item("covered", le_u64(py, &c.covered))?;
        Ok(d)
    }

    /// The documents from index `start` on where attribute `name` is a non-empty list.
    fn present_from(&self, name: &str, start: u32) -> Vec<u32> {
        match self.inner.keys.iter().position(|k| k == name) {
            None => Vec::new(),
            Some(k) => {
                let p = &self.inner.columns[k].present;
                p[p.partition_point(|&d| d < start)..].to_vec()
            }
        }
    }

    /// Per source (in `sources` order): the texts kept for token weights.
    #[getter]
    fn sample_texts(&self) -> Vec<Vec<String>> {
        self.inner.sample_texts.clone()
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyDocumentColumns>()?;
    Ok(())
}
