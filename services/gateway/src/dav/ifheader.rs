//! The WebDAV `If` header (RFC 4918 10.4), parsed into the lists the locks service
//! evaluates.
//!
//! ```text
//! If = 1*No-tag-list | 1*Tagged-list
//! Tagged-list = Resource-Tag 1*List        List = "(" 1*Condition ")"
//! Condition = ["Not"] ( State-token | "[" entity-tag "]" )
//! ```
//! A list holds when all its conditions hold; the header holds when any list holds.
//! Tags naming another server can never hold: their lists become a condition that is
//! always false.

use crate::http::paths::BasePath;
use kubedav_api::locks::{Condition, ConditionList, TaggedLists, condition};

/// A state token that names no lock, so a positive condition on it never holds.
pub const NO_LOCK: &str = "DAV:no-lock";

/// Parses an `If` header value. `host` is the request's Host, for absolute tags; `base`
/// the gateway's base path, which a tag naming one of its resources starts with.
pub fn parse(value: &str, host: &str, base: &BasePath) -> Result<Vec<TaggedLists>, String> {
    let mut rest = value.trim_start();
    let mut out: Vec<TaggedLists> = Vec::new();
    let mut tagged: Option<bool> = None;
    while !rest.is_empty() {
        let is_tag = rest.starts_with('<');
        if is_tag {
            let (url, after) = take_until(&rest[1..], '>').ok_or("a resource tag is missing its '>'")?;
            if tagged == Some(false) {
                return Err("tagged and untagged lists cannot be mixed".into());
            }
            tagged = Some(true);
            let path = tag_path(url, host, base);
            out.push(TaggedLists {
                path: path.clone().unwrap_or_default(),
                untagged: false,
                lists: Vec::new(),
            });
            rest = after.trim_start();
            if !rest.starts_with('(') {
                return Err("a resource tag must be followed by a list".into());
            }
            if path.is_none() {
                // Another server's resource: its lists never hold.
                out.last_mut().expect("just pushed").path = "\0".into();
            }
            continue;
        }
        if !rest.starts_with('(') {
            return Err(format!(
                "unexpected text at '{}'",
                rest.chars().take(20).collect::<String>()
            ));
        }
        if tagged.is_none() {
            tagged = Some(false);
            out.push(TaggedLists {
                path: String::new(),
                untagged: true,
                lists: Vec::new(),
            });
        }
        let (list, after) = parse_list(&rest[1..])?;
        let current = out.last_mut().expect("a resource entry exists");
        if current.path == "\0" {
            current.lists.push(ConditionList {
                conditions: vec![state(false, NO_LOCK)],
            });
        } else {
            current.lists.push(list);
        }
        rest = after.trim_start();
    }
    if out.is_empty() {
        return Err("the header holds no list".into());
    }
    for resource in &mut out {
        if resource.path == "\0" {
            resource.path = String::new();
            resource.untagged = false;
        }
    }
    Ok(out)
}

fn state(not: bool, token: &str) -> Condition {
    Condition {
        not,
        kind: Some(condition::Kind::StateToken(token.to_owned())),
    }
}

fn take_until(s: &str, end: char) -> Option<(&str, &str)> {
    let at = s.find(end)?;
    Some((&s[..at], &s[at + end.len_utf8()..]))
}

/// The volume path of a resource tag; `None` when it names another server (or a path
/// outside `base`).
fn tag_path(url: &str, host: &str, base: &BasePath) -> Option<String> {
    let path = if url.starts_with('/') {
        url.to_owned()
    } else {
        let uri: http::Uri = url.parse().ok()?;
        let authority = uri.authority()?.as_str().to_ascii_lowercase();
        let host = host.to_ascii_lowercase();
        let strip = |a: &str| a.trim_end_matches(":80").trim_end_matches(":443").to_owned();
        if !host.is_empty() && strip(&authority) != strip(&host) {
            return None;
        }
        uri.path().to_owned()
    };
    base.decode(&path).ok().map(|p| p.path.as_str().to_owned())
}

