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

/// Writes `files` (path, text) under a fresh directory: a package of its own.
fn package(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    dir
}

const MANIFEST: &str =
    "[package]\nname = \"demo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[workspace]\n";

#[test]
fn a_package_s_tests_folder_is_read_with_its_subfolders() {
    let dir = package(&[
        ("Cargo.toml", MANIFEST),
        ("src/lib.rs", "pub fn code() {}\n"),
        ("tests/it.rs", "mod support;\n#[test]\nfn a_test() {\n}\n"),
        ("tests/support/mod.rs", "pub fn helper() {\n\n}\n"),
    ]);
    let dirs = xtask::code_dirs(Some(&dir.path().join("Cargo.toml"))).unwrap();
    let labels: Vec<_> = dirs.iter().map(|(label, _)| label.as_str()).collect();
    assert_eq!(labels, ["demo", "demo tests/"]);
    let mut names = Vec::new();
    for (_, dir) in &dirs {
        names.extend(functions_under(dir).unwrap().into_iter().map(|f| f.name));
    }
    assert_eq!(names, ["code", "helper", "a_test"]);
}

#[test]
fn the_workspace_s_integration_tests_are_measured() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let dirs = xtask::code_dirs(Some(&workspace)).unwrap();
    for tests in [
        "e2e/tests",
        "webhook/tests",
        "postrender/tests",
        "tools/xtask/tests",
    ] {
        assert!(
            dirs.iter().any(|(_, dir)| dir.ends_with(tests)),
            "{tests} is not read: {dirs:?}"
        );
    }
}

#[test]
fn a_test_over_the_limit_fails_the_task() {
    let long_test = format!(
        "#[test]\nfn long_test() {{\n{}}}\n",
        "    let _ = 1;\n".repeat(5)
    );
    let dir = package(&[
        ("Cargo.toml", MANIFEST),
        ("src/lib.rs", "pub fn code() {}\n"),
        ("tests/it.rs", long_test.as_str()),
    ]);
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args([
            "function-lengths",
            "--max",
            "5",
            "--manifest-path",
            "Cargo.toml",
        ])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("demo tests/ (1 functions)"), "{stdout}");
    assert!(
        stderr.contains("      7  long_test  tests/it.rs:2"),
        "{stderr}"
    );
}
