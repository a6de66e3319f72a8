//! The rule-tagger kernels' Python face (`crate::text_stats`): batches of documents, converted
//! with the GIL held and processed with it released.
use crate::text_stats::{c4_keep, C4Result, Gopher, GopherStats, StopWords, C4};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyList, PyString};
use std::collections::HashMap;

fn borrow_strs<'a, 'py>(items: &'a [Bound<'py, PyString>]) -> PyResult<Vec<&'a str>> {
    items.iter().map(|t| t.to_str()).collect()
}

fn borrow_opt_strs<'a, 'py>(items: &'a [Option<Bound<'py, PyString>>]) -> PyResult<Vec<Option<&'a str>>> {
    items.iter().map(|t| t.as_ref().map(|t| t.to_str()).transpose()).collect()
}

fn same_len(what: &str, a: usize, b: usize) -> PyResult<()> {
    if a != b {
        return Err(PyValueError::new_err(format!("{what}: {b} items for {a} texts")));
    }
    Ok(())
}

/// One document's Gopher measures as gopher.py's `attributes` returns them: a dict by type name,
/// in its order, counts as int and the rest as float; `required_word_count` only when the
/// language has a stop-word list; `_unspaced_words` (not an attribute) for the verdict.
fn gopher_dict<'py>(py: Python<'py>, s: &GopherStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    macro_rules! set {
        ($name:literal, $value:expr) => {
            d.set_item(intern!(py, $name), $value)?
        };
    }
    set!("character_count", s.character_count);
    set!("word_count", s.word_count);
    set!("mean_word_length", s.mean_word_length);
    set!("median_word_length", s.median_word_length);
    set!("hash_to_word_ratio", s.hash_to_word_ratio);
    set!("ellipsis_to_word_ratio", s.ellipsis_to_word_ratio);
    set!("symbol_to_word_ratio", s.symbol_to_word_ratio);
    set!("fraction_of_words_with_alpha_character", s.fraction_of_words_with_alpha_character);
    if let Some(count) = s.required_word_count {
        set!("required_word_count", count);
    }
    set!("fraction_of_lines_starting_with_bullet_point", s.fraction_of_lines_starting_with_bullet_point);
    set!("fraction_of_lines_ending_with_ellipsis", s.fraction_of_lines_ending_with_ellipsis);
    set!("fraction_of_duplicate_lines", s.fraction_of_duplicate_lines);
    set!("fraction_of_characters_in_duplicate_lines", s.fraction_of_characters_in_duplicate_lines);
    set!("fraction_of_duplicate_paragraphs", s.fraction_of_duplicate_paragraphs);
    set!("fraction_of_characters_in_duplicate_paragraphs", s.fraction_of_characters_in_duplicate_paragraphs);
    let [n2, n3, n4, n5, n6, n7, n8, n9, n10] = s.ngrams;
    set!("fraction_of_characters_in_most_common_2grams", n2);
    set!("fraction_of_characters_in_most_common_3grams", n3);
    set!("fraction_of_characters_in_most_common_4grams", n4);
    set!("fraction_of_characters_in_duplicate_5grams", n5);
    set!("fraction_of_characters_in_duplicate_6grams", n6);
    set!("fraction_of_characters_in_duplicate_7grams", n7);
    set!("fraction_of_characters_in_duplicate_8grams", n8);
    set!("fraction_of_characters_in_duplicate_9grams", n9);
    set!("fraction_of_characters_in_duplicate_10grams", n10);
    set!("_unspaced_words", s.unspaced_words);
    Ok(d)
}

#[pyclass(module = "dolma_pipe._rust", name = "GopherKernel", frozen)]
struct PyGopherKernel {
    inner: Gopher,
}

#[pymethods]
impl PyGopherKernel {
    /// stop_words: (language, regex alternatives in order (lower-cased), lower-cased word set).
    #[new]
    fn new(stop_words: Vec<(String, Vec<String>, Vec<String>)>) -> PyResult<Self> {
        let mut map = HashMap::new();
        for (lang, alternatives, set) in stop_words {
            if alternatives.iter().any(|a| a.is_empty()) {
                return Err(PyValueError::new_err(format!("gopher: empty stop word for {lang:?}")));
            }
            map.insert(lang, StopWords::new(alternatives, set.into_iter().collect()));
        }
        Ok(PyGopherKernel { inner: Gopher::new(map) })
    }

