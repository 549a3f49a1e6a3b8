//! The project loader: config -> discovery -> database inputs, with the fact cache
//! attached and saved. Every command starts from a [`Workspace`]; `watch` keeps one and
//! changes its inputs through [`Workspace::apply`] only ([`change`]).

mod change;
mod tfvars_hint;

pub use change::{Applied as AppliedChange, InputChange};

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;

use anyhow::anyhow;
use camino::{Utf8Path, Utf8PathBuf};
use salsa::Setter as _;

use crate::cli::{EvalArgs, GlobalArgs, SelectArgs};
use terraci_db::config::{find_config_file, load_config, LoadedConfig};
use terraci_db::db::Database;
use terraci_db::diagnostic::{Code, Diagnostic, Severity};
use terraci_db::exit::{self, fail};
use terraci_db::files::{EvalSettings, File, Module, ModuleInfo, Project, Role};
use terraci_db::filter::Filters;
use terraci_db::system::System;
use terraci_engine::discover::{discover_in, walk, DiscoveredModule};
use terraci_engine::graph::dependency_graph;
use terraci_render::graph::{EdgeView, ExternalView, GraphView, ModuleView, SourceView};

/// A loaded project: the database with every input set.
pub struct Workspace {
    pub db: Database,
    pub project: Project,
    pub root: Utf8PathBuf,
    /// What discovery may read: regular files inside `root`.
    pub(crate) policy: terraci_db::system::ReadPolicy,
    pub config: LoadedConfig,
    /// Module id -> module input (the files are in the database's registry:
    /// [`Database::module_file`]).
    pub modules: BTreeMap<String, Module>,
    /// Discovery and config diagnostics (outside queries).
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// Notes for stderr that are not diagnostics (an unusable fact cache).
    pub(crate) notices: Vec<String>,
    /// Every file read, project-relative, with the version read where the system can
    /// stamp it (for [`crate::replay`]).
    pub(crate) stamps: Arc<FileStamps>,
    /// git's index, read if the stores keyed on stamps missed ([`crate::git_index`]).
    pub(crate) index: Arc<crate::git_index::LazyIndex>,
    /// The walk discovery used, when [`Start::keep_layout`] asked for it and it had no
    /// diagnostics.
    pub(crate) walked: Option<terraci_engine::discover::ModuleDirs>,
    /// `-v`: info diagnostics (notes) are reported too.
    pub(crate) notes: bool,
    /// `--color`: diagnostics' labels in colour.
    pub(crate) color: bool,
    saving: PendingSave,
}

/// What a command already knows of the project when it loads the workspace.
#[derive(Default)]
pub(crate) struct Start {
    /// A walk of the project directory already made (by the replay check), or the one
    /// a run record holds while the fingerprint check finds it current.
    pub(crate) layout: Option<terraci_engine::discover::Layout>,
    /// The fingerprint check's stamps: a file it stamped unchanged is not stamped again.
    pub(crate) moved: Option<Arc<terraci_vcs::Moved>>,
    /// The stamps of the files of `layout` in its order
    /// ([`terraci_engine::discover::Layout::files`]), when it came from the walk's memo
    /// ([`crate::walk_memo`]): a file's stamp is not asked of the system.
    pub(crate) stamps: Option<crate::walk_memo::Stamps>,
    /// Keep the walk for the run record ([`Workspace::walked`]).
    pub(crate) keep_layout: bool,
    /// The config to use instead of the file's (`init` loads the config it proposes).
    pub(crate) config: Option<LoadedConfig>,
    /// Keep the texts discovery read: the JSON views locate every edge's source in them,
    /// which would read most files again (see [`crate::parallel::warm_up`]). They are then plain
    /// [`terraci_db::files::FileContents::Text`], not held.
    pub(crate) keep_texts: bool,
    /// git's index as the replay check left it (read or not).
    pub(crate) index: Option<Arc<crate::git_index::LazyIndex>>,
}

impl Start {
    /// A start with a walk already made, if there is one.
    pub(crate) fn walked(layout: Option<terraci_engine::discover::Layout>) -> Start {
        Start {
            layout,
            ..Start::default()
        }
    }
}

/// Project-relative paths of the files read, with the version read where the system can
/// stamp it.
pub(crate) type FileStamps = Vec<(String, Option<terraci_db::system::Stamp>)>;

pub(crate) use crate::replay::RunFiles;

/// The project root: `-d DIR` as given; else, without `-c`, the directory holding the
/// config file found from the current directory upward to the repository's top (as git
/// finds its repository); else the current directory.
pub(crate) fn project_dir(system: &dyn System, global: &GlobalArgs) -> anyhow::Result<Utf8PathBuf> {
    let dir = global.dir.clone().unwrap_or_else(|| Utf8PathBuf::from("."));
    let abs = system.absolute(&dir)?;
    if !system.is_dir(&abs) {
        return Err(fail(
            exit::ERROR,
            format!("project directory `{dir}` does not exist"),
        ));
    }
    if global.dir.is_none() && global.config.is_none() {
        let found = terraci_db::config::find_config_upward(system, &abs);
        if let Some(root) = found.as_deref().and_then(Utf8Path::parent) {
            return Ok(root.to_owned());
        }
    }
    Ok(abs)
}

