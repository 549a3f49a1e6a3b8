//! Policy sources: materialising git and OCI sources, the lock, and reading `.rego` files.
//!
//! Input: `extensions.policy.sources`, the project root, the cache directory. Output:
//! `policy pull` writes each git source at its resolved commit to
//! `<cache>/git/<commit>/` and each OCI source at its manifest digest to
//! `<cache>/oci/<digest>/` (content-addressed: a slot already complete is not fetched
//! again), then `<cache>/policy.lock.json` listing every source with its ref, commit or
//! digest and directory. `policy check` reads path sources in place and git/OCI sources
//! from the slots the lock names. Files are written through the `System`.

use std::collections::BTreeSet;

use camino::{Utf8Path, Utf8PathBuf};
use serde::{Deserialize, Serialize};

use terraci_db::config::PolicySource;
use terraci_db::system::{EntryKind, ReadPolicy, System};

/// The lock file's name inside the cache directory.
pub const LOCK_FILE: &str = "policy.lock.json";

/// Written last into a slot: the slot is complete.
const COMPLETE: &str = ".terraci-complete";

/// What `policy pull` pulled.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    pub sources: Vec<Locked>,
}

/// One source as pulled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Locked {
    /// `path`, `git` or `oci`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The path or URL as configured.
    pub source: String,
    /// The configured ref (git).
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub(crate) reference: Option<String>,
    /// The commit the ref resolved to (git).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// The manifest digest (oci).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// Project-relative directory of its files.
    pub dir: String,
    /// How many `.rego` files it has.
    pub files: usize,
}

/// A source's failure, naming it.
#[derive(Debug, thiserror::Error)]
#[error("policy source {source_name}: {message}")]
pub struct SourceError {
    pub(crate) source_name: String,
    pub(crate) message: String,
}

/// Why policy files cannot be written or read (the caller names the source); paths as
/// messages show them.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilesError {
    #[error("refusing to write `{0}`: the path leaves the policy directory")]
    Unsafe(String),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {why}")]
    Refused { path: String, why: String },
    #[error("{0} is not UTF-8 text")]
    NotText(String),
    #[error("source_cache_dir `{0}` must be a directory inside the project")]
    CacheOutside(String),
    #[error("{cache}/{LOCK_FILE} is not a policy lock ({source}): run `terraci policy pull`")]
    NotALock {
        cache: String,
        source: serde_json::Error,
    },
}

/// How a source is named in messages: `path:policies`, `git:URL@ref`, `oci:URL`.
pub(crate) fn describe(source: &PolicySource) -> String {
    match source {
        PolicySource::Path { path } => format!("path:{path}"),
        PolicySource::Git { url, reference } => match reference {
            Some(r) => format!("git:{}@{r}", crate::http::redact_url(url)),
            None => format!("git:{}", crate::http::redact_url(url)),
        },
        PolicySource::Oci { url } => format!("oci:{}", crate::http::redact_url(url)),
    }
}

fn err(source: &PolicySource, message: impl Into<String>) -> SourceError {
    SourceError {
        source_name: describe(source),
        message: message.into(),
    }
}

/// A project-relative directory inside the project: no `..`, not absolute.
fn project_relative(root: &Utf8Path, rel: &str) -> Option<Utf8PathBuf> {
    let p = Utf8Path::new(rel.trim_end_matches('/'));
    if p.is_absolute()
        || p.components()
            .any(|c| matches!(c, camino::Utf8Component::ParentDir))
    {
        return None;
    }
    Some(root.join(p))
}

/// A path source's directory: inside the project, existing.
fn path_dir(
    system: &dyn System,
    root: &Utf8Path,
    source: &PolicySource,
    path: &str,
) -> Result<Utf8PathBuf, SourceError> {
    let dir = project_relative(root, path)
        .ok_or_else(|| err(source, "the path must be inside the project"))?;
    if !system.is_dir(&dir) {
        return Err(err(
            source,
            format!("`{path}` is not a directory of the project"),
        ));
    }
    // Every symlink on the way resolved: a path source (or a parent of it) that is a link
    // out of the project would load policies from anywhere.
    let real = system
        .canonicalize(&dir)
        .map_err(|e| err(source, format!("`{path}`: {e}")))?;
    let real_root = system
        .canonicalize(root)
        .unwrap_or_else(|_| root.to_owned());
    if !real.starts_with(&real_root) {
        return Err(err(
            source,
            format!(
                "`{path}` resolves to `{real}`, outside the project: a path source must be a directory of the project, not a link out of it"
            ),
        ));
    }
    Ok(real)
}

