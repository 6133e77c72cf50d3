//! Public links (issue 53): a user who manages a path publishes it at
//! `{base}/.kubedav/s/{token}/`, for anyone holding the URL, in a browser and over
//! WebDAV ([`serve`]). `read` links list and download, `upload` links are drop boxes
//! (new names only; nothing listed, read or overwritten), `write` links do both.
//!
//! * **The token** is 24 random bytes (192 bits), URL-safe base64; only its SHA-256 is
//!   kept, in the link's record (`links/by-id/{id}`, kept fresh on every gateway by
//!   [`crate::kept`]). A request's token is hashed and looked up: an unknown one costs
//!   a hash and a lookup, and answers as a link that does not exist. The token never
//!   appears in logs, traces, metrics or error texts ([`redacted`]).
//! * **A password** (optional) is kept as a SHA-512 crypt hash. Over WebDAV it is Basic
//!   with any user name; in a browser, a page asks for it and a cookie for the link
//!   follows. Wrong passwords are throttled per client address and per link as logins
//!   are (`kubedav_kit::throttle`): the guesser is locked out, never the link.
//! * **Limits**: `expires_at`, `max_uses` and `max_bytes` ([`uses`]), held on every
//!   replica; a rate of writes per client address.
//! * A link works while its creator manages its path under the policy and the policy's
//!   `links:` cap (or `--links`) allows its kind; as the creator sees the tree (a
//!   listing through it shows what the creator may see).

pub mod drop_box;
pub mod password;
pub mod rate;
pub mod record;
pub mod serve;
pub mod table;
pub mod uses;

pub use record::{Link, LinkEntry, LinkKind};
pub use table::LinkTable;

use crate::kept::{Item, Kept, WallClock};
use base64::Engine;
use kubedav_api::path::VolumePath;
use kubedav_api::records::{Area, Records};
use kubedav_policy::LinkCap;
use sha2::{Digest, Sha256};
use std::sync::Arc;
use tonic::Status;

/// Every link, kept fresh from the records.
pub type Links = Kept<LinkEntry, LinkTable>;

/// The records area.
pub const RECORDS: Area = Area("links");

/// Most links one user may make.
pub const MAX_PER_CREATOR: usize = 1000;

/// What links may be, where no rule of the policy says.
#[derive(Clone, Debug)]
pub struct LinkSettings {
    /// The most a link may allow where no rule's `links:` says (`--links`).
    pub default_cap: LinkCap,
    /// The bytes a link's uploads may add when its maker gives no `max_bytes`
    /// (`--link-max-bytes`), and the most one may give.
    pub max_bytes: u64,
    /// Who lists and revokes every share and link without a policy (`--admins`); the
    /// policy's `admins:` with one.
    pub admins: Vec<String>,
}

impl Default for LinkSettings {
    fn default() -> Self {
        Self {
            default_cap: LinkCap::Write,
            max_bytes: 1 << 30,
            admins: Vec::new(),
        }
    }
}

/// The links kept in `records`, on `clock`.
pub fn kept(records: Arc<dyn Records>, clock: WallClock) -> Arc<Links> {
    Links::new(records, RECORDS, clock, metrics::active)
}

impl Item for LinkEntry {
    type Stored = Link;
    const KIND: &'static str = "link";

    fn new(stored: Link) -> Option<Self> {
        LinkEntry::new(stored)
    }

    fn stored(&self) -> &Link {
        &self.link
    }

    fn id(&self) -> &str {
        &self.link.id
    }

    fn path(&self) -> &VolumePath {
        &self.path
    }

    fn creator(&self) -> &str {
        &self.link.creator
    }

    fn expired(&self, now: i64) -> bool {
        LinkEntry::expired(self, now)
    }
}

/// A new token and the hash kept of it.
pub fn new_token() -> Result<(String, String), Status> {
    let bytes = crate::kept::random_bytes::<24>()?;
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
    let hash = token_hash(&token);
    Ok((token, hash))
}

