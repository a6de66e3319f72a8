//! The `resiliparse_refined` linearizer's line filter (`dolma_pipe/stages/warc/refine.py`): the
//! features of each non-empty line of resiliparse's text of a whole page ([`page_lines`]), the
//! boosted trees that score them ([`Trees`]) and the page's text they keep ([`kept_text`]).
//!
//! The model is fitted in Python (`bench/warc_refine.py --fit`, scikit-learn) on these features,
//! and the Python that computed them before (numpy) gave the same bits on all 2,189 pages of the
//! extraction benchmarks: `str.strip()` and `str.split()` whitespace, lengths in code points,
//! neighbourhood means as differences of a cumulative sum, the leaves summed in tree order.
//! Lower-casing is Python's `str.lower()`, passed in (as everywhere in the core: `crate::text`).
use crate::text::{char_len, is_space, rstrip, split_word_count, strip};
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

/// The features of a line, in the order of the model's columns (`refine_model.json`'s `features`).
pub const FEATURES: [&str; 25] = [
    "in_main",
    "log_words",
    "chars_per_word",
    "terminal_punct",
    "bullet",
    "indent",
    "title",
    "boilerplate",
    "repeated",
    "position",
    "before_main",
    "after_main",
    "main_near",
    "main_wide",
    "log_words_near",
    "punct_near",
    "bullet_near",
    "prev_in_main",
    "next_in_main",
    "blank_before",
    "page_main_share",
    "page_log_main_words",
    "page_log_lines",
    "outside_boilerplate",
    "outside_boilerplate_wide",
];
const WIDTH: usize = FEATURES.len();
const IN_MAIN: usize = 0;
const LOG_WORDS: usize = 1;
const CHARS_PER_WORD: usize = 2;
const TERMINAL_PUNCT: usize = 3;
const BULLET: usize = 4;
const INDENT: usize = 5;
const TITLE: usize = 6;
const BOILERPLATE: usize = 7;
const REPEATED: usize = 8;
const POSITION: usize = 9;
const BEFORE_MAIN: usize = 10;
const AFTER_MAIN: usize = 11;
const PREV_IN_MAIN: usize = 17;
const NEXT_IN_MAIN: usize = 18;
const BLANK_BEFORE: usize = 19;
const PAGE_MAIN_SHARE: usize = 20;
const PAGE_LOG_MAIN_WORDS: usize = 21;
const PAGE_LOG_LINES: usize = 22;
const OUTSIDE_BOILERPLATE: usize = 23;
/// (mean's column, of which column): over the 2 lines either side (near) or 8 (wide), itself included.
const NEAR: [(usize, usize); 4] = [(12, IN_MAIN), (14, LOG_WORDS), (15, TERMINAL_PUNCT), (16, BULLET)];
const WIDE: [(usize, usize); 2] = [(13, IN_MAIN), (24, OUTSIDE_BOILERPLATE)];

/// Words of boilerplate lines (share buttons, cookie notes, footers, menus, comment threads),
/// matched as whole lower-cased words of lines of up to 80 characters.
const BOILERPLATE_WORDS: [&str; 54] = [
    "share",
    "shares",
    "tweet",
    "facebook",
    "twitter",
    "linkedin",
    "pinterest",
    "whatsapp",
    "instagram",
    "youtube",
    "email",
    "e-mail",
    "print",
    "cookie",
    "cookies",
    "privacy",
    "terms",
    "copyright",
    "reserved",
    "sign",
    "login",
    "logout",
    "log",
    "register",
    "subscribe",
    "newsletter",
    "follow",
    "menu",
    "home",
    "search",
    "related",
    "recommended",
    "trending",
    "popular",
    "advertisement",
    "sponsored",
    "comment",
    "comments",
    "reply",
    "replies",
    "posted",
    "tag",
    "tags",
    "category",
    "categories",
    "previous",
    "next",
    "skip",
    "contact",
    "accept",
    "download",
    "click",
    "powered",
    "loading",
];
/// What separates words besides whitespace (no hyphen: "e-mail" is one word).
const SEPARATORS: &str =
    "!\"#$%&'()*+,./:;<=>?@[\\]^_`{|}~\u{a9}\u{b7}\u{bb}\u{2022}\u{2013}\u{2014}\u{2019}\u{201c}\u{201d}";
