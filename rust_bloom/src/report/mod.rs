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
use serde::de::{Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use crate::text::char_len;

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

fn id_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// A JSON string borrowed from the line when it has no escapes; anything else as a `Value`.
enum Field<'de> {
    Str(Cow<'de, str>),
    Other(Value),
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Borrowed(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Field<'de>, E> {
        Ok(Field::Str(Cow::Owned(v)))
    }
    fn visit_bool<E>(self, v: bool) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::from(v)))
    }
    fn visit_unit<E>(self) -> Result<Field<'de>, E> {
        Ok(Field::Other(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Field<'de>, A::Error> {
        Value::deserialize(serde::de::value::SeqAccessDeserializer::new(seq)).map(Field::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Field<'de>, A::Error> {
        Value::deserialize(serde::de::value::MapAccessDeserializer::new(map)).map(Field::Other)
    }
}

impl<'de> Deserialize<'de> for Field<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

/// An object key, borrowed from the line when it has no escapes.
struct Key<'de>(Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_str(FieldVisitor)? {
            Field::Str(s) => Ok(Key(s)),
            Field::Other(_) => Err(serde::de::Error::custom("an object key that is not a string")),
        }
    }
}

fn id_of(f: &Field) -> Option<String> {
    match f {
        Field::Str(s) => Some(s.to_string()),
        Field::Other(v) => id_string(v),
    }
}

/// A document line's fields this pass reads; the rest is skipped unparsed.
#[derive(Default)]
struct DocFields<'de> {
    id: Option<Field<'de>>,
    text: Option<Field<'de>>,
    source: Option<Field<'de>>,
}

struct DocVisitor;

impl<'de> Visitor<'de> for DocVisitor {
    type Value = DocFields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<DocFields<'de>, A::Error> {
        let mut out = DocFields::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match key.as_ref() {
                "id" => out.id = Some(map.next_value()?),
                "text" => out.text = Some(map.next_value()?),
                "source" => out.source = Some(map.next_value()?),
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(out)
    }
}

/// A JSON number as Python holds it: an integer (exact) or a float.
#[derive(Clone, Copy)]
enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
    /// Python's `int(x)` (a float truncated toward zero); None for a float that is not finite.
    fn as_int(self) -> Option<i128> {
        match self {
            Num::Int(i) => Some(i),
            Num::Float(f) if f.is_finite() => Some(f.trunc() as i128),
            Num::Float(_) => None,
        }
    }
}

/// One element of an attribute's list, as far as this pass reads it: its first two items as
/// numbers (None: not a number) and its third (None: not there; Some(None): not a number).
#[derive(Clone, Copy)]
struct Span {
    start: Option<Num>,
    end: Option<Num>,
    score: Option<Option<Num>>,
    /// Whether the element is a list of at least two items.
    list: bool,
}

const NOT_A_SPAN: Span = Span { start: None, end: None, score: None, list: false };

/// One item of a span: a number, or something else (skipped unparsed).
struct Item(Option<Num>);

struct ItemVisitor;

impl<'de> Visitor<'de> for ItemVisitor {
    type Value = Item;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_i64<E>(self, v: i64) -> Result<Item, E> {
        Ok(Item(Some(Num::Int(v as i128))))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Item, E> {
        Ok(Item(Some(Num::Int(v as i128))))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Item, E> {
        Ok(Item(Some(Num::Float(v))))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Item, E> {
        Ok(Item(None))
    }
    fn visit_str<E>(self, _: &str) -> Result<Item, E> {
        Ok(Item(None))
    }
    fn visit_unit<E>(self) -> Result<Item, E> {
        Ok(Item(None))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Item, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Item(None))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Item, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Item(None))
    }
}

impl<'de> Deserialize<'de> for Item {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ItemVisitor)
    }
}

struct SpanVisitor;

impl<'de> Visitor<'de> for SpanVisitor {
    type Value = Span;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Span, A::Error> {
        let mut span = NOT_A_SPAN;
        let mut n = 0;
        while let Some(Item(x)) = seq.next_element::<Item>()? {
            match n {
                0 => span.start = x,
                1 => span.end = x,
                2 => span.score = Some(x),
                _ => {}
            }
            n += 1;
        }
        span.list = n >= 2;
        Ok(span)
    }
    fn visit_bool<E>(self, _: bool) -> Result<Span, E> {
        Ok(NOT_A_SPAN)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Span, E> {
        Ok(NOT_A_SPAN)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Span, E> {
        Ok(NOT_A_SPAN)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Span, E> {
        Ok(NOT_A_SPAN)
    }
    fn visit_str<E>(self, _: &str) -> Result<Span, E> {
        Ok(NOT_A_SPAN)
    }
    fn visit_unit<E>(self) -> Result<Span, E> {
        Ok(NOT_A_SPAN)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Span, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(NOT_A_SPAN)
    }
}

impl<'de> Deserialize<'de> for Span {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SpanVisitor)
    }
}

/// An attribute's value: a list of spans (read into the vector), or not a list (`false`).
struct SpansSeed<'a>(&'a mut Vec<Span>);

