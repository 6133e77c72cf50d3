//! Trash and versions on a volume (issue 54, docs/trash-and-versions.md): what a DELETE,
//! a PUT, a COPY or a MOVE removes or replaces is kept, and comes back byte-identical.

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::fileio::*;
use kubedav_api::path::VolumePath;
use kubedav_fileio::LocalFileIo;
use kubedav_fileio::keep::{Keeping, retain, volume};
use kubedav_fileio::volume::Volume;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};
use tonic::Code;

struct Setup {
    dir: tempfile::TempDir,
    fileio: LocalFileIo,
    volume: Volume,
    keeping: Keeping,
    now: Arc<Mutex<SystemTime>>,
}

impl Setup {
    fn new() -> Self {
        Self::on(tempfile::tempdir().unwrap())
    }

    /// On the volume at `dir`.
    fn on(dir: tempfile::TempDir) -> Self {
        let now = Arc::new(Mutex::new(
            SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000),
        ));
        let clock = now.clone();
        let keeping = Keeping {
            clock: Arc::new(move || *clock.lock().unwrap()),
            // Homes are quota roots: `home/NAME`.
            root_of: Arc::new(|path: &VolumePath| {
                let segments: Vec<&str> = path.segments().collect();
                match segments.as_slice() {
                    ["home", name, ..] => VolumePath::parse(&format!("home/{name}")).unwrap(),
                    _ => VolumePath::root(),
                }
            }),
            ..Keeping::defaults()
        };
        let fileio = LocalFileIo::open(dir.path())
            .unwrap()
            .with_keeping(keeping.clone());
        let volume = Volume::open(dir.path()).unwrap();
        Self {
            dir,
            fileio,
            volume,
            keeping,
            now,
        }
    }

    /// A second later.
    fn tick(&self) {
        *self.now.lock().unwrap() += Duration::from_secs(1);
    }

    async fn put(&self, path: &str, data: &[u8]) {
        self.tick();
        let header = WriteHeader {
            path: path.to_owned(),
            expected_size: Some(data.len() as u64),
            ..WriteHeader::default()
        };
        let body = futures_util::stream::iter([Ok(Bytes::copy_from_slice(data))]).boxed();
        self.fileio.write(header, body).await.unwrap();
    }

    async fn mkdir(&self, path: &str) {
        self.fileio
            .mkdir(MkdirRequest {
                path: path.to_owned(),
            })
            .await
            .unwrap();
    }

    fn disk(&self, path: &str) -> std::path::PathBuf {
        self.dir.path().join(path)
    }

    fn read(&self, path: &str) -> Vec<u8> {
        std::fs::read(self.disk(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    async fn delete(&self, path: &str, by: &str) -> String {
        self.tick();
        let reply = self
            .fileio
            .delete(DeleteRequest {
                path: path.to_owned(),
                by: by.to_owned(),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(reply.failures.is_empty());
        reply.trash_item
    }

    fn trash(&self, root: &str) -> Vec<kubedav_fileio::keep::TrashItem> {
        volume::list_trash(&self.volume, &VolumePath::parse(root).unwrap()).unwrap()
    }

    fn versions(&self, path: &str) -> Vec<kubedav_fileio::keep::Version> {
        volume::list_versions(&self.volume, &VolumePath::parse(path).unwrap()).unwrap()
    }

    fn version_content(&self, path: &str, id: &str) -> Vec<u8> {
        let fd = volume::open_version(&self.volume, &VolumePath::parse(path).unwrap(), id).unwrap();
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut std::fs::File::from(fd), &mut data).unwrap();
        data
    }

    fn restore(&self, root: &str, id: &str, to: &str, overwrite: bool) -> Result<bool, tonic::Status> {
        volume::restore(
            &self.volume,
            &self.keeping,
            &VolumePath::parse(root).unwrap(),
            id,
            &VolumePath::parse(to).unwrap(),
            overwrite,
            "restorer",
        )
    }
}

#[tokio::test]
async fn a_deleted_file_goes_to_its_roots_trash_and_comes_back() {
    let s = Setup::new();
    s.mkdir("home").await;
    s.mkdir("home/alice").await;
    s.put("home/alice/report.txt", b"the report").await;
    let id = s.delete("home/alice/report.txt", "bob").await;
    assert!(!id.is_empty(), "the delete names its trash item");
    assert!(!s.disk("home/alice/report.txt").exists());
    assert!(
        s.trash("").is_empty(),
        "the whole tree's trash holds none of alice's"
    );
    let items = s.trash("home/alice");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].id, id);
    assert_eq!(items[0].record.path, "home/alice/report.txt");
    assert_eq!(items[0].record.by, "bob");
    assert_eq!(items[0].record.bytes, 10);
    assert!(!items[0].record.collection);
    assert!(
        s.restore("home/alice", &id, "home/alice/report.txt", false)
            .unwrap()
    );
    assert_eq!(s.read("home/alice/report.txt"), b"the report");
    assert!(
        s.trash("home/alice").is_empty(),
        "a restored item leaves the trash"
    );
}

/// A deleted file is its trash item: renamed whole into the items folder, its record in
/// its own extended attribute (no folder or file to make and sync), even for the longest
/// path kubedav serves (ext4 holds about 4 KiB of attributes). Restored, it carries no
/// trace of the trash.
#[tokio::test]
async fn the_longest_path_deleted_keeps_its_record_in_the_items_attribute() {
    let s = Setup::new();
    let mut path = String::new();
    while path.len() + 201 < kubedav_api::path::MAX_PATH_BYTES - 40 {
        path.push_str(&"d".repeat(200));
        s.mkdir(&path).await;
        path.push('/');
    }
    let padding = kubedav_api::path::MAX_PATH_BYTES - path.len();
    path.push_str(&"f".repeat(padding));
    assert_eq!(path.len(), kubedav_api::path::MAX_PATH_BYTES);
    s.put(&path, b"at the end of a long path").await;
    let id = s.delete(&path, "bob").await;
    let items = s.trash("");
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].record.path, path);
    let item = s.disk(&format!(".kubedav/trash/.kubedav/{id}"));
    assert!(item.is_file(), "the item is not the file itself");
    assert!(trashed_mark(&item).is_some(), "the record is not on the file");
    assert!(s.restore("", &id, &path, false).unwrap());
    assert_eq!(s.read(&path), b"at the end of a long path");
    assert_eq!(
        trashed_mark(&s.disk(&path)),
        None,
        "the restored file kept its mark"
    );
}

