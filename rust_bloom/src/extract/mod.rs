//! HTML main-content extraction by rs-trafilatura (crates.io; MIT OR Apache-2.0), a Rust port of
//! trafilatura with a page-type classifier: the warc stage's `rs_trafilatura` linearizer and the
//! slower half of its `combined` one (`dolma_pipe/stages/warc/extract.py`).
//!
//! The crate's defaults are kept (tables in, comments, images and links out, its fallbacks on).
//! A panic inside the crate is caught and returned as [`ExtractError::Panic`], so that one page
//! costs one page: the caller turns either error into a counted, quarantined record. What no
//! unwinding catches (a stack overflow, an abort) is left to the stage's sandbox process. A caught
//! panic prints nothing: the process's panic hook is wrapped once ([`quiet_panics`]) so that on a
//! thread inside [`guarded`] the message (with where it was raised) goes into the error instead of
//! stderr; panics anywhere else still reach the previous hook unchanged. Its
//! time grows faster than linearly with the markup's nesting depth (measured: 1,000 nested
//! elements 0.4 s, 10,000 27 s), so the stage does not hand it pages nested past its depth cap.
use std::cell::{Cell, RefCell};
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe, PanicHookInfo};
use std::sync::Once;

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

thread_local! {
    /// Whether this thread is inside [`guarded`] (its panics are caught and reported there).
    static GUARDED: Cell<bool> = const { Cell::new(false) };
    /// Where the last guarded panic on this thread was raised (set by the hook, read by `guarded`).
    static LOCATION: RefCell<Option<String>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Wraps the process's panic hook, once: a panic on a thread inside [`guarded`] is not printed
/// (its location is kept for the error), any other panic goes to the hook that was there before.
fn quiet_panics() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if GUARDED.with(Cell::get) {
                let at = info.location().map(|l| format!("{}:{}", short_path(l.file()), l.line()));
                LOCATION.with(|l| *l.borrow_mut() = at);
            } else {
                previous(info);
            }
        }));
    });
}

/// A source path without the machine's cargo registry folder (`rs-trafilatura-0.2.2/src/dom.rs`).
fn short_path(file: &str) -> &str {
    match file.split_once("/registry/src/") {
        Some((_, rest)) => rest.split_once('/').map_or(rest, |(_, inside)| inside),
        None => file,
    }
}

/// `f`'s result with a panic inside it caught and returned as [`ExtractError::Panic`] (its message
/// and, where known, the crate's source line), printed nowhere.
fn guarded<T>(f: impl FnOnce() -> Result<T, ExtractError>) -> Result<T, ExtractError> {
    quiet_panics();
    let outer = GUARDED.with(|g| g.replace(true));
    let result = catch_unwind(AssertUnwindSafe(f));
    GUARDED.with(|g| g.set(outer));
    result.unwrap_or_else(|p| {
        let message = panic_message(p.as_ref());
        Err(ExtractError::Panic(match LOCATION.with(|l| l.borrow_mut().take()) {
            Some(at) => format!("{message} (at {at})"),
            None => message,
        }))
    })
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

/// What the `combined` linearizer's router counts in a page's HTML (case-sensitive, as written):
/// every `<`, and the openings of links, paragraph-like tags, table cells and list items; whether
/// it has an `<article`, a `<main` and a JSON-LD `"articleBody"`. One pass for the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TagCounts {
    /// Every `<` (the crate's time grows with it).
    pub tags: usize,
    /// `<a ` (links).
    pub links: usize,
    /// `<p` (paragraphs, and `<pre`, `<picture`, ...).
    pub paragraphs: usize,
    /// `<td`.
    pub cells: usize,
    /// `<li`.
    pub list_items: usize,
    pub article: bool,
    pub main: bool,
    pub article_body: bool,
}

pub fn tag_counts(html: &str) -> TagCounts {
    let bytes = html.as_bytes();
    let mut c = TagCounts::default();
    for i in memchr::memchr_iter(b'<', bytes) {
        c.tags += 1;
        let rest = &bytes[i + 1..];
        match rest.first() {
            Some(b'a') if rest.get(1) == Some(&b' ') => c.links += 1,
            Some(b'a') if rest.starts_with(b"article") => c.article = true,
            Some(b'p') => c.paragraphs += 1,
            Some(b't') if rest.get(1) == Some(&b'd') => c.cells += 1,
            Some(b'l') if rest.get(1) == Some(&b'i') => c.list_items += 1,
            Some(b'm') if rest.starts_with(b"main") => c.main = true,
            _ => {}
        }
    }
    c.article_body = memchr::memmem::find(bytes, b"\"articleBody\"").is_some();
    c
}

/// Elements that never nest (void) or that HTML closes by itself when a sibling starts: their
/// tags leave the depth of [`nested_deeper`] as it is.
pub const FLAT_ELEMENTS: [&str; 30] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source", "track", "wbr", "p",
    "li", "td", "tr", "th", "dt", "dd", "option", "optgroup", "tbody", "thead", "tfoot", "colgroup", "rb", "rt", "rp",
];

