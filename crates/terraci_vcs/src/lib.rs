//! Change detection (spec §6): which files differ between the base of a change and the
//! working tree.
//!
//! Input: a [`ChangeRequest`] (project directory, base ref, CI environment). Output: a
//! [`ChangeSet`] of project-relative paths. Git is read in-process with gix; this runs
//! outside salsa queries and its result becomes an input, so any commit, checkout, index
//! or working-tree edit invalidates it and the caller simply runs it again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use camino::{Utf8Path, Utf8PathBuf};
use gix::bstr::{BStr, ByteSlice};
use gix::ObjectId;

mod commit;
mod fingerprint;
mod index;
pub use commit::CommitSystem;
use fingerprint::Tree;
pub use fingerprint::{Fingerprinting, Moved};
pub use index::{index_identities, IndexIdentities};

/// The environment variables that pick the base ref, in the order they are consulted.
pub const ENV_VARS: [&str; 2] = [MR_DIFF_BASE_SHA, GITHUB_BASE_REF];

const MR_DIFF_BASE_SHA: &str = "CI_MERGE_REQUEST_DIFF_BASE_SHA";
const GITHUB_BASE_REF: &str = "GITHUB_BASE_REF";

/// Base refs tried, in order, when nothing names one and `origin/HEAD` is missing.
const FALLBACK_REFS: [&str; 4] = ["origin/main", "origin/master", "main", "master"];
const ORIGIN_HEAD: &str = "refs/remotes/origin/HEAD";

/// What to compare: the project, the base to compare against and how much of the
/// working tree counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeRequest {
    /// Absolute path of the project; the repository may be this directory or any parent.
    pub project_dir: Utf8PathBuf,
    /// `--base-ref`: wins over everything else.
    pub base_ref: Option<String>,
    /// `--committed-only`: ignore staged, unstaged and untracked files.
    pub committed_only: bool,
    /// The CI variables of [`ENV_VARS`], as read by the caller; empty values count as unset.
    pub env: BTreeMap<String, String>,
}

/// The files that changed between the merge base of the base ref and HEAD, plus the
/// working tree unless only committed changes were asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangeSet {
    /// The base ref as it was chosen, e.g. `origin/main` or a commit id from CI.
    /// Empty when HEAD has no commit and nothing named a base.
    pub base: String,
    /// The commit the base ref resolved to (hex); empty when no base was found.
    pub base_commit: String,
    /// The merge base of the base commit and HEAD (hex); empty when HEAD has no commit.
    pub merge_base: String,
    /// Sorted, deduplicated paths relative to the project directory, `/`-separated.
    /// Deleted files are included, and a rename is both its old and its new path.
    pub changed_files: Vec<String>,
    /// The paths of `changed_files` that are submodules (a moved gitlink, or uncommitted
    /// changes inside the submodule's working tree).
    pub submodules: Vec<String>,
    /// What the answer depends on, when it could be taken ([`changed_files_unless`]).
    pub fingerprint: Option<Vec<u8>>,
}

/// Why the changed files could not be computed; each message says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum VcsError {
    #[error(
        "{path} is not inside a git repository ({reason}); --changed-only compares git \
         commits: run it in a clone, or run without --changed-only to plan every module"
    )]
    NotARepository { path: Utf8PathBuf, reason: String },
    #[error(
        "the git repository of {path} uses SHA-256 object ids (`extensions.objectFormat = \
         sha256`), which terraci cannot read; run without --changed-only to plan every \
         module, or use a SHA-1 clone"
    )]
    Sha256 { path: Utf8PathBuf },
    #[error(
        "the git index {path} cannot be read ({reason}); terraci reads it for staged and \
         unstaged changes. Rebuild it with `git read-tree HEAD` (your files are kept; \
         staged changes are unstaged)"
    )]
    CorruptIndex { path: String, reason: String },
    #[error(
        "unknown base ref: tried {} (from {origin}); pass an existing ref with --base-ref, \
         or {hint}",
        quote_list(tried)
    )]
    UnknownRef {
        /// Every ref looked up, in order.
        tried: Vec<String>,
        /// Where the ref(s) came from: `--base-ref`, an environment variable, or the defaults.
        origin: String,
        /// What to run to get the base, from the repository's remotes and the refs tried.
        hint: String,
    },
    #[error(
        "the merge base of `{base}` and HEAD is not in this shallow clone; run \
         `git fetch --unshallow` (GitLab CI: set `GIT_DEPTH: 0`; GitHub Actions: \
         `fetch-depth: 0` in actions/checkout)"
    )]
    ShallowClone { base: String },
    #[error("git: {0}")]
    Git(String),
}

/// An error and its causes, outermost first.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> Vec<String> {
    std::iter::successors(Some(err), |e| e.source())
        .map(ToString::to_string)
        .collect()
}

