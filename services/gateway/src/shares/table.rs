//! [`ShareTable`]: every share a gateway knows of, found by id and by recipient.

use super::record::ShareEntry;
use kubedav_policy::{Grantee, Subject};
use std::collections::HashMap;
use std::sync::Arc;

/// The shares, as read from the records: by id, and by the user or group they go to.
/// Replaced whole on a change (a share is never edited, only made or ended).
#[derive(Debug, Default)]
pub struct ShareTable {
    by_id: HashMap<String, Arc<ShareEntry>>,
    to_users: HashMap<String, Vec<Arc<ShareEntry>>>,
    to_groups: HashMap<String, Vec<Arc<ShareEntry>>>,
}

impl crate::kept::Table<ShareEntry> for ShareTable {
    fn new(items: Vec<Arc<ShareEntry>>) -> Self {
        ShareTable::new(items)
    }

    fn get(&self, id: &str) -> Option<&Arc<ShareEntry>> {
        self.by_id.get(id)
    }

    fn items(&self) -> Vec<Arc<ShareEntry>> {
        self.by_id.values().cloned().collect()
    }
}

impl ShareTable {
    /// A table of `entries`.
    pub fn new(entries: impl IntoIterator<Item = Arc<ShareEntry>>) -> Self {
        let mut table = Self::default();
        for entry in entries {
            let list = match &entry.to {
                Grantee::User(user) => table.to_users.entry(user.clone()).or_default(),
                Grantee::Group(group) => table.to_groups.entry(group.clone()).or_default(),
                Grantee::Anyone => continue,
            };
            list.push(entry.clone());
            table.by_id.insert(entry.share.id.clone(), entry);
        }
        table
    }

    /// Every share.
    pub fn iter(&self) -> impl Iterator<Item = &Arc<ShareEntry>> {
        self.by_id.values()
    }

    /// How many shares there are.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    /// The shares made to `subject` or to one of its groups that have not expired by
    /// `now`. Costs a lookup per group and allocates only when there are some.
    pub fn received(&self, subject: &Subject, now: i64) -> Vec<Arc<ShareEntry>> {
        if self.by_id.is_empty() || subject.user().is_empty() {
            return Vec::new();
        }
        let groups = subject.groups().iter().filter_map(|g| self.to_groups.get(&**g));
        self.to_users
            .get(subject.user())
            .into_iter()
            .chain(groups)
            .flatten()
            .filter(|entry| !entry.expired(now) && entry.share.creator != subject.user())
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::shares::record::{Share, Shared};

    fn entry(id: &str, to: &str, expires_at: Option<i64>) -> Arc<ShareEntry> {
        Arc::new(
            ShareEntry::new(Share {
                id: id.into(),
                path: "home/alice/project".into(),
                to: to.into(),
                permission: Shared::Write,
                creator: "alice".into(),
                creator_groups: Vec::new(),
                created: 0,
                expires_at,
                collection: true,
            })
            .unwrap(),
        )
    }

    #[test]
    fn a_subject_receives_its_own_and_its_groups_shares_until_they_expire() {
        let policy = kubedav_policy::Policy::from_yaml("groups:\n  staff: [bob]\n").unwrap();
        let table = ShareTable::new([
            entry("to-bob", "user:bob", None),
            entry("to-staff", "group:staff", Some(50)),
            entry("to-carol", "user:carol", None),
            entry("to-ops", "group:ops", None),
        ]);
        let ids = |subject: &Subject, now| {
            let mut ids: Vec<String> = table
                .received(subject, now)
                .iter()
                .map(|e| e.share.id.clone())
                .collect();
            ids.sort();
            ids
        };
        let bob = policy.subject("bob", &[] as &[&str]);
        assert_eq!(ids(&bob, 10), ["to-bob", "to-staff"]);
        assert_eq!(ids(&bob, 50), ["to-bob"]);
        // A group the identity provider claims counts as the policy's do.
        let bob_in_ops = policy.subject("bob", &["ops"]);
        assert_eq!(ids(&bob_in_ops, 10), ["to-bob", "to-ops", "to-staff"]);
        assert!(table.received(&policy.subject("", &[] as &[&str]), 10).is_empty());
        assert_eq!(table.len(), 4);
        assert!(crate::kept::Table::get(&table, "to-bob").is_some());
    }
}
