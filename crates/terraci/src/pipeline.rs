//! A pipeline from a loaded workspace: the selection's affected modules, the job plan and
//! the provider's text (or the `--dry-run` report), before anything is printed. Shared by
//! `generate` and `watch`.

use std::collections::BTreeSet;

use camino::Utf8Path;

use crate::cli::{ChangeArgs, OutputFormat, PipelineArgs};
use crate::workspace::Workspace;
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_db::exit::{self, Coded as _};
use terraci_db::files::{ChangeInput, Selection};
use terraci_db::system::System;
use terraci_engine::ir::{job_plan, PlanOptions};

/// The generated file's header: terraci's version and the command line.
pub(crate) fn header(argv: &[String]) -> terraci_render::Header {
    terraci_render::Header {
        version: env!("CARGO_PKG_VERSION").to_owned(),
        command_line: argv.join(" "),
    }
}

/// `--plan-only` and `--parallel-plans`, with the provider's `plan_only` from the config.
pub fn plan_options(
    args: &PipelineArgs,
    provider: terraci_render::Provider,
    config: &terraci_db::config::Config,
) -> PlanOptions {
    PlanOptions {
        plan_only: args.plan_only || provider.config_plan_only(config),
        parallel_plans: args.parallel_plans,
        refuse_expressions: provider == terraci_render::Provider::Github,
        refuse_variables: provider == terraci_render::Provider::Gitlab,
        runner: match provider {
            terraci_render::Provider::Gitlab => terraci_engine::ir::Runner::Gitlab,
            terraci_render::Provider::Github => terraci_engine::ir::Runner::Github,
        },
    }
}

/// What a pipeline is built from besides the workspace: decided once by `generate`,
/// once per regeneration by `watch`.
pub(crate) struct PipelineRequest<'a> {
    pub(crate) args: &'a PipelineArgs,
    pub(crate) provider: terraci_render::Provider,
    pub(crate) selection: Selection,
    /// `--explain` (ignored with `--dry-run`, whose output already says it).
    pub(crate) explain: bool,
    pub(crate) header: &'a terraci_render::Header,
    /// Job texts of the previous render, kept by `watch` (GitLab only).
    pub(crate) job_texts: Option<&'a terraci_render::JobTexts>,
    /// Where a GitLab pipeline over the limits may be split into child pipelines.
    pub(crate) children: Children<'a>,
}

/// Whether a GitLab pipeline over the instance's limits may be split into child pipelines.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Children<'a> {
    /// Never (`watch`): over the limits is the `pipeline-limit` error.
    Never,
    /// Not without a file to write them beside (`generate` to stdout): the error says so.
    NeedsOutput,
    /// Into this directory, as the CI job that generates them names it (relative to
    /// its working directory).
    Into(&'a str),
}

/// A pipeline built from a workspace, before anything is printed or written.
pub(crate) struct Generation {
    /// Every diagnostic, sorted: printed first.
    pub(crate) diagnostics: Vec<Diagnostic>,
    /// `--explain` text for stderr, printed after the diagnostics.
    pub(crate) explain: Option<String>,
    /// The text to write, or why there is none (clashing job names, a config value that
    /// cannot be rendered, GitHub's size limit).
    pub(crate) output: anyhow::Result<Pipeline>,
}

pub(crate) struct Pipeline {
    pub(crate) text: terraci_render::PipelineText,
    /// The child pipelines `text` (their parent) triggers, when the pipeline was split.
    pub(crate) children: Vec<terraci_render::ChildPipeline>,
    /// Renderer warnings (`needs-limit`, `config-warning`...), in the renderer's order:
    /// printed after the diagnostics and `--explain`, unless `-q`.
    pub(crate) warnings: Vec<Diagnostic>,
}

