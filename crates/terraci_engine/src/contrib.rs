//! Jobs contributed by extensions (summary, policy...): declared, collected, validated.
//!
//! Input: the config and the runner the pipeline is built for. Output: a validated
//! [`ContributionSet`], which [`crate::ir::contribute`] turns into jobs of the job plan:
//! `needs`, artifacts and levels for every renderer and for `local-exec` alike. A
//! contribution says what it consumes ([`Input`]), what it produces (a report file under
//! `service_dir`), whether the apply jobs wait for it, and when it runs; it never names the
//! jobs it needs, so the IR decides those. Invalid contributions (a clash of names, an
//! input nobody produces, a cycle) are [`ContributionError`]s with a diagnostic code and
//! stop the build before the job plan exists.

use std::collections::{BTreeMap, BTreeSet};

use terraci_db::config::Config;
use terraci_db::diagnostic::Code;
use terraci_db::selection::Runner;

/// The summary job: TerraCi's name on GitLab and GitHub.
pub const SUMMARY_JOB: &str = "terraci-summary";

/// The variable a split GitLab pipeline's trigger gives its child pipeline (`child-<n>`):
/// the summary job of each child keeps its own merge-request comment by it.
pub const SUMMARY_PART_VARIABLE: &str = "TERRACI_SUMMARY_PART";

/// Jobs TerraCi users may know from TerraCi's plugins, which `overwrites[].type` may
/// name even when the pipeline does not have them (the plugin is off).
pub const KNOWN_JOBS: &[&str] = &[SUMMARY_JOB, POLICY_JOB, TFUPDATE_JOB];

/// The files a plan job leaves in its module directory when plan results are consumed.
pub const PLAN_RESULT_FILES: [&str; 4] =
    ["plan.tfplan", "plan.txt", "plan.json", "plan.result.json"];

/// What a contributed job reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Input {
    /// The plan results (the files of [`PLAN_RESULT_FILES`]) of every target module: the
    /// job needs every plan job and gets their artifacts.
    PlanResults,
    /// The report of one producer (another contribution's `produces`).
    Report(String),
    /// Every report the other contributions produce.
    Reports,
}

/// When a contributed job runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum When {
    /// In every pipeline, once the jobs it needs succeeded.
    #[default]
    OnSuccess,
    /// Only in merge-request (GitLab) and pull-request (GitHub) pipelines, once the jobs it
    /// needs finished, whatever their outcome (a failed plan is what a review must see).
    /// `local-exec` runs it after the jobs it needs, also when they failed.
    ReviewAlways,
}

/// A job an extension adds to the pipeline.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Contribution {
    /// The job name (GitLab job, GitHub job id, `overwrites[].type`): letters, digits,
    /// `-` and `_`.
    pub name: String,
    /// Program and arguments of each command, run in order from the repository root.
    pub commands: Vec<Vec<String>>,
    pub consumes: Vec<Input>,
    /// The producer name of the report it writes to
    /// `<service_dir>/<producer>-report.json`, kept as the job's artifact.
    pub produces: Option<String>,
    /// The apply jobs wait for it (a policy gate).
    pub gates_applies: bool,
    pub when: When,
    /// GitHub permissions the job needs beyond reading the repository
    /// (`pull-requests: write` to comment).
    pub permissions: Vec<(String, String)>,
    /// Runs in `local-exec` too (with the running terraci for a `terraci` command).
    pub local: bool,
}

impl Contribution {
    /// The report file, relative to the repository root.
    pub fn report_path(&self, service_dir: &str) -> Option<String> {
        self.produces.as_ref().map(|p| report_path(service_dir, p))
    }

    /// Whether it reads the plan results of the target modules.
    pub(crate) fn consumes_plans(&self) -> bool {
        self.consumes.contains(&Input::PlanResults)
    }
}

/// `<service_dir>/<producer>-report.json`.
pub fn report_path(service_dir: &str, producer: &str) -> String {
    format!(
        "{}/{producer}-report.json",
        service_dir.trim_end_matches('/')
    )
}

/// An invalid contribution: printed as a diagnostic with `code`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ContributionError {
    pub(crate) code: terraci_db::diagnostic::Code,
    pub(crate) message: String,
}

impl ContributionError {
    fn new(code: Code, message: String) -> Self {
        ContributionError { code, message }
    }

