//! The check of each line of a `ResourceList` that makes cutting it by lines exact: no
//! scalar or collection may run over a line break but a block scalar, whose lines are known
//! by their indentation.

use super::error::{KrmError, shape};
use super::item_lines;

/// Whether a line's last byte but spaces is a `-`.
pub(super) fn ends_with_dash(line: &[u8]) -> bool {
    match line.last() {
        Some(b'-') => true,
        Some(b' ') => line.trim_ascii_end().ends_with(b"-"),
        _ => false,
    }
}

/// Checks, line by line, that no scalar or collection runs over a line break except block
/// scalars (`|`, `>`), whose lines are recognised by their indentation. Conservative: what
/// it accepts, a YAML parser reads the same way line by line; what it is unsure of, it refuses.
#[derive(Debug, Default)]
pub(super) struct LineChecker {
    /// In a block scalar: the indentation of its parent node, and of its content once known.
    pub(super) block: Option<(usize, Option<usize>)>,
}

impl LineChecker {
    /// Whether `line` is a line of the block scalar being read, once its content's
    /// indentation is known, by its leading spaces alone ([`Self::in_block_scalar`] says
    /// the same, and ends the block scalar when it is not).
    pub(super) fn in_block_content(&self, line: &[u8]) -> bool {
        match self.block {
            Some((_, Some(column))) => line
                .get(..column)
                .is_some_and(|lead| lead.iter().all(|b| *b == b' ')),
            _ => false,
        }
    }

    /// Whether `line` belongs to the block scalar being read (and ends it when not).
    pub(super) fn in_block_scalar(&mut self, line: &[u8]) -> bool {
        let Some((parent, content)) = self.block else {
            return false;
        };
        let indent = line.iter().take_while(|b| **b == b' ').count();
        if indent == line.len() {
            return true;
        }
        match content {
            None if indent > parent => {
                self.block = Some((parent, Some(indent)));
                true
            }
            Some(column) if indent >= column => true,
            _ => {
                self.block = None;
                false
            }
        }
    }

    /// Checks one line that is not inside a block scalar.
    pub(super) fn check(&mut self, line: &str, number: usize) -> Result<(), KrmError> {
        // Most lines hold no byte that can open a quoted scalar, a flow collection, a block
        // scalar, an anchor, an alias or a tag: nothing of theirs can run on.
        if !item_lines::holds_opener(line.as_bytes()) && !ends_with_dash(line.as_bytes()) {
            return Ok(());
        }
        let refuse = |why: &str| Err(shape(number, why.to_owned()));
        let mut column = line.len() - line.trim_start_matches(' ').len();
        let mut rest = &line[column..];
        let mut dash = None;
        // Sequence entries: `- `, possibly nested.
        while let Some(after) = rest.strip_prefix("- ") {
            dash = Some(column);
            let spaces = after.len() - after.trim_start_matches(' ').len();
            column += 2 + spaces;
            rest = &after[spaces..];
        }
        if rest == "-" {
            return refuse("a sequence entry with its value on the next line");
        }
        // `- |`: a block scalar as a sequence entry, its content indented past the `-`.
        if let (Some(dash), Some(b'|' | b'>')) = (dash, rest.as_bytes().first()) {
            return self.block_scalar(rest, dash, number);
        }
        // A key, then a value; or a value alone.
        let value = match rest.as_bytes().first() {
            None => return Ok(()),
            Some(b'#') => return Ok(()),
            Some(b'"' | b'\'') => {
                let Some(end) = quoted_end(rest) else {
                    return refuse("a quoted scalar that does not end on its line");
                };
                let after = &rest[end..];
                match after.strip_prefix(':') {
                    Some(value) if value.is_empty() || value.starts_with(' ') => {
                        value.trim_start_matches(' ')
                    }
                    _ => return finish(after, number),
                }
            }
            Some(_) => match plain_key(rest) {
                Some((key_end, value)) => {
                    if !plain_start(&rest[..key_end]) {
                        return refuse("a key this function does not read line by line");
                    }
                    value
                }
                None => {
                    // A plain scalar alone (a sequence item, or a continuation line).
                    return if plain_start(rest) {
                        Ok(())
                    } else {
                        refuse(
                            "a value that may run over several lines (a flow collection, a tag, an anchor or an alias)",
                        )
                    };
                }
            },
        };
        match value.as_bytes().first() {
            None | Some(b'#') => Ok(()),
            Some(b'"' | b'\'') => match quoted_end(value) {
                Some(end) => finish(&value[end..], number),
                None => refuse("a quoted scalar that does not end on its line"),
            },
            // The key is the content's parent node.
            Some(b'|' | b'>') => self.block_scalar(value, column, number),
            Some(b'[' | b'{') => {
                let (collection, after) = value.split_at(2.min(value.len()));
                if matches!(collection, "[]" | "{}") {
                    finish(after, number)
                } else {
                    refuse(
                        "a flow collection (other than [] and {}) that this function does not read line by line",
                    )
                }
            }
            Some(_) if plain_start(value) && plain_key(value).is_none() => Ok(()),
            Some(_) => refuse("a value this function does not read line by line"),
        }
    }
}

