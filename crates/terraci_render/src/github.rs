//! GitHub Actions renderer [spec 7.3].
//!
//! Input: a [`JobPlan`] and `extensions.github`. Output: a workflow file. Key order is
//! fixed: header, `name`, `on`, `permissions`, `env`, `jobs`; each job as `needs`,
//! `runs-on`, `container`, `environment`, `if`, `concurrency`, `env`, `steps`.
//!
//! The plan file travels from plan to apply as an artifact named after the plan job
//! (`terraci-plan-<module>`), unique per module because job names are.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde_yaml::{Mapping, Value};

use super::yaml::{push_spaced_entry, write_document, Style};
use super::{
    job_commands, job_variables, string, string_map, strings, to_value, Header, RenderError,
    Rendered, NO_CHANGES_JOB, NO_CHANGES_MESSAGE, PLAN_FILE,
};
use terraci_db::config::{Binary, Config, GitHub, GitHubJobConfig, GitHubStep, OverwriteType};
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::escape::sh_word;
use terraci_engine::contrib::When;
use terraci_engine::ir::{ContributedJob, Job, JobKind, JobPlan};

/// GitHub rejects workflow files larger than this.
pub const GITHUB_MAX_BYTES: usize = 512_000;

const DEFAULT_NAME: &str = "Terraform";
const DEFAULT_RUNS_ON: &str = "ubuntu-latest";
const DEFAULT_BRANCH: &str = "main";

/// Renders a GitHub Actions workflow. Over [`GITHUB_MAX_BYTES`] it is an error unless
/// `force`, then a warning.
pub fn render_github(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
    force: bool,
) -> Result<Rendered, RenderError> {
    let github = config.extensions.github.clone().unwrap_or_default();
    let mut warnings = Vec::new();

    let mut doc = Mapping::new();
    doc.insert(
        string("name"),
        string(github.name.as_deref().unwrap_or(DEFAULT_NAME)),
    );
    doc.insert(string("on"), triggers(&github));
    warnings.extend(privileged_triggers(&github));
    if github.terraci_cache && !affected_only(&github) {
        warnings.push(Diagnostic::warning(
            Code::ConfigWarning,
            "extensions.github.terraci_cache: with affected_only: false no job of the \
             workflow saves the cache (the terraci-affected job does), so its jobs only \
             restore one that another workflow saved (docs/recipes.md)",
        ));
    }
    let permissions = if github.permissions.is_empty() {
        IndexMap::from([("contents".to_owned(), "read".to_owned())])
    } else {
        github.permissions.clone()
    };
    doc.insert(string("permissions"), string_map(&permissions));
    let mut env = IndexMap::new();
    // TerraCi's scripts run `${TERRAFORM_BINARY}`; users' own steps may still do.
    env.insert(
        "TERRAFORM_BINARY".to_owned(),
        plan.binary.command().to_owned(),
    );
    if plan.plan_results && !plan.is_empty() {
        // Written once for every plan job (a workflow is limited in size): the commit a
        // plan is made for (a pull request's head, not its merge commit) and the script
        // that keeps the plan as data, which each plan step evaluates.
        env.insert(
            "TERRACI_COMMIT".to_owned(),
            "${{ github.event.pull_request.head.sha || github.sha }}".to_owned(),
        );
        let mut script = String::new();
        for line in job_commands(plan, JobKind::Plan, "TERRACI_COMMIT")
            .into_iter()
            .skip(usize::from(plan.init_enabled))
        {
            script.push_str(&line);
            script.push('\n');
        }
        env.insert(PLAN_SCRIPT_VAR.to_owned(), script);
    }
    if !plan.is_empty() && plan.jobs.iter().any(|j| j.kind == JobKind::Apply) {
        // Once for every apply job: the downloaded plan files, put in place by name.
        env.insert(
            TAKE_PLAN_VAR.to_owned(),
            copy_plan_files(plan, &format!("\"$RUNNER_TEMP\"/{DOWNLOADED_PLAN}"), "."),
        );
    }
    env.extend(github.env.clone());
    doc.insert(string("env"), string_map(&env));

    let ids = if plan.is_empty() {
        None
    } else {
        Some(job_ids(plan, &mut warnings)?)
    };
    warnings.extend(super::unknown_overwrite_types(
        "extensions.github.overwrites",
        github
            .overwrites
            .iter()
            .map(|o| &o.job_type)
            .filter(|t| !matches!(t, OverwriteType::Job(name) if name == AFFECTED_JOB)),
        plan,
    ));
    let style = Style {
        plain_keys: &["on"],
        spaced_children: &["jobs"],
    };
    let mut text = write_document(&header.comment_lines(), &doc, &style);
    // The jobs, the document's last entry, are written one by one: as one value tree
    // they were most of a run's memory at 10,000 modules.
    push_spaced_entry(&mut text, "jobs", &style, |put| match &ids {
        None => put(&string(NO_CHANGES_JOB), &no_changes_job(&github)),
        Some(ids) => {
            if affected_only(&github) {
                put(&string(AFFECTED_JOB), &affected_job(&github));
            }
            // Each module's plan job, for its apply (a lookup per apply, not a search).
            let plan_jobs: rustc_hash::FxHashMap<&str, &Job> = plan
                .jobs
                .iter()
                .filter(|j| j.kind == JobKind::Plan)
                .map(|j| (&*j.module, j))
                .collect();
            for job in plan.jobs.iter() {
                let value = render_job(plan, job, &github, ids, &plan_jobs);
                put(&string(ids[&*job.name].as_str()), &value);
            }
            for job in &plan.contributed {
                let value = render_contributed(plan, job, &github, ids);
                put(&string(&*job.name), &value);
            }
        }
    });
    if text.len() > GITHUB_MAX_BYTES {
        if !force {
            return Err(RenderError::TooLarge {
                size: text.len(),
                limit: GITHUB_MAX_BYTES,
            });
        }
        warnings.push(Diagnostic::warning(
            Code::PipelineLimit,
            format!(
                "the workflow is {} bytes, over GitHub's limit of {GITHUB_MAX_BYTES} bytes; \
                 GitHub will refuse to run it",
                text.len()
            ),
        ));
    }
    Ok(Rendered { text, warnings })
}

