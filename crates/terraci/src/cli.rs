//! Command-line types (clap derive only; no logic).

use camino::Utf8PathBuf;
use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(
    name = "terraci",
    version,
    about = "Turns a Terraform/OpenTofu monorepo into a dependency-ordered CI pipeline"
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// The options every command takes: listed after a command's own in `--help`, under
/// their own heading.
#[derive(Debug, Args, Clone)]
#[command(next_help_heading = "Global options")]
pub struct GlobalArgs {
    /// Config file (default: .terraci.yaml, .terraci.yml, terraci.yaml, terraci.yml in the project dir)
    #[arg(short = 'c', long, global = true, env = "TERRACI_CONFIG")]
    pub config: Option<Utf8PathBuf>,
    /// Project directory (default: the directory of the config found from here upward to the repository top, else the current one)
    #[arg(short = 'd', long, global = true, env = "TERRACI_DIR")]
    pub(crate) dir: Option<Utf8PathBuf>,
    /// More output (repeat for more)
    #[arg(short = 'v', long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
    /// Only errors on stderr
    #[arg(short = 'q', long, global = true)]
    pub(crate) quiet: bool,
    /// Colour in diagnostics
    #[arg(long, global = true, value_enum, default_value_t = ColorChoice::Auto)]
    pub(crate) color: ColorChoice,
    /// Log level: debug (as -v), info, warn (the default), error (as -q)
    #[arg(short = 'l', long, global = true, value_name = "LEVEL", default_value = "warn", value_parser = parse_log_level)]
    pub(crate) log_level: LogLevel,
    /// Neither read nor write the fact cache
    // From the environment, `0`, `false`, `no`, `off` or an empty value keep the cache and
    // any other value (`1`, `true`, `yes`) turns it off.
    #[arg(
        long,
        global = true,
        env = "TERRACI_NO_CACHE",
        value_parser = clap::builder::FalseyValueParser::new()
    )]
    pub(crate) no_cache: bool,
    /// Fact cache directory (default: .terraci/cache in the project dir)
    #[arg(long, global = true, env = "TERRACI_CACHE_DIR", value_name = "DIR")]
    pub(crate) cache_dir: Option<Utf8PathBuf>,
    /// Largest file terraci reads, in bytes; larger ones are a `file-too-large` error
    #[arg(long, global = true, env = "TERRACI_MAX_FILE_SIZE", value_name = "BYTES", default_value_t = terraci_db::system::DEFAULT_MAX_FILE_SIZE)]
    pub(crate) max_file_size: u64,
    /// Largest plan.json `summary` and `policy check` read, in bytes (plans are often larger
    /// than source files); a larger plan is "too large", not failed
    #[arg(long, global = true, env = "TERRACI_MAX_PLAN_SIZE", value_name = "BYTES", default_value_t = terraci_ext::summary::plan::DEFAULT_MAX_PLAN_SIZE)]
    pub(crate) max_plan_size: u64,
}

/// `--log-level`: what reaches stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LogLevel {
    Debug,
    Info,
    Warn,
    Error,
}

/// TerraCi's level names, case-insensitively (`warning` too); anything else is
/// `invalid log level`.
fn parse_log_level(s: &str) -> Result<LogLevel, InvalidLogLevel> {
    match s.to_ascii_lowercase().as_str() {
        "debug" | "trace" => Ok(LogLevel::Debug),
        "info" => Ok(LogLevel::Info),
        "warn" | "warning" => Ok(LogLevel::Warn),
        "error" | "fatal" => Ok(LogLevel::Error),
        _ => Err(InvalidLogLevel(s.to_owned())),
    }
}