/// The pure part of `generate`: affected modules, job plan and rendered text (or the
/// `--dry-run` report) of a loaded workspace. `diagnostics` are the project's
/// ([`Workspace::all_diagnostics`]); the caller has refused a graph with cycles.
pub(crate) fn build_pipeline(
    ws: &Workspace,
    mut diagnostics: Vec<Diagnostic>,
    request: &PipelineRequest<'_>,
) -> Generation {
    let args = request.args;
    let selection = request.selection;
    let affected = terraci_engine::changes::affected(&ws.db, ws.project, selection);
    diagnostics.extend(ws.finish_diagnostics(affected.diagnostics.iter().cloned()));
    let options = selection.plan_options(&ws.db);
    if options.refuse_expressions || options.refuse_variables {
        diagnostics.extend(ws.refused_for_names(options));
    }
    let plan = match job_plan(&ws.db, ws.project, selection) {
        Ok(plan) => plan,
        Err(e) => {
            // A coded error is printed with the diagnostics, under its code.
            let output = match e.diagnostic() {
                Some(d) => {
                    diagnostics.push(d);
                    Err(exit::coded(PipelineError::InvalidContribution))
                }
                None => Err(exit::coded(e.clone())),
            };
            return Generation {
                diagnostics,
                explain: None,
                output,
            };
        }
    };
    diagnostics.extend(local_state_warning(ws, plan));
    let changed_files = selection
        .changes(&ws.db)
        .as_ref()
        .map(|c| c.files.as_slice());
    let explain = (request.explain && !args.dry_run).then(|| {
        let mut text = Vec::new();
        terraci_render::report::explain(affected, plan, changed_files, &mut text)
            .expect("writing to a Vec cannot fail");
        String::from_utf8_lossy(&text).into_owned()
    });
    let output = if args.dry_run {
        let report = terraci_render::report::DryRun {
            modules: terraci_engine::graph::dependency_graph(&ws.db, ws.project)
                .modules
                .len(),
            diagnostics: &diagnostics,
            affected,
            plan,
            changed_files,
        };
        terraci_render::report::dry_run(
            &report,
            // The report writes the run's diagnostics itself.
            || ws.graph_view(Vec::new(), true),
            args.format,
        )
        .map(|text| Pipeline {
            text: text.into(),
            children: Vec::new(),
            warnings: Vec::new(),
        })
        .map_err(anyhow::Error::from)
    } else {
        render_pipeline(ws, plan, request)
    };
    Generation {
        diagnostics,
        explain,
        output,
    }
}

/// One warning for the modules of the pipeline whose state lives in the checkout (no
/// backend block, or a `local` backend with a relative path): each CI job starts from a
/// fresh checkout, so what an apply writes is gone before the next job reads it.
fn local_state_warning(ws: &Workspace, plan: &terraci_engine::ir::JobPlan) -> Option<Diagnostic> {
    let modules: BTreeSet<&str> = plan.jobs.iter().map(|j| &*j.module).collect();
    // Every root's identity, chunk by chunk in module (id) order, without a summary
    // decoded per module.
    let inside: Vec<&str> = terraci_engine::chunk::chunks(&ws.db, ws.project)
        .into_iter()
        .flat_map(|chunk| terraci_engine::resolve::chunk_identities(&ws.db, chunk))
        .filter(|(id, identity)| {
            modules.contains(id.as_str())
                && identity.backend == "local"
                && identity
                    .fields
                    .get("path")
                    .is_some_and(|p| !p.starts_with('/'))
        })
        .map(|(id, _)| id.as_str())
        .collect();
    let first = inside.first()?;
    Some(
        Diagnostic::warning(
            Code::LocalState,
            format!(
                "{} inside the checkout (no backend block, or a `local` backend with a relative path): {}; each CI job starts from a fresh checkout, so the state an apply writes is lost; give {} a remote backend (or an absolute local `path` on storage the jobs share)",
                if inside.len() == 1 {
                    "1 module of the pipeline keeps its state".to_owned()
                } else {
                    format!("{} modules of the pipeline keep their state", inside.len())
                },
                terraci_db::diagnostic::first_few(inside.iter().copied()),
                if inside.len() == 1 { "it" } else { "them" }
            ),
        )
        .with_module(*first),
    )
}

