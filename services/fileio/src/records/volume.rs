//! [`VolumeRecords`]: records as files under `.kubedav/` at the volume's root, each
//! written to a temporary file in its folder, synced and renamed over the old one, so a
//! reader sees the old or the new record and a crash leaves one of them. Every folder
//! is opened beneath the root without following symlinks.

use super::check_size;
use crate::errors::blocking;
use crate::volume::Volume;
use kubedav_api::path::RESERVED_AREA;
use kubedav_api::records::*;
use rustix::fd::OwnedFd;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::io::{Read, Write};
use std::sync::Arc;
use tonic::Status;

/// How a record's folders are opened: beneath the root, no symlink followed.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH.union(ResolveFlags::NO_SYMLINKS);

/// Names of temporary files, left out of listings (and left by a crash at worst).
const TEMPORARY: &str = ".tmp-";

/// Records in the volume's `.kubedav/` folder.
#[derive(Clone, Debug)]
pub struct VolumeRecords {
    volume: Arc<Volume>,
}

impl VolumeRecords {
    /// Records of `volume`.
    pub fn new(volume: Arc<Volume>) -> Self {
        Self { volume }
    }

    /// Opens the folder `relative` (beneath `.kubedav/`), making it and its parents when
    /// `create`; `None` when it is not there and not made.
    fn folder(&self, relative: &str, create: bool) -> Result<Option<OwnedFd>, Status> {
        self.volume.reserved_folder(relative, create)
    }

    fn get_now(&self, name: &RecordName) -> Result<GetRecordResponse, Status> {
        let path = format!("{RESERVED_AREA}/{}", name.as_str());
        let fd = match rustix::fs::openat2(
            self.volume.root_fd(),
            path.as_str(),
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
            RESOLVE,
        ) {
            Ok(fd) => fd,
            Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => {
                return Ok(GetRecordResponse::default());
            }
            Err(e) => return Err(failed("open", &path, e)),
        };
        let mut data = Vec::new();
        std::fs::File::from(fd)
            .take(MAX_RECORD_BYTES as u64 + 1)
            .read_to_end(&mut data)
            .map_err(|e| {
                failed(
                    "read",
                    &path,
                    rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO),
                )
            })?;
        check_size(&data)?;
        Ok(GetRecordResponse {
            found: true,
            data: data.into(),
        })
    }

    fn put_now(&self, name: &RecordName, data: &[u8], create_only: bool) -> Result<(), Status> {
        check_size(data)?;
        let (folder, file) = split(name.as_str());
        let dir = self.folder(folder, true)?.expect("made");
        // A clash only makes the create fail (O_EXCL), never overwrites.
        let temporary = format!("{TEMPORARY}{:016x}", fastrand::u64(..));
        let fd = rustix::fs::openat(
            &dir,
            temporary.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| failed("create", name.as_str(), e))?;
        let mut handle = std::fs::File::from(fd);
        let written = handle.write_all(data).and_then(|()| handle.sync_all());
        if let Err(e) = written {
            let _ = rustix::fs::unlinkat(&dir, temporary.as_str(), rustix::fs::AtFlags::empty());
            return Err(failed(
                "write",
                name.as_str(),
                rustix::io::Errno::from_io_error(&e).unwrap_or(rustix::io::Errno::IO),
            ));
        }
        let flags = if create_only {
            rustix::fs::RenameFlags::NOREPLACE
        } else {
            rustix::fs::RenameFlags::empty()
        };
        match rustix::fs::renameat_with(&dir, temporary.as_str(), &dir, file, flags) {
            Ok(()) => {}
            Err(rustix::io::Errno::EXIST) => {
                let _ = rustix::fs::unlinkat(&dir, temporary.as_str(), rustix::fs::AtFlags::empty());
                return Err(Status::already_exists(format!(
                    "the record {} exists",
                    name.as_str()
                )));
            }
            Err(e) => return Err(failed("rename", name.as_str(), e)),
        }
        rustix::fs::fsync(&dir).map_err(|e| failed("sync", folder, e))
    }

    fn delete_now(&self, name: &RecordName) -> Result<(), Status> {
        let (folder, file) = split(name.as_str());
        let Some(dir) = self.folder(folder, false)? else {
            return Ok(());
        };
        match rustix::fs::unlinkat(&dir, file, rustix::fs::AtFlags::empty()) {
            Ok(()) => rustix::fs::fsync(&dir).map_err(|e| failed("sync", folder, e)),
            Err(rustix::io::Errno::NOENT) => Ok(()),
            Err(e) => Err(failed("remove", name.as_str(), e)),
        }
    }

    fn list_now(&self, folder: &RecordName) -> Result<ListRecordsResponse, Status> {
        let Some(dir) = self.folder(folder.as_str(), false)? else {
            return Ok(ListRecordsResponse::default());
        };
        let entries = rustix::fs::Dir::read_from(&dir).map_err(|e| failed("list", folder.as_str(), e))?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| failed("list", folder.as_str(), e))?;
            let name = entry.file_name().to_string_lossy();
            if entry.file_type() == rustix::fs::FileType::RegularFile && !name.starts_with('.') {
                names.push(name.into_owned());
            }
        }
        names.sort();
        Ok(ListRecordsResponse { names })
    }
}

/// A record's folder and file name.
fn split(path: &str) -> (&str, &str) {
    path.rsplit_once('/').unwrap_or(("", path))
}

fn failed(what: &str, path: &str, error: rustix::io::Errno) -> Status {
    match error {
        rustix::io::Errno::NOSPC | rustix::io::Errno::DQUOT => {
            Status::resource_exhausted(format!("the volume is full: cannot {what} the record {path}"))
        }
        _ => Status::internal(format!("cannot {what} the record {path}: {error}")),
    }
}

#[async_trait::async_trait]
impl Records for VolumeRecords {
    async fn get(&self, request: GetRecordRequest) -> Result<GetRecordResponse, Status> {
        let name = RecordName::parse(&request.area, &request.key, false)?;
        let records = self.clone();
        blocking(move || records.get_now(&name)).await
    }

    async fn put(&self, request: PutRecordRequest) -> Result<PutRecordResponse, Status> {
        let name = RecordName::parse(&request.area, &request.key, false)?;
        let records = self.clone();
        blocking(move || records.put_now(&name, &request.data, request.create_only)).await?;
        Ok(PutRecordResponse {})
    }

    async fn delete(&self, request: DeleteRecordRequest) -> Result<DeleteRecordResponse, Status> {
        let name = RecordName::parse(&request.area, &request.key, false)?;
        let records = self.clone();
        blocking(move || records.delete_now(&name)).await?;
        Ok(DeleteRecordResponse {})
    }

    async fn list(&self, request: ListRecordsRequest) -> Result<ListRecordsResponse, Status> {
        let folder = RecordName::parse(&request.area, &request.folder, true)?;
        let records = self.clone();
        blocking(move || records.list_now(&folder)).await
    }
}
