//! A crate's modules, read from its source files, and which modules each one names.
//!
//! A module names another when its code (a `use`, `pub use` included, or a qualified path,
//! also inside a macro call) starts with `crate::`, `super::`, `self::` or one of its child
//! modules and leads into that module or an item of it. Code compiled only for tests
//! (`#[cfg(test)]`) is left out, as the crate is built without it; `mod` declarations and doc
//! links are not uses.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, bail};
use syn::visit::Visit;

/// A module's path from the crate root: `["crate", "audit", "objects"]`.
pub type ModulePath = Vec<String>;

/// One use of another module: where it is written and how.
#[derive(Clone, Debug)]
pub struct Use {
    pub file: PathBuf,
    pub written: String,
}

/// A crate's modules and the uses between them.
#[derive(Debug, Default)]
pub struct ModuleGraph {
    /// Every module, with its child modules.
    pub modules: BTreeMap<ModulePath, BTreeSet<String>>,
    /// `from -> to`, with the first use seen.
    pub edges: BTreeMap<ModulePath, BTreeMap<ModulePath, Use>>,
}

impl ModuleGraph {
    /// Reads the crate whose root file is `root` (its `lib.rs` or `main.rs`).
    pub fn read(root: &Path) -> anyhow::Result<Self> {
        let mut reader = Reader::default();
        let dir = root.parent().map(Path::to_path_buf).unwrap_or_default();
        reader.read_file(root, vec!["crate".to_owned()], &dir)?;
        let mut graph = ModuleGraph {
            modules: reader.modules,
            edges: BTreeMap::new(),
        };
        for (from, file, written) in reader.names {
            if let Some(to) = graph.resolve(&from, &written)
                && to != from
            {
                graph
                    .edges
                    .entry(from.clone())
                    .or_default()
                    .entry(to)
                    .or_insert_with(|| Use {
                        file: file.clone(),
                        written: written.join("::"),
                    });
            }
        }
        Ok(graph)
    }

    /// The module that `written`, as written in module `from`, leads into; `None` for a path
    /// into another crate (or a name brought in by a `use`, which is counted there).
    fn resolve(&self, from: &ModulePath, written: &[String]) -> Option<ModulePath> {
        let (first, rest) = written.split_first()?;
        let (mut at, mut rest) = match first.as_str() {
            "crate" => (vec!["crate".to_owned()], rest),
            "self" => (from.clone(), rest),
            "super" => {
                let mut at = from.clone();
                at.pop();
                let mut rest = rest;
                while let Some(("super", more)) = rest.split_first().map(|(s, m)| (s.as_str(), m)) {
                    at.pop();
                    rest = more;
                }
                if at.is_empty() {
                    return None;
                }
                (at, rest)
            }
            name if self.modules.get(from).is_some_and(|c| c.contains(name)) => {
                (from.clone(), written)
            }
            _ => return None,
        };
        while let Some((segment, more)) = rest.split_first() {
            if !self.modules.get(&at).is_some_and(|c| c.contains(segment)) {
                break;
            }
            at.push(segment.clone());
            rest = more;
        }
        Some(at)
    }
}

#[derive(Default)]
struct Reader {
    modules: BTreeMap<ModulePath, BTreeSet<String>>,
    /// Every path written: in which module and file.
    names: Vec<(ModulePath, PathBuf, Vec<String>)>,
}

impl Reader {
    /// Reads `file` as module `path`; its `mod x;` files are under `children_dir`.
    fn read_file(
        &mut self,
        file: &Path,
        path: ModulePath,
        children_dir: &Path,
    ) -> anyhow::Result<()> {
        let text =
            fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
        let parsed =
            syn::parse_file(&text).with_context(|| format!("cannot parse {}", file.display()))?;
        self.read_items(&parsed.items, path, file, children_dir)
    }

