//! Watch mode: one database kept alive, file events applied to it as input changes.
//!
//! Input: batches of changed paths from a [`ChangeEvents`] source (notify, debounced, in
//! the CLI; scripted batches in tests). Output: the pipeline file, rewritten through
//! [`System::write_output`] only when its bytes change, and one line per regeneration on
//! stderr. A batch becomes input changes outside salsa and is applied at once, before
//! anything is queried (rust-analyzer's vfs idiom):
//! - an edit of a known Terraform file: its new text, when it differs, the fast path (a
//!   comment edit stops at the facts and reuses everything after them);
//! - a new or deleted Terraform file or directory, or a `.gitignore`: discovery runs
//!   again and is reconciled with the inputs by path and id
//!   (in [`Workspace::apply`]), so unchanged files keep their memos;
//! - the config file: reloaded; discovery runs again only when the pattern or the library
//!   paths changed;
//! - a `--var-file`: read again into the project's evaluation settings;
//! - files that `file()`/`fileset()` read: [`terraci_db::db::Database::refresh_extra`];
//! - `--changed-only`: git's change set, asked again after every batch.
//!
//! A regeneration that brings an error diagnostic the last written file did not have
//! (a half-typed block), a dependency cycle, or an error that stops `generate` prints
//! it and leaves the file as it was: the last good pipeline stays in place.

use std::collections::{BTreeSet, HashSet};
use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use camino::{Utf8Path, Utf8PathBuf};

use crate::cli::{GlobalArgs, PipelineArgs, WatchArgs};
use crate::pipeline::{
    build_pipeline, header, plan_options, select_provider, PendingChanges, PipelineRequest,
};
use crate::workspace::{config_diagnostics, eval_settings, load_workspace, InputChange, Workspace};
use terraci_db::config::{find_config_file, load_config, CONFIG_FILE_NAMES};
use terraci_db::diagnostic::{Diagnostic, Severity};
use terraci_db::files::{ChangeInput, FileContents, FileKind, Selection};
use terraci_db::filter::Filters;
use terraci_db::store::CacheSettings;
use terraci_db::system::{ChangeEvents, System};
use terraci_engine::discover::discover_modules;
use terraci_engine::graph::dependency_graph;
use terraci_engine::ir::PlanOptions;
use terraci_render::{Header, Provider};

/// The pipeline file when `-o` is not given, relative to the project directory: the one
/// `init`, the README and the recipes name too (one workflow, never two).
pub(crate) fn default_output(provider: Provider) -> &'static str {
    match provider {
        Provider::Gitlab => ".gitlab-ci.yml",
        Provider::Github => ".github/workflows/terraform.yml",
    }
}

/// What happened to a path in a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Change {
    Changed,
    Added,
    Removed,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Change::Changed => "changed",
            Change::Added => "added",
            Change::Removed => "removed",
        })
    }
}

/// How the graph moved between two regenerations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct GraphDelta {
    pub(crate) modules_added: usize,
    pub(crate) modules_removed: usize,
    /// Size of the symmetric difference of the edge sets.
    pub(crate) edges_changed: usize,
}

impl fmt::Display for GraphDelta {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.modules_added > 0 {
            write!(f, "{} added, ", plural(self.modules_added, "module"))?;
        }
        if self.modules_removed > 0 {
            write!(f, "{} removed, ", plural(self.modules_removed, "module"))?;
        }
        write!(f, "{} changed", plural(self.edges_changed, "edge"))
    }
}

/// What became of the output file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The file (as displayed) got new bytes.
    Written(String),
    /// The new text is what the file already holds.
    Unchanged,
    /// The file was left as it was; why (the details were printed above the line).
    Kept { file: String, why: String },
}

/// One regeneration, as its line on stderr tells it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Report {
    /// What set it off: `eks/main.tf changed`, `2 files removed`.
    pub(crate) trigger: String,
    /// `None` when nothing was regenerated (an invalid config).
    pub(crate) graph: Option<GraphDelta>,
    pub(crate) outcome: Outcome,
}

