//! The policy of the issue's example, decided for each kind of principal, and the
//! policies that must be refused when they load, each with a message naming what to fix.

use kubedav_api::path::VolumePath;
use kubedav_policy::{Access, LinkCap, Permission, Policy, PolicyError, QuotaRoot};

const EXAMPLE: &str = r#"
homes: /home/{user}
admins: [root]
groups:
  staff: [alice, bob]
rules:
  - path: /projects/apollo
    grant: {"group:staff": write, "user:carol": read, "user:alice": manage}
    links: off
  - path: /public
    grant: {"*": read}
quota:
  homes: 10GiB
  paths: {/projects/apollo: 100GiB}
"#;

fn path(p: &str) -> VolumePath {
    VolumePath::parse(p).unwrap()
}

fn access(policy: &Policy, user: &str, groups: &[&str], p: &str) -> Access {
    policy.access(&policy.subject(user, groups), &path(p))
}

use Access::{Granted, Hidden, Passable};
use Permission::{Manage, Read, Write};

#[test]
fn each_principal_sees_what_it_is_granted_and_the_way_to_it() {
    let policy = Policy::from_yaml(EXAMPLE).unwrap();
    let cases: &[(&str, &[&str], &str, Access)] = &[
        // alice: her home, apollo to manage, the public space; the ways to them.
        ("alice", &[], "", Passable),
        ("alice", &[], "home", Passable),
        ("alice", &[], "home/alice", Granted(Manage)),
        ("alice", &[], "home/alice/deep/er/file.txt", Granted(Manage)),
        ("alice", &[], "home/bob", Hidden),
        ("alice", &[], "home/bob/file.txt", Hidden),
        ("alice", &[], "projects", Passable),
        ("alice", &[], "projects/apollo", Granted(Manage)),
        ("alice", &[], "projects/apollo/plans/v2.md", Granted(Manage)),
        ("alice", &[], "projects/gemini", Hidden),
        ("alice", &[], "public/readme.txt", Granted(Read)),
        ("alice", &[], "elsewhere", Hidden),
        // bob is staff: write in apollo.
        ("bob", &[], "projects/apollo/x", Granted(Write)),
        // carol reads apollo.
        ("carol", &[], "projects", Passable),
        ("carol", &[], "projects/apollo", Granted(Read)),
        ("carol", &[], "home/carol", Granted(Manage)),
        // dave is nobody in particular.
        ("dave", &[], "projects", Hidden),
        ("dave", &[], "projects/apollo", Hidden),
        ("dave", &[], "public", Granted(Read)),
        ("dave", &[], "", Passable),
        // eve is staff by her identity provider's word.
        ("eve", &["staff"], "projects/apollo/x", Granted(Write)),
        // root administers everything.
        ("root", &[], "home/alice/private.txt", Granted(Manage)),
        ("root", &[], "elsewhere", Granted(Manage)),
        // Nobody authenticated reads nothing, not even what * may read.
        ("", &[], "public", Hidden),
        ("", &[], "", Hidden),
    ];
    for (user, groups, p, expected) in cases {
        assert_eq!(access(&policy, user, groups, p), *expected, "{user} on /{p}");
    }
}

#[test]
fn a_decision_says_what_made_it() {
    let policy = Policy::from_yaml(EXAMPLE).unwrap();
    let by = |user: &str, p: &str| {
        let p = path(p);
        policy
            .decide(&policy.subject(user, &[] as &[&str]), &p)
            .by
            .to_string()
    };
    assert_eq!(by("carol", "projects/apollo/x"), "rule /projects/apollo");
    assert_eq!(by("alice", "home/bob/x"), "home of bob");
    assert_eq!(by("root", "x"), "admins");
    assert_eq!(by("dave", "x"), "no rule");
}