/// The trash's mark on a file or folder on disk, if it has one.
fn trashed_mark(on: &std::path::Path) -> Option<Vec<u8>> {
    let mut buffer = vec![0u8; 8192];
    let n = rustix::fs::lgetxattr(on, "user.kubedav.trashed", &mut buffer[..]).ok()?;
    buffer.truncate(n);
    Some(buffer)
}

#[tokio::test]
async fn a_deleted_tree_goes_whole_and_comes_back_whole() {
    let s = Setup::new();
    for dir in ["d", "d/e", "d/e/f"] {
        s.mkdir(dir).await;
    }
    s.put("d/one.txt", b"1").await;
    s.put("d/e/two.txt", b"22").await;
    s.put("d/e/f/three.txt", b"333").await;
    s.put("d/e/f/three.txt", b"3333").await;
    let id = s.delete("d", "alice").await;
    assert!(!s.disk("d").exists());
    let items = s.trash("");
    assert_eq!(items.len(), 1, "one item for the whole tree");
    assert!(items[0].record.collection);
    assert!(
        s.versions("d/e/f/three.txt").is_empty(),
        "versions go to the trash with their file"
    );
    // A new tree takes the name meanwhile: the restore is refused.
    s.mkdir("d").await;
    let taken = s.restore("", &id, "d", false).unwrap_err();
    assert_eq!(taken.code(), Code::AlreadyExists);
    assert_eq!(s.trash("").len(), 1, "a refused restore keeps the item");
    // Restored elsewhere, whole.
    assert!(s.restore("", &id, "d-restored", false).unwrap());
    assert_eq!(s.read("d-restored/one.txt"), b"1");
    assert_eq!(s.read("d-restored/e/two.txt"), b"22");
    assert_eq!(s.read("d-restored/e/f/three.txt"), b"3333");
    let versions = s.versions("d-restored/e/f/three.txt");
    assert_eq!(versions.len(), 1, "its versions came back with it");
    assert_eq!(
        s.version_content("d-restored/e/f/three.txt", &versions[0].id),
        b"333"
    );
}