    fn read_items(
        &mut self,
        items: &[syn::Item],
        path: ModulePath,
        file: &Path,
        children_dir: &Path,
    ) -> anyhow::Result<()> {
        self.modules.entry(path.clone()).or_default();
        let mut names = Names::default();
        for item in items {
            if only_for_tests(item_attrs(item)) {
                continue;
            }
            let syn::Item::Mod(module) = item else {
                names.visit_item(item);
                continue;
            };
            let name = module.ident.to_string();
            if module.attrs.iter().any(|a| a.path().is_ident("path")) {
                bail!(
                    "{}: `mod {name}` has a #[path] attribute; keep modules where Rust looks for them",
                    file.display()
                );
            }
            self.modules
                .entry(path.clone())
                .or_default()
                .insert(name.clone());
            let mut child = path.clone();
            child.push(name.clone());
            let dir = children_dir.join(&name);
            match &module.content {
                Some((_, items)) => self.read_items(items, child, file, &dir)?,
                None => {
                    let flat = children_dir.join(format!("{name}.rs"));
                    let nested = dir.join("mod.rs");
                    let found = if flat.is_file() {
                        flat
                    } else if nested.is_file() {
                        nested
                    } else {
                        bail!("{}: no file for `mod {name}`", file.display());
                    };
                    self.read_file(&found, child, &dir)?;
                }
            }
        }
        for written in names.paths {
            self.names.push((path.clone(), file.to_path_buf(), written));
        }
        Ok(())
    }
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    use syn::Item;
    match item {
        Item::Const(i) => &i.attrs,
        Item::Enum(i) => &i.attrs,
        Item::ExternCrate(i) => &i.attrs,
        Item::Fn(i) => &i.attrs,
        Item::ForeignMod(i) => &i.attrs,
        Item::Impl(i) => &i.attrs,
        Item::Macro(i) => &i.attrs,
        Item::Mod(i) => &i.attrs,
        Item::Static(i) => &i.attrs,
        Item::Struct(i) => &i.attrs,
        Item::Trait(i) => &i.attrs,
        Item::TraitAlias(i) => &i.attrs,
        Item::Type(i) => &i.attrs,
        Item::Union(i) => &i.attrs,
        Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[cfg(test)]` or `#[cfg(all(test, …))]`.
fn only_for_tests(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr.meta.require_list().is_ok_and(|list| {
                let condition: String = list.tokens.to_string().split_whitespace().collect();
                condition == "test" || condition.starts_with("all(test,")
            })
    })
}

/// The paths written in some items, as segments.
#[derive(Default)]
struct Names {
    paths: Vec<Vec<String>>,
}

impl Names {
    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.push_with(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.push_with(prefix, &r.ident),
            syn::UseTree::Glob(_) => self.paths.push(prefix.clone()),
            syn::UseTree::Group(g) => {
                for tree in &g.items {
                    self.use_tree(prefix, tree);
                }
            }
        }
    }

    fn push_with(&mut self, prefix: &[String], last: &syn::Ident) {
        let mut path = prefix.to_vec();
        if last != "self" {
            path.push(last.to_string());
        }
        self.paths.push(path);
    }

    /// `a::b::c` sequences in a macro call's tokens (which syn does not parse as code).
    fn tokens(&mut self, tokens: proc_macro2::TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut colons = 0;
        for token in tokens {
            match token {
                proc_macro2::TokenTree::Group(group) => {
                    self.end_run(&mut run);
                    self.tokens(group.stream());
                }
                proc_macro2::TokenTree::Ident(ident) => {
                    if colons != 2 {
                        self.end_run(&mut run);
                    }
                    run.push(ident.to_string());
                    colons = 0;
                }
                proc_macro2::TokenTree::Punct(punct)
                    if punct.as_char() == ':' && !run.is_empty() =>
                {
                    colons += 1;
                }
                _ => {
                    self.end_run(&mut run);
                    colons = 0;
                }
            }
        }
        self.end_run(&mut run);
    }

    fn end_run(&mut self, run: &mut Vec<String>) {
        if run.len() > 1 {
            self.paths.push(std::mem::take(run));
        }
        run.clear();
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        // Nested modules are read as modules of their own; test-only items are left out.
        if !matches!(item, syn::Item::Mod(_)) && !only_for_tests(item_attrs(item)) {
            syn::visit::visit_item(self, item);
        }
    }

    fn visit_impl_item(&mut self, item: &'ast syn::ImplItem) {
        let attrs: &[syn::Attribute] = match item {
            syn::ImplItem::Const(i) => &i.attrs,
            syn::ImplItem::Fn(i) => &i.attrs,
            syn::ImplItem::Type(i) => &i.attrs,
            syn::ImplItem::Macro(i) => &i.attrs,
            _ => &[],
        };
        if !only_for_tests(attrs) {
            syn::visit::visit_impl_item(self, item);
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        self.paths
            .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }

    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {
        // `pub(crate)`, `pub(super)`: who may use an item, not a use.
    }

    fn visit_attribute(&mut self, _: &'ast syn::Attribute) {
        // Doc links and derives name no module of the crate's code.
    }
}
