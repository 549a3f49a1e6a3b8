//! One way to change a loaded workspace's inputs (rust-analyzer's `FileChange::apply`,
//! ty's `apply_changes`): what a batch of events changed is collected outside salsa as an
//! [`InputChange`] and applied in one place, [`Workspace::apply`], which sets every
//! durability and always ends with the project's owners input in sync
//! ([`terraci_engine::resolve::sync_owners`]), through a warm-up of every module when modules or
//! the config changed. No caller sets an input or syncs the owners index itself.

use std::sync::Arc;

use salsa::Setter as _;

use terraci_db::config::{Config, Pattern};
use terraci_db::files::{ChangeInput, EvalSettings, File, FileContents, Selection};
use terraci_engine::discover::DiscoveredModule;

use super::{set_module_inputs, Workspace};

/// A batch of input changes; the default changes nothing.
#[derive(Debug, Default)]
pub struct InputChange {
    /// New contents of known files (an editor's save). Set at `LOW` durability: what the
    /// user edits is what changes next.
    pub(crate) edits: Vec<(File, FileContents)>,
    /// A new discovery of the project, reconciled with the inputs by path and id, so
    /// that unchanged files and modules keep their inputs and memos.
    pub(crate) discovered: Option<Vec<DiscoveredModule>>,
    /// A reloaded config, and its pattern.
    pub config: Option<(Arc<Config>, Pattern)>,
    /// `--workspace`, `--var-file` and `--var`, read again.
    pub eval_settings: Option<EvalSettings>,
    /// Read again what `file()`/`fileset()` read.
    pub(crate) refresh_extra: bool,
    /// `--changed-only`: a selection's new change set.
    pub changes: Option<(Selection, Option<ChangeInput>)>,
    /// A selection's filters and plan options, from the flags and a reloaded config.
    pub(crate) selection: Option<(
        Selection,
        terraci_db::filter::Filters,
        terraci_engine::ir::PlanOptions,
    )>,
}

impl InputChange {
    /// The change of one file's text.
    pub fn edit(file: File, contents: FileContents) -> InputChange {
        InputChange {
            edits: vec![(file, contents)],
            ..InputChange::default()
        }
    }
}

/// What [`Workspace::apply`] did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Applied {
    /// Some input took a new value.
    pub(crate) changed: bool,
    /// A file or directory read through `file()`/`fileset()` changed.
    pub(crate) extra_changed: bool,
    /// The change set of the selection changed.
    pub(crate) changes_changed: bool,
}

impl Workspace {
    /// Applies `change`: every input whose value differs is set (an equal value is left
    /// alone, so its memos stay valid), then the owners index is brought up to date.
    pub fn apply(&mut self, change: InputChange) -> Applied {
        let mut applied = Applied::default();
        let db = &mut self.db;
        let project = self.project;
        for (file, contents) in change.edits {
            if *file.contents(db) != contents {
                file.set_contents(db)
                    .with_durability(salsa::Durability::LOW)
                    .to(contents);
                applied.changed = true;
            }
        }
        let mut structural = false;
        if let Some((config, pattern)) = change.config {
            if **project.config(db) != *config {
                project.set_config(db).to(config);
                structural = true;
            }
            if *project.pattern(db) != pattern {
                project.set_pattern(db).to(pattern);
                structural = true;
            }
        }
        if let Some(settings) = change.eval_settings {
            if *project.eval_settings(db) != settings {
                project.set_eval_settings(db).to(settings);
                applied.changed = true;
            }
        }
        if let Some(discovered) = change.discovered {
            let (modules, mut changed) = set_module_inputs(db, discovered, &mut self.modules);
            if *project.modules(db) != modules {
                project.set_modules(db).to(modules);
                changed = true;
            }
            structural |= changed;
        }
        if change.refresh_extra {
            applied.extra_changed = !db.refresh_extra().is_empty();
        }
        if let Some((selection, changes)) = change.changes {
            if *selection.changes(db) != changes {
                selection.set_changes(db).to(changes);
                applied.changes_changed = true;
            }
        }
        if let Some((selection, filters, options)) = change.selection {
            if *selection.filters(db) != filters {
                selection.set_filters(db).to(filters);
                applied.changed = true;
            }
            if selection.plan_options(db) != options {
                selection.set_plan_options(db).to(options);
                applied.changed = true;
            }
        }
        applied.changed |= structural || applied.extra_changed || applied.changes_changed;
        if structural {
            // New modules or another config: their facts and references on every core,
            // as a cold run computes them (this syncs the owners index too).
            crate::parallel::warm_up(&mut self.db, project, false);
        } else {
            terraci_engine::resolve::sync_owners(&mut self.db, project);
        }
        applied
    }
}