/// Refuses a `file://` or local-path git URL into the project: git (and gix's
/// `git-upload-pack`) would read that repository's own configuration, which a merge
/// request writes. A directory of the checkout is a `path` source.
fn refuse_local_in_project(
    system: &dyn System,
    root: &Utf8Path,
    source: &PolicySource,
    url: &str,
) -> Result<(), SourceError> {
    let Some(path) = super::git::local_path(url) else {
        return Ok(());
    };
    let canonical_root = system
        .canonicalize(root)
        .map(Utf8PathBuf::into_std_path_buf)
        .unwrap_or_else(|_| root.as_std_path().to_owned());
    // The nearest existing ancestor, with its symlinks resolved, then the rest as written.
    let mut existing = path.as_path();
    let mut rest = Vec::new();
    let real = loop {
        if let Ok(real) = std::fs::canonicalize(existing) {
            break Some(
                rest.iter()
                    .rev()
                    .fold(real, |p: std::path::PathBuf, c| p.join(c)),
            );
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                existing = parent;
            }
            _ => break None,
        }
    };
    let inside =
        |p: &std::path::Path| p.starts_with(&canonical_root) || p.starts_with(root.as_std_path());
    if inside(real.as_deref().unwrap_or(&path)) {
        return Err(err(
            source,
            "the repository lies inside the project: use a `path` source for policies in the checkout (expected a repository outside the project)",
        ));
    }
    Ok(())
}

/// Pulls every source; writes the lock. Returns it.
pub fn pull(
    system: &dyn System,
    root: &Utf8Path,
    cache: &str,
    sources: &[PolicySource],
) -> Result<Lock, SourceError> {
    let cache_abs = project_relative(root, cache).ok_or_else(|| SourceError {
        source_name: "source_cache_dir".into(),
        message: format!("`{cache}` must be a directory inside the project"),
    })?;
    let mut lock = Lock::default();
    for source in sources {
        let locked = match source {
            PolicySource::Path { path } => {
                let dir = path_dir(system, root, source, path)?;
                let files =
                    rego_files(system, root, &dir, path).map_err(|e| err(source, e.to_string()))?;
                Locked {
                    kind: "path".into(),
                    source: path.clone(),
                    reference: None,
                    commit: None,
                    digest: None,
                    dir: path.trim_end_matches('/').to_owned(),
                    files: files.len(),
                }
            }
            PolicySource::Git { url, reference } => {
                refuse_local_in_project(system, root, source, url)?;
                let fetched = super::git::fetch(
                    system,
                    &cache_abs.join(".git-store"),
                    url,
                    reference.as_deref(),
                )
                .map_err(|e| err(source, e.to_string()))?;
                let rel = format!("{cache}/git/{}", fetched.commit);
                let files = fill_slot(system, root, &rel, &fetched.commit, &fetched.files)
                    .map_err(|e| err(source, e.to_string()))?;
                Locked {
                    kind: "git".into(),
                    // The lock may become a job artifact: no user-info in it.
                    source: crate::http::redact_url(url),
                    reference: reference.clone(),
                    commit: Some(fetched.commit),
                    digest: None,
                    dir: rel,
                    files: files.len(),
                }
            }
            PolicySource::Oci { url } => {
                let pulled =
                    super::oci::pull(system, url).map_err(|e| err(source, e.to_string()))?;
                let hex = pulled.digest.trim_start_matches("sha256:").to_owned();
                let rel = format!("{cache}/oci/{hex}");
                let files = fill_slot(system, root, &rel, &pulled.digest, &pulled.files)
                    .map_err(|e| err(source, e.to_string()))?;
                Locked {
                    kind: "oci".into(),
                    source: crate::http::redact_url(url),
                    reference: None,
                    commit: None,
                    digest: Some(pulled.digest),
                    dir: rel,
                    files: files.len(),
                }
            }
        };
        lock.sources.push(locked);
    }
    let mut text = serde_json::to_string_pretty(&lock).unwrap_or_default();
    text.push('\n');
    system
        .write_atomic(&cache_abs.join(LOCK_FILE), text.as_bytes())
        .map_err(|e| SourceError {
            source_name: "lock".into(),
            message: format!("cannot write {cache}/{LOCK_FILE}: {e}"),
        })?;
    Ok(lock)
}

/// Writes `files` into the content-addressed slot `rel` unless it is complete already
/// (its marker, holding `pin`, is written last); returns the slot's policy files.
fn fill_slot(
    system: &dyn System,
    root: &Utf8Path,
    rel: &str,
    pin: &str,
    files: &[(String, Vec<u8>)],
) -> Result<Vec<(String, String)>, FilesError> {
    let slot = root.join(rel);
    if !system.is_file(&slot.join(COMPLETE)) {
        for (path, bytes) in files {
            write_inside(system, &slot, path, bytes)?;
        }
        system
            .write_atomic(&slot.join(COMPLETE), pin.as_bytes())
            .map_err(|source| FilesError::Write {
                path: rel.to_owned(),
                source,
            })?;
    }
    rego_files(system, root, &slot, rel)
}

/// Writes `bytes` at `rel` under `dir`, refusing a path that leaves it.
fn write_inside(
    system: &dyn System,
    dir: &Utf8Path,
    rel: &str,
    bytes: &[u8],
) -> Result<(), FilesError> {
    let p = Utf8Path::new(rel);
    let safe = !rel.is_empty()
        && !p.is_absolute()
        && p.components()
            .all(|c| matches!(c, camino::Utf8Component::Normal(_)));
    if !safe {
        return Err(FilesError::Unsafe(rel.to_owned()));
    }
    system
        .write_atomic(&dir.join(p), bytes)
        .map(|_| ())
        .map_err(|source| FilesError::Write {
            path: dir.join(p).to_string(),
            source,
        })
}