/// Discovers and loads the project, computes every module's facts and references on all
/// cores, and starts writing the fact cache on another thread: the caller goes on with
/// the graph meanwhile and calls [`Workspace::wait_for_cache`] before printing notices.
/// `start` holds what the caller already knows of the project (see [`Start`]).
pub(crate) fn load_workspace_overlapped(
    system: &dyn System,
    global: &GlobalArgs,
    eval: &EvalArgs,
    start: Start,
) -> anyhow::Result<Workspace> {
    // Before any file is read: the fact cache keeps the stamps of versions that had
    // settled by then.
    let started = system.now();
    let root = project_dir(system, global)?;
    let config = match start.config {
        Some(config) => config,
        None => {
            let config_path = find_config_file(system, &root, global.config.as_deref());
            load_config(system, config_path.as_deref()).map_err(exit::coded)?
        }
    };
    let mut diagnostics = config_diagnostics(&config);
    let policy = terraci_db::system::ReadPolicy::new(system, &root, global.max_file_size);
    let mut cache =
        terraci_db::store::CacheSettings::new(&root, global.no_cache, global.cache_dir.as_deref());
    if let Some(settings) = &cache {
        settings
            .check(system, &root)
            .map_err(|why| fail(why.exit_code(), why.to_string()))?;
        if let Some(warning) = committed_cache(system, settings, &root) {
            diagnostics.push(warning);
            cache = None;
        }
    }
    // The walk beside the loads of the caches, which discovery needs (it does not read
    // a file the cache knows by its stamp): the caches are read while the tree is listed.
    let given = start.layout;
    // The memo's stamps are those of `given`'s files, position by position; never of
    // another walk's.
    let memo_stamps = start.stamps.filter(|stamps| {
        given
            .as_ref()
            .is_some_and(|l| l.files().count() == stamps.len())
    });
    let (layout, loaded) = rayon::join(
        || given.unwrap_or_else(|| walk(system, &root)),
        || {
            cache.as_ref().map(|settings| {
                rayon::join(
                    || terraci_engine::cache::load(system, settings),
                    || terraci_engine::resolve::summary::load(system, settings),
                )
            })
        },
    );
    let index = start
        .index
        .unwrap_or_else(|| crate::git_index::LazyIndex::new(&root));
    index.expect_files(layout.files().count());
    let walked =
        (start.keep_layout && layout.diagnostics.is_empty()).then(|| layout.module_dirs.clone());
    let mut notices = Vec::new();
    let caches = loaded.map(|(facts, summaries)| {
        let facts = facts.unwrap_or_else(|notice| {
            notices.push(notice);
            terraci_engine::cache::Entries::default()
        });
        let summaries = summaries.unwrap_or_else(|notice| {
            notices.push(notice);
            terraci_engine::resolve::summary::Summaries::default()
        });
        (Arc::new(facts), Arc::new(summaries))
    });
    let (known, summaries) = caches.unzip();
    let source = Arc::new(terraci_db::files::TextSource {
        system: system.shared(),
        policy: policy.clone(),
    });
    // A file the fingerprint check just stamped is not stamped again.
    let moved = start.moved.as_deref();
    let memo_stamps = memo_stamps.as_ref();
    // Files the cache answered by their stamp alone: the writer need not look at them.
    let by_stamp = std::sync::atomic::AtomicUsize::new(0);
    let unread = |at: usize, path: &str, kind, abs: &camino::Utf8Path| {
        let (contents, stamp, same) = known.as_ref()?.unread(
            path,
            kind,
            abs,
            &source,
            || {
                moved
                    .and_then(|m| m.link_stamp(path))
                    .or_else(|| memo_stamps?.get(at).copied())
                    .or_else(|| system.link_stamp(abs))
            },
            |now| index.after_miss(path, now),
        )?;
        if same {
            by_stamp.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
        Some((contents, stamp))
    };
    let discovered = discover_in(
        system,
        &policy,
        layout,
        &config.pattern,
        &config.config.library_modules.paths,
        known
            .is_some()
            .then_some(&unread as terraci_engine::discover::Known<'_>),
        // Texts kept to the end are kept as read: holding them costs a hash each.
        (!start.keep_texts).then_some(&source),
    );
    diagnostics.extend(discovered.diagnostics);

    let repository = repository_policy(system, &root, global.max_file_size);
    let eval_settings = eval_settings(system, eval, &repository)?;
    let mut db = Database::with_system(system.shared(), repository);
    let mut modules = BTreeMap::new();
    let stamps: Vec<(String, Option<terraci_db::system::Stamp>)> = discovered
        .modules
        .iter()
        .flat_map(|m| {
            m.files
                .iter()
                .map(|f| (f.path.as_str().to_owned(), f.stamp))
        })
        .collect();
    let (module_inputs, _) = set_module_inputs(&mut db, discovered.modules, &mut modules);
    let project = Project::builder(
        root.clone(),
        Arc::new(config.config.clone()),
        config.pattern.clone(),
        module_inputs,
        eval_settings,
        None,
    )
    .durability(salsa::Durability::HIGH)
    .new(&db);
    if let Some(entries) = known {
        terraci_engine::cache::attach(&db, entries);
    }
    if let Some(entries) = summaries {
        terraci_engine::resolve::summary::attach(&db, entries);
    }
    crate::parallel::warm_up(&mut db, project, start.keep_texts);
    let stamps = Arc::new(stamps);
    let saving = PendingSave(cache.map(|settings| {
        // A clone of the database shares the memos: the writer reads the facts that
        // warm-up computed while this thread goes on to the graph. What it needs of the
        // 30,000 paths of a 10,000-module project (the files, the settled stamps) it
        // borrows there: nothing is copied on this thread.
        let (db, system, stamps) = (db.clone(), system.shared(), stamps.clone());
        let index = index.clone();
        let by_stamp = by_stamp.into_inner();
        std::thread::spawn(move || {
            if !terraci_engine::cache::may_rewrite(&db, stamps.len(), by_stamp) {
                return save_summaries(&db, &*system, &settings, project);
            }
            // Every module's files, by path (borrowed from the inputs, not copied).
            let mut files: Vec<(&str, File)> = project
                .modules(&db)
                .iter()
                .flat_map(|&m| m.files(&db).iter().map(|&f| (f.path(&db).as_str(), f)))
                .collect();
            files.sort_unstable_by(|a, b| a.0.cmp(b.0));
            let settled = stamps
                .iter()
                .filter_map(|(path, stamp)| {
                    let stamp = stamp.filter(|s| s.settled_before(started))?;
                    Some((path.as_str(), stamp))
                })
                .collect();
            // The blob of the version read, for the entries written (asked only when the
            // cache is rewritten or stamps moved: it may read git's index).
            let read: std::sync::OnceLock<std::collections::HashMap<&str, _>> =
                std::sync::OnceLock::new();
            let blob_of = |path: &str| {
                let read = read.get_or_init(|| {
                    stamps
                        .iter()
                        .filter_map(|(path, stamp)| Some((path.as_str(), (*stamp)?)))
                        .collect()
                });
                index.clean_blob(path, read.get(path)?)
            };
            if let Err(e) =
                terraci_engine::cache::save(&db, &*system, &settings, &files, &settled, &blob_of)
            {
                return Some(format!(
                    "cannot write the fact cache in `{}`: {e}",
                    settings.dir
                ));
            }
            save_summaries(&db, &*system, &settings, project)
        })
    }));
    Ok(Workspace {
        db,
        project,
        root,
        policy,
        config,
        modules,
        diagnostics,
        notices,
        stamps,
        index,
        walked,
        notes: global.verbose > 0,
        color: use_color(system, global.color),
        saving,
    })
}

/// Writes the summary cache after the fact cache ([`load_workspace_overlapped`]'s
/// writer); `Some` is the notice of a failure.
fn save_summaries(
    db: &Database,
    system: &dyn System,
    settings: &terraci_db::store::CacheSettings,
    project: Project,
) -> Option<String> {
    // What a summary read outside the modules is not in its key.
    if db.reads_outside_modules() {
        return None;
    }
    terraci_engine::resolve::summary::save(db, system, settings, project)
        .err()
        .map(|e| format!("cannot write the fact cache in `{}`: {e}", settings.dir))
}

/// A `committed-cache` warning when git tracks a file of the cache dir. CRC-sealed is not
/// authenticated: a `facts.bin` or `summaries.bin` a merge request commits can claim facts
/// for real file contents (a dependency the files do not declare), so such a cache is
/// neither read nor written in this run. Asked of git only when one of them exists below
/// the project (a `--cache-dir` elsewhere is the runner's); with `--from-commit`, asked
/// of the commit the project is read from.
pub(crate) fn committed_cache(
    system: &dyn System,
    settings: &terraci_db::store::CacheSettings,
    root: &camino::Utf8Path,
) -> Option<Diagnostic> {
    let files: Vec<camino::Utf8PathBuf> = [
        terraci_db::store::FACTS_FILE_NAME,
        terraci_db::store::SUMMARY_FILE_NAME,
        terraci_db::store::WALK_FILE_NAME,
    ]
    .iter()
    .map(|name| settings.dir.join(name))
    .filter(|path| path.starts_with(root) && system.is_file(path))
    .collect();
    if files.is_empty() {
        return None;
    }
    // With `--from-commit` the commit answers (git's index is not read).
    let committed: Option<Vec<(&camino::Utf8PathBuf, bool)>> = files
        .iter()
        .map(|file| Some((file, system.committed(file)?)))
        .collect();
    let tracked: Vec<camino::Utf8PathBuf> = match committed {
        Some(held) => held
            .into_iter()
            .filter(|(_, held)| *held)
            .map(|(file, _)| file.clone())
            .collect(),
        None => terraci_vcs::tracked_files(root, &files),
    };
    let first = tracked.first()?;
    let shown = first.strip_prefix(root).unwrap_or(first);
    Some(Diagnostic::warning(
        Code::CommittedCache,
        format!(
            "`{}` is tracked by git: a cache in the repository is whoever committed it, not \
             terraci's, so this run neither reads nor writes the cache; remove it from git \
             (`git rm -r --cached {}`) and ignore it",
            terraci_db::escape::printable(shown.as_str()),
            terraci_db::escape::sh_word(
                settings
                    .dir
                    .strip_prefix(root)
                    .unwrap_or(&settings.dir)
                    .as_str()
            ),
        ),
    ))
}

/// `--color`: `auto` colours a terminal's stderr unless `NO_COLOR` is set.
pub(crate) fn use_color(system: &dyn System, choice: crate::cli::ColorChoice) -> bool {
    use crate::cli::ColorChoice;
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            system.env_var("NO_COLOR").is_none_or(|v| v.is_empty()) && system.stderr_is_terminal()
        }
    }
}

