//! Reading and rewriting the two class fields of an Ingress, by splicing bytes.
//!
//! Only the bytes of `spec.ingressClassName` and of the `kubernetes.io/ingress.class`
//! annotation change (plus the lines that must be added to hold them); every other byte
//! of the document stays where it was, so a user's diff shows exactly what changed.

use std::ops::Range;
use std::sync::Arc;

use styrmin_ingress_rules::{CLASS_ANNOTATION, ClassFields};

use crate::yaml_tree::{Node, NodeValue, ScalarTag};

/// Why an Ingress could not be read or rewritten. Each names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EditError {
    #[error("{field} must be {expected}")]
    WrongType {
        field: String,
        expected: &'static str,
    },
    #[error("{field} appears more than once")]
    DuplicateKey { field: String },
    #[error(
        "{field} uses a YAML merge key (`<<`), which styrmin-postrender does not expand; write the keys out"
    )]
    MergeKey { field: String },
    #[error(
        "{field} is a YAML alias or defines an anchor that other nodes may share; styrmin-postrender does not edit shared nodes"
    )]
    SharedNode { field: String },
    #[error("{field} has the tag {tag}, which Go's YAML readers may convert or refuse")]
    Tagged { field: String, tag: String },
    #[error("{field} is laid out in a way styrmin-postrender cannot edit in place ({why})")]
    Layout { field: String, why: &'static str },
}

pub const CLASS_NAME_PATH: [&str; 2] = ["spec", "ingressClassName"];
pub const CLASS_ANNOTATION_PATH: [&str; 3] = ["metadata", "annotations", CLASS_ANNOTATION];

/// One replacement of a byte range of the document. The text is shared: the Ingresses of a
/// chart mostly get the same edits (the same class, at the same indentation), and a large
/// stream or `List` keeps one text for all of them rather than one each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edit {
    pub range: Range<usize>,
    pub text: Arc<str>,
}

/// `edit` with its text shared with an equal text of an edit kept shortly before on this
/// thread (the last few distinct texts are remembered): what keeps a `List` of 20,000
/// Ingresses from holding 40,000 copies of the same two texts until it is written.
pub fn with_shared_text(mut edit: Edit) -> Edit {
    const REMEMBERED: usize = 8;
    thread_local! {
        static RECENT: std::cell::RefCell<Vec<Arc<str>>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    RECENT.with_borrow_mut(
        |recent| match recent.iter().find(|text| **text == edit.text) {
            Some(text) => edit.text = Arc::clone(text),
            None => {
                if recent.len() == REMEMBERED {
                    recent.remove(0);
                }
                recent.push(Arc::clone(&edit.text));
            }
        },
    );
    edit
}

/// The class fields of an Ingress node. An explicit `null` counts as not there.
pub fn read_class_fields(ingress: &Node<'_>) -> Result<ClassFields, EditError> {
    Ok(ClassFields {
        ingress_class_name: read_string(ingress, &CLASS_NAME_PATH)?,
        class_annotation: read_string(ingress, &CLASS_ANNOTATION_PATH)?,
    })
}

fn read_string(root: &Node<'_>, path: &[&str]) -> Result<Option<String>, EditError> {
    let mut node = root;
    for (depth, key) in path.iter().enumerate() {
        let field = || dotted(&path[..=depth]);
        let Some((_, next)) = child(root, node, key, &path[..depth])? else {
            return Ok(None);
        };
        if matches!(next.value, NodeValue::Alias(_)) {
            return Err(EditError::SharedNode { field: field() });
        }
        if next.is_null() {
            return Ok(None);
        }
        node = next;
    }
    match &node.value {
        NodeValue::Scalar {
            tag: ScalarTag::Binary | ScalarTag::Other(_),
            ..
        } => Err(EditError::Tagged {
            field: dotted(path),
            tag: match &node.value {
                NodeValue::Scalar {
                    tag: ScalarTag::Other(t),
                    ..
                } => t.clone(),
                _ => "!!binary".to_owned(),
            },
        }),
        // A local tag (`!custom nginx`) is a string to both readers.
        NodeValue::Scalar { text, .. } => Ok(Some(text.to_string())),
        _ => Err(EditError::WrongType {
            field: dotted(path),
            expected: "a string",
        }),
    }
}

/// The entry of `key` in the mapping `node` (whose path is `at`, inside the Ingress
/// `scope`), read as Go reads keys: an alias key stands for the scalar it refers to, a
/// local tag is ignored, and a merge key (`<<`) counts only when it brings `key` in.
/// Layouts whose meaning this editor would misread are refused.
fn child<'n, 'a>(
    scope: &Node<'_>,
    node: &'n Node<'a>,
    key: &str,
    at: &[&str],
) -> Result<Option<&'n (Node<'a>, Node<'a>)>, EditError> {
    let Some(entries) = node.entries() else {
        let field = if at.is_empty() {
            "the Ingress".to_owned()
        } else {
            dotted(at)
        };
        return Err(EditError::WrongType {
            field,
            expected: "a mapping",
        });
    };
    let mut anchors = None;
    let mut found = None;
    let mut merged = false;
    for entry in entries {
        let (k, v) = entry;
        let k = match &k.value {
            NodeValue::Alias(_) => {
                let table = anchors.get_or_insert_with(|| crate::yaml_tree::anchors(scope));
                resolve(table, k).ok_or_else(|| EditError::SharedNode {
                    field: format!("a key of {}", field_or_root(at)),
                })?
            }
            _ => k,
        };
        // A key Go reads differently from its text (a tag that converts it) could name a
        // class field that this editor would miss.
        let key_text = match &k.value {
            NodeValue::Scalar {
                tag: ScalarTag::Binary | ScalarTag::Other(_),
                ..
            } => {
                return Err(EditError::Tagged {
                    field: format!("a key of {}", field_or_root(at)),
                    tag: "other than !!str".to_owned(),
                });
            }
            NodeValue::Scalar { .. } => k.as_str(),
            _ => None,
        };
        if key_text == Some("<<") && k.is_plain() {
            let table = anchors.get_or_insert_with(|| crate::yaml_tree::anchors(scope));
            // Before an explicit entry of the key, a merge key is overridden by it in v2
            // and v3 alike; after one, v2 lets it override.
            if merges_key(table, v, key, 0)? {
                if found.is_some() {
                    return Err(EditError::MergeKey {
                        field: field_or_root(at),
                    });
                }
                merged = true;
            }
            continue;
        }
        if key_text == Some(key) {
            if found.is_some() {
                return Err(EditError::DuplicateKey {
                    field: dotted(&[at, &[key]].concat()),
                });
            }
            found = Some(entry);
        }
    }
    if merged && found.is_none() {
        return Err(EditError::MergeKey {
            field: field_or_root(at),
        });
    }
    Ok(found)
}

