//! The driver: config -> database inputs -> queries -> rendering -> output.
//!
//! All IO goes through the `System` and the two writers; every stage below returns values
//! (including diagnostics) that are rendered here, once.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::sync::Arc;

use anyhow::{anyhow, Context as _};
use camino::{Utf8Path, Utf8PathBuf};
use salsa::Setter as _;

use crate::cli::{
    ChangeArgs, Cli, Command, EvalArgs, ExecMode, GenerateArgs, GlobalArgs, GraphArgs, GraphFormat,
    LocalExecArgs, OutputFormat, PipelineArgs, SelectArgs, ValidateArgs, WatchArgs,
};
use crate::config::{find_config_file, load_config, LoadedConfig};
use crate::db::Database;
use crate::diagnostic::{Diagnostic, Severity, CODES};
use crate::discover::{discover_in, walk, DiscoveredModule};
use crate::files::{ChangeInput, EvalSettings, File, Module, ModuleInfo, Project, Role, Selection};
use crate::filter::Filters;
use crate::graph::dependency_graph;
use crate::ir::{job_plan, PlanOptions};
use crate::render::graph::{
    diagnostic_json, render_dot, render_json, render_levels, render_list, render_mermaid,
    render_plantuml, render_stats, EdgeView, ExternalView, GraphView, ModuleView, SourceView,
};
use crate::system::System;

/// Process exit codes (spec §8).
pub mod exit {
    pub const OK: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const USAGE: u8 = 2;
    pub const VALIDATION: u8 = 3;
}

/// An error that carries its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

fn fail(code: u8, message: impl Into<String>) -> anyhow::Error {
    Failure {
        code,
        message: message.into(),
    }
    .into()
}

pub struct Io<'a> {
    pub system: &'a dyn System,
    pub stdout: &'a mut dyn Write,
    pub stderr: &'a mut dyn Write,
    /// The command line as typed, for the generated file's header.
    pub argv: Vec<String>,
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli, io: &mut Io<'_>) -> u8 {
    match dispatch(cli, io) {
        Ok(code) => code,
        // The reader of stdout went away (`terraci generate | head -1`): nothing is
        // wrong with the run, and there is no one left to tell.
        Err(err)
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            exit::OK
        }
        Err(err) => {
            let code = err
                .downcast_ref::<Failure>()
                .map_or(exit::ERROR, |f| f.code);
            let _ = writeln!(io.stderr, "error: {err:#}");
            code
        }
    }
}

fn dispatch(cli: Cli, io: &mut Io<'_>) -> anyhow::Result<u8> {
    match &cli.command {
        Command::Version => {
            writeln!(io.stdout, "terraci {}", env!("CARGO_PKG_VERSION"))?;
            Ok(exit::OK)
        }
        Command::ExplainCodes => {
            for (code, text) in CODES {
                writeln!(io.stdout, "{code:<26} {text}")?;
            }
            Ok(exit::OK)
        }
        Command::Generate(args) => generate(&cli.global, args, io),
        Command::Watch(args) => watch(&cli.global, args, io),
        Command::Validate(args) => validate(&cli.global, args, io),
        Command::Graph(args) => graph(&cli.global, args, io),
        Command::LocalExec(args) => local_exec(&cli.global, args, io),
        Command::Init(args) => init(&cli.global, args, io),
        Command::Schema(args) => schema(args, io),
        Command::Completion(args) => completion(args, io),
    }
}

fn init(global: &GlobalArgs, args: &crate::cli::InitArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let dir = project_dir(io.system, global)?;
    crate::init::init(io.system, &dir, global, args, io.stdout, io.stderr)
        .map_err(|e| fail(e.exit_code(), e.to_string()))?;
    Ok(exit::OK)
}

fn schema(args: &crate::cli::SchemaArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    write_output(io, args.output.as_deref(), &crate::config::config_schema())?;
    Ok(exit::OK)
}

fn completion(args: &crate::cli::CompletionArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(args.shell, &mut cmd, "terraci", io.stdout);
    Ok(exit::OK)
}

/// A loaded project: the database with every input set.
pub struct Workspace {
    pub db: Database,
    pub project: Project,
    pub root: Utf8PathBuf,
    /// What discovery may read: regular files inside `root`.
    pub policy: crate::system::ReadPolicy,
    pub config: LoadedConfig,
    /// Project-relative path -> file input.
    pub files: BTreeMap<String, File>,
    pub modules: BTreeMap<String, Module>,
    /// Discovery and config diagnostics (outside queries).
    pub diagnostics: Vec<Diagnostic>,
    /// Notes for stderr that are not diagnostics (an unusable fact cache).
    pub notices: Vec<String>,
    /// Every file read, project-relative, with the version read where the system can
    /// stamp it (for [`crate::replay`]).
    pub stamps: Vec<(String, Option<crate::system::Stamp>)>,
    /// `-v`: info diagnostics (notes) are reported too.
    pub notes: bool,
    saving: PendingSave,
}

pub fn project_dir(system: &dyn System, global: &GlobalArgs) -> anyhow::Result<Utf8PathBuf> {
    let dir = global.dir.clone().unwrap_or_else(|| Utf8PathBuf::from("."));
    let abs = system.absolute(&dir)?;
    if !system.is_dir(&abs) {
        return Err(fail(
            exit::ERROR,
            format!("project directory `{dir}` does not exist"),
        ));
    }
    Ok(abs)
}

