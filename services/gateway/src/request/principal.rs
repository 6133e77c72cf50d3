//! [`Principal`]: who a request is made by.

use std::sync::Arc;

/// Who a request is made by: the user its credential was verified for, with the groups
/// the credential claims and its scope, or nobody (auth is off, or an anonymous read),
/// whose name is "". It owns the locks the request takes.
///
/// Whatever the credential (a password, an app password, a bearer token), the handlers
/// and the audit lines see only this. Cloning it counts a reference; nobody costs no
/// allocation at all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Principal {
    /// The verified identity; `None` for nobody.
    verified: Option<Arc<kubedav_api::auth::Principal>>,
}

impl Principal {
    /// The principal of a user whose password was verified, with nothing else known.
    pub fn new(name: &str) -> Self {
        Self::verified(kubedav_api::auth::Principal {
            user: name.to_owned(),
            display_name: name.to_owned(),
            kind: "password".to_owned(),
            ..Default::default()
        })
    }

    /// The principal the auth service answered with.
    pub fn verified(principal: kubedav_api::auth::Principal) -> Self {
        Self {
            verified: Some(Arc::new(principal)),
        }
    }

    /// The principal the edge attached to `request` (nobody when none was).
    pub fn of<B>(request: &http::Request<B>) -> Self {
        request
            .extensions()
            .get::<Principal>()
            .cloned()
            .unwrap_or_default()
    }

    /// The user id ("" for nobody): the key of homes and grants, and what the locks
    /// service records as a lock's owner.
    pub fn name(&self) -> &str {
        self.verified.as_deref().map_or("", |p| p.user.as_str())
    }

    /// A name to show the user.
    pub fn display_name(&self) -> &str {
        self.verified.as_deref().map_or("", |p| p.display_name.as_str())
    }

    /// The groups the credential claims (the policy adds its own).
    pub fn groups(&self) -> &[String] {
        self.verified.as_deref().map_or(&[], |p| p.groups.as_slice())
    }

    /// Whether the credential may only read.
    pub fn read_only(&self) -> bool {
        self.verified.as_deref().is_some_and(|p| p.read_only)
    }

    /// The path the credential is limited to (a volume path; "" for none).
    pub fn path_prefix(&self) -> &str {
        self.verified.as_deref().map_or("", |p| p.path_prefix.as_str())
    }

    /// Everything the auth service said of the principal, for a call that hands it on
    /// (the owner of an app password being made); `None` for nobody.
    pub fn verified_parts(&self) -> Option<kubedav_api::auth::Principal> {
        self.verified.as_deref().cloned()
    }

    /// Which credential of its kind: an app password's id ("" for other kinds).
    pub fn credential_id(&self) -> &str {
        self.verified.as_deref().map_or("", |p| p.credential_id.as_str())
    }

    /// The kind of credential: `password`, `bearer`, `app-password`, `session` ("" for
    /// nobody).
    pub fn kind(&self) -> &str {
        self.verified.as_deref().map_or("", |p| p.kind.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_one_is_made_by_nobody() {
        let mut request = http::Request::new(());
        let nobody = Principal::of(&request);
        assert_eq!((nobody.name(), nobody.groups().len(), nobody.kind()), ("", 0, ""));
        request.extensions_mut().insert(Principal::new("alice"));
        let alice = Principal::of(&request);
        assert_eq!(alice.name(), "alice");
        assert_eq!(alice, Principal::new("alice"));
        assert!(!alice.read_only());
    }
}
