//! GitLab CI renderer [spec 7.2].
//!
//! Input: a [`JobPlan`] and `extensions.gitlab`. Output: `.gitlab-ci.yml` text. Key order
//! is fixed: header, `workflow`, `variables`, `default`, `stages`, then the jobs in level
//! order, each as `stage`, `needs`, `script`, `variables`, `artifacts`, `cache`,
//! `resource_group`, then what `job_defaults` and `overwrites` set.

use std::sync::{Arc, Mutex, PoisonError};

use indexmap::IndexMap;
use rayon::prelude::*;
use serde_yaml::{Mapping, Value};

use super::yaml::{write_document, write_entries_text, write_entry_text, Style};
use super::{
    default_image, job_commands, job_variables, string, string_map, strings, to_value, Header,
    PipelineText, RenderError, Rendered, NO_CHANGES_JOB, NO_CHANGES_MESSAGE, PLAN_FILE,
};
use crate::config::{
    Config, GitLab, GitLabArtifacts, GitLabJobConfig, GitLabWhen, Image, OverwriteType,
};
use crate::ir::{Job, JobKind, JobPlan};

/// GitLab's default limit of `needs` entries per job.
pub const DEFAULT_NEEDS_LIMIT: usize = 50;

const DEFAULT_STAGES_PREFIX: &str = "deploy";

/// Renders `.gitlab-ci.yml`.
pub fn render_gitlab(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
) -> Result<Rendered, RenderError> {
    render_gitlab_with(plan, config, header, None)
}

/// Renders `.gitlab-ci.yml`, reusing from `texts` the text of every job that is equal to
/// the one it was rendered from under the same settings (`watch`: an edit re-renders only
/// the jobs it changed). Output is the same bytes as [`render_gitlab`]'s.
pub fn render_gitlab_with(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
    texts: Option<&JobTexts>,
) -> Result<Rendered, RenderError> {
    let (text, warnings) = render_gitlab_text(plan, config, header, texts)?;
    Ok(Rendered {
        text: text.into_string(),
        warnings,
    })
}

/// [`render_gitlab_with`] keeping the job texts as pieces (see [`PipelineText`]).
pub fn render_gitlab_parts(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
    texts: &JobTexts,
) -> Result<(PipelineText, Vec<String>), RenderError> {
    render_gitlab_text(plan, config, header, Some(texts))
}