/// Discovers and loads the project, computes every module's facts and references on all
/// cores, and starts writing the fact cache on another thread: the caller goes on with
/// the graph meanwhile and calls [`Workspace::wait_for_cache`] before printing notices.
/// `layout` is a walk of the project directory already made (by the replay check).
pub fn load_workspace_overlapped(
    system: &dyn System,
    global: &GlobalArgs,
    eval: &EvalArgs,
    layout: Option<crate::discover::Layout>,
) -> anyhow::Result<Workspace> {
    let root = project_dir(system, global)?;
    let config_path = find_config_file(system, &root, global.config.as_deref());
    let config = load_config(system, config_path.as_deref())
        .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let mut diagnostics = config_diagnostics(&config);
    let layout = layout.unwrap_or_else(|| walk(system, &root));
    let policy = crate::system::ReadPolicy::new(system, &root, global.max_file_size);
    let discovered = discover_in(
        system,
        &policy,
        layout,
        &config.pattern,
        &config.config.library_modules.paths,
    );
    diagnostics.extend(discovered.diagnostics);

    let eval_settings = eval_settings(system, eval)?;
    let repository = crate::system::ReadPolicy::new(
        system,
        &crate::vcs::repository_root(system, &root),
        global.max_file_size,
    );
    let mut db = Database::with_system(system.shared(), repository);
    let mut files = BTreeMap::new();
    let mut modules = BTreeMap::new();
    let stamps = discovered
        .modules
        .iter()
        .flat_map(|m| m.files.iter().map(|f| (f.path.to_string(), f.stamp)))
        .collect();
    let (module_inputs, _) =
        set_module_inputs(&mut db, discovered.modules, &mut files, &mut modules);
    let project = Project::builder(
        root.clone(),
        Arc::new(config.config.clone()),
        config.pattern.clone(),
        module_inputs,
        eval_settings,
        Arc::default(),
    )
    .durability(salsa::Durability::HIGH)
    .new(&db);
    let cache =
        crate::cache::CacheSettings::new(&root, global.no_cache, global.cache_dir.as_deref());
    if let Some(settings) = &cache {
        settings
            .check(system, &root)
            .map_err(|why| fail(exit::ERROR, why))?;
    }
    let mut notices = Vec::new();
    if let Some(settings) = &cache {
        notices.extend(crate::cache::attach(&db, system, settings));
    }
    crate::parallel::warm_up(&mut db, project);
    let saving = PendingSave(cache.map(|settings| {
        // A clone of the database shares the memos: the writer reads the facts that
        // warm-up computed while this thread goes on to the graph.
        let (db, files, system) = (db.clone(), files.clone(), system.shared());
        std::thread::spawn(move || {
            crate::cache::save(&db, &*system, &settings, &files)
                .err()
                .map(|e| format!("cannot write the fact cache in `{}`: {e}", settings.dir))
        })
    }));
    Ok(Workspace {
        db,
        project,
        root,
        policy,
        config,
        files,
        modules,
        diagnostics,
        notices,
        stamps,
        notes: global.verbose > 0,
        saving,
    })
}

/// Loads a workspace with its fact cache written (see [`load_workspace_overlapped`]).
pub fn load_workspace(
    system: &dyn System,
    global: &GlobalArgs,
    eval: &EvalArgs,
) -> anyhow::Result<Workspace> {
    let mut ws = load_workspace_overlapped(system, global, eval, None)?;
    ws.wait_for_cache();
    Ok(ws)
}

/// The fact cache being written on another thread; joined by
/// [`Workspace::wait_for_cache`], by [`Workspace::dismiss`] or when dropped, so the
/// process never exits halfway through the write.
pub struct PendingSave(Option<std::thread::JoinHandle<Option<String>>>);

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
pub fn config_diagnostics(config: &LoadedConfig) -> Vec<Diagnostic> {
    config
        .warnings
        .iter()
        .map(|w| Diagnostic::warning("config-warning", w.clone()))
        .collect()
}

