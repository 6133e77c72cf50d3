//! Who the client is: its address, taken from the TCP peer or, when the peer is a
//! trusted proxy (an Ingress controller, a load balancer), from the forwarding headers
//! that proxy wrote.
//!
//! Behind an Ingress every connection comes from the controller, so throttling by the
//! peer's address would throttle every client at once. Forwarding headers are trusted
//! only from the proxies listed in `--trusted-proxies`: any client can write them, and
//! only a proxy that overwrites or appends to them makes them true.
//!
//! `X-Forwarded-For` is read from the right: each proxy appends the address it received
//! the request from, so the rightmost address that is not itself a trusted proxy is the
//! first one a trusted proxy vouches for; anything to its left was written by the client
//! and is ignored. Without `X-Forwarded-For`, the `for=` parameters of `Forwarded`
//! (RFC 7239) are read the same way.

use http::HeaderMap;
use std::net::{IpAddr, Ipv6Addr};
use std::str::FromStr;

/// One network in CIDR notation (`10.0.0.0/8`, `fd00::/8`, or one address).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Whether `ip` lies in this network (an IPv4-mapped IPv6 address counts as IPv4).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.network, canonical(ip)) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network = IpAddr::from_str(address)
            .map_err(|_| format!("'{text}' is not an address or a network like 10.0.0.0/8"))?;
        let network = canonical(network);
        let most = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => most,
            Some(prefix) => prefix
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= most)
                .ok_or_else(|| format!("'{text}': the prefix length must be 0 to {most}"))?,
        };
        Ok(Cidr { network, prefix })
    }
}

/// The proxies whose forwarding headers are believed.
#[derive(Clone, Debug, Default)]
pub struct TrustedProxies(Vec<Cidr>);

impl TrustedProxies {
    /// The networks of a comma-separated list (`10.0.0.0/8,192.168.1.7`).
    pub fn parse(list: &str) -> Result<Self, String> {
        list.split(',')
            .filter(|part| !part.trim().is_empty())
            .map(Cidr::from_str)
            .collect::<Result<Vec<_>, _>>()
            .map(TrustedProxies)
    }

    /// Whether none is trusted.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `ip` is a trusted proxy.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.0.iter().any(|cidr| cidr.contains(ip))
    }

    /// The client's address for a request that came from `peer`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        self.resolve(peer, headers).0
    }

    /// [`TrustedProxies::client`], and whether `peer` is a trusted proxy (whose
    /// `X-Forwarded-Proto` is then believed): one look at the list for both.
    pub fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> (IpAddr, bool) {
        let peer = canonical(peer);
        if !self.contains(peer) {
            return (peer, false);
        }
        (self.forwarded_client(peer, headers), true)
    }

    /// The client a trusted proxy `peer` names in the forwarding headers.
    fn forwarded_client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut hops = forwarded_hops(headers);
        let mut client = peer;
        // From the right: skip our own proxies; the first other address is the client.
        while let Some(hop) = hops.pop() {
            match hop {
                Some(ip) if self.contains(ip) => client = ip,
                Some(ip) => return ip,
                // An address the proxy could not or would not give ("unknown", an
                // obfuscated name): nothing further left is believable.
                None => return client,
            }
        }
        client
    }
}

/// The addresses a request passed through, leftmost first, from `X-Forwarded-For`, or
/// else from the `for=` parameters of `Forwarded`; `None` for a hop that is not an
/// address.
fn forwarded_hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let xff: Vec<Option<IpAddr>> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|hop| hop_address(hop.trim()))
        .collect();
    if !xff.is_empty() {
        return xff;
    }
    headers
        .get_all(http::header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|element| {
            element.split(';').find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                name.trim()
                    .eq_ignore_ascii_case("for")
                    .then(|| hop_address(value.trim().trim_matches('"')))
            })
        })
        .collect()
}

