//! The mixer's work on one document, batch by batch, with Dolma's semantics and order of steps:
//!
//! 1. the raw line is parsed and checked by `crate::document` (an object with a string or integer
//!    `id` and a string `text`; anything else is a bad document, reported with its kind and skipped);
//! 2. one row of each attribute file is taken, its id checked against the document's, and its
//!    `attributes` merged (later sets win) into the document's `attributes` object;
//! 3. the filter: kept when any include rule matches (or there is none) and no exclude rule
//!    does. jq rules are true when every output is true in Dolma's sense (`jq::truthy`); an
//!    include with no output is false, an exclude with no output keeps the document. The rules
//!    Dolma evaluates decide, in Dolma's order (includes until one matches, then, when one did,
//!    excludes until one matches), and a failure in one of them fails the document, as in Dolma;
//!    a removed document is counted against the one rule that removed it (no include matched, or
//!    the first exclude that matched). Every other rule is then evaluated too, only to count how
//!    many documents each rule matches (of every document read); a failure there is counted
//!    against the rule as a failure, never raised;
//! 4. span replacement over every replacer's spans (`spans::apply`);
//! 5. `discard_fields` removed from the top level; a document whose trimmed text is shorter than
//!    `min_text_length` bytes is dropped;
//! 6. `metadata.provenance = "<file name>:<line>"` (a `metadata` that is not an object is
//!    replaced by one), then the document is written as one JSON line (keys in sorted order, as
//!    Dolma writes them).
use super::error::FilterError;
use super::jq::{to_val, truthy, JqProgram};
use super::jsonpath::{numbers_as_floats, JsonPathRule};
use super::selector::{ReplacementText, Selector, SpanReplacer};
use super::spans::{apply, Replacement};
use crate::document::{check_value, parse_value, value_id, DocumentError, Id};
use jaq_interpret::Val;
use serde_json::{Map, Value};
use xxhash_rust::xxh3::xxh3_64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Syntax {
    Jq,
    JsonPath,
}

/// Include and exclude rules in one syntax.
pub enum FilterRules {
    None,
    Jq { include: Vec<JqProgram>, exclude: Vec<JqProgram> },
    JsonPath { include: Vec<JsonPathRule>, exclude: Vec<JsonPathRule> },
}

impl FilterRules {
    pub fn new(syntax: Syntax, include: &[String], exclude: &[String]) -> Result<Self, FilterError> {
        Ok(match syntax {
            Syntax::Jq => FilterRules::Jq {
                include: include.iter().map(|s| JqProgram::compile(s)).collect::<Result<_, _>>()?,
                exclude: exclude.iter().map(|s| JqProgram::compile(s)).collect::<Result<_, _>>()?,
            },
            Syntax::JsonPath => FilterRules::JsonPath {
                include: include.iter().map(|s| JsonPathRule::filter(s)).collect::<Result<_, _>>()?,
                exclude: exclude.iter().map(|s| JsonPathRule::filter(s)).collect::<Result<_, _>>()?,
            },
        })
    }

    fn counts(&self) -> (usize, usize) {
        match self {
            FilterRules::None => (0, 0),
            FilterRules::Jq { include, exclude } => (include.len(), exclude.len()),
            FilterRules::JsonPath { include, exclude } => (include.len(), exclude.len()),
        }
    }
}

/// A jq include rule on one document: it matches when it has outputs and every one is true.
fn jq_include(f: &JqProgram, val: &Val) -> Result<bool, FilterError> {
    let results = f.run(val);
    let mut keep = !results.is_empty();
    for r in results {
        keep = truthy(&r?) && keep;
    }
    Ok(keep)
}

/// A jq exclude rule on one document: it matches when any output is true (no output: no match).
fn jq_exclude(f: &JqProgram, val: &Val) -> Result<bool, FilterError> {
    let mut stays = true;
    for r in f.run(val) {
        stays = !truthy(&r?) && stays;
    }
    Ok(!stays)
}

/// Count what one rule does on the documents it does not decide (its failures are counted, not
/// raised); whether it matched.
fn count_only(result: Result<bool, FilterError>, matched: &mut u64, failed: &mut u64) -> bool {
    match result {
        Ok(true) => {
            *matched += 1;
            true
        }
        Ok(false) => false,
        Err(_) => {
            *failed += 1;
            false
        }
    }
}