fn quote_list(items: &[String]) -> String {
    items
        .iter()
        .map(|item| format!("`{item}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Wraps a gix error with what we were doing; `{:#}` keeps gix's cause chain on one line.
fn git_err<E: std::fmt::Display>(context: &str) -> impl FnOnce(E) -> VcsError + '_ {
    move |err| VcsError::Git(format!("{context}: {err:#}"))
}

/// The commit checked out in the repository holding `project_dir` (hex), if any: what
/// `local-exec`'s plans record in `plan.result.json`.
pub fn checked_out_commit(project_dir: &Utf8Path) -> Option<String> {
    let repo = gix::discover(project_dir.as_std_path()).ok()?;
    let id = head_commit(&repo).ok()??;
    Some(id.to_hex().to_string())
}

/// Which of `files` (each below `project_dir`) git tracks: those the index of the
/// repository holding `project_dir` lists. A file a merge request committed is its
/// author's, not terraci's: the fact cache never trusts one (docs/security.md). Empty
/// outside a repository or when the index cannot be read.
pub fn tracked_files(project_dir: &Utf8Path, files: &[Utf8PathBuf]) -> Vec<Utf8PathBuf> {
    let Ok(repo) = gix::discover(project_dir.as_std_path()) else {
        return Vec::new();
    };
    let Ok(prefix) = project_prefix(&repo, project_dir) else {
        return Vec::new();
    };
    let Ok(index) = repo.index_or_empty() else {
        return Vec::new();
    };
    files
        .iter()
        .filter(|file| {
            let Ok(relative) = file.strip_prefix(project_dir) else {
                return false;
            };
            let path = if prefix.is_empty() {
                relative.as_str().to_owned()
            } else {
                format!("{prefix}/{relative}")
            };
            index.entry_by_path(path.as_str().into()).is_some()
        })
        .cloned()
        .collect()
}

/// Computes the changed files of `req` (spec §6).
pub fn changed_files(req: &ChangeRequest) -> Result<ChangeSet, VcsError> {
    Opened::open(req)?.change_set(req, None)
}

/// What [`changed_files_unless`] found.
#[derive(Debug)]
pub enum Answer {
    /// The repository's fingerprint is the expected one: the change set recorded with
    /// it is still git's answer, and git was not asked.
    Unchanged,
    Changed(ChangeSet),
}

/// What the fingerprint check found, as soon as it found it: the main thread waits for
/// this, not for git's answer, to decide whether to walk the project.
#[derive(Debug, Clone)]
pub enum Verdict {
    /// The recorded fingerprint is the repository's.
    Same,
    /// Only files' contents changed ([`Moved`]).
    Moved(std::sync::Arc<Moved>),
    /// Anything else (no fingerprint expected, one that could not be checked, a changed
    /// directory or git state).
    Other,
}

/// [`changed_files`], unless the repository's fingerprint is `expected`; the change
/// set carries the fingerprint taken before git computed it ([`fingerprint`]). `verdict`
/// is told what the fingerprint check found before git is asked (nothing when opening
/// the repository failed).
pub fn changed_files_unless(
    req: &ChangeRequest,
    how: &Fingerprinting,
    expected: Option<(&[u8], &[String])>,
    verdict: &mut dyn FnMut(Verdict),
) -> Result<Answer, VcsError> {
    let opened = Opened::open(req)?;
    // Taken before git looks: a change after this point leaves a newer stamp than the
    // fingerprint holds.
    let mut told = Verdict::Other;
    // The tree the fingerprint walked, when it did: it may show the work tree clean.
    let mut walked = None;
    let fingerprint = opened.header(req).and_then(|header| match expected {
        Some((expected, _)) => match fingerprint::check(&header, &req.project_dir, how, expected) {
            fingerprint::Check::Same => {
                told = Verdict::Same;
                Some(None)
            }
            fingerprint::Check::Changed(now, moved, tree) => {
                if let Some(moved) = moved {
                    told = Verdict::Moved(std::sync::Arc::new(moved));
                }
                walked = tree;
                now.map(Some)
            }
        },
        None => fingerprint::take(&header, &req.project_dir, how).map(|(now, tree)| {
            walked = Some(tree);
            Some(now)
        }),
    });
    let moved = match &told {
        Verdict::Moved(moved) => Some(moved.clone()),
        _ => None,
    };
    verdict(told);
    // (Also when the fingerprint now cannot be trusted, say a changed file is still
    // being written: what moved is measured against the recorded one.)
    if let (Some(moved), Some((_, recorded))) = (moved, expected) {
        let changed: Vec<&str> = moved.changed().collect();
        if changed.len() <= MOVED_STATUS_LIMIT {
            return opened
                .change_set_moved(req, fingerprint.flatten(), &changed, recorded)
                .map(Answer::Changed);
        }
    }
    match fingerprint {
        Some(None) => Ok(Answer::Unchanged),
        Some(Some(now)) => {
            // Only a tree walked for this fingerprint (settled, before git looked) counts.
            let clean = !req.committed_only
                && walked.is_some_and(|tree| opened.clean_below_project(req, how, &tree));
            opened
                .change_set_with(req, Some(now), clean)
                .map(Answer::Changed)
        }
        None => opened.change_set(req, None).map(Answer::Changed),
    }
}

/// A repository opened for a request, with HEAD and the base resolved.
struct Opened {
    repo: gix::Repository,
    prefix: String,
    head: Option<ObjectId>,
    /// `None`: nothing is committed and no base was named or found.
    base: Option<Base>,
}

impl Opened {
    fn open(req: &ChangeRequest) -> Result<Opened, VcsError> {
        let mut repo = gix::discover(req.project_dir.as_std_path()).map_err(|err| {
            let chain = error_chain(&err);
            if chain.iter().any(|m| m.contains("extensions.objectFormat")) {
                VcsError::Sha256 {
                    path: req.project_dir.clone(),
                }
            } else {
                VcsError::NotARepository {
                    path: req.project_dir.clone(),
                    reason: chain.join(": "),
                }
            }
        })?;
        strict_stat(&mut repo)?;
        let prefix = project_prefix(&repo, &req.project_dir)?;
        let head = head_commit(&repo)?;
        let base = match head {
            Some(_) => Some(resolve_base(&repo, req)?),
            // Nothing is committed yet, so there is no history to compare; the base is
            // still reported when one exists, and an explicitly named one must exist.
            None => match resolve_base(&repo, req) {
                Ok(base) => Some(base),
                Err(VcsError::UnknownRef { .. }) if base_origin(req).0.is_none() => None,
                Err(err) => return Err(err),
            },
        };
        Ok(Opened {
            repo,
            prefix,
            head,
            base,
        })
    }

    /// What the fingerprint holds besides the tree; `None` for a repository without a
    /// working tree or with paths that are not UTF-8.
    fn header(&self, req: &ChangeRequest) -> Option<fingerprint::Header<'_>> {
        Some(fingerprint::Header {
            head: self.head.map(|id| id.to_string()),
            base: self
                .base
                .as_ref()
                .map(|b| (b.name.clone(), b.commit.to_string())),
            committed_only: req.committed_only,
            git_dir: Utf8Path::from_path(self.repo.git_dir())?,
            common_dir: Utf8Path::from_path(self.repo.common_dir())?,
            work_dir: Utf8Path::from_path(self.repo.workdir()?)?,
        })
    }

    /// The change set; `fingerprint` was taken before it (see [`changed_files_unless`]).
    fn change_set(
        self,
        req: &ChangeRequest,
        fingerprint: Option<Vec<u8>>,
    ) -> Result<ChangeSet, VcsError> {
        self.change_set_with(req, fingerprint, false)
    }

    /// [`Opened::change_set`]; with `clean`, the work tree below the project is known
    /// to hold what the index and HEAD do ([`Opened::clean_below_project`]) and git's
    /// status of it is not asked.
    fn change_set_with(
        self,
        req: &ChangeRequest,
        fingerprint: Option<Vec<u8>>,
        clean: bool,
    ) -> Result<ChangeSet, VcsError> {
        let repo = &self.repo;
        // A damaged index is named here rather than as a failure of whichever step of
        // the status met it first; the commits' diff does not read it, and neither
        // does a change set of commits alone.
        if !req.committed_only {
            if let Err(err) = repo.index_or_empty() {
                return Err(VcsError::CorruptIndex {
                    path: repo.index_path().display().to_string(),
                    reason: error_chain(&err).join(": "),
                });
            }
        }
        let mut paths = Paths::default();
        let (base, base_commit, merge_base) = self.committed(&mut paths)?;
        if !req.committed_only && !clean {
            worktree_changes(repo, &mut paths)?;
        }

        let rebased = |set: &BTreeSet<String>| {
            set.iter()
                .filter_map(|path| rebase(path, &self.prefix))
                .collect()
        };
        Ok(ChangeSet {
            base,
            base_commit,
            merge_base,
            changed_files: rebased(&paths.files),
            submodules: rebased(&paths.submodules),
            fingerprint,
        })
    }
}

/// At most this many changed files are asked about one by one after a fingerprint check
/// that found only files' contents moved; with more, git's whole status is asked.
const MOVED_STATUS_LIMIT: usize = 256;

impl Opened {
    /// Adds the paths the commits since the merge base changed; the base's name, its
    /// commit and the merge base (empty where there is none).
    fn committed(&self, paths: &mut Paths) -> Result<(String, String, String), VcsError> {
        Ok(match (self.head, &self.base) {
            (Some(head), Some(base)) => {
                let merge_base = merge_base(&self.repo, base, head)?;
                diff_commits(&self.repo, merge_base, head, paths)?;
                (
                    base.name.clone(),
                    base.commit.to_string(),
                    merge_base.to_string(),
                )
            }
            (None, Some(base)) => (base.name.clone(), base.commit.to_string(), String::new()),
            (_, None) => (String::new(), String::new(), String::new()),
        })
    }

    /// The change set after a fingerprint check that found only the contents of the
    /// files `changed` (project-relative) moved since the fingerprint `recorded` (the
    /// change set then) was taken with: HEAD, the base, the index, the rules and every
    /// other entry of the tree are as they were then, so git's answer for every other
    /// path is the recorded one. Each changed path is in the set when the commits since
    /// the merge base touched it or the status of just those paths lists it. With
    /// staged changes (whose comparison with HEAD is not cheap to restrict), git's
    /// whole answer is asked.
    fn change_set_moved(
        self,
        req: &ChangeRequest,
        fingerprint: Option<Vec<u8>>,
        changed: &[&str],
        recorded: &[String],
    ) -> Result<ChangeSet, VcsError> {
        if req.committed_only || !index_matches_head(&self.repo)? {
            return self.change_set(req, fingerprint);
        }
        let repo = &self.repo;
        let mut paths = Paths::default();
        let (base, base_commit, merge_base) = self.committed(&mut paths)?;
        let in_repo = |rel: &str| {
            if self.prefix.is_empty() {
                rel.to_owned()
            } else {
                format!("{}/{rel}", self.prefix)
            }
        };
        // Literal, from the top of the work tree: a path is never a glob, whatever the
        // current directory.
        let patterns: Vec<gix::bstr::BString> = changed
            .iter()
            .map(|rel| format!(":(top,literal){}", in_repo(rel)).into())
            .collect();
        worktree_status(repo, patterns, &mut paths)?;
        let changed_in_repo: BTreeSet<String> = changed.iter().map(|rel| in_repo(rel)).collect();
        let mut files: BTreeSet<String> = recorded
            .iter()
            .filter(|path| !changed.contains(&path.as_str()))
            .cloned()
            .collect();
        files.extend(
            paths
                .files
                .iter()
                .filter(|path| changed_in_repo.contains(*path))
                .filter_map(|path| rebase(path, &self.prefix)),
        );
        Ok(ChangeSet {
            base,
            base_commit,
            merge_base,
            changed_files: files.into_iter().collect(),
            submodules: Vec::new(),
            fingerprint,
        })
    }
}

impl Opened {
    /// Whether git's status would find nothing below the project, told from the tree the
    /// fingerprint just walked (every entry below the project but `.git` and what the run
    /// writes, each with a stamp that settled before the run began, taken before git is
    /// asked) and the index, so that a fresh clone is not walked a second time:
    /// - the index holds exactly HEAD's tree ([`index_matches_head`]): nothing is staged;
    /// - every index entry below the project is one whose stat data git trusts to vouch
    ///   for its file ([`index::trusted`]: a regular file, not racy, ...) and that stat
    ///   data is the stamp the walk found: git's own test, the file is clean unread;
    /// - every file the walk found is one of those entries: nothing is untracked (nor
    ///   ignored: telling those apart takes git's rules, and any doubt asks git);
    /// - the output file the walk leaves out is not there (a leftover is untracked).
    ///
    /// Anything else (a racy entry, a symlink, a submodule, a conflict, a file written
    /// since checkout) asks git's status, as without the walk.
    fn clean_below_project(&self, req: &ChangeRequest, how: &Fingerprinting, tree: &Tree) -> bool {
        if let Some(output) = &how.output {
            if output.starts_with(&req.project_dir) && how.system.link_stamp(output).is_some() {
                return false;
            }
        }
        if !index_matches_head(&self.repo).unwrap_or(false) {
            return false;
        }
        let Ok(index) = self.repo.index_or_empty() else {
            return false;
        };
        let mut vouched = 0usize;
        for entry in index.entries() {
            let Ok(path) = std::str::from_utf8(entry.path(&index)) else {
                return false;
            };
            let Some(rel) = rebase(path, &self.prefix) else {
                continue;
            };
            let Some(fingerprint::Entry::File(stamp)) = tree.get(&rel) else {
                return false;
            };
            if !index::trusted(entry, &index)
                || !entry
                    .stat
                    .matches(&index::stat_of(stamp, &entry.stat), index::COMPARE)
            {
                return false;
            }
            vouched += 1;
        }
        let files = tree
            .values()
            .filter(|e| {
                !matches!(
                    e,
                    fingerprint::Entry::Dir(_) | fingerprint::Entry::Listed(_)
                )
            })
            .count();
        files == vouched
    }
}

/// Makes the status compare every stat field the index records (nanoseconds of the
/// modification and change times, inode, device, size) against the working tree,
/// whatever the repository's config says: a file whose stat differs from its index
/// entry is hashed, so a same-length edit with its modification time put back is still
/// a change. A file whose stat matches is taken as unchanged without reading it (git's
/// own rule, with its check for entries written in the same instant as the index).
fn strict_stat(repo: &mut gix::Repository) -> Result<(), VcsError> {
    use gix::config::tree::{gitoxide, Core};
    let mut config = repo.config_snapshot_mut();
    for (key, value) in [
        (
            &Core::TRUST_C_TIME as &'static dyn gix::config::tree::Key,
            "true",
        ),
        (&Core::CHECK_STAT, "default"),
        (&gitoxide::Core::USE_NSEC, "true"),
    ] {
        config
            .set_value(key, value)
            .map_err(|e| VcsError::Git(format!("cannot configure the status: {e}")))?;
    }
    config
        .commit()
        .map_err(|e| VcsError::Git(format!("cannot configure the status: {e}")))?;
    Ok(())
}

/// The project directory relative to the repository work tree, `/`-separated, empty when
/// they are the same directory.
fn project_prefix(repo: &gix::Repository, project_dir: &Utf8Path) -> Result<String, VcsError> {
    let workdir = repo.workdir().ok_or_else(|| {
        VcsError::Git(format!(
            "the repository at {} has no working tree",
            repo.git_dir().display()
        ))
    })?;
    // Both sides are canonicalised: a symlinked temp dir or a `..` would otherwise make a
    // project inside the repository look like it is outside.
    let canonical = |path: &Path| {
        std::fs::canonicalize(path)
            .map_err(|err| VcsError::Git(format!("cannot resolve {}: {err}", path.display())))
    };
    let workdir = canonical(workdir)?;
    let project = canonical(project_dir.as_std_path())?;
    let relative = project.strip_prefix(&workdir).map_err(|_| {
        VcsError::Git(format!(
            "{project_dir} is outside the working tree {}",
            workdir.display()
        ))
    })?;
    let parts: Vec<&str> = relative
        .components()
        .map(|part| {
            part.as_os_str()
                .to_str()
                .ok_or_else(|| VcsError::Git(format!("{project_dir} has a path that is not UTF-8")))
        })
        .collect::<Result<_, _>>()?;
    Ok(parts.join("/"))
}

/// Maps a repository-relative path onto the project directory, dropping paths outside it.
fn rebase(path: &str, prefix: &str) -> Option<String> {
    if prefix.is_empty() {
        return Some(path.to_owned());
    }
    path.strip_prefix(prefix)?
        .strip_prefix('/')
        .map(str::to_owned)
}

/// The commit HEAD points at, `None` on an unborn branch. A detached HEAD is fine.
fn head_commit(repo: &gix::Repository) -> Result<Option<ObjectId>, VcsError> {
    let mut head = repo.head().map_err(git_err("cannot read HEAD"))?;
    let id = head
        .try_peel_to_id()
        .map_err(git_err("cannot resolve HEAD"))?;
    Ok(id.map(|id| id.detach()))
}

/// The base ref as chosen and the commit it resolves to.
struct Base {
    name: String,
    commit: ObjectId,
}

/// Where the fallback refs come from, as the error names it: the refs themselves are
/// listed in `tried`.
const DEFAULTS: &str =
    "the defaults, as none of --base-ref, CI_MERGE_REQUEST_DIFF_BASE_SHA, GITHUB_BASE_REF is set";

/// The explicitly named base ref and where it came from, or `None` and [`DEFAULTS`].
fn base_origin(req: &ChangeRequest) -> (Option<String>, &'static str) {
    let env = |key: &str| {
        req.env
            .get(key)
            .map(|value| value.trim())
            .filter(|value| !value.is_empty())
    };
    if let Some(name) = req.base_ref.as_deref().filter(|name| !name.is_empty()) {
        (Some(name.to_owned()), "--base-ref")
    } else if let Some(sha) = env(MR_DIFF_BASE_SHA) {
        (Some(sha.to_owned()), MR_DIFF_BASE_SHA)
    } else if let Some(branch) = env(GITHUB_BASE_REF) {
        (Some(format!("origin/{branch}")), GITHUB_BASE_REF)
    } else {
        (None, DEFAULTS)
    }
}

fn resolve_base(repo: &gix::Repository, req: &ChangeRequest) -> Result<Base, VcsError> {
    let (named, origin) = base_origin(req);
    if let Some(name) = named {
        return match resolve_commit(repo, &name) {
            Some(commit) => Ok(Base { name, commit }),
            // A CI-provided commit that is missing is almost always a too-shallow fetch.
            None if is_hex_id(&name) && is_shallow(repo) => {
                Err(VcsError::ShallowClone { base: name })
            }
            None => Err(VcsError::UnknownRef {
                hint: fetch_hint(repo, &name, false),
                tried: vec![name],
                origin: origin.to_owned(),
            }),
        };
    }

    let mut tried = Vec::new();
    if let Some(base) = origin_head(repo, &mut tried) {
        return Ok(base);
    }
    for name in FALLBACK_REFS {
        tried.push(name.to_owned());
        if let Some(commit) = resolve_commit(repo, name) {
            return Ok(Base {
                name: name.to_owned(),
                commit,
            });
        }
    }
    Err(VcsError::UnknownRef {
        hint: fetch_hint(repo, "origin/HEAD", true),
        tried,
        origin: origin.to_owned(),
    })
}

/// What to run so that the base `name` exists, from the repository's own remotes.
/// `defaults`: no base was named, so the remote's default branch is what is missing.
fn fetch_hint(repo: &gix::Repository, name: &str, defaults: bool) -> String {
    let remotes: Vec<String> = repo
        .remote_names()
        .iter()
        .map(|r| r.to_str_lossy().into_owned())
        .collect();
    let Some(first) = remotes.iter().find(|r| *r == "origin").or(remotes.first()) else {
        return "create it (this repository has no remote to fetch it from)".to_owned();
    };
    if defaults {
        if remotes.iter().any(|r| r == "origin") {
            return "fetch the remote's default branch: `git fetch origin && git remote \
                    set-head origin --auto` (sets `origin/HEAD`)"
                .to_owned();
        }
        return format!(
            "name a branch of `{first}` (this repository has no remote `origin`): \
             `git fetch {first} <branch>` and `--base-ref {first}/<branch>`"
        );
    }
    if let Some((remote, branch)) = name.split_once('/') {
        if remotes.iter().any(|r| r == remote) {
            return format!("fetch it: `git fetch {remote} {branch}`");
        }
        if remote == "origin" {
            return format!(
                "fetch it from another remote, as this repository has no remote `origin` \
                 (remotes: {}): `git fetch {first} {branch}` and `--base-ref {first}/{branch}`",
                quote_list(&remotes)
            );
        }
    }
    if is_hex_id(name) {
        return format!("fetch the commit: `git fetch {first} {name}`");
    }
    format!("fetch it: `git fetch {first} {name}` and pass `--base-ref {first}/{name}`")
}

/// The branch `origin/HEAD` points at (`git clone` sets it to the remote's default
/// branch), named by its short form, e.g. `origin/main`.
fn origin_head(repo: &gix::Repository, tried: &mut Vec<String>) -> Option<Base> {
    tried.push("origin/HEAD".to_owned());
    let reference = repo.try_find_reference(ORIGIN_HEAD).ok()??;
    let name = match reference.target().try_name() {
        Some(target) => target.shorten().to_str_lossy().into_owned(),
        None => "origin/HEAD".to_owned(),
    };
    let commit = resolve_commit(repo, ORIGIN_HEAD)?;
    Some(Base { name, commit })
}

/// The commit `spec` names (a ref, a commit id or any rev-spec), peeling tags.
fn resolve_commit(repo: &gix::Repository, spec: &str) -> Option<ObjectId> {
    let id = repo.rev_parse_single(spec).ok()?;
    let commit = id.object().ok()?.peel_to_commit().ok()?;
    Some(commit.id)
}

fn is_hex_id(name: &str) -> bool {
    name.len() >= 7 && name.bytes().all(|byte| byte.is_ascii_hexdigit())
}

fn is_shallow(repo: &gix::Repository) -> bool {
    repo.is_shallow().unwrap_or(false)
}

fn merge_base(repo: &gix::Repository, base: &Base, head: ObjectId) -> Result<ObjectId, VcsError> {
    let shallow = || VcsError::ShallowClone {
        base: base.name.clone(),
    };
    match repo.merge_base(base.commit, head) {
        Ok(Some(id)) => Ok(id.detach()),
        // In a shallow clone the walk stops (or fails on a missing parent) at the
        // boundary, so a missing merge base there means missing history.
        Ok(None) | Err(_) if is_shallow(repo) => Err(shallow()),
        Ok(None) => Err(VcsError::Git(format!(
            "`{}` and HEAD have no common history",
            base.name
        ))),
        Err(err) => Err(git_err("cannot compute the merge base")(err)),
    }
}

/// Adds every path that differs between the trees of `old` and `new`. Rename tracking is
/// off: a rename is a deletion plus an addition, and both paths matter.
fn diff_commits(
    repo: &gix::Repository,
    old: ObjectId,
    new: ObjectId,
    paths: &mut Paths,
) -> Result<(), VcsError> {
    let tree_of = |id: ObjectId| {
        repo.find_commit(id)
            .and_then(|commit| commit.tree())
            .map_err(git_err("cannot read a commit tree"))
    };
    let (old_tree, new_tree) = (tree_of(old)?, tree_of(new)?);
    // The trees' own diff (renames are not tracked: a rename is the two paths it
    // changes), which needs no index; the diff with rewrites would read it for the
    // attributes of blobs it never compares.
    let mut recorder = gix::diff::tree::Recorder::default();
    gix::diff::tree(
        gix::objs::TreeRefIter::from_bytes(&old_tree.data, old_tree.id.kind()),
        gix::objs::TreeRefIter::from_bytes(&new_tree.data, new_tree.id.kind()),
        &mut gix::diff::tree::State::default(),
        &repo.objects,
        &mut recorder,
    )
    .map_err(git_err("cannot diff the merge base against HEAD"))?;
    for change in recorder.records {
        use gix::diff::tree::recorder::Change;
        // Directory entries show up next to the files inside them; only the files count,
        // but a file that became a directory (or the reverse) is a changed path too.
        match change {
            Change::Addition {
                path, entry_mode, ..
            }
            | Change::Deletion {
                path, entry_mode, ..
            } => {
                if entry_mode.is_commit() {
                    paths.submodule(path.as_ref());
                } else if !entry_mode.is_tree() {
                    paths.insert(path.as_ref());
                }
            }
            Change::Modification {
                path,
                previous_entry_mode,
                entry_mode,
                ..
            } => {
                if previous_entry_mode.is_commit() || entry_mode.is_commit() {
                    paths.submodule(path.as_ref());
                } else if !(previous_entry_mode.is_tree() && entry_mode.is_tree()) {
                    paths.insert(path.as_ref());
                }
            }
        }
    }
    Ok(())
}

/// Adds staged (HEAD vs index), unstaged (index vs working tree) and untracked, not
/// ignored files.
fn worktree_changes(repo: &gix::Repository, paths: &mut Paths) -> Result<(), VcsError> {
    if index_matches_head(repo)? {
        // Nothing is staged: only the working tree is compared with the index.
        return worktree_status(repo, Vec::new(), paths);
    }
    let failed = git_err("cannot read the working tree status");
    for item in status(repo)?.into_iter(Vec::new()).map_err(failed)? {
        let item = item.map_err(git_err("cannot read the working tree status"))?;
        worktree_item(&item, paths);
    }
    Ok(())
}

/// The working tree compared with the index, for the paths `patterns` match (every path
/// when there are none).
fn worktree_status(
    repo: &gix::Repository,
    patterns: Vec<gix::bstr::BString>,
    paths: &mut Paths,
) -> Result<(), VcsError> {
    use gix::status::Item;

    let failed = git_err("cannot read the working tree status");
    for item in status(repo)?
        .into_index_worktree_iter(patterns)
        .map_err(failed)?
    {
        let item = item.map_err(git_err("cannot read the working tree status"))?;
        worktree_item(&Item::IndexWorktree(item), paths);
    }
    Ok(())
}

/// The status as `--changed-only` asks for it.
fn status(
    repo: &gix::Repository,
) -> Result<gix::status::Platform<'_, gix::progress::Discard>, VcsError> {
    use gix::status::tree_index::TrackRenames;

    // Every untracked file is listed one by one, whatever `status.showUntrackedFiles` says.
    let dirwalk = repo
        .dirwalk_options()
        .map_err(git_err("cannot configure the directory walk"))?
        .emit_untracked(gix::dir::walk::EmissionMode::Matching);
    Ok(repo
        .status(gix::progress::Discard)
        .map_err(git_err("cannot read the working tree status"))?
        // A submodule whose checkout moved, or that holds modified or untracked files,
        // is a change of its path (its files are not listed one by one).
        .index_worktree_submodules(gix::status::Submodule::Given {
            ignore: gix::submodule::config::Ignore::None,
            check_dirty: true,
        })
        .index_worktree_rewrites(None)
        .tree_index_track_renames(TrackRenames::Disabled)
        .index_worktree_options_mut(|options| options.dirwalk_options = Some(dirwalk)))
}

