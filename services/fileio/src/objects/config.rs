//! `--storage s3://BUCKET/PREFIX`, and the endpoint, region and credentials from the
//! environment as every AWS tool reads them.

use super::sweep::{DEFAULT_IDLE, Sweep};
use crate::s3::S3Config;

/// A bucket and the prefix served from it.
#[derive(Clone, Debug)]
pub struct Storage {
    /// Where and how to reach the bucket.
    pub s3: S3Config,
    /// The served prefix (`""` for the whole bucket).
    pub prefix: String,
    /// When an incomplete multipart upload counts as abandoned.
    pub sweep: Sweep,
}

/// The storage `--storage` names, with the environment read through `env`:
/// `AWS_ENDPOINT_URL` (or `AWS_ENDPOINT_URL_S3`), `AWS_REGION` (or
/// `AWS_DEFAULT_REGION`), `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
/// `AWS_SESSION_TOKEN` and `AWS_CA_BUNDLE`.
pub fn parse(storage: &str, env: impl Fn(&str) -> Option<String>) -> Result<Storage, String> {
    let location: Location = storage.parse().map_err(|e| format!("--storage {storage} {e}"))?;
    from_env(&location, env)
}

/// What `--storage s3://BUCKET/PREFIX` names: a bucket and the prefix served from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Location {
    /// The bucket.
    pub bucket: String,
    /// The served prefix, without leading or trailing slashes (`""` for the whole
    /// bucket).
    pub prefix: String,
}

impl std::str::FromStr for Location {
    type Err = String;

    /// `s3://BUCKET` or `s3://BUCKET/PREFIX`; the error says what is wrong, after the
    /// value (`--storage /srv is not ...`).
    fn from_str(storage: &str) -> Result<Self, String> {
        let rest = storage
            .strip_prefix("s3://")
            .ok_or("is not an s3://BUCKET/PREFIX URL (for a directory, use --root DIR)")?;
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err("names no bucket: write s3://BUCKET or s3://BUCKET/PREFIX".into());
        }
        Ok(Self {
            bucket: bucket.to_owned(),
            prefix: prefix.trim_matches('/').to_owned(),
        })
    }
}

/// The storage at `location`, with the endpoint, region and credentials read through
/// `env` as [`parse`] reads them.
pub fn from_env(location: &Location, env: impl Fn(&str) -> Option<String>) -> Result<Storage, String> {
    let var = |name: &str| env(name).filter(|value| !value.is_empty());
    let region = var("AWS_REGION")
        .or_else(|| var("AWS_DEFAULT_REGION"))
        .unwrap_or_else(|| "us-east-1".to_owned());
    let endpoint = var("AWS_ENDPOINT_URL_S3")
        .or_else(|| var("AWS_ENDPOINT_URL"))
        .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
    let endpoint: url::Url = endpoint
        .parse()
        .map_err(|e| format!("AWS_ENDPOINT_URL {endpoint} is not a URL: {e}"))?;
    let missing = |name: &str| format!("--storage s3:// needs {name} in the environment");
    let access_key = var("AWS_ACCESS_KEY_ID").ok_or_else(|| missing("AWS_ACCESS_KEY_ID"))?;
    let secret_key = var("AWS_SECRET_ACCESS_KEY").ok_or_else(|| missing("AWS_SECRET_ACCESS_KEY"))?;
    // AWS itself takes virtual-hosted names; every other S3 server is addressed by path,
    // unless KUBEDAV_S3_PATH_STYLE says otherwise.
    let path_style = match var("KUBEDAV_S3_PATH_STYLE").as_deref() {
        None => !endpoint
            .host_str()
            .is_some_and(|host| host.ends_with(".amazonaws.com")),
        Some("true") => true,
        Some("false") => false,
        Some(other) => {
            return Err(format!(
                "KUBEDAV_S3_PATH_STYLE is {other:?}: write true (BUCKET in the path), false \
                 (BUCKET.host) or leave it unset (false on amazonaws.com, true elsewhere)"
            ));
        }
    };
    Ok(Storage {
        s3: S3Config {
            endpoint,
            bucket: location.bucket.clone(),
            region,
            access_key,
            secret_key,
            session_token: var("AWS_SESSION_TOKEN"),
            path_style,
            ca_bundle: var("AWS_CA_BUNDLE").map(Into::into),
        },
        prefix: location.prefix.clone(),
        sweep: Sweep { idle: DEFAULT_IDLE },
    })
}