/// A `--log-level` that is none of TerraCi's level names (clap reports it, exit 2).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid log level `{0}`: expected debug, info, warn or error")]
pub(crate) struct InvalidLogLevel(String);

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate the CI pipeline
    Generate(GenerateArgs),
    /// Regenerate the pipeline file whenever a Terraform file or the config changes
    #[command(
        long_about = "Regenerate the pipeline file whenever a Terraform file or the config changes.\n\n\
Keeps the project loaded, applies file changes incrementally and rewrites the output only \
when its bytes change; prints one line per regeneration to stderr. A change that brings a \
new error (a half-typed block) prints the diagnostic and keeps the last good file. \
Without -o the file is .gitlab-ci.yml (gitlab) or .github/workflows/terraform.yml (github) \
in the project directory. Stops cleanly (exit 0) on Ctrl-C or SIGTERM."
    )]
    Watch(WatchArgs),
    /// Check the project: discovery, diagnostics, cycles, levels
    Validate(ValidateArgs),
    /// Serve the Language Server Protocol on stdin/stdout, for an editor
    #[command(
        long_about = "Serve the Language Server Protocol on stdin/stdout, for an editor.\n\n\
Loads the project the editor's workspace root belongs to (its config found as the CLI finds \
it from that directory), keeps it loaded, and reads the editor's unsaved buffers in place of \
the files on disk. Publishes every diagnostic; goes from a terraform_remote_state block to the \
module that owns the state and from an output read to the output; finds the readers of a \
backend or output block; hovers, code lenses and workspace symbols. Reads only inside the \
project and runs nothing. See docs/lsp.md for editor setup."
    )]
    Lsp(LspArgs),
    /// Print the dependency graph
    Graph(GraphArgs),
    /// Run the pipeline on this machine: terraform init/plan/apply per module, in order
    LocalExec(LocalExecArgs),
    /// Post the plan results as one merge-request / pull-request comment (or print it)
    #[command(
        long_about = "Post the plan results as one merge-request / pull-request comment (or print it).\n\n\
Reads what each plan job left in its module directory (plan.result.json, plan.json, plan.txt) \
and the reports in the service directory (<service_dir>/*-report.json), and writes one Markdown \
comment: per environment a table of the modules with changes, failed or stale plans and their \
counts, per-module details, a graph of the affected modules and one section per report. In a \
GitLab merge request pipeline (CI_SERVER_URL, CI_PROJECT_ID, CI_MERGE_REQUEST_IID, GITLAB_TOKEN \
or CI_JOB_TOKEN) or a GitHub pull request (GITHUB_TOKEN, GITHUB_REPOSITORY, GITHUB_EVENT_PATH) it \
edits its earlier comment or posts one, and syncs the labels it manages; elsewhere it prints the \
comment. Exit 0 on success or when there is nothing to post, 1 on error."
    )]
    Summary(SummaryArgs),
    /// Print every diagnostic code with its meaning (or one code's)
    ExplainCodes(ExplainCodesArgs),
    /// Write a starter .terraci.yaml
    Init(InitArgs),
    /// Print the JSON Schema of .terraci.yaml
    Schema(SchemaArgs),
    /// Print a shell completion script
    Completion(CompletionArgs),
    /// OPA policy checks on the modules' plans: pull the policies, check the plans
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// Estimate the monthly AWS cost of each module's plan: before, after, difference
    #[command(
        long_about = "Estimate the monthly AWS cost of each module's plan: before, after, difference.\n\n\
Reads each module's plan.json (the plan jobs write it), prices every resource before and after \
the plan from AWS's public bulk price lists (no credentials; the region of the plan's aws \
provider), and prints per module and in total the monthly cost with each line's unit price and \
usage (730 hours a month; resources charged by use at the documented assumed usage, or shown as \
usage-based). Resource types not priced are listed. Writes <service_dir>/cost-report.json (the \
summary comment's cost section) and cost-results.json (the JSON output). Prices are downloaded \
once and cached in the per-user cache (TERRACI_CACHE_HOME) for extensions.cost.cache_ttl \
(default 24h), or read from --pricing-dir. Needs extensions.cost.providers.aws.enabled: true. \
Exit 0 when estimated, 2 when it cannot run."
    )]
    Cost(CostArgs),
    /// Check or apply Terraform provider and module version updates
    #[command(
        long_about = "Check or apply Terraform provider and module version updates.\n\n\
Reads each module's required_providers, its registry module calls and .terraform.lock.hcl, asks \
the registries for versions and reports, per dependency, the current version, the version the \
bump policy allows (every constraint reaching a provider through local module calls must allow \
it) and the newest. With --write the constraints are rewritten keeping their operator \
(~> 5.0 -> ~> 5.80; --pin writes the exact version) and the lock files are synced (zh: hashes \
of every package, h1: hashes for the lock platforms). Needs extensions.tfupdate.enabled: true. \
Exit 0 when the run completes (updates alone do not fail it), 1 on a parse, registry or write \
error."
    )]
    Tfupdate(TfupdateArgs),
    /// Print the version
    Version,
}

