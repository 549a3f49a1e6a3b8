//! `--from-commit`: the project as HEAD's commit holds it, not as the working tree does.
//!
//! Input: the project directory, the [`System`] of the disk, and the paths that always
//! belong to the disk (the cache directory). Output: a [`System`] whose listings of the
//! project are HEAD's trees and whose files in the project are HEAD's blobs, each
//! stamped with its object id ([`Stamp::of_object`]). Every path the commit does not
//! hold (the cache, an output file, a `--config` outside the repository, the checkout of
//! a submodule) is the disk's, and so is every write.
//!
//! Why: in CI every job starts from a fresh clone, where no file stamp is one an earlier
//! run saw. Telling that the work tree still holds what a restored cache describes costs
//! a listing of every directory and a `stat` of every file, which on a repository of
//! 10,000 modules is as long as the rest of a cached run together. A commit's trees are
//! read from the object store in one pass, and their ids name contents in every clone:
//! the run record and the fact cache, keyed on stamps, find their entries in any fresh
//! clone of the same contents, and nothing is listed or `stat`ed on the disk. A tree is
//! read when a path first leads into it: a replayed run reads none, and a run that
//! takes its walk from a memo ([`CommitSystem::modified_files_since`]) reads only the
//! trees its own reads lead into. What a job
//! wrote into its work tree before terraci ran, and any edit not committed, is not seen:
//! that is the choice the flag makes, so it is asked for, never assumed.
//!
//! A symlink in the commit is followed inside the commit, lexically from the link's
//! directory (at most [`MAX_LINKS`] links per path); one whose target leaves the project
//! is a link out of it, as on the disk. A tree entry git itself would refuse to check
//! out (named `.`, `..` or `.git` in any letter case, or holding a `/`) is not listed.

use std::borrow::Cow;
use std::io;
use std::sync::{Arc, OnceLock};

use camino::{Utf8Path, Utf8PathBuf};
use gix::objs::FindExt as _;
use gix::ObjectId;

use terraci_db::system::{
    normalize, ChangeEvents, DirEntry, EntryKind, ReadError, ReadPolicy, Sink, Stamp, System,
};

use crate::VcsError;

/// Symlinks followed in one path before it counts as a loop (the kernel's limit).
const MAX_LINKS: usize = 40;

/// One entry of a tree of the commit below the project.
#[derive(Debug)]
enum Node {
    /// A tree, by its id, and its entries once a path has led into it (or the error
    /// its read gave).
    Dir(ObjectId, OnceLock<Result<Tree, String>>),
    File(ObjectId),
    /// A symlink: its blob's id and its target.
    Link(ObjectId, String),
    /// A submodule: what lies below it is the disk's (its own checkout).
    Gitlink,
    /// A name that is not UTF-8: listed as such, never found.
    NotUtf8,
}

/// A tree of the commit: its entries by name (byte order).
#[derive(Debug)]
struct Tree {
    entries: Vec<(String, Node)>,
}

impl Tree {
    fn get(&self, name: &str) -> Option<&Node> {
        let i = self
            .entries
            .binary_search_by(|(entry, _)| entry.as_bytes().cmp(name.as_bytes()))
            .ok()?;
        match &self.entries[i].1 {
            Node::NotUtf8 => None,
            node => Some(node),
        }
    }
}

/// Where a path leads in the commit.
enum Found<'s, 'p> {
    /// The project-relative path of the node it resolved to (the path asked when no link
    /// was on the way), and the node.
    Node(Cow<'p, str>, &'s Node),
    /// Below a submodule: the disk's (the submodule's own checkout).
    Disk,
    /// Not in the commit, through a link out of the project or a loop of links, or the
    /// commit's trees could not be read.
    Not(ReadError),
}

/// The project as HEAD's commit holds it ([module docs](self)).
#[derive(Clone)]
pub struct CommitSystem {
    inner: Arc<Inner>,
}

struct Inner {
    disk: Arc<dyn System>,
    /// The project directory, absolute and normalised.
    root: Utf8PathBuf,
    /// Paths that are the disk's even where the commit holds them.
    disk_only: Vec<Utf8PathBuf>,
    /// The project's tree in the commit, as a node (its trees below are read as paths
    /// lead into them).
    tree: Node,
    /// The repository's git directory, which the blob readers open.
    git_dir: std::path::PathBuf,
}