#[test]
fn named_paths_stay_put_and_carry_quota_and_link_caps() {
    let policy = Policy::from_yaml(EXAMPLE).unwrap();
    for fixed in ["", "projects", "projects/apollo", "public", "home", "home/alice"] {
        assert!(policy.is_fixed(&path(fixed)), "/{fixed}");
    }
    for free in [
        "home/alice/docs",
        "projects/apollo/x",
        "projects/gemini",
        "elsewhere",
    ] {
        assert!(!policy.is_fixed(&path(free)), "/{free}");
    }
    assert_eq!(
        policy.quota_root(&path("home/alice/a/b")),
        Some(QuotaRoot {
            path: path("home/alice"),
            limit: 10 << 30
        })
    );
    assert_eq!(
        policy.quota_root(&path("projects/apollo/x")),
        Some(QuotaRoot {
            path: path("projects/apollo"),
            limit: 100 << 30
        })
    );
    assert_eq!(policy.quota_root(&path("public/x")), None);
    assert_eq!(policy.link_cap(&path("projects/apollo/x")), LinkCap::Off);
    assert_eq!(policy.link_cap(&path("public/x")), LinkCap::Write);
    assert!(policy.members_inherit(&path("projects/apollo")));
    assert!(policy.members_inherit(&path("home/alice")));
    assert!(!policy.members_inherit(&path("projects")));
    assert!(!policy.members_inherit(&path("home")));
    let named: Vec<&str> = policy.named_paths().iter().map(|p| p.as_str()).collect();
    assert_eq!(named, ["home", "projects/apollo", "public"]);
}

#[test]
fn rules_inside_homes_and_deeper_rules_take_over() {
    let policy = Policy::from_yaml(
        r#"
homes: /home/{user}
rules:
  - path: /home/bob/shared
    grant: {"user:bob": manage, "user:alice": read}
  - path: /teams
    grant: {"*": read, "group:leads": write}
  - path: /teams/leads-only
    grant: {"group:leads": write}
groups:
  leads: [lena]
"#,
    )
    .unwrap();
    assert_eq!(access(&policy, "bob", &[], "home/bob"), Granted(Manage));
    assert_eq!(access(&policy, "alice", &[], "home/bob"), Passable);
    assert_eq!(
        access(&policy, "alice", &[], "home/bob/shared/doc"),
        Granted(Read)
    );
    assert_eq!(access(&policy, "alice", &[], "home/bob/other"), Hidden);
    assert_eq!(access(&policy, "dave", &[], "teams/x"), Granted(Read));
    assert_eq!(access(&policy, "dave", &[], "teams/leads-only"), Hidden);
    assert_eq!(access(&policy, "lena", &[], "teams/leads-only/x"), Granted(Write));
    assert!(policy.is_fixed(&path("home/bob/shared")));
}