/// Whether `endpoint` is plain HTTP to a host that may be beyond the cluster: anything
/// but a loopback, private or link-local address, `localhost`, a name without a dot (a
/// Service in the same namespace) or a `.svc` / `.cluster.local` name.
pub fn in_the_clear(endpoint: &url::Url) -> bool {
    if endpoint.scheme() != "http" {
        return false;
    }
    let near = match endpoint.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback() || ip.is_private() || ip.is_link_local(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.is_unique_local() || ip.is_unicast_link_local(),
        Some(url::Host::Domain(name)) => {
            let name = name.trim_end_matches('.');
            name == "localhost"
                || !name.contains('.')
                || name.ends_with(".svc")
                || name.ends_with(".cluster.local")
                || name.ends_with(".localhost")
        }
        None => true,
    };
    !near
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "AWS_ENDPOINT_URL" => Some("http://127.0.0.1:7070".into()),
            "AWS_ACCESS_KEY_ID" => Some("key".into()),
            "AWS_SECRET_ACCESS_KEY" => Some("secret".into()),
            _ => None,
        }
    }

    #[test]
    fn a_bucket_and_prefix_with_the_standard_environment() {
        let storage = parse("s3://files/team/a/", env).unwrap();
        assert_eq!(storage.s3.bucket, "files");
        assert_eq!(storage.prefix, "team/a");
        assert_eq!(storage.s3.region, "us-east-1");
        assert!(storage.s3.path_style);
        assert_eq!(parse("s3://files", env).unwrap().prefix, "");
    }

    #[test]
    fn path_style_can_be_set_either_way_and_nothing_else() {
        let with = |value: &'static str| {
            move |name: &str| {
                if name == "KUBEDAV_S3_PATH_STYLE" {
                    Some(value.to_owned())
                } else {
                    env(name)
                }
            }
        };
        assert!(!parse("s3://files", with("false")).unwrap().s3.path_style);
        assert!(parse("s3://files", with("true")).unwrap().s3.path_style);
        let refused = parse("s3://files", with("yes")).err().unwrap();
        assert!(refused.contains("KUBEDAV_S3_PATH_STYLE"), "{refused}");
    }

    #[test]
    fn plain_http_beyond_the_cluster_is_told_apart() {
        let clear = |url: &str| in_the_clear(&url.parse().unwrap());
        for near in [
            "http://127.0.0.1:7070",
            "http://10.0.3.4",
            "http://[::1]:9000",
            "http://minio:9000",
            "http://minio.storage.svc:9000",
            "http://minio.storage.svc.cluster.local",
            "https://s3.example.com",
        ] {
            assert!(!clear(near), "{near}");
        }
        for far in ["http://s3.example.com", "http://203.0.113.9:9000"] {
            assert!(clear(far), "{far}");
        }
    }

    #[test]
    fn mistakes_say_what_to_do() {
        assert!(parse("/srv/data", env).unwrap_err().contains("--root"));
        assert!(parse("s3:///x", env).unwrap_err().contains("no bucket"));
        let no_secret = |name: &str| env(name).filter(|_| name != "AWS_SECRET_ACCESS_KEY");
        assert!(
            parse("s3://b", no_secret)
                .unwrap_err()
                .contains("AWS_SECRET_ACCESS_KEY")
        );
    }
}