#[derive(Debug, Args, Clone, Default)]
pub struct SelectArgs {
    /// Exclude modules matching this glob (repeatable)
    #[arg(short = 'x', long = "exclude")]
    pub(crate) exclude: Vec<String>,
    /// Include only modules matching this glob (repeatable)
    #[arg(short = 'i', long = "include")]
    pub(crate) include: Vec<String>,
    /// Keep modules whose pattern segment KEY equals VALUE (repeatable)
    #[arg(short = 'f', long = "filter", value_name = "KEY=VALUE")]
    pub(crate) filter: Vec<String>,
}

#[derive(Debug, Args, Clone)]
pub struct LspArgs {
    #[command(flatten)]
    pub(crate) eval: EvalArgs,
}

#[derive(Debug, Args, Clone)]
pub struct ExplainCodesArgs {
    /// Print only this code's meaning
    pub(crate) code: Option<String>,
}

#[derive(Debug, Args, Clone, Default)]
pub struct EvalArgs {
    /// A tfvars file applied to every module that declares its variables (repeatable)
    #[arg(long = "var-file", value_name = "FILE")]
    pub(crate) var_file: Vec<Utf8PathBuf>,
    /// A variable value applied to every module that declares it (repeatable)
    #[arg(long = "var", value_name = "NAME=VALUE")]
    pub(crate) var: Vec<String>,
    /// Value of terraform.workspace
    #[arg(long, default_value = "default")]
    pub(crate) workspace: String,
}

pub(crate) use terraci_render::report::OutputFormat;

#[derive(Debug, Args, Clone, Default)]
pub struct GenerateArgs {
    /// Write to FILE (atomically; an unchanged file is left untouched)
    #[arg(short = 'o', long)]
    pub(crate) output: Option<Utf8PathBuf>,
    #[command(flatten)]
    pub changes: ChangeArgs,
    /// Read the project from HEAD's commit, not the working tree: what a CI job checked
    /// out, with caches that hold in any fresh clone (implies --committed-only)
    #[arg(long)]
    pub(crate) from_commit: bool,
    /// Say why each module is in the pipeline
    #[arg(long)]
    pub(crate) explain: bool,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
}

/// What the pipeline holds and how it is written: shared by `generate` and `watch`.
#[derive(Debug, Args, Clone, Default)]
pub struct PipelineArgs {
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    #[command(flatten)]
    pub eval: EvalArgs,
    /// Plan jobs only
    #[arg(long)]
    pub(crate) plan_only: bool,
    /// With --plan-only: plans do not wait for each other
    #[arg(long)]
    pub(crate) parallel_plans: bool,
    /// gitlab or github
    #[arg(long)]
    pub(crate) provider: Option<String>,
    /// Print modules, affected, levels and jobs instead of the pipeline
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// Output format
    #[arg(long, value_enum, default_value_t = OutputFormat::Yaml)]
    pub(crate) format: OutputFormat,
    /// Write the pipeline as one file even over the CI's limits (GitHub's file size,
    /// GitLab's `max_yaml_size_bytes` and `max_jobs`), with a warning, rather than fail
    /// or (GitLab, with -o) split it into child pipelines
    #[arg(long)]
    pub(crate) force: bool,
    /// GitLab apply jobs run without a click (`extensions.gitlab.auto_approve: true`)
    #[arg(long, conflicts_with = "no_auto_approve")]
    pub(crate) auto_approve: bool,
    /// GitLab apply jobs wait for a click, the default (`auto_approve: false`)
    #[arg(long)]
    pub(crate) no_auto_approve: bool,
}