#[tokio::test]
async fn twelve_puts_leave_ten_versions_which_follow_a_move() {
    let s = Setup::new();
    for n in 0..12 {
        s.put("notes.txt", format!("version {n}").as_bytes()).await;
    }
    let versions = s.versions("notes.txt");
    assert_eq!(versions.len(), 10, "at most --versions-max");
    assert_eq!(
        s.version_content("notes.txt", &versions[0].id),
        b"version 1",
        "the oldest went first"
    );
    assert_eq!(s.version_content("notes.txt", &versions[9].id), b"version 10");
    assert!(
        versions
            .windows(2)
            .all(|w| w[0].replaced_unix_ns < w[1].replaced_unix_ns)
    );
    assert_eq!(versions[9].bytes, 10);
    s.fileio
        .r#move(MoveRequest {
            source: "notes.txt".into(),
            destination: "moved.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(s.versions("notes.txt").is_empty());
    assert_eq!(s.versions("moved.txt").len(), 10, "the history follows the move");
    // A new file at the old name starts without a history.
    s.put("notes.txt", b"fresh").await;
    assert!(s.versions("notes.txt").is_empty());
}

#[tokio::test]
async fn what_a_copy_or_move_replaces_is_kept() {
    let s = Setup::new();
    s.put("a.txt", b"a").await;
    s.put("b.txt", b"b").await;
    s.fileio
        .copy(CopyRequest {
            source: "a.txt".into(),
            destination: "b.txt".into(),
            overwrite: true,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(s.read("b.txt"), b"a");
    let versions = s.versions("b.txt");
    assert_eq!(versions.len(), 1, "the file a COPY replaced is a version");
    assert_eq!(s.version_content("b.txt", &versions[0].id), b"b");
    // A collection replaced by a MOVE goes to the trash.
    s.mkdir("target").await;
    s.put("target/inside.txt", b"inside").await;
    s.mkdir("source").await;
    s.fileio
        .r#move(MoveRequest {
            source: "source".into(),
            destination: "target".into(),
            overwrite: true,
            by: "carol".into(),
        })
        .await
        .unwrap();
    assert!(!s.disk("target/inside.txt").exists());
    let items = s.trash("");
    assert_eq!(items.len(), 1);
    assert_eq!(
        (items[0].record.path.as_str(), items[0].record.by.as_str()),
        ("target", "carol")
    );
    // A file moved over a file: the replaced one becomes a version, and the moved
    // file's own versions come along.
    s.put("x.txt", b"x1").await;
    s.put("x.txt", b"x2").await;
    s.put("y.txt", b"y1").await;
    s.fileio
        .r#move(MoveRequest {
            source: "x.txt".into(),
            destination: "y.txt".into(),
            overwrite: true,
            ..Default::default()
        })
        .await
        .unwrap();
    let contents: Vec<Vec<u8>> = s
        .versions("y.txt")
        .iter()
        .map(|v| s.version_content("y.txt", &v.id))
        .collect();
    assert_eq!(contents, [b"x1".to_vec(), b"y1".to_vec()]);
}

#[tokio::test]
async fn restoring_over_a_file_keeps_the_file_as_a_version() {
    let s = Setup::new();
    s.put("doc.txt", b"deleted").await;
    let id = s.delete("doc.txt", "alice").await;
    s.put("doc.txt", b"newer").await;
    assert_eq!(
        s.restore("", &id, "doc.txt", false).unwrap_err().code(),
        Code::AlreadyExists
    );
    assert!(!s.restore("", &id, "doc.txt", true).unwrap());
    assert_eq!(s.read("doc.txt"), b"deleted");
    let versions = s.versions("doc.txt");
    assert_eq!(
        s.version_content("doc.txt", &versions.last().unwrap().id),
        b"newer"
    );
    assert_eq!(
        volume::purge(&s.volume, &VolumePath::root(), &id)
            .unwrap_err()
            .code(),
        Code::NotFound,
        "a restored item is gone"
    );
}

