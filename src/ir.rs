//! The pipeline IR: a provider-neutral, immutable job DAG.
//!
//! Input: the target modules (after change selection and filters), each with its
//! dependencies among the targets, and the plan options. Output: [`JobPlan`], read by the
//! GitLab and GitHub renderers and by `local-exec`, which never look at the dependency
//! graph themselves. Invalidated by the graph, the selection and the options.

use std::collections::BTreeMap;

use indexmap::IndexMap;
use serde::Serialize;

use crate::config::Binary;

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
    pub job: String,
    /// Whether the needed job's artifacts (the plan file) are downloaded.
    pub artifacts: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// `plan-<id with / replaced by ->`, `apply-<...>`.
    pub name: String,
    pub kind: JobKind,
    /// The module id (its path relative to the project dir).
    pub module: String,
    /// Pattern segment name -> value, in pattern order; submodules add `submodule`.
    pub components: IndexMap<String, String>,
    pub needs: Vec<Need>,
    /// Kahn layer over jobs: 0 without needs, else 1 + the highest level it needs.
    pub level: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JobPlan {
    /// Ordered by level, then module id, then plan before apply.
    pub jobs: Vec<Job>,
    /// Number of levels (stages).
    pub levels: usize,
    pub binary: Binary,
    pub init_enabled: bool,
    /// `execution.env`, added to every plan and apply job.
    pub env: IndexMap<String, String>,
    /// Pattern segment names, in order (for `TF_<SEGMENT>` variables).
    pub segments: Vec<String>,
    pub plan_only: bool,
}