type AnchorTable<'n, 'a> = std::collections::HashMap<usize, &'n Node<'a>>;

/// The node an alias refers to, when its anchor is inside the Ingress.
fn resolve<'n, 'a>(table: &AnchorTable<'n, 'a>, node: &'n Node<'a>) -> Option<&'n Node<'a>> {
    match node.value {
        NodeValue::Alias(id) => table.get(&id).copied(),
        _ => Some(node),
    }
}

/// Whether the value of a merge key brings `key` in (directly or through nested merges).
/// A source this editor cannot follow (an alias to outside the Ingress) counts as yes.
fn merges_key(
    table: &AnchorTable<'_, '_>,
    merged: &Node<'_>,
    key: &str,
    depth: usize,
) -> Result<bool, EditError> {
    let Some(merged) = resolve(table, merged) else {
        return Ok(true);
    };
    if depth > 16 {
        return Ok(true);
    }
    let sources: Vec<&Node<'_>> = match &merged.value {
        NodeValue::Sequence { items, .. } => items.iter().collect(),
        _ => vec![merged],
    };
    for source in sources {
        let Some(source) = resolve(table, source) else {
            return Ok(true);
        };
        let Some(entries) = source.entries() else {
            continue;
        };
        for (k, v) in entries {
            let Some(k) = resolve(table, k) else {
                return Ok(true);
            };
            match k.as_str() {
                Some("<<") if merges_key(table, v, key, depth + 1)? => return Ok(true),
                Some(text) if text == key => return Ok(true),
                _ => {}
            }
        }
    }
    Ok(false)
}

fn field_or_root(at: &[&str]) -> String {
    if at.is_empty() {
        "the Ingress".to_owned()
    } else {
        dotted(at)
    }
}

fn dotted(path: &[&str]) -> String {
    path.iter()
        .map(|p| {
            if p.contains('.') || p.contains('/') {
                format!("[{p}]")
            } else {
                (*p).to_owned()
            }
        })
        .fold(String::new(), |mut acc, p| {
            if !acc.is_empty() && !p.starts_with('[') {
                acc.push('.');
            }
            acc.push_str(&p);
            acc
        })
}

/// A YAML double-quoted scalar: a class can be `on`, `no` or `123`, which Go's YAML
/// readers (Helm, kubectl) would take for a boolean or a number if written plain. The
/// same function writes the class into the FluxCD patch, so both spell it alike.
pub use styrmin_ingress_rules::double_quoted as quoted;

/// Whether a scalar node already holds `value` as a string for every YAML reader: quoted,
/// or plain and unambiguous (not a YAML 1.1 boolean, null or number).
fn holds_string(node: &Node<'_>, value: &str) -> bool {
    match &node.value {
        NodeValue::Scalar {
            text,
            style,
            tag: ScalarTag::None,
        } if text == value => match style {
            granit_parser::ScalarStyle::Plain => plain_is_unambiguous(value),
            granit_parser::ScalarStyle::SingleQuoted | granit_parser::ScalarStyle::DoubleQuoted => {
                true
            }
            _ => false,
        },
        _ => false,
    }
}

fn plain_is_unambiguous(value: &str) -> bool {
    let mut chars = value.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "y" | "yes" | "n" | "no" | "true" | "false" | "on" | "off" | "null"
        )
}

