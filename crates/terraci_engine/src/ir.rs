//! The pipeline IR: a provider-neutral, immutable job DAG.
//!
//! Input: the target modules (after change selection and filters), each with its
//! dependencies among the targets, and the plan options. Output: [`JobPlan`], read by the
//! GitLab and GitHub renderers and by `local-exec`, which never look at the dependency
//! graph themselves. Invalidated by the graph, the selection and the options.

use std::sync::Arc;

use indexmap::IndexMap;
use serde::Serialize;

use terraci_db::config::Binary;
use terraci_db::diagnostic::Code;
pub use terraci_db::selection::{holds_expression, holds_variable, PlanOptions, Runner};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum JobKind {
    Plan,
    Apply,
}

impl JobKind {
    pub fn as_str(self) -> &'static str {
        match self {
            JobKind::Plan => "plan",
            JobKind::Apply => "apply",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize)]
pub struct Need {
    pub job: Arc<str>,
    /// Whether the needed job's artifacts (the plan file) are downloaded.
    pub artifacts: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// `plan-<id with / replaced by ->`, `apply-<...>`.
    ///
    /// Names, ids and components are shared by every plan built over the same modules:
    /// an unchanged job is the same text, which comparing it can check by address.
    pub name: Arc<str>,
    pub kind: JobKind,
    /// The module id (its path relative to the project dir).
    pub module: Arc<str>,
    /// Pattern segment name -> value, in pattern order; submodules add `submodule`.
    pub components: Arc<IndexMap<String, String>>,
    pub needs: Vec<Need>,
    /// Kahn layer over jobs: 0 without needs, else 1 + the highest level it needs.
    pub level: usize,
}

/// A job an extension contributed ([`crate::contrib`]), placed in the DAG by
/// [`contribute`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContributedJob {
    pub name: Arc<str>,
    /// The plan jobs and report producers it reads; every need brings its artifacts.
    pub needs: Vec<Need>,
    /// One more than the highest level it needs.
    pub level: usize,
    pub spec: crate::contrib::Contribution,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobPlan {
    /// Ordered by level, then module id, then plan before apply. Shared, so that `watch`
    /// can keep a plan alive past salsa's replacement of it and free its 20,000 jobs on
    /// another thread.
    pub jobs: Arc<Vec<Job>>,
    /// Number of levels (stages).
    pub levels: usize,
    pub binary: Binary,
    pub init_enabled: bool,
    /// `execution.env`, added to every plan and apply job.
    pub env: IndexMap<String, String>,
    /// Pattern segment names, in order (for `TF_<SEGMENT>` variables).
    pub segments: Vec<String>,
    pub plan_only: bool,
    /// Jobs contributed by extensions, by level (a job after the jobs whose reports it
    /// reads). Never present without module jobs.
    #[serde(skip)]
    pub contributed: Vec<ContributedJob>,
    /// Plan jobs keep the plan as data ([`crate::contrib::PLAN_RESULT_FILES`]): something
    /// consumes the plan results.
    pub plan_results: bool,
    /// `service_dir`, where reports are written.
    pub service_dir: String,
    /// Commands each apply job runs before it applies, from the project root
    /// ([`crate::contrib::ContributionSet::apply_checks`]; `{module}` is its module).
    pub apply_checks: Vec<Vec<String>>,
}

impl JobPlan {
    /// True when nothing is to be planned: renderers emit a single no-op job.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| &*j.name == name)
    }

    pub fn contributed_job(&self, name: &str) -> Option<&ContributedJob> {
        self.contributed.iter().find(|j| &*j.name == name)
    }
}

