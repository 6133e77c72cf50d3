//! Where each resource lives in the bucket: the object for `/a/b.txt` is the key
//! `PREFIX/a/b.txt`, a collection is every key under `PREFIX/a/` (with a `PREFIX/a/`
//! marker object once kubedav made it, as the S3 consoles do), and the dead properties
//! of a collection's members are one index object in a tree of their own
//! ([`PROPERTY_TREE`]), out of the collection's listing.

use kubedav_api::path::VolumePath;

/// The folder under the served prefix that holds the property indexes, one per
/// collection at the collection's own path. It starts with
/// [`kubedav_api::path::RESERVED_PREFIX`], so no client can name, list or overwrite it.
pub const PROPERTY_TREE: &str = ".kubedav-properties";

/// The name of an index object in [`PROPERTY_TREE`]: reserved too, so no collection can
/// share its key.
pub const PROPERTY_INDEX: &str = ".kubedav-index";

/// The keys of one served prefix of a bucket.
#[derive(Clone, Debug)]
pub struct Keys {
    /// `""` for the whole bucket, else the prefix with one trailing `/`.
    prefix: String,
}

impl Keys {
    /// The keys under `prefix` (`""`, `"files"` and `"/files/"` alike).
    pub fn new(prefix: &str) -> Self {
        let trimmed = prefix.trim_matches('/');
        Self {
            prefix: if trimmed.is_empty() {
                String::new()
            } else {
                format!("{trimmed}/")
            },
        }
    }

    /// The served prefix: `""` or ending with `/`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The object of the file `path` (not the root).
    pub fn object(&self, path: &VolumePath) -> String {
        format!("{}{}", self.prefix, path.as_str())
    }

    /// The prefix of every key below the collection `path`; for anything but the root,
    /// also the key of its marker object.
    pub fn children(&self, path: &VolumePath) -> String {
        if path.is_root() {
            self.prefix.clone()
        } else {
            format!("{}{}/", self.prefix, path.as_str())
        }
    }

    /// The key of the property index of the collection `path`: kept apart from its
    /// members, so a listing of 1,000 members is one page.
    pub fn index(&self, collection: &VolumePath) -> String {
        format!("{}{PROPERTY_INDEX}", self.indexes_below(collection))
    }

    /// The prefix of the property indexes of `collection` and every collection below
    /// it, which go where the collection goes.
    pub fn indexes_below(&self, collection: &VolumePath) -> String {
        if collection.is_root() {
            format!("{}{PROPERTY_TREE}/", self.prefix)
        } else {
            format!("{}{PROPERTY_TREE}/{}/", self.prefix, collection.as_str())
        }
    }

    /// The collection whose index holds the dead properties of `path`, and the entry's
    /// name there: a file's own name, a collection's name with a `/`, and `""` for the
    /// root (whose properties are in its own index).
    pub fn index_entry(path: &VolumePath, is_collection: bool) -> (VolumePath, String) {
        match path.split_last() {
            None => (VolumePath::root(), String::new()),
            Some((parent, name)) if is_collection => (parent, format!("{name}/")),
            Some((parent, name)) => (parent, name.to_owned()),
        }
    }
}

/// What one key or common prefix of a delimited listing of a collection is.
#[derive(Debug, PartialEq, Eq)]
pub enum Member<'k> {
    /// A file of this name.
    File(&'k str),
    /// A collection of this name.
    Collection(&'k str),
    /// The collection's own marker.
    Marker,
    /// Not a member a client can see: the property tree, or a name kubedav cannot serve
    /// (written by another tool: empty segments, control characters, `.` or `..`).
    Hidden,
}

/// What `key` (an object key or a common prefix from a listing of `children`) is.
pub fn member<'k>(children: &str, key: &'k str) -> Member<'k> {
    let Some(rest) = key.strip_prefix(children) else {
        return Member::Hidden;
    };
    if rest.is_empty() {
        return Member::Marker;
    }
    let (name, collection) = match rest.strip_suffix('/') {
        Some(name) => (name, true),
        None => (rest, false),
    };
    if name.contains('/') || VolumePath::root().join(name).is_err() {
        return Member::Hidden;
    }
    if collection {
        Member::Collection(name)
    } else {
        Member::File(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(text: &str) -> VolumePath {
        VolumePath::parse(text).unwrap()
    }

    #[test]
    fn keys_are_paths_under_the_prefix() {
        for prefix in ["files", "/files/", "files/"] {
            let keys = Keys::new(prefix);
            assert_eq!(keys.object(&path("a/b.txt")), "files/a/b.txt");
            assert_eq!(keys.children(&path("a")), "files/a/");
            assert_eq!(keys.children(&VolumePath::root()), "files/");
            assert_eq!(
                keys.index(&path("a/b")),
                "files/.kubedav-properties/a/b/.kubedav-index"
            );
            assert_eq!(keys.indexes_below(&path("a")), "files/.kubedav-properties/a/");
        }
        let whole = Keys::new("");
        assert_eq!(whole.object(&path("a b%.txt")), "a b%.txt");
        assert_eq!(
            whole.index(&VolumePath::root()),
            ".kubedav-properties/.kubedav-index"
        );
    }

    #[test]
    fn properties_live_in_the_parents_index() {
        assert_eq!(
            Keys::index_entry(&path("a/b.txt"), false),
            (path("a"), "b.txt".to_owned())
        );
        assert_eq!(
            Keys::index_entry(&path("a/c"), true),
            (path("a"), "c/".to_owned())
        );
        assert_eq!(
            Keys::index_entry(&VolumePath::root(), true),
            (VolumePath::root(), String::new())
        );
    }

    #[test]
    fn listings_keep_only_servable_members() {
        assert_eq!(member("p/a/", "p/a/x.txt"), Member::File("x.txt"));
        assert_eq!(member("p/a/", "p/a/sub/"), Member::Collection("sub"));
        assert_eq!(member("p/a/", "p/a/"), Member::Marker);
        assert_eq!(member("p/", "p/.kubedav-properties/"), Member::Hidden);
        assert_eq!(member("p/a/", "p/a/.kubedav-upload-1"), Member::Hidden);
        assert_eq!(member("p/a/", "p/a//"), Member::Hidden);
        assert_eq!(member("p/a/", "p/a/../"), Member::Hidden);
        assert_eq!(member("p/a/", "p/a/bell\u{7}"), Member::Hidden);
        assert_eq!(member("p/a/", "q/x"), Member::Hidden);
    }
}