/// Plans the edits that give `ingress` (a node of `text`) the class fields `desired`.
pub fn plan(text: &str, ingress: &Node<'_>, desired: &ClassFields) -> Result<Vec<Edit>, EditError> {
    let editor = Editor::new(text, ingress);
    let mut edits = Vec::new();
    match &desired.ingress_class_name {
        Some(class) => editor.set(ingress, None, &CLASS_NAME_PATH, 0, class, &mut edits)?,
        None => editor.remove(ingress, None, &CLASS_NAME_PATH, 0, &mut edits)?,
    }
    match &desired.class_annotation {
        Some(class) => editor.set(ingress, None, &CLASS_ANNOTATION_PATH, 0, class, &mut edits)?,
        None => editor.remove(ingress, None, &CLASS_ANNOTATION_PATH, 0, &mut edits)?,
    }
    Ok(edits)
}

/// The editor of one Ingress: byte-level facts about the document being edited (its text,
/// line break and indentation step), and the edits that follow from them.
struct Editor<'t, 's> {
    text: &'t str,
    /// The Ingress: aliases in it are resolved against its anchors.
    scope: &'s Node<'s>,
    newline: &'static str,
    /// How far a nested block mapping is indented past its parent key, as the document does it.
    step: usize,
}

impl<'t, 's> Editor<'t, 's> {
    fn new(text: &'t str, ingress: &'s Node<'s>) -> Self {
        // The Ingress's own line break: CRLF, LF, or an old Mac's CR alone. Only its own
        // bytes are looked at, so that the Ingresses of a long List cost linear time.
        let own = &text[ingress.span.start.min(text.len())..ingress.span.end.min(text.len())];
        let newline = match memchr::memchr2(b'\r', b'\n', own.as_bytes()) {
            Some(i) if own.as_bytes()[i] == b'\r' && own.as_bytes().get(i + 1) == Some(&b'\n') => {
                "\r\n"
            }
            Some(i) if own.as_bytes()[i] == b'\r' => "\r",
            _ => "\n",
        };
        let step = ingress
            .entries()
            .into_iter()
            .flatten()
            .find_map(|(k, v)| match &v.value {
                NodeValue::Mapping {
                    flow: false,
                    entries,
                } => entries
                    .first()
                    .and_then(|(ck, _)| ck.column.checked_sub(k.column))
                    .filter(|s| *s > 0),
                _ => None,
            })
            .unwrap_or(2);
        Editor {
            text,
            scope: ingress,
            newline,
            step,
        }
    }

    /// Sets `path[depth..]` under `mapping` to the string `value`. `parent` is the entry
    /// (key, mapping) that holds `mapping`, if any.
    fn set(
        &self,
        mapping: &Node<'_>,
        holder: Option<&(Node<'_>, Node<'_>)>,
        path: &[&str],
        depth: usize,
        value: &str,
        edits: &mut Vec<Edit>,
    ) -> Result<(), EditError> {
        let _ = holder;
        let key = path[depth];
        let field = || dotted(&path[..=depth]);
        let last = depth + 1 == path.len();
        let Some(entry) = self.entry(mapping, &path[..depth], key)? else {
            self.unshared(mapping, &path[..depth])?;
            edits.push(self.insert(mapping, &path[depth..], value, &field)?);
            return Ok(());
        };
        let (k, v) = entry;
        if matches!(v.value, NodeValue::Alias(_)) || v.anchored {
            return Err(EditError::SharedNode { field: field() });
        }
        if last {
            if !holds_string(v, value) {
                if !matches!(v.value, NodeValue::Scalar { .. }) && !v.is_flow() {
                    return Err(EditError::WrongType {
                        field: field(),
                        expected: "a string",
                    });
                }
                // An empty (null) value is an empty range right after the `:`, which
                // needs a space before the new value (`key:"v"` is not a mapping entry).
                let range = self.value_range(k, v)?;
                let lead = if range.is_empty() { " " } else { "" };
                edits.push(Edit {
                    range,
                    text: format!("{lead}{}", quoted(value)).into(),
                });
            }
            return Ok(());
        }
        match &v.value {
            NodeValue::Mapping { entries, .. } if !entries.is_empty() => {
                self.set(v, Some(entry), path, depth + 1, value, edits)
            }
            NodeValue::Mapping { .. } => {
                edits.push(self.replace_with_nested(mapping, k, v, &path[depth + 1..], value)?);
                Ok(())
            }
            _ if v.is_null() => {
                edits.push(self.replace_with_nested(mapping, k, v, &path[depth + 1..], value)?);
                Ok(())
            }
            _ => Err(EditError::WrongType {
                field: field(),
                expected: "a mapping",
            }),
        }
    }

