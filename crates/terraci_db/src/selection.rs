//! What the command line selects: which modules get jobs (filters, `--changed-only`) and
//! how (the plan options and the runner the pipeline is built for).
//!
//! Input: the selection flags, set as the [`Selection`] input. Read by change detection
//! and by the IR; nothing here depends on a later stage.

use crate::filter::Filters;

/// What `--changed-only` saw: changed paths relative to the project dir.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeInput {
    /// Sorted, `/`-separated, relative to the project dir. Includes deleted paths.
    pub files: Vec<String>,
    /// The paths of `files` that are submodules: they mark the modules around and inside.
    pub submodules: Vec<String>,
    /// `--include-dependencies`: add the changed modules' transitive dependencies.
    pub include_dependencies: bool,
}

/// Which modules get jobs and how: the command line's selection flags.
#[salsa::input(debug)]
pub struct Selection {
    #[returns(ref)]
    pub filters: Filters,
    #[returns(copy)]
    pub plan_options: PlanOptions,
    /// `None`: every module is a candidate (no `--changed-only`).
    #[returns(ref)]
    pub changes: Option<ChangeInput>,
}

/// What the pipeline is built for: the CI provider, or this machine (`local-exec`).
/// Extensions contribute jobs per runner (`extensions.gitlab.mr` is GitLab's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Runner {
    #[default]
    Local,
    Gitlab,
    Github,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlanOptions {
    /// No apply jobs.
    pub plan_only: bool,
    /// With `plan_only`: plan jobs do not wait for each other.
    pub parallel_plans: bool,
    /// No jobs for modules whose id holds `${{`: GitHub evaluates that as an expression
    /// wherever it appears, and there is no way to escape it. Nor for ids holding a line
    /// break: upload-artifact reads each line of its `path` as a pattern of its own.
    pub refuse_expressions: bool,
    /// No jobs for modules whose id holds a GitLab variable reference (`$NAME`,
    /// `${NAME}`): GitLab expands those in `artifacts`, `cache` and `resource_group`,
    /// where no escape is documented (a directory named `$CI_JOB_TOKEN` would put the
    /// token into artifact paths and the job log).
    pub refuse_variables: bool,
    /// Which extensions' jobs the pipeline gets.
    pub runner: Runner,
}

/// Whether GitHub would evaluate part of `s` as an expression.
pub fn holds_expression(s: &str) -> bool {
    s.contains("${{")
}

/// Whether `s` holds a line break, which splits a GitHub action's list input (`\n`, and
/// `\r` for the readers that split on `\r\n` or trim).
pub fn holds_line_break(s: &str) -> bool {
    s.contains(['\n', '\r'])
}

/// Whether `s` holds what GitLab expands as a variable: `$` then a letter, `_` or `{`.
pub fn holds_variable(s: &str) -> bool {
    s.as_bytes()
        .windows(2)
        .any(|w| w[0] == b'$' && (w[1].is_ascii_alphabetic() || w[1] == b'_' || w[1] == b'{'))
}

impl PlanOptions {
    /// Whether the module `id` gets no jobs for its name alone.
    pub fn refuses(&self, id: &str) -> bool {
        (self.refuse_expressions && (holds_expression(id) || holds_line_break(id)))
            || (self.refuse_variables && holds_variable(id))
    }
}
