//! A List of Ingresses in the plain form, read one item at a time so that a List of thousands
//! never has all their trees at once, and checked as a whole.

use std::sync::Arc;

use styrmin_ingress_rules::ClassFields;

use super::enforce::{DocumentInput, enforce_one, sort_edits};
use super::error::RenderError;
use super::outcomes::{IngressName, Outcomes};
use super::read_back::{self, Checked, ReadBack, Tally};
use super::verify::{digest, proven_as_desired};
use crate::go_readers::{self, Anchors};
use crate::ingress_edit::{self, Edit};
use crate::yaml_tree::{self, ItemsError, Node, PlainList, ReadOnce};

/// Renders a document that is a List of Ingresses in the plain form one item at a time;
/// `None` when it is not one (the whole-tree way judges it).
pub(super) fn render_if_plain_list(
    input: DocumentInput<'_>,
    outcomes: &mut Outcomes,
    tally: &mut Tally,
) -> Option<Result<Option<Vec<Edit>>, RenderError>> {
    let text = input.text;
    let list = match render_list_read_once(input, outcomes, tally) {
        ListReading::Rendered(result) => return Some(result),
        ListReading::NotAPlainIngressList => None,
        ListReading::NotInCommonLayout => yaml_tree::plain_list_parsed(text).ok().flatten(),
        ListReading::ItemFailed => yaml_tree::plain_list(text).ok().flatten(),
    };
    let list = list.filter(is_ingress_list)?;
    Some(render_plain_list(input, &list, outcomes, tally))
}

fn is_ingress_list(list: &PlainList) -> bool {
    styrmin_ingress_rules::is_ingress_container_list(&list.api_version, &list.kind)
}

/// A List in the plain form of [`yaml_tree::plain_list`], read one item at a time so that
/// a List of thousands of Ingresses never has all their trees at once. The same rules and
/// the same self-check as for a whole document: each Ingress item's edits are proven where
/// they are ([`read_back`]) while its tree is at hand; when one is not, the edited List is
/// read again item by item, each Ingress must read back as the rules said and need no
/// second pass, and every item, with its class fields set aside, must be the tree it was
/// (compared by a digest of its canonical form, so that no item's tree is kept).
fn render_plain_list(
    input: DocumentInput<'_>,
    list: &PlainList,
    outcomes: &mut Outcomes,
    tally: &mut Tally,
) -> Result<Option<Vec<Edit>>, RenderError> {
    let mut items = ListItems::new(input, list.items);
    yaml_tree::for_each_list_item(input.text, |index, item| {
        items.render(index, &item, outcomes)
    })
    .map_err(|e| match e {
        yaml_tree::ItemsError::Syntax(error) => RenderError::Syntax {
            error: error.shifted(input.name.first_line),
            document: input.name.clone(),
        },
        yaml_tree::ItemsError::Item(error) => error,
    })?;
    items.finish(list, outcomes, tally)
}

/// What reading a document that may be a List once settled: its answer; or that it is not
/// a List of Ingresses in the plain form (the whole-tree way judges it); or nothing, because
/// it is not in the common layout (the general parser reads its top level) or an item failed
/// (it is read again, to the error in its place).
enum ListReading {
    Rendered(Result<Option<Vec<Edit>>, RenderError>),
    NotAPlainIngressList,
    NotInCommonLayout,
    ItemFailed,
}

/// A List in the common layout read once, its items rendered while they are read, where
/// [`yaml_tree::plain_list`] and then [`render_plain_list`] would read it twice (a List's
/// `kind` may come after its items, so what the items are for is known only at the end).
/// Until then the items' outcomes are provisional: they are taken back when the document
/// turns out not to be a plain List of Ingresses, or when the reading does not settle it
/// (not in the layout, or an item failed): [`render_plain_list`] then reads it as before,
/// to the same answer, the same error included.
fn render_list_read_once(
    input: DocumentInput<'_>,
    outcomes: &mut Outcomes,
    tally: &mut Tally,
) -> ListReading {
    let mark = outcomes.mark();
    let mut items = ListItems::new(input, 0);
    let mut failed = false;
    let list = yaml_tree::plain_list_read_once(input.text, &mut |index, item| {
        failed = items.render(index, &item, outcomes).is_err();
        !failed
    });
    match list {
        ReadOnce::Plain(list) if is_ingress_list(&list) => {
            ListReading::Rendered(items.finish(&list, outcomes, tally))
        }
        ReadOnce::Plain(_) | ReadOnce::NotPlain => {
            outcomes.roll_back(mark);
            ListReading::NotAPlainIngressList
        }
        ReadOnce::Unsettled => {
            outcomes.roll_back(mark);
            if failed {
                ListReading::ItemFailed
            } else {
                ListReading::NotInCommonLayout
            }
        }
    }
}

/// The items of a plain List rendered one at a time, and what is kept of them until the
/// List is checked as a whole.
struct ListItems<'t> {
    input: DocumentInput<'t>,
    edits: Vec<Edit>,
    desired: Vec<(usize, Arc<ClassFields>)>,
    /// Every Ingress item's edits proven where they are so far.
    local: bool,
    digests: Option<Vec<u64>>,
}

