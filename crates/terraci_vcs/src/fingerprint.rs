//! A fingerprint of everything git's `--changed-only` answer depends on, cheap to check
//! again: a repeat merge-request run whose fingerprint is unchanged reuses the change
//! set its run record holds instead of asking git for the status of every file.
//!
//! What git's answer depends on, and what stands for it here:
//! - the commits: HEAD's and the base's ids (the merge base and both trees follow from
//!   them), `.git/shallow` and `.git/info/grafts`;
//! - the index (staged changes, and the stat data that decides which files git hashes):
//!   the stamp of the index file;
//! - the working tree below the project: the stamp of every directory (a directory's
//!   modification and change times move whenever an entry is added, removed or renamed
//!   in it, so equal directory stamps mean the same names everywhere) and of every file
//!   (content changes move the file's times; a same-length edit with its modification
//!   time put back still moves its change time), symlinks with their targets' stamps;
//! - the rules: `.gitignore` and `.gitattributes` files are files of the tree, those
//!   above the project (up to the repository's top) are stamped, as are the repository's
//!   `config`, `info/exclude` and `info/attributes`, the user's and the system's git
//!   config and global ignore file, and the `GIT_*` environment variables git reads.
//!
//! A stamp recorded here is only trusted when it had settled before the run began (as
//! the run record's stamps, [`Stamp::settled_before`]), and the fingerprint is taken
//! *before* git computes the change set it stands for: a file changed in between leaves
//! a newer stamp on disk than the fingerprint holds, so the next run misses and asks git
//! again. Directories and files git never sees (`.git` entries, the cache directory) are
//! left out; the directory holding the output file (which every run may replace) is
//! fingerprinted by its names instead of its stamp. Repositories with submodules (their
//! state lives in the superproject's git dir) and symlinks to directories get no
//! fingerprint: those runs ask git every time.

use camino::{Utf8Path, Utf8PathBuf};
use rayon::prelude::*;

use terraci_db::store::{put_opt, put_stamp, put_str, put_u64, R};
use terraci_db::system::{EntryKind, Stamp, System};

/// The environment variables that change what git reads or how (`gix` honours them).
const GIT_ENV: [&str; 20] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_CONFIG",
    "GIT_CONFIG_GLOBAL",
    "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM",
    "GIT_CONFIG_COUNT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
    "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE",
    "GIT_SHALLOW_FILE",
    "GIT_NAMESPACE",
    "HOME",
    "XDG_CONFIG_HOME",
];

/// What is fingerprinted, besides the tree below the project.
pub(super) struct Header<'a> {
    pub(crate) head: Option<String>,
    pub(crate) base: Option<(String, String)>,
    pub(crate) committed_only: bool,
    pub(crate) git_dir: &'a Utf8Path,
    pub(crate) common_dir: &'a Utf8Path,
    pub(crate) work_dir: &'a Utf8Path,
}

/// How to fingerprint one run: when it began, and what it writes (left out).
#[derive(Clone)]
pub struct Fingerprinting {
    pub system: std::sync::Arc<dyn System>,
    /// The moment the run began: stamps after it are not trusted.
    pub started: std::time::SystemTime,
    /// Absolute paths the run itself writes (the cache directory): left out.
    pub skip: Vec<Utf8PathBuf>,
    /// The output file, if the run writes one: left out, and its directory is
    /// fingerprinted by its names.
    pub output: Option<Utf8PathBuf>,
}

/// One entry of the tree: project-relative path and what it must still be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
    /// A directory with its stamp.
    Dir(Stamp),
    /// The directory the output is written to: its names (the output's left out).
    Listed(Vec<String>),
    /// A file (or a FIFO, socket, device) with its stamp.
    File(Stamp),
    /// A symlink to a file: its own stamp and its target's (`None`: dangling).
    Link(Stamp, Option<Stamp>),
}

/// The tree below the project by project-relative path (`""` is the project itself).
pub(super) type Tree = std::collections::BTreeMap<String, Entry>;

/// What [`check`] found.
pub(super) enum Check {
    /// The recorded fingerprint is the repository's.
    Same,
    /// It is not; the fingerprint now, when one can be taken, what moved when only
    /// files' contents did, and the tree the fingerprint holds when it was walked.
    Changed(Option<Vec<u8>>, Option<Moved>, Option<Tree>),
}

