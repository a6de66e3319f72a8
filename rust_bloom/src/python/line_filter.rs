//! The `resiliparse_refined` line filter's Python face (`crate::line_filter`): a page's line
//! features for the bench that fits the model, and the trees with the page's kept text for the
//! extractor; the work runs without the GIL, a malformed model or text is a `ValueError`.
use crate::line_filter::{self, Trees};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::collections::HashSet;

fn title_set(titles: &[String]) -> HashSet<&str> {
    titles.iter().map(String::as_str).collect()
}

/// ``(lines, raws, blanks, x)`` of a page (``refine.page_lines``): ``x`` the features, float64
/// rows of ``LINE_FEATURES``, row after row, as bytes.
#[pyfunction]
#[allow(clippy::type_complexity)]
fn line_features<'py>(
    py: Python<'py>,
    full: &str,
    full_lower: &str,
    main: &str,
    outside: &str,
    titles: Vec<String>,
) -> PyResult<(Vec<String>, Vec<String>, Vec<bool>, Bound<'py, PyBytes>)> {
    let (lines, raws, blanks, x) = py
        .detach(|| {
            line_filter::page_lines(full, full_lower, main, outside, &title_set(&titles)).map(|p| {
                let own = |v: Vec<&str>| v.into_iter().map(str::to_owned).collect::<Vec<_>>();
                (own(p.lines), own(p.raws), p.blanks, p.x)
            })
        })
        .map_err(PyValueError::new_err)?;
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_ne_bytes()).collect();
    Ok((lines, raws, blanks, PyBytes::new(py, &bytes)))
}

/// The line model's trees with its threshold and fallback share (``refine.LineModel``).
#[pyclass(module = "dolma_pipe._rust", name = "LineFilter", frozen)]
struct PyLineFilter {
    trees: Trees,
    threshold: f64,
    fallback_share: f64,
}

#[pymethods]
impl PyLineFilter {
    #[new]
    fn new(
        depth: u32,
        base: f64,
        split_feature: Vec<Vec<i64>>,
        split_threshold: Vec<Vec<f64>>,
        leaf: Vec<Vec<f64>>,
        threshold: f64,
        fallback_share: f64,
    ) -> PyResult<Self> {
        let trees = Trees::new(depth, base, split_feature, split_threshold, leaf).map_err(PyValueError::new_err)?;
        Ok(PyLineFilter { trees, threshold, fallback_share })
    }

    /// Each row's log-odds of being content, float64 bytes, for ``x`` float64 rows of ``LINE_FEATURES``.
    fn log_odds<'py>(&self, py: Python<'py>, x: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let width = line_filter::FEATURES.len() * 8;
        if !x.len().is_multiple_of(width) {
            return Err(PyValueError::new_err(format!(
                "{} bytes are not rows of {} float64 features",
                x.len(),
                width / 8
            )));
        }
        let values: Vec<f64> = x.chunks_exact(8).map(|b| f64::from_ne_bytes(b.try_into().expect("8 bytes"))).collect();
        let odds = py.detach(|| self.trees.log_odds(&values));
        let bytes: Vec<u8> = odds.iter().flat_map(|v| v.to_ne_bytes()).collect();
        Ok(PyBytes::new(py, &bytes))
    }

    /// The page's text by the filter (``line_filter::kept_text``), from the same texts as ``line_features``.
    fn extract(
        &self,
        py: Python<'_>,
        full: &str,
        full_lower: &str,
        main: &str,
        outside: &str,
        titles: Vec<String>,
    ) -> PyResult<String> {
        py.detach(|| -> Result<String, String> {
            let page = line_filter::page_lines(full, full_lower, main, outside, &title_set(&titles))?;
            Ok(line_filter::kept_text(&page, &self.trees, self.threshold, self.fallback_share, main))
        })
        .map_err(PyValueError::new_err)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(line_features, m)?)?;
    m.add_class::<PyLineFilter>()?;
    m.add("LINE_FEATURES", line_filter::FEATURES.to_vec())?;
    Ok(())
}