/// Whether the index holds exactly HEAD's tree, by its cache-tree extension (which git
/// keeps for `git commit`, and invalidates along the path of every entry staged since):
/// a valid root entry naming HEAD's tree and covering every entry. Then the comparison
/// of HEAD's tree with the index, which reads every tree object of the commit, can find
/// nothing. Anything else (no extension, an invalidated root, another count) compares
/// them.
fn index_matches_head(repo: &gix::Repository) -> Result<bool, VcsError> {
    let index = repo
        .index_or_empty()
        .map_err(git_err("cannot read the index"))?;
    let head_tree = repo
        .head_tree_id_or_empty()
        .map_err(git_err("cannot read the tree of HEAD"))?
        .detach();
    Ok(index.tree().is_some_and(|root| {
        root.id == head_tree
            && root
                .num_entries
                .is_some_and(|n| n as usize == index.entries().len())
    }))
}

/// Adds the paths of one status item.
fn worktree_item(item: &gix::status::Item, paths: &mut Paths) {
    use gix::status::{index_worktree, Item};
    {
        match item {
            Item::TreeIndex(change) => {
                if let gix::diff::index::ChangeRef::Rewrite {
                    source_location, ..
                } = change
                {
                    paths.insert(source_location.as_ref());
                }
                if change.entry_mode() == gix::index::entry::Mode::COMMIT {
                    paths.submodule(change.location());
                } else {
                    paths.insert(change.location());
                }
            }
            Item::IndexWorktree(index_worktree::Item::Modification { status, .. }) => {
                use gix::status::plumbing::index_as_worktree::{Change, EntryStatus};
                match status {
                    // Only the file's stat changed, not its content.
                    EntryStatus::NeedsUpdate(_) => {}
                    EntryStatus::Change(Change::SubmoduleModification(_)) => {
                        paths.submodule(item.location());
                    }
                    _ => paths.insert(item.location()),
                }
            }
            Item::IndexWorktree(index_worktree::Item::DirectoryContents { entry, .. }) => {
                if entry.status == gix::dir::entry::Status::Untracked {
                    paths.insert(entry.rela_path.as_ref());
                }
            }
            Item::IndexWorktree(index_worktree::Item::Rewrite {
                source,
                dirwalk_entry,
                ..
            }) => {
                paths.insert(source.rela_path());
                paths.insert(dirwalk_entry.rela_path.as_ref());
            }
        }
    }
}

