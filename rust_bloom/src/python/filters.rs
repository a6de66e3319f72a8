//! The mixer rules' Python face (`crate::filters`): `check_rule` to validate one expression when a
//! config loads, `rule_attributes` for the attribute names it reads, and `DocumentMixer`, which
//! runs a stream's rules over batches of raw lines.
//! jaq's values are reference-counted (not `Send`), so the class is `unsendable` and batches run
//! with the GIL held; workers are separate processes.
use crate::filters::{BatchError, FilterError, FilterRules, MixRules, SpanRule, Syntax};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

fn syntax(name: &str) -> PyResult<Syntax> {
    match name {
        "jq" => Ok(Syntax::Jq),
        "jsonpath" => Ok(Syntax::JsonPath),
        other => Err(PyValueError::new_err(format!("unknown rule syntax {other:?} (jq or jsonpath)"))),
    }
}

fn error_tuple(e: &FilterError) -> (Option<usize>, String) {
    match e {
        FilterError::Compile { column, message, .. } => (*column, message.clone()),
        FilterError::Eval { message, .. } => (None, message.clone()),
    }
}

/// Compile one rule; `None` when it compiles, else `(column or None, message)`.
/// `kind` is "filter" (a filter rule), "span" (a span selector) or "replacement".
#[pyfunction]
fn check_rule(kind: &str, syntax_name: &str, expr: &str) -> PyResult<Option<(Option<usize>, String)>> {
    let result = match kind {
        "filter" => FilterRules::new(syntax(syntax_name)?, &[expr.to_string()], &[]).map(|_| ()),
        "span" => crate::filters::selector::Selector::new(expr, syntax(syntax_name)? == Syntax::Jq).map(|_| ()),
        "replacement" => crate::filters::selector::ReplacementText::new(expr).map(|_| ()),
        other => return Err(PyValueError::new_err(format!("unknown rule kind {other:?}"))),
    };
    Ok(result.err().map(|e| error_tuple(&e)))
}

/// The attribute names a filter rule or span selector reads as fixed keys of `attributes`, in
/// order (see `crate::filters::references`); ValueError when it does not parse.
#[pyfunction]
fn rule_attributes(syntax_name: &str, expr: &str) -> PyResult<Vec<String>> {
    let names = match syntax(syntax_name)? {
        Syntax::Jq => crate::filters::references::jq_attribute_names(expr),
        Syntax::JsonPath => crate::filters::references::jsonpath_attribute_names(expr),
    };
    names.map_err(|e| PyValueError::new_err(e.to_string()))
}

#[pyclass(module = "dolma_pipe._rust", name = "DocumentMixer", unsendable)]
struct PyDocumentMixer {
    inner: MixRules,
}

type SpanArgs = (String, String, Option<f64>, Option<f64>, String);

