//! `terraci lsp`: a Language Server over one warm database of the project.
//!
//! Input: the editor's messages (JSON-RPC over stdio, through `lsp-server`, the
//! synchronous loop rust-analyzer uses: one thread owns the salsa database and handles
//! one message at a time, so no query ever races an input change). Output: diagnostics
//! per file, definitions, references, hovers, code lenses and workspace symbols, read
//! from the engine's queries ([`terraci_engine::symbols`], the resolution). Invalidated
//! by the editor's buffers (open/change/close override the disk) and by the watched-file
//! events the editor sends for saves and checkouts.
//!
//! The project is loaded by the binary through the [`Host`] trait rather than by this
//! crate: loading is the CLI's (config discovery from a directory, the fact cache, the
//! read policy, the global flags), and moving it below would move most of the binary's
//! `workspace` module with it, while the server needs little of a loaded project: its
//! database and project input, its diagnostics, a way to set a file's text or read the
//! disk again, and its job names. The trait is that seam; the binary implements it on
//! its `Workspace`, the same one `watch` keeps warm, changed only through
//! `Workspace::apply`.

mod convert;
mod features;

use std::collections::{BTreeMap, BTreeSet};

use camino::{Utf8Path, Utf8PathBuf};
use lsp_server::{Connection, ErrorCode, Message, Notification, Request, Response};
use lsp_types::notification::{
    DidChangeTextDocument, DidChangeWatchedFiles, DidCloseTextDocument, DidOpenTextDocument,
    Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    CodeLensRequest, ExecuteCommand, GotoDefinition, HoverRequest, References, Request as _,
    WorkspaceSymbolRequest,
};
use lsp_types::{
    CodeLensOptions, ExecuteCommandOptions, HoverProviderCapability, InitializeParams, OneOf,
    PublishDiagnosticsParams, ServerCapabilities, TextDocumentSyncCapability, TextDocumentSyncKind,
};

use terraci_db::db::Database;
use terraci_db::diagnostic::Diagnostic;
use terraci_db::files::Project;

pub use convert::{path_of_uri, uri_of_path};
/// The transport, for a caller that makes its own connection (an in-memory one).
pub use lsp_server;

/// A loaded project, as the binary keeps it (see the crate's doc).
pub trait Host {
    /// The project's database.
    fn db(&self) -> &Database;
    /// The project input.
    fn project(&self) -> Project;
    /// The project's root directory (absolute).
    fn root(&self) -> &Utf8Path;
    /// Sets the text of the project file `rel` (project-relative, `/`-separated) to an
    /// editor's buffer, or back to what is on disk with `None`. False when `rel` is not a
    /// file of the project's modules (it is then ignored).
    fn set_text(&mut self, rel: &str, text: Option<String>) -> bool;
    /// Files changed on disk (a save, a checkout): reads them again, and discovers the
    /// project again when files came or went. `open` are the files whose editor buffer
    /// overrides the disk.
    fn disk_changed(&mut self, rels: &[String], open: &BTreeMap<String, String>);
    /// Every diagnostic of the project, with its file, line and column where it has
    /// them.
    fn diagnostics(&self) -> Vec<Diagnostic>;
    /// The jobs of the module `id`: one line each (name, stage).
    fn jobs(&self, id: &str) -> Vec<String>;
}

/// Loads the project the editor's workspace root belongs to.
pub type Load<'a> = dyn FnMut(&Utf8Path) -> Result<Box<dyn Host + 'a>, String> + 'a;

/// The command a code lens runs: shows the module's jobs.
pub const SHOW_JOBS: &str = "terraci.showJobs";

/// Serves the editor on stdin/stdout until its `exit` (see [`serve`]).
pub fn serve_stdio(load: &mut Load<'_>) -> Result<(), String> {
    let (connection, threads) = Connection::stdio();
    let served = serve(&connection, load);
    // Closes the writer's channel, so its thread ends once it has written everything.
    drop(connection);
    threads.join().map_err(|e| format!("stdio: {e}"))?;
    served
}

