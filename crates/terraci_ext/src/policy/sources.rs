//! Policy sources: materialising git and OCI sources, the lock, and reading `.rego` files.
//!
//! Input: `extensions.policy.sources`, the project root, the per-user cache home
//! (`terraci_db::system::cache_home`, never inside the checkout). Output: `policy pull`
//! writes each git source at its resolved commit to `<home>/policies/git/<commit>/` and
//! each OCI source at its manifest digest to `<home>/policies/oci/<hex>/` (git objects in
//! `<home>/policies/git-store/`), then the lock `<home>/policies/locks/<hash of the
//! project's canonical root>.json`: every source with its ref, commit or digest, and the
//! sha256 of each file pulled. A copy of the lock goes to `<service_dir>/policy.lock.json`
//! as an artifact; it is never read. `policy check` reads path sources in place and git/OCI
//! sources from their slots, each file verified against the lock's sha256. Nothing under
//! the checkout's `.terraci/` is trusted. Files are written through the `System`.

use std::collections::{BTreeMap, BTreeSet};

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
    /// Where its files are: project-relative for a path source, the slot in the cache
    /// home for git and OCI (shown only: `policy check` finds a slot by its pin).
    pub dir: String,
    /// How many `.rego` files it has.
    pub files: usize,
    /// Each pulled file's `sha256:<hex>`, by its path in the slot (git and OCI):
    /// `policy check` reads only files that still match.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub hashes: BTreeMap<String, String>,
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
    #[error("{lock} is not a policy lock ({source}): run `terraci policy pull`")]
    NotALock {
        lock: String,
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

/// A source without policies: `policy pull` refuses it, `policy check` fails closed on it
/// when a decision blocks (an empty source would pass every plan).
const NO_POLICY_FILES: &str = "holds no policy files (`.rego`, not `_test.rego`)";

/// The lock's name as an artifact under `service_dir`: written by `policy pull`, never read.
pub fn artifact_lock(service_dir: &str) -> String {
    format!("{}/{LOCK_FILE}", service_dir.trim_end_matches('/'))
}

/// Where pulled policies live: `<cache home>/policies`.
fn policies_home(cache_home: &Utf8Path) -> Utf8PathBuf {
    cache_home.join("policies")
}

/// The lock of the project at `root`: `<cache home>/policies/locks/<16 hex of the sha256
/// of the project's canonical root>.json`, out of reach of the checkout.
pub fn lock_path(system: &dyn System, root: &Utf8Path, cache_home: &Utf8Path) -> Utf8PathBuf {
    let canonical = system
        .canonicalize(root)
        .unwrap_or_else(|_| root.to_owned());
    let hex = sha256_hex(canonical.as_str().as_bytes());
    policies_home(cache_home)
        .join("locks")
        .join(format!("{}.json", &hex[..16]))
}

fn sha256_hex(bytes: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, bytes)
        .as_ref()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `sha256:<hex>` of `bytes`, as the lock records a file.
fn file_hash(bytes: &[u8]) -> String {
    format!("sha256:{}", sha256_hex(bytes))
}

/// A slot's name: a full hex id (a git commit or a sha256 digest), nothing else.
fn slot_name(pin: &str) -> Option<&str> {
    let hex = pin.strip_prefix("sha256:").unwrap_or(pin);
    (matches!(hex.len(), 40 | 64) && hex.chars().all(|c| c.is_ascii_hexdigit())).then_some(hex)
}

/// Pulls every source into the per-user cache home; writes the lock there (and a copy,
/// never read back, to `<service_dir>/policy.lock.json` as an artifact). Returns it.
pub fn pull(
    system: &dyn System,
    root: &Utf8Path,
    cache_home: &Utf8Path,
    service_dir: &str,
    sources: &[PolicySource],
) -> Result<Lock, SourceError> {
    let home = policies_home(cache_home);
    let mut lock = Lock::default();
    for source in sources {
        let locked = match source {
            PolicySource::Path { path } => {
                let dir = path_dir(system, root, source, path)?;
                let files =
                    rego_files(system, root, &dir, path).map_err(|e| err(source, e.to_string()))?;
                if files.is_empty() {
                    return Err(err(source, NO_POLICY_FILES));
                }
                Locked {
                    kind: "path".into(),
                    source: path.clone(),
                    reference: None,
                    commit: None,
                    digest: None,
                    dir: path.trim_end_matches('/').to_owned(),
                    files: files.len(),
                    hashes: BTreeMap::new(),
                }
            }
            PolicySource::Git { url, reference } => {
                refuse_local_in_project(system, root, source, url)?;
                let fetched =
                    super::git::fetch(system, &home.join("git-store"), url, reference.as_deref())
                        .map_err(|e| err(source, e.to_string()))?;
                let name = slot_name(&fetched.commit).ok_or_else(|| {
                    err(source, format!("`{}` is not a commit id", fetched.commit))
                })?;
                if !fetched.files.iter().any(|(p, _)| is_policy_path(p)) {
                    return Err(err(
                        source,
                        format!("the repository at {} {NO_POLICY_FILES}", fetched.commit),
                    ));
                }
                let slot = home.join("git").join(name);
                let (files, hashes) = fill_slot(system, &slot, &fetched.commit, &fetched.files)
                    .map_err(|e| err(source, e.to_string()))?;
                Locked {
                    kind: "git".into(),
                    // The lock may become a job artifact: no user-info in it.
                    source: crate::http::redact_url(url),
                    reference: reference.clone(),
                    commit: Some(fetched.commit),
                    digest: None,
                    dir: slot.to_string(),
                    files,
                    hashes,
                }
            }
            PolicySource::Oci { url } => {
                let pulled =
                    super::oci::pull(system, url).map_err(|e| err(source, e.to_string()))?;
                let name = slot_name(&pulled.digest).ok_or_else(|| {
                    err(
                        source,
                        format!("`{}` is not a sha256 digest", pulled.digest),
                    )
                })?;
                if !pulled.files.iter().any(|(p, _)| is_policy_path(p)) {
                    return Err(err(
                        source,
                        format!("the artifact {} {NO_POLICY_FILES}", pulled.digest),
                    ));
                }
                let slot = home.join("oci").join(name);
                let (files, hashes) = fill_slot(system, &slot, &pulled.digest, &pulled.files)
                    .map_err(|e| err(source, e.to_string()))?;
                Locked {
                    kind: "oci".into(),
                    source: crate::http::redact_url(url),
                    reference: None,
                    commit: None,
                    digest: Some(pulled.digest),
                    dir: slot.to_string(),
                    files,
                    hashes,
                }
            }
        };
        lock.sources.push(locked);
    }
    let mut text = serde_json::to_string_pretty(&lock).unwrap_or_default();
    text.push('\n');
    let path = lock_path(system, root, cache_home);
    system
        .write_atomic(&path, text.as_bytes())
        .map_err(|e| SourceError {
            source_name: "lock".into(),
            message: format!("cannot write {path}: {e}"),
        })?;
    let artifact = artifact_lock(service_dir);
    let artifact_abs = project_relative(root, &artifact).ok_or_else(|| SourceError {
        source_name: "lock".into(),
        message: format!("`{artifact}` is not inside the project"),
    })?;
    // Into the checkout: following no symlink below the project.
    system
        .write_beneath(root, &artifact_abs, &[text.as_bytes()])
        .map_err(|e| SourceError {
            source_name: "lock".into(),
            message: format!("cannot write {artifact}: {e}"),
        })?;
    Ok(lock)
}

/// Makes the content-addressed slot hold exactly `files` (what was just fetched and
/// verified): every file is (re)written, policy files it should not have are removed, and
/// the marker holding `pin` is written last. A slot already there is never trusted: a
/// file that differs is replaced. Returns how many policy files it has and each file's
/// sha256 for the lock.
fn fill_slot(
    system: &dyn System,
    slot: &Utf8Path,
    pin: &str,
    files: &[(String, Vec<u8>)],
) -> Result<(usize, BTreeMap<String, String>), FilesError> {
    let mut hashes = BTreeMap::new();
    for (path, bytes) in files {
        write_inside(system, slot, path, bytes)?;
        hashes.insert(path.clone(), file_hash(bytes));
    }
    for (rel, _) in slot_files(system, slot)? {
        if !hashes.contains_key(&rel) {
            system
                .remove_file(&slot.join(&rel))
                .map_err(|source| FilesError::Write {
                    path: slot.join(&rel).to_string(),
                    source,
                })?;
        }
    }
    system
        .write_atomic(&slot.join(COMPLETE), pin.as_bytes())
        .map_err(|source| FilesError::Write {
            path: slot.to_string(),
            source,
        })?;
    let count = hashes.keys().filter(|p| is_policy_path(p)).count();
    Ok((count, hashes))
}

/// Whether a slot-relative path names a policy file that `policy check` reads (no part
/// starts with `.`, the name is a policy file's).
fn is_policy_path(rel: &str) -> bool {
    let mut parts = rel.split('/').peekable();
    let mut ok = true;
    while let Some(part) = parts.next() {
        ok &= !part.starts_with('.') && !part.is_empty();
        if parts.peek().is_none() {
            ok &= is_policy_file(part);
        }
    }
    ok
}

/// The policy files under a slot as (slot-relative path, bytes), sorted.
fn slot_files(system: &dyn System, slot: &Utf8Path) -> Result<Vec<(String, Vec<u8>)>, FilesError> {
    policy_paths(system, slot, "")?
        .into_iter()
        .map(|(abs, rel)| {
            let bytes = system.read(&abs).map_err(|source| FilesError::Read {
                path: abs.to_string(),
                source,
            })?;
            Ok((rel, bytes))
        })
        .collect()
}

/// The policy files under `dir`, recursively (hidden entries skipped, each directory
/// listed once), as (absolute path, `prefix`/relative path), sorted by the latter.
fn policy_paths(
    system: &dyn System,
    dir: &Utf8Path,
    prefix: &str,
) -> Result<Vec<(Utf8PathBuf, String)>, FilesError> {
    let mut out = Vec::new();
    let mut stack = vec![(dir.to_owned(), prefix.trim_end_matches('/').to_owned())];
    let mut seen = BTreeSet::new();
    while let Some((abs, rel)) = stack.pop() {
        if !seen.insert(abs.clone()) {
            continue;
        }
        let entries = system.read_dir(&abs).map_err(|source| FilesError::Read {
            // A slot (no prefix) is named by where it is, a source as the config shows it.
            path: if prefix.is_empty() {
                abs.to_string()
            } else {
                rel.clone()
            },
            source,
        })?;
        for entry in entries {
            if entry.name.starts_with('.') {
                continue;
            }
            let child = abs.join(&entry.name);
            let child_rel = if rel.is_empty() {
                entry.name.clone()
            } else {
                format!("{rel}/{}", entry.name)
            };
            match entry.kind {
                EntryKind::Dir => stack.push((child, child_rel)),
                EntryKind::File if is_policy_file(&entry.name) => out.push((child, child_rel)),
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
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
    policy_paths(system, dir, shown)?
        .into_iter()
        .map(|(abs, rel)| {
            let (bytes, _) =
                system
                    .read_confined(&abs, &policy, false)
                    .map_err(|e| FilesError::Refused {
                        path: rel.clone(),
                        why: e.to_string(),
                    })?;
            let text = String::from_utf8(bytes).map_err(|_| FilesError::NotText(rel.clone()))?;
            Ok((rel, text))
        })
        .collect()
}

/// Reads the project's lock from the cache home, if `policy pull` wrote one (the copy in
/// the checkout is never read).
pub(crate) fn read_lock(
    system: &dyn System,
    root: &Utf8Path,
    cache_home: &Utf8Path,
) -> Result<Option<Lock>, FilesError> {
    let path = lock_path(system, root, cache_home);
    match system.read(&path) {
        Ok(bytes) => {
            serde_json::from_slice(&bytes)
                .map(Some)
                .map_err(|source| FilesError::NotALock {
                    lock: path.to_string(),
                    source,
                })
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(source) => Err(FilesError::Read {
            path: path.to_string(),
            source,
        }),
    }
}

/// The policy files of the configured sources, and the sources that hold none.
#[derive(Debug, Default)]
pub struct PolicyFiles {
    /// (display path, text), source by source.
    pub files: Vec<(String, String)>,
    /// Each source without a policy file, as messages name it (`path:policies`): with a
    /// blocking decision, `policy check` fails closed on it.
    pub empty: Vec<String>,
}

/// Every policy file of the configured sources: path sources in place, git and OCI
/// sources from their slots in the cache home, each file verified against the sha256 the
/// lock recorded when it was pulled. `cache_home` is needed only for git and OCI sources
/// (without it they are not pulled).
pub fn policy_files(
    system: &dyn System,
    root: &Utf8Path,
    cache_home: Option<&Utf8Path>,
    sources: &[PolicySource],
) -> Result<PolicyFiles, SourceError> {
    let lock = match cache_home {
        Some(cache_home) => read_lock(system, root, cache_home).map_err(|e| SourceError {
            source_name: "lock".into(),
            message: e.to_string(),
        })?,
        None => None,
    };
    let home = cache_home.map(policies_home);
    let mut out = PolicyFiles::default();
    for source in sources {
        let before = out.files.len();
        match source {
            PolicySource::Path { path } => {
                let dir = path_dir(system, root, source, path)?;
                let shown = path.trim_end_matches('/').to_owned();
                out.files.extend(
                    rego_files(system, root, &dir, &shown)
                        .map_err(|e| err(source, e.to_string()))?,
                );
            }
            PolicySource::Git { url, reference } => {
                let found = lock.as_ref().and_then(|l| {
                    l.sources.iter().find(|e| {
                        e.kind == "git"
                            && e.source == crate::http::redact_url(url)
                            && &e.reference == reference
                    })
                });
                let pin = found.and_then(|e| e.commit.as_deref());
                out.files.extend(verified_slot(
                    system,
                    home.as_deref(),
                    "git",
                    source,
                    found,
                    pin,
                )?);
            }
            PolicySource::Oci { url } => {
                let found = lock.as_ref().and_then(|l| {
                    l.sources
                        .iter()
                        .find(|e| e.kind == "oci" && e.source == crate::http::redact_url(url))
                });
                let pin = found.and_then(|e| e.digest.as_deref());
                out.files.extend(verified_slot(
                    system,
                    home.as_deref(),
                    "oci",
                    source,
                    found,
                    pin,
                )?);
            }
        }
        if out.files.len() == before {
            out.empty.push(describe(source));
        }
    }
    Ok(out)
}

/// The policy files of a pulled source's slot (`<home>/<kind>/<pin>`, `pin` its commit
/// or digest), each checked against the lock's sha256: a file changed, added or missing
/// since the pull is an error naming it.
fn verified_slot(
    system: &dyn System,
    home: Option<&Utf8Path>,
    kind: &str,
    source: &PolicySource,
    found: Option<&Locked>,
    pin: Option<&str>,
) -> Result<Vec<(String, String)>, SourceError> {
    let (Some(home), Some(entry)) = (home, found) else {
        return Err(err(source, "not pulled: run `terraci policy pull` first"));
    };
    let kind_dir = home.join(kind);
    let name = pin.and_then(slot_name).ok_or_else(|| {
        err(
            source,
            "the lock has no commit or digest: run `terraci policy pull`",
        )
    })?;
    let dir = kind_dir.join(name);
    let complete = system.read(&dir.join(COMPLETE)).ok();
    if complete.as_deref() != pin.map(str::as_bytes) {
        return Err(err(
            source,
            format!("{dir} is missing or incomplete: run `terraci policy pull`"),
        ));
    }
    let files = slot_files(system, &dir).map_err(|e| err(source, e.to_string()))?;
    let mut wanted: BTreeSet<&str> = entry
        .hashes
        .keys()
        .map(String::as_str)
        .filter(|p| is_policy_path(p))
        .collect();
    let mut out = Vec::new();
    for (rel, bytes) in files {
        let shown = dir.join(&rel).to_string();
        if entry.hashes.get(&rel) != Some(&file_hash(&bytes)) {
            return Err(err(
                source,
                format!(
                    "{shown} is not the file that was pulled (its sha256 differs from the lock's): run `terraci policy pull`"
                ),
            ));
        }
        wanted.remove(rel.as_str());
        let text = String::from_utf8(bytes)
            .map_err(|_| err(source, format!("{shown} is not UTF-8 text")))?;
        out.push((shown, text));
    }
    if let Some(missing) = wanted.first() {
        return Err(err(
            source,
            format!(
                "{} was pulled but is missing: run `terraci policy pull`",
                dir.join(missing)
            ),
        ));
    }
    Ok(out)
}
