//! A document line read whole, as a `serde_json::Value`: for a caller that rewrites the document
//! (the mixer) or reads rows of another shape beside it (attribute rows).
use super::{type_name, DocumentError, Id};
use serde_json::Value;

/// The line's JSON value; `InvalidUtf8` or `MalformedJson` when it has none.
pub fn parse_value(line: &[u8]) -> Result<Value, DocumentError> {
    serde_json::from_slice(line).map_err(|e| match std::str::from_utf8(line) {
        Err(u) => DocumentError::InvalidUtf8 { valid_up_to: u.valid_up_to() },
        Ok(_) => DocumentError::MalformedJson(e.to_string()),
    })
}

/// An `id` value (`None`: the field is absent) as a document's id.
pub fn value_id(v: Option<&Value>) -> Result<Id<'_>, DocumentError> {
    match v {
        None | Some(Value::Null) => Err(DocumentError::MissingId),
        Some(Value::String(s)) => Ok(Id::Str(s.into())),
        Some(Value::Number(n)) if !n.is_f64() => Ok(Id::Int(n.to_string())),
        Some(other) => Err(DocumentError::BadId(type_name(other))),
    }
}

/// A `text` value (`None`: the field is absent) as a document's text.
pub fn value_text(v: Option<&Value>) -> Result<&str, DocumentError> {
    match v {
        None | Some(Value::Null) => Err(DocumentError::MissingText),
        Some(Value::String(s)) => Ok(s),
        Some(other) => Err(DocumentError::BadText(type_name(other))),
    }
}

/// Checks a parsed line as a document (an object, then its id, then its text); its id.
pub fn check_value(doc: &Value) -> Result<Id<'_>, DocumentError> {
    let Value::Object(obj) = doc else {
        return Err(DocumentError::NotAnObject);
    };
    let id = value_id(obj.get("id"))?;
    value_text(obj.get("text"))?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &[u8]) -> Result<String, DocumentError> {
        let v = parse_value(line)?;
        check_value(&v).map(Id::into_string)
    }

    #[test]
    fn documents_and_what_is_wrong_with_the_rest() {
        assert_eq!(read(br#"{"id": "a", "text": "x"}"#), Ok("a".into()));
        assert_eq!(read(br#"{"id": -7, "text": "x"}"#), Ok("-7".into()));
        assert_eq!(read(br#"{"id": 18446744073709551615, "text": "x"}"#), Ok("18446744073709551615".into()));
        let kinds: Vec<&str> = [
            &b"{broken"[..],
            b"[1]",
            br#"{"text": "x"}"#,
            br#"{"id": null, "text": "x"}"#,
            br#"{"id": 1.5, "text": "x"}"#,
            br#"{"id": 1e400, "text": "x"}"#,
            br#"{"id": 7}"#,
            br#"{"id": 7, "text": [3]}"#,
            b"\xff\xfe",
        ]
        .iter()
        .map(|l| read(l).unwrap_err().kind())
        .collect();
        assert_eq!(
            kinds,
            [
                "malformed_json",
                "not_an_object",
                "missing_id",
                "missing_id",
                "bad_id",
                "malformed_json",
                "missing_text",
                "bad_text",
                "invalid_utf8"
            ]
        );
        assert_eq!(
            read(br#"{"id": true, "text": "x"}"#).unwrap_err().to_string(),
            DocumentError::BadId("bool").to_string()
        );
        assert_eq!(read(b"{\"id\": \"\xe9\"}"), Err(DocumentError::InvalidUtf8 { valid_up_to: 8 }));
    }
}