/// Serves `connection` until the editor's `exit`: initialize, then messages one at a
/// time. `load` is called once with the workspace root.
pub fn serve(connection: &Connection, load: &mut Load<'_>) -> Result<(), String> {
    let capabilities = ServerCapabilities {
        text_document_sync: Some(TextDocumentSyncCapability::Kind(TextDocumentSyncKind::FULL)),
        definition_provider: Some(OneOf::Left(true)),
        references_provider: Some(OneOf::Left(true)),
        hover_provider: Some(HoverProviderCapability::Simple(true)),
        code_lens_provider: Some(CodeLensOptions {
            resolve_provider: Some(false),
        }),
        workspace_symbol_provider: Some(OneOf::Left(true)),
        execute_command_provider: Some(ExecuteCommandOptions {
            commands: vec![SHOW_JOBS.to_owned()],
            ..ExecuteCommandOptions::default()
        }),
        ..ServerCapabilities::default()
    };
    let caps = serde_json::to_value(capabilities).map_err(|e| e.to_string())?;
    let params = connection
        .initialize(caps)
        .map_err(|e| format!("initialize: {e}"))?;
    let params: InitializeParams =
        serde_json::from_value(params).map_err(|e| format!("initialize: {e}"))?;
    let root = workspace_root(&params)
        .ok_or("initialize: the editor named no workspace root (rootUri or workspaceFolders)")?;
    let host = match load(&root) {
        Ok(host) => host,
        Err(why) => {
            show_message(connection, lsp_types::MessageType::ERROR, &why);
            // Still a server: it answers with nothing until the editor stops it.
            return idle(connection);
        }
    };
    if watches_files(&params) {
        register_file_watchers(connection);
    }
    let mut server = Server {
        connection,
        host,
        open: BTreeMap::new(),
        published: BTreeMap::new(),
    };
    server.publish();
    server.run()
}

/// The root the editor opened: the first workspace folder, else `rootUri`, else
/// `rootPath`.
#[allow(deprecated)] // rootUri and rootPath: older clients send only those.
fn workspace_root(params: &InitializeParams) -> Option<Utf8PathBuf> {
    params
        .workspace_folders
        .as_ref()
        .and_then(|f| f.first())
        .and_then(|f| path_of_uri(&f.uri))
        .or_else(|| params.root_uri.as_ref().and_then(path_of_uri))
        .or_else(|| params.root_path.as_ref().map(Utf8PathBuf::from))
}

/// Whether the editor can be asked to watch files ([`register_file_watchers`]).
fn watches_files(params: &InitializeParams) -> bool {
    params
        .capabilities
        .workspace
        .as_ref()
        .and_then(|w| w.did_change_watched_files.as_ref())
        .and_then(|w| w.dynamic_registration)
        .unwrap_or(false)
}

/// Asks the editor to report saves, checkouts and new or removed files of the kinds
/// discovery reads (`workspace/didChangeWatchedFiles`); its answer needs no handling.
fn register_file_watchers(connection: &Connection) {
    let watchers = [
        "**/*.{tf,tf.json,tofu,tofu.json,tfvars,tfvars.json}",
        "**/.gitignore",
    ]
    .into_iter()
    .map(|glob| lsp_types::FileSystemWatcher {
        glob_pattern: lsp_types::GlobPattern::String(glob.to_owned()),
        kind: None,
    })
    .collect();
    let options = lsp_types::DidChangeWatchedFilesRegistrationOptions { watchers };
    let params = lsp_types::RegistrationParams {
        registrations: vec![lsp_types::Registration {
            id: "terraci-files".to_owned(),
            method: DidChangeWatchedFiles::METHOD.to_owned(),
            register_options: serde_json::to_value(options).ok(),
        }],
    };
    let request = Request::new(
        lsp_server::RequestId::from("terraci-register-files".to_owned()),
        lsp_types::request::RegisterCapability::METHOD.to_owned(),
        params,
    );
    send(connection, request.into());
}