/// The address of one hop: `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1` or
/// `[2001:db8::1]:4711`.
fn hop_address(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = IpAddr::from_str(hop) {
        return Some(canonical(ip));
    }
    if let Some(rest) = hop.strip_prefix('[') {
        let (inside, _) = rest.split_once(']')?;
        return Ipv6Addr::from_str(inside)
            .ok()
            .map(|ip| canonical(IpAddr::V6(ip)));
    }
    let (address, port) = hop.rsplit_once(':')?;
    port.parse::<u16>().ok()?;
    std::net::Ipv4Addr::from_str(address).ok().map(IpAddr::V4)
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The key an address is counted under for per-address limits: the address itself for
/// IPv4, its /64 network for IPv6 (one subscriber gets a whole /64, so counting single
/// IPv6 addresses would let one client count as 2^64).
pub fn limit_key(ip: IpAddr) -> IpAddr {
    match canonical(ip) {
        IpAddr::V6(v6) => IpAddr::V6(Ipv6Addr::from(u128::from(v6) & (u128::MAX << 64))),
        v4 => v4,
    }
}

/// Whether the client reached kubedav over TLS, as a trusted proxy says
/// (`X-Forwarded-Proto: https`, or `proto=https` in `Forwarded`); a request that did not
/// come through a trusted proxy came over plain HTTP, which is all kubedav speaks.
pub fn forwarded_https<B>(request: &http::Request<B>) -> bool {
    if request
        .extensions()
        .get::<crate::request::FromTrustedProxy>()
        .is_none()
    {
        return false;
    }
    let headers = request.headers();
    if let Some(proto) = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()) {
        return proto
            .rsplit(',')
            .next()
            .is_some_and(|p| p.trim().eq_ignore_ascii_case("https"));
    }
    headers
        .get_all(http::header::FORWARDED)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .any(|(name, value)| {
            name.eq_ignore_ascii_case("proto") && value.trim_matches('"').eq_ignore_ascii_case("https")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn networks_parse_and_contain() {
        let trusted = TrustedProxies::parse("10.0.0.0/8, 192.168.1.7 ,fd00::/8").unwrap();
        assert!(trusted.contains(ip("10.1.2.3")));
        assert!(trusted.contains(ip("::ffff:10.1.2.3")), "IPv4-mapped");
        assert!(trusted.contains(ip("192.168.1.7")));
        assert!(!trusted.contains(ip("192.168.1.8")));
        assert!(trusted.contains(ip("fd12::1")));
        assert!(!trusted.contains(ip("fe80::1")));
        assert!(
            TrustedProxies::parse("0.0.0.0/0")
                .unwrap()
                .contains(ip("8.8.8.8"))
        );
        for bad in ["10.0.0.0/33", "fd00::/129", "example.com", "10.0.0.0/x"] {
            assert!(TrustedProxies::parse(bad).is_err(), "{bad}");
        }
        assert!(TrustedProxies::parse("").unwrap().is_empty());
    }

    #[test]
    fn forwarding_headers_count_only_from_trusted_proxies() {
        let trusted = TrustedProxies::parse("127.0.0.1/32,10.0.0.0/8").unwrap();
        let forwarded = headers(&[("x-forwarded-for", "203.0.113.9")]);
        // From an untrusted peer the header is the client's own claim.
        assert_eq!(trusted.client(ip("198.51.100.1"), &forwarded), ip("198.51.100.1"));
        assert_eq!(trusted.client(ip("127.0.0.1"), &forwarded), ip("203.0.113.9"));
        // Whether the peer is a proxy whose X-Forwarded-Proto is believed.
        assert!(trusted.resolve(ip("127.0.0.1"), &forwarded).1);
        assert!(!trusted.resolve(ip("198.51.100.1"), &forwarded).1);
        // The client wrote the leftmost entries; the proxies appended the rest.
        let spoofed = headers(&[("x-forwarded-for", "1.2.3.4, 203.0.113.9, 10.0.0.5")]);
        assert_eq!(trusted.client(ip("10.0.0.7"), &spoofed), ip("203.0.113.9"));
        // Several header lines are one list.
        let split = headers(&[
            ("x-forwarded-for", "1.2.3.4"),
            ("x-forwarded-for", "203.0.113.9:5555"),
        ]);
        assert_eq!(trusted.client(ip("127.0.0.1"), &split), ip("203.0.113.9"));
        // Only proxies: the leftmost of them.
        let inside = headers(&[("x-forwarded-for", "10.0.0.9, 10.0.0.5")]);
        assert_eq!(trusted.client(ip("127.0.0.1"), &inside), ip("10.0.0.9"));
        // Nothing believable past a hop that is not an address.
        let unknown = headers(&[("x-forwarded-for", "1.2.3.4, unknown, 10.0.0.5")]);
        assert_eq!(trusted.client(ip("127.0.0.1"), &unknown), ip("10.0.0.5"));
        // No header: the proxy itself.
        assert_eq!(
            trusted.client(ip("127.0.0.1"), &HeaderMap::new()),
            ip("127.0.0.1")
        );
    }

    #[test]
    fn rfc_7239_forwarded_is_read_without_x_forwarded_for() {
        let trusted = TrustedProxies::parse("127.0.0.1").unwrap();
        let forwarded = headers(&[(
            "forwarded",
            r#"for=192.0.2.43;proto=https, For="[2001:db8:cafe::17]:4711";by=127.0.0.1"#,
        )]);
        assert_eq!(
            trusted.client(ip("127.0.0.1"), &forwarded),
            ip("2001:db8:cafe::17")
        );
        let obfuscated = headers(&[("forwarded", "for=_hidden")]);
        assert_eq!(trusted.client(ip("127.0.0.1"), &obfuscated), ip("127.0.0.1"));
    }

    #[test]
    fn ipv6_clients_are_limited_per_64() {
        assert_eq!(limit_key(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(limit_key(ip("2001:db8:1:2:bbbb::9")), ip("2001:db8:1:2::"));
        assert_eq!(limit_key(ip("::ffff:192.0.2.1")), ip("192.0.2.1"));
        assert_eq!(limit_key(ip("192.0.2.1")), ip("192.0.2.1"));
    }
}