/// The hash kept of `token`: SHA-256, hex.
pub fn token_hash(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The URL prefix of a link: `{base}/.kubedav/s/{token}`.
pub fn prefix(base: &crate::http::paths::BasePath, token: &str) -> String {
    format!("{}/{}/s/{token}", base.as_str(), kubedav_api::path::RESERVED_AREA)
}

/// `path` with a link's token replaced by `[token]`, for logs and traces; as it is
/// when it names no link (the common case costs one substring search).
pub fn redacted(path: &str) -> std::borrow::Cow<'_, str> {
    const MARK: &str = "/.kubedav/s/";
    let Some(at) = path.find(MARK) else {
        return std::borrow::Cow::Borrowed(path);
    };
    let start = at + MARK.len();
    let end = path[start..].find('/').map_or(path.len(), |i| start + i);
    std::borrow::Cow::Owned(format!("{}[token]{}", &path[..start], &path[end..]))
}

/// Ends the links of `path` and of what lies beneath it, as `path` is moved or deleted
/// by `by`; whether there were some.
pub async fn end_beneath(gateway: &crate::Gateway, path: &VolumePath, by: &str) -> Result<bool, Status> {
    crate::kept::end_before_removing(gateway.links.as_ref(), path, by).await
}

pub(crate) mod metrics {
    use kubedav_metrics::{CounterFamily, Gauge};
    use std::sync::LazyLock;

    static ACTIVE: LazyLock<Gauge> = LazyLock::new(|| {
        kubedav_metrics::gauge(
            "kubedav_links_active",
            "Public links this gateway knows of, expired ones not yet swept included.",
        )
    });

    static USES: LazyLock<CounterFamily> = LazyLock::new(|| {
        CounterFamily::new(
            "kubedav_link_requests_total",
            "Requests through public links, by outcome: served, no_link (unknown, expired \
             or revoked), password_asked, password_refused, locked_out, spent (max_uses), \
             full (max_bytes), rate_limited, refused (the link's kind does not allow it).",
            &["outcome"],
        )
    });

    /// Sets the number of links (and exports every outcome's counter, at zero until
    /// it counts).
    pub(crate) fn active(count: usize) {
        ACTIVE.set(count as i64);
        LazyLock::force(&BY_OUTCOME);
    }

    /// The outcomes, each counter made once (a label lookup allocates).
    const OUTCOMES: [&str; 9] = [
        "served",
        "no_link",
        "password_asked",
        "password_refused",
        "locked_out",
        "spent",
        "full",
        "rate_limited",
        "refused",
    ];

    static BY_OUTCOME: LazyLock<Vec<(&'static str, kubedav_metrics::Counter)>> = LazyLock::new(|| {
        OUTCOMES
            .iter()
            .map(|outcome| (*outcome, USES.with_label_values(&[outcome])))
            .collect()
    });

    /// Counts a request through a link (`outcome`: one of [`OUTCOMES`]).
    pub(crate) fn request(outcome: &str) {
        if let Some((_, counter)) = BY_OUTCOME.iter().find(|(name, _)| *name == outcome) {
            counter.inc();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_only_their_hash_is_kept() {
        let (token, hash) = new_token().unwrap();
        assert_eq!(token.len(), 32);
        assert!(
            token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_eq!(hash, token_hash(&token));
        assert_eq!(hash.len(), 64);
        assert_ne!(new_token().unwrap().0, token);
    }

    #[test]
    fn logs_never_see_a_token() {
        assert_eq!(
            redacted("/dav/.kubedav/s/SECRET/a/b.txt"),
            "/dav/.kubedav/s/[token]/a/b.txt"
        );
        assert_eq!(redacted("/.kubedav/s/SECRET"), "/.kubedav/s/[token]");
        assert_eq!(redacted("/home/alice/x"), "/home/alice/x");
    }
}