/// Changed paths relative to the repository, and which of them are submodules.
#[derive(Default)]
struct Paths {
    files: BTreeSet<String>,
    submodules: BTreeSet<String>,
}

impl Paths {
    fn insert(&mut self, path: &BStr) {
        // Non-UTF-8 names cannot match a module path; lossy is enough to still report them.
        self.files.insert(path.to_str_lossy().into_owned());
    }

    fn submodule(&mut self, path: &BStr) {
        self.insert(path);
        self.submodules.insert(path.to_str_lossy().into_owned());
    }
}

/// The root of the git work tree holding `project` (the nearest directory at or above it
/// with a `.git`), else `project` itself: filesystem functions read inside it.
pub fn repository_root(system: &dyn terraci_db::system::System, project: &Utf8Path) -> Utf8PathBuf {
    project
        .ancestors()
        .find(|dir| {
            let git = dir.join(".git");
            system.is_dir(&git) || system.is_file(&git)
        })
        .unwrap_or(project)
        .to_owned()
}

#[cfg(test)]
#[allow(clippy::disallowed_methods)]
mod tests {
    use std::process::Command;

    use super::*;

    /// A throwaway repository driven by the `git` CLI; the code under test only uses gix.
    struct Repo {
        _tmp: tempfile::TempDir,
        root: Utf8PathBuf,
    }

