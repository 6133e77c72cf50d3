//! Who a rule's grant names: `user:ID`, `group:NAME` or `*`.

use std::fmt;

/// One key of a rule's `grant:` map.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Grantee {
    /// `user:ID`: the principal whose user id this is.
    User(String),
    /// `group:NAME`: every member of the group (the policy's `groups:`, or the identity
    /// provider's groups claim).
    Group(String),
    /// `*`: anyone authenticated.
    Anyone,
}

impl Grantee {
    /// Reads a grant key; `None` when it is none of the three forms or names nobody.
    pub fn parse(key: &str) -> Option<Self> {
        if key == "*" {
            return Some(Grantee::Anyone);
        }
        let (kind, name) = key.split_once(':')?;
        let name = name.trim();
        if name.is_empty() {
            return None;
        }
        match kind.trim() {
            "user" => Some(Grantee::User(name.to_owned())),
            "group" => Some(Grantee::Group(name.to_owned())),
            _ => None,
        }
    }
}

impl fmt::Display for Grantee {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grantee::User(id) => write!(f, "user:{id}"),
            Grantee::Group(name) => write!(f, "group:{name}"),
            Grantee::Anyone => f.write_str("*"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_forms_and_nothing_else() {
        assert_eq!(Grantee::parse("user:alice"), Some(Grantee::User("alice".into())));
        assert_eq!(
            Grantee::parse("group:staff"),
            Some(Grantee::Group("staff".into()))
        );
        assert_eq!(Grantee::parse("*"), Some(Grantee::Anyone));
        for bad in ["alice", "user:", "group: ", "team:x", "**", ""] {
            assert_eq!(Grantee::parse(bad), None, "{bad}");
        }
    }
}
