//! The searches that skip runs of lines the cut's line logic would pass over: indented
//! lines of an item that hold nothing it stops at, and the lines of a block scalar.

/// Whether a byte may make the line logic read a line it would otherwise pass over, seen
/// with the byte after it: a byte that may be an opener (every byte of
/// [`super::item_lines::OPENER_BYTES`], and a few
/// more that share their ranges: `#`, `$`, `(`, `)`), a line break before a line that does
/// not start with a space (or before an empty one), and a `-` or space that ends a line.
/// Written with `&` and `|` so that a block of bytes is tested without branches.
#[inline(always)]
fn stops_plain_run(byte: u8, next: u8) -> bool {
    let opener = (byte.wrapping_sub(b'!') <= b'*' - b'!')
        | (byte.wrapping_sub(b'>') <= b'@' - b'>')
        | (byte == b'[')
        | (byte == b'`')
        | (byte.wrapping_sub(b'{') <= b'|' - b'{');
    let column_0 = (byte == b'\n') & (next != b' ');
    let line_end = ((byte == b'-') | (byte == b' ')) & (next == b'\n');
    opener | column_0 | line_end
}

/// The start of the first line at or after `start` (a line's start) that the line logic
/// must read, when the lines from `start` are indented lines of an item with the items in
/// column 0, outside block scalars: every line before it starts with a space, holds no byte
/// of [`super::item_lines::OPENER_BYTES`], does not end in `-` or a space, and ends with a line break (the line
/// logic passes such a line over and only counts it). The search looks at a block of bytes
/// at a time and only finds the byte it stopped at within the block that holds it.
pub(super) fn plain_run(text: &[u8], start: usize) -> usize {
    if text.get(start) != Some(&b' ') {
        return start;
    }
    let mut at = start;
    // Each block of 32 bytes (and the byte after it) gives a flag for each byte that stops.
    let stop = loop {
        let Some(block) = text.get(at..at + 33) else {
            // The end: byte by byte, the last byte stopping (its line is read: it may not end).
            let last = text.len() - 1;
            break (at..last).find(|&i| stops_plain_run(text[i], text[i + 1]));
        };
        let mut flags = [0u8; 32];
        for (k, flag) in flags.iter_mut().enumerate() {
            *flag = u8::from(stops_plain_run(block[k], block[k + 1]));
        }
        if let Some(k) = first_flag(&flags) {
            break Some(at + k);
        }
        at += 32;
    };
    run_end(text, start, stop)
}

/// Where a run from `start` ends, given the first byte that stops it: after it when it is a
/// line break (it ends the run's last line; the next line is the one to read), else at the
/// start of its line. With none, the last line is read (it may not end with a line break).
fn run_end(text: &[u8], start: usize, stop: Option<usize>) -> usize {
    match stop {
        Some(at) if text[at] == b'\n' => at + 1,
        Some(at) => memchr::memrchr(b'\n', &text[start..at]).map_or(start, |i| start + i + 1),
        None => {
            let last = text.len() - 1;
            memchr::memrchr(b'\n', &text[start..last]).map_or(start, |i| start + i + 1)
        }
    }
}

/// The start of the first line at or after `start` (a line's start) that does not start
/// with `column` spaces or is the last line: every line before it is a line of the block
/// scalar being read whose content starts at `column` (the line logic passes such a line
/// over by its leading spaces and only counts it), and ends with a line break. Searched a
/// block of bytes at a time, as [`plain_run`].
pub(super) fn block_run(text: &[u8], start: usize, column: usize) -> usize {
    // Up to eight leading spaces are compared as one word.
    let lead_mask = u64::MAX >> (8 * 8usize.saturating_sub(column).min(7)) as u32;
    let indented = |at: usize| match text.get(at..at + 8) {
        Some(word) if column <= 8 => {
            let word = u64::from_le_bytes(word.try_into().unwrap_or_default());
            (word ^ 0x2020_2020_2020_2020) & lead_mask == 0
        }
        _ => text
            .get(at..at + column)
            .is_some_and(|lead| lead.iter().all(|b| *b == b' ')),
    };
    if column == 0 || !indented(start) {
        return start;
    }
    // Each line break found by a vector search; only the line after each is looked at.
    let last = text.len() - 1;
    let stop = memchr::memchr_iter(b'\n', &text[start..last])
        .map(|i| start + i)
        .find(|&i| !indented(i + 1));
    run_end(text, start, stop)
}

/// The first of 32 flags (0 or 1) that is set, read as four words.
fn first_flag(flags: &[u8; 32]) -> Option<usize> {
    flags
        .chunks_exact(8)
        .map(|w| u64::from_le_bytes(w.try_into().unwrap_or_default()))
        .enumerate()
        .find(|(_, word)| *word != 0)
        .map(|(w, word)| w * 8 + word.trailing_zeros() as usize / 8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_opener_stops_a_plain_run() {
        for &byte in super::super::item_lines::OPENER_BYTES {
            assert!(stops_plain_run(byte, b'x'), "{:?}", char::from(byte));
        }
        // A line break before a space, a letter after a dash: no stop.
        assert!(!stops_plain_run(b'\n', b' '));
        assert!(!stops_plain_run(b'-', b'x'));
        assert!(!stops_plain_run(b'a', b'\n'));
    }

    #[test]
    fn a_plain_run_stops_at_the_line_the_line_logic_must_read() {
        let plain = "  plain: a line of an item, long enough to fill a block\n".repeat(5);
        for stop in [
            "- kind: next item\n",
            "top: key\n",
            "\n",
            "  a: \"quoted\"\n",
            "  b: |\n",
            "  c: x {\n",
            "  d: &anchor\n",
            "  e: ends in a dash -\n",
            "  f: ends in a space \n",
            "  no line break at the end",
        ] {
            let text = format!("{plain}{stop}  after: x\n");
            assert_eq!(plain_run(text.as_bytes(), 0), plain.len(), "{stop:?}");
            // From the start of a line in the run, the same stop.
            let second = plain.find('\n').unwrap_or_default() + 1;
            assert_eq!(plain_run(text.as_bytes(), second), plain.len(), "{stop:?}");
        }
        // A line that does not start with a space is read at once.
        assert_eq!(plain_run(b"- kind: x\n  a: b\n", 0), 0);
    }

    #[test]
    fn a_block_run_stops_at_the_first_line_less_indented_than_its_content() {
        let content = "      a line of the block scalar, long enough to fill a block\n".repeat(4);
        for stop in [
            "     five spaces\n",
            "  key: value\n",
            "- kind: next item\n",
            "\n",
            "    \n",
            "      the last line, with no line break",
        ] {
            let text = format!("{content}{stop}      after\n");
            assert_eq!(block_run(text.as_bytes(), 0, 6), content.len(), "{stop:?}");
        }
        // Deeper lines and any bytes in them belong to the block scalar.
        let text = format!("{content}        \"deeper\" [x] - \n  end: x\n");
        assert_eq!(
            block_run(text.as_bytes(), 0, 6),
            text.find("  end").unwrap_or_default()
        );
        assert_eq!(block_run(b"    short\n", 0, 6), 0);
        // Content deeper than eight spaces (compared byte by byte), and exactly eight.
        for column in [8, 10, 12] {
            let lead = " ".repeat(column);
            let content = format!("{lead}a line of the block scalar, past a block\n").repeat(3);
            let text = format!("{content}{}one space less\n{lead}after\n", &lead[1..]);
            assert_eq!(
                block_run(text.as_bytes(), 0, column),
                content.len(),
                "{column}"
            );
        }
    }
}
