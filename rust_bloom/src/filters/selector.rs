//! Span selectors (`span_replacement[].span`) and replacements, read as Dolma reads them.
//!
//! A selector's result is what Dolma's `select` returns: nothing found is null (no spans), one
//! value is itself, several are a list. It must then be a list of `[start, end, score]` spans.
//! A replacement starting with `$` is a jq program (after the `$`) whose output, a string,
//! replaces each span; any other replacement is literal text, `{}` standing for the span's text.
use super::error::FilterError;
use super::jq::{to_json, JqProgram};
use super::jsonpath::JsonPathRule;
use super::spans::Replacement;
use jaq_interpret::Val;
use serde_json::Value;
use std::borrow::Cow;

pub enum Selector {
    Jq(JqProgram),
    JsonPath(JsonPathRule),
}

impl Selector {
    pub fn new(src: &str, jq: bool) -> Result<Self, FilterError> {
        Ok(if jq { Selector::Jq(JqProgram::compile(src)?) } else { Selector::JsonPath(JsonPathRule::selector(src)?) })
    }

    pub fn is_jq(&self) -> bool {
        matches!(self, Selector::Jq(_))
    }

    fn source(&self) -> &str {
        match self {
            Selector::Jq(p) => p.source(),
            Selector::JsonPath(p) => p.source(),
        }
    }

    /// Null, one value, or a list of values (`val` is `doc` as jaq's value, needed for jq).
    pub fn select<'a>(&self, doc: &'a Value, val: Option<&Val>) -> Result<Cow<'a, Value>, FilterError> {
        if let Selector::JsonPath(p) = self {
            if let Some(found) = p.lookup(doc) {
                return Ok(found.map_or(Cow::Owned(Value::Null), Cow::Borrowed));
            }
        }
        let mut found = match self {
            Selector::Jq(p) => {
                let input = val.ok_or_else(|| FilterError::eval(p.source(), "no jq value of the document"))?;
                p.run(input).into_iter().map(|r| r.map(to_json)).collect::<Result<Vec<_>, _>>()?
            }
            Selector::JsonPath(p) => p.find(doc)?,
        };
        Ok(Cow::Owned(match found.len() {
            0 => Value::Null,
            1 => found.pop().unwrap_or(Value::Null),
            _ => Value::Array(found),
        }))
    }
}

pub enum ReplacementText {
    Literal(String),
    Jq(JqProgram),
}

impl ReplacementText {
    pub fn new(src: &str) -> Result<Self, FilterError> {
        match src.strip_prefix('$') {
            Some(program) => Ok(ReplacementText::Jq(JqProgram::compile(program)?)),
            None => Ok(ReplacementText::Literal(src.to_string())),
        }
    }

    pub fn is_jq(&self) -> bool {
        matches!(self, ReplacementText::Jq(_))
    }

    fn get(&self, val: Option<&Val>) -> Result<Cow<'_, str>, FilterError> {
        match self {
            ReplacementText::Literal(s) => Ok(Cow::Borrowed(s)),
            ReplacementText::Jq(p) => {
                let input = val.ok_or_else(|| FilterError::eval(p.source(), "no jq value of the document"))?;
                let outputs = p.run(input).into_iter().map(|r| r.map(to_json)).collect::<Result<Vec<_>, _>>()?;
                match outputs.as_slice() {
                    [Value::String(s)] => Ok(Cow::Owned(s.clone())),
                    _ => Err(FilterError::eval(p.source(), "a replacement program must output one string")),
                }
            }
        }
    }
}

/// One `span_replacement` entry: which spans, which scores, replaced by what.
pub struct SpanReplacer {
    pub selector: Selector,
    pub min_score: f64,
    pub max_score: f64,
    pub replacement: ReplacementText,
}

fn span_field(expr: &str, span: &Value, i: usize) -> Result<f64, FilterError> {
    let bad = || FilterError::eval(expr, format!("span {span} is not [start, end, score]"));
    let arr = span.as_array().ok_or_else(bad)?;
    let v = arr.get(i).ok_or_else(bad)?;
    if i < 2 {
        v.as_u64().map(|x| x as f64).ok_or_else(|| {
            FilterError::eval(expr, format!("span {span}: start and end must be integers >= 0 (character offsets)"))
        })
    } else {
        v.as_f64().ok_or_else(bad)
    }
}

impl SpanReplacer {
    /// The spans of `doc` whose score is in `[min_score, max_score)`, with their replacement.
    pub fn spans(&self, doc: &Value, val: Option<&Val>) -> Result<Vec<Replacement<'_>>, FilterError> {
        let expr = self.selector.source();
        match self.selector.select(doc, val)?.as_ref() {
            Value::Null => Ok(Vec::new()),
            Value::Array(spans) => {
                let mut out = Vec::new();
                for span in spans {
                    let start = span_field(expr, span, 0)? as usize;
                    let end = span_field(expr, span, 1)? as usize;
                    let score = span_field(expr, span, 2)?;
                    if score >= self.min_score && score < self.max_score {
                        out.push(Replacement { start, end, text: self.replacement.get(val)? });
                    }
                }
                Ok(out)
            }
            other => Err(FilterError::eval(expr, format!("selected {other}, expected a list of spans or null"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filters::jq::to_val;
    use serde_json::json;

    #[test]
    fn jsonpath_and_jq_select_the_same_spans() {
        let doc = json!({"attributes": {"pii": {"email": [[1, 3, 0.8], [4, 6, 0.1]]}}});
        let val = to_val(&doc);
        for (src, jq) in [("$.attributes.pii.email", false), (".attributes?.pii?.email?", true)] {
            let r = SpanReplacer {
                selector: Selector::new(src, jq).unwrap(),
                min_score: 0.5,
                max_score: f64::INFINITY,
                replacement: ReplacementText::new("[{}]").unwrap(),
            };
            let spans = r.spans(&doc, Some(&val)).unwrap();
            assert_eq!(spans, vec![Replacement { start: 1, end: 3, text: Cow::Borrowed("[{}]") }], "{src}");
        }
    }

    #[test]
    fn missing_spans_are_none_and_bad_spans_are_errors() {
        let doc = json!({"attributes": {"x": [[1.5, 2, 1]], "y": 3}});
        let mk = |src: &str| SpanReplacer {
            selector: Selector::new(src, false).unwrap(),
            min_score: f64::NEG_INFINITY,
            max_score: f64::INFINITY,
            replacement: ReplacementText::new("").unwrap(),
        };
        assert!(mk("$.attributes.z").spans(&doc, None).unwrap().is_empty());
        assert!(mk("$.attributes.x").spans(&doc, None).is_err());
        assert!(mk("$.attributes.y").spans(&doc, None).is_err());
    }

    #[test]
    fn jq_replacement() {
        let doc = json!({"source": "web", "attributes": {"x": [[0, 1, 1.0]]}});
        let val = to_val(&doc);
        let r = SpanReplacer {
            selector: Selector::new("$.attributes.x", false).unwrap(),
            min_score: 0.5,
            max_score: f64::INFINITY,
            replacement: ReplacementText::new("$.source").unwrap(),
        };
        assert_eq!(r.spans(&doc, Some(&val)).unwrap()[0].text, "web");
    }
}