impl Report {
    /// `eks/main.tf changed -> 2 edges changed -> .gitlab-ci.yml rewritten in 4 ms`.
    pub(crate) fn line(&self, elapsed: Duration) -> String {
        let mut line = format!("{} -> ", self.trigger);
        if let Some(graph) = &self.graph {
            line.push_str(&format!("{graph} -> "));
        }
        match &self.outcome {
            Outcome::Written(file) => line.push_str(&format!("{file} rewritten")),
            Outcome::Unchanged => line.push_str("output unchanged"),
            Outcome::Kept { file, why } => line.push_str(&format!("{file} kept ({why})")),
        }
        line.push_str(&format!(" in {} ms", elapsed.as_millis()));
        line
    }
}

/// Error diagnostics by what they say, not where: an edit that moves an old error
/// down a line does not make it new.
type ErrorKey = (&'static str, Option<String>, String);

/// The watch session: the workspace, the last regeneration, the last written file.
pub(crate) struct Watch<'a> {
    system: &'a dyn System,
    global: GlobalArgs,
    args: WatchArgs,
    ws: Workspace,
    /// One selection input for the session, updated only when the filters or plan
    /// options change, so a regeneration reuses the job plan when the graph is unchanged.
    selection: Selection,
    header: Header,
    /// `-o`: absolute path and what the user typed.
    output: Option<(Utf8PathBuf, String)>,
    /// The file the last regeneration aimed at (absolute, displayed).
    target: (Utf8PathBuf, String),
    /// What was last written, and where.
    written: Option<(Utf8PathBuf, terraci_render::PipelineText)>,
    var_files: Vec<Utf8PathBuf>,
    cache_dir: Option<Utf8PathBuf>,
    /// The graph of the last regeneration.
    shape: terraci_engine::graph::GraphShape,
    /// The job lists of the last job plans, newest last. Salsa frees a replaced plan
    /// when the next edit is applied; held here, its 20,000 jobs are freed on another
    /// thread after that instead (see [`Watch::release_plans`]).
    plans: Vec<Arc<Vec<terraci_engine::ir::Job>>>,
    /// Errors present when the file was last written: any other error keeps the file.
    /// `None` until the first write, which happens whatever errors the project has
    /// (as `generate` would write).
    accepted_errors: Option<BTreeSet<ErrorKey>>,
    /// Diagnostics of the last regeneration: only new ones are printed.
    shown: HashSet<Diagnostic>,
    /// Renderer warnings of the last regeneration: printed again only when they change.
    warnings: Vec<Diagnostic>,
    /// The last batch left an input unreadable (config, `--var-file`).
    input_error: bool,
    /// The file holds what the current inputs give (the last regeneration did not keep
    /// an older file).
    clean: bool,
    /// Job texts of the last render: an edit re-renders only the jobs it changed.
    job_texts: terraci_render::JobTexts,
}

/// A batch turned into input changes.
struct Applied {
    /// What the report line names.
    touched: Vec<(String, Change, bool)>,
    /// Whether any input changed: nothing to regenerate otherwise.
    changed: bool,
    /// Only known files were edited, and their facts are what they were: the pipeline
    /// cannot change (only diagnostic positions can).
    same_facts: bool,
    /// An input that could not be read as a whole (config, `--var-file`): message and
    /// the short reason for the line. Nothing is regenerated until it is fixed.
    error: Option<(String, &'static str)>,
}

impl<'a> Watch<'a> {
    /// Loads the project and writes the first pipeline. What stops `generate` before it
    /// has a graph (a bad config, bad flags) stops watch too; a cycle or a broken file
    /// only keeps the file from being written.
    pub(crate) fn start(
        system: &'a dyn System,
        global: &GlobalArgs,
        args: &WatchArgs,
        argv: &[String],
        err: &mut dyn Write,
    ) -> anyhow::Result<Watch<'a>> {
        let started = Instant::now();
        let ws = load_workspace(system, global, &args.pipeline.eval)?;
        let (provider, filters, options) = settings(system, &ws, &args.pipeline)?;
        let output = match &args.output {
            Some(p) => Some((system.absolute(p)?, p.to_string())),
            None => None,
        };
        let var_files = args
            .pipeline
            .eval
            .var_file
            .iter()
            .map(|f| system.absolute(f))
            .collect::<io::Result<Vec<_>>>()?;
        let cache_dir = CacheSettings::new(&ws.root, global.no_cache, global.cache_dir.as_deref())
            .map(|s| s.dir);
        let selection = Selection::new(&ws.db, filters, options, None);
        let target = match &output {
            Some(o) => o.clone(),
            None => {
                let rel = default_output(provider);
                (ws.root.join(rel), rel.to_owned())
            }
        };
        let mut watch = Watch {
            system,
            global: global.clone(),
            args: args.clone(),
            ws,
            selection,
            header: header(argv),
            output,
            target,
            written: None,
            var_files,
            cache_dir,
            shape: Default::default(),
            plans: Vec::new(),
            accepted_errors: None,
            shown: HashSet::new(),
            warnings: Vec::new(),
            input_error: false,
            clean: false,
            job_texts: terraci_render::JobTexts::default(),
        };
        // `--changed-only`: git's change set before the first pipeline, as `generate`
        // would take it (a project outside git stops watch as it stops `generate`).
        let changes = watch.change_input()?;
        watch.ws.apply(InputChange {
            changes: Some((watch.selection, changes)),
            ..InputChange::default()
        });
        let (_, outcome) = watch.regenerate(err)?;
        watch.clean = !matches!(outcome, Outcome::Kept { .. });
        let what = match outcome {
            Outcome::Written(file) => format!("{file} written"),
            Outcome::Unchanged => format!("{} unchanged", watch.target.1),
            Outcome::Kept { file, why } => format!("{file} not written ({why})"),
        };
        if !global.quiet {
            writeln!(
                err,
                "watching {}: {}, {} -> {what} in {} ms",
                watch.ws.root,
                plural(watch.shape.module_count(), "module"),
                plural(watch.shape.edge_count(), "edge"),
                started.elapsed().as_millis()
            )?;
        }
        Ok(watch)
    }

