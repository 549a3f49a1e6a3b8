//! The IO boundary: the only code that touches the disk, the environment or the clock.
//!
//! Everything else receives a `&dyn System`. `OsSystem` is the real machine;
//! `MemorySystem` is an in-memory tree for unit tests.

mod memory;
mod os;
mod signals;
mod watcher;

pub use memory::MemorySystem;
pub use os::OsSystem;
pub use signals::SignalGuard;
pub use watcher::{ChangeEvents, NotifyEvents, DEBOUNCE};

use std::io;
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Dir,
    /// A symbolic link (never followed for directories).
    Symlink {
        to_dir: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
}

pub trait System: Send + Sync {
    fn read(&self, path: &Utf8Path) -> io::Result<Vec<u8>>;
    /// Entries of a directory, sorted by name (byte order). Names that are not UTF-8 are
    /// reported as an error entry by the caller's walk, so they are skipped here.
    fn read_dir(&self, path: &Utf8Path) -> io::Result<Vec<DirEntry>>;
    fn is_file(&self, path: &Utf8Path) -> bool;
    fn is_dir(&self, path: &Utf8Path) -> bool;
    fn env_var(&self, name: &str) -> Option<String>;
    fn current_dir(&self) -> io::Result<Utf8PathBuf>;
    /// Writes `bytes` to `path` atomically (temp file in the same directory, then rename),
    /// creating missing parent directories.
    /// Returns `false` and leaves the file untouched if it already holds exactly `bytes`.
    fn write_atomic(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<bool>;
    /// Replaces `path` with `bytes` through a temp file and a rename, without syncing to
    /// disk: for caches, whose readers check their integrity themselves.
    fn replace(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        self.write_atomic(path, bytes).map(|_| ())
    }
    /// Starts watching `root` recursively, plus the files `outside` it (their directories,
    /// not recursively), for watch mode. Also takes over SIGINT and SIGTERM, which end
    /// the event stream. Systems without a watcher say `Unsupported`.
    fn watch(&self, root: &Utf8Path, outside: &[Utf8PathBuf]) -> io::Result<Box<dyn ChangeEvents>> {
        let _ = (root, outside);
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this system cannot watch files",
        ))
    }
    /// An owned handle to the same system, for the database's on-demand file inputs.
    fn shared(&self) -> Arc<dyn System>;
    /// Makes `path` absolute against the current directory and removes `.`/`..` lexically.
    fn absolute(&self, path: &Utf8Path) -> io::Result<Utf8PathBuf> {
        let joined = if path.is_absolute() {
            path.to_owned()
        } else {
            self.current_dir()?.join(path)
        };
        Ok(normalize(&joined))
    }
}

/// Lexical normalisation: drops `.`, resolves `..` against the preceding component.
pub fn normalize(path: &Utf8Path) -> Utf8PathBuf {
    let mut out = Utf8PathBuf::new();
    for comp in path.components() {
        match comp {
            camino::Utf8Component::CurDir => {}
            camino::Utf8Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            other => out.push(other.as_str()),
        }
    }
    out
}