/// The provider's pipeline file, as YAML or (`--format json`) JSON.
fn render_pipeline(
    ws: &Workspace,
    plan: &terraci_engine::ir::JobPlan,
    request: &PipelineRequest<'_>,
) -> anyhow::Result<Pipeline> {
    let mut config = std::borrow::Cow::Borrowed(&ws.config.config);
    if let Some(approve) = request.args.auto_approve() {
        config
            .to_mut()
            .extensions
            .gitlab
            .get_or_insert_with(Default::default)
            .auto_approve = Some(approve);
    }
    let config = &*config;
    // GitLab YAML stays in pieces (the jobs' texts): joined, the pipeline would be
    // held twice at once.
    if let terraci_render::Provider::Gitlab = request.provider {
        let (text, mut warnings) =
            terraci_render::render_gitlab_parts(plan, config, request.header, request.job_texts)
                .map_err(exit::coded)?;
        let sizes = terraci_render::LoadedSizes::of(&text);
        let limits = terraci_render::check_gitlab_sizes(&sizes, plan, config, request.args.force);
        let split =
            terraci_render::split_enabled(config) && request.args.format == OutputFormat::Yaml;
        if let (Err(over), true) = (&limits, split) {
            match request.children {
                Children::Into(dir) => {
                    let split = terraci_render::split_gitlab(
                        plan,
                        config,
                        request.header,
                        text,
                        &sizes,
                        dir,
                    )
                    .map_err(exit::coded)?;
                    return Ok(Pipeline {
                        text: split.parent.into(),
                        children: split.children,
                        warnings,
                    });
                }
                Children::NeedsOutput => {
                    return Err(exit::coded(PipelineError::SplitNeedsOutput(over.clone())))
                }
                Children::Never => {}
            }
        }
        warnings.extend(limits.map_err(exit::coded)?);
        let text = match request.args.format {
            OutputFormat::Yaml => text,
            OutputFormat::Json => json_of_pieces(text)?.into(),
            OutputFormat::Modules | OutputFormat::Unselected => {
                return Err(exit::coded(PipelineError::ModulesWithoutDryRun))
            }
        };
        return Ok(Pipeline {
            text,
            children: Vec::new(),
            warnings,
        });
    }
    let rendered = match request.provider {
        terraci_render::Provider::Gitlab => {
            terraci_render::render_gitlab_with(plan, config, request.header, request.job_texts)
        }
        terraci_render::Provider::Github => {
            terraci_render::render_github(plan, config, request.header, request.args.force)
        }
    }
    .map_err(exit::coded)?;
    let text = match request.args.format {
        OutputFormat::Modules | OutputFormat::Unselected => {
            return Err(exit::coded(PipelineError::ModulesWithoutDryRun))
        }
        OutputFormat::Yaml => rendered.text,
        OutputFormat::Json => {
            let value: serde_json::Value = serde_yaml::from_str(&rendered.text)?;
            let mut s = serde_json::to_string_pretty(&value)?;
            s.push('\n');
            s
        }
    };
    Ok(Pipeline {
        text: text.into(),
        children: Vec::new(),
        warnings: rendered.warnings,
    })
}

/// The JSON of a GitLab pipeline, piece by piece (the head's keys, then each job's):
/// the same text as the whole YAML document read as one JSON value and pretty-printed,
/// without that value (at 10,000 modules it took the run from 270 to 630 MB). Each piece
/// is dropped once converted, so the YAML and the JSON are not held whole at once.
fn json_of_pieces(text: terraci_render::PipelineText) -> anyhow::Result<String> {
    // JSON takes about a quarter more than the YAML (indentation, quotes, brackets); room
    // to spare is only address space, a reallocation would copy the whole text.
    let mut out = String::with_capacity(text.len() * 3 / 2);
    out.push('{');
    let mut keys = std::collections::HashSet::new();
    let terraci_render::PipelineText { head, jobs } = text;
    // JSON has no tags: each job's `!reference` lines are replaced with the lines of the
    // head's templates they name, as GitLab does.
    let mut head_entries: Option<serde_yaml::Mapping> = None;
    let pieces = std::iter::once(terraci_render::JobPiece::Owned(head)).chain(jobs);
    for piece in pieces {
        let serde_yaml::Value::Mapping(mut entries) = serde_yaml::from_str(&piece)? else {
            anyhow::bail!("a piece of the pipeline is not a mapping");
        };
        let doc = head_entries.get_or_insert_with(|| entries.clone());
        for value in entries.values_mut() {
            if let serde_yaml::Value::Mapping(job) = value {
                terraci_render::resolve_references(job, doc).map_err(anyhow::Error::msg)?;
            }
        }
        let serde_json::Value::Object(entries) = serde_json::to_value(entries)? else {
            anyhow::bail!("a piece of the pipeline is not a mapping");
        };
        for (key, value) in entries {
            out.push_str(if keys.is_empty() { "\n  " } else { ",\n  " });
            out.push_str(&serde_json::to_string(&key)?);
            out.push_str(": ");
            // One level deeper than a value printed on its own.
            let value = serde_json::to_string_pretty(&value)?;
            out.push_str(&value.replace('\n', "\n  "));
            if !keys.insert(key) {
                anyhow::bail!("the pipeline has two entries of one key");
            }
        }
    }
    out.push_str(if keys.is_empty() { "}\n" } else { "\n}\n" });
    Ok(out)
}

