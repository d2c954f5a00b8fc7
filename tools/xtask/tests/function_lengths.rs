//! `function-lengths` on source written for the test: every kind of function is found, named
//! by its type when it is a method, and measured from `fn` to its closing brace.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::path::Path;

use xtask::lengths::{functions_in, functions_under};

fn lengths(text: &str) -> Vec<(String, usize, usize)> {
    functions_in(text, Path::new("lib.rs"))
        .unwrap()
        .into_iter()
        .map(|f| (f.name, f.line, f.lines))
        .collect()
}

#[test]
fn every_function_with_a_body_is_measured_from_fn_to_its_brace() {
    let text = "\
/// A doc comment is not counted.
#[inline]
pub fn free(
    a: u8,
) -> u8 {
    fn nested() {}
    a
}

struct Thing;

impl Thing {
    fn method(&self) {
        let _ = 1;
    }
}

trait Named {
    fn required(&self);
    fn provided(&self) {}
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_test() {
        assert!(true);
    }
}
";
    assert_eq!(
        lengths(text),
        [
            ("free".to_owned(), 3, 6),
            ("nested".to_owned(), 6, 1),
            ("Thing::method".to_owned(), 13, 3),
            ("Named::provided".to_owned(), 20, 1),
            ("a_test".to_owned(), 26, 3),
        ]
    );
}

#[test]
fn a_folder_is_read_whole_and_listed_longest_first() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("a")).unwrap();
    std::fs::write(dir.path().join("lib.rs"), "fn short() {}\n").unwrap();
    std::fs::write(dir.path().join("a/deep.rs"), "fn long() {\n\n\n}\n").unwrap();
    std::fs::write(dir.path().join("notes.txt"), "fn not_rust() {}\n").unwrap();
    let found = functions_under(dir.path()).unwrap();
    let names: Vec<_> = found.iter().map(|f| (f.name.as_str(), f.lines)).collect();
    assert_eq!(names, [("long", 4), ("short", 1)]);
    assert!(found[0].file.ends_with("a/deep.rs"));
}

#[test]
fn a_file_that_does_not_parse_is_an_error_naming_it() {
    let error = functions_in("fn broken( {", Path::new("src/broken.rs")).unwrap_err();
    assert!(format!("{error:#}").contains("src/broken.rs"), "{error:#}");
}
