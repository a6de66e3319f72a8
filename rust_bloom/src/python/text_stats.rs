//! The rule-tagger kernels' Python face (`crate::text_stats`): batches of documents, converted
//! with the GIL held and processed with it released.
use crate::text_stats::{Gopher, StopWords, C4};
use pyo3::exceptions::PyValueError;
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

/// One document's Gopher measures: (character_count, word_count, the 21 float measures in
/// gopher.py's order, required_word_count or None, unspaced_words).
type GopherRow = (u64, u64, Vec<f64>, Option<u64>, u64);

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

    fn stats_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        lowers: Vec<Option<Bound<'py, PyString>>>,
        langs: Vec<Option<String>>,
    ) -> PyResult<Vec<GopherRow>> {
        same_len("lowers", texts.len(), lowers.len())?;
        same_len("langs", texts.len(), langs.len())?;
        let texts = borrow_strs(&texts)?;
        let lowers = borrow_opt_strs(&lowers)?;
        let g = &self.inner;
        Ok(py.detach(|| {
            texts
                .iter()
                .zip(&lowers)
                .zip(&langs)
                .map(|((t, l), lang)| {
                    let s = g.stats(t, *l, lang.as_deref());
                    let mut v = vec![
                        s.mean_word_length,
                        s.median_word_length,
                        s.hash_to_word_ratio,
                        s.ellipsis_to_word_ratio,
                        s.symbol_to_word_ratio,
                        s.fraction_of_words_with_alpha_character,
                        s.fraction_of_lines_starting_with_bullet_point,
                        s.fraction_of_lines_ending_with_ellipsis,
                        s.fraction_of_duplicate_lines,
                        s.fraction_of_characters_in_duplicate_lines,
                        s.fraction_of_duplicate_paragraphs,
                        s.fraction_of_characters_in_duplicate_paragraphs,
                    ];
                    v.extend_from_slice(&s.ngrams);
                    (s.character_count, s.word_count, v, s.required_word_count, s.unspaced_words)
                })
                .collect()
        }))
    }
}

type Spans = Vec<(u64, u64)>;
/// One document's C4 result: ((no_punct, few_words, ellipsis, javascript, policy) line spans,
/// (naughty, javascript, lorem_ipsum, curly_brace, policy) flags, (line_count, sentences, n_chars)).
type C4Row = ((Spans, Spans, Spans, Spans, Spans), (bool, bool, bool, bool, bool), (u64, u64, u64));

#[pyclass(module = "dolma_pipe._rust", name = "C4Kernel", frozen)]
struct PyC4Kernel {
    inner: C4,
}

#[pymethods]
impl PyC4Kernel {
    #[new]
    fn new(bad_words: Vec<String>, min_words_per_line: usize) -> PyResult<Self> {
        C4::new(&bad_words, min_words_per_line).map(|inner| PyC4Kernel { inner }).map_err(PyValueError::new_err)
    }

    fn predict_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        lowers: Vec<Option<Bound<'py, PyString>>>,
    ) -> PyResult<Vec<C4Row>> {
        same_len("lowers", texts.len(), lowers.len())?;
        let texts = borrow_strs(&texts)?;
        let lowers = borrow_opt_strs(&lowers)?;
        let c4 = &self.inner;
        Ok(py.detach(|| {
            texts
                .iter()
                .zip(&lowers)
                .map(|(t, l)| {
                    let r = c4.predict(t, *l);
                    (
                        (r.no_punct, r.few_words, r.ellipsis, r.js_lines, r.policy_lines),
                        (r.has_naughty_word, r.has_javascript, r.has_lorem_ipsum, r.has_curly_brace, r.has_policy),
                        (r.line_count, r.sentences, r.n_chars),
                    )
                })
                .collect()
        }))
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
        same_len("lowers", texts.len(), lowers.len())?;
        let results = {
            let texts = borrow_strs(&texts)?;
            let lowers = borrow_opt_strs(&lowers)?;
            let c4 = &self.inner;
            py.detach(|| texts.iter().zip(&lowers).map(|(t, l)| c4.predict(t, *l)).collect::<Vec<_>>())
        };
        let one = PyFloat::new(py, 1.0).into_any();
        let zero = PyFloat::new(py, 0.0).into_any();
        let span = |s: u64, e: u64, score: &Bound<'py, PyAny>| -> PyResult<Bound<'py, PyList>> {
            PyList::new(py, [s.into_pyobject(py)?.into_any(), e.into_pyobject(py)?.into_any(), score.clone()])
        };
        let mut out = Vec::with_capacity(results.len());
        for r in results {
            let d = PyDict::new(py);
            let lines = |name: &str, spans: &[(u64, u64)], always: bool| -> PyResult<()> {
                if always || !spans.is_empty() {
                    let list = PyList::empty(py);
                    for &(s, e) in spans {
                        list.append(span(s, e, &one)?)?;
                    }
                    d.set_item(name, list)?;
                }
                Ok(())
            };
            lines("lines_with_no_ending_punctuation", &r.no_punct, true)?;
            lines("lines_with_too_few_words", &r.few_words, true)?;
            lines("lines_ending_with_ellipsis", &r.ellipsis, false)?;
            lines("lines_with_javascript", &r.js_lines, false)?;
            lines("lines_with_policy", &r.policy_lines, false)?;
            let n = r.n_chars;
            let doc = |name: &str, score: &Bound<'py, PyAny>| -> PyResult<()> {
                d.set_item(name, PyList::new(py, [span(0, n, score)?])?)
            };
            for (name, flag) in [
                ("has_naughty_word", r.has_naughty_word),
                ("has_javascript", r.has_javascript),
                ("has_lorem_ipsum", r.has_lorem_ipsum),
                ("has_curly_brace", r.has_curly_brace),
                ("has_policy", r.has_policy),
            ] {
                if flag {
                    doc(name, &one)?;
                }
            }
            doc("line_count", PyFloat::new(py, r.line_count as f64).as_any())?;
            doc("kept_sentence_count", PyFloat::new(py, r.sentences as f64).as_any())?;
            let drop = r.has_naughty_word || r.has_lorem_ipsum || r.has_curly_brace || r.sentences < min_sentences;
            doc("keep", if drop { &zero } else { &one })?;
            out.push(d);
        }
        Ok(out)
    }

    fn has_bad_word(&self, lower: &str) -> bool {
        self.inner.has_bad_word(lower)
    }
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGopherKernel>()?;
    m.add_class::<PyC4Kernel>()?;
    Ok(())
}