/// Provider order of spec §7.4; with both providers configured and no flag or CI
/// environment to choose, an error (exit 2).
pub(crate) fn select_provider(
    system: &dyn System,
    flag: Option<&str>,
    config: &terraci_db::config::Config,
) -> anyhow::Result<terraci_render::Provider> {
    use terraci_render::Provider;
    if let Some(p) = flag
        .map(str::to_owned)
        .or_else(|| system.env_var("TERRACI_PROVIDER"))
    {
        return p.parse::<Provider>().map_err(exit::coded);
    }
    if system.env_var("GITHUB_ACTIONS").as_deref() == Some("true") {
        return Ok(Provider::Github);
    }
    if system.env_var("GITLAB_CI").is_some() || system.env_var("CI_SERVER_URL").is_some() {
        return Ok(Provider::Gitlab);
    }
    match (&config.extensions.gitlab, &config.extensions.github) {
        (None, Some(_)) => Ok(Provider::Github),
        // Both configured and nothing above chose: guessing would write the wrong file
        // in half the projects (TerraCi refuses too).
        (Some(_), Some(_)) => Err(exit::coded(PipelineError::BothProviders)),
        _ => Ok(Provider::Gitlab),
    }
}

/// `--changed-only`: git's change set, computed on another thread from the start of a
/// run, so that the status walk and the tree diff overlap discovery and fact extraction.
/// Joined where the change set is first needed ([`PendingChanges::wait`]).
pub(crate) struct PendingChanges {
    state: ChangesState,
    /// What the fingerprint check found, sent before git is asked (taken by the first
    /// [`PendingChanges::verdict`]).
    verdict: Option<std::sync::mpsc::Receiver<terraci_vcs::Verdict>>,
    /// The project directory, for [`PendingChanges::input`].
    root: camino::Utf8PathBuf,
}

/// The change set, and whether it is the recorded one (the repository's fingerprint was
/// unchanged, so git was not asked).
type Answered = (terraci_vcs::ChangeSet, bool);

enum ChangesState {
    Running(std::thread::JoinHandle<Result<Answered, terraci_vcs::VcsError>>),
    /// The change set, or the error that stops the run.
    Done(Result<Answered, PipelineError>),
}

/// Why no pipeline is built: an error of the driver, with its exit code.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PipelineError {
    /// Printed after the contributed job's own diagnostic.
    #[error("no pipeline was written: a contributed job is invalid (see above)")]
    InvalidContribution,
    #[error(
        "both extensions.gitlab and extensions.github are configured and nothing selects \
         one: pass --provider gitlab|github or set TERRACI_PROVIDER (in CI, GITLAB_CI or \
         GITHUB_ACTIONS selects it)"
    )]
    BothProviders,
    #[error("--base-ref, --committed-only and --include-dependencies need --changed-only")]
    ChangeFlagsWithoutChangedOnly,
    #[error("--format modules and --format unselected are --dry-run reports: add --dry-run")]
    ModulesWithoutDryRun,
    #[error("cannot start change detection: {0}")]
    ChangesNotStarted(std::io::Error),
    #[error("change detection failed")]
    ChangesPanicked,
    #[error(transparent)]
    Changes(terraci_vcs::VcsError),
    #[error(
        "{0}; or write it with -o FILE: terraci then splits it into child pipelines \
         beside FILE (extensions.gitlab.split_pipelines)"
    )]
    SplitNeedsOutput(terraci_render::RenderError),
}

impl exit::Coded for PipelineError {
    fn exit_code(&self) -> u8 {
        match self {
            PipelineError::BothProviders
            | PipelineError::ChangeFlagsWithoutChangedOnly
            | PipelineError::ModulesWithoutDryRun => exit::USAGE,
            PipelineError::InvalidContribution
            | PipelineError::ChangesNotStarted(_)
            | PipelineError::ChangesPanicked
            | PipelineError::Changes(_)
            | PipelineError::SplitNeedsOutput(_) => exit::ERROR,
        }
    }
}

