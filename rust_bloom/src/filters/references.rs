//! The attribute names a jq or JSONPath rule reads, found in its parse tree, so a config can be
//! checked against the attribute files when it loads (a rule naming an attribute no file holds
//! matches nothing, or everything, without an error).
//!
//! A name counts when the rule reads it as a fixed key of the document's `attributes` object:
//!
//! - jq: `.attributes.foo`, `.attributes["foo"]`, `.attributes."foo"`, `.attributes | .foo`,
//!   `(.attributes // {}).foo`, `.attributes | has("foo")`, `.attributes as $a | $a.foo`,
//!   `select(...)`, `first(...)` and the like over them;
//! - JSONPath: `$.attributes.foo`, `$['attributes']['foo']`, `$.attributes['foo','bar']`, and
//!   `@.foo` in a filter applied to the attributes object (`$.attributes[?(@.foo[0][2] > 0.5)]`).
//!
//! Anything less certain (a computed key, `..`, a filter over an array, the argument of `map`) is
//! left out: a name found here is one the rule certainly reads, so a warning about it is never a
//! guess.
use super::error::FilterError;
use jaq_syn::filter::{BinaryOp, Filter, KeyVal};
use jaq_syn::path::Part;
use jaq_syn::string::Part as StrPart;
use jaq_syn::{Spanned, Str};
use jsonpath_rust::parser::model::{FilterExpression, JsonPath, JsonPathIndex, Operand};
use jsonpath_rust::parser::parser::parse_json_path;

/// What a value in the rule is known to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Document,
    Attributes,
    Other,
}

#[derive(Default)]
struct Names {
    found: Vec<String>,
}

impl Names {
    fn add(&mut self, name: &str) {
        if !self.found.iter().any(|n| n == name) {
            self.found.push(name.to_string());
        }
    }

    /// The context after reading key `key` of a value in context `ctx`.
    fn key(&mut self, ctx: Ctx, key: &str) -> Ctx {
        match ctx {
            Ctx::Document if key == "attributes" => Ctx::Attributes,
            Ctx::Attributes => {
                self.add(key);
                Ctx::Other
            }
            _ => Ctx::Other,
        }
    }
}

/// The names of a jq rule (the rule must compile).
pub fn jq_attribute_names(src: &str) -> Result<Vec<String>, FilterError> {
    let (main, errs) = jaq_parse::parse(src, jaq_parse::main());
    let Some(main) = main.filter(|_| errs.is_empty()) else {
        return Err(FilterError::compile(src, None, "jq syntax error"));
    };
    let mut names = Names::default();
    let mut jq = Jq { names: &mut names, vars: Vec::new() };
    jq.eval(&main.body, Ctx::Document);
    Ok(names.found)
}

/// A string with no interpolation, as its text.
fn constant(s: &Str<Spanned<Filter>>) -> Option<String> {
    if s.fmt.is_some() {
        return None;
    }
    let mut out = String::new();
    for part in &s.parts {
        match part {
            StrPart::Str(t) => out.push_str(t),
            StrPart::Fun(_) => return None,
        }
    }
    Some(out)
}

fn constant_filter(f: &Spanned<Filter>) -> Option<String> {
    match &f.0 {
        Filter::Str(s) => constant(s),
        _ => None,
    }
}

struct Jq<'a> {
    names: &'a mut Names,
    vars: Vec<(String, Ctx)>,
}

/// Calls whose arguments run on the call's own input (the others' may run on elements).
const SAME_INPUT: &[&str] = &[
    "select",
    "first",
    "last",
    "isempty",
    "limit",
    "has",
    "contains",
    "inside",
    "startswith",
    "endswith",
    "test",
    "ltrimstr",
    "rtrimstr",
    "index",
    "rindex",
    "indices",
    "split",
    "join",
    "error",
    "tostring",
    "not",
];

