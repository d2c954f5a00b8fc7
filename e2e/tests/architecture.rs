//! ARCHITECTURE.md names crates, folders and files in backticks; each must exist, so that the
//! map fails here when a room is moved or renamed and the map is not.

use std::path::Path;

use styrmin_e2e::workspace_root;

/// Every span in backticks, outside the fenced drawings, that is a path of the repository:
/// it has a `/` and no space, and is not a URL or a command.
fn named_paths(text: &str) -> Vec<String> {
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

/// `tools/*` stands for every folder of `tools/`.
fn exists(root: &Path, path: &str) -> bool {
    match path.strip_suffix("/*") {
        Some(folder) => root.join(folder).is_dir(),
        None => root.join(path).exists(),
    }
}

#[test]
fn every_path_the_map_names_exists() {
    let root = workspace_root();
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let named = named_paths(&text);
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
    let text = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("Cargo.toml");
    let members = manifest
        .lines()
        .find(|l| l.starts_with("members"))
        .expect("a members line");
    for member in members.split('"').skip(1).step_by(2) {
        assert!(
            text.contains(&format!("`{member}/`")),
            "ARCHITECTURE.md does not name the crate `{member}/`"
        );
    }
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
