//! Where the streaming pipeline cuts a block. What the pipeline answers as a whole is tested
//! through its public functions in `tests/streaming.rs`.

use styrmin_test_support::rendered::mixed_stream;

use super::*;

/// The cut as the whole split of the block's complete lines finds it.
fn cut_by_the_whole_split(block: &[u8]) -> Option<usize> {
    let complete_lines = memchr::memrchr(b'\n', block)? + 1;
    let text = match std::str::from_utf8(&block[..complete_lines]) {
        Ok(text) => text,
        Err(e) => std::str::from_utf8(&block[..e.valid_up_to()]).ok()?,
    };
    let mut documents = documents::split(text);
    let last = documents.pop()?;
    (!documents.is_empty() && last.range.start > 0).then_some(last.range.start)
}

#[test]
fn the_cut_from_the_tail_is_the_cut_of_the_whole_split() {
    let mut streams = vec![
        mixed_stream(41),
        format!("\u{feff}# prologue\n%YAML 1.2\n{}", mixed_stream(9)),
        format!("{}...\n# only comments after an end\n", mixed_stream(9)),
        "a: 1\n...\nb: 2\n...\n# c\n---\nc: 3\n--- |\n  x\n---\n".to_owned(),
    ];
    for stream in &mut streams {
        stream.push_str("---\nlast: 1\n");
    }
    // (Text that is not UTF-8 may be cut elsewhere; the error it gives is the same,
    // see `invalid_utf8_is_reported_at_its_offset_in_the_stream`.)
    let blocks: Vec<Vec<u8>> = streams.into_iter().map(String::into_bytes).collect();
    for block in &blocks {
        for end in 0..=block.len() {
            let prefix = &block[..end];
            assert_eq!(
                last_complete_cut(prefix).map(|(cut, _)| cut),
                cut_by_the_whole_split(prefix),
                "{:?}",
                String::from_utf8_lossy(prefix)
            );
        }
    }
}
