//! The attribute rows of one input file, as JSON lines, from the scan's meta file and the later
//! phases' records: `{"id": ..., "attributes": {...}}` per document, in document order, under
//! the configured attribute names (bare, as Dolma's deduper writes them):
//!
//! - documents: `[[0, len(text), 1]]` on a later copy (the key is absent on the others, as in Dolma);
//! - paragraphs, for a non-empty text: `[[start, end, 1], ...]` of duplicate paragraphs; with
//!   `by_ngram` each considered paragraph whose score reaches the threshold, the score being the
//!   fraction of its n-grams seen before (a paragraph judged whole scores 1.0 or 0.0);
//! - MinHash: `[[0, len(text), 1]]` on every member of a cluster but its survivor;
//! - decontamination, for a non-empty text: `[[start, end, score], ...]` of the hits;
//! - substrings, for a non-empty text: `[[start, end, 1], ...]` of the repeated substrings.
//!
//! Spans are character offsets; a paragraph's span includes its separator, clipped to the text.
use super::error::DedupError;
use super::records::{self, u32_at, WHOLE_DOCUMENT};
use super::scan::{PARA_SKIPPED, PARA_WHOLE};
use std::fmt::Write;

/// What to write.
#[derive(Debug, Clone, Default)]
pub struct RenderSpec {
    pub documents: Option<String>,
    pub paragraphs: Option<String>,
    /// Paragraphs judged by n-grams (scores are fractions, with a threshold).
    pub by_ngram: bool,
    pub threshold: f64,
    pub minhash: Option<String>,
    pub decontamination: Option<String>,
    pub substrings: Option<String>,
}

/// How many marks were written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Marked {
    pub documents: u64,
    pub paragraphs: u64,
    pub near_duplicates: u64,
    pub contaminated: u64,
    pub substrings: u64,
    /// Characters inside the substring spans.
    pub substring_chars: u64,
}

struct Meta<'a> {
    n: usize,
    sep_chars: u32,
    chars: &'a [u8],
    id_offsets: &'a [u8],
    id_blob: &'a [u8],
    para_offsets: &'a [u8],
    para_lens: &'a [u8],
    para_info: &'a [u8],
    decon: &'a [u8],
}

fn parse_meta(b: &[u8]) -> Result<Meta<'_>, DedupError> {
    let bad = || DedupError::Damaged("damaged dedup meta file");
    if b.len() < 16 || b[..8] != super::scan::META_MAGIC {
        return Err(bad());
    }
    let n = u32_at(b, 8) as usize;
    let sep_chars = u32_at(b, 12);
    let mut pos = 16;
    let mut sections = Vec::with_capacity(9);
    for _ in 0..9 {
        if pos + 8 > b.len() {
            return Err(bad());
        }
        let len = records::u64_at(b, pos) as usize;
        pos += 8;
        if pos + len > b.len() {
            return Err(bad());
        }
        sections.push(&b[pos..pos + len]);
        pos += len;
    }
    let m = Meta {
        n,
        sep_chars,
        chars: sections[1],
        id_offsets: sections[3],
        id_blob: sections[4],
        para_offsets: sections[5],
        para_lens: sections[6],
        para_info: sections[7],
        decon: sections[8],
    };
    if m.chars.len() != 4 * n || m.id_offsets.len() != 8 * (n + 1) {
        return Err(bad());
    }
    Ok(m)
}

impl Meta<'_> {
    fn chars(&self, doc: usize) -> u64 {
        u64::from(u32_at(self.chars, 4 * doc))
    }
    fn id(&self, doc: usize) -> Result<&str, DedupError> {
        let (a, b) = (
            records::u64_at(self.id_offsets, 8 * doc) as usize,
            records::u64_at(self.id_offsets, 8 * doc + 8) as usize,
        );
        let damaged = || DedupError::Damaged("damaged ids");
        std::str::from_utf8(self.id_blob.get(a..b).ok_or_else(damaged)?).map_err(|_| damaged())
    }
    fn paragraphs(&self, doc: usize) -> (usize, usize) {
        if self.para_offsets.is_empty() {
            return (0, 0);
        }
        (records::u64_at(self.para_offsets, 8 * doc) as usize, records::u64_at(self.para_offsets, 8 * doc + 8) as usize)
    }
}

/// A score as JSON: integral values with ".0" (they are fractions), others the shortest
/// round-trip digits.
fn score(out: &mut String, v: f64) {
    if v.fract() == 0.0 {
        let _ = write!(out, "{v:.1}");
    } else {
        let _ = write!(out, "{v}");
    }
}

fn span(out: &mut String, first: &mut bool, start: u64, end: u64, value: Option<f64>) {
    if !*first {
        out.push(',');
    }
    *first = false;
    let _ = write!(out, "[{start},{end},");
    match value {
        None => out.push('1'),
        Some(v) => score(out, v),
    }
    out.push(']');
}