    /// Regenerates once per batch until the events end (SIGINT, SIGTERM).
    pub(crate) fn run(
        &mut self,
        events: &mut dyn ChangeEvents,
        err: &mut dyn Write,
    ) -> io::Result<()> {
        while let Some(batch) = events.next_batch()? {
            self.handle_batch(&batch, err)?;
        }
        Ok(())
    }

    /// Applies one batch of changed paths (absolute) and regenerates if any input
    /// changed; prints the diagnostics and the line. `None`: nothing changed.
    pub(crate) fn handle_batch(
        &mut self,
        batch: &[Utf8PathBuf],
        err: &mut dyn Write,
    ) -> io::Result<Option<Report>> {
        let started = Instant::now();
        let applied = self.apply(batch);
        self.release_plans();
        // After an invalid config, the batch that fixes it is reported even when the
        // inputs end up as they were.
        let recovered = std::mem::replace(&mut self.input_error, applied.error.is_some());
        if !applied.changed && applied.error.is_none() && !recovered {
            return Ok(None);
        }
        let trigger = trigger(&applied.touched);
        // `--dry-run --format json` prints edge source lines, which a comment edit moves.
        let shortcut =
            applied.same_facts && self.clean && !recovered && !self.args.pipeline.dry_run;
        let report = match applied.error {
            None if shortcut => Report {
                trigger,
                graph: Some(GraphDelta::default()),
                outcome: Outcome::Unchanged,
            },
            Some((message, why)) => {
                writeln!(err, "error: {message}")?;
                Report {
                    trigger,
                    graph: None,
                    outcome: Outcome::Kept {
                        file: self.target.1.clone(),
                        why: why.to_owned(),
                    },
                }
            }
            None => {
                let (graph, outcome) = self.regenerate(err)?;
                Report {
                    trigger,
                    graph: Some(graph),
                    outcome,
                }
            }
        };
        self.clean = !matches!(report.outcome, Outcome::Kept { .. });
        if !self.global.quiet || !self.clean {
            writeln!(err, "{}", report.line(started.elapsed()))?;
        }
        Ok(Some(report))
    }

    /// The workspace, for tests that query it between batches.
    #[cfg(test)]
    pub(crate) fn workspace(&self) -> &Workspace {
        &self.ws
    }

