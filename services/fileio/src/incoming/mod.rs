//! Large bodies written by a gateway into fileio's volume (`--fileio-incoming`): the
//! write path of large PUTs in microservices mode, as [`crate::direct`] is the read path.
//!
//! Across processes the bytes of a PUT otherwise cross fileio's gRPC stream: received by
//! the gateway, framed, sent over TCP, received again and written, four copies of every
//! byte and two processes woken for each frame. A gateway that mounts one folder of the
//! volume read-write, `.kubedav/incoming` ([`kubedav_api::fileio::INCOMING_FOLDER`]),
//! writes the body into a new file there itself ([`IncomingFolder`], the gateway's end),
//! and fileio makes that file the resource, as it would a body it received
//! ([`Landings`], fileio's end, for a `Write` whose header names the file):
//!
//! 1. **Before the bytes** ([`Landings::admit`]): the parent must exist, no collection
//!    may be in the way, and the volume must have room for the declared size, reserved
//!    on the gateway's file with `fallocate` (a full volume first loses its oldest trash
//!    and versions, as for any write). A refusal reaches the client before its body is
//!    written.
//! 2. **After the bytes** ([`Landings::land`]), once the gateway closed the file and
//!    ended the call's stream: the file is first moved to `.kubedav/landing`, which no
//!    gateway mounts, so nothing it does can change it after the checks. There it must
//!    be a regular file (`O_NOFOLLOW`) of one link, owned by fileio's user, held by no
//!    writer (`flock`) and of the declared size; else it is removed and the write fails
//!    as a misbehaving gateway's (INTERNAL). It is then committed as an upload's bytes
//!    are ([`crate::write::Upload::adopt`]: `If-Match`, versions, the atomic rename).
//!
//! Files that never land are removed by the gateway (also when its request is dropped),
//! and, should the gateway die, by [`sweep`], which fileio runs every
//! [`SWEEP_EVERY`] for files that no writer holds and that nothing changed for
//! [`ABANDONED_AFTER`].
//!
//! The gateway decides what a principal may write before it writes a byte, as for any
//! write; fileio's checks here are about the file, not the principal.

#[allow(unsafe_code)] // close(2) of a gateway's incoming file, whose error NFS reports there
mod folder;
mod landing;
mod receive;

pub use folder::IncomingFolder;
pub use landing::{ABANDONED_AFTER, Landed, Landings, SWEEP_EVERY, keep_swept, sweep};
pub use receive::Landing;