/// A module that gets jobs, with its dependencies that also get jobs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub id: String,
    pub components: IndexMap<String, String>,
    /// Ids of modules this one reads from, restricted to targets; sorted.
    pub dependencies: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IrError {
    #[error("modules `{first}` and `{second}` both give the job name `{job}`; rename one of the directories")]
    JobNameCollision {
        first: String,
        second: String,
        job: String,
    },
    #[error("{0}")]
    Contribution(#[from] crate::contrib::ContributionError),
}

impl terraci_db::exit::Coded for IrError {
    fn exit_code(&self) -> u8 {
        terraci_db::exit::ERROR
    }
}

impl IrError {
    /// The error as a diagnostic, when it has a code of its own.
    pub fn diagnostic(&self) -> Option<terraci_db::diagnostic::Diagnostic> {
        match self {
            IrError::Contribution(e) => Some(e.diagnostic()),
            IrError::JobNameCollision { .. } => None,
        }
    }
}

/// The job name of `module` for `kind`: `plan-platform-stage-eu-central-1-vpc`.
pub fn job_name(kind: JobKind, module: &str) -> String {
    format!("{}-{}", kind.as_str(), module.replace('/', "-"))
}

/// Builds the job DAG. `targets` may come in any order; the result is deterministic.
pub fn build_job_plan(
    targets: &[Target],
    options: PlanOptions,
    binary: Binary,
    init_enabled: bool,
    env: IndexMap<String, String>,
    segments: Vec<String>,
) -> Result<JobPlan, IrError> {
    let mut sorted: Vec<&Target> = targets.iter().collect();
    sorted.sort_by(|a, b| a.id.cmp(&b.id));
    let names: Vec<ModuleNames> = sorted
        .iter()
        .map(|t| ModuleNames::new(&t.id, t.components.clone()))
        .collect();
    let nodes: Vec<Node<'_>> = sorted
        .iter()
        .zip(&names)
        .map(|(t, names)| Node {
            names,
            // Dependencies that get no jobs are dropped; the rest keep their given order.
            deps: t
                .dependencies
                .iter()
                .filter_map(|d| {
                    sorted
                        .binary_search_by(|t| t.id.as_str().cmp(d))
                        .ok()
                        .map(|i| i as u32)
                })
                .collect(),
        })
        .collect();
    let settings = PlanSettings {
        binary,
        init_enabled,
        env,
        segments,
    };
    plan_nodes(&nodes, true, options, settings)
}

/// What every job of a plan carries besides its own module: from the config and the
/// pattern.
struct PlanSettings {
    binary: Binary,
    init_enabled: bool,
    env: IndexMap<String, String>,
    segments: Vec<String>,
}

/// What a module's jobs are called, built once per module set (see [`module_names`]).
#[derive(Debug, Clone)]
pub(crate) struct ModuleNames {
    pub(crate) module: Arc<str>,
    pub(crate) plan: Arc<str>,
    pub(crate) apply: Arc<str>,
    pub(crate) components: Arc<IndexMap<String, String>>,
}

impl ModuleNames {
    fn new(id: &str, components: IndexMap<String, String>) -> ModuleNames {
        ModuleNames {
            module: id.into(),
            plan: job_name(JobKind::Plan, id).into(),
            apply: job_name(JobKind::Apply, id).into(),
            components: Arc::new(components),
        }
    }
}

impl PartialEq for ModuleNames {
    /// Components are compared in order: the YAML lists them in order.
    fn eq(&self, other: &ModuleNames) -> bool {
        self.module == other.module
            && self.components.len() == other.components.len()
            && self.components.iter().eq(other.components.iter())
    }
}

impl Eq for ModuleNames {}

/// The job names of every root module, in graph order ([`crate::chunk::roots`]), and
/// whether two of them share a job name. Recomputed only when the module set changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RootNames {
    pub modules: Vec<ModuleNames>,
    pub(crate) collisions: bool,
}

#[salsa::tracked(returns(ref))]
pub(crate) fn module_names(
    db: &dyn terraci_db::db::Db,
    project: terraci_db::files::Project,
) -> RootNames {
    use rayon::prelude::*;
    let roots = crate::chunk::roots(db, project);
    // Made on every core from plain values (no database access there): at 10,000
    // modules, 15 allocations each were the most of a merge-request run's job plan.
    let infos: Vec<&terraci_db::files::ModuleInfo> =
        roots.modules.iter().map(|m| m.info(db)).collect();
    let modules: Vec<ModuleNames> = infos
        .par_iter()
        .with_min_len(256)
        .map(|info| ModuleNames::new(&info.id, info.components.clone()))
        .collect();
    let mut seen = std::collections::HashSet::with_capacity(modules.len());
    let collisions = !modules.iter().all(|m| seen.insert(&m.plan));
    RootNames {
        modules,
        collisions,
    }
}