impl Jq<'_> {
    /// Walk `f` run on a value in context `ctx`; the context of its outputs.
    fn eval(&mut self, f: &Spanned<Filter>, ctx: Ctx) -> Ctx {
        match &f.0 {
            Filter::Id => ctx,
            Filter::Var(v) => self.vars.iter().rev().find(|(n, _)| n == v).map_or(Ctx::Other, |(_, c)| *c),
            Filter::Num(_) | Filter::Recurse => Ctx::Other,
            Filter::Str(s) => {
                self.string(s, ctx);
                Ctx::Other
            }
            Filter::Array(inner) => {
                if let Some(inner) = inner {
                    self.eval(inner, ctx);
                }
                Ctx::Other
            }
            Filter::Object(kvs) => {
                for kv in kvs {
                    match kv {
                        KeyVal::Filter(k, v) => {
                            self.eval(k, ctx);
                            self.eval(v, ctx);
                        }
                        KeyVal::Str(k, v) => {
                            self.string(k, ctx);
                            match v {
                                Some(v) => {
                                    self.eval(v, ctx);
                                }
                                // `{foo}` is `{foo: .foo}`
                                None => {
                                    if let Some(key) = constant(k) {
                                        self.names.key(ctx, &key);
                                    }
                                }
                            }
                        }
                    }
                }
                Ctx::Other
            }
            Filter::Path(base, path) => {
                let mut c = self.eval(base, ctx);
                for (part, _) in path {
                    c = match part {
                        Part::Index(i) => match constant_filter(i) {
                            Some(key) => self.names.key(c, &key),
                            None => {
                                // An index expression runs on the path's input.
                                self.eval(i, ctx);
                                Ctx::Other
                            }
                        },
                        Part::Range(a, b) => {
                            for x in [a, b].into_iter().flatten() {
                                self.eval(x, ctx);
                            }
                            Ctx::Other
                        }
                    };
                }
                c
            }
            Filter::Ite(branches, otherwise) => {
                let mut outs = Vec::new();
                for (cond, then) in branches {
                    self.eval(cond, ctx);
                    outs.push(self.eval(then, ctx));
                }
                outs.push(match otherwise {
                    Some(e) => self.eval(e, ctx),
                    None => ctx, // `if c then x end` is `if c then x else . end`
                });
                same(&outs)
            }
            Filter::Fold(_, fold) => {
                let xs = self.eval(&fold.xs, ctx);
                self.eval(&fold.init, ctx);
                self.vars.push((fold.x.clone(), xs));
                self.eval(&fold.f, Ctx::Other);
                self.vars.pop();
                Ctx::Other
            }
            Filter::TryCatch(body, catch) => {
                let c = self.eval(body, ctx);
                if let Some(catch) = catch {
                    self.eval(catch, Ctx::Other);
                }
                c
            }
            Filter::Try(inner) => self.eval(inner, ctx),
            Filter::Neg(inner) => {
                self.eval(inner, ctx);
                Ctx::Other
            }
            Filter::Call(name, args) => {
                let same_input = SAME_INPUT.contains(&name.as_str());
                for (i, arg) in args.iter().enumerate() {
                    // any(generator; condition), all(...): the generator runs on the input.
                    let runs_on_input =
                        same_input || (matches!(name.as_str(), "any" | "all") && args.len() == 2 && i == 0);
                    if runs_on_input {
                        self.eval(arg, ctx);
                    } else {
                        self.eval(arg, Ctx::Other);
                    }
                }
                match (name.as_str(), args.as_slice()) {
                    ("has", [key]) => {
                        if let Some(key) = constant_filter(key) {
                            if ctx == Ctx::Attributes {
                                self.names.add(&key);
                            }
                        }
                        Ctx::Other
                    }
                    ("select", [_]) => ctx,
                    ("first" | "last", [arg]) => self.eval_quiet(arg, ctx),
                    _ => Ctx::Other,
                }
            }
            Filter::Binary(l, op, r) => match op {
                BinaryOp::Pipe(None) => {
                    let c = self.eval(l, ctx);
                    self.eval(r, c)
                }
                BinaryOp::Pipe(Some(var)) => {
                    let c = self.eval(l, ctx);
                    self.vars.push((var.clone(), c));
                    let out = self.eval(r, ctx);
                    self.vars.pop();
                    out
                }
                BinaryOp::Alt => {
                    let a = self.eval(l, ctx);
                    let b = self.eval(r, ctx);
                    // `(.attributes // {})`: the attributes, or a stand-in for them.
                    if a != Ctx::Other {
                        a
                    } else {
                        b
                    }
                }
                BinaryOp::Comma => {
                    let a = self.eval(l, ctx);
                    let b = self.eval(r, ctx);
                    same(&[a, b])
                }
                BinaryOp::Assign(_) => {
                    self.eval(l, ctx);
                    self.eval(r, Ctx::Other);
                    Ctx::Other
                }
                BinaryOp::Or | BinaryOp::And | BinaryOp::Math(_) | BinaryOp::Ord(_) => {
                    self.eval(l, ctx);
                    self.eval(r, ctx);
                    Ctx::Other
                }
            },
        }
    }

    /// The context of `f`'s outputs, its names already counted.
    fn eval_quiet(&mut self, f: &Spanned<Filter>, ctx: Ctx) -> Ctx {
        let mut quiet = Names::default();
        let mut jq = Jq { names: &mut quiet, vars: self.vars.clone() };
        jq.eval(f, ctx)
    }

    fn string(&mut self, s: &Str<Spanned<Filter>>, ctx: Ctx) {
        if let Some(fmt) = &s.fmt {
            self.eval(fmt, Ctx::Other);
        }
        for part in &s.parts {
            if let StrPart::Fun(f) = part {
                self.eval(f, ctx);
            }
        }
    }
}