    pub(crate) fn diagnostic(&self) -> terraci_db::diagnostic::Diagnostic {
        terraci_db::diagnostic::Diagnostic::error(self.code, self.message.clone())
    }
}

/// Validated contributions, in an order where every job comes after the jobs whose
/// reports it reads.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct ContributionSet {
    jobs: Vec<Contribution>,
    /// Checks every apply job runs, from the project root, before it applies; `{module}`
    /// in an argument stands for the job's module id. A check that fails stops the apply.
    apply_checks: Vec<Vec<String>>,
}

impl ContributionSet {
    /// Checks `jobs` among themselves: valid, distinct names with commands; every
    /// report consumed is produced, by one job only; no job reads its own report or
    /// reads reports in a circle. Module job names are checked by the IR.
    pub fn new(jobs: Vec<Contribution>) -> Result<Self, ContributionError> {
        let mut names = BTreeSet::new();
        let mut producers: BTreeMap<&str, &str> = BTreeMap::new();
        for job in &jobs {
            if job.name.is_empty()
                || !job
                    .name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            {
                return Err(ContributionError::new(
                    Code::ContributionInvalid,
                    format!(
                        "contributed job name `{}` is not valid: use letters, digits, `-` and `_`",
                        terraci_db::escape::printable(&job.name)
                    ),
                ));
            }
            if job.commands.is_empty() || job.commands.iter().any(|c| c.is_empty()) {
                return Err(ContributionError::new(
                    Code::ContributionInvalid,
                    format!("contributed job `{}` has an empty command", job.name),
                ));
            }
            if !names.insert(job.name.as_str()) {
                return Err(ContributionError::new(
                    Code::ContributionClash,
                    format!("two contributed jobs are named `{}`", job.name),
                ));
            }
            if let Some(producer) = &job.produces {
                if let Some(first) = producer_clash(&producers, producer) {
                    return Err(ContributionError::new(
                        Code::ContributionClash,
                        format!(
                            "contributed jobs `{first}` and `{}` both produce the `{producer}` report",
                            job.name
                        ),
                    ));
                }
                producers.insert(producer, &job.name);
            }
        }
        // Which jobs each job reads reports of.
        let mut reads: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for job in &jobs {
            let entry = reads.entry(&job.name).or_default();
            for input in &job.consumes {
                match input {
                    Input::PlanResults => {}
                    Input::Report(producer) => match producers.get(producer.as_str()) {
                        Some(&by) => {
                            entry.insert(by);
                        }
                        None => {
                            return Err(ContributionError::new(
                                Code::ContributionUnknownInput,
                                format!(
                                    "contributed job `{}` consumes the `{producer}` report, which no job produces{}",
                                    job.name,
                                    known_producers(&producers)
                                ),
                            ))
                        }
                    },
                    Input::Reports => {
                        entry.extend(producers.values().filter(|&&by| by != job.name));
                    }
                }
            }
        }
        // Depth-first topological order, reporting the first circle found.
        let mut order: Vec<&str> = Vec::with_capacity(jobs.len());
        let mut state: BTreeMap<&str, u8> = BTreeMap::new();
        fn visit<'a>(
            name: &'a str,
            reads: &BTreeMap<&'a str, BTreeSet<&'a str>>,
            state: &mut BTreeMap<&'a str, u8>,
            path: &mut Vec<&'a str>,
            order: &mut Vec<&'a str>,
        ) -> Result<(), ContributionError> {
            match state.get(name) {
                Some(2) => return Ok(()),
                Some(_) => {
                    let start = path.iter().position(|&p| p == name).unwrap_or(0);
                    let mut circle: Vec<&str> = path[start..].to_vec();
                    circle.push(name);
                    return Err(ContributionError::new(
                        Code::ContributionCycle,
                        format!(
                            "contributed jobs read each other's reports in a circle: {}",
                            circle.join(" -> ")
                        ),
                    ));
                }
                None => {}
            }
            state.insert(name, 1);
            path.push(name);
            for &dep in reads.get(name).into_iter().flatten() {
                visit(dep, reads, state, path, order)?;
            }
            path.pop();
            state.insert(name, 2);
            order.push(name);
            Ok(())
        }
        for job in &jobs {
            visit(&job.name, &reads, &mut state, &mut Vec::new(), &mut order)?;
        }
        let position: BTreeMap<String, usize> = order
            .iter()
            .enumerate()
            .map(|(i, &n)| (n.to_owned(), i))
            .collect();
        drop(reads);
        drop(producers);
        let mut jobs = jobs;
        jobs.sort_by_key(|j| position.get(&j.name).copied().unwrap_or(usize::MAX));
        Ok(ContributionSet {
            jobs,
            apply_checks: Vec::new(),
        })
    }

    pub(crate) fn jobs(&self) -> &[Contribution] {
        &self.jobs
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    /// The set with `checks` run in every apply job before it applies.
    pub(crate) fn with_apply_checks(mut self, checks: Vec<Vec<String>>) -> Self {
        self.apply_checks = checks;
        self
    }

    pub(crate) fn apply_checks(&self) -> &[Vec<String>] {
        &self.apply_checks
    }

    pub fn get(&self, name: &str) -> Option<&Contribution> {
        self.jobs.iter().find(|j| j.name == name)
    }

    /// Whether any job reads the plan results: plan jobs then keep them as data.
    pub(crate) fn consumes_plans(&self) -> bool {
        self.jobs.iter().any(Contribution::consumes_plans)
    }
}