fn render_gitlab_text(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
    texts: Option<&JobTexts>,
) -> Result<(PipelineText, Vec<String>), RenderError> {
    let gitlab = config.extensions.gitlab.clone().unwrap_or_default();
    let mut warnings = ignored_keys(&gitlab);
    let prefix = gitlab
        .stages_prefix
        .clone()
        .unwrap_or_else(|| DEFAULT_STAGES_PREFIX.to_owned());

    let mut doc = Mapping::new();
    if !gitlab.rules.is_empty() {
        let mut workflow = Mapping::new();
        workflow.insert(string("rules"), to_value(&gitlab.rules));
        doc.insert(string("workflow"), Value::Mapping(workflow));
    }
    let mut variables = IndexMap::new();
    // TerraCi's scripts run `${TERRAFORM_BINARY}`; users' own scripts may still do.
    variables.insert(
        "TERRAFORM_BINARY".to_owned(),
        plan.binary.command().to_owned(),
    );
    variables.extend(gitlab.variables.clone());
    doc.insert(string("variables"), string_map(&variables));

    let image = match (&gitlab.image, &gitlab.terraform_image) {
        (Some(image), _) => image.clone(),
        (None, Some(image)) => {
            warnings.push(
                "extensions.gitlab.terraform_image is deprecated; use extensions.gitlab.image"
                    .to_owned(),
            );
            image.clone()
        }
        // The official images' entrypoint is the binary itself, which GitLab would run
        // the job script through; `[""]` gives the shell back.
        (None, None) => Image::Full {
            name: default_image(plan.binary, gitlab.terraform_version.as_deref()),
            entrypoint: Some(vec![String::new()]),
        },
    };
    let mut default = Mapping::new();
    default.insert(string("image"), image_value(&image));
    doc.insert(string("default"), Value::Mapping(default));

    let stage_count = plan.levels.max(1);
    let stages: Vec<String> = (0..stage_count).map(|i| format!("{prefix}-{i}")).collect();
    doc.insert(string("stages"), strings(&stages));

    let style = Style {
        plain_keys: &[],
        spaced_children: &[],
    };
    if plan.is_empty() {
        doc.insert(
            string(NO_CHANGES_JOB),
            no_changes_job(&format!("{prefix}-0"), gitlab.job_defaults.as_ref()),
        );
    }
    let mut text = PipelineText::from(write_document(&header.comment_lines(), &doc, &style));
    if !plan.is_empty() {
        // Jobs are top-level entries like the ones above, each after a blank line; they
        // are written one by one (in parallel) rather than as one tree.
        let cache = CacheSettings::new(&gitlab, &plan.segments)?;
        let limit = gitlab.needs_limit.unwrap_or(DEFAULT_NEEDS_LIMIT);
        let kinds = [JobKind::Plan, JobKind::Apply].map(|kind| KindSettings::new(&gitlab, kind));
        let render = |job: &Job, warnings: &mut Vec<String>| {
            let settings = &kinds[usize::from(job.kind == JobKind::Apply)];
            let head = render_job(plan, job, settings, &prefix, &cache, limit, warnings);
            let mut out = write_entry_text(0, &job.name, &head, &style);
            out.push_str(&settings.tail);
            out
        };
        let job_warnings = match texts {
            None => {
                let (jobs, job_warnings) = super::render_jobs(&plan.jobs, render);
                for job in jobs {
                    text.head.push('\n');
                    text.head.push_str(&job);
                }
                job_warnings
            }
            Some(texts) => texts.write(
                &plan.jobs,
                JobTextKey::new(&gitlab, plan),
                render,
                &mut text.jobs,
            ),
        };
        warnings.extend(job_warnings);
    }
    Ok((text, warnings))
}

/// Job texts kept from one render to the next, for [`render_gitlab_with`].
#[derive(Default)]
pub struct JobTexts {
    state: Mutex<JobTextState>,
}

#[derive(Default)]
struct JobTextState {
    key: Option<JobTextKey>,
    /// Job name -> the job and what it rendered to. Looked up, never iterated: the hash
    /// order never reaches the output.
    jobs: rustc_hash::FxHashMap<Arc<str>, Arc<JobText>>,
}

/// Everything besides the job itself that a job's text depends on, written out with
/// `Debug`: maps are compared in order (`IndexMap`'s `==` ignores order, the YAML does
/// not).
#[derive(PartialEq)]
struct JobTextKey(String);

impl JobTextKey {
    fn new(gitlab: &GitLab, plan: &JobPlan) -> JobTextKey {
        JobTextKey(format!(
            "{:?}",
            (
                gitlab,
                plan.binary,
                plan.init_enabled,
                &plan.env,
                &plan.segments
            )
        ))
    }
}

/// Whether `a` renders exactly as `b` under one key: every field, maps in order.
fn same_job(a: &Job, b: &Job) -> bool {
    a.level == b.level
        && a.kind == b.kind
        && a.needs == b.needs
        && a.name == b.name
        && a.module == b.module
        && (Arc::ptr_eq(&a.components, &b.components)
            || (a.components.len() == b.components.len()
                && a.components.iter().eq(b.components.iter())))
}

struct JobText {
    job: Job,
    /// The job's text after its blank line.
    text: Arc<str>,
    warnings: Vec<String>,
}