    fn apply(&mut self, batch: &[Utf8PathBuf]) -> Applied {
        let mut applied = Applied {
            touched: Vec::new(),
            changed: false,
            same_facts: false,
            error: None,
        };
        let (mut config, mut var_files, mut rediscover, mut relevant) =
            (false, false, false, false);
        let mut edits = Vec::new();
        for path in batch {
            if self.is_output(path) {
                continue;
            }
            let shown = self.display(path);
            if self.is_config(path) {
                config = true;
                relevant = true;
                let known = self
                    .ws
                    .config
                    .path
                    .as_ref()
                    .is_some_and(|p| self.system.absolute(p).is_ok_and(|abs| abs == *path));
                let change = change_of(known, self.system.is_file(path));
                applied.touched.push((shown, change, false));
                continue;
            }
            if self.var_files.contains(path) {
                var_files = true;
                relevant = true;
                applied.touched.push((shown, Change::Changed, false));
                continue;
            }
            if self.ws.db.tracks_extra(path) {
                relevant = true;
                applied
                    .touched
                    .push((shown.clone(), Change::Changed, false));
            }
            let Ok(rel) = path.strip_prefix(&self.ws.root) else {
                continue;
            };
            if self.cache_dir.as_ref().is_some_and(|d| path.starts_with(d)) {
                continue;
            }
            if rel.as_str().is_empty() {
                // The watcher lost events: look at everything again.
                rediscover = true;
                relevant = true;
                continue;
            }
            let name = rel.file_name().unwrap_or_default();
            let hidden_dirs = rel
                .parent()
                .is_some_and(|p| p.components().any(|c| c.as_str().starts_with('.')));
            // Discovery skips hidden entries (`.git/`, `.terraci/`, editor swap files)
            // but reads every `.gitignore`.
            if hidden_dirs || (name.starts_with('.') && name != ".gitignore") {
                continue;
            }
            if name == ".gitignore" {
                rediscover = true;
                relevant = true;
                let change = change_of(true, self.system.is_file(path));
                applied.touched.push((shown, change, false));
                continue;
            }
            if FileKind::of(name).is_some() {
                let exists = self.system.is_file(path);
                match (self.ws.db.module_file(rel.as_str()), exists) {
                    (Some(file), true) => {
                        match self.system.read_confined(path, &self.ws.policy, true) {
                            Ok((bytes, _)) => {
                                let now = FileContents::from_bytes(bytes);
                                if *file.contents(&self.ws.db) != now {
                                    edits.push((file, now));
                                    applied.touched.push((shown, Change::Changed, false));
                                }
                            }
                            // Discovery reports it with the reason.
                            Err(_) => rediscover = true,
                        }
                    }
                    (Some(_), false) => {
                        rediscover = true;
                        applied.touched.push((shown, Change::Removed, false));
                    }
                    (None, true) => {
                        rediscover = true;
                        applied.touched.push((shown, Change::Added, false));
                    }
                    (None, false) => {}
                }
                relevant = true;
            } else {
                let (known, exists) = (self.holds_known_files(rel), self.system.is_dir(path));
                if known || exists {
                    rediscover = true;
                    relevant = true;
                    let change = change_of(known, exists);
                    applied.touched.push((format!("{shown}/"), change, true));
                }
            }
        }
        // `--changed-only`: any event but those of the pipeline file and the caches
        // (an edit of any file, a commit, a checkout) may change git's change set.
        let git = self.args.changes.changed_only
            && batch.iter().any(|p| {
                !self.is_output(p) && !self.cache_dir.as_ref().is_some_and(|d| p.starts_with(d))
            });
        if !relevant && !git {
            return applied;
        }

        // Everything the batch changed, applied at once below.
        let mut change = InputChange {
            refresh_extra: true,
            ..InputChange::default()
        };
        // The facts of the edited files before the edit: parsing them again (one each)
        // tells whether the edit can change anything downstream; salsa would find the
        // same by verifying every memo of the project, which is most of a
        // regeneration's time on a large one.
        let before: Vec<_> = edits
            .iter()
            .map(|&(file, _)| {
                (
                    file,
                    terraci_engine::facts::file_facts(&self.ws.db, file).clone(),
                )
            })
            .collect();
        change.edits = edits;
        if config {
            match self.reload_config() {
                Ok((changed, pattern_changed, loaded)) => {
                    applied.changed |= changed;
                    rediscover |= pattern_changed;
                    change.config = Some(loaded);
                }
                Err(message) => applied.error = Some((message, "invalid config")),
            }
        }
        if var_files {
            let repository = crate::workspace::repository_policy(
                self.system,
                &self.ws.root,
                self.global.max_file_size,
            );
            match eval_settings(self.system, &self.args.pipeline.eval, &repository) {
                Ok(settings) => change.eval_settings = Some(settings),
                Err(e) => applied.error = Some((format!("{e:#}"), "unreadable --var-file")),
            }
        }
        if rediscover {
            let (discovered, diagnostics_changed) = self.rediscover();
            applied.changed |= diagnostics_changed;
            change.discovered = Some(discovered);
        }
        if git {
            match self.change_input() {
                Ok(changes) => change.changes = Some((self.selection, changes)),
                Err(e) => applied.error = Some((format!("{e:#}"), "change detection failed")),
            }
        }
        let done = self.ws.apply(change);
        applied.changed |= done.changed;
        applied.same_facts = !config
            && !var_files
            && !rediscover
            && !done.extra_changed
            // A comment edit leaves the facts as they were, not the change set.
            && !done.changes_changed
            && before
                .iter()
                .all(|(file, facts)| terraci_engine::facts::file_facts(&self.ws.db, *file) == facts);
        if done.changes_changed && applied.touched.is_empty() {
            applied
                .touched
                .push(("the change set".to_owned(), Change::Changed, false));
        }
        applied
    }

