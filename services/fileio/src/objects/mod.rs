//! fileio's second backend: [`ObjectFileIo`] serves a prefix of an S3-compatible bucket
//! behind the same [`FileIo`] port as the volume, so the gRPC contract, the gateway and
//! the other services do not change.
//!
//! The bucket stays a plain bucket: the file `/a/b.txt` is the object `PREFIX/a/b.txt`
//! ([`keys`]), collections are `dir/` markers or simply keys below a prefix ([`find`]),
//! and the only objects of kubedav's own are the property indexes ([`properties`]),
//! which no client can name. Nothing is kept in memory between calls: any number of
//! replicas may serve one bucket.

pub mod config;
pub mod find;
pub mod kept;
pub mod keys;
pub mod listing;
pub mod properties;
pub mod read;
pub mod sweep;
pub mod tree;
pub mod write;

use crate::s3::S3Client;
use bytes::Bytes;
use futures_util::StreamExt;
use keys::Keys;
use kubedav_api::BoxStream;
use kubedav_api::fileio::{
    CopyRequest, DeleteRequest, DeleteResponse, Depth, FileInfo, FileIo, ListRequest, ListResponse,
    MkdirRequest, MkdirResponse, MoveRequest, PatchPropertiesRequest, PatchPropertiesResponse, ReadReply,
    ReadRequest, StatRequest, TransferResponse, UsageRequest, UsageResponse, WriteHeader, WriteResponse,
};
use kubedav_api::path::VolumePath;
use tonic::Status;

/// The fileio core over a prefix of an S3-compatible bucket.
#[derive(Clone)]
pub struct ObjectFileIo {
    s3: S3Client,
    keys: Keys,
    /// What deletes and overwrites keep, when anything is kept.
    kept: Option<kept::BucketKeeper>,
    /// Uploads in many requests, kept in the bucket.
    uploads: crate::uploads::bucket::BucketUploads,
}

impl std::fmt::Debug for ObjectFileIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectFileIo")
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

impl ObjectFileIo {
    /// The records kept with this bucket's data, under the prefix's `.kubedav/`.
    pub fn records(&self) -> crate::records::BucketRecords {
        crate::records::BucketRecords::new(self.s3.clone(), self.keys.prefix())
    }

    /// Serves `storage`, once the bucket answers; uploads that stored nothing for the
    /// storage's idle time (left by a crash) are aborted in the background.
    pub async fn open(storage: &config::Storage) -> Result<Self, String> {
        let s3 = S3Client::new(&storage.s3)?;
        if config::in_the_clear(&storage.s3.endpoint) {
            tracing::warn!(
                target: "kubedav",
                "the S3 endpoint {} is plain HTTP and not on this host or in the cluster: the \
                 files cross the network unencrypted; use its https:// URL",
                storage.s3.endpoint
            );
        }
        let keys = Keys::new(&storage.prefix);
        let uploads =
            crate::uploads::bucket::BucketUploads::new(s3.clone(), keys.clone(), Default::default());
        let core = Self {
            s3,
            keys,
            kept: None,
            uploads,
        };
        core.check().await.map_err(|e| {
            format!(
                "{e} (check --storage, AWS_ENDPOINT_URL and the credentials in AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
            )
        })?;
        crate::metrics::register();
        tokio::spawn(storage.sweep.run(core.s3.clone(), core.keys.prefix().to_owned()));
        Ok(core)
    }

    /// Keeps what deletes and overwrites remove, as `keeping` says, with its retention
    /// running in the background (on the current Tokio runtime).
    pub fn with_keeping(mut self, keeping: crate::keep::Keeping) -> Self {
        self.kept = (keeping.trashes() || keeping.versions()).then(|| kept::BucketKeeper {
            s3: self.s3.clone(),
            keys: self.keys.clone(),
            keeping: std::sync::Arc::new(keeping),
        });
        if let Some(keeper) = &self.kept {
            keeper.clone().retain_in_background();
        }
        self
    }

    /// Keeps uploads in many requests as `settings` say, expired ones removed in the
    /// background (on the current Tokio runtime).
    pub fn with_uploads(mut self, settings: crate::uploads::UploadSettings) -> Self {
        self.uploads =
            crate::uploads::bucket::BucketUploads::new(self.s3.clone(), self.keys.clone(), settings);
        self.uploads.sweep_in_background();
        self
    }