/// `--workspace`, `--var-file` (read now) and `--var` as an input value.
pub fn eval_settings(system: &dyn System, eval: &EvalArgs) -> anyhow::Result<EvalSettings> {
    let mut var_files = Vec::new();
    for f in &eval.var_file {
        let bytes = system
            .read(&system.absolute(f)?)
            .with_context(|| format!("cannot read --var-file {f}"))?;
        let text = String::from_utf8(bytes).map_err(|_| anyhow!("--var-file {f} is not UTF-8"))?;
        if let Err(e) = crate::resolve::var_file_assignments(f.as_str(), &text) {
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
/// input was created or changed. A path or id already in `files`/`modules` keeps its
/// input, updated only where it differs, so its memos stay valid (watch mode re-runs
/// discovery on the same database); the maps end up holding exactly what was discovered.
/// Inputs start out `HIGH` durability: a file the user has not touched in this process is
/// unlikely to change. An edit sets the file `LOW`, so after its first edit, salsa
/// checks the memos that read only untouched files in O(1) each instead of walking
/// their dependencies (the first edit of a file still walks them once: it was `HIGH`).
pub fn set_module_inputs(
    db: &mut Database,
    discovered: Vec<DiscoveredModule>,
    files: &mut BTreeMap<String, File>,
    modules: &mut BTreeMap<String, Module>,
) -> (Vec<Module>, bool) {
    let mut old_files = std::mem::take(files);
    let mut old_modules = std::mem::take(modules);
    let mut list = Vec::with_capacity(discovered.len());
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
                files.insert(key, file);
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
        modules.insert(id, module);
        list.push(module);
    }
    (list, changed || !old_modules.is_empty())
}

impl Workspace {
    /// Ends a one-shot command without tearing the database down: the process exits
    /// next, and freeing every memo one by one cost a sixth of a cold run.
    pub fn dismiss(mut self) {
        self.wait_for_cache();
        std::mem::forget(self);
    }

    /// Waits until the fact cache is written; a failure becomes a notice.
    pub fn wait_for_cache(&mut self) {
        if let Some(notice) = self.saving.join() {
            self.notices.push(notice);
        }
    }

    /// Resolves anchors to positions, sorts and deduplicates.
    pub fn finish_diagnostics(
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
                    if let Some((line, col)) = crate::parse::locate(&self.db, &anchor) {
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

    /// Every diagnostic of the project: discovery, facts, scopes, resolution.
    pub fn all_diagnostics(&self) -> Vec<Diagnostic> {
        let db = &self.db;
        let mut all = self.diagnostics.clone();
        for chunk in crate::chunk::chunks(db, self.project) {
            all.extend(crate::chunk::chunk_diagnostics(db, chunk).iter().cloned());
        }
        all.extend(
            dependency_graph(db, self.project)
                .diagnostics
                .iter()
                .cloned(),
        );
        all.extend(crate::resolve::config_rule_diagnostics(db, self.project));
        crate::resolve::group_root_causes(self.finish_diagnostics(all))
    }

    /// Refuses a project in which the pattern finds no module (TerraCi: "no modules
    /// found"): a pattern deeper than the tree would otherwise give an empty pipeline
    /// that passes CI while planning nothing. The message names the pattern and the
    /// deepest directories that hold Terraform files.
    pub fn require_modules(&self) -> anyhow::Result<()> {
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
                if let Some(p) = crate::discover::propose_pattern(&ids) {
                    message.push_str(&format!(
                        "; the pattern `{}` fits this tree (`terraci init --force` writes it)",
                        p.pattern
                    ));
                }
            }
        }
        Err(fail(exit::ERROR, message))
    }

    fn source_line(&self, d: &Diagnostic) -> Option<String> {
        let file = self.files.get(d.file.as_deref()?)?;
        let text = file.contents(&self.db).text()?;
        // A byte order mark has no column: the caret is placed as if it were not there.
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        let line = d.line? as usize;
        text.lines().nth(line.checked_sub(1)?).map(str::to_owned)
    }

    pub fn print_diagnostics(
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
            write!(err, "{}", d.render_human(self.source_line(d).as_deref()))?;
        }
        Ok(())
    }

    /// An `unsafe-name` error for each root module that gets no jobs because its path is
    /// one the provider cannot write safely ([`crate::ir::PlanOptions::refuses`]).
    pub fn refused_for_names(&self, options: crate::ir::PlanOptions) -> Vec<Diagnostic> {
        let db = &self.db;
        self.project
            .modules(db)
            .iter()
            .map(|m| m.info(db))
            .filter(|i| i.is_root() && options.refuses(&i.id))
            .map(|i| {
                let why = if options.refuse_expressions {
                    "its path holds `${{`, which GitHub evaluates as an expression and which \
                     cannot be escaped"
                } else {
                    "its path holds a GitLab variable reference (`$NAME` or `${...}`), which \
                     GitLab expands in artifact and cache paths and resource groups, with no \
                     documented escape"
                };
                Diagnostic::error(
                    "unsafe-name",
                    format!("the module gets no jobs: {why}; rename the directory"),
                )
                .with_module(i.id.clone())
            })
            .collect()
    }

    pub fn graph_view(&self, diagnostics: Vec<Diagnostic>) -> GraphView {
        let db = &self.db;
        let graph = dependency_graph(db, self.project);
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
        let edges = crate::graph::edge_sources(db, self.project)
            .into_iter()
            .map(|((from, to), sources)| EdgeView {
                from,
                to,
                sources: sources.iter().map(|s| source_view(db, s)).collect(),
            })
            .collect();
        let shown: BTreeSet<&str> = modules.iter().map(|m| m.id.as_str()).collect();
        let uses = crate::changes::library_links(db, self.project)
            .iter()
            .flat_map(|(from, tos)| tos.iter().map(move |to| (from, to)))
            .filter(|(from, to)| shown.contains(from.as_str()) && shown.contains(to.as_str()))
            .map(|(from, to)| (from.clone(), to.clone()))
            .collect();
        let roots = crate::graph::roots(db, self.project);
        let external_state = roots
            .ids
            .iter()
            .zip(&roots.modules)
            .flat_map(|(id, &m)| {
                crate::resolve::resolved_dependencies(db, self.project, m)
                    .external
                    .iter()
                    .map(move |(state, s)| ExternalView {
                        from: id.clone(),
                        state: state.clone(),
                        source: source_view(db, s),
                    })
            })
            .collect();
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
                .map_err(|e| fail(exit::USAGE, e))?;
        }
        Ok(filters)
    }
}

pub fn cycle_text(cycles: &[Vec<String>]) -> String {
    let mut out = String::from("circular dependency detected");
    for c in cycles {
        let mut path: Vec<_> = c.iter().map(|m| crate::escape::printable(m)).collect();
        path.push(crate::escape::printable(&c[0]));
        out.push_str("\n  ");
        out.push_str(&path.join(" -> "));
    }
    out
}

fn write_output(io: &mut Io<'_>, path: Option<&Utf8Path>, text: &str) -> anyhow::Result<()> {
    match path {
        Some(p) => {
            let abs = io.system.absolute(p)?;
            io.system
                .write_atomic(&abs, text.as_bytes())
                .with_context(|| format!("cannot write {p}"))?;
        }
        None => io.stdout.write_all(text.as_bytes())?,
    }
    Ok(())
}

