//! The trash and the versions over WebDAV, in process (issue 54): what each principal
//! sees of `{base}/.kubedav/trash/` and `{base}/.kubedav/versions{path}`, and what it
//! may do there. An item keeps the rules of the collection it was deleted from; a
//! version those of its file; everything else answers exactly as absent. (Both run
//! modes, both backends and real clients are `services/kubedav/tests/keep.rs`.)

mod common;

use common::{App, Options};
use http::{Method, StatusCode};
use std::collections::HashMap;

const POLICY: &str = r#"
homes: /home/{user}
admins: [root]
groups:
  staff: [carol, erin]
rules:
  - path: /projects
    grant: {"group:staff": write, "user:dave": read}
quota:
  homes: 1GiB
"#;

const USERS: [&str; 6] = ["alice", "bob", "carol", "dave", "erin", "root"];

fn app(policy: Option<&'static str>) -> App {
    let app = App::with(Options {
        users: if policy.is_some() {
            USERS.iter().map(|u| (*u, "pw")).collect()
        } else {
            Vec::new()
        },
        policy,
        keeping: true,
        ..Options::default()
    });
    for dir in ["home/alice/project", "home/alice/private", "home/bob", "projects"] {
        std::fs::create_dir_all(app.disk(dir)).unwrap();
    }
    app
}

/// What one request got.
struct Answer {
    status: StatusCode,
    headers: http::HeaderMap,
    text: String,
}

