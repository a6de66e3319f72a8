//! The JSONPath subset of Dolma's `dedupe.documents.key`: `$` followed by `.name`,
//! `['name']`, `["name"]` or `[index]` steps, e.g. `$.text`, `$.metadata.url`,
//! `$['metadata']['warc-id']`, `$.urls[0]`. Filters, wildcards and slices are refused when the
//! config loads (a key must name one value).
use super::error::DedupError;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Field(String),
    Index(usize),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPath {
    pub steps: Vec<Step>,
}

/// A key's value in one document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyValue {
    Str(String),
    /// The path leads nowhere in this document.
    Missing,
    /// The path leads to a number, object, array, bool or null: not a key.
    NotString,
}

impl KeyPath {
    pub fn parse(path: &str) -> Result<KeyPath, DedupError> {
        let bad = |why: &'static str| Err(DedupError::UnsupportedKey { path: path.to_string(), why });
        let rest = match path.strip_prefix('$') {
            Some(r) => r,
            None => return bad("it must start with $"),
        };
        let b = rest.as_bytes();
        let mut steps = Vec::new();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'.' => {
                    let start = i + 1;
                    let mut j = start;
                    while j < b.len() && b[j] != b'.' && b[j] != b'[' {
                        j += 1;
                    }
                    let name = &rest[start..j];
                    if name.is_empty() || name == "*" || name.starts_with('.') {
                        return bad("empty, wildcard or recursive step");
                    }
                    steps.push(Step::Field(name.to_string()));
                    i = j;
                }
                b'[' => {
                    let close = match rest[i..].find(']') {
                        Some(c) => i + c,
                        None => return bad("unclosed ["),
                    };
                    let inner = rest[i + 1..close].trim();
                    let quoted = inner.len() >= 2
                        && ((inner.starts_with('\'') && inner.ends_with('\''))
                            || (inner.starts_with('"') && inner.ends_with('"')));
                    if quoted {
                        let name = &inner[1..inner.len() - 1];
                        if name.is_empty() || name.contains(['\'', '"']) {
                            return bad("empty or escaped quoted name");
                        }
                        steps.push(Step::Field(name.to_string()));
                    } else if !inner.is_empty() && inner.bytes().all(|c| c.is_ascii_digit()) {
                        match inner.parse::<usize>() {
                            Ok(n) => steps.push(Step::Index(n)),
                            Err(_) => return bad("index too large"),
                        }
                    } else {
                        return bad("filters, wildcards, slices and negative indices name more than one value");
                    }
                    i = close + 1;
                }
                _ => return bad("expected . or [ after a step"),
            }
        }
        if steps.is_empty() {
            return bad("$ alone is the whole document, not a key");
        }
        Ok(KeyPath { steps })
    }

    /// The first step's field name (every key starts at a field of the document object).
    pub fn head(&self) -> Option<&str> {
        match self.steps.first() {
            Some(Step::Field(name)) => Some(name),
            _ => None,
        }
    }

    /// Whether the path is exactly `$.<field>`.
    pub fn is_field(&self, field: &str) -> bool {
        self.steps.len() == 1 && self.head() == Some(field)
    }

    /// Follows the steps after the head from the head's value.
    pub fn resolve_tail(&self, head: &Value) -> KeyValue {
        let mut v = head;
        for step in &self.steps[1..] {
            let next = match (step, v) {
                (Step::Field(name), Value::Object(m)) => m.get(name),
                (Step::Index(n), Value::Array(a)) => a.get(*n),
                _ => None,
            };
            match next {
                Some(n) => v = n,
                None => return KeyValue::Missing,
            }
        }
        match v {
            Value::String(s) => KeyValue::Str(s.clone()),
            _ => KeyValue::NotString,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_supported_forms() {
        let p = KeyPath::parse("$.metadata.url").unwrap();
        assert_eq!(p.steps, vec![Step::Field("metadata".into()), Step::Field("url".into())]);
        let p = KeyPath::parse("$['meta data'][\"warc-id\"][2]").unwrap();
        assert_eq!(p.steps, vec![Step::Field("meta data".into()), Step::Field("warc-id".into()), Step::Index(2)]);
        assert!(KeyPath::parse("$.text").unwrap().is_field("text"));
        for bad in ["text", "$", "$..url", "$.*", "$.a[*]", "$.a[-1]", "$.a[0:2]", "$.a[?(@.b)]", "$.a[", "$a"] {
            assert!(KeyPath::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn resolves() {
        let doc: Value = serde_json::from_str(r#"{"m": {"u": "x", "n": 3, "l": ["a", "b"]}}"#).unwrap();
        let head = &doc["m"];
        assert_eq!(KeyPath::parse("$.m.u").unwrap().resolve_tail(head), KeyValue::Str("x".into()));
        assert_eq!(KeyPath::parse("$.m.l[1]").unwrap().resolve_tail(head), KeyValue::Str("b".into()));
        assert_eq!(KeyPath::parse("$.m.n").unwrap().resolve_tail(head), KeyValue::NotString);
        assert_eq!(KeyPath::parse("$.m.z").unwrap().resolve_tail(head), KeyValue::Missing);
        assert_eq!(KeyPath::parse("$.m.l[5]").unwrap().resolve_tail(head), KeyValue::Missing);
    }
}