/// The files below `root` that `keep` wants (project-relative, in name order), for the
/// readers of text beside the modules (`init`'s evidence, the tfvars hint): no symlink
/// is followed or listed, hidden directories are skipped but those `enter_hidden`
/// names (`.github`), and so are `node_modules` and what lies deeper than `max_depth`.
pub(crate) fn files_below(
    system: &dyn System,
    root: &Utf8Path,
    max_depth: usize,
    enter_hidden: &[&str],
    keep: &dyn Fn(&str) -> bool,
) -> Vec<String> {
    fn walk(
        system: &dyn System,
        root: &Utf8Path,
        rel: &str,
        walk_in: &dyn Fn(&str, &str) -> bool,
        keep: &dyn Fn(&str) -> bool,
        out: &mut Vec<String>,
    ) {
        let Ok(mut entries) = system.read_dir(&root.join(rel)) else {
            return;
        };
        entries.sort_by(|a, b| a.name.cmp(&b.name));
        for entry in entries {
            let child = match rel {
                "" => entry.name.clone(),
                _ => format!("{rel}/{}", entry.name),
            };
            match entry.kind {
                terraci_db::system::EntryKind::Dir if walk_in(&entry.name, &child) => {
                    walk(system, root, &child, walk_in, keep, out);
                }
                terraci_db::system::EntryKind::File if keep(&child) => out.push(child),
                _ => {}
            }
        }
    }
    let walk_in = |name: &str, rel: &str| {
        name != "node_modules"
            && (!name.starts_with('.') || enter_hidden.contains(&rel))
            && rel.matches('/').count() < max_depth
    };
    let mut out = Vec::new();
    walk(system, root, "", &walk_in, keep, &mut out);
    out
}

