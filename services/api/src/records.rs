//! The records port: [`Records`], the small documents kubedav keeps for its users
//! besides their files, stored with the data (see `proto/kubedav/records/v1/records.proto`).
//! The gRPC adapters are `kubedav_remote::client::RemoteRecords` and
//! `kubedav_remote::server::RecordsGrpc`; fileio's cores implement it on both backends.

use crate::pb::records::v1 as pb;
use tonic::Status;

pub use pb::{
    DeleteRecordRequest, DeleteRecordResponse, GetRecordRequest, GetRecordResponse, ListRecordsRequest,
    ListRecordsResponse, PutRecordRequest, PutRecordResponse,
};

/// One area of the records as its user names it: the requests for the records in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Area(pub &'static str);

impl Area {
    /// Read the record `key`.
    pub fn get(self, key: &str) -> GetRecordRequest {
        GetRecordRequest {
            area: self.0.into(),
            key: key.into(),
        }
    }

    /// Write `data` as the record `key`.
    pub fn put(self, key: &str, data: Vec<u8>) -> PutRecordRequest {
        PutRecordRequest {
            area: self.0.into(),
            key: key.into(),
            data: data.into(),
            create_only: false,
        }
    }

    /// Write `data` as the record `key` only if there is none of that name (an
    /// ALREADY_EXISTS error otherwise).
    pub fn create(self, key: &str, data: Vec<u8>) -> PutRecordRequest {
        PutRecordRequest {
            create_only: true,
            ..self.put(key, data)
        }
    }

    /// Remove the record `key`.
    pub fn delete(self, key: &str) -> DeleteRecordRequest {
        DeleteRecordRequest {
            area: self.0.into(),
            key: key.into(),
        }
    }

    /// The records directly in `folder` ("" for the area's top).
    pub fn list(self, folder: &str) -> ListRecordsRequest {
        ListRecordsRequest {
            area: self.0.into(),
            folder: folder.into(),
        }
    }
}

/// Largest record, in bytes.
pub const MAX_RECORD_BYTES: usize = 64 * 1024;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// Records, as their users (auth, the gateway) see them.
#[async_trait::async_trait]
pub trait Records: Send + Sync + 'static {
    /// One record's bytes.
    async fn get(&self, request: GetRecordRequest) -> Result<GetRecordResponse, Status>;
    /// Writes a record atomically, replacing any of the same name (or, `create_only`,
    /// only if there is none).
    async fn put(&self, request: PutRecordRequest) -> Result<PutRecordResponse, Status>;
    /// Removes a record (succeeds when there is none).
    async fn delete(&self, request: DeleteRecordRequest) -> Result<DeleteRecordResponse, Status>;
    /// The names of the records directly in a folder of an area.
    async fn list(&self, request: ListRecordsRequest) -> Result<ListRecordsResponse, Status>;
}

/// A checked record name: its area and key, and the relative path they make beneath the
/// reserved folder (`{area}/{key}`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordName {
    path: String,
}

impl RecordName {
    /// Checks `area` and `key` (`key` may be empty only for a folder: `folder` true).
    pub fn parse(area: &str, key: &str, folder: bool) -> Result<Self, Status> {
        let valid_area = !area.is_empty()
            && area.len() <= 32
            && area
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !valid_area {
            return Err(Status::invalid_argument(format!(
                "record area {area:?}: lowercase letters, digits and '-', at most 32"
            )));
        }
        if key.len() > MAX_KEY_BYTES {
            return Err(Status::invalid_argument(format!(
                "record key longer than {MAX_KEY_BYTES} bytes"
            )));
        }
        if key.is_empty() {
            return if folder {
                Ok(Self {
                    path: area.to_owned(),
                })
            } else {
                Err(Status::invalid_argument("empty record key"))
            };
        }
        for segment in key.split('/') {
            let valid = !segment.is_empty()
                && segment != "."
                && segment != ".."
                && segment.len() <= 255
                && segment
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b'_'));
            if !valid {
                return Err(Status::invalid_argument(format!(
                    "record key {key:?}: segments of letters, digits, '.', '-' and '_'"
                )));
            }
        }
        Ok(Self {
            path: format!("{area}/{key}"),
        })
    }

    /// `{area}/{key}`, relative to the reserved folder.
    pub fn as_str(&self) -> &str {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_inside_their_area() {
        assert_eq!(
            RecordName::parse("app-passwords", "dXNlcg/k1", false)
                .unwrap()
                .as_str(),
            "app-passwords/dXNlcg/k1"
        );
        assert_eq!(RecordName::parse("shares", "", true).unwrap().as_str(), "shares");
        for (area, key) in [
            ("", "a"),
            ("Up", "a"),
            ("a/b", "c"),
            ("a", ""),
            ("a", "../x"),
            ("a", "b/../c"),
            ("a", "/b"),
            ("a", "b/"),
            ("a", "b//c"),
            ("a", "."),
            ("a", "sp ace"),
            ("a", "nul\0"),
            ("a", "é"),
        ] {
            assert!(RecordName::parse(area, key, false).is_err(), "{area:?} {key:?}");
        }
    }
}
