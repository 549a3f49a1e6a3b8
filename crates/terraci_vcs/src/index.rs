//! Content identities from git's index: which tracked files of the project hold which
//! blob, known without reading them.
//!
//! Input: the index of the repository holding the project (one file, read with gix: the
//! accepted exception to the `System` boundary, as git's own state), and a file's `lstat`
//! stamp when a caller asks about it. Output: for a project-relative path, the blob id
//! git records for it, when the index entry is *clean* by git's rules for the stamp
//! given. Read once per run, and only when a stamp-keyed store missed (a fresh clone).
//!
//! Git's rules, as `git status` applies them (git's `read-cache.c`: `ie_match_stat`,
//! `is_racy_timestamp`; gix's `gix_index::entry::Stat::{matches, is_racy}`, used here):
//! - only a stage-0 entry of a regular file (mode 100644 or 100755) counts: symlinks,
//!   submodules (gitlinks), sparse directories and conflicts do not;
//! - an entry flagged skip-worktree, assume-unchanged or intent-to-add is not trusted
//!   (git does not look at the file for the first two; the third has no content yet);
//! - an entry whose recorded size is 0 is not trusted (git "smudges" a racily clean
//!   entry by zeroing its size, and an empty file costs nothing to read);
//! - the entry is racy when its modification time is not before the index file's own:
//!   the file may have been written again within the same clock tick after git recorded
//!   it. Racy entries are left out: their files are read. Times are compared with their
//!   nanoseconds (git built with `USE_NSEC`): a checkout writes thousands of files within
//!   the second it writes the index in, and whole seconds would make all of them racy;
//! - the file's stat data must match the entry's: modification and change time (seconds
//!   and nanoseconds), inode and size (both as the index truncates them to 32 bits).
//!   The device is not compared (git's `core.checkStat` default does not), nor owner and
//!   group, which the stamp does not carry (a write moves the times anyway).

use camino::Utf8Path;

use terraci_db::files::BlobId;
use terraci_db::system::Stamp;

/// The clean-able entries of the index below the project.
pub struct IndexIdentities {
    /// Project-relative path (`/`-separated), sorted, with the entry's blob and stat.
    entries: Vec<(String, BlobId, gix::index::entry::Stat)>,
}

/// How stat data is compared: every field git compares by default, nanoseconds included.
pub(crate) const COMPARE: gix::index::entry::stat::Options = gix::index::entry::stat::Options {
    trust_ctime: true,
    check_stat: true,
    use_nsec: true,
    use_stdev: false,
};

impl IndexIdentities {
    /// The blob of the file at `rel` (project-relative) if the index has a trusted,
    /// non-racy entry for it whose stat data is `now` (the file's `lstat`).
    pub fn clean_blob(&self, rel: &str, now: &Stamp) -> Option<BlobId> {
        let i = self
            .entries
            .binary_search_by(|(path, _, _)| path.as_str().cmp(rel))
            .ok()?;
        let (_, blob, stat) = &self.entries[i];
        stat.matches(&stat_of(now, stat), COMPARE).then_some(*blob)
    }

    /// How many entries can be clean (for tests and traces).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// `now` as index stat data; owner, group and device (not in a stamp) are the entry's.
pub(crate) fn stat_of(now: &Stamp, entry: &gix::index::entry::Stat) -> gix::index::entry::Stat {
    let time = |ns: i64| gix::index::entry::stat::Time {
        secs: ns.div_euclid(1_000_000_000) as u32,
        nsecs: ns.rem_euclid(1_000_000_000) as u32,
    };
    gix::index::entry::Stat {
        mtime: time(now.mtime_ns),
        ctime: time(now.ctime_ns),
        dev: entry.dev,
        ino: now.ino as u32,
        uid: entry.uid,
        gid: entry.gid,
        size: now.len as u32,
    }
}

/// Whether git's rules let the stat data of the entry `e` vouch for its file (the list
/// above), an entry of `index`.
pub(crate) fn trusted(e: &gix::index::Entry, index: &gix::index::State) -> bool {
    use gix::index::entry::{Flags, Mode, Stage};
    let untrusted = Flags::SKIP_WORKTREE | Flags::ASSUME_VALID | Flags::INTENT_TO_ADD;
    matches!(e.mode, Mode::FILE | Mode::FILE_EXECUTABLE)
        && e.stage() == Stage::Unconflicted
        && !e.flags.intersects(untrusted)
        && e.stat.size != 0
        && !e.stat.is_racy(index.timestamp(), COMPARE)
}

/// The index of the repository holding `project_dir`, reduced to the entries below it
/// that can be clean; `None` outside a repository, for a SHA-256 one, or when the index
/// cannot be read (every file is then read and hashed, as without git).
pub fn index_identities(project_dir: &Utf8Path) -> Option<IndexIdentities> {
    let repo = gix::discover(project_dir.as_std_path()).ok()?;
    if repo.object_hash() != gix::hash::Kind::Sha1 {
        return None;
    }
    let prefix = crate::project_prefix(&repo, project_dir).ok()?;
    let index = repo.index_or_empty().ok()?;
    let strip = |path: &str| -> Option<String> {
        if prefix.is_empty() {
            return Some(path.to_owned());
        }
        path.strip_prefix(prefix.as_str())?
            .strip_prefix('/')
            .map(str::to_owned)
    };
    let entries = index
        .entries()
        .iter()
        .filter(|e| trusted(e, &index))
        .filter_map(|e| {
            let path = std::str::from_utf8(e.path(&index)).ok()?;
            let blob = BlobId(e.id.as_slice().try_into().ok()?);
            Some((strip(path)?, blob, e.stat))
        })
        .collect::<Vec<_>>();
    // The index is sorted by path bytes, which stripping a common prefix keeps; a
    // foreign writer's index that is not is sorted here (lookups binary-search).
    let mut entries = entries;
    if !entries.is_sorted_by(|a, b| a.0 <= b.0) {
        entries.sort_by(|a, b| a.0.cmp(&b.0));
    }
    Some(IndexIdentities { entries })
}
