//! [`BucketRecords`]: records as objects under the served prefix's `.kubedav/`. One
//! PutObject replaces a record whole, as S3 writes every object.

use super::check_size;
use crate::s3::S3Client;
use kubedav_api::path::RESERVED_AREA;
use kubedav_api::records::*;
use tonic::Status;

/// Records in a bucket.
#[derive(Clone)]
pub struct BucketRecords {
    s3: S3Client,
    /// `{prefix}.kubedav/`.
    base: String,
}

impl BucketRecords {
    /// Records under `prefix` (`""` or ending with `/`) of the bucket `s3` serves.
    pub fn new(s3: S3Client, prefix: &str) -> Self {
        Self {
            s3,
            base: format!("{prefix}{RESERVED_AREA}/"),
        }
    }

    fn key(&self, name: &RecordName) -> String {
        format!("{}{}", self.base, name.as_str())
    }
}

#[async_trait::async_trait]
impl Records for BucketRecords {
    async fn get(&self, request: GetRecordRequest) -> Result<GetRecordResponse, Status> {
        let name = RecordName::parse(&request.area, &request.key, false)?;
        Ok(match self.s3.get_versioned(&self.key(&name)).await? {
            Some((data, _)) => {
                check_size(&data)?;
                GetRecordResponse { found: true, data }
            }
            None => GetRecordResponse::default(),
        })
    }

    async fn put(&self, request: PutRecordRequest) -> Result<PutRecordResponse, Status> {
        let name = RecordName::parse(&request.area, &request.key, false)?;
        check_size(&request.data)?;
        if request.create_only {
            // If-None-Match: * : the bucket refuses it when the object exists.
            return match self.s3.put_if(&self.key(&name), request.data, Some("")).await {
                Ok(_) => Ok(PutRecordResponse {}),
                Err(status) if status.code() == tonic::Code::Aborted => Err(Status::already_exists(format!(
                    "the record {} exists",
                    name.as_str()
                ))),
                Err(status) => Err(status),
            };
        }
        self.s3.put(&self.key(&name), request.data).await?;
        Ok(PutRecordResponse {})
    }

    async fn delete(&self, request: DeleteRecordRequest) -> Result<DeleteRecordResponse, Status> {
        let name = RecordName::parse(&request.area, &request.key, false)?;
        self.s3.delete(&self.key(&name)).await?;
        Ok(DeleteRecordResponse {})
    }

    async fn list(&self, request: ListRecordsRequest) -> Result<ListRecordsResponse, Status> {
        let folder = RecordName::parse(&request.area, &request.folder, true)?;
        let prefix = format!("{}{}/", self.base, folder.as_str());
        let mut names = Vec::new();
        let mut from = None;
        loop {
            let page = self.s3.list(&prefix, from.as_deref()).await?;
            names.extend(
                page.objects
                    .iter()
                    .filter_map(|object| object.key.strip_prefix(&prefix))
                    .filter(|name| !name.is_empty() && !name.contains('/'))
                    .map(str::to_owned),
            );
            match page.next {
                Some(next) => from = Some(next),
                None => break,
            }
        }
        names.sort();
        Ok(ListRecordsResponse { names })
    }
}
