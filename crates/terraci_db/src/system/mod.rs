//! The IO boundary: the only code that touches the disk, the environment or the clock.
//!
//! Everything else receives a `&dyn System`. `OsSystem` is the real machine;
//! `MemorySystem` is an in-memory tree for unit tests.

mod at;
mod memory;
mod os;
// Signals and file events need OS facilities (signal-hook, notify) that the engine and
// its tests never use: behind the `watch` feature, which the binary turns on.
#[cfg(feature = "watch")]
mod signals;
#[cfg(feature = "watch")]
mod watcher;

pub use memory::MemorySystem;
pub use os::OsSystem;
#[cfg(feature = "watch")]
pub use signals::SignalGuard;
#[cfg(feature = "watch")]
pub(crate) use watcher::NotifyEvents;

/// Batches of changed paths, for watch mode.
pub trait ChangeEvents {
    /// Blocks until the next batch of changed paths (absolute, sorted, deduplicated), or
    /// returns `None` once watching should stop (SIGINT, SIGTERM, or the source ended).
    fn next_batch(&mut self) -> io::Result<Option<Vec<Utf8PathBuf>>>;
}

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
    /// A FIFO, socket or device: never opened (opening a FIFO can block forever, reading
    /// a device need never end). `what` names it for messages.
    Special {
        what: &'static str,
    },
    /// A name that is not UTF-8 (the entry's `name` is a lossy rendering): terraci's ids
    /// and output cannot represent it, so it is reported and skipped.
    NotUtf8,
}

/// Where [`System::replace_streamed`] takes a file's bytes, piece by piece.
pub type Sink<'a> = dyn FnMut(&[u8]) -> io::Result<()> + 'a;

/// The default [`ReadPolicy::max_len`]: 16 MiB.
pub const DEFAULT_MAX_FILE_SIZE: u64 = 16 << 20;

/// Whether `path` lies in a `.git` entry below `root` (any letter case: a file system may
/// fold it). The git directory is the runner's, not the repository's: its `config` holds
/// the CI's credentials.
pub fn in_git_dir(root: &Utf8Path, path: &Utf8Path) -> bool {
    path.strip_prefix(root).is_ok_and(|rel| {
        rel.components()
            .any(|c| c.as_str().eq_ignore_ascii_case(".git"))
    })
}

/// Which files terraci reads from a repository, and how much of each: only regular files
/// whose real path (symlinks resolved) lies inside `root`, of at most `max_len` bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReadPolicy {
    /// Absolute, as the user named it.
    pub root: Utf8PathBuf,
    /// `root` with symlinks resolved (where the system can say).
    pub(crate) canonical_root: Utf8PathBuf,
    pub(crate) max_len: u64,
}

impl ReadPolicy {
    pub fn new(system: &dyn System, root: &Utf8Path, max_len: u64) -> ReadPolicy {
        ReadPolicy {
            root: root.to_owned(),
            canonical_root: system
                .canonicalize(root)
                .unwrap_or_else(|_| root.to_owned()),
            max_len,
        }
    }

    /// The most bytes a file read under this policy may hold.
    pub fn max_len(&self) -> u64 {
        self.max_len
    }

    /// `TooLarge` when `len` bytes are over the bound.
    pub fn check_len(&self, len: u64) -> Result<(), ReadError> {
        if len > self.max_len {
            return Err(ReadError::TooLarge {
                limit: self.max_len,
            });
        }
        Ok(())
    }

    /// Whether `path` (absolute, normalised) names something inside the root as written.
    pub fn lexically_inside(&self, path: &Utf8Path) -> bool {
        path.starts_with(&self.root) || path.starts_with(&self.canonical_root)
    }
}

/// Why [`System::read_confined`] did not read a file.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// Outside the root (directly or through a symlink), or not a regular file: never
    /// opened. The text says which.
    #[error("{0}")]
    Unsafe(String),
    #[error("the file is larger than {limit} bytes")]
    TooLarge { limit: u64 },
    #[error("{0}")]
    Io(#[from] io::Error),
}