    /// Removes `path[depth..]` under `mapping` where it exists.
    fn remove(
        &self,
        mapping: &Node<'_>,
        holder: Option<(&Node<'_>, &Node<'_>, &Node<'_>)>,
        path: &[&str],
        depth: usize,
        edits: &mut Vec<Edit>,
    ) -> Result<(), EditError> {
        let key = path[depth];
        let field = || dotted(&path[..=depth]);
        let Some(entry) = self.entry(mapping, &path[..depth], key)? else {
            return Ok(());
        };
        let (k, v) = entry;
        if matches!(v.value, NodeValue::Alias(_)) || v.anchored {
            return Err(EditError::SharedNode { field: field() });
        }
        if depth + 1 < path.len() {
            return match &v.value {
                NodeValue::Mapping { .. } => {
                    self.remove(v, Some((mapping, k, v)), path, depth + 1, edits)
                }
                _ if v.is_null() => Ok(()),
                _ => Err(EditError::WrongType {
                    field: field(),
                    expected: "a mapping",
                }),
            };
        }
        self.unshared(mapping, &path[..depth])?;
        // Removing the entry removes its key: a key an alias refers to is shared.
        if k.anchored {
            return Err(EditError::SharedNode { field: field() });
        }
        let entries = mapping.entries().unwrap_or_default();
        let index = entries
            .iter()
            .position(|e| std::ptr::eq(e, entry))
            .unwrap_or_default();
        if entries.len() == 1 {
            // The mapping would be left with nothing, which YAML would read as null:
            // make it an empty mapping instead.
            return match holder {
                Some((grandparent, hk, hv)) => {
                    edits.push(self.replace_value(grandparent, hk, hv, "{}")?);
                    Ok(())
                }
                None => Err(EditError::Layout {
                    field: field(),
                    why: "it is the Ingress's only key",
                }),
            };
        }
        edits.push(self.remove_entry(mapping, index, &field)?);
        Ok(())
    }

    fn entry<'n, 'a>(
        &self,
        mapping: &'n Node<'a>,
        at: &[&str],
        key: &str,
    ) -> Result<Option<&'n (Node<'a>, Node<'a>)>, EditError> {
        // `child` checks the mapping's shape (merge keys, duplicates) and finds the entry.
        child(self.scope, mapping, key, at)
    }

    fn unshared(&self, mapping: &Node<'_>, at: &[&str]) -> Result<(), EditError> {
        if mapping.anchored {
            return Err(EditError::SharedNode {
                field: field_or_root(at),
            });
        }
        Ok(())
    }

    // --- byte positions -------------------------------------------------------------

    fn line_start(&self, pos: usize) -> usize {
        self.text[..pos].rfind(['\n', '\r']).map_or(0, |i| i + 1)
    }

    /// Only indentation stands before `pos` on its line.
    fn leads_line(&self, pos: usize) -> bool {
        self.text[self.line_start(pos)..pos]
            .chars()
            .all(|c| c == ' ' || c == '\t' || c == '\u{feff}')
    }

    /// Where the entry of `key` starts: at the `?` of an explicit key (`? key` / `: value`),
    /// else at the key.
    fn entry_start(&self, key: &Node<'_>) -> usize {
        let start = key.start_with_tag.min(key.span.start);
        let before = &self.text[self.line_start(start)..start];
        let trimmed = before.trim_end_matches([' ', '\t']);
        // Before the `?`: indentation, or the indicators of the entry or item that holds
        // this mapping (`: ? key`, `- ? key`).
        match trimmed.strip_suffix('?') {
            Some(indent) if indent.chars().all(|c| matches!(c, ' ' | ':' | '-' | '?')) => {
                self.line_start(start) + indent.len()
            }
            _ => start,
        }
    }

    /// The column (in characters) where the entry of `key` starts.
    fn entry_column(&self, key: &Node<'_>) -> usize {
        let start = self.entry_start(key);
        self.text[self.line_start(start)..start].chars().count()
    }

    /// The position after the end of the line that holds `pos` (after `\r\n`, `\r` or `\n`).
    fn after_line(&self, pos: usize) -> usize {
        match self.text[pos..].find(['\n', '\r']) {
            None => self.text.len(),
            Some(i) if self.text[pos + i..].starts_with("\r\n") => pos + i + 2,
            Some(i) => pos + i + 1,
        }
    }

    /// Where the `:` after a mapping key is: on the key's line, or for an explicit key
    /// (`? key`), at the start of a later line, past blank and comment lines.
    fn colon_after(&self, key: &Node<'_>, field: &str) -> Result<usize, EditError> {
        let rest = &self.text[key.span.end..];
        let explicit = self.entry_start(key) != key.start_with_tag.min(key.span.start);
        let mut offset = rest
            .find(|c: char| c != ' ' && c != '\t')
            .filter(|&i| rest[i..].starts_with(':'));
        if offset.is_none() && explicit {
            let mut at = 0;
            while let Some(i) = rest[at..].find(|c: char| !matches!(c, ' ' | '\t' | '\n' | '\r')) {
                let i = at + i;
                if rest[i..].starts_with('#') {
                    at = rest[i..].find(['\n', '\r']).map_or(rest.len(), |j| i + j);
                    continue;
                }
                offset = rest[i..].starts_with(':').then_some(i);
                break;
            }
        }
        offset
            .map(|i| key.span.end + i)
            .ok_or_else(|| EditError::Layout {
                field: field.to_owned(),
                why: "no `:` after the key",
            })
    }

