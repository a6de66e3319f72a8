//! The rule-tagger kernels' Python face (`crate::text_stats`): batches of documents, converted
//! with the GIL held and processed with it released.
use crate::text::{char_len, dolma_paragraphs};
use crate::text_stats::{
    c4_keep, pii_windows, round_score, C4Mode, C4Result, DolmaGopherStats, Gopher, GopherMode, GopherStats, StopWords,
    C4,
};
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

/// A list `[start, end, score]` (the grouped mapping's span).
fn span_list<'py>(py: Python<'py>, start: u64, end: u64, score: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, [start.into_pyobject(py)?.into_any(), end.into_pyobject(py)?.into_any(), score.clone()])
}

/// One document's Dolma Gopher measures as the grouped mapping Dolma writes, in its span order:
/// `{type: [[0, len(text), round(value, 5)]]}`, the n-gram types only where the text has n words.
fn dolma_gopher_dict<'py>(py: Python<'py>, s: &DolmaGopherStats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    let end = s.character_count;
    let put = |name: &Bound<'py, PyString>, value: f64| -> PyResult<()> {
        let score = PyFloat::new(py, round_score(value)).into_any();
        d.set_item(name, PyList::new(py, [span_list(py, 0, end, &score)?])?)
    };
    let names = [
        intern!(py, "fraction_of_characters_in_most_common_2grams"),
        intern!(py, "fraction_of_characters_in_most_common_3grams"),
        intern!(py, "fraction_of_characters_in_most_common_4grams"),
        intern!(py, "fraction_of_characters_in_duplicate_5grams"),
        intern!(py, "fraction_of_characters_in_duplicate_6grams"),
        intern!(py, "fraction_of_characters_in_duplicate_7grams"),
        intern!(py, "fraction_of_characters_in_duplicate_8grams"),
        intern!(py, "fraction_of_characters_in_duplicate_9grams"),
        intern!(py, "fraction_of_characters_in_duplicate_10grams"),
    ];
    for (name, value) in names.iter().zip(s.ngrams) {
        if let Some(v) = value {
            put(name, v)?;
        }
    }
    put(intern!(py, "character_count"), s.character_count as f64)?;
    put(intern!(py, "word_count"), s.word_count as f64)?;
    put(intern!(py, "median_word_length"), s.median_word_length)?;
    put(intern!(py, "symbol_to_word_ratio"), s.symbol_to_word_ratio)?;
    put(intern!(py, "fraction_of_words_with_alpha_character"), s.fraction_of_words_with_alpha_character)?;
    put(intern!(py, "required_word_count"), s.required_word_count as f64)?;
    put(intern!(py, "fraction_of_lines_starting_with_bullet_point"), s.fraction_of_lines_starting_with_bullet_point)?;
    put(intern!(py, "fraction_of_lines_ending_with_ellipsis"), s.fraction_of_lines_ending_with_ellipsis)?;
    put(intern!(py, "fraction_of_duplicate_lines"), s.fraction_of_duplicate_lines)?;
    put(intern!(py, "fraction_of_characters_in_duplicate_lines"), s.fraction_of_characters_in_duplicate_lines)?;
    Ok(d)
}

fn gopher_mode(mode: &str) -> PyResult<GopherMode> {
    match mode {
        "paper" => Ok(GopherMode::Paper),
        "dolma_v1" => Ok(GopherMode::Dolma { ignore_empty_lines: false }),
        "dolma_v2" => Ok(GopherMode::Dolma { ignore_empty_lines: true }),
        _ => {
            Err(PyValueError::new_err(format!("gopher: mode must be 'paper', 'dolma_v1' or 'dolma_v2', got {mode:?}")))
        }
    }
}

#[pyclass(module = "dolma_pipe._rust", name = "GopherKernel", frozen)]
struct PyGopherKernel {
    inner: Gopher,
    mode: GopherMode,
}

#[pymethods]
impl PyGopherKernel {
    /// stop_words: (language, regex alternatives in order (lower-cased), lower-cased word set),
    /// used in paper mode. mode: "paper", "dolma_v1" or "dolma_v2".
    #[new]
    #[pyo3(signature = (stop_words, mode = "paper"))]
    fn new(stop_words: Vec<(String, Vec<String>, Vec<String>)>, mode: &str) -> PyResult<Self> {
        let mode = gopher_mode(mode)?;
        let mut map = HashMap::new();
        for (lang, alternatives, set) in stop_words {
            if alternatives.iter().any(|a| a.is_empty()) {
                return Err(PyValueError::new_err(format!("gopher: empty stop word for {lang:?}")));
            }
            map.insert(lang, StopWords::new(alternatives, set.into_iter().collect()));
        }
        Ok(PyGopherKernel { inner: Gopher::new(map), mode })
    }