    impl Repo {
        /// A repository on `main` with one commit holding `files`.
        fn new(files: &[(&str, &str)]) -> Self {
            let repo = Self::empty();
            repo.write_all(files);
            repo.commit_all("initial");
            repo
        }

        fn empty() -> Self {
            let tmp = tempfile::tempdir().expect("temp dir");
            let root = Utf8PathBuf::from_path_buf(tmp.path().join("repo")).expect("utf-8 temp dir");
            std::fs::create_dir(&root).expect("create repo dir");
            git(&root, &["init", "-q"]);
            Self { _tmp: tmp, root }
        }

        /// A sibling directory of the repository, for remotes and clones.
        fn sibling(&self, name: &str) -> Utf8PathBuf {
            self.root.parent().expect("repo has a parent").join(name)
        }

        fn git(&self, args: &[&str]) -> String {
            git(&self.root, args)
        }

        fn write(&self, path: &str, content: &str) {
            let path = self.root.join(path);
            std::fs::create_dir_all(path.parent().expect("file has a parent")).expect("mkdir");
            std::fs::write(path, content).expect("write file");
        }

        fn write_all(&self, files: &[(&str, &str)]) {
            for (path, content) in files {
                self.write(path, content);
            }
        }

        fn commit_all(&self, message: &str) -> String {
            self.git(&["add", "-A"]);
            self.git(&["commit", "-q", "-m", message]);
            self.rev("HEAD")
        }

        fn rev(&self, spec: &str) -> String {
            self.git(&["rev-parse", spec])
        }

        fn request(&self) -> ChangeRequest {
            ChangeRequest {
                project_dir: self.root.clone(),
                base_ref: None,
                committed_only: false,
                env: BTreeMap::new(),
            }
        }

        fn changes(&self, base_ref: &str) -> Vec<String> {
            let req = ChangeRequest {
                base_ref: Some(base_ref.to_owned()),
                ..self.request()
            };
            changed(&req)
        }

        fn committed(&self, base_ref: &str) -> Vec<String> {
            let req = ChangeRequest {
                base_ref: Some(base_ref.to_owned()),
                committed_only: true,
                ..self.request()
            };
            changed(&req)
        }
    }

    fn git(dir: &Utf8Path, args: &[&str]) -> String {
        let output = Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "init.defaultBranch=main",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_AUTHOR_NAME", "Test")
            .env("GIT_AUTHOR_EMAIL", "test@example.com")
            .env("GIT_COMMITTER_NAME", "Test")
            .env("GIT_COMMITTER_EMAIL", "test@example.com")
            .output()
            .expect("run git");
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .expect("utf-8 git output")
            .trim()
            .to_owned()
    }

    /// Fingerprinting on the real system for a run that began after everything the test
    /// writes had settled, writing `output`.
    fn settled_fingerprinting(output: Option<Utf8PathBuf>) -> Fingerprinting {
        Fingerprinting {
            system: std::sync::Arc::new(terraci_db::system::OsSystem),
            started: std::time::SystemTime::now() + std::time::Duration::from_secs(60),
            skip: Vec::new(),
            output,
        }
    }

    fn changed(req: &ChangeRequest) -> Vec<String> {
        changed_files(req).expect("changed files").changed_files
    }

    const BASE_FILES: &[(&str, &str)] = &[
        (".gitignore", "*.tfstate\n.terraform/\n"),
        ("vpc/main.tf", "# vpc\n"),
        ("vpc/vars.tf", "# vars\n"),
        ("eks/main.tf", "# eks\n"),
        ("rds/main.tf", "# rds\n"),
    ];

