//! The report's per-document pass (`dolma-pipe report`, `summarize.py`): document lines and the
//! matching rows of their attribute files read into columns, so that the per-document work of a
//! report is one JSON parse and a few pushes here, and the binning is numpy's.
//!
//! Per document: its source (an index into `sources`), characters (code points, as Python's
//! `len`), UTF-8 bytes and id. Per attribute key (in the order keys first appear): the documents
//! where its value is a non-empty list (`present`); for a document score (one span covering the
//! whole text, Dolma's shape, with a number as its score) the score; otherwise the length of
//! every span (end - start, at least 0) and the characters they cover (their sum, at most the
//! text's length). These are the rules of `summarize.py`'s Python pass, which stays the reference.
//!
//! Anything unusual (a line that is not a good document, a row whose id differs, a key given by two
//! attribute sets for one document, a span that is not numbers) is an `Err` naming it: the caller
//! then reads the file with the Python pass, which quarantines or refuses as the other stages do.
//!
//! Document lines are read by `crate::document`; `rows` reads attribute rows, `spans` an
//! attribute's spans; `error` says what this pass does not read.
mod error;
mod rows;
mod spans;

use crate::document::{read_fields, Field, Rest};
use crate::text::char_len;
use serde_json::Value;
use spans::{Num, Span};
use std::collections::HashMap;

pub use error::{DocumentProblem, ReportError, RowProblem};

/// One attribute key's columns (document indices are positions in the file's good documents).
#[derive(Default)]
pub struct KeyColumns {
    pub present: Vec<u32>,
    pub score_docs: Vec<u32>,
    pub scores: Vec<f64>,
    pub span_docs: Vec<u32>,
    pub span_lengths: Vec<u64>,
    pub covered_docs: Vec<u32>,
    pub covered: Vec<u64>,
    /// The last document that had this key (two attribute sets giving one key: not this path's).
    last_doc: Option<u32>,
}

#[derive(Default)]
pub struct DocumentColumns {
    pub sources: Vec<String>,
    source_index: HashMap<String, u32>,
    pub src: Vec<u32>,
    pub chars: Vec<u64>,
    pub bytes: Vec<u64>,
    pub keys: Vec<String>,
    key_index: HashMap<String, usize>,
    pub columns: Vec<KeyColumns>,
    /// Per source: texts of its first documents until `sample_bytes` bytes (token weights).
    pub sample_texts: Vec<Vec<String>>,
    sample_filled: Vec<u64>,
    sample_bytes: u64,
    /// Per attribute set, the keys in the order the last row gave them: rows of one file give
    /// their keys in one order, so a key is found by its position without hashing.
    order: Vec<Vec<usize>>,
    /// The spans of the attribute being read (kept to reuse its allocation).
    spans: Vec<Span>,
}

/// What one call of `add` read: the ids of the batch's documents, in order.
pub struct BatchIds {
    pub ids: Vec<String>,
}

impl DocumentColumns {
    /// `sample_bytes`: texts kept per source for token weights (0: none).
    pub fn new(sample_bytes: u64) -> Self {
        DocumentColumns { sample_bytes, ..Default::default() }
    }

    pub fn docs(&self) -> usize {
        self.src.len()
    }

    fn source(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.source_index.get(name) {
            return i;
        }
        let i = self.sources.len() as u32;
        self.sources.push(name.to_string());
        self.source_index.insert(name.to_string(), i);
        self.sample_texts.push(Vec::new());
        self.sample_filled.push(0);
        i
    }

    fn key(&mut self, name: &str) -> usize {
        if let Some(&i) = self.key_index.get(name) {
            return i;
        }
        let i = self.keys.len();
        self.keys.push(name.to_string());
        self.key_index.insert(name.to_string(), i);
        self.columns.push(KeyColumns::default());
        i
    }

    /// The index of the key at `position` among the listed keys of a row of attribute set `set`.
    fn key_at(&mut self, set: usize, position: usize, name: &str) -> usize {
        if self.order.len() <= set {
            self.order.resize(set + 1, Vec::new());
        }
        if let Some(&k) = self.order[set].get(position) {
            if self.keys[k] == name {
                return k;
            }
        }
        let k = self.key(name);
        let order = &mut self.order[set];
        if position < order.len() {
            order[position] = k;
        } else {
            order.push(k);
        }
        k
    }

