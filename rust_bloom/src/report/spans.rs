//! An attribute's value as the report's column pass reads it: a list of spans, each as far as
//! `summarize.py` looks at it (its first two items as numbers, its third as a score), everything
//! else skipped unparsed.
use serde::de::{Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

/// A JSON number as Python holds it: an integer (exact) or a float.
#[derive(Clone, Copy)]
pub(super) enum Num {
    Int(i128),
    Float(f64),
}

impl Num {
    pub(super) fn as_f64(self) -> f64 {
        match self {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        }
    }
    /// Python's `int(x)` (a float truncated toward zero); None for a float that is not finite.
    pub(super) fn as_int(self) -> Option<i128> {
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
pub(super) struct Span {
    pub(super) start: Option<Num>,
    pub(super) end: Option<Num>,
    pub(super) score: Option<Option<Num>>,
    /// Whether the element is a list of at least two items.
    pub(super) list: bool,
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
pub(super) struct SpansSeed<'a>(pub(super) &'a mut Vec<Span>);

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