    /// Per text, gopher.py's `attributes` dict (see `gopher_dict`).
    fn stats_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        lowers: Vec<Option<Bound<'py, PyString>>>,
        langs: Vec<Option<String>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        same_len("lowers", texts.len(), lowers.len())?;
        same_len("langs", texts.len(), langs.len())?;
        let stats = {
            let texts = borrow_strs(&texts)?;
            let lowers = borrow_opt_strs(&lowers)?;
            let g = &self.inner;
            py.detach(|| {
                texts
                    .iter()
                    .zip(&lowers)
                    .zip(&langs)
                    .map(|((t, l), lang)| g.stats(t, *l, lang.as_deref()))
                    .collect::<Vec<_>>()
            })
        };
        stats.iter().map(|s| gopher_dict(py, s)).collect()
    }
}

type Spans = Vec<(u64, u64)>;

/// One document's C4 result, fields named as c4.py's attribute types.
#[pyclass(module = "dolma_pipe._rust", name = "C4Result", frozen)]
struct PyC4Result {
    inner: C4Result,
    keep: bool,
}

#[pymethods]
impl PyC4Result {
    #[getter]
    fn lines_with_no_ending_punctuation(&self) -> Spans {
        self.inner.lines_with_no_ending_punctuation.clone()
    }
    #[getter]
    fn lines_with_too_few_words(&self) -> Spans {
        self.inner.lines_with_too_few_words.clone()
    }
    #[getter]
    fn lines_ending_with_ellipsis(&self) -> Spans {
        self.inner.lines_ending_with_ellipsis.clone()
    }
    #[getter]
    fn lines_with_javascript(&self) -> Spans {
        self.inner.lines_with_javascript.clone()
    }
    #[getter]
    fn lines_with_policy(&self) -> Spans {
        self.inner.lines_with_policy.clone()
    }
    #[getter]
    fn has_naughty_word(&self) -> bool {
        self.inner.has_naughty_word
    }
    #[getter]
    fn has_javascript(&self) -> bool {
        self.inner.has_javascript
    }
    #[getter]
    fn has_lorem_ipsum(&self) -> bool {
        self.inner.has_lorem_ipsum
    }
    #[getter]
    fn has_curly_brace(&self) -> bool {
        self.inner.has_curly_brace
    }
    #[getter]
    fn has_policy(&self) -> bool {
        self.inner.has_policy
    }
    #[getter]
    fn line_count(&self) -> u64 {
        self.inner.line_count
    }
    #[getter]
    fn kept_sentence_count(&self) -> u64 {
        self.inner.kept_sentence_count
    }
    #[getter]
    fn length(&self) -> u64 {
        self.inner.length
    }
    #[getter]
    fn keep(&self) -> bool {
        self.keep
    }

    fn __repr__(&self) -> String {
        let r = &self.inner;
        format!(
            "<C4Result length={} line_count={} kept_sentence_count={} keep={}>",
            r.length,
            r.line_count,
            r.kept_sentence_count,
            if self.keep { "True" } else { "False" }
        )
    }
}

#[pyclass(module = "dolma_pipe._rust", name = "C4Kernel", frozen)]
struct PyC4Kernel {
    inner: C4,
}