impl CommitSystem {
    /// The project at `project_dir` (absolute) as HEAD's commit holds it; `disk_only`
    /// are paths always read from `disk`.
    pub fn open(
        disk: Arc<dyn System>,
        project_dir: &Utf8Path,
        disk_only: Vec<Utf8PathBuf>,
    ) -> Result<CommitSystem, VcsError> {
        let root = normalize(project_dir);
        let mut repo =
            gix::discover(root.as_std_path()).map_err(|err| VcsError::NotARepository {
                path: root.clone(),
                reason: crate::error_chain(&err).join(": "),
            })?;
        repo.object_cache_size_if_unset(4 << 20);
        let prefix = crate::project_prefix(&repo, &root)?;
        let head = crate::head_commit(&repo)?.ok_or_else(|| {
            VcsError::Git(format!(
                "--from-commit reads the project from HEAD's commit, and the repository of \
                 {root} has no commit yet"
            ))
        })?;
        let tree = repo
            .find_commit(head)
            .map_err(crate::git_err("cannot read HEAD's commit"))?
            .tree_id()
            .map_err(crate::git_err("cannot read HEAD's commit"))?
            .detach();
        let top = if prefix.is_empty() {
            Some(tree)
        } else {
            repo.find_tree(tree)
                .map_err(crate::git_err("cannot read HEAD's tree"))?
                .lookup_entry_by_path(&prefix)
                .map_err(crate::git_err("cannot read HEAD's tree"))?
                .filter(|entry| entry.mode().is_tree())
                .map(|entry| entry.object_id())
        };
        let top = top.ok_or_else(|| {
            VcsError::Git(format!(
                "--from-commit reads the project from HEAD's commit, and HEAD ({}) holds \
                 no directory `{prefix}`: commit the project first",
                head.to_hex_with_len(12)
            ))
        })?;
        let git_dir = repo.git_dir().to_owned();
        // This thread's handle from now on: its first tree or blob opens none.
        HANDLE.with_borrow_mut(|handle| *handle = Some((git_dir.clone(), repo)));
        Ok(CommitSystem {
            inner: Arc::new(Inner {
                disk,
                root,
                disk_only: disk_only.iter().map(|p| normalize(p)).collect(),
                tree: Node::Dir(top, OnceLock::new()),
                git_dir,
            }),
        })
    }

    /// The id of the project's tree in the commit: the same id is the same files, in
    /// any clone.
    pub fn tree(&self) -> String {
        self.inner.tree_id().to_string()
    }

    /// The object id of the file at each project-relative path, when every one is a
    /// regular file the commit's trees reach with no symlink or submodule on the way:
    /// what a memo of the walk records, to be patched by a diff of trees, which names
    /// files by their own paths only. `None` otherwise.
    pub fn plain_file_ids<'p>(
        &self,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Option<Vec<[u8; 20]>> {
        paths
            .into_iter()
            .map(|rel| match self.inner.entry(rel).ok()?? {
                Node::File(id) => id.as_bytes().try_into().ok(),
                _ => None,
            })
            .collect()
    }

