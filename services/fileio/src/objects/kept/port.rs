//! [`BucketKeep`]: the [`Keep`] port over a bucket's trash and versions
//! ([`super::BucketKeeper`]), and what the quotas count and make room from
//! ([`crate::quota::Kept`]).

use super::BucketKeeper;
use kubedav_api::keep::*;
use kubedav_api::path::VolumePath;
use tonic::Status;

/// The trash and versions of a bucket, as [`crate::ObjectFileIo`] keeps them.
#[derive(Clone, Debug)]
pub struct BucketKeep {
    keeper: Option<BucketKeeper>,
    /// The runtime the quotas' blocking calls run the bucket's requests on.
    runtime: tokio::runtime::Handle,
}

impl BucketKeep {
    /// The trash and versions `keeper` keeps (`None`: nothing kept). Made within a
    /// Tokio runtime, which the quotas' calls use.
    pub fn new(keeper: Option<BucketKeeper>) -> Self {
        Self {
            keeper,
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// What is kept; FAILED_PRECONDITION when nothing is.
    fn keeper(&self) -> Result<&BucketKeeper, Status> {
        self.keeper
            .as_ref()
            .ok_or_else(|| Status::failed_precondition("this server keeps no trash and no versions"))
    }
}

fn parse(path: &str) -> Result<VolumePath, Status> {
    Ok(VolumePath::parse(path)?)
}

/// What is kept, as the quotas count it and make room from it (called on the blocking
/// pool: each runs the bucket's requests on the runtime).
impl crate::quota::Kept for BucketKeep {
    fn keeps(&self) -> (bool, bool) {
        self.keeper.as_ref().map_or((false, false), |keeper| {
            (keeper.keeping.trashes(), keeper.keeping.versions())
        })
    }

    fn counted(&self) -> Result<Vec<(VolumePath, u64)>, Status> {
        let Some(keeper) = &self.keeper else {
            return Ok(Vec::new());
        };
        let things = self.runtime.block_on(keeper.kept_things(&VolumePath::root()))?;
        Ok(things
            .into_iter()
            .map(|thing| (thing.counts_at, thing.bytes))
            .collect())
    }

    fn make_room(&self, root: &VolumePath, need: u64) -> Result<(u64, u64), Status> {
        match &self.keeper {
            Some(keeper) => self.runtime.block_on(keeper.make_room(root, need)),
            None => Ok((0, 0)),
        }
    }
}

#[async_trait::async_trait]
impl Keep for BucketKeep {
    async fn list_trash(&self, request: ListTrashRequest) -> Result<ListTrashResponse, Status> {
        let keeper = self.keeper()?;
        let mut roots = request
            .roots
            .iter()
            .map(|root| parse(root))
            .collect::<Result<Vec<_>, _>>()?;
        for within in &request.beneath {
            roots.extend(keeper.trash_roots(&parse(within)?).await?);
        }
        roots.sort();
        roots.dedup();
        let mut items = Vec::new();
        for root in &roots {
            items.extend(keeper.list_trash(root).await?.into_iter().map(TrashItem::from));
        }
        items.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(ListTrashResponse { items })
    }

    async fn restore_trash(&self, request: RestoreTrashRequest) -> Result<RestoreResponse, Status> {
        let keeper = self.keeper()?;
        let (root, destination) = (parse(&request.root)?, parse(&request.destination)?);
        let created = keeper
            .restore(&root, &request.id, &destination, request.overwrite, &request.by)
            .await?;
        Ok(RestoreResponse { created })
    }

    async fn purge_trash(&self, request: PurgeTrashRequest) -> Result<PurgeTrashResponse, Status> {
        let keeper = self.keeper()?;
        keeper.purge(&parse(&request.root)?, &request.id).await?;
        crate::metrics::purged(crate::keep::purge_reason(&request.reason), 1);
        Ok(PurgeTrashResponse {})
    }

    async fn list_versions(&self, request: ListVersionsRequest) -> Result<ListVersionsResponse, Status> {
        let keeper = self.keeper()?;
        let versions = keeper
            .list_versions(&parse(&request.path)?)
            .await?
            .into_iter()
            .map(Version::from)
            .collect();
        Ok(ListVersionsResponse { versions })
    }

    async fn restore_version(&self, request: RestoreVersionRequest) -> Result<RestoreResponse, Status> {
        let keeper = self.keeper()?;
        let created = keeper
            .restore_version(&parse(&request.path)?, &request.id)
            .await?;
        Ok(RestoreResponse { created })
    }
}