    /// The uploads in many requests kept in this bucket, as the uploads port.
    pub fn uploads(&self) -> crate::uploads::bucket::BucketUploads {
        self.uploads.clone()
    }

    /// The trash and versions this bucket keeps, as the keep port (made on a Tokio
    /// runtime).
    pub fn keep(&self) -> kept::port::BucketKeep {
        kept::port::BucketKeep::new(self.kept.clone())
    }

    /// What deletes and overwrites keep here, if anything is kept.
    pub fn keeper(&self) -> Option<&kept::BucketKeeper> {
        self.kept.as_ref()
    }

    /// What a change by `by` keeps, if anything is kept.
    fn keeping_by<'a>(&'a self, by: &'a str) -> Option<(&'a kept::BucketKeeper, &'a str)> {
        self.kept.as_ref().map(|keeper| (keeper, by))
    }

    /// Whether the bucket answers (for `/readyz`).
    pub async fn check(&self) -> Result<(), String> {
        self.s3
            .first_under(self.keys.prefix())
            .await
            .map(|_| ())
            .map_err(|status| status.message().to_owned())
    }
}

fn parse(path: &str) -> Result<VolumePath, Status> {
    Ok(VolumePath::parse(path)?)
}

#[async_trait::async_trait]
impl FileIo for ObjectFileIo {
    #[tracing::instrument(skip_all, name = "fileio.stat", fields(path = %request.path))]
    async fn stat(&self, request: StatRequest) -> Result<FileInfo, Status> {
        let path = parse(&request.path)?;
        find::find(&self.s3, &self.keys, &path)
            .await?
            .describe(&self.s3, &self.keys, &path)
            .await?
            .ok_or_else(|| Status::not_found(format!("{path} does not exist")))
    }

    #[tracing::instrument(skip_all, name = "fileio.list", fields(path = %request.path, depth = request.depth))]
    async fn list(&self, request: ListRequest) -> Result<BoxStream<ListResponse>, Status> {
        let path = parse(&request.path)?;
        let depth = Depth::try_from(request.depth).map_err(|_| Status::invalid_argument("unknown depth"))?;
        let selection = request.properties.unwrap_or_default();
        if depth == Depth::Zero {
            let listing = listing::Listing {
                s3: &self.s3,
                keys: &self.keys,
                selection: &selection,
                max_entries: request.max_entries,
            };
            let entries = vec![listing.single(&path).await?];
            return Ok(futures_util::stream::iter([Ok(ListResponse { entries })]).boxed());
        }
        crate::metrics::scan(crate::metrics::ScanPath::ObjectStore);
        let (tx, rx) = tokio::sync::mpsc::channel(2);
        let (s3, keys, max_entries) = (self.s3.clone(), self.keys.clone(), request.max_entries);
        tokio::spawn(async move {
            let listing = listing::Listing {
                s3: &s3,
                keys: &keys,
                selection: &selection,
                max_entries,
            };
            listing.walk(path, depth, &tx).await;
        });
        crate::first_batch_decides(rx).await
    }

    #[tracing::instrument(skip_all, name = "fileio.read", fields(path = %request.path))]
    async fn read(&self, request: ReadRequest) -> Result<ReadReply, Status> {
        let path = parse(&request.path)?;
        if !request.version.is_empty() {
            return match &self.kept {
                Some(keeper) => {
                    keeper
                        .read_version(&path, &request.version, &request.ranges)
                        .await
                }
                None => Err(Status::not_found(format!(
                    "{path} has no version {}",
                    request.version
                ))),
            };
        }
        read::read(&self.s3, &self.keys, &path, &request.ranges).await
    }

    #[tracing::instrument(skip_all, name = "fileio.write", fields(path = %header.path))]
    async fn write(&self, header: WriteHeader, body: BoxStream<Bytes>) -> Result<WriteResponse, Status> {
        let path = parse(&header.path)?;
        if let Some(from) = &header.from_upload {
            return self.uploads.land(from, &path, &header, self.kept.as_ref()).await;
        }
        if !header.incoming.is_empty() {
            return Err(Status::unimplemented(
                "a bucket has no incoming area: leave the gateway's --fileio-incoming unset",
            ));
        }
        write::write(&self.s3, &self.keys, &path, &header, body, self.kept.as_ref()).await
    }

