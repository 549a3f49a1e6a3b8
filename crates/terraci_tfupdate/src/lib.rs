//! `terraci tfupdate`: Terraform provider and module version bumps.
//!
//! The stages, top to bottom: [`version`] (constraints as terraform reads them).

pub mod version;
pub mod archive;
pub mod lockfile;
