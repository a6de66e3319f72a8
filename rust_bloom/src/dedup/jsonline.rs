//! The fast path for one JSON line: its `id`, `text` and (optionally) the value at a key path.
//!
//! It accepts a line only when `dolma_pipe.documents.read_documents` would accept it with the
//! same `id` and `text`: valid UTF-8, one JSON object and nothing after it but JSON whitespace,
//! `id` and `text` both strings, present once. Every other value is parsed too (not skipped),
//! so that what orjson refuses is refused here as well: unpaired surrogate escapes, control
//! characters, numbers that overflow a double. Lines it does not accept (integer ids, bad JSON,
//! duplicated fields, very deep nesting...) are not judged here: the caller hands them to the
//! Python reader, which quarantines or normalises them exactly as every other stage does.
use super::keypath::{KeyPath, KeyValue};
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// One accepted document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub id: String,
    pub text: String,
    /// The key path's value (`Missing` when no key path was asked for).
    pub key: KeyValue,
}

/// What to extract besides `id` and `text`.
#[derive(Debug, Clone)]
pub enum KeySpec {
    None,
    Text,
    Id,
    Path(KeyPath),
}

impl KeySpec {
    pub fn from_path(path: Option<&KeyPath>) -> KeySpec {
        match path {
            None => KeySpec::None,
            Some(p) if p.is_field("text") => KeySpec::Text,
            Some(p) if p.is_field("id") => KeySpec::Id,
            Some(p) => KeySpec::Path(p.clone()),
        }
    }
}

/// Parses (and discards) any JSON value, validating it as a full parse would (serde's
/// `IgnoredAny` would skip strings without checking their escapes).
struct Validate;

impl<'de> DeserializeSeed<'de> for Validate {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(ValidateVisitor)
    }
}

struct ValidateVisitor;