/// Whether a file name is a policy (`.rego`, not a `_test.rego` unit test).
pub(crate) fn is_policy_file(name: &str) -> bool {
    name.ends_with(".rego") && !name.ends_with("_test.rego")
}

/// The policy files under `dir` (recursively, sorted), as (display path, text); `shown`
/// is `dir` as messages name it.
pub(crate) fn rego_files(
    system: &dyn System,
    root: &Utf8Path,
    dir: &Utf8Path,
    shown: &str,
) -> Result<Vec<(String, String)>, FilesError> {
    // Each file is read confined to the project: a regular file whose real path lies
    // inside it, bounded in size (symlinked entries are skipped by the walk already).
    let policy = ReadPolicy::new(system, root, terraci_db::system::DEFAULT_MAX_FILE_SIZE);
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_owned(), shown.trim_end_matches('/').to_owned())];
    let mut seen = BTreeSet::new();
    while let Some((abs, rel)) = stack.pop() {
        if !seen.insert(abs.clone()) {
            continue;
        }
        let entries = system.read_dir(&abs).map_err(|source| FilesError::Read {
            path: rel.clone(),
            source,
        })?;
        for entry in entries {
            if entry.name.starts_with('.') {
                continue;
            }
            let child = abs.join(&entry.name);
            let child_rel = format!("{rel}/{}", entry.name);
            match entry.kind {
                EntryKind::Dir => stack.push((child, child_rel)),
                EntryKind::File if is_policy_file(&entry.name) => {
                    let (bytes, _) = system.read_confined(&child, &policy, false).map_err(|e| {
                        FilesError::Refused {
                            path: child_rel.clone(),
                            why: e.to_string(),
                        }
                    })?;
                    let text = String::from_utf8(bytes)
                        .map_err(|_| FilesError::NotText(child_rel.clone()))?;
                    out.push((child_rel, text));
                }
                _ => {}
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Reads the lock, if `policy pull` wrote one.
pub(crate) fn read_lock(
    system: &dyn System,
    root: &Utf8Path,
    cache: &str,
) -> Result<Option<Lock>, FilesError> {
    let Some(dir) = project_relative(root, cache) else {
        return Err(FilesError::CacheOutside(cache.to_owned()));
    };
    let path = dir.join(LOCK_FILE);
    match system.read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| FilesError::NotALock {
                    cache: cache.to_owned(),
                    source,
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FilesError::Read {
            path: format!("{cache}/{LOCK_FILE}"),
            source,
        }),
    }
}

/// Every policy file of the configured sources: path sources in place, git and OCI
/// sources from the slots of the lock.
pub fn policy_files(
    system: &dyn System,
    root: &Utf8Path,
    cache: &str,
    sources: &[PolicySource],
) -> Result<Vec<(String, String)>, SourceError> {
    let lock = read_lock(system, root, cache).map_err(|e| SourceError {
        source_name: "lock".into(),
        message: e.to_string(),
    })?;
    let mut out = Vec::new();
    for source in sources {
        let (dir, shown) = match source {
            PolicySource::Path { path } => {
                let dir = path_dir(system, root, source, path)?;
                (dir, path.trim_end_matches('/').to_owned())
            }
            PolicySource::Git { url, reference } => {
                let found = lock.as_ref().and_then(|l| {
                    l.sources.iter().find(|e| {
                        e.kind == "git"
                            && e.source == crate::http::redact_url(url)
                            && &e.reference == reference
                    })
                });
                slot(system, root, source, found)?
            }
            PolicySource::Oci { url } => {
                let found = lock.as_ref().and_then(|l| {
                    l.sources
                        .iter()
                        .find(|e| e.kind == "oci" && e.source == crate::http::redact_url(url))
                });
                slot(system, root, source, found)?
            }
        };
        out.extend(rego_files(system, root, &dir, &shown).map_err(|e| err(source, e.to_string()))?);
    }
    Ok(out)
}

fn slot(
    system: &dyn System,
    root: &Utf8Path,
    source: &PolicySource,
    found: Option<&Locked>,
) -> Result<(Utf8PathBuf, String), SourceError> {
    let Some(entry) = found else {
        return Err(err(source, "not pulled: run `terraci policy pull` first"));
    };
    let dir = project_relative(root, &entry.dir).ok_or_else(|| {
        err(
            source,
            format!("the lock names `{}`, outside the project", entry.dir),
        )
    })?;
    if !system.is_file(&dir.join(COMPLETE)) {
        return Err(err(
            source,
            format!(
                "{} is missing or incomplete: run `terraci policy pull`",
                entry.dir
            ),
        ));
    }
    Ok((dir, entry.dir.clone()))
}