/// The two shapes of an item side by side (docs/trash-and-versions.md, "On a volume"): a
/// file or tree without versions is its own item; one with versions, or a symlink (which
/// cannot carry the mark), gets a folder. Each is listed, counted and restored the same,
/// and a flat item whose mark a crash lost (ext4 without a journal) is still listed,
/// restorable into its root under its id: nothing deleted disappears from view.
#[tokio::test]
async fn items_of_both_shapes_and_one_without_its_mark_are_listed_counted_and_restored() {
    let s = Setup::new();
    s.mkdir("tree").await;
    s.put("tree/a.txt", b"aaaa").await;
    // Members named as a folder item's parts, which must not be taken for one.
    s.put("tree/entry", b"e").await;
    s.put(
        "tree/item.json",
        br#"{"path":"home/bob","collection":false,"deleted_unix_ns":1,"by":"x","bytes":1}"#,
    )
    .await;
    s.put("plain.txt", b"plain").await;
    s.put("versioned.txt", b"old").await;
    s.put("versioned.txt", b"newer").await;
    std::os::unix::fs::symlink("plain.txt", s.disk("link")).unwrap();
    let tree = s.delete("tree", "alice").await;
    let plain = s.delete("plain.txt", "alice").await;
    let versioned = s.delete("versioned.txt", "alice").await;
    let link = s.delete("link", "alice").await;
    let items = s.disk(".kubedav/trash/.kubedav");
    assert!(
        items.join(&tree).join("a.txt").is_file(),
        "a tree without versions is flat"
    );
    assert!(items.join(&plain).is_file());
    assert!(
        items.join(&versioned).join("entry").is_file(),
        "a file with versions has a folder"
    );
    assert!(items.join(&link).join("entry").is_symlink());
    let listed: Vec<(String, String, bool, u64)> = s
        .trash("")
        .into_iter()
        .map(|item| {
            (
                item.id,
                item.record.path,
                item.record.collection,
                item.record.bytes,
            )
        })
        .collect();
    assert_eq!(
        listed,
        [
            (tree.clone(), "tree".to_owned(), true, 0),
            (plain.clone(), "plain.txt".to_owned(), false, 5),
            (versioned.clone(), "versioned.txt".to_owned(), false, 5),
            (link.clone(), "link".to_owned(), false, 9),
        ]
    );
    let counted: u64 = retain::kept_things(&s.volume, &VolumePath::root())
        .unwrap()
        .iter()
        .filter(|thing| thing.kept_unix_ns > 0)
        .map(|thing| thing.bytes)
        .sum();
    assert_eq!(
        counted,
        (4 + 1 + 77) + 5 + (5 + 3),
        "the tree, the file, the file and its version; no link, no record"
    );
    // A crash on a file system without a journal kept the renames but lost the marks:
    // each item is still listed, under its id in its root, and restored whole.
    for id in [&plain, &tree] {
        rustix::fs::lremovexattr(items.join(id), "user.kubedav.trashed").unwrap();
        let unmarked = s.trash("").into_iter().find(|item| &item.id == id).unwrap();
        assert_eq!(&unmarked.record.path, id, "listed under its id, in its root");
        assert!(s.restore("", id, &unmarked.record.path, false).unwrap());
    }
    assert_eq!(s.read(&plain), b"plain");
    assert_eq!(s.read(&format!("{tree}/entry")), b"e", "the tree came back whole");
    std::fs::rename(s.disk(&tree), s.disk("tree")).unwrap();
    for (id, to) in [(&versioned, "versioned.txt"), (&link, "link")] {
        assert!(s.restore("", id, to, false).unwrap(), "{to}");
    }
    assert_eq!(s.read("tree/a.txt"), b"aaaa");
    assert_eq!(s.read("tree/item.json").len(), 77);
    assert_eq!(trashed_mark(&s.disk("tree")), None);
    assert_eq!(s.read("versioned.txt"), b"newer");
    assert_eq!(s.versions("versioned.txt").len(), 1, "its version came back");
    assert_eq!(
        std::fs::read_link(s.disk("link")).unwrap(),
        std::path::Path::new("plain.txt")
    );
    assert!(s.trash("").is_empty());
    assert_eq!(
        std::fs::read_dir(&items).unwrap().count(),
        0,
        "nothing left behind"
    );
}

#[tokio::test]
async fn a_purged_item_is_gone_and_names_outside_the_shape_find_nothing() {
    let s = Setup::new();
    s.put("gone.txt", b"bye").await;
    let id = s.delete("gone.txt", "alice").await;
    volume::purge(&s.volume, &VolumePath::root(), &id).unwrap();
    assert!(s.trash("").is_empty());
    for bad in ["..", "../versions", "item.json", "", "00000000000000000001-zz"] {
        assert_eq!(
            volume::purge(&s.volume, &VolumePath::root(), bad)
                .unwrap_err()
                .code(),
            Code::NotFound,
            "{bad:?}"
        );
        assert!(volume::open_version(&s.volume, &VolumePath::parse("gone.txt").unwrap(), bad).is_err());
    }
}

