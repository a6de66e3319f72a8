//! Dedup's fast path for one JSON line: its `id`, `text` and (optionally) the value at a key path,
//! read by `crate::document`.
//!
//! It accepts a line only when `dolma_pipe.documents.read_documents` would accept it with the
//! same `id` and `text`: valid UTF-8, one JSON object and nothing after it but JSON whitespace,
//! `id` and `text` both strings, present once. Every other value is validated too (not skipped),
//! so that what orjson refuses is refused here as well. Lines it does not accept (integer ids,
//! which the Python reader normalises, bad JSON, duplicated fields, very deep nesting...) are not
//! judged here: the caller hands them to the Python reader, which quarantines or normalises them
//! exactly as every other stage does.
use super::keypath::{KeyPath, KeyValue};
use crate::document::{read_fields, Id, Rest};

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

/// The document on this line, or `None` when the Python reader must decide.
pub fn parse_line(line: &[u8], key: &KeySpec) -> Option<Parsed> {
    // Invalid UTF-8 anywhere in the line (not only in the fields kept) is the Python reader's.
    std::str::from_utf8(line).ok()?;
    let head = match key {
        KeySpec::Path(p) => p.head(),
        _ => None,
    };
    let fields = read_fields(line, head, Rest::Validate).ok()?;
    if fields.duplicated {
        return None;
    }
    let doc = fields.check().ok()?;
    let Id::Str(id) = doc.id else { return None };
    let (id, text) = (id.into_owned(), doc.text.into_owned());
    let key = match key {
        KeySpec::None => KeyValue::Missing,
        KeySpec::Text => KeyValue::Str(text.clone()),
        KeySpec::Id => KeyValue::Str(id.clone()),
        KeySpec::Path(p) => match doc.extra {
            Some(v) => p.resolve_tail(&v.into_value()),
            None => KeyValue::Missing,
        },
    };
    Some(Parsed { id, text, key })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::is_blank_line as is_blank;

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
