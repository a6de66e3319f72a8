//! JSONPath rules by jsonpath-rust 0.3.5, the engine Dolma 1.2.1 uses, read as Dolma reads them:
//! a rule matches a document when the path finds anything in it.
//!
//! One deliberate difference, in filter rules: numbers compare by value. jsonpath-rust compares
//! JSON numbers as serde_json values, where the integer `1` and the float `1.0` differ, so in
//! Dolma `$.attributes[?(@.x[0][2] >= 1.0)]` never matches a score written as `1` (the `>` half
//! compares as floats, the `==` half does not). Here a filter rule's number literals and the
//! document it is evaluated on both hold their numbers as floats (integers above 2^53 round),
//! so `>=`, `<=`, `==`, `!=`, `in`, `nin`, `anyOf`, `noneOf` and `subsetOf` see `1` and `1.0` as
//! equal. Span selectors read the document unchanged (their spans need integer offsets).
//!
//! Negative or fractional array indexes (`[-1]`) make the engine panic; they are refused when
//! the rule compiles, and evaluation runs under `catch_unwind` so no panic crosses into Python.
use super::error::FilterError;
use jsonpath_rust::parser::errors::JsonPathParserError;
use jsonpath_rust::parser::model::{FilterExpression, JsonPath, JsonPathIndex, Operand};
use jsonpath_rust::parser::parser::parse_json_path;
use jsonpath_rust::path::json_path_instance;
use jsonpath_rust::JsonPathValue;
use serde_json::{Number, Value};
use std::panic::{catch_unwind, AssertUnwindSafe};

pub struct JsonPathRule {
    src: String,
    path: JsonPath,
    // `$.a.b.c`: a chain of plain field names, looked up directly (what the engine finds for it).
    fields: Option<Vec<String>>,
}

fn plain_fields(path: &JsonPath) -> Option<Vec<String>> {
    let JsonPath::Chain(parts) = path else { return None };
    let (first, rest) = parts.split_first()?;
    if !matches!(first, JsonPath::Root) {
        return None;
    }
    rest.iter().map(|p| if let JsonPath::Field(f) = p { Some(f.clone()) } else { None }).collect()
}

fn parse_error(src: &str, e: JsonPathParserError<'_>) -> FilterError {
    match e {
        JsonPathParserError::PestError(pe) => {
            let column = match pe.line_col {
                pest::error::LineColLocation::Pos((_, c)) => c,
                pest::error::LineColLocation::Span((_, c), _) => c,
            };
            FilterError::compile(src, Some(column), format!("JSONPath syntax error: {}", pe.variant.message()))
        }
        other => FilterError::compile(src, None, format!("JSONPath syntax error: {other}")),
    }
}

fn check_index(src: &str, v: &Value) -> Result<(), FilterError> {
    if v.as_u64().is_none() {
        return Err(FilterError::compile(
            src,
            None,
            format!("array index {v} is not supported by the JSONPath engine (indexes are integers >= 0)"),
        ));
    }
    Ok(())
}

/// Check indexes; with `numeric`, turn every number literal of every filter into a float.
fn walk(src: &str, p: &mut JsonPath, numeric: bool) -> Result<(), FilterError> {
    match p {
        JsonPath::Chain(parts) => parts.iter_mut().try_for_each(|x| walk(src, x, numeric)),
        JsonPath::Current(inner) => walk(src, inner, numeric),
        JsonPath::Index(JsonPathIndex::Single(v)) => check_index(src, v),
        JsonPath::Index(JsonPathIndex::UnionIndex(vs)) => vs.iter().try_for_each(|v| check_index(src, v)),
        JsonPath::Index(JsonPathIndex::Filter(fe)) => walk_filter(src, fe, numeric),
        _ => Ok(()),
    }
}

fn walk_filter(src: &str, fe: &mut FilterExpression, numeric: bool) -> Result<(), FilterError> {
    match fe {
        FilterExpression::Atom(l, _, r) => {
            walk_operand(src, l, numeric)?;
            walk_operand(src, r, numeric)
        }
        FilterExpression::And(a, b) | FilterExpression::Or(a, b) => {
            walk_filter(src, a, numeric)?;
            walk_filter(src, b, numeric)
        }
        FilterExpression::Not(a) => walk_filter(src, a, numeric),
    }
}

fn walk_operand(src: &str, op: &mut Operand, numeric: bool) -> Result<(), FilterError> {
    match op {
        Operand::Static(v) => {
            if numeric {
                *v = numbers_as_floats(v);
            }
            Ok(())
        }
        Operand::Dynamic(jp) => walk(src, jp, numeric),
    }
}

/// A copy of `v` whose numbers are all floats (what filter rules are evaluated on).
pub fn numbers_as_floats(v: &Value) -> Value {
    match v {
        Value::Number(n) if !n.is_f64() => {
            n.as_f64().and_then(Number::from_f64).map(Value::Number).unwrap_or_else(|| Value::Number(n.clone()))
        }
        Value::Array(a) => Value::Array(a.iter().map(numbers_as_floats).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), numbers_as_floats(v))).collect()),
        other => other.clone(),
    }
}

impl JsonPathRule {
    /// A filter rule (number literals as floats: evaluate it on [`numbers_as_floats`] of the document).
    pub fn filter(src: &str) -> Result<Self, FilterError> {
        Self::compile(src, true)
    }

    /// A span selector (evaluated on the document as it is).
    pub fn selector(src: &str) -> Result<Self, FilterError> {
        Self::compile(src, false)
    }

    fn compile(src: &str, numeric: bool) -> Result<Self, FilterError> {
        let mut path = parse_json_path(src).map_err(|e| parse_error(src, e))?;
        walk(src, &mut path, numeric)?;
        let fields = plain_fields(&path);
        Ok(JsonPathRule { src: src.to_string(), path, fields })
    }