fn producer_clash<'a>(producers: &BTreeMap<&str, &'a str>, producer: &str) -> Option<&'a str> {
    producers.get(producer).copied()
}

fn known_producers(producers: &BTreeMap<&str, &str>) -> String {
    if producers.is_empty() {
        String::new()
    } else {
        let names: Vec<&str> = producers.keys().copied().collect();
        format!(" (reports produced: {})", names.join(", "))
    }
}

/// The summary job: it reads every plan result and every report and writes the
/// merge-request / pull-request comment (`terraci summary`).
pub fn summary_contribution() -> Contribution {
    Contribution {
        name: SUMMARY_JOB.to_owned(),
        commands: vec![vec!["terraci".to_owned(), "summary".to_owned()]],
        consumes: vec![Input::PlanResults, Input::Reports],
        produces: None,
        gates_applies: false,
        when: When::ReviewAlways,
        permissions: vec![("pull-requests".to_owned(), "write".to_owned())],
        local: true,
    }
}

/// `policy-check` when `extensions.policy` turns checks on: `terraci policy pull` then
/// `terraci policy check` over the plan results of every target module, in review
/// pipelines (merge and pull requests) once the plans finished; its report is a section
/// of the summary comment. It does not hold the applies back (see [`apply_checks`]).
pub(crate) fn policy_contribution(config: &Config) -> Option<Contribution> {
    let job = pipeline_job(config)?;
    Some(Contribution {
        name: job.name.to_owned(),
        commands: job.commands,
        consumes: vec![Input::PlanResults],
        produces: Some(job.produces.to_owned()),
        gates_applies: false,
        when: When::ReviewAlways,
        permissions: vec![],
        local: true,
    })
}

/// The job name of the cost estimate in GitLab and GitHub pipelines.
pub const COST_JOB: &str = "cost";

/// `cost` when `extensions.cost` turns AWS pricing on: `terraci cost` over the plan
/// results of every target module, in review pipelines once the plans finished; its
/// report (`cost`) is the cost section of the summary comment. It never holds an apply.
pub(crate) fn cost_contribution(config: &Config) -> Option<Contribution> {
    let cost = config.extensions.cost.as_ref()?;
    if !cost.is_enabled() {
        return None;
    }
    Some(Contribution {
        name: COST_JOB.to_owned(),
        commands: vec![vec!["terraci".to_owned(), "cost".to_owned()]],
        consumes: vec![Input::PlanResults],
        produces: Some("cost".to_owned()),
        gates_applies: false,
        when: When::ReviewAlways,
        permissions: vec![],
        local: true,
    })
}

/// What each apply job checks before it applies: with a policy decision of `block`, the
/// policies over its own module's plan (`terraci policy pull`, then `terraci policy check
/// --module <its module>`), so a module whose plan a policy blocks is never applied and
/// its dependents wait. Per apply, not one job for all: that job would read every plan,
/// and the plans of modules that read others wait for those modules' applies.
pub(crate) fn apply_checks(config: &Config) -> Vec<Vec<String>> {
    match pipeline_job(config) {
        Some(job) if job.gates_applies => {
            let terraci = |args: &[&str]| {
                std::iter::once("terraci")
                    .chain(args.iter().copied())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            };
            vec![
                terraci(&["policy", "pull"]),
                terraci(&["policy", "check", "--module", MODULE_PLACEHOLDER]),
            ]
        }
        _ => Vec::new(),
    }
}