/// Grouped records of one file: DUP (document, paragraph) pairs sorted, MEMBER survivor flags.
fn sorted_dups(buf: &[u8]) -> Result<Vec<(u32, u32)>, DedupError> {
    records::check_records(buf, records::DUP, "dup records")?;
    let mut v: Vec<(u32, u32)> = buf.chunks_exact(records::DUP).map(|r| (u32_at(r, 0), u32_at(r, 4))).collect();
    v.sort_unstable();
    Ok(v)
}

/// Repeated substrings: (document, first char, end char) records, 20 bytes each (u32, u64, u64).
pub const SUBSTRING: usize = 20;

/// The JSON lines of one file's attribute rows, and what was marked.
pub fn render(
    meta: &[u8],
    spec: &RenderSpec,
    doc_dups: &[u8],
    para_dups: &[u8],
    members: &[u8],
    substrings: &[u8],
) -> Result<(Vec<u8>, Marked), DedupError> {
    let m = parse_meta(meta)?;
    records::check_records(substrings, SUBSTRING, "substring records")?;
    let mut subs: Vec<(u32, u64, u64)> = substrings
        .chunks_exact(SUBSTRING)
        .map(|r| (u32_at(r, 0), records::u64_at(r, 4), records::u64_at(r, 12)))
        .collect();
    subs.sort_unstable();
    let docs = sorted_dups(doc_dups)?;
    let paras = sorted_dups(para_dups)?;
    records::check_records(members, records::MEMBER, "member records")?;
    let mut near: Vec<u32> =
        members.chunks_exact(records::MEMBER).filter(|r| u32_at(r, 12) == 0).map(|r| u32_at(r, 0)).collect();
    near.sort_unstable();
    let mut decon: Vec<(u32, u32, u32, f32)> =
        m.decon.chunks_exact(16).map(|r| (u32_at(r, 0), u32_at(r, 4), u32_at(r, 8), records::f32_at(r, 12))).collect();
    decon.sort_by_key(|h| (h.0, h.1));

    let mut out = String::with_capacity(m.n * 64);
    let mut marked = Marked::default();
    let (mut di, mut pi, mut hi, mut si) = (0, 0, 0, 0);
    let mut para_seen: Vec<u32> = Vec::new();
    for doc in 0..m.n {
        let d = doc as u32;
        let chars = m.chars(doc);
        out.push_str("{\"id\":");
        out.push_str(&serde_json::to_string(m.id(doc)?).map_err(|e| DedupError::Json(e.to_string()))?);
        out.push_str(",\"attributes\":{");
        let mut first_attr = true;
        let mut attr = |out: &mut String, name: &str| {
            if !first_attr {
                out.push(',');
            }
            first_attr = false;
            out.push_str(&serde_json::to_string(name).unwrap_or_default());
            out.push(':');
        };
        // Document pass.
        while di < docs.len() && docs[di].0 < d {
            di += 1;
        }
        let doc_marked = di < docs.len() && docs[di].0 == d;
        if let (Some(name), true) = (&spec.documents, doc_marked) {
            attr(&mut out, name);
            let _ = write!(out, "[[0,{chars},1]]");
            marked.documents += 1;
        }
        // Paragraph pass.
        let start_pi = {
            while pi < paras.len() && paras[pi].0 < d {
                pi += 1;
            }
            pi
        };
        let mut end_pi = start_pi;
        while end_pi < paras.len() && paras[end_pi].0 == d {
            end_pi += 1;
        }
        if let (Some(name), true) = (&spec.paragraphs, chars > 0) {
            attr(&mut out, name);
            out.push('[');
            let mut first = true;
            let (lo, hi_p) = m.paragraphs(doc);
            let mut start = 0u64;
            if !spec.by_ngram {
                let mut k = start_pi;
                for (p, i) in (lo..hi_p).enumerate() {
                    let len = u64::from(u32_at(m.para_lens, 4 * i));
                    let end = (start + len + u64::from(m.sep_chars)).min(chars);
                    if k < end_pi && paras[k].1 == p as u32 {
                        span(&mut out, &mut first, start, end, None);
                        marked.paragraphs += 1;
                        while k < end_pi && paras[k].1 == p as u32 {
                            k += 1;
                        }
                    }
                    start = end;
                }
            } else {
                para_seen.clear();
                para_seen.resize(hi_p - lo, 0);
                for &(_, p) in &paras[start_pi..end_pi] {
                    if p != WHOLE_DOCUMENT && (p as usize) < para_seen.len() {
                        para_seen[p as usize] += 1;
                    }
                }
                for (p, i) in (lo..hi_p).enumerate() {
                    let len = u64::from(u32_at(m.para_lens, 4 * i));
                    let end = (start + len + u64::from(m.sep_chars)).min(chars);
                    let info = u32_at(m.para_info, 4 * i);
                    if info != PARA_SKIPPED {
                        let seen = para_seen[p];
                        let value = if info == PARA_WHOLE {
                            if seen > 0 {
                                1.0
                            } else {
                                0.0
                            }
                        } else {
                            f64::from(seen) / f64::from(info)
                        };
                        if value >= spec.threshold {
                            span(&mut out, &mut first, start, end, Some(value));
                            if value > 0.0 {
                                marked.paragraphs += 1;
                            }
                        }
                    }
                    start = end;
                }
            }
            out.push(']');
        }
        pi = end_pi;
        // MinHash pass.
        if let Some(name) = &spec.minhash {
            if near.binary_search(&d).is_ok() {
                attr(&mut out, name);
                let _ = write!(out, "[[0,{chars},1]]");
                marked.near_duplicates += 1;
            }
        }
        // Decontamination.
        while hi < decon.len() && decon[hi].0 < d {
            hi += 1;
        }
        if let (Some(name), true) = (&spec.decontamination, chars > 0) {
            attr(&mut out, name);
            out.push('[');
            let mut first = true;
            while hi < decon.len() && decon[hi].0 == d {
                let (_, s, e, v) = decon[hi];
                let value = if v == 1.0 { None } else { Some((f64::from(v) * 1e6).round() / 1e6) };
                span(&mut out, &mut first, u64::from(s), u64::from(e), value);
                marked.contaminated += 1;
                hi += 1;
            }
            out.push(']');
        }
        // Repeated substrings.
        while si < subs.len() && subs[si].0 < d {
            si += 1;
        }
        if let (Some(name), true) = (&spec.substrings, chars > 0) {
            attr(&mut out, name);
            out.push('[');
            let mut first = true;
            while si < subs.len() && subs[si].0 == d {
                let (_, s, e) = subs[si];
                span(&mut out, &mut first, s, e.min(chars), None);
                marked.substrings += 1;
                marked.substring_chars += e.min(chars).saturating_sub(s);
                si += 1;
            }
            out.push(']');
        }
        out.push_str("}}\n");
    }
    Ok((out.into_bytes(), marked))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::keypath::{KeyPath, KeyValue};
    use crate::dedup::scan::{DocSpec, ParaSpec, ScanSpec, Scanner};
    use std::sync::Arc;

    fn dup(doc: u32, para: u32) -> Vec<u8> {
        [doc.to_le_bytes(), para.to_le_bytes()].concat()
    }

    #[test]
    fn rows_with_every_kind_of_mark() {
        let spec = ScanSpec {
            documents: Some(DocSpec { key: KeyPath::parse("$.text").unwrap(), buckets: 1 }),
            paragraphs: Some(ParaSpec { separator: "\n".into(), by_ngram: None, buckets: 1 }),
            ..ScanSpec::default()
        };
        let mut s = Scanner::new(Arc::new(spec));
        s.add_document(1, "a\"1", "é one\ntwo\n", KeyValue::Str("x".into()));
        s.add_document(2, "b", "", KeyValue::Str("y".into()));
        let meta = s.finish().meta;
        let spec = RenderSpec {
            documents: Some("dd".into()),
            paragraphs: Some("pp".into()),
            minhash: Some("mm".into()),
            ..RenderSpec::default()
        };
        let members = [0u32, 0, 2, 0].iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let (out, marked) =
            render(&meta, &spec, &dup(1, WHOLE_DOCUMENT), &[dup(0, 1), dup(0, 1)].concat(), &members, &[]).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "{\"id\":\"a\\\"1\",\"attributes\":{\"pp\":[[6,10,1]],\"mm\":[[0,10,1]]}}\n{\"id\":\"b\",\"attributes\":{\"dd\":[[0,0,1]]}}\n"
        );
        assert_eq!(
            marked,
            Marked {
                documents: 1,
                paragraphs: 1,
                near_duplicates: 1,
                contaminated: 0,
                substrings: 0,
                substring_chars: 0
            }
        );
        // Repeated substrings of the first document (the second has no text: no attribute).
        let subs: Vec<u8> = [(0u32, 2u64, 5u64), (0, 7, 9)]
            .iter()
            .flat_map(|&(d, a, b)| {
                [d.to_le_bytes().to_vec(), a.to_le_bytes().to_vec(), b.to_le_bytes().to_vec()].concat()
            })
            .collect();
        let only = RenderSpec { substrings: Some("ss".into()), ..RenderSpec::default() };
        let (out, marked) = render(&meta, &only, &[], &[], &[], &subs).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"id\":\"a\\\"1\",\"attributes\":{\"ss\":[[2,5,1],[7,9,1]]}}\n{\"id\":\"b\",\"attributes\":{}}\n"
        );
        assert_eq!(marked.substrings, 2);
        let mut s = String::new();
        for v in [1.0, 0.0, 0.5, 1.0 / 3.0] {
            score(&mut s, v);
            s.push(' ');
        }
        assert_eq!(s, "1.0 0.0 0.5 0.3333333333333333 ");
        assert!(render(b"junk", &spec, &[], &[], &[], &[]).is_err());
    }
}
