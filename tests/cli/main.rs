//! CLI tests: a fixture repo copied into a temp dir, the real binary run on it, its
//! redacted stdout, stderr and exit code snapshotted.
#![allow(clippy::disallowed_methods)]

mod support;

mod cache;
mod changed_replay;
mod changes;
mod commands;
mod cost;
mod drop_in;
mod fresh_clone;
mod events;
mod generate;
mod github_expr;
mod gitlab_size;
mod gitlab_split;
mod graph;
mod hostile;
mod lsp;
mod policy;
mod real_terraform;
mod robustness;
mod rules;
mod seeds;
mod summary;
mod terminal;
mod text;
mod tfupdate;
mod validate;
mod watch;
