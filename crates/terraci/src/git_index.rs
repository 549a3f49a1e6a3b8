//! git's index as a source of content identities ([`terraci_vcs::IndexIdentities`]), read
//! at most once per run and only when a store keyed on file stamps misses for more than
//! a few files: a fresh clone (every stamp new), not a kept working tree after an edit
//! (one or two files, cheaper read than the index of a 10,000-module repository).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use camino::Utf8PathBuf;

use terraci_db::files::BlobId;
use terraci_db::system::Stamp;

/// Stamp misses tolerated before the index is read (at most this many files of a
/// repository are read that the index could have vouched for).
const MISSES_BEFORE_INDEX: usize = 32;

pub struct LazyIndex {
    root: Utf8PathBuf,
    index: OnceLock<Option<terraci_vcs::IndexIdentities>>,
    misses: AtomicUsize,
    /// Misses tolerated: [`MISSES_BEFORE_INDEX`], fewer for a small project.
    tolerated: AtomicUsize,
}

impl LazyIndex {
    /// The index of the repository holding the project at `root` (absolute).
    pub fn new(root: &camino::Utf8Path) -> Arc<LazyIndex> {
        Arc::new(LazyIndex {
            root: root.to_owned(),
            index: OnceLock::new(),
            misses: AtomicUsize::new(0),
            tolerated: AtomicUsize::new(MISSES_BEFORE_INDEX),
        })
    }

    /// Tolerates fewer misses for a project of `files` files: a quarter of them.
    pub fn expect_files(&self, files: usize) {
        self.tolerated
            .store(MISSES_BEFORE_INDEX.min(files / 4), Ordering::Relaxed);
    }

    /// Whether `missed` stamp misses among `files` files are worth reading the index
    /// for: more than [`MISSES_BEFORE_INDEX`] or a quarter of them.
    pub fn worth_reading(&self, missed: usize, files: usize) -> bool {
        missed > MISSES_BEFORE_INDEX.min(files / 4)
    }

    /// The blob of the file at `rel` whose stamp is `now`, reading the index if needed;
    /// a file read from a commit (`--from-commit`) is stamped with its blob's id.
    pub fn clean_blob(&self, rel: &str, now: &Stamp) -> Option<BlobId> {
        if let Some(id) = now.object() {
            return Some(BlobId(id));
        }
        self.index
            .get_or_init(|| terraci_vcs::index_identities(&self.root))
            .as_ref()?
            .clean_blob(rel, now)
    }

    /// [`LazyIndex::clean_blob`] for a lookup after a stamp missed: counts the miss, and
    /// says nothing until more than the tolerated number of files missed.
    pub fn after_miss(&self, rel: &str, now: &Stamp) -> Option<BlobId> {
        if let Some(id) = now.object() {
            return Some(BlobId(id));
        }
        let seen = self.misses.fetch_add(1, Ordering::Relaxed);
        if seen < self.tolerated.load(Ordering::Relaxed) && self.index.get().is_none() {
            return None;
        }
        self.clean_blob(rel, now)
    }

    /// The blob, only if the index was read already (for records that would otherwise
    /// read it for nothing).
    pub fn if_read(&self, rel: &str, now: &Stamp) -> Option<BlobId> {
        if let Some(id) = now.object() {
            return Some(BlobId(id));
        }
        self.index.get()?.as_ref()?.clean_blob(rel, now)
    }
}
