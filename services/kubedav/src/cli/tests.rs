//! The command line: flags, their variables and defaults, and the typed values a typo
//! fails at start.

use super::values::ServiceUrl;
use super::*;
use clap::CommandFactory;

#[test]
fn connection_threads_default_to_the_cpus_in_one_process_and_in_a_gateway() {
    let threads = |args: &[&str]| {
        Cli::try_parse_from([&["kubedav"], args].concat())
            .unwrap()
            .gateway_config()
            .http_threads
    };
    let cpus = kubedav_gateway::edge::threads::default_count();
    assert_eq!(threads(&["--target=all"]), cpus);
    assert_eq!(threads(&["--target=gateway"]), cpus);
    assert_eq!(threads(&["--target=gateway", "--http-threads", "3"]), 3);
    assert_eq!(threads(&["--target=all", "--http-threads", "0"]), 0);
}

#[test]
fn every_flag_has_an_env_var() {
    for arg in Cli::command().get_arguments() {
        let id = arg.get_id().as_str();
        if matches!(id, "help" | "version" | "command") {
            continue;
        }
        let expected = format!("KUBEDAV_{}", id.to_uppercase());
        let env = arg.get_env().map(|e| e.to_string_lossy().into_owned());
        assert!(
            env.as_deref() == Some(expected.as_str())
                || (id == "header_read_timeout_seconds" && env.is_some()),
            "--{id} reads {env:?}, expected {expected}"
        );
    }
}

/// Every long flag of the command line before its flags were grouped (issue 50), with
/// its default as clap holds it: the grouping renamed, dropped and re-defaulted none.
/// (`--grpc-listen`, `--admin-listen` and `--auth-workers` default per target or per
/// machine, as their help says.)
const FLAGS: [(&str, Option<&str>); 102] = [
    ("target", Some("all")),
    ("listen", Some("127.0.0.1:8080")),
    ("grpc-listen", None),
    ("admin-listen", None),
    ("root", Some("./data")),
    ("storage", None),
    ("abandoned-upload-seconds", Some("3600")),
    ("upload-expiry-hours", Some("24")),
    ("uploads-per-user", Some("100")),
    ("trash-retention-days", Some("30")),
    ("versions-max", Some("10")),
    ("versions-retention-days", Some("30")),
    ("quota-bytes", None),
    ("quota-rescan-seconds", Some("300")),
    ("io-uring-scans", Some("false")),
    ("durability", Some("fsync")),
    ("file-cache-mib", Some("16")),
    ("rpc-timeout-seconds", Some("30")),
    ("gateway-cache-mib", Some("16")),
    ("gateway-cache-freshness-ms", Some("1000")),
    ("gateway-cache-dir", None),
    ("fileio-url", Some("http://127.0.0.1:9091")),
    ("fileio-volume", None),
    ("fileio-incoming", None),
    ("auth-url", Some("")),
    ("users-file", None),
    ("allow-plaintext-passwords", None),
    ("auth-cache-ttl-seconds", Some("60")),
    ("auth-workers", None),
    ("auth-queue", Some("64")),
    ("auth-max-failures", Some("5")),
    ("auth-max-failures-per-address", Some("20")),
    ("auth-lockout-seconds", Some("30")),
    ("auth-cache-redis", Some("")),
    ("auth-cache-secret", None),
    ("users-reload-seconds", Some("2")),
    ("auth-realm", Some("kubedav")),
    ("anonymous-read", None),
    ("read-only-users", None),
    ("policy", None),
    ("links", Some("write")),
    ("link-max-bytes", Some("1073741824")),
    ("admins", None),
    ("markdown-max-bytes", Some("16777216")),
    ("markdown-fail-closed", None),
    ("content-signal", None),
    ("base-path", None),
    ("cors-origins", None),
    ("upload-digests", None),
    ("hide-dotfiles", None),
    ("refuse-macos-metadata", None),
    ("markdown-cache-bytes", Some("67108864")),
    ("markdown-prune", Some("nav,footer,aside")),
    ("markdown-content", Some("main")),
    ("markdown-front-matter", None),
    ("markdown-chars-per-token", Some("4")),
    ("markdown-max-depth", Some("256")),
    ("markdown-timeout-seconds", Some("5")),
    ("allow-unauthenticated", None),
    ("oidc-issuer", Some("")),
    ("oidc-audience", None),
    ("oidc-client-id", Some("kubedav")),
    ("oidc-username-claim", Some("sub")),
    ("oidc-groups-claim", Some("groups")),
    ("oidc-user-prefix", Some("oidc-")),
    ("oidc-ca-file", None),
    ("oidc-jwks-refresh-seconds", Some("300")),
    ("oidc-jwks-min-refresh-seconds", Some("10")),
    ("oidc-jwks-max-age-seconds", Some("21600")),
    ("oidc-leeway-seconds", Some("60")),
    ("oidc-client-secret-file", None),
    ("oidc-scopes", Some("openid profile offline_access")),
    ("oidc-account-check-seconds", Some("300")),
    ("session-lifetime-seconds", Some("43200")),
    ("public-url", None),
    ("secret-key", None),
    ("app-password-freshness-ms", Some("500")),
    ("locks-url", Some("http://127.0.0.1:9093")),
    ("markdown-url", Some("http://127.0.0.1:9094")),
    ("max-body-bytes", Some("17179869184")),
    ("max-header-bytes", Some("65536")),
    ("shutdown-delay-seconds", Some("0")),
    ("header-read-timeout-seconds", Some("30")),
    ("max-connections", Some("4096")),
    ("max-connections-per-address", Some("256")),
    ("http-threads", None),
    ("trusted-proxies", Some("")),
    ("grpc-token", None),
    ("max-lock-owner-bytes", Some("4096")),
    ("max-locks-per-principal", Some("1000")),
    ("lock-max-timeout-seconds", Some("3600")),
    ("lock-store", Some("memory")),
    ("redis-prefix", Some("kubedav:")),
    ("redis-ca-file", None),
    ("redis-replica-acks", None),
    ("registry", Some("")),
    ("advertise-address", None),
    ("propfind-depth-infinity", None),
    ("propfind-max-entries", Some("100000")),
    ("log-format", Some("text")),
    ("access-log", None),
    ("audit-log", None),
];