/// What identifies one version of a file without reading it: device, inode, length and
/// the modification and change times in nanoseconds since the epoch. A write changes the
/// change time (which no user tool can set back), so an equal stamp means equal bytes,
/// unless the write came so soon after the stamp was taken that the clock had not moved
/// on; [`Stamp::settled_before`] tells which stamps are old enough to rule that out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Stamp {
    pub dev: u64,
    pub ino: u64,
    pub len: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

/// The device number of [`Stamp::of_object`]'s stamps, which no file system gives.
const OBJECT_DEV: u64 = u64::MAX;

impl Stamp {
    /// The stamp of a git object (a blob or a tree), made of its id: what a file read
    /// from a commit rather than the disk has (`--from-commit`). Equal ids are equal
    /// contents, in any clone, so stores keyed on stamps find the same entry in every
    /// fresh clone; the times lie in 1970, so such a stamp has always settled.
    pub fn of_object(id: &[u8; 20]) -> Stamp {
        let word = |at: usize| u64::from_be_bytes(id[at..at + 8].try_into().expect("8 bytes"));
        let tail = u32::from_be_bytes(id[16..20].try_into().expect("4 bytes"));
        Stamp {
            dev: OBJECT_DEV,
            ino: word(0),
            len: word(8),
            mtime_ns: i64::from(tail) + 1,
            ctime_ns: 1,
        }
    }

    /// The object id of a stamp made by [`Stamp::of_object`].
    pub fn object(&self) -> Option<[u8; 20]> {
        if self.dev != OBJECT_DEV || self.ctime_ns != 1 {
            return None;
        }
        let tail = u32::try_from(self.mtime_ns - 1).ok()?;
        let mut id = [0; 20];
        id[0..8].copy_from_slice(&self.ino.to_be_bytes());
        id[8..16].copy_from_slice(&self.len.to_be_bytes());
        id[16..20].copy_from_slice(&tail.to_be_bytes());
        Some(id)
    }

