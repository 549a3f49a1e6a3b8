//! Engine tests that need this crate's loader (`workspace::load_workspace`).

mod changes;
mod resolve;
mod summary;
