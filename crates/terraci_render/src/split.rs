//! Child pipelines for a GitLab pipeline over the instance's limits.
//!
//! Input: the [`JobPlan`], `extensions.gitlab` and the pipeline rendered whole (the size
//! of each job's text guides the packing). Output: a parent pipeline that takes the
//! children from the job that generated them and triggers them, and the children, each
//! a complete pipeline under `max_yaml_size_bytes` (by [`gitlab_loaded_size`], with the
//! newer-Ruby headroom) and `max_jobs`. Invalidated by the job plan, the config and the
//! directory the children are written to.
//!
//! How the jobs are split, keeping every order the jobs' `needs` give:
//! - a module's jobs stay together (an apply takes its plan's artifact, which cannot
//!   cross pipelines);
//! - modules fall into independent groups (linked by a `needs` between their jobs, either
//!   way), packed first fit, in module order, into children that run at once;
//! - a group over the budget alone becomes a chain of children by dependency rank (a
//!   module ranks after every module it reads); each link's trigger `needs` the previous
//!   link's triggers, and a rank over the budget alone is spread over children that
//!   run at once between the same links;
//! - within a child, `needs` on jobs of another child are dropped (the triggers keep that
//!   order); each job keeps its stage, so a job left without `needs` still waits for the
//!   earlier stages of its child, and a job unchanged keeps the whole pipeline's text;
//! - contributed jobs (summary, policy-check...) read the plans' artifacts, which cannot
//!   cross pipelines either: each child has its own, over its modules; each trigger gives
//!   its child `TERRACI_SUMMARY_PART: child-<n>`, so that each child's summary keeps a
//!   merge-request comment of its own.
//!
//! Every trigger has `strategy: depend`, so the parent waits for each child and takes its
//! status.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;
use std::sync::Arc;

use serde_yaml::{Mapping, Value};

use super::gitlab::{
    contributed_piece, default_entry, pipeline_image, render_gitlab_keeping, STYLE,
};
use super::loaded_size::{array_size, counted_size, piece_size, root_hash_size, LoadedSizes};
use super::yaml::write_document;
use super::{gitlab_loaded_size, string, Header, JobPiece, PipelineText, RenderError};
use terraci_db::config::{Config, GitLab};
use terraci_engine::ir::{ContributedJob, Job, JobPlan, Need};

/// The parent's job that takes the children from the generate job and publishes them as
/// its artifacts (a trigger's `include: artifact:` names a job of its own pipeline).
pub const CHILDREN_JOB: &str = "terraci-children";
/// The job that runs `terraci generate` in the recipe's pipeline.
pub const DEFAULT_GENERATE_JOB: &str = "generate-pipeline";
/// The variable the recipe's trigger sets to its pipeline's id.
pub const PARENT_PIPELINE_VARIABLE: &str = "PARENT_PIPELINE_ID";

/// How many times the packing is tightened when a child measures over the budget (the
/// packing's figures are the whole pipeline's, a child's stages and contributed jobs
/// differ). Each packing's children are measured before any is rendered whole: only the
/// one that holds is.
const PACKING_ROUNDS: usize = 8;

/// A pipeline split into a parent and its children.
#[derive(Debug, Clone)]
pub struct SplitPipeline {
    pub parent: String,
    /// In trigger order.
    pub children: Vec<ChildPipeline>,
}

#[derive(Debug, Clone)]
pub struct ChildPipeline {
    /// The file name in the children's directory ([`child_file_name`]).
    pub file: String,
    pub text: PipelineText,
    /// The estimate of GitLab's measure ([`gitlab_loaded_size`]).
    pub size: u64,
    /// Its module jobs and contributed jobs.
    pub jobs: usize,
}

/// The file of the `n`th child (from 1).
pub fn child_file_name(n: usize) -> String {
    format!("child-{n}.yml")
}