fn generate(global: &GlobalArgs, args: &GenerateArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    // Before any stamp is taken: a run records only files that changed before it began.
    let started = io.system.now();
    let key = replay_key(io.system, global, args, &io.argv);
    let mut layout = None;
    if let Some(key) = &key {
        match key.lookup(io.system) {
            Ok(crate::replay::Lookup::Hit(record)) => {
                io.stderr.write_all(&record.stderr)?;
                write_output(io, args.output.as_deref(), &record.output)?;
                return Ok(exit::OK);
            }
            Ok(crate::replay::Lookup::Miss(walked)) => layout = walked,
            Err(notice) if !global.quiet => writeln!(io.stderr, "notice: {notice}")?,
            Err(_) => {}
        }
    }
    // Everything for stderr goes through a buffer, so a recorded run replays it exactly.
    let mut stderr = Vec::new();
    let outcome = generate_pipeline(global, args, io.system, &io.argv, layout, &mut stderr);
    io.stderr.write_all(&stderr)?;
    let (text, stamps, notices) = outcome?;
    write_output(io, args.output.as_deref(), &text)?;
    if let (Some(key), Some(stamps)) = (key, stamps) {
        // A cache notice is about this run (the fact cache it found damaged is rewritten
        // now): a replay of the run must not repeat it.
        let mut replayed = String::from_utf8_lossy(&stderr).into_owned();
        for notice in notices {
            replayed = replayed.replacen(&format!("notice: {notice}\n"), "", 1);
        }
        if let Err(e) = key.save(io.system, started, stamps, &text, replayed.as_bytes()) {
            if !global.quiet {
                writeln!(io.stderr, "notice: cannot write the run record: {e}")?;
            }
        }
    }
    Ok(exit::OK)
}

/// The key under which this `generate` may be replayed ([`crate::replay`]): `None`
/// with `--no-cache` or `--changed-only`, or when something it needs cannot be read
/// (the run then goes the normal way and reports it).
fn replay_key(
    system: &dyn System,
    global: &GlobalArgs,
    args: &GenerateArgs,
    argv: &[String],
) -> Option<crate::replay::RunKey> {
    if args.changes.changed_only {
        return None;
    }
    let root = project_dir(system, global).ok()?;
    let settings =
        crate::cache::CacheSettings::new(&root, global.no_cache, global.cache_dir.as_deref())?;
    settings.check(system, &root).ok()?;
    let config = find_config_file(system, &root, global.config.as_deref());
    crate::replay::RunKey::new(
        system,
        &settings,
        &root,
        config.as_deref(),
        &args.pipeline.eval.var_file,
        argv,
    )
}

/// `generate` up to the text to write: the text, and the stamps of the files read when
/// the run may be recorded for replay. Everything for stderr goes to `err`.
#[allow(clippy::type_complexity)]
/// The pipeline text, the stamps of the files read when the run can be replayed, and the
/// notices printed (which a replay leaves out).
type Generated = (
    String,
    Option<Vec<(String, Option<crate::system::Stamp>)>>,
    Vec<String>,
);

fn generate_pipeline(
    global: &GlobalArgs,
    args: &GenerateArgs,
    system: &dyn System,
    argv: &[String],
    layout: Option<crate::discover::Layout>,
    err: &mut Vec<u8>,
) -> anyhow::Result<Generated> {
    let pipeline_args = &args.pipeline;
    let mut ws = load_workspace_overlapped(system, global, &pipeline_args.eval, layout)?;
    ws.require_modules()?;
    if args.changes.changed_only {
        // Change detection lists untracked files: it must not meet the cache writer's
        // temp files in `.terraci/cache/`.
        ws.wait_for_cache();
    }
    let filters = ws.filters(&pipeline_args.select)?;
    let diagnostics = ws.all_diagnostics();
    let graph = dependency_graph(&ws.db, ws.project);
    if !graph.cycles.is_empty() {
        let cycles = cycle_text(&graph.cycles);
        ws.wait_for_cache();
        ws.print_diagnostics(&diagnostics, global.quiet, err)?;
        return Err(fail(exit::VALIDATION, cycles));
    }
    let changes = change_input(system, &ws.root, &args.changes)?;
    let provider = select_provider(system, pipeline_args.provider.as_deref(), &ws.config.config)?;
    let options = plan_options(pipeline_args, provider, &ws.config.config);
    if pipeline_args.parallel_plans && !options.plan_only && !global.quiet {
        writeln!(
            err,
            "notice: --parallel-plans has no effect without --plan-only: each plan waits \
             for the applies of the modules it reads, so plans keep the dependency order"
        )?;
    }
    let selection = Selection::new(&ws.db, filters, options, changes);
    let header = header(argv);
    let generation = build_pipeline(
        &ws,
        diagnostics,
        &PipelineRequest {
            args: pipeline_args,
            provider,
            selection,
            explain: args.explain,
            header: &header,
            job_texts: None,
        },
    );
    ws.wait_for_cache();
    ws.print_diagnostics(&generation.diagnostics, global.quiet, err)?;
    if let Some(text) = &generation.explain {
        err.write_all(text.as_bytes())?;
    }
    let pipeline = generation.output?;
    if !global.quiet {
        for w in &pipeline.warnings {
            writeln!(err, "{w}")?;
        }
    }
    let replayable = !ws.db.reads_outside_modules();
    let stamps = replayable.then(|| std::mem::take(&mut ws.stamps));
    let notices = std::mem::take(&mut ws.notices);
    ws.dismiss();
    Ok((pipeline.text.into_string(), stamps, notices))
}

/// The generated file's header: terraci's version and the command line.
pub fn header(argv: &[String]) -> crate::render::Header {
    crate::render::Header {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        command_line: argv.join(" "),
    }
}