async fn send(
    app: &App,
    user: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Answer {
    let mut request = app
        .client()
        .request(Method::from_bytes(method.as_bytes()).unwrap(), app.url(path));
    if !user.is_empty() {
        request = request.basic_auth(user, Some("pw"));
    }
    for (name, value) in headers {
        request = request.header(name, value);
    }
    if !body.is_empty() || method == "PUT" {
        request = request.body(body.to_owned());
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    Answer {
        status,
        headers,
        text: response.text().await.unwrap(),
    }
}

/// Each `response` of a multistatus: its href, and its properties' text by local name.
fn responses(xml: &str) -> Vec<(String, HashMap<String, String>)> {
    use quick_xml::events::Event;
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut found: Vec<(String, HashMap<String, String>)> = Vec::new();
    let mut open: Vec<String> = Vec::new();
    let mut text = String::new();
    let local = |name: quick_xml::name::LocalName<'_>| name.into_inner().to_owned();
    loop {
        match reader
            .read_event()
            .unwrap_or_else(|e| panic!("not XML ({e}): {xml}"))
        {
            Event::Start(start) => {
                let name = local(start.local_name());
                if name == "response" {
                    found.push((String::new(), HashMap::new()));
                }
                open.push(name);
                text.clear();
            }
            Event::Empty(empty) => {
                if let Some((_, properties)) = found.last_mut() {
                    properties.entry(local(empty.local_name())).or_default();
                }
            }
            Event::Text(part) => text.push_str(&part.xml10_content()),
            Event::GeneralRef(name) => text.push_str(&format!("&{};", name.xml10_content())),
            Event::End(_) => {
                let name = open.pop().unwrap_or_default();
                if !text.is_empty()
                    && let Some((href, properties)) = found.last_mut()
                {
                    let value = quick_xml::escape::unescape(&text).unwrap().into_owned();
                    if name == "href" {
                        *href = value;
                    } else {
                        properties.insert(name, value);
                    }
                }
                text.clear();
            }
            Event::Eof => break,
            _ => {}
        }
    }
    found
}

/// An item's original location ("" for the trash itself).
fn location(properties: &HashMap<String, String>) -> &str {
    properties
        .get("trashbin-original-location")
        .map_or("", String::as_str)
}

/// The trash items `user` sees: (href, original location).
async fn trash_of(app: &App, user: &str) -> Vec<(String, String)> {
    let listed = send(app, user, "PROPFIND", "/.kubedav/trash/", &[("depth", "1")], "").await;
    assert_eq!(listed.status, StatusCode::MULTI_STATUS, "{}", listed.text);
    responses(&listed.text)
        .into_iter()
        .skip(1)
        .map(|(href, properties)| (href, properties["trashbin-original-location"].clone()))
        .collect()
}

/// The hrefs of the versions `user` sees of alice's diary.
async fn diary_versions(app: &App, user: &str) -> Vec<String> {
    let path = "/.kubedav/versions/home/alice/private/diary.txt";
    let listed = send(app, user, "PROPFIND", path, &[("depth", "1")], "").await;
    assert_eq!(listed.status, StatusCode::MULTI_STATUS, "{}", listed.text);
    responses(&listed.text)
        .into_iter()
        .skip(1)
        .map(|(href, _)| href)
        .collect()
}

/// The href of the item `user` sees deleted from `origin`.
async fn item(app: &App, user: &str, origin: &str) -> String {
    trash_of(app, user)
        .await
        .into_iter()
        .find(|(_, from)| from == origin)
        .unwrap_or_else(|| panic!("{user} sees no item from {origin}"))
        .0
}

#[tokio::test]
async fn a_deleted_file_and_tree_come_back_from_the_trash() {
    let app = app(None);
    std::fs::create_dir_all(app.disk("a/b/c")).unwrap();
    std::fs::write(app.disk("a/b/c/deep.txt"), "deep").unwrap();
    std::fs::write(app.disk("report.txt"), "the report").unwrap();
    assert_eq!(
        send(&app, "", "DELETE", "/report.txt", &[], "").await.status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        send(&app, "", "DELETE", "/a", &[], "").await.status,
        StatusCode::NO_CONTENT
    );

    let listed = send(&app, "", "PROPFIND", "/.kubedav/trash/", &[("depth", "1")], "").await;
    assert_eq!(listed.status, StatusCode::MULTI_STATUS);
    let found = responses(&listed.text);
    assert_eq!(found[0].0, "/.kubedav/trash/");
    assert_eq!(found.len(), 3, "{}", listed.text);
    let file = found.iter().find(|(_, p)| location(p) == "report.txt").unwrap();
    assert_eq!(file.1["trashbin-filename"], "report.txt");
    assert_eq!(file.1["getcontentlength"], "10");
    assert!(file.1["trashbin-deletion-time"].parse::<i64>().unwrap() > 1_700_000_000);
    let tree = found.iter().find(|(_, p)| location(p) == "a").unwrap();
    assert!(
        tree.0.ends_with('/'),
        "a collection's item is a collection: {}",
        tree.0
    );
    assert!(tree.1.contains_key("collection"));
    assert!(
        listed.text.contains("xmlns=\"http://nextcloud.org/ns\""),
        "{}",
        listed.text
    );

    // Asked for by name, as Nextcloud's clients ask.
    let asked = send(
        &app,
        "",
        "PROPFIND",
        "/.kubedav/trash/",
        &[("depth", "1")],
        r#"<d:propfind xmlns:d="DAV:" xmlns:nc="http://nextcloud.org/ns"><d:prop><nc:trashbin-original-location/><nc:trashbin-deletion-time/><d:nothing/></d:prop></d:propfind>"#,
    )
    .await;
    let found = responses(&asked.text);
    assert!(
        found[1].1.contains_key("trashbin-original-location"),
        "{}",
        asked.text
    );
    assert!(!found[1].1.contains_key("trashbin-filename"));
    assert!(
        asked.text.contains("404 Not Found"),
        "an unknown property is 404: {}",
        asked.text
    );

    // Restored where they were: bytes, and the tree whole.
    let restored = send(&app, "", "MOVE", &file.0, &[("destination", "/report.txt")], "").await;
    assert_eq!(restored.status, StatusCode::CREATED, "{}", restored.text);
    assert_eq!(restored.headers["location"], "/report.txt");
    assert_eq!(
        std::fs::read_to_string(app.disk("report.txt")).unwrap(),
        "the report"
    );
    let restored = send(
        &app,
        "",
        "MOVE",
        &tree.0,
        &[("destination", "http://dav.test/a")],
        "",
    )
    .await;
    assert_eq!(restored.status, StatusCode::CREATED, "{}", restored.text);
    assert_eq!(
        std::fs::read_to_string(app.disk("a/b/c/deep.txt")).unwrap(),
        "deep"
    );
    assert!(trash_of(&app, "").await.is_empty());
    let gone = send(&app, "", "MOVE", &file.0, &[("destination", "/again.txt")], "").await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_taken_name_is_replaced_only_when_asked_and_the_replaced_file_is_kept() {
    let app = app(None);
    std::fs::write(app.disk("notes.txt"), "old notes").unwrap();
    send(&app, "", "DELETE", "/notes.txt", &[], "").await;
    std::fs::write(app.disk("notes.txt"), "new notes").unwrap();
    let href = item(&app, "", "notes.txt").await;
    for headers in [
        &[("destination", "/notes.txt")][..],
        &[("destination", "/notes.txt"), ("overwrite", "F")],
    ] {
        let refused = send(&app, "", "MOVE", &href, headers, "").await;
        assert_eq!(
            refused.status,
            StatusCode::PRECONDITION_FAILED,
            "{}",
            refused.text
        );
        assert!(refused.text.contains("Overwrite: T"), "{}", refused.text);
    }
    assert_eq!(
        std::fs::read_to_string(app.disk("notes.txt")).unwrap(),
        "new notes"
    );
    let missing_parent = send(
        &app,
        "",
        "MOVE",
        &href,
        &[("destination", "/no/such/notes.txt")],
        "",
    )
    .await;
    assert_eq!(missing_parent.status, StatusCode::CONFLICT);

    let replaced = send(
        &app,
        "",
        "MOVE",
        &href,
        &[("destination", "/notes.txt"), ("overwrite", "T")],
        "",
    )
    .await;
    assert_eq!(replaced.status, StatusCode::NO_CONTENT, "{}", replaced.text);
    assert_eq!(
        std::fs::read_to_string(app.disk("notes.txt")).unwrap(),
        "old notes"
    );
    let versions = send(
        &app,
        "",
        "PROPFIND",
        "/.kubedav/versions/notes.txt",
        &[("depth", "1")],
        "",
    )
    .await;
    let found = responses(&versions.text);
    assert_eq!(
        found.len(),
        2,
        "the replaced file is a version: {}",
        versions.text
    );
    let kept = send(&app, "", "GET", &found[1].0, &[], "").await;
    assert_eq!(kept.text, "new notes");
}

#[tokio::test]
async fn versions_are_listed_read_and_restored() {
    let app = app(None);
    for text in ["one", "two!", "three"] {
        assert!(
            send(&app, "", "PUT", "/doc.txt", &[], text)
                .await
                .status
                .is_success()
        );
    }
    let listed = send(
        &app,
        "",
        "PROPFIND",
        "/.kubedav/versions/doc.txt",
        &[("depth", "1")],
        "",
    )
    .await;
    assert_eq!(listed.status, StatusCode::MULTI_STATUS, "{}", listed.text);
    let found = responses(&listed.text);
    assert_eq!(found[0].0, "/.kubedav/versions/doc.txt/");
    let versions: Vec<_> = found[1..].to_vec();
    assert_eq!(versions.len(), 2);
    assert_eq!(versions[0].1["getcontentlength"], "3");
    assert_eq!(versions[1].1["getcontentlength"], "4");
    assert!(versions[0].1.contains_key("getlastmodified"));

    let first = send(&app, "", "GET", &versions[0].0, &[], "").await;
    assert_eq!((first.status, first.text.as_str()), (StatusCode::OK, "one"));
    assert!(
        first.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let ranged = send(&app, "", "GET", &versions[1].0, &[("range", "bytes=1-2")], "").await;
    assert_eq!(
        (ranged.status, ranged.text.as_str()),
        (StatusCode::PARTIAL_CONTENT, "wo")
    );

    let elsewhere = send(
        &app,
        "",
        "COPY",
        &versions[0].0,
        &[("destination", "/other.txt")],
        "",
    )
    .await;
    assert_eq!(elsewhere.status, StatusCode::FORBIDDEN);
    let no_overwrite = send(
        &app,
        "",
        "COPY",
        &versions[0].0,
        &[("destination", "/doc.txt"), ("overwrite", "F")],
        "",
    )
    .await;
    assert_eq!(no_overwrite.status, StatusCode::PRECONDITION_FAILED);
    let restored = send(
        &app,
        "",
        "COPY",
        &versions[0].0,
        &[("destination", "/doc.txt")],
        "",
    )
    .await;
    assert_eq!(restored.status, StatusCode::NO_CONTENT, "{}", restored.text);
    assert_eq!(std::fs::read_to_string(app.disk("doc.txt")).unwrap(), "one");
    let listed = send(
        &app,
        "",
        "PROPFIND",
        "/.kubedav/versions/doc.txt",
        &[("depth", "1")],
        "",
    )
    .await;
    let lengths: Vec<String> = responses(&listed.text)[1..]
        .iter()
        .map(|(_, p)| p["getcontentlength"].clone())
        .collect();
    assert_eq!(
        lengths,
        ["3", "4", "5"],
        "the replaced content is the newest version"
    );

    for absent in [
        "/.kubedav/versions/none.txt",
        "/.kubedav/versions/",
        "/.kubedav/versions/doc.txt/00000000000000000001-00",
    ] {
        let answer = send(&app, "", "PROPFIND", absent, &[("depth", "1")], "").await;
        assert_eq!(answer.status, StatusCode::NOT_FOUND, "{absent}: {}", answer.text);
    }
}

/// Every way `user` could reach alice's trash item `href` and her file's versions:
/// each answers as for an item that never existed.
async fn sees_nothing_of_alices(app: &App, user: &str, href: &str) {
    let made_up = "/.kubedav/trash/01764329280123456789-0123456789abcdef";
    for (method, headers) in [
        ("PROPFIND", vec![("depth", "0")]),
        ("MOVE", vec![("destination", "/home/alice/private/diary.txt")]),
        ("DELETE", vec![]),
    ] {
        let hidden = send(app, user, method, href, &headers, "").await;
        let absent = send(app, user, method, made_up, &headers, "").await;
        assert_eq!(
            hidden.status,
            StatusCode::NOT_FOUND,
            "{user} {method} {href}: {}",
            hidden.text
        );
        let id = |p: &str| p.rsplit('/').next().unwrap().to_owned();
        assert_eq!(
            hidden.text.replace(&id(href), "ID"),
            absent.text.replace(&id(made_up), "ID")
        );
    }
    assert!(
        trash_of(app, user)
            .await
            .iter()
            .all(|(_, from)| !from.starts_with("home/alice"))
    );
    for path in [
        "/.kubedav/versions/home/alice/private/diary.txt",
        "/.kubedav/versions/home/alice/private/none.txt",
    ] {
        let hidden = send(app, user, "PROPFIND", path, &[("depth", "1")], "").await;
        assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{user} {path}");
    }
}

#[tokio::test]
async fn an_item_keeps_the_rules_of_where_it_was_deleted_from() {
    let app = app(Some(POLICY));
    let put = |user: &'static str, path: &'static str, text: &'static str| {
        let app = &app;
        async move {
            let answer = send(app, user, "PUT", path, &[], text).await;
            assert!(answer.status.is_success(), "{user} PUT {path}: {}", answer.text);
        }
    };
    put("alice", "/home/alice/private/diary.txt", "dear diary").await;
    put("alice", "/home/alice/private/diary.txt", "dear diary, again").await;
    put("alice", "/home/alice/private/gone.txt", "gone").await;
    put("carol", "/projects/plan.txt", "the plan").await;
    assert_eq!(
        send(&app, "alice", "DELETE", "/home/alice/private/gone.txt", &[], "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    assert_eq!(
        send(&app, "carol", "DELETE", "/projects/plan.txt", &[], "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );

    let alices = item(&app, "alice", "home/alice/private/gone.txt").await;
    assert!(
        !trash_of(&app, "alice")
            .await
            .iter()
            .any(|(_, from)| from == "projects/plan.txt")
    );
    for user in ["bob", "carol", "dave"] {
        sees_nothing_of_alices(&app, user, &alices).await;
    }
    // What was deleted from the project is the project's writers', whoever deleted it.
    let plan = item(&app, "erin", "projects/plan.txt").await;
    assert!(
        trash_of(&app, "dave").await.is_empty(),
        "dave only reads /projects"
    );
    let refused = send(&app, "dave", "DELETE", &plan, &[], "").await;
    assert_eq!(refused.status, StatusCode::NOT_FOUND);
    // The administrator sees everything.
    let everything: Vec<String> = trash_of(&app, "root")
        .await
        .into_iter()
        .map(|(_, from)| from)
        .collect();
    assert!(
        everything.contains(&"home/alice/private/gone.txt".to_owned()),
        "{everything:?}"
    );
    assert!(everything.contains(&"projects/plan.txt".to_owned()));

    // An item is restored within its own quota root: even the administrator takes alice's
    // item out of her home with a MOVE afterwards, held to the destination's quota.
    let across = send(
        &app,
        "root",
        "MOVE",
        &alices,
        &[("destination", "/projects/gone.txt")],
        "",
    )
    .await;
    assert_eq!(across.status, StatusCode::CONFLICT, "{}", across.text);
    assert!(across.text.contains("/home/alice"), "{}", across.text);
    // The root is never a destination.
    let onto_root = send(
        &app,
        "root",
        "MOVE",
        &alices,
        &[("destination", "/"), ("overwrite", "T")],
        "",
    )
    .await;
    assert_eq!(onto_root.status, StatusCode::FORBIDDEN, "{}", onto_root.text);
    assert!(app.disk("projects").exists() && app.disk("home/alice/private/diary.txt").exists());
    // A restore is decided at both ends: erin may not restore into alice's home.
    let into_alices = send(
        &app,
        "erin",
        "MOVE",
        &plan,
        &[("destination", "/home/alice/plan.txt")],
        "",
    )
    .await;
    assert_eq!(
        into_alices.status,
        StatusCode::CONFLICT,
        "alice's home is absent for erin: {}",
        into_alices.text
    );
    let restored = send(
        &app,
        "erin",
        "MOVE",
        &plan,
        &[("destination", "/projects/plan.txt")],
        "",
    )
    .await;
    assert_eq!(restored.status, StatusCode::CREATED, "{}", restored.text);
    // Versions: who reads the file sees them; who may not, nothing.
    let versions = diary_versions(&app, "alice").await;
    assert_eq!(versions.len(), 1, "{versions:?}");
    let version = versions[0].clone();
    for user in ["bob", "carol"] {
        let hidden = send(&app, user, "GET", &version, &[], "").await;
        assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{user}");
        let hidden = send(
            &app,
            user,
            "COPY",
            &version,
            &[("destination", "/home/alice/private/diary.txt")],
            "",
        )
        .await;
        assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{user}");
    }
    // Only an administrator empties a root's trash.
    let refused = send(
        &app,
        "alice",
        "DELETE",
        "/.kubedav/trash/?root=home/alice",
        &[],
        "",
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let emptied = send(
        &app,
        "root",
        "DELETE",
        "/.kubedav/trash/?root=home/alice",
        &[],
        "",
    )
    .await;
    assert_eq!(emptied.status, StatusCode::NO_CONTENT, "{}", emptied.text);
    assert!(trash_of(&app, "alice").await.is_empty());
}

#[tokio::test]
async fn who_deleted_through_a_share_restores_it() {
    let app = app(Some(POLICY));
    let put = send(
        &app,
        "alice",
        "PUT",
        "/home/alice/project/plan.txt",
        &[],
        "the plan",
    )
    .await;
    assert!(put.status.is_success());
    let shared = send(
        &app,
        "alice",
        "POST",
        "/.kubedav/shares",
        &[("x-kubedav-request", "1"), ("content-type", "application/json")],
        r#"{"path": "/home/alice/project", "to": "user:bob", "permission": "write"}"#,
    )
    .await;
    assert_eq!(shared.status, StatusCode::CREATED, "{}", shared.text);
    assert_eq!(
        send(&app, "bob", "DELETE", "/home/alice/project/plan.txt", &[], "")
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    let bobs = item(&app, "bob", "home/alice/project/plan.txt").await;
    assert_eq!(item(&app, "alice", "home/alice/project/plan.txt").await, bobs);
    let restored = send(
        &app,
        "bob",
        "MOVE",
        &bobs,
        &[("destination", "/home/alice/project/plan.txt")],
        "",
    )
    .await;
    assert_eq!(restored.status, StatusCode::CREATED, "{}", restored.text);
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/project/plan.txt")).unwrap(),
        "the plan"
    );
}

/// Who may write nowhere sees no trash: a `--read-only-users` user, an anonymous reader.
#[tokio::test]
async fn who_may_write_nowhere_sees_no_trash() {
    let app = App::with(Options {
        users: vec![("alice", "pw"), ("reader", "pw")],
        keeping: true,
        config: Some(|config| {
            config.read_only_users.insert("reader".to_owned());
        }),
        ..Options::default()
    });
    std::fs::write(app.disk("f.txt"), "f").unwrap();
    send(&app, "alice", "DELETE", "/f.txt", &[], "").await;
    let href = item(&app, "alice", "f.txt").await;
    assert!(trash_of(&app, "reader").await.is_empty());
    let hidden = send(&app, "reader", "PROPFIND", &href, &[("depth", "0")], "").await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    for (method, headers) in [("MOVE", vec![("destination", "/f.txt")]), ("DELETE", vec![])] {
        let refused = send(&app, "reader", method, &href, &headers, "").await;
        assert_eq!(
            refused.status,
            StatusCode::FORBIDDEN,
            "{method}: the edge refuses a read-only user's writes"
        );
    }
    let anonymous = App::with(Options {
        users: vec![("alice", "pw")],
        keeping: true,
        config: Some(|config| config.anonymous_read = true),
        ..Options::default()
    });
    std::fs::write(anonymous.disk("g.txt"), "g").unwrap();
    send(&anonymous, "alice", "DELETE", "/g.txt", &[], "").await;
    assert_eq!(trash_of(&anonymous, "alice").await.len(), 1);
    assert!(
        trash_of(&anonymous, "").await.is_empty(),
        "an anonymous reader sees no trash"
    );
}

#[tokio::test]
async fn a_restore_respects_the_destinations_lock() {
    let app = app(None);
    std::fs::write(app.disk("f.txt"), "f").unwrap();
    send(&app, "", "DELETE", "/f.txt", &[], "").await;
    let href = item(&app, "", "f.txt").await;
    let lock = send(
        &app,
        "",
        "LOCK",
        "/f.txt",
        &[("timeout", "Second-60")],
        r#"<lockinfo xmlns="DAV:"><lockscope><exclusive/></lockscope><locktype><write/></locktype></lockinfo>"#,
    )
    .await;
    assert_eq!(lock.status, StatusCode::CREATED, "{}", lock.text);
    let token = lock.headers["lock-token"].to_str().unwrap().to_owned();
    let refused = send(
        &app,
        "",
        "MOVE",
        &href,
        &[("destination", "/f.txt"), ("overwrite", "T")],
        "",
    )
    .await;
    assert_eq!(refused.status, StatusCode::LOCKED);
    let condition = format!("({token})");
    let allowed = send(
        &app,
        "",
        "MOVE",
        &href,
        &[("destination", "/f.txt"), ("overwrite", "T"), ("if", &condition)],
        "",
    )
    .await;
    assert_eq!(allowed.status, StatusCode::NO_CONTENT, "{}", allowed.text);
    assert_eq!(std::fs::read_to_string(app.disk("f.txt")).unwrap(), "f");
}

#[tokio::test]
async fn a_user_empties_what_it_sees_of_the_trash_and_nothing_else() {
    let app = app(Some(POLICY));
    for user in ["alice", "bob"] {
        let path = format!("/home/{user}/f.txt");
        send(&app, user, "PUT", &path, &[], "f").await;
        send(&app, user, "DELETE", &path, &[], "").await;
    }
    let emptied = send(&app, "alice", "DELETE", "/.kubedav/trash/", &[], "").await;
    assert_eq!(emptied.status, StatusCode::NO_CONTENT);
    assert!(trash_of(&app, "alice").await.is_empty());
    assert_eq!(trash_of(&app, "bob").await.len(), 1);
}

/// A request tried: method, headers, body.
type Attempt<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);

/// What a client can tell of an answer: status, every header but the per-request ones,
/// and the body with `named` written as `as`.
fn told(answer: &Answer, (named, as_): (&str, &str)) -> (StatusCode, Vec<(String, String)>, String) {
    let mut headers: Vec<(String, String)> = answer
        .headers
        .iter()
        .filter(|(name, _)| !matches!(name.as_str(), "date" | "x-request-id"))
        .map(|(n, v)| (n.to_string(), v.to_str().unwrap_or("?").replace(named, as_)))
        .collect();
    headers.sort();
    (answer.status, headers, answer.text.replace(named, as_))
}

/// The isolation suite's spellings and methods, on the trash and the versions: every
/// way bob, carol or dave could write the path of alice's trash item, of her file's
/// versions or of one version answers as the same spelling of one that never existed,
/// for every method, in status, headers and body, and changes nothing. So does naming
/// them as a COPY's or MOVE's destination.
#[tokio::test]
async fn every_spelling_of_a_hidden_item_or_version_answers_as_absent() {
    let app = app(Some(POLICY));
    for text in ["one", "two"] {
        let put = send(&app, "alice", "PUT", "/home/alice/private/diary.txt", &[], text).await;
        assert!(put.status.is_success(), "{}", put.text);
    }
    send(&app, "alice", "PUT", "/home/alice/private/gone.txt", &[], "gone").await;
    send(&app, "alice", "DELETE", "/home/alice/private/gone.txt", &[], "").await;
    for user in ["bob", "carol"] {
        let path = format!("/home/{user}/mine.txt");
        assert!(
            send(&app, user, "PUT", &path, &[], "mine")
                .await
                .status
                .is_success()
        );
    }
    let item = item(&app, "alice", "home/alice/private/gone.txt").await;
    let id = item.rsplit('/').next().unwrap().to_owned();
    // As long as the real id (a flat item's has 18 random hex digits, a folder's 16).
    let made_up = format!("{}-{}", &id[..20], &"0123456789abcdef0123456789"[..id.len() - 21]);
    let version = diary_versions(&app, "alice").await[0]
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    assert!(!version.is_empty());
    let other_version = format!("{}-{}", &version[..20], "01234567");
    assert_eq!(other_version.len(), version.len());
    let before = trash_of(&app, "alice").await;

    // (hidden, absent, how the absent one's name differs, whether it reaches the area).
    // Only the documented spelling of `{base}/.kubedav/trash` and `.../versions` reaches
    // them (any other is a reserved name or a dot segment: 400, or an API call with no
    // proof: 403); below it, a path is decoded as any other.
    let mut spellings: Vec<(String, String, (String, String), bool)> = Vec::new();
    let id_pair = (made_up.clone(), id.clone());
    let encoded = |id: &str| format!("%{:02X}{}", id.as_bytes()[0], &id[1..]);
    for (hidden, absent, reaches) in [
        (
            format!("/.kubedav/trash/{id}"),
            format!("/.kubedav/trash/{made_up}"),
            true,
        ),
        (
            format!("/.kubedav/trash//{id}"),
            format!("/.kubedav/trash//{made_up}"),
            true,
        ),
        (
            format!("/.kubedav/trash/{}", encoded(&id)),
            format!("/.kubedav/trash/{}", encoded(&made_up)),
            true,
        ),
        (
            format!("//.kubedav/./trash/{id}"),
            format!("//.kubedav/./trash/{made_up}"),
            false,
        ),
        (
            format!("/%2ekubedav/trash/{id}"),
            format!("/%2ekubedav/trash/{made_up}"),
            false,
        ),
        (
            format!("/.kubedav/%74rash/{id}"),
            format!("/.kubedav/%74rash/{made_up}"),
            false,
        ),
        (
            format!("/home/../.kubedav/trash/{id}"),
            format!("/home/../.kubedav/trash/{made_up}"),
            false,
        ),
    ] {
        spellings.push((hidden, absent, id_pair.clone(), reaches));
    }
    for (form, reaches) in [
        ("/.kubedav/versions/home/alice/private/{}", true),
        ("/.kubedav/versions/home//alice//private/{}", true),
        ("/.kubedav/versions/home/%61lice/private/{}", true),
        ("/.kubedav/versions/home//alice/./private/{}", false),
        ("/.kubedav/versions/home/bob/../alice/private/{}", false),
        ("/home/../.kubedav/versions/home/alice/private/{}", false),
        ("/%2ekubedav/versions/home/alice/private/{}", false),
    ] {
        spellings.push((
            form.replace("{}", "diary.txt"),
            form.replace("{}", "diarz.txt"),
            ("diarz.txt".to_owned(), "diary.txt".to_owned()),
            reaches,
        ));
        spellings.push((
            form.replace("{}", &format!("diary.txt/{version}")),
            form.replace("{}", &format!("diarz.txt/{other_version}")),
            (
                format!("diarz.txt/{other_version}"),
                format!("diary.txt/{version}"),
            ),
            reaches,
        ));
    }
    // Alice reaches her own through each spelling that reaches the area, and nobody
    // through the others: what the others get is not a miss of the path.
    for (hidden, _, _, reaches) in &spellings {
        let hers = send(&app, "alice", "PROPFIND", hidden, &[("depth", "0")], "").await;
        if *reaches {
            assert_eq!(
                hers.status,
                StatusCode::MULTI_STATUS,
                "alice PROPFIND {hidden}: {}",
                hers.text
            );
        } else {
            assert!(
                matches!(hers.status, StatusCode::BAD_REQUEST | StatusCode::FORBIDDEN),
                "alice PROPFIND {hidden}: {} {}",
                hers.status,
                hers.text
            );
        }
    }
    let lockinfo = r#"<?xml version="1.0"?><D:lockinfo xmlns:D="DAV:"><D:lockscope><D:exclusive/></D:lockscope><D:locktype><D:write/></D:locktype></D:lockinfo>"#;
    let proppatch = r#"<?xml version="1.0"?><D:propertyupdate xmlns:D="DAV:"><D:set><D:prop><x xmlns="urn:t">1</x></D:prop></D:set></D:propertyupdate>"#;
    for user in ["bob", "carol", "dave"] {
        let mine = format!("/home/{user}/mine.txt");
        let attempts: Vec<Attempt> = vec![
            ("GET", vec![], ""),
            ("HEAD", vec![], ""),
            ("OPTIONS", vec![], ""),
            ("PROPFIND", vec![("depth", "0")], ""),
            ("PROPFIND", vec![("depth", "1")], ""),
            ("PROPPATCH", vec![], proppatch),
            ("PUT", vec![], "written"),
            ("DELETE", vec![], ""),
            ("MKCOL", vec![], ""),
            ("LOCK", vec![], lockinfo),
            ("UNLOCK", vec![("lock-token", "<urn:uuid:0>")], ""),
            (
                "COPY",
                vec![("destination", mine.as_str()), ("overwrite", "T")],
                "",
            ),
            ("MOVE", vec![("destination", mine.as_str())], ""),
            ("POST", vec![], ""),
        ];
        for (hidden, absent, (named, as_), _) in &spellings {
            for (method, headers, body) in &attempts {
                let there = send(&app, user, method, hidden, headers, body).await;
                let nowhere = send(&app, user, method, absent, headers, body).await;
                assert_eq!(
                    told(&there, ("", "")),
                    told(&nowhere, (named, as_)),
                    "{user} {method} {hidden} against {absent}"
                );
                assert!(
                    !there.status.is_success() || *method == "OPTIONS",
                    "{user} {method} {hidden}: {}",
                    there.status
                );
            }
            // The same paths named as where a COPY or MOVE of the user's own file goes.
            for method in ["COPY", "MOVE"] {
                let mut answers = Vec::new();
                for to in [hidden, absent] {
                    let headers = [("destination", to.as_str()), ("overwrite", "T")];
                    answers.push(send(&app, user, method, &mine, &headers, "").await);
                }
                let (there, nowhere) = (&answers[0], &answers[1]);
                assert_eq!(
                    told(there, ("", "")),
                    told(nowhere, (named, as_)),
                    "{user} {method} {mine} onto {hidden} against {absent}"
                );
                assert!(!there.status.is_success(), "{user} {method} onto {hidden}");
            }
        }
    }
    // Nothing of alice's changed: her item, her file and its versions.
    assert_eq!(trash_of(&app, "alice").await, before);
    assert_eq!(
        std::fs::read_to_string(app.disk("home/alice/private/diary.txt")).unwrap(),
        "two"
    );
    assert_eq!(diary_versions(&app, "alice").await.len(), 1);
}
