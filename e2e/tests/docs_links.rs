//! The documentation stands on its own: every relative link in README.md, SECURITY.md,
//! MUTANTS.md, `docs/*.md` and the READMEs next to the code resolves to a file inside the
//! repository, and a `#fragment` names a heading of the target as GitHub renders it. Links
//! with a scheme (`https:`, `mailto:`) point outside on purpose and are not followed.
//!
//! Markdown is read with `pulldown-cmark`, so a path in a code span or a code block is not
//! taken for a link, and reference-style links count like inline ones.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

fn repository_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .expect("the tests crate is a workspace member")
        .canonicalize()
        .expect("the repository root exists")
}

/// The documents a reader follows links in, relative to the repository root.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = [
        "README.md",
        "SECURITY.md",
        "MUTANTS.md",
        "fuzz/README.md",
        "webhook/README.md",
        "manifests/examples/flux/README.md",
        "examples/kustomize-krm/README.md",
        "examples/kustomize-plugin/README.md",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect();
    let mut docs: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/ exists")
        .map(|entry| entry.expect("docs/ is readable").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .map(|path| {
            path.strip_prefix(root)
                .expect("under the root")
                .to_path_buf()
        })
        .collect();
    docs.sort();
    found.extend(docs);
    found
}

/// A link as written, with the line it is on.
#[derive(Debug)]
struct Link {
    line: usize,
    target: String,
}

fn markdown_options() -> Options {
    Options::ENABLE_TABLES | Options::ENABLE_HEADING_ATTRIBUTES
}

fn links(markdown: &str) -> Vec<Link> {
    Parser::new_ext(markdown, markdown_options())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => Some(Link {
                line: markdown[..range.start].matches('\n').count() + 1,
                target: dest_url.into_string(),
            }),
            _ => None,
        })
        .collect()
}

/// The anchors GitHub gives the headings of a document: the heading's text in lower case,
/// letters, digits, `_` and `-` kept, spaces turned into `-`, everything else dropped; a
/// repeated anchor gets `-1`, `-2`, ... An explicit `{#id}` wins.
fn heading_anchors(markdown: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut current: Option<(String, Option<String>)> = None;
    for event in Parser::new_ext(markdown, markdown_options()) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                current = Some((String::new(), id.map(|id| id.into_string())));
            }
            Event::Text(text) | Event::Code(text) => {
                if let Some((heading, _)) = current.as_mut() {
                    heading.push_str(&text);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((heading, id)) = current.take() {
                    let base = id.unwrap_or_else(|| github_slug(&heading));
                    let mut anchor = base.clone();
                    let mut repeat = 0;
                    while anchors.contains(&anchor) {
                        repeat += 1;
                        anchor = format!("{base}-{repeat}");
                    }
                    anchors.insert(anchor);
                }
            }
            _ => {}
        }
    }
    anchors
}

fn github_slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c),
            _ => None,
        })
        .collect()
}

fn has_scheme(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:")
}

/// Every problem with the links of `document` (relative to `root`), one line each.
fn broken_links(root: &Path, document: &Path) -> Vec<String> {
    let path = root.join(document);
    let markdown = match fs::read_to_string(&path) {
        Ok(markdown) => markdown,
        Err(error) => return vec![format!("{}: cannot be read: {error}", document.display())],
    };
    let mut problems = Vec::new();
    for Link { line, target } in links(&markdown) {
        if has_scheme(&target) {
            continue;
        }
        let at = format!("{}:{line}: link `{target}`", document.display());
        let (file, fragment) = match target.split_once('#') {
            Some((file, fragment)) => (file, Some(fragment)),
            None => (target.as_str(), None),
        };
        if Path::new(file).is_absolute() {
            problems.push(format!(
                "{at}: an absolute path, not a path in the repository"
            ));
            continue;
        }
        let resolved = if file.is_empty() {
            path.clone()
        } else {
            path.parent().expect("a file has a folder").join(file)
        };
        // Resolve `..` by hand first: a path that climbs out of the repository is wrong even
        // when a file happens to exist there.
        if !lexically_inside(root, &resolved) {
            problems.push(format!("{at}: points outside the repository"));
            continue;
        }
        let Ok(canonical) = resolved.canonicalize() else {
            problems.push(format!("{at}: no such file in the repository"));
            continue;
        };
        if !canonical.starts_with(root) {
            problems.push(format!("{at}: points outside the repository"));
            continue;
        }
        let Some(fragment) = fragment.filter(|fragment| !fragment.is_empty()) else {
            continue;
        };
        if canonical.extension().is_none_or(|ext| ext != "md") {
            continue; // only Markdown headings have anchors worth checking
        }
        let anchors = heading_anchors(&fs::read_to_string(&canonical).unwrap_or_default());
        if !anchors.contains(fragment) {
            problems.push(format!(
                "{at}: no heading `#{fragment}` in {} (headings: {})",
                canonical.strip_prefix(root).unwrap_or(&canonical).display(),
                anchors.into_iter().collect::<Vec<_>>().join(", ")
            ));
        }
    }
    problems
}

