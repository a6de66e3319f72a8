//! An attribute row as the report's column pass reads it: its id, and its attributes handed to
//! `DocumentColumns` key by key, in file order, without building the row.
use super::error::RowProblem;
use super::spans::SpansSeed;
use super::DocumentColumns;
use crate::document::{Field, Id, Key};
use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use std::fmt;

/// Reads one attribute row of document `doc` (its text `n_chars` characters long, the row from
/// attribute set `set`) into `columns`; the row's id (`None`: no string or integer id).
pub(super) fn read_row(
    columns: &mut DocumentColumns,
    line: &[u8],
    doc: u32,
    n_chars: u64,
    set: usize,
) -> Result<Option<String>, RowProblem> {
    let mut problem = None;
    let mut de = serde_json::Deserializer::from_slice(line);
    let seed = RowSeed { columns, doc, n_chars, problem: &mut problem, set };
    let id = seed.deserialize(&mut de).map_err(|e| RowProblem::Json(e.to_string()))?;
    de.end().map_err(|e| RowProblem::Json(e.to_string()))?;
    match problem {
        Some(p) => Err(p),
        None => Ok(id),
    }
}

/// An attribute row: its id, and its attributes handed to `columns` key by key, in file order.
struct RowSeed<'a> {
    columns: &'a mut DocumentColumns,
    doc: u32,
    n_chars: u64,
    problem: &'a mut Option<RowProblem>,
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
                "id" => id = map.next_value::<Field<'de>>()?.into_id().ok().map(Id::into_string),
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
                    *seed.problem = Some(RowProblem::TwoAttributes);
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
    problem: &'a mut Option<RowProblem>,
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
