//! GitLab CI renderer [spec 7.2].
//!
//! Input: a [`JobPlan`] and `extensions.gitlab`. Output: `.gitlab-ci.yml` text. Key order
//! is fixed: header, `workflow`, `variables`, `default`, `stages`, the hidden templates
//! `.terraci-plan` and `.terraci-apply` (what every job of the kind shares: shared
//! `variables`, `artifacts` settings, cache `policy`, then what `job_defaults` and
//! `overwrites` set), then the jobs in level order, each as `extends`, `stage`, `needs`,
//! `script`, `variables`, `artifacts`, `cache`, `resource_group`.

use std::sync::{Arc, Mutex, PoisonError};

use indexmap::IndexMap;
use rayon::prelude::*;
use serde_yaml::{Mapping, Value};

use super::yaml::{
    write_document, write_entries_text, write_str, write_str_items, write_str_key, write_str_with,
    Style,
};
use super::{
    default_image, job_commands, job_variables, needs_limit_warning, segment_variable, string,
    string_map, strings, to_value, Header, JobPiece, PipelineText, RenderError, Rendered,
    NO_CHANGES_JOB, NO_CHANGES_MESSAGE,
};
use terraci_db::config::{
    Config, GitLab, GitLabArtifacts, GitLabJobConfig, GitLabRule, GitLabWhen, Image, OverwriteType,
};
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::escape::sh_cd;
use terraci_engine::contrib::When;
use terraci_engine::ir::{ContributedJob, Job, JobKind, JobPlan};

/// GitLab's default limit of `needs` entries per job.
pub const DEFAULT_NEEDS_LIMIT: usize = 50;

pub(crate) const DEFAULT_STAGES_PREFIX: &str = "deploy";

/// GitLab's document and jobs have no key that is written plain against the quoting
/// rules, and no blank lines inside entries.
pub(crate) const STYLE: Style<'static> = Style {
    plain_keys: &[],
    spaced_children: &[],
};

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
    let (text, warnings) = render_gitlab_text(plan, config, header, texts, None)?;
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
    texts: Option<&JobTexts>,
) -> Result<(PipelineText, Vec<Diagnostic>), RenderError> {
    render_gitlab_text(plan, config, header, texts, None)
}

/// [`render_gitlab_parts`] taking the text of job `i` from `kept[i]` when it has one (a
/// child pipeline's jobs that are as they were in the whole pipeline). The kept jobs'
/// warnings are not repeated.
pub(crate) fn render_gitlab_keeping(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
    kept: Vec<Option<JobPiece>>,
) -> Result<PipelineText, RenderError> {
    render_gitlab_text(plan, config, header, None, Some(kept)).map(|(text, _)| text)
}

/// A contributed job's piece as a pipeline of `plan` holds it (after its blank line).
pub(crate) fn contributed_piece(job: &ContributedJob, gitlab: &GitLab, plan: &JobPlan) -> String {
    let prefix = gitlab
        .stages_prefix
        .as_deref()
        .unwrap_or(DEFAULT_STAGES_PREFIX);
    format!(
        "\n{}",
        contributed_job_text(job, gitlab, prefix, &plan.service_dir)
    )
}

fn render_gitlab_text(
    plan: &JobPlan,
    config: &Config,
    header: &Header,
    texts: Option<&JobTexts>,
    kept: Option<Vec<Option<JobPiece>>>,
) -> Result<(PipelineText, Vec<Diagnostic>), RenderError> {
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

    if gitlab.image.is_none() && gitlab.terraform_image.is_some() {
        warnings.push(Diagnostic::warning(
            Code::ConfigWarning,
            "extensions.gitlab.terraform_image is deprecated; use extensions.gitlab.image",
        ));
    }
    let image = pipeline_image(plan, &gitlab);
    warnings.extend(images_without_terraci(plan, &gitlab, &image));
    doc.insert(string("default"), default_entry(&image));

    let stage_count = plan.levels.max(1);
    let stages: Vec<String> = (0..stage_count).map(|i| format!("{prefix}-{i}")).collect();
    doc.insert(string("stages"), strings(&stages));

    if plan.is_empty() {
        doc.insert(
            string(NO_CHANGES_JOB),
            no_changes_job(&format!("{prefix}-0"), gitlab.job_defaults.as_ref()),
        );
    }
    let mut text = PipelineText::from(write_document(&header.comment_lines(), &doc, &STYLE));
    if !plan.is_empty() {
        // Jobs are top-level entries like the ones above, each after a blank line; they
        // are written one by one (in parallel) straight to text rather than as one tree.
        let writer = JobWriter::new(plan, &gitlab, &prefix)?;
        text.head.push_str(&writer.templates());
        // Each job's text after its blank line, rendered into the string it is kept in:
        // not copied into one string (that held the pipeline twice at once, 20 MB more
        // at 10,000 modules), nor into a piece of its own.
        let render =
            |job: &Job, warnings: &mut Vec<Diagnostic>| writer.job_after("\n", job, warnings);
        let job_warnings = match (texts, kept) {
            (None, Some(kept)) => {
                text.jobs = plan
                    .jobs
                    .par_iter()
                    .zip(kept)
                    .with_min_len(64)
                    .map(|(job, kept)| match kept {
                        Some(piece) => piece,
                        None => JobPiece::Owned(render(job, &mut Vec::new())),
                    })
                    .collect();
                Vec::new()
            }
            (None, None) => {
                let (jobs, job_warnings) = super::render_jobs(&plan.jobs, render);
                text.jobs = jobs.into_iter().map(JobPiece::Owned).collect();
                job_warnings
            }
            (Some(texts), _) => texts.write(
                &plan.jobs,
                JobTextKey::new(&gitlab, plan),
                render,
                &mut text.jobs,
            ),
        };
        warnings.extend(job_warnings);
        let limit = gitlab.needs_limit.unwrap_or(DEFAULT_NEEDS_LIMIT);
        for job in &plan.contributed {
            // In the last stage, waiting for the stage is waiting for every job (and
            // GitLab hands it every earlier job's artifacts): nothing to warn about.
            let last = job.level + 1 >= plan.levels;
            if job.needs.len() > limit && !last {
                warnings.push(needs_limit_warning(&job.name, None, job.needs.len(), limit));
            }
            text.jobs.push(contributed_piece(job, &gitlab, plan).into());
        }
    }
    warnings.extend(super::unknown_overwrite_types(
        "extensions.gitlab.overwrites",
        gitlab.overwrites.iter().map(|o| &o.job_type),
        plan,
    ));
    Ok((text, warnings))
}

