//! What the report's column pass does not read; the caller then reads the file with the Python
//! pass. Each error names the document or attribute row of the batch it is about.
use std::fmt;

/// Why a batch is not this pass's to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReportError {
    /// An attribute set gives another number of rows than there are documents in the batch.
    RowCount { set: usize, rows: usize, docs: usize },
    /// Document `doc` of the batch is not a good document.
    Document { doc: usize, problem: DocumentProblem },
    /// Row `row` of attribute set `set` is not one this pass reads.
    Row { set: usize, row: usize, problem: RowProblem },
}

/// What is wrong with a document line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentProblem {
    /// Not one JSON object (the parser's message).
    Json(String),
    /// No id, or one that is neither a string nor an integer.
    Id,
    /// No text, or one that is not a string.
    Text,
    /// A `source` that is neither a string nor null.
    Source,
}

/// What is wrong with an attribute row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowProblem {
    /// Not one JSON object (the parser's message).
    Json(String),
    /// The row gives `attributes` twice.
    TwoAttributes,
    /// Two attribute sets give this key for one document.
    TwoSets { key: String },
    /// A span of this key is not `[start, end, ...]` numbers.
    NotASpan { key: String },
    /// The row's id is not its document's.
    OtherId,
}

impl fmt::Display for DocumentProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DocumentProblem::Json(message) => f.write_str(message),
            DocumentProblem::Id => f.write_str("no string or integer id"),
            DocumentProblem::Text => f.write_str("no string text"),
            DocumentProblem::Source => f.write_str("a source that is not a string"),
        }
    }
}

impl fmt::Display for RowProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowProblem::Json(message) => f.write_str(message),
            RowProblem::TwoAttributes => f.write_str("an attribute row has two 'attributes'"),
            RowProblem::TwoSets { key } => {
                write!(f, "attribute {key:?} is given by two attribute sets of one document")
            }
            RowProblem::NotASpan { key } => {
                write!(f, "attribute {key:?} has a span that is not [start, end, ...] numbers")
            }
            RowProblem::OtherId => f.write_str("another id than its document's"),
        }
    }
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::RowCount { set, rows, docs } => {
                write!(f, "attribute set {set} has {rows} rows for {docs} documents")
            }
            ReportError::Document { doc, problem } => write!(f, "document {doc}: {problem}"),
            ReportError::Row { set, row, problem } => write!(f, "attribute set {set}, row {row}: {problem}"),
        }
    }
}

impl std::error::Error for ReportError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_line() {
        let e = ReportError::Row { set: 1, row: 2, problem: RowProblem::NotASpan { key: "k".into() } };
        assert_eq!(
            e.to_string(),
            "attribute set 1, row 2: attribute \"k\" has a span that is not [start, end, ...] numbers"
        );
        let e = ReportError::Document { doc: 0, problem: DocumentProblem::Id };
        assert_eq!(e.to_string(), "document 0: no string or integer id");
    }
}