    #[test]
    fn after_only_contents_moved_the_answer_is_gits_whole_answer() {
        let repo = Repo::new(&[
            ("a/main.tf", "a\n"),
            ("b/main.tf", "b\n"),
            ("c/main.tf", "c\n"),
            ("d/a.tf", "da\n"),
            ("d/[ab].tf", "glob\n"),
            ("README.md", "r\n"),
        ]);
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo.write("b/main.tf", "b2\n");
        repo.commit_all("b");
        repo.write("c/main.tf", "c dirty\n");
        repo.write("d/a.tf", "da dirty\n");
        let req = ChangeRequest {
            base_ref: Some("main".into()),
            ..repo.request()
        };
        let how = settled_fingerprinting(None);
        let answer = |recorded: Option<(&[u8], &[String])>| {
            let mut told = Verdict::Other;
            let answer = changed_files_unless(&req, &how, recorded, &mut |v| told = v);
            let Ok(Answer::Changed(set)) = answer else {
                panic!("a changed tree: {answer:?}");
            };
            (set, told)
        };
        let (mut set, _) = answer(None);
        assert_eq!(set.changed_files, ["b/main.tf", "c/main.tf", "d/a.tf"]);
        type Step = (&'static str, fn(&Repo));
        let steps: [Step; 5] = [
            ("a clean file edited", |r| {
                r.write("a/main.tf", "a edited\n")
            }),
            ("an edit undone", |r| r.write("c/main.tf", "c\n")),
            ("a committed change put back as on the base", |r| {
                r.write("b/main.tf", "b\n")
            }),
            ("a name that is a glob", |r| {
                r.write("d/[ab].tf", "edited\n")
            }),
            ("a file no module holds", |r| {
                r.write("README.md", "edited\n")
            }),
        ];
        for (step, edit) in steps {
            std::thread::sleep(std::time::Duration::from_millis(20));
            edit(&repo);
            let fingerprint = set.fingerprint.clone().expect("a fingerprint");
            let (now, told) = answer(Some((&fingerprint, &set.changed_files)));
            assert!(matches!(told, Verdict::Moved(_)), "{step}: {told:?}");
            assert_eq!(now.changed_files, changed(&req), "{step}");
            set = now;
        }
        assert_eq!(
            set.changed_files,
            ["README.md", "a/main.tf", "b/main.tf", "d/[ab].tf", "d/a.tf"]
        );
    }

    #[test]
    fn committed_changes_are_diffed_from_the_merge_base() {
        let repo = Repo::new(BASE_FILES);
        let fork = repo.rev("HEAD");
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo.write("vpc/main.tf", "# vpc v2\n");
        repo.write("s3/main.tf", "# new module\n");
        repo.commit_all("feature work");
        // main moves on after the fork: its changes are not the branch's.
        repo.git(&["checkout", "-q", "main"]);
        repo.write("rds/main.tf", "# rds on main\n");
        let main = repo.commit_all("main work");
        repo.git(&["checkout", "-q", "feature"]);

        let req = ChangeRequest {
            base_ref: Some("main".to_owned()),
            ..repo.request()
        };
        let set = changed_files(&req).expect("changed files");
        assert_eq!(
            set,
            ChangeSet {
                base: "main".to_owned(),
                base_commit: main,
                merge_base: fork,
                changed_files: vec!["s3/main.tf".to_owned(), "vpc/main.tf".to_owned()],
                submodules: Vec::new(),
                fingerprint: None,
            }
        );
    }

    #[test]
    fn working_tree_adds_staged_unstaged_and_untracked_but_not_ignored_files() {
        let repo = Repo::new(BASE_FILES);
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo.write("vpc/main.tf", "# committed\n");
        repo.commit_all("feature work");
        repo.write("eks/main.tf", "# staged\n");
        repo.git(&["add", "eks/main.tf"]);
        repo.write("rds/main.tf", "# unstaged\n");
        repo.write("s3/new/main.tf", "# untracked in a new directory\n");
        repo.write("vpc/terraform.tfstate", "{}");
        repo.write("vpc/.terraform/providers.lock", "ignored directory");
        // Same content, new mtime: git sees no change, neither must we.
        repo.write("vpc/vars.tf", "# vars\n");

        assert_eq!(
            repo.changes("main"),
            [
                "eks/main.tf",
                "rds/main.tf",
                "s3/new/main.tf",
                "vpc/main.tf"
            ]
        );
        assert_eq!(repo.committed("main"), ["vpc/main.tf"]);
    }

    #[test]
    fn a_rename_is_reported_as_both_paths_and_a_deleted_directory_as_its_files() {
        let repo = Repo::new(BASE_FILES);
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo.git(&["mv", "vpc/vars.tf", "vpc/variables.tf"]);
        repo.git(&["rm", "-q", "-r", "eks"]);
        repo.commit_all("rename and delete");
        assert_eq!(
            repo.committed("main"),
            ["eks/main.tf", "vpc/variables.tf", "vpc/vars.tf"]
        );

        // The same holds while the rename is only staged or only on disk.
        repo.git(&["mv", "rds/main.tf", "rds/rds.tf"]);
        std::fs::rename(
            repo.root.join("vpc/main.tf"),
            repo.root.join("vpc/network.tf"),
        )
        .expect("rename on disk");
        assert_eq!(
            repo.changes("main"),
            [
                "eks/main.tf",
                "rds/main.tf",
                "rds/rds.tf",
                "vpc/main.tf",
                "vpc/network.tf",
                "vpc/variables.tf",
                "vpc/vars.tf"
            ]
        );
    }

    #[test]
    fn a_project_in_a_subdirectory_sees_only_its_own_files_relative_to_itself() {
        let repo = Repo::new(&[
            ("README.md", "readme\n"),
            ("infra/vpc/main.tf", "# vpc\n"),
            ("infra-other/main.tf", "# same prefix, other directory\n"),
            ("app/main.go", "package main\n"),
        ]);
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo.write("README.md", "changed\n");
        repo.write("infra/vpc/main.tf", "# vpc v2\n");
        repo.write("infra-other/main.tf", "# changed\n");
        repo.commit_all("feature work");
        repo.write("app/main.go", "package app\n");
        repo.write("infra/eks/main.tf", "# untracked\n");

        let req = ChangeRequest {
            project_dir: repo.root.join("infra"),
            base_ref: Some("main".to_owned()),
            ..repo.request()
        };
        assert_eq!(changed(&req), ["eks/main.tf", "vpc/main.tf"]);
    }

    #[test]
    fn base_defaults_to_origin_main() {
        let repo = Repo::new(BASE_FILES);
        repo.git(&["update-ref", "refs/remotes/origin/main", "HEAD"]);
        // A local `main` that moved on must not win over `origin/main`.
        repo.write("rds/main.tf", "# local main only\n");
        repo.commit_all("local main");
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo.write("eks/main.tf", "# feature\n");
        repo.commit_all("feature");

        let set = changed_files(&ChangeRequest {
            committed_only: true,
            ..repo.request()
        })
        .expect("changed files");
        assert_eq!(set.base, "origin/main");
        assert_eq!(set.changed_files, ["eks/main.tf", "rds/main.tf"]);
    }

    #[test]
    fn base_defaults_to_the_target_of_origin_head_in_a_clone() {
        let origin = Repo::new(BASE_FILES);
        origin.git(&["branch", "-m", "trunk"]);
        let clone = origin.sibling("clone");
        git(
            origin.root.parent().expect("parent"),
            &[
                "clone",
                "-q",
                &format!("file://{}", origin.root),
                clone.as_str(),
            ],
        );
        git(&clone, &["checkout", "-q", "-b", "feature"]);
        std::fs::write(clone.join("vpc/main.tf"), "# feature\n").expect("write");

        let set = changed_files(&ChangeRequest {
            project_dir: clone,
            ..origin.request()
        })
        .expect("changed files");
        assert_eq!(set.base, "origin/trunk");
        assert_eq!(set.base_commit, origin.rev("trunk"));
        assert_eq!(set.changed_files, ["vpc/main.tf"]);
    }

    #[test]
    fn ci_variables_pick_the_base_and_base_ref_wins_over_them() {
        let repo = Repo::new(BASE_FILES);
        let first = repo.rev("HEAD");
        repo.write("vpc/main.tf", "# second\n");
        let second = repo.commit_all("second");
        repo.git(&["update-ref", "refs/remotes/origin/release", &second]);
        repo.write("eks/main.tf", "# third\n");
        repo.commit_all("third");

        let env = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect()
        };
        let with = |base_ref: Option<&str>, vars: &[(&str, &str)]| {
            changed_files(&ChangeRequest {
                base_ref: base_ref.map(str::to_owned),
                env: env(vars),
                ..repo.request()
            })
            .expect("changed files")
        };

        let set = with(
            None,
            &[(MR_DIFF_BASE_SHA, &first), (GITHUB_BASE_REF, "release")],
        );
        assert_eq!(set.base, first);
        assert_eq!(set.changed_files, ["eks/main.tf", "vpc/main.tf"]);

        // GitHub sets GITHUB_BASE_REF to "" outside pull requests: empty means unset.
        let set = with(
            None,
            &[(MR_DIFF_BASE_SHA, ""), (GITHUB_BASE_REF, "release")],
        );
        assert_eq!(set.base, "origin/release");
        assert_eq!(set.changed_files, ["eks/main.tf"]);

        let set = with(Some("HEAD~1"), &[(MR_DIFF_BASE_SHA, &first)]);
        assert_eq!(set.base, "HEAD~1");
        assert_eq!(set.changed_files, ["eks/main.tf"]);
    }

    #[test]
    fn an_unknown_ref_names_everything_tried() {
        let repo = Repo::new(BASE_FILES);
        let err = changed_files(&ChangeRequest {
            base_ref: Some("origin/nope".to_owned()),
            ..repo.request()
        })
        .expect_err("unknown ref");
        assert!(
            matches!(&err, VcsError::UnknownRef { tried, origin, .. } if tried == &["origin/nope"] && origin == "--base-ref"),
            "{err:?}"
        );
        assert_eq!(
            err.to_string(),
            "unknown base ref: tried `origin/nope` (from --base-ref); pass an existing ref with \
             --base-ref, or create it (this repository has no remote to fetch it from)"
        );

        let err = changed_files(&ChangeRequest {
            env: [(GITHUB_BASE_REF.to_owned(), "develop".to_owned())].into(),
            ..repo.request()
        })
        .expect_err("unknown ref");
        assert!(
            err.to_string()
                .contains("`origin/develop` (from GITHUB_BASE_REF)"),
            "{err}"
        );

        repo.git(&["branch", "-m", "trunk"]);
        let err = changed_files(&repo.request()).expect_err("no default base");
        let VcsError::UnknownRef { tried, .. } = err else {
            panic!("expected UnknownRef, got {err:?}");
        };
        assert_eq!(
            tried,
            [
                "origin/HEAD",
                "origin/main",
                "origin/master",
                "main",
                "master"
            ]
        );
    }

    #[test]
    fn a_shallow_clone_works_while_the_merge_base_is_there() {
        let origin = Repo::new(BASE_FILES);
        origin.write("vpc/main.tf", "# second\n");
        origin.commit_all("second");
        let clone = origin.sibling("clone");
        git(
            origin.root.parent().expect("parent"),
            &[
                "clone",
                "-q",
                "--depth",
                "1",
                &format!("file://{}", origin.root),
                clone.as_str(),
            ],
        );
        git(&clone, &["checkout", "-q", "-b", "feature"]);
        std::fs::write(clone.join("eks/main.tf"), "# feature\n").expect("write");
        git(&clone, &["commit", "-q", "-am", "feature"]);

        let req = ChangeRequest {
            project_dir: clone,
            ..origin.request()
        };
        let set = changed_files(&req).expect("changed files");
        assert_eq!(set.base, "origin/main");
        assert_eq!(set.changed_files, ["eks/main.tf"]);
    }

