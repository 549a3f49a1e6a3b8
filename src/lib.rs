pub mod eval;
pub mod facts;
pub mod vcs;