impl PipelineArgs {
    /// `--auto-approve` / `--no-auto-approve`, over the config's `auto_approve`.
    pub(crate) fn auto_approve(&self) -> Option<bool> {
        match (self.auto_approve, self.no_auto_approve) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
}

#[derive(Debug, Args, Clone, Default)]
pub struct WatchArgs {
    /// Write to FILE (default: .gitlab-ci.yml, or .github/workflows/terraform.yml for
    /// github, in the project dir); rewritten atomically, only when its bytes change
    #[arg(short = 'o', long)]
    pub(crate) output: Option<Utf8PathBuf>,
    #[command(flatten)]
    pub(crate) pipeline: PipelineArgs,
    /// `--changed-only`: the merge-request pipeline, kept current on every save, commit
    /// and checkout
    #[command(flatten)]
    pub changes: ChangeArgs,
}

/// `--changed-only` and its companions, shared by `generate`, `watch` and `local-exec`.
#[derive(Debug, Args, Clone, Default)]
pub struct ChangeArgs {
    /// Only modules affected by the change against the base ref
    #[arg(long)]
    pub(crate) changed_only: bool,
    /// Base ref for --changed-only
    #[arg(long)]
    pub(crate) base_ref: Option<String>,
    /// Ignore uncommitted and untracked files
    #[arg(long)]
    pub(crate) committed_only: bool,
    /// Also include the changed modules' dependencies
    #[arg(long)]
    pub(crate) include_dependencies: bool,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum ExecMode {
    /// init + plan per module
    Plan,
    /// apply the saved plans
    Apply,
    /// plan then apply, per module in order
    Run,
}

#[derive(Debug, Args, Clone)]
pub struct LocalExecArgs {
    #[arg(value_enum)]
    pub(crate) mode: ExecMode,
    #[command(flatten)]
    pub changes: ChangeArgs,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    #[command(flatten)]
    pub(crate) eval: EvalArgs,
    /// Only this module (repeatable)
    #[arg(short = 'm', long = "module")]
    pub(crate) module: Vec<String>,
    /// Modules run at once (default: execution.parallelism)
    #[arg(long)]
    pub(crate) parallelism: Option<usize>,
    /// Print the commands instead of running them
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// terraform or tofu binary to run (default: execution.binary)
    #[arg(long)]
    pub(crate) binary: Option<String>,
    /// apply/run: apply without asking (without a terminal to ask on, required)
    #[arg(long)]
    pub(crate) auto_approve: bool,
}

#[derive(Debug, Args, Clone, Default)]
pub struct ValidateArgs {
    /// Exit 3 on any warning
    #[arg(long)]
    pub(crate) strict: bool,
    /// Output format: the summary as text (diagnostics on stderr), or one JSON document
    #[arg(long, value_enum, default_value_t = ValidateFormat::Text)]
    pub(crate) format: ValidateFormat,
    #[command(flatten)]
    pub(crate) select: SelectArgs,
    #[command(flatten)]
    pub(crate) eval: EvalArgs,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq, Default)]
pub(crate) enum ValidateFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq, Default)]
pub(crate) enum GraphFormat {
    #[default]
    Dot,
    Plantuml,
    Mermaid,
    List,
    Levels,
    Json,
}

#[derive(Debug, Args, Clone, Default)]
pub struct GraphArgs {
    /// Output format (`-f`, as in TerraCi; `-F` also works)
    #[arg(short = 'f', short_alias = 'F', long, value_enum, default_value_t = GraphFormat::Dot)]
    pub(crate) format: GraphFormat,
    /// Exclude modules matching this glob (repeatable)
    #[arg(short = 'x', long = "exclude")]
    pub(crate) exclude: Vec<String>,
    /// Include only modules matching this glob (repeatable)
    #[arg(short = 'i', long = "include")]
    pub(crate) include: Vec<String>,
    /// Keep modules whose pattern segment KEY equals VALUE (repeatable; `-f` is --format
    /// here, as in TerraCi)
    #[arg(long = "filter", value_name = "KEY=VALUE")]
    pub(crate) filter: Vec<String>,
    /// Print counts: modules, edges, levels, cycles
    #[arg(long)]
    pub(crate) stats: bool,
    /// Only this module and its dependencies
    #[arg(short = 'm', long)]
    pub(crate) module: Option<String>,
    /// With -m: its dependents instead
    #[arg(long, requires = "module")]
    pub(crate) dependents: bool,
    /// Write to FILE
    #[arg(short = 'o', long)]
    pub(crate) output: Option<Utf8PathBuf>,
    #[command(flatten)]
    pub(crate) eval: EvalArgs,
}

#[derive(Debug, Args, Clone, Default)]
pub struct SummaryArgs {
    #[command(flatten)]
    pub(crate) eval: EvalArgs,
}