/// A module that gets jobs, by index: `deps` are indices into the same node list.
struct Node<'a> {
    names: &'a ModuleNames,
    deps: Vec<u32>,
}

/// The job DAG of `nodes`, which are sorted by id.
///
/// A plan job's level is one more than the apply (or, plan-only, the plan) jobs of its
/// dependencies, an apply job's one more than its plan job, so levels are worked out per
/// module in one topological pass. Modules in or behind a cycle (generate refuses cycles
/// before this point) get level 0. Two nodes with one job name are an error, looked for
/// only if `collisions` says the module set has such a pair.
fn plan_nodes(
    nodes: &[Node<'_>],
    collisions: bool,
    options: PlanOptions,
    settings: PlanSettings,
) -> Result<JobPlan, IrError> {
    // Only looked up, never iterated: output order does not depend on hashing.
    let mut owner: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for (i, node) in nodes.iter().enumerate().filter(|_| collisions) {
        if let Some(&first) = owner.get(&*node.names.plan) {
            return Err(IrError::JobNameCollision {
                first: nodes[first].names.module.to_string(),
                second: node.names.module.to_string(),
                job: node.names.plan.to_string(),
            });
        }
        owner.insert(&node.names.plan, i);
    }

    let parallel = options.plan_only && options.parallel_plans;
    // How many levels a dependency's plan job sits before this module's plan job.
    let step = if options.plan_only { 1 } else { 2 };
    let mut plan_level = vec![0u32; nodes.len()];
    // Whether a module's jobs ever become ready (false in or behind a cycle).
    let mut reached = vec![true; nodes.len()];
    if !parallel {
        reached.fill(false);
        let mut remaining: Vec<usize> = nodes.iter().map(|n| n.deps.len()).collect();
        let mut dependents: Vec<Vec<u32>> = vec![Vec::new(); nodes.len()];
        for (i, n) in nodes.iter().enumerate() {
            for &d in &n.deps {
                dependents[d as usize].push(i as u32);
            }
        }
        let mut ready: Vec<u32> = (0..nodes.len() as u32)
            .filter(|&i| remaining[i as usize] == 0)
            .collect();
        while let Some(m) = ready.pop() {
            let m = m as usize;
            reached[m] = true;
            for &d in &dependents[m] {
                let d = d as usize;
                plan_level[d] = plan_level[d].max(plan_level[m] + step);
                remaining[d] -= 1;
                if remaining[d] == 0 {
                    ready.push(d as u32);
                }
            }
        }
        for (level, &reached) in plan_level.iter_mut().zip(&reached) {
            if !reached {
                *level = 0;
            }
        }
    }

    // Jobs by level, modules in id order within a level, a module's plan job before its
    // apply job: the order of (level, module id, kind) without a sort.
    let mut by_level: Vec<Vec<(u32, JobKind)>> = Vec::new();
    for (i, (&level, &reached)) in plan_level.iter().zip(&reached).enumerate() {
        let mut put = |level: u32, kind: JobKind| {
            let level = level as usize;
            if by_level.len() <= level {
                by_level.resize_with(level + 1, Vec::new);
            }
            by_level[level].push((i as u32, kind));
        };
        put(level, JobKind::Plan);
        if !options.plan_only {
            // An apply job waits for its plan job; in a cycle neither is ever ready.
            put(if reached { level + 1 } else { 0 }, JobKind::Apply);
        }
    }
    let mut jobs = Vec::with_capacity(nodes.len() * if options.plan_only { 1 } else { 2 });
    for (level, entries) in by_level.iter().enumerate() {
        for &(i, kind) in entries {
            let node = &nodes[i as usize];
            let needs: Vec<Need> = match kind {
                JobKind::Plan if parallel => Vec::new(),
                JobKind::Plan => node
                    .deps
                    .iter()
                    .map(|&d| {
                        let names = nodes[d as usize].names;
                        Need {
                            job: if options.plan_only {
                                names.plan.clone()
                            } else {
                                names.apply.clone()
                            },
                            artifacts: false,
                        }
                    })
                    .collect(),
                JobKind::Apply => std::iter::once(Need {
                    job: node.names.plan.clone(),
                    artifacts: true,
                })
                .chain(node.deps.iter().map(|&d| Need {
                    job: nodes[d as usize].names.apply.clone(),
                    artifacts: false,
                }))
                .collect(),
            };
            let name = match kind {
                JobKind::Plan => node.names.plan.clone(),
                JobKind::Apply => node.names.apply.clone(),
            };
            jobs.push(Job {
                name,
                kind,
                module: node.names.module.clone(),
                components: node.names.components.clone(),
                needs,
                level,
            });
        }
    }
    Ok(JobPlan {
        jobs: Arc::new(jobs),
        levels: by_level.len(),
        binary: settings.binary,
        init_enabled: settings.init_enabled,
        env: settings.env,
        segments: settings.segments,
        plan_only: options.plan_only,
        contributed: Vec::new(),
        plan_results: false,
        service_dir: String::new(),
        apply_checks: Vec::new(),
    })
}

/// Adds the jobs of `set` to a plan of module jobs: each contributed job needs every
/// plan job when it consumes the plan results (their artifacts then hold the plan as
/// data) and the producer of every report it reads, one level above the highest of
/// them; the apply jobs wait for the jobs that gate them. A plan without module jobs
/// gets none. Errors: a contributed job named like a module job, and a gate that would
/// have to wait for itself (it reads every plan, and a plan waits for an apply).
pub fn contribute(
    mut plan: JobPlan,
    set: &crate::contrib::ContributionSet,
    service_dir: &str,
) -> Result<JobPlan, IrError> {
    use crate::contrib::{ContributionError, Input};
    plan.service_dir = service_dir.to_owned();
    if !plan.plan_only {
        plan.apply_checks = set.apply_checks().to_vec();
    }
    if plan.jobs.is_empty() || set.is_empty() {
        return Ok(plan);
    }
    let names: std::collections::HashSet<&str> =
        set.jobs().iter().map(|c| c.name.as_str()).collect();
    if let Some(job) = plan.jobs.iter().find(|j| names.contains(&*j.name)) {
        return Err(ContributionError {
            code: Code::ContributionClash,
            message: format!(
                "the contributed job `{}` has the name of the {} job of module `{}`; rename the directory",
                job.name,
                job.kind.as_str(),
                job.module
            ),
        }
        .into());
    }
    let plans: Vec<(Arc<str>, usize)> = plan
        .jobs
        .iter()
        .filter(|j| j.kind == JobKind::Plan)
        .map(|j| (j.name.clone(), j.level))
        .collect();
    let gates_apply = !plan.plan_only && set.jobs().iter().any(|c| c.gates_applies);
    if gates_apply {
        let gate = set.jobs().iter().find(|c| c.gates_applies);
        let blind = set
            .jobs()
            .iter()
            .find(|c| c.gates_applies && !c.consumes_plans());
        if let Some(gate) = blind {
            return Err(ContributionError {
                code: Code::ContributionInvalid,
                message: format!(
                    "the contributed job `{}` gates the applies but does not consume the plan results",
                    gate.name
                ),
            }
            .into());
        }
        // The gate reads every plan; a plan that waits for an apply would wait for it.
        if let (Some(gate), Some(waiting)) = (
            gate,
            plan.jobs
                .iter()
                .find(|j| j.kind == JobKind::Plan && !j.needs.is_empty()),
        ) {
            return Err(ContributionError {
                code: Code::ContributionCycle,
                message: format!(
                    "the contributed job `{}` gates every apply and reads every plan, but `{}` waits for `{}` (module `{}` reads its state): the jobs would wait for each other; use it with --plan-only",
                    gate.name, waiting.name, waiting.needs[0].job, waiting.module
                ),
            }
            .into());
        }
    }
    let mut placed: Vec<ContributedJob> = Vec::with_capacity(set.jobs().len());
    for spec in set.jobs() {
        let mut needs: Vec<Need> = Vec::new();
        let mut level = 0;
        // Only looked up, never iterated: the needs keep their order. A job that reads
        // every plan needs 10,000 jobs at 10,000 modules; a scan of the list for each was
        // 50 million name comparisons.
        let mut seen: std::collections::HashSet<Arc<str>> = std::collections::HashSet::new();
        let mut need = |job: Arc<str>, at: usize, needs: &mut Vec<Need>| {
            if seen.insert(job.clone()) {
                level = level.max(at + 1);
                needs.push(Need {
                    job,
                    artifacts: true,
                });
            }
        };
        for input in &spec.consumes {
            match input {
                Input::PlanResults => {
                    for (name, at) in &plans {
                        need(name.clone(), *at, &mut needs);
                    }
                }
                Input::Report(producer) => {
                    if let Some(by) = placed
                        .iter()
                        .find(|p| p.spec.produces.as_deref() == Some(producer.as_str()))
                    {
                        need(by.name.clone(), by.level, &mut needs);
                    }
                }
                Input::Reports => {
                    for by in placed.iter().filter(|p| p.spec.produces.is_some()) {
                        need(by.name.clone(), by.level, &mut needs);
                    }
                }
            }
        }
        placed.push(ContributedJob {
            name: spec.name.as_str().into(),
            needs,
            level,
            spec: spec.clone(),
        });
    }
    if gates_apply {
        // Plans are all on level 0 (none waits for an apply); applies come after the gates.
        let gates: Vec<&ContributedJob> = placed.iter().filter(|c| c.spec.gates_applies).collect();
        let apply_level = 1 + gates.iter().map(|g| g.level).max().unwrap_or(0);
        let mut jobs = (*plan.jobs).clone();
        for job in jobs.iter_mut().filter(|j| j.kind == JobKind::Apply) {
            job.level = apply_level;
            job.needs.extend(gates.iter().map(|g| Need {
                job: g.name.clone(),
                artifacts: false,
            }));
        }
        plan.jobs = Arc::new(jobs);
    }
    placed.sort_by_key(|c| c.level);
    let top = plan
        .jobs
        .iter()
        .map(|j| j.level)
        .chain(placed.iter().map(|c| c.level))
        .max()
        .unwrap_or(0);
    plan.levels = top + 1;
    plan.plan_results = set.consumes_plans();
    plan.contributed = placed;
    Ok(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(id: &str, deps: &[&str]) -> Target {
        Target {
            id: id.into(),
            components: IndexMap::new(),
            dependencies: deps.iter().map(|d| d.to_string()).collect(),
        }
    }

    fn plan(targets: &[Target], options: PlanOptions) -> JobPlan {
        build_job_plan(
            targets,
            options,
            Binary::Terraform,
            true,
            IndexMap::new(),
            vec![],
        )
        .unwrap()
    }

    fn summary(p: &JobPlan) -> Vec<String> {
        p.jobs
            .iter()
            .map(|j| {
                let needs: Vec<&str> = j.needs.iter().map(|n| &*n.job).collect();
                format!("{} {} <- [{}]", j.level, j.name, needs.join(", "))
            })
            .collect()
    }

    #[test]
    fn the_job_chain_of_the_how_it_works_page() {
        let p = plan(
            &[target("eks", &["vpc"]), target("vpc", &[])],
            PlanOptions::default(),
        );
        assert_eq!(
            summary(&p),
            [
                "0 plan-vpc <- []",
                "1 apply-vpc <- [plan-vpc]",
                "2 plan-eks <- [apply-vpc]",
                "3 apply-eks <- [plan-eks, apply-vpc]",
            ]
        );
        assert_eq!(p.levels, 4);
    }

    #[test]
    fn plan_only_orders_plans_unless_parallel() {
        let targets = [target("a", &[]), target("b", &["a"])];
        let p = plan(
            &targets,
            PlanOptions {
                plan_only: true,
                parallel_plans: false,
                ..PlanOptions::default()
            },
        );
        assert_eq!(summary(&p), ["0 plan-a <- []", "1 plan-b <- [plan-a]"]);
        let p = plan(
            &targets,
            PlanOptions {
                plan_only: true,
                parallel_plans: true,
                ..PlanOptions::default()
            },
        );
        assert_eq!(summary(&p), ["0 plan-a <- []", "0 plan-b <- []"]);
    }

    #[test]
    fn needs_never_name_a_job_outside_the_pipeline() {
        let p = plan(&[target("b", &["a"])], PlanOptions::default());
        assert_eq!(summary(&p), ["0 plan-b <- []", "1 apply-b <- [plan-b]"]);
    }

    fn gate(name: &str) -> crate::contrib::Contribution {
        crate::contrib::Contribution {
            name: name.into(),
            commands: vec![vec!["terraci".into(), "policy".into(), "check".into()]],
            consumes: vec![crate::contrib::Input::PlanResults],
            produces: Some("policy".into()),
            gates_applies: true,
            when: crate::contrib::When::OnSuccess,
            permissions: vec![],
            local: true,
        }
    }

    fn with(p: JobPlan, jobs: Vec<crate::contrib::Contribution>) -> Result<JobPlan, IrError> {
        let set = crate::contrib::ContributionSet::new(jobs).unwrap();
        contribute(p, &set, ".terraci")
    }

    fn all(p: &JobPlan) -> Vec<String> {
        let mut lines = summary(p);
        lines.extend(p.contributed.iter().map(|j| {
            let needs: Vec<&str> = j.needs.iter().map(|n| &*n.job).collect();
            format!("{} {} <- [{}]", j.level, j.name, needs.join(", "))
        }));
        lines
    }

    #[test]
    fn the_summary_needs_every_plan_after_the_last() {
        let p = plan(
            &[target("eks", &["vpc"]), target("vpc", &[])],
            PlanOptions::default(),
        );
        let p = with(p, vec![crate::contrib::summary_contribution()]).unwrap();
        assert_eq!(
            all(&p),
            [
                "0 plan-vpc <- []",
                "1 apply-vpc <- [plan-vpc]",
                "2 plan-eks <- [apply-vpc]",
                "3 apply-eks <- [plan-eks, apply-vpc]",
                "3 terraci-summary <- [plan-vpc, plan-eks]",
            ]
        );
        assert!(p.plan_results);
        assert_eq!(p.levels, 4);
        assert!(p.contributed[0].needs.iter().all(|n| n.artifacts));
    }

    #[test]
    fn no_module_jobs_no_contributed_jobs() {
        let p = with(
            plan(&[], PlanOptions::default()),
            vec![crate::contrib::summary_contribution()],
        )
        .unwrap();
        assert!(p.contributed.is_empty() && p.is_empty());
    }

    #[test]
    fn applies_wait_for_a_gate_and_a_reader_of_reports_for_its_producer() {
        let p = plan(
            &[target("a", &[]), target("b", &[])],
            PlanOptions::default(),
        );
        let p = with(
            p,
            vec![crate::contrib::summary_contribution(), gate("policy-check")],
        )
        .unwrap();
        assert_eq!(
            all(&p),
            [
                "0 plan-a <- []",
                "0 plan-b <- []",
                "2 apply-a <- [plan-a, policy-check]",
                "2 apply-b <- [plan-b, policy-check]",
                "1 policy-check <- [plan-a, plan-b]",
                "2 terraci-summary <- [plan-a, plan-b, policy-check]",
            ]
        );
        assert_eq!(p.levels, 3);
    }

    #[test]
    fn invalid_contributions_stop_the_plan_with_a_code() {
        // A gate reads every plan, but plan-b waits for apply-a: a cycle.
        let p = plan(
            &[target("a", &[]), target("b", &["a"])],
            PlanOptions::default(),
        );
        let err = with(p, vec![gate("policy-check")]).unwrap_err();
        assert_eq!(
            err.diagnostic().map(|d| d.code),
            Some(Code::ContributionCycle)
        );
        assert_eq!(
            err.to_string(),
            "the contributed job `policy-check` gates every apply and reads every plan, but `plan-b` waits for `apply-a` (module `b` reads its state): the jobs would wait for each other; use it with --plan-only"
        );
        // Plan-only pipelines have no applies to gate.
        let p = plan(
            &[target("a", &[]), target("b", &["a"])],
            PlanOptions {
                plan_only: true,
                ..PlanOptions::default()
            },
        );
        assert!(with(p, vec![gate("policy-check")]).is_ok());
        // A contributed job named like a module's job.
        let p = plan(&[target("x", &[])], PlanOptions::default());
        let mut clash = crate::contrib::summary_contribution();
        clash.name = "plan-x".into();
        let err = with(p, vec![clash]).unwrap_err();
        assert_eq!(
            err.diagnostic().map(|d| d.code),
            Some(Code::ContributionClash)
        );
        assert_eq!(
            err.to_string(),
            "the contributed job `plan-x` has the name of the plan job of module `x`; rename the directory"
        );
    }

    #[test]
    fn colliding_job_names_are_an_error() {
        let err = build_job_plan(
            &[target("a/b-c", &[]), target("a-b/c", &[])],
            PlanOptions::default(),
            Binary::Terraform,
            true,
            IndexMap::new(),
            vec![],
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "modules `a-b/c` and `a/b-c` both give the job name `plan-a-b-c`; rename one of the directories"
        );
    }
}

/// The job plan of a selection: affected modules, filtered, with their dependencies
/// among the targets (looking through filtered-out modules, so order is kept).
#[salsa::tracked(returns(ref))]
pub fn job_plan(
    db: &dyn terraci_db::db::Db,
    project: terraci_db::files::Project,
    selection: terraci_db::files::Selection,
) -> Result<JobPlan, IrError> {
    let graph = crate::graph::dependency_graph(db, project);
    let affected = crate::changes::affected(db, project, selection);
    let filters = selection.filters(db);
    // Root modules in the graph's order, with their names and components: read from one
    // memo rather than from each module's input, so this query depends on a handful of
    // values, not on one per module.
    let names = module_names(db, project);
    // Graph index -> node index, for modules that get jobs. Affected ids are sorted, as
    // are the graph's, so one merge walk finds them.
    let mut node_of: Vec<Option<u32>> = vec![None; graph.modules.len()];
    let mut targets: Vec<usize> = Vec::new();
    // Without a change set every root module is affected: no walk needed.
    let everything = affected.all_roots;
    let mut affected_ids = affected.affected.keys().peekable();
    for (i, id) in graph.modules.iter().enumerate() {
        if !everything {
            while affected_ids.next_if(|a| a.as_str() < id.as_str()).is_some() {}
            if affected_ids.next_if(|a| *a == id).is_none() {
                continue;
            }
        }
        let Some(names) = names.modules.get(i) else {
            continue;
        };
        let refused = selection.plan_options(db).refuses(id);
        if !refused && filters.allows(id, &names.components) {
            node_of[i] = Some(targets.len() as u32);
            targets.push(i);
        }
    }
    // Each target's nearest targets below it, looking through modules without jobs.
    let mut seen = vec![usize::MAX; graph.modules.len()];
    let mut stack: Vec<u32> = Vec::new();
    let nodes: Vec<Node<'_>> = targets
        .iter()
        .enumerate()
        .map(|(n, &i)| {
            let direct = graph.dependency_indices(i);
            let deps = if direct.iter().all(|&d| node_of[d as usize].is_some()) {
                direct.iter().filter_map(|&d| node_of[d as usize]).collect()
            } else {
                let mut deps = Vec::new();
                stack.extend_from_slice(direct);
                while let Some(d) = stack.pop() {
                    let d = d as usize;
                    if seen[d] == n {
                        continue;
                    }
                    seen[d] = n;
                    match node_of[d] {
                        Some(node) => deps.push(node),
                        None => stack.extend_from_slice(graph.dependency_indices(d)),
                    }
                }
                // Node indices follow id order: sorted indices are sorted ids.
                deps.sort_unstable();
                deps
            };
            Node {
                names: &names.modules[i],
                deps,
            }
        })
        .collect();
    let config = project.config(db);
    let mut env = config.execution.env.clone();
    env.extend(
        crate::resolve::command_line_env(db, project)
            .iter()
            .cloned(),
    );
    let options = selection.plan_options(db);
    // Contributions are collected and checked before the job plan exists.
    let contributions = crate::contrib::contributions(config, options.runner)?;
    let plan = plan_nodes(
        &nodes,
        names.collisions,
        options,
        PlanSettings {
            binary: config.execution.binary,
            init_enabled: config.execution.init_enabled,
            env,
            segments: project.pattern(db).segments().to_vec(),
        },
    )?;
    contribute(plan, &contributions, &crate::contrib::service_dir(config))
}