    pub fn source(&self) -> &str {
        &self.src
    }

    /// For a plain `$.a.b` path, what it finds without running the engine: `Some(None)` when
    /// nothing (an absent key, or a value that is not an object on the way); `None` for other paths.
    pub fn lookup<'a>(&self, doc: &'a Value) -> Option<Option<&'a Value>> {
        let fields = self.fields.as_ref()?;
        let mut v = doc;
        for f in fields {
            match v.as_object().and_then(|o| o.get(f)) {
                Some(x) => v = x,
                None => return Some(None),
            }
        }
        Some(Some(v))
    }

    /// Everything the path finds in `doc` (Dolma's `find()`, as a list).
    pub fn find(&self, doc: &Value) -> Result<Vec<Value>, FilterError> {
        catch_unwind(AssertUnwindSafe(|| {
            json_path_instance(&self.path, doc)
                .find(JsonPathValue::from_root(doc))
                .into_iter()
                .filter_map(|v| match v {
                    JsonPathValue::Slice(d, _) => Some(d.clone()),
                    JsonPathValue::NewValue(d) => Some(d),
                    JsonPathValue::NoValue => None,
                })
                .collect()
        }))
        .map_err(|_| FilterError::eval(&self.src, "the JSONPath engine failed on this document"))
    }

    /// Whether the path finds anything in `doc` (Dolma: `find() != null`).
    pub fn matches(&self, doc: &Value) -> Result<bool, FilterError> {
        catch_unwind(AssertUnwindSafe(|| {
            json_path_instance(&self.path, doc).find(JsonPathValue::from_root(doc)).iter().any(|v| v.has_value())
        }))
        .map_err(|_| FilterError::eval(&self.src, "the JSONPath engine failed on this document"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn matches(rule: &str, doc: &Value) -> bool {
        JsonPathRule::filter(rule).unwrap().matches(&numbers_as_floats(doc)).unwrap()
    }

    #[test]
    fn dolmas_own_examples() {
        let doc = json!({"attributes": {"value1": [[0, 30, 1.0], [30, 45, 0.5]], "value2": [[45, 60, 0.0]]}});
        let rule = "$@.attributes[?(@.value1 && @.value1[0] && @.value1[0][2] >= 1.0)]";
        assert!(matches(rule, &doc));
        assert!(matches("$..value2", &doc));
        assert!(!matches("$.attributes.value3", &doc));
        assert!(matches("$.attributes[?(@.value1[1][2] < 0.6)]", &doc));
    }

    #[test]
    fn integer_and_float_compare_by_value() {
        let int_one = json!({"attributes": {"dup": [[0, 10, 1]]}});
        let float_one = json!({"attributes": {"dup": [[0, 10, 1.0]]}});
        for rule in [
            "$.attributes[?(@.dup[0][2] >= 1.0)]",
            "$.attributes[?(@.dup[0][2] >= 1)]",
            "$.attributes[?(@.dup[0][2] == 1.0)]",
            "$.attributes[?(@.dup[0][2] == 1)]",
            "$.attributes[?(@.dup[0][2] <= 1.0)]",
            "$.attributes[?(@.dup[0][2] in [1.0, 2])]",
        ] {
            assert!(matches(rule, &int_one), "{rule} on 1");
            assert!(matches(rule, &float_one), "{rule} on 1.0");
        }
        assert!(!matches("$.attributes[?(@.dup[0][2] != 1.0)]", &int_one));
        assert!(!matches("$.attributes[?(@.dup[0][2] > 1.0)]", &int_one));
        // The engine itself (what Dolma runs) misses it: the documented difference.
        let raw = JsonPathRule::selector("$.attributes[?(@.dup[0][2] >= 1.0)]").unwrap();
        assert!(!raw.matches(&int_one).unwrap());
    }

    #[test]
    fn plain_paths_are_looked_up_as_the_engine_finds_them() {
        let doc = json!({"attributes": {"pii": {"email": [[1, 2, 0.8]]}, "list": [1]}, "text": "t"});
        for path in
            ["$.attributes.pii.email", "$.attributes.none", "$.attributes.list.x", "$.text.x", "$.attributes", "$"]
        {
            let rule = JsonPathRule::selector(path).unwrap();
            let engine = rule.find(&doc).unwrap();
            let direct = rule.lookup(&doc);
            assert_eq!(direct.unwrap().cloned().into_iter().collect::<Vec<_>>(), engine, "{path}");
        }
        assert!(JsonPathRule::selector("$.attributes[?(@.x)]").unwrap().lookup(&doc).is_none());
        assert!(JsonPathRule::selector("$..email").unwrap().lookup(&doc).is_none());
    }

    #[test]
    fn find_returns_values() {
        let doc = json!({"attributes": {"pii": {"email": [[1, 2, 0.8]]}}});
        let sel = JsonPathRule::selector("$.attributes.pii.email").unwrap();
        assert_eq!(sel.find(&doc).unwrap(), vec![json!([[1, 2, 0.8]])]);
        assert!(JsonPathRule::selector("$.attributes.none").unwrap().find(&doc).unwrap().is_empty());
    }

    #[test]
    fn bad_rules_are_refused() {
        match JsonPathRule::filter("$.attributes[?(@.x >= )]") {
            Err(FilterError::Compile { column: Some(_), .. }) => {}
            other => panic!("{:?}", other.err()),
        }
        assert!(JsonPathRule::filter("$.attributes.x[-1]").is_err());
        assert!(JsonPathRule::filter("$.attributes.x[0,-1]").is_err());
        assert!(JsonPathRule::filter("$.a[?(@.b[-1] > 1)]").is_err());
    }
}