impl JobTexts {
    /// Appends each job's text (after a blank line) to `texts` and returns the jobs'
    /// warnings, both in job order; renders with `render`, on all cores, only the jobs
    /// whose text under `key` is not kept, and keeps exactly the texts of `jobs`.
    fn write<F>(
        &self,
        jobs: &[Job],
        key: JobTextKey,
        render: F,
        texts: &mut Vec<Arc<str>>,
    ) -> Vec<String>
    where
        F: Fn(&Job, &mut Vec<String>) -> String + Sync,
    {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.key.as_ref() != Some(&key) {
            state.jobs.clear();
            state.key = Some(key);
        }
        let fresh = |job: &Job| {
            let mut warnings = Vec::new();
            let text = format!("\n{}", render(job, &mut warnings));
            Arc::new(JobText {
                job: job.clone(),
                text: text.into(),
                warnings,
            })
        };
        // One look-up per job: its kept text if the job is the same, else a new one.
        let entries: Vec<(Arc<JobText>, bool)> = jobs
            .par_iter()
            .with_min_len(64)
            .map(|job| match state.jobs.get(&*job.name) {
                Some(kept) if same_job(&kept.job, job) => (kept.clone(), false),
                _ => (fresh(job), true),
            })
            .collect();
        texts.reserve(entries.len());
        let mut warnings = Vec::new();
        for (entry, _) in &entries {
            texts.push(entry.text.clone());
            warnings.extend(entry.warnings.iter().cloned());
        }
        // Texts first (a kept job's text is the one it was compared with above), then the
        // store is updated, so even two jobs of one name would each get their own text.
        for (job, (entry, fresh)) in jobs.iter().zip(entries) {
            if fresh {
                state.jobs.insert(job.name.clone(), entry);
            }
        }
        if state.jobs.len() != jobs.len() {
            let names: std::collections::HashSet<&str> = jobs.iter().map(|j| &*j.name).collect();
            state.jobs.retain(|name, _| names.contains(&**name));
        }
        warnings
    }
}

fn ignored_keys(gitlab: &GitLab) -> Vec<String> {
    let mut warnings = Vec::new();
    if gitlab.mr.is_some() {
        warnings.push(
            "extensions.gitlab.mr (merge-request comments) is not implemented by terraci; \
             the section is ignored"
                .to_owned(),
        );
    }
    for (key, present, instead) in [
        (
            "terraform_binary",
            gitlab.terraform_binary.is_some(),
            "execution.binary",
        ),
        (
            "plan_enabled",
            gitlab.plan_enabled.is_some(),
            "execution.plan_enabled",
        ),
        (
            "init_enabled",
            gitlab.init_enabled.is_some(),
            "execution.init_enabled",
        ),
        (
            "auto_approve",
            gitlab.auto_approve.is_some(),
            "`overwrites: [{type: apply, when: manual}]`",
        ),
    ] {
        if present {
            warnings.push(format!(
                "extensions.gitlab.{key} is an old TerraCi key and is ignored; use {instead}"
            ));
        }
    }
    warnings
}

fn image_value(image: &Image) -> Value {
    match image {
        Image::Name(name) => string(name.as_str()),
        Image::Full { name, entrypoint } => {
            let mut m = Mapping::new();
            m.insert(string("name"), string(name.as_str()));
            if let Some(entrypoint) = entrypoint {
                m.insert(string("entrypoint"), strings(entrypoint));
            }
            Value::Mapping(m)
        }
    }
}

fn no_changes_job(stage: &str, defaults: Option<&GitLabJobConfig>) -> Value {
    let mut job = Mapping::new();
    job.insert(string("stage"), string(stage));
    job.insert(
        string("script"),
        strings(&[format!("echo \"{NO_CHANGES_MESSAGE}\"")]),
    );
    // Only what decides where the job can run: a runner must still pick it up.
    if let Some(defaults) = defaults {
        if let Some(image) = &defaults.image {
            job.insert(string("image"), image_value(image));
        }
        if let Some(tags) = defaults.tags.as_ref().filter(|t| !t.is_empty()) {
            job.insert(string("tags"), strings(tags));
        }
    }
    Value::Mapping(job)
}

/// `cache` settings, with placeholders checked once for the whole pipeline.
struct CacheSettings {
    enabled: bool,
    /// `None`: the module id with `/` replaced by `-` (TerraCi's key).
    key: Option<String>,
    paths: Vec<String>,
    policy: Option<Value>,
}