/// A check that found only files' contents changed: the same git state, the same
/// directories with the same names everywhere (so the same walk of the project: no
/// `.gitignore` and no symlink among the changed), and the stamp every other entry has
/// now. A run uses it instead of walking the project and stamping its files again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Moved {
    /// Every entry by project-relative path, in path order, as it was recorded.
    entries: Vec<(String, Entry)>,
    /// Which of them changed.
    changed: Vec<bool>,
}

impl Moved {
    /// The `lstat` stamp of the file at `rel` (project-relative), as the check just found
    /// it: `None` for one that changed (stamp it again) or that is not a file.
    pub fn link_stamp(&self, rel: &str) -> Option<Stamp> {
        let i = self
            .entries
            .binary_search_by(|(path, _)| path.as_str().cmp(rel))
            .ok()?;
        match (&self.entries[i].1, self.changed[i]) {
            (Entry::File(stamp) | Entry::Link(stamp, _), false) => Some(*stamp),
            _ => None,
        }
    }

    /// The project-relative paths of the files that changed, in path order.
    pub fn changed(&self) -> impl Iterator<Item = &str> {
        self.entries
            .iter()
            .zip(&self.changed)
            .filter(|(_, &c)| c)
            .map(|((path, _), _)| path.as_str())
    }
}

/// The fingerprint of the repository as it is now, encoded; `None` when it cannot be
/// taken or trusted (an unsettled stamp, a submodule, a symlinked directory, an
/// unreadable directory, a system that cannot stamp).
pub(super) fn take(
    header: &Header<'_>,
    project: &Utf8Path,
    how: &Fingerprinting,
) -> Option<(Vec<u8>, Tree)> {
    let head = encode_header(header, project, how)?;
    let mut tree = Tree::new();
    walk_into(project, "", how, &mut tree)?;
    Some((encode(&head, &tree), tree))
}

/// Whether `recorded` is still the fingerprint of the repository, and if not, the
/// fingerprint now. Every recorded entry is stamped again (on all cores) without listing
/// a directory, since equal directory stamps mean equal names; only the directories
/// whose stamps moved are listed again (and new ones walked), so a repeat run after an
/// edit does not walk the whole tree.
pub(super) fn check(
    header: &Header<'_>,
    project: &Utf8Path,
    how: &Fingerprinting,
    recorded: &[u8],
) -> Check {
    let now = encode_header(header, project, how);
    let Some((head, entries)) = decode(recorded) else {
        let (now, tree) = now.and_then(|_| take(header, project, how)).unzip();
        return Check::Changed(now, None, tree);
    };
    let system = &*how.system;
    let fresh: Vec<bool> = entries
        .par_iter()
        .with_min_len(256)
        .map(|(rel, entry)| same(system, project, how, rel, entry))
        .collect();
    let Some(now) = now else {
        return Check::Changed(None, None, None);
    };
    if now == head && fresh.iter().all(|&f| f) {
        return Check::Same;
    }
    let files_only = entries
        .iter()
        .zip(&fresh)
        .all(|((rel, entry), &unchanged)| {
            unchanged || (matches!(entry, Entry::File(_)) && !rel.ends_with(".gitignore"))
        });
    if now == head && files_only {
        // Nothing to list again: each changed file is stamped again in place.
        let moved = Moved {
            entries,
            changed: fresh.iter().map(|&f| !f).collect(),
        };
        let restamped: Option<Vec<Entry>> = moved
            .changed()
            .map(|rel| leaf(system, &project.join(rel), &EntryKind::File, how, None))
            .collect();
        let encoded = restamped.map(|restamped| {
            let mut restamped = restamped.iter();
            let tree = moved
                .entries
                .iter()
                .zip(&moved.changed)
                .map(|((path, entry), &c)| {
                    (
                        path,
                        if c {
                            restamped.next().unwrap_or(entry)
                        } else {
                            entry
                        },
                    )
                });
            encode(&now, tree)
        });
        return Check::Changed(encoded, Some(moved), None);
    }
    let mut relist = std::collections::BTreeSet::new();
    for ((rel, entry), &unchanged) in entries.iter().zip(&fresh) {
        if unchanged {
            continue;
        }
        match entry {
            Entry::Dir(_) | Entry::Listed(_) => relist.insert(rel.clone()),
            Entry::File(_) | Entry::Link(..) => relist.insert(parent(rel).to_owned()),
        };
    }
    let fresh: std::collections::BTreeMap<&str, bool> = entries
        .iter()
        .map(|(rel, _)| rel.as_str())
        .zip(fresh.iter().copied())
        .collect();
    let mut tree: Tree = entries.iter().cloned().collect();
    let mut rewalked: Vec<String> = Vec::new();
    for dir in relist {
        let under_rewalked = rewalked
            .iter()
            .any(|r| r.is_empty() || dir == *r || dir.starts_with(&format!("{r}/")));
        if under_rewalked || !tree.contains_key(&dir) {
            continue;
        }
        if relisted(project, &dir, how, &fresh, &mut tree, &mut rewalked).is_none() {
            return Check::Changed(None, None, None);
        }
    }
    Check::Changed(Some(encode(&now, &tree)), None, Some(tree))
}

