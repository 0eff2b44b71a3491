//! Text from data made safe for a terminal: control characters (ESC, which starts
//! ANSI escape sequences such as OSC window titles or hyperlinks, BEL, backspace,
//! carriage return, the C1 controls, DEL) are written as `\u{…}` escapes, so that a
//! value can neither inject an escape sequence nor overwrite what was printed.
//! Newlines and tabs stay.

use std::borrow::Cow;

/// `text` with its control characters (but newline and tab) escaped as `\u{…}`.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_unsafe) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if is_unsafe(c) {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

fn is_unsafe(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_written_out_and_plain_text_is_kept() {
        // ESC [ 2 J clears the screen; ESC ] 0 ; … BEL sets the window title (OSC);
        // U+009B is the one-character CSI.
        assert_eq!(printable("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(printable("\u{1b}]0;owned\u{7}"), "\\u{1b}]0;owned\\u{7}");
        assert_eq!(printable("x\u{9b}31m\r\u{7f}"), "x\\u{9b}31m\\u{d}\\u{7f}");
        assert!(matches!(printable("plain, ünïcode\tand\nlines"), Cow::Borrowed("plain, ünïcode\tand\nlines")));
    }
}