impl<'de> Visitor<'de> for ValidateVisitor {
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

/// A string value, or `None` for any other (validated) value.
struct MaybeString;

impl<'de> DeserializeSeed<'de> for MaybeString {
    type Value = Option<String>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Option<String>, D::Error> {
        d.deserialize_any(MaybeStringVisitor)
    }
}

struct MaybeStringVisitor;

impl<'de> Visitor<'de> for MaybeStringVisitor {
    type Value = Option<String>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<Option<String>, E> {
        Ok(Some(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Option<String>, E> {
        Ok(Some(v))
    }
    fn visit_bool<E>(self, _: bool) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_unit<E>(self) -> Result<Option<String>, E> {
        Ok(None)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Option<String>, A::Error> {
        ValidateVisitor.visit_seq(seq).map(|_| None)
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Option<String>, A::Error> {
        ValidateVisitor.visit_map(map).map(|_| None)
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Field {
    Id,
    Text,
    Head,
    Other,
}

struct FieldSeed<'k>(Option<&'k str>);

impl<'de> DeserializeSeed<'de> for FieldSeed<'_> {
    type Value = Field;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Field, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for FieldSeed<'_> {
    type Value = Field;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E>(self, v: &str) -> Result<Field, E> {
        Ok(match v {
            "id" => Field::Id,
            "text" => Field::Text,
            _ if Some(v) == self.0 => Field::Head,
            _ => Field::Other,
        })
    }
}

#[derive(Default)]
struct Fields {
    id: Option<Option<String>>,
    text: Option<Option<String>>,
    head: Option<Value>,
    duplicated: bool,
}

struct DocVisitor<'k>(Option<&'k str>);

impl<'de> Visitor<'de> for DocVisitor<'_> {
    type Value = Fields;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Fields, A::Error> {
        let mut out = Fields::default();
        while let Some(field) = map.next_key_seed(FieldSeed(self.0))? {
            match field {
                Field::Id => {
                    out.duplicated |= out.id.is_some();
                    out.id = Some(map.next_value_seed(MaybeString)?);
                }
                Field::Text => {
                    out.duplicated |= out.text.is_some();
                    out.text = Some(map.next_value_seed(MaybeString)?);
                }
                Field::Head => {
                    out.duplicated |= out.head.is_some();
                    out.head = Some(map.next_value::<Value>()?);
                }
                Field::Other => map.next_value_seed(Validate)?,
            }
        }
        Ok(out)
    }
}

/// Whether `b` is a JSON line `read_documents` skips as blank (`bytes.isspace()` or empty).
#[inline]
pub fn is_blank(b: &[u8]) -> bool {
    b.iter().all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

/// The document on this line, or `None` when the Python reader must decide.
pub fn parse_line(line: &[u8], key: &KeySpec) -> Option<Parsed> {
    let s = std::str::from_utf8(line).ok()?;
    let head = match key {
        KeySpec::Path(p) => p.head(),
        _ => None,
    };
    let mut de = serde_json::Deserializer::from_str(s);
    let fields = de.deserialize_map(DocVisitor(head)).ok()?;
    de.end().ok()?;
    if fields.duplicated {
        return None;
    }
    let id = fields.id??;
    let text = fields.text??;
    let key = match key {
        KeySpec::None => KeyValue::Missing,
        KeySpec::Text => KeyValue::Str(text.clone()),
        KeySpec::Id => KeyValue::Str(id.clone()),
        KeySpec::Path(p) => match &fields.head {
            Some(v) => p.resolve_tail(v),
            None => KeyValue::Missing,
        },
    };
    Some(Parsed { id, text, key })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Option<Parsed> {
        parse_line(line.as_bytes(), &KeySpec::None)
    }

    #[test]
    fn accepts_plain_documents() {
        let p = parse(r#"{"id": "a", "text": "x\ny \u00e9 \ud83d\ude00", "source": "s", "m": {"k": [1, 2.5, null]}}"#);
        assert_eq!(p.unwrap().text, "x\ny é 😀");
        assert!(parse("{\"id\":\"a\",\"text\":\"x\"}\r").is_some());
    }

    #[test]
    fn leaves_everything_else_to_python() {
        for line in [
            r#"{"id": 1, "text": "x"}"#,
            r#"{"id": "a", "text": 3}"#,
            r#"{"id": "a"}"#,
            r#"{"id": "a", "text": "x", "text": "y"}"#,
            r#"{"id": "a", "text": "x", "m": "\ud800"}"#,
            r#"{"id": "a", "text": "x", "m": "\udc00\ud800"}"#,
            r#"{"id": "a", "text": "x", "m": 1e400}"#,
            r#"{"id": "a", "text": "x", "m": NaN}"#,
            r#"{"id": "a", "text": "x"} {"#,
            "{\"id\": \"a\", \"text\": \"x\"} \x0c",
            "{\"id\": \"a\", \"text\": \"x\u{1}\"}",
            r#"["id", "text"]"#,
            r#"{"id": "a", "text": "x""#,
            "",
        ] {
            assert!(parse(line).is_none(), "{line:?}");
        }
        let long = format!(r#"{{"id": "a", "text": "x", "m": {}}}"#, "9".repeat(400));
        assert!(parse(&long).is_none(), "a 400-digit integer overflows a double");
        let deep = format!(r#"{{"id": "a", "text": "x", "m": {}{}}}"#, "[".repeat(200), "]".repeat(200));
        assert!(parse(&deep).is_none());
        assert!(parse_line(b"{\"id\": \"a\", \"text\": \"\xff\"}", &KeySpec::None).is_none());
    }

    #[test]
    fn extracts_keys() {
        let line = br#"{"id": "a", "text": "t", "metadata": {"url": "u", "n": 1}}"#;
        let key = |p: &str| parse_line(line, &KeySpec::from_path(Some(&KeyPath::parse(p).unwrap()))).unwrap().key;
        assert_eq!(key("$.metadata.url"), KeyValue::Str("u".into()));
        assert_eq!(key("$.metadata.n"), KeyValue::NotString);
        assert_eq!(key("$.metadata.x"), KeyValue::Missing);
        assert_eq!(key("$.other"), KeyValue::Missing);
        assert_eq!(key("$.text"), KeyValue::Str("t".into()));
        assert_eq!(key("$.id"), KeyValue::Str("a".into()));
        assert!(is_blank(b" \t\x0b") && is_blank(b"") && !is_blank(b" x"));
    }
}