    /// Reloads the config. Returns whether something outside the inputs changed (the
    /// filters, the provider, the config's warnings), whether discovery must run again
    /// (the pattern or the library paths changed), and the config for the inputs.
    #[allow(clippy::type_complexity)]
    fn reload_config(
        &mut self,
    ) -> Result<
        (
            bool,
            bool,
            (Arc<terraci_db::config::Config>, terraci_db::config::Pattern),
        ),
        String,
    > {
        let root = &self.ws.root;
        let path = find_config_file(self.system, root, self.global.config.as_deref());
        let loaded = load_config(self.system, path.as_deref()).map_err(|e| e.to_string())?;
        let old = &self.ws.config;
        let rediscover = loaded.pattern != old.pattern
            || loaded.config.library_modules.paths != old.config.library_modules.paths;
        // Filters and the provider come from the config too: the selection is updated
        // at regeneration.
        let mut changed = loaded.config != old.config;
        let mut diagnostics = config_diagnostics(&loaded);
        diagnostics.extend(
            self.ws
                .diagnostics
                .iter()
                .filter(|d| d.code != "config-warning")
                .cloned(),
        );
        changed |= diagnostics != self.ws.diagnostics;
        self.ws.diagnostics = diagnostics;
        let inputs = (Arc::new(loaded.config.clone()), loaded.pattern.clone());
        self.ws.config = loaded;
        Ok((changed, rediscover, inputs))
    }

    /// Runs discovery again; the modules found, and whether its diagnostics changed.
    fn rediscover(&mut self) -> (Vec<terraci_engine::discover::DiscoveredModule>, bool) {
        let ws = &mut self.ws;
        let discovered = discover_modules(
            self.system,
            &ws.policy,
            &ws.config.pattern,
            &ws.config.config.library_modules.paths,
        );
        let mut diagnostics = config_diagnostics(&ws.config);
        diagnostics.extend(discovered.diagnostics);
        let changed = diagnostics != ws.diagnostics;
        ws.diagnostics = diagnostics;
        (discovered.modules, changed)
    }

    /// `--changed-only`: git's change set now, as the selection's input, without the
    /// pipeline file and the caches this session writes; `None` without the flag.
    fn change_input(&self) -> anyhow::Result<Option<ChangeInput>> {
        let args = &self.args.changes;
        let Some(mut pending) = PendingChanges::start(self.system, &self.ws.root, args)? else {
            return Ok(None);
        };
        let mut input = pending.input(args, &self.ws.config.config, self.cache_dir.as_deref())?;
        if let Ok(out) = self.target.0.strip_prefix(&self.ws.root) {
            input.files.retain(|f| f != out.as_str());
        }
        Ok(Some(input))
    }

