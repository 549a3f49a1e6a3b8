//! Module discovery: the pattern plus a directory walk.
//!
//! Input: the project dir, the pattern and `library_modules.paths`, read through `System`.
//! Output: the [`Discovered`] module directories with their files' bytes, and diagnostics
//! for what could not or may not be read: only regular files inside the project are
//! opened ([`System::read_confined`]); links leading out, FIFOs, sockets, devices
//! (`unsafe-path`), oversized files (`file-too-large`) and names that are not UTF-8
//! (`unsafe-name`) are reported instead. Runs outside salsa; the driver turns the result into inputs.
//! Invalidated by any directory or file creation/removal (the watcher re-runs it).

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;

use camino::{Utf8Path, Utf8PathBuf};
use indexmap::IndexMap;
use rayon::prelude::*;

use terraci_db::config::Pattern;
use terraci_db::diagnostic::{Code, Diagnostic, Severity};
use terraci_db::files::{FileContents, FileKind, ModuleInfo, Role};
use terraci_db::system::{DirEntry, EntryKind, ReadError, ReadPolicy, Stamp, System};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredFile {
    /// Relative to the project dir.
    pub path: Utf8PathBuf,
    pub kind: FileKind,
    pub contents: FileContents,
    /// The version read, where the system can say (see [`terraci::replay`]).
    pub stamp: Option<Stamp>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiscoveredModule {
    pub info: ModuleInfo,
    pub files: Vec<DiscoveredFile>,
}

#[derive(Debug, Default)]
pub struct Discovered {
    /// Sorted by id.
    pub modules: Vec<DiscoveredModule>,
    pub diagnostics: Vec<Diagnostic>,
    /// With `discovery: roots`: the libraries found as local call targets (directory ->
    /// the first caller's directory).
    pub called: BTreeMap<String, String>,
}

/// Walks `root` and returns every module directory, libraries included, with the bytes
/// of its files (read on all cores, as `policy` allows).
pub fn discover_modules(
    system: &dyn System,
    policy: &ReadPolicy,
    pattern: &Pattern,
    library_paths: &[String],
) -> Discovered {
    let layout = walk(system, &policy.root);
    discover_in(system, policy, layout, pattern, library_paths, None, None)
}

/// The contents and stamp of a file that need not be read (its position in the layout's
/// [`Layout::files`], project-relative path, kind, absolute path): the fact cache knows it
/// by its current stamp ([`terraci_db::files::UnreadText`]).
pub type Known<'a> =
    &'a (dyn Fn(usize, &str, FileKind, &Utf8Path) -> Option<(FileContents, Stamp)> + Sync);

/// [`discover_modules`] over a walk already made of `policy.root`. A file that `known`
/// gives is not read. With `hold`, a text read is held only until the load releases it
/// ([`terraci_db::files::UnreadText::held`]), to be read again from that source if needed.
pub fn discover_in(
    system: &dyn System,
    policy: &ReadPolicy,
    layout: Layout,
    pattern: &Pattern,
    library_paths: &[String],
    known: Option<Known<'_>>,
    hold: Option<&Arc<terraci_db::files::TextSource>>,
) -> Discovered {
    let root = &policy.root;
    let read = |at: usize, path: &str, kind| -> Result<(FileContents, Option<Stamp>), ReadError> {
        let abs = root.join(path);
        if let Some((contents, stamp)) = known.and_then(|known| known(at, path, kind, &abs)) {
            return Ok((contents, Some(stamp)));
        }
        system
            .read_confined(&abs, policy, true)
            .map(|(bytes, stamp)| {
                let contents = match hold {
                    Some(source) => FileContents::held(bytes, abs, source),
                    None => FileContents::from_bytes(bytes),
                };
                (contents, stamp)
            })
    };
    // Each directory's files on the workers, decoding (the UTF-8 check and the copy
    // into the shared text) included; a file not read is a diagnostic in its place.
    let firsts = first_positions(&layout.module_dirs);
    let dirs: Vec<(ModuleDir, Vec<Diagnostic>)> = layout
        .module_dirs
        .into_par_iter()
        .zip(firsts)
        .with_min_len(8)
        .map(|((rel, files), first)| {
            let mut diagnostics = Vec::new();
            let files = files
                .into_iter()
                .enumerate()
                .map(|(i, (path, kind))| {
                    let (contents, stamp) = read(first + i, &path, kind).unwrap_or_else(|err| {
                        diagnostics.push(read_diagnostic(&err).with_file(path.clone()));
                        (FileContents::Unreadable(err.to_string()), None)
                    });
                    DiscoveredFile {
                        path: path.into(),
                        kind,
                        contents,
                        stamp,
                    }
                })
                .collect();
            ((rel, files), diagnostics)
        })
        .collect();
    let mut diagnostics = layout.diagnostics;
    let module_dirs = dirs
        .into_iter()
        .map(|(dir, read)| {
            diagnostics.extend(read);
            dir
        })
        .collect();
    assemble(module_dirs, diagnostics, pattern, library_paths)
}

/// The diagnostic for a file [`System::read_confined`] did not read.
pub(crate) fn read_diagnostic(err: &ReadError) -> Diagnostic {
    match err {
        ReadError::Unsafe(why) => Diagnostic::error(
            Code::UnsafePath,
            format!("not read: {why}; terraci reads only regular files inside the project"),
        ),
        ReadError::TooLarge { limit } => Diagnostic::error(
            Code::FileTooLarge,
            format!("not read: the file is larger than {limit} bytes (`--max-file-size`)"),
        ),
        ReadError::Io(err) => {
            Diagnostic::error(Code::UnreadablePath, format!("cannot read file: {err}"))
        }
    }
}

/// What the walk found: module directories (sorted) with the paths and kinds of the
/// files terraci reads there (after OpenTofu shadowing), and what could not be listed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Layout {
    pub module_dirs: ModuleDirs,
    pub diagnostics: Vec<Diagnostic>,
}

