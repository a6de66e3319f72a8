//! Errors of rule compilation and evaluation; each names the expression it comes from.
use std::fmt;

#[derive(Debug, Clone, PartialEq)]
pub enum FilterError {
    /// The expression does not parse or compile; `column` is 1-based, in characters, when known.
    Compile { expr: String, column: Option<usize>, message: String },
    /// The expression failed on a document (a jq error, a span that is not `[start, end, score]`).
    Eval { expr: String, message: String },
}

impl FilterError {
    pub fn compile(expr: &str, column: Option<usize>, message: impl Into<String>) -> Self {
        FilterError::Compile { expr: expr.to_string(), column, message: message.into() }
    }

    pub fn eval(expr: &str, message: impl Into<String>) -> Self {
        FilterError::Eval { expr: expr.to_string(), message: message.into() }
    }
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FilterError::Compile { expr, column: Some(c), message } => write!(f, "{expr:?} at column {c}: {message}"),
            FilterError::Compile { expr, column: None, message } => write!(f, "{expr:?}: {message}"),
            FilterError::Eval { expr, message } => write!(f, "{expr:?} failed: {message}"),
        }
    }
}

impl std::error::Error for FilterError {}