    /// Whether any write after `read_started` would give the file a different stamp: its
    /// last change lies clearly before that moment. File times come from a coarse clock
    /// (a few ms behind the real one), hence the 50 ms margin; on file systems that keep
    /// whole seconds only (no nanoseconds), 2 s.
    pub fn settled_before(&self, read_started: std::time::SystemTime) -> bool {
        let Ok(started) = read_started.duration_since(std::time::UNIX_EPOCH) else {
            return false;
        };
        let started = i64::try_from(started.as_nanos()).unwrap_or(i64::MAX);
        let margin = if self.ctime_ns % 1_000_000_000 == 0 {
            2_000_000_000
        } else {
            50_000_000
        };
        self.ctime_ns.max(self.mtime_ns) < started.saturating_sub(margin)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry {
    pub name: String,
    pub kind: EntryKind,
}

pub trait System: Send + Sync {
    fn read(&self, path: &Utf8Path) -> io::Result<Vec<u8>>;
    /// At most the first `len` bytes of the file at `path` (fewer only at its end): a
    /// look at a file's header before reading all of it.
    fn read_head(&self, path: &Utf8Path, len: usize) -> io::Result<Vec<u8>> {
        let mut bytes = self.read(path)?;
        bytes.truncate(len);
        Ok(bytes)
    }
    /// Reads a file and stamps the version it read (the stamp is taken on the open file
    /// before reading, so a write during the read leaves a newer stamp on disk). `None`
    /// for systems that cannot stamp: such files are never trusted unread.
    fn read_stamped(&self, path: &Utf8Path) -> io::Result<(Vec<u8>, Option<Stamp>)> {
        Ok((self.read(path)?, None))
    }
    /// Reads the file at `path` (absolute, normalised) if [`ReadPolicy`] allows it: a
    /// regular file, at most `max_len` bytes, whose real path lies inside the policy's
    /// root. What is refused is never opened, and no read blocks. `walked`: every
    /// directory on the way was listed by a walk that does not follow symlinks (only the
    /// file itself can be a link), which spares resolving the whole path.
    fn read_confined(
        &self,
        path: &Utf8Path,
        policy: &ReadPolicy,
        walked: bool,
    ) -> Result<(Vec<u8>, Option<Stamp>), ReadError> {
        let _ = walked;
        if !policy.lexically_inside(path) {
            return Err(ReadError::Unsafe(format!(
                "`{path}` is outside `{}`",
                policy.root
            )));
        }
        let (bytes, stamp) = self.read_stamped(path)?;
        policy.check_len(bytes.len() as u64)?;
        Ok((bytes, stamp))
    }
    /// `path` made absolute with every symlink resolved. Systems without links return it
    /// made absolute.
    fn canonicalize(&self, path: &Utf8Path) -> io::Result<Utf8PathBuf> {
        self.absolute(path)
    }
    /// The stamp of the file at `path` now (following symlinks), without reading it.
    fn stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        let _ = path;
        None
    }
    /// The stamp of the entry at `path` itself (a symlink's own, not its target's).
    fn link_stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        self.stamp(path)
    }
    /// The identity of the running program's build, for cache and run-record keys: a
    /// rebuilt binary never replays an older one's run nor reads its facts. `None` when
    /// it cannot be told (nothing keyed on it is then read or written).
    fn program_id(&self) -> Option<Vec<u8>> {
        None
    }
    /// An id of everything the project holds, when the system knows one without
    /// reading it: the tree of a commit (`--from-commit`), where the same id is the same
    /// files in any clone. `None` for a file system.
    fn contents_id(&self) -> Option<String> {
        None
    }
    /// Whether the commit the system serves the project from holds the file at `path`
    /// (`--from-commit`), whatever the system reads there (a cache directory is always
    /// the disk's). `None` for a file system, and for a path outside the project.
    fn committed(&self, path: &Utf8Path) -> Option<bool> {
        let _ = path;
        None
    }
    /// The path of the running program (`None` in memory, or when it cannot be told).
    fn current_exe(&self) -> Option<String> {
        None
    }
    /// The wall clock.
    fn now(&self) -> std::time::SystemTime;
    /// Entries of a directory, sorted by name (byte order). Names that are not UTF-8 are
    /// reported as an error entry by the caller's walk, so they are skipped here.
    fn read_dir(&self, path: &Utf8Path) -> io::Result<Vec<DirEntry>>;
    /// [`System::read_dir`], with the `lstat` stamp ([`System::link_stamp`]) of each entry
    /// `wanted` says to stamp (`None` for the others, and where a stamp cannot be taken).
    /// One listing that stamps its entries costs less than a `stat` of each path after
    /// it: the real system stamps them relative to the open directory.
    fn read_dir_stamped(
        &self,
        path: &Utf8Path,
        wanted: &dyn Fn(&DirEntry) -> bool,
    ) -> io::Result<Vec<(DirEntry, Option<Stamp>)>> {
        Ok(self
            .read_dir(path)?
            .into_iter()
            .map(|entry| {
                let stamp = if wanted(&entry) {
                    self.link_stamp(&path.join(&entry.name))
                } else {
                    None
                };
                (entry, stamp)
            })
            .collect())
    }
    fn is_file(&self, path: &Utf8Path) -> bool;
    fn is_dir(&self, path: &Utf8Path) -> bool;
    fn env_var(&self, name: &str) -> Option<String>;
    fn current_dir(&self) -> io::Result<Utf8PathBuf>;
    /// Whether stderr is a terminal (for `--color auto`); never in memory.
    fn stderr_is_terminal(&self) -> bool {
        false
    }
    /// Standard input, when it is a terminal someone can answer questions on (`init`);
    /// never in memory.
    fn interactive_stdin(&self) -> Option<Box<dyn io::BufRead + '_>> {
        None
    }
    /// Creates `path` and its missing parent directories.
    fn create_dir_all(&self, path: &Utf8Path) -> io::Result<()>;
    /// Makes `path` (an existing directory) the user's own: refused when it is a symlink,
    /// belongs to another user, or another user may write in it; a directory that only
    /// others may read is narrowed to 0700. Nothing to check in memory.
    fn make_private_dir(&self, path: &Utf8Path) -> io::Result<()> {
        let _ = path;
        Ok(())
    }
    /// Whether `path` is a regular file (not a link) holding exactly the concatenation
    /// of `parts`: a write of them would change nothing.
    fn holds(&self, path: &Utf8Path, parts: &[&[u8]]) -> bool {
        self.read(path).is_ok_and(|bytes| {
            let mut rest = bytes.as_slice();
            parts.iter().all(|part| match rest.strip_prefix(*part) {
                Some(after) => {
                    rest = after;
                    true
                }
                None => false,
            }) && rest.is_empty()
        })
    }
    /// Removes the file at `path`.
    fn remove_file(&self, path: &Utf8Path) -> io::Result<()>;
    /// Renames `from` to `to`, replacing `to` (a link at `to` is replaced, not followed).
    fn rename(&self, from: &Utf8Path, to: &Utf8Path) -> io::Result<()>;
    /// Creates (or truncates) `path` as an open file that a child process can write its
    /// output to (`local-exec` logs and plan output). Only a real file system has them.
    fn create_output_file(&self, path: &Utf8Path) -> io::Result<std::fs::File> {
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            format!("{path}: no output files in this file system"),
        ))
    }
    /// Writes `bytes` to `path` atomically (temp file in the same directory, then rename),
    /// creating missing parent directories.
    /// Returns `false` and leaves the file untouched if it already holds exactly `bytes`.
    fn write_atomic(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<bool> {
        self.write_atomic_parts(path, &[bytes])
    }
    /// [`System::write_atomic`] of the concatenation of `parts`.
    fn write_atomic_parts(&self, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<bool>;
    /// Adds `bytes` to the end of the file at `path`, creating it (a log another program
    /// reads, such as GitHub's step summary). Systems without appends rewrite the file.
    fn append(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        let old = match self.read(path) {
            Ok(old) => old,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(e),
        };
        self.write_atomic_parts(path, &[&old, bytes]).map(|_| ())
    }
    /// Replaces `path` with `bytes` through a temp file and a rename, without syncing to
    /// disk: for caches, whose readers check their integrity themselves.
    fn replace(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        self.write_atomic(path, bytes).map(|_| ())
    }
    /// [`System::replace`] with the concatenation of `parts`, without copying them into
    /// one buffer where the system can write pieces.
    fn replace_parts(&self, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<()> {
        self.replace(path, &parts.concat())
    }
    /// [`System::replace`] with the bytes `write` hands to the sink it is given, piece by
    /// piece: where the system can, each piece is written before the next is made, so
    /// the file is never held whole. An error from `write` leaves `path` as it was.
    fn replace_streamed(
        &self,
        path: &Utf8Path,
        write: &mut dyn FnMut(&mut Sink<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut all = Vec::new();
        write(&mut |piece| {
            all.extend_from_slice(piece);
            Ok(())
        })?;
        self.replace(path, &all)
    }
    /// Reads the file at `path` (the runner named it: symlinks followed) if it is a
    /// regular file of at most `max_len` bytes; a FIFO, socket or device is refused
    /// without blocking (`--var-file` outside the repository).
    fn read_regular(&self, path: &Utf8Path, max_len: u64) -> Result<Vec<u8>, ReadError> {
        let bytes = self.read(path)?;
        if bytes.len() as u64 > max_len {
            return Err(ReadError::TooLarge { limit: max_len });
        }
        Ok(bytes)
    }
    /// Creates the directory `path` beneath `root` and its missing parents, following no
    /// symlink below `root` (see [`System::write_beneath`]).
    fn create_dir_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        let rel = relative_beneath(root, path)?;
        self.create_dir_all(&root.join(rel))
    }
    /// [`System::write_atomic_parts`] of `path` beneath `root` (absolute, or relative to
    /// `root`) without following a symlink below `root`: `root` is opened as named (the
    /// user chose it), each directory below it without following a link (a link there is
    /// an error naming it: "is a symlink: terraci does not write through links in the
    /// project"), missing ones are made, and the file is written to a new temp file and
    /// renamed over the last component, so a link there is replaced, never followed.
    fn write_beneath(&self, root: &Utf8Path, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<bool> {
        let rel = relative_beneath(root, path)?;
        file_name_of(&rel)?;
        self.write_atomic_parts(&root.join(rel), parts)
    }
    /// [`System::replace_parts`] of `path` beneath `root`, following no link (see
    /// [`System::write_beneath`]), without comparing with the file there.
    fn replace_beneath(&self, root: &Utf8Path, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<()> {
        let rel = relative_beneath(root, path)?;
        file_name_of(&rel)?;
        self.replace_parts(&root.join(rel), parts)
    }
    /// [`System::replace_streamed`] of `path` beneath `root`, following no link (see
    /// [`System::write_beneath`]).
    fn replace_streamed_beneath(
        &self,
        root: &Utf8Path,
        path: &Utf8Path,
        write: &mut dyn FnMut(&mut Sink<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        let rel = relative_beneath(root, path)?;
        file_name_of(&rel)?;
        self.replace_streamed(&root.join(rel), write)
    }
    /// [`System::create_output_file`] of `path` beneath `root`, following no link: the
    /// old entry is removed (a link is not followed) and a new file made in its place,
    /// open for reading and writing.
    fn create_output_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<std::fs::File> {
        let rel = relative_beneath(root, path)?;
        file_name_of(&rel)?;
        self.create_output_file(&root.join(rel))
    }
    /// Removes the file (or link) `path` beneath `root`, following no link on the way.
    fn remove_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        let rel = relative_beneath(root, path)?;
        file_name_of(&rel)?;
        self.remove_file(&root.join(rel))
    }
    /// `Ok` when no existing component of `path` below `root` (the last one included) is
    /// a symlink; else the error [`System::write_beneath`] gives for it. Missing
    /// components are fine: a write makes them.
    fn refuse_links_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        relative_beneath(root, path).map(|_| ())
    }
    /// Writes the output file `-o path` that the user named: outside `project` as
    /// [`System::write_atomic_parts`] (a link is followed to its target); inside it the
    /// same while the file's real path (every link resolved) stays inside the project,
    /// else as [`System::write_beneath`] the project, so a committed link out of the
    /// project is replaced, not followed.
    fn write_output(
        &self,
        project: &Utf8Path,
        path: &Utf8Path,
        parts: &[&[u8]],
    ) -> io::Result<bool> {
        let _ = project;
        self.write_atomic_parts(path, parts)
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

/// Reads a file the runner named (`--var-file`) under the rules of the files a
/// repository names (`variables.files`): a path inside the policy's root is read
/// confined to it (a regular file whose real path stays inside, within the bound); a
/// path outside it, which only the runner can have named, must be a regular file within
/// the bound (links followed). Nothing blocks: a FIFO is refused.
pub fn read_named_file(
    system: &dyn System,
    policy: &ReadPolicy,
    path: &Utf8Path,
) -> Result<Vec<u8>, ReadError> {
    if policy.lexically_inside(path) {
        system
            .read_confined(path, policy, false)
            .map(|(bytes, _)| bytes)
    } else {
        system.read_regular(path, policy.max_len)
    }
}

/// `path` relative to `root`: `path` made relative when it is absolute (it must lie
/// lexically beneath `root`), and holding only plain names (no `..`).
pub fn relative_beneath(root: &Utf8Path, path: &Utf8Path) -> io::Result<Utf8PathBuf> {
    let rel = if path.is_absolute() {
        normalize(path)
            .strip_prefix(normalize(root))
            .map(Utf8Path::to_owned)
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "`{}` is not inside `{}`",
                        crate::escape::printable(path.as_str()),
                        crate::escape::printable(root.as_str())
                    ),
                )
            })?
    } else {
        path.to_owned()
    };
    let plain = rel.components().all(|c| {
        matches!(
            c,
            camino::Utf8Component::Normal(_) | camino::Utf8Component::CurDir
        )
    });
    if !plain {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "`{}` leaves `{}`",
                crate::escape::printable(path.as_str()),
                crate::escape::printable(root.as_str())
            ),
        ));
    }
    Ok(normalize(&rel))
}

