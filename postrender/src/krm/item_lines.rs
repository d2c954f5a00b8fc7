//! The lines the searches of the cut stop at most often, taken without the line logic: an
//! item's `- ` line, an indented line whose only openers are a one-line quoted scalar as
//! kustomize writes it (`key: "value"`, `- "value"`), and a block scalar's header
//! (`key: |`). For such a line the line logic finds nothing and changes nothing but the item
//! that starts or the block scalar that begins; any other line is left to it. So the cut is
//! the same, only cheaper (the cut's tests compare it with the cut that reads every line).
//!
//! Kept apart from the line logic so that what it may take stays small enough to be read
//! against [`super::line_checker::LineChecker`] at a glance.

/// The bytes that may open something that runs past its line (or that the cut's checker
/// refuses): quotes, `[`, `{`, block-scalar indicators, anchors, aliases, tags, and the
/// reserved `%`, `@`, backtick and `?`.
pub(super) const OPENER_BYTES: &[u8; 13] = b"\"'[{|>&*!%@`?";

/// A line the line logic would take without a finding, outside block scalars, in `items`
/// with the items in column 0 (`line` without its line break).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Taken {
    /// An item's `- ` line.
    ItemStart,
    /// An indented line that opens nothing.
    Indented,
    /// An indented `key: |` (or `|-`, `|+`, `>`, `>-`, `>+`): a block scalar starts, its
    /// lines indented past the key's column.
    BlockHeader { parent: usize },
}

/// `line` is UTF-8 (the line logic's check of it cannot fail).
pub(super) fn take(line: &[u8]) -> Option<Taken> {
    let plain = || !ends_in_dash_or_space(line) && !holds_opener(line);
    match line {
        [b' ', ..] => {
            let (column, rest) = after_dashes(line);
            let Some((key, value)) = plain_key(rest) else {
                return plain().then_some(Taken::Indented);
            };
            match value {
                _ if key.is_empty() => {
                    // A quoted scalar alone, or plain text with no opener.
                    (quoted_to_the_end(rest) || plain()).then_some(Taken::Indented)
                }
                b"|" | b"|-" | b"|+" | b">" | b">-" | b">+" => {
                    Some(Taken::BlockHeader { parent: column })
                }
                _ => (quoted_to_the_end(value) || plain()).then_some(Taken::Indented),
            }
        }
        [b'-', b' ', ..] if plain() => Some(Taken::ItemStart),
        _ => None,
    }
}

/// A line whose last byte is a `-` or a space (the line logic reads it).
fn ends_in_dash_or_space(line: &[u8]) -> bool {
    matches!(line.last(), Some(b'-' | b' '))
}

/// Whether a line holds a byte of [`OPENER_BYTES`].
pub(super) fn holds_opener(line: &[u8]) -> bool {
    line.iter().any(|b| IS_OPENER[usize::from(*b)])
}

/// [`OPENER_BYTES`] as a table.
const IS_OPENER: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < OPENER_BYTES.len() {
        table[OPENER_BYTES[i] as usize] = true;
        i += 1;
    }
    table
};

/// The line after its spaces and any `- ` (with the spaces after each), and the column
/// where that rest starts.
fn after_dashes(line: &[u8]) -> (usize, &[u8]) {
    let mut rest = after_spaces(line);
    while let Some(after) = rest.strip_prefix(b"- ") {
        rest = after_spaces(after);
    }
    (line.len() - rest.len(), rest)
}

/// `text` as `key: value` with a plain key of the bytes Kubernetes keys use, starting with
/// a letter or digit: the key and the value (right after `: `); an empty key and the whole
/// text when it does not start with such a key; `None` when it starts with one that is not
/// followed by `: `.
fn plain_key(text: &[u8]) -> Option<(&[u8], &[u8])> {
    if !text.first().is_some_and(u8::is_ascii_alphanumeric) {
        return Some((&[], text));
    }
    let end = text.iter().position(|b| !is_plain_key_byte(*b))?;
    let (key, after) = text.split_at(end);
    Some((key, after.strip_prefix(b": ")?))
}

fn after_spaces(text: &[u8]) -> &[u8] {
    let spaces = text.iter().take_while(|b| **b == b' ').count();
    &text[spaces..]
}

/// The bytes of the keys Kubernetes objects use (`app.kubernetes.io/name`,
/// `nginx.ingress.kubernetes.io/proxy-body-size`): none opens, ends or comments anything.
fn is_plain_key_byte(byte: u8) -> bool {
    KEY_BYTES[usize::from(byte)]
}

/// [`is_plain_key_byte`] as a table (a lookup a byte).
const KEY_BYTES: [bool; 256] = {
    let mut table = [false; 256];
    let mut byte = 0;
    while byte < 256 {
        let b = byte as u8;
        table[byte] = b.is_ascii_alphanumeric() || matches!(b, b'.' | b'/' | b'-' | b'_');
        byte += 1;
    }
    table
};

/// Whether `text` is one quoted scalar, no escape and no quote inside, closing at its end.
fn quoted_to_the_end(text: &[u8]) -> bool {
    match text {
        [b'"', inside @ .., b'"'] => !inside.iter().any(|b| matches!(b, b'"' | b'\\')),
        [b'\'', inside @ .., b'\''] => !inside.contains(&b'\''),
        _ => false,
    }
}