/// Lists `dir` again into `tree`: its own entry, its children kept when unchanged,
/// stamped or walked when new or changed, removed with what lay below them when gone.
/// `None` when the result cannot be trusted (see [`take`]).
fn relisted(
    project: &Utf8Path,
    dir: &str,
    how: &Fingerprinting,
    fresh: &std::collections::BTreeMap<&str, bool>,
    tree: &mut Tree,
    rewalked: &mut Vec<String>,
) -> Option<()> {
    let system = &*how.system;
    let abs = join(project, dir);
    let Some((entries, names)) = list(system, &abs, how) else {
        remove_below(tree, dir);
        tree.remove(dir);
        return Some(());
    };
    tree.insert(dir.to_owned(), dir_entry(system, &abs, how, names, None)?);
    let children: std::collections::BTreeSet<String> = entries
        .iter()
        .map(|(name, _, _)| child_of(dir, name))
        .collect();
    let gone: Vec<String> = below(tree, dir)
        .filter(|k| parent(k) == dir && !children.contains(k.as_str()))
        .cloned()
        .collect();
    for child in gone {
        remove_below(tree, &child);
        tree.remove(&child);
    }
    for (name, kind, stamp) in entries {
        let child = child_of(dir, &name);
        let kept = fresh.get(child.as_str()) == Some(&true)
            && tree.get(&child).is_some_and(|e| kind_matches(e, &kind));
        if kept {
            continue;
        }
        remove_below(tree, &child);
        tree.remove(&child);
        if kind == EntryKind::Dir {
            walk_into(project, &child, how, tree)?;
            rewalked.push(child);
        } else {
            let entry = leaf(system, &project.join(&child), &kind, how, stamp)?;
            tree.insert(child, entry);
        }
    }
    Some(())
}

fn kind_matches(entry: &Entry, kind: &EntryKind) -> bool {
    matches!(
        (entry, kind),
        (Entry::Dir(_) | Entry::Listed(_), EntryKind::Dir)
            | (Entry::File(_), EntryKind::File | EntryKind::Special { .. })
            | (Entry::Link(..), EntryKind::Symlink { to_dir: false })
    )
}

/// Whether the entry at `rel` is still what it was recorded as.
fn same(
    system: &dyn System,
    project: &Utf8Path,
    how: &Fingerprinting,
    rel: &str,
    entry: &Entry,
) -> bool {
    let path = join(project, rel);
    match entry {
        Entry::Dir(stamp) | Entry::File(stamp) => system.link_stamp(&path) == Some(*stamp),
        Entry::Link(stamp, target) => {
            system.link_stamp(&path) == Some(*stamp) && system.stamp(&path) == *target
        }
        Entry::Listed(names) => list(system, &path, how).is_some_and(|(_, now)| now == *names),
    }
}

