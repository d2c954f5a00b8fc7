//! ARCHITECTURE.md names crates, folders and files in backticks; each must exist, so that the
//! map fails here when a room is moved or renamed and the map is not. And the map names every
//! room: every module of every workspace member and every integration test file has a row.
//!
//! The naming rule: a row is a table line whose first cell is one path in backticks, written
//! from the repository root, and which says something in a later cell. A module is every
//! `*.rs` file and every folder under `<member>/src/` (a folder written with a trailing `/`:
//! `webhook/src/api/`); an integration test is every `<member>/tests/*.rs` file. The members
//! are the root Cargo.toml's `members`.

use std::collections::BTreeSet;
use std::path::Path;

use styrmin_e2e::workspace_root;

/// The text outside the fenced drawings.
fn prose(text: &str) -> String {
    let mut prose = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            prose.push_str(line);
            prose.push('\n');
        }
    }
    prose
}

/// Every span in backticks, outside the fenced drawings, that is a path of the repository:
/// it has a `/` and no space, and is not a URL or a command.
fn named_paths(text: &str) -> Vec<String> {
    prose(text)
        .split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| {
            span.contains('/')
                && !span.contains(' ')
                && !span.contains("://")
                && span
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "/._-*".contains(c))
        })
        .map(str::to_owned)
        .collect()
}

/// The paths that have a row: table lines, outside the fenced drawings, whose first cell is
/// exactly one span in backticks and whose later cells are not all empty.
fn rows(text: &str) -> BTreeSet<String> {
    prose(text)
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.strip_prefix('|')?.split('|').map(str::trim).collect();
            let (first, rest) = cells.split_first()?;
            let path = first.strip_prefix('`')?.strip_suffix('`')?;
            let said = rest.iter().any(|cell| !cell.is_empty());
            (!path.is_empty() && !path.contains('`') && said).then(|| path.to_owned())
        })
        .collect()
}

/// `tools/*` stands for every folder of `tools/`.
fn exists(root: &Path, path: &str) -> bool {
    match path.strip_suffix("/*") {
        Some(folder) => root.join(folder).is_dir(),
        None => root.join(path).exists(),
    }
}

/// The workspace members of the root Cargo.toml's `members = [...]` line.
fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = manifest
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("a members line");
    members
        .split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// Every `*.rs` file and every folder under `folder` (a path from `root`), recursively, as
/// paths from `root`; a folder with a trailing `/`.
fn modules_under(root: &Path, folder: &str, found: &mut Vec<String>) {
    let entries = std::fs::read_dir(root.join(folder)).unwrap_or_else(|e| panic!("{folder}: {e}"));
    for entry in entries {
        let entry = entry.unwrap_or_else(|e| panic!("{folder}: {e}"));
        let name = entry.file_name().into_string().expect("a UTF-8 file name");
        let path = format!("{folder}/{name}");
        if entry.file_type().expect("a file type").is_dir() {
            found.push(format!("{path}/"));
            modules_under(root, &path, found);
        } else if name.ends_with(".rs") {
            found.push(path);
        }
    }
}

/// Every module of every workspace member, sorted.
fn modules(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for member in members(root) {
        modules_under(root, &format!("{member}/src"), &mut found);
    }
    found.sort();
    found
}

/// Every `<member>/tests/*.rs` file, sorted.
fn integration_tests(root: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for member in members(root) {
        let Ok(entries) = std::fs::read_dir(root.join(&member).join("tests")) else {
            continue;
        };
        for entry in entries {
            let entry = entry.expect("a tests/ entry");
            let name = entry.file_name().into_string().expect("a UTF-8 file name");
            if name.ends_with(".rs") && entry.file_type().expect("a file type").is_file() {
                found.push(format!("{member}/tests/{name}"));
            }
        }
    }
    found.sort();
    found
}

fn map(root: &Path) -> String {
    std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md")
}

#[test]
fn every_path_the_map_names_exists() {
    let root = workspace_root();
    let named = named_paths(&map(&root));
    assert!(named.len() > 30, "only {} paths found", named.len());
    let missing: Vec<_> = named.iter().filter(|p| !exists(&root, p)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist: {missing:?}"
    );
}

#[test]
fn every_crate_of_the_workspace_is_on_the_map() {
    let root = workspace_root();
    let text = map(&root);
    let members = members(&root);
    assert!(members.len() >= 5, "only {} members found", members.len());
    for member in members {
        assert!(
            text.contains(&format!("`{member}/`")),
            "ARCHITECTURE.md does not name the crate `{member}/`"
        );
    }
}

#[test]
fn every_module_of_every_crate_has_a_row() {
    let root = workspace_root();
    let rows = rows(&map(&root));
    let modules = modules(&root);
    assert!(modules.len() > 100, "only {} modules found", modules.len());
    let missing: Vec<_> = modules.iter().filter(|m| !rows.contains(*m)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md has no row for these {} modules (a table line whose first cell is \
         the path in backticks, then what it is and who calls it): {missing:#?}",
        missing.len()
    );
}

#[test]
fn every_integration_test_has_a_row() {
    let root = workspace_root();
    let rows = rows(&map(&root));
    let tests = integration_tests(&root);
    assert!(
        tests.len() > 40,
        "only {} integration tests found",
        tests.len()
    );
    let missing: Vec<_> = tests.iter().filter(|t| !rows.contains(*t)).collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md has no row for these {} integration tests (a table line whose first \
         cell is the path in backticks, then what it proves): {missing:#?}",
        missing.len()
    );
}

#[test]
fn a_path_that_is_gone_is_found() {
    let root = workspace_root();
    let named = named_paths(
        "the `postrender/src/gone.rs` room, `make test`, `a/b c`\n```\n`e2e/x.rs`\n```\n",
    );
    assert_eq!(named, ["postrender/src/gone.rs"]);
    assert!(!exists(&root, &named[0]));
}

#[test]
fn only_a_row_that_says_something_counts() {
    let rows = rows(
        "| module | what |\n|---|---|\n\
         | `a/src/x.rs` | what it is | `b` |\n\
         | `a/src/empty.rs` | | |\n\
         | `a/src/two.rs` and `a/src/three.rs` | both |\n\
         the `a/src/prose.rs` room\n\
         ```\n| `a/src/fenced.rs` | drawn |\n```\n\
         | `a/src/dir/` | a folder |\n",
    );
    assert_eq!(
        rows.into_iter().collect::<Vec<_>>(),
        ["a/src/dir/", "a/src/x.rs"]
    );
}

#[test]
fn the_modules_are_files_and_folders_under_src() {
    let root = workspace_root();
    let modules = modules(&root);
    for expected in [
        "webhook/src/main.rs",
        "webhook/src/lib.rs",
        "postrender/src/krm/",
        "postrender/src/yaml_tree/common_layout/tests.rs",
        "tools/xtask/src/main.rs",
    ] {
        assert!(
            modules.iter().any(|m| m == expected),
            "{expected} is not among the modules found"
        );
    }
    assert!(modules.iter().all(|m| m.contains("/src/")));
    assert!(!modules.iter().any(|m| m.ends_with(".json")));
}
