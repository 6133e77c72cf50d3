//! [`Principal`]: who a request is made by.

use std::sync::Arc;

/// Who a request is made by: the user its credentials were verified for, or nobody
/// (auth is off, or an anonymous read), whose name is "". It owns the locks the request
/// takes.
///
/// Its parts are private, so it can grow (a user's groups, a credential's scope) without
/// changing the code that passes it on. Cloning it counts a reference; nobody costs no
/// allocation at all.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Principal {
    /// The user's name; `None` for nobody.
    name: Option<Arc<str>>,
}

impl Principal {
    /// The principal of a user whose credentials were verified.
    pub fn new(name: &str) -> Self {
        Self {
            name: Some(name.into()),
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

    /// The user's name ("" for nobody): what the locks service records as a lock's owner.
    pub fn name(&self) -> &str {
        self.name.as_deref().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_without_one_is_made_by_nobody() {
        let mut request = http::Request::new(());
        assert_eq!(Principal::of(&request).name(), "");
        request.extensions_mut().insert(Principal::new("alice"));
        let alice = Principal::of(&request);
        assert_eq!(alice.name(), "alice");
        assert_eq!(alice, Principal::new("alice"));
    }
}
