//! One input file's pass over its documents, in order: for each document its key record
//! (`dedupe.documents`), its paragraph or paragraph n-gram records (`dedupe.paragraphs`), its
//! MinHash band records, signature and shingle values (`minhash`), and its decontamination hits;
//! plus what the attribute writer needs later without reading the file again (ids, lengths in
//! characters, paragraph lengths). Records are split into buckets by hash range, so that the
//! task owning a bucket sees every copy of a key, in the global order (file, then document,
//! then paragraph, then n-gram).
//!
//! Bytes arrive in chunks (`push`, or `push_gzip` to decompress them here, faster than
//! CPython's zlib) and are cut into lines (`drain`) exactly as
//! `dolma_pipe.documents.iter_lines` cuts them (1-based numbers, a UTF-8 byte-order mark
//! dropped at the start, blank lines skipped but numbered). A line the fast JSON path does not
//! accept is handed back to the caller, which decides (quarantine, or a normalised document
//! given back through `add_document`), so documents are always processed in line order.
use super::digest::{bucket_of, digest, digest_tokens, high64, Kind};
use super::error::DedupError;
use super::jsonline::{parse_line, KeySpec};
use super::keypath::{KeyPath, KeyValue};
use super::paragraph::{self, has_words, is_blank, ngram_starts, tokens, Paragraph};
use super::records::{self, Bucketed};
use crate::document::is_blank_line;
use crate::minhash::lsh::band_hashes;
use crate::minhash::shingle::Scratch;
use crate::minhash::{Permutations, Shingler};
use crate::text::char_len;
use flate2::{Decompress, FlushDecompress, Status};
use std::collections::HashSet;
use std::sync::Arc;

pub const META_MAGIC: [u8; 8] = *b"DPMETA\0\x01";
pub const SETS_MAGIC: [u8; 8] = *b"DPSETS\0\x01";
pub const DECON_MAGIC: [u8; 8] = *b"DPDECON\x01";

/// Document flags in the meta file.
pub const FLAG_KEY_MISSING: u8 = 1;
pub const FLAG_KEY_NOT_STRING: u8 = 2;
pub const FLAG_KEY_FILTERED: u8 = 4;
pub const FLAG_NO_SHINGLES: u8 = 8;

/// Paragraph info: not considered (filtered out, or too short with `skip_short_paragraphs`).
pub const PARA_SKIPPED: u32 = u32::MAX;
/// Paragraph info: judged as a whole (one paragraph key).
pub const PARA_WHOLE: u32 = 0;

/// Dolma's `min_length` / `min_words` / `skip_empty`, applied (all three) to document keys
/// and to paragraphs.
#[derive(Debug, Clone, Default)]
pub struct Filters {
    pub min_length: usize,
    pub min_words: usize,
    pub skip_empty: bool,
}

impl Filters {
    pub fn keep(&self, s: &str, chars: usize) -> bool {
        chars >= self.min_length && !(self.skip_empty && is_blank(s)) && has_words(s, self.min_words)
    }
}

#[derive(Debug, Clone)]
pub struct DocSpec {
    pub key: KeyPath,
    pub buckets: u32,
}

#[derive(Debug, Clone)]
pub struct NgramSpec {
    pub length: usize,
    pub stride: usize,
    pub skip_short: bool,
}

#[derive(Debug, Clone)]
pub struct ParaSpec {
    pub separator: String,
    pub by_ngram: Option<NgramSpec>,
    pub buckets: u32,
}

#[derive(Debug, Clone)]
pub struct MinhashSpec {
    pub shingler: Shingler,
    pub perms: Permutations,
    pub bands: usize,
    pub rows: usize,
    pub band_seed: u64,
    pub buckets: u32,
    pub keep_signatures: bool,
    pub keep_sets: bool,
}

/// How decontamination compares training text with evaluation text.
#[derive(Debug, Clone)]
pub enum DecontamMode {
    /// Whole paragraphs of at least `min_words` words, compared exactly (Dolma's way).
    Paragraphs { min_words: usize },
    /// Word n-grams of normalised words (`shingler.ngram` words each); a training paragraph
    /// is flagged with the fraction of its n-grams found in the evaluation texts.
    Ngrams { shingler: Shingler },
}