/// Loads a workspace with its fact cache written (see [`load_workspace_overlapped`]).
pub fn load_workspace(
    system: &dyn System,
    global: &GlobalArgs,
    eval: &EvalArgs,
) -> anyhow::Result<Workspace> {
    let mut ws = load_workspace_overlapped(system, global, eval, Start::default())?;
    ws.wait_for_cache();
    Ok(ws)
}

/// The fact cache being written on another thread; joined by
/// [`Workspace::wait_for_cache`], by [`Workspace::dismiss`] or when dropped, so the
/// process never exits halfway through the write.
pub(crate) struct PendingSave(Option<std::thread::JoinHandle<Option<String>>>);

impl PendingSave {
    /// Waits for the writer; its notice if the cache could not be written.
    fn join(&mut self) -> Option<String> {
        let handle = self.0.take()?;
        match handle.join() {
            Ok(notice) => notice,
            Err(_) => Some("the fact cache writer failed; the cache was not updated".into()),
        }
    }
}

impl Drop for PendingSave {
    fn drop(&mut self) {
        let _ = self.join();
    }
}

/// The config's warnings as diagnostics.
pub(crate) fn config_diagnostics(config: &LoadedConfig) -> Vec<Diagnostic> {
    config
        .warnings
        .iter()
        .map(|w| Diagnostic::warning(Code::ConfigWarning, w.clone()))
        .collect()
}