#[tokio::test]
async fn without_keeping_a_delete_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let off = Keeping {
        trash_for: None,
        versions_max: 0,
        ..Keeping::defaults()
    };
    let fileio = LocalFileIo::open(dir.path()).unwrap().with_keeping(off);
    let header = WriteHeader {
        path: "f.txt".into(),
        expected_size: Some(1),
        ..WriteHeader::default()
    };
    let body = futures_util::stream::iter([Ok(Bytes::from_static(b"f"))]).boxed();
    fileio.write(header, body).await.unwrap();
    let reply = fileio
        .delete(DeleteRequest {
            path: "f.txt".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(reply.trash_item, "");
    assert!(
        !dir.path().join(".kubedav").exists(),
        "nothing kept, nothing made"
    );
}

#[tokio::test]
async fn the_keep_port_lists_restores_reads_and_purges() {
    use kubedav_api::keep::*;
    let s = Setup::new();
    let keep = s.fileio.keep();
    s.mkdir("home").await;
    s.mkdir("home/alice").await;
    s.put("home/alice/a.txt", b"first").await;
    s.put("home/alice/a.txt", b"second").await;
    let versions = keep
        .list_versions(ListVersionsRequest {
            path: "home/alice/a.txt".into(),
        })
        .await
        .unwrap()
        .versions;
    assert_eq!(versions.len(), 1);
    assert_eq!(versions[0].bytes, 5);
    // A version is read through FileIo's Read, and names nothing else.
    let read = |version: String| {
        s.fileio.read(ReadRequest {
            path: "home/alice/a.txt".into(),
            version,
            ..Default::default()
        })
    };
    let reply = read(versions[0].id.clone()).await.unwrap();
    let data: Vec<u8> = reply
        .chunks
        .map(|chunk| chunk.unwrap().data.to_vec())
        .concat()
        .await;
    assert_eq!(data, b"first");
    for bad in ["../../a.txt", "item.json", "00000000000000000001-ab"] {
        assert_eq!(
            read(bad.into()).await.err().map(|s| s.code()),
            Some(Code::NotFound),
            "{bad}"
        );
    }
    // Restoring the version keeps what it replaces.
    let restored = keep
        .restore_version(RestoreVersionRequest {
            path: "home/alice/a.txt".into(),
            id: versions[0].id.clone(),
        })
        .await
        .unwrap();
    assert!(!restored.created);
    assert_eq!(s.read("home/alice/a.txt"), b"first");
    assert_eq!(s.versions("home/alice/a.txt").len(), 2);
    // The trash of the roots asked for, and only those.
    let id = s.delete("home/alice/a.txt", "alice").await;
    let ask = |roots: &[&str], beneath: &[&str]| {
        keep.list_trash(ListTrashRequest {
            roots: roots.iter().map(|r| r.to_string()).collect(),
            beneath: beneath.iter().map(|r| r.to_string()).collect(),
        })
    };
    let list = |roots: &'static [&'static str]| ask(roots, &[]);
    assert!(list(&[""]).await.unwrap().items.is_empty());
    let items = list(&["", "home/alice"]).await.unwrap().items;
    assert_eq!(items.len(), 1);
    // The roots beneath a path: the home's from `home` or the whole tree, none from
    // another home.
    for (beneath, found) in [("", 1), ("home", 1), ("home/alice", 1), ("home/bob", 0)] {
        assert_eq!(
            ask(&[], &[beneath]).await.unwrap().items.len(),
            found,
            "beneath {beneath:?}"
        );
    }
    assert_eq!(
        (
            items[0].id.as_str(),
            items[0].root.as_str(),
            items[0].path.as_str()
        ),
        (id.as_str(), "home/alice", "home/alice/a.txt")
    );
    let restore = |destination: &str, overwrite: bool| {
        keep.restore_trash(RestoreTrashRequest {
            root: "home/alice".into(),
            id: id.clone(),
            destination: destination.into(),
            overwrite,
            by: "alice".into(),
        })
    };
    assert_eq!(
        restore("nowhere/a.txt", false).await.unwrap_err().code(),
        Code::FailedPrecondition,
        "a missing parent is a conflict, as for a PUT"
    );
    assert!(restore("home/alice/a.txt", false).await.unwrap().created);
    assert_eq!(s.versions("home/alice/a.txt").len(), 2, "the versions came back");
    let id = s.delete("home/alice/a.txt", "alice").await;
    keep.purge_trash(PurgeTrashRequest {
        root: "home/alice".into(),
        id: id.clone(),
        reason: "user".into(),
    })
    .await
    .unwrap();
    assert!(list(&["home/alice"]).await.unwrap().items.is_empty());
    // A fileio that keeps nothing says so.
    let dir = tempfile::tempdir().unwrap();
    let plain = LocalFileIo::open(dir.path()).unwrap();
    assert_eq!(
        plain
            .keep()
            .list_trash(ListTrashRequest::default())
            .await
            .unwrap_err()
            .code(),
        Code::FailedPrecondition
    );
}