/// The workflow variable holding the plan script of plan jobs that keep plan results.
const PLAN_SCRIPT_VAR: &str = "TERRACI_PLAN_SCRIPT";

/// The workflow variable holding the line that puts an apply job's downloaded plan files
/// into its module directory.
const TAKE_PLAN_VAR: &str = "TERRACI_TAKE_PLAN";

/// The environment apply jobs run in unless `job_defaults`/`overwrites` name one.
pub(super) const DEFAULT_APPLY_ENVIRONMENT: &str = "terraform";

/// A job's `if:`. On `pull_request` every affected module plans, in dependency order, and
/// nothing applies; on `push` (the default branch) and `workflow_dispatch` plans and
/// applies run in order. A skipped job makes GitHub skip the jobs that need it unless
/// their `if:` says otherwise, so both kinds run when nothing they need failed or was
/// cancelled (`!cancelled() && !failure()`), and applies also need an event other than
/// a pull request. A user's `if:` is added to that, never replaces it.
pub(super) fn job_condition(kind: JobKind, user: Option<&str>) -> String {
    let mut condition = String::from("!cancelled() && !failure()");
    if kind == JobKind::Apply {
        condition.push_str(" && github.event_name != 'pull_request'");
    }
    and_user_condition(&mut condition, user);
    condition
}

/// Adds a user's `if:` (from `job_defaults`/`overwrites`) to `condition` with `&&`.
/// `${{ ... }}` around a whole `if:` is optional; inside another expression it is not
/// allowed, so it is taken off.
fn and_user_condition(condition: &mut String, user: Option<&str>) {
    if let Some(user) = user {
        let user = user.trim();
        let user = user
            .strip_prefix("${{")
            .and_then(|u| u.strip_suffix("}}"))
            .unwrap_or(user)
            .trim();
        condition.push_str(&format!(" && ({user})"));
    }
}

/// The first job of a workflow that runs only what a change affects
/// (`extensions.github.affected_only`, the default).
pub(crate) const AFFECTED_JOB: &str = "terraci-affected";

fn affected_only(github: &GitHub) -> bool {
    github.affected_only.unwrap_or(true)
}

/// The `if:` part that runs a plan job unless the affected job lists its module among
/// those to skip. The list is of what does not run, so that "every module runs" is the
/// empty list whatever made it so. GitHub's `contains` compares strings without regard to
/// case: terraci leaves out of the list any module whose id differs only in case from
/// one that runs (`generate --format unselected`), so no module is skipped for another.
fn affected_guard(module: &str) -> String {
    format!(
        "!contains(fromJSON(needs.{AFFECTED_JOB}.outputs.skip), {})",
        expression_string(module)
    )
}

/// The plan job of an apply's module.
fn follows_plan_name(job: &Job) -> String {
    terraci_engine::ir::job_name(JobKind::Plan, &job.module)
}

/// Whether an apply job can need only its plan: every other job it needs, its plan needs
/// too, so the order holds through the plan. Then GitHub's own rule does the selection's
/// work: the apply runs only when its plan ran and succeeded ([`apply_condition`]).
fn apply_follows_plan(job: &Job, name: &str, planned: Option<&Job>) -> bool {
    let Some(planned) = planned.filter(|p| *p.name == *name) else {
        return false;
    };
    job.needs
        .iter()
        .all(|n| *n.job == *name || planned.needs.iter().any(|p| p.job == n.job))
}

/// An apply job's `if:` under the selection: no status function, so GitHub runs it only
/// when every job it needs succeeded. It needs only its plan, which the selection skips
/// or runs; a failed or skipped plan skips its apply. An apply that needs more than its
/// plan keeps the plain condition and the affected guard. Not on pull requests; a user's
/// `if:` is added.
fn apply_condition(user: Option<&str>) -> String {
    let mut condition = String::from("github.event_name != 'pull_request'");
    and_user_condition(&mut condition, user);
    condition
}

