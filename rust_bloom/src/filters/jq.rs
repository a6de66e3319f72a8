//! jq programs run by jaq 1.2, as Dolma's mixer runs them (jaq's core natives and standard
//! library), and Dolma's reading of their outputs as true or false.
use super::error::FilterError;
use jaq_interpret::{Ctx, Filter, FilterT, ParseCtx, RcIter, Val};
use serde_json::Value;
use std::rc::Rc;

/// One compiled jq program.
pub struct JqProgram {
    src: String,
    filter: Filter,
}

/// The 1-based column of a character offset.
fn column(start: usize) -> Option<usize> {
    Some(start + 1)
}

fn snippet(src: &str, span: &std::ops::Range<usize>) -> String {
    src.chars().skip(span.start).take(span.end.saturating_sub(span.start)).collect()
}

impl JqProgram {
    /// Parse and compile `src`; a syntax error or an undefined filter or variable is an error
    /// with its column (in characters).
    pub fn compile(src: &str) -> Result<Self, FilterError> {
        let (main, errs) = jaq_parse::parse(src, jaq_parse::main());
        if let Some(e) = errs.first() {
            let span = e.span();
            let found = match e.found() {
                Some(tok) => format!("unexpected {tok:?}"),
                None => "unexpected end of expression".to_string(),
            };
            let mut expected: Vec<String> = e.expected().filter_map(|t| t.as_ref().map(|t| format!("{t:?}"))).collect();
            expected.sort();
            let message =
                if expected.is_empty() { found } else { format!("{found}, expected one of {}", expected.join(" ")) };
            return Err(FilterError::compile(src, column(span.start), format!("jq syntax error: {message}")));
        }
        let Some(main) = main else {
            return Err(FilterError::compile(src, None, "jq syntax error: empty expression"));
        };
        let mut defs = ParseCtx::new(Vec::new());
        defs.insert_natives(jaq_core::core());
        defs.insert_defs(jaq_std::std());
        let filter = defs.compile(main);
        if let Some((err, span)) = defs.errs.first() {
            let message = format!("{err} {:?}", snippet(src, span));
            return Err(FilterError::compile(src, column(span.start), message));
        }
        Ok(JqProgram { src: src.to_string(), filter })
    }

    pub fn source(&self) -> &str {
        &self.src
    }

    /// Every output of the program on `input`, in order; an error stops nothing (Dolma collects
    /// all outputs first, then reads them in order).
    pub fn run(&self, input: &Val) -> Vec<Result<Val, FilterError>> {
        let inputs = RcIter::new(core::iter::empty());
        self.filter
            .run((Ctx::new(Vec::new(), &inputs), input.clone()))
            .map(|r| r.map_err(|e| FilterError::eval(&self.src, e.to_string())))
            .collect()
    }
}

/// Dolma's truth of one jq output: false, null, 0, a computed 0.0, "", [] and {} are false;
/// anything else is true, including a decimal read from the document as written (`0.0` in an
/// attribute file stays jaq's unparsed decimal, which Dolma counts as true). jq itself treats
/// only false and null as false; Dolma's rules are what configs written for Dolma mean, e.g.
/// `exclude: [".attributes.bff_duplicate_paragraph_spans"]` keeps a document whose list is empty.
pub fn truthy(v: &Val) -> bool {
    match v {
        Val::Bool(b) => *b,
        Val::Null => false,
        Val::Int(i) => *i != 0,
        Val::Float(f) => *f != 0.0,
        Val::Str(s) => !s.is_empty(),
        Val::Arr(a) => !a.is_empty(),
        Val::Obj(o) => !o.is_empty(),
        Val::Num(_) => true,
    }
}

/// A JSON value as jaq's value, exactly as jaq's own `From<serde_json::Value>` builds it (numbers
/// that fit a machine integer are integers, the others stay decimal text read lazily; objects in
/// the map's key order), without first cloning the whole document.
pub fn to_val(v: &Value) -> Val {
    match v {
        Value::Null => Val::Null,
        Value::Bool(b) => Val::Bool(*b),
        Value::Number(n) => match n.as_i64().and_then(|i| isize::try_from(i).ok()) {
            Some(i) => Val::Int(i),
            None => Val::Num(Rc::new(n.to_string())),
        },
        Value::String(s) => Val::str(s.clone()),
        Value::Array(a) => Val::arr(a.iter().map(to_val).collect()),
        Value::Object(o) => Val::obj(o.iter().map(|(k, v)| (Rc::new(k.clone()), to_val(v))).collect()),
    }
}

/// A jq output back as JSON (for span lists and replacement strings).
pub fn to_json(v: Val) -> Value {
    Value::from(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outputs(src: &str, doc: Value) -> Vec<Result<Val, FilterError>> {
        JqProgram::compile(src).unwrap().run(&to_val(&doc))
    }

    #[test]
    fn compiles_and_runs() {
        let doc = json!({"attributes": {"a": [[0, 3, 1]], "b": [[0, 3, 0.5]]}});
        assert_eq!(outputs(".attributes.a[0][2] >= 1.0", doc.clone()), vec![Ok(Val::Bool(true))]);
        assert_eq!(outputs(".attributes.b[0][2] == 0.5", doc.clone()), vec![Ok(Val::Bool(true))]);
        assert_eq!(outputs("1, 0", doc.clone()).len(), 2);
        assert!(outputs("empty", doc).is_empty());
    }

    #[test]
    fn conversion_matches_jaq() {
        let doc = json!({"i": 3, "f": 1.5, "g": 2.0, "big": 18446744073709551615u64, "s": "x", "n": null, "a": [true]});
        assert_eq!(to_val(&doc), Val::from(doc.clone()));
    }

    #[test]
    fn indexing_null_is_an_error_as_in_dolma() {
        let out = outputs(".attributes.b.b != null", json!({"attributes": {"a": 1}}));
        assert!(matches!(out.as_slice(), [Err(FilterError::Eval { .. })]));
    }

    #[test]
    fn compile_errors_have_columns() {
        match JqProgram::compile(".a | sum") {
            Err(FilterError::Compile { column: Some(6), message, .. }) => assert!(message.contains("sum"), "{message}"),
            other => panic!("{:?}", other.err()),
        }
        match JqProgram::compile(".a >= ") {
            Err(FilterError::Compile { message, .. }) => assert!(message.contains("syntax"), "{message}"),
            other => panic!("{:?}", other.err()),
        }
        assert!(JqProgram::compile("").is_err());
    }

    #[test]
    fn dolma_truthiness() {
        for (v, t) in [
            (json!(false), false),
            (json!(null), false),
            (json!(0), false),
            (json!(0.0), true), // a decimal as read: Dolma's `_ => true`
            (json!(""), false),
            (json!([]), false),
            (json!({}), false),
            (json!(true), true),
            (json!(2), true),
            (json!(0.1), true),
            (json!("x"), true),
            (json!([0]), true),
            (json!({"a": 0}), true),
        ] {
            assert_eq!(truthy(&Val::from(v.clone())), t, "{v}");
        }
        assert!(!truthy(&Val::Float(0.0)));
        assert!(truthy(&Val::Float(0.5)));
    }
}