/// Parses conditions up to the closing ')'.
fn parse_list(mut rest: &str) -> Result<(ConditionList, &str), String> {
    let mut conditions = Vec::new();
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix(')') {
            if conditions.is_empty() {
                return Err("a list is empty".into());
            }
            return Ok((ConditionList { conditions }, after));
        }
        let mut not = false;
        if rest.get(..3).is_some_and(|word| word.eq_ignore_ascii_case("not")) {
            not = true;
            rest = rest[3..].trim_start();
        }
        if let Some(after) = rest.strip_prefix('<') {
            let (token, after) = take_until(after, '>').ok_or("a state token is missing its '>'")?;
            if token.is_empty() || token.contains(char::is_whitespace) {
                return Err("a state token must be a URI".into());
            }
            conditions.push(state(not, token));
            rest = after;
        } else if let Some(after) = rest.strip_prefix('[') {
            let (weak, after) = match after.strip_prefix("W/") {
                Some(a) => (true, a),
                None => (false, after),
            };
            let after = after.strip_prefix('"').ok_or("an entity tag must be quoted")?;
            let (tag, after) = take_until(after, '"').ok_or("an entity tag is missing its closing quote")?;
            let after = after
                .trim_start()
                .strip_prefix(']')
                .ok_or("an entity tag is missing its ']'")?;
            let etag = format!("{}\"{tag}\"", if weak { "W/" } else { "" });
            conditions.push(Condition {
                not,
                kind: Some(condition::Kind::Etag(etag)),
            });
            rest = after;
        } else if rest.is_empty() {
            return Err("a list is missing its ')'".into());
        } else {
            return Err("a condition must be a <state-token> or an [entity-tag]".into());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(value: &str, host: &str) -> Result<Vec<TaggedLists>, String> {
        super::parse(value, host, &BasePath::root())
    }

    fn tokens(list: &ConditionList) -> Vec<(bool, String)> {
        list.conditions
            .iter()
            .map(|c| match &c.kind {
                Some(condition::Kind::StateToken(t)) => (c.not, format!("<{t}>")),
                Some(condition::Kind::Etag(e)) => (c.not, format!("[{e}]")),
                None => (c.not, String::new()),
            })
            .collect()
    }

    #[test]
    fn untagged_lists_with_not_and_etags() {
        let parsed = parse(r#"(<urn:uuid:1> ["e1"]) (Not <DAV:no-lock> [W/"e2"])"#, "h").unwrap();
        assert_eq!(parsed.len(), 1);
        assert!(parsed[0].untagged);
        assert_eq!(
            tokens(&parsed[0].lists[0]),
            vec![(false, "<urn:uuid:1>".into()), (false, "[\"e1\"]".into())]
        );
        assert_eq!(
            tokens(&parsed[0].lists[1]),
            vec![(true, "<DAV:no-lock>".into()), (false, "[W/\"e2\"]".into())]
        );
    }

    #[test]
    fn tagged_lists_resolve_to_volume_paths() {
        let parsed = parse(
            "<http://h/a%20b/c> (<urn:uuid:1>) </d/> (NOT <urn:uuid:2>)(<urn:uuid:3>)",
            "h",
        )
        .unwrap();
        assert_eq!(parsed.len(), 2);
        assert_eq!((parsed[0].path.as_str(), parsed[0].untagged), ("a b/c", false));
        assert_eq!(parsed[1].path, "d");
        assert_eq!(parsed[1].lists.len(), 2);
        assert!(parsed[1].lists[0].conditions[0].not);
    }

    #[test]
    fn another_servers_tag_never_holds() {
        let parsed = parse("<http://elsewhere/x> (Not <urn:uuid:1>)", "h").unwrap();
        assert_eq!(tokens(&parsed[0].lists[0]), vec![(false, format!("<{NO_LOCK}>"))]);
    }

    #[test]
    fn malformed_headers_are_refused() {
        for bad in [
            "",
            "()",
            "(<urn:x>",
            "<urn:x>",
            "(<urn:x>) <http://h/a> (<urn:y>)",
            "<http://h/a> (<urn:x>) (<urn:y>) junk",
            "([unquoted])",
            "([\"open)",
            "(<urn:x> [\"e\")",
            "(Nope)",
            "(<>)",
            "(<urn:a b>)",
            "<http://h/a>",
            "(Nø<urn:a>)", // found by fuzzing: a multi-byte character where "Not" may start
        ] {
            assert!(parse(bad, "h").is_err(), "{bad:?}");
        }
    }
}
