//! terraci's engine: the salsa stages in pipeline order.
//!
//! parse -> discover (which outlines files to tell roots from libraries) -> facts -> eval
//! -> resolve -> graph -> changes -> contributions (a model of the jobs extensions add) ->
//! ir (the provider-neutral job plan). Also the
//! fact and module-summary stores. No network, no git, no command line: those are the
//! crates above (`terraci_vcs`, `terraci_ext`, `terraci`). A module imports only
//! modules listed before it.

mod key_index;
pub mod chunk;
pub mod parse;
pub mod discover;
pub mod facts;
/// The fact cache's file format is also the run record's (`replay`).
pub use facts::cache;
pub mod eval;
pub mod resolve;
pub mod symbols;
pub mod graph;
pub mod changes;
pub mod contrib;
pub mod ir;