/// Whether terraci names a file `name` in a children's directory: `child-<n>.yml`.
pub fn is_child_file_name(name: &str) -> bool {
    name.strip_prefix("child-")
        .and_then(|rest| rest.strip_suffix(".yml"))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether `extensions.gitlab.split_pipelines` lets a pipeline over the limits be split.
pub fn split_enabled(config: &Config) -> bool {
    config
        .extensions
        .gitlab
        .as_ref()
        .and_then(|g| g.split_pipelines)
        .unwrap_or(true)
}

/// Splits `plan` (rendered whole as `whole`, whose job texts the children take over)
/// into child pipelines written in `dir` (the directory as the CI job that generates
/// them sees it, relative to its working directory) and their parent. An error when one
/// module's jobs alone are over the limits.
pub fn split_gitlab(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
    whole: PipelineText,
    sizes: &LoadedSizes,
    dir: &str,
) -> Result<SplitPipeline, RenderError> {
    let gitlab = config.extensions.gitlab.clone().unwrap_or_default();
    let limit = gitlab
        .max_yaml_size_bytes
        .unwrap_or(super::DEFAULT_MAX_YAML_SIZE_BYTES);
    let units = Units::new(plan, &gitlab, sizes);
    // Each job's text moves to the one child that keeps it unchanged: no copy.
    let mut texts: Vec<Option<JobPiece>> = whole
        .jobs
        .into_iter()
        .take(plan.jobs.len())
        .map(Some)
        .collect();
    let (head_bytes, head_entries) = sizes.head;
    let contributed: u64 = sizes.jobs[plan.jobs.len()..]
        .iter()
        .map(|(bytes, _)| bytes)
        .sum();
    // Contributed jobs' `needs` grow with the child's plan jobs: each module is charged
    // its share, and every child a fixed part for what does not shrink.
    let share = contributed.div_ceil(units.modules.len().max(1) as u64);
    let mut budget = Budget {
        bytes: largest_under(limit),
        base: head_bytes + contributed / 4,
        base_entries: head_entries + plan.contributed.len(),
        share,
        jobs: gitlab.max_jobs,
    };
    let mut rounds = 0;
    let needs_limit = gitlab.needs_limit.unwrap_or(super::DEFAULT_NEEDS_LIMIT);
    loop {
        let bins = units.pack(&budget);
        let subs = units.child_plans(plan, &bins);
        // One module's jobs and the contributed jobs are more than `max_jobs`: no
        // packing helps.
        if let Some((max, jobs)) = gitlab.max_jobs.and_then(|max| {
            subs.iter()
                .map(|(sub, _)| sub.jobs.len() + sub.contributed.len())
                .find(|&jobs| jobs > max)
                .map(|jobs| (max, jobs))
        }) {
            return Err(RenderError::GitlabTooManyJobs { jobs, limit: max });
        }
        // The children that decide whether this packing holds, measured before any is
        // rendered whole: the largest and every one the estimate puts over the limit.
        let estimates: Vec<u64> = bins
            .iter()
            .map(|bin| units.size(&bin.load, sizes.head))
            .collect();
        let mut by_estimate: Vec<usize> = (0..bins.len()).collect();
        by_estimate.sort_by_key(|&b| std::cmp::Reverse(estimates[b]));
        let mut largest = 0;
        let mut over: Option<(usize, u64)> = None;
        for b in by_estimate {
            if estimates[b] < largest && counted_size(estimates[b]) <= limit {
                break;
            }
            let (sub, kept) = &subs[b];
            let unread = kept
                .iter()
                .map(|i| i.map(|_| JobPiece::Owned(String::new())));
            let text = render_gitlab_keeping(sub, config, header, unread.collect())?;
            let size = child_size(&text, kept, sizes);
            largest = largest.max(size);
            if counted_size(size) > limit && over.is_none_or(|(first, _)| b < first) {
                over = Some((b, size));
            }
        }
        match over {
            Some((b, size)) if bins[b].modules.len() == 1 || rounds == PACKING_ROUNDS => {
                return Err(RenderError::GitlabTooLarge {
                    size,
                    counted: counted_size(size),
                    limit,
                });
            }
            Some(_) => {
                budget.tighten(largest);
                rounds += 1;
                continue;
            }
            None => {}
        }
        let mut children = Vec::with_capacity(bins.len());
        for (n, (sub, kept)) in subs.into_iter().enumerate() {
            // Each job's text moves to the one child that keeps it unchanged: no copy.
            let pieces = kept.iter().map(|i| i.and_then(|i| texts[i].take()));
            let text = render_gitlab_keeping(&sub, config, header, pieces.collect())?;
            let size = child_size(&text, &kept, sizes);
            children.push(ChildPipeline {
                file: child_file_name(n + 1),
                text,
                size,
                jobs: sub.jobs.len() + sub.contributed.len(),
            });
        }
        // A link after a rank spread over many children waits for each of them.
        if let Some((n, bin)) = bins
            .iter()
            .enumerate()
            .find(|(_, bin)| bin.after.len() + 1 > needs_limit)
        {
            return Err(RenderError::Config(format!(
                "extensions.gitlab.needs_limit: the trigger of child pipeline {} \
                 would need {} jobs, over the limit of {needs_limit}: too many \
                 modules of one dependency rank for max_yaml_size_bytes ({limit})",
                n + 1,
                bin.after.len() + 1
            )));
        }
        let parent = parent_text(plan, &gitlab, header, dir, &bins, &children);
        // A trigger per child: only a limit far below GitLab's default makes them too
        // many.
        let size = gitlab_loaded_size(&[&parent]);
        if counted_size(size) > limit {
            return Err(RenderError::GitlabTooLarge {
                size,
                counted: counted_size(size),
                limit,
            });
        }
        return Ok(SplitPipeline { parent, children });
    }
}

/// The estimate of a child's `text`: its jobs kept from the whole pipeline (`kept`) are
/// the whole pipeline's figures, only the rest is read.
fn child_size(text: &PipelineText, kept: &[Option<usize>], sizes: &LoadedSizes) -> u64 {
    LoadedSizes {
        head: piece_size(&text.head),
        jobs: text
            .jobs
            .iter()
            .enumerate()
            .map(|(j, piece)| match kept.get(j).copied().flatten() {
                Some(i) => sizes.jobs[i],
                None => piece_size(piece),
            })
            .collect(),
    }
    .total()
}

/// The largest estimate whose counted size is at most `limit`.
fn largest_under(limit: u64) -> u64 {
    let mut size = limit * 100 / (100 + super::loaded_size::NEWER_RUBY_HEADROOM_PERCENT);
    while size > 0 && counted_size(size) > limit {
        size -= 1;
    }
    size
}

/// What a child may hold.
struct Budget {
    /// The largest estimate.
    bytes: u64,
    /// What every child holds besides its modules' jobs: the head, a part of the
    /// contributed jobs.
    base: u64,
    /// The top-level entries of the head and the contributed jobs.
    base_entries: usize,
    /// Each module's share of the contributed jobs.
    share: u64,
    jobs: Option<usize>,
}

impl Budget {
    fn fits(&self, load: &Load, contributed: usize) -> bool {
        let size = self.base
            + load.bytes
            + self.share * load.modules as u64
            + root_hash_size(self.base_entries + load.entries);
        size <= self.bytes
            && self
                .jobs
                .is_none_or(|max| load.entries + contributed <= max)
    }

    /// Tightens by the overshoot of a child of `largest`, and a little more.
    fn tighten(&mut self, largest: u64) {
        let target = self.bytes as u128 * self.bytes as u128 / largest as u128;
        self.bytes = (target as u64).saturating_sub(self.bytes / 50);
    }
}

/// What some modules' jobs put in a child.
#[derive(Debug, Default, Clone)]
struct Load {
    /// Their texts' sizes, as in the whole pipeline (a job that loses `needs` in a
    /// child only gets smaller).
    bytes: u64,
    /// Their jobs (each one top-level entry).
    entries: usize,
    modules: usize,
    /// For each contributed job, how many of its `needs` they hold.
    needed: Vec<usize>,
}

impl Load {
    fn add(&mut self, other: &Load) {
        self.bytes += other.bytes;
        self.entries += other.entries;
        self.modules += other.modules;
        for (n, o) in self.needed.iter_mut().zip(&other.needed) {
            *n += o;
        }
    }
}

/// A contributed job's size in a child, by how many of its `needs` the child holds: it
/// lists them when there are some and no more than the limit.
struct Contributed {
    /// Without `needs`.
    bare: u64,
    /// What a list of one need adds.
    first: u64,
    /// What each further need adds (its longest-named need's entry), besides the list's
    /// own growth.
    each: u64,
    /// Its needs on other contributed jobs: in every child.
    fixed: usize,
    limit: usize,
}

impl Contributed {
    fn size(&self, needs: usize) -> u64 {
        if needs == 0 || needs > self.limit {
            return self.bare;
        }
        self.bare
            + self.first
            + (needs as u64 - 1) * self.each
            + (array_size(needs) - array_size(1))
    }
}

/// A module's jobs, as the packing sees them.
struct Module {
    /// Indices in the plan's jobs, in order.
    jobs: Vec<usize>,
    load: Load,
}

/// The plan's modules and how they depend on each other.
struct Units<'a> {
    /// In module id order.
    modules: Vec<Module>,
    /// Module index -> the modules it reads (its jobs need theirs), sorted.
    reads: Vec<Vec<usize>>,
    /// Plan job index -> its module.
    job_module: Vec<usize>,
    /// Plan job name -> its index.
    job_index: FxHashMap<&'a str, usize>,
    /// The names of the contributed jobs, which every child has.
    contributed_names: Vec<&'a str>,
    contributed: Vec<Contributed>,
}

