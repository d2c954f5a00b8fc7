//! `module-cycles` on small crates written for the test: a cycle through `use`, a qualified
//! path, a path in a macro call, `super::` and a child module is found; a test-only use, a doc link
//! and a `pub(crate)` are not uses.

#![allow(clippy::unwrap_used)] // test code: a failed unwrap is a failed test

use std::fs;

use xtask::cycles::cycles;
use xtask::modules::ModuleGraph;

/// Writes `files` (path, text) under a fresh directory and reads the crate rooted at lib.rs.
fn graph(files: &[(&str, &str)]) -> ModuleGraph {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    ModuleGraph::read(&dir.path().join("lib.rs")).unwrap()
}

fn names(cycle: &[Vec<String>]) -> Vec<String> {
    cycle.iter().map(|m| m.join("::")).collect()
}

#[test]
fn a_use_each_way_is_a_cycle() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::Thing;\npub struct Other;\n"),
        (
            "b.rs",
            "pub struct Thing;\npub fn f() -> crate::a::Other { crate::a::Other }\n",
        ),
    ]);
    assert_eq!(
        cycles(&graph).iter().map(|c| names(c)).collect::<Vec<_>>(),
        [["crate::a", "crate::b"]]
    );
}

#[test]
fn a_path_in_a_macro_call_is_a_use() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub mod inner;\n"),
        (
            "a/inner.rs",
            "pub fn h() { println!(\"{}\", crate::b::f()); }\n",
        ),
        ("b.rs", "pub fn f() -> u8 { crate::a::inner::h(); 1 }\n"),
    ]);
    assert_eq!(
        cycles(&graph).iter().map(|c| names(c)).collect::<Vec<_>>(),
        [["crate::a::inner", "crate::b"]]
    );
}

#[test]
fn a_parent_and_a_child_that_name_each_other() {
    let graph = graph(&[
        ("lib.rs", "mod a;\n"),
        ("a/mod.rs", "mod inner;\npub use inner::h;\npub fn g() {}\n"),
        ("a/inner.rs", "pub fn h() { super::g() }\n"),
    ]);
    assert_eq!(
        cycles(&graph).iter().map(|c| names(c)).collect::<Vec<_>>(),
        [["crate::a", "crate::a::inner"]]
    );
}

#[test]
fn test_code_doc_links_and_visibility_are_not_uses() {
    let graph = graph(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "use crate::b::Thing;\npub(crate) fn g() {}\n"),
        (
            "b.rs",
            "//! See [`crate::a::g`].\npub(crate) struct Thing;\n\
             #[cfg(test)]\nmod tests { use crate::a::g; }\n\
             #[cfg(test)]\nfn helper() { crate::a::g() }\n",
        ),
    ]);
    assert!(cycles(&graph).is_empty(), "{:?}", cycles(&graph));
    let a = vec!["crate".to_owned(), "a".to_owned()];
    assert_eq!(graph.edges[&a].len(), 1, "a names b");
}

#[test]
fn a_path_attribute_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("lib.rs"), "#[path = \"x.rs\"]\nmod a;\n").unwrap();
    fs::write(dir.path().join("x.rs"), "").unwrap();
    let error = ModuleGraph::read(&dir.path().join("lib.rs")).unwrap_err();
    assert!(format!("{error:#}").contains("#[path]"), "{error:#}");
}