/// The pipeline's `default.image`.
pub(crate) fn pipeline_image(plan: &JobPlan, gitlab: &GitLab) -> Image {
    match (&gitlab.image, &gitlab.terraform_image) {
        (Some(image), _) | (None, Some(image)) => image.clone(),
        // The official images' entrypoint is the binary itself, which GitLab would run
        // the job script through; `[""]` gives the shell back.
        (None, None) => Image::Full {
            name: default_image(plan.binary, gitlab.terraform_version.as_deref()),
            entrypoint: Some(vec![String::new()]),
        },
    }
}

/// The pipeline's `default:` entry.
pub(crate) fn default_entry(image: &Image) -> Value {
    let mut default = Mapping::new();
    default.insert(string("image"), image_value(image));
    Value::Mapping(default)
}

/// Replaces each `!reference [job, key...]` entry of the `script`, `before_script` and
/// `after_script` of `job` with the lines it names in `doc` (the pipeline's top-level
/// entries), as GitLab does: what a JSON pipeline, which has no tags, must hold instead.
/// An error names a reference that names nothing.
pub fn resolve_references(job: &mut Mapping, doc: &Mapping) -> Result<(), String> {
    for key in ["script", "before_script", "after_script"] {
        let Some(Value::Sequence(lines)) = job.get_mut(key) else {
            continue;
        };
        let mut resolved = Vec::with_capacity(lines.len());
        for line in lines.drain(..) {
            let Value::Tagged(tagged) = &line else {
                resolved.push(line);
                continue;
            };
            if tagged.tag != "!reference" {
                resolved.push(line);
                continue;
            }
            let mut path = tagged.value.as_sequence().into_iter().flatten();
            let mut target = path.next().and_then(|first| doc.get(first));
            for step in path {
                target = target.and_then(|t| t.get(step.as_str()?));
            }
            match target {
                Some(Value::Sequence(named)) => resolved.extend(named.iter().cloned()),
                Some(other @ Value::String(_)) => resolved.push(other.clone()),
                _ => return Err(format!("`!reference {:?}` names no lines", tagged.value)),
            }
        }
        *lines = resolved;
    }
    Ok(())
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
                plan.plan_results,
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
    warnings: Vec<Diagnostic>,
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
        texts: &mut Vec<JobPiece>,
    ) -> Vec<Diagnostic>
    where
        F: Fn(&Job, &mut Vec<Diagnostic>) -> String + Sync,
    {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.key.as_ref() != Some(&key) {
            state.jobs.clear();
            state.key = Some(key);
        }
        let fresh = |job: &Job| {
            let mut warnings = Vec::new();
            let text = render(job, &mut warnings);
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
            texts.push(JobPiece::Shared(entry.text.clone()));
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

/// Whether `image` is an official terraform or OpenTofu image: those have no terraci, so
/// a job that runs terraci in one fails (exit 127) or, for the summary, posts nothing.
fn lacks_terraci(image: &Image) -> bool {
    let name = image.name();
    let name = name.strip_prefix("docker.io/").unwrap_or(name);
    ["hashicorp/terraform", "ghcr.io/opentofu/opentofu"]
        .into_iter()
        .any(|official| {
            name == official
                || name.starts_with(&format!("{official}:"))
                || name.starts_with(&format!("{official}@"))
        })
}

/// One `image-without-terraci` warning per kind of job that runs terraci (the policy
/// gate of apply jobs, the summary and policy jobs) in an official terraform/OpenTofu
/// image, naming the key that sets its image: a pipeline that fails on its first apply
/// (or never comments) is said at `generate`, not found on the default branch.
fn images_without_terraci(plan: &JobPlan, gitlab: &GitLab, default: &Image) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    // `what`: "the apply jobs run terraci (...), but their" / "the `x` job runs terraci,
    // but its".
    let warn = |out: &mut Vec<Diagnostic>, what: &str, image: &Image, key: &str| {
        out.push(Diagnostic::warning(
            Code::ImageWithoutTerraci,
            format!(
                "{what} image `{}` has no terraci: set {key} to an image with terraci and {} (the Dockerfile in terraci's repository builds one)",
                image.name(),
                plan.binary.command()
            ),
        ));
    };
    if !plan.apply_checks.is_empty() {
        let image = effective_config(gitlab, JobKind::Apply)
            .image
            .unwrap_or_else(|| default.clone());
        if lacks_terraci(&image) {
            warn(
                &mut out,
                "the apply jobs run terraci for their policy checks, but their",
                &image,
                "extensions.gitlab.image (or image in job_defaults or an overwrites entry of type apply)",
            );
        }
    }
    for job in &plan.contributed {
        let image = contributed_config(gitlab, job)
            .image
            .unwrap_or_else(|| default.clone());
        if !lacks_terraci(&image) {
            continue;
        }
        let key = if &*job.name == terraci_engine::contrib::SUMMARY_JOB {
            "extensions.gitlab.mr.summary_job.image".to_owned()
        } else {
            format!(
                "image in an extensions.gitlab.overwrites entry of type {}",
                job.name
            )
        };
        let what = format!("the `{}` job runs terraci, but its", job.name);
        warn(&mut out, &what, &image, &key);
    }
    out
}

fn ignored_keys(gitlab: &GitLab) -> Vec<Diagnostic> {
    let mut warnings = Vec::new();
    if gitlab.plan_enabled == Some(false) {
        warnings.push(Diagnostic::warning(
            Code::ConfigWarning,
            "extensions.gitlab.plan_enabled: false has no effect: terraci always generates \
             plan jobs, and each apply applies its saved plan",
        ));
    }
    warnings
}

/// The official terraform and OpenTofu images have the binary as their entrypoint, which
/// GitLab's docker executor would run the job script through; given by name alone, they
/// get `entrypoint: [""]` (the shell), as every job of theirs needs.
fn image_value(image: &Image) -> Value {
    match image {
        Image::Name(name) if is_official_image(name) => image_value(&Image::Full {
            name: name.clone(),
            entrypoint: Some(vec![String::new()]),
        }),
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

fn is_official_image(name: &str) -> bool {
    let repository = name.split([':', '@']).next().unwrap_or(name);
    matches!(
        repository,
        "hashicorp/terraform"
            | "docker.io/hashicorp/terraform"
            | "ghcr.io/opentofu/opentofu"
            | "opentofu/opentofu"
    )
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
    key: Option<Template>,
    paths: Vec<Template>,
    /// The `policy` entry as text, or nothing; written in the kinds' templates.
    policy: String,
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
        let mut policy = Mapping::new();
        if let Some(p) = cache.policy {
            policy.insert(string("policy"), to_value(&p));
        }
        Ok(CacheSettings {
            enabled,
            key: key.map(Template::new),
            paths: paths.into_iter().map(Template::new).collect(),
            policy: write_entries_text(4, &policy, &STYLE),
        })
    }

    /// Appends the job's `cache` entry, if caching is on, but its `policy` (in the
    /// template).
    fn write(&self, out: &mut String, job: &Job) {
        if !self.enabled {
            return;
        }
        out.push_str("  cache:\n    key:");
        match &self.key {
            Some(template) => template.write(out, 4, job),
            None => write_str_with(out, 4, |out| {
                for (i, part) in job.module.split('/').enumerate() {
                    if i > 0 {
                        out.push('-');
                    }
                    out.push_str(part);
                }
            }),
        }
        out.push_str("    paths:\n");
        for path in &self.paths {
            out.push_str("      -");
            path.write(out, 6, job);
        }
    }
}

/// A cache key or path, split once at its `{module_path}` and `{<segment>}` placeholders.
struct Template {
    text: String,
    /// `None` when a brace of the text stands outside a `{name}` placeholder.
    pieces: Option<Vec<Piece>>,
}

enum Piece {
    Text(String),
    ModulePath,
    Segment(String),
}

impl Template {
    fn new(text: String) -> Template {
        let pieces = Self::split(&text);
        Template { text, pieces }
    }

    fn split(text: &str) -> Option<Vec<Piece>> {
        let mut pieces = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            let (before, after) = (&rest[..open], &rest[open + 1..]);
            let close = after.find('}')?;
            let name = &after[..close];
            if before.contains('}') || name.contains('{') {
                return None;
            }
            if !before.is_empty() {
                pieces.push(Piece::Text(before.to_owned()));
            }
            pieces.push(match name {
                "module_path" => Piece::ModulePath,
                _ => Piece::Segment(name.to_owned()),
            });
            rest = &after[close + 1..];
        }
        if rest.contains('}') {
            return None;
        }
        if !rest.is_empty() {
            pieces.push(Piece::Text(rest.to_owned()));
        }
        Some(pieces)
    }

    /// Writes the template expanded for `job` as the value after a key or dash at
    /// `indent`.
    ///
    /// Filling the placeholders in one pass gives what [`expand`] gives (each placeholder
    /// replaced in turn) as long as every brace belongs to a placeholder: a brace in the
    /// template outside one, or in the job's values, could make a placeholder out of
    /// the text around it, so those are expanded in turn.
    fn write(&self, out: &mut String, indent: usize, job: &Job) {
        let has_brace = |s: &str| s.contains(['{', '}']);
        match &self.pieces {
            Some(pieces)
                if !has_brace(&job.module) && !job.components.values().any(|v| has_brace(v)) =>
            {
                write_str_with(out, indent, |out| {
                    for piece in pieces {
                        match piece {
                            Piece::Text(text) => out.push_str(text),
                            Piece::ModulePath => out.push_str(&job.module),
                            Piece::Segment(name) => match job.components.get(name) {
                                Some(value) => out.push_str(value),
                                None => {
                                    out.push('{');
                                    out.push_str(name);
                                    out.push('}');
                                }
                            },
                        }
                    }
                });
            }
            _ => write_str(out, indent, &expand(&self.text, job)),
        }
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

/// Replaces `{module_path}` and `{<segment>}` with the job's values, one placeholder
/// after the other.
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
    apply_overwrites(&mut out, gitlab, &wanted);
    // As TerraCi: an apply waits for a click unless `auto_approve: true`.
    if kind == JobKind::Apply && out.when.is_none() && gitlab.auto_approve != Some(true) {
        out.when = Some(GitLabWhen::Manual);
    }
    if kind == JobKind::Apply && out.rules.is_none() {
        out.rules = Some(default_apply_rules());
    }
    out
}

/// Layers the `overwrites` of type `wanted` over `out`, in order: a key an entry sets
/// replaces, `variables` merge key by key.
fn apply_overwrites(out: &mut GitLabJobConfig, gitlab: &GitLab, wanted: &OverwriteType) {
    for overwrite in gitlab.overwrites.iter().filter(|o| &o.job_type == wanted) {
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
}

/// A contributed job's settings: `job_defaults` but `rules`, `when` and `artifacts`
/// (those say when plans and applies run), then the summary job's own keys
/// (`mr.summary_job`), then the `overwrites` of its name, every key of them.
fn contributed_config(gitlab: &GitLab, job: &ContributedJob) -> GitLabJobConfig {
    let mut out = gitlab.job_defaults.clone().unwrap_or_default();
    out.rules = None;
    out.when = None;
    out.artifacts = None;
    if let Some(summary) = summary_job_settings(gitlab, job) {
        if let Some(image) = summary.0 {
            out.image = Some(image);
        }
        if let Some(tags) = summary.1 {
            out.tags = Some(tags);
        }
    }
    let wanted = OverwriteType::Job(job.name.to_string());
    apply_overwrites(&mut out, gitlab, &wanted);
    if out.rules.is_none() && job.spec.when == When::ReviewAlways {
        out.rules = Some(vec![GitLabRule {
            if_: Some("$CI_MERGE_REQUEST_IID".into()),
            when: Some(GitLabWhen::Always),
            ..GitLabRule::default()
        }]);
    }
    out
}

/// `extensions.gitlab.mr.summary_job` (image, tags) for the summary job.
fn summary_job_settings(
    gitlab: &GitLab,
    job: &ContributedJob,
) -> Option<(Option<Image>, Option<Vec<String>>)> {
    if &*job.name != terraci_engine::contrib::SUMMARY_JOB {
        return None;
    }
    let settings = gitlab.mr.as_ref()?.summary_job.as_ref()?;
    Some((
        settings.image.clone(),
        (!settings.tags.is_empty()).then(|| settings.tags.clone()),
    ))
}

/// A contributed job's text: `stage` of its level, `needs` (each with its artifacts and
/// `optional`, so a plan job a rule leaves out is not waited for; over the limit there
/// are none and the job waits for its stage, which holds every job it reads), the
/// script from the repository root, `variables`, `artifacts` (its report, kept also when
/// it fails), `cache` (terraci's own, under `terraci_cache`), then the user's keys.
fn contributed_job_text(
    job: &ContributedJob,
    gitlab: &GitLab,
    prefix: &str,
    service_dir: &str,
) -> String {
    let user = contributed_config(gitlab, job);
    let limit = gitlab.needs_limit.unwrap_or(DEFAULT_NEEDS_LIMIT);
    let mut m = Mapping::new();
    m.insert(string("stage"), string(format!("{prefix}-{}", job.level)));
    if !job.needs.is_empty() && job.needs.len() <= limit {
        let needs = job
            .needs
            .iter()
            .map(|need| {
                let mut n = Mapping::new();
                n.insert(string("job"), string(&*need.job));
                n.insert(string("artifacts"), Value::Bool(need.artifacts));
                n.insert(string("optional"), Value::Bool(true));
                Value::Mapping(n)
            })
            .collect();
        m.insert(string("needs"), Value::Sequence(needs));
    }
    let hint = if &*job.name == terraci_engine::contrib::SUMMARY_JOB {
        format!(
            "set extensions.gitlab.mr.summary_job.image (or image in an overwrites entry of type {}) to an image that has it",
            job.name
        )
    } else {
        format!(
            "set image in an extensions.gitlab.overwrites entry of type {} to an image that has it",
            job.name
        )
    };
    m.insert(
        string("script"),
        strings(&super::contributed_commands(job, &hint, false)),
    );
    if !user.variables.is_empty() {
        m.insert(string("variables"), string_map(&user.variables));
    }
    let report = job.spec.report_path(service_dir);
    let artifacts = match (report, &user.artifacts) {
        (Some(report), user) => {
            let mut a = user.clone().unwrap_or_default();
            if !a.paths.contains(&report) {
                a.paths.insert(0, report);
            }
            a.expire_in.get_or_insert_with(|| "1 day".to_owned());
            a.when.get_or_insert_with(|| "always".to_owned());
            Some(a)
        }
        (None, user) => user.clone(),
    };
    if let Some(artifacts) = artifacts {
        m.insert(string("artifacts"), to_value(&artifacts));
    }
    if gitlab.terraci_cache && super::runs_terraci(job) {
        m.insert(string("cache"), terraci_cache());
    }
    let mut user_only = user;
    user_only.artifacts = None;
    m.extend(user_keys(&user_only));
    // A review job without its program (no image was chosen for it) is a warning in the
    // pipeline, not a failure: the comment is an aid, not a gate. Any other exit fails.
    if job.spec.when == When::ReviewAlways && !m.contains_key("allow_failure") {
        let mut allow = Mapping::new();
        allow.insert(
            string("exit_codes"),
            Value::Sequence(vec![Value::Number(super::MISSING_PROGRAM.into())]),
        );
        m.insert(string("allow_failure"), Value::Mapping(allow));
    }
    let mut doc = Mapping::new();
    doc.insert(string(&*job.name), Value::Mapping(m));
    write_entries_text(0, &doc, &STYLE)
}

/// The key of terraci's cache (`terraci_cache`): one per base branch, the merge
/// request's target or else the pipeline's branch (GitLab never sets both).
const TERRACI_CACHE_KEY: &str = "terraci-$CI_MERGE_REQUEST_TARGET_BRANCH_NAME$CI_COMMIT_BRANCH";

/// The `cache` entry of a job that runs terraci under `terraci_cache`: read, never
/// written. The job that runs `terraci generate` writes it on the default branch
/// (docs/recipes.md), so no merge request pipeline of the generated jobs writes what the
/// default branch reads.
fn terraci_cache() -> Value {
    let mut cache = Mapping::new();
    cache.insert(string("key"), string(TERRACI_CACHE_KEY));
    cache.insert(string("paths"), strings(&[super::TERRACI_CACHE_PATH]));
    cache.insert(string("policy"), string("pull"));
    Value::Mapping(cache)
}

/// Where apply jobs run unless `job_defaults`/`overwrites` give `rules` (`rules: []` for
/// none): never in merge-request pipelines, on the default branch only. Plans run in
/// every pipeline; their needs on applies are `optional`, so a pipeline without the
/// applies still plans every module in order.
pub(super) fn default_apply_rules() -> Vec<GitLabRule> {
    vec![
        GitLabRule {
            if_: Some("$CI_PIPELINE_SOURCE == \"merge_request_event\"".into()),
            when: Some(GitLabWhen::Never),
            ..GitLabRule::default()
        },
        GitLabRule {
            if_: Some("$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH".into()),
            ..GitLabRule::default()
        },
    ]
}

/// What every job of one kind shares, written once as text where it can be.
struct KindSettings {
    /// The effective user settings.
    user: GitLabJobConfig,
    /// The script entry after `cd <module>`: the `!reference` to the template's script,
    /// which GitLab replaces with its lines.
    script_reference: String,
    /// Whether the shared variables are written after the job's own (`TF_MODULE_PATH`,
    /// `TF_<SEGMENT>`) as they are: no two keys of the job's own can be the same, and
    /// none is a shared key. Else each job's variables are merged one by one.
    separate_variables: bool,
    artifacts: Artifacts,
    /// The hidden job every job of the kind `extends`.
    template: HiddenJob,
}

/// A hidden job holding what every job of a kind shares: the script after `cd`, the
/// shared `variables`, the `artifacts` settings, the cache `policy` and the user's keys
/// (`image`, `rules`, `when`...). GitLab measures the pipeline's size before it resolves
/// `extends` and `!reference`, so each job's copy of these counted against
/// `max_yaml_size_bytes`; merged, each job is what it was with them written out (GitLab
/// merges hashes key by key, the job's own keys winning, takes arrays and scalars from
/// the job when it has them, and puts a `!reference`'s lines in its place in `script`).
struct HiddenJob {
    name: &'static str,
    /// The hidden job's text after its blank line.
    text: String,
}

const PLAN_TEMPLATE: &str = ".terraci-plan";
const APPLY_TEMPLATE: &str = ".terraci-apply";

impl KindSettings {
    /// `own_keys`: every key a job of the plan can set itself, `None` if two of them can
    /// be the same; `cache_policy`: the `cache` entries every job shares, as text.
    fn new(
        gitlab: &GitLab,
        plan: &JobPlan,
        kind: JobKind,
        own_keys: Option<&[String]>,
        cache_policy: &str,
    ) -> Self {
        let user = effective_config(gitlab, kind);
        let mut commands = String::new();
        write_str_items(&mut commands, 4, &job_commands(plan, kind, "CI_COMMIT_SHA"));
        let mut shared = plan.env.clone();
        shared.extend(user.variables.iter().map(|(k, v)| (k.clone(), v.clone())));
        let separate_variables =
            own_keys.is_some_and(|keys| !keys.iter().any(|k| shared.contains_key(k)));
        // `execution.env` then the user's `variables` (a later value replaces an earlier
        // one in place), as the entries of a `variables`.
        let mut shared_variables = String::new();
        write_variable_entries(&mut shared_variables, &shared);
        let files = super::plan_files(plan);
        let artifacts = match (kind, &user.artifacts) {
            (JobKind::Plan, None) => Artifacts::PlanFile(files),
            (JobKind::Plan, Some(user)) => Artifacts::WithPlanFile(Box::new(user.clone()), files),
            (JobKind::Apply, user) => {
                let mut m = Mapping::new();
                if let Some(user) = user {
                    m.insert(string("artifacts"), to_value(user));
                }
                Artifacts::Fixed(write_entries_text(2, &m, &STYLE))
            }
        };
        let tail = write_entries_text(2, &user_keys(&user), &STYLE);
        let name = match kind {
            JobKind::Plan => PLAN_TEMPLATE,
            JobKind::Apply => APPLY_TEMPLATE,
        };
        let mut body = String::from("  script:\n");
        body.push_str(&commands);
        if separate_variables && !shared_variables.is_empty() {
            body.push_str("  variables:\n");
            body.push_str(&shared_variables);
        }
        match &artifacts {
            Artifacts::PlanFile(files) => {
                body.push_str("  artifacts:\n    expire_in: 1 day\n");
                if files.len() > 1 {
                    body.push_str("    when: always\n");
                }
            }
            // Each job's `artifacts` merge the user's with its own files in order.
            Artifacts::WithPlanFile(..) => {}
            Artifacts::Fixed(text) => body.push_str(text),
        }
        if !cache_policy.is_empty() {
            body.push_str("  cache:\n");
            body.push_str(cache_policy);
        }
        body.push_str(&tail);
        let mut text = String::new();
        write_str_key(&mut text, 0, name);
        text.push('\n');
        text.push_str(&body);
        KindSettings {
            user,
            script_reference: format!("    - !reference [{name}, script]\n"),
            separate_variables,
            artifacts,
            template: HiddenJob { name, text },
        }
    }
}

/// A kind's `artifacts`: plan jobs keep their plan file (and, when plan results are
/// consumed, the plan as data, also after a failed plan) whatever the user's say.
enum Artifacts {
    /// Plan jobs without user `artifacts`: the plan files, for a day.
    PlanFile(&'static [&'static str]),
    /// Plan jobs with user `artifacts`: the plan files are added to them job by job.
    WithPlanFile(Box<GitLabArtifacts>, &'static [&'static str]),
    /// Apply jobs: the user's `artifacts` as text (nothing without), the same for all.
    Fixed(String),
}

impl Artifacts {
    /// Writes the job's own `artifacts` (the rest is in its kind's template).
    fn write(&self, out: &mut String, job: &Job) {
        match self {
            Artifacts::PlanFile(files) => {
                out.push_str("  artifacts:\n    paths:\n");
                for file in *files {
                    out.push_str("      -");
                    write_str_with(out, 6, |out| {
                        out.push_str(&glob_literal(&job.module));
                        out.push('/');
                        out.push_str(file);
                    });
                }
            }
            Artifacts::WithPlanFile(user, files) => {
                let mut merged = (**user).clone();
                with_plan_files(&mut merged, &job.module, files);
                let mut m = Mapping::new();
                m.insert(string("artifacts"), to_value(&merged));
                out.push_str(&write_entries_text(2, &m, &STYLE));
            }
            Artifacts::Fixed(_) => {}
        }
    }
}

/// `module` as a literal in GitLab Runner's artifact paths, which it matches as doublestar
/// globs (`*`, `?`, `[`, `{` are patterns): each of those and `\` get a `\` before them.
/// Unescaped, a module `a*b` took `aXb/plan.json` of its checkout (which a merge request
/// can commit) into its plan job's artifact, and a review job needing both could get it
/// in place of `aXb`'s own plan.
fn glob_literal(module: &str) -> std::borrow::Cow<'_, str> {
    if !module.contains(['\\', '*', '?', '[', '{']) {
        return module.into();
    }
    let mut out = String::with_capacity(module.len() + 4);
    for c in module.chars() {
        if matches!(c, '\\' | '*' | '?' | '[' | '{') {
            out.push('\\');
        }
        out.push(c);
    }
    out.into()
}

