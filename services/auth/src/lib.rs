//! kubedav's auth service core: verifies Basic credentials against an htpasswd-style
//! users file.

pub mod apr1;
pub mod users;
