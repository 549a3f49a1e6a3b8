//! terraci: a Terraform/OpenTofu monorepo to a dependency-ordered CI pipeline.
//!
//! Reading the modules top to bottom reads the pipeline, and no module imports one listed
//! after it (`import_order` below fails the build's tests on a backward `crate::` path):
//! the shared ground (escaping, `System` and the network boundary `http`, exit codes, the
//! command line, config, selection, the syntax tree, the salsa
//! inputs, diagnostics and the database), then the stages discover -> parse -> facts ->
//! eval -> resolve -> graph -> changes -> ir -> render; then the driver: `workspace`
//! loads a project, `pipeline` builds one from it, and `commands` holds one file per
//! command (`watch` keeps a workspace and rebuilds on file events).

pub mod escape;
pub mod sorted;
pub mod system;
pub mod http;
pub mod exit;
pub mod cli;
pub mod config;
pub mod filter;
pub mod selection;
pub mod syntax;
pub mod owners;
pub mod files;
pub mod diagnostic;
pub mod db;
pub mod chunk;
pub mod discover;
pub mod parse;
pub mod facts;
/// The fact cache's file format is also the run record's (`replay`).
pub use facts::cache;
pub mod replay;
pub mod eval;
pub mod resolve;
pub mod graph;
pub mod changes;
pub mod policy;
pub mod contrib;
pub mod ir;
pub mod render;
pub mod summary;
pub mod exec;
pub mod vcs;
pub mod parallel;
pub mod init;
pub mod workspace;
pub mod pipeline;
pub mod watch;
pub mod commands;
pub mod testing;

#[cfg(test)]
mod import_order;