    /// The bytes of a value as written after its key: its tag, block indicator or quotes
    /// included; for a block scalar, up to but not including its last line break.
    fn value_range(&self, key: &Node<'_>, value: &Node<'_>) -> Result<Range<usize>, EditError> {
        let field = key.as_str().unwrap_or("value");
        let colon = self.colon_after(key, field)?;
        if value.span.is_empty() {
            // An empty (null) value: the parser puts it at the key; it belongs after the `:`.
            return Ok(colon + 1..colon + 1);
        }
        let after_colon = &self.text[colon + 1..];
        let first = after_colon
            .find(|c: char| c != ' ' && c != '\t')
            .map_or(self.text.len(), |i| colon + 1 + i);
        let same_line = !matches!(
            self.text.as_bytes().get(first),
            None | Some(b'\n' | b'\r' | b'#')
        );
        let start = if same_line {
            first.min(value.start_with_tag)
        } else {
            value.start_with_tag
        };
        let mut end = value.span.end;
        if value.is_block_scalar() && self.text[..end].ends_with(['\n', '\r']) {
            end -= if self.text[..end].ends_with("\r\n") {
                2
            } else {
                1
            };
        }
        Ok(start..end)
    }

    /// The end of a block mapping entry whose value is `value`: the end of its last line.
    fn entry_end(&self, value: &Node<'_>) -> usize {
        let end = value.span.end;
        if end == 0 || self.text[..end].ends_with(['\n', '\r']) {
            end
        } else {
            self.after_line(end)
        }
    }

    fn remove_entry(
        &self,
        mapping: &Node<'_>,
        index: usize,
        // Named only in an error: most Ingresses never need the name.
        field: &dyn Fn() -> String,
    ) -> Result<Edit, EditError> {
        let entries = mapping.entries().unwrap_or_default();
        let (k, v) = &entries[index];
        let range = if mapping.is_flow() {
            match (
                entries.get(index + 1),
                index.checked_sub(1).and_then(|i| entries.get(i)),
            ) {
                (Some((next, _)), _) => k.span.start..next.span.start,
                (None, Some((_, previous))) => previous.span.end..v.span.end.max(k.span.end),
                (None, None) => k.span.start..v.span.end.max(k.span.end),
            }
        } else if self.leads_line(self.entry_start(k)) {
            self.line_start(self.entry_start(k))..self.entry_end(v)
        } else if let Some((next, _)) = entries.get(index + 1) {
            // `- key: value` starts an item: the next key takes its place on that line.
            k.span.start..next.span.start
        } else {
            return Err(EditError::Layout {
                field: field(),
                why: "it shares its line with another node",
            });
        };
        Ok(Edit {
            range,
            text: String::new().into(),
        })
    }

    /// Inserts `path = value` (creating the nested mappings of `path`) into `mapping`.
    fn insert(
        &self,
        mapping: &Node<'_>,
        path: &[&str],
        value: &str,
        field: &dyn Fn() -> String,
    ) -> Result<Edit, EditError> {
        let entries = mapping.entries().unwrap_or_default();
        if mapping.is_flow() {
            let pos = mapping.span.start + 1;
            let sep = if entries.is_empty() { "" } else { ", " };
            return Ok(Edit {
                range: pos..pos,
                text: format!("{}{sep}", flow_entry(path, value)).into(),
            });
        }
        let Some((first_key, first_value)) = entries.first() else {
            return Err(EditError::Layout {
                field: field(),
                why: "an empty block mapping",
            });
        };
        let lines = self.block_lines(path, value, self.entry_column(first_key));
        if self.leads_line(self.entry_start(first_key)) {
            let pos = self.line_start(self.entry_start(first_key));
            return Ok(Edit {
                range: pos..pos,
                text: lines.into(),
            });
        }
        // The first key follows `- ` on its line: add the new entry after the first one.
        let pos = self.entry_end(first_value);
        let lead = if self.text[..pos].ends_with(['\n', '\r']) {
            ""
        } else {
            self.newline
        };
        Ok(Edit {
            range: pos..pos,
            text: format!("{lead}{lines}").into(),
        })
    }

    /// Replaces a null or empty-mapping value with a mapping that holds `path = value`.
    fn replace_with_nested(
        &self,
        holder: &Node<'_>,
        key: &Node<'_>,
        value: &Node<'_>,
        path: &[&str],
        class: &str,
    ) -> Result<Edit, EditError> {
        if holder.is_flow() {
            let range = self.value_range(key, value)?;
            let lead = if range.is_empty() { " " } else { "" };
            return Ok(Edit {
                range,
                text: format!("{lead}{{{}}}", flow_entry(path, class)).into(),
            });
        }
        let field = key.as_str().unwrap_or("value");
        let colon = self.colon_after(key, field)?;
        let end = if value.span.is_empty() {
            colon + 1
        } else {
            self.value_range(key, value)?.end
        };
        let lines = self.block_lines(path, class, self.entry_column(key) + self.step);
        let lines = lines.strip_suffix(self.newline).unwrap_or(&lines);
        // From the `:` on, which for an explicit key (`? key`) is on a later line.
        Ok(Edit {
            range: colon..end,
            text: format!(":{}{lines}", self.newline).into(),
        })
    }