impl PyC4Kernel {
    fn predict_all(
        &self,
        py: Python<'_>,
        texts: &[Bound<'_, PyString>],
        lowers: &[Option<Bound<'_, PyString>>],
    ) -> PyResult<Vec<C4Result>> {
        same_len("lowers", texts.len(), lowers.len())?;
        let texts = borrow_strs(texts)?;
        let lowers = borrow_opt_strs(lowers)?;
        let c4 = &self.inner;
        Ok(py.detach(|| texts.iter().zip(&lowers).map(|(t, l)| c4.predict(t, *l)).collect()))
    }
}

#[pymethods]
impl PyC4Kernel {
    #[new]
    fn new(bad_words: Vec<String>, min_words_per_line: usize) -> PyResult<Self> {
        C4::new(&bad_words, min_words_per_line).map(|inner| PyC4Kernel { inner }).map_err(PyValueError::new_err)
    }

    /// Per text, its `C4Result` (`keep` judged with `min_sentences`).
    fn predict_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        lowers: Vec<Option<Bound<'py, PyString>>>,
        min_sentences: u64,
    ) -> PyResult<Vec<PyC4Result>> {
        let results = self.predict_all(py, &texts, &lowers)?;
        Ok(results.into_iter().map(|inner| PyC4Result { keep: inner.keep(min_sentences), inner }).collect())
    }

    /// Like `predict_batch`, but each document's result is already Dolma's grouped mapping
    /// `{type: [[start, end, score], ...]}` as c4.py's spans would group (see Tagger.group).
    fn predict_grouped_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        lowers: Vec<Option<Bound<'py, PyString>>>,
        min_sentences: u64,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let results = self.predict_all(py, &texts, &lowers)?;
        let one = PyFloat::new(py, 1.0).into_any();
        let zero = PyFloat::new(py, 0.0).into_any();
        let span = |s: u64, e: u64, score: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyList>> {
            PyList::new(py, [s.into_pyobject(py)?.into_any(), e.into_pyobject(py)?.into_any(), score.clone()])
        };
        let mut out = Vec::with_capacity(results.len());
        for r in results {
            let d = PyDict::new(py);
            let lines = |name: &Bound<'py, PyString>, spans: &[(u64, u64)], always: bool| -> PyResult<()> {
                if always || !spans.is_empty() {
                    let list = PyList::empty(py);
                    for &(s, e) in spans {
                        list.append(span(s, e, &one)?)?;
                    }
                    d.set_item(name, list)?;
                }
                Ok(())
            };
            lines(intern!(py, "lines_with_no_ending_punctuation"), &r.lines_with_no_ending_punctuation, true)?;
            lines(intern!(py, "lines_with_too_few_words"), &r.lines_with_too_few_words, true)?;
            lines(intern!(py, "lines_ending_with_ellipsis"), &r.lines_ending_with_ellipsis, false)?;
            lines(intern!(py, "lines_with_javascript"), &r.lines_with_javascript, false)?;
            lines(intern!(py, "lines_with_policy"), &r.lines_with_policy, false)?;
            let n = r.length;
            let doc = |name: &Bound<'py, PyString>, score: &Bound<'py, PyAny>| -> PyResult<()> {
                d.set_item(name, PyList::new(py, [span(0, n, score)?])?)
            };
            for (name, flag) in [
                (intern!(py, "has_naughty_word"), r.has_naughty_word),
                (intern!(py, "has_javascript"), r.has_javascript),
                (intern!(py, "has_lorem_ipsum"), r.has_lorem_ipsum),
                (intern!(py, "has_curly_brace"), r.has_curly_brace),
                (intern!(py, "has_policy"), r.has_policy),
            ] {
                if flag {
                    doc(name, &one)?;
                }
            }
            doc(intern!(py, "line_count"), PyFloat::new(py, r.line_count as f64).as_any())?;
            doc(intern!(py, "kept_sentence_count"), PyFloat::new(py, r.kept_sentence_count as f64).as_any())?;
            doc(intern!(py, "keep"), if r.keep(min_sentences) { &one } else { &zero })?;
            out.push(d);
        }
        Ok(out)
    }

    fn has_bad_word(&self, lower: &str) -> bool {
        self.inner.has_bad_word(lower)
    }
}

/// The C4 page verdict (`crate::text_stats::c4_keep`), for c4.py's Python reference.
#[pyfunction(name = "c4_keep")]
#[pyo3(signature = (*, has_naughty_word, has_lorem_ipsum, has_curly_brace, kept_sentence_count, min_sentences))]
fn c4_keep_py(
    has_naughty_word: bool,
    has_lorem_ipsum: bool,
    has_curly_brace: bool,
    kept_sentence_count: u64,
    min_sentences: u64,
) -> bool {
    c4_keep(has_naughty_word, has_lorem_ipsum, has_curly_brace, kept_sentence_count, min_sentences)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGopherKernel>()?;
    m.add_class::<PyC4Kernel>()?;
    m.add_class::<PyC4Result>()?;
    m.add_function(wrap_pyfunction!(c4_keep_py, m)?)?;
    Ok(())
}
