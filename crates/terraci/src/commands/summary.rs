//! The `terraci summary` command: loads the project, collects the plan results, renders
//! the comment and posts it (or prints it).
//!
//! Input: the command line, the CI environment, the files the plan jobs left. Output: the
//! comment on the merge request / pull request (or on stdout), `-v` lines saying what was
//! done, warnings on stderr; exit 0 on success or skip, 1 on error.

use camino::Utf8Path;

use crate::cli::{GlobalArgs, SummaryArgs};
use crate::workspace::load_workspace;
use terraci_db::exit::{self, fail};
use terraci_ext::http::{Client, RetryPolicy, UreqTransport};
use terraci_ext::summary::markdown::{
    render, Limit, RenderOptions, GITHUB_MAX_CHARS, GITLAB_MAX_CHARS, STEP_SUMMARY_MAX_BYTES,
};
use terraci_ext::summary::{collect, labels, post, ModuleRef};

use super::Io;

pub(super) fn summary(
    global: &GlobalArgs,
    args: &SummaryArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    let ws = load_workspace(io.system, global, &args.eval)?;
    let config = &ws.config.config;
    let quiet = global.quiet;
    if !config.extensions.summary_enabled() {
        if !quiet {
            writeln!(
                io.stderr,
                "note: extensions.summary.enabled is false: no summary"
            )?;
        }
        ws.dismiss();
        return Ok(exit::OK);
    }
    let context = post::detect(io.system);
    let settings = config.extensions.effective_summary(context.provider);

    let view = ws.graph_view(Vec::new(), false);
    let modules: Vec<ModuleRef> = view
        .modules
        .iter()
        .filter(|m| !m.library)
        .map(|m| ModuleRef {
            id: m.id.clone(),
            components: m.components.clone(),
        })
        .collect();
    let edges: Vec<(String, String)> = view
        .edges
        .iter()
        .map(|e| (e.from.clone(), e.to.clone()))
        .collect();
    let service_dir = config.service_dir.as_deref().unwrap_or(".terraci");
    let summary = collect(
        io.system,
        &ws.policy,
        global.max_plan_size,
        &modules,
        &edges,
        Utf8Path::new(service_dir),
        &context.commits,
    );
    ws.dismiss();
    for warning in summary.warnings.iter().filter(|_| !quiet) {
        writeln!(io.stderr, "warning[summary-report]: {warning}")?;
    }
    if summary.modules.is_empty() {
        if !quiet {
            writeln!(
                io.stderr,
                "note: no plan results found (no module directory holds plan.result.json or \
                 plan.json): nothing to summarise"
            )?;
        }
        return Ok(exit::OK);
    }
    let (wanted, label_warnings) = labels::resolve(&settings.labels, &summary.modules);
    for warning in label_warnings.iter().filter(|_| !quiet) {
        writeln!(io.stderr, "warning[summary-label]: {warning}")?;
    }
    // The comment fits where it goes: the provider's comment limit, the step summary's.
    let provider_limit = Limit::for_provider(context.provider);
    let options = |managed: Option<&[String]>, limit: Limit| RenderOptions {
        include_details: settings.include_details,
        managed_labels: managed.map(<[String]>::to_vec),
        pipeline: context.pipeline.clone(),
        limit,
        part: context.part.clone(),
    };
    let changes = summary.has_reportable_changes();
    let skip_new = settings.on_changes_only && !changes;

    if let Some(path) = &context.step_summary {
        if !skip_new {
            let text = render(
                &summary,
                &options(None, Limit::Bytes(STEP_SUMMARY_MAX_BYTES - 1)),
            );
            io.system
                .append(Utf8Path::new(path), format!("{text}\n").as_bytes())
                .map_err(|e| {
                    fail(
                        exit::ERROR,
                        format!("cannot write GITHUB_STEP_SUMMARY `{path}`: {e}"),
                    )
                })?;
            if global.verbose > 0 {
                writeln!(
                    io.stderr,
                    "summary: appended the comment to GITHUB_STEP_SUMMARY"
                )?;
            }
        }
    }

    let target = match (&context.target, settings.enabled) {
        (Ok(target), true) => target,
        (target, enabled) => {
            let why = match target {
                Err(reason) => reason.clone(),
                Ok(_) if !enabled => "the comment is turned off (comment.enabled: false)".into(),
                Ok(_) => String::new(),
            };
            if skip_new {
                if !quiet {
                    writeln!(
                        io.stderr,
                        "note: no changes, so no comment (on_changes_only)"
                    )?;
                }
                return Ok(exit::OK);
            }
            if !quiet {
                writeln!(io.stderr, "note: not posting ({why}); the comment follows")?;
            }
            io.stdout
                .write_all(render(&summary, &options(None, provider_limit)).as_bytes())?;
            return Ok(exit::OK);
        }
    };

    let client = Client::new(Box::new(UreqTransport::default()), RetryPolicy::default())
        .redacting(target.token());
    let limit = match target {
        post::Target::GitLab(_) => Limit::Chars(GITLAB_MAX_CHARS),
        post::Target::GitHub(_) => Limit::Chars(GITHUB_MAX_CHARS),
    };
    let render_with = |managed: &[String]| render(&summary, &options(Some(managed), limit));
    let posted = post::post(&client, target, &render_with, &wanted, !skip_new)
        .map_err(|e| fail(exit::ERROR, format!("cannot post the summary: {e}")))?;
    for warning in posted.warnings.iter().filter(|_| !quiet) {
        writeln!(io.stderr, "warning[summary-comment]: {warning}")?;
    }
    match posted.action {
        "skipped" => {
            if !quiet {
                writeln!(
                    io.stderr,
                    "note: no changes, so no comment (on_changes_only)"
                )?;
            }
        }
        action => {
            if global.verbose > 0 {
                writeln!(
                    io.stderr,
                    "summary: {action} comment {} ({})",
                    posted.comment_id.map(|i| i.to_string()).unwrap_or_default(),
                    posted.endpoint
                )?;
                for (verb, list) in [
                    ("added", &posted.labels_added),
                    ("removed", &posted.labels_removed),
                ] {
                    for label in list {
                        let label = terraci_db::escape::printable(label);
                        writeln!(io.stderr, "summary: {verb} label {label}")?;
                    }
                }
            }
        }
    }
    Ok(exit::OK)
}
