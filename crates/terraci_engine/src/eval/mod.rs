//! The static Terraform expression evaluator.
//!
//! Input: a span-free [`Expr`] and an [`EvalContext`] (the values of `var`, `local`, `path`,
//! `terraform`, `each`, `count` and `for` iterators, plus an [`EvalHost`] for the filesystem
//! functions). Output: a [`Value`], which may be (or contain) [`Value::Unknown`] with the
//! reason it is unknown, or an [`EvalError`] for a real error (type error, unknown function,
//! evaluation limit). Pure: no IO except through the host, no global state.

/// The Terraform release whose semantics evaluation is held against (its function list,
/// its answers in `terraform console`): also the default image tag of the pipelines
/// (`terraci_render::default_image`), so that jobs run what terraci read the code as.
pub const TERRAFORM_VERSION: &str = "1.11";
/// The OpenTofu release of the same language level (OpenTofu 1.10 follows Terraform
/// 1.10/1.11 in what terraci evaluates).
pub const TOFU_VERSION: &str = "1.10";

mod convert;
mod evaluator;
mod functions;
mod value;

#[cfg(test)]
mod tests;

pub(crate) use convert::convert_to_type;
pub(crate) use functions::json_string;
pub(crate) use value::{Object, Value};

/// Bounds that keep evaluation finite on any input.
pub(crate) mod limits {
    /// Nesting of expression nodes, template directives and splats.
    pub(crate) const MAX_DEPTH: usize = 256;
    /// Stack bytes one evaluation may use, well under the 2 MiB of a spawned thread.
    pub(crate) const MAX_STACK: usize = 1024 * 1024;
    /// Nesting of the resulting value (it can grow through chains of locals).
    pub(crate) const MAX_VALUE_DEPTH: usize = 512;
    /// Elements of one collection.
    pub(crate) const MAX_ELEMENTS: usize = 1_000_000;
    /// Bytes of one string.
    pub(crate) const MAX_STRING: usize = 16 * 1024 * 1024;
    /// Elements `range()` may produce, as in Terraform.
    pub(crate) const MAX_RANGE: usize = 1024;
    /// Work units for one evaluation: one per node, element or 16 bytes of copied string.
    pub(crate) const FUEL: u64 = 10_000_000;
    /// Compiled-program size for one regular expression.
    pub(crate) const REGEX_SIZE: usize = 2 * 1024 * 1024;
    /// Source length of one regular expression.
    pub(crate) const MAX_REGEX_LEN: usize = 64 * 1024;
}

use camino::Utf8PathBuf;

use terraci_db::diagnostic::Code;
use terraci_db::syntax::{Expr, NodeId};

/// Filesystem access for `file`, `fileexists`, `fileset`, `templatefile`. Paths are absolute.
/// The resolve stage implements this on top of salsa inputs so reads are tracked.
pub(crate) trait EvalHost {
    fn read_file(&self, path: &camino::Utf8Path) -> Result<String, String>;
    /// `Err(why)` for a file terraci refuses to read (in the git directory, outside the
    /// repository, a link out of it): `fileexists` is then unknown, as `file` is.
    fn file_exists(&self, path: &camino::Utf8Path) -> Result<bool, String>;
    /// Files (not directories) below `dir`, as `/`-separated paths relative to `dir`, sorted.
    fn list_files(&self, dir: &camino::Utf8Path) -> Vec<String>;
}

/// A host with no filesystem: every file function yields an unknown value.
pub(crate) struct NoFilesystem;

impl EvalHost for NoFilesystem {
    fn read_file(&self, path: &camino::Utf8Path) -> Result<String, String> {
        Err(format!("`{path}` cannot be read here"))
    }
    fn file_exists(&self, _path: &camino::Utf8Path) -> Result<bool, String> {
        Ok(false)
    }
    fn list_files(&self, _dir: &camino::Utf8Path) -> Vec<String> {
        Vec::new()
    }
}

pub(crate) struct EvalContext<'a> {
    /// Top-level names: `var`, `local`, `path`, `terraform`, `each`, `count`. A root name
    /// that is absent (e.g. `data`, `module`, a resource type) evaluates to unknown with the
    /// reason "`data.x.y` is only known after apply".
    pub(crate) scope: &'a Object,
    /// Top-level names looked up before `scope`'s (a block's `each` or `count`): the
    /// scope is shared, not copied, to add them.
    pub(crate) extra: &'a [(String, Value)],
    /// The module's absolute directory; relative paths in file functions resolve against it.
    pub(crate) module_dir: Utf8PathBuf,
    pub(crate) host: &'a dyn EvalHost,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EvalError {
    /// The node the error is about (the call, the operator, the index...).
    pub(crate) node: NodeId,
    /// Stable diagnostic code: `evaluation-error`, `unknown-function`, `evaluation-limit`.
    pub(crate) code: terraci_db::diagnostic::Code,
    pub(crate) message: String,
}

/// Evaluates `expr` in `ctx`.
///
/// Never panics and always terminates: deep nesting, huge collections, long strings and
/// expensive computations end in an `evaluation-limit` error.
pub(crate) fn evaluate(expr: &Expr, ctx: &EvalContext<'_>) -> Result<Value, EvalError> {
    let value = evaluator::Evaluator::new(ctx).eval(expr)?;
    if value.depth() > limits::MAX_VALUE_DEPTH {
        return Err(EvalError {
            node: expr.id,
            code: Code::EvaluationLimit,
            message: format!(
                "the value is nested more than {} levels deep",
                limits::MAX_VALUE_DEPTH
            ),
        });
    }
    Ok(value)
}