/// `--plan-only` and `--parallel-plans`, with the provider's `plan_only` from the config.
pub fn plan_options(
    args: &PipelineArgs,
    provider: crate::render::Provider,
    config: &crate::config::Config,
) -> PlanOptions {
    PlanOptions {
        plan_only: args.plan_only || provider.config_plan_only(config),
        parallel_plans: args.parallel_plans,
        refuse_expressions: provider == crate::render::Provider::Github,
        refuse_variables: provider == crate::render::Provider::Gitlab,
        runner: match provider {
            crate::render::Provider::Gitlab => crate::ir::Runner::Gitlab,
            crate::render::Provider::Github => crate::ir::Runner::Github,
        },
    }
}

/// What a pipeline is built from besides the workspace: decided once by `generate`,
/// once per regeneration by `watch`.
pub struct PipelineRequest<'a> {
    pub args: &'a PipelineArgs,
    pub provider: crate::render::Provider,
    pub selection: Selection,
    /// `--explain` (ignored with `--dry-run`, whose output already says it).
    pub explain: bool,
    pub header: &'a crate::render::Header,
    /// Job texts of the previous render, kept by `watch` (GitLab only).
    pub job_texts: Option<&'a crate::render::JobTexts>,
}

/// A pipeline built from a workspace, before anything is printed or written.
pub struct Generation {
    /// Every diagnostic, sorted: printed first.
    pub diagnostics: Vec<Diagnostic>,
    /// `--explain` text for stderr, printed after the diagnostics.
    pub explain: Option<String>,
    /// The text to write, or why there is none (clashing job names, a config value that
    /// cannot be rendered, GitHub's size limit).
    pub output: anyhow::Result<Pipeline>,
}

pub struct Pipeline {
    pub text: crate::render::PipelineText,
    /// Renderer warnings (`needs-limit`, `config-warning`...), printed unless `-q`.
    pub warnings: Vec<crate::render::RenderWarning>,
}

/// The pure part of `generate`: affected modules, job plan and rendered text (or the
/// `--dry-run` report) of a loaded workspace. `diagnostics` are the project's
/// ([`Workspace::all_diagnostics`]); the caller has refused a graph with cycles.
pub fn build_pipeline(
    ws: &Workspace,
    mut diagnostics: Vec<Diagnostic>,
    request: &PipelineRequest<'_>,
) -> Generation {
    let args = request.args;
    let selection = request.selection;
    let affected = crate::changes::affected(&ws.db, ws.project, selection);
    diagnostics.extend(ws.finish_diagnostics(affected.diagnostics.iter().cloned()));
    let options = selection.plan_options(&ws.db);
    if options.refuse_expressions || options.refuse_variables {
        diagnostics.extend(ws.refused_for_names(options));
    }
    let plan = match job_plan(&ws.db, ws.project, selection) {
        Ok(plan) => plan,
        Err(e) => {
            return Generation {
                diagnostics,
                explain: None,
                output: Err(fail(exit::ERROR, e.to_string())),
            }
        }
    };
    diagnostics.extend(local_state_warning(ws, plan));
    let changed_files = selection
        .changes(&ws.db)
        .as_ref()
        .map(|c| c.files.as_slice());
    let explain = (request.explain && !args.dry_run).then(|| {
        let mut text = Vec::new();
        explain(affected, plan, changed_files, &mut text).expect("writing to a Vec cannot fail");
        String::from_utf8_lossy(&text).into_owned()
    });
    let output = if args.dry_run {
        dry_run_report(ws, &diagnostics, affected, plan, changed_files, args.format).map(|text| {
            Pipeline {
                text: text.into(),
                warnings: Vec::new(),
            }
        })
    } else {
        render_pipeline(ws, plan, request)
    };
    Generation {
        diagnostics,
        explain,
        output,
    }
}

/// One warning for the modules of the pipeline whose state lives in the checkout (no
/// backend block, or a `local` backend with a relative path): each CI job starts from a
/// fresh checkout, so what an apply writes is gone before the next job reads it.
fn local_state_warning(ws: &Workspace, plan: &crate::ir::JobPlan) -> Option<Diagnostic> {
    let modules: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
    let inside: Vec<&str> = modules
        .into_iter()
        .filter(|id| {
            ws.modules.get(*id).is_some_and(|&m| {
                let identity = crate::resolve::state_identity(&ws.db, ws.project, m);
                identity.backend == "local"
                    && identity
                        .fields
                        .get("path")
                        .is_some_and(|p| !p.starts_with('/'))
            })
        })
        .collect();
    let first = inside.first()?;
    Some(
        Diagnostic::warning(
            "local-state",
            format!(
                "{} inside the checkout (no backend block, or a `local` backend with a relative path): {}; each CI job starts from a fresh checkout, so the state an apply writes is lost; give {} a remote backend (or an absolute local `path` on storage the jobs share)",
                if inside.len() == 1 {
                    "1 module of the pipeline keeps its state".to_owned()
                } else {
                    format!("{} modules of the pipeline keep their state", inside.len())
                },
                crate::diagnostic::first_few(inside.iter().copied()),
                if inside.len() == 1 { "it" } else { "them" }
            ),
        )
        .with_module(*first),
    )
}

