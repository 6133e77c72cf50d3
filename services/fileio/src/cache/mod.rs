//! What fileio keeps of the volume between calls, each copy checked against the volume
//! before it is used ([`validity`]): file bodies ([`file`]), the inodes of open
//! directories ([`inode`]), directory listings' names ([`name`]), dead properties
//! ([`property`]) and paths resolved beneath the root ([`resolved`]).

pub mod file;
pub mod inode;
pub mod name;
pub mod property;
pub mod resolved;
pub mod validity;