fn same(ctxs: &[Ctx]) -> Ctx {
    match ctxs.split_first() {
        Some((first, rest)) if rest.iter().all(|c| c == first) => *first,
        _ => Ctx::Other,
    }
}

/// The names of a JSONPath rule (the rule must parse).
pub fn jsonpath_attribute_names(src: &str) -> Result<Vec<String>, FilterError> {
    let path =
        parse_json_path(src).map_err(|e| FilterError::compile(src, None, format!("JSONPath syntax error: {e}")))?;
    let mut names = Names::default();
    walk_path(&path, Ctx::Document, &mut names);
    Ok(names.found)
}

/// Walk `p` run on a value in context `ctx` (the root is the document); the context after it.
fn walk_path(p: &JsonPath, ctx: Ctx, names: &mut Names) -> Ctx {
    match p {
        JsonPath::Root => Ctx::Document,
        JsonPath::Empty => ctx,
        JsonPath::Chain(parts) => parts.iter().fold(ctx, |c, part| walk_path(part, c, names)),
        JsonPath::Current(inner) => walk_path(inner, ctx, names),
        JsonPath::Field(key) => names.key(ctx, key),
        JsonPath::Index(JsonPathIndex::UnionKeys(keys)) => {
            for key in keys {
                names.key(ctx, key);
            }
            Ctx::Other
        }
        JsonPath::Index(JsonPathIndex::Filter(fe)) => {
            // On an object the filter tests the object itself (`@` is it) and passes it on; on an
            // array it tests each element.
            walk_filter(fe, ctx, names);
            ctx
        }
        JsonPath::Index(_) | JsonPath::Descent(_) | JsonPath::DescentW | JsonPath::Wildcard | JsonPath::Fn(_) => {
            Ctx::Other
        }
    }
}

