//! HTML extraction's Python face (`crate::extract`), for the warc stage's `rs_trafilatura` and
//! `combined` linearizers and its markup-depth check: one page per call, without the GIL; the
//! crate's error is a `ValueError`, a panic it raised (caught) a `RuntimeError`, each naming the
//! extractor.
use crate::extract::{self, ExtractError};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

/// ``(text, quality, page_type)`` of one page by rs-trafilatura with its defaults.
#[pyfunction]
#[pyo3(signature = (html, url = None))]
fn rs_trafilatura_extract(py: Python<'_>, html: &str, url: Option<&str>) -> PyResult<(String, f64, String)> {
    match py.detach(|| extract::rs_trafilatura(html, url)) {
        Ok(e) => Ok((e.text, e.quality, e.page_type)),
        Err(e @ ExtractError::Failed(_)) => Err(PyValueError::new_err(e.to_string())),
        Err(e @ ExtractError::Panic(_)) => Err(PyRuntimeError::new_err(e.to_string())),
    }
}

/// ``(tags, links, paragraphs, cells, list_items, article, main, article_body)`` of a page's HTML:
/// the combined linearizer's counts (`extract::tag_counts`), in one pass without the GIL.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn html_tag_counts(py: Python<'_>, html: &str) -> (usize, usize, usize, usize, usize, bool, bool, bool) {
    let c = py.detach(|| extract::tag_counts(html));
    (c.tags, c.links, c.paragraphs, c.cells, c.list_items, c.article, c.main, c.article_body)
}

/// Whether the HTML (its UTF-8 bytes) nests elements deeper than ``limit`` (`extract::nested_deeper`),
/// without the GIL.
#[pyfunction]
fn html_nested_deeper(py: Python<'_>, html: &[u8], limit: usize) -> bool {
    py.detach(|| extract::nested_deeper(html, limit))
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(rs_trafilatura_extract, m)?)?;
    m.add_function(wrap_pyfunction!(html_tag_counts, m)?)?;
    m.add_function(wrap_pyfunction!(html_nested_deeper, m)?)?;
    m.add("HTML_FLAT_ELEMENTS", extract::FLAT_ELEMENTS.to_vec())?;
    Ok(())
}
