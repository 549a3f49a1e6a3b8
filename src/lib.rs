pub mod eval;
pub mod facts;