/// The evaluation side of decontamination: the keys of every evaluation text.
#[derive(Debug, Clone)]
pub struct DecontamSet {
    pub mode: DecontamMode,
    pub separator: String,
    paragraphs: HashSet<u128>,
    ngrams: HashSet<u64>,
    texts: u64,
}

impl DecontamSet {
    pub fn new(mode: DecontamMode, separator: String) -> Result<DecontamSet, DedupError> {
        if separator.is_empty() {
            return Err(DedupError::EmptySeparator);
        }
        Ok(DecontamSet { mode, separator, paragraphs: HashSet::new(), ngrams: HashSet::new(), texts: 0 })
    }

    /// Adds one evaluation text's keys.
    pub fn add(&mut self, text: &str, scratch: &mut Scratch) {
        self.texts += 1;
        match &self.mode {
            DecontamMode::Paragraphs { min_words } => {
                for p in text.split(self.separator.as_str()) {
                    if !is_blank(p) && has_words(p, *min_words) {
                        self.paragraphs.insert(digest(p.as_bytes(), Kind::Decontamination));
                    }
                }
            }
            DecontamMode::Ngrams { shingler } => {
                let mut words = Vec::new();
                shingler.word_hashes(text, scratch, &mut words);
                if words.len() >= shingler.ngram {
                    let mut out = Vec::new();
                    shingler.shingles_of_words(&words, &mut out);
                    self.ngrams.extend(out);
                }
            }
        }
    }

    pub fn len(&self) -> usize {
        self.paragraphs.len() + self.ngrams.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn texts(&self) -> u64 {
        self.texts
    }

    /// The set as a file: magic, mode (0 paragraphs, 1 n-grams), min_words, n-gram length,
    /// lowercase, words mode, word seed, separator (length + UTF-8), key count, sorted keys.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&DECON_MAGIC);
        let (mode, min_words, n, lower, words, seed) = match &self.mode {
            DecontamMode::Paragraphs { min_words } => (0u32, *min_words as u32, 0u32, 0u32, 0u32, 0u64),
            DecontamMode::Ngrams { shingler } => (
                1,
                0,
                shingler.ngram as u32,
                shingler.lowercase as u32,
                (shingler.words == crate::minhash::Words::Whitespace) as u32,
                shingler.seed,
            ),
        };
        for v in [mode, min_words, n, lower, words] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&seed.to_le_bytes());
        out.extend_from_slice(&(self.separator.len() as u32).to_le_bytes());
        out.extend_from_slice(self.separator.as_bytes());
        out.extend_from_slice(&self.texts.to_le_bytes());
        if mode == 0 {
            let mut keys: Vec<u128> = self.paragraphs.iter().copied().collect();
            keys.sort_unstable();
            out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
            for k in keys {
                out.extend_from_slice(&k.to_le_bytes());
            }
        } else {
            let mut keys: Vec<u64> = self.ngrams.iter().copied().collect();
            keys.sort_unstable();
            out.extend_from_slice(&(keys.len() as u64).to_le_bytes());
            for k in keys {
                out.extend_from_slice(&k.to_le_bytes());
            }
        }
        out
    }

    pub fn from_bytes(b: &[u8]) -> Result<DecontamSet, DedupError> {
        let bad = || DedupError::Damaged("not a dolma-pipe decontamination set (bad magic or truncated)");
        if b.len() < 8 + 20 + 8 + 4 || b[..8] != DECON_MAGIC {
            return Err(bad());
        }
        let u32s: Vec<u32> = (0..5).map(|i| records::u32_at(b, 8 + 4 * i)).collect();
        let seed = records::u64_at(b, 28);
        let sep_len = records::u32_at(b, 36) as usize;
        let mut at = 40;
        if b.len() < at + sep_len + 16 {
            return Err(bad());
        }
        let separator = std::str::from_utf8(&b[at..at + sep_len]).map_err(|_| bad())?.to_string();
        at += sep_len;
        let texts = records::u64_at(b, at);
        let count = records::u64_at(b, at + 8) as usize;
        at += 16;
        let mode = match u32s[0] {
            0 => DecontamMode::Paragraphs { min_words: u32s[1] as usize },
            1 => {
                let words =
                    if u32s[4] == 1 { crate::minhash::Words::Whitespace } else { crate::minhash::Words::WordChars };
                DecontamMode::Ngrams { shingler: Shingler::new(u32s[2] as usize, u32s[3] == 1, words, seed)? }
            }
            _ => return Err(bad()),
        };
        let mut set = DecontamSet::new(mode, separator)?;
        set.texts = texts;
        let width = if u32s[0] == 0 { 16 } else { 8 };
        if b.len() != at + count * width {
            return Err(bad());
        }
        for i in 0..count {
            let off = at + i * width;
            if width == 16 {
                set.paragraphs.insert(records::u128_at(b, off));
            } else {
                set.ngrams.insert(records::u64_at(b, off));
            }
        }
        Ok(set)
    }
}

