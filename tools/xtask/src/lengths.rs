//! `function-lengths`: the longest functions of every crate's `src/` and `tests/`, measured
//! from the `fn` keyword to the closing brace, so that a function past the limit is seen in
//! review and fails `make lint`. Every `fn` with a body counts: free functions, methods, trait
//! defaults, functions nested in others, test functions in `src/` (`#[cfg(test)]` modules,
//! `tests.rs` files) and the integration tests and their helpers under `tests/`.

use std::fs;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use syn::spanned::Spanned as _;
use syn::visit::Visit;

/// One function: where it is and how many lines it spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionLength {
    pub file: PathBuf,
    /// `Type::method` for a method, the function's name otherwise.
    pub name: String,
    pub line: usize,
    pub lines: usize,
}

/// Every function with a body in the Rust files under `dir`, longest first.
pub fn functions_under(dir: &Path) -> anyhow::Result<Vec<FunctionLength>> {
    let mut files = Vec::new();
    rust_files(dir, &mut files)?;
    let mut out = Vec::new();
    for file in files {
        let text =
            fs::read_to_string(&file).with_context(|| format!("cannot read {}", file.display()))?;
        out.extend(functions_in(&text, &file)?);
    }
    out.sort_by(|a, b| (b.lines, &a.file, a.line).cmp(&(a.lines, &b.file, b.line)));
    Ok(out)
}

/// The functions of one file's text.
pub fn functions_in(text: &str, file: &Path) -> anyhow::Result<Vec<FunctionLength>> {
    let syntax =
        syn::parse_file(text).with_context(|| format!("cannot parse {}", file.display()))?;
    let mut visitor = Lengths {
        file,
        owner: Vec::new(),
        out: Vec::new(),
    };
    visitor.visit_file(&syntax);
    Ok(visitor.out)
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries = fs::read_dir(dir).with_context(|| format!("cannot list {}", dir.display()))?;
    let mut paths = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<Vec<_>, _>>()?;
    paths.sort();
    for path in paths {
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

struct Lengths<'f> {
    file: &'f Path,
    /// The type of the `impl` or the trait being read.
    owner: Vec<String>,
    out: Vec<FunctionLength>,
}

impl Lengths<'_> {
    fn push(&mut self, name: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let first = sig.fn_token.span.start().line;
        let last = block.brace_token.span.close().end().line;
        let name = match self.owner.last() {
            Some(owner) => format!("{owner}::{name}"),
            None => name.to_string(),
        };
        self.out.push(FunctionLength {
            file: self.file.to_path_buf(),
            name,
            line: first,
            lines: last + 1 - first,
        });
    }
}

impl<'ast> Visit<'ast> for Lengths<'_> {
    fn visit_item_fn(&mut self, item: &'ast syn::ItemFn) {
        self.push(&item.sig.ident, &item.sig, &item.block);
        // A function nested in this one is not a method of the `impl` around it.
        let owner = std::mem::take(&mut self.owner);
        syn::visit::visit_item_fn(self, item);
        self.owner = owner;
    }

    fn visit_impl_item_fn(&mut self, item: &'ast syn::ImplItemFn) {
        self.push(&item.sig.ident, &item.sig, &item.block);
        syn::visit::visit_impl_item_fn(self, item);
    }

    fn visit_trait_item_fn(&mut self, item: &'ast syn::TraitItemFn) {
        if let Some(block) = &item.default {
            self.push(&item.sig.ident, &item.sig, block);
        }
        syn::visit::visit_trait_item_fn(self, item);
    }

    fn visit_item_impl(&mut self, item: &'ast syn::ItemImpl) {
        let ty = &item.self_ty;
        let name = match &**ty {
            syn::Type::Path(path) => path
                .path
                .segments
                .last()
                .map_or_else(|| "impl".to_owned(), |s| s.ident.to_string()),
            _ => format!("impl@{}", ty.span().start().line),
        };
        self.owner.push(name);
        syn::visit::visit_item_impl(self, item);
        self.owner.pop();
    }

    fn visit_item_trait(&mut self, item: &'ast syn::ItemTrait) {
        self.owner.push(item.ident.to_string());
        syn::visit::visit_item_trait(self, item);
        self.owner.pop();
    }
}