fn lexically_inside(root: &Path, path: &Path) -> bool {
    let mut normal = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !normal.pop() {
                    return false;
                }
            }
            Component::CurDir => {}
            other => normal.push(other),
        }
    }
    normal.starts_with(root)
}

#[test]
fn every_relative_link_in_the_documentation_resolves_inside_the_repository() {
    let root = repository_root();
    let documents = documents(&root);
    assert!(
        documents.len() > 6,
        "docs/ holds the documentation: {documents:?}"
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    for document in &documents {
        checked += fs::read_to_string(root.join(document))
            .map(|markdown| links(&markdown).len())
            .unwrap_or(0);
        problems.extend(broken_links(&root, document));
    }
    assert!(
        checked > 20,
        "only {checked} links found: the link reader misses links"
    );
    assert!(
        problems.is_empty(),
        "{} broken links:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

#[test]
fn the_readme_is_short_and_the_docs_index_links_every_document_of_docs() {
    let root = repository_root();
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let lines = readme.lines().count();
    assert!(
        lines < 200,
        "README.md has {lines} lines; the details belong in docs/"
    );
    for command in ["make demo", "make test"] {
        assert!(readme.contains(command), "README.md shows `{command}`");
    }
    let targets = |text: &str, base: &str| -> BTreeSet<String> {
        links(text)
            .into_iter()
            .map(|link| {
                let target = link.target.split('#').next().unwrap_or_default();
                // docs/README.md links its neighbours by their bare names.
                match target.strip_prefix("../") {
                    Some(up) => up.to_owned(),
                    None => format!("{base}{target}"),
                }
            })
            .collect()
    };
    let from_readme = targets(&readme, "");
    for needed in [
        "docs/README.md",
        "ARCHITECTURE.md",
        "CONTRIBUTING.md",
        "docs/rules.md",
    ] {
        assert!(
            from_readme.contains(needed),
            "README.md does not link {needed}"
        );
    }
    let index = fs::read_to_string(root.join("docs/README.md")).expect("docs/README.md");
    let linked = targets(&index, "docs/");
    let unlinked: Vec<String> = documents(&root)
        .into_iter()
        .filter(|document| document.starts_with("docs"))
        .map(|document| document.display().to_string())
        .filter(|document| document != "docs/README.md" && !linked.contains(document))
        .collect();
    assert!(
        unlinked.is_empty(),
        "docs/README.md does not link {unlinked:?}"
    );
}

#[test]
fn the_checker_reports_a_missing_file_a_missing_heading_and_a_path_outside() {
    let scratch = tempfile::tempdir().expect("a temporary directory");
    let root = scratch.path().join("repo");
    fs::create_dir_all(root.join("docs")).expect("docs/");
    fs::write(scratch.path().join("outside.md"), "# Outside\n").expect("outside.md");
    fs::write(
        root.join("docs/target.md"),
        "# The rules\n\n## 1. Configuration levels\n\n### R1: dedicated (`dedicated_ingress`)\n\n## Again\n\n## Again\n",
    )
    .expect("target.md");
    let document = "\
[fine](target.md) [fine too](target.md#1-configuration-levels)
[code in a heading](target.md#r1-dedicated-dedicated_ingress) [repeated](target.md#again-1)
[own heading](#links) [web](https://example.com/missing.md) `[in code](missing.md)`

# Links

[missing file](missing.md)
[missing heading](target.md#2-what-an-ingress-becomes)
[outside](../../outside.md)
[absolute](/etc/passwd)

```
[in a code block](missing-too.md)
```
";
    fs::write(root.join("docs/links.md"), document).expect("links.md");
    let root = root.canonicalize().expect("root");
    let problems = broken_links(&root, Path::new("docs/links.md"));
    let expected = [
        "docs/links.md:7: link `missing.md`: no such file in the repository",
        "docs/links.md:8: link `target.md#2-what-an-ingress-becomes`: no heading",
        "docs/links.md:9: link `../../outside.md`: points outside the repository",
        "docs/links.md:10: link `/etc/passwd`: an absolute path",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, expected) in problems.iter().zip(expected) {
        assert!(
            problem.starts_with(expected),
            "{problem}\nexpected: {expected}"
        );
    }
}

#[test]
fn anchors_are_made_as_github_makes_them() {
    for (heading, anchor) in [
        ("1. Configuration levels", "1-configuration-levels"),
        (
            "W5: no application moves early",
            "w5-no-application-moves-early",
        ),
        (
            "(c) `helm4 plugin install ./postrender/helm-plugin`",
            "c-helm4-plugin-install-postrenderhelm-plugin",
        ),
        (
            "Let the webhook write it (`--flux-post-renderer`)",
            "let-the-webhook-write-it---flux-post-renderer",
        ),
        (
            "(d) One plugins folder for Helm 3 and Helm 4: don't",
            "d-one-plugins-folder-for-helm-3-and-helm-4-dont",
        ),
    ] {
        let anchors = heading_anchors(&format!("## {heading}\n"));
        assert_eq!(
            anchors.into_iter().collect::<Vec<_>>(),
            [anchor],
            "{heading}"
        );
    }
}