    #[test]
    fn a_shallow_clone_without_the_merge_base_says_how_to_fix_it() {
        let origin = Repo::new(BASE_FILES);
        origin.git(&["checkout", "-q", "-b", "feature"]);
        origin.write("eks/main.tf", "# feature\n");
        origin.commit_all("feature");
        origin.git(&["checkout", "-q", "main"]);
        origin.write("vpc/main.tf", "# main moved on\n");
        let main = origin.commit_all("main");

        let clone = origin.sibling("clone");
        git(
            origin.root.parent().expect("parent"),
            &[
                "clone",
                "-q",
                "--depth",
                "1",
                "--no-single-branch",
                &format!("file://{}", origin.root),
                clone.as_str(),
            ],
        );
        git(&clone, &["checkout", "-q", "--detach", "origin/feature"]);

        let req = ChangeRequest {
            project_dir: clone.clone(),
            ..origin.request()
        };
        let err = changed_files(&req).expect_err("merge base is missing");
        assert!(
            matches!(&err, VcsError::ShallowClone { base } if base == "origin/main"),
            "{err:?}"
        );
        let message = err.to_string();
        assert!(message.contains("git fetch --unshallow"), "{message}");
        assert!(message.contains("GIT_DEPTH: 0"), "{message}");

        // GitLab's diff base SHA may not even be fetched.
        let missing = origin.rev("main~1");
        let err = changed_files(&ChangeRequest {
            env: [(MR_DIFF_BASE_SHA.to_owned(), missing.clone())].into(),
            ..req
        })
        .expect_err("base commit is missing");
        assert!(
            matches!(&err, VcsError::ShallowClone { base } if *base == missing),
            "{err:?}"
        );
        assert_ne!(missing, main);
    }

    #[test]
    fn names_are_reported_verbatim_and_on_the_base_itself_nothing_is_committed() {
        let repo = Repo::new(BASE_FILES);
        assert!(repo.committed("main").is_empty());
        repo.write("eks/prod eu.tfvars", "# space\n");
        repo.write("eks/größe.tf", "# non-ASCII\n");
        assert_eq!(repo.changes("main"), ["eks/größe.tf", "eks/prod eu.tfvars"]);
    }

    #[test]
    fn a_detached_head_works_like_a_branch() {
        let repo = Repo::new(BASE_FILES);
        repo.git(&["checkout", "-q", "--detach"]);
        repo.write("vpc/main.tf", "# detached\n");
        repo.commit_all("detached work");
        assert_eq!(repo.committed("main"), ["vpc/main.tf"]);
    }

    #[test]
    fn a_repository_without_commits_reports_its_working_tree() {
        let repo = Repo::empty();
        repo.write_all(BASE_FILES);
        repo.git(&["add", "vpc"]);

        let set = changed_files(&repo.request()).expect("changed files");
        assert_eq!(
            set,
            ChangeSet {
                base: String::new(),
                base_commit: String::new(),
                merge_base: String::new(),
                changed_files: vec![
                    ".gitignore".to_owned(),
                    "eks/main.tf".to_owned(),
                    "rds/main.tf".to_owned(),
                    "vpc/main.tf".to_owned(),
                    "vpc/vars.tf".to_owned(),
                ],
                submodules: Vec::new(),
                fingerprint: None,
            }
        );
        let committed = changed_files(&ChangeRequest {
            committed_only: true,
            ..repo.request()
        })
        .expect("changed files");
        assert!(committed.changed_files.is_empty());
    }