/// A recorded change set and the fingerprint it was taken with: git is not asked when
/// the fingerprint is still the repository's.
pub(crate) struct Recorded {
    pub(crate) fingerprint: Vec<u8>,
    pub files: Vec<String>,
    pub(crate) submodules: Vec<String>,
}

impl PendingChanges {
    /// Starts change detection for `args`; `None` without `--changed-only` (and a usage
    /// error for its companions without it). The CI variables are read here, once
    /// ([`terraci_vcs::ENV_VARS`]).
    pub(crate) fn start(
        system: &dyn System,
        root: &Utf8Path,
        args: &ChangeArgs,
    ) -> anyhow::Result<Option<PendingChanges>> {
        Self::start_fingerprinted(system, root, args, None, None)
    }

    /// [`PendingChanges::start`], fingerprinting the repository first
    /// ([`terraci_vcs::changed_files_unless`]): when `recorded`'s fingerprint is still the
    /// repository's, its change set is the answer.
    pub(crate) fn start_fingerprinted(
        system: &dyn System,
        root: &Utf8Path,
        args: &ChangeArgs,
        how: Option<terraci_vcs::Fingerprinting>,
        recorded: Option<Recorded>,
    ) -> anyhow::Result<Option<PendingChanges>> {
        let Some(request) = change_request(system, root, args)? else {
            return Ok(None);
        };
        let (tell, verdict) = std::sync::mpsc::channel();
        let work = move || -> Result<Answered, terraci_vcs::VcsError> {
            let Some(how) = how else {
                return terraci_vcs::changed_files(&request).map(|set| (set, false));
            };
            let expected = recorded
                .as_ref()
                .map(|r| (r.fingerprint.as_slice(), r.files.as_slice()));
            // The receiver may be gone: then nobody waits for the verdict.
            let mut send = |v| drop(tell.send(v));
            Ok(
                match terraci_vcs::changed_files_unless(&request, &how, expected, &mut send)? {
                    terraci_vcs::Answer::Changed(set) => (set, false),
                    terraci_vcs::Answer::Unchanged => {
                        // Only a recorded fingerprint is ever expected.
                        let Some(recorded) = recorded else {
                            return Err(terraci_vcs::VcsError::Git(
                                "a fingerprint matched without a recorded change set".into(),
                            ));
                        };
                        let set = terraci_vcs::ChangeSet {
                            base: String::new(),
                            base_commit: String::new(),
                            merge_base: String::new(),
                            changed_files: recorded.files,
                            submodules: recorded.submodules,
                            fingerprint: Some(recorded.fingerprint),
                        };
                        (set, true)
                    }
                },
            )
        };
        let state = match std::thread::Builder::new()
            .name("terraci-git".into())
            .spawn(work)
        {
            Ok(handle) => ChangesState::Running(handle),
            Err(e) => ChangesState::Done(Err(PipelineError::ChangesNotStarted(e))),
        };
        Ok(Some(PendingChanges {
            state,
            verdict: Some(verdict),
            root: root.to_owned(),
        }))
    }

    /// What the fingerprint check found (waits for it, not for git's answer);
    /// [`terraci_vcs::Verdict::Other`] when no check was made or it failed, and after
    /// the first call.
    pub(crate) fn verdict(&mut self) -> terraci_vcs::Verdict {
        self.verdict
            .take()
            .and_then(|r| r.recv().ok())
            .unwrap_or(terraci_vcs::Verdict::Other)
    }

    /// The change set, waiting for it if it is still being computed.
    pub(crate) fn wait(&mut self) -> anyhow::Result<&terraci_vcs::ChangeSet> {
        self.answer().map(|(set, _)| set)
    }

    /// Whether the change set is the recorded one because the repository's fingerprint
    /// was unchanged (waits for it); `false` when git failed.
    pub(crate) fn is_recorded(&mut self) -> bool {
        self.answer().is_ok_and(|(_, recorded)| *recorded)
    }

    /// The fingerprint the change set was taken with, if one could be.
    pub(crate) fn fingerprint(&mut self) -> Option<Vec<u8>> {
        self.answer().ok()?.0.fingerprint.clone()
    }