    /// The files whose contents alone changed from the project tree `old` (an id as
    /// [`CommitSystem::tree`] gives it) to this commit's, by project-relative path, each
    /// with its object id now: empty for the same tree. `None` when anything else
    /// changed, which may change the walk of the project: an entry added, removed or
    /// turned into another kind (a file into a symlink or a tree), a symlink or a
    /// `.gitignore` changed, a name that is not UTF-8; or when `old` cannot be read (a
    /// shallow clone without it).
    pub fn modified_files_since(&self, old: &str) -> Option<Vec<(String, [u8; 20])>> {
        use gix::diff::tree::recorder::Change;
        let old = ObjectId::from_hex(old.as_bytes()).ok()?;
        let new = self.inner.tree_id();
        if old == new {
            return Some(Vec::new());
        }
        // The trees' own diff, without rename tracking: that would open git's index
        // for the attributes of blobs this diff never compares.
        let changes = with_handle(&self.inner.git_dir, |repo| {
            let diff = || {
                let mut bufs = (Vec::new(), Vec::new());
                let old = repo.objects.find_tree_iter(&old, &mut bufs.0).ok()?;
                let new = repo.objects.find_tree_iter(&new, &mut bufs.1).ok()?;
                let mut recorder = gix::diff::tree::Recorder::default();
                let mut state = gix::diff::tree::State::default();
                gix::diff::tree(old, new, &mut state, &repo.objects, &mut recorder).ok()?;
                Some(recorder.records)
            };
            Ok(diff())
        })
        .ok()??;
        let mut modified = Vec::new();
        for change in changes {
            let Change::Modification {
                path,
                previous_entry_mode,
                entry_mode,
                oid,
                ..
            } = change
            else {
                return None;
            };
            if previous_entry_mode.is_tree() && entry_mode.is_tree() {
                continue;
            }
            let path = std::str::from_utf8(path.as_ref()).ok()?;
            let name = path.rsplit('/').next().unwrap_or(path);
            if !(previous_entry_mode.is_blob() && entry_mode.is_blob()) || name == ".gitignore" {
                return None;
            }
            // A file below an entry the commit does not list is not the project's.
            if path.split('/').all(|part| listed(part.as_bytes())) {
                modified.push((path.to_owned(), oid.as_bytes().try_into().ok()?));
            }
        }
        Some(modified)
    }
}

/// A file's bytes and stamp.
type Stamped = (Vec<u8>, Option<Stamp>);

/// The entries of the tree `id`, by name.
fn read_tree(repo: &gix::Repository, id: ObjectId) -> Result<Tree, ReadError> {
    let failed = |e: &dyn std::fmt::Display| {
        ReadError::Io(io::Error::other(format!(
            "cannot read HEAD's tree {id}: {e}"
        )))
    };
    let mut buf = Vec::new();
    let tree = repo
        .objects
        .find_tree(&id, &mut buf)
        .map_err(|e| failed(&e))?;
    let mut entries = Vec::with_capacity(tree.entries.len());
    for entry in &tree.entries {
        let raw: &[u8] = entry.filename;
        if !listed(raw) {
            continue;
        }
        let Ok(name) = std::str::from_utf8(raw) else {
            entries.push((String::from_utf8_lossy(raw).into_owned(), Node::NotUtf8));
            continue;
        };
        let oid = entry.oid.to_owned();
        let node = if entry.mode.is_tree() {
            Node::Dir(oid, OnceLock::new())
        } else if entry.mode.is_link() {
            let mut bytes = Vec::new();
            let target = repo
                .objects
                .find_blob(&oid, &mut bytes)
                .map_err(|e| failed(&e))?
                .data;
            Node::Link(oid, String::from_utf8_lossy(target).into_owned())
        } else if entry.mode.is_commit() {
            Node::Gitlink
        } else {
            Node::File(oid)
        };
        entries.push((name.to_owned(), node));
    }
    entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    Ok(Tree { entries })
}

/// Whether a tree entry named `raw` is listed: git itself refuses to check out one named
/// `.`, `..` or `.git` in any letter case, or holding a `/` or a NUL.
fn listed(raw: &[u8]) -> bool {
    !(raw.is_empty()
        || raw == b"."
        || raw == b".."
        || raw.eq_ignore_ascii_case(b".git")
        || raw.contains(&b'/')
        || raw.contains(&0))
}

