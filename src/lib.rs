//! terraci: a Terraform/OpenTofu monorepo to a dependency-ordered CI pipeline.
//!
//! Reading the modules top to bottom reads the pipeline: config -> discover -> parse ->
//! facts -> eval/resolve -> graph -> changes -> ir -> render; then the driver: `workspace`
//! loads a project, `pipeline` builds one from it, and `commands` holds one file per
//! command (`watch` keeps a workspace and rebuilds on file events).

pub mod cache;
pub mod changes;
pub mod chunk;
pub mod cli;
pub mod commands;
pub mod config;
pub mod contrib;
pub mod db;
pub mod diagnostic;
pub mod discover;
pub mod escape;
pub mod eval;
pub mod exec;
pub mod exit;
pub mod facts;
pub mod files;
pub mod filter;
pub mod graph;
pub mod http;
pub mod init;
pub mod ir;
pub mod parallel;
pub mod parse;
pub mod pipeline;
pub mod policy;
pub mod render;
pub mod replay;
pub mod resolve;
pub mod summary;
pub mod system;
pub mod testing;
pub mod vcs;
pub mod watch;
pub mod workspace;