fn walk_filter(fe: &FilterExpression, current: Ctx, names: &mut Names) {
    match fe {
        FilterExpression::Atom(l, _, r) => {
            for op in [l, r] {
                if let Operand::Dynamic(p) = op {
                    walk_path(p, current, names);
                }
            }
        }
        FilterExpression::And(a, b) | FilterExpression::Or(a, b) => {
            walk_filter(a, current, names);
            walk_filter(b, current, names);
        }
        FilterExpression::Not(a) => walk_filter(a, current, names),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn jq(src: &str) -> Vec<String> {
        jq_attribute_names(src).unwrap()
    }

    fn jp(src: &str) -> Vec<String> {
        jsonpath_attribute_names(src).unwrap()
    }

    #[test]
    fn jq_names() {
        assert_eq!(jq(".attributes.foo[0][2] > 0.5"), ["foo"]);
        assert_eq!(jq(r#".attributes["a b"] and .attributes."c""#), ["a b", "c"]);
        assert_eq!(jq(".attributes | .foo | length > 0"), ["foo"]);
        assert_eq!(jq(r#"((.attributes // {})["k"] // []) | any(.[2] == 0)"#), ["k"]);
        assert_eq!(jq(r#".attributes | has("h")"#), ["h"]);
        assert_eq!(jq(".attributes as $a | $a.v and ($a.w | length > 1)"), ["v", "w"]);
        assert_eq!(jq("select(.attributes.y) | .attributes.x? // [] | length"), ["y", "x"]);
        assert_eq!(jq(".attributes | select(.z) | .w"), ["z", "w"]);
        assert_eq!(jq("if .attributes.c then .attributes.d else false end"), ["c", "d"]);
        assert_eq!(jq(r#"any(.attributes.g[]; .[2] > 0.5)"#), ["g"]);
        assert_eq!(jq(".attributes.a.b.c"), ["a"]);
        assert_eq!(jq(".attributes.a, .attributes.a"), ["a"]);
    }

    #[test]
    fn jq_leaves_out_what_is_not_certain() {
        assert!(jq(".metadata.foo and .text").is_empty());
        assert!(jq(".attributes[.key]").is_empty());
        assert!(jq(".attributes | map_values(.foo)").is_empty());
        assert!(jq(".attributes | to_entries | map(.value)").is_empty());
        assert!(jq(".attributes[] | .foo").is_empty());
        assert!(jq(".. | .foo?").is_empty());
        assert!(jq(r#".attributes | has("a" + "b")"#).is_empty());
        assert!(jq(".x.attributes.foo").is_empty());
    }

    #[test]
    fn jsonpath_names() {
        assert_eq!(jp("$.attributes.foo"), ["foo"]);
        assert_eq!(jp("$['attributes']['a b']"), ["a b"]);
        assert_eq!(jp("$.attributes['p','q']"), ["p", "q"]);
        assert_eq!(jp("$.attributes[?(@.v && @.v[0] && @.v[0][2] >= 1.0)]"), ["v"]);
        assert_eq!(jp("$@.attributes[?(@.value1 && @.value1[0][2] >= 1.0)]"), ["value1"]);
        assert_eq!(jp("$.attributes[?(@.a[0][2] > 0.5 || !(@.b))]"), ["a", "b"]);
        assert_eq!(jp("$[?(@.attributes.x)]"), ["x"]);
        assert_eq!(jp("$.attributes[?($.attributes.y)]"), ["y"]);
    }

    #[test]
    fn jsonpath_leaves_out_what_is_not_certain() {
        assert!(jp("$..foo").is_empty());
        assert!(jp("$.metadata[?(@.length < 500)]").is_empty());
        assert!(jp("$.attributes.foo[?(@[2] > 0.5)]").iter().eq(["foo"]));
        assert!(jp("$.attributes[*].foo").is_empty());
        assert!(jp("$.attributes.*").is_empty());
    }

    #[test]
    fn syntax_errors_are_errors() {
        assert!(jq_attribute_names(".a[").is_err());
        assert!(jsonpath_attribute_names("$.a[?(@.b >= )]").is_err());
    }
}