    /// Builds the pipeline from the current inputs and writes it if it is good and new.
    fn regenerate(&mut self, err: &mut dyn Write) -> io::Result<(GraphDelta, Outcome)> {
        let settings = settings(self.system, &self.ws, &self.args.pipeline);
        let graph = dependency_graph(&self.ws.db, self.ws.project);
        let shape = terraci_engine::graph::GraphShape::of(graph);
        let (modules_added, modules_removed, edges_changed) = self.shape.changes_to(&shape);
        let delta = GraphDelta {
            modules_added,
            modules_removed,
            edges_changed,
        };
        self.shape = shape;
        let (provider, filters, options) = match settings {
            Ok(s) => s,
            Err(e) => {
                writeln!(err, "error: {e:#}")?;
                return Ok((delta, self.kept("invalid flags for this config")));
            }
        };
        self.target = match &self.output {
            Some(o) => o.clone(),
            None => {
                let rel = default_output(provider);
                (self.ws.root.join(rel), rel.to_owned())
            }
        };
        self.ws.apply(InputChange {
            selection: Some((self.selection, filters, options)),
            ..InputChange::default()
        });

        let diagnostics = self.ws.diagnostics_without_hints();
        let graph = dependency_graph(&self.ws.db, self.ws.project);
        if !graph.cycles.is_empty() {
            // Its `dependency-cycle` error is among the diagnostics.
            self.show(&diagnostics, err)?;
            return Ok((delta, self.kept("dependency cycle")));
        }
        // A new error keeps the file whatever the pipeline would be: skip building it.
        let new_errors = self.new_errors(&error_keys(&diagnostics));
        if new_errors > 0 {
            self.show(&diagnostics, err)?;
            return Ok((delta, self.kept(&plural(new_errors, "new error"))));
        }
        let generation = build_pipeline(
            &self.ws,
            diagnostics,
            &PipelineRequest {
                args: &self.args.pipeline,
                provider,
                selection: self.selection,
                explain: false,
                header: &self.header,
                job_texts: Some(&self.job_texts),
                children: crate::pipeline::Children::Never,
            },
        );
        self.hold_plan();
        self.show(&generation.diagnostics, err)?;
        let errors = error_keys(&generation.diagnostics);
        let new_errors = self.new_errors(&errors);
        if new_errors > 0 {
            return Ok((delta, self.kept(&plural(new_errors, "new error"))));
        }
        let pipeline = match generation.output {
            Ok(p) => p,
            Err(e) => {
                writeln!(err, "error: {e:#}")?;
                return Ok((delta, self.kept("error")));
            }
        };
        if pipeline.warnings != self.warnings && !self.global.quiet {
            for w in &pipeline.warnings {
                write!(err, "{}", w.render_human_styled(None, self.ws.color))?;
            }
        }
        self.warnings = pipeline.warnings;
        let (path, shown) = self.target.clone();
        if self
            .written
            .as_ref()
            .is_some_and(|(p, text)| *p == path && text.same_text(&pipeline.text))
        {
            self.accepted_errors = Some(errors);
            return Ok((delta, Outcome::Unchanged));
        }
        match self
            .system
            .write_output(&self.ws.root, &path, &pipeline.text.parts())
        {
            Ok(wrote) => {
                self.written = Some((path, pipeline.text));
                self.accepted_errors = Some(errors);
                Ok((
                    delta,
                    if wrote {
                        Outcome::Written(shown)
                    } else {
                        Outcome::Unchanged
                    },
                ))
            }
            Err(e) => {
                writeln!(err, "error: cannot write {shown}: {e}")?;
                Ok((delta, self.kept("cannot write")))
            }
        }
    }

    /// Keeps the current job plan's jobs (after a regeneration).
    fn hold_plan(&mut self) {
        if let Ok(plan) = terraci_engine::ir::job_plan(&self.ws.db, self.ws.project, self.selection)
        {
            if !self
                .plans
                .last()
                .is_some_and(|p| Arc::ptr_eq(p, &plan.jobs))
            {
                self.plans.push(plan.jobs.clone());
            }
        }
    }

    /// Frees, on another thread, every held plan but the newest: salsa has dropped its
    /// own reference to them while applying the last batch, and freeing 20,000 jobs
    /// is a millisecond or two that the regeneration need not wait for.
    fn release_plans(&mut self) {
        if self.plans.len() > 1 {
            let old: Vec<_> = self.plans.drain(..self.plans.len() - 1).collect();
            // If no thread can be started, they are freed here, with the closure.
            let _ = std::thread::Builder::new().spawn(move || drop(old));
        }
    }