/// In an apply check's argument, the module id of the apply job.
pub const MODULE_PLACEHOLDER: &str = "{module}";

// The policy job is a model here, decided by the config alone; the checking itself (Rego,
// pulled sources) is `terraci_ext::policy`, which the job plan never reaches.
/// The job name of the policy check in GitLab and GitHub pipelines (TerraCi's).
pub const POLICY_JOB: &str = "policy-check";

/// What the pipelines get when policy checks are on: a job after the plans that pulls
/// the policies and checks every plan, leaving `<service_dir>/policy-report.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineJob {
    pub name: &'static str,
    /// Program and arguments of each command, run from the repository root.
    pub commands: Vec<Vec<String>>,
    /// The producer of the report it writes (`policy`).
    pub(crate) produces: &'static str,
    /// Some decision is `block`: the apply jobs wait for the check (a failing module
    /// stops them).
    pub gates_applies: bool,
}

/// The policy job for `config`, when its section turns checks on for some module
/// (`enabled`, or an override that enables them).
pub fn pipeline_job(config: &Config) -> Option<PipelineJob> {
    let policy = config.extensions.policy.as_ref()?;
    let enabled = policy.enabled || policy.overrides.iter().any(|o| o.enabled == Some(true));
    if !enabled {
        return None;
    }
    let gates_applies = policy.blocks_anywhere();
    let command = |sub: &str| vec!["terraci".to_owned(), "policy".to_owned(), sub.to_owned()];
    Some(PipelineJob {
        name: POLICY_JOB,
        commands: vec![command("pull"), command("check")],
        produces: "policy",
        gates_applies,
    })
}

/// The job name of the dependency update check (TerraCi's).
pub const TFUPDATE_JOB: &str = "tfupdate-check";

/// `tfupdate-check` when `extensions.tfupdate` has `pipeline: true`: `terraci tfupdate`
/// (read-only), whose `<service_dir>/tfupdate-report.json` is a section of the summary.
/// It reads no plan, so it runs at the start of every pipeline; not in `local-exec`,
/// which runs terraform, not registry checks. A section that cannot be read is an error
/// only when it asks for the job (`pipeline: true`): otherwise `terraci tfupdate`
/// reports it.
pub(crate) fn tfupdate_contribution(
    config: &Config,
) -> Result<Option<Contribution>, ContributionError> {
    let Some(section) = config.extensions.tfupdate.as_ref() else {
        return Ok(None);
    };
    let pipeline = match section.settings() {
        Ok(settings) => settings.enabled && settings.pipeline,
        Err(why) => {
            let asked = section.0.get("pipeline").and_then(|v| v.as_bool()) == Some(true);
            if asked {
                return Err(ContributionError::new(Code::ContributionInvalid, why));
            }
            false
        }
    };
    Ok(pipeline.then(|| Contribution {
        name: TFUPDATE_JOB.to_owned(),
        commands: vec![vec!["terraci".to_owned(), "tfupdate".to_owned()]],
        consumes: vec![],
        produces: Some("tfupdate".to_owned()),
        gates_applies: false,
        when: When::OnSuccess,
        permissions: vec![],
        local: false,
    }))
}

/// Whether the summary job is part of pipelines for `runner`: on unless
/// `extensions.summary.enabled: false`, or for GitLab `extensions.gitlab.mr.comment.enabled:
/// false`, for GitHub `extensions.github.pr.comment.enabled: false`.
pub(crate) fn summary_enabled(config: &Config, runner: Runner) -> bool {
    use terraci_db::config::CommentProvider;
    let provider = match runner {
        Runner::Local => return config.extensions.summary_enabled(),
        Runner::Gitlab => CommentProvider::GitLab,
        Runner::Github => CommentProvider::GitHub,
    };
    config.extensions.effective_summary(Some(provider)).enabled
}