    fn answer(&mut self) -> anyhow::Result<&Answered> {
        if let ChangesState::Running(_) = self.state {
            let ChangesState::Running(handle) = std::mem::replace(
                &mut self.state,
                ChangesState::Done(Err(PipelineError::ChangesPanicked)),
            ) else {
                unreachable!("matched above");
            };
            self.state = ChangesState::Done(match handle.join() {
                Ok(result) => result.map_err(PipelineError::Changes),
                Err(_) => Err(PipelineError::ChangesPanicked),
            });
        }
        match &self.state {
            ChangesState::Done(Ok(answered)) => Ok(answered),
            // Each call reports it (a failed change set stops the run at the first).
            ChangesState::Done(Err(e)) => Err(exit::fail(e.exit_code(), e.to_string())),
            ChangesState::Running(_) => unreachable!("joined above"),
        }
    }

    /// The changed paths and the submodules among them. Paths inside `cache_dir` (the
    /// caches being written while git looked: their `.gitignore` may not exist yet) are
    /// left out.
    pub(crate) fn paths(
        &mut self,
        cache_dir: Option<&Utf8Path>,
    ) -> anyhow::Result<(Vec<String>, Vec<String>)> {
        let root = self.root.clone();
        let set = self.wait()?;
        let keep = |path: &&String| cache_dir.is_none_or(|dir| !root.join(path).starts_with(dir));
        Ok((
            set.changed_files.iter().filter(keep).cloned().collect(),
            set.submodules.iter().filter(keep).cloned().collect(),
        ))
    }

    /// The change set as the selection's input (see [`PendingChanges::paths`]).
    pub(crate) fn input(
        &mut self,
        args: &ChangeArgs,
        config: &terraci_db::config::Config,
        cache_dir: Option<&Utf8Path>,
    ) -> anyhow::Result<ChangeInput> {
        let (files, submodules) = self.paths(cache_dir)?;
        Ok(ChangeInput {
            files,
            submodules,
            include_dependencies: args.include_dependencies
                || config.changed_only.include_dependencies,
        })
    }
}

/// What `--changed-only` asks git; `None` without it.
fn change_request(
    system: &dyn System,
    root: &Utf8Path,
    args: &ChangeArgs,
) -> anyhow::Result<Option<terraci_vcs::ChangeRequest>> {
    if !args.changed_only {
        if args.base_ref.is_some() || args.committed_only || args.include_dependencies {
            return Err(exit::coded(PipelineError::ChangeFlagsWithoutChangedOnly));
        }
        return Ok(None);
    }
    let env = terraci_vcs::ENV_VARS
        .iter()
        .filter_map(|name| system.env_var(name).map(|v| ((*name).to_owned(), v)))
        .collect();
    Ok(Some(terraci_vcs::ChangeRequest {
        project_dir: root.to_owned(),
        base_ref: args.base_ref.clone(),
        committed_only: args.committed_only,
        env,
    }))
}

/// `--changed-only`: the changed files from git, as an input value; `None` without it.
pub(crate) fn change_input(
    system: &dyn System,
    root: &Utf8Path,
    args: &ChangeArgs,
    config: &terraci_db::config::Config,
) -> anyhow::Result<Option<ChangeInput>> {
    match PendingChanges::start(system, root, args)? {
        Some(mut pending) => pending.input(args, config, None).map(Some),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_made_piece_by_piece_is_the_json_of_the_whole_document() {
        let head = "# terraci\nvariables:\n  TERRAFORM_BINARY: terraform\n  N: '5'\nstages:\n  - deploy-0\n  - deploy-1\n";
        let jobs = [
            "\nplan-a:\n  stage: deploy-0\n  needs: []\n  script:\n    - cd \"a\"\n    - terraform plan\n",
            "\napply-a:\n  stage: deploy-1\n  when: manual\n  retry: 2\n  interruptible: false\n  cache: {}\n  variables:\n    TF_X: \"l1\\nl2\"\n",
        ];
        let text = terraci_render::PipelineText {
            head: head.to_owned(),
            jobs: jobs.iter().map(|&j| j.to_owned().into()).collect(),
        };
        let whole: serde_json::Value =
            serde_yaml::from_str(&format!("{head}{}", jobs.concat())).unwrap();
        let mut want = serde_json::to_string_pretty(&whole).unwrap();
        want.push('\n');
        assert_eq!(json_of_pieces(text).unwrap(), want);
        // Two pieces with one key would be one entry of the whole document.
        let twice = terraci_render::PipelineText {
            head: head.to_owned(),
            jobs: vec![jobs[0].to_owned().into(), jobs[0].to_owned().into()],
        };
        assert!(json_of_pieces(twice).is_err());
    }
}
