//! Text a client sent (a uid, a kind, a name, a parser's message that quotes the body), bounded
//! before it goes into a log line or an error answer: a client must not be able to make the
//! webhook write megabytes of log or echo megabytes back.

use std::borrow::Cow;

/// The most bytes of one client-supplied string that a log line or an error answer carries.
pub const MAX_CLIENT_TEXT_BYTES: usize = 256;

/// `text`, or its first [`MAX_CLIENT_TEXT_BYTES`] bytes (cut at a character boundary) followed
/// by a marker that says how long it was: `…[truncated, 6291456 bytes]`.
pub fn clip(text: &str) -> Cow<'_, str> {
    if text.len() <= MAX_CLIENT_TEXT_BYTES {
        return Cow::Borrowed(text);
    }
    let mut end = MAX_CLIENT_TEXT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!(
        "{}…[truncated, {} bytes]",
        &text[..end],
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