    #[tracing::instrument(skip_all, name = "fileio.delete", fields(path = %request.path))]
    async fn delete(&self, request: DeleteRequest) -> Result<DeleteResponse, Status> {
        let path = parse(&request.path)?;
        let keeper = self.keeping_by(&request.by);
        let (failures, trash_item) =
            tree::delete(&self.s3, &self.keys, &path, request.if_match.as_deref(), keeper).await?;
        Ok(DeleteResponse { failures, trash_item })
    }

    #[tracing::instrument(skip_all, name = "fileio.mkdir", fields(path = %request.path))]
    async fn mkdir(&self, request: MkdirRequest) -> Result<MkdirResponse, Status> {
        let path = parse(&request.path)?;
        let info = tree::mkdir(&self.s3, &self.keys, &path).await?;
        Ok(MkdirResponse { info: Some(info) })
    }

    #[tracing::instrument(skip_all, name = "fileio.copy", fields(source = %request.source, destination = %request.destination))]
    async fn copy(&self, request: CopyRequest) -> Result<TransferResponse, Status> {
        let (source, destination) = (parse(&request.source)?, parse(&request.destination)?);
        let depth = Depth::try_from(request.depth).map_err(|_| Status::invalid_argument("unknown depth"))?;
        let left_out = crate::left_out::LeftOut::parse(&source, &request.leave_out)?;
        tree::copy(
            &self.s3,
            &self.keys,
            &source,
            &destination,
            depth,
            (request.overwrite, self.keeping_by(&request.by)),
            &left_out,
        )
        .await
    }

    #[tracing::instrument(skip_all, name = "fileio.move", fields(source = %request.source, destination = %request.destination))]
    async fn r#move(&self, request: MoveRequest) -> Result<TransferResponse, Status> {
        let (source, destination) = (parse(&request.source)?, parse(&request.destination)?);
        let keeper = self.keeping_by(&request.by);
        tree::rename(
            &self.s3,
            &self.keys,
            &source,
            &destination,
            (request.overwrite, keeper),
        )
        .await
    }

    #[tracing::instrument(skip_all, name = "fileio.proppatch", fields(path = %request.path))]
    async fn patch_properties(
        &self,
        request: PatchPropertiesRequest,
    ) -> Result<PatchPropertiesResponse, Status> {
        let path = parse(&request.path)?;
        crate::props::check(&request)?;
        let found = find::find(&self.s3, &self.keys, &path).await?;
        // A new time is a new object (a copy onto itself), made before the index changes:
        // on a bucket the time and the properties are two steps, not one.
        let restamped = match (&found, request.modified_unix_ns) {
            (_, None) => None,
            (find::Found::File(object), Some(modified)) => {
                let etag = self.s3.restamp(&object.key, &object.etag, modified).await?;
                Some((object.etag.clone(), etag, modified))
            }
            (find::Found::Collection, Some(_)) => {
                return Err(Status::unimplemented(
                    "a bucket keeps no time for a collection, so none can be set",
                ));
            }
            (find::Found::Missing, Some(_)) => None,
        };
        if matches!(found, find::Found::Missing) {
            return Err(Status::not_found(format!("{path} does not exist")));
        }
        let (parent, name) = Keys::index_entry(&path, found.is_collection());
        properties::update(&self.s3, &self.keys, &parent, |entries| {
            let mut current = entries.remove(&name).unwrap_or_default();
            crate::props::apply(&mut current, &request);
            if let Some((before, after, modified)) = &restamped {
                crate::props::rebind_checksums(&mut current, before, after);
                current.retain(|p| {
                    !(kubedav_api::checksums::is_reserved(&p.namespace)
                        && p.name == kubedav_api::checksums::MODIFIED_PROPERTY)
                });
                current.push(kubedav_api::checksums::modified_property(after, *modified));
            }
            if !current.is_empty() {
                entries.insert(name.clone(), current);
            }
            true
        })
        .await?;
        Ok(PatchPropertiesResponse {})
    }

    /// A bucket's usage is not known without listing all of it: the quota properties
    /// are left out (RFC 4331 allows it).
    async fn usage(&self, _request: UsageRequest) -> Result<UsageResponse, Status> {
        Err(Status::unimplemented(
            "object storage reports no quota: its usage is not known without listing the whole bucket",
        ))
    }
}