impl LineChecker {
    /// A block scalar's header (`|`, `>`, with `-` or `+`): its lines follow, indented past
    /// `parent`.
    fn block_scalar(&mut self, header: &str, parent: usize, number: usize) -> Result<(), KrmError> {
        let indicators = header[1..].split(" #").next().unwrap_or("").trim_end();
        if !matches!(indicators, "" | "-" | "+") {
            return Err(shape(
                number,
                "a block scalar with an indentation indicator",
            ));
        }
        self.block = Some((parent, None));
        Ok(())
    }
}

/// What may follow a complete scalar on its line: spaces, then a comment or nothing.
fn finish(after: &str, number: usize) -> Result<(), KrmError> {
    let trimmed = after.trim_start_matches(' ');
    if trimmed.is_empty() || (trimmed.starts_with('#') && trimmed.len() < after.len()) {
        Ok(())
    } else {
        Err(shape(
            number,
            "text after a quoted scalar or a flow collection",
        ))
    }
}

/// The byte after the closing quote of the quoted scalar `text` starts with, when it closes
/// on this line.
fn quoted_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let quote = *bytes.first()?;
    let mut i = 1;
    loop {
        if quote == b'"' {
            i += memchr::memchr2(b'"', b'\\', bytes.get(i..)?)?;
            if bytes[i] == b'\\' {
                i += 2;
                continue;
            }
            return Some(i + 1);
        }
        i += memchr::memchr(b'\'', bytes.get(i..)?)?;
        if bytes.get(i + 1) == Some(&b'\'') {
            i += 2;
            continue;
        }
        return Some(i + 1);
    }
}

/// Whether a plain scalar may start with this text's first character (no indicator that
/// would make it something else: quotes, flow, anchors, tags, aliases, block scalars...).
fn plain_start(text: &str) -> bool {
    match text.as_bytes().first() {
        None => true,
        Some(c) => {
            !matches!(
                c,
                b'"' | b'\''
                    | b'['
                    | b']'
                    | b'{'
                    | b'}'
                    | b','
                    | b'&'
                    | b'*'
                    | b'!'
                    | b'|'
                    | b'>'
                    | b'%'
                    | b'@'
                    | b'`'
                    | b'#'
                    | b'?'
                    | b'-'
                    | b':'
            ) || (matches!(c, b'-' | b'?' | b':')
                && text.as_bytes().get(1).is_some_and(|n| *n != b' '))
        }
    }
}

/// For a line of plain text: where its key ends and its value (after `: ` and spaces), when
/// it is `key: value` (a comment ` #` before any `: ` means it is not).
fn plain_key(text: &str) -> Option<(usize, &str)> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(i) = memchr::memchr(b':', &bytes[from..]).map(|i| i + from) {
        if bytes.get(i + 1).is_none_or(|n| *n == b' ') {
            if memchr::memchr_iter(b'#', &bytes[..i]).any(|j| j > 0 && bytes[j - 1] == b' ') {
                return None;
            }
            return Some((i, text[i + 1..].trim_start_matches(' ')));
        }
        from = i + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checker_accepts_what_kustomize_writes_and_refuses_the_rest() {
        let ok = |line: &str| LineChecker::default().check(line, 1).is_ok();
        for line in [
            "  name: web",
            "  - host: a.example.com",
            "    a: \"off\"",
            "    a: 'it''s'",
            "    \"8080\": http",
            "  emptyDir: {}",
            "  args: []",
            "  url: http://x:80/a # c",
            "  b: |",
            "    - |",
            "- - a",
        ] {
            assert!(ok(line), "{line}");
        }
        for line in [
            "    a: \"one",
            "    a: 'one",
            "    a: [x, y]",
            "    a: {x: 1}",
            "    a: &x b",
            "    a: *x",
            "    a: !!str b",
            "    \"one",
            "    a: |2",
            "  -",
        ] {
            assert!(!ok(line), "{line}");
        }
    }
}