/// `artifacts` of a plan job: the user's, with the plan files first, a day's expiry and
/// (plan results kept) `when: always` unless the user chose them.
fn with_plan_files(artifacts: &mut GitLabArtifacts, module: &str, files: &[&str]) {
    let module = glob_literal(module);
    for (i, file) in files.iter().enumerate() {
        let path = format!("{module}/{file}");
        if !artifacts.paths.contains(&path) {
            artifacts.paths.insert(i.min(artifacts.paths.len()), path);
        }
    }
    if artifacts.expire_in.is_none() {
        artifacts.expire_in = Some("1 day".to_owned());
    }
    if files.len() > 1 && artifacts.when.is_none() {
        artifacts.when = Some("always".to_owned());
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

/// Writes each job's text straight into a string, from what the pipeline's jobs share
/// written once: the `stage` entry of each level, each kind's settings, the cache
/// templates, the kinds' hidden template jobs. The text is what [`write_document`] writes
/// for the job's own keys as a `Value` tree: `extends`, then `stage` to `resource_group`
/// without what its template holds. The fixed keys (`script`, `needs`, ...) are plain
/// words and written as they are; every value goes through the YAML writer's quoting.
struct JobWriter<'a> {
    plan: &'a JobPlan,
    /// The `stage` entry of each level up to the highest job's.
    stages: Vec<String>,
    needs_limit: usize,
    cache: CacheSettings,
    /// Segment (of the pattern, and `submodule`) -> its `TF_<SEGMENT>` key as text.
    segment_keys: Vec<(String, String)>,
    /// Plan, apply.
    kinds: [KindSettings; 2],
}

impl<'a> JobWriter<'a> {
    fn new(plan: &'a JobPlan, gitlab: &GitLab, prefix: &str) -> Result<Self, RenderError> {
        let cache = CacheSettings::new(gitlab, &plan.segments)?;
        let top = plan.jobs.iter().map(|j| j.level).max().unwrap_or(0);
        let stages = (0..=top)
            .map(|level| {
                let mut entry = String::new();
                write_str_key(&mut entry, 2, "stage");
                write_str(&mut entry, 2, &format!("{prefix}-{level}"));
                entry
            })
            .collect();
        let mut segments: Vec<&str> = plan.segments.iter().map(String::as_str).collect();
        if !segments.contains(&"submodule") {
            segments.push("submodule");
        }
        let mut own_keys = vec!["TF_MODULE_PATH".to_owned()];
        let mut segment_keys = Vec::new();
        for segment in segments {
            let name = segment_variable(segment);
            let mut key = String::new();
            write_str_key(&mut key, 4, &name);
            segment_keys.push((segment.to_owned(), key));
            own_keys.push(name);
        }
        let distinct = own_keys
            .iter()
            .enumerate()
            .all(|(i, k)| !own_keys[..i].contains(k));
        let own_keys = distinct.then_some(own_keys.as_slice());
        Ok(JobWriter {
            plan,
            stages,
            needs_limit: gitlab.needs_limit.unwrap_or(DEFAULT_NEEDS_LIMIT),
            segment_keys,
            kinds: [JobKind::Plan, JobKind::Apply].map(|kind| {
                let policy = if cache.enabled { &cache.policy[..] } else { "" };
                KindSettings::new(gitlab, plan, kind, own_keys, policy)
            }),
            cache,
        })
    }

    /// The hidden template jobs, each after a blank line: the plan jobs', and the apply
    /// jobs' when there are applies.
    fn templates(&self) -> String {
        let applies = self.plan.jobs.iter().any(|j| j.kind == JobKind::Apply);
        let mut out = String::new();
        for (i, kind) in self.kinds.iter().enumerate() {
            if i == 0 || applies {
                out.push('\n');
                out.push_str(&kind.template.text);
            }
        }
        out
    }

    /// The job's text: its name, then its keys.
    #[cfg(test)]
    fn job(&self, job: &Job, warnings: &mut Vec<Diagnostic>) -> String {
        self.job_after("", job, warnings)
    }

    /// The job's text after `before` (a piece's blank line, or nothing), in a string made
    /// large enough at once.
    fn job_after(&self, before: &str, job: &Job, warnings: &mut Vec<Diagnostic>) -> String {
        let kind = &self.kinds[usize::from(job.kind == JobKind::Apply)];
        let needs: usize = job.needs.iter().map(|n| n.job.len() + 40).sum();
        let mut out = String::with_capacity(before.len() + 256 + 8 * job.module.len() + needs);
        out.push_str(before);
        write_str_key(&mut out, 0, &job.name);
        out.push('\n');
        out.push_str("  extends:");
        write_str(&mut out, 2, kind.template.name);
        out.push_str(&self.stages[job.level]);
        self.write_needs(&mut out, job, warnings);
        out.push_str("  script:\n    -");
        write_str_with(&mut out, 4, |out| {
            out.push_str(&sh_cd(&job.module));
        });
        out.push_str(&kind.script_reference);
        self.write_variables(&mut out, job, kind);
        kind.artifacts.write(&mut out, job);
        self.cache.write(&mut out, job);
        out.push_str("  resource_group:");
        write_str(&mut out, 2, &job.module);
        out
    }

    /// `needs`, unless the job has none or more than the limit (a warning then: the job
    /// waits for its stage instead).
    fn write_needs(&self, out: &mut String, job: &Job, warnings: &mut Vec<Diagnostic>) {
        if job.needs.len() > self.needs_limit {
            warnings.push(needs_limit_warning(
                &job.name,
                Some(&*job.module),
                job.needs.len(),
                self.needs_limit,
            ));
        } else if !job.needs.is_empty() {
            out.push_str("  needs:\n");
            for need in &job.needs {
                out.push_str("    - job:");
                write_str(out, 6, &need.job);
                // The plan an apply downloads is always there; an apply a job waits for
                // is not in a merge-request pipeline (see `default_apply_rules`).
                out.push_str(if need.artifacts {
                    "      artifacts: true\n"
                } else {
                    "      artifacts: false\n      optional: true\n"
                });
            }
        }
    }

    /// `variables`: `TF_MODULE_PATH`, `TF_<SEGMENT>` per component, `execution.env`,
    /// then the user's, a later value replacing an earlier one in place.
    fn write_variables(&self, out: &mut String, job: &Job, kind: &KindSettings) {
        out.push_str("  variables:\n");
        if kind.separate_variables {
            let start = out.len();
            out.push_str("    TF_MODULE_PATH:");
            write_str(out, 4, &literal(&job.module));
            let mut own = true;
            for (segment, value) in job.components.iter() {
                match self.segment_keys.iter().find(|(s, _)| s == segment) {
                    Some((_, key)) => out.push_str(key),
                    None => {
                        own = false;
                        break;
                    }
                }
                write_str(out, 4, &literal(value));
            }
            if own {
                // The shared ones are in the kind's template.
                return;
            }
            // A component outside the pattern: its key was not checked.
            out.truncate(start);
        }
        let mut variables = gitlab_job_variables(self.plan, job);
        variables.extend(
            kind.user
                .variables
                .iter()
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        write_variable_entries(out, &variables);
    }
}

/// A variable value GitLab takes as it is: GitLab expands `$NAME` in `variables`, so a
/// module directory named `$CI_JOB_TOKEN` would get the token as its path; `$$` is
/// GitLab's literal `$`.
fn literal(value: &str) -> std::borrow::Cow<'_, str> {
    if value.contains('$') {
        value.replace('$', "$$").into()
    } else {
        value.into()
    }
}

/// [`job_variables`] with the values that come from the module's path made
/// [`literal`]; `execution.env` values are the user's, expanded as written.
fn gitlab_job_variables(plan: &JobPlan, job: &Job) -> IndexMap<String, String> {
    let mut vars = job_variables(plan, job);
    vars.insert(
        "TF_MODULE_PATH".to_owned(),
        literal(&job.module).into_owned(),
    );
    for (segment, value) in job.components.iter() {
        vars.insert(segment_variable(segment), literal(value).into_owned());
    }
    for (k, v) in &plan.env {
        vars.insert(k.clone(), v.clone());
    }
    vars
}

/// Appends `variables` as the entries of a job's `variables`.
fn write_variable_entries(out: &mut String, variables: &IndexMap<String, String>) {
    for (key, value) in variables {
        write_str_key(out, 4, key);
        write_str(out, 4, value);
    }
}

#[cfg(test)]
mod tests {
    use camino::Utf8Path;

    use super::*;
    use terraci_db::config::{load_config, Binary};
    use terraci_db::system::MemorySystem;
    use terraci_engine::ir::Need;

    /// The job as the generic writer wrote it before the templates: its keys built as a
    /// `Value` tree, then the kind's user keys. [`JobWriter::job`] merged with its
    /// template ([`merged_job`]) must be this job.
    fn tree_job_text(
        plan: &JobPlan,
        gitlab: &GitLab,
        prefix: &str,
        job: &Job,
        warnings: &mut Vec<Diagnostic>,
    ) -> String {
        let user = effective_config(gitlab, job.kind);
        let limit = gitlab.needs_limit.unwrap_or(DEFAULT_NEEDS_LIMIT);
        let mut m = Mapping::new();
        m.insert(string("stage"), string(format!("{prefix}-{}", job.level)));
        if job.needs.len() > limit {
            warnings.push(needs_limit_warning(
                &job.name,
                Some(&*job.module),
                job.needs.len(),
                limit,
            ));
        } else if !job.needs.is_empty() {
            let needs = job
                .needs
                .iter()
                .map(|need| {
                    let mut n = Mapping::new();
                    n.insert(string("job"), string(&*need.job));
                    n.insert(string("artifacts"), Value::Bool(need.artifacts));
                    if !need.artifacts {
                        n.insert(string("optional"), Value::Bool(true));
                    }
                    Value::Mapping(n)
                })
                .collect();
            m.insert(string("needs"), Value::Sequence(needs));
        }
        let mut script = vec![sh_cd(&job.module)];
        script.extend(job_commands(plan, job.kind, "CI_COMMIT_SHA"));
        m.insert(string("script"), strings(&script));
        let mut variables = gitlab_job_variables(plan, job);
        variables.extend(user.variables.clone());
        m.insert(string("variables"), string_map(&variables));

        let files = crate::plan_files(plan);
        let artifacts = match (job.kind, &user.artifacts) {
            (JobKind::Plan, None) => {
                let mut a = Mapping::new();
                let paths: Vec<String> = files
                    .iter()
                    .map(|f| format!("{}/{f}", glob_literal(&job.module)))
                    .collect();
                a.insert(string("paths"), strings(&paths));
                a.insert(string("expire_in"), string("1 day"));
                if files.len() > 1 {
                    a.insert(string("when"), string("always"));
                }
                Some(Value::Mapping(a))
            }
            (JobKind::Plan, Some(user)) => {
                let mut merged = user.clone();
                with_plan_files(&mut merged, &job.module, files);
                Some(to_value(&merged))
            }
            (JobKind::Apply, user) => user.as_ref().map(to_value),
        };
        if let Some(artifacts) = artifacts {
            m.insert(string("artifacts"), artifacts);
        }

        let cache = gitlab.cache.clone().unwrap_or_default();
        if cache.enabled.or(gitlab.cache_enabled).unwrap_or(true) {
            let mut c = Mapping::new();
            let key = match &cache.key {
                Some(template) => expand(template, job),
                None => job.module.replace('/', "-"),
            };
            c.insert(string("key"), string(key));
            let paths: Vec<String> = if cache.paths.is_empty() {
                vec![expand("{module_path}/.terraform/", job)]
            } else {
                cache.paths.iter().map(|p| expand(p, job)).collect()
            };
            c.insert(string("paths"), strings(&paths));
            if let Some(policy) = &cache.policy {
                c.insert(string("policy"), to_value(policy));
            }
            m.insert(string("cache"), Value::Mapping(c));
        }
        m.insert(string("resource_group"), string(&*job.module));
        m.extend(user_keys(&user));
        let mut doc = Mapping::new();
        doc.insert(string(&*job.name), Value::Mapping(m));
        write_entries_text(0, &doc, &STYLE)
    }

    /// Strings a YAML reader would take for something else, or that need a block.
    const TRICKY: [&str; 22] = [
        "vpc",
        "yes",
        "on",
        "N",
        "1.0",
        "0x1F",
        "a: b",
        "#x",
        " lead",
        "trail ",
        "it's",
        "",
        "l1\nl2",
        "l1\nl2\n",
        "tab\there",
        "{region}",
        "x}",
        "{",
        "-x",
        "~",
        "a #b",
        "é/ü",
    ];

    fn gitlab_config(text: &str) -> GitLab {
        let system = MemorySystem::new();
        let path = Utf8Path::new("/p/.terraci.yaml");
        system.write_file(path, text);
        let loaded = load_config(&system, Some(path)).unwrap_or_else(|e| panic!("{text}: {e}"));
        loaded.config.extensions.gitlab.unwrap_or_default()
    }

    /// Jobs whose names, module paths, components and needs run through [`TRICKY`];
    /// one job has a component outside the pattern.
    fn tricky_plan(segments: &[&str], env: &[(&str, &str)], binary: Binary, init: bool) -> JobPlan {
        let n = TRICKY.len();
        let mut jobs: Vec<Job> = Vec::new();
        for (i, t) in TRICKY.iter().enumerate() {
            let mut components: IndexMap<String, String> = segments
                .iter()
                .enumerate()
                .map(|(k, s)| ((*s).to_owned(), TRICKY[(i + k) % n].to_owned()))
                .collect();
            match i % 4 {
                1 => {
                    components.insert("submodule".into(), TRICKY[(i + 7) % n].into());
                }
                2 if i == 2 => {
                    components.insert("outside".into(), "x".into());
                }
                _ => {}
            }
            let needs = jobs
                .iter()
                .rev()
                .take(i % 3)
                .enumerate()
                .map(|(k, j)| Need {
                    job: j.name.clone(),
                    artifacts: k % 2 == 0,
                })
                .collect();
            jobs.push(Job {
                name: if i % 2 == 0 {
                    (*t).into()
                } else {
                    format!("plan-{t}").into()
                },
                kind: if i % 3 == 2 {
                    JobKind::Apply
                } else {
                    JobKind::Plan
                },
                module: if i % 2 == 0 {
                    (*t).into()
                } else {
                    format!("svc/{t}/m").into()
                },
                components: Arc::new(components),
                needs,
                level: i % 4,
            });
        }
        JobPlan {
            jobs: Arc::new(jobs),
            levels: 4,
            binary,
            init_enabled: init,
            env: env
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            segments: segments.iter().map(|s| (*s).to_owned()).collect(),
            plan_only: false,
            contributed: Vec::new(),
            apply_checks: Vec::new(),
            plan_results: init,
            service_dir: ".terraci".into(),
        }
    }

    /// GitLab's `extends`: the template's hash, with each key of the job's replacing it,
    /// but hashes, which merge key by key.
    fn deep_merge(base: &mut Mapping, over: &Mapping) {
        for (key, value) in over {
            match (base.get_mut(key), value) {
                (Some(Value::Mapping(b)), Value::Mapping(o)) => deep_merge(b, o),
                _ => {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
    }

    /// The job named in `job_text` as GitLab runs it: read, and merged over the hidden
    /// job of `templates` that it `extends`.
    fn merged_job(templates: &str, job_text: &str) -> (Value, Mapping) {
        let doc: Mapping =
            serde_yaml::from_str(job_text).unwrap_or_else(|e| panic!("{e}\n{job_text}"));
        let (name, job) = doc.into_iter().next().expect("one job");
        let Value::Mapping(mut job) = job else {
            panic!("{job_text}")
        };
        let Some(extends) = job.remove("extends") else {
            return (name, job);
        };
        let templates: Mapping = serde_yaml::from_str(templates).expect("templates");
        let Some(Value::Mapping(mut merged)) = templates.get(&extends).cloned() else {
            panic!("{extends:?} is not among {templates:?}")
        };
        deep_merge(&mut merged, &job);
        resolve_references(&mut merged, &templates).unwrap_or_else(|e| panic!("{e}"));
        (name, merged)
    }

    #[test]
    fn each_job_merged_with_its_template_is_the_job_written_out() {
        let configs = [
            "extensions:\n  gitlab: {}\n",
            // Placeholders of every kind, a template with braces outside placeholders,
            // and a placeholder no job has.
            "extensions:\n  gitlab:\n    stages_prefix: 'yes'\n    cache:\n      key: 'k-{service}-{module_path}'\n      paths: ['{module_path}/.terraform/', 'c/{service}/{module_path}', '{{service}}', 'x}{service}', '{service}{service}']\n      policy: pull\n",
            "extensions:\n  gitlab:\n    cache:\n      key: '{region}'\n      paths: ['{environment}/{region}/{submodule}']\n",
            "extensions:\n  gitlab:\n    needs_limit: 1\n    cache_enabled: false\n    job_defaults:\n      artifacts:\n        paths: ['on']\n        expire_in: 1 week\n      variables:\n        TF_MODULE_PATH: mine\n        'on': 'off'\n        V: \"l1\\nl2\"\n    overwrites:\n      - type: apply\n        artifacts:\n          name: 'yes'\n        when: manual\n        variables:\n          'Yes': '#x'\n",
            "extensions:\n  gitlab:\n    overwrites:\n      - type: plan\n        variables:\n          TF_SERVICE: ' lead'\n          TF_REGION: 'a: b'\n",
        ];
        let segment_sets: [&[&str]; 4] = [
            &["service", "environment", "region"],
            &["service", "environment", "region", "submodule"],
            // `TF_A_B` twice, and `TF_MODULE_PATH` from a segment.
            &["service", "a-b", "a_b", "module_path"],
            &[],
        ];
        let envs: [&[(&str, &str)]; 3] = [
            &[],
            &[
                ("E_YES", "yes"),
                ("on", "1.0"),
                ("MULTI", "l1\nl2\n"),
                ("", "#x"),
            ],
            &[("TF_REGION", "a: b"), ("TF_MODULE_PATH", "it's")],
        ];
        let mut compared = 0;
        for config in configs {
            let gitlab = gitlab_config(config);
            let prefix = gitlab
                .stages_prefix
                .clone()
                .unwrap_or_else(|| DEFAULT_STAGES_PREFIX.to_owned());
            for segments in segment_sets {
                for (e, env) in envs.iter().enumerate() {
                    let (binary, init) = if e % 2 == 0 {
                        (Binary::Terraform, true)
                    } else {
                        (Binary::Tofu, false)
                    };
                    let plan = tricky_plan(segments, env, binary, init);
                    // Placeholders of segments the plan does not have are an error.
                    let Ok(writer) = JobWriter::new(&plan, &gitlab, &prefix) else {
                        continue;
                    };
                    let templates = writer.templates();
                    for job in plan.jobs.iter() {
                        let (mut direct, mut tree) = (Vec::new(), Vec::new());
                        let written = tree_job_text(&plan, &gitlab, &prefix, job, &mut tree);
                        let written: Mapping = serde_yaml::from_str(&written).expect("job");
                        let (name, job_value) = written.into_iter().next().expect("one job");
                        assert_eq!(
                            merged_job(&templates, &writer.job(job, &mut direct)),
                            (name, job_value.as_mapping().expect("a job").clone()),
                            "{config}\nsegments {segments:?}, env {env:?}, job {:?}\n{templates}",
                            job.name
                        );
                        assert_eq!(direct, tree);
                        compared += 1;
                    }
                }
            }
        }
        assert!(compared > 600, "{compared} jobs compared");
    }

    #[test]
    fn one_pass_templates_only_without_stray_braces() {
        assert!(Template::new("{module_path}/c/{service}".into())
            .pieces
            .is_some());
        for text in ["{{service}}", "x}{service}", "{service", "a}"] {
            assert!(Template::new(text.into()).pieces.is_none(), "{text}");
        }
    }
}