/// Answers every request with an error until `exit` (the project could not be loaded).
fn idle(connection: &Connection) -> Result<(), String> {
    for msg in &connection.receiver {
        if let Message::Request(req) = msg {
            if connection
                .handle_shutdown(&req)
                .map_err(|e| e.to_string())?
            {
                return Ok(());
            }
            let resp = Response::new_err(
                req.id,
                ErrorCode::RequestFailed as i32,
                "the project could not be loaded".into(),
            );
            send(connection, resp.into());
        }
    }
    Ok(())
}

fn send(connection: &Connection, msg: Message) {
    // The editor went away: the reader sees the end of input and the loop ends.
    let _ = connection.sender.send(msg);
}

fn show_message(connection: &Connection, typ: lsp_types::MessageType, text: &str) {
    let params = lsp_types::ShowMessageParams {
        typ,
        message: text.to_owned(),
    };
    send(
        connection,
        Notification::new(
            lsp_types::notification::ShowMessage::METHOD.to_owned(),
            params,
        )
        .into(),
    );
}

struct Server<'c, 'h> {
    connection: &'c Connection,
    host: Box<dyn Host + 'h>,
    /// Open buffers: project-relative path -> text.
    open: BTreeMap<String, String>,
    /// What was last published, per file URI (a file not here has none).
    published: BTreeMap<String, Vec<lsp_types::Diagnostic>>,
}

impl Server<'_, '_> {
    fn run(&mut self) -> Result<(), String> {
        while let Ok(msg) = self.connection.receiver.recv() {
            match msg {
                Message::Request(req) => {
                    if self
                        .connection
                        .handle_shutdown(&req)
                        .map_err(|e| e.to_string())?
                    {
                        return Ok(());
                    }
                    let resp = self.request(req);
                    send(self.connection, resp.into());
                }
                Message::Notification(note) => self.notification(note),
                Message::Response(_) => {}
            }
        }
        Ok(())
    }

    /// The project-relative path of a document inside the project; `None` for one
    /// outside it, which the server ignores.
    fn rel(&self, uri: &lsp_types::Uri) -> Option<String> {
        let path = path_of_uri(uri)?;
        let rel = path.strip_prefix(self.host.root()).ok()?;
        (!rel.as_str().is_empty()).then(|| rel.as_str().to_owned())
    }

    fn notification(&mut self, note: Notification) {
        match note.method.as_str() {
            DidOpenTextDocument::METHOD => {
                let Ok(p) = note
                    .extract::<lsp_types::DidOpenTextDocumentParams>(DidOpenTextDocument::METHOD)
                else {
                    return;
                };
                self.buffer(&p.text_document.uri, Some(p.text_document.text));
            }
            DidChangeTextDocument::METHOD => {
                let Ok(p) = note.extract::<lsp_types::DidChangeTextDocumentParams>(
                    DidChangeTextDocument::METHOD,
                ) else {
                    return;
                };
                // Full sync: the last change holds the whole text.
                if let Some(change) = p.content_changes.into_iter().last() {
                    self.buffer(&p.text_document.uri, Some(change.text));
                }
            }
            DidCloseTextDocument::METHOD => {
                let Ok(p) = note
                    .extract::<lsp_types::DidCloseTextDocumentParams>(DidCloseTextDocument::METHOD)
                else {
                    return;
                };
                self.buffer(&p.text_document.uri, None);
            }
            DidChangeWatchedFiles::METHOD => {
                let Ok(p) = note.extract::<lsp_types::DidChangeWatchedFilesParams>(
                    DidChangeWatchedFiles::METHOD,
                ) else {
                    return;
                };
                let rels: Vec<String> = p.changes.iter().filter_map(|c| self.rel(&c.uri)).collect();
                if !rels.is_empty() {
                    self.host.disk_changed(&rels, &self.open);
                    self.publish();
                }
            }
            _ => {}
        }
    }

    /// An editor buffer opened, changed (`Some`) or closed (`None`).
    fn buffer(&mut self, uri: &lsp_types::Uri, text: Option<String>) {
        let Some(rel) = self.rel(uri) else {
            return;
        };
        match &text {
            Some(t) => self.open.insert(rel.clone(), t.clone()),
            None => self.open.remove(&rel),
        };
        if self.host.set_text(&rel, text) {
            self.publish();
        }
    }