/// The last component of a relative path beneath a root: the file to write.
pub(crate) fn file_name_of(rel: &Utf8Path) -> io::Result<&str> {
    rel.file_name().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "no file name to write: the path is the directory itself",
        )
    })
}

/// The directory beneath which terraci writes into `dir` without following a link: the
/// project when `dir` (relative to the project, or absolute) lies inside it as written,
/// so every directory from the project down is checked; otherwise `dir` itself, a
/// directory outside the project that the user named, whose own links are theirs.
pub fn write_root(project: &Utf8Path, dir: &Utf8Path) -> Utf8PathBuf {
    let abs = normalize(&project.join(dir));
    if abs.starts_with(normalize(project)) {
        project.to_owned()
    } else {
        abs
    }
}

/// The message of a write refused because a directory on the way is a symlink.
pub(crate) fn link_refused(path: &Utf8Path) -> io::Error {
    io::Error::other(format!(
        "`{}` is a symlink: terraci does not write through links in the project",
        crate::escape::printable(path.as_str())
    ))
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

/// Why there is no usable per-user cache home (see [`cache_home`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CacheHomeError {
    #[error("TERRACI_CACHE_HOME `{0}` is not an absolute path")]
    NotAbsolute(String),
    #[error(
        "no cache home: none of TERRACI_CACHE_HOME, XDG_CACHE_HOME and HOME is set: set TERRACI_CACHE_HOME"
    )]
    Unset,
    #[error(
        "the cache home `{home}` lies inside the project `{root}`, where a merge request can write: set TERRACI_CACHE_HOME outside the checkout"
    )]
    InsideProject { home: String, root: String },
    #[error("cannot create the cache home `{home}`: {why}")]
    Create { home: String, why: String },
}