impl<'de> DeserializeSeed<'de> for SpansSeed<'_> {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for SpansSeed<'_> {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        self.0.clear();
        while let Some(span) = seq.next_element::<Span>()? {
            self.0.push(span);
        }
        Ok(true)
    }
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// An attribute row: its id, and its attributes handed to `columns` key by key, in file order.
struct RowSeed<'a> {
    columns: &'a mut DocumentColumns,
    doc: u32,
    n_chars: u64,
    problem: &'a mut Option<String>,
    set: usize,
}

struct RowVisitor<'a>(RowSeed<'a>);

impl<'de> DeserializeSeed<'de> for RowSeed<'_> {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_map(RowVisitor(self))
    }
}

impl<'de> Visitor<'de> for RowVisitor<'_> {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an attribute row (a JSON object)")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Option<String>, A::Error> {
        let seed = self.0;
        let mut id = None;
        let mut seen_attributes = false;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            match key.as_ref() {
                "id" => id = id_of(&map.next_value::<Field<'de>>()?),
                "attributes" if !seen_attributes => {
                    seen_attributes = true;
                    map.next_value_seed(AttributesSeed {
                        columns: &mut *seed.columns,
                        doc: seed.doc,
                        n_chars: seed.n_chars,
                        problem: &mut *seed.problem,
                        set: seed.set,
                    })?;
                }
                "attributes" => {
                    *seed.problem = Some("an attribute row has two 'attributes'".into());
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(id)
    }
}

struct AttributesSeed<'a> {
    columns: &'a mut DocumentColumns,
    doc: u32,
    n_chars: u64,
    problem: &'a mut Option<String>,
    set: usize,
}

impl<'de> DeserializeSeed<'de> for AttributesSeed<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for AttributesSeed<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object of attributes or null")
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut spans = std::mem::take(&mut self.columns.spans);
        let mut position = 0;
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let list = map.next_value_seed(SpansSeed(&mut spans))?;
            if list && !spans.is_empty() && self.problem.is_none() {
                let k = self.columns.key_at(self.set, position, &key);
                position += 1;
                if let Err(p) = self.columns.attribute(k, &spans, self.doc, self.n_chars) {
                    *self.problem = Some(p);
                }
            }
        }
        self.columns.spans = spans;
        Ok(())
    }
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
    fn attribute(&mut self, k: usize, spans: &[Span], doc: u32, n_chars: u64) -> Result<(), String> {
        let col = &mut self.columns[k];
        let name = &self.keys[k];
        if col.last_doc == Some(doc) {
            return Err(format!("attribute {name:?} is given by two attribute sets of one document"));
        }
        col.last_doc = Some(doc);
        col.present.push(doc);
        let bad = || format!("attribute {name:?} has a span that is not [start, end, ...] numbers");
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
    pub fn add(&mut self, docs: &[&[u8]], attrs: &[Vec<&[u8]>]) -> Result<BatchIds, String> {
        for (set, rows) in attrs.iter().enumerate() {
            if rows.len() != docs.len() {
                return Err(format!("attribute set {set} has {} rows for {} documents", rows.len(), docs.len()));
            }
        }
        let mut ids = Vec::with_capacity(docs.len());
        for (i, line) in docs.iter().enumerate() {
            let mut de = serde_json::Deserializer::from_slice(line);
            let fields = de.deserialize_map(DocVisitor).map_err(|e| format!("document {i}: {e}"))?;
            de.end().map_err(|e| format!("document {i}: {e}"))?;
            let id =
                fields.id.as_ref().and_then(id_of).ok_or_else(|| format!("document {i}: no string or integer id"))?;
            let text: &str = match &fields.text {
                Some(Field::Str(t)) => t,
                _ => return Err(format!("document {i}: no string text")),
            };
            let source: &str = match &fields.source {
                None | Some(Field::Other(Value::Null)) => "(none)",
                Some(Field::Str(s)) if s.is_empty() => "(none)",
                Some(Field::Str(s)) => s,
                Some(_) => return Err(format!("document {i}: a source that is not a string")),
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
            for (set, rows) in attrs.iter().enumerate() {
                let mut problem = None;
                let mut de = serde_json::Deserializer::from_slice(rows[i]);
                let seed = RowSeed { columns: self, doc, n_chars, problem: &mut problem, set };
                let row_id = seed.deserialize(&mut de).map_err(|e| format!("attribute set {set}, row {i}: {e}"))?;
                de.end().map_err(|e| format!("attribute set {set}, row {i}: {e}"))?;
                if let Some(p) = problem {
                    return Err(format!("attribute set {set}, row {i}: {p}"));
                }
                match row_id {
                    Some(r) if r == id => {}
                    _ => return Err(format!("attribute set {set}, row {i}: another id than its document's")),
                }
            }
            ids.push(id);
        }
        Ok(BatchIds { ids })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn add(cols: &mut DocumentColumns, docs: &[&str], attrs: &[&[&str]]) -> Result<Vec<String>, String> {
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
    fn token_samples_stop_at_the_budget() {
        let mut c = DocumentColumns::new(4);
        add(&mut c, &[r#"{"id":"a","text":"abc"}"#, r#"{"id":"b","text":"de"}"#, r#"{"id":"c","text":"f"}"#], &[])
            .unwrap();
        assert_eq!(c.sample_texts[0], vec!["abc", "de"]);
    }
}