/// `--dry-run`: modules, affected, levels and jobs, as text or JSON.
fn dry_run_report(
    ws: &Workspace,
    diagnostics: &[Diagnostic],
    affected: &crate::changes::Affected,
    plan: &crate::ir::JobPlan,
    changed_files_list: Option<&[String]>,
    format: OutputFormat,
) -> anyhow::Result<String> {
    let graph = dependency_graph(&ws.db, ws.project);
    let text = match format {
        OutputFormat::Json => {
            let graph_view = ws.graph_view(diagnostics.to_vec());
            let mut value = serde_json::to_value(&graph_view)?;
            let obj = value.as_object_mut().expect("graph view is an object");
            obj.insert(
                "diagnostics".into(),
                serde_json::Value::Array(diagnostics.iter().map(diagnostic_json).collect()),
            );
            obj.insert(
                "changed_files".into(),
                serde_json::to_value(changed_files_list)?,
            );
            obj.insert(
                "changed_modules".into(),
                serde_json::to_value(&affected.changed_modules)?,
            );
            let targets: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
            obj.insert(
                "affected".into(),
                serde_json::Value::Array(
                    affected
                        .affected
                        .iter()
                        .filter(|(id, _)| targets.contains(id.as_str()))
                        .map(|(id, reasons)| serde_json::json!({"id": id, "reasons": reasons}))
                        .collect(),
                ),
            );
            obj.insert(
                "jobs".into(),
                serde_json::Value::Array(
                    plan.jobs
                        .iter()
                        .map(|j| {
                            serde_json::json!({
                                "name": j.name,
                                "needs": j.needs.iter().map(|n| n.job.clone()).collect::<Vec<_>>(),
                            })
                        })
                        .collect(),
                ),
            );
            let mut s = serde_json::to_string_pretty(&value)?;
            s.push('\n');
            s
        }
        OutputFormat::Yaml => {
            let mut s = String::new();
            // Text for a terminal: control characters in names are escaped.
            use crate::escape::printable;
            let targets: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
            s.push_str(&format!("modules: {}\n", graph.modules.len()));
            if let Some(files) = changed_files_list {
                s.push_str(&format!("changed files: {}\n", files.len()));
                for f in files {
                    s.push_str(&format!("  {}\n", printable(f)));
                }
                let changed = &affected.changed_modules;
                s.push_str(&format!("changed modules: {}\n", changed.len()));
                for m in changed {
                    s.push_str(&format!("  {}\n", printable(m)));
                }
            }
            s.push_str(&format!("affected: {}\n", targets.len()));
            for (id, reasons) in &affected.affected {
                if targets.contains(id.as_str()) {
                    if reasons.is_empty() {
                        s.push_str(&format!("  {}\n", printable(id)));
                    } else {
                        s.push_str(&format!(
                            "  {}: {}\n",
                            printable(id),
                            printable(&reasons.join("; "))
                        ));
                    }
                }
            }
            s.push_str(&format!("levels: {}\n", plan.levels));
            s.push_str(&format!("jobs: {}\n", plan.jobs.len()));
            for j in plan.jobs.iter() {
                let needs: Vec<&str> = j.needs.iter().map(|n| &*n.job).collect();
                if needs.is_empty() {
                    s.push_str(&format!("  [{}] {}\n", j.level, printable(&j.name)));
                } else {
                    s.push_str(&format!(
                        "  [{}] {} <- {}\n",
                        j.level,
                        printable(&j.name),
                        printable(&needs.join(", "))
                    ));
                }
            }
            s
        }
    };
    Ok(text)
}

/// The provider's pipeline file, as YAML or (`--format json`) JSON.
fn render_pipeline(
    ws: &Workspace,
    plan: &crate::ir::JobPlan,
    request: &PipelineRequest<'_>,
) -> anyhow::Result<Pipeline> {
    let config = &ws.config.config;
    if let (crate::render::Provider::Gitlab, Some(texts), OutputFormat::Yaml) =
        (request.provider, request.job_texts, request.args.format)
    {
        let (text, warnings) =
            crate::render::render_gitlab_parts(plan, config, request.header, texts)
                .map_err(|e| fail(exit::ERROR, e.to_string()))?;
        return Ok(Pipeline { text, warnings });
    }
    let rendered = match request.provider {
        crate::render::Provider::Gitlab => {
            crate::render::render_gitlab_with(plan, config, request.header, request.job_texts)
        }
        crate::render::Provider::Github => {
            crate::render::render_github(plan, config, request.header, request.args.force)
        }
    }
    .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let text = match request.args.format {
        OutputFormat::Yaml => rendered.text,
        OutputFormat::Json => {
            let value: serde_json::Value = serde_yaml::from_str(&rendered.text)?;
            let mut s = serde_json::to_string_pretty(&value)?;
            s.push('\n');
            s
        }
    };
    Ok(Pipeline {
        text: text.into(),
        warnings: rendered.warnings,
    })
}

/// `watch`: the first pipeline, then one regeneration per batch of file events until
/// SIGINT or SIGTERM (exit 0).
fn watch(global: &GlobalArgs, args: &WatchArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    if args.changed_only {
        return Err(fail(
            exit::USAGE,
            "watch regenerates the whole pipeline on every change; --changed-only is for `generate`",
        ));
    }
    let root = project_dir(io.system, global)?;
    let mut outside = Vec::new();
    if let Some(config) = &global.config {
        outside.push(io.system.absolute(config)?);
    }
    for f in &args.pipeline.eval.var_file {
        outside.push(io.system.absolute(f)?);
    }
    // Watching starts before the project is read, so an edit made while it loads is
    // seen; the signal handler is in place from here on, so Ctrl-C always exits 0.
    let mut events = io
        .system
        .watch(&root, &outside)
        .map_err(|e| fail(exit::ERROR, format!("cannot watch `{root}`: {e}")))?;
    let mut watch = crate::watch::Watch::start(io.system, global, args, &io.argv, io.stderr)?;
    watch.run(events.as_mut(), io.stderr)?;
    Ok(exit::OK)
}