/// Bit `bit` of a document's match mask (rules past the 64th are left out).
fn set_bit(mask: &mut u64, bit: usize) {
    if bit < 64 {
        *mask |= 1u64 << bit;
    }
}

/// Dolma's decision over `include` and `exclude` (`inc` and `exc` evaluate one rule), then every
/// rule it did not evaluate, for the counts; `mask` gets the rules the document matched (include i
/// as bit i, exclude j as bit includes + j). `Err` only from a rule that decides.
fn decide<R>(
    include: &[R],
    exclude: &[R],
    inc: impl Fn(&R) -> Result<bool, FilterError>,
    exc: impl Fn(&R) -> Result<bool, FilterError>,
    out: &mut BatchOutput,
    mask: &mut u64,
) -> Result<bool, FilterError> {
    let n_inc = include.len();
    // Includes until one matches: each is evaluated in Dolma too.
    let mut first_include = None;
    for (i, rule) in include.iter().enumerate() {
        if inc(rule)? {
            first_include = Some(i);
            break;
        }
    }
    let evaluated = first_include.map_or(include.len(), |i| i + 1);
    if let Some(i) = first_include {
        out.matched_include[i] += 1;
        set_bit(mask, i);
    }
    for (i, rule) in include.iter().enumerate().skip(evaluated) {
        if count_only(inc(rule), &mut out.matched_include[i], &mut out.failed_include[i]) {
            set_bit(mask, i);
        }
    }
    if !include.is_empty() && first_include.is_none() {
        out.removed_include += 1;
        for (j, rule) in exclude.iter().enumerate() {
            if count_only(exc(rule), &mut out.matched_exclude[j], &mut out.failed_exclude[j]) {
                set_bit(mask, n_inc + j);
            }
        }
        return Ok(false);
    }
    // Excludes until one matches.
    let mut first_exclude = None;
    for (i, rule) in exclude.iter().enumerate() {
        if exc(rule)? {
            first_exclude = Some(i);
            break;
        }
    }
    let Some(first) = first_exclude else {
        return Ok(true);
    };
    out.matched_exclude[first] += 1;
    out.removed_exclude[first] += 1;
    set_bit(mask, n_inc + first);
    for (j, rule) in exclude.iter().enumerate().skip(first + 1) {
        if count_only(exc(rule), &mut out.matched_exclude[j], &mut out.failed_exclude[j]) {
            set_bit(mask, n_inc + j);
        }
    }
    Ok(false)
}

/// One `span_replacement` entry as configured.
#[derive(Debug, Clone)]
pub struct SpanRule {
    pub span: String,
    pub syntax: Syntax,
    pub min_score: Option<f64>,
    pub max_score: Option<f64>,
    pub replacement: String,
}

/// Everything a stream does to its documents.
pub struct MixRules {
    filter: FilterRules,
    replacers: Vec<SpanReplacer>,
    discard_fields: Vec<String>,
    min_text_length: usize,
    attribute_sets: usize,
    provenance: bool,
    collect: bool,
    needs_val: bool,
    /// False: decide and count only (what a report needs): kept documents are not rewritten or
    /// written out.
    write: bool,
}

/// A document line that is not a usable document (its index in the batch, kind and why).
#[derive(Debug, Clone, PartialEq)]
pub struct BadDocument {
    pub index: usize,
    pub kind: &'static str,
    pub message: String,
}

impl BadDocument {
    fn new(index: usize, error: DocumentError) -> Self {
        BadDocument { index, kind: error.kind(), message: error.to_string() }
    }
}

/// What stops a batch: attribute rows that do not line up, or a rule failing on a document.
#[derive(Debug, Clone, PartialEq)]
pub enum BatchError {
    AttributeMismatch { doc: usize, set: usize, row: usize, doc_id: String, row_id: String },
    AttributesEnded { doc: usize, set: usize, doc_id: String },
    BadAttributeRow { set: usize, row: usize, message: String },
    Rule { doc: usize, error: FilterError },
}