fn is_flat(name: &[u8]) -> bool {
    name.len() <= 8 && FLAT_ELEMENTS.iter().any(|flat| name.eq_ignore_ascii_case(flat.as_bytes()))
}

/// Whether `html` nests elements deeper than `limit`: the tags of the expression
/// `<(/?)([A-Za-z][A-Za-z0-9]*)[^>]*>` in order (a tag runs to the first `>` after its name; a
/// `<` that starts none is text), each opening one deeper, each closing one shallower (never
/// below 0), the flat elements' tags neither. Answered without a scan when the page has no more
/// `<` than `limit`. On UTF-8 bytes this finds the tags Python's `re` finds in the text (no
/// multi-byte character holds an ASCII byte).
pub fn nested_deeper(html: &[u8], limit: usize) -> bool {
    if memchr::memchr_iter(b'<', html).count() <= limit {
        return false;
    }
    let (mut depth, mut at) = (0usize, 0usize);
    while let Some(offset) = memchr::memchr(b'<', &html[at..]) {
        let lt = at + offset;
        let close = html.get(lt + 1) == Some(&b'/');
        let start = lt + 1 + usize::from(close);
        if !html.get(start).is_some_and(u8::is_ascii_alphabetic) {
            at = lt + 1;
            continue;
        }
        let end = start + html[start..].iter().take_while(|b| b.is_ascii_alphanumeric()).count();
        let Some(gt) = memchr::memchr(b'>', &html[end..]) else {
            return false; // no `>` left: no tag from here on
        };
        at = end + gt + 1;
        if is_flat(&html[start..end]) {
            continue;
        }
        if close {
            depth = depth.saturating_sub(1);
        } else {
            depth += 1;
            if depth > limit {
                return true;
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_nesting_tags_only() {
        let deep = "<div>".repeat(5) + &"<p><br>".repeat(50) + "x" + &"</div>".repeat(5);
        assert!(nested_deeper(deep.as_bytes(), 4) && !nested_deeper(deep.as_bytes(), 5));
        // Closings never go below 0; `<` that starts no tag, `</` before a digit, and names that
        // only begin like a flat element's are counted as written.
        let html = "</div></div><a><b>< c><1><span></2><brx><PARAM>";
        assert!(nested_deeper(html.as_bytes(), 3) && !nested_deeper(html.as_bytes(), 4));
        // A tag runs to its first `>`: the `<div` inside it is not one; no `>` at all ends the tags.
        assert!(!nested_deeper(b"<i title='<div>'><b>x", 2) && nested_deeper(b"<i title='<div>'><b>x", 1));
        assert!(!nested_deeper(b"<i><b><u><s", 3) && nested_deeper(b"<i><b><u><s>", 3));
    }

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
        match got {
            Err(ExtractError::Panic(m)) => {
                assert!(m.starts_with("boom on page (at ") && m.contains("src/extract/mod.rs:"), "{m}")
            }
            other => panic!("not a caught panic: {other:?}"),
        }
        assert!(!GUARDED.with(Cell::get), "the flag is reset after a caught panic");
        assert_eq!(guarded(|| Err::<(), _>(ExtractError::Failed("x".into()))), Err(ExtractError::Failed("x".into())));
    }

    #[test]
    fn tag_counts_as_python_counts_them() {
        let html = "<html><main><article><p>x</p><a href=x>l</a><a\tb><pre></pre><table><tr><td>1<td>2</table><ul><li>i</li><link></ul>\
                    <script type=application/ld+json>{\"articleBody\": \"t\"}</script></article></main></html>";
        let c = tag_counts(html);
        let count = |needle: &str| html.matches(needle).count();
        assert_eq!(c.tags, count("<"));
        assert_eq!(
            (c.links, c.paragraphs, c.cells, c.list_items),
            (count("<a "), count("<p"), count("<td"), count("<li"))
        );
        assert!(c.article && c.main && c.article_body);
        let none = tag_counts("<div>articleBody <mainx</div>");
        assert_eq!((none.tags, none.links, none.article, none.article_body), (3, 0, false, false));
        assert!(none.main); // "<main" is a prefix match, as Python's `"<main" in html`
    }

    #[test]
    fn registry_paths_are_shortened() {
        let file = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/rs-trafilatura-0.2.2/src/dom.rs";
        assert_eq!(short_path(file), "rs-trafilatura-0.2.2/src/dom.rs");
        assert_eq!(short_path("rust_bloom/src/extract/mod.rs"), "rust_bloom/src/extract/mod.rs");
    }

    #[test]
    fn same_page_same_text() {
        let html = "<html><body><main><p>One paragraph of text that is long enough to be kept by the extractor, surely.</p></main></body></html>";
        assert_eq!(rs_trafilatura(html, None), rs_trafilatura(html, None));
    }
}
