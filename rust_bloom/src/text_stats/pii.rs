//! Where the regex PII patterns of taggers/builtin/pii.py can match: the lines that hold what every
//! match of a pattern needs. The patterns never cross a newline, so running each one only over its
//! candidate lines (Python's `pattern.finditer(text, start, end)`, whose look-behinds still see the
//! text before `start`) finds exactly the matches a run over the whole text finds, at a fraction of
//! the cost: CPython's regex engine tries every position of the text, and prose has few lines with
//! an `@`, eight digits or a dotted number.
use crate::text::is_decimal;

/// Candidate windows `(start, end)` in code points, per pattern: runs of consecutive candidate
/// lines, from the first line's start to the last line's end (newline excluded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PiiWindows {
    /// Lines with an `@`.
    pub email: Vec<(u64, u64)>,
    /// Lines with at least 8 decimal digits (re's `\d`): a phone number has 8 to 15.
    pub phone: Vec<(u64, u64)>,
    /// Lines with a decimal digit, a `.` and a decimal digit in a row (`\d\.\d`).
    pub ipv4: Vec<(u64, u64)>,
    /// Lines with `::` or at least 7 colons.
    pub ipv6: Vec<(u64, u64)>,
}

/// Minimum decimal digits of a phone number (pii.py `_phone_ok`).
const PHONE_MIN_DIGITS: u32 = 8;

fn push(windows: &mut Vec<(u64, u64)>, start: u64, end: u64) {
    match windows.last_mut() {
        // The previous line was a candidate too: one window (the newline between them inside).
        Some(last) if last.1 + 1 == start => last.1 = end,
        _ => windows.push((start, end)),
    }
}

/// The candidate windows of every pattern in `text`.
pub fn pii_windows(text: &str) -> PiiWindows {
    let mut w = PiiWindows::default();
    let mut pos = 0u64; // code points
    for line in text.split('\n') {
        let start = pos;
        let (mut at, mut digits, mut colons, mut double_colon, mut dotted) = (false, 0u32, 0u32, false, false);
        // The two characters before the current one: (is a decimal digit, is '.'), and ':'.
        let (mut prev_digit, mut prev_dot_after_digit, mut prev_colon) = (false, false, false);
        if line.is_ascii() {
            for &b in line.as_bytes() {
                let digit = b.is_ascii_digit();
                at |= b == b'@';
                digits += digit as u32;
                dotted |= digit && prev_dot_after_digit;
                double_colon |= b == b':' && prev_colon;
                colons += (b == b':') as u32;
                prev_dot_after_digit = b == b'.' && prev_digit;
                prev_digit = digit;
                prev_colon = b == b':';
            }
            pos += line.len() as u64;
        } else {
            for c in line.chars() {
                let digit = is_decimal(c);
                at |= c == '@';
                digits += digit as u32;
                dotted |= digit && prev_dot_after_digit;
                double_colon |= c == ':' && prev_colon;
                colons += (c == ':') as u32;
                prev_dot_after_digit = c == '.' && prev_digit;
                prev_digit = digit;
                prev_colon = c == ':';
                pos += 1;
            }
        }
        let end = pos;
        if at {
            push(&mut w.email, start, end);
        }
        if digits >= PHONE_MIN_DIGITS {
            push(&mut w.phone, start, end);
        }
        if dotted {
            push(&mut w.ipv4, start, end);
        }
        if double_colon || colons >= 7 {
            push(&mut w.ipv6, start, end);
        }
        pos += 1; // the newline
    }
    w
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows() {
        let text = "no pii here\nmail: a@b.cc\ncall +49 30 1234567 now\nat 10.0.0.1 and\n::1 or 1:2:3:4:5:6:7:8\nend";
        let w = pii_windows(text);
        assert_eq!(w.email, vec![(12, 24)]);
        assert_eq!(w.phone, vec![(25, 48), (65, 87)]); // the last line has 9 digits too
        assert_eq!(w.ipv4, vec![(49, 64)]);
        assert_eq!(w.ipv6, vec![(65, 87)]);
        // Consecutive candidate lines make one window; offsets are code points.
        let w = pii_windows("é@x\né@y\n\né@z");
        assert_eq!(w.email, vec![(0, 7), (9, 12)]);
        // Unicode digits are re's \d too; "1.x.2" has no digit-dot-digit.
        assert_eq!(pii_windows("٣٤٥٦٧٨٩٠").phone, vec![(0, 8)]);
        assert_eq!(pii_windows("1.x.2 1. 2").ipv4, vec![]);
        assert_eq!(pii_windows("a:b:c").ipv6, vec![]);
        assert_eq!(pii_windows(""), PiiWindows::default());
    }
}
