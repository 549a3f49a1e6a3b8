//! terraci: a Terraform/OpenTofu monorepo to a dependency-ordered CI pipeline.
//!
//! The binary's crate: the command line (clap types only), one file per command, the
//! load/warm/generate orchestration (`workspace`, `parallel`, `pipeline`), the run
//! record (`replay`), `watch` and `local-exec`. The layers below are crates of their own:
//! `terraci_db` (ground), `terraci_engine` (stages), `terraci_render`, `terraci_vcs`,
//! `terraci_ext`, `terraci_lsp` (the language server); see `docs/architecture.md`.

pub mod cli;
pub mod git_index;
pub mod replay;
pub mod walk_memo;
pub mod exec;
pub mod parallel;
pub mod workspace;
pub mod pipeline;
pub mod watch;
pub mod init;
pub mod commands;
pub mod testing;

#[cfg(test)]
mod import_order;
#[cfg(test)]
mod stage_tests;