    /// Publishes the diagnostics of every file whose set changed since the last time.
    fn publish(&mut self) {
        let now = convert::diagnostics_by_uri(&*self.host);
        let uris: BTreeSet<String> = now.keys().chain(self.published.keys()).cloned().collect();
        for uri in uris {
            let diagnostics = now.get(&uri).cloned().unwrap_or_default();
            if self
                .published
                .get(&uri)
                .map_or(diagnostics.is_empty(), |d| *d == diagnostics)
            {
                continue;
            }
            let Ok(parsed) = uri.parse::<lsp_types::Uri>() else {
                continue;
            };
            let params = PublishDiagnosticsParams {
                uri: parsed,
                diagnostics: diagnostics.clone(),
                version: None,
            };
            send(
                self.connection,
                Notification::new(PublishDiagnostics::METHOD.to_owned(), params).into(),
            );
            if diagnostics.is_empty() {
                self.published.remove(&uri);
            } else {
                self.published.insert(uri, diagnostics);
            }
        }
    }

    fn request(&mut self, req: Request) -> Response {
        let id = req.id.clone();
        let result = match req.method.as_str() {
            GotoDefinition::METHOD => parse(req).map(|p| {
                let p: lsp_types::GotoDefinitionParams = p;
                let at = &p.text_document_position_params;
                let locations = self
                    .rel(&at.text_document.uri)
                    .map(|rel| features::definition(&*self.host, &rel, at.position))
                    .unwrap_or_default();
                json(lsp_types::GotoDefinitionResponse::Array(locations))
            }),
            References::METHOD => parse(req).map(|p| {
                let p: lsp_types::ReferenceParams = p;
                let at = &p.text_document_position;
                let locations = self
                    .rel(&at.text_document.uri)
                    .map(|rel| {
                        features::references(
                            &*self.host,
                            &rel,
                            at.position,
                            p.context.include_declaration,
                        )
                    })
                    .unwrap_or_default();
                json(locations)
            }),
            HoverRequest::METHOD => parse(req).map(|p| {
                let p: lsp_types::HoverParams = p;
                let at = &p.text_document_position_params;
                let hover = self
                    .rel(&at.text_document.uri)
                    .and_then(|rel| features::hover(&*self.host, &rel, at.position));
                json(hover)
            }),
            CodeLensRequest::METHOD => parse(req).map(|p| {
                let p: lsp_types::CodeLensParams = p;
                let lenses = self
                    .rel(&p.text_document.uri)
                    .map(|rel| features::code_lenses(&*self.host, &rel))
                    .unwrap_or_default();
                json(lenses)
            }),
            WorkspaceSymbolRequest::METHOD => parse(req).map(|p| {
                let p: lsp_types::WorkspaceSymbolParams = p;
                json(features::workspace_symbols(&*self.host, &p.query))
            }),
            ExecuteCommand::METHOD => parse(req).map(|p| {
                let p: lsp_types::ExecuteCommandParams = p;
                let id = p
                    .arguments
                    .first()
                    .and_then(|a| a.as_str())
                    .unwrap_or_default();
                if p.command == SHOW_JOBS && !id.is_empty() {
                    let jobs = self.host.jobs(id);
                    let text = match jobs.is_empty() {
                        true => format!("{id}: no jobs"),
                        false => format!("{id}: {}", jobs.join("; ")),
                    };
                    show_message(self.connection, lsp_types::MessageType::INFO, &text);
                }
                serde_json::Value::Null
            }),
            _ => Err((
                ErrorCode::MethodNotFound as i32,
                format!("unknown request {}", req.method),
            )),
        };
        match result {
            Ok(value) => Response::new_ok(id, value),
            Err((code, message)) => Response::new_err(id, code, message),
        }
    }
}

fn parse<P: serde::de::DeserializeOwned>(req: Request) -> Result<P, (i32, String)> {
    serde_json::from_value(req.params).map_err(|e| {
        (
            ErrorCode::InvalidParams as i32,
            format!("{}: {e}", req.method),
        )
    })
}

fn json(value: impl serde::Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}
