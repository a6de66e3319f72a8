//! Why a dedup kernel refuses its input: a setting it cannot follow, or records and work files that
//! are not what the phase before it writes. `python/dedup.rs` raises each as a `ValueError` with
//! this message.
use crate::minhash::MinhashError;
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum DedupError {
    /// A document key outside the JSONPath subset the scan follows (`why` says what is wrong).
    UnsupportedKey { path: String, why: &'static str },
    /// A buffer of `what` that is not a whole number of `record_size`-byte records.
    PartialRecords { what: &'static str, bytes: usize, record_size: usize },
    /// A record size `kernel` has no layout for.
    UnknownRecordSize { kernel: &'static str, size: usize },
    /// A file index past the run's number of input files.
    FileOutOfRange { kernel: &'static str, file: usize },
    /// First occurrences were fed a file out of the global order, or one file twice.
    FilesOutOfOrder,
    /// A candidate pair's document has no values to verify it with.
    NoValues { node: u64 },
    /// A verified pair without its similarity.
    NoSimilarity,
    /// A work file or set that is not what its reader expects (the message says which and how).
    Damaged(&'static str),
    /// An empty paragraph separator.
    EmptySeparator,
    /// Corrupt gzip input (the decompressor's message).
    Gzip(String),
    /// The decompressor took no input and gave no output.
    GzipStalled,
    /// A document's attribute row could not be written as JSON.
    Json(String),
    /// A decontamination set's MinHash settings.
    Minhash(MinhashError),
}

impl From<MinhashError> for DedupError {
    fn from(e: MinhashError) -> Self {
        DedupError::Minhash(e)
    }
}

impl fmt::Display for DedupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DedupError::UnsupportedKey { path, why } => {
                write!(f, "unsupported key {path:?}: {why} (use $.field, $.a.b, $['a'] or $.a[0])")
            }
            DedupError::PartialRecords { what, bytes, record_size } => {
                write!(f, "{what}: {bytes} bytes is not a whole number of {record_size}-byte records")
            }
            DedupError::UnknownRecordSize { kernel, size } => write!(f, "{kernel}: unknown record size {size}"),
            DedupError::FileOutOfRange { kernel, file } => write!(f, "{kernel}: file index {file} out of range"),
            DedupError::FilesOutOfOrder => {
                f.write_str("first_occurrence: files must come in increasing order, each once")
            }
            DedupError::NoValues { node } => write!(f, "verify_pairs: no values for document {node:#x}"),
            DedupError::NoSimilarity => f.write_str("cluster: a verified pair has no similarity"),
            DedupError::Damaged(what) => f.write_str(what),
            DedupError::EmptySeparator => f.write_str("the paragraph separator must not be empty"),
            DedupError::Gzip(message) | DedupError::Json(message) => f.write_str(message),
            DedupError::GzipStalled => f.write_str("the decompressor made no progress"),
            DedupError::Minhash(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for DedupError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages() {
        let e = DedupError::PartialRecords { what: "key records", bytes: 5, record_size: 24 };
        assert_eq!(e.to_string(), "key records: 5 bytes is not a whole number of 24-byte records");
        assert_eq!(DedupError::NoValues { node: 255 }.to_string(), "verify_pairs: no values for document 0xff");
        let e = DedupError::UnsupportedKey { path: "x".into(), why: "it must start with $" };
        assert_eq!(e.to_string(), "unsupported key \"x\": it must start with $ (use $.field, $.a.b, $['a'] or $.a[0])");
        assert_eq!(DedupError::from(MinhashError::NgramSize).to_string(), "ngram size must be at least 1");
    }
}
