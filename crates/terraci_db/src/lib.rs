//! terraci's ground floor: what every layer above stands on.
//!
//! The `System` boundary (disk, environment, clock: all IO of the engine goes through it),
//! the config types and their loader, selection and filters, the span-free syntax tree,
//! the salsa inputs (`files`), diagnostics as values, and the database trait. No stage
//! logic: the stages are in `terraci_engine`. Modules are listed in dependency order, and
//! none imports one listed after it (the binary's `import_order` test checks every crate).

pub mod escape;
pub mod sorted;
pub mod system;
pub mod exit;
pub mod config;
pub mod filter;
pub mod selection;
pub mod syntax;
pub mod owners;
pub mod files;
pub mod diagnostic;
pub mod store;
pub mod db;
