//! Text a client sent (a uid, a kind, a name, a parser's message that quotes the body), bounded
//! before it goes into a log line or an error answer: a client must not be able to make the
//! webhook write megabytes of log or echo megabytes back.

use std::borrow::Cow;

/// The most bytes of one client-supplied string that a log line or an error answer carries.
pub const MAX_CLIENT_TEXT_BYTES: usize = 256;

/// The longest start of `text` of at most `max` bytes that ends on a character boundary:
/// the one place a bounded text is cut (log lines, error answers, statuses, reports).
pub fn prefix_within(text: &str, max: usize) -> &str {
    if text.len() <= max {
        return text;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `text`, or, when it is longer than `max` bytes, its start followed by `marker`, the two
/// together at most `max` bytes (the marker alone, when it is longer than `max` itself).
pub fn cut_to<'a>(text: &'a str, max: usize, marker: &str) -> Cow<'a, str> {
    if text.len() <= max {
        return Cow::Borrowed(text);
    }
    let start = prefix_within(text, max.saturating_sub(marker.len()));
    Cow::Owned(format!("{start}{marker}"))
}

/// `text`, or its first [`MAX_CLIENT_TEXT_BYTES`] bytes (cut at a character boundary) followed
/// by a marker that says how long it was: `…[truncated, 6291456 bytes]`.
pub fn clip(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_CLIENT_TEXT_BYTES {
        return Cow::Borrowed(text);
    }
    Cow::Owned(format!(
        "{}…[truncated, {} bytes]",
        prefix_within(text, MAX_CLIENT_TEXT_BYTES),
        text.len()
    ))
}

/// The longest a clipped string can be: the kept bytes and the marker.
pub const MAX_CLIPPED_BYTES: usize =
    MAX_CLIENT_TEXT_BYTES + "…[truncated, 18446744073709551615 bytes]".len();

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_ends_on_a_character_and_its_marker_counts_in_the_bound() {
        assert_eq!(prefix_within("abc", 10), "abc");
        // "é" is two bytes: a cut inside it goes back before it.
        assert_eq!(prefix_within("aé", 2), "a");
        assert_eq!(cut_to("short", 10, "…"), "short");
        let cut = cut_to("éééééé", 7, "…");
        assert!(cut.len() <= 7 && cut.ends_with('…'), "{cut}");
        assert_eq!(cut, "éé…");
        // A marker longer than the bound leaves only the marker.
        assert_eq!(cut_to("abcdef", 2, "[cut]"), "[cut]");
    }

    #[test]
    fn short_text_is_kept_long_text_is_cut_and_marked() {
        assert_eq!(clip("uid-1"), "uid-1");
        let exact = "x".repeat(MAX_CLIENT_TEXT_BYTES);
        assert_eq!(clip(&exact), exact.as_str());
        let long = "y".repeat(6 * 1024 * 1024);
        let clipped = clip(&long);
        assert!(clipped.len() <= MAX_CLIPPED_BYTES, "{}", clipped.len());
        assert!(clipped.starts_with(&"y".repeat(MAX_CLIENT_TEXT_BYTES)));
        assert!(
            clipped.ends_with("…[truncated, 6291456 bytes]"),
            "{clipped}"
        );
    }

    #[test]
    fn cuts_at_a_character_boundary() {
        // 'é' is two bytes: byte 256 falls inside one.
        let text = format!("a{}", "é".repeat(300));
        let clipped = clip(&text);
        assert!(clipped.starts_with('a'));
        assert!(clipped.len() <= MAX_CLIPPED_BYTES);
        assert!(clipped.contains("…[truncated, 601 bytes]"), "{clipped}");
    }
}