/// What the scan of one file is asked to do.
#[derive(Debug, Clone, Default)]
pub struct ScanSpec {
    pub filters: Filters,
    pub documents: Option<DocSpec>,
    pub paragraphs: Option<ParaSpec>,
    pub minhash: Option<MinhashSpec>,
    pub decontamination: Option<Arc<DecontamSet>>,
}

/// Counts of one file's scan (summed into the run's totals).
#[derive(Debug, Clone, Default)]
pub struct Counts {
    pub lines: u64,
    pub blank_lines: u64,
    pub documents: u64,
    pub python_lines: u64,
    pub document_keys: u64,
    pub documents_without_key: u64,
    pub documents_key_skipped: u64,
    pub paragraphs: u64,
    pub paragraph_keys: u64,
    pub paragraphs_skipped: u64,
    pub minhash_documents: u64,
    pub documents_without_shingles: u64,
    pub decontaminated_paragraphs: u64,
}

/// A line the fast path left to the caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fallback {
    pub line: u64,
    pub raw: Vec<u8>,
}

/// Everything the scan of one file produced.
pub struct ScanOutput {
    pub meta: Vec<u8>,
    pub documents: Option<Vec<u8>>,
    pub paragraphs: Option<Vec<u8>>,
    pub bands: Option<Vec<u8>>,
    pub signatures: Option<Vec<u8>>,
    pub sets: Option<Vec<u8>>,
    pub counts: Counts,
    pub last_line: u64,
}

pub struct Scanner {
    spec: Arc<ScanSpec>,
    key: KeySpec,
    line: u64,
    // Pushed bytes not processed yet (from `pos`), and whether any line was cut yet.
    buf: Vec<u8>,
    pos: usize,
    started: bool,
    gzip: Option<Decompress>,
    gzip_pending: bool,
    counts: Counts,
    // per document
    lines: Vec<u32>,
    chars: Vec<u32>,
    flags: Vec<u8>,
    id_offsets: Vec<u64>,
    id_blob: Vec<u8>,
    para_offsets: Vec<u64>,
    para_lens: Vec<u32>,
    para_info: Vec<u32>,
    decon_hits: Vec<u8>,
    // records
    doc_records: Option<Bucketed>,
    para_records: Option<Bucketed>,
    band_records: Option<Bucketed>,
    signatures: Vec<u8>,
    set_offsets: Vec<u64>,
    set_values: Vec<u8>,
    // scratch
    scratch: Scratch,
    shingles: Vec<u64>,
    sig: Vec<u32>,
    bands: Vec<u64>,
    set: Vec<u32>,
    tokens_buf: Vec<u8>,
}

fn line_u32(line: u64) -> u32 {
    u32::try_from(line).unwrap_or(u32::MAX)
}