#[tokio::test]
async fn retention_removes_what_is_past_its_time_once_whoever_runs_it() {
    let s = Setup::new();
    s.mkdir("home").await;
    s.mkdir("home/alice").await;
    for n in 0..20 {
        s.put(&format!("home/alice/old-{n}.txt"), b"old").await;
        s.delete(&format!("home/alice/old-{n}.txt"), "alice").await;
    }
    s.put("top.txt", b"v1").await;
    s.put("top.txt", b"v2").await;
    // 29 days on: nothing is old enough yet.
    *s.now.lock().unwrap() += Duration::from_secs(29 * 86_400);
    assert_eq!(
        retain::retain(&s.volume, &s.keeping).unwrap(),
        retain::Retained::default()
    );
    // What the gauges show, per quota root: the home's 20 items, the tree's version.
    let figures = retain::figures(&s.volume, &s.keeping).unwrap();
    let home = figures["home/alice"];
    assert_eq!((home.items, home.item_bytes, home.versions), (20, 60, 0));
    let tree = figures[""];
    assert_eq!((tree.items, tree.versions, tree.version_bytes), (0, 1, 2));
    s.put("fresh.txt", b"kept").await;
    s.delete("fresh.txt", "alice").await;
    s.put("top.txt", b"v3").await;
    // Past 30 days for the first ones: two replicas run the retention at once, and each
    // item is removed by exactly one of them.
    *s.now.lock().unwrap() += Duration::from_secs(2 * 86_400);
    let other = Volume::open(s.dir.path()).unwrap();
    let (a, b) = std::thread::scope(|scope| {
        let a = scope.spawn(|| retain::retain(&s.volume, &s.keeping).unwrap());
        let b = scope.spawn(|| retain::retain(&other, &s.keeping).unwrap());
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(a.items + b.items, 20, "{a:?} {b:?}");
    assert_eq!(a.versions + b.versions, 1, "{a:?} {b:?}");
    assert!(s.trash("home/alice").is_empty());
    let left = s.trash("");
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].record.path, "fresh.txt");
    let versions = s.versions("top.txt");
    assert_eq!(versions.len(), 1, "the version made a day ago stays");
    assert_eq!(s.version_content("top.txt", &versions[0].id), b"v2");
    assert!(
        std::fs::read_dir(s.disk(".kubedav/trash/.kubedav-purging"))
            .unwrap()
            .next()
            .is_none(),
        "nothing left half purged"
    );
}

/// What a quota counts on the whole tree.
/// A write of `data` to `path` that declares its size; through a public link (which may
/// not make room) when `no_purge`.
fn upload(path: &str, data: Bytes, no_purge: bool) -> (WriteHeader, kubedav_api::BoxStream<Bytes>) {
    let header = WriteHeader {
        path: path.to_owned(),
        expected_size: Some(data.len() as u64),
        no_purge,
        ..WriteHeader::default()
    };
    (header, futures_util::stream::iter([Ok(data)]).boxed())
}

async fn used(quota: &kubedav_fileio::quota::QuotaFileIo) -> u64 {
    quota
        .usage(UsageRequest { path: String::new() })
        .await
        .unwrap()
        .used_bytes
}

