//! The static Terraform expression evaluator.
//!
//! Input: a span-free [`Expr`] and an [`EvalContext`] (the values of `var`, `local`, `path`,
//! `terraform`, `each`, `count` and `for` iterators, plus an [`EvalHost`] for the filesystem
//! functions). Output: a [`Value`], which may be (or contain) [`Value::Unknown`] with the
//! reason it is unknown, or an [`EvalError`] for a real error (type error, unknown function,
//! evaluation limit). Pure: no IO except through the host, no global state.

mod value;

pub use value::{Unknown, Value};

use std::collections::BTreeMap;

use camino::Utf8PathBuf;

use crate::facts::expr::{Expr, NodeId};

/// Filesystem access for `file`, `fileexists`, `fileset`, `templatefile`. Paths are absolute.
/// The resolve stage implements this on top of salsa inputs so reads are tracked.
pub trait EvalHost {
    fn read_file(&self, path: &camino::Utf8Path) -> Result<String, String>;
    fn file_exists(&self, path: &camino::Utf8Path) -> bool;
    /// Files (not directories) below `dir`, as `/`-separated paths relative to `dir`, sorted.
    fn list_files(&self, dir: &camino::Utf8Path) -> Vec<String>;
}

/// A host with no filesystem: every file function yields an unknown value.
pub struct NoFilesystem;

impl EvalHost for NoFilesystem {
    fn read_file(&self, path: &camino::Utf8Path) -> Result<String, String> {
        Err(format!("`{path}` cannot be read here"))
    }
    fn file_exists(&self, _path: &camino::Utf8Path) -> bool {
        false
    }
    fn list_files(&self, _dir: &camino::Utf8Path) -> Vec<String> {
        Vec::new()
    }
}

pub struct EvalContext<'a> {
    /// Top-level names: `var`, `local`, `path`, `terraform`, `each`, `count`. A root name
    /// that is absent (e.g. `data`, `module`, a resource type) evaluates to unknown with the
    /// reason "`data.x.y` is only known after apply".
    pub scope: &'a BTreeMap<String, Value>,
    /// The module's absolute directory; relative paths in file functions resolve against it.
    pub module_dir: Utf8PathBuf,
    pub host: &'a dyn EvalHost,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError {
    /// The node the error is about (the call, the operator, the index...).
    pub node: NodeId,
    /// Stable diagnostic code: `evaluation-error`, `unknown-function`, `evaluation-limit`.
    pub code: &'static str,
    pub message: String,
}

/// Evaluates `expr` in `ctx`.
pub fn evaluate(expr: &Expr, ctx: &EvalContext<'_>) -> Result<Value, EvalError> {
    let _ = (expr, ctx);
    Err(EvalError {
        node: expr.id,
        code: "evaluation-error",
        message: "the evaluator is not written yet".into(),
    })
}

/// Converts `value` to the type written in a `variable` block's `type` (placeholder until
/// the evaluator lands: values pass through unchanged).
pub fn convert_to_type(value: Value, type_expr: &Expr) -> Result<Value, String> {
    let _ = type_expr;
    Ok(value)
}