/// What terraci reads from the repository of the project at `root`: files whose real
/// path lies inside the enclosing git work tree (else the project), of at most `max_len`
/// bytes.
pub(crate) fn repository_policy(
    system: &dyn System,
    root: &Utf8Path,
    max_len: u64,
) -> terraci_db::system::ReadPolicy {
    terraci_db::system::ReadPolicy::new(
        system,
        &terraci_vcs::repository_root(system, root),
        max_len,
    )
}

/// `--workspace`, `--var-file` (read now, under the rules of `variables.files`: see
/// [`terraci_db::system::read_named_file`]) and `--var` as an input value.
pub fn eval_settings(
    system: &dyn System,
    eval: &EvalArgs,
    repository: &terraci_db::system::ReadPolicy,
) -> anyhow::Result<EvalSettings> {
    let mut var_files = Vec::new();
    for f in &eval.var_file {
        let bytes = terraci_db::system::read_named_file(system, repository, &system.absolute(f)?)
            .map_err(|e| fail(exit::ERROR, format!("cannot read --var-file {f}: {e}")))?;
        let text = String::from_utf8(bytes).map_err(|_| anyhow!("--var-file {f} is not UTF-8"))?;
        if let Err(e) = terraci_engine::resolve::var_file_assignments(f.as_str(), &text) {
            return Err(fail(exit::ERROR, format!("--var-file {f}:{e}")));
        }
        var_files.push((f.to_string(), text));
    }
    let mut vars = Vec::new();
    for v in &eval.var {
        let (name, value) = v
            .split_once('=')
            .ok_or_else(|| fail(exit::USAGE, format!("--var `{v}`: expected NAME=VALUE")))?;
        vars.push((name.to_owned(), value.to_owned()));
    }
    Ok(EvalSettings {
        workspace: eval.workspace.clone(),
        var_files,
        vars,
    })
}

/// Sets discovered modules as inputs and returns them in id order, with whether any
/// input was created or changed. A path already in the database's registry or an id in
/// `modules` keeps its input, updated only where it differs, so its memos stay valid
/// (watch mode re-runs discovery on the same database); the registry and `modules` end
/// up holding exactly what was discovered.
/// Inputs start out `HIGH` durability: a file the user has not touched in this process is
/// unlikely to change. An edit sets the file `LOW`, so after its first edit, salsa
/// checks the memos that read only untouched files in O(1) each instead of walking
/// their dependencies (the first edit of a file still walks them once: it was `HIGH`).
fn set_module_inputs(
    db: &mut Database,
    discovered: Vec<DiscoveredModule>,
    modules: &mut BTreeMap<String, Module>,
) -> (Vec<Module>, bool) {
    let mut old_files = db.take_module_files();
    // Collected, then each map built in one go (sorted once, then filled without a
    // search per key): inserted one by one, 30,000 paths took a third of this step.
    let mut files = Vec::new();
    let mut old_modules = std::mem::take(modules);
    let mut list = Vec::with_capacity(discovered.len());
    let mut built = Vec::with_capacity(discovered.len());
    let mut changed = false;
    for m in discovered {
        let file_inputs: Vec<File> = m
            .files
            .into_iter()
            .map(|f| {
                let key = f.path.to_string();
                let file = match old_files.remove(&key) {
                    Some(file) => {
                        if file.kind(db) != f.kind {
                            file.set_kind(db).to(f.kind);
                            changed = true;
                        }
                        if *file.contents(db) != f.contents {
                            file.set_contents(db)
                                .with_durability(salsa::Durability::LOW)
                                .to(f.contents);
                            changed = true;
                        }
                        file
                    }
                    None => {
                        changed = true;
                        File::builder(f.path, f.kind, f.contents)
                            .durability(salsa::Durability::HIGH)
                            .new(db)
                    }
                };
                files.push((key, file));
                file
            })
            .collect();
        let id = m.info.id.clone();
        let module = match old_modules.remove(&id) {
            Some(module) => {
                if *module.info(db) != m.info {
                    module.set_info(db).to(m.info);
                    changed = true;
                }
                if *module.files(db) != file_inputs {
                    module.set_files(db).to(file_inputs);
                    changed = true;
                }
                module
            }
            None => {
                changed = true;
                Module::builder(m.info, file_inputs)
                    .durability(salsa::Durability::HIGH)
                    .new(db)
            }
        };
        built.push((id, module));
        list.push(module);
    }
    *modules = built.into_iter().collect();
    let files: BTreeMap<String, File> = files.into_iter().collect();
    db.put_module_files(files);
    (list, changed || !old_modules.is_empty())
}

impl Workspace {
    /// Ends a one-shot command without tearing the database down: the process exits
    /// next, and freeing every memo one by one cost a sixth of a cold run.
    pub(crate) fn dismiss(mut self) {
        self.wait_for_cache();
        std::mem::forget(self);
    }