    #[test]
    fn outside_a_repository_is_an_error() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let dir = Utf8PathBuf::from_path_buf(tmp.path().to_path_buf()).expect("utf-8");
        let err = changed_files(&ChangeRequest {
            project_dir: dir,
            base_ref: None,
            committed_only: false,
            env: BTreeMap::new(),
        })
        .expect_err("no repository");
        assert!(matches!(err, VcsError::NotARepository { .. }), "{err:?}");
    }

    /// A fresh checkout: the fingerprint's walk and the index tell its work tree clean, and
    /// git's status is not asked; every kind of change below the project makes it ask,
    /// and the answer is git's whole answer each time.
    #[test]
    fn a_clean_work_tree_is_told_from_the_walk_and_any_change_asks_git() {
        let repo = Repo::new(&[
            (".gitignore", "*.tfstate\n"),
            ("a/main.tf", "a\n"),
            ("b/main.tf", "b\n"),
            ("c/main.tf", "c\n"),
        ]);
        repo.git(&["checkout", "-q", "-b", "feature"]);
        repo.write("b/main.tf", "b2\n");
        repo.commit_all("b");
        let req = ChangeRequest {
            base_ref: Some("main".into()),
            ..repo.request()
        };
        let output = repo.root.join("pipeline.yml");
        let how = settled_fingerprinting(Some(output.clone()));
        // What the walk and the index tell, and the change set the run gets.
        let told = || {
            // As a job's first git command does: racy entries checked and rewritten.
            std::thread::sleep(std::time::Duration::from_millis(20));
            repo.git(&["status", "--porcelain"]);
            let opened = Opened::open(&req).expect("open");
            let header = opened.header(&req).expect("a work tree");
            let (_, tree) = fingerprint::take(&header, &req.project_dir, &how).expect("walked");
            let clean = opened.clean_below_project(&req, &how, &tree);
            let answer = changed_files_unless(&req, &how, None, &mut |_| {});
            let Ok(Answer::Changed(set)) = answer else {
                panic!("no fingerprint was expected: {answer:?}");
            };
            (clean, set.changed_files)
        };
        assert_eq!(
            told(),
            (true, vec!["b/main.tf".to_owned()]),
            "a fresh checkout"
        );
        type Step = (&'static str, fn(&Repo));
        let steps: [Step; 7] = [
            ("same size, new content", |r| r.write("c/main.tf", "C\n")),
            ("untracked", |r| r.write("d/main.tf", "d\n")),
            ("ignored", |r| r.write("a/x.tfstate", "{}\n")),
            ("staged", |r| {
                r.write("a/main.tf", "a2\n");
                r.git(&["add", "a/main.tf"]);
            }),
            ("deleted", |r| {
                std::fs::remove_file(r.root.join("c/main.tf")).expect("rm");
            }),
            ("a leftover output file", |r| {
                r.write("pipeline.yml", "{}\n")
            }),
            ("a symlink", |r| {
                std::os::unix::fs::symlink("main.tf", r.root.join("a/link.tf")).expect("ln");
            }),
        ];
        for (step, change) in steps {
            change(&repo);
            let (clean, files) = told();
            assert!(!clean, "{step}");
            assert_eq!(files, changed(&req), "{step}: git's whole answer");
            repo.git(&["reset", "-q", "--hard"]);
            repo.git(&["clean", "-q", "-fdx"]);
            assert_eq!(told(), (true, vec!["b/main.tf".to_owned()]), "after {step}");
        }
    }

    /// git's rules for an index entry that vouches for its file (`index.rs`): only a
    /// clean, settled regular file below the project, as its stat data is now.
    #[test]
    fn the_index_vouches_only_for_clean_settled_regular_files_of_the_project() {
        use terraci_db::system::System as _;
        let repo = Repo::new(&[
            ("p/a.tf", "a = 1\n"),
            ("p/b.tf", "b = 1\n"),
            ("p/c.tf", "c = 1\n"),
            ("p/hidden.tf", "d = 1\n"),
            ("other/x.tf", "x = 1\n"),
        ]);
        std::os::unix::fs::symlink("a.tf", repo.root.join("p/link.tf")).expect("symlink");
        repo.commit_all("link");
        repo.git(&["update-index", "--skip-worktree", "p/hidden.tf"]);
        // The last files a command writes share the clock tick of the index it writes
        // (racy); git rewrites the index once it has looked at them.
        std::thread::sleep(std::time::Duration::from_millis(20));
        repo.git(&["status", "--porcelain"]);
        let stamp = |rel: &str| {
            terraci_db::system::OsSystem
                .link_stamp(&repo.root.join(rel))
                .expect("stamp")
        };
        let blob = |rel: &str| {
            let hex = repo.rev(&format!("HEAD:{rel}"));
            let bytes: Vec<u8> = (0..40)
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
                .collect();
            terraci_db::files::BlobId(bytes.try_into().expect("20 bytes"))
        };
        let index = index_identities(&repo.root.join("p")).expect("a repository");
        assert_eq!(
            index.clean_blob("a.tf", &stamp("p/a.tf")),
            Some(blob("p/a.tf"))
        );
        assert_eq!(
            index.clean_blob("c.tf", &stamp("p/c.tf")),
            Some(blob("p/c.tf"))
        );
        // Not below the project, not a regular file, not trusted by git.
        assert_eq!(
            index.clean_blob("../other/x.tf", &stamp("other/x.tf")),
            None
        );
        assert_eq!(index.clean_blob("link.tf", &stamp("p/link.tf")), None);
        assert_eq!(index.clean_blob("hidden.tf", &stamp("p/hidden.tf")), None);
        // A same-length edit: its stat data is not the entry's.
        repo.write("p/b.tf", "b = 2\n");
        assert_eq!(index.clean_blob("b.tf", &stamp("p/b.tf")), None);
        // Racy: every entry written at or after the index's own time proves nothing.
        let file = std::fs::File::options()
            .write(true)
            .open(repo.root.join(".git/index"))
            .expect("index");
        file.set_modified(std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000))
            .expect("set the index's mtime");
        drop(file);
        let racy = index_identities(&repo.root.join("p")).expect("a repository");
        assert!(racy.is_empty(), "{} entries vouched for", racy.len());
    }

    /// `--from-commit` ([`CommitSystem`]): HEAD's commit of the project, not its work
    /// tree; the cache directory, and what the commit does not hold below a submodule,
    /// from the disk.
    #[test]
    fn a_diff_of_contents_alone_names_the_files_and_any_other_change_refuses() {
        use terraci_db::system::OsSystem;
        let repo = Repo::new(&[
            ("p/a/main.tf", "# a\n"),
            ("p/b/main.tf", "# b\n"),
            ("p/.gitignore", "tmp/\n"),
            ("p/README.md", "read me\n"),
            ("q/main.tf", "# not the project's\n"),
        ]);
        let project = repo.root.join("p");
        let open = || {
            CommitSystem::open(std::sync::Arc::new(OsSystem), &project, Vec::new())
                .expect("a commit")
        };
        let base = open().tree();
        let id = |rel: &str| {
            let hex = repo.rev(&format!("HEAD:p/{rel}"));
            let id = gix::ObjectId::from_hex(hex.as_bytes()).expect("an id");
            <[u8; 20]>::try_from(id.as_bytes()).expect("20 bytes")
        };
        assert_eq!(open().modified_files_since(&base), Some(Vec::new()));
        assert_eq!(
            open().plain_file_ids(["a/main.tf", "b/main.tf"]),
            Some(vec![id("a/main.tf"), id("b/main.tf")])
        );
        // Contents only, in and out of the project: the project's files are named, by
        // their path in it.
        repo.write("p/a/main.tf", "# a, edited\n");
        repo.write("p/README.md", "read me again\n");
        repo.write("q/main.tf", "# edited, not the project's\n");
        repo.commit_all("contents");
        let mut modified = open().modified_files_since(&base).expect("contents only");
        modified.sort();
        assert_eq!(
            modified,
            vec![
                ("README.md".to_owned(), id("README.md")),
                ("a/main.tf".to_owned(), id("a/main.tf")),
            ]
        );
        // Each of these may change the walk: the diff refuses.
        let refused = |why: &str, change: &dyn Fn()| {
            let before = repo.rev("HEAD");
            change();
            repo.commit_all(why);
            assert_eq!(open().modified_files_since(&base), None, "{why}");
            repo.git(&["reset", "-q", "--hard", &before]);
        };
        refused("a file added", &|| repo.write("p/c/main.tf", "# c\n"));
        refused("a file removed", &|| {
            std::fs::remove_file(repo.root.join("p/b/main.tf")).expect("rm");
        });
        refused("a .gitignore changed", &|| {
            repo.write("p/.gitignore", "b/\n")
        });
        refused("a file turned into a link", &|| {
            std::fs::remove_file(repo.root.join("p/b/main.tf")).expect("rm");
            std::os::unix::fs::symlink("../a/main.tf", repo.root.join("p/b/main.tf"))
                .expect("link");
        });
        assert_eq!(open().modified_files_since("0123"), None, "not an id");
        let unknown = "1234567890123456789012345678901234567890";
        assert_eq!(
            open().modified_files_since(unknown),
            None,
            "not in the repository"
        );
        // A file reached through a link is not plain: a diff would name its target.
        std::os::unix::fs::symlink("a", repo.root.join("p/via")).expect("link");
        repo.commit_all("a linked directory");
        assert_eq!(
            open().plain_file_ids(["a/main.tf"]),
            Some(vec![id("a/main.tf")])
        );
        assert_eq!(open().plain_file_ids(["a/main.tf", "via/main.tf"]), None);
        assert_eq!(open().plain_file_ids(["a/gone.tf"]), None);
    }

    #[test]
    fn the_commit_is_read_and_the_work_tree_is_not() {
        use terraci_db::system::{EntryKind, OsSystem, ReadPolicy, System};
        let repo = Repo::new(&[
            ("p/a/main.tf", "# committed\n"),
            ("p/gone/main.tf", "# deleted on disk\n"),
            ("p/common/shared.tf", "# shared\n"),
            ("outside.tf", "# not the project's\n"),
        ]);
        std::os::unix::fs::symlink("../common/shared.tf", repo.root.join("p/a/shared.tf"))
            .expect("link");
        std::os::unix::fs::symlink("../../outside.tf", repo.root.join("p/a/out.tf")).expect("link");
        std::os::unix::fs::symlink("loop.tf", repo.root.join("p/a/loop.tf")).expect("link");
        repo.commit_all("links");
        // The work tree moves on: an edit, an untracked file, a deletion, a cache.
        repo.write("p/a/main.tf", "# edited\n");
        repo.write("p/new/main.tf", "# untracked\n");
        std::fs::remove_file(repo.root.join("p/gone/main.tf")).expect("rm");
        repo.write("p/.terraci/cache/facts.bin", "cache");
        let project = repo.root.join("p");
        let cache = project.join(".terraci/cache");
        let commit =
            CommitSystem::open(std::sync::Arc::new(OsSystem), &project, vec![cache.clone()])
                .expect("a commit");

        let read = |rel: &str| {
            commit
                .read(&project.join(rel))
                .map(|b| String::from_utf8(b).expect("utf-8"))
        };
        assert_eq!(read("a/main.tf").expect("committed"), "# committed\n");
        assert_eq!(
            read("gone/main.tf").expect("committed"),
            "# deleted on disk\n"
        );
        assert_eq!(
            read("new/main.tf").expect_err("untracked").kind(),
            std::io::ErrorKind::NotFound
        );
        assert_eq!(read("a/shared.tf").expect("a link inside"), "# shared\n");
        assert_eq!(
            commit
                .read(&cache.join("facts.bin"))
                .expect("the cache is the disk's"),
            b"cache"
        );
        let names: Vec<(String, EntryKind)> = commit
            .read_dir(&project.join("a"))
            .expect("listed")
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("loop.tf".to_owned(), EntryKind::Symlink { to_dir: false }),
                ("main.tf".to_owned(), EntryKind::File),
                ("out.tf".to_owned(), EntryKind::Symlink { to_dir: false }),
                ("shared.tf".to_owned(), EntryKind::Symlink { to_dir: false }),
            ]
        );
        let top: Vec<String> = commit
            .read_dir(&project)
            .expect("listed")
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert_eq!(
            top,
            ["a", "common", "gone"],
            "not the untracked `new`, nor `.terraci`"
        );
        assert!(commit.is_file(&project.join("gone/main.tf")));
        assert!(!commit.is_dir(&project.join("new")));

        let policy = ReadPolicy::new(&commit, &project, 1 << 20);
        for (rel, why) in [
            ("a/out.tf", "leads out of the project"),
            ("a/loop.tf", "leads out"),
        ] {
            let err = commit
                .read_confined(&project.join(rel), &policy, true)
                .expect_err("refused");
            assert!(err.to_string().contains(why), "{rel}: {err}");
        }

        // A file's stamp is its blob's id: the same in every clone of the commit.
        let stamp = commit.stamp(&project.join("a/main.tf")).expect("stamped");
        let hex = repo.rev("HEAD:p/a/main.tf");
        let id: Vec<u8> = (0..40)
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        assert_eq!(
            stamp.object().expect("an object stamp").as_slice(),
            id.as_slice()
        );
        assert_eq!(
            commit
                .read_stamped(&project.join("a/main.tf"))
                .expect("read")
                .1,
            Some(stamp)
        );
        let clone = repo.sibling("clone");
        git(
            repo.root.parent().expect("parent"),
            &["clone", "-q", repo.root.as_str(), clone.as_str()],
        );
        let cloned = CommitSystem::open(std::sync::Arc::new(OsSystem), &clone.join("p"), vec![])
            .expect("a commit");
        assert_eq!(cloned.stamp(&clone.join("p/a/main.tf")), Some(stamp));
        assert_eq!(cloned.contents_id(), commit.contents_id());
        // Another commit of the project is another id.
        repo.commit_all("the edit");
        let moved =
            CommitSystem::open(std::sync::Arc::new(OsSystem), &project, vec![]).expect("a commit");
        assert_ne!(moved.contents_id(), commit.contents_id());
    }
}
