//! A document line read field by field: `id`, `text` and one more top-level field the caller names
//! are kept (strings borrowed from the line when they hold no escape); every other value is either
//! validated as a full parse would (so that what the Python reader refuses is refused here too:
//! unpaired surrogate escapes, control characters, numbers that overflow a double) or skipped.
use super::value::{value_id, value_text};
use super::{DocumentError, Id};
use serde::de::{Deserialize, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// A JSON value kept from the line: a string (borrowed when it has no escapes), or any other value.
#[derive(Debug, Clone, PartialEq)]
pub enum Field<'de> {
    Str(Cow<'de, str>),
    Other(Value),
}

impl<'de> Field<'de> {
    pub fn into_value(self) -> Value {
        match self {
            Field::Str(s) => Value::String(s.into_owned()),
            Field::Other(v) => v,
        }
    }

    /// This value as a document's id (the rules of `value_id`).
    pub fn into_id(self) -> Result<Id<'de>, DocumentError> {
        match self {
            Field::Str(s) => Ok(Id::Str(s)),
            Field::Other(v) => value_id(Some(&v)).map(Id::into_owned),
        }
    }

    /// This value as a document's text (the rules of `value_text`).
    pub fn into_text(self) -> Result<Cow<'de, str>, DocumentError> {
        match self {
            Field::Str(s) => Ok(s),
            Field::Other(v) => value_text(Some(&v)).map(|t| Cow::Owned(t.to_string())),
        }
    }
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
pub struct Key<'de>(pub Cow<'de, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_str(FieldVisitor)? {
            Field::Str(s) => Ok(Key(s)),
            Field::Other(_) => Err(serde::de::Error::custom("an object key that is not a string")),
        }
    }
}

/// Parses (and discards) any JSON value, validating it as a full parse would (serde's
/// `IgnoredAny` would skip strings without checking their escapes).
struct Validate;

impl<'de> DeserializeSeed<'de> for Validate {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Validate {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq.next_element_seed(Validate)?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_key_seed(Validate)?.is_some() {
            map.next_value_seed(Validate)?;
        }
        Ok(())
    }
}

/// What becomes of the values of the fields a caller does not keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rest {
    /// Parsed as a full parse would, so that a line the Python reader refuses is refused here.
    Validate,
    /// Skipped (strings are not unescaped): for a caller whose own fallback judges such lines.
    Skip,
}

/// The kept fields of one line (each `None` when absent; a repeated field keeps its last value).
#[derive(Debug, Default)]
pub struct Fields<'de> {
    pub id: Option<Field<'de>>,
    pub text: Option<Field<'de>>,
    /// The value of the caller's extra field.
    pub extra: Option<Field<'de>>,
    /// Whether a kept field was given more than once.
    pub duplicated: bool,
}

/// A document as `Fields::check` accepts it.
#[derive(Debug)]
pub struct Document<'de> {
    pub id: Id<'de>,
    pub text: Cow<'de, str>,
    pub extra: Option<Field<'de>>,
}

impl<'de> Fields<'de> {
    /// The document's id, then its text, checked as `dolma_pipe.documents` checks them.
    pub fn check(self) -> Result<Document<'de>, DocumentError> {
        let id = self.id.ok_or(DocumentError::MissingId)?.into_id()?;
        let text = self.text.ok_or(DocumentError::MissingText)?.into_text()?;
        Ok(Document { id, text, extra: self.extra })
    }
}

struct DocVisitor<'k> {
    extra: Option<&'k str>,
    rest: Rest,
}

impl<'de> Visitor<'de> for DocVisitor<'_> {
    type Value = Fields<'de>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields<'de>, A::Error> {
        let mut out = Fields::default();
        while let Some(Key(key)) = map.next_key::<Key<'de>>()? {
            let slot = match key.as_ref() {
                "id" => &mut out.id,
                "text" => &mut out.text,
                k if Some(k) == self.extra => &mut out.extra,
                _ => {
                    match self.rest {
                        Rest::Validate => map.next_value_seed(Validate)?,
                        Rest::Skip => {
                            map.next_value::<IgnoredAny>()?;
                        }
                    }
                    continue;
                }
            };
            out.duplicated |= slot.is_some();
            *slot = Some(map.next_value()?);
        }
        Ok(out)
    }
}