    /// Key `k`'s non-empty list of `spans` for document `doc` (its text `n_chars` characters
    /// long), as summarize.py reads it.
    fn attribute(&mut self, k: usize, spans: &[Span], doc: u32, n_chars: u64) -> Result<(), RowProblem> {
        let col = &mut self.columns[k];
        let name = &self.keys[k];
        if col.last_doc == Some(doc) {
            return Err(RowProblem::TwoSets { key: name.clone() });
        }
        col.last_doc = Some(doc);
        col.present.push(doc);
        let bad = || RowProblem::NotASpan { key: name.clone() };
        let first = spans[0];
        let (Some(start), Some(end), true) = (first.start, first.end, first.list) else { return Err(bad()) };
        if spans.len() == 1 && start.as_f64() == 0.0 && end.as_f64() >= n_chars as f64 {
            // A document score; a score that is not a number (a string, a bool) is not binned.
            match first.score {
                None => return Err(bad()),
                Some(Some(v)) => {
                    col.score_docs.push(doc);
                    col.scores.push(v.as_f64());
                }
                Some(None) => {}
            }
            return Ok(());
        }
        let mut covered: i128 = 0;
        for span in spans {
            let (Some(a), Some(b), true) =
                (span.start.and_then(Num::as_int), span.end.and_then(Num::as_int), span.list)
            else {
                return Err(bad());
            };
            let length = (b - a).max(0);
            covered += length;
            col.span_docs.push(doc);
            col.span_lengths.push(length.min(u64::MAX as i128) as u64);
        }
        col.covered_docs.push(doc);
        col.covered.push(covered.min(n_chars as i128) as u64);
        Ok(())
    }

