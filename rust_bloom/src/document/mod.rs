//! One reader of a Dolma document line, for every kernel that reads documents (dedup's scan, the
//! mixer, the report's column pass), with the rules of `dolma_pipe.documents`:
//!
//! - a document is a JSON object whose `id` is a string or an integer within 64 bits (its text
//!   is then the integer in decimal) and whose `text` is a string;
//! - a line that is not one is a [`DocumentError`], whose `kind` is the quarantine kind the Python
//!   reader gives it (`invalid_utf8`, `malformed_json`, `not_an_object`, `missing_id`, `bad_id`,
//!   `missing_text`, `bad_text`) and whose message is the Python reader's message.
//!
//! Two ways in, for two kinds of caller:
//!
//! - `fields`: a streaming parse that keeps `id`, `text` and one more top-level field, borrowing
//!   strings from the line, and either validates or skips every other value (dedup's fast path and
//!   the report's column pass, which never need the document whole);
//! - `value`: the whole line as a `serde_json::Value` (the mixer, which rewrites the document).
pub mod fields;
pub mod value;

use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

pub use fields::{read_fields, Document, Field, Fields, Key, Rest};
pub use value::{check_value, parse_value, value_id, value_text};

/// Why a line is not a document; `kind()` is its quarantine kind, `Display` its message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentError {
    /// The line is not UTF-8; the offset of the first bad byte.
    InvalidUtf8 {
        valid_up_to: usize,
    },
    /// The line is not one JSON value (the parser's message).
    MalformedJson(String),
    NotAnObject,
    /// `id` is absent or null.
    MissingId,
    /// `id` is neither a string nor an integer within 64 bits (Python's name of its type).
    BadId(&'static str),
    /// `text` is absent or null.
    MissingText,
    /// `text` is not a string (Python's name of its type).
    BadText(&'static str),
}

impl DocumentError {
    /// The quarantine kind `dolma_pipe.documents` records for this error.
    pub fn kind(&self) -> &'static str {
        match self {
            DocumentError::InvalidUtf8 { .. } => "invalid_utf8",
            DocumentError::MalformedJson(_) => "malformed_json",
            DocumentError::NotAnObject => "not_an_object",
            DocumentError::MissingId => "missing_id",
            DocumentError::BadId(_) => "bad_id",
            DocumentError::MissingText => "missing_text",
            DocumentError::BadText(_) => "bad_text",
        }
    }

    /// Whether the error is about the document's id (absent or of another type).
    pub fn is_id(&self) -> bool {
        matches!(self, DocumentError::MissingId | DocumentError::BadId(_))
    }
}

impl fmt::Display for DocumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocumentError::InvalidUtf8 { valid_up_to } => write!(f, "invalid UTF-8 at byte {valid_up_to}"),
            DocumentError::MalformedJson(message) => f.write_str(message),
            DocumentError::NotAnObject => f.write_str("line is valid JSON but not an object"),
            DocumentError::MissingId => f.write_str("document has no 'id'"),
            DocumentError::BadId(t) => write!(f, "'id' must be a string or an integer within 64 bits, got {t}"),
            DocumentError::MissingText => f.write_str("document has no 'text'"),
            DocumentError::BadText(t) => write!(f, "'text' must be a string, got {t}"),
        }
    }
}

impl std::error::Error for DocumentError {}

/// A document's id: a string as the line gives it, or an integer (then its decimal text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Id<'de> {
    Str(Cow<'de, str>),
    Int(String),
}

impl Id<'_> {
    /// The id as text (what every stage compares and writes).
    pub fn as_str(&self) -> &str {
        match self {
            Id::Str(s) => s,
            Id::Int(s) => s,
        }
    }

    pub fn into_string(self) -> String {
        match self {
            Id::Str(s) => s.into_owned(),
            Id::Int(s) => s,
        }
    }

    pub fn into_owned(self) -> Id<'static> {
        match self {
            Id::Str(s) => Id::Str(Cow::Owned(s.into_owned())),
            Id::Int(s) => Id::Int(s),
        }
    }
}

/// Python's name of the type a JSON value reads as (`type(x).__name__` after `orjson.loads`).
pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Whether `line` is one the Python reader skips as blank (`bytes.isspace()`, or empty).
#[inline]
pub fn is_blank_line(line: &[u8]) -> bool {
    line.iter().all(|c| matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_messages_are_the_python_readers() {
        let cases = [
            (DocumentError::InvalidUtf8 { valid_up_to: 3 }, "invalid_utf8", "invalid UTF-8 at byte 3"),
            (DocumentError::NotAnObject, "not_an_object", "line is valid JSON but not an object"),
            (DocumentError::MissingId, "missing_id", "document has no 'id'"),
            (DocumentError::BadId("float"), "bad_id", "'id' must be a string or an integer within 64 bits, got float"),
            (DocumentError::MissingText, "missing_text", "document has no 'text'"),
            (DocumentError::BadText("int"), "bad_text", "'text' must be a string, got int"),
        ];
        for (e, kind, message) in cases {
            assert_eq!((e.kind(), e.to_string().as_str()), (kind, message));
        }
        assert!(is_blank_line(b" \t\x0b") && is_blank_line(b"") && !is_blank_line(b" x"));
        assert_eq!(Id::Int("7".into()).as_str(), "7");
    }
}
