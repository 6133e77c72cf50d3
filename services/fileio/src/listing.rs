//! Reading collections: the names clients may see, and the scan behind PROPFIND
//! listings (Depth 1 and infinity) with their properties.

use crate::Volume;
use crate::cache::name::NameCache;
use crate::cache::property::{PropertyCache, Tally};
use crate::cache::resolved::ResolvedPaths;
use crate::errors::{Op, io_status};
use crate::metadata::{WANTED, file_info, is_symlink, stat_at, stat_fd};
use crate::metrics::{self, ScanPath};
use crate::props;
use crate::uring;
use kubedav_api::fileio::{Depth, ListEntry, ListResponse};
use kubedav_api::path::{VolumePath, is_reserved_name};
use kubedav_api::pb::fileio::v1::{DeadProperty, PropertySelection, property_selection};
use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Dir, Mode, OFlags, Statx};
use std::time::SystemTime;
use tonic::Status;

/// Entries per ListResponse batch.
pub const BATCH: usize = 256;

/// The names in an open directory that clients may see: not `.`/`..`, not kubedav's
/// reserved names (fileio's temporary files, the `.kubedav` area), and valid UTF-8
/// (other names cannot be addressed over WebDAV).
pub fn visible_names(dir: &OwnedFd, path: &VolumePath) -> Result<impl Iterator<Item = String>, Status> {
    let entries = Dir::read_from(dir).map_err(|e| io_status(e, Op::Other, path))?;
    Ok(entries.filter_map(|entry| {
        let entry = entry.ok()?;
        let name = entry.file_name().to_str().ok()?;
        if name == "." || name == ".." || is_reserved_name(name) {
            return None;
        }
        Some(name.to_owned())
    }))
}

/// One listing: the volume, the dead properties it asks for, and the cache they may
/// come from.
pub struct Scan<'a> {
    /// The volume listed.
    pub volume: &'a Volume,
    /// Which dead properties each entry carries.
    pub selection: &'a PropertySelection,
    /// Dead properties read by earlier listings.
    pub cache: &'a PropertyCache,
    /// Directories' names read by earlier listings.
    pub names: &'a NameCache,
    /// Batch each directory's `statx` calls through io_uring ([`uring::scans_enabled`]).
    pub io_uring: bool,
}

/// A member as a listing found it.
struct Member {
    stx: Statx,
    /// Reached through a symlink (beneath the root): `stx` is of the target.
    via_symlink: bool,
}