#[pymethods]
impl PyDocumentMixer {
    /// spans: (selector, syntax, min_score, max_score, replacement) per span_replacement entry.
    #[new]
    #[pyo3(signature = (filter_syntax, include, exclude, spans, discard_fields, min_text_length, attribute_sets, provenance, collect))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        filter_syntax: Option<&str>,
        include: Vec<String>,
        exclude: Vec<String>,
        spans: Vec<SpanArgs>,
        discard_fields: Vec<String>,
        min_text_length: usize,
        attribute_sets: usize,
        provenance: bool,
        collect: bool,
    ) -> PyResult<Self> {
        let filter = match filter_syntax {
            None => FilterRules::None,
            Some(s) => {
                FilterRules::new(syntax(s)?, &include, &exclude).map_err(|e| PyValueError::new_err(e.to_string()))?
            }
        };
        let spans = spans
            .into_iter()
            .map(|(span, s, min_score, max_score, replacement)| {
                Ok(SpanRule { span, syntax: syntax(&s)?, min_score, max_score, replacement })
            })
            .collect::<PyResult<Vec<_>>>()?;
        let inner = MixRules::new(filter, &spans, discard_fields, min_text_length, attribute_sets, provenance, collect)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(PyDocumentMixer { inner })
    }

    /// Decide and count only (no span replacement, no output lines): a report's verdicts.
    fn set_write(&mut self, write: bool) {
        self.inner.set_write(write);
    }

    /// Run the rules over document lines and the next rows of each attribute set; returns a dict
    /// (see `dolma_pipe/_rust.pyi`).
    fn process<'py>(
        &self,
        py: Python<'py>,
        docs: Vec<Bound<'py, PyBytes>>,
        linenos: Vec<u64>,
        attrs: Vec<Vec<Bound<'py, PyBytes>>>,
        file_name: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        if docs.len() != linenos.len() {
            return Err(PyValueError::new_err(format!("{} line numbers for {} lines", linenos.len(), docs.len())));
        }
        let doc_refs: Vec<&[u8]> = docs.iter().map(|b| b.as_bytes()).collect();
        let attr_refs: Vec<Vec<&[u8]>> = attrs.iter().map(|set| set.iter().map(|b| b.as_bytes()).collect()).collect();
        let b = self.inner.process(&doc_refs, &linenos, &attr_refs, file_name);
        let d = PyDict::new(py);
        d.set_item("out", PyBytes::new(py, &b.out))?;
        d.set_item("line_lengths", b.line_lengths)?;
        d.set_item("consumed", b.consumed)?;
        d.set_item("docs", b.docs)?;
        d.set_item("kept", b.kept)?;
        d.set_item("removed_include", b.removed_include)?;
        d.set_item("removed_exclude", b.removed_exclude)?;
        d.set_item("matched_include", b.matched_include)?;
        d.set_item("matched_exclude", b.matched_exclude)?;
        d.set_item("failed_include", b.failed_include)?;
        d.set_item("failed_exclude", b.failed_exclude)?;
        d.set_item("removed_short", b.removed_short)?;
        d.set_item("spans_replaced", b.spans_replaced)?;
        d.set_item("bytes_in", b.bytes_in)?;
        let bad = PyList::empty(py);
        for x in &b.bad {
            bad.append((x.index, x.kind, &x.message))?;
        }
        d.set_item("bad", bad)?;
        d.set_item("ids", b.ids)?;
        d.set_item("texts", b.texts)?;
        d.set_item("keys", b.keys)?;
        d.set_item("matches", b.matches)?;
        let error = match &b.error {
            None => None,
            Some(BatchError::AttributeMismatch { doc, set, row, doc_id, row_id }) => {
                Some(("mismatch", *doc, *set, *row, format!("id {row_id:?} does not match document id {doc_id:?}")))
            }
            Some(BatchError::AttributesEnded { doc, set, doc_id }) => {
                Some(("ended", *doc, *set, 0, format!("no row for document id {doc_id:?}")))
            }
            Some(BatchError::BadAttributeRow { set, row, message }) => {
                Some(("bad_row", 0, *set, *row, message.clone()))
            }
            Some(BatchError::Rule { doc, error }) => Some(("rule", *doc, 0, 0, error.to_string())),
        };
        d.set_item("error", error)?;
        Ok(d)
    }
}

/// `data` as one gzip member (mtime 0) at `level`, compressed with the GIL released.
#[pyfunction]
fn gzip_member<'py>(py: Python<'py>, data: &[u8], level: u32) -> Bound<'py, PyBytes> {
    let out = py.detach(|| crate::filters::gzip::member(data, level));
    PyBytes::new(py, &out)
}

/// Decompresses a gzip file fed chunk by chunk (zlib-rs, with the GIL released).
#[pyclass(module = "dolma_pipe._rust", name = "GzipInflater")]
#[derive(Default)]
struct PyGzipInflater {
    inner: crate::filters::gzip::Inflater,
}

#[pymethods]
impl PyGzipInflater {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// The bytes this chunk completes; ValueError if the data is not gzip or is corrupt.
    fn feed<'py>(&mut self, py: Python<'py>, chunk: &[u8]) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &mut self.inner;
        let out = py.detach(|| inner.feed(chunk)).map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }

    /// The last bytes; ValueError if the file ends inside a member (truncated).
    fn finish<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let out = self.inner.finish().map_err(PyValueError::new_err)?;
        Ok(PyBytes::new(py, &out))
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check_rule, m)?)?;
    m.add_function(wrap_pyfunction!(rule_attributes, m)?)?;
    m.add_function(wrap_pyfunction!(gzip_member, m)?)?;
    m.add_class::<PyGzipInflater>()?;
    m.add_class::<PyDocumentMixer>()?;
    Ok(())
}