fn refused(yaml: &str) -> String {
    match Policy::from_yaml(yaml) {
        Ok(_) => panic!("accepted:\n{yaml}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_name_hidden_from_those_who_may_write_beside_it_is_refused() {
    let message = refused(
        r#"
groups: {staff: [alice, bob]}
rules:
  - path: /projects/apollo
    grant: {"group:staff": write}
  - path: /projects/apollo/secret
    grant: {"user:alice": write}
"#,
    );
    assert!(
        message.contains(
            "rule /projects/apollo/secret is hidden from group:staff, who may write rule /projects/apollo"
        ),
        "{message}"
    );
    let message = refused("homes: /home/{user}\nrules:\n  - path: /home\n    grant: {\"*\": write}\n");
    assert!(
        message.contains("home /home/{user} is hidden from *"),
        "{message}"
    );
    let message = refused(
        "homes: /home/{user}\nrules:\n  - path: /home/bob/private\n    grant: {\"user:alice\": read}\n",
    );
    assert!(message.contains("hidden from user:bob"), "{message}");
    // Reading beside it is no way to create it: allowed.
    Policy::from_yaml(
        r#"
rules:
  - path: /projects
    grant: {"*": read}
  - path: /projects/secret
    grant: {"user:alice": write}
"#,
    )
    .unwrap();
}

#[test]
fn mistakes_are_refused_with_what_to_fix() {
    let cases: &[(&str, &str)] = &[
        (
            "rules:\n  - path: /a\n    grant: {alice: read}\n",
            "write user:ID, group:NAME or *",
        ),
        (
            "rules:\n  - path: /a\n    grant: {\"user:alice\": admin}\n",
            "not valid",
        ),
        ("rules:\n  - path: a\n", "must start with /"),
        ("rules:\n  - path: /a/../b\n", "'.' and '..'"),
        ("rules:\n  - path: /.kubedav-x\n", "reserved"),
        ("rules:\n  - path: /a\n  - path: /a/\n", "two rules name /a/"),
        ("homes: /home\n", "must end in /{user}"),
        ("homes: /{user}/files/{user}\n", "only as its last segment"),
        ("homes: /home/{user}\nquota:\n  homes: 10 gigs\n", "is not a size"),
        ("quota:\n  homes: 10GiB\n", "there are no homes"),
        ("quota:\n  paths: {/a: lots}\n", "is not a size"),
        ("rule:\n  - path: /a\n", "not valid"),
        ("homes: [1, 2]\n", "not valid"),
    ];
    for (yaml, expected) in cases {
        let message = refused(yaml);
        assert!(message.contains(expected), "{yaml}: {message}");
    }
    assert!(matches!(
        Policy::from_yaml("rules:\n  - path: /a\n  - path: /a\n"),
        Err(PolicyError::DuplicateRule(_))
    ));
}

#[test]
fn an_empty_policy_grants_nothing_but_to_admins() {
    let policy = Policy::from_yaml("").unwrap();
    assert_eq!(access(&policy, "alice", &[], ""), Hidden);
    let policy = Policy::from_yaml("admins: [root]").unwrap();
    assert_eq!(access(&policy, "root", &[], "x"), Granted(Manage));
}

#[test]
fn each_user_has_one_home_where_the_template_says() {
    let policy = Policy::from_yaml("homes: /users/{user}\n").unwrap();
    let home = |user: &str| policy.home(&policy.subject(user, &[] as &[&str]));
    assert_eq!(home("alice"), Some(path("users/alice")));
    assert_eq!(home("Zoë"), Some(path("users/Zoë")));
    assert_eq!(home(""), None, "no one's home");
    assert_eq!(home(".."), None);
    assert_eq!(home("a/b"), None);
    let policy = Policy::from_yaml("rules:\n  - path: /a\n").unwrap();
    assert_eq!(policy.home(&policy.subject("alice", &[] as &[&str])), None);
}

#[test]
fn a_path_counts_against_every_quota_root_on_its_way() {
    let policy = Policy::from_yaml(
        "homes: /home/{user}\nquota:\n  homes: 10GiB\n  paths: {/projects: 1TiB, /projects/apollo: 100GiB}\n",
    )
    .unwrap();
    let roots = |p: &str| -> Vec<(String, u64)> {
        policy
            .quota_roots(&path(p))
            .into_iter()
            .map(|root| (root.path.as_str().to_owned(), root.limit))
            .collect()
    };
    assert!(policy.has_quotas());
    assert_eq!(
        roots("home/alice/notes/a.txt"),
        [("home/alice".to_owned(), 10 << 30)]
    );
    assert_eq!(
        roots("projects/apollo/plan.txt"),
        [
            ("projects".to_owned(), 1 << 40),
            ("projects/apollo".to_owned(), 100 << 30)
        ]
    );
    assert_eq!(roots("projects/zeus"), [("projects".to_owned(), 1 << 40)]);
    assert!(roots("public/x").is_empty() && roots("home").is_empty());
    assert!(!Policy::from_yaml("homes: /home/{user}\n").unwrap().has_quotas());
}
