//! `terraci tfupdate`: Terraform provider and module version bumps, with lock files
//! terraform accepts byte for byte.
//!
//! The stages, top to bottom (no module uses one listed after it): [`version`]
//! (constraints as terraform reads them), [`archive`] and [`lockfile`] (package hashes,
//! the lock file format), [`scan`] (what each module asks for), [`registry`] (the
//! registry protocol), [`plan`] (which version each dependency moves to), [`write`]
//! (`--write`: the `.tf` files and lock files), [`report`] (text, JSON, the summary's
//! report).

pub mod version;
pub mod archive;
pub mod lockfile;
pub mod scan;
pub mod registry;
pub mod plan;
pub mod write;
pub mod report;
