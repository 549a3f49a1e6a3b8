pub mod config;
pub mod eval;
pub mod facts;
pub mod ir;
pub mod render;
pub mod system;