/// The paths strictly below the directory `dir`.
fn below<'t>(tree: &'t Tree, dir: &str) -> impl Iterator<Item = &'t String> {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{dir}/")
    };
    tree.range(prefix.clone()..)
        .map(|(k, _)| k)
        .take_while(move |k| k.starts_with(&prefix))
        .filter(|k| !k.is_empty())
}

fn remove_below(tree: &mut Tree, dir: &str) {
    let gone: Vec<String> = below(tree, dir).cloned().collect();
    for k in gone {
        tree.remove(&k);
    }
}

fn parent(rel: &str) -> &str {
    rel.rfind('/').map_or("", |i| &rel[..i])
}

fn child_of(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        format!("{dir}/{name}")
    }
}

fn join(project: &Utf8Path, rel: &str) -> Utf8PathBuf {
    if rel.is_empty() {
        project.to_owned()
    } else {
        project.join(rel)
    }
}

fn encode_header(header: &Header<'_>, project: &Utf8Path, how: &Fingerprinting) -> Option<Vec<u8>> {
    let system = &*how.system;
    if system
        .link_stamp(&header.work_dir.join(".gitmodules"))
        .is_some()
    {
        return None;
    }
    let mut out = Vec::with_capacity(4096);
    put_str(&mut out, "git-fingerprint-1");
    out.push(u8::from(header.committed_only));
    put_str(&mut out, header.head.as_deref().unwrap_or(""));
    match &header.base {
        Some((name, commit)) => {
            out.push(1);
            put_str(&mut out, name);
            put_str(&mut out, commit);
        }
        None => out.push(0),
    }
    for name in GIT_ENV {
        put_opt(&mut out, &system.env_var(name), |out, v| put_str(out, v));
    }
    let mut files: Vec<Utf8PathBuf> = Vec::new();
    for dir in [header.git_dir, header.common_dir] {
        for name in [
            "index",
            "config",
            "shallow",
            "info/exclude",
            "info/attributes",
            "info/grafts",
            "config.worktree",
        ] {
            files.push(dir.join(name));
        }
    }
    let home = system.env_var("HOME").filter(|h| !h.is_empty());
    let xdg = system
        .env_var("XDG_CONFIG_HOME")
        .filter(|x| !x.is_empty())
        .or_else(|| home.as_ref().map(|h| format!("{h}/.config")));
    if let Some(home) = &home {
        files.push(Utf8PathBuf::from(home).join(".gitconfig"));
    }
    if let Some(xdg) = &xdg {
        for name in ["git/config", "git/ignore", "git/attributes"] {
            files.push(Utf8PathBuf::from(xdg).join(name));
        }
    }
    files.push("/etc/gitconfig".into());
    // The rules above the project: from the repository's top down to the project's
    // parent (the project's own are files of the tree).
    if let Ok(rel) = project.strip_prefix(header.work_dir) {
        let mut dir = header.work_dir.to_owned();
        for component in std::iter::once("").chain(rel.components().map(|c| c.as_str())) {
            if !component.is_empty() {
                dir.push(component);
            }
            if dir == project {
                break;
            }
            files.push(dir.join(".gitignore"));
            files.push(dir.join(".gitattributes"));
        }
    }
    for file in &files {
        put_str(&mut out, file.as_str());
        match system.link_stamp(file) {
            Some(stamp) => {
                if !stamp.settled_before(how.started) {
                    return None;
                }
                out.push(1);
                put_stamp(&mut out, &stamp);
            }
            None => out.push(0),
        }
    }
    Some(out)
}

/// Walks the directory `rel` and everything below it into `tree`; `None` when some part
/// of it cannot be trusted (see [`take`]).
fn walk_into(project: &Utf8Path, rel: &str, how: &Fingerprinting, tree: &mut Tree) -> Option<()> {
    let system = &*how.system;
    // Each directory with its stamp as its parent's listing took it (the first's own).
    let mut stack = vec![(rel.to_owned(), None)];
    while let Some((rel, stamp)) = stack.pop() {
        let abs = join(project, &rel);
        let (entries, names) = list(system, &abs, how)?;
        tree.insert(rel.clone(), dir_entry(system, &abs, how, names, stamp)?);
        for (name, kind, stamp) in entries {
            let child = child_of(&rel, &name);
            if kind == EntryKind::Dir {
                stack.push((child, stamp));
            } else {
                let entry = leaf(system, &project.join(&child), &kind, how, stamp)?;
                tree.insert(child, entry);
            }
        }
    }
    Some(())
}