impl Inner {
    /// `path` relative to the project, when the commit may hold it.
    fn relative<'a>(&self, path: &'a Utf8Path) -> Option<Cow<'a, str>> {
        let text = path.as_str();
        let path: Cow<'a, str> =
            if text.contains("/.") || text.contains("//") || text.ends_with('/') {
                Cow::Owned(normalize(path).into_string())
            } else {
                Cow::Borrowed(text)
            };
        // Component-wise prefixes, compared as text (paths are normalised).
        let below = |dir: &str| {
            path.strip_prefix(dir)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/') || dir.ends_with('/'))
        };
        if self.disk_only.iter().any(|d| below(d.as_str())) || !below(self.root.as_str()) {
            return None;
        }
        let start = path.len()
            - path[self.root.as_str().len()..]
                .trim_start_matches('/')
                .len();
        Some(match path {
            Cow::Borrowed(p) => Cow::Borrowed(&p[start..]),
            Cow::Owned(p) => Cow::Owned(p[start..].to_owned()),
        })
    }

    /// Where `path` leads in the commit ([`Inner::find`]); `None` when it is the disk's
    /// (outside the project, named on the command line, or below a submodule).
    fn resolve<'p>(
        &self,
        path: &'p Utf8Path,
        follow: bool,
    ) -> Option<Result<(Cow<'p, str>, &Node), ReadError>> {
        let found = match self.relative(path)? {
            Cow::Borrowed(rel) => self.find(rel, follow),
            Cow::Owned(rel) => match self.find(&rel, follow) {
                Found::Node(at, node) => Found::Node(Cow::Owned(at.into_owned()), node),
                Found::Disk => Found::Disk,
                Found::Not(e) => Found::Not(e),
            },
        };
        match found {
            Found::Node(at, node) => Some(Ok((at, node))),
            Found::Disk => None,
            Found::Not(e) => Some(Err(e)),
        }
    }

    /// The entries of `node` when it is a tree, read the first time they are asked for
    /// (on the asking thread: the walk's workers read a level's trees side by side).
    fn subtree<'s>(&'s self, node: &'s Node) -> Result<Option<&'s Tree>, ReadError> {
        let Node::Dir(id, tree) = node else {
            return Ok(None);
        };
        tree.get_or_init(|| {
            with_handle(&self.git_dir, |repo| read_tree(repo, *id)).map_err(|e| e.to_string())
        })
        .as_ref()
        .map(Some)
        .map_err(|e| ReadError::Io(io::Error::other(e.clone())))
    }

    /// The id of the project's tree.
    fn tree_id(&self) -> ObjectId {
        match self.tree {
            Node::Dir(id, _) => id,
            _ => unreachable!("the project is a tree"),
        }
    }

    /// The node at the project-relative `rel`, as the trees' entries name it (no link
    /// followed): `Ok(None)` when no entry has that path.
    fn entry(&self, rel: &str) -> Result<Option<&Node>, ReadError> {
        let mut node = &self.tree;
        if rel.is_empty() {
            return Ok(Some(node));
        }
        for name in rel.split('/') {
            let Some(tree) = self.subtree(node)? else {
                return Ok(None);
            };
            match tree.get(name) {
                Some(next) => node = next,
                None => return Ok(None),
            }
        }
        Ok(Some(node))
    }

    /// Where the project-relative `rel` leads, following links in every component and,
    /// with `follow`, in the last.
    fn find<'s, 'p>(&'s self, rel: &'p str, follow: bool) -> Found<'s, 'p> {
        // A path the commit holds as it is written (no link on the way).
        let entry = |rel: &str| self.entry(rel);
        match entry(rel) {
            Err(e) => return Found::Not(e),
            Ok(Some(Node::Link(..))) if follow => {}
            Ok(Some(Node::Gitlink)) => return Found::Disk,
            Ok(Some(node)) => return Found::Node(Cow::Borrowed(rel), node),
            Ok(None) => {}
        }
        let outside = || {
            Found::Not(ReadError::Unsafe(format!(
                "`{rel}` leads out of the project through a symlink in the commit"
            )))
        };
        let mut links = 0;
        let mut pending: Vec<String> = rel
            .split('/')
            .filter(|c| !c.is_empty())
            .rev()
            .map(str::to_owned)
            .collect();
        let mut at = String::new();
        while let Some(part) = pending.pop() {
            let next = match part.as_str() {
                "." => continue,
                ".." => match at.rfind('/') {
                    Some(i) => at[..i].to_owned(),
                    None if at.is_empty() => return outside(),
                    None => String::new(),
                },
                name if at.is_empty() => name.to_owned(),
                name => format!("{at}/{name}"),
            };
            let node = match entry(&next) {
                Ok(node) => node,
                Err(e) => return Found::Not(e),
            };
            match node {
                None => {
                    return Found::Not(ReadError::Io(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!("`{rel}` is not in HEAD's commit"),
                    )))
                }
                Some(Node::Gitlink) => return Found::Disk,
                Some(Node::Link(_, target)) if follow || !pending.is_empty() => {
                    links += 1;
                    if links > MAX_LINKS || target.starts_with('/') {
                        return outside();
                    }
                    pending.extend(
                        target
                            .split('/')
                            .filter(|c| !c.is_empty())
                            .rev()
                            .map(str::to_owned),
                    );
                    // The target is relative to the link's directory.
                    at = match next.rfind('/') {
                        Some(i) => next[..i].to_owned(),
                        None => String::new(),
                    };
                }
                Some(_) => at = next,
            }
        }
        match entry(&at) {
            Ok(Some(node)) => Found::Node(Cow::Owned(at), node),
            Ok(None) => outside(),
            Err(e) => Found::Not(e),
        }
    }

    fn read_blob(&self, id: ObjectId, max_len: Option<u64>) -> Result<Vec<u8>, ReadError> {
        with_handle(&self.git_dir, |repo| read_blob(repo, id, max_len))
    }

    fn entry_kind(&self, dir: &str, name: &str, node: &Node) -> EntryKind {
        match node {
            Node::Dir(..) | Node::Gitlink => EntryKind::Dir,
            Node::File(_) => EntryKind::File,
            Node::NotUtf8 => EntryKind::NotUtf8,
            Node::Link(..) => {
                let path = if dir.is_empty() {
                    name.to_owned()
                } else {
                    format!("{dir}/{name}")
                };
                let to_dir = match self.find(&path, true) {
                    Found::Node(_, Node::Dir(..)) => true,
                    Found::Disk => self.disk.is_dir(&self.root.join(&path)),
                    Found::Node(..) | Found::Not(_) => false,
                };
                EntryKind::Symlink { to_dir }
            }
        }
    }

    fn stamp_of(node: &Node) -> Option<Stamp> {
        match node {
            Node::Dir(id, _) | Node::File(id) | Node::Link(id, _) => {
                Some(Stamp::of_object(id.as_bytes().try_into().ok()?))
            }
            Node::Gitlink | Node::NotUtf8 => None,
        }
    }
}