impl Scan<'_> {
    /// `statx` of a chunk of a directory's names: one io_uring submission when
    /// available, else a call per name.
    fn stat_chunk(&self, dir: &OwnedFd, names: &[String], dir_path: &VolumePath) -> Vec<Option<Statx>> {
        if self.io_uring
            && let Some(results) = uring::statx_batch(dir.as_fd(), names, WANTED)
        {
            metrics::scan_batch(ScanPath::IoUring, names.len());
            return results.into_iter().map(Result::ok).collect();
        }
        metrics::scan_batch(ScanPath::Fallback, names.len());
        names
            .iter()
            .map(|name| stat_at(dir, name, dir_path).ok())
            .collect()
    }

    /// Metadata of a directory member from its `statx`. A symlink is shown as what it
    /// points to, if that is beneath the root; otherwise the member is hidden (`None`).
    fn member(&self, stx: Statx, path: &VolumePath) -> Option<Member> {
        if !is_symlink(&stx) {
            return Some(Member {
                stx,
                via_symlink: false,
            });
        }
        let fd = self.volume.open_beneath(path, OFlags::PATH).ok()?;
        Some(Member {
            stx: stat_fd(&fd, path).ok()?,
            via_symlink: true,
        })
    }

    /// The dead properties of a member, as the selection asks: from the cache when its
    /// copy is current, else read with one `getxattrat` (or, on kernels without it, by
    /// opening the member: only files and directories, never devices or FIFOs). An
    /// unreadable member has none.
    fn member_properties(
        &self,
        dir: &OwnedFd,
        name: &str,
        member: &Member,
        path: &VolumePath,
        began: SystemTime,
        tally: &mut Tally,
    ) -> Vec<DeadProperty> {
        if let Some(known) = self.known_properties(&member.stx, tally) {
            return known;
        }
        let read = if member.via_symlink {
            None
        } else {
            props::read_raw_at(dir, name, path)
        };
        let read = read.unwrap_or_else(|| {
            let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::CLOEXEC;
            let fd = if member.via_symlink {
                self.volume.open_beneath(path, flags)
            } else {
                rustix::fs::openat(dir, name, flags | OFlags::NOFOLLOW, Mode::empty())
                    .map_err(|e| io_status(e, Op::Other, path))
            };
            fd.and_then(|fd| props::read_raw(&fd, path))
        });
        let Some(properties) = read.ok().and_then(|raw| props::decode_or_empty(&raw)) else {
            return Vec::new();
        };
        self.cache.insert(&member.stx, began, &properties);
        props::select(properties, self.selection)
    }

    /// The entry of `path` itself, with the open resource and its `statx`. Its dead
    /// properties come from the cache when the copy is current.
    fn resource(
        &self,
        path: &VolumePath,
        began: SystemTime,
        tally: &mut Tally,
    ) -> Result<(OwnedFd, Statx, ListEntry), Status> {
        let fd = self
            .volume
            .open_beneath(path, OFlags::RDONLY | OFlags::NONBLOCK)?;
        let stx = stat_fd(&fd, path)?;
        let properties = match self.known_properties(&stx, tally) {
            Some(known) => known,
            None => self.read_properties(&fd, &stx, path, began)?,
        };
        let entry = ListEntry {
            info: Some(file_info(path, &stx)),
            properties,
        };
        Ok((fd, stx, entry))
    }

    /// The dead properties of the resource `stx` describes, as the selection asks, when
    /// they need no read: none asked for, or a current copy in the cache. `None` when
    /// they must be read.
    fn known_properties(&self, stx: &Statx, tally: &mut Tally) -> Option<Vec<DeadProperty>> {
        if self.selection.mode() == property_selection::Mode::None {
            return Some(Vec::new());
        }
        self.cache
            .get(stx, tally)
            .map(|cached| props::select(cached, self.selection))
    }

    /// The dead properties of the open resource `fd` (whose `statx` is `stx`), read from
    /// the file and kept in the cache, as the selection asks.
    fn read_properties(
        &self,
        fd: &OwnedFd,
        stx: &Statx,
        path: &VolumePath,
        began: SystemTime,
    ) -> Result<Vec<DeadProperty>, Status> {
        let properties = props::read(fd, path)?;
        self.cache.insert(stx, began, &properties);
        Ok(props::select(properties, self.selection))
    }

    /// The entry of `path` alone (a Depth 0 listing): one resource's `statx` and
    /// attribute, which the kernel answers from its caches, so the caller may run it on
    /// an async worker rather than pay two trips to the blocking pool.
    ///
    /// The lookup is an `O_PATH` open, which skips most of what opening a file costs;
    /// only when the dead properties must be read (not asked for, or not cached) is the
    /// resource opened for reading, from the start, so the `statx` and the properties
    /// always come from the same file.
    pub fn single(&self, path: &VolumePath, resolved: &ResolvedPaths) -> Result<ListEntry, Status> {
        let began = SystemTime::now();
        let mut tally = Tally::default();
        // A path that still leads where a confined resolution led, with its dead
        // properties known: one statx answers.
        if let Some(stx) = resolved.current(self.volume.root_fd(), path)
            && let Some(properties) = self.known_properties(&stx, &mut tally)
        {
            return Ok(ListEntry {
                info: Some(file_info(path, &stx)),
                properties,
            });
        }
        let mut stx = stat_fd(&self.volume.open_beneath(path, OFlags::PATH)?, path)?;
        resolved.insert(path, &stx, began);
        let properties = match self.known_properties(&stx, &mut tally) {
            Some(known) => known,
            None => {
                let fd = self
                    .volume
                    .open_beneath(path, OFlags::RDONLY | OFlags::NONBLOCK)?;
                stx = stat_fd(&fd, path)?;
                self.read_properties(&fd, &stx, path, began)?
            }
        };
        Ok(ListEntry {
            info: Some(file_info(path, &stx)),
            properties,
        })
    }

    /// Walks `path` to `depth`, sending batches of entries (the resource itself first)
    /// to `out`. Runs on the blocking pool; stops early if the receiver goes away.
    pub fn walk(
        &self,
        path: VolumePath,
        depth: Depth,
        max_entries: u64,
        out: &mut crate::scanslots::Outlet,
    ) -> Result<(), Status> {
        let began = SystemTime::now();
        let mut tally = Tally::default();
        let (fd, stx, own) = self.resource(&path, began, &mut tally)?;
        let is_collection = own.info.as_ref().is_some_and(|info| info.is_collection);
        let mut walk = Walk {
            began,
            depth,
            max_entries,
            count: 1,
            batch: vec![own],
            pending_dirs: Vec::new(),
            tally,
            out,
        };
        if is_collection && depth != Depth::Zero {
            walk.pending_dirs.push((fd, stx, path));
        }
        while let Some((dir, stx, dir_path)) = walk.pending_dirs.pop() {
            if let Some(names) = self.names.get(&stx) {
                for chunk in names.chunks(uring::RING_ENTRIES) {
                    if !self.members(&mut walk, &dir, &dir_path, chunk)? {
                        return Ok(());
                    }
                }
                continue;
            }
            let mut names = visible_names(&dir, &dir_path)?;
            let mut kept = Some(Vec::new());
            loop {
                let chunk: Vec<String> = names.by_ref().take(uring::RING_ENTRIES).collect();
                if chunk.is_empty() {
                    break;
                }
                if !self.members(&mut walk, &dir, &dir_path, &chunk)? {
                    return Ok(());
                }
                kept = kept.filter(|kept| kept.len() + chunk.len() <= crate::cache::name::MAX_NAMES);
                if let Some(kept) = &mut kept {
                    kept.extend(chunk);
                }
            }
            if let Some(kept) = kept {
                self.names.insert(&stx, began, kept);
            }
        }
        if !walk.batch.is_empty() {
            let _ = walk.out.send(Ok(ListResponse { entries: walk.batch }));
        }
        Ok(())
    }

    /// Adds the members `names` of the directory `dir` to the walk: a `statx` of each
    /// (batched through io_uring when enabled), their dead properties, and for Depth
    /// infinity their subdirectories to walk next. `Ok(false)` when the receiver has
    /// gone away.
    fn members(
        &self,
        walk: &mut Walk<'_>,
        dir: &OwnedFd,
        dir_path: &VolumePath,
        names: &[String],
    ) -> Result<bool, Status> {
        let stats = self.stat_chunk(dir, names, dir_path);
        for (name, stx) in names.iter().zip(stats) {
            let Ok(member_path) = dir_path.join(name) else {
                continue;
            };
            let Some(member) = stx.and_then(|stx| self.member(stx, &member_path)) else {
                continue;
            };
            let properties =
                self.member_properties(dir, name, &member, &member_path, walk.began, &mut walk.tally);
            let info = file_info(&member_path, &member.stx);
            walk.count += 1;
            if walk.max_entries > 0 && walk.count > walk.max_entries {
                return Err(Status::out_of_range(format!(
                    "the listing has more than {} entries",
                    walk.max_entries
                )));
            }
            if info.is_collection
                && walk.depth == Depth::Infinity
                && let Ok(child) = self
                    .volume
                    .open_beneath(&member_path, OFlags::RDONLY | OFlags::DIRECTORY)
                && let Ok(child_stx) = stat_fd(&child, &member_path)
            {
                // The names are cached under the `statx` of the directory as opened,
                // never of the name before the open: what was read is that inode's.
                walk.pending_dirs.push((child, child_stx, member_path));
            }
            walk.batch.push(ListEntry {
                info: Some(info),
                properties,
            });
            if walk.batch.len() == BATCH {
                let full = std::mem::replace(&mut walk.batch, Vec::with_capacity(BATCH));
                if !walk.out.send(Ok(ListResponse { entries: full })) {
                    return Ok(false);
                }
            }
        }
        Ok(true)
    }
}