    /// Read a batch: `docs` lines (every one a good document) and, per attribute set, as many rows
    /// in the same order. `Err` names the first thing this pass does not read (see the module).
    pub fn add(&mut self, docs: &[&[u8]], attrs: &[Vec<&[u8]>]) -> Result<BatchIds, ReportError> {
        for (set, rows) in attrs.iter().enumerate() {
            if rows.len() != docs.len() {
                return Err(ReportError::RowCount { set, rows: rows.len(), docs: docs.len() });
            }
        }
        let mut ids = Vec::with_capacity(docs.len());
        for (i, line) in docs.iter().enumerate() {
            let bad = |problem| ReportError::Document { doc: i, problem };
            let fields =
                read_fields(line, Some("source"), Rest::Skip).map_err(|e| bad(DocumentProblem::Json(e.to_string())))?;
            let document =
                fields.check().map_err(|e| bad(if e.is_id() { DocumentProblem::Id } else { DocumentProblem::Text }))?;
            let text: &str = &document.text;
            let source: &str = match &document.extra {
                None | Some(Field::Other(Value::Null)) => "(none)",
                Some(Field::Str(s)) if s.is_empty() => "(none)",
                Some(Field::Str(s)) => s,
                Some(_) => return Err(bad(DocumentProblem::Source)),
            };
            let doc = self.src.len() as u32;
            let n_chars = char_len(text) as u64;
            let src = self.source(source);
            self.src.push(src);
            self.chars.push(n_chars);
            self.bytes.push(text.len() as u64);
            if self.sample_bytes > 0 && self.sample_filled[src as usize] < self.sample_bytes {
                self.sample_texts[src as usize].push(text.to_string());
                self.sample_filled[src as usize] += text.len() as u64;
            }
            let id = document.id.as_str();
            for (set, rows) in attrs.iter().enumerate() {
                let row_error = |problem| ReportError::Row { set, row: i, problem };
                match rows::read_row(self, rows[i], doc, n_chars, set).map_err(row_error)? {
                    Some(r) if r == id => {}
                    _ => return Err(row_error(RowProblem::OtherId)),
                }
            }
            ids.push(id.to_string());
        }
        Ok(BatchIds { ids })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(cols: &mut DocumentColumns, docs: &[&str], attrs: &[&[&str]]) -> Result<Vec<String>, ReportError> {
        let d: Vec<&[u8]> = docs.iter().map(|s| s.as_bytes()).collect();
        let a: Vec<Vec<&[u8]>> = attrs.iter().map(|set| set.iter().map(|s| s.as_bytes()).collect()).collect();
        cols.add(&d, &a).map(|b| b.ids)
    }

    #[test]
    fn documents_scores_and_spans() {
        let mut c = DocumentColumns::new(0);
        let ids = add(
            &mut c,
            &[r#"{"id":"a","text":"héllo","source":"s"}"#, r#"{"text":"xy","id":7,"meta":{"k":[1]}}"#],
            &[
                &[
                    r#"{"id":"a","attributes":{"p__score":[[0,5,0.5]],"p__spans":[[0,2,1],[1,4,1]],"p__none":[]}}"#,
                    r#"{"attributes":{"p__spans":[[1,0,1]],"p__score":[[0,2,1]]},"id":"7"}"#,
                ],
                &[r#"{"id":"a","attributes":null}"#, r#"{"id":7}"#],
            ],
        )
        .unwrap();
        assert_eq!(ids, vec!["a", "7"]);
        assert_eq!(c.sources, vec!["s", "(none)"]);
        assert_eq!(c.chars, vec![5, 2]);
        assert_eq!(c.bytes, vec![6, 2]);
        assert_eq!(c.keys, vec!["p__score", "p__spans"]);
        let score = &c.columns[0];
        assert_eq!((score.score_docs.clone(), score.scores.clone()), (vec![0, 1], vec![0.5, 1.0]));
        let spans = &c.columns[1];
        assert_eq!(spans.span_lengths, vec![2, 3, 0]);
        assert_eq!(spans.covered, vec![5, 0]); // 2 + 3 = 5 characters of 5; a reversed span is 0
    }

    #[test]
    fn what_this_pass_does_not_read_is_an_error() {
        let cases: &[(&str, &str)] = &[
            (r#"{"id":"a"}"#, r#"{"id":"a"}"#),
            (r#"{"id":true,"text":""}"#, r#"{"id":"a"}"#),
            (r#"{"id":"a","text":"x","source":3}"#, r#"{"id":"a"}"#),
            (r#"{"id":"a","text":"x"}"#, r#"{"id":"b"}"#),
            (r#"{"id":"a","text":"x"}"#, r#"{"id":"a","attributes":{"k":[[0,"1",1]]}}"#),
            (r#"{"id":"a","text":"x"}"#, r#"{"id":"a","attributes":{"k":[[0,1]]}}"#),
            (r#"{"id":"a","text":"x"} x"#, r#"{"id":"a"}"#),
            (r#"{"id":"a","text":"\ud800"}"#, r#"{"id":"a"}"#),
        ];
        for (doc, row) in cases {
            let mut c = DocumentColumns::new(0);
            assert!(add(&mut c, &[doc], &[&[row]]).is_err(), "{doc} / {row}");
        }
        let mut c = DocumentColumns::new(0);
        let two = add(
            &mut c,
            &[r#"{"id":"a","text":"x"}"#],
            &[&[r#"{"id":"a","attributes":{"k":[[0,1,1]]}}"#], &[r#"{"id":"a","attributes":{"k":[[0,1,1]]}}"#]],
        );
        assert!(two.is_err());
    }

    #[test]
    fn errors_say_what_and_where() {
        let error =
            |docs: &[&str], attrs: &[&[&str]]| add(&mut DocumentColumns::new(0), docs, attrs).unwrap_err().to_string();
        let doc = r#"{"id":"a","text":"x"}"#;
        assert_eq!(error(&[r#"{"id":"a"}"#], &[]), "document 0: no string text");
        assert_eq!(error(&[doc, r#"{"id":1.5,"text":"x"}"#], &[]), "document 1: no string or integer id");
        assert_eq!(error(&[r#"{"id":"a","text":"x","source":3}"#], &[]), "document 0: a source that is not a string");
        assert_eq!(error(&[r#"{"id":"a","text":"x"} x"#], &[]), "document 0: trailing characters at line 1 column 23");
        assert_eq!(error(&[doc], &[&[]]), "attribute set 0 has 0 rows for 1 documents");
        assert_eq!(error(&[doc], &[&[r#"{"id":"b"}"#]]), "attribute set 0, row 0: another id than its document's");
        assert_eq!(
            error(&[doc], &[&[r#"{"id":"a","attributes":{"k":[[0,"1",1]]}}"#]]),
            r#"attribute set 0, row 0: attribute "k" has a span that is not [start, end, ...] numbers"#
        );
        assert_eq!(
            error(&[doc], &[&[r#"{"id":"a","attributes":{},"attributes":{}}"#]]),
            "attribute set 0, row 0: an attribute row has two 'attributes'"
        );
    }

    #[test]
    fn token_samples_stop_at_the_budget() {
        let mut c = DocumentColumns::new(4);
        add(&mut c, &[r#"{"id":"a","text":"abc"}"#, r#"{"id":"b","text":"de"}"#, r#"{"id":"c","text":"f"}"#], &[])
            .unwrap();
        assert_eq!(c.sample_texts[0], vec!["abc", "de"]);
    }
}