/// `f` with this thread's handle of the repository at `git_dir`.
fn with_handle<T>(
    git_dir: &std::path::Path,
    f: impl FnOnce(&gix::Repository) -> Result<T, ReadError>,
) -> Result<T, ReadError> {
    HANDLE.with_borrow_mut(|handle| {
        if handle.as_ref().is_none_or(|(dir, _)| dir != git_dir) {
            let mut repo = gix::open(git_dir).map_err(|e| {
                io::Error::other(format!(
                    "cannot open the repository {}: {e}",
                    git_dir.display()
                ))
            })?;
            repo.object_cache_size_if_unset(4 << 20);
            *handle = Some((git_dir.to_owned(), repo));
        }
        f(&handle.as_ref().expect("opened above").1)
    })
}

thread_local! {
    /// This thread's handle of the repository it last read a blob from: a handle cannot
    /// leave its thread, and opening one per blob would cost more than the read.
    static HANDLE: std::cell::RefCell<Option<(std::path::PathBuf, gix::Repository)>> =
        const { std::cell::RefCell::new(None) };
}

fn read_blob(
    repo: &gix::Repository,
    id: ObjectId,
    max_len: Option<u64>,
) -> Result<Vec<u8>, ReadError> {
    let failed =
        |e: &dyn std::fmt::Display| io::Error::other(format!("cannot read blob {id}: {e}"));
    if let Some(max_len) = max_len {
        let header = repo.find_header(id).map_err(|e| failed(&e))?;
        if header.size() > max_len {
            return Err(ReadError::TooLarge { limit: max_len });
        }
    }
    Ok(repo.find_blob(id).map_err(|e| failed(&e))?.take_data())
}

impl CommitSystem {
    /// The file at `path` if the commit holds it: `Some(Err)` for anything that is not a
    /// file there.
    fn file(&self, path: &Utf8Path, max_len: Option<u64>) -> Option<Result<Stamped, ReadError>> {
        let inner = &self.inner;
        Some(match inner.resolve(path, true)? {
            Err(e) => Err(e),
            Ok((_, node @ Node::File(id))) => inner
                .read_blob(*id, max_len)
                .map(|bytes| (bytes, Inner::stamp_of(node))),
            Ok(_) => Err(ReadError::Unsafe(format!(
                "`{path}` is not a regular file in HEAD's commit"
            ))),
        })
    }
}

fn into_io(err: ReadError) -> io::Error {
    match err {
        ReadError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    }
}

