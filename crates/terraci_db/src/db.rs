//! The salsa database.
//!
//! Inputs ([`crate::files`]): file text, modules, the project, plus the files that
//! filesystem functions read, which are created on demand ([`Db::extra_file`]). Every
//! query in the crate takes `&dyn Db`. Clones share storage, so worker threads can run
//! queries in parallel.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use camino::{Utf8Path, Utf8PathBuf};
use salsa::Setter as _;

use crate::files::{ExtraDir, ExtraFile, File, FileContents};
use crate::system::{in_git_dir, EntryKind, ReadError, ReadPolicy, System};

/// The database trait every query is written against.
#[salsa::db]
pub trait Db: salsa::Database {
    /// The input holding the file at `path` (absolute), read through the `System` the
    /// first time it is asked for. Without a system every file is missing.
    fn extra_file(&self, path: &Utf8Path) -> ExtraFile;
    /// The input listing the files below the directory `path` (absolute).
    fn extra_dir(&self, path: &Utf8Path) -> ExtraDir;
}

/// The file registry: which input holds which path. The modules' files are set by
/// discovery (project-relative paths, [`Database::module_file`]); the files and
/// directories that filesystem functions read are created on demand, by absolute path
/// ([`Db::extra_file`], [`Db::extra_dir`]).
#[derive(Default)]
struct Registry {
    module_files: BTreeMap<String, File>,
    files: BTreeMap<Utf8PathBuf, ExtraFile>,
    dirs: BTreeMap<Utf8PathBuf, ExtraDir>,
}

#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    /// Names of the queries that executed, when logging is on (tests of incrementality).
    log: Arc<Mutex<Option<Vec<String>>>>,
    /// Where [`Db::extra_file`] reads, and what it may read there; `None` in databases
    /// built without a system.
    system: Option<(Arc<dyn System>, ReadPolicy)>,
    /// Shared by clones: worker threads create on-demand inputs in the same registry.
    registry: Arc<Mutex<Registry>>,
    /// The last identity index that [`terraci_engine::resolve::sync_owners`] found equal to the
    /// project's owners input (compared by address next time).
    pub owners_checked: Option<Arc<crate::owners::IdentityIndex>>,
}

impl Default for Database {
    /// Query logging ([`Database::start_logging`]) is for tests: release builds install
    /// no event callback, because salsa builds an event (with the current thread's
    /// handle) for every memo it validates once a callback is there, which costs a
    /// large project a few milliseconds per revision.
    fn default() -> Self {
        let log: Arc<Mutex<Option<Vec<String>>>> = Arc::default();
        let sink = log.clone();
        let callback: Box<dyn Fn(salsa::Event) + Send + Sync> = Box::new(move |event| {
            if let salsa::EventKind::WillExecute { database_key } = event.kind {
                if let Ok(mut guard) = sink.lock() {
                    if let Some(entries) = guard.as_mut() {
                        entries.push(format!("{database_key:?}"));
                    }
                }
            }
        });
        Database {
            storage: salsa::Storage::new(cfg!(any(test, debug_assertions)).then_some(callback)),
            log,
            system: None,
            registry: Arc::default(),
            owners_checked: None,
        }
    }
}

impl Database {
    /// A database whose filesystem functions read through `system`, only what `policy`
    /// allows (the repository: `file("/etc/shadow")` reads nothing).
    pub fn with_system(system: Arc<dyn System>, policy: ReadPolicy) -> Database {
        Database {
            system: Some((system, policy)),
            ..Database::default()
        }
    }

    /// The system and read policy the database reads through, if it has them (the
    /// commands' hints read files the inputs do not hold).
    pub fn system_reader(&self) -> Option<(&dyn System, &ReadPolicy)> {
        self.reader()
    }

    fn reader(&self) -> Option<(&dyn System, &ReadPolicy)> {
        self.system.as_ref().map(|(s, p)| (&**s, p))
    }

    /// Starts recording which queries execute.
    pub fn start_logging(&self) {
        if let Ok(mut guard) = self.log.lock() {
            *guard = Some(Vec::new());
        }
    }