/// A GitHub expression string literal: `'` is doubled.
fn expression_string(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// The script of the affected job's step. Its output `skip`: a JSON array of the modules
/// whose jobs do not run. Nothing is skipped on an event other than a pull request or a
/// push, for a push that created its branch (no previous commit), when the base commit is
/// not in the clone, and when terraci is not installed (with a warning): a workflow never
/// runs less than it would without the selection. A failing terraci fails the job, and
/// every job after it is skipped. terraci reads the checked-out commit (`--from-commit`):
/// the jobs it selects for run on that commit, and a restored cache then holds without a
/// walk of the checkout.
fn affected_script(hint: &str) -> String {
    let message = format!(
        "::warning title={AFFECTED_JOB}::terraci is not on PATH in this job, so every module runs; {hint}"
    );
    let warning = terraci_db::escape::sh_word(&message);
    format!(
        r#"every() {{ echo "$1"; echo 'skip=[]' >> "$GITHUB_OUTPUT"; exit 0; }}
command -v terraci >/dev/null 2>&1 || every {warning}
case "$TERRACI_EVENT" in pull_request|push) ;; *) every "$TERRACI_EVENT: every module runs" ;; esac
case "$TERRACI_BASE" in ''|0000000000000000000000000000000000000000) every "no base commit: every module runs" ;; esac
git cat-file -e "$TERRACI_BASE^{{commit}}" 2>/dev/null || every "the base commit $TERRACI_BASE is not in the clone: every module runs"
skip=$(terraci generate --changed-only --from-commit --base-ref "$TERRACI_BASE" --provider github --dry-run --format unselected)
echo "not affected: $skip"
echo "skip=$skip" >> "$GITHUB_OUTPUT"
"#
    )
}

/// The affected job: settings as a contributed job's ([`contributed_config`]: an
/// `overwrites` entry of type `terraci-affected` is where a step that installs terraci
/// goes), a full clone (the base commit must be there), and one step.
fn affected_job(github: &GitHub) -> Value {
    let user = contributed_config(github, AFFECTED_JOB);
    let mut m = Mapping::new();
    insert_runner(&mut m, &user, github);
    if let Some(condition) = user.if_.as_deref() {
        m.insert(string("if"), string(condition));
    }
    let mut outputs = Mapping::new();
    outputs.insert(string("skip"), string("${{ steps.affected.outputs.skip }}"));
    m.insert(string("outputs"), Value::Mapping(outputs));
    if !user.env.is_empty() {
        m.insert(string("env"), string_map(&user.env));
    }
    let mut checkout = step(&[("name", "Checkout"), ("uses", "actions/checkout@v4")]);
    let mut with = Mapping::new();
    with.insert(string("fetch-depth"), Value::Number(0.into()));
    checkout.insert(string("with"), Value::Mapping(with));
    let mut steps = vec![checkout];
    if github.terraci_cache {
        steps.push(cache_step(true));
    }
    steps.extend(user_steps(user.steps_before.as_deref()));
    let hint = format!(
        "add a step that installs it (steps_before in an overwrites entry of type \
         {AFFECTED_JOB}) or a container that has it"
    );
    let mut run_step = step(&[("name", "Affected modules"), ("id", "affected")]);
    // Event data reaches the script as variables, never spliced into its text.
    let env = IndexMap::from([
        (
            "TERRACI_EVENT".to_owned(),
            "${{ github.event_name }}".to_owned(),
        ),
        (
            "TERRACI_BASE".to_owned(),
            "${{ github.event.pull_request.base.sha || github.event.before }}".to_owned(),
        ),
    ]);
    run_step.insert(string("env"), string_map(&env));
    run_step.insert(string("run"), string(affected_script(&hint)));
    steps.push(run_step);
    if github.terraci_cache {
        steps.push(cache_step(false));
    }
    steps.extend(user_steps(user.steps_after.as_deref()));
    m.insert(
        string("steps"),
        Value::Sequence(steps.into_iter().map(Value::Mapping).collect()),
    );
    Value::Mapping(m)
}