    /// How many of `errors` the last written file did not have.
    fn new_errors(&self, errors: &BTreeSet<ErrorKey>) -> usize {
        self.accepted_errors
            .as_ref()
            .map_or(0, |accepted| errors.difference(accepted).count())
    }

    fn kept(&self, why: &str) -> Outcome {
        Outcome::Kept {
            file: self.target.1.clone(),
            why: why.to_owned(),
        }
    }

    /// Prints the diagnostics the previous regeneration did not have (all of them the
    /// first time, with the notices).
    fn show(&mut self, diagnostics: &[Diagnostic], err: &mut dyn Write) -> io::Result<()> {
        let new: Vec<Diagnostic> = diagnostics
            .iter()
            .filter(|d| !self.shown.contains(*d))
            .cloned()
            .collect();
        self.ws.print_diagnostics(&new, self.global.quiet, err)?;
        self.ws.notices.clear();
        self.shown = diagnostics.iter().cloned().collect();
        Ok(())
    }

    fn is_output(&self, path: &Utf8Path) -> bool {
        self.target.0 == path || self.written.as_ref().is_some_and(|(p, _)| p == path)
    }

    fn is_config(&self, path: &Utf8Path) -> bool {
        match &self.global.config {
            Some(explicit) => self.system.absolute(explicit).is_ok_and(|abs| abs == path),
            None => {
                path.parent() == Some(self.ws.root.as_path())
                    && path
                        .file_name()
                        .is_some_and(|name| CONFIG_FILE_NAMES.contains(&name))
            }
        }
    }

    /// Whether a known file lies below `rel` (a directory that may just have been
    /// deleted).
    fn holds_known_files(&self, rel: &Utf8Path) -> bool {
        self.ws.db.has_module_files_below(rel.as_str())
    }

    /// Project-relative for paths inside the project, else as they are.
    /// `path` as the status line shows it: project-relative, control characters escaped.
    fn display(&self, path: &Utf8Path) -> String {
        let shown = match path.strip_prefix(&self.ws.root) {
            Ok(rel) => rel.as_str(),
            Err(_) => path.as_str(),
        };
        terraci_db::escape::printable(shown).into_owned()
    }
}

/// The provider, the filters and the plan options from the flags and the config.
fn settings(
    system: &dyn System,
    ws: &Workspace,
    args: &PipelineArgs,
) -> anyhow::Result<(Provider, Filters, PlanOptions)> {
    let filters = ws.filters(&args.select)?;
    let provider = select_provider(system, args.provider.as_deref(), &ws.config.config)?;
    Ok((
        provider,
        filters,
        plan_options(args, provider, &ws.config.config),
    ))
}

fn error_keys(diagnostics: &[Diagnostic]) -> BTreeSet<ErrorKey> {
    diagnostics
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| (d.code.as_str(), d.file.clone(), d.message.clone()))
        .collect()
}

/// `Added` or `Removed` when a path's existence changed, else `Changed`.
fn change_of(known: bool, exists: bool) -> Change {
    match (known, exists) {
        (false, true) => Change::Added,
        (_, false) => Change::Removed,
        (true, true) => Change::Changed,
    }
}

/// `eks/main.tf changed`, or counts by kind of change: `1 file changed, 2 files added`.
fn trigger(touched: &[(String, Change, bool)]) -> String {
    match touched {
        [] => "files changed".to_owned(),
        [(path, change, _)] => format!("{path} {change}"),
        _ => {
            // A new or deleted module is named by its files, not also by its directory.
            let files: Vec<_> = touched.iter().filter(|(_, _, dir)| !dir).collect();
            let (named, noun): (Vec<_>, _) = match files.as_slice() {
                [] => (touched.iter().collect(), "directory"),
                [(path, change, _)] => return format!("{path} {change}"),
                _ => (files, "file"),
            };
            [Change::Changed, Change::Added, Change::Removed]
                .iter()
                .filter_map(|kind| {
                    let n = named.iter().filter(|(_, c, _)| c == kind).count();
                    (n > 0).then(|| format!("{} {kind}", plural(n, noun)))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    }
}

fn plural(n: usize, noun: &str) -> String {
    match (n, noun.strip_suffix('y')) {
        (1, _) => format!("1 {noun}"),
        (_, Some(stem)) => format!("{n} {stem}ies"),
        _ => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests;