impl JobPlan {
    /// True when nothing is to be planned: renderers emit a single no-op job.
    pub fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }

    pub fn job(&self, name: &str) -> Option<&Job> {
        self.jobs.iter().find(|j| j.name == name)
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlanOptions {
    /// No apply jobs.
    pub plan_only: bool,
    /// With `plan_only`: plan jobs do not wait for each other.
    pub parallel_plans: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IrError {
    #[error("modules `{first}` and `{second}` both give the job name `{job}`; rename one of the directories")]
    JobNameCollision {
        first: String,
        second: String,
        job: String,
    },
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

    let mut owner: BTreeMap<String, &str> = BTreeMap::new();
    for t in &sorted {
        let name = job_name(JobKind::Plan, &t.id);
        if let Some(first) = owner.insert(name.clone(), &t.id) {
            return Err(IrError::JobNameCollision {
                first: first.to_owned(),
                second: t.id.clone(),
                job: name,
            });
        }
    }

    let ids: std::collections::BTreeSet<&str> = sorted.iter().map(|t| t.id.as_str()).collect();
    let mut jobs: Vec<Job> = Vec::new();
    for t in &sorted {
        let deps: Vec<&String> = t
            .dependencies
            .iter()
            .filter(|d| ids.contains(d.as_str()))
            .collect();
        let plan_needs: Vec<Need> = if options.plan_only {
            if options.parallel_plans {
                Vec::new()
            } else {
                deps.iter()
                    .map(|d| Need {
                        job: job_name(JobKind::Plan, d),
                        artifacts: false,
                    })
                    .collect()
            }
        } else {
            deps.iter()
                .map(|d| Need {
                    job: job_name(JobKind::Apply, d),
                    artifacts: false,
                })
                .collect()
        };
        jobs.push(Job {
            name: job_name(JobKind::Plan, &t.id),
            kind: JobKind::Plan,
            module: t.id.clone(),
            components: t.components.clone(),
            needs: plan_needs,
            level: 0,
        });
        if !options.plan_only {
            let mut needs = vec![Need {
                job: job_name(JobKind::Plan, &t.id),
                artifacts: true,
            }];
            needs.extend(deps.iter().map(|d| Need {
                job: job_name(JobKind::Apply, d),
                artifacts: false,
            }));
            jobs.push(Job {
                name: job_name(JobKind::Apply, &t.id),
                kind: JobKind::Apply,
                module: t.id.clone(),
                components: t.components.clone(),
                needs,
                level: 0,
            });
        }
    }

    // Kahn layering: the dependency graph is acyclic (generate refuses cycles before
    // this point), so a fixed point is reached in at most `jobs.len()` rounds.
    let index: BTreeMap<String, usize> = jobs
        .iter()
        .enumerate()
        .map(|(i, j)| (j.name.clone(), i))
        .collect();
    let mut levels: Vec<Option<usize>> = vec![None; jobs.len()];
    let mut remaining = jobs.len();
    while remaining > 0 {
        let mut progressed = false;
        for i in 0..jobs.len() {
            if levels[i].is_some() {
                continue;
            }
            let mut level = 0;
            let mut ready = true;
            for need in &jobs[i].needs {
                match index.get(&need.job).and_then(|&k| levels[k]) {
                    Some(l) => level = level.max(l + 1),
                    None => {
                        ready = false;
                        break;
                    }
                }
            }
            if ready {
                levels[i] = Some(level);
                remaining -= 1;
                progressed = true;
            }
        }
        if !progressed {
            break;
        }
    }
    for (job, level) in jobs.iter_mut().zip(levels) {
        job.level = level.unwrap_or(0);
    }
    jobs.sort_by(|a, b| (a.level, &a.module, a.kind).cmp(&(b.level, &b.module, b.kind)));
    let levels = jobs.iter().map(|j| j.level + 1).max().unwrap_or(0);
    Ok(JobPlan {
        jobs,
        levels,
        binary,
        init_enabled,
        env,
        segments,
        plan_only: options.plan_only,
    })
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
                let needs: Vec<&str> = j.needs.iter().map(|n| n.job.as_str()).collect();
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
            },
        );
        assert_eq!(summary(&p), ["0 plan-a <- []", "1 plan-b <- [plan-a]"]);
        let p = plan(
            &targets,
            PlanOptions {
                plan_only: true,
                parallel_plans: true,
            },
        );
        assert_eq!(summary(&p), ["0 plan-a <- []", "0 plan-b <- []"]);
    }

    #[test]
    fn needs_never_name_a_job_outside_the_pipeline() {
        let p = plan(&[target("b", &["a"])], PlanOptions::default());
        assert_eq!(summary(&p), ["0 plan-b <- []", "1 apply-b <- [plan-b]"]);
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
    db: &dyn crate::db::Db,
    project: crate::files::Project,
    selection: crate::files::Selection,
) -> Result<JobPlan, IrError> {
    let graph = crate::graph::dependency_graph(db, project);
    let affected = crate::changes::affected(db, project, selection);
    let filters = selection.filters(db);
    let mut components: BTreeMap<&str, IndexMap<String, String>> = BTreeMap::new();
    for &m in project.modules(db) {
        let info = m.info(db);
        if info.is_root() {
            components.insert(info.id.as_str(), info.components.clone());
        }
    }
    let targets: std::collections::BTreeSet<&str> = affected
        .affected
        .keys()
        .map(String::as_str)
        .filter(|id| components.get(id).is_some_and(|c| filters.allows(id, c)))
        .collect();
    let list: Vec<Target> = targets
        .iter()
        .map(|&id| {
            let mut deps = std::collections::BTreeSet::new();
            let mut seen = std::collections::BTreeSet::new();
            let mut stack: Vec<&str> = graph.dependencies(id);
            while let Some(d) = stack.pop() {
                if !seen.insert(d) {
                    continue;
                }
                if targets.contains(d) {
                    deps.insert(d.to_owned());
                } else {
                    stack.extend(graph.dependencies(d));
                }
            }
            Target {
                id: id.to_owned(),
                components: components.get(id).cloned().unwrap_or_default(),
                dependencies: deps.into_iter().collect(),
            }
        })
        .collect();
    let config = project.config(db);
    build_job_plan(
        &list,
        selection.plan_options(db),
        config.execution.binary,
        config.execution.init_enabled,
        config.execution.env.clone(),
        project.pattern(db).segments().to_vec(),
    )
}