    /// What a run record of this run needs ([`crate::replay`]): the stamps of the files
    /// read, unless a query read files outside the modules' (`file()`, `fileset()`), and
    /// the cache notices printed. Waits for the fact cache first. `by_contents`: the run's
    /// key names the project's whole contents ([`terraci_db::system::System::contents_id`]);
    /// when every file read is stamped with its object id the record lists no files
    /// ([`crate::replay::RunKey::save`]), and no list is made.
    pub(crate) fn take_run_inputs(&mut self, by_contents: bool) -> (Option<RunFiles>, Vec<String>) {
        self.wait_for_cache();
        let replayable = !self.db.reads_outside_modules();
        // The cache writer, joined above, has let go of its handle.
        let stamps = replayable.then(|| {
            if crate::replay::lists_no_files(by_contents, self.stamps.iter().map(|(_, s)| s)) {
                return Vec::new();
            }
            let stamps = std::mem::take(&mut self.stamps);
            let stamps = Arc::try_unwrap(stamps).unwrap_or_else(|shared| (*shared).clone());
            stamps
                .into_iter()
                .map(|(path, stamp)| {
                    let blob = stamp.and_then(|s| self.index.if_read(&path, &s));
                    (path, stamp, blob)
                })
                .collect()
        });
        (stamps, std::mem::take(&mut self.notices))
    }

    /// Waits until the fact cache is written; a failure becomes a notice.
    pub(crate) fn wait_for_cache(&mut self) {
        if let Some(notice) = self.saving.join() {
            self.notices.push(notice);
        }
    }

    /// Resolves anchors to positions, sorts and deduplicates.
    pub(crate) fn finish_diagnostics(
        &self,
        diags: impl IntoIterator<Item = Diagnostic>,
    ) -> Vec<Diagnostic> {
        let mut out: Vec<Diagnostic> = diags
            .into_iter()
            // Notes (a module call terraci cannot follow...) are for `-v`.
            .filter(|d| self.notes || d.severity != Severity::Info)
            .map(|mut d| {
                if let Some(anchor) = d.anchor.take() {
                    d.file = Some(anchor.file.path(&self.db).to_string());
                    if let Some((line, col)) = terraci_engine::parse::locate(&self.db, &anchor) {
                        d.line = Some(line);
                        d.column = Some(col);
                    }
                }
                d
            })
            .collect();
        out.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
        out.dedup();
        out
    }

    /// Every diagnostic of the project: discovery, facts, scopes, resolution, with the
    /// hints that read files the inputs do not hold (the tfvars that set a missing
    /// variable: a walk of the tree when such a diagnostic exists).
    pub(crate) fn all_diagnostics(&self) -> Vec<Diagnostic> {
        let mut all = self.diagnostics_without_hints();
        if let Some((system, policy)) = self.db.system_reader() {
            tfvars_hint::add_hints(system, &self.root, policy, &mut all);
        }
        all
    }

    /// The checks that read the text of the modules' files again, which a run with the
    /// fact cache otherwise does not read: `unknown-remote-output`, for `validate` and
    /// the language server.
    pub(crate) fn text_diagnostics(&self) -> Vec<Diagnostic> {
        self.finish_diagnostics(terraci_engine::symbols::project_unknown_remote_outputs(
            &self.db,
            self.project,
        ))
    }

    /// [`Workspace::all_diagnostics`] without the hints: `watch` runs on every save,
    /// where a walk of the tree per batch would cost more than the regeneration (80 ms
    /// at 10,000 modules); `validate` gives them.
    pub(crate) fn diagnostics_without_hints(&self) -> Vec<Diagnostic> {
        let db = &self.db;
        let mut all = self.diagnostics.clone();
        for chunk in terraci_engine::chunk::chunks(db, self.project) {
            all.extend(
                terraci_engine::resolve::chunk_diagnostics(db, chunk)
                    .iter()
                    .cloned(),
            );
        }
        all.extend(
            dependency_graph(db, self.project)
                .diagnostics
                .iter()
                .cloned(),
        );
        all.extend(terraci_engine::resolve::config_rule_diagnostics(
            db,
            self.project,
        ));
        terraci_engine::resolve::group_root_causes(self.finish_diagnostics(all))
    }

