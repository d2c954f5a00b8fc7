//! The text of a finding, shared: at 100,000 Ingresses most findings say the same things
//! (the same class, the same decision, the same advice) and a copy each would take more
//! memory than the Ingresses themselves. [`Interner::share`] makes equal texts of one audit
//! one allocation, and [`Interner::learn`] lets an audit take the texts of the one before.

use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

/// An immutable text; cheap to clone, compared and printed as the `str` it holds.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Text(Arc<str>);

impl Text {
    /// Whether `self` and `other` are one allocation, not only equal.
    pub fn shares_allocation_with(&self, other: &Text) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for Text {
    fn default() -> Self {
        Text(Arc::from(""))
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl serde::Serialize for Text {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl From<String> for Text {
    fn from(text: String) -> Self {
        Text(Arc::from(text))
    }
}

impl From<&str> for Text {
    fn from(text: &str) -> Self {
        Text(Arc::from(text))
    }
}

impl PartialEq<str> for Text {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Text {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Text {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

/// The texts of one audit (and of the audit before it): equal texts become one.
#[derive(Debug, Default)]
pub struct Interner(HashSet<Arc<str>>);

impl Interner {
    /// Makes `text` known: later equal texts share its allocation.
    pub fn learn(&mut self, text: &Text) {
        if !self.0.contains(&*text.0) {
            self.0.insert(text.0.clone());
        }
    }

    /// `text`, or an equal one met before (whose allocation is then shared).
    pub fn share(&mut self, text: &mut Text) {
        match self.0.get(&*text.0) {
            Some(seen) => text.0 = seen.clone(),
            None => {
                self.0.insert(text.0.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_share_one_allocation() {
        let mut interner = Interner::default();
        let mut a = Text::from(String::from("class \"nginx\""));
        let mut b = Text::from("class \"nginx\"");
        let mut c = Text::from("class \"traefik\"");
        assert!(!Arc::ptr_eq(&a.0, &b.0));
        interner.share(&mut a);
        interner.share(&mut b);
        interner.share(&mut c);
        assert!(Arc::ptr_eq(&a.0, &b.0));
        assert!(!Arc::ptr_eq(&a.0, &c.0));
        assert_eq!(a, "class \"nginx\"");
        assert_eq!(
            serde_json::to_string(&a).unwrap_or_default(),
            "\"class \\\"nginx\\\"\""
        );
    }
}