    /// The queries executed since the last call (or since logging started).
    pub fn take_log(&self) -> Vec<String> {
        match self.log.lock() {
            Ok(mut guard) => guard.as_mut().map(std::mem::take).unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// The input of the module file at `rel` (project-relative), if discovery found it.
    pub fn module_file(&self, rel: &str) -> Option<File> {
        self.registry.lock().ok()?.module_files.get(rel).copied()
    }

    /// Whether a module file lies below the project-relative directory `dir`.
    pub fn has_module_files_below(&self, dir: &str) -> bool {
        let prefix = format!("{dir}/");
        self.registry.lock().is_ok_and(|r| {
            r.module_files
                .range(prefix.clone()..)
                .next()
                .is_some_and(|(path, _)| path.starts_with(&prefix))
        })
    }

    /// Takes the module files out of the registry, for discovery to update (inputs are
    /// set through `&mut self` while the map is out); [`Database::put_module_files`]
    /// puts them back.
    pub fn take_module_files(&mut self) -> BTreeMap<String, File> {
        self.registry
            .lock()
            .map(|mut r| std::mem::take(&mut r.module_files))
            .unwrap_or_default()
    }

    pub fn put_module_files(&mut self, files: BTreeMap<String, File>) {
        if let Ok(mut r) = self.registry.lock() {
            r.module_files = files;
        }
    }

    /// Whether `path` (absolute) is a file that filesystem functions read, or lies below
    /// a directory that `fileset` listed: watch mode lets events on such paths through.
    pub fn tracks_extra(&self, path: &Utf8Path) -> bool {
        let Ok(extra) = self.registry.lock() else {
            return false;
        };
        extra.files.contains_key(path) || extra.dirs.keys().any(|dir| path.starts_with(dir))
    }

    /// Whether any query read a file or listed a directory through filesystem functions.
    pub fn reads_outside_modules(&self) -> bool {
        self.registry
            .lock()
            .map_or(true, |e| !e.files.is_empty() || !e.dirs.is_empty())
    }

    /// Re-reads every file and directory that filesystem functions have asked for and
    /// updates the inputs whose contents changed (watch mode calls this after a batch of
    /// file events). Returns the paths that changed.
    pub fn refresh_extra(&mut self) -> Vec<Utf8PathBuf> {
        let (files, dirs) = match self.registry.lock() {
            Ok(extra) => (
                extra.files.values().copied().collect::<Vec<_>>(),
                extra.dirs.values().copied().collect::<Vec<_>>(),
            ),
            Err(_) => return Vec::new(),
        };
        let mut changed = Vec::new();
        for file in files {
            let path = file.path(self).clone();
            let now = read_extra_file(self.reader(), &path);
            if file.contents(self) != &now {
                file.set_contents(self).to(now);
                changed.push(path);
            }
        }
        for dir in dirs {
            let path = dir.path(self).clone();
            let now = list_extra_dir(self.reader(), &path);
            if dir.files(self) != &now {
                dir.set_files(self).to(now);
                changed.push(path);
            }
        }
        changed
    }
}

/// What `file()` and friends see at `path`: nothing outside the policy's root (not even
/// whether it exists), and no contents from a special file or a link leading out.
fn read_extra_file(
    system: Option<(&dyn System, &ReadPolicy)>,
    path: &Utf8Path,
) -> Option<FileContents> {
    let (system, policy) = system?;
    if !policy.lexically_inside(path) {
        return Some(FileContents::Unreadable(format!(
            "it is outside the repository (`{}`)",
            policy.root
        )));
    }
    if !system.is_file(path) {
        return None;
    }
    // The git directory is the runner's, not the repository's: its `config` holds the
    // CI's credentials (a remote URL with the job token, actions/checkout's
    // `extraheader`), which a value shown in a diagnostic would print.
    let real = system
        .canonicalize(path)
        .unwrap_or_else(|_| path.to_owned());
    if in_git_dir(&policy.root, path) || in_git_dir(&policy.canonical_root, &real) {
        return Some(FileContents::Unreadable(
            "it is in the git directory (`.git`), which terraci does not read".to_owned(),
        ));
    }
    Some(match system.read_confined(path, policy, false) {
        Ok((bytes, _)) => FileContents::from_bytes(bytes),
        Err(err @ (ReadError::Unsafe(_) | ReadError::TooLarge { .. })) => {
            FileContents::Unreadable(format!("not read: {err}"))
        }
        Err(ReadError::Io(err)) => FileContents::Unreadable(err.to_string()),
    })
}

/// Files below `dir`, recursively, skipping only the git directory: `fileset` sees what
/// Terraform sees, inside the repository (a directory outside it lists nothing).
/// Symlinked directories are not followed, so a link loop cannot hang the walk nor lead
/// it out.
fn list_extra_dir(system: Option<(&dyn System, &ReadPolicy)>, dir: &Utf8Path) -> Vec<String> {
    let Some((system, policy)) = system else {
        return Vec::new();
    };
    let inside = policy.lexically_inside(dir)
        && system
            .canonicalize(dir)
            .is_ok_and(|real| real.starts_with(&policy.canonical_root));
    if !inside || in_git_dir(&policy.root, dir) {
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut stack = vec![String::new()];
    while let Some(rel) = stack.pop() {
        let abs = if rel.is_empty() {
            dir.to_owned()
        } else {
            dir.join(&rel)
        };
        let Ok(entries) = system.read_dir(&abs) else {
            continue;
        };
        for entry in entries {
            if entry.name.eq_ignore_ascii_case(".git") {
                continue;
            }
            let child = if rel.is_empty() {
                entry.name.clone()
            } else {
                format!("{rel}/{}", entry.name)
            };
            match entry.kind {
                EntryKind::Dir => stack.push(child),
                EntryKind::File
                | EntryKind::Symlink { to_dir: false }
                | EntryKind::Special { .. } => out.push(child),
                EntryKind::Symlink { to_dir: true } | EntryKind::NotUtf8 => {}
            }
        }
    }
    out.sort();
    out
}

#[salsa::db]
impl salsa::Database for Database {}

#[salsa::db]
impl Db for Database {
    fn extra_file(&self, path: &Utf8Path) -> ExtraFile {
        // Holding the lock while creating the input keeps one input per path even when
        // worker threads ask for the same file at once.
        let mut extra = self
            .registry
            .lock()
            .expect("the file registry is never poisoned");
        if let Some(file) = extra.files.get(path) {
            return *file;
        }
        let contents = read_extra_file(self.reader(), path);
        let file = ExtraFile::new(self, path.to_owned(), contents);
        extra.files.insert(path.to_owned(), file);
        file
    }

    fn extra_dir(&self, path: &Utf8Path) -> ExtraDir {
        let mut extra = self
            .registry
            .lock()
            .expect("the file registry is never poisoned");
        if let Some(dir) = extra.dirs.get(path) {
            return *dir;
        }
        let files = list_extra_dir(self.reader(), path);
        let dir = ExtraDir::new(self, path.to_owned(), files);
        extra.dirs.insert(path.to_owned(), dir);
        dir
    }
}