/// A batch's output lines and counts. Processing stops at the first error; the counts and
/// lines then cover the documents before it.
#[derive(Debug, Default)]
pub struct BatchOutput {
    pub out: Vec<u8>,
    /// Bytes of each output line, newline included.
    pub line_lengths: Vec<u64>,
    /// Rows taken from each attribute set.
    pub consumed: Vec<usize>,
    pub docs: u64,
    pub kept: u64,
    /// Documents removed because no include rule matched them.
    pub removed_include: u64,
    /// Per exclude rule: documents it removed (the first exclude rule that matched).
    pub removed_exclude: Vec<u64>,
    /// Per rule: documents it matched, of every document read (every rule evaluated on each).
    pub matched_include: Vec<u64>,
    pub matched_exclude: Vec<u64>,
    /// Per rule: documents it failed on where it did not decide (counted as no match).
    pub failed_include: Vec<u64>,
    pub failed_exclude: Vec<u64>,
    pub removed_short: u64,
    pub spans_replaced: u64,
    pub bytes_in: u64,
    pub bad: Vec<BadDocument>,
    /// Every good document's id (as text), for the run's duplicate-id check.
    pub ids: Vec<String>,
    /// With `collect`: each kept document's text and the xxh3 hash of its id.
    pub texts: Vec<String>,
    pub keys: Vec<u64>,
    /// Per good document, in order: the rules it matched, include rule i as bit i and exclude
    /// rule j as bit (includes + j); rules past the 64th are left out. What a report needs to
    /// count the overlap between rules and to say which rule removed a document.
    pub matches: Vec<u64>,
    pub error: Option<BatchError>,
}