/// The per-user directory where terraci keeps what it fetched and must trust later
/// (pulled policies, their locks, git stores): never inside the checkout, which a merge
/// request writes. The first of `TERRACI_CACHE_HOME` (absolute), `$XDG_CACHE_HOME/terraci`
/// (a relative `XDG_CACHE_HOME` is ignored, per the XDG spec) and `$HOME/.cache/terraci`.
/// Refused when it, or its nearest existing ancestor with symlinks resolved, lies inside
/// `project_root`. The directory is created.
pub fn cache_home(
    system: &dyn System,
    project_root: &Utf8Path,
) -> Result<Utf8PathBuf, CacheHomeError> {
    let set = |name: &str| system.env_var(name).filter(|v| !v.is_empty());
    let home = if let Some(dir) = set("TERRACI_CACHE_HOME") {
        if !Utf8Path::new(&dir).is_absolute() {
            return Err(CacheHomeError::NotAbsolute(
                crate::escape::printable(&dir).into_owned(),
            ));
        }
        Utf8PathBuf::from(dir)
    } else if let Some(xdg) = set("XDG_CACHE_HOME").filter(|d| Utf8Path::new(d).is_absolute()) {
        Utf8PathBuf::from(xdg).join("terraci")
    } else if let Some(home) = set("HOME").filter(|d| Utf8Path::new(d).is_absolute()) {
        Utf8PathBuf::from(home).join(".cache").join("terraci")
    } else {
        return Err(CacheHomeError::Unset);
    };
    let home = normalize(&home);
    let root = system
        .canonicalize(project_root)
        .unwrap_or_else(|_| normalize(project_root));
    // The nearest existing ancestor with its symlinks resolved, then the rest as written.
    let mut existing = home.as_path();
    let mut rest: Vec<&str> = Vec::new();
    let real = loop {
        if let Ok(real) = system.canonicalize(existing) {
            break rest.iter().rev().fold(real, |p, c| p.join(c));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name);
                existing = parent;
            }
            _ => break home.clone(),
        }
    };
    let inside = |p: &Utf8Path| p.starts_with(&root) || p.starts_with(project_root);
    if inside(&home) || inside(&real) {
        return Err(CacheHomeError::InsideProject {
            home: crate::escape::printable(home.as_str()).into_owned(),
            root: crate::escape::printable(root.as_str()).into_owned(),
        });
    }
    // What another local user could write there (a pulled policy, a lock) would be
    // trusted: the directory must be the user's own.
    system
        .create_dir_all(&home)
        .and_then(|()| system.make_private_dir(&home))
        .map_err(|e| CacheHomeError::Create {
            home: crate::escape::printable(home.as_str()).into_owned(),
            why: e.to_string(),
        })?;
    Ok(home)
}