#[tokio::test]
async fn a_full_quota_makes_room_from_the_oldest_kept_first() {
    use kubedav_fileio::quota::{Kept, QuotaFileIo};
    let s = Setup::new();
    let kept: Arc<dyn Kept> = Arc::new(s.fileio.keep());
    let inner: Arc<dyn FileIo> = Arc::new(s.fileio.clone());
    let quota = QuotaFileIo::new(inner, 100, Duration::from_secs(3600)).keeping(kept);
    // A write during a count may be counted twice until the next: let both end first.
    quota.counts_finished(2).await;
    let put_as = |path: &'static str, data: &'static [u8], no_purge: bool| {
        s.tick();
        let (header, body) = upload(path, Bytes::from_static(data), no_purge);
        quota.write(header, body)
    };
    let put = |path: &'static str, data: &'static [u8]| put_as(path, data, false);
    let forty = &[b'x'; 40];
    put("a.txt", forty).await.unwrap();
    put("b.txt", forty).await.unwrap();
    s.tick();
    let deleted = quota
        .delete(DeleteRequest {
            path: "a.txt".into(),
            by: "alice".into(),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(!deleted.trash_item.is_empty());
    assert_eq!(used(&quota).await, 80, "the trash still counts");
    // A write through a public link never makes room: it is refused, and a stays.
    let refused = put_as("b.txt", forty, true).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(s.trash("").len(), 1);
    // b's new content (40) and its old one, kept as a version (40), do not fit with a's
    // 40 in the trash: the oldest kept thing, a, goes.
    put("b.txt", forty).await.unwrap();
    assert!(s.trash("").is_empty(), "the oldest kept went first");
    assert_eq!(s.versions("b.txt").len(), 1);
    assert_eq!(used(&quota).await, 80);
    // Then the version goes, as c needs the room.
    put("c.txt", forty).await.unwrap();
    assert!(s.versions("b.txt").is_empty());
    assert_eq!(used(&quota).await, 80);
    // Nothing kept is left: a write that does not fit is refused.
    let refused = put("d.txt", forty).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted);
    assert_eq!(s.read("b.txt"), forty);
    // A save that fits only if what it replaces is not kept is not refused for the sake
    // of the version: b's 50 bytes go in, and the 40 it replaced go at once.
    let fifty = &[b'y'; 50];
    put("b.txt", fifty).await.unwrap();
    assert_eq!(s.read("b.txt"), fifty);
    assert!(s.versions("b.txt").is_empty(), "the version had no room");
    assert_eq!(used(&quota).await, 90);
}

/// A tmpfs of `mib` MiB mounted on a fresh directory, unmounted when dropped.
struct SmallVolume(tempfile::TempDir);

impl SmallVolume {
    fn mount(mib: u32) -> (Self, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let mounted = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={mib}m"), "kubedav-test"])
            .arg(dir.path())
            .status()
            .unwrap();
        assert!(mounted.success(), "mounting a {mib} MiB tmpfs (needs root)");
        // The setup's own handle on the same directory: dropped first, it removes
        // nothing once the mount is gone.
        let served = tempfile::TempDir::with_prefix_in("served", dir.path()).unwrap();
        (Self(dir), served)
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.0.path())
            .status();
    }
}

/// A full volume makes room: on a 4 MiB tmpfs holding three deleted 1 MiB files in its
/// trash, a 2 MiB upload that declares its size removes the two oldest and is stored;
/// one through a public link is refused with 507 and removes nothing; a 3 MiB one
/// removes what is left and is still refused.
#[tokio::test]
async fn a_full_volume_makes_room_from_the_oldest_kept_first() {
    let (_mount, served) = SmallVolume::mount(4);
    let s = Setup::on(served);
    let mib = vec![b'k'; 1 << 20];
    for name in ["a.bin", "b.bin", "c.bin"] {
        s.put(name, &mib).await;
    }
    for name in ["a.bin", "b.bin", "c.bin"] {
        assert!(!s.delete(name, "alice").await.is_empty());
    }
    let two = Bytes::from(vec![b'n'; 2 << 20]);
    let put_as = |path: &'static str, data: &Bytes, no_purge: bool| {
        s.tick();
        let (header, body) = upload(path, data.clone(), no_purge);
        s.fileio.write(header, body)
    };
    let refused = put_as("linked.bin", &two, true).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert_eq!(s.trash("").len(), 3, "a link's write removes nothing");
    put_as("d.bin", &two, false).await.unwrap();
    let left: Vec<String> = s.trash("").into_iter().map(|item| item.record.path).collect();
    assert_eq!(left, ["c.bin"], "the two oldest went");
    assert_eq!(s.read("d.bin").len(), 2 << 20);
    let three = Bytes::from(vec![b'n'; 3 << 20]);
    let refused = put_as("e.bin", &three, false).await.unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(s.trash("").is_empty(), "what was left went, and still no room");
}