    /// Refuses a project in which the pattern finds no module (TerraCi: "no modules
    /// found"): a pattern deeper than the tree would otherwise give an empty pipeline
    /// that passes CI while planning nothing. The message names the pattern and the
    /// deepest directories that hold Terraform files.
    pub(crate) fn require_modules(&self) -> anyhow::Result<()> {
        let infos: Vec<&ModuleInfo> = self
            .project
            .modules(&self.db)
            .iter()
            .map(|m| m.info(&self.db))
            .collect();
        if infos.iter().any(|i| i.is_root()) {
            return Ok(());
        }
        let pattern = &self.config.pattern;
        let levels = |n: usize| {
            if n == 1 {
                "1 level".to_owned()
            } else {
                format!("{n} levels")
            }
        };
        let mut message = format!(
            "no modules found: pattern `{pattern}` needs module directories {} deep",
            levels(pattern.depth())
        );
        let depth = |i: &&ModuleInfo| i.id.split('/').count();
        match infos.iter().map(depth).max() {
            None => message.push_str(
                ", and no directory holds Terraform files (`*.tf`, `*.tf.json`, `*.tofu`, `*.tofu.json`)",
            ),
            Some(deepest) => {
                let dirs: Vec<String> = infos
                    .iter()
                    .filter(|i| depth(i) == deepest)
                    .map(|i| format!("`{}`", i.id))
                    .collect();
                let shown = dirs.len().min(5);
                let more = match dirs.len() - shown {
                    0 => String::new(),
                    n => format!(" and {n} more"),
                };
                message.push_str(&format!(
                    "; the deepest directories with Terraform files are {} deep: {}{more}",
                    levels(deepest),
                    dirs[..shown].join(", ")
                ));
                let ids: Vec<&str> = infos
                    .iter()
                    .map(|i| i.id.as_str())
                    .filter(|id| !id.is_empty())
                    .collect();
                if let Some(p) = terraci_engine::discover::propose_pattern(&ids) {
                    // With no config file, `init` writes one (and reads the tree).
                    let init = match &self.config.path {
                        Some(_) => "terraci init --force",
                        None => "terraci init",
                    };
                    message.push_str(&format!(
                        "; the pattern `{}` fits this tree (`{init}` writes it)",
                        p.pattern
                    ));
                }
            }
        }
        Err(fail(exit::ERROR, message))
    }