    #[getter]
    fn mode(&self) -> &'static str {
        match self.mode {
            GopherMode::Paper => "paper",
            GopherMode::Dolma { ignore_empty_lines: false } => "dolma_v1",
            GopherMode::Dolma { ignore_empty_lines: true } => "dolma_v2",
        }
    }

    /// Dolma modes: per text, Dolma's grouped mapping (see `dolma_gopher_dict`).
    fn grouped_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let GopherMode::Dolma { ignore_empty_lines } = self.mode else {
            return Err(PyValueError::new_err(
                "gopher: grouped_batch is for the Dolma modes; paper mode has stats_batch",
            ));
        };
        let stats = {
            let texts = borrow_strs(&texts)?;
            py.detach(|| texts.iter().map(|t| Gopher::dolma_stats(t, ignore_empty_lines)).collect::<Vec<_>>())
        };
        stats.iter().map(|s| dolma_gopher_dict(py, s)).collect()
    }

    /// Paper mode: per text, gopher.py's `attributes` dict (see `gopher_dict`).
    fn stats_batch<'py>(
        &self,
        py: Python<'py>,
        texts: Vec<Bound<'py, PyString>>,
        lowers: Vec<Option<Bound<'py, PyString>>>,
        langs: Vec<Option<String>>,
    ) -> PyResult<Vec<Bound<'py, PyDict>>> {
        if self.mode != GopherMode::Paper {
            return Err(PyValueError::new_err(
                "gopher: stats_batch is paper mode's; the Dolma modes have grouped_batch",
            ));
        }
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
    mode: C4Mode,
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
    /// mode: "paper" (our `c4`), "dolma_v1" or "dolma_v2" (see `crate::text_stats::C4Mode`).
    #[new]
    #[pyo3(signature = (bad_words, min_words_per_line, mode = "paper"))]
    fn new(bad_words: Vec<String>, min_words_per_line: usize, mode: &str) -> PyResult<Self> {
        let mode = match mode {
            "paper" => C4Mode::Paper,
            "dolma_v1" => C4Mode::DolmaV1,
            "dolma_v2" => C4Mode::DolmaV2,
            _ => {
                return Err(PyValueError::new_err(format!(
                    "c4: mode must be 'paper', 'dolma_v1' or 'dolma_v2', got {mode:?}"
                )))
            }
        };
        C4::new(&bad_words, min_words_per_line, mode)
            .map(|inner| PyC4Kernel { inner, mode })
            .map_err(PyValueError::new_err)
    }

    #[getter]
    fn mode(&self) -> &'static str {
        match self.mode {
            C4Mode::Paper => "paper",
            C4Mode::DolmaV1 => "dolma_v1",
            C4Mode::DolmaV2 => "dolma_v2",
        }
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

    /// Like `predict_batch`, but each document's result is already the grouped mapping
    /// `{type: [[start, end, score], ...]}` as c4.py's spans would group (see Tagger.group). Paper
    /// mode: the two default line types always, the other line types and the flags when not
    /// empty/true, `line_count`, `kept_sentence_count`, `keep`. Dolma modes: what Dolma writes,
    /// the line types and the flags only when not empty/true, then `line_count`.
    #[pyo3(signature = (texts, lowers, min_sentences = 3))]
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
        let span = |s: u64, e: u64, score: &Bound<'py, PyAny>| span_list(py, s, e, score);
        let paper = self.mode == C4Mode::Paper;
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
            lines(intern!(py, "lines_with_no_ending_punctuation"), &r.lines_with_no_ending_punctuation, paper)?;
            lines(intern!(py, "lines_with_too_few_words"), &r.lines_with_too_few_words, paper)?;
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
            if paper {
                doc(intern!(py, "kept_sentence_count"), PyFloat::new(py, r.kept_sentence_count as f64).as_any())?;
                doc(intern!(py, "keep"), if r.keep(min_sentences) { &one } else { &zero })?;
            }
            out.push(d);
        }
        Ok(out)
    }

    /// The mode's bad-word test on lower-cased text (paper: word boundaries; Dolma: whole
    /// split() words and phrases anywhere).
    fn has_bad_word(&self, lower: &str) -> bool {
        if self.mode == C4Mode::Paper {
            self.inner.has_bad_word(lower)
        } else {
            self.inner.has_bad_word_dolma(lower)
        }
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

/// Per text, what Dolma's `char_length_with_paragraphs_v1` writes: `paragraph` spans over Dolma's
/// paragraphs (`crate::text::dolma_paragraphs`: non-blank lines with their newline) scored by
/// their length, absent when there is none, and `document` scored by `len(text)`.
#[pyfunction]
fn char_length_grouped_batch<'py>(
    py: Python<'py>,
    texts: Vec<Bound<'py, PyString>>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let paragraphs: Vec<(u64, Vec<(u64, u64)>)> = {
        let texts = borrow_strs(&texts)?;
        py.detach(|| texts.iter().map(|t| (char_len(t) as u64, dolma_paragraphs(t))).collect())
    };
    let mut out = Vec::with_capacity(paragraphs.len());
    for (n, spans) in paragraphs {
        let d = PyDict::new(py);
        if !spans.is_empty() {
            let list = PyList::empty(py);
            for (s, e) in spans {
                list.append(span_list(py, s, e, PyFloat::new(py, (e - s) as f64).as_any())?)?;
            }
            d.set_item(intern!(py, "paragraph"), list)?;
        }
        d.set_item(
            intern!(py, "document"),
            PyList::new(py, [span_list(py, 0, n, PyFloat::new(py, n as f64).as_any())?])?,
        )?;
        out.push(d);
    }
    Ok(out)
}

type Windows = Vec<(u64, u64)>;

/// Per text, the candidate windows of the PII patterns (`crate::text_stats::pii_windows`):
/// (email, phone, ipv4, ipv6), each a list of (start, end) code point offsets.
#[pyfunction]
fn pii_windows_batch(
    py: Python<'_>,
    texts: Vec<Bound<'_, PyString>>,
) -> PyResult<Vec<(Windows, Windows, Windows, Windows)>> {
    let texts = borrow_strs(&texts)?;
    Ok(py.detach(|| {
        texts
            .iter()
            .map(|t| {
                let w = pii_windows(t);
                (w.email, w.phone, w.ipv4, w.ipv6)
            })
            .collect()
    }))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyGopherKernel>()?;
    m.add_class::<PyC4Kernel>()?;
    m.add_class::<PyC4Result>()?;
    m.add_function(wrap_pyfunction!(c4_keep_py, m)?)?;
    m.add_function(wrap_pyfunction!(pii_windows_batch, m)?)?;
    m.add_function(wrap_pyfunction!(char_length_grouped_batch, m)?)?;
    Ok(())
}