/// The contributions of the extensions `config` enables, for pipelines of `runner`.
pub fn contributions(
    config: &Config,
    runner: Runner,
) -> Result<ContributionSet, ContributionError> {
    let mut jobs = Vec::new();
    if let Some(policy) = policy_contribution(config) {
        jobs.push(policy);
    }
    if let Some(cost) = cost_contribution(config) {
        jobs.push(cost);
    }
    jobs.extend(tfupdate_contribution(config)?);
    if summary_enabled(config, runner) {
        jobs.push(summary_contribution());
    }
    Ok(ContributionSet::new(jobs)?.with_apply_checks(apply_checks(config)))
}

/// `service_dir`, default `.terraci` (validated at load: relative, inside the project).
pub fn service_dir(config: &Config) -> String {
    config.service_dir().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, consumes: &[Input], produces: Option<&str>) -> Contribution {
        Contribution {
            name: name.into(),
            commands: vec![vec!["true".into()]],
            consumes: consumes.to_vec(),
            produces: produces.map(str::to_owned),
            gates_applies: false,
            when: When::OnSuccess,
            permissions: vec![],
            local: false,
        }
    }

    #[test]
    fn turning_cost_on_adds_the_cost_job_after_the_plans_and_before_the_summary() {
        let config = |text: &str| terraci_db::config::parse_config(text, "c").expect("config");
        let off = contributions(&config("extensions:\n  cost: {}\n"), Runner::Gitlab).unwrap();
        assert!(off.get(COST_JOB).is_none());
        let on =
            config("extensions:\n  cost:\n    providers:\n      aws:\n        enabled: true\n");
        let set = contributions(&on, Runner::Github).unwrap();
        let cost = set.get(COST_JOB).expect("a cost job");
        assert_eq!(cost.commands, [["terraci", "cost"]]);
        assert_eq!(cost.consumes, [Input::PlanResults]);
        assert_eq!(
            cost.report_path(".terraci").as_deref(),
            Some(".terraci/cost-report.json")
        );
        assert_eq!((cost.when, cost.gates_applies), (When::ReviewAlways, false));
        let order: Vec<&str> = set.jobs.iter().map(|j| j.name.as_str()).collect();
        assert_eq!(order, [COST_JOB, SUMMARY_JOB]);
    }

    fn error(jobs: Vec<Contribution>) -> (Code, String) {
        let e = ContributionSet::new(jobs).unwrap_err();
        (e.code, e.message)
    }

    #[test]
    fn jobs_come_after_the_producers_of_the_reports_they_read() {
        let set = ContributionSet::new(vec![
            job("summary", &[Input::PlanResults, Input::Reports], None),
            job("cost", &[Input::PlanResults], Some("cost")),
            job("policy", &[Input::Report("cost".into())], Some("policy")),
        ])
        .unwrap();
        let names: Vec<&str> = set.jobs().iter().map(|j| j.name.as_str()).collect();
        assert_eq!(names, ["cost", "policy", "summary"]);
        assert!(set.consumes_plans());
    }

    #[test]
    fn invalid_contributions_are_coded_errors() {
        assert_eq!(
            error(vec![job("a", &[Input::Report("cost".into())], None)]),
            (
                Code::ContributionUnknownInput,
                "contributed job `a` consumes the `cost` report, which no job produces".into()
            )
        );
        assert_eq!(
            error(vec![job("a", &[], None), job("a", &[], None)]).0,
            Code::ContributionClash
        );
        assert_eq!(
            error(vec![job("a", &[], Some("r")), job("b", &[], Some("r"))]),
            (
                Code::ContributionClash,
                "contributed jobs `a` and `b` both produce the `r` report".into()
            )
        );
        assert_eq!(
            error(vec![
                job("a", &[Input::Report("rb".into())], Some("ra")),
                job("b", &[Input::Report("ra".into())], Some("rb")),
            ]),
            (
                Code::ContributionCycle,
                "contributed jobs read each other's reports in a circle: a -> b -> a".into()
            )
        );
        assert_eq!(
            error(vec![job("a b", &[], None)]).0,
            Code::ContributionInvalid
        );
        let mut empty = job("a", &[], None);
        empty.commands.clear();
        assert_eq!(error(vec![empty]).0, Code::ContributionInvalid);
    }

    #[test]
    fn reading_every_report_excludes_the_jobs_own() {
        // A job that reads every report and produces one does not wait for itself.
        let set = ContributionSet::new(vec![job("a", &[Input::Reports], Some("a"))]).unwrap();
        assert_eq!(set.jobs().len(), 1);
    }
}
