//! Large bodies a gateway writes into the volume's incoming area (`--fileio-incoming`,
//! `kubedav_fileio::incoming`): a write naming such a file is checked before its bytes,
//! and only a plain file of the declared size, closed and of one link, lands; nothing
//! else is left behind.

use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::fileio::*;
use kubedav_fileio::LocalFileIo;
use kubedav_fileio::incoming::{ABANDONED_AFTER, IncomingFolder, Landings, sweep};
use kubedav_fileio::volume::Volume;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};
use tonic::{Code, Status};

const MIB: usize = 1 << 20;

struct Setup {
    dir: tempfile::TempDir,
    fileio: LocalFileIo,
    area: IncomingFolder,
}

impl Setup {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let fileio = LocalFileIo::open(dir.path()).unwrap().with_incoming_area();
        let area = IncomingFolder::open(&dir.path().join(".kubedav/incoming"), true).unwrap();
        Self { dir, fileio, area }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn incoming(&self) -> PathBuf {
        self.root().join(".kubedav/incoming")
    }

    /// The names left in the incoming area and the landing folder.
    fn left(&self) -> Vec<String> {
        ["incoming", "landing"]
            .iter()
            .flat_map(|folder| std::fs::read_dir(self.root().join(".kubedav").join(folder)).unwrap())
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// A new incoming file holding `data`, closed (so no writer holds it).
    fn written(&self, data: &[u8]) -> Box<dyn IncomingFile> {
        let mut file = self.area.create().unwrap();
        file.write_chunks(&[Bytes::copy_from_slice(data)]).unwrap();
        file.close().unwrap();
        file
    }

    /// Fileio's answer to a write of `path` from the incoming file `name` of `size`
    /// bytes, whose stream ends at once.
    async fn land(&self, path: &str, name: &str, size: u64) -> Result<WriteResponse, Status> {
        self.fileio
            .write(header(path, name, size), futures_util::stream::empty().boxed())
            .await
    }
}

fn header(path: &str, name: &str, size: u64) -> WriteHeader {
    WriteHeader {
        path: path.to_owned(),
        expected_size: Some(size),
        incoming: name.to_owned(),
        ..Default::default()
    }
}

fn patterned(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

#[tokio::test]
async fn a_file_written_whole_lands_as_the_resource() {
    let setup = Setup::new();
    let data = patterned(3 * MIB, 1);
    let file = setup.written(&data);
    // Dead properties planted by the gateway do not land with the bytes.
    rustix::fs::setxattr(
        setup.incoming().join(file.name()),
        "user.kubedav.props",
        b"planted",
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let reply = setup
        .land("big.bin", file.name(), data.len() as u64)
        .await
        .unwrap();
    assert!(reply.created);
    assert_eq!(reply.info.unwrap().size, data.len() as u64);
    let landed = setup.root().join("big.bin");
    assert!(std::fs::read(&landed).unwrap() == data, "other bytes landed");
    assert_eq!(
        std::fs::metadata(&landed).unwrap().permissions().mode() & 0o777,
        0o644
    );
    let mut names = vec![0u8; 1024];
    let listed = rustix::fs::listxattr(&landed, &mut names).unwrap();
    assert!(
        !names[..listed].starts_with(b"user.kubedav."),
        "kubedav's attributes came with the file: {:?}",
        String::from_utf8_lossy(&names[..listed])
    );
    drop(file);
    assert!(setup.left().is_empty(), "left behind: {:?}", setup.left());

    let newer = patterned(2 * MIB, 2);
    let file = setup.written(&newer);
    let reply = setup
        .land("big.bin", file.name(), newer.len() as u64)
        .await
        .unwrap();
    assert!(!reply.created, "a replaced file counted as created");
    assert!(std::fs::read(&landed).unwrap() == newer, "the old bytes stayed");
}

/// Whatever a gateway hands over that is not a closed regular file of one link and of
/// the declared size is refused as a misbehaving gateway's (INTERNAL), removed, and
/// nothing replaces the target.
#[tokio::test]
async fn only_exactly_such_a_file_lands() {
    let setup = Setup::new();
    std::fs::write(setup.root().join("doc.bin"), b"before").unwrap();
    let data = patterned(MIB, 3);
    let size = data.len() as u64;
    let refused = |result: Result<WriteResponse, Status>, why: &str| {
        let status = result.expect_err(why);
        assert_eq!(status.code(), Code::Internal, "{why}: {status:?}");
        assert_eq!(
            std::fs::read(setup.root().join("doc.bin")).unwrap(),
            b"before",
            "{why}: replaced"
        );
    };

    // A second link: the file would stay reachable, and changeable, through it.
    let linked = setup.written(&data);
    let other = setup.incoming().join(format!("{:032x}.part", 7));
    std::fs::hard_link(setup.incoming().join(linked.name()), &other).unwrap();
    refused(setup.land("doc.bin", linked.name(), size).await, "two links");
    std::fs::remove_file(&other).unwrap();
    drop(linked);

    // Another size than declared.
    let short = setup.written(&data[..MIB / 2]);
    refused(setup.land("doc.bin", short.name(), size).await, "another size");
    drop(short);

    // Still held by its writer.
    let mut open = setup.area.create().unwrap();
    open.write_chunks(&[Bytes::copy_from_slice(&data)]).unwrap();
    refused(setup.land("doc.bin", open.name(), size).await, "held by a writer");
    drop(open);

    // A symlink, here to a file of the volume.
    let name = format!("{:032x}.part", 8);
    std::os::unix::fs::symlink(setup.root().join("doc.bin"), setup.incoming().join(&name)).unwrap();
    refused(setup.land("doc.bin", &name, 6).await, "a symlink");
    std::fs::remove_file(setup.incoming().join(&name)).unwrap();

    // A folder.
    let name = format!("{:032x}.part", 9);
    std::fs::create_dir(setup.incoming().join(&name)).unwrap();
    refused(setup.land("doc.bin", &name, 0).await, "a folder");
    std::fs::remove_dir(setup.incoming().join(&name)).unwrap();

    // A name that is not one of the area's.
    for name in ["../doc.bin", "doc.bin", ".part"] {
        let status = setup.land("doc.bin", name, 6).await.unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument, "{name}: {status:?}");
    }
    assert!(setup.left().is_empty(), "left behind: {:?}", setup.left());
}

/// The parent, a collection in the way and the room are checked before the gateway has
/// written the body: the call ends while its stream is still open.
#[tokio::test]
async fn refusals_come_before_the_bytes() {
    let setup = Setup::new();
    std::fs::create_dir(setup.root().join("folder")).unwrap();
    let file = setup.area.create().unwrap();
    for (path, size) in [("missing/doc.bin", MIB as u64), ("folder", MIB as u64)] {
        let open: BoxStream<Bytes> = futures_util::stream::pending().boxed();
        let answer = tokio::time::timeout(
            Duration::from_secs(30),
            setup.fileio.write(header(path, file.name(), size), open),
        )
        .await
        .expect("no answer before the body's end");
        assert_eq!(answer.unwrap_err().code(), Code::FailedPrecondition, "{path}");
    }
    // Room: more than any volume here holds.
    let open: BoxStream<Bytes> = futures_util::stream::pending().boxed();
    let answer = tokio::time::timeout(
        Duration::from_secs(30),
        setup.fileio.write(header("huge.bin", file.name(), 1 << 60), open),
    )
    .await
    .expect("no answer before the body's end");
    assert_eq!(answer.unwrap_err().code(), Code::ResourceExhausted);
}

/// A file swapped for a symlink after it was admitted (the gateway's mount is still
/// open to it then) is caught after the move out of its reach.
#[tokio::test]
async fn a_file_swapped_after_admission_does_not_land() {
    let setup = Setup::new();
    std::fs::write(setup.root().join("secret.txt"), patterned(MIB, 4)).unwrap();
    let file = setup.area.create().unwrap();
    let name = file.name().to_owned();
    let (end_tx, end_rx) = tokio::sync::oneshot::channel::<()>();
    let body: BoxStream<Bytes> = futures_util::stream::once(end_rx)
        .filter_map(|_| std::future::ready(None))
        .boxed();
    let call = setup.fileio.write(header("doc.bin", &name, MIB as u64), body);
    let swap = async {
        // Admitted once the room is reserved on the file.
        while std::fs::metadata(setup.incoming().join(&name)).unwrap().blocks() * 512 < MIB as u64 {
            tokio::task::yield_now().await;
        }
        std::fs::remove_file(setup.incoming().join(&name)).unwrap();
        std::os::unix::fs::symlink(setup.root().join("secret.txt"), setup.incoming().join(&name)).unwrap();
        end_tx.send(()).unwrap();
    };
    let (answer, ()) = tokio::join!(call, swap);
    assert_eq!(answer.unwrap_err().code(), Code::Internal);
    assert!(!setup.root().join("doc.bin").exists(), "the swapped file landed");
    drop(file);
    assert!(setup.left().is_empty(), "left behind: {:?}", setup.left());
}

/// The sweep removes what no writer holds and nothing changed for an hour, on a clock
/// the test sets.
#[tokio::test]
async fn the_sweep_removes_only_abandoned_files() {
    let setup = Setup::new();
    let landings = Landings::open(&Volume::open(setup.root()).unwrap()).unwrap();
    let mut held = setup.area.create().unwrap();
    held.write_chunks(&[Bytes::from_static(b"still being written")])
        .unwrap();
    let abandoned = setup.written(b"its gateway died");
    let abandoned_name = abandoned.name().to_owned();
    std::mem::forget(abandoned); // as a dead gateway would
    std::fs::write(
        setup
            .root()
            .join(".kubedav/landing")
            .join(format!("{:032x}.part", 1)),
        b"x",
    )
    .unwrap();

    assert_eq!(
        sweep(&landings, SystemTime::now() - ABANDONED_AFTER),
        0,
        "swept recent files"
    );
    let an_hour_later = SystemTime::now() + Duration::from_secs(1);
    assert_eq!(sweep(&landings, an_hour_later), 2);
    assert!(!setup.incoming().join(&abandoned_name).exists());
    assert!(
        setup.incoming().join(held.name()).exists(),
        "swept a file its writer holds"
    );
    drop(held);
    assert!(setup.left().is_empty(), "left behind: {:?}", setup.left());
}