impl Scanner {
    pub fn new(spec: Arc<ScanSpec>) -> Scanner {
        let key = KeySpec::from_path(spec.documents.as_ref().map(|d| &d.key));
        let doc_records = spec.documents.as_ref().map(|d| Bucketed::new(records::DOC, d.buckets as usize));
        let para_records = spec.paragraphs.as_ref().map(|p| Bucketed::new(records::PARA, p.buckets as usize));
        let band_records = spec.minhash.as_ref().map(|m| Bucketed::new(records::BAND, m.buckets as usize));
        let k = spec.minhash.as_ref().map_or(0, |m| m.perms.len());
        Scanner {
            key,
            line: 0,
            buf: Vec::new(),
            pos: 0,
            started: false,
            gzip: None,
            gzip_pending: false,
            counts: Counts::default(),
            lines: Vec::new(),
            chars: Vec::new(),
            flags: Vec::new(),
            id_offsets: vec![0],
            id_blob: Vec::new(),
            para_offsets: vec![0],
            para_lens: Vec::new(),
            para_info: Vec::new(),
            decon_hits: Vec::new(),
            doc_records,
            para_records,
            band_records,
            signatures: Vec::new(),
            set_offsets: vec![0],
            set_values: Vec::new(),
            scratch: Scratch::default(),
            shingles: Vec::new(),
            sig: vec![0; k],
            bands: Vec::new(),
            set: Vec::new(),
            tokens_buf: Vec::new(),
            spec,
        }
    }

    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    /// The number of the last line seen (for a file error reported after it).
    pub fn last_line(&self) -> u64 {
        self.line
    }

    fn take_line(&mut self, raw: &[u8]) -> Option<Fallback> {
        self.line += 1;
        if is_blank_line(raw) {
            self.counts.blank_lines += 1;
            return None;
        }
        self.counts.lines += 1;
        match parse_line(raw, &self.key) {
            Some(p) => {
                self.process(self.line, &p.id, &p.text, p.key);
                None
            }
            None => {
                self.counts.python_lines += 1;
                Some(Fallback { line: self.line, raw: raw.to_vec() })
            }
        }
    }

