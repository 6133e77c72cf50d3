//! Nextcloud chunks: an upload whose chunks may arrive in any order, assembled in the
//! order of their keys (numbers, or the offsets of their first bytes). A chunk whose
//! turn it is goes into the upload's bytes; one ahead of its turn waits aside until the
//! chunks before it came; one placed already is replaced by a chunk sent again.

use super::Record;
use super::folder::{CHUNK_NEW, aside_name, copy_into};
use crate::volume::reserved_failed;
use rustix::fd::OwnedFd;
use rustix::fs::{AtFlags, Mode, OFlags};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::File;
use tonic::Status;

/// The chunks of an upload whose chunks may arrive in any order (Nextcloud chunking):
/// assembled in the order of their keys.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Chunks {
    /// Whether keys are the offsets of the chunks' first bytes (chunks named START-END),
    /// rather than numbers from 1.
    pub by_offset: bool,
    /// The length of each numbered chunk placed in the upload's bytes, in order (by
    /// offset, a chunk's key says where it lies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placed: Vec<u64>,
    /// Chunks that arrived before the chunks ahead of them, kept beside the bytes until
    /// those came: key → length.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub aside: BTreeMap<u64, u64>,
}

/// Most chunks one upload may have (placed and aside): Nextcloud's numbers go to 10,000,
/// as S3's part numbers do.
pub const MAX_CHUNKS: usize = 10_000;

impl Chunks {
    /// The key of the chunk to be placed next, given the bytes placed so far.
    pub fn next_key(&self, offset: u64) -> u64 {
        match self.by_offset {
            true => offset,
            false => self.placed.len() as u64 + 1,
        }
    }

    /// Where the placed chunk `key` lies and, when numbered, its length: `None` when it
    /// is not placed yet.
    pub fn placed_at(&self, key: u64, offset: u64) -> Option<(u64, Option<u64>)> {
        if self.by_offset {
            return (key < offset).then_some((key, None));
        }
        let index = usize::try_from(key.checked_sub(1)?).ok()?;
        let length = *self.placed.get(index)?;
        Some((self.placed[..index].iter().sum(), Some(length)))
    }

    /// The numbered chunks received, placed or aside, in key order (chunks named by
    /// offset are not listed: their names are the client's to remember).
    pub fn received(&self) -> Vec<kubedav_api::uploads::ChunkReceived> {
        if self.by_offset {
            return Vec::new();
        }
        let placed = (1u64..).zip(self.placed.iter().copied());
        placed
            .chain(self.aside.iter().map(|(k, v)| (*k, *v)))
            .map(|(key, size)| kubedav_api::uploads::ChunkReceived { key, size })
            .collect()
    }
}

/// Where an append's bytes go.
pub(super) enum Place {
    /// Into `data` at the upload's offset: the bytes that come next (a chunk whose key
    /// is the next one counts as such only once whole).
    Next { chunk: bool },
    /// Into `chunk.new`, then `chunk.{key}`: a chunk ahead of its turn.
    Aside { key: u64, file: File },
    /// Into `chunk.new`, then copied over the placed chunk `key` at `at`: a client
    /// sending a chunk again. A numbered chunk must keep its `length`.
    Again {
        key: u64,
        at: u64,
        length: Option<u64>,
        file: File,
    },
}

/// A chunk's turn, given the upload's chunks so far.
pub(super) enum Turn {
    /// Its key is the next one: its bytes come next.
    Next,
    /// Ahead of its turn: it waits aside.
    Ahead,
    /// Placed already, at `at`, with `length` when numbered: sent again.
    Again { at: u64, length: Option<u64> },
}

/// The turn of `chunk` in `record`'s upload: refused when its naming is not that of the
/// upload's chunks, or the upload received bytes without chunks.
pub(super) fn turn_of(record: &Record, chunk: &kubedav_api::uploads::Chunk) -> Result<Turn, Status> {
    let fresh;
    let chunks = match &record.chunks {
        Some(chunks) if chunks.by_offset != chunk.by_offset => {
            return Err(Status::failed_precondition(format!(
                "this upload's chunks are named {}; name this one so too",
                if chunks.by_offset {
                    "by their byte offsets"
                } else {
                    "by numbers"
                }
            )));
        }
        Some(chunks) => chunks,
        None if record.offset > 0 => {
            return Err(Status::failed_precondition(
                "this upload received bytes without chunks; it cannot take chunks",
            ));
        }
        None => {
            fresh = Chunks {
                by_offset: chunk.by_offset,
                ..Chunks::default()
            };
            &fresh
        }
    };
    if chunk.key == chunks.next_key(record.offset) {
        return Ok(Turn::Next);
    }
    Ok(match chunks.placed_at(chunk.key, record.offset) {
        Some((at, length)) => Turn::Again { at, length },
        None => Turn::Ahead,
    })
}

/// Where a chunk's bytes go on a volume, given the upload's chunks so far (see
/// [`turn_of`]).
pub(super) fn place_chunk(
    folder: &OwnedFd,
    record: &Record,
    chunk: &kubedav_api::uploads::Chunk,
) -> Result<Place, Status> {
    let turn = turn_of(record, chunk)?;
    if let Turn::Next = turn {
        return Ok(Place::Next { chunk: true });
    }
    let flags = OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = rustix::fs::openat(folder, CHUNK_NEW, flags, Mode::from_raw_mode(0o600))
        .map(File::from)
        .map_err(|e| reserved_failed("make", "a chunk's file", e))?;
    Ok(match turn {
        Turn::Again { at, length } => Place::Again {
            key: chunk.key,
            at,
            length,
            file,
        },
        _ => Place::Aside { key: chunk.key, file },
    })
}

/// Copies into `data` the chunks kept aside that are next now, in order, and counts
/// them as placed: the names of their files, to remove once the state that no longer
/// lists them is written (a crash before that finds them again). A file that is gone
/// (removed after a state that was then lost) counts as not arrived.
pub(super) fn assemble(
    folder: &OwnedFd,
    data: &File,
    chunks: &mut Chunks,
    offset: &mut u64,
    target: &str,
) -> Result<Vec<String>, Status> {
    let mut consumed = Vec::new();
    while let Some(length) = chunks.aside.get(&chunks.next_key(*offset)).copied() {
        let key = chunks.next_key(*offset);
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let name = aside_name(key);
        let file = match rustix::fs::openat(folder, name.as_str(), flags, Mode::empty()) {
            Ok(fd) => File::from(fd),
            Err(rustix::io::Errno::NOENT) => {
                chunks.aside.remove(&key);
                break;
            }
            Err(e) => return Err(reserved_failed("open", "a chunk kept aside", e)),
        };
        copy_into(&file, length, data, *offset, target)?;
        chunks.aside.remove(&key);
        if !chunks.by_offset {
            chunks.placed.push(length);
        }
        *offset += length;
        consumed.push(name);
    }
    Ok(consumed)
}

/// Removes the chunk files [`assemble`] consumed.
pub(super) fn remove_consumed(folder: &OwnedFd, consumed: &[String]) {
    for name in consumed {
        let _ = rustix::fs::unlinkat(folder, name.as_str(), AtFlags::empty());
    }
}