fn arg(long: &str) -> clap::Arg {
    let mut command = Cli::command();
    // As when parsing: switches get their implied default ("false") here.
    command.build();
    command
        .get_arguments()
        .find(|arg| arg.get_long() == Some(long))
        .unwrap_or_else(|| panic!("--{long} is gone"))
        .clone()
}

#[test]
fn every_flag_keeps_its_name_variable_and_default() {
    let command = Cli::command();
    let mut longs: Vec<&str> = command
        .get_arguments()
        .filter_map(|arg| arg.get_long())
        .filter(|long| !matches!(*long, "help" | "version"))
        .collect();
    longs.sort_unstable();
    let mut expected: Vec<&str> = FLAGS.iter().map(|(long, _)| *long).collect();
    expected.sort_unstable();
    assert_eq!(longs, expected);
    for (long, default) in FLAGS {
        let arg = arg(long);
        let env = format!("KUBEDAV_{}", long.replace('-', "_").to_uppercase());
        assert_eq!(arg.get_env(), Some(std::ffi::OsStr::new(&env)), "--{long}");
        let defaults: Vec<String> = arg
            .get_default_values()
            .iter()
            .map(|d| d.to_string_lossy().into_owned())
            .collect();
        let switch = matches!(arg.get_action(), clap::ArgAction::SetTrue);
        match default {
            Some(default) => assert_eq!(defaults, [default], "--{long}"),
            None if switch => assert_eq!(defaults, ["false"], "--{long}"),
            None => assert!(defaults.is_empty(), "--{long} defaults to {defaults:?}"),
        }
    }
}