    /// Appends decompressed (or plain) bytes of the file; `drain` processes their lines.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// Appends gzip-compressed bytes of the file, decompressed exactly as
    /// `dolma_pipe.documents` does: members one after another, each to its end; an error in the
    /// data is `Err` (what was decompressed before it is kept and its lines still count).
    pub fn push_gzip(&mut self, mut data: &[u8]) -> Result<(), DedupError> {
        while !data.is_empty() {
            let d = self.gzip.get_or_insert_with(|| Decompress::new_gzip(15));
            self.gzip_pending = true;
            self.buf.reserve(data.len() * 4 + 4096);
            let (before_in, before_out) = (d.total_in(), d.total_out());
            let status = d
                .decompress_vec(data, &mut self.buf, FlushDecompress::None)
                .map_err(|e| DedupError::Gzip(e.to_string()))?;
            let consumed = (d.total_in() - before_in) as usize;
            let produced = d.total_out() - before_out;
            data = &data[consumed..];
            match status {
                Status::StreamEnd => {
                    // One member done: the rest of the input starts the next one.
                    self.gzip = None;
                    self.gzip_pending = false;
                }
                _ if consumed == 0 && produced == 0 && self.buf.capacity() > self.buf.len() => {
                    return Err(DedupError::GzipStalled);
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether the gzip input ended inside a member (a truncated archive).
    pub fn gzip_truncated(&self) -> bool {
        self.gzip_pending
    }

    /// Processes the complete lines pushed so far. Stops at a line the fast path does not
    /// accept and returns it (call `drain` again after handling it); `None` when only an
    /// unfinished line (or nothing) is left.
    pub fn drain(&mut self) -> Option<Fallback> {
        if !self.started && self.buf.len() >= 3 {
            self.started = true;
            if self.buf.starts_with(b"\xef\xbb\xbf") {
                self.pos = 3;
            }
        }
        let buf = std::mem::take(&mut self.buf);
        let mut pos = self.pos;
        let mut found = None;
        while let Some(off) = memchr::memchr(b'\n', &buf[pos..]) {
            let end = pos + off;
            let line = &buf[pos..end];
            pos = end + 1;
            self.started = true;
            if let Some(f) = self.take_line(line) {
                found = Some(f);
                break;
            }
        }
        self.buf = buf;
        if found.is_none() {
            // Only an unfinished line is left: keep it at the front.
            self.buf.drain(..pos);
            self.pos = 0;
        } else {
            self.pos = pos;
        }
        found
    }

    /// Ends the input: an unfinished last line is a line. Returns it if the caller must
    /// decide it (then call `add_document` for it).
    pub fn end_of_input(&mut self) -> Option<Fallback> {
        debug_assert!(memchr::memchr(b'\n', &self.buf[self.pos..]).is_none(), "drain before end_of_input");
        let mut rest = std::mem::take(&mut self.buf);
        let mut start = self.pos;
        if !self.started && rest.starts_with(b"\xef\xbb\xbf") {
            start = 3;
        }
        self.started = true;
        self.pos = 0;
        if rest.len() <= start {
            return None;
        }
        let line = rest.split_off(start);
        self.take_line(&line)
    }

    /// A document the caller read itself (a line the fast path left to it, or a Parquet row),
    /// with its key's value when the documents pass has a key.
    pub fn add_document(&mut self, line: u64, id: &str, text: &str, key: KeyValue) {
        self.process(line, id, text, key)
    }

    fn process(&mut self, line: u64, id: &str, text: &str, key: KeyValue) {
        let spec = Arc::clone(&self.spec);
        let ord = self.chars.len() as u32;
        let chars = char_len(text);
        self.counts.documents += 1;
        self.lines.push(line_u32(line));
        self.chars.push(u32::try_from(chars).unwrap_or(u32::MAX));
        self.id_blob.extend_from_slice(id.as_bytes());
        self.id_offsets.push(self.id_blob.len() as u64);
        let mut flags = 0u8;

        if let (Some(d), Some(out)) = (&spec.documents, self.doc_records.as_mut()) {
            match &key {
                KeyValue::Str(k) if spec.filters.keep(k, char_len(k)) => {
                    let h = digest(k.as_bytes(), Kind::Document);
                    let mut rec = [0u8; records::DOC];
                    rec[..16].copy_from_slice(&h.to_le_bytes());
                    rec[16..20].copy_from_slice(&ord.to_le_bytes());
                    out.push(bucket_of(high64(h), d.buckets), &rec);
                    self.counts.document_keys += 1;
                }
                KeyValue::Str(_) => {
                    flags |= FLAG_KEY_FILTERED;
                    self.counts.documents_key_skipped += 1;
                }
                KeyValue::Missing => {
                    flags |= FLAG_KEY_MISSING;
                    self.counts.documents_without_key += 1;
                }
                KeyValue::NotString => {
                    flags |= FLAG_KEY_NOT_STRING;
                    self.counts.documents_without_key += 1;
                }
            }
        }

        let mut paras: Vec<Paragraph> = Vec::new();
        if let Some(p) = &spec.paragraphs {
            paragraph::split(text, &p.separator, &mut paras);
            self.paragraph_records(p, &spec.filters, ord, &paras);
        }
        self.para_offsets.push(self.para_lens.len() as u64);

        if let Some(set) = &spec.decontamination {
            let same_split = spec.paragraphs.as_ref().is_some_and(|p| p.separator == set.separator);
            if !same_split {
                paragraph::split(text, &set.separator, &mut paras);
            }
            self.decontaminate(set, ord, &paras);
        }

        if let Some(m) = &spec.minhash {
            m.shingler.shingles(text, &mut self.scratch, &mut self.shingles);
            if self.shingles.is_empty() {
                flags |= FLAG_NO_SHINGLES;
                self.counts.documents_without_shingles += 1;
                self.sig.fill(u32::MAX);
                self.set.clear();
            } else {
                self.counts.minhash_documents += 1;
                m.perms.signature_into(&self.shingles, &mut self.sig);
                band_hashes(&self.sig, m.bands, m.rows, m.band_seed, &mut self.bands);
                if let Some(out) = self.band_records.as_mut() {
                    for (band, &h) in self.bands.iter().enumerate() {
                        let mut rec = [0u8; records::BAND];
                        rec[..8].copy_from_slice(&h.to_le_bytes());
                        rec[8..12].copy_from_slice(&(band as u32).to_le_bytes());
                        rec[12..16].copy_from_slice(&ord.to_le_bytes());
                        out.push(bucket_of(h, m.buckets), &rec);
                    }
                }
                if m.keep_sets {
                    // The high halves, unsorted and with repeats: only documents in candidate
                    // pairs are ever compared, so sorting waits until then (`sorted_set`).
                    self.set.clear();
                    self.set.extend(self.shingles.iter().map(|&h| (h >> 32) as u32));
                }
            }
            if m.keep_signatures {
                for v in &self.sig {
                    self.signatures.extend_from_slice(&v.to_le_bytes());
                }
            }
            if m.keep_sets {
                for v in &self.set {
                    self.set_values.extend_from_slice(&v.to_le_bytes());
                }
                self.set_offsets.push((self.set_values.len() / 4) as u64);
            }
        }
        self.flags.push(flags);
    }

    fn paragraph_records(&mut self, p: &ParaSpec, filters: &Filters, ord: u32, paras: &[Paragraph]) {
        let Some(out) = self.para_records.as_mut() else { return };
        let mut toks: Vec<&str> = Vec::new();
        for (i, para) in paras.iter().enumerate() {
            self.counts.paragraphs += 1;
            self.para_lens.push(u32::try_from(para.chars).unwrap_or(u32::MAX));
            if !filters.keep(para.text, para.chars) {
                self.para_info.push(PARA_SKIPPED);
                self.counts.paragraphs_skipped += 1;
                continue;
            }
            let mut push = |h: u128| {
                let mut rec = [0u8; records::PARA];
                rec[..16].copy_from_slice(&h.to_le_bytes());
                rec[16..20].copy_from_slice(&ord.to_le_bytes());
                rec[20..24].copy_from_slice(&(i as u32).to_le_bytes());
                out.push(bucket_of(high64(h), p.buckets), &rec);
            };
            match &p.by_ngram {
                Some(ng) if ng.length > 0 => {
                    tokens(para.text, &mut toks);
                    let starts = ngram_starts(toks.len(), ng.length, ng.stride);
                    if starts.len() >= 2 {
                        for &s in &starts {
                            push(digest_tokens(&toks[s..s + ng.length], Kind::Ngram, &mut self.tokens_buf));
                        }
                        self.counts.paragraph_keys += starts.len() as u64;
                        self.para_info.push(starts.len() as u32);
                    } else if ng.skip_short {
                        self.para_info.push(PARA_SKIPPED);
                        self.counts.paragraphs_skipped += 1;
                    } else {
                        push(digest(para.text.as_bytes(), Kind::Paragraph));
                        self.counts.paragraph_keys += 1;
                        self.para_info.push(PARA_WHOLE);
                    }
                }
                _ => {
                    push(digest(para.text.as_bytes(), Kind::Paragraph));
                    self.counts.paragraph_keys += 1;
                    self.para_info.push(PARA_WHOLE);
                }
            }
        }
    }

    fn decontaminate(&mut self, set: &DecontamSet, ord: u32, paras: &[Paragraph]) {
        let hit = |start: usize, end: usize, score: f32, hits: &mut Vec<u8>| {
            hits.extend_from_slice(&ord.to_le_bytes());
            hits.extend_from_slice(&(start as u32).to_le_bytes());
            hits.extend_from_slice(&(end as u32).to_le_bytes());
            hits.extend_from_slice(&score.to_le_bytes());
        };
        match &set.mode {
            DecontamMode::Paragraphs { min_words } => {
                for p in paras {
                    if is_blank(p.text) || !has_words(p.text, *min_words) {
                        continue;
                    }
                    if set.paragraphs.contains(&digest(p.text.as_bytes(), Kind::Decontamination)) {
                        hit(p.start, p.end, 1.0, &mut self.decon_hits);
                        self.counts.decontaminated_paragraphs += 1;
                    }
                }
            }
            DecontamMode::Ngrams { shingler } => {
                let mut words = Vec::new();
                let mut grams = Vec::new();
                for p in paras {
                    shingler.word_hashes(p.text, &mut self.scratch, &mut words);
                    if words.len() < shingler.ngram {
                        continue;
                    }
                    grams.clear();
                    shingler.shingles_of_words(&words, &mut grams);
                    let found = grams.iter().filter(|g| set.ngrams.contains(g)).count();
                    if found > 0 {
                        hit(p.start, p.end, found as f32 / grams.len() as f32, &mut self.decon_hits);
                        self.counts.decontaminated_paragraphs += 1;
                    }
                }
            }
        }
    }

    /// The scan's outputs. Call after `end_of_input` returned `None`.
    pub fn finish(self) -> ScanOutput {
        let n = self.chars.len();
        let mut meta = Vec::new();
        meta.extend_from_slice(&META_MAGIC);
        meta.extend_from_slice(&(n as u32).to_le_bytes());
        let sep_chars = self.spec.paragraphs.as_ref().map_or(0, |p| char_len(&p.separator) as u32);
        meta.extend_from_slice(&sep_chars.to_le_bytes());
        let mut section = |bytes: &[u8]| {
            meta.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
            meta.extend_from_slice(bytes);
        };
        let u32s = |v: &[u32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let u64s = |v: &[u64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        section(&u32s(&self.lines));
        section(&u32s(&self.chars));
        section(&self.flags);
        section(&u64s(&self.id_offsets));
        section(&self.id_blob);
        if self.spec.paragraphs.is_some() {
            section(&u64s(&self.para_offsets));
        } else {
            section(&[]);
        }
        section(&u32s(&self.para_lens));
        section(&u32s(&self.para_info));
        section(&self.decon_hits);

        let minhash = self.spec.minhash.as_ref();
        let signatures = minhash.filter(|m| m.keep_signatures).map(|m| {
            let mut b = Bucketed::new(m.perms.len() * 4, 1);
            *b.bucket_mut(0) = self.signatures.clone();
            b.to_bytes()
        });
        let sets = minhash.filter(|m| m.keep_sets).map(|_| {
            let mut out = Vec::with_capacity(16 + 8 * self.set_offsets.len() + self.set_values.len());
            out.extend_from_slice(&SETS_MAGIC);
            out.extend_from_slice(&(n as u64).to_le_bytes());
            out.extend_from_slice(&u64s(&self.set_offsets));
            out.extend_from_slice(&self.set_values);
            out
        });
        ScanOutput {
            meta,
            documents: self.doc_records.as_ref().map(Bucketed::to_bytes),
            paragraphs: self.para_records.as_ref().map(Bucketed::to_bytes),
            bands: self.band_records.as_ref().map(Bucketed::to_bytes),
            signatures,
            sets,
            counts: self.counts,
            last_line: self.line,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dedup::records::BucketedView;
    use crate::minhash::Words;

    fn spec() -> ScanSpec {
        ScanSpec {
            filters: Filters::default(),
            documents: Some(DocSpec { key: KeyPath::parse("$.text").unwrap(), buckets: 2 }),
            paragraphs: Some(ParaSpec { separator: "\n".into(), by_ngram: None, buckets: 3 }),
            minhash: Some(MinhashSpec {
                shingler: Shingler::new(2, true, Words::WordChars, 1).unwrap(),
                perms: Permutations::new(8, 1).unwrap(),
                bands: 4,
                rows: 2,
                band_seed: 5,
                buckets: 2,
                keep_signatures: true,
                keep_sets: true,
            }),
            decontamination: None,
        }
    }

    fn drain_all(s: &mut Scanner) -> Vec<Fallback> {
        let mut out = Vec::new();
        while let Some(f) = s.drain() {
            out.push(f);
        }
        out
    }

    #[test]
    fn lines_are_cut_like_iter_lines() {
        let mut s = Scanner::new(Arc::new(spec()));
        let data =
            b"\xef\xbb\xbf{\"id\":\"a\",\"text\":\"x y\\nz\"}\n\n  \n{\"id\": 7, \"text\": \"q\"}\n{\"id\":\"c\",\"te";
        s.push(&data[..10]);
        assert!(drain_all(&mut s).is_empty());
        s.push(&data[10..]);
        let f = s.drain().expect("integer id goes to Python");
        assert_eq!(f.line, 4);
        s.add_document(f.line, "7", "q", KeyValue::Str("q".into()));
        assert!(drain_all(&mut s).is_empty());
        s.push(b"xt\":\"w\"}");
        assert!(drain_all(&mut s).is_empty());
        assert_eq!(s.end_of_input(), None);
        assert_eq!(s.counts().lines, 3);
        assert_eq!(s.counts().documents, 3);
        assert_eq!(s.counts().python_lines, 1);
        let out = s.finish();
        assert_eq!(out.last_line, 5);
        let docs = BucketedView::parse(out.documents.as_ref().unwrap()).unwrap();
        assert_eq!((0..docs.buckets()).map(|b| docs.bucket(b).len() / records::DOC).sum::<usize>(), 3);
        let paras = BucketedView::parse(out.paragraphs.as_ref().unwrap()).unwrap();
        assert_eq!((0..paras.buckets()).map(|b| paras.bucket(b).len() / records::PARA).sum::<usize>(), 4);
        assert!(out.meta.starts_with(&META_MAGIC));
    }

    #[test]
    fn a_bad_last_line_is_handed_back() {
        let mut s = Scanner::new(Arc::new(spec()));
        s.push(b"{\"id\":\"a\",\"text\":\"x\"}\n{broken");
        assert!(drain_all(&mut s).is_empty());
        let f = s.end_of_input().unwrap();
        assert_eq!((f.line, f.raw.as_slice()), (2, b"{broken".as_slice()));
    }

    fn gzip(data: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn gzip_members_truncation_and_corruption() {
        let one = b"{\"id\":\"a\",\"text\":\"x\"}\n";
        let two = b"{\"id\":\"b\",\"text\":\"y\"}\n";
        let mut both = gzip(one);
        both.extend(gzip(two));
        let mut s = Scanner::new(Arc::new(spec()));
        for piece in both.chunks(7) {
            s.push_gzip(piece).unwrap();
            assert!(drain_all(&mut s).is_empty());
        }
        assert!(!s.gzip_truncated());
        assert_eq!(s.counts().documents, 2);

        let mut s = Scanner::new(Arc::new(spec()));
        s.push_gzip(&both[..both.len() - 3]).unwrap();
        drain_all(&mut s);
        assert!(s.gzip_truncated(), "the second member's trailer is missing");
        assert_eq!(s.counts().documents, 2, "its lines were all decompressed");

        let mut bad = both.clone();
        bad.extend_from_slice(b"garbage!!");
        let mut s = Scanner::new(Arc::new(spec()));
        assert!(s.push_gzip(&bad).is_err());
        drain_all(&mut s);
        assert_eq!(s.counts().documents, 2);
    }

    #[test]
    fn decontamination_sets_round_trip_and_find_paragraphs_and_ngrams() {
        let mut scratch = Scratch::default();
        let mut set = DecontamSet::new(DecontamMode::Paragraphs { min_words: 3 }, "\n".into()).unwrap();
        set.add("a question with enough words\nshort one", &mut scratch);
        assert_eq!(set.len(), 1);
        let back = DecontamSet::from_bytes(&set.to_bytes()).unwrap();
        assert_eq!(back.len(), 1);
        let spec = ScanSpec { decontamination: Some(Arc::new(back)), ..ScanSpec::default() };
        let mut s = Scanner::new(Arc::new(spec));
        s.add_document(1, "d", "intro\na question with enough words\nshort one", KeyValue::Missing);
        assert_eq!(s.counts().decontaminated_paragraphs, 1);

        let sh = Shingler::new(3, true, Words::WordChars, 9).unwrap();
        let mut set = DecontamSet::new(DecontamMode::Ngrams { shingler: sh }, "\n".into()).unwrap();
        set.add("The quick brown fox jumps", &mut scratch);
        let set = DecontamSet::from_bytes(&set.to_bytes()).unwrap();
        assert_eq!(set.len(), 3);
        let spec = ScanSpec { decontamination: Some(Arc::new(set)), ..ScanSpec::default() };
        let mut s = Scanner::new(Arc::new(spec));
        s.add_document(1, "d", "nothing here at all\nsaw the QUICK brown fox!", KeyValue::Missing);
        assert_eq!(s.counts().decontaminated_paragraphs, 1);
        s.add_document(2, "e", "the quick brown fox jumps\nthe quick brown fox jumps", KeyValue::Missing);
        let out = s.finish();
        let hits: Vec<f32> = out.meta[out.meta.len() - 48..].chunks_exact(16).map(|c| records::f32_at(c, 12)).collect();
        assert_eq!(hits, vec![2.0 / 3.0, 1.0, 1.0], "each paragraph scored on its own n-grams");
        assert!(DecontamSet::from_bytes(b"junk").is_err());
    }
}
