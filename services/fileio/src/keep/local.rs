//! [`LocalKeep`]: the [`Keep`] port over a volume's trash and versions
//! ([`super::volume`]).

use super::Keeping;
use super::volume::{self, Keeper};
use crate::errors::blocking;
use crate::volume::Volume;
use kubedav_api::keep::*;
use kubedav_api::path::VolumePath;
use std::sync::Arc;
use tonic::Status;

/// The trash and versions of a volume, as [`crate::LocalFileIo`] keeps them.
#[derive(Clone, Debug)]
pub struct LocalKeep {
    volume: Arc<Volume>,
    keeping: Option<Arc<Keeping>>,
}

impl LocalKeep {
    /// The trash and versions of `volume`, kept as `keeping` says (`None`: nothing kept).
    pub fn new(volume: Arc<Volume>, keeping: Option<Arc<Keeping>>) -> Self {
        Self { volume, keeping }
    }

    /// What is kept; FAILED_PRECONDITION when nothing is.
    fn keeping(&self) -> Result<Arc<Keeping>, Status> {
        self.keeping
            .clone()
            .ok_or_else(|| Status::failed_precondition("this server keeps no trash and no versions"))
    }
}

/// What is kept, as the quotas count it and make room from it.
impl crate::quota::Kept for LocalKeep {
    fn keeps(&self) -> (bool, bool) {
        self.keeping
            .as_ref()
            .map_or((false, false), |keeping| (keeping.trashes(), keeping.versions()))
    }

    fn counted(&self) -> Result<Vec<(VolumePath, u64)>, Status> {
        Ok(super::retain::kept_things(&self.volume, &VolumePath::root())?
            .into_iter()
            .map(|thing| (thing.counts_at, thing.bytes))
            .collect())
    }

    fn make_room(&self, root: &VolumePath, need: u64) -> Result<(u64, u64), Status> {
        let Some(keeping) = &self.keeping else {
            return Ok((0, 0));
        };
        super::retain::make_room(&self.volume, keeping, root, need)
    }
}

fn parse(path: &str) -> Result<VolumePath, Status> {
    Ok(VolumePath::parse(path)?)
}

#[async_trait::async_trait]
impl Keep for LocalKeep {
    async fn list_trash(&self, request: ListTrashRequest) -> Result<ListTrashResponse, Status> {
        self.keeping()?;
        let mut roots = request
            .roots
            .iter()
            .map(|root| parse(root))
            .collect::<Result<Vec<_>, _>>()?;
        let beneath = request
            .beneath
            .iter()
            .map(|path| parse(path))
            .collect::<Result<Vec<_>, _>>()?;
        let volume = self.volume.clone();
        blocking(move || {
            for within in &beneath {
                roots.extend(super::retain::trash_roots(&volume, within)?);
            }
            roots.sort();
            roots.dedup();
            let mut items = Vec::new();
            for root in &roots {
                items.extend(
                    volume::list_trash(&volume, root)?
                        .into_iter()
                        .map(TrashItem::from),
                );
            }
            items.sort_by(|a, b| a.id.cmp(&b.id));
            Ok(ListTrashResponse { items })
        })
        .await
    }

    async fn restore_trash(&self, request: RestoreTrashRequest) -> Result<RestoreResponse, Status> {
        let keeping = self.keeping()?;
        let (root, destination) = (parse(&request.root)?, parse(&request.destination)?);
        let volume = self.volume.clone();
        blocking(move || {
            let created = volume::restore(
                &volume,
                &keeping,
                &root,
                &request.id,
                &destination,
                request.overwrite,
                &request.by,
            )?;
            Ok(RestoreResponse { created })
        })
        .await
    }

    async fn purge_trash(&self, request: PurgeTrashRequest) -> Result<PurgeTrashResponse, Status> {
        self.keeping()?;
        let root = parse(&request.root)?;
        let volume = self.volume.clone();
        blocking(move || {
            volume::purge(&volume, &root, &request.id)?;
            crate::metrics::purged(crate::keep::purge_reason(&request.reason), 1);
            Ok(PurgeTrashResponse {})
        })
        .await
    }

    async fn list_versions(&self, request: ListVersionsRequest) -> Result<ListVersionsResponse, Status> {
        self.keeping()?;
        let path = parse(&request.path)?;
        let volume = self.volume.clone();
        blocking(move || {
            let versions = volume::list_versions(&volume, &path)?
                .into_iter()
                .map(Version::from)
                .collect();
            Ok(ListVersionsResponse { versions })
        })
        .await
    }

    async fn restore_version(&self, request: RestoreVersionRequest) -> Result<RestoreResponse, Status> {
        let keeping = self.keeping()?;
        let path = parse(&request.path)?;
        let volume = self.volume.clone();
        blocking(move || {
            let version = volume::open_version(&volume, &path, &request.id)?;
            let mut upload = crate::write::Upload::begin(&volume, path.clone(), None)?;
            upload.copy_from(&mut std::fs::File::from(version))?;
            upload.keep_replaced(Some(Keeper {
                volume: volume.clone(),
                keeping,
                by: String::new(),
            }));
            let committed = upload.commit(&Default::default(), false)?;
            Ok(RestoreResponse {
                created: committed.created,
            })
        })
        .await
    }
}