/// The state of one [`Scan::walk`].
struct Walk<'o> {
    began: SystemTime,
    depth: Depth,
    max_entries: u64,
    /// Entries so far, against `max_entries`.
    count: u64,
    /// The entries not sent yet.
    batch: Vec<ListEntry>,
    /// Directories still to read (Depth infinity), with their `statx`.
    pending_dirs: Vec<(OwnedFd, Statx, VolumePath)>,
    tally: Tally,
    out: &'o mut crate::scanslots::Outlet,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kubedav_api::pb::fileio::v1::PropertySelection;

    /// Every entry of a Depth 1 listing of `dir` as (path, collection, size, etag,
    /// property names), in listing order.
    fn list(volume: &Volume, io_uring: bool) -> Vec<(String, bool, u64, String, Vec<String>)> {
        list_with(volume, io_uring, &NameCache::new())
    }

    fn list_with(
        volume: &Volume,
        io_uring: bool,
        names: &NameCache,
    ) -> Vec<(String, bool, u64, String, Vec<String>)> {
        let cache = PropertyCache::new();
        let selection = PropertySelection {
            mode: property_selection::Mode::All as i32,
            names: vec![],
        };
        let scan = Scan {
            volume,
            selection: &selection,
            cache: &cache,
            names,
            io_uring,
        };
        let (tx, mut rx) = tokio::sync::mpsc::channel(64);
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let mut outlet = runtime.block_on(crate::scanslots::ScanSlots::new(1).enter(tx));
        scan.walk(VolumePath::parse("dir").unwrap(), Depth::One, 0, &mut outlet)
            .unwrap();
        drop(outlet);
        let mut entries = Vec::new();
        while let Some(batch) = rx.blocking_recv() {
            for entry in batch.unwrap().entries {
                let info = entry.info.unwrap();
                let names = entry.properties.iter().map(|p| p.name.clone()).collect();
                entries.push((info.path, info.is_collection, info.size, info.etag, names));
            }
        }
        entries
    }

    #[test]
    fn io_uring_listing_matches_one_statx_per_member() {
        uring::probe().expect("this test needs io_uring (CI has it); the fallback has its own tests");
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let dir = root.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        // More members than one submission carries, a collection, a member with a dead
        // property, a symlink inside the root (shown as its target) and one leading out
        // (hidden).
        for i in 0..600 {
            std::fs::write(dir.join(format!("f{i}")), vec![b'x'; i]).unwrap();
        }
        std::fs::create_dir(dir.join("sub")).unwrap();
        let with_property = std::fs::File::open(dir.join("f7")).unwrap();
        let property = DeadProperty {
            namespace: "urn:t".into(),
            name: "colour".into(),
            value: "red".into(),
        };
        props::write_raw(
            &with_property,
            &props::encode(&[property]),
            &VolumePath::parse("dir/f7").unwrap(),
        )
        .unwrap();
        std::os::unix::fs::symlink("f1", dir.join("inside")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.join("escape")).unwrap();
        let volume = Volume::open(root.path()).unwrap();

        let submissions = || {
            kubedav_metrics::encode(false)
                .unwrap()
                .lines()
                .find_map(|line| {
                    line.strip_prefix("kubedav_fileio_scan_batch_entries_count{path=\"io_uring\"} ")
                })
                .map_or(0, |count| count.parse::<u64>().unwrap())
        };
        let before = submissions();
        let batched = list(&volume, true);
        assert!(
            submissions() >= before + 3,
            "603 names went in 3 io_uring submissions"
        );
        assert_eq!(batched, list(&volume, false));
        assert_eq!(
            batched.len(),
            1 + 600 + 1 + 1,
            "the directory, files, sub and the inner symlink"
        );
        let f7 = batched.iter().find(|e| e.0 == "dir/f7").unwrap();
        assert_eq!((f7.2, f7.4.clone()), (7, vec!["colour".to_owned()]));
        let inside = batched.iter().find(|e| e.0 == "dir/inside").unwrap();
        assert_eq!(inside.2, 1, "a symlink is shown as its target");
        assert!(batched.iter().all(|e| e.0 != "dir/escape"));
    }

    #[test]
    fn kept_names_are_used_until_the_directory_changes() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("dir");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a"), b"1").unwrap();
        std::fs::write(dir.join("b"), b"22").unwrap();
        let volume = Volume::open(root.path()).unwrap();
        let names = NameCache::new();
        let paths = |names: &NameCache| {
            let mut paths: Vec<String> = list_with(&volume, false, names)
                .into_iter()
                .map(|e| e.0)
                .collect();
            paths.sort();
            paths
        };
        assert_eq!(paths(&names), ["dir", "dir/a", "dir/b"]);

        // Keep a list that differs from the directory (as if read earlier, under the
        // directory's current state): the listing must come from it, so the cache is used.
        let stat = || crate::cache::validity::stat_path(&dir);
        let kept = stat();
        let settled = SystemTime::now() + crate::cache::validity::SETTLED * 2;
        names.insert(&kept, settled, vec!["a".into(), "gone".into()]);
        assert_eq!(
            paths(&names),
            ["dir", "dir/a"],
            "the kept names, each still stat-ed: a member that is gone is left out"
        );

        // Once the clock has passed the kept ctime (as it has for any change made a
        // SETTLED after it), a new member shows at once.
        crate::cache::validity::wait_past_ctime(&kept);
        std::fs::write(dir.join("c"), b"333").unwrap();
        assert_eq!(paths(&names), ["dir", "dir/a", "dir/b", "dir/c"]);
    }

    #[test]
    fn a_single_resource_shows_its_current_properties_whether_cached_or_not() {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        let path = VolumePath::parse("f").unwrap();
        let colour_property = |colour: &'static str| DeadProperty {
            namespace: "urn:t".into(),
            name: "colour".into(),
            value: colour.into(),
        };
        let set_colour = |colour: &'static str| {
            let handle = std::fs::File::open(&file).unwrap();
            props::write_raw(&handle, &props::encode(&[colour_property(colour)]), &path).unwrap();
            crate::cache::validity::stat_path(&file)
        };
        let volume = Volume::open(root.path()).unwrap();
        let cache = PropertyCache::new();
        let selection = PropertySelection {
            mode: property_selection::Mode::All as i32,
            names: vec![],
        };
        let scan = Scan {
            volume: &volume,
            selection: &selection,
            cache: &cache,
            names: &NameCache::new(),
            io_uring: false,
        };
        let colour = || {
            let entry = scan.single(&path, &ResolvedPaths::new()).unwrap();
            assert_eq!(entry.info.unwrap().size, 1);
            entry
                .properties
                .iter()
                .map(|p| p.value.clone())
                .collect::<Vec<_>>()
        };

        let red = set_colour("red");
        assert_eq!(colour(), ["red"], "not cached: read from the file");

        // Keep a copy that differs from the file, as if read earlier in the same state:
        // the answer must come from it, so the cache is used.
        let settled = SystemTime::now() + crate::cache::validity::SETTLED * 2;
        cache.insert(&red, settled, &[colour_property("green")]);
        assert_eq!(colour(), ["green"], "cached");

        crate::cache::validity::wait_past_ctime(&red);
        set_colour("blue");
        assert_eq!(colour(), ["blue"], "a change is seen at once");
    }
}
