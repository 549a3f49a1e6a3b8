pub mod config;
pub mod eval;
pub mod facts;
pub mod system;
pub mod ir;
pub mod exec;
