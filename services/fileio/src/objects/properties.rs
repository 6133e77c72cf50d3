//! Dead properties in a bucket: one index object per collection
//! ([`super::keys::PROPERTY_INDEX`]) holds the properties of each of its members, by
//! name, so a PROPFIND of a collection reads one object whatever its size. Writers
//! change an index with a write conditional on the version they read, and read again
//! when another writer came first: no change is lost, across any number of fileio
//! replicas. docs/architecture.md says why an index and not object metadata.

use super::keys::Keys;
use crate::s3::S3Client;
use bytes::Bytes;
use kubedav_api::path::VolumePath;
use kubedav_api::pb::fileio::v1::DeadProperty;
use std::collections::BTreeMap;
use tonic::Status;

/// How often a change is tried again when other writers keep changing the same index.
const ATTEMPTS: usize = 16;

/// The stored form of an index.
#[derive(Clone, PartialEq, prost::Message)]
struct StoredIndex {
    #[prost(message, repeated, tag = "1")]
    entries: Vec<StoredEntry>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct StoredEntry {
    /// A file's name, a collection's name with `/`, or `""` for the collection itself.
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, repeated, tag = "2")]
    properties: Vec<DeadProperty>,
}

/// The properties of a collection's members, by entry name (see [`Keys::index_entry`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Index(BTreeMap<String, Vec<DeadProperty>>);

impl Index {
    /// The properties of one resource kept on their own (a trash item's): encoded as an
    /// index whose only entry is `""`.
    pub fn encode_one(properties: Vec<DeadProperty>) -> Bytes {
        let mut index = Self::default();
        index.0.insert(String::new(), properties);
        index.encode()
    }

    /// The properties [`Index::encode_one`] encoded.
    pub fn decode_one(data: &[u8], key: &str) -> Result<Vec<DeadProperty>, Status> {
        Ok(Self::decode(data, key)?.get(""))
    }

    /// The properties of the entry `name`.
    pub fn get(&self, name: &str) -> Vec<DeadProperty> {
        self.0.get(name).cloned().unwrap_or_default()
    }

    fn decode(data: &[u8], key: &str) -> Result<Self, Status> {
        let stored: StoredIndex = prost::Message::decode(data)
            .map_err(|e| Status::data_loss(format!("the property index {key} does not decode: {e}")))?;
        Ok(Self(
            stored
                .entries
                .into_iter()
                .map(|entry| (entry.name, entry.properties))
                .collect(),
        ))
    }

    fn encode(&self) -> Bytes {
        let stored = StoredIndex {
            entries: self
                .0
                .iter()
                .filter(|(_, properties)| !properties.is_empty())
                .map(|(name, properties)| StoredEntry {
                    name: name.clone(),
                    properties: properties.clone(),
                })
                .collect(),
        };
        Bytes::from(prost::Message::encode_to_vec(&stored))
    }
}

/// The property index of the collection `collection` (empty when it has none).
pub async fn load(s3: &S3Client, keys: &Keys, collection: &VolumePath) -> Result<Index, Status> {
    Ok(load_versioned(s3, &keys.index(collection)).await?.0)
}

/// An index and the ETag it was read at (`""` when there is none).
async fn load_versioned(s3: &S3Client, key: &str) -> Result<(Index, String), Status> {
    match s3.get_versioned(key).await? {
        Some((data, etag)) => Ok((Index::decode(&data, key)?, etag)),
        None => Ok((Index::default(), String::new())),
    }
}

/// Changes the entries of the index of `collection` with `change`, which returns whether
/// it changed anything; written only if no other writer changed the index in between,
/// else read and changed again.
pub async fn update(
    s3: &S3Client,
    keys: &Keys,
    collection: &VolumePath,
    mut change: impl FnMut(&mut BTreeMap<String, Vec<DeadProperty>>) -> bool,
) -> Result<(), Status> {
    let key = keys.index(collection);
    for _ in 0..ATTEMPTS {
        let (mut index, etag) = load_versioned(s3, &key).await?;
        if !change(&mut index.0) {
            return Ok(());
        }
        match s3.put_if(&key, index.encode(), Some(&etag)).await {
            Ok(_) => return Ok(()),
            Err(status) if status.code() == tonic::Code::Aborted => continue,
            Err(status) => return Err(status),
        }
    }
    Err(Status::unavailable(format!(
        "the properties of {collection} kept changing under {ATTEMPTS} attempts to change them; retry"
    )))
}

/// Sets the properties of `name` in the index of `collection` to `properties`.
pub async fn put_entry(
    s3: &S3Client,
    keys: &Keys,
    collection: &VolumePath,
    name: &str,
    properties: Vec<DeadProperty>,
) -> Result<(), Status> {
    update(s3, keys, collection, |entries| {
        if properties.is_empty() {
            entries.remove(name).is_some()
        } else {
            entries.insert(name.to_owned(), properties.clone()).as_ref() != Some(&properties)
        }
    })
    .await
}

/// Removes the entry `name` from the index of `collection`.
pub async fn remove_entry(
    s3: &S3Client,
    keys: &Keys,
    collection: &VolumePath,
    name: &str,
) -> Result<(), Status> {
    put_entry(s3, keys, collection, name, Vec::new()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_round_trips_without_empty_entries() {
        let property = DeadProperty {
            namespace: "urn:x".into(),
            name: "color".into(),
            value: Bytes::from_static(b"red"),
        };
        let mut index = Index::default();
        index.0.insert("a.txt".into(), vec![property.clone()]);
        index.0.insert("sub/".into(), Vec::new());
        let decoded = Index::decode(&index.encode(), "k").unwrap();
        assert_eq!(decoded.get("a.txt"), vec![property]);
        assert_eq!(decoded.0.len(), 1);
        assert_eq!(
            Index::decode(b"\xff\xff", "k").unwrap_err().code(),
            tonic::Code::DataLoss
        );
    }
}
