//! `lsp`: the Language Server over stdio ([`terraci_lsp`]), on a [`Workspace`] kept warm
//! as `watch` keeps it: the editor's buffers and the disk's changes reach the database
//! through [`Workspace::apply`] only.

use std::collections::BTreeMap;

use camino::Utf8Path;

use crate::cli::{GlobalArgs, LspArgs};
use crate::workspace::{load_workspace, InputChange, Workspace};
use terraci_db::db::Database;
use terraci_db::diagnostic::Diagnostic;
use terraci_db::exit;
use terraci_db::files::{FileContents, FileKind, Project};
use terraci_db::system::System;

use super::Io;

pub(super) fn lsp(global: &GlobalArgs, args: &LspArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let system = io.system;
    let served = terraci_lsp::serve_stdio(&mut loader(system, global, args));
    match served {
        Ok(()) => Ok(exit::OK),
        Err(why) => Err(exit::fail(exit::ERROR, format!("lsp: {why}"))),
    }
}

/// Serves an editor on `connection` (an in-memory one in the benchmarks) as `terraci
/// lsp` serves stdio.
pub fn serve(
    connection: &terraci_lsp::lsp_server::Connection,
    system: &dyn System,
    global: &GlobalArgs,
    args: &LspArgs,
) -> Result<(), String> {
    terraci_lsp::serve(connection, &mut loader(system, global, args))
}

/// Loads the project of the editor's workspace root.
fn loader<'a>(
    system: &'a dyn System,
    global: &'a GlobalArgs,
    args: &'a LspArgs,
) -> impl FnMut(&Utf8Path) -> Result<Box<dyn terraci_lsp::Host + 'a>, String> + 'a {
    move |root: &Utf8Path| -> Result<Box<dyn terraci_lsp::Host + 'a>, String> {
        let served = Served::load(system, global, args, root).map_err(|e| format!("{e:#}"))?;
        Ok(Box::new(served))
    }
}

/// The project the server holds.
struct Served<'s> {
    system: &'s dyn System,
    ws: Workspace,
}

impl<'s> Served<'s> {
    /// The project `root` belongs to, found as the CLI finds it from there: `-d` and
    /// `-c` if given, else the directory of the config found upward from `root`, else
    /// `root`.
    fn load(
        system: &'s dyn System,
        global: &GlobalArgs,
        args: &LspArgs,
        root: &Utf8Path,
    ) -> anyhow::Result<Served<'s>> {
        let mut global = global.clone();
        if global.dir.is_none() {
            let root = system.absolute(root)?;
            let found = match global.config {
                Some(_) => None,
                None => terraci_db::config::find_config_upward(system, &root),
            };
            global.dir = Some(
                found
                    .as_deref()
                    .and_then(Utf8Path::parent)
                    .map_or(root.clone(), Utf8Path::to_owned),
            );
        }
        let ws = load_workspace(system, &global, &args.eval)?;
        Ok(Served { system, ws })
    }

    /// What is on disk of the project file `rel`.
    fn disk(&self, rel: &str) -> FileContents {
        match self
            .system
            .read_confined(&self.ws.root.join(rel), &self.ws.policy, true)
        {
            Ok((bytes, _)) => FileContents::from_bytes(bytes),
            Err(e) => FileContents::Unreadable(e.to_string()),
        }
    }
}

impl terraci_lsp::Host for Served<'_> {
    fn db(&self) -> &Database {
        &self.ws.db
    }

    fn project(&self) -> Project {
        self.ws.project
    }

    fn root(&self) -> &Utf8Path {
        &self.ws.root
    }

    fn set_text(&mut self, rel: &str, text: Option<String>) -> bool {
        let Some(file) = self.ws.db.module_file(rel) else {
            return false;
        };
        let contents = match text {
            Some(text) => FileContents::Text(text),
            None => self.disk(rel),
        };
        self.ws.apply(InputChange::edit(file, contents));
        true
    }

    fn disk_changed(&mut self, rels: &[String], open: &BTreeMap<String, String>) {
        let mut change = InputChange {
            refresh_extra: true,
            ..InputChange::default()
        };
        let mut rediscover = false;
        for rel in rels {
            let exists = self.system.is_file(&self.ws.root.join(rel));
            match self.ws.db.module_file(rel) {
                // The editor's buffer wins over the disk until it is closed.
                Some(_) if open.contains_key(rel) => {}
                Some(file) if exists => change.edits.push((file, self.disk(rel))),
                Some(_) => rediscover = true,
                None => {
                    let name = Utf8Path::new(rel).file_name().unwrap_or_default();
                    rediscover |= FileKind::of(name).is_some() || name == ".gitignore";
                }
            }
        }
        if rediscover {
            let ws = &mut self.ws;
            let discovered = terraci_engine::discover::discover_modules(
                self.system,
                &ws.policy,
                &ws.config.pattern,
                &ws.config.config.library_modules.paths,
            );
            let mut diagnostics = crate::workspace::config_diagnostics(&ws.config);
            diagnostics.extend(discovered.diagnostics);
            ws.diagnostics = diagnostics;
            change.discovered = Some(discovered.modules);
        }
        self.ws.apply(change);
        if rediscover {
            // Discovery read the disk: the buffers are put back over it.
            let edits: Vec<_> = open
                .iter()
                .filter_map(|(rel, text)| {
                    let file = self.ws.db.module_file(rel)?;
                    Some((file, FileContents::Text(text.clone())))
                })
                .collect();
            self.ws.apply(InputChange {
                edits,
                ..InputChange::default()
            });
        }
    }

    fn diagnostics(&self) -> Vec<Diagnostic> {
        let mut all = self.ws.diagnostics_without_hints();
        all.extend(self.ws.text_diagnostics());
        all
    }

    fn jobs(&self, id: &str) -> Vec<String> {
        use terraci_engine::ir::{job_name, JobKind};
        let db = &self.ws.db;
        let graph = terraci_engine::graph::dependency_graph(db, self.ws.project);
        let Some(level) = graph
            .levels()
            .iter()
            .position(|ids| ids.iter().any(|m| m == id))
        else {
            return Vec::new();
        };
        [JobKind::Plan, JobKind::Apply]
            .into_iter()
            .map(|kind| format!("{} (level {level})", job_name(kind, id)))
            .collect()
    }
}