    /// Replaces the value of `key` in `holder` with the flow text `replacement`.
    fn replace_value(
        &self,
        holder: &Node<'_>,
        key: &Node<'_>,
        value: &Node<'_>,
        replacement: &str,
    ) -> Result<Edit, EditError> {
        if !holder.is_flow()
            && matches!(
                value.value,
                NodeValue::Mapping { flow: false, .. } | NodeValue::Sequence { flow: false, .. }
            )
        {
            let end = self.entry_end(value);
            let colon = self.colon_after(key, key.as_str().unwrap_or("value"))?;
            return Ok(Edit {
                range: colon..end,
                text: format!(": {replacement}{}", self.newline).into(),
            });
        }
        Ok(Edit {
            range: self.value_range(key, value)?,
            text: replacement.to_owned().into(),
        })
    }

    /// `path = value` as block lines, the first key at `column`.
    fn block_lines(&self, path: &[&str], value: &str, column: usize) -> String {
        let value = quoted(value);
        let mut out = String::with_capacity(
            path.iter()
                .enumerate()
                .map(|(depth, key)| column + depth * self.step + key.len() + 4)
                .sum::<usize>()
                + value.len(),
        );
        for (depth, key) in path.iter().enumerate() {
            out.extend(std::iter::repeat_n(' ', column + depth * self.step));
            out.push_str(key);
            out.push(':');
            if depth + 1 == path.len() {
                out.push(' ');
                out.push_str(&value);
            }
            out.push_str(self.newline);
        }
        out
    }
}

/// `path = value` as one flow entry: `a: {b: "v"}`.
fn flow_entry(path: &[&str], value: &str) -> String {
    match path.split_first() {
        Some((key, [])) => format!("{key}: {}", quoted(value)),
        Some((key, rest)) => format!("{key}: {{{}}}", flow_entry(rest, value)),
        None => quoted(value),
    }
}

#[cfg(test)]
mod tests {
    use styrmin_ingress_rules::example_targets::fields;

    use super::*;
    use crate::render::splice::spliced_text;
    use crate::yaml_tree::parse_document;

    fn rewrite(text: &str, desired: &ClassFields) -> String {
        let root = parse_document(text).unwrap().unwrap();
        let edits = plan(text, &root, desired).unwrap();
        let out = spliced_text(text, &edits);
        // Whatever the layout, the result must read back as the desired fields, and
        // rewriting again must change nothing (R8).
        let again = parse_document(&out)
            .unwrap_or_else(|e| panic!("{e}\n{out}"))
            .unwrap();
        assert_eq!(&read_class_fields(&again).unwrap(), desired, "{out}");
        assert!(
            plan(&out, &again, desired).unwrap().is_empty(),
            "not a fixed point:\n{out}"
        );
        out
    }

    const BASE: &str = "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: web\n  labels:\n    app: web\nspec:\n  rules:\n    - host: a.example.com\n";

    #[test]
    fn r4_inserts_both_fields_where_neither_exists() {
        let out = rewrite(BASE, &fields(Some("nginx"), Some("nginx")));
        assert_eq!(
            out,
            "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  annotations:\n    kubernetes.io/ingress.class: \"nginx\"\n  name: web\n  labels:\n    app: web\nspec:\n  ingressClassName: \"nginx\"\n  rules:\n    - host: a.example.com\n"
        );
    }

    #[test]
    fn r4_replaces_values_in_place() {
        let text = "metadata:\n  annotations:\n    kubernetes.io/ingress.class: haproxy # old\n    other: \"off\"\nspec:\n  ingressClassName: 'x'\n  rules: []\n";
        let out = rewrite(text, &fields(Some("on"), Some("on")));
        assert_eq!(
            out,
            "metadata:\n  annotations:\n    kubernetes.io/ingress.class: \"on\" # old\n    other: \"off\"\nspec:\n  ingressClassName: \"on\"\n  rules: []\n"
        );
    }

    #[test]
    fn r3_removes_class_name_line_and_keeps_neighbours() {
        let text = "metadata:\n  name: a\nspec:\n  ingressClassName: nginx  # chart default\n  rules: []\n";
        let out = rewrite(text, &fields(None, Some("traefik")));
        assert_eq!(
            out,
            "metadata:\n  annotations:\n    kubernetes.io/ingress.class: \"traefik\"\n  name: a\nspec:\n  rules: []\n"
        );
    }