/// Provider order of spec §7.4.
pub fn select_provider(
    system: &dyn System,
    flag: Option<&str>,
    config: &crate::config::Config,
) -> anyhow::Result<crate::render::Provider> {
    use crate::render::Provider;
    if let Some(p) = flag
        .map(str::to_owned)
        .or_else(|| system.env_var("TERRACI_PROVIDER"))
    {
        return p
            .parse::<Provider>()
            .map_err(|e| fail(exit::USAGE, e.to_string()));
    }
    if system.env_var("GITHUB_ACTIONS").as_deref() == Some("true") {
        return Ok(Provider::Github);
    }
    if system.env_var("GITLAB_CI").is_some() || system.env_var("CI_SERVER_URL").is_some() {
        return Ok(Provider::Gitlab);
    }
    match (&config.extensions.gitlab, &config.extensions.github) {
        (None, Some(_)) => Ok(Provider::Github),
        _ => Ok(Provider::Gitlab),
    }
}

/// `--explain`: one line per module in the pipeline with why it is there.
fn explain(
    affected: &crate::changes::Affected,
    plan: &crate::ir::JobPlan,
    changed_files: Option<&[String]>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let Some(files) = changed_files else {
        writeln!(out, "every module is in the pipeline (no --changed-only)")?;
        return Ok(());
    };
    if plan.is_empty() {
        writeln!(
            out,
            "no module is affected by the {} changed file(s)",
            files.len()
        )?;
    }
    let targets: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
    for (id, reasons) in &affected.affected {
        if targets.contains(id.as_str()) {
            let reasons = crate::escape::printable(&reasons.join("; ")).into_owned();
            writeln!(out, "{}: {reasons}", crate::escape::printable(id))?;
        }
    }
    Ok(())
}

fn change_input(
    system: &dyn System,
    root: &Utf8Path,
    args: &ChangeArgs,
) -> anyhow::Result<Option<ChangeInput>> {
    if !args.changed_only {
        if args.base_ref.is_some() || args.committed_only || args.include_dependencies {
            return Err(fail(
                exit::USAGE,
                "--base-ref, --committed-only and --include-dependencies need --changed-only",
            ));
        }
        return Ok(None);
    }
    let env = crate::vcs::ENV_VARS
        .iter()
        .filter_map(|name| system.env_var(name).map(|v| ((*name).to_owned(), v)))
        .collect();
    let set = crate::vcs::changed_files(&crate::vcs::ChangeRequest {
        project_dir: root.to_owned(),
        base_ref: args.base_ref.clone(),
        committed_only: args.committed_only,
        env,
    })
    .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    Ok(Some(ChangeInput {
        files: set.changed_files,
        submodules: set.submodules,
        include_dependencies: args.include_dependencies,
    }))
}

fn local_exec(global: &GlobalArgs, args: &LocalExecArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    use crate::exec::{ExecOptions, Mode, ProgressStyle};
    let ws = load_workspace(io.system, global, &args.eval)?;
    ws.require_modules()?;
    let mut select = args.select.clone();
    select.include.extend(
        args.module
            .iter()
            .map(|m| m.trim_end_matches('/').to_owned()),
    );
    let filters = ws.filters(&select)?;
    let diagnostics = ws.all_diagnostics();
    ws.print_diagnostics(&diagnostics, global.quiet, io.stderr)?;
    let graph = dependency_graph(&ws.db, ws.project);
    // A `-m` that names no module is a typo, as in `graph -m`, not an empty run.
    for m in &args.module {
        let m = m.trim_end_matches('/');
        if !graph
            .modules
            .iter()
            .any(|id| crate::filter::glob_matches(m, id))
        {
            return Err(fail(
                exit::ERROR,
                format!("no module `{}`", crate::escape::printable(m)),
            ));
        }
    }
    if !graph.cycles.is_empty() {
        return Err(fail(exit::VALIDATION, cycle_text(&graph.cycles)));
    }
    let changes = change_input(io.system, &ws.root, &args.changes)?;
    let selection = Selection::new(&ws.db, filters, PlanOptions::default(), changes);
    let plan = job_plan(&ws.db, ws.project, selection)
        .clone()
        .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    let ci = io.system.env_var("CI").is_some();
    let options = ExecOptions {
        project_dir: ws.root.clone(),
        mode: match args.mode {
            ExecMode::Plan => Mode::Plan,
            ExecMode::Apply => Mode::Apply,
            ExecMode::Run => Mode::Run,
        },
        parallelism: args
            .parallelism
            .unwrap_or(ws.config.config.execution.parallelism)
            .max(1),
        dry_run: args.dry_run,
        binary: args.binary.clone(),
        log_dir: ".terraci/logs".into(),
        progress: ProgressStyle::detect(global.quiet || ci),
        env: Vec::new(),
    };
    let summary = crate::exec::run(&plan, &options, io.stdout)
        .map_err(|e| fail(exit::ERROR, e.to_string()))?;
    Ok(if summary.interrupted {
        130
    } else if summary.failed() {
        exit::ERROR
    } else {
        exit::OK
    })
}