impl MixRules {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        filter: FilterRules,
        spans: &[SpanRule],
        discard_fields: Vec<String>,
        min_text_length: usize,
        attribute_sets: usize,
        provenance: bool,
        collect: bool,
    ) -> Result<Self, FilterError> {
        let replacers = spans
            .iter()
            .map(|s| {
                Ok(SpanReplacer {
                    selector: Selector::new(&s.span, s.syntax == Syntax::Jq)?,
                    min_score: s.min_score.unwrap_or(f64::NEG_INFINITY),
                    max_score: s.max_score.unwrap_or(f64::INFINITY),
                    replacement: ReplacementText::new(&s.replacement)?,
                })
            })
            .collect::<Result<Vec<_>, FilterError>>()?;
        let needs_val = matches!(filter, FilterRules::Jq { .. })
            || replacers.iter().any(|r| r.selector.is_jq() || r.replacement.is_jq());
        Ok(MixRules {
            filter,
            replacers,
            discard_fields,
            min_text_length,
            attribute_sets,
            provenance,
            collect,
            needs_val,
            write: true,
        })
    }

    /// Decide and count only: no span replacement, no output lines (a report's verdicts).
    pub fn set_write(&mut self, write: bool) {
        self.write = write;
    }

    /// Whether the filter keeps `doc`; `Err` when a deciding rule fails on it. Counts every rule and
    /// sets `mask`'s bits for the rules it matched.
    fn keep(&self, doc: &Value, val: Option<&Val>, out: &mut BatchOutput, mask: &mut u64) -> Result<bool, FilterError> {
        match &self.filter {
            FilterRules::None => Ok(true),
            FilterRules::Jq { include, exclude } => {
                let val = val.ok_or_else(|| FilterError::eval("", "no jq value of the document"))?;
                decide(include, exclude, |f| jq_include(f, val), |f| jq_exclude(f, val), out, mask)
            }
            FilterRules::JsonPath { include, exclude } => {
                let floats = numbers_as_floats(doc);
                decide(include, exclude, |p| p.matches(&floats), |p| p.matches(&floats), out, mask)
            }
        }
    }

    /// Merge one row of each attribute set into `doc`; `Err` when the rows do not line up.
    fn merge_attributes(
        &self,
        doc: &mut Value,
        id: &str,
        index: usize,
        attrs: &[Vec<&[u8]>],
        consumed: &mut [usize],
    ) -> Result<(), BatchError> {
        let mut merged = Map::new();
        for (set, rows) in attrs.iter().enumerate() {
            let row_index = consumed[set];
            let Some(raw) = rows.get(row_index) else {
                return Err(BatchError::AttributesEnded { doc: index, set, doc_id: id.to_string() });
            };
            consumed[set] += 1;
            let bad = |message: String| BatchError::BadAttributeRow { set, row: row_index, message };
            let mut row = parse_value(raw).map_err(|e| bad(e.to_string()))?;
            let Value::Object(obj) = &mut row else {
                return Err(bad("attribute row is not an object".into()));
            };
            match value_id(obj.get("id")) {
                Ok(row_id) if row_id.as_str() == id => {}
                Ok(row_id) => {
                    return Err(BatchError::AttributeMismatch {
                        doc: index,
                        set,
                        row: row_index,
                        doc_id: id.into(),
                        row_id: row_id.into_string(),
                    })
                }
                _ => return Err(bad("attribute row has no string 'id'".into())),
            }
            match obj.remove("attributes") {
                None | Some(Value::Null) => {}
                Some(Value::Object(a)) => merged.extend(a),
                Some(_) => return Err(bad("'attributes' must be an object".into())),
            }
        }
        if let Value::Object(obj) = doc {
            match obj.get_mut("attributes") {
                Some(Value::Object(existing)) => existing.extend(merged),
                _ => {
                    obj.insert("attributes".into(), Value::Object(merged));
                }
            }
        }
        Ok(())
    }

    /// Process a batch of document lines (`linenos` are their line numbers, for provenance) with
    /// the next rows of each attribute set (`attrs[set]`, at least one per good document unless
    /// the attribute file ended).
    pub fn process(&self, docs: &[&[u8]], linenos: &[u64], attrs: &[Vec<&[u8]>], file_name: &str) -> BatchOutput {
        let (includes, excludes) = self.filter.counts();
        let mut out = BatchOutput {
            consumed: vec![0; attrs.len()],
            removed_exclude: vec![0; excludes],
            matched_include: vec![0; includes],
            matched_exclude: vec![0; excludes],
            failed_include: vec![0; includes],
            failed_exclude: vec![0; excludes],
            ..Default::default()
        };
        if attrs.len() != self.attribute_sets {
            out.error = Some(BatchError::BadAttributeRow {
                set: attrs.len(),
                row: 0,
                message: format!("{} attribute sets given, {} configured", attrs.len(), self.attribute_sets),
            });
            return out;
        }
        let mut consumed = vec![0usize; attrs.len()];
        if self.write {
            // Output lines are about their input lines' size: one allocation, not a doubling Vec.
            out.out.reserve(docs.iter().map(|d| d.len() + 64).sum());
        }
        out.ids.reserve(docs.len());
        out.matches.reserve(docs.len());
        for (index, line) in docs.iter().enumerate() {
            let checked = parse_value(line).and_then(|doc| check_value(&doc).map(Id::into_string).map(|id| (doc, id)));
            let (mut doc, id) = match checked {
                Ok(read) => read,
                Err(error) => {
                    out.bad.push(BadDocument::new(index, error));
                    continue;
                }
            };
            out.docs += 1;
            out.bytes_in += line.len() as u64;
            out.ids.push(id.clone());
            if self.attribute_sets > 0 {
                if let Err(e) = self.merge_attributes(&mut doc, &id, index, attrs, &mut consumed) {
                    out.consumed = consumed;
                    out.error = Some(e);
                    return out;
                }
            }
            let val = if self.needs_val { Some(to_val(&doc)) } else { None };
            let mut mask = 0u64;
            let verdict = self.keep(&doc, val.as_ref(), &mut out, &mut mask);
            out.matches.push(mask);
            match verdict {
                Ok(true) if !self.write => {
                    out.kept += 1;
                    continue;
                }
                Ok(true) => {}
                Ok(false) => continue,
                Err(error) => {
                    out.consumed = consumed;
                    out.error = Some(BatchError::Rule { doc: index, error });
                    return out;
                }
            }
            if let Err(error) = self.replace_spans(&mut doc, val.as_ref(), &mut out) {
                out.consumed = consumed;
                out.error = Some(BatchError::Rule { doc: index, error });
                return out;
            }
            let Value::Object(obj) = &mut doc else { continue };
            for f in &self.discard_fields {
                obj.remove(f);
            }
            let text_len = obj.get("text").and_then(Value::as_str).map_or(0, |t| t.trim().len());
            if text_len < self.min_text_length {
                out.removed_short += 1;
                continue;
            }
            if self.provenance {
                if !matches!(obj.get("metadata"), Some(Value::Object(_))) {
                    obj.insert("metadata".into(), Value::Object(Map::new()));
                }
                if let Some(Value::Object(meta)) = obj.get_mut("metadata") {
                    meta.insert("provenance".into(), Value::String(format!("{file_name}:{}", linenos[index])));
                }
            }
            if self.collect {
                out.texts.push(obj.get("text").and_then(Value::as_str).unwrap_or("").to_string());
                out.keys.push(xxh3_64(id.as_bytes()));
            }
            let before = out.out.len();
            // Writing a Value into a Vec cannot fail (keys are strings, numbers finite).
            if serde_json::to_writer(&mut out.out, &doc).is_ok() {
                out.out.push(b'\n');
                out.line_lengths.push((out.out.len() - before) as u64);
                out.kept += 1;
            } else {
                out.out.truncate(before);
            }
        }
        out.consumed = consumed;
        out
    }

    fn replace_spans(&self, doc: &mut Value, val: Option<&Val>, out: &mut BatchOutput) -> Result<(), FilterError> {
        if self.replacers.is_empty() {
            return Ok(());
        }
        let mut reps: Vec<Replacement> = Vec::new();
        for r in &self.replacers {
            reps.extend(r.spans(doc, val)?);
        }
        if reps.is_empty() {
            return Ok(());
        }
        out.spans_replaced += reps.len() as u64;
        if let Some(Value::String(text)) = doc.get_mut("text") {
            *text = apply(text, &mut reps);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(docs: &[Value]) -> Vec<Vec<u8>> {
        docs.iter().map(|d| serde_json::to_vec(d).unwrap()).collect()
    }

    fn run(rules: &MixRules, docs: &[Value], attrs: &[Vec<Value>]) -> BatchOutput {
        let d = lines(docs);
        let a: Vec<Vec<Vec<u8>>> = attrs.iter().map(|s| lines(s)).collect();
        let d_refs: Vec<&[u8]> = d.iter().map(|x| x.as_slice()).collect();
        let a_refs: Vec<Vec<&[u8]>> = a.iter().map(|s| s.iter().map(|x| x.as_slice()).collect()).collect();
        let linenos: Vec<u64> = (1..=docs.len() as u64).collect();
        rules.process(&d_refs, &linenos, &a_refs, "f.jsonl.gz")
    }

    fn outputs(b: &BatchOutput) -> Vec<Value> {
        b.out.split(|c| *c == b'\n').filter(|l| !l.is_empty()).map(|l| serde_json::from_slice(l).unwrap()).collect()
    }

    fn docs() -> Vec<Value> {
        (0..4).map(|i| json!({"id": format!("d{i}"), "text": format!("text number {i}"), "metadata": null})).collect()
    }

    fn scores(vals: &[f64]) -> Vec<Value> {
        vals.iter().enumerate().map(|(i, s)| json!({"id": format!("d{i}"), "attributes": {"q": [[0, 4, s]]}})).collect()
    }

    #[test]
    fn jq_include_exclude_and_counts() {
        let filter =
            FilterRules::new(Syntax::Jq, &[".attributes.q[0][2] > 0.1".into()], &[".id == \"d3\"".into()]).unwrap();
        let rules = MixRules::new(filter, &[], vec!["attributes".into()], 0, 1, true, false).unwrap();
        let b = run(&rules, &docs(), &[scores(&[0.0, 0.5, 0.9, 0.9])]);
        assert!(b.error.is_none());
        let kept = outputs(&b);
        assert_eq!(kept.iter().map(|d| d["id"].as_str().unwrap()).collect::<Vec<_>>(), ["d1", "d2"]);
        assert_eq!((b.docs, b.kept, b.removed_include, b.removed_exclude.clone()), (4, 2, 1, vec![1]));
        assert_eq!(kept[0]["metadata"], json!({"provenance": "f.jsonl.gz:2"}));
        assert!(kept[0].get("attributes").is_none());
        assert_eq!(b.consumed, vec![4]);
    }

    #[test]
    fn every_rule_is_counted_and_the_first_match_removes() {
        // q: 0.0, 0.5, 0.9, 0.9; d3 is excluded by both exclude rules, d2 by the second only.
        let filter = FilterRules::new(
            Syntax::Jq,
            &[".attributes.q[0][2] > 0.1".into(), ".attributes.q[0][2] > 0.6".into()],
            &[".id == \"d3\"".into(), ".attributes.q[0][2] > 0.8".into()],
        )
        .unwrap();
        let rules = MixRules::new(filter, &[], vec![], 0, 1, false, false).unwrap();
        let b = run(&rules, &docs(), &[scores(&[0.0, 0.5, 0.9, 0.9])]);
        assert_eq!(outputs(&b).iter().map(|d| d["id"].as_str().unwrap()).collect::<Vec<_>>(), ["d1"]);
        assert_eq!(b.removed_include, 1);
        assert_eq!(b.removed_exclude, [1, 1]);
        assert_eq!(b.matched_include, [3, 2]);
        assert_eq!(b.matched_exclude, [1, 2]);
        // Per document: includes are bits 0-1, excludes bits 2-3.
        assert_eq!(b.matches, [0b0000, 0b0001, 0b1011, 0b1111]);
        assert_eq!((b.failed_include.clone(), b.failed_exclude.clone()), (vec![0, 0], vec![0, 0]));

        let filter =
            FilterRules::new(Syntax::JsonPath, &[], &["$.attributes[?(@.q[0][2] > 0.8)]".into(), "$.id".into()])
                .unwrap();
        let rules = MixRules::new(filter, &[], vec![], 0, 1, false, false).unwrap();
        let b = run(&rules, &docs(), &[scores(&[0.0, 0.5, 0.9, 0.9])]);
        assert_eq!((b.kept, b.removed_exclude.clone(), b.matched_exclude.clone()), (0, vec![2, 2], vec![2, 4]));
    }

    #[test]
    fn without_write_the_decisions_and_counts_are_the_same_and_nothing_is_written() {
        let make = || {
            let filter = FilterRules::new(Syntax::Jq, &[], &[".attributes.q[0][2] > 0.8".into()]).unwrap();
            MixRules::new(filter, &[], vec![], 0, 1, true, false).unwrap()
        };
        let full = run(&make(), &docs(), &[scores(&[0.0, 0.5, 0.9, 0.9])]);
        let mut quiet_rules = make();
        quiet_rules.set_write(false);
        let quiet = run(&quiet_rules, &docs(), &[scores(&[0.0, 0.5, 0.9, 0.9])]);
        assert_eq!(
            (quiet.kept, quiet.matches.clone(), quiet.removed_exclude.clone()),
            (full.kept, full.matches, full.removed_exclude)
        );
        assert_eq!((quiet.kept, quiet.out.len(), quiet.line_lengths.len()), (2, 0, 0));
    }

    #[test]
    fn a_rule_that_does_not_decide_fails_only_in_the_counts() {
        // `.attributes.q.x` fails on every document (q is a list). Dolma never evaluates a rule
        // after the first include that matches, nor after the first exclude that matches, nor any
        // exclude once no include matched.
        let d3 = (vec![docs()[3].clone()], vec![scores(&[0.0, 0.0, 0.0, 0.9])[3].clone()]);
        let d0 = (vec![docs()[0].clone()], vec![scores(&[0.0])[0].clone()]);
        let failing = ".attributes.q.x".to_string();
        let filter = FilterRules::new(
            Syntax::Jq,
            &[".id != \"zz\"".into(), failing.clone()],
            &[".id == \"d3\"".into(), failing.clone()],
        )
        .unwrap();
        let rules = MixRules::new(filter, &[], vec![], 0, 1, false, false).unwrap();
        let b = run(&rules, &d3.0, std::slice::from_ref(&d3.1));
        assert!(b.error.is_none(), "{:?}", b.error);
        assert_eq!((b.kept, b.removed_include, b.removed_exclude.clone()), (0, 0, vec![1, 0]));
        assert_eq!((b.matched_include.clone(), b.failed_include.clone()), (vec![1, 0], vec![0, 1]));
        assert_eq!((b.matched_exclude.clone(), b.failed_exclude.clone()), (vec![1, 0], vec![0, 1]));

        let filter = FilterRules::new(Syntax::Jq, &[".id == \"d3\"".into()], &[failing]).unwrap();
        let rules = MixRules::new(filter, &[], vec![], 0, 1, false, false).unwrap();
        let b = run(&rules, &d0.0, &[d0.1]);
        assert!(b.error.is_none(), "{:?}", b.error);
        assert_eq!((b.removed_include, b.matched_exclude.clone(), b.failed_exclude.clone()), (1, vec![0], vec![1]));
        // A rule that decides still fails the document, as in Dolma.
        let b = run(&rules, &d3.0, &[d3.1]);
        assert!(matches!(b.error, Some(BatchError::Rule { doc: 0, .. })));
    }

    #[test]
    fn jsonpath_filter_and_spans() {
        let filter = FilterRules::new(Syntax::JsonPath, &[], &["$.attributes[?(@.q[0][2] >= 1.0)]".into()]).unwrap();
        let span = SpanRule {
            span: "$.attributes.q".into(),
            syntax: Syntax::JsonPath,
            min_score: Some(0.5),
            max_score: None,
            replacement: "<{}>".into(),
        };
        let rules = MixRules::new(filter, &[span], vec![], 0, 1, false, true).unwrap();
        let attrs: Vec<Value> = (0..4)
            .map(|i| json!({"id": format!("d{i}"), "attributes": {"q": [[0, 4, if i == 2 { json!(1) } else { json!(0.5) }]]}}))
            .collect();
        let b = run(&rules, &docs(), &[attrs]);
        let kept = outputs(&b);
        assert_eq!(kept.len(), 3, "the integer 1 matches >= 1.0");
        assert_eq!(kept[0]["text"], "<text> number 0");
        assert_eq!(b.spans_replaced, 3);
        assert_eq!(b.texts[0], "<text> number 0");
        assert_eq!(b.keys[0], xxh3_64(b"d0"));
        assert!(kept[0]["attributes"]["q"].is_array());
    }

    #[test]
    fn bad_documents_are_reported_and_skipped() {
        let rules = MixRules::new(FilterRules::None, &[], vec![], 0, 0, false, false).unwrap();
        let raw: Vec<&[u8]> = vec![
            b"{broken",
            b"[1]",
            br#"{"text": "x"}"#,
            br#"{"id": 1.5, "text": "x"}"#,
            br#"{"id": 7, "text": 3}"#,
            b"\xff\xfe",
            br#"{"id": 7, "text": "ok"}"#,
        ];
        let b = rules.process(&raw, &[1, 2, 3, 4, 5, 6, 7], &[], "f");
        let kinds: Vec<_> = b.bad.iter().map(|x| x.kind).collect();
        assert_eq!(b.ids, ["7"]);
        assert_eq!(kinds, ["malformed_json", "not_an_object", "missing_id", "bad_id", "bad_text", "invalid_utf8"]);
        assert_eq!(b.kept, 1);
    }

    #[test]
    fn attribute_rows_must_line_up() {
        let rules = MixRules::new(FilterRules::None, &[], vec![], 0, 1, false, false).unwrap();
        let mut rows = scores(&[0.1, 0.2, 0.3, 0.4]);
        rows[2]["id"] = json!("other");
        let b = run(&rules, &docs(), &[rows]);
        assert!(matches!(b.error, Some(BatchError::AttributeMismatch { doc: 2, row: 2, .. })));
        let b = run(&rules, &docs(), &[scores(&[0.1, 0.2])]);
        assert!(matches!(b.error, Some(BatchError::AttributesEnded { doc: 2, .. })));
        assert_eq!(b.kept, 2);
    }

    #[test]
    fn rule_errors_stop_the_batch() {
        let filter = FilterRules::new(Syntax::Jq, &[".attributes.b.b != null".into()], &[]).unwrap();
        let rules = MixRules::new(filter, &[], vec![], 0, 0, false, false).unwrap();
        let b = run(&rules, &[json!({"id": "0", "text": "t", "attributes": {"a": 1}})], &[]);
        assert!(matches!(b.error, Some(BatchError::Rule { doc: 0, .. })));
    }

    #[test]
    fn min_text_length_counts_trimmed_bytes() {
        let rules = MixRules::new(FilterRules::None, &[], vec![], 4, 0, false, false).unwrap();
        let d = vec![
            json!({"id": "a", "text": "  abc \n"}),
            json!({"id": "b", "text": "abcd"}),
            json!({"id": "c", "text": "éé"}),
        ];
        let b = run(&rules, &d, &[]);
        assert_eq!(outputs(&b).iter().map(|d| d["id"].as_str().unwrap()).collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(b.removed_short, 1);
    }
}