/// A `privileged-trigger` warning for each trigger of `on:` whose runs hold a write token
/// and the repository's secrets whatever the pull request (GitHub's "pwn request"):
/// `pull_request_target` checks out the base branch (`actions/checkout`'s default), so the
/// plans are the base's shown as the pull request's, and a step that checks out the head
/// runs its Terraform with those secrets; `workflow_run` runs after a run a pull request
/// may have triggered and, reading its artifacts, trusts what that pull request wrote.
fn privileged_triggers(github: &GitHub) -> Vec<Diagnostic> {
    let Some(on) = &github.on else {
        return Vec::new();
    };
    let names: Vec<&str> = match on {
        Value::String(name) => vec![name.as_str()],
        Value::Sequence(items) => items.iter().filter_map(Value::as_str).collect(),
        Value::Mapping(map) => map.keys().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    names
        .into_iter()
        .filter_map(|name| {
            let why = match name {
                "pull_request_target" => {
                    "its runs hold a token that can write and the repository's secrets, and \
                     check out the base branch: the plans would be the base's, shown as the \
                     pull request's, and a step that checks out the pull request's head runs \
                     its Terraform (providers, external data, local-exec) with those secrets"
                }
                "workflow_run" => {
                    "its runs hold a token that can write and the repository's secrets while \
                     they follow runs a pull request may have triggered, whose artifacts are \
                     the pull request's to write"
                }
                _ => return None,
            };
            Some(Diagnostic::warning(
                Code::PrivilegedTrigger,
                format!(
                    "extensions.github.on has `{name}`: {why}; use `pull_request` for plans \
                     of pull requests"
                ),
            ))
        })
        .collect()
}

/// `on:` from the config, else pull requests, pushes to the default branch and manual runs.
fn triggers(github: &GitHub) -> Value {
    if let Some(on) = &github.on {
        return on.clone();
    }
    let mut push = Mapping::new();
    push.insert(
        string("branches"),
        strings(&[github.default_branch.as_deref().unwrap_or(DEFAULT_BRANCH)]),
    );
    let mut on = Mapping::new();
    on.insert(string("pull_request"), Value::Null);
    on.insert(string("push"), Value::Mapping(push));
    on.insert(string("workflow_dispatch"), Value::Null);
    Value::Mapping(on)
}

/// Job ids are the job names; GitHub allows only letters, digits, `-` and `_` in them, so
/// any other character (a `.` in a directory name) becomes `_`.
fn job_ids<'a>(
    plan: &'a JobPlan,
    warnings: &mut Vec<Diagnostic>,
) -> Result<BTreeMap<&'a str, String>, RenderError> {
    let mut ids = BTreeMap::new();
    let mut owners: BTreeMap<String, &str> = BTreeMap::new();
    for job in plan.jobs.iter() {
        let id: String = job
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if *id != *job.name {
            warnings.push(
                Diagnostic::warning(
                    Code::JobRenamed,
                    format!(
                        "job `{}` is named `{id}` in the GitHub workflow: job ids may only hold \
                     letters, digits, `-` and `_`",
                        job.name
                    ),
                )
                .with_module(&*job.module),
            );
        }
        if let Some(first) = owners.insert(id.clone(), &job.name) {
            return Err(RenderError::Config(format!(
                "jobs `{first}` and `{}` both become the GitHub job id `{id}`; rename one \
                 of the directories",
                job.name
            )));
        }
        ids.insert(&*job.name, id);
    }
    Ok(ids)
}

fn no_changes_job(github: &GitHub) -> Value {
    let runs_on = github
        .job_defaults
        .as_ref()
        .and_then(|d| d.runs_on.clone())
        .or_else(|| github.runs_on.clone())
        .unwrap_or_else(|| DEFAULT_RUNS_ON.to_owned());
    let mut step = Mapping::new();
    step.insert(string("name"), string("No Terraform changes"));
    step.insert(
        string("run"),
        string(format!("echo \"{NO_CHANGES_MESSAGE}\"")),
    );
    let mut job = Mapping::new();
    job.insert(string("runs-on"), string(runs_on));
    job.insert(string("steps"), Value::Sequence(vec![Value::Mapping(step)]));
    Value::Mapping(job)
}

/// The job after `job_defaults` and the matching `overwrites` ([`apply_overwrites`]).
fn effective_config(github: &GitHub, kind: JobKind) -> GitHubJobConfig {
    let mut out = github.job_defaults.clone().unwrap_or_default();
    let wanted = match kind {
        JobKind::Plan => OverwriteType::Plan,
        JobKind::Apply => OverwriteType::Apply,
    };
    apply_overwrites(&mut out, github, &wanted);
    out
}

/// Layers the `overwrites` of type `wanted` over `out`, in order: a key an entry sets
/// replaces, `env` merges key by key, and `steps_before` / `steps_after` append (as in
/// TerraCi: an overwrite's steps run after the defaults' ones, which often set up
/// credentials).
fn apply_overwrites(out: &mut GitHubJobConfig, github: &GitHub, wanted: &OverwriteType) {
    for overwrite in github.overwrites.iter().filter(|o| &o.job_type == wanted) {
        let layer = overwrite.job_config();
        macro_rules! replace {
            ($($field:ident),*) => {$(
                if layer.$field.is_some() {
                    out.$field = layer.$field.clone();
                }
            )*};
        }
        replace!(runs_on, container, if_, environment);
        for (steps, more) in [
            (&mut out.steps_before, layer.steps_before),
            (&mut out.steps_after, layer.steps_after),
        ] {
            if let Some(more) = more {
                steps.get_or_insert_with(Vec::new).extend(more);
            }
        }
        out.env.extend(layer.env);
    }
}