#[test]
fn help_lists_every_flag_under_its_service() {
    let help = Cli::command().render_long_help().to_string();
    for (long, _) in FLAGS {
        assert!(
            help.contains(&format!("--{long} ")) || help.contains(&format!("--{long}\n")),
            "--{long}"
        );
    }
    let headings = [
        "Serving (every target):",
        "Storage (targets all, fileio):",
        "Gateway (targets all, gateway):",
        "Gateway cache (targets all, gateway):",
        "Calls between services",
        "Replicas and Redis",
        "Locks (targets all, locks):",
        "Authentication",
        "Identity provider (targets all, auth, gateway):",
        "App passwords (targets all, auth):",
        "Markdown for agents",
        "Logs and admin (every target):",
    ];
    let at: Vec<usize> = headings
        .iter()
        .map(|h| help.find(h).unwrap_or_else(|| panic!("no heading {h}")))
        .collect();
    assert!(at.is_sorted(), "headings in order: {at:?}");
    let under = |flag: &str, heading: &str| {
        let flag = help.find(flag).unwrap();
        let heading = help.find(heading).unwrap();
        let next = at
            .iter()
            .copied()
            .filter(|&a| a > heading)
            .min()
            .unwrap_or(help.len());
        assert!(heading < flag && flag < next, "{flag} under {heading}");
    };
    under("--lock-store ", "Locks (targets all, locks):");
    under("--markdown-content ", "Markdown for agents");
    under("--rpc-timeout-seconds ", "Calls between services");
    under("--base-path ", "Gateway (targets all, gateway):");
    under("--storage ", "Storage (targets all, fileio):");
}

fn refused(args: &[&str]) -> String {
    let error = Cli::try_parse_from([&["kubedav"], args].concat())
        .err()
        .unwrap_or_else(|| panic!("{args:?} was taken"));
    assert!(
        matches!(
            error.kind(),
            clap::error::ErrorKind::InvalidValue | clap::error::ErrorKind::ValueValidation
        ),
        "{args:?}: {:?}",
        error.kind()
    );
    error.to_string()
}

fn parsed(args: &[&str]) -> Cli {
    Cli::try_parse_from([&["kubedav"], args].concat()).unwrap()
}

#[test]
fn a_typo_in_an_enumerated_flag_fails_with_the_valid_values() {
    for (args, valid) in [
        (
            &["--target", "gatway"][..],
            "[possible values: all, gateway, fileio, auth, locks, markdown]",
        ),
        (&["--durability", "fsnyc"], "[possible values: fsync, none]"),
        (&["--log-format", "jsn"], "[possible values: text, json]"),
        (&["--markdown-content", "mian"], "[possible values: main, full]"),
        (
            &["--lock-store", "memroy"],
            "expected `memory` or a Redis URL such as redis://",
        ),
        (
            &["--upload-digests", "sha-256,sha3"],
            "is not one of sha-256, sha-512, sha1, md5, adler32",
        ),
    ] {
        let message = refused(args);
        assert!(
            message.contains(&format!("for '--{}", &args[0][2..])),
            "{message}"
        );
        assert!(message.contains(valid), "{args:?}: {message}");
    }
    let convert = Cli::try_parse_from(["kubedav", "convert", "--content", "ful", "page.html"]).unwrap_err();
    assert!(
        convert.to_string().contains("[possible values: main, full]"),
        "{convert}"
    );
}

#[test]
fn a_malformed_structured_value_fails_naming_its_flag() {
    for args in [
        &["--storage", "/srv/data"][..],
        &["--storage", "s3:///prefix"],
        &["--fileio-url", "fileio:9091"],
        &["--locks-url", "http://"],
        &["--auth-url", "htp://auth:9092"],
        &["--markdown-url", "markdown"],
        &["--listen", "127.0.0.1:80800"],
        &["--grpc-listen", "9091"],
        &["--admin-listen", ":9180"],
        &["--advertise-address", "10.0.0.7"],
        &["--base-path", "dav"],
        &["--base-path", "/a/../b"],
        &["--cors-origins", "https://app.example.com/path"],
        &["--cors-origins", "app.example.com"],
        &["--content-signal", "ai-train=no\u{1}"],
        &["--registry", "redis//host"],
        &["--auth-cache-redis", "http://host"],
        &["--lock-store", "redis://h:notaport/0"],
        &["--lock-store", "redis+sentinel://s1:26379,s2:26379"],
        &["--trusted-proxies", "10.0.0.0/33"],
        &["--redis-prefix", "team a:"],
        &["--redis-prefix", "équipe:"],
    ] {
        let message = refused(args);
        assert!(
            message.contains(&format!("for '{}", args[0])),
            "{args:?}: {message}"
        );
    }
    for args in [
        &["ensure-secrets", "--label", "novalue"][..],
        &["ensure-secrets", "--random", "name"],
    ] {
        let error = Cli::try_parse_from([&["kubedav"], args].concat()).unwrap_err();
        assert_eq!(error.kind(), clap::error::ErrorKind::ValueValidation, "{args:?}");
    }
}