/// A line ending in one of these ends a sentence or a quotation.
const TERMINAL: &str = ".!?:;\"'\u{201d}\u{2019})";
const BULLET_MARK: char = '\u{2022}';

/// A page's non-empty lines and their features.
pub struct PageLines<'a> {
    /// Stripped.
    pub lines: Vec<&'a str>,
    /// As resiliparse wrote them (list items indented), right-stripped.
    pub raws: Vec<&'a str>,
    /// Whether an empty line (or the text's start) comes before the line: a new block.
    pub blanks: Vec<bool>,
    /// One row of [`FEATURES`] a line, row after row.
    pub x: Vec<f64>,
}

/// The non-empty stripped lines of `text`.
fn line_set(text: &str) -> HashSet<&str> {
    text.split('\n').map(strip).filter(|line| !line.is_empty()).collect()
}

/// The line without its list bullet (and the spaces after it).
fn body(line: &str) -> &str {
    match line.strip_prefix(BULLET_MARK) {
        Some(rest) => rest.trim_start_matches(is_space),
        None => line,
    }
}

static BOILERPLATE_SET: LazyLock<HashSet<&'static str>> = LazyLock::new(|| BOILERPLATE_WORDS.into_iter().collect());

/// Whether a lower-cased line holds one of [`BOILERPLATE_WORDS`] as a whole word.
fn has_boilerplate_word(lowered: &str) -> bool {
    lowered.split(|c: char| is_space(c) || SEPARATORS.contains(c)).any(|w| !w.is_empty() && BOILERPLATE_SET.contains(w))
}

/// The mean of column `from` over each line's neighbours within `radius` (itself included), into
/// column `to`: differences of a cumulative sum, as the numpy code this replaced computed it.
fn window_mean(x: &mut [f64], n: usize, from: usize, to: usize, radius: usize) {
    let mut csum = Vec::with_capacity(n + 1);
    csum.push(0.0);
    let mut total = 0.0;
    for i in 0..n {
        total += x[i * WIDTH + from];
        csum.push(total);
    }
    for i in 0..n {
        let (lo, hi) = (i.saturating_sub(radius), (i + radius + 1).min(n));
        x[i * WIDTH + to] = (csum[hi] - csum[lo]) / (hi - lo) as f64;
    }
}