#[cfg(test)]
mod cache_home_tests {
    use super::*;

    fn system(env: &[(&str, &str)]) -> MemorySystem {
        let s = MemorySystem::new();
        for (k, v) in env {
            s.set_env(k, v);
        }
        s
    }

    #[test]
    fn an_object_stamp_holds_its_id_and_no_file_stamp_is_one() {
        let id: [u8; 20] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(250));
        let stamp = Stamp::of_object(&id);
        assert_eq!(stamp.object(), Some(id));
        assert!(stamp.settled_before(std::time::UNIX_EPOCH + std::time::Duration::from_secs(60)));
        assert_ne!(Stamp::of_object(&[0; 20]), Stamp::of_object(&[1; 20]));
        let file = Stamp {
            dev: 2049,
            ino: 12,
            len: 3,
            mtime_ns: 1,
            ctime_ns: 1,
        };
        assert_eq!(file.object(), None);
    }

    #[test]
    fn the_cache_home_is_chosen_in_order_and_never_inside_the_project() {
        let root = Utf8Path::new("/work/project");
        let s = system(&[
            ("TERRACI_CACHE_HOME", "/c/t"),
            ("XDG_CACHE_HOME", "/c/x"),
            ("HOME", "/h"),
        ]);
        assert_eq!(cache_home(&s, root).unwrap(), "/c/t");
        let s = system(&[("XDG_CACHE_HOME", "/c/x"), ("HOME", "/h")]);
        assert_eq!(cache_home(&s, root).unwrap(), "/c/x/terraci");
        let s = system(&[("XDG_CACHE_HOME", "relative"), ("HOME", "/h")]);
        assert_eq!(cache_home(&s, root).unwrap(), "/h/.cache/terraci");
        assert_eq!(cache_home(&system(&[]), root), Err(CacheHomeError::Unset));
        assert!(matches!(
            cache_home(&system(&[("TERRACI_CACHE_HOME", "rel")]), root),
            Err(CacheHomeError::NotAbsolute(_))
        ));
        let inside = cache_home(&system(&[("HOME", "/work/project")]), root).unwrap_err();
        assert!(
            inside
                .to_string()
                .ends_with("set TERRACI_CACHE_HOME outside the checkout"),
            "{inside}"
        );
        let dotdot = system(&[("TERRACI_CACHE_HOME", "/work/other/../project/c")]);
        assert!(matches!(
            cache_home(&dotdot, root),
            Err(CacheHomeError::InsideProject { .. })
        ));
    }
}