/// The modules of one child and the children its trigger waits for.
#[derive(Debug, Default)]
struct Bin {
    modules: Vec<usize>,
    load: Load,
    after: Vec<usize>,
}

/// Where the job a `need` names is.
enum Place {
    /// A plan job, in the child of this index.
    Child(usize),
    /// A contributed job: in every child.
    Every,
    Nowhere,
}

impl<'a> Units<'a> {
    fn new(plan: &'a JobPlan, gitlab: &GitLab, sizes: &LoadedSizes) -> Units<'a> {
        let jobs = &plan.jobs;
        // Modules numbered as first met, then renumbered in id order.
        let mut seen: FxHashMap<&str, usize> = FxHashMap::default();
        let mut names: Vec<&str> = Vec::new();
        let met: Vec<usize> = jobs
            .iter()
            .map(|job| {
                *seen.entry(&*job.module).or_insert_with(|| {
                    names.push(&job.module);
                    names.len() - 1
                })
            })
            .collect();
        let mut order: Vec<usize> = (0..names.len()).collect();
        order.sort_unstable_by_key(|&m| names[m]);
        let mut rank = vec![0; names.len()];
        for (r, &m) in order.iter().enumerate() {
            rank[m] = r;
        }
        let job_module: Vec<usize> = met.iter().map(|&m| rank[m]).collect();
        let job_index: FxHashMap<&str, usize> = jobs
            .iter()
            .enumerate()
            .map(|(i, job)| (&*job.name, i))
            .collect();
        let contributed_names: Vec<&str> = plan.contributed.iter().map(|j| &*j.name).collect();
        let empty = Load {
            needed: vec![0; plan.contributed.len()],
            ..Load::default()
        };
        let mut modules: Vec<Module> = (0..names.len())
            .map(|_| Module {
                jobs: Vec::new(),
                load: empty.clone(),
            })
            .collect();
        let mut reads = vec![Vec::new(); names.len()];
        for (i, job) in jobs.iter().enumerate() {
            let me = job_module[i];
            let module = &mut modules[me];
            module.jobs.push(i);
            module.load.bytes += sizes.jobs[i].0;
            module.load.entries += 1;
            module.load.modules = 1;
            for need in &job.needs {
                if let Some(&other) = job_index.get(&*need.job) {
                    if job_module[other] != me {
                        reads[me].push(job_module[other]);
                    }
                }
            }
        }
        for reads in &mut reads {
            reads.sort_unstable();
            reads.dedup();
        }
        let limit = gitlab.needs_limit.unwrap_or(super::DEFAULT_NEEDS_LIMIT);
        let mut contributed = Vec::with_capacity(plan.contributed.len());
        for (c, job) in plan.contributed.iter().enumerate() {
            let mut fixed = 0;
            for need in &job.needs {
                if let Some(&i) = job_index.get(&*need.job) {
                    modules[job_module[i]].load.needed[c] += 1;
                } else if contributed_names.contains(&&*need.job) {
                    fixed += 1;
                }
            }
            let size = |needs: Vec<Need>| {
                let job = ContributedJob {
                    name: job.name.clone(),
                    needs,
                    level: job.level,
                    spec: job.spec.clone(),
                };
                piece_size(&contributed_piece(&job, gitlab, plan)).0
            };
            let bare = size(Vec::new());
            let (first, each) = match job.needs.iter().max_by_key(|n| n.job.len()) {
                Some(longest) => {
                    let one = size(vec![longest.clone()]);
                    let two = size(vec![longest.clone(), longest.clone()]);
                    (one.saturating_sub(bare), two.saturating_sub(one))
                }
                None => (0, 0),
            };
            contributed.push(Contributed {
                bare,
                first,
                each,
                fixed,
                limit,
            });
        }
        Units {
            modules,
            reads,
            job_module,
            job_index,
            contributed_names,
            contributed,
        }
    }

    /// What a child holds before any module: every contributed job's needs on the others.
    fn empty(&self) -> Load {
        Load {
            needed: self.contributed.iter().map(|c| c.fixed).collect(),
            ..Load::default()
        }
    }

    /// Whether a child holding `bin` and `more` stays within `budget`.
    fn fits(&self, bin: &Load, more: &Load, budget: &Budget) -> bool {
        let mut load = bin.clone();
        load.add(more);
        budget.fits(&load, self.contributed.len())
    }

    /// The estimate of a child holding `load` below a head of `head` (the whole
    /// pipeline's, which has the same stages and at least the same templates): never
    /// below the rendered child's, as a job that loses `needs` only gets smaller.
    fn size(&self, load: &Load, (head, head_entries): (u64, usize)) -> u64 {
        let contributed: u64 = self
            .contributed
            .iter()
            .zip(&load.needed)
            .map(|(c, &needs)| c.size(needs))
            .sum();
        head + load.bytes
            + contributed
            + root_hash_size(head_entries + self.contributed.len() + load.entries)
    }

    /// The independent groups, each sorted, in the order of their first module.
    fn groups(&self) -> Vec<Vec<usize>> {
        let mut parent: Vec<usize> = (0..self.modules.len()).collect();
        fn root(parent: &mut [usize], mut i: usize) -> usize {
            while parent[i] != i {
                parent[i] = parent[parent[i]];
                i = parent[i];
            }
            i
        }
        for (me, reads) in self.reads.iter().enumerate() {
            for &other in reads {
                let (a, b) = (root(&mut parent, me), root(&mut parent, other));
                if a != b {
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
        let mut groups: std::collections::BTreeMap<usize, Vec<usize>> = Default::default();
        for i in 0..self.modules.len() {
            let r = root(&mut parent, i);
            groups.entry(r).or_default().push(i);
        }
        groups.into_values().collect()
    }

    /// The modules of `group` by rank: each after every module it reads.
    fn ranks(&self, group: &[usize]) -> Vec<Vec<usize>> {
        let mut rank: FxHashMap<usize, usize> = Default::default();
        // Kahn's order over the group: a module's rank is one more than the highest rank
        // it reads (the graph has no cycles: `generate` refuses them).
        let mut pending: Vec<usize> = group.to_vec();
        while !pending.is_empty() {
            let before = pending.len();
            pending.retain(|&m| {
                let mut r = 0;
                for other in &self.reads[m] {
                    match rank.get(other) {
                        Some(o) => r = r.max(o + 1),
                        None => return true,
                    }
                }
                rank.insert(m, r);
                false
            });
            if pending.len() == before {
                // Unreachable without a cycle; the rest goes last rather than nowhere.
                let last = rank.values().max().map_or(0, |r| r + 1);
                for m in pending.drain(..) {
                    rank.insert(m, last);
                }
            }
        }
        let mut ranks: Vec<Vec<usize>> = Vec::new();
        for &m in group {
            let r = rank[&m];
            if ranks.len() <= r {
                ranks.resize_with(r + 1, Vec::new);
            }
            ranks[r].push(m);
        }
        ranks.retain(|r| !r.is_empty());
        ranks
    }

    fn cost(&self, modules: &[usize]) -> Load {
        let mut load = Load {
            needed: vec![0; self.contributed.len()],
            ..Load::default()
        };
        for &m in modules {
            load.add(&self.modules[m].load);
        }
        load
    }

    /// The children, each as its modules and the children it waits for (always children
    /// made before it, so the triggers' order has no cycle).
    fn pack(&self, budget: &Budget) -> Vec<Bin> {
        let mut bins: Vec<Bin> = Vec::new();
        let empty = self.empty();
        for group in self.groups() {
            let cost = self.cost(&group);
            if self.fits(&empty, &cost, budget) {
                self.place(&mut bins, budget, &group, cost, &[]);
                continue;
            }
            // Over the budget alone: a chain of links by rank, each link in a child after
            // the children of the link before it.
            let mut before: Vec<usize> = Vec::new();
            // The child of the last link, while the link is one child.
            let mut current: Option<usize> = None;
            for rank in self.ranks(&group) {
                let cost = self.cost(&rank);
                if let Some(c) = current {
                    if self.fits(&bins[c].load, &cost, budget) {
                        add(&mut bins[c], &rank, &cost);
                        continue;
                    }
                    before = vec![c];
                }
                if self.fits(&empty, &cost, budget) {
                    current = Some(self.place(&mut bins, budget, &rank, cost, &before));
                    continue;
                }
                // A rank over the budget alone: its modules read none of each other, so
                // they are spread over children after the same link.
                let mut used: BTreeSet<usize> = BTreeSet::new();
                for &m in &rank {
                    let cost = self.modules[m].load.clone();
                    used.insert(self.place(&mut bins, budget, &[m], cost, &before));
                }
                before = used.into_iter().collect();
                current = None;
            }
        }
        bins
    }

    /// Puts `modules` (whose `cost` fits an empty child) in the first child made after
    /// every child of `before` that has room (with no `before`, one that waits for
    /// nothing first), or a new one; returns its index.
    fn place(
        &self,
        bins: &mut Vec<Bin>,
        budget: &Budget,
        modules: &[usize],
        cost: Load,
        before: &[usize],
    ) -> usize {
        let first = before.iter().max().map_or(0, |b| b + 1);
        let room = |b: &usize| self.fits(&bins[*b].load, &cost, budget);
        // Modules that wait for nothing go first where nothing is waited for.
        let free = before
            .is_empty()
            .then(|| {
                (0..bins.len())
                    .filter(|&b| bins[b].after.is_empty())
                    .find(room)
            })
            .flatten();
        let at = free
            .or_else(|| (first..bins.len()).find(room))
            .unwrap_or_else(|| {
                bins.push(Bin {
                    load: self.empty(),
                    ..Bin::default()
                });
                bins.len() - 1
            });
        let bin = &mut bins[at];
        add(bin, modules, &cost);
        for &b in before {
            if !bin.after.contains(&b) {
                bin.after.push(b);
            }
        }
        bin.after.sort_unstable();
        at
    }

    /// The job plan of each child: its modules' jobs and every contributed job, `needs`
    /// outside it dropped, each job at its level (stage) of the whole pipeline; and for
    /// each of its jobs, its index in the whole plan when it is unchanged.
    fn child_plans(&self, plan: &JobPlan, bins: &[Bin]) -> Vec<(JobPlan, Vec<Option<usize>>)> {
        let mut child_of = vec![0; self.modules.len()];
        for (b, bin) in bins.iter().enumerate() {
            for &m in &bin.modules {
                child_of[m] = b;
            }
        }
        let place = |need: &Need| match self.job_index.get(&*need.job) {
            Some(&i) => Place::Child(child_of[self.job_module[i]]),
            None if self.contributed_names.contains(&&*need.job) => Place::Every,
            None => Place::Nowhere,
        };
        // Each contributed job's needs, dealt to the children once rather than looked up
        // again for each child.
        let mut contributed_needs: Vec<Vec<Vec<Need>>> =
            vec![vec![Vec::new(); plan.contributed.len()]; bins.len()];
        for (c, job) in plan.contributed.iter().enumerate() {
            for need in &job.needs {
                match place(need) {
                    Place::Child(b) => contributed_needs[b][c].push(need.clone()),
                    Place::Every => {
                        for needs in &mut contributed_needs {
                            needs[c].push(need.clone());
                        }
                    }
                    Place::Nowhere => {}
                }
            }
        }
        let base = JobPlan {
            jobs: Arc::new(Vec::new()),
            contributed: Vec::new(),
            ..plan.clone()
        };
        bins.iter()
            .zip(contributed_needs)
            .enumerate()
            .map(|(b, (bin, contributed_needs))| {
                let mut indices: Vec<usize> = bin
                    .modules
                    .iter()
                    .flat_map(|&m| self.modules[m].jobs.iter().copied())
                    .collect();
                // The plan's order: by level, then module.
                indices.sort_unstable();
                let mut kept = Vec::with_capacity(indices.len());
                let jobs: Vec<Job> = indices
                    .iter()
                    .map(|&i| {
                        let job = &plan.jobs[i];
                        let needs: Vec<Need> = job
                            .needs
                            .iter()
                            .filter(|need| match place(need) {
                                Place::Child(c) => c == b,
                                Place::Every => true,
                                Place::Nowhere => false,
                            })
                            .cloned()
                            .collect();
                        kept.push((needs.len() == job.needs.len()).then_some(i));
                        Job {
                            name: job.name.clone(),
                            kind: job.kind,
                            module: job.module.clone(),
                            components: job.components.clone(),
                            needs,
                            level: job.level,
                        }
                    })
                    .collect();
                let contributed = plan
                    .contributed
                    .iter()
                    .zip(contributed_needs)
                    .map(|(job, needs)| ContributedJob {
                        name: job.name.clone(),
                        needs,
                        level: job.level,
                        spec: job.spec.clone(),
                    })
                    .collect();
                let sub = JobPlan {
                    jobs: Arc::new(jobs),
                    contributed,
                    ..base.clone()
                };
                (sub, kept)
            })
            .collect()
    }
}

fn add(bin: &mut Bin, modules: &[usize], cost: &Load) {
    bin.modules.extend_from_slice(modules);
    bin.load.add(cost);
}

/// The parent: the job that publishes the children, then one trigger per child.
fn parent_text(
    plan: &JobPlan,
    gitlab: &GitLab,
    header: &Header,
    dir: &str,
    bins: &[Bin],
    children: &[ChildPipeline],
) -> String {
    let mut comments = header.comment_lines();
    comments.push(format!(
        "Over the GitLab limits as one pipeline: {} child pipelines in {dir}/, each \
         triggered by a job below.",
        children.len()
    ));
    let mut doc = Mapping::new();
    if !gitlab.rules.is_empty() {
        let mut workflow = Mapping::new();
        workflow.insert(string("rules"), super::to_value(&gitlab.rules));
        doc.insert(string("workflow"), Value::Mapping(workflow));
    }
    doc.insert(
        string("default"),
        default_entry(&pipeline_image(plan, gitlab)),
    );
    doc.insert(
        string("stages"),
        super::strings(&["terraci-children", "terraci-trigger"]),
    );

    let generate_job = gitlab
        .generate_job
        .clone()
        .unwrap_or_else(|| DEFAULT_GENERATE_JOB.to_owned());
    let mut publish = Mapping::new();
    publish.insert(string("stage"), string("terraci-children"));
    let mut need = Mapping::new();
    need.insert(
        string("pipeline"),
        string(format!("${PARENT_PIPELINE_VARIABLE}")),
    );
    need.insert(string("job"), string(generate_job));
    publish.insert(string("needs"), Value::Sequence(vec![Value::Mapping(need)]));
    publish.insert(
        string("script"),
        super::strings(&[format!("ls {}", terraci_db::escape::sh_word(dir))]),
    );
    let mut artifacts = Mapping::new();
    artifacts.insert(string("paths"), super::strings(&[format!("{dir}/")]));
    artifacts.insert(string("expire_in"), string("1 day"));
    publish.insert(string("artifacts"), Value::Mapping(artifacts));
    if let Some(tags) = gitlab.job_defaults.as_ref().and_then(|d| d.tags.as_ref()) {
        publish.insert(string("tags"), super::strings(tags));
    }
    doc.insert(string(CHILDREN_JOB), Value::Mapping(publish));

    let summary = plan
        .contributed
        .iter()
        .any(|job| &*job.name == terraci_engine::contrib::SUMMARY_JOB);
    for (bin, child) in bins.iter().zip(children) {
        let mut trigger_job = Mapping::new();
        trigger_job.insert(string("stage"), string("terraci-trigger"));
        let needs = std::iter::once(CHILDREN_JOB.to_owned())
            .chain(bin.after.iter().map(|&b| trigger_name(&children[b])))
            .map(string)
            .collect();
        trigger_job.insert(string("needs"), Value::Sequence(needs));
        if summary {
            // Passed down to the child: its summary keeps a comment of its own.
            let mut variables = Mapping::new();
            variables.insert(
                string(terraci_engine::contrib::SUMMARY_PART_VARIABLE),
                string(child_name(child)),
            );
            trigger_job.insert(string("variables"), Value::Mapping(variables));
        }
        let mut include = Mapping::new();
        include.insert(string("artifact"), string(format!("{dir}/{}", child.file)));
        include.insert(string("job"), string(CHILDREN_JOB));
        let mut trigger = Mapping::new();
        trigger.insert(
            string("include"),
            Value::Sequence(vec![Value::Mapping(include)]),
        );
        trigger.insert(string("strategy"), string("depend"));
        trigger_job.insert(string("trigger"), Value::Mapping(trigger));
        doc.insert(string(trigger_name(child)), Value::Mapping(trigger_job));
    }
    write_document(&comments, &doc, &STYLE)
}

/// `child-<n>` for `child-<n>.yml`.
fn child_name(child: &ChildPipeline) -> &str {
    child.file.strip_suffix(".yml").unwrap_or(&child.file)
}

/// `terraci-child-<n>` for `child-<n>.yml`.
fn trigger_name(child: &ChildPipeline) -> String {
    format!("terraci-{}", child_name(child))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn child_file_names_are_recognised_and_nothing_else() {
        assert_eq!(child_file_name(12), "child-12.yml");
        assert!(is_child_file_name("child-12.yml"));
        for other in [
            "child-.yml",
            "child-1.yaml",
            "child-1a.yml",
            "notes.yml",
            "child-1",
        ] {
            assert!(!is_child_file_name(other), "{other}");
        }
    }

    #[test]
    fn the_budget_keeps_the_headroom() {
        for limit in [1000, 2 * 1024 * 1024, 150_000] {
            let size = largest_under(limit);
            assert!(counted_size(size) <= limit);
            assert!(counted_size(size + 1) > limit);
        }
    }
}