impl<'t> ListItems<'t> {
    /// `items`: how many the List has, when known (room for their digests).
    fn new(input: DocumentInput<'t>, items: usize) -> Self {
        // The plain form has no alias and no tab (see `render_document`).
        let local = input.read_back == ReadBack::Local;
        ListItems {
            input,
            edits: Vec::new(),
            desired: Vec::new(),
            local,
            // Digests are taken in the first pass only when the full check is sure to run;
            // otherwise only if a local proof fails, by reading the List once more.
            digests: (!local).then(|| Vec::with_capacity(items)),
        }
    }

    /// Renders item `index` of the List.
    fn render(
        &mut self,
        index: usize,
        item: &Node<'_>,
        outcomes: &mut Outcomes,
    ) -> Result<(), RenderError> {
        let DocumentInput {
            text, name, rules, ..
        } = self.input;
        let mut anchors = Anchors::new(item);
        let at = format!("items[{index}]");
        let ty = go_readers::go_type(item, &at, &mut anchors);
        let ingress = ty.may_be_ingress();
        if ingress {
            if let Some(doubt) = ty.doubt {
                return Err(RenderError::Doubt {
                    document: name.clone(),
                    doubt,
                });
            }
            let from = self.edits.len();
            let fields = enforce_one(text, item, name, rules, outcomes, &mut self.edits)?;
            self.local =
                self.local && proven_as_desired(text, item, outcomes, &self.edits[from..], &fields);
            self.desired.push((index, fields));
        }
        if let Some(digests) = &mut self.digests {
            digests.push(digest(item, ingress));
        }
        Ok(())
    }

    /// The List's edits once every item is rendered, checked as a whole.
    fn finish(
        self,
        list: &PlainList,
        outcomes: &Outcomes,
        tally: &mut Tally,
    ) -> Result<Option<Vec<Edit>>, RenderError> {
        let ListItems {
            input: DocumentInput { text, name, .. },
            mut edits,
            desired,
            local,
            digests,
            ..
        } = self;
        if edits.is_empty() {
            return Ok(None);
        }
        sort_edits(&mut edits);
        let verify_error = |what: String| RenderError::Verify {
            document: name.clone(),
            ingress: outcomes
                .last()
                .map_or(IngressName(String::new()), |o| o.ingress.to_name()),
            what,
        };
        // Every edit lies inside its item's own lines, so the List's top level and its other
        // items read as before.
        if local && read_back::apart(&edits) {
            tally.count(Checked::Locally);
            return Ok(Some(edits));
        }
        let digests = match digests {
            Some(digests) => digests,
            None => list_digests(text, list.items, &desired).map_err(|_| {
                verify_error("the List does not read as it did before the edit".to_owned())
            })?,
        };
        verify_plain_list(text, list, &edits, &desired, &digests).map_err(verify_error)?;
        tally.count(Checked::Fully);
        Ok(Some(edits))
    }
}

/// The digest of every item of a plain List, `ingresses` telling the Ingress items apart.
fn list_digests(
    text: &str,
    items: usize,
    ingresses: &[(usize, Arc<ClassFields>)],
) -> Result<Vec<u64>, ItemsError<()>> {
    let mut digests = Vec::with_capacity(items);
    let mut ingresses = ingresses.iter().map(|(i, _)| *i).peekable();
    yaml_tree::for_each_list_item(text, |index, item| {
        let ingress = ingresses.next_if_eq(&index).is_some();
        digests.push(digest(&item, ingress));
        Ok::<(), ()>(())
    })?;
    Ok(digests)
}

/// The full read-back check of an edited plain List (see [`render_plain_list`]).
fn verify_plain_list(
    text: &str,
    list: &PlainList,
    sorted: &[Edit],
    desired: &[(usize, Arc<ClassFields>)],
    digests: &[u64],
) -> Result<(), String> {
    let new_text = super::splice::spliced_text(text, sorted);
    match yaml_tree::plain_list(&new_text) {
        Ok(Some(after)) if after == *list => {}
        _ => return Err("the edited List does not read as the same List".to_owned()),
    }
    let mut wanted = desired.iter().peekable();
    let mut checked = 0;
    yaml_tree::for_each_list_item(&new_text, |index, item| {
        let ingress = wanted.next_if(|(i, _)| *i == index);
        if let Some((_, want)) = ingress {
            let got = ingress_edit::read_class_fields(&item).map_err(|e| e.to_string())?;
            if got != **want {
                return Err(format!(
                    "class fields read back as {got:?}, expected {want:?}"
                ));
            }
            let again = ingress_edit::plan(&new_text, &item, want).map_err(|e| e.to_string())?;
            if !again.is_empty() {
                return Err("a second pass would edit again (not idempotent)".to_owned());
            }
        }
        if digests.get(index) != Some(&digest(&item, ingress.is_some())) {
            return Err("something besides the class fields changed".to_owned());
        }
        checked += 1;
        Ok(())
    })
    .map_err(|e| match e {
        yaml_tree::ItemsError::Syntax(error) => {
            format!("the edited document does not parse ({error})")
        }
        yaml_tree::ItemsError::Item(what) => what,
    })?;
    if checked != digests.len() || wanted.next().is_some() {
        return Err("the edited List has another number of items".to_owned());
    }
    Ok(())
}