    /// Refuses filters that leave no root module (TerraCi refuses an `--include` that
    /// matches nothing too): an empty pipeline would pass CI while planning nothing. The
    /// message names the filters and how many modules they were applied to.
    pub(crate) fn require_selected(&self, filters: &Filters) -> anyhow::Result<()> {
        let db = &self.db;
        let roots: Vec<&ModuleInfo> = self
            .project
            .modules(db)
            .iter()
            .map(|m| m.info(db))
            .filter(|i| i.is_root())
            .collect();
        if roots.is_empty() || roots.iter().any(|i| filters.allows(&i.id, &i.components)) {
            return Ok(());
        }
        let mut parts = Vec::new();
        let quoted = |v: &[String]| {
            v.iter()
                .map(|g| format!("`{}`", terraci_db::escape::printable(g)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        if !filters.include.is_empty() {
            parts.push(format!("include {}", quoted(&filters.include)));
        }
        if !filters.exclude.is_empty() {
            parts.push(format!("exclude {}", quoted(&filters.exclude)));
        }
        for (key, values) in &filters.segments {
            let values: Vec<String> = values.iter().map(|v| format!("{key}={v}")).collect();
            parts.push(format!("filter {}", quoted(&values)));
        }
        Err(fail(
            exit::ERROR,
            format!(
                "no module matches the filters ({}): none of the {} modules is selected",
                parts.join("; "),
                roots.len()
            ),
        ))
    }

    fn source_line(&self, d: &Diagnostic) -> Option<String> {
        let file = self.db.module_file(d.file.as_deref()?)?;
        let text = file.contents(&self.db).text()?;
        // A byte order mark has no column: the caret is placed as if it were not there.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let line = d.line? as usize;
        text.lines().nth(line.checked_sub(1)?).map(str::to_owned)
    }

    pub(crate) fn print_diagnostics(
        &self,
        diags: &[Diagnostic],
        quiet: bool,
        err: &mut dyn Write,
    ) -> std::io::Result<()> {
        if !quiet {
            for n in &self.notices {
                writeln!(err, "notice: {n}")?;
            }
        }
        for d in diags {
            if quiet && d.severity != Severity::Error {
                continue;
            }
            write!(
                err,
                "{}",
                d.render_human_styled(self.source_line(d).as_deref(), self.color)
            )?;
        }
        Ok(())
    }

    /// An `unsafe-name` error for each root module that gets no jobs because its path is
    /// one the provider cannot write safely ([`terraci_engine::ir::PlanOptions::refuses`]).
    pub(crate) fn refused_for_names(
        &self,
        options: terraci_engine::ir::PlanOptions,
    ) -> Vec<Diagnostic> {
        let db = &self.db;
        self.project
            .modules(db)
            .iter()
            .map(|m| m.info(db))
            .filter(|i| i.is_root() && options.refuses(&i.id))
            .map(|i| {
                let why =
                    if options.refuse_expressions && !terraci_engine::ir::holds_expression(&i.id) {
                        "its path holds a line break, and GitHub's upload-artifact reads each line \
                     of its `path` as a pattern of its own (a directory named by the first \
                     line would be uploaded whole)"
                    } else if options.refuse_expressions {
                        "its path holds `${{`, which GitHub evaluates as an expression and which \
                     cannot be escaped"
                    } else {
                        "its path holds a GitLab variable reference (`$NAME` or `${...}`), which \
                     GitLab expands in artifact and cache paths and resource groups, with no \
                     documented escape"
                    };
                Diagnostic::error(
                    Code::UnsafeName,
                    format!("the module gets no jobs: {why}; rename the directory"),
                )
                .with_module(i.id.clone())
            })
            .collect()
    }

    /// The graph as the renderers print it. `sources`: each edge's and external
    /// reference's source block with its file and line, which only the JSON formats
    /// print; finding a line parses the file with spans (the full parser, which nothing
    /// else of a run needs), so the text formats go without.
    pub(crate) fn graph_view(&self, diagnostics: Vec<Diagnostic>, sources: bool) -> GraphView {
        let db = &self.db;
        let with_sources = sources;
        let graph = dependency_graph(db, self.project);
        let mut locator = terraci_engine::parse::Locator::default();
        let modules: Vec<ModuleView> = self
            .project
            .modules(db)
            .iter()
            .map(|m| m.info(db))
            .filter(|i| i.role != Role::Plain)
            .map(|i| ModuleView {
                id: i.id.clone(),
                path: i.id.clone(),
                components: i.components.clone(),
                library: i.role == Role::Library,
                submodule: i.submodule.is_some(),
            })
            .collect();
        let edges = terraci_engine::graph::edge_sources(db, self.project);
        let edges = if with_sources {
            // Each worker parses the files it locates in (hcl-edit, with spans): at
            // 10,000 modules that was a third of `graph --format json` on one core.
            crate::parallel::map_ordered(
                &self.db,
                edges,
                |db, locator: &mut terraci_engine::parse::Locator, ((from, to), sources)| {
                    EdgeView {
                        from,
                        to,
                        sources: sources
                            .iter()
                            .map(|s| source_view(db, locator, s))
                            .collect(),
                    }
                },
            )
        } else {
            edges
                .into_iter()
                .map(|((from, to), _)| EdgeView {
                    from,
                    to,
                    sources: Vec::new(),
                })
                .collect()
        };
        let shown: BTreeSet<&str> = modules.iter().map(|m| m.id.as_str()).collect();
        let uses = terraci_engine::changes::library_links(db, self.project)
            .iter()
            .flat_map(|(from, tos)| tos.iter().map(move |to| (from, to)))
            .filter(|(from, to)| shown.contains(from.as_str()) && shown.contains(to.as_str()))
            .map(|(from, to)| (from.clone(), to.clone()))
            .collect();
        let roots = terraci_engine::chunk::roots(db, self.project);
        let external_state = if !with_sources {
            Vec::new()
        } else {
            roots
                .ids
                .iter()
                .zip(&roots.modules)
                .flat_map(|(id, &m)| {
                    terraci_engine::resolve::resolved_dependencies(db, self.project, m)
                        .external
                        .iter()
                        .map(move |(state, s)| (id, state, s))
                })
                .map(|(id, state, s)| ExternalView {
                    from: id.clone(),
                    state: state.clone(),
                    source: source_view(db, &mut locator, s),
                })
                .collect()
        };
        GraphView {
            modules,
            edges,
            external_state,
            levels: graph.levels(),
            cycles: graph.cycles.clone(),
            diagnostics,
            uses,
        }
    }

    pub fn filters(&self, select: &SelectArgs) -> anyhow::Result<Filters> {
        let mut filters = Filters {
            exclude: self.config.config.exclude.clone(),
            include: self.config.config.include.clone(),
            segments: BTreeMap::new(),
        };
        filters.exclude.extend(select.exclude.iter().cloned());
        filters.include.extend(select.include.iter().cloned());
        for f in &select.filter {
            filters
                .add_segment_filter(f, self.config.pattern.segments())
                .map_err(exit::coded)?;
        }
        Ok(filters)
    }
}

/// Where an edge (or an external reference) came from, for the JSON views.
fn source_view(
    db: &dyn terraci_db::db::Db,
    locator: &mut terraci_engine::parse::Locator,
    s: &terraci_engine::resolve::EdgeSource,
) -> SourceView {
    SourceView {
        name: s.name.clone(),
        file: s
            .anchor
            .as_ref()
            .map_or(".terraci.yaml".to_owned(), |a| a.file.path(db).to_string()),
        line: s
            .anchor
            .as_ref()
            .and_then(|a| locator.locate(db, a))
            .map_or(0, |(l, _)| l),
        rule: s.rule.as_str(),
        via: s.via.clone(),
    }
}