/// A directory's own entry: by its names when it holds the output, else its stamp
/// (`listed`, when its parent's listing took it).
fn dir_entry(
    system: &dyn System,
    abs: &Utf8Path,
    how: &Fingerprinting,
    names: Vec<String>,
    listed: Option<Stamp>,
) -> Option<Entry> {
    let output_dir = how.output.as_deref().and_then(Utf8Path::parent);
    if output_dir == Some(abs) {
        Some(Entry::Listed(names))
    } else {
        let stamp = listed.or_else(|| system.link_stamp(abs))?;
        Some(Entry::Dir(settled(how, stamp)?))
    }
}

/// The entry of a non-directory; `None` for what cannot be fingerprinted (a symlink to
/// a directory, a name that is not UTF-8) or an unsettled stamp.
fn leaf(
    system: &dyn System,
    path: &Utf8Path,
    kind: &EntryKind,
    how: &Fingerprinting,
    listed: Option<Stamp>,
) -> Option<Entry> {
    let own = || listed.or_else(|| system.link_stamp(path));
    match kind {
        EntryKind::Dir | EntryKind::Symlink { to_dir: true } | EntryKind::NotUtf8 => None,
        EntryKind::Symlink { to_dir: false } => {
            let own = settled(how, own()?)?;
            let target = match system.stamp(path) {
                Some(s) => Some(settled(how, s)?),
                None => None,
            };
            Some(Entry::Link(own, target))
        }
        EntryKind::File | EntryKind::Special { .. } => Some(Entry::File(settled(how, own()?)?)),
    }
}

fn settled(how: &Fingerprinting, stamp: Stamp) -> Option<Stamp> {
    stamp.settled_before(how.started).then_some(stamp)
}

/// A directory's entries that the fingerprint covers, each with its `lstat` stamp as
/// the listing took it, and their names.
type Listing = (Vec<(String, EntryKind, Option<Stamp>)>, Vec<String>);

/// The entries of `dir` that the fingerprint covers (everything but `.git` and what
/// the run writes), with their names.
fn list(system: &dyn System, dir: &Utf8Path, how: &Fingerprinting) -> Option<Listing> {
    let covered = |name: &str| {
        let path = dir.join(name);
        name != ".git"
            && !how.skip.iter().any(|s| path.starts_with(s))
            && how.output.as_deref() != Some(path.as_path())
    };
    let entries: Vec<(String, EntryKind, Option<Stamp>)> = system
        .read_dir_stamped(dir, &|e| covered(&e.name))
        .ok()?
        .into_iter()
        .filter(|(e, _)| covered(&e.name))
        .map(|(e, stamp)| (e.name, e.kind, stamp))
        .collect();
    let names = entries.iter().map(|(n, _, _)| n.clone()).collect();
    Some((entries, names))
}

/// The header (length-prefixed), then the tree in path order.
fn encode<'t>(
    head: &[u8],
    tree: impl IntoIterator<Item = (&'t String, &'t Entry), IntoIter: ExactSizeIterator>,
) -> Vec<u8> {
    let tree = tree.into_iter();
    let mut out = Vec::with_capacity(head.len() + tree.len() * 64);
    terraci_db::store::put_bytes(&mut out, head);
    put_u64(&mut out, tree.len() as u64);
    for (path, entry) in tree {
        put_str(&mut out, path);
        match entry {
            Entry::Dir(stamp) => {
                out.push(0);
                put_stamp(&mut out, stamp);
            }
            Entry::File(stamp) => {
                out.push(1);
                put_stamp(&mut out, stamp);
            }
            Entry::Link(stamp, target) => {
                out.push(2);
                put_stamp(&mut out, stamp);
                put_opt(&mut out, target, put_stamp);
            }
            Entry::Listed(names) => {
                out.push(3);
                put_u64(&mut out, names.len() as u64);
                for name in names {
                    put_str(&mut out, name);
                }
            }
        }
    }
    out
}