/// The artifact of `job`'s module plan: named after the plan job's id, since
/// upload-artifact refuses names holding `*`, `?`, `:`, `"`, `<`, `>`, `|`, `\\` or line
/// breaks (a plan job of `a*b` would fail), and ids are unique.
fn artifact_name(job: &Job, ids: &BTreeMap<&str, String>) -> String {
    let plan = terraci_engine::ir::job_name(JobKind::Plan, &job.module);
    format!("terraci-{}", ids.get(&*plan).map_or(&*plan, String::as_str))
}

/// `module` as one line of upload-artifact's `path`, which @actions/glob trims and reads
/// as a pattern (`!` excludes, `#` is a comment, a leading `~` is the home directory,
/// `*`, `?`, `[` match): those are escaped as that library's own `globEscape` does
/// (`[*]`, `[?]`, `[[]`, `\\` doubled), and a module that starts with `!`, `#`, `~` or
/// white space is written `./<module>`. A line break cannot be escaped (each line is a
/// pattern of its own, `x` alone uploads the directory `x`): such modules get no GitHub
/// jobs ([`terraci_engine::ir::PlanOptions::refuses`]).
fn upload_pattern(module: &str) -> String {
    let mut out = String::with_capacity(module.len() + 3);
    if module
        .chars()
        .next()
        .is_some_and(|c| c.is_whitespace() || c == '\u{feff}' || "!#~".contains(c))
    {
        out.push_str("./");
    }
    for c in module.chars() {
        match c {
            '*' => out.push_str("[*]"),
            '?' => out.push_str("[?]"),
            '[' => out.push_str("[[]"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out
}

/// Where download steps put artifacts: fresh directories below the runner's temp dir,
/// never the checkout, where a committed link (`plan.tfplan -> ~/.bashrc`, a linked
/// `.terraci`) would have the action write through it. [`copy_plan_files`] then puts
/// the files in place by name.
const DOWNLOADED_PLAN: &str = "terraci-plan";
const DOWNLOADED_PLANS: &str = "terraci-plans";
const DOWNLOADED_REPORTS: &str = "terraci-reports";

/// `${{ runner.temp }}/<dir>`, as a `with: path`.
fn runner_temp(dir: &str) -> String {
    format!("${{{{ runner.temp }}}}/{dir}")
}

/// A shell line copying each plan file that `from` holds to `to` (both shell words),
/// removing what `to` has at its name first, so a committed link there is replaced, not
/// written through; nothing but the plan files is copied.
fn copy_plan_files(plan: &JobPlan, from: &str, to: &str) -> String {
    format!(
        "for f in {}; do if [ -f {from}/\"$f\" ]; then rm -f {to}/\"$f\" && cp {from}/\"$f\" {to}/\"$f\"; fi; done",
        super::plan_files(plan).join(" ")
    )
}

fn render_job(
    plan: &JobPlan,
    job: &Job,
    github: &GitHub,
    ids: &BTreeMap<&str, String>,
    plan_jobs: &rustc_hash::FxHashMap<&str, &Job>,
) -> Value {
    let user = effective_config(github, job.kind);
    // Plan jobs carry the selection; an apply follows its plan ([`apply_follows_plan`]).
    // Only an apply's plan job is named: one name per apply, none per plan.
    let own_plan = (job.kind == JobKind::Apply).then(|| follows_plan_name(job));
    let follows = affected_only(github)
        && own_plan.as_deref().is_some_and(|name| {
            apply_follows_plan(job, name, plan_jobs.get(&*job.module).copied())
        });
    let selected = affected_only(github) && !follows;
    let mut m = Mapping::new();
    // The affected job is needed directly: a job reads only its own needs' outputs.
    let needs: Vec<&str> = selected
        .then_some(AFFECTED_JOB)
        .into_iter()
        .chain(
            job.needs
                .iter()
                .filter(|n| !follows || own_plan.as_deref() == Some(&*n.job))
                .map(|n| ids.get(&*n.job).map_or(&*n.job, String::as_str)),
        )
        .collect();
    if !needs.is_empty() {
        m.insert(string("needs"), strings(&needs));
    }
    insert_runner(&mut m, &user, github);
    // Applies run behind an environment that can be protected (required reviewers).
    let environment = match (&user.environment, job.kind) {
        (Some(environment), _) => Some(environment.as_str()),
        (None, JobKind::Apply) => Some(DEFAULT_APPLY_ENVIRONMENT),
        (None, JobKind::Plan) => None,
    };
    if let Some(environment) = environment {
        m.insert(string("environment"), string(environment));
    }
    let mut condition = if follows {
        apply_condition(user.if_.as_deref())
    } else {
        job_condition(job.kind, user.if_.as_deref())
    };
    if selected {
        condition.push_str(&format!(" && {}", affected_guard(&job.module)));
    }
    m.insert(string("if"), string(condition));
    // Plans of one ref queue behind each other; an apply is never cancelled (a pending
    // job of a concurrency group is, when another is queued), so applies have no group:
    // Terraform's state lock keeps two applies of one module apart.
    if job.kind == JobKind::Plan {
        let mut concurrency = Mapping::new();
        concurrency.insert(
            string("group"),
            string(format!(
                "terraci-${{{{ github.workflow }}}}-${{{{ github.ref }}}}-{}",
                job.module
            )),
        );
        concurrency.insert(string("cancel-in-progress"), Value::Bool(false));
        m.insert(string("concurrency"), Value::Mapping(concurrency));
    }

    let mut env = job_variables(plan, job);
    env.extend(user.env.clone());
    m.insert(string("env"), string_map(&env));

    // Module jobs' steps are named only where the action does not say it: a workflow has
    // a job per module and a size limit.
    let mut steps = vec![step(&[("uses", "actions/checkout@v4")])];
    if github.setup_step.unwrap_or(true) {
        steps.push(setup_step(
            plan.binary,
            github.terraform_version.as_deref(),
            plan.plan_results,
        ));
    }
    if job.kind == JobKind::Apply {
        let mut s = step(&[
            ("name", "Download plan"),
            ("uses", "actions/download-artifact@v4"),
        ]);
        let mut with = Mapping::new();
        with.insert(string("name"), string(artifact_name(job, ids)));
        with.insert(string("path"), string(runner_temp(DOWNLOADED_PLAN)));
        s.insert(string("with"), Value::Mapping(with));
        steps.push(s);
    }
    steps.extend(user_steps(user.steps_before.as_deref()));
    let verb = match job.kind {
        JobKind::Plan => "Plan",
        JobKind::Apply => "Apply",
    };
    let mut run = String::new();
    if job.kind == JobKind::Apply {
        run.push_str(&format!("eval \"${TAKE_PLAN_VAR}\"\n"));
    }
    if job.kind == JobKind::Plan && plan.plan_results {
        if plan.init_enabled {
            run.push_str(&format!("{} init\n", plan.binary.command()));
        }
        run.push_str(&format!("eval \"${PLAN_SCRIPT_VAR}\"\n"));
    } else {
        for command in job_commands(plan, job.kind, "TERRACI_COMMIT") {
            run.push_str(&command);
            run.push('\n');
        }
    }
    let mut run_step = step(&[("name", verb)]);
    run_step.insert(string("working-directory"), string(&*job.module));
    run_step.insert(string("run"), string(run));
    steps.push(run_step);
    steps.extend(user_steps(user.steps_after.as_deref()));
    if job.kind == JobKind::Plan {
        let mut s = step(&[
            ("name", "Upload plan"),
            ("uses", "actions/upload-artifact@v4"),
        ]);
        let mut with = Mapping::new();
        with.insert(string("name"), string(artifact_name(job, ids)));
        // The plan file and, kept as data, plan.txt, plan.json, plan.result.json: named,
        // never a glob (upload-artifact follows links, so a committed `plan.x` link to a
        // file of the runner would be uploaded).
        let files: &[&str] = if plan.plan_results {
            &[PLAN_FILE, "plan.txt", "plan.json", "plan.result.json"]
        } else {
            &[PLAN_FILE]
        };
        let module = upload_pattern(&job.module);
        let paths: Vec<String> = files.iter().map(|f| format!("{module}/{f}")).collect();
        with.insert(string("path"), string(paths.join("\n")));
        // Plan results are kept also when the plan failed: the review must see it.
        with.insert(
            string("if-no-files-found"),
            string(if plan.plan_results { "warn" } else { "error" }),
        );
        with.insert(string("retention-days"), Value::Number(1.into()));
        s.insert(string("with"), Value::Mapping(with));
        if plan.plan_results {
            s.insert(string("if"), string("always()"));
        }
        steps.push(s);
    }
    m.insert(
        string("steps"),
        Value::Sequence(steps.into_iter().map(Value::Mapping).collect()),
    );
    Value::Mapping(m)
}

/// The settings of a job of terraci's own (a contributed job, the affected job):
/// `job_defaults` but `if` and `environment`, the summary job's
/// `pr.summary_job.runs_on`, then the `overwrites` of its name.
fn contributed_config(github: &GitHub, name: &str) -> GitHubJobConfig {
    let mut out = github.job_defaults.clone().unwrap_or_default();
    out.if_ = None;
    out.environment = None;
    if let Some(runs_on) = summary_runs_on(github, name) {
        out.runs_on = Some(runs_on);
    }
    let wanted = OverwriteType::Job(name.to_owned());
    apply_overwrites(&mut out, github, &wanted);
    out
}

/// A job's `runs-on` and `container`. GitHub starts job containers with its own
/// entrypoint, so only the image's name counts.
fn insert_runner(m: &mut Mapping, user: &GitHubJobConfig, github: &GitHub) {
    let runs_on = user
        .runs_on
        .clone()
        .or_else(|| github.runs_on.clone())
        .unwrap_or_else(|| DEFAULT_RUNS_ON.to_owned());
    m.insert(string("runs-on"), string(runs_on));
    if let Some(container) = user.container.as_ref().or(github.container.as_ref()) {
        m.insert(string("container"), string(container.name()));
    }
}

/// `extensions.github.pr.summary_job.runs_on` for the summary job.
fn summary_runs_on(github: &GitHub, name: &str) -> Option<String> {
    if name != terraci_engine::contrib::SUMMARY_JOB {
        return None;
    }
    github.pr.as_ref()?.summary_job.as_ref()?.runs_on.clone()
}

/// The artifact of a report producer.
fn report_artifact(producer: &str) -> String {
    format!("terraci-report-{producer}")
}

/// A contributed job: it downloads the artifacts of the jobs it needs (each plan into its
/// module directory; a plan that did not run has none, so that step may fail), runs its
/// commands from the repository root with the workflow token, and uploads its report.
/// Review jobs run on pull requests once the plans finished, whatever their outcome;
/// others when nothing they need failed.
fn render_contributed(
    plan: &JobPlan,
    job: &ContributedJob,
    github: &GitHub,
    ids: &BTreeMap<&str, String>,
) -> Value {
    let user = contributed_config(github, &job.name);
    let mut m = Mapping::new();
    if !job.needs.is_empty() {
        let needs: Vec<&str> = job
            .needs
            .iter()
            .map(|n| ids.get(&*n.job).map_or(&*n.job, String::as_str))
            .collect();
        m.insert(string("needs"), strings(&needs));
    }
    insert_runner(&mut m, &user, github);
    if let Some(environment) = &user.environment {
        m.insert(string("environment"), string(environment.as_str()));
    }
    let mut condition = match job.spec.when {
        When::ReviewAlways => "!cancelled() && github.event_name == 'pull_request'".to_owned(),
        When::OnSuccess => "!cancelled() && !failure()".to_owned(),
    };
    and_user_condition(&mut condition, user.if_.as_deref());
    m.insert(string("if"), string(condition));
    let mut permissions = IndexMap::from([("contents".to_owned(), "read".to_owned())]);
    permissions.extend(job.spec.permissions.iter().cloned());
    m.insert(string("permissions"), string_map(&permissions));
    let mut env = IndexMap::from([(
        "GITHUB_TOKEN".to_owned(),
        "${{ secrets.GITHUB_TOKEN }}".to_owned(),
    )]);
    env.extend(user.env.clone());
    m.insert(string("env"), string_map(&env));

    let mut steps = vec![step(&[
        ("name", "Checkout"),
        ("uses", "actions/checkout@v4"),
    ])];
    if github.terraci_cache && super::runs_terraci(job) {
        steps.push(cache_step(true));
    }
    // Plans: every plan artifact in one step (each into a directory of its name), then
    // each put into its module directory; a plan that did not run has none.
    let planned: Vec<&Job> = job.needs.iter().filter_map(|n| plan.job(&n.job)).collect();
    if !planned.is_empty() {
        let mut s = step(&[
            ("name", "Download plans"),
            ("uses", "actions/download-artifact@v4"),
        ]);
        let mut with = Mapping::new();
        with.insert(string("pattern"), string("terraci-plan-*"));
        with.insert(string("path"), string(runner_temp(DOWNLOADED_PLANS)));
        s.insert(string("with"), Value::Mapping(with));
        s.insert(string("continue-on-error"), Value::Bool(true));
        steps.push(s);
        let mut run = format!(
            "put() {{ {}; }}\n",
            copy_plan_files(
                plan,
                &format!("\"$RUNNER_TEMP\"/{DOWNLOADED_PLANS}/\"$1\""),
                "\"$2\""
            )
        );
        for planned in &planned {
            // A directory named `-x` must not read as an option of `cp`.
            let module = if planned.module.starts_with('-') {
                format!("./{}", planned.module)
            } else {
                planned.module.to_string()
            };
            run.push_str(&format!(
                "put {} {}\n",
                sh_word(&artifact_name(planned, ids)),
                sh_word(&module)
            ));
        }
        let mut s = step(&[("name", "Put the plans into their modules")]);
        s.insert(string("run"), string(run));
        steps.push(s);
    }
    let mut reports = String::new();
    for need in &job.needs {
        let report = plan
            .contributed_job(&need.job)
            .and_then(|c| c.spec.produces.as_deref());
        if let Some(producer) = report {
            let mut s = step(&[
                ("name", &format!("Download {producer} report")),
                ("uses", "actions/download-artifact@v4"),
            ]);
            let mut with = Mapping::new();
            with.insert(string("name"), string(report_artifact(producer)));
            with.insert(string("path"), string(runner_temp(DOWNLOADED_REPORTS)));
            s.insert(string("with"), Value::Mapping(with));
            s.insert(string("continue-on-error"), Value::Bool(true));
            steps.push(s);
            // The artifact holds the one report file, at its root.
            let path = terraci_engine::contrib::report_path(&plan.service_dir, producer);
            let from = format!(
                "\"$RUNNER_TEMP\"/{DOWNLOADED_REPORTS}/{}",
                sh_word(path.rsplit('/').next().unwrap_or(&path))
            );
            let dir = path.rsplit_once('/').map_or(".", |(dir, _)| dir);
            reports.push_str(&format!(
                "if [ -f {from} ]; then mkdir -p {} && rm -f {path} && cp {from} {path}; fi\n",
                sh_word(dir),
                path = sh_word(&path),
            ));
        }
    }
    if !reports.is_empty() {
        let mut s = step(&[("name", "Put the reports in place")]);
        s.insert(string("run"), string(reports));
        steps.push(s);
    }
    steps.extend(user_steps(user.steps_before.as_deref()));
    let hint = if &*job.name == terraci_engine::contrib::SUMMARY_JOB {
        format!(
            "add a step that installs it (steps_before in an overwrites entry of type {}) or a container that has it",
            job.name
        )
    } else {
        format!(
            "add a step that installs it (steps_before in an overwrites entry of type {})",
            job.name
        )
    };
    let mut run = String::new();
    // A review job without terraci (no image was chosen for it) warns and passes: the
    // comment is an aid, not a gate; the jobs it reads still fail on their own.
    let review = job.spec.when == When::ReviewAlways;
    for line in super::contributed_commands(job, &hint, review) {
        run.push_str(&line);
        run.push('\n');
    }
    let mut run_step = step(&[("name", &format!("Run {}", job.name))]);
    run_step.insert(string("run"), string(run));
    steps.push(run_step);
    steps.extend(user_steps(user.steps_after.as_deref()));
    if let (Some(producer), Some(path)) = (
        job.spec.produces.as_deref(),
        job.spec.report_path(&plan.service_dir),
    ) {
        let mut s = step(&[
            ("name", &format!("Upload {producer} report")),
            ("uses", "actions/upload-artifact@v4"),
        ]);
        let mut with = Mapping::new();
        with.insert(string("name"), string(report_artifact(producer)));
        with.insert(string("path"), string(path));
        with.insert(string("if-no-files-found"), string("warn"));
        with.insert(string("retention-days"), Value::Number(1.into()));
        s.insert(string("with"), Value::Mapping(with));
        s.insert(string("if"), string("always()"));
        steps.push(s);
    }
    m.insert(
        string("steps"),
        Value::Sequence(steps.into_iter().map(Value::Mapping).collect()),
    );
    Value::Mapping(m)
}

/// The `actions/cache` key of terraci's cache (`terraci_cache`) without its last part:
/// one per runner system and base branch (a pull request's base, else the branch the
/// run is for). A restore takes the newest entry under it.
const CACHE_KEY_PREFIX: &str =
    "terraci-${{ runner.os }}-${{ github.base_ref || github.ref_name }}-";

/// The full key: the prefix and the commit, so each save is an entry of its own (GitHub
/// never replaces one).
fn cache_key() -> String {
    format!("{CACHE_KEY_PREFIX}${{{{ github.sha }}}}")
}

/// A step of terraci's cache. The restore, before terraci runs, takes the newest cache
/// of the base branch (a pull request sees its base branch's entries and its own, which
/// this workflow never saves). The save, after terraci ran, runs only on a push to the
/// default branch: no pull request writes what the default branch restores.
fn cache_step(restore: bool) -> Mapping {
    let mut s = if restore {
        step(&[
            ("name", "Restore the terraci cache"),
            ("uses", "actions/cache/restore@v4"),
        ])
    } else {
        step(&[
            ("name", "Save the terraci cache"),
            ("uses", "actions/cache/save@v4"),
        ])
    };
    let mut with = Mapping::new();
    with.insert(string("path"), string(super::TERRACI_CACHE_PATH));
    with.insert(string("key"), string(cache_key()));
    if restore {
        with.insert(string("restore-keys"), string(CACHE_KEY_PREFIX));
    }
    s.insert(string("with"), Value::Mapping(with));
    if !restore {
        s.insert(
            string("if"),
            string(
                "github.event_name == 'push' && github.ref_name == github.event.repository.default_branch",
            ),
        );
    }
    s
}

fn step(pairs: &[(&str, &str)]) -> Mapping {
    pairs
        .iter()
        .map(|(k, v)| (string(*k), string(*v)))
        .collect()
}

/// The setup action. Keeping plan results turns its wrapper off: the wrapper prints
/// lines of its own into `show -json`'s output.
fn setup_step(binary: Binary, version: Option<&str>, plan_results: bool) -> Mapping {
    let (uses, input, wrapper) = match binary {
        Binary::Terraform => (
            "hashicorp/setup-terraform@v3",
            "terraform_version",
            "terraform_wrapper",
        ),
        Binary::Tofu => ("opentofu/setup-opentofu@v1", "tofu_version", "tofu_wrapper"),
    };
    let mut s = step(&[("uses", uses)]);
    let mut with = Mapping::new();
    if let Some(version) = version {
        with.insert(string(input), string(version));
    }
    if plan_results {
        with.insert(string(wrapper), Value::Bool(false));
    }
    if !with.is_empty() {
        s.insert(string("with"), Value::Mapping(with));
    }
    s
}

fn user_steps(steps: Option<&[GitHubStep]>) -> impl Iterator<Item = Mapping> + '_ {
    steps.unwrap_or_default().iter().map(|s| match to_value(s) {
        Value::Mapping(m) => m,
        _ => Mapping::new(),
    })
}
