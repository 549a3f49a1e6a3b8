//! `terraci tfupdate`: Terraform provider and module version bumps, with lock files
//! terraform accepts byte for byte.
//!
//! The stages, top to bottom: [`version`] (constraints as terraform reads them),
//! [`scan`] (what each module asks for), [`registry`] (the registry protocol),
//! [`plan`] (which version each dependency moves to), [`write`] (`--write`: the `.tf`
//! files and lock files), [`report`] (text, JSON, the summary's report); [`archive`] and
//! [`lockfile`] are the package hashes and the lock file format.

pub mod archive;
pub mod lockfile;
pub mod plan;
pub mod registry;
pub mod report;
pub mod scan;
pub mod version;
pub mod write;
