//! A `Write` whose bytes a gateway writes into the incoming area: admitted at once,
//! landed once the gateway ends the call's stream.

use super::Landings;
use crate::errors::blocking;
use crate::keep::Keeping;
use crate::volume::Volume;
use bytes::Bytes;
use futures_util::StreamExt;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{WriteHeader, WriteResponse};
use kubedav_api::path::VolumePath;
use std::sync::Arc;
use tonic::Status;

/// What a write from the incoming area needs of the volume it lands on.
pub struct Landing {
    /// The volume's incoming area.
    pub landings: Arc<Landings>,
    /// The volume.
    pub volume: Arc<Volume>,
    /// What a full volume may lose to make room.
    pub keeping: Option<Arc<Keeping>>,
    /// Keeps the file a landing replaces as a version, when versions are kept.
    pub keeper: Option<crate::keep::volume::Keeper>,
}

impl Landing {
    /// Admits the write `header` asks (its size declared, its file named), waits for the
    /// end of `body`, which carries nothing, and lands the file.
    pub async fn receive(
        self,
        header: WriteHeader,
        mut body: BoxStream<Bytes>,
    ) -> Result<WriteResponse, Status> {
        let size = header
            .expected_size
            .ok_or_else(|| Status::invalid_argument("a write from the incoming area declares its size"))?;
        let path = VolumePath::parse(&header.path)?;
        let Landing {
            landings,
            volume,
            keeping,
            keeper,
        } = self;
        let (admitting, on, name) = (landings.clone(), volume.clone(), header.incoming.clone());
        let (admitted, may_purge) = (path.clone(), !header.no_purge);
        blocking(move || admitting.admit(&on, keeping.as_deref(), &admitted, &name, size, may_purge)).await?;
        // The stream carries nothing and ends once the gateway has closed the file.
        while let Some(chunk) = body.next().await {
            if !chunk?.is_empty() {
                return Err(Status::invalid_argument(
                    "a write from the incoming area carries no body",
                ));
            }
        }
        let committed = blocking(move || {
            let (mut upload, _landed) = landings.land(&volume, path, &header.incoming, size)?;
            upload.keep_replaced(keeper);
            upload.commit(&header, true)
        })
        .await?;
        crate::metrics::written_bytes(size);
        Ok(WriteResponse {
            info: Some(committed.info),
            created: committed.created,
            checksums: committed.checksums,
        })
    }
}