/// The lines of `full` (resiliparse's text of the whole page; `full_lower` is its `str.lower()`)
/// and their features: whether `main` (the main content's text) and `outside` (the text less
/// boilerplate elements) have the line, whether its body is one of `titles`, and the line's own.
/// An error when `full_lower` has another number of lines than `full`.
pub fn page_lines<'a>(
    full: &'a str,
    full_lower: &str,
    main: &str,
    outside: &str,
    titles: &HashSet<&str>,
) -> Result<PageLines<'a>, String> {
    let rows: Vec<&str> = full.split('\n').collect();
    let lowered: Vec<&str> = full_lower.split('\n').collect();
    if rows.len() != lowered.len() {
        return Err(format!("full_lower has {} lines, full {}: it must be full.lower()", lowered.len(), rows.len()));
    }
    let stripped: Vec<&str> = rows.iter().map(|r| strip(r)).collect();
    let nonempty: Vec<usize> = (0..rows.len()).filter(|&i| !stripped[i].is_empty()).collect();
    let n = nonempty.len();
    let lines: Vec<&str> = nonempty.iter().map(|&i| stripped[i]).collect();
    let raws: Vec<&str> = nonempty.iter().map(|&i| rstrip(rows[i])).collect();
    let blanks: Vec<bool> = nonempty.iter().map(|&i| i == 0 || stripped[i - 1].is_empty()).collect();
    let mut x = vec![0.0; n * WIDTH];
    if n == 0 {
        return Ok(PageLines { lines, raws, blanks, x });
    }
    let main_lines = line_set(main);
    let outside_lines = line_set(outside);
    let bodies: Vec<&str> = lines.iter().map(|l| body(l)).collect();
    let mut seen: HashMap<&str, u32> = HashMap::with_capacity(n);
    for b in &bodies {
        *seen.entry(b).or_insert(0) += 1;
    }
    let (mut first, mut last, mut in_main_count) = (None, None, 0usize);
    for (k, &i) in nonempty.iter().enumerate() {
        let (line, b, row) = (lines[k], bodies[k], &mut x[k * WIDTH..(k + 1) * WIDTH]);
        let words = split_word_count(b);
        let in_main = main_lines.contains(line);
        if in_main {
            first.get_or_insert(k);
            last = Some(k);
            in_main_count += 1;
        }
        row[IN_MAIN] = f64::from(u8::from(in_main));
        // log(1 + w), exact for a count: numpy's log1p gave these bits when the model was fitted
        // (glibc's log1p differs in the last bit for some counts; the page-level ones below are
        // Python's math.log1p, which is glibc's).
        row[LOG_WORDS] = (1.0 + words as f64).ln();
        row[CHARS_PER_WORD] = char_len(b) as f64 / words.max(1) as f64;
        row[TERMINAL_PUNCT] = f64::from(u8::from(b.chars().next_back().is_some_and(|c| TERMINAL.contains(c))));
        row[BULLET] = f64::from(u8::from(line.starts_with(BULLET_MARK)));
        let indent = raws[k].len() - raws[k].trim_start_matches(' ').len();
        row[INDENT] = indent.min(16) as f64 / 16.0;
        row[TITLE] = f64::from(u8::from(titles.contains(b)));
        if char_len(b) <= 80 {
            let low_line = strip(lowered[i]);
            row[BOILERPLATE] = f64::from(u8::from(has_boilerplate_word(body(low_line))));
        }
        row[REPEATED] = f64::from(u8::from(seen[b] > 1));
        row[BLANK_BEFORE] = f64::from(u8::from(blanks[k]));
        row[OUTSIDE_BOILERPLATE] = f64::from(u8::from(outside_lines.contains(line)));
        row[POSITION] = k as f64 / n as f64;
    }
    let (first, last) = (first.unwrap_or(n), last.map_or(-1, |l| l as i64));
    let main_share = in_main_count as f64 / n as f64;
    let log_main_words = (split_word_count(main) as f64).ln_1p();
    let log_lines = (n as f64).ln_1p();
    for k in 0..n {
        let row = k * WIDTH;
        x[row + BEFORE_MAIN] = f64::from(u8::from(k < first));
        x[row + AFTER_MAIN] = f64::from(u8::from((k as i64) > last));
        if k > 0 {
            x[row + PREV_IN_MAIN] = x[row - WIDTH + IN_MAIN];
        }
        if k + 1 < n {
            x[row + NEXT_IN_MAIN] = x[row + WIDTH + IN_MAIN];
        }
        x[row + PAGE_MAIN_SHARE] = main_share;
        x[row + PAGE_LOG_MAIN_WORDS] = log_main_words;
        x[row + PAGE_LOG_LINES] = log_lines;
    }
    for (to, from) in NEAR {
        window_mean(&mut x, n, from, to, 2);
    }
    for (to, from) in WIDE {
        window_mean(&mut x, n, from, to, 8);
    }
    Ok(PageLines { lines, raws, blanks, x })
}

/// Boosted trees over [`FEATURES`], each a complete tree of `depth` levels (splits breadth-first,
/// then leaves; a leaf above the last level is a split whose sides both hold its value; leaves hold
/// their share of the log-odds, the learning rate applied). A line goes right where its feature is
/// above the split's threshold.
pub struct Trees {
    depth: u32,
    base: f64,
    split_feature: Vec<usize>,
    split_threshold: Vec<f64>,
    leaf: Vec<f64>,
    trees: usize,
}

