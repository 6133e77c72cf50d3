//! Redis behind Sentinel (docs/deploy.md, "Redis with Sentinel"): a URL that names the
//! Sentinels and the master's name, and the client of whichever server they call master
//! now. After a failover the old master's address refuses connections or answers
//! READONLY, and [`super::Redis`] asks the Sentinels again.
//!
//! `redis+sentinel://[user:password@]host:port[,host:port…]/MASTER[/DB]`: the user and
//! password (percent-encoded, as in a `redis://` URL) are sent to the master and to the
//! Sentinels alike, as bitnami's and Valkey's charts set them up. The master's name is
//! percent-decoded too; an `@` in it must be written `%40` (the credentials end at the
//! last `@`, since a password may hold one).

use ::redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use ::redis::{ConnectionAddr, ErrorKind, RedisError, RedisResult};
use percent_encoding::percent_decode_str;

/// The scheme of a Sentinel URL.
pub(super) const SCHEME: &str = "redis+sentinel://";

/// What a Sentinel URL says.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct SentinelUrl {
    /// The Sentinels' addresses.
    pub(super) sentinels: Vec<(String, u16)>,
    /// The name the Sentinels monitor the master by.
    pub(super) master: String,
    /// The database.
    pub(super) db: i64,
    /// Who connects, if the servers ask (Redis 6's ACL user).
    pub(super) username: Option<String>,
    /// The password, if the servers ask for one.
    pub(super) password: Option<String>,
}

/// `url` as a Sentinel URL; the error says what is wrong, never with the password.
pub(super) fn parse(url: &str) -> Result<SentinelUrl, String> {
    let rest = url
        .strip_prefix(SCHEME)
        .ok_or_else(|| format!("a Sentinel URL begins with {SCHEME}"))?;
    // The password may hold '@' and '/', the hosts neither.
    let (credentials, rest) = match rest.rsplit_once('@') {
        Some((credentials, rest)) => (Some(credentials), rest),
        None => (None, rest),
    };
    let (hosts, path) = rest.split_once('/').unwrap_or((rest, ""));
    let sentinels = hosts
        .split(',')
        .map(|host| {
            let (name, port) = host.rsplit_once(':').unwrap_or((host, "26379"));
            match (name.is_empty(), port.parse::<u16>()) {
                (false, Ok(port)) => Ok((name.to_owned(), port)),
                _ => Err(format!(
                    "{host:?} is not a Sentinel's host:port (as in {SCHEME}s1:26379,s2:26379/mymaster)"
                )),
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let master = segments.next().ok_or_else(|| {
        format!("a Sentinel URL names the master after the hosts: {SCHEME}s1:26379/mymaster")
    })?;
    let db = match segments.next() {
        Some(db) => db
            .parse::<i64>()
            .map_err(|_| format!("{db:?} is not a database number (as in {SCHEME}s1:26379/mymaster/0)"))?,
        None => 0,
    };
    if segments.next().is_some() {
        return Err(format!(
            "a Sentinel URL ends with MASTER or MASTER/DB: {SCHEME}s1:26379/mymaster/0"
        ));
    }
    let decoded = |text: &str| {
        percent_decode_str(text)
            .decode_utf8()
            .map(|text| text.into_owned())
            .map_err(|_| "the user or password is not UTF-8 once percent-decoded".to_owned())
    };
    let (username, password) = match credentials {
        None => (None, None),
        Some(credentials) => {
            let (user, password) = credentials.split_once(':').unwrap_or((credentials, ""));
            let user = Some(decoded(user)?).filter(|u| !u.is_empty());
            let password = Some(decoded(password)?).filter(|p| !p.is_empty());
            (user, password)
        }
    };
    Ok(SentinelUrl {
        sentinels,
        master: decoded(master)?,
        db,
        username,
        password,
    })
}

/// The Sentinels of one master, asked one at a time.
pub(super) struct Sentinels {
    client: tokio::sync::Mutex<SentinelClient>,
    /// The database, for [`super::Redis::get_db`].
    pub(super) db: i64,
}

impl Sentinels {
    /// The Sentinels `url` names; nothing connects yet.
    pub(super) fn new(url: &SentinelUrl) -> RedisResult<Self> {
        let addresses = url
            .sentinels
            .iter()
            .map(|(host, port)| ConnectionAddr::Tcp(host.clone(), *port));
        let mut builder = SentinelClientBuilder::new(addresses, &url.master, SentinelServerType::Master)?
            .set_client_to_redis_db(url.db);
        if let Some(user) = &url.username {
            builder = builder
                .set_client_to_redis_username(user)
                .set_client_to_sentinel_username(user);
        }
        if let Some(password) = &url.password {
            builder = builder
                .set_client_to_redis_password(password)
                .set_client_to_sentinel_password(password);
        }
        Ok(Self {
            client: tokio::sync::Mutex::new(builder.build()?),
            db: url.db,
        })
    }

    /// The Sentinels' client, once no other command is asking them: its
    /// `async_get_client` names the master (checked with ROLE).
    pub(super) async fn ask(&self) -> tokio::sync::MutexGuard<'_, SentinelClient> {
        self.client.lock().await
    }
}

/// Whether `error`, from the server a Sentinel named, says it may be master no more: it
/// went away (I/O), or it answers as a replica (READONLY) or as one cut off from its
/// master (MASTERDOWN).
pub(super) fn master_may_have_moved(error: &RedisError) -> bool {
    use ::redis::ServerErrorKind;
    matches!(
        error.kind(),
        ErrorKind::Io
            | ErrorKind::Server(ServerErrorKind::ReadOnly)
            | ErrorKind::Server(ServerErrorKind::MasterDown)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_sentinels_the_master_and_the_credentials() {
        let url = parse("redis+sentinel://app:p%40ss@w@s1:26379,s2:26380,s3/mymaster/2").unwrap();
        assert_eq!(
            url,
            SentinelUrl {
                sentinels: vec![("s1".into(), 26379), ("s2".into(), 26380), ("s3".into(), 26379)],
                master: "mymaster".into(),
                db: 2,
                username: Some("app".into()),
                password: Some("p@ss@w".into()),
            }
        );
        let plain = parse("redis+sentinel://10.0.0.1:26379/kubedav").unwrap();
        assert_eq!((plain.db, plain.password), (0, None));
        for (bad, says) in [
            ("redis+sentinel://s1:26379", "names the master"),
            ("redis+sentinel://s1:port/m", "host:port"),
            ("redis+sentinel://:s3cret@s1:26379/m/x", "database number"),
            ("redis+sentinel://s1/m/0/extra", "ends with"),
            ("redis://s1/m", "begins with"),
        ] {
            let error = parse(bad).unwrap_err();
            assert!(error.contains(says), "{bad}: {error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
    }
}
