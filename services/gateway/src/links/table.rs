//! [`LinkTable`]: every link a gateway knows of, found by id and by its token's hash.

use super::record::LinkEntry;
use std::collections::HashMap;
use std::sync::Arc;

/// The links, as read from the records; replaced whole on a change.
#[derive(Debug, Default)]
pub struct LinkTable {
    by_id: HashMap<String, Arc<LinkEntry>>,
    by_token_hash: HashMap<String, Arc<LinkEntry>>,
}

impl crate::kept::Table<LinkEntry> for LinkTable {
    fn new(items: Vec<Arc<LinkEntry>>) -> Self {
        let mut table = Self::default();
        for entry in items {
            table
                .by_token_hash
                .insert(entry.link.token_hash.clone(), entry.clone());
            table.by_id.insert(entry.link.id.clone(), entry);
        }
        table
    }

    fn get(&self, id: &str) -> Option<&Arc<LinkEntry>> {
        self.by_id.get(id)
    }

    fn items(&self) -> Vec<Arc<LinkEntry>> {
        self.by_id.values().cloned().collect()
    }
}

impl LinkTable {
    /// The link whose token hashes to `token_hash`.
    pub fn by_token_hash(&self, token_hash: &str) -> Option<&Arc<LinkEntry>> {
        self.by_token_hash.get(token_hash)
    }

    /// Every link.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<LinkEntry>> {
        self.by_id.values()
    }
}