/// Each directory's first file's position in the files of `module_dirs`, in order
/// ([`Layout::files`]).
pub fn first_positions(module_dirs: &ModuleDirs) -> Vec<usize> {
    module_dirs
        .iter()
        .scan(0, |next, (_, files)| {
            let first = *next;
            *next += files.len();
            Some(first)
        })
        .collect()
}

impl Layout {
    /// Every file path, in order.
    pub fn files(&self) -> impl Iterator<Item = &str> {
        self.module_dirs
            .iter()
            .flat_map(|(_, files)| files.iter().map(|(p, _)| p.as_str()))
    }
}

/// Each directory that may hold a module with the files terraci reads in it, by
/// project-relative path, in path order.
pub type ModuleDirs = Vec<(String, Vec<(String, FileKind)>)>;

/// A directory's entries and its `.gitignore`'s bytes.
type Listing = (io::Result<Vec<DirEntry>>, Option<Vec<u8>>);

/// Lists the directories below `root` level by level (each level's directories on all
/// cores), applying `.gitignore` files and skipping hidden entries, without reading any
/// Terraform file. A `.gitignore` only ever applies below its own directory, so visiting
/// breadth-first applies the same rules in the same precedence as a depth-first walk.
pub fn walk(system: &dyn System, root: &Utf8Path) -> Layout {
    let mut out = Layout::default();
    let mut ignores = IgnoreRules::new(system, root);
    let policy = ReadPolicy::new(system, root, terraci_db::system::DEFAULT_MAX_FILE_SIZE);
    let mut level: Vec<String> = vec![String::new()];
    while !level.is_empty() {
        let listed: Vec<Listing> = level
            .par_iter()
            .with_min_len(8)
            .map(|rel| {
                let abs = if rel.is_empty() {
                    root.to_owned()
                } else {
                    root.join(rel)
                };
                match system.read_dir(&abs) {
                    Ok(entries) => {
                        // Read as a Terraform file is: a FIFO or a link out of the project
                        // named `.gitignore` is not opened (and then ignores nothing).
                        let gitignore = entries
                            .iter()
                            .any(|e| {
                                e.name == ".gitignore"
                                    && matches!(
                                        e.kind,
                                        EntryKind::File | EntryKind::Symlink { to_dir: false }
                                    )
                            })
                            .then(|| {
                                system
                                    .read_confined(&abs.join(".gitignore"), &policy, true)
                                    .ok()
                                    .map(|(bytes, _)| bytes)
                            })
                            .flatten();
                        (Ok(entries), gitignore)
                    }
                    Err(err) => (Err(err), None),
                }
            })
            .collect();
        // A directory's `.gitignore` applies to its own entries and below, never to a
        // sibling's: the level's are all added, then its directories visited on all cores.
        let listed: Vec<(String, io::Result<Vec<DirEntry>>)> = level
            .into_iter()
            .zip(listed)
            .map(|(rel, (entries, gitignore))| {
                if let (Ok(_), Some(bytes)) = (&entries, gitignore) {
                    ignores.add(&rel, &bytes);
                }
                (rel, entries)
            })
            .collect();
        let ignores = &ignores;
        let visited: Vec<Visited> = listed
            .into_par_iter()
            .with_min_len(8)
            .map(|(rel, entries)| visit(rel, entries, ignores))
            .collect();
        let mut next = Vec::new();
        for visited in visited {
            out.diagnostics.extend(visited.diagnostics);
            next.extend(visited.dirs);
            out.module_dirs.extend(visited.module);
        }
        level = next;
    }
    out.module_dirs.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// What one directory's listing adds to the walk: diagnostics, the directories to
/// visit next, and the directory as a module directory if it holds a Terraform file.
#[derive(Default)]
struct Visited {
    diagnostics: Vec<Diagnostic>,
    dirs: Vec<String>,
    module: Option<(String, Vec<(String, FileKind)>)>,
}

/// The entries of the directory `rel` as the walk takes them ([`walk`]).
fn visit(rel: String, entries: io::Result<Vec<DirEntry>>, ignores: &IgnoreRules) -> Visited {
    let mut out = Visited::default();
    let entries = match entries {
        Ok(e) => e,
        Err(err) => {
            out.diagnostics.push(Diagnostic::new(
                Severity::Error,
                Code::UnreadablePath,
                format!("cannot read directory `{}`: {err}", display_rel(&rel)),
            ));
            return out;
        }
    };
    let mut files: Vec<(String, FileKind)> = Vec::new();
    for entry in entries {
        if entry.name.starts_with('.') {
            continue;
        }
        let shown = || {
            let child = if rel.is_empty() {
                entry.name.clone()
            } else {
                format!("{rel}/{}", entry.name)
            };
            terraci_db::escape::printable(&child).into_owned()
        };
        match entry.kind {
            EntryKind::NotUtf8 => {
                out.diagnostics.push(Diagnostic::error(
                    Code::UnsafeName,
                    format!(
                        "`{}` is skipped: its name is not UTF-8, which module ids \
                         and pipelines cannot hold",
                        shown()
                    ),
                ));
                continue;
            }
            EntryKind::Special { what } if FileKind::of(&entry.name).is_some() => {
                out.diagnostics.push(
                    Diagnostic::error(
                        Code::UnsafePath,
                        format!(
                            "not read: {what}, not a regular file; terraci reads \
                             only regular files inside the project"
                        ),
                    )
                    .with_file(shown()),
                );
                continue;
            }
            // Neither listed nor read: no path to make or match.
            EntryKind::File | EntryKind::Symlink { to_dir: false }
                if FileKind::of(&entry.name).is_none() =>
            {
                continue;
            }
            _ => {}
        }
        let child = if rel.is_empty() {
            entry.name.clone()
        } else {
            format!("{rel}/{}", entry.name)
        };
        let is_dir = matches!(
            entry.kind,
            EntryKind::Dir | EntryKind::Symlink { to_dir: true }
        );
        if ignores.is_ignored(&child, is_dir) {
            continue;
        }
        match entry.kind {
            EntryKind::Dir => out.dirs.push(child),
            EntryKind::Symlink { to_dir: true }
            | EntryKind::Special { .. }
            | EntryKind::NotUtf8 => {}
            EntryKind::File | EntryKind::Symlink { to_dir: false } => {
                if let Some(kind) = FileKind::of(&entry.name) {
                    files.push((child, kind));
                }
            }
        }
    }
    let files = apply_tofu_shadowing(files);
    if files.iter().any(|(_, kind)| !kind.is_vars()) && !rel.is_empty() {
        out.module = Some((rel, files));
    }
    out
}

/// The outlines ([`crate::parse::FileOutline`]) of a directory's Terraform files whose
/// text holds one of `needles` (a cheap test before parsing; each file is outlined once).
fn outlines(files: &[DiscoveredFile], needles: &[&str]) -> Vec<crate::parse::FileOutline> {
    files
        .iter()
        .filter(|f| !f.kind.is_vars())
        .filter_map(|f| {
            let text = f.contents.text()?;
            let text: &str = &text;
            needles
                .iter()
                .any(|n| text.contains(n))
                .then(|| crate::parse::outline(text, f.kind))
        })
        .collect()
}

/// The block that makes a directory a root to Terraform (`backend "s3"`, `cloud`), if any.
fn backend_of(files: &[DiscoveredFile]) -> Option<String> {
    outlines(files, &["backend", "cloud"])
        .into_iter()
        .find_map(|o| o.backend)
}

/// Every directory that a module call of the walked directories names as its literal
/// local `source` (`./x`, `../x`, `//subdir` dropped), project-relative, with the first
/// caller's directory. Calls whose source leaves the project are left out.
pub fn local_call_targets(
    module_dirs: &[(String, Vec<DiscoveredFile>)],
) -> BTreeMap<String, String> {
    let found: Vec<(String, Vec<String>)> = module_dirs
        .par_iter()
        .map(|(id, files)| {
            let sources = outlines(files, &["source"])
                .into_iter()
                .flat_map(|o| o.sources)
                .collect();
            (id.clone(), sources)
        })
        .collect();
    let mut targets = BTreeMap::new();
    for (id, sources) in found {
        for source in sources {
            if !(source.starts_with("./") || source.starts_with("../")) {
                continue;
            }
            // `./modules/x//sub` names `./modules/x/sub` too; the package is its first part.
            let source = match source.split_once("//") {
                Some((package, sub)) => format!("{package}/{sub}"),
                None => source,
            };
            let target = terraci_db::system::normalize(&Utf8Path::new(&id).join(&source));
            let target = target.as_str().trim_end_matches('/').to_owned();
            if !target.starts_with("..") && !target.is_empty() && target != id {
                targets.entry(target).or_insert_with(|| id.clone());
            }
        }
    }
    targets
}

/// `depth` segment names: the pattern's own (but its last) where it has them, then
/// `{levelN}`, ending with the pattern's last segment.
fn pattern_of_depth(pattern: &Pattern, depth: usize) -> String {
    let own = pattern.segments();
    let (last, front) = own.split_last().expect("a pattern has segments");
    let names: Vec<String> = (0..depth.saturating_sub(1))
        .map(|i| {
            front
                .get(i)
                .cloned()
                .unwrap_or_else(|| format!("level{}", i + 1))
        })
        .chain(std::iter::once(last.clone()))
        .map(|n| format!("{{{n}}}"))
        .collect();
    names.join("/")
}

/// A module directory with the files discovery found in it.
type ModuleDir = (String, Vec<DiscoveredFile>);

/// One module as [`assemble`] makes it: the module, its `undiscovered-root` warning, and
/// whether it is a root deeper than the pattern (with its backend).
type Assembled = (
    DiscoveredModule,
    Option<Diagnostic>,
    Option<(String, String)>,
);

/// Module infos (ids, pattern components, parents, roles) for the walked directories.
fn assemble(
    module_dirs: Vec<ModuleDir>,
    diagnostics: Vec<Diagnostic>,
    pattern: &Pattern,
    library_paths: &[String],
) -> Discovered {
    let libraries: Vec<String> = library_paths
        .iter()
        .map(|p| p.trim_start_matches("./").trim_matches('/').to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    let mut out = Discovered {
        modules: Vec::new(),
        diagnostics,
        called: BTreeMap::new(),
    };

    let roots_mode = pattern.is_roots();
    let depth = if roots_mode { 1 } else { pattern.depth() };
    let is_library = |id: &str| {
        libraries.iter().any(|l| {
            id.strip_prefix(l.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
        })
    };
    let called = if roots_mode {
        local_call_targets(&module_dirs)
    } else {
        BTreeMap::new()
    };
    let module_ids: rustc_hash::FxHashSet<String> = module_dirs
        .iter()
        .filter(|(id, _)| id.split('/').count() >= depth || is_library(id))
        .map(|(id, _)| id.clone())
        .collect();
    // Pattern mode: roots deeper than the pattern with no module at its depth above them,
    // in a tree where no module is at the pattern's depth at all (the pattern is
    // shallower than every root). A tree with modules at that depth is TerraCi's layout
    // of submodules grouped under a directory (`ec2/db-migrate`): no warning.
    let none_at_depth = !module_dirs
        .iter()
        .any(|(id, _)| id.split('/').count() == depth);
    // Each module on its own (on the workers), its warnings in module order.
    let assembled: Vec<Assembled> = module_dirs
        .into_par_iter()
        .with_min_len(64)
        .map(|(id, files)| {
            let mut warning = None;
            let mut misplaced = None;
            let parts: Vec<&str> = id.split('/').collect();
            let role = if is_library(&id) || called.contains_key(&id) {
                Role::Library
            } else if parts.len() < depth {
                Role::Plain
            } else {
                Role::Root
            };
            if !roots_mode && role == Role::Plain {
                if let Some(backend) = backend_of(&files) {
                    let levels = if parts.len() == 1 { "level" } else { "levels" };
                    warning = Some(
                        Diagnostic::new(
                            Severity::Warning,
                            Code::UndiscoveredRoot,
                            format!(
                                "`{id}` has a `{backend}` block but is {} {levels} deep, above \
                             the pattern `{pattern}` ({} segments): it gets no jobs and no \
                             reference can reach it; `structure.discovery: roots` includes \
                             it (or a pattern of its depth, `{}`)",
                                parts.len(),
                                pattern.depth(),
                                pattern_of_depth(pattern, parts.len())
                            ),
                        )
                        .with_module(id.clone()),
                    );
                }
            }
            if !roots_mode
                && none_at_depth
                && role == Role::Root
                && parts.len() > depth
                && !module_ids.contains(&parts[..depth].join("/"))
            {
                if let Some(backend) = backend_of(&files) {
                    misplaced = Some((id.clone(), backend));
                }
            }
            let mut components = IndexMap::new();
            let mut submodule = None;
            if roots_mode {
                components.insert(
                    "module".to_owned(),
                    (*parts.last().expect("non-empty")).to_owned(),
                );
            } else if parts.len() >= depth {
                for (name, value) in pattern.segments().iter().zip(&parts) {
                    components.insert(name.clone(), (*value).to_owned());
                }
                if parts.len() > depth {
                    let rest = parts[depth..].join("/");
                    components.insert("submodule".to_owned(), rest.clone());
                    submodule = Some(rest);
                }
            }
            // The nearest directory above that is a module: `id` up to one of its slashes.
            let parent = id
                .rmatch_indices('/')
                .map(|(at, _)| &id[..at])
                .find(|p| module_ids.contains(*p))
                .map(str::to_owned);
            let module = DiscoveredModule {
                info: ModuleInfo {
                    id,
                    components,
                    submodule,
                    parent,
                    role,
                },
                files,
            };
            (module, warning, misplaced)
        })
        .collect();
    let mut misplaced: Vec<(String, String)> = Vec::new();
    for (module, warning, deeper) in assembled {
        out.diagnostics.extend(warning);
        misplaced.extend(deeper);
        out.modules.push(module);
    }
    out.called = called;
    if let Some((example, backend)) = misplaced.first() {
        let deeper: std::collections::BTreeSet<usize> = misplaced
            .iter()
            .map(|(id, _)| id.split('/').count())
            .collect();
        let fits = match (deeper.len(), deeper.first()) {
            (1, Some(&d)) => format!(
                "the pattern `{}` fits them, `structure.discovery: roots` fits every depth",
                pattern_of_depth(pattern, d)
            ),
            _ => "`structure.discovery: roots` fits them".to_owned(),
        };
        let count = misplaced.len();
        let (roots, sit) = if count == 1 {
            ("root sits", "its components name")
        } else {
            ("roots sit", "their components name")
        };
        out.diagnostics.push(Diagnostic::new(
            Severity::Warning,
            Code::PatternDepth,
            format!(
                "{count} {roots} deeper than the pattern `{pattern}` ({} segments) with no \
                 module at that depth above them, e.g. `{example}` (`{backend}` block): \
                 {sit} a directory that is not a module and the rest becomes a submodule; {fits}",
                pattern.depth()
            ),
        ));
    }
    out
}

/// What git ignores, with git's own matcher (gix-ignore) and git's precedence: the global
/// excludes file (`$XDG_CONFIG_HOME/git/ignore`, else `~/.config/git/ignore`), then
/// `.git/info/exclude`, then the `.gitignore` files from the repository root down to the
/// project and those met during the walk; a later (deeper) list wins, `!` re-includes.
/// Outside a git repository only the project's own `.gitignore` files count.
struct IgnoreRules {
    search: gix_ignore::Search,
    /// The directory `.gitignore` bases are relative to: the repository's work tree, or
    /// the project dir outside a repository.
    top: Utf8PathBuf,
    /// The project dir relative to `top`, `/`-terminated (empty when they are the same).
    prefix: String,
    root: Utf8PathBuf,
}

impl IgnoreRules {
    fn new(system: &dyn System, root: &Utf8Path) -> Self {
        let mut rules = IgnoreRules {
            search: gix_ignore::Search::default(),
            top: root.to_owned(),
            prefix: String::new(),
            root: root.to_owned(),
        };
        let Some(top) = root
            .ancestors()
            .find(|dir| system.is_dir(&dir.join(".git")) || system.is_file(&dir.join(".git")))
        else {
            return rules;
        };
        // Files of the repository are read as Terraform files are: confined to it,
        // regular files only, bounded (a `.gitignore` above the project may be a FIFO).
        let policy = ReadPolicy::new(system, top, terraci_db::system::DEFAULT_MAX_FILE_SIZE);
        let read_in_repo = |file: &Utf8Path| {
            system
                .read_confined(file, &policy, true)
                .ok()
                .map(|(bytes, _)| bytes)
        };
        let home = system.env_var("HOME").filter(|h| !h.is_empty());
        let global = match system.env_var("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
            Some(xdg) => Some(Utf8PathBuf::from(xdg).join("git/ignore")),
            None => home.map(|h| Utf8PathBuf::from(h).join(".config/git/ignore")),
        };
        // A worktree or submodule has a `.git` file naming its git dir.
        let git_dir = match system.is_file(&top.join(".git")) {
            true => read_in_repo(&top.join(".git")).and_then(|text| {
                String::from_utf8_lossy(&text)
                    .trim()
                    .strip_prefix("gitdir: ")
                    .map(|d| top.join(d))
            }),
            false => Some(top.join(".git")),
        };
        // Excludes files are not relative to their own directory: no base. The global
        // one is the user's own (outside the repository); the repository's is confined.
        if let Some(file) = global {
            if system.is_file(&file) {
                if let Ok(bytes) = system.read(&file) {
                    rules.push(&bytes, &file, None);
                }
            }
        }
        if let Some(file) = git_dir.map(|d| d.join("info/exclude")) {
            if let Some(bytes) = read_in_repo(&file) {
                rules.push(&bytes, &file, None);
            }
        }
        rules.top = top.to_owned();
        if let Ok(rel) = root.strip_prefix(top) {
            if !rel.as_str().is_empty() {
                rules.prefix = format!("{rel}/");
            }
            let mut dir = top.to_owned();
            for part in std::iter::once("").chain(rel.iter()) {
                dir.push(part);
                if dir == root {
                    break;
                }
                let file = dir.join(".gitignore");
                if let Some(bytes) = read_in_repo(&file) {
                    let top = rules.top.clone();
                    rules.push(&bytes, &file, Some(&top));
                }
            }
        }
        rules
    }

    fn push(&mut self, bytes: &[u8], source: &Utf8Path, base: Option<&Utf8Path>) {
        // Building a list from bytes does no IO; its error type is only io's.
        let _ = self.search.add_patterns_buffer(
            bytes,
            source.as_std_path(),
            base.map(Utf8Path::as_std_path),
            gix_ignore::search::Ignore::default(),
        );
    }

    /// The `.gitignore` of the project directory `rel` (relative to the project).
    fn add(&mut self, rel: &str, bytes: &[u8]) {
        let source = self.root.join(rel).join(".gitignore");
        let top = self.top.clone();
        self.push(bytes, &source, Some(&top));
    }

    fn is_ignored(&self, path: &str, is_dir: bool) -> bool {
        use bstr::ByteSlice;
        let path = format!("{}{path}", self.prefix);
        self.search
            .pattern_matching_relative_path(
                path.as_bytes().as_bstr(),
                Some(is_dir),
                gix_glob::pattern::Case::Sensitive,
            )
            .is_some_and(|m| !m.pattern.is_negative())
    }
}

/// OpenTofu: `x.tofu` replaces `x.tf`, `x.tofu.json` replaces `x.tf.json`.
fn apply_tofu_shadowing(files: Vec<(String, FileKind)>) -> Vec<(String, FileKind)> {
    fn name_of(path: &str) -> &str {
        path.rsplit('/').next().unwrap_or(path)
    }
    let names: Vec<String> = files.iter().map(|(p, _)| name_of(p).to_owned()).collect();
    files
        .into_iter()
        .filter(|(path, _)| {
            let name = name_of(path);
            let shadow = if let Some(stem) = name.strip_suffix(".tf") {
                format!("{stem}.tofu")
            } else if let Some(stem) = name.strip_suffix(".tf.json") {
                format!("{stem}.tofu.json")
            } else {
                return true;
            };
            !names.contains(&shadow)
        })
        .collect()
}

fn display_rel(rel: &str) -> &str {
    if rel.is_empty() {
        "."
    } else {
        rel
    }
}

/// The pattern `init` proposes for a tree whose directories holding Terraform files are
/// `dirs` (project-relative, `/`-separated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Proposal {
    pub pattern: String,
    /// Its number of segments.
    pub depth: usize,
    /// A directory it makes a module.
    pub example: String,
}

/// Proposes as many segments as most leaf directories (those with no Terraform directory
/// below them) are deep: root modules are the leaves, a submodule or a library is the
/// exception. Leaves under a shared-modules directory (`modules`, or a name starting
/// with `_`, such as `_modules`) do not count unless nothing else is left. A tie goes to
/// the deeper layout. Segment names come from the default pattern (`{module}`,
/// `{environment}/{module}`, `{environment}/{region}/{module}`, then all four), with
/// `{level1}`, ... in front for a tree deeper than four. `None` for a tree without Terraform files.
pub fn propose_pattern(dirs: &[&str]) -> Option<Proposal> {
    let set: std::collections::BTreeSet<&str> = dirs.iter().copied().collect();
    let leaves: Vec<&str> = set
        .iter()
        .copied()
        .filter(|d| {
            let below = format!("{d}/");
            !set.range(below.as_str()..)
                .next()
                .is_some_and(|next| next.starts_with(&below))
        })
        .collect();
    let shared = |d: &&str| {
        d.split('/')
            .any(|part| part == "modules" || part.starts_with('_'))
    };
    let roots: Vec<&str> = match leaves
        .iter()
        .copied()
        .filter(|d| !shared(d))
        .collect::<Vec<_>>()
    {
        roots if roots.is_empty() => leaves,
        roots => roots,
    };
    let depth_of = |d: &str| d.split('/').count();
    let mut counts: BTreeMap<usize, usize> = BTreeMap::new();
    for d in &roots {
        *counts.entry(depth_of(d)).or_default() += 1;
    }
    // The most common depth, the deeper on a tie.
    let (&depth, _) = counts.iter().max_by_key(|&(depth, count)| (count, depth))?;
    let example = roots.iter().find(|d| depth_of(d) == depth)?.to_string();
    let default: &[&str] = match depth {
        1 => &["module"],
        2 => &["environment", "module"],
        3 => &["environment", "region", "module"],
        _ => &["service", "environment", "region", "module"],
    };
    let names: Vec<String> = (1..=depth.saturating_sub(default.len()))
        .map(|i| format!("level{i}"))
        .chain(default.iter().map(|n| (*n).to_owned()))
        .collect();
    let pattern = names
        .iter()
        .map(|n| format!("{{{n}}}"))
        .collect::<Vec<_>>()
        .join("/");
    Some(Proposal {
        pattern,
        depth,
        example,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use terraci_db::system::MemorySystem;

    fn ids(d: &Discovered) -> Vec<String> {
        d.modules
            .iter()
            .map(|m| {
                let mut s = m.info.id.clone();
                match m.info.role {
                    Role::Library => s.push_str(" (library)"),
                    Role::Plain => s.push_str(" (plain)"),
                    Role::Root => {}
                }
                if let Some(p) = &m.info.parent {
                    s.push_str(&format!(" parent={p}"));
                }
                s
            })
            .collect()
    }

    #[test]
    fn finds_modules_at_pattern_depth_and_submodules() {
        let fs = MemorySystem::new();
        for f in [
            "/p/platform/stage/eu/vpc/main.tf",
            "/p/platform/stage/eu/eks/main.tf",
            "/p/platform/stage/eu/eks/addons/main.tf",
            "/p/platform/stage/eu/eks/docs/readme.md",
            "/p/platform/stage/main.tf",
            "/p/.hidden/a/b/c/main.tf",
            "/p/platform/stage/eu/vpc/.terraform/modules/x/main.tf",
            "/p/_modules/kafka/main.tf",
        ] {
            fs.write_file(f, "");
        }
        let pattern = Pattern::parse("{service}/{environment}/{region}/{module}").unwrap();
        let d = discover_modules(
            &fs,
            &ReadPolicy::new(&fs, "/p".into(), 1 << 20),
            &pattern,
            &["_modules".into()],
        );
        assert_eq!(
            ids(&d),
            [
                "_modules/kafka (library)",
                "platform/stage (plain)",
                "platform/stage/eu/eks",
                "platform/stage/eu/eks/addons parent=platform/stage/eu/eks",
                "platform/stage/eu/vpc",
            ]
        );
        let addons = &d.modules[3].info;
        assert_eq!(addons.submodule.as_deref(), Some("addons"));
        assert_eq!(addons.components["module"], "eks");
    }

    #[test]
    fn roots_discovery_finds_every_depth_but_libraries() {
        let fs = MemorySystem::new();
        for (f, text) in [
            ("/p/core/main.tf", "terraform {\n  backend \"s3\" {}\n}\n"),
            ("/p/net/hub/eu/vpc/main.tf", ""),
            ("/p/net/hub/eu/vpc/eks/main.tf", ""),
            (
                "/p/apps/web/main.tf",
                "module \"svc\" {\n  source = \"../modules/svc\"\n}\nmodule \"r\" {\n  source = \"hashicorp/x/aws\"\n}\n",
            ),
            (
                "/p/apps/api/main.tf.json",
                r#"{"module": {"lib": {"source": "./lib//sub"}}}"#,
            ),
            ("/p/apps/api/lib/sub/main.tf", ""),
            ("/p/apps/modules/svc/main.tf", "terraform {\n  backend \"s3\" {}\n}\n"),
            ("/p/shared/listed/main.tf", ""),
            ("/p/.terraform/modules/x/main.tf", ""),
        ] {
            fs.write_file(f, text);
        }
        let d = discover_modules(
            &fs,
            &ReadPolicy::new(&fs, "/p".into(), 1 << 20),
            &Pattern::roots(),
            &["shared".into()],
        );
        assert_eq!(
            ids(&d),
            [
                "apps/api",
                "apps/api/lib/sub (library) parent=apps/api",
                "apps/modules/svc (library)",
                "apps/web",
                "core",
                "net/hub/eu/vpc",
                "net/hub/eu/vpc/eks parent=net/hub/eu/vpc",
                "shared/listed (library)",
            ]
        );
        let eks = &d.modules[6].info;
        assert_eq!(eks.submodule, None);
        assert_eq!(eks.components.len(), 1);
        assert_eq!(eks.components["module"], "eks");
        assert_eq!(d.called["apps/modules/svc"], "apps/web");
        assert!(d.diagnostics.is_empty(), "{:?}", d.diagnostics);
    }

    #[test]
    fn gitignored_directories_and_files_are_skipped() {
        let fs = MemorySystem::new();
        fs.write_file(
            "/p/.gitignore",
            "build/\n*.generated.tf\nscratch\n!scratch/keep\n",
        );
        fs.write_file("/p/a/main.tf", "");
        fs.write_file("/p/a/x.generated.tf", "");
        fs.write_file("/p/build/b/main.tf", "");
        fs.write_file("/p/c/.gitignore", "/d\n");
        fs.write_file("/p/c/d/main.tf", "");
        fs.write_file("/p/c/e/d/main.tf", "");
        let pattern = Pattern::parse("{module}").unwrap();
        let d = discover_modules(
            &fs,
            &ReadPolicy::new(&fs, "/p".into(), 1 << 20),
            &pattern,
            &[],
        );
        assert_eq!(ids(&d), ["a", "c/e/d"]);
        let names: Vec<&str> = d.modules[0].files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a/main.tf"]);
    }

    #[test]
    fn tofu_files_shadow_tf_files() {
        let fs = MemorySystem::new();
        fs.write_file("/p/a/main.tf", "");
        fs.write_file("/p/a/main.tofu", "");
        fs.write_file("/p/a/other.tf", "");
        let pattern = Pattern::parse("{module}").unwrap();
        let d = discover_modules(
            &fs,
            &ReadPolicy::new(&fs, "/p".into(), 1 << 20),
            &pattern,
            &[],
        );
        let names: Vec<&str> = d.modules[0].files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(names, ["a/main.tofu", "a/other.tf"]);
    }

    #[test]
    fn the_proposed_pattern_fits_where_the_root_modules_are() {
        let propose = |dirs: &[&str]| propose_pattern(dirs).map(|p| (p.pattern, p.example));
        // Root modules three levels deep; shared modules and a submodule do not count.
        assert_eq!(
            propose(&[
                "terraform/modules/vpc",
                "terraform/projects/app",
                "terraform/projects/app/addons",
                "terraform/projects/infra-vpc",
                "terraform/projects/infra-dns",
                "_modules/kafka",
            ]),
            Some((
                "{environment}/{region}/{module}".into(),
                "terraform/projects/infra-dns".into()
            ))
        );
        // The default layout gives the default pattern.
        assert_eq!(
            propose(&["platform/prod/eu-west-1/eks", "platform/prod/eu-west-1/vpc"]),
            Some((
                "{service}/{environment}/{region}/{module}".into(),
                "platform/prod/eu-west-1/eks".into()
            ))
        );
        assert_eq!(
            propose(&["vpc", "a/b/c/d/e/f"]).map(|p| p.0),
            Some("{level1}/{level2}/{service}/{environment}/{region}/{module}".into())
        );
        // Only shared modules: they are what there is.
        assert_eq!(
            propose(&["modules/vpc"]).map(|p| p.0),
            Some("{environment}/{module}".into())
        );
        assert_eq!(propose(&[]), None);
    }
}