/// The fields of one JSON object line: `id`, `text` and `extra` (never `id` or `text`, which are
/// kept anyway). `Err` when the line is not one JSON object with nothing after it but JSON
/// whitespace. Strings are checked as UTF-8 only where they are parsed: a caller that must refuse
/// any invalid UTF-8 checks the line first.
pub fn read_fields<'de>(line: &'de [u8], extra: Option<&str>, rest: Rest) -> Result<Fields<'de>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(line);
    let fields = de.deserialize_map(DocVisitor { extra, rest })?;
    de.end()?;
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(line: &str) -> Result<(String, String), DocumentError> {
        let fields = read_fields(line.as_bytes(), None, Rest::Validate).unwrap();
        fields.check().map(|d| (d.id.into_string(), d.text.into_owned()))
    }

    #[test]
    fn keeps_id_text_and_the_extra_field() {
        let line = br#"{"id": "a", "text": "x\ny", "source": "s", "m": {"k": [1, 2.5, null]}}"#;
        let f = read_fields(line, Some("source"), Rest::Validate).unwrap();
        assert!(matches!(f.id, Some(Field::Str(Cow::Borrowed("a")))));
        assert!(matches!(f.text, Some(Field::Str(Cow::Owned(ref t))) if t == "x\ny"));
        assert_eq!(f.extra.map(Field::into_value), Some(Value::String("s".into())));
        assert!(!f.duplicated);
        let f = read_fields(br#"{"id": "a", "id": "b", "text": "x"}"#, Some("id"), Rest::Skip).unwrap();
        assert!(f.duplicated && f.extra.is_none());
        assert_eq!(f.id, Some(Field::Str("b".into())));
    }

    #[test]
    fn checks_as_the_python_reader_does() {
        assert_eq!(check(r#"{"id": "a", "text": "x"}"#), Ok(("a".into(), "x".into())));
        assert_eq!(check(r#"{"text": "x", "id": 7}"#), Ok(("7".into(), "x".into())));
        assert_eq!(check(r#"{"text": "x"}"#), Err(DocumentError::MissingId));
        assert_eq!(check(r#"{"id": null, "text": "x"}"#), Err(DocumentError::MissingId));
        assert_eq!(check(r#"{"id": 1.5, "text": "x"}"#), Err(DocumentError::BadId("float")));
        assert_eq!(check(r#"{"id": "a", "text": null}"#), Err(DocumentError::MissingText));
        assert_eq!(check(r#"{"id": "a", "text": {}}"#), Err(DocumentError::BadText("dict")));
        assert!(matches!(
            read_fields(br#"{"id": "a", "text": "x"}"#, None, Rest::Skip).unwrap().check().unwrap().id,
            Id::Str(_)
        ));
    }

    #[test]
    fn validates_or_skips_the_rest() {
        for line in
            [r#"{"id": "a", "text": "x", "m": "\ud800"}"#, "{\"id\": \"a\", \"text\": \"x\", \"m\": \"\\u0061\u{1}\"}"]
        {
            assert!(read_fields(line.as_bytes(), None, Rest::Validate).is_err(), "{line:?}");
        }
        assert!(read_fields(br#"{"id": "a", "text": "x", "m": "\ud800"}"#, None, Rest::Skip).is_ok());
        for line in [r#"{"id": "a", "text": "x"} {"#, r#"["id", "text"]"#, r#"{"id": "a", "text": "\ud800"}"#, ""] {
            assert!(read_fields(line.as_bytes(), None, Rest::Skip).is_err(), "{line:?}");
        }
    }
}
