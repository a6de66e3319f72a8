//! The crate's error type. Pure Rust (no pyo3), so that the core is testable with plain
//! `cargo test`; `python/bloom.rs` maps each variant to a Python exception.
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub enum BloomError {
    /// Bad sizing arguments (n, p, m, k): a caller mistake, `ValueError` in Python.
    Params(String),
    /// A file that is not a valid filter: bad magic, wrong version, truncated, bad checksum...
    File { path: PathBuf, reason: String },
    /// The operating system refused (missing file, permission, disk full...).
    Io { path: PathBuf, source: io::Error },
    /// The bit array could not be allocated.
    Memory(String),
    /// Writing to a filter that was opened read-only.
    ReadOnly,
}

impl BloomError {
    pub fn file(path: &Path, reason: impl Into<String>) -> Self {
        BloomError::File { path: path.to_path_buf(), reason: reason.into() }
    }
    pub fn io(path: &Path, source: io::Error) -> Self {
        BloomError::Io { path: path.to_path_buf(), source }
    }
}

impl fmt::Display for BloomError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BloomError::Params(msg) => write!(f, "{msg}"),
            BloomError::File { path, reason } => {
                write!(f, "{}: not a usable Bloom filter file: {reason}", path.display())
            }
            BloomError::Io { path, source } => write!(f, "{}: {source}", path.display()),
            BloomError::Memory(msg) => write!(f, "{msg}"),
            BloomError::ReadOnly => write!(f, "this Bloom filter was opened read-only"),
        }
    }
}

impl std::error::Error for BloomError {}

pub type Result<T> = std::result::Result<T, BloomError>;
