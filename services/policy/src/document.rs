//! The policy file as written: YAML read into these types, every unknown key refused.

use crate::permission::{LinkCap, Permission};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Document {
    /// Where each user's home is: a path ending in `/{user}`.
    #[serde(default)]
    pub(crate) homes: Option<String>,
    /// User ids that see and do everything.
    #[serde(default)]
    pub(crate) admins: Vec<String>,
    /// Group names and their members' user ids.
    #[serde(default)]
    pub(crate) groups: BTreeMap<String, Vec<String>>,
    /// Path rules; the longest matching prefix decides.
    #[serde(default)]
    pub(crate) rules: Vec<RuleDocument>,
    /// Quota roots.
    #[serde(default)]
    pub(crate) quota: QuotaDocument,
}

/// One rule.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RuleDocument {
    /// The path it governs, with everything beneath it.
    pub(crate) path: String,
    /// Grant keys (`user:ID`, `group:NAME`, `*`) and what each may do.
    #[serde(default)]
    pub(crate) grant: BTreeMap<String, Permission>,
    /// The most a public link beneath it may allow.
    #[serde(default)]
    pub(crate) links: Option<LinkCap>,
}

/// The `quota:` section.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QuotaDocument {
    /// Each home's quota.
    #[serde(default)]
    pub(crate) homes: Option<SizeText>,
    /// Quota roots by path.
    #[serde(default)]
    pub(crate) paths: BTreeMap<String, SizeText>,
}

/// A size: a number of bytes, or text with a unit (`10GiB`).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum SizeText {
    /// A plain number of bytes.
    Bytes(u64),
    /// A number and a unit.
    Text(String),
}

impl SizeText {
    /// Its bytes, or `None` when the text is not a size.
    pub(crate) fn bytes(&self) -> Option<u64> {
        match self {
            SizeText::Bytes(n) => Some(*n),
            SizeText::Text(text) => crate::size::parse_size(text),
        }
    }

    /// As written, for error messages.
    pub(crate) fn written(&self) -> String {
        match self {
            SizeText::Bytes(n) => n.to_string(),
            SizeText::Text(text) => text.clone(),
        }
    }
}