fn validate(global: &GlobalArgs, args: &ValidateArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let ws = load_workspace(io.system, global, &args.eval)?;
    ws.require_modules()?;
    let filters = ws.filters(&args.select)?;
    let mut diagnostics = ws.all_diagnostics();
    let db = &ws.db;
    diagnostics.extend(ws.finish_diagnostics(crate::changes::unused_libraries(db, ws.project)));
    let graph = dependency_graph(db, ws.project);
    let infos: Vec<_> = ws.project.modules(db).iter().map(|m| m.info(db)).collect();
    let roots = infos.iter().filter(|i| i.is_root()).count();
    let libraries = infos.iter().filter(|i| i.role == Role::Library).count();
    let submodules = infos
        .iter()
        .filter(|i| i.is_root() && i.submodule.is_some())
        .count();
    let targets = infos
        .iter()
        .filter(|i| i.is_root() && filters.allows(&i.id, &i.components))
        .count();
    let errors = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let warnings = diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Warning)
        .count();
    let mut by_code: BTreeMap<&str, usize> = BTreeMap::new();
    for d in &diagnostics {
        *by_code.entry(d.code).or_default() += 1;
    }
    let failed = !graph.cycles.is_empty() || errors > 0 || (args.strict && warnings > 0);
    if args.format == crate::cli::ValidateFormat::Json {
        let doc = serde_json::json!({
            "pattern": ws.config.pattern.to_string(),
            "modules": roots,
            "submodules": submodules,
            "libraries": libraries,
            "targets": targets,
            "edges": graph.edge_count(),
            "levels": graph.cycles.is_empty().then(|| graph.level_count()),
            "cycles": graph.cycles,
            "errors": errors,
            "warnings": warnings,
            "by_code": by_code,
            "diagnostics": diagnostics.iter().map(crate::render::graph::diagnostic_json).collect::<Vec<_>>(),
            "valid": !failed,
        });
        let text = serde_json::to_string_pretty(&doc).expect("JSON of plain data");
        writeln!(io.stdout, "{text}")?;
        return Ok(if failed { exit::VALIDATION } else { exit::OK });
    }
    let out = &mut *io.stdout;
    writeln!(out, "pattern: {}", ws.config.pattern)?;
    writeln!(
        out,
        "modules: {roots} ({submodules} submodules), libraries: {libraries}, targets after filters: {targets}"
    )?;
    writeln!(out, "edges: {}", graph.edge_count())?;
    ws.print_diagnostics(&diagnostics, global.quiet, io.stderr)?;
    writeln!(out, "diagnostics: {errors} errors, {warnings} warnings")?;
    for (code, n) in &by_code {
        writeln!(out, "  {code}: {n}")?;
    }
    if !graph.cycles.is_empty() {
        writeln!(out, "cycles: {}", graph.cycles.len())?;
        writeln!(io.stderr, "error: {}", cycle_text(&graph.cycles))?;
        return Ok(exit::VALIDATION);
    }
    writeln!(out, "levels: {}", graph.level_count())?;
    if global.verbose > 0 {
        write!(out, "{}", render_levels(&ws.graph_view(Vec::new())))?;
        let libraries = crate::changes::library_usage(db, ws.project);
        if !libraries.is_empty() {
            writeln!(out, "Libraries:")?;
        }
        for (id, usage) in libraries {
            use crate::changes::LibraryUse;
            match usage {
                LibraryUse::By(by) if by.len() == 1 => writeln!(out, "  {id} (used by 1 module)")?,
                LibraryUse::By(by) => writeln!(out, "  {id} (used by {} modules)", by.len())?,
                LibraryUse::PartOf(lib) => writeln!(out, "  {id} (part of {lib})")?,
                LibraryUse::Unused => writeln!(out, "  {id} (unused)")?,
            }
        }
    }
    if args.strict && (warnings > 0 || errors > 0) {
        writeln!(
            io.stderr,
            "error: validation failed (--strict): {errors} errors, {warnings} warnings"
        )?;
        return Ok(exit::VALIDATION);
    }
    if errors > 0 {
        return Ok(exit::VALIDATION);
    }
    Ok(exit::OK)
}

fn graph(global: &GlobalArgs, args: &GraphArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let ws = load_workspace(io.system, global, &args.eval)?;
    ws.require_modules()?;
    let diagnostics = ws.all_diagnostics();
    if args.format != GraphFormat::Json {
        ws.print_diagnostics(&diagnostics, global.quiet, io.stderr)?;
    }
    let mut view = ws.graph_view(diagnostics);
    let select = &args.select;
    if !(select.exclude.is_empty() && select.include.is_empty() && select.filter.is_empty()) {
        let filters = ws.filters(select)?;
        let db = &ws.db;
        let keep: BTreeSet<String> = ws
            .project
            .modules(db)
            .iter()
            .map(|m| m.info(db))
            .filter(|i| i.is_root() && filters.allows(&i.id, &i.components))
            .map(|i| i.id.clone())
            .collect();
        view.restrict(&keep);
    }
    if let Some(m) = &args.module {
        let graph = dependency_graph(&ws.db, ws.project);
        let id = m.trim_end_matches('/').to_owned();
        if !graph.modules.contains(&id) {
            return Err(fail(exit::ERROR, format!("no module `{id}`")));
        }
        let keep = graph.transitive(&[id], !args.dependents);
        view.restrict(&keep);
    }
    let text = if args.stats {
        render_stats(&view)
    } else {
        match args.format {
            GraphFormat::Dot => render_dot(&view),
            GraphFormat::Plantuml => render_plantuml(&view),
            GraphFormat::Mermaid => render_mermaid(&view),
            GraphFormat::List => render_list(&view),
            GraphFormat::Levels => render_levels(&view),
            GraphFormat::Json => render_json(&view),
        }
    };
    write_output(io, args.output.as_deref(), &text)?;
    ws.dismiss();
    Ok(exit::OK)
}

/// The command line for the generated file's header: `terraci` plus the arguments.
pub fn display_argv(argv: &[String]) -> Vec<String> {
    std::iter::once("terraci".to_owned())
        .chain(argv.iter().skip(1).cloned())
        .collect()
}

/// Where an edge (or an external reference) came from, for the JSON views.
fn source_view(db: &dyn crate::db::Db, s: &crate::resolve::EdgeSource) -> SourceView {
    SourceView {
        name: s.name.clone(),
        file: s
            .anchor
            .as_ref()
            .map_or(".terraci.yaml".to_owned(), |a| a.file.path(db).to_string()),
        line: s
            .anchor
            .as_ref()
            .and_then(|a| crate::parse::locate(db, a))
            .map_or(0, |(l, _)| l),
        rule: s.rule.as_str(),
        via: s.via.clone(),
    }
}