impl GraphArgs {
    /// The module selection (what `SelectArgs` is for the other commands).
    pub(crate) fn select(&self) -> SelectArgs {
        SelectArgs {
            exclude: self.exclude.clone(),
            include: self.include.clone(),
            filter: self.filter.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum InitProvider {
    Gitlab,
    Github,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum InitBinary {
    Terraform,
    Tofu,
}

#[derive(Debug, Args, Clone, Default)]
pub struct InitArgs {
    /// Do not ask; use the flags and defaults
    #[arg(long)]
    pub(crate) ci: bool,
    /// Overwrite an existing config file
    #[arg(short = 'f', long)]
    pub(crate) force: bool,
    /// Print the config to stdout instead of writing it
    #[arg(long)]
    pub(crate) dry_run: bool,
    /// CI provider to configure (default: gitlab, or github when only .github/ exists)
    #[arg(long, value_enum)]
    pub(crate) provider: Option<InitProvider>,
    /// Terraform-compatible binary (default: terraform)
    #[arg(long, value_enum)]
    pub(crate) binary: Option<InitBinary>,
    /// Directory pattern (default: {service}/{environment}/{region}/{module})
    #[arg(long)]
    pub pattern: Option<String>,
}

#[derive(Debug, Args, Clone, Default)]
pub struct SchemaArgs {
    /// Write to FILE
    #[arg(short = 'o', long)]
    pub(crate) output: Option<Utf8PathBuf>,
}

#[derive(Debug, Subcommand, Clone)]
pub enum PolicyCommand {
    /// Fetch the configured git and OCI policy sources into the cache directory and
    /// write its lock (source, ref, resolved commit or digest)
    Pull,
    /// Evaluate the policies against each module's plan.json; exit 1 when a module
    /// fails by the configured decisions, 2 when the policies cannot be used
    Check(PolicyCheckArgs),
}

#[derive(Debug, Args, Clone)]
pub struct PolicyCheckArgs {
    /// Check only this module (its id, the directory relative to the project)
    #[arg(short = 'm', long)]
    pub(crate) module: Option<String>,
    /// Output format
    #[arg(short = 'o', long = "format", alias = "output", value_enum, default_value_t = PolicyFormat::Text)]
    pub(crate) format: PolicyFormat,
    /// Bound on the evaluation of one rule for one module, in seconds
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    pub(crate) timeout: f64,
}

#[derive(Debug, Args, Clone)]
pub struct TfupdateArgs {
    /// What to check: modules, providers, all (default: extensions.tfupdate.target, or all)
    #[arg(short = 't', long)]
    pub(crate) target: Option<String>,
    /// Version bump level: patch, minor, major (default: extensions.tfupdate.policy.bump)
    #[arg(short = 'b', long)]
    pub(crate) bump: Option<String>,
    /// Pin updated constraints to the exact version when writing
    #[arg(long)]
    pub(crate) pin: bool,
    /// Overall timeout of the run, e.g. 15m (default 5m, 20m with --write)
    #[arg(long)]
    pub(crate) timeout: Option<String>,
    /// Write the updated versions to the .tf files and sync the lock files
    #[arg(short = 'w', long)]
    pub(crate) write: bool,
    /// Check only this module (its id, the directory relative to the project)
    #[arg(short = 'm', long)]
    pub(crate) module: Option<String>,
    /// Output format
    #[arg(short = 'o', long = "output", alias = "format", value_enum, default_value_t = PolicyFormat::Text)]
    pub(crate) output: PolicyFormat,
    /// Platforms whose h1: hashes the lock files get, e.g. linux_amd64,darwin_arm64
    /// (default: extensions.tfupdate.lock.platforms, else every platform of the version)
    #[arg(long = "lock-platforms", value_delimiter = ',')]
    pub(crate) lock_platforms: Vec<String>,
}

#[derive(Debug, Clone, Copy, ValueEnum, PartialEq, Eq)]
pub(crate) enum PolicyFormat {
    Text,
    Json,
}

#[derive(Debug, Args, Clone)]
pub struct CostArgs {
    /// Estimate only this module (its id, the directory relative to the project)
    #[arg(short = 'm', long)]
    pub(crate) module: Option<String>,
    /// Output format
    #[arg(short = 'o', long = "format", alias = "output", value_enum, default_value_t = PolicyFormat::Text)]
    pub(crate) format: PolicyFormat,
    /// Read the price lists from DIR, in AWS's layout
    /// (DIR/offers/v1.0/aws/<service>/current/<region>/index.json), never from the network
    #[arg(long, value_name = "DIR")]
    pub(crate) pricing_dir: Option<Utf8PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub struct CompletionArgs {
    #[arg(value_enum)]
    pub(crate) shell: clap_complete::Shell,
}