#[test]
fn a_redis_password_stays_out_of_the_message() {
    for flag in ["--lock-store", "--registry", "--auth-cache-redis"] {
        let message = refused(&[flag, "redis://user:s3cret@"]);
        assert!(!message.contains("s3cret"), "{message}");
        assert!(message.contains("redis://user:***@"), "{message}");
        let message = refused(&[flag, "redis+sentinel://:s3cr@t@s1:port/m"]);
        assert!(!message.contains("s3cr"), "{message}");
    }
}

#[test]
fn structured_values_are_read_into_their_types() {
    let cli = parsed(&[]);
    assert_eq!(cli.locks.lock_store, LockStore::Memory);
    assert_eq!(cli.remote.auth_url, OrEmpty(None));
    assert_eq!(
        cli.remote.markdown_url.get().map(ServiceUrl::as_str),
        Some("http://127.0.0.1:9094")
    );
    assert_eq!(cli.replicas.registry, OrEmpty(None));
    assert_eq!(cli.markdown.markdown_content, MarkdownContent::Main);
    assert!(cli.gateway_config().base_path.is_root());
    assert!(cli.serve.listen.is_loopback());

    let cli = parsed(&[
        "--lock-store=redis://:pw@redis:6379/0",
        "--registry=redis+unix:///run/redis.sock",
        "--auth-cache-redis=redis+sentinel://:pw@s-0:26379,s-1:26379/mymaster/1",
        "--auth-url=http://auth:9092",
        "--markdown-url=",
        "--storage=s3://files/team/a/",
        "--markdown-content=full",
        "--listen=localhost:0",
        "--advertise-address=fd00::7:9090",
        "--base-path=/dav/",
        "--cors-origins=https://a.example, http://b.example:8080",
        "--content-signal=ai-train=no, search=yes",
    ]);
    let LockStore::Redis(url) = &cli.locks.lock_store else {
        panic!("{:?}", cli.locks.lock_store)
    };
    assert_eq!(url.as_str(), "redis://:pw@redis:6379/0");
    assert_eq!(
        cli.replicas.registry.get().map(RedisUrl::as_str),
        Some("redis+unix:///run/redis.sock")
    );
    assert_eq!(
        cli.auth.auth_cache_redis.get().map(|url| url.to_string()),
        Some("redis+sentinel://:***@s-0:26379,s-1:26379/mymaster/1".to_owned())
    );
    assert_eq!(
        cli.remote.auth_url.get().map(ServiceUrl::as_str),
        Some("http://auth:9092")
    );
    assert_eq!(cli.remote.markdown_url, OrEmpty(None));
    let storage = cli.fileio.storage.as_ref().unwrap();
    assert_eq!(
        (storage.bucket.as_str(), storage.prefix.as_str()),
        ("files", "team/a")
    );
    assert_eq!(cli.markdown.markdown_content, MarkdownContent::Full);
    assert!(cli.serve.listen.is_loopback());
    let config = cli.gateway_config();
    assert_eq!(config.base_path.as_str(), "/dav");
    assert_eq!(
        config.cors_origins,
        ["https://a.example", "http://b.example:8080"]
    );
    assert_eq!(config.content_signal.unwrap(), "ai-train=no, search=yes");
    assert!(!parsed(&["--listen=0.0.0.0:8080"]).serve.listen.is_loopback());
}
