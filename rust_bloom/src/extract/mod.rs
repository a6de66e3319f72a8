//! HTML main-content extraction by rs-trafilatura (crates.io; MIT OR Apache-2.0), a Rust port of
//! trafilatura with a page-type classifier: the warc stage's `rs_trafilatura` linearizer and the
//! slower half of its `combined` one (`dolma_pipe/stages/warc/extract.py`).
//!
//! The crate's defaults are kept (tables in, comments, images and links out, its fallbacks on).
//! A panic inside the crate is caught and returned as [`ExtractError::Panic`], so that one page
//! costs one page: the caller turns either error into a counted, quarantined record. What no
//! unwinding catches (a stack overflow, an abort) is left to the stage's sandbox process. Its
//! time grows faster than linearly with the markup's nesting depth (measured: 1,000 nested
//! elements 0.4 s, 10,000 27 s), so the stage does not hand it pages nested past its depth cap.
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// What one page gave.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    /// The main content as plain text ("" when it found none).
    pub text: String,
    /// The crate's own estimate of the extraction's quality (0-1).
    pub quality: f64,
    /// The page type its classifier chose ("article", "forum", ...; "" when none).
    pub page_type: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExtractError {
    /// The crate returned an error for the page.
    Failed(String),
    /// The crate panicked on the page (caught).
    Panic(String),
}

impl fmt::Display for ExtractError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExtractError::Failed(m) => write!(f, "rs-trafilatura failed: {m}"),
            ExtractError::Panic(m) => write!(f, "rs-trafilatura panicked: {m}"),
        }
    }
}

impl std::error::Error for ExtractError {}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// `f`'s result with a panic inside it caught and returned as [`ExtractError::Panic`].
fn guarded<T>(f: impl FnOnce() -> Result<T, ExtractError>) -> Result<T, ExtractError> {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|p| Err(ExtractError::Panic(panic_message(p.as_ref()))))
}

/// The main content of `html` with rs-trafilatura's defaults; `url` (the page's address) lets its
/// classifier use the URL's shape. A page with no content is an empty text, not an error.
pub fn rs_trafilatura(html: &str, url: Option<&str>) -> Result<Extracted, ExtractError> {
    let options = rs_trafilatura::Options { url: url.map(str::to_string), ..rs_trafilatura::Options::default() };
    guarded(|| match rs_trafilatura::extract_with_options(html, &options) {
        Ok(result) => Ok(Extracted {
            text: result.content_text,
            quality: result.extraction_quality,
            page_type: result.metadata.page_type.map(|t| t.to_string()).unwrap_or_default(),
        }),
        Err(rs_trafilatura::Error::NoContent) => {
            Ok(Extracted { text: String::new(), quality: 0.0, page_type: String::new() })
        }
        Err(e) => Err(ExtractError::Failed(e.to_string())),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn main_content_without_navigation() {
        let para = "The river rose through the night and by morning the lower town was under water. ";
        let html = format!(
            "<html><body><nav><a href='/'>Home</a> <a href='/x'>Shop</a></nav><article><h1>Flood</h1><p>{}</p><p>{}</p></article>\
             <footer>Copyright 2024 Example</footer></body></html>",
            para.repeat(4),
            para.repeat(3)
        );
        let got = rs_trafilatura(&html, Some("https://example.org/news/flood")).unwrap();
        assert!(got.text.contains("lower town was under water"));
        assert!(!got.text.contains("Copyright"));
        assert!((0.0..=1.0).contains(&got.quality));
    }

    #[test]
    fn empty_and_garbage_pages_are_not_errors() {
        assert_eq!(rs_trafilatura("", None).unwrap().text, "");
        assert!(rs_trafilatura("<<<>>>\u{0}\u{fffd}</p></div>", None).is_ok());
    }

    #[test]
    fn a_panic_is_an_error() {
        let got: Result<(), ExtractError> = guarded(|| panic!("boom on page"));
        assert_eq!(got, Err(ExtractError::Panic("boom on page".to_string())));
        assert_eq!(guarded(|| Err::<(), _>(ExtractError::Failed("x".into()))), Err(ExtractError::Failed("x".into())));
    }

    #[test]
    fn same_page_same_text() {
        let html = "<html><body><main><p>One paragraph of text that is long enough to be kept by the extractor, surely.</p></main></body></html>";
        assert_eq!(rs_trafilatura(html, None), rs_trafilatura(html, None));
    }
}