impl CacheSettings {
    fn new(gitlab: &GitLab, segments: &[String]) -> Result<Self, RenderError> {
        let cache = gitlab.cache.clone().unwrap_or_default();
        let enabled = cache.enabled.or(gitlab.cache_enabled).unwrap_or(true);
        let key = cache.key;
        let paths = if cache.paths.is_empty() {
            vec!["{module_path}/.terraform/".to_owned()]
        } else {
            cache.paths
        };
        if let Some(key) = &key {
            check_placeholders("extensions.gitlab.cache.key", key, segments)?;
        }
        for (i, path) in paths.iter().enumerate() {
            check_placeholders(
                &format!("extensions.gitlab.cache.paths[{i}]"),
                path,
                segments,
            )?;
        }
        Ok(CacheSettings {
            enabled,
            key,
            paths,
            policy: cache.policy.map(|p| to_value(&p)),
        })
    }

    fn value(&self, job: &Job) -> Option<Value> {
        if !self.enabled {
            return None;
        }
        let mut m = Mapping::new();
        let key = match &self.key {
            Some(template) => expand(template, job),
            None => job.module.replace('/', "-"),
        };
        m.insert(string("key"), string(key));
        let paths: Vec<String> = self.paths.iter().map(|p| expand(p, job)).collect();
        m.insert(string("paths"), strings(&paths));
        if let Some(policy) = &self.policy {
            m.insert(string("policy"), policy.clone());
        }
        Some(Value::Mapping(m))
    }
}

fn placeholders(template: &str) -> impl Iterator<Item = &str> {
    template
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}').map(|(name, _)| name))
}

fn check_placeholders(key: &str, template: &str, segments: &[String]) -> Result<(), RenderError> {
    for name in placeholders(template) {
        if name != "module_path" && !segments.iter().any(|s| s == name) {
            let valid: Vec<String> = ["module_path".to_owned()]
                .into_iter()
                .chain(segments.iter().cloned())
                .map(|s| format!("{{{s}}}"))
                .collect();
            return Err(RenderError::Config(format!(
                "{key}: unknown placeholder {{{name}}} in {template:?}; valid placeholders: {}",
                valid.join(", ")
            )));
        }
    }
    Ok(())
}

/// Replaces `{module_path}` and `{<segment>}` with the job's values.
fn expand(template: &str, job: &Job) -> String {
    let mut out = template.replace("{module_path}", &job.module);
    for (segment, value) in job.components.iter() {
        out = out.replace(&format!("{{{segment}}}"), value);
    }
    out
}

/// The job after `job_defaults` and matching `overwrites`: set keys replace, variables
/// merge key by key.
fn effective_config(gitlab: &GitLab, kind: JobKind) -> GitLabJobConfig {
    let mut out = gitlab.job_defaults.clone().unwrap_or_default();
    let wanted = match kind {
        JobKind::Plan => OverwriteType::Plan,
        JobKind::Apply => OverwriteType::Apply,
    };
    for overwrite in gitlab.overwrites.iter().filter(|o| o.job_type == wanted) {
        let layer = overwrite.job_config();
        macro_rules! replace {
            ($($field:ident),*) => {$(
                if layer.$field.is_some() {
                    out.$field = layer.$field.clone();
                }
            )*};
        }
        replace!(
            image,
            id_tokens,
            secrets,
            before_script,
            after_script,
            artifacts,
            tags,
            rules,
            when
        );
        out.variables.extend(layer.variables);
    }
    out
}

/// What every job of one kind shares: the effective user settings, and the keys after
/// `resource_group` (they depend on the kind only), written once as text.
struct KindSettings {
    user: GitLabJobConfig,
    tail: String,
}

impl KindSettings {
    fn new(gitlab: &GitLab, kind: JobKind) -> Self {
        let user = effective_config(gitlab, kind);
        let tail = write_entries_text(
            2,
            &user_keys(&user),
            &Style {
                plain_keys: &[],
                spaced_children: &[],
            },
        );
        KindSettings { user, tail }
    }
}