    #[test]
    fn unambiguous_plain_values_are_left_alone() {
        let text = "metadata:\n  annotations:\n    kubernetes.io/ingress.class: nginx\nspec:\n  ingressClassName: nginx\n  rules: []\n";
        let root = parse_document(text).unwrap().unwrap();
        assert!(
            plan(text, &root, &fields(Some("nginx"), Some("nginx")))
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn ambiguous_plain_values_are_quoted() {
        let text = "metadata:\n  annotations:\n    kubernetes.io/ingress.class: on\nspec:\n  ingressClassName: 123\n  rules: []\n";
        let out = rewrite(text, &fields(Some("123"), Some("on")));
        assert!(out.contains("ingressClassName: \"123\""), "{out}");
        assert!(out.contains("kubernetes.io/ingress.class: \"on\""), "{out}");
    }

    #[test]
    fn flow_style_documents() {
        let text = "{\"apiVersion\": \"networking.k8s.io/v1\", \"kind\": \"Ingress\", \"metadata\": {\"name\": \"a\"}, \"spec\": {\"ingressClassName\": \"nginx\", \"rules\": []}}\n";
        let out = rewrite(text, &fields(None, Some("traefik")));
        assert_eq!(
            out,
            "{\"apiVersion\": \"networking.k8s.io/v1\", \"kind\": \"Ingress\", \"metadata\": {annotations: {kubernetes.io/ingress.class: \"traefik\"}, \"name\": \"a\"}, \"spec\": {\"rules\": []}}\n"
        );
        rewrite(text, &fields(Some("a"), Some("a")));
        let last = "metadata: {name: a}\nspec: {rules: [], ingressClassName: x}\n";
        let out = rewrite(last, &fields(None, Some("traefik")));
        assert!(out.contains("spec: {rules: []}"), "{out}");
    }

    #[test]
    fn null_and_empty_annotations() {
        for annotations in [
            "annotations:",
            "annotations: null",
            "annotations: ~",
            "annotations: {}",
            "annotations: {} # none",
        ] {
            let text = format!("metadata:\n  name: a\n  {annotations}\nspec:\n  rules: []\n");
            let out = rewrite(&text, &fields(None, Some("traefik")));
            assert!(
                out.contains("  annotations:\n    kubernetes.io/ingress.class: \"traefik\""),
                "{annotations}: {out}"
            );
        }
    }

    #[test]
    fn empty_class_values_are_replaced() {
        // Found by the property tests: `ingressClassName: {{ .Values.className }}` with the
        // value unset renders `ingressClassName: ` (a null), which R4 must replace with a
        // space after the `:` (`key:"v"` does not parse as an entry).
        for (class_name, annotation) in [("", ""), (" ", " "), ("", " # none"), (" ~", " null")] {
            let text = format!(
                "metadata:\n  name: a\n  annotations:\n    kubernetes.io/ingress.class:{annotation}\nspec:\n  ingressClassName:{class_name}\n  rules: []\n"
            );
            let out = rewrite(&text, &fields(Some("nginx"), Some("nginx")));
            assert!(out.contains("  ingressClassName: \"nginx\""), "{out}");
            assert!(
                out.contains("    kubernetes.io/ingress.class: \"nginx\""),
                "{out}"
            );
        }
        // At the very end of the document, without a final line break.
        let out = rewrite("spec:\n  ingressClassName:", &fields(Some("on"), None));
        assert_eq!(out, "spec:\n  ingressClassName: \"on\"");
    }

    #[test]
    fn missing_metadata_and_spec_are_created() {
        let text = "apiVersion: networking.k8s.io/v1\nkind: Ingress\n";
        let out = rewrite(text, &fields(Some("nginx"), Some("nginx")));
        assert!(
            out.contains("metadata:\n  annotations:\n    kubernetes.io/ingress.class: \"nginx\"\n"),
            "{out}"
        );
        assert!(
            out.contains("spec:\n  ingressClassName: \"nginx\"\n"),
            "{out}"
        );
    }

    #[test]
    fn removing_the_only_spec_key_leaves_an_empty_mapping() {
        let text = "metadata:\n  name: a\nspec:\n  ingressClassName: nginx\nstatus: {}\n";
        let out = rewrite(text, &fields(None, Some("traefik")));
        assert!(out.contains("spec: {}\nstatus: {}\n"), "{out}");
    }

    #[test]
    fn compact_list_items() {
        let text = "items:\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    name: a\n  spec:\n    ingressClassName: x\n    rules: []\n";
        let root = parse_document(text).unwrap().unwrap();
        let item = &root.get("items").unwrap();
        let NodeValue::Sequence { items, .. } = &item.value else {
            panic!()
        };
        let edits = plan(text, &items[0], &fields(Some("nginx"), Some("nginx"))).unwrap();
        let out = spliced_text(text, &edits);
        assert_eq!(
            out,
            "items:\n- apiVersion: networking.k8s.io/v1\n  kind: Ingress\n  metadata:\n    annotations:\n      kubernetes.io/ingress.class: \"nginx\"\n    name: a\n  spec:\n    ingressClassName: \"nginx\"\n    rules: []\n"
        );
    }

    #[test]
    fn compact_item_without_metadata() {
        let text = "items:\n- kind: Ingress\n  spec:\n    rules: []\n";
        let root = parse_document(text).unwrap().unwrap();
        let NodeValue::Sequence { items, .. } = &root.get("items").unwrap().value else {
            panic!()
        };
        let out = spliced_text(
            text,
            &plan(text, &items[0], &fields(None, Some("traefik"))).unwrap(),
        );
        assert_eq!(
            out,
            "items:\n- kind: Ingress\n  metadata:\n    annotations:\n      kubernetes.io/ingress.class: \"traefik\"\n  spec:\n    rules: []\n"
        );
    }

    #[test]
    fn crlf_documents_get_crlf_lines() {
        let text = "metadata:\r\n  name: a\r\nspec:\r\n  rules: []\r\n";
        let out = rewrite(text, &fields(Some("nginx"), Some("nginx")));
        assert!(!out.replace("\r\n", "").contains('\n'), "{out:?}");
    }

    #[test]
    fn four_space_documents_keep_their_indentation() {
        let text = "metadata:\n    name: a\nspec:\n    rules: []\n";
        let out = rewrite(text, &fields(Some("nginx"), Some("nginx")));
        assert!(out.contains("metadata:\n    annotations:\n        kubernetes.io/ingress.class: \"nginx\"\n    name: a\n"), "{out}");
    }

    #[test]
    fn block_scalar_class_is_replaced() {
        let text = "spec:\n  ingressClassName: |\n    nginx\n\n  rules: []\nmetadata: {name: a}\n";
        let out = rewrite(text, &fields(Some("nginx"), Some("nginx")));
        assert!(out.contains("  ingressClassName: \"nginx\"\n"), "{out}");
        let out = rewrite(text, &fields(None, Some("traefik")));
        assert!(out.starts_with("spec:\n  rules: []\n"), "{out}");
    }

    #[test]
    fn multi_byte_text_around_the_fields() {
        let text = "metadata:\n  name: \"café\"\n  annotations: {note: \"日本\"}\nspec:\n  ingressClassName: \"ñ\"\n  rules: []\n";
        let out = rewrite(text, &fields(Some("ü"), Some("ü")));
        assert!(out.contains("note: \"日本\""), "{out}");
    }

    #[test]
    fn merge_keys_that_do_not_bring_the_field_in_are_edited() {
        // Both Go readers read these as the explicit entries: a merge key before an
        // explicit key is overridden by it, one without the key adds nothing to it.
        for text in [
            "spec:\n  <<: {rules: []}\n  ingressClassName: a\n",
            "spec:\n  <<: {ingressClassName: b}\n  ingressClassName: a\n",
        ] {
            let out = rewrite(text, &fields(Some("on"), Some("on")));
            assert!(out.contains("ingressClassName: \"on\""), "{out}");
        }
    }

    #[test]
    fn alias_keys_and_local_tags_read_as_go_reads_them() {
        let text = "metadata:\n  labels: {k: &k ingressClassName}\nspec:\n  *k : !custom nginx\n";
        let root = parse_document(text).unwrap().unwrap();
        assert_eq!(
            read_class_fields(&root)
                .unwrap()
                .ingress_class_name
                .as_deref(),
            Some("nginx")
        );
        let out = rewrite(text, &fields(Some("on"), Some("on")));
        assert!(out.contains("  *k : \"on\"\n"), "{out}");
    }

    #[test]
    fn refuses_what_it_would_misread() {
        let cases = [
            (
                "base: &base {ingressClassName: a}\nspec:\n  <<: *base\n  rules: []\n",
                "merge key",
            ),
            (
                "spec:\n  ingressClassName: a\n  <<: {ingressClassName: b}\n",
                "merge key",
            ),
            (
                "spec:\n  ingressClassName: a\n  ingressClassName: b\n",
                "more than once",
            ),
            (
                "metadata:\n  annotations: &shared\n    a: b\n  labels: *shared\nspec:\n  rules: []\n",
                "shared",
            ),
            (
                "metadata:\n  annotations: [a]\nspec:\n  rules: []\n",
                "must be a mapping",
            ),
            ("spec:\n  ingressClassName: {a: b}\n", "must be a string"),
        ];
        for (text, expected) in cases {
            let result = parse_document(text)
                .map_err(|e| e.to_string())
                .and_then(|root| {
                    let root = root.ok_or("empty")?;
                    read_class_fields(&root).map_err(|e| e.to_string())?;
                    plan(text, &root, &fields(Some("nginx"), Some("nginx")))
                        .map_err(|e| e.to_string())
                });
            let err = result.expect_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn field_names_in_messages() {
        assert_eq!(
            dotted(&CLASS_ANNOTATION_PATH),
            "metadata.annotations[kubernetes.io/ingress.class]"
        );
        assert_eq!(dotted(&CLASS_NAME_PATH), "spec.ingressClassName");
    }

    #[test]
    fn quoting() {
        assert_eq!(quoted("on"), "\"on\"");
        assert_eq!(quoted("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000A\"");
    }
}