impl Trees {
    /// The trees from the model's rows (one a tree), checked: complete trees of `depth` over [`FEATURES`].
    pub fn new(
        depth: u32,
        base: f64,
        split_feature: Vec<Vec<i64>>,
        split_threshold: Vec<Vec<f64>>,
        leaf: Vec<Vec<f64>>,
    ) -> Result<Self, String> {
        if !(1..=16).contains(&depth) {
            return Err(format!("depth {depth} is not 1 to 16"));
        }
        let (splits, leaves) = ((1usize << depth) - 1, 1usize << depth);
        let trees = split_feature.len();
        let complete = split_threshold.len() == trees
            && leaf.len() == trees
            && split_feature.iter().all(|t| t.len() == splits)
            && split_threshold.iter().all(|t| t.len() == splits)
            && leaf.iter().all(|t| t.len() == leaves);
        if !complete {
            return Err(format!(
                "'split_feature'/'split_threshold'/'leaf' are not {trees} complete trees of depth {depth}"
            ));
        }
        let split_feature = split_feature
            .into_iter()
            .flatten()
            .map(|f| {
                usize::try_from(f)
                    .ok()
                    .filter(|&f| f < WIDTH)
                    .ok_or(format!("split feature {f} is not a column of the {WIDTH} features"))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Trees {
            depth,
            base,
            split_feature,
            split_threshold: split_threshold.into_iter().flatten().collect(),
            leaf: leaf.into_iter().flatten().collect(),
            trees,
        })
    }

    /// Each row's log-odds of being content (`x`: rows of [`FEATURES`]).
    pub fn log_odds(&self, x: &[f64]) -> Vec<f64> {
        let splits = (1usize << self.depth) - 1;
        let mut leaves = vec![0.0; self.trees];
        x.chunks_exact(WIDTH)
            .map(|row| {
                for (t, value) in leaves.iter_mut().enumerate() {
                    let mut node = 0;
                    for _ in 0..self.depth {
                        let s = t * splits + node;
                        node = 2 * node + 1 + usize::from(row[self.split_feature[s]] > self.split_threshold[s]);
                    }
                    *value = self.leaf[t * (splits + 1) + node - splits];
                }
                self.base + leaves.iter().fold(0.0, |sum, v| sum + v)
            })
            .collect()
    }
}

/// The page's text by the filter: its lines whose log-odds reach `threshold`, blocks apart by an
/// empty line as resiliparse wrote them; `main` instead when they hold fewer words than
/// `fallback_share` of it (the model dropped most of what resiliparse calls main content); empty
/// for a page without lines.
pub fn kept_text(page: &PageLines<'_>, trees: &Trees, threshold: f64, fallback_share: f64, main: &str) -> String {
    if page.lines.is_empty() {
        return String::new();
    }
    let mut text = String::new();
    for ((raw, &blank), odds) in page.raws.iter().zip(&page.blanks).zip(trees.log_odds(&page.x)) {
        if odds >= threshold {
            if !text.is_empty() {
                text.push_str(if blank { "\n\n" } else { "\n" });
            }
            text.push_str(raw);
        }
    }
    if (split_word_count(&text) as f64) < fallback_share * split_word_count(main) as f64 {
        return main.to_owned();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(full: &str) -> PageLines<'_> {
        page_lines(full, &full.to_lowercase(), "", "", &HashSet::new()).unwrap()
    }

    #[test]
    fn lines_blanks_and_bullets() {
        let page = lines_of("  Title \n\nfirst\n  \u{2022} item one\nsecond\n\n\nlast");
        assert_eq!(page.lines, ["Title", "first", "\u{2022} item one", "second", "last"]);
        assert_eq!(page.raws, ["  Title", "first", "  \u{2022} item one", "second", "last"]);
        assert_eq!(page.blanks, [true, true, false, false, true]);
        let row = |k: usize| &page.x[k * WIDTH..(k + 1) * WIDTH];
        assert_eq!((row(2)[BULLET], row(2)[INDENT], row(2)[LOG_WORDS]), (1.0, 2.0 / 16.0, 3f64.ln()));
        assert_eq!(row(4)[POSITION], 0.8);
    }

    #[test]
    fn boilerplate_words_are_whole_words() {
        assert!(has_boilerplate_word("(comments)") && has_boilerplate_word("send by e-mail"));
        assert!(!has_boilerplate_word("homework and timeshares") && !has_boilerplate_word("e-mailing"));
    }

    #[test]
    fn malformed_trees_are_refused() {
        assert!(Trees::new(1, 0.0, vec![vec![0]], vec![vec![0.5]], vec![vec![-1.0, 1.0]]).is_ok());
        assert!(Trees::new(1, 0.0, vec![vec![0]], vec![vec![0.5]], vec![vec![-1.0]]).is_err());
        assert!(Trees::new(1, 0.0, vec![vec![25]], vec![vec![0.5]], vec![vec![-1.0, 1.0]]).is_err());
        assert!(Trees::new(0, 0.0, vec![], vec![], vec![]).is_err());
    }
}