/// The job keys from `job_defaults` and `overwrites` alone, in output order.
fn user_keys(user: &GitLabJobConfig) -> Mapping {
    let mut m = Mapping::new();
    if let Some(image) = &user.image {
        m.insert(string("image"), image_value(image));
    }
    if let Some(tokens) = user.id_tokens.as_ref().filter(|t| !t.is_empty()) {
        m.insert(string("id_tokens"), to_value(tokens));
    }
    if let Some(secrets) = user.secrets.as_ref().filter(|s| !s.is_empty()) {
        m.insert(string("secrets"), to_value(secrets));
    }
    if let Some(lines) = user.before_script.as_ref().filter(|l| !l.is_empty()) {
        m.insert(string("before_script"), strings(lines));
    }
    if let Some(lines) = user.after_script.as_ref().filter(|l| !l.is_empty()) {
        m.insert(string("after_script"), strings(lines));
    }
    if let Some(tags) = user.tags.as_ref().filter(|t| !t.is_empty()) {
        m.insert(string("tags"), strings(tags));
    }
    match (user.rules.as_ref().filter(|r| !r.is_empty()), user.when) {
        (Some(rules), when) => {
            // GitLab rejects a job-level `when` next to `rules`; it belongs in each rule
            // that does not choose its own.
            let mut rules = rules.clone();
            if let Some(when) = when {
                for rule in rules.iter_mut().filter(|r| r.when.is_none()) {
                    rule.when = Some(when);
                }
            }
            m.insert(string("rules"), to_value(&rules));
        }
        (None, Some(when)) => {
            m.insert(string("when"), to_value(&when));
            if when == GitLabWhen::Manual {
                // A manual job is optional by default, which would let its dependents
                // run without it; an apply must block them.
                m.insert(string("allow_failure"), Value::Bool(false));
            }
        }
        (None, None) => {}
    }
    m
}

/// The job's own keys, `stage` to `resource_group`.
fn render_job(
    plan: &JobPlan,
    job: &Job,
    settings: &KindSettings,
    prefix: &str,
    cache: &CacheSettings,
    needs_limit: usize,
    warnings: &mut Vec<String>,
) -> Value {
    let user = &settings.user;
    let mut m = Mapping::new();
    m.insert(string("stage"), string(format!("{prefix}-{}", job.level)));

    if job.needs.len() > needs_limit {
        warnings.push(format!(
            "job `{}` needs {} jobs, over GitLab's limit of {needs_limit} \
             (extensions.gitlab.needs_limit); it waits for its stage instead",
            job.name,
            job.needs.len()
        ));
    } else if !job.needs.is_empty() {
        let needs = job
            .needs
            .iter()
            .map(|need| {
                let mut n = Mapping::new();
                n.insert(string("job"), string(&*need.job));
                n.insert(string("artifacts"), Value::Bool(need.artifacts));
                Value::Mapping(n)
            })
            .collect();
        m.insert(string("needs"), Value::Sequence(needs));
    }

    let mut script = vec![format!("cd {}", job.module)];
    script.extend(job_commands(plan, job));
    m.insert(string("script"), strings(&script));

    let mut variables = job_variables(plan, job);
    variables.extend(user.variables.iter().map(|(k, v)| (k.clone(), v.clone())));
    m.insert(string("variables"), string_map(&variables));

    if let Some(artifacts) = artifacts(job, user.artifacts.as_ref()) {
        m.insert(string("artifacts"), artifacts);
    }
    if let Some(cache) = cache.value(job) {
        m.insert(string("cache"), cache);
    }
    m.insert(string("resource_group"), string(&*job.module));
    Value::Mapping(m)
}

/// Plan jobs keep their plan file whatever the user's `artifacts` say.
fn artifacts(job: &Job, user: Option<&GitLabArtifacts>) -> Option<Value> {
    let plan_path = format!("{}/{PLAN_FILE}", job.module);
    match (job.kind, user) {
        (JobKind::Plan, None) => {
            let mut m = Mapping::new();
            m.insert(string("paths"), strings(&[plan_path]));
            m.insert(string("expire_in"), string("1 day"));
            Some(Value::Mapping(m))
        }
        (JobKind::Plan, Some(user)) => {
            let mut merged = user.clone();
            if !merged.paths.contains(&plan_path) {
                merged.paths.insert(0, plan_path);
            }
            if merged.expire_in.is_none() {
                merged.expire_in = Some("1 day".to_owned());
            }
            Some(to_value(&merged))
        }
        (JobKind::Apply, Some(user)) => Some(to_value(user)),
        (JobKind::Apply, None) => None,
    }
}