/// An encoded fingerprint's header and entries.
type Decoded = (Vec<u8>, Vec<(String, Entry)>);

/// The header and the entries of an encoded fingerprint.
fn decode(bytes: &[u8]) -> Option<Decoded> {
    let mut r = terraci_db::store::Reader::over(bytes);
    let body = (|| -> R<Decoded> {
        let head = r.bytes()?.to_vec();
        let n = r.len()?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let path = r.string()?;
            let entry = match r.u8()? {
                0 => Entry::Dir(r.stamp()?),
                1 => Entry::File(r.stamp()?),
                2 => {
                    let own = r.stamp()?;
                    Entry::Link(own, r.opt_with(|r| r.stamp())?)
                }
                3 => {
                    let count = r.len()?;
                    let mut names = Vec::with_capacity(count);
                    for _ in 0..count {
                        names.push(r.string()?);
                    }
                    Entry::Listed(names)
                }
                _ => return Err(()),
            };
            out.push((path, entry));
        }
        Ok((head, out))
    })();
    body.ok().filter(|_| r.at_end())
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    struct Scene {
        _tmp: tempfile::TempDir,
        root: Utf8PathBuf,
        git_dir: Utf8PathBuf,
    }

    impl Scene {
        fn new(files: &[&str]) -> Scene {
            let tmp = tempfile::tempdir().expect("tempdir");
            let root = Utf8PathBuf::from_path_buf(tmp.path().to_path_buf()).expect("utf-8");
            std::fs::create_dir_all(root.join(".git")).expect("git dir");
            let git_dir = root.join(".git");
            let scene = Scene {
                _tmp: tmp,
                root,
                git_dir,
            };
            for f in files {
                scene.write(f, "x\n");
            }
            scene
        }

        fn write(&self, rel: &str, text: &str) {
            let path = self.root.join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(path, text).expect("write");
        }

        fn header(&self) -> Header<'_> {
            Header {
                head: Some("h".into()),
                base: Some(("main".into(), "b".into())),
                committed_only: false,
                git_dir: &self.git_dir,
                common_dir: &self.git_dir,
                work_dir: &self.root,
            }
        }

        fn how(&self) -> Fingerprinting {
            Fingerprinting {
                system: std::sync::Arc::new(terraci_db::system::OsSystem),
                // Everything written so far has settled by then.
                started: std::time::SystemTime::now() + std::time::Duration::from_secs(10),
                skip: vec![self.root.join(".terraci/cache")],
                output: Some(self.root.join("pipeline.yml")),
            }
        }

        fn take(&self) -> Vec<u8> {
            take(&self.header(), &self.root, &self.how())
                .expect("a fingerprint")
                .0
        }

        fn check(&self, recorded: &[u8]) -> Check {
            check(&self.header(), &self.root, &self.how(), recorded)
        }
    }

    #[test]
    fn an_unchanged_tree_is_the_same_and_what_the_run_writes_is_left_out() {
        let s = Scene::new(&["a/main.tf", "a/b/vars.tf", ".github/ci.yml"]);
        let first = s.take();
        assert!(matches!(s.check(&first), Check::Same));
        // The output (in the project's directory) and the cache are the run's own.
        s.write("pipeline.yml", "jobs\n");
        s.write(".terraci/cache/run.bin", "record\n");
        let Check::Changed(Some(now), _, _) = s.check(&first) else {
            panic!("creating `.terraci` changes the project directory's names");
        };
        assert!(matches!(s.check(&now), Check::Same));
        s.write("pipeline.yml", "other jobs\n");
        s.write(".terraci/cache/run.bin", "another record\n");
        assert!(matches!(s.check(&now), Check::Same));
    }

    #[test]
    fn a_changed_tree_is_refingerprinted_as_a_full_walk_would() {
        let s = Scene::new(&[
            "a/main.tf",
            "a/b/vars.tf",
            "gone/x.tf",
            "gone/deep/y.tf",
            "file-then-dir",
            ".github/ci.yml",
        ]);
        let first = s.take();
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.write("a/main.tf", "edited\n");
        s.write("a/b/new.tf", "new\n");
        s.write("fresh/sub/z.tf", "z\n");
        s.write(".github/notes.md", "n\n");
        std::fs::remove_dir_all(s.root.join("gone")).expect("remove");
        std::fs::remove_file(s.root.join("file-then-dir")).expect("remove");
        s.write("file-then-dir/inside.tf", "i\n");
        let Check::Changed(Some(now), _, _) = s.check(&first) else {
            panic!("the tree changed");
        };
        assert_eq!(now, s.take(), "refreshed != walked");
        assert!(matches!(s.check(&now), Check::Same));
        // Each kind of change alone is seen.
        for change in [
            |s: &Scene| s.write("a/b/vars.tf", "edited\n"),
            |s: &Scene| s.write("fresh/other.md", "o\n"),
            |s: &Scene| std::fs::remove_file(s.root.join("fresh/sub/z.tf")).expect("rm"),
        ] {
            let before = s.take();
            std::thread::sleep(std::time::Duration::from_millis(20));
            change(&s);
            assert!(!matches!(s.check(&before), Check::Same));
        }
    }

    #[test]
    fn when_only_contents_changed_the_check_says_which_and_stamps_the_rest() {
        let s = Scene::new(&[
            "a/main.tf",
            "a/vars.tf",
            "b/main.tf",
            ".gitignore",
            "README.md",
        ]);
        let first = s.take();
        std::thread::sleep(std::time::Duration::from_millis(20));
        s.write("a/main.tf", "edited\n");
        s.write("README.md", "edited too\n");
        let Check::Changed(Some(now), Some(moved), _) = s.check(&first) else {
            panic!("only contents changed: a fingerprint and what moved");
        };
        assert_eq!(now, s.take(), "stamped in place != walked");
        assert_eq!(
            moved.changed().collect::<Vec<_>>(),
            ["README.md", "a/main.tf"]
        );
        let system = terraci_db::system::OsSystem;
        assert_eq!(
            moved.link_stamp("a/main.tf"),
            None,
            "a changed file is stamped again"
        );
        assert_eq!(
            moved.link_stamp("b/main.tf"),
            system.link_stamp(&s.root.join("b/main.tf"))
        );
        assert_eq!(moved.link_stamp("a"), None, "a directory is not a file");
        assert_eq!(moved.link_stamp("nowhere.tf"), None);
        // What changes the walk of the project is no such check.
        for change in [
            |s: &Scene| s.write(".gitignore", "b/\n"),
            |s: &Scene| s.write("a/new.tf", "new\n"),
            |s: &Scene| std::fs::remove_file(s.root.join("a/vars.tf")).expect("rm"),
        ] {
            let before = s.take();
            std::thread::sleep(std::time::Duration::from_millis(20));
            change(&s);
            let Check::Changed(Some(now), None, _) = s.check(&before) else {
                panic!("a change of the walk: refingerprinted, nothing moved");
            };
            assert_eq!(now, s.take());
        }
        // A file still being written: what moved, without a fingerprint to trust.
        let before = s.take();
        let mut how = s.how();
        how.started = std::time::SystemTime::now();
        s.write("b/main.tf", "just now\n");
        let Check::Changed(None, Some(moved), _) = check(&s.header(), &s.root, &how, &before)
        else {
            panic!("an unsettled changed file: no fingerprint, but what moved");
        };
        assert_eq!(moved.changed().collect::<Vec<_>>(), ["b/main.tf"]);
    }

    #[test]
    fn what_cannot_be_trusted_has_no_fingerprint() {
        let s = Scene::new(&["a/main.tf"]);
        let mut how = s.how();
        how.started = std::time::SystemTime::now();
        s.write("a/main.tf", "just now\n");
        assert!(
            take(&s.header(), &s.root, &how).is_none(),
            "an unsettled file"
        );
        let s = Scene::new(&["a/main.tf", ".gitmodules"]);
        assert!(take(&s.header(), &s.root, &s.how()).is_none(), "submodules");
        let s = Scene::new(&["a/main.tf"]);
        std::os::unix::fs::symlink(s.root.join("a"), s.root.join("link")).expect("symlink");
        assert!(
            take(&s.header(), &s.root, &s.how()).is_none(),
            "a linked directory"
        );
    }
}
