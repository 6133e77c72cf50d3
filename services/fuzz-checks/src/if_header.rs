//! Fuzzes the WebDAV `If` header parser (RFC 4918 10.4): any text must parse or be
//! refused with a reason, never panic; what parses names only valid volume paths, holds
//! no empty list, and never grows beyond the header it came from.

use kubedav_api::path::VolumePath;

/// Checks one input: returns when every property holds, panics naming the one that
/// does not.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // The first line is the request's Host, the rest the header value.
    let (host, value) = text.split_once('\n').unwrap_or(("example.com", text));
    let base = kubedav_gateway::http::paths::BasePath::root();
    match kubedav_gateway::dav::ifheader::parse(value, host, &base) {
        Ok(resources) => {
            assert!(!resources.is_empty(), "an accepted header holds a list");
            let conditions: usize = resources
                .iter()
                .flat_map(|r| &r.lists)
                .map(|l| l.conditions.len())
                .sum();
            assert!(conditions <= value.len(), "more conditions than bytes");
            for resource in &resources {
                assert!(!resource.lists.is_empty(), "a resource without a list");
                assert!(
                    resource.lists.iter().all(|l| !l.conditions.is_empty()),
                    "an empty list"
                );
                if !resource.untagged && !resource.path.is_empty() {
                    VolumePath::parse(&resource.path).expect("a tag's path is a volume path");
                }
            }
        }
        Err(reason) => assert!(!reason.is_empty(), "a refusal says why"),
    }
}