impl System for CommitSystem {
    fn read(&self, path: &Utf8Path) -> io::Result<Vec<u8>> {
        match self.file(path, None) {
            Some(result) => result.map(|(bytes, _)| bytes).map_err(into_io),
            None => self.inner.disk.read(path),
        }
    }

    fn read_head(&self, path: &Utf8Path, len: usize) -> io::Result<Vec<u8>> {
        match self.file(path, None) {
            Some(result) => result
                .map(|(mut bytes, _)| {
                    bytes.truncate(len);
                    bytes
                })
                .map_err(into_io),
            None => self.inner.disk.read_head(path, len),
        }
    }

    fn read_stamped(&self, path: &Utf8Path) -> io::Result<(Vec<u8>, Option<Stamp>)> {
        match self.file(path, None) {
            Some(result) => result.map_err(into_io),
            None => self.inner.disk.read_stamped(path),
        }
    }

    fn read_confined(
        &self,
        path: &Utf8Path,
        policy: &ReadPolicy,
        walked: bool,
    ) -> Result<(Vec<u8>, Option<Stamp>), ReadError> {
        if !policy.lexically_inside(path) {
            return Err(ReadError::Unsafe(format!(
                "`{path}` is outside `{}`",
                policy.root
            )));
        }
        match self.file(path, Some(policy.max_len())) {
            Some(result) => {
                let (bytes, stamp) = result?;
                policy.check_len(bytes.len() as u64)?;
                Ok((bytes, stamp))
            }
            None => self.inner.disk.read_confined(path, policy, walked),
        }
    }

    fn read_regular(&self, path: &Utf8Path, max_len: u64) -> Result<Vec<u8>, ReadError> {
        match self.file(path, Some(max_len)) {
            Some(result) => result.map(|(bytes, _)| bytes),
            None => self.inner.disk.read_regular(path, max_len),
        }
    }

    fn canonicalize(&self, path: &Utf8Path) -> io::Result<Utf8PathBuf> {
        let inner = &self.inner;
        match inner.resolve(path, true) {
            None => inner.disk.canonicalize(path),
            Some(Ok((at, _))) => {
                // The project directory itself as the disk resolves it (a symlinked
                // temp dir), the rest as the commit does.
                let root = inner
                    .disk
                    .canonicalize(&inner.root)
                    .unwrap_or_else(|_| inner.root.clone());
                Ok(if at.is_empty() { root } else { root.join(&*at) })
            }
            Some(Err(e)) => Err(into_io(e)),
        }
    }

    fn stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        match self.inner.resolve(path, true) {
            None => self.inner.disk.stamp(path),
            Some(found) => Inner::stamp_of(found.ok()?.1),
        }
    }

    fn link_stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        match self.inner.resolve(path, false) {
            None => self.inner.disk.link_stamp(path),
            Some(found) => Inner::stamp_of(found.ok()?.1),
        }
    }

    fn program_id(&self) -> Option<Vec<u8>> {
        self.inner.disk.program_id()
    }

    fn current_exe(&self) -> Option<String> {
        self.inner.disk.current_exe()
    }

    fn contents_id(&self) -> Option<String> {
        Some(format!("tree {}", self.inner.tree_id()))
    }

    fn committed(&self, path: &Utf8Path) -> Option<bool> {
        let inner = &self.inner;
        let path = normalize(path);
        let rel = path.strip_prefix(&inner.root).ok()?;
        Some(matches!(
            inner.entry(rel.as_str()).ok()?,
            Some(Node::File(_) | Node::Link(..))
        ))
    }

    fn now(&self) -> std::time::SystemTime {
        self.inner.disk.now()
    }

    fn read_dir(&self, path: &Utf8Path) -> io::Result<Vec<DirEntry>> {
        let inner = &self.inner;
        match inner.resolve(path, true) {
            None => inner.disk.read_dir(path),
            Some(Ok((at, node @ Node::Dir(..)))) => {
                let tree = inner.subtree(node).map_err(into_io)?;
                Ok(tree
                    .map_or(&[][..], |tree| &tree.entries)
                    .iter()
                    .map(|(name, node)| DirEntry {
                        name: name.clone(),
                        kind: inner.entry_kind(&at, name, node),
                    })
                    .collect())
            }
            Some(Ok(_)) => Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("`{path}` is not a directory in HEAD's commit"),
            )),
            Some(Err(e)) => Err(into_io(e)),
        }
    }

    fn is_file(&self, path: &Utf8Path) -> bool {
        match self.inner.resolve(path, true) {
            None => self.inner.disk.is_file(path),
            Some(found) => matches!(found, Ok((_, Node::File(_)))),
        }
    }

    fn is_dir(&self, path: &Utf8Path) -> bool {
        match self.inner.resolve(path, true) {
            None => self.inner.disk.is_dir(path),
            Some(found) => matches!(found, Ok((_, Node::Dir(..)))),
        }
    }

    fn env_var(&self, name: &str) -> Option<String> {
        self.inner.disk.env_var(name)
    }

    fn current_dir(&self) -> io::Result<Utf8PathBuf> {
        self.inner.disk.current_dir()
    }

    fn stderr_is_terminal(&self) -> bool {
        self.inner.disk.stderr_is_terminal()
    }

    fn interactive_stdin(&self) -> Option<Box<dyn io::BufRead + '_>> {
        self.inner.disk.interactive_stdin()
    }

    fn create_dir_all(&self, path: &Utf8Path) -> io::Result<()> {
        self.inner.disk.create_dir_all(path)
    }

    fn make_private_dir(&self, path: &Utf8Path) -> io::Result<()> {
        self.inner.disk.make_private_dir(path)
    }

    fn holds(&self, path: &Utf8Path, parts: &[&[u8]]) -> bool {
        self.inner.disk.holds(path, parts)
    }

    fn remove_file(&self, path: &Utf8Path) -> io::Result<()> {
        self.inner.disk.remove_file(path)
    }

    fn rename(&self, from: &Utf8Path, to: &Utf8Path) -> io::Result<()> {
        self.inner.disk.rename(from, to)
    }

    fn create_output_file(&self, path: &Utf8Path) -> io::Result<std::fs::File> {
        self.inner.disk.create_output_file(path)
    }

    fn write_atomic(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<bool> {
        self.inner.disk.write_atomic(path, bytes)
    }

    fn write_atomic_parts(&self, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<bool> {
        self.inner.disk.write_atomic_parts(path, parts)
    }

    fn append(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        self.inner.disk.append(path, bytes)
    }

    fn replace(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        self.inner.disk.replace(path, bytes)
    }

    fn replace_parts(&self, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<()> {
        self.inner.disk.replace_parts(path, parts)
    }

    fn replace_streamed(
        &self,
        path: &Utf8Path,
        write: &mut dyn FnMut(&mut Sink<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        self.inner.disk.replace_streamed(path, write)
    }

    fn create_dir_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        self.inner.disk.create_dir_beneath(root, path)
    }

    fn write_beneath(&self, root: &Utf8Path, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<bool> {
        self.inner.disk.write_beneath(root, path, parts)
    }

    fn replace_beneath(&self, root: &Utf8Path, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<()> {
        self.inner.disk.replace_beneath(root, path, parts)
    }

    fn replace_streamed_beneath(
        &self,
        root: &Utf8Path,
        path: &Utf8Path,
        write: &mut dyn FnMut(&mut Sink<'_>) -> io::Result<()>,
    ) -> io::Result<()> {
        self.inner.disk.replace_streamed_beneath(root, path, write)
    }

    fn create_output_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<std::fs::File> {
        self.inner.disk.create_output_beneath(root, path)
    }

    fn remove_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        self.inner.disk.remove_beneath(root, path)
    }

    fn refuse_links_beneath(&self, root: &Utf8Path, path: &Utf8Path) -> io::Result<()> {
        self.inner.disk.refuse_links_beneath(root, path)
    }

    fn write_output(
        &self,
        project: &Utf8Path,
        path: &Utf8Path,
        parts: &[&[u8]],
    ) -> io::Result<bool> {
        self.inner.disk.write_output(project, path, parts)
    }

    fn watch(&self, root: &Utf8Path, outside: &[Utf8PathBuf]) -> io::Result<Box<dyn ChangeEvents>> {
        self.inner.disk.watch(root, outside)
    }

    fn shared(&self) -> Arc<dyn System> {
        Arc::new(self.clone())
    }
}
