//! `generate`: the pipeline file, replayed from the run record when nothing it read has
//! changed ([`crate::replay`]).

use std::io::Write;

use anyhow::Context as _;
use camino::{Utf8Path, Utf8PathBuf};

use crate::cli::{GenerateArgs, GlobalArgs};
use crate::pipeline::{
    build_pipeline, header, plan_options, select_provider, Children, PendingChanges,
    PipelineRequest,
};
use crate::workspace::{load_workspace_overlapped, project_dir};
use terraci_db::config::find_config_file;
use terraci_db::exit;
use terraci_db::files::Selection;
use terraci_db::system::System;
use terraci_engine::graph::dependency_graph;

use super::{write_output, write_output_parts, Io};

pub(super) fn generate(
    global: &GlobalArgs,
    args: &GenerateArgs,
    io: &mut Io<'_>,
) -> anyhow::Result<u8> {
    if !args.from_commit {
        return generate_from(global, args, io, None);
    }
    // `--from-commit`: the project as HEAD's commit holds it ([`terraci_vcs::CommitSystem`]);
    // the caches, the output and what the commit does not hold stay the disk's.
    let root = project_dir(io.system, global)?;
    // What the command line names is the disk's: the caches, the output and its
    // children, `--config` and the `--var-file`s.
    let cache =
        terraci_db::store::CacheSettings::new(&root, global.no_cache, global.cache_dir.as_deref());
    let output = args
        .output
        .iter()
        .flat_map(|o| [Some(o.clone()), children_dir(o)])
        .flatten();
    let named = global
        .config
        .iter()
        .chain(&args.pipeline.eval.var_file)
        .cloned();
    let mut disk = cache
        .iter()
        .map(|settings| settings.dir.clone())
        .collect::<Vec<_>>();
    for path in output.chain(named) {
        disk.push(io.system.absolute(&path)?);
    }
    let system = terraci_vcs::CommitSystem::open(io.system.shared(), &root, disk.clone()).map_err(
        |err| match err {
            terraci_vcs::VcsError::NotARepository { path, reason } => exit::fail(
                exit::ERROR,
                format!(
                    "--from-commit reads the project from HEAD's commit, and {path} is not \
                 inside a git repository ({reason}); run without --from-commit to read the \
                 files as they are"
                ),
            ),
            err => exit::coded(crate::pipeline::PipelineError::Changes(err)),
        },
    )?;
    let mut args = args.clone();
    args.changes.committed_only = args.changes.changed_only;
    // The walk's memo lives with the caches, and is used where they are
    // ([`crate::walk_memo`]).
    let settings = cache.filter(|settings| {
        settings.check(&system, &root).is_ok()
            && crate::workspace::committed_cache(&system, settings, &root).is_none()
    });
    let commit = FromCommit {
        system: &system,
        settings,
        disk,
    };
    let mut io = Io {
        system: &system,
        stdout: &mut *io.stdout,
        stderr: &mut *io.stderr,
        argv: io.argv.clone(),
    };
    generate_from(global, &args, &mut io, Some(&commit))
}

/// What `generate --from-commit` passes on: the commit's system, the cache settings
/// when the caches are used, and the paths read from the disk.
struct FromCommit<'a> {
    system: &'a terraci_vcs::CommitSystem,
    settings: Option<terraci_db::store::CacheSettings>,
    disk: Vec<Utf8PathBuf>,
}

/// [`generate`] through `io`'s system.
fn generate_from(
    global: &GlobalArgs,
    args: &GenerateArgs,
    io: &mut Io<'_>,
    commit: Option<&FromCommit<'_>>,
) -> anyhow::Result<u8> {
    if args.pipeline.format.is_report_only() && !args.pipeline.dry_run {
        return Err(terraci_db::exit::coded(
            crate::pipeline::PipelineError::ModulesWithoutDryRun,
        ));
    }
    // Before any stamp is taken: a run records only files that changed before it began.
    let started = io.system.now();
    let root = project_dir(io.system, global)?;
    let key = replay_key(io.system, global, args, &io.argv);
    let record = match key.as_ref().map(|key| key.read(io.system)) {
        Some(Ok(record)) => record,
        Some(Err(notice)) => {
            if !global.quiet {
                writeln!(io.stderr, "notice: {notice}")?;
            }
            None
        }
        None => None,
    };
    // `--changed-only`: git runs on its own thread from here, beside the replay check
    // and the load. It fingerprints the repository first: when the recorded run's
    // fingerprint is still the repository's, its change set is git's answer.
    let recorded = record.as_ref().and_then(recorded_changes);
    let fast = recorded.is_some();
    // A commit's change set needs no fingerprint of the work tree.
    let fingerprinting = key
        .as_ref()
        .filter(|_| !args.from_commit)
        .map(|key| fingerprinting(io.system, started, key, args));
    let fingerprinted = fingerprinting.is_some();
    let mut changes = PendingChanges::start_fingerprinted(
        io.system,
        &root,
        &args.changes,
        fingerprinting,
        recorded,
    )?;
    let mut start = crate::workspace::Start {
        // The walk is recorded beside the repository's fingerprint, and only there.
        keep_layout: changes.is_some() && fingerprinted,
        // The dry run's JSON report holds the graph with every edge's source.
        keep_texts: args.pipeline.dry_run && args.pipeline.format == crate::cli::OutputFormat::Json,
        ..crate::workspace::Start::default()
    };
    if let (Some(key), Some(mut record)) = (&key, record) {
        // With a recorded fingerprint, the fingerprint check (on git's thread, over every
        // entry of the project) decides what this thread does: nothing changed, replay;
        // only the contents of files this run reads, no replay and no walk.
        let verdict = match (&mut changes, fast) {
            (Some(changes), true) => changes.verdict(),
            _ => terraci_vcs::Verdict::Other,
        };
        let moved = match &verdict {
            terraci_vcs::Verdict::Moved(moved) if record.layout.is_some() => {
                let read = |path: &str| {
                    record
                        .files
                        .binary_search_by(|(recorded, _, _)| recorded.as_str().cmp(path))
                        .is_ok()
                };
                moved.changed().any(read).then(|| moved.clone())
            }
            _ => None,
        };
        let replay = if let Some(moved) = moved {
            start.layout =
                record
                    .layout
                    .take()
                    .map(|module_dirs| terraci_engine::discover::Layout {
                        module_dirs,
                        diagnostics: Vec::new(),
                    });
            start.moved = Some(moved);
            None
        } else {
            let unasked = matches!(verdict, terraci_vcs::Verdict::Same)
                && key.files_unchanged(io.system, &record)
                && changes.as_mut().is_some_and(PendingChanges::is_recorded);
            if unasked {
                Some((record, true))
            } else {
                let index = key.index();
                start.index = Some(index.clone());
                match key.check(io.system, record, &index) {
                    crate::replay::Lookup::Hit(record, walked) => {
                        let same = record.changes == current_changes(&mut changes, key);
                        start.layout = walked;
                        same.then_some((record, false))
                    }
                    crate::replay::Lookup::Miss(walked) => {
                        start.layout = walked;
                        None
                    }
                }
            }
        };
        if let Some((record, unasked)) = replay {
            io.stderr.write_all(&record.stderr)?;
            if global.verbose > 0 {
                writeln!(
                    io.stderr,
                    "note: replayed the last run (`{}`): none of its inputs changed{}",
                    key.record_path(),
                    if unasked {
                        " (nor the repository's fingerprint: git was not asked)"
                    } else {
                        ""
                    }
                )?;
            }
            write_output(io, Some(&root), args.output.as_deref(), &record.output)?;
            // A recorded run is never split: children beside the file are stale.
            remove_stale_children(io, args.output.as_deref(), &[])?;
            if !unasked {
                let walked = start.layout.map(|layout| layout.module_dirs);
                fingerprint_record(io, global, key, started, record, walked, changes.as_mut())?;
            }
            return Ok(exit::OK);
        }
    }
    // A commit's walk from the memo, when its diff allows; else the run walks, and
    // keeps the walk for the memo.
    let memo = commit.and_then(|c| Some((c, c.settings.as_ref()?)));
    let mut remember = None;
    if let (Some((commit, settings)), None) = (memo, &start.layout) {
        match crate::walk_memo::recall(commit.system, settings, &commit.disk) {
            Ok(Some(recalled)) => {
                if global.verbose > 0 {
                    writeln!(
                        io.stderr,
                        "note: the walk of HEAD's commit is the memo's (`{}`): from its tree, \
                         {} file(s) changed contents and nothing else",
                        settings.dir.join(terraci_db::store::WALK_FILE_NAME),
                        recalled.modified
                    )?;
                }
                start.layout = Some(terraci_engine::discover::Layout {
                    module_dirs: recalled.module_dirs,
                    diagnostics: Vec::new(),
                });
                start.stamps = Some(recalled.stamps);
            }
            unused => {
                if let (Err(notice), false) = (unused, global.quiet) {
                    writeln!(io.stderr, "notice: {notice}")?;
                }
                start.keep_layout = true;
                remember = Some((commit, settings));
            }
        }
    }
    // Everything for stderr goes through a buffer, so a recorded run replays it exactly.
    let mut stderr = Vec::new();
    let outcome = generate_pipeline(
        global,
        args,
        io.system,
        &io.argv,
        start,
        changes.as_mut(),
        &mut stderr,
    );
    io.stderr.write_all(&stderr)?;
    let (text, children, stamps, notices, used, walked) = outcome?;
    // Every child before the parent that names them, so a parent never names a child
    // that is missing.
    if let Some(output) = args.output.as_deref() {
        write_children(io, &root, output, &children)?;
    }
    // In pieces to the end: joined, the pipeline would be held twice at once.
    let parts = text.parts();
    write_output_parts(io, Some(&root), args.output.as_deref(), &parts)?;
    let kept: Vec<&str> = children.iter().map(|c| c.file.as_str()).collect();
    remove_stale_children(io, args.output.as_deref(), &kept)?;
    if let (Some(output), Some(dir), false) = (
        args.output.as_deref(),
        args.output.as_deref().and_then(children_dir),
        children.is_empty() || global.quiet,
    ) {
        writeln!(
            io.stderr,
            "note: over GitLab's limits as one pipeline (extensions.gitlab.max_yaml_size_bytes, \
             max_jobs): {output} triggers {} child pipelines, written in {dir}/",
            children.len()
        )?;
    }
    // A run record replays one file: a split run is not recorded.
    let stamps = stamps.filter(|_| children.is_empty());
    if let (Some(key), Some(stamps)) = (key, stamps) {
        // A cache notice is about this run (the fact cache it found damaged is rewritten
        // now): a replay of the run must not repeat it.
        let mut replayed = String::from_utf8_lossy(&stderr).into_owned();
        for notice in notices {
            replayed = replayed.replacen(&format!("notice: {notice}\n"), "", 1);
        }
        let used = used
            .as_ref()
            .map(|c| crate::replay::encode_changes(&c.files, &c.submodules));
        let fingerprint = changes.as_mut().and_then(PendingChanges::fingerprint);
        let changed_only = used.as_deref().map(|changes| crate::replay::ChangedOnly {
            changes,
            fingerprint: fingerprint.as_deref(),
            layout: walked.as_ref(),
        });
        if let Err(e) = key.save(
            io.system,
            started,
            stamps,
            changed_only,
            &parts,
            replayed.as_bytes(),
        ) {
            if !global.quiet {
                writeln!(io.stderr, "notice: cannot write the run record: {e}")?;
            }
        }
    }
    if let (Some((commit, settings)), Some(walked)) = (remember, &walked) {
        crate::walk_memo::save(commit.system, settings, &commit.disk, walked);
    }
    Ok(exit::OK)
}

/// The directory of the child pipelines of `-o FILE`: `<FILE's stem>.d` beside it.
fn children_dir(output: &Utf8Path) -> Option<Utf8PathBuf> {
    let stem = output.file_stem()?;
    Some(output.with_file_name(format!("{stem}.d")))
}

/// The children's directory as the CI job that runs `generate` names it (the parent's
/// `include: artifact:` paths): relative to the working directory when it lies below it.
fn children_dir_for_ci(system: &dyn System, output: &Utf8Path) -> Option<String> {
    let dir = children_dir(output)?;
    if dir.is_relative() {
        return Some(terraci_db::system::normalize(&dir).into_string());
    }
    let cwd = system.current_dir().ok()?;
    Some(match dir.strip_prefix(&cwd) {
        Ok(rel) => rel.as_str().to_owned(),
        Err(_) => dir.into_string(),
    })
}

/// Writes the child pipelines of a split into [`children_dir`] of `output`: all to
/// temporary names first, then each renamed to its own, so a failure on the way leaves
/// the previous children in place. A child whose file holds its bytes already is left as
/// it is (as the parent is): a repeated run rewrites nothing.
fn write_children(
    io: &mut Io<'_>,
    root: &Utf8Path,
    output: &Utf8Path,
    children: &[terraci_render::ChildPipeline],
) -> anyhow::Result<()> {
    if children.is_empty() {
        return Ok(());
    }
    let Some(dir) = children_dir(output) else {
        return Ok(());
    };
    let dir = io.system.absolute(&dir)?;
    if dir.starts_with(root) {
        io.system.create_dir_beneath(root, &dir)
    } else {
        io.system.create_dir_all(&dir)
    }
    .with_context(|| format!("cannot create {dir}"))?;
    let mut written: Vec<(Utf8PathBuf, Utf8PathBuf)> = Vec::with_capacity(children.len());
    for child in children {
        let path = dir.join(&child.file);
        let parts = child.text.parts();
        // A child that holds these bytes already is left as it is, as the parent is.
        if io.system.holds(&path, &parts) {
            continue;
        }
        let temp = dir.join(format!(".{}.tmp", child.file));
        let result = io.system.write_output(root, &temp, &parts);
        if let Err(e) = result {
            for (written, _) in &written {
                let _ = io.system.remove_file(written);
            }
            return Err(anyhow::Error::new(e).context(format!("cannot write {temp}")));
        }
        written.push((temp, path));
    }
    for (temp, path) in &written {
        io.system
            .rename(temp, path)
            .with_context(|| format!("cannot write {path}"))?;
    }
    Ok(())
}

/// Removes from [`children_dir`] of `output` the child pipelines terraci wrote there
/// before (`child-<n>.yml`, and temporary files of an interrupted write) that are not in
/// `kept`. Nothing else is touched.
fn remove_stale_children(
    io: &mut Io<'_>,
    output: Option<&Utf8Path>,
    kept: &[&str],
) -> anyhow::Result<()> {
    let Some(dir) = output.and_then(children_dir) else {
        return Ok(());
    };
    let dir = io.system.absolute(&dir)?;
    let Ok(entries) = io.system.read_dir(&dir) else {
        return Ok(());
    };
    for entry in entries {
        let name = entry.name.as_str();
        let temp = name
            .strip_prefix('.')
            .and_then(|n| n.strip_suffix(".tmp"))
            .is_some_and(terraci_render::is_child_file_name);
        if !(terraci_render::is_child_file_name(name) || temp) || kept.contains(&name) {
            continue;
        }
        let path = dir.join(name);
        io.system
            .remove_file(&path)
            .with_context(|| format!("cannot remove the stale child pipeline {path}"))?;
    }
    Ok(())
}

/// A `--changed-only` run replayed after asking git (the record has no fingerprint, as
/// one could not be taken while a file was still changing, or another one: the index
/// was rewritten, a commit moved HEAD, and git's answer stayed the same) is recorded
/// again with the fingerprint git's answer came with now, so that the next repeat need
/// not ask git.
fn fingerprint_record(
    io: &mut Io<'_>,
    global: &GlobalArgs,
    key: &crate::replay::RunKey,
    started: std::time::SystemTime,
    record: crate::replay::Record,
    walked: Option<terraci_engine::discover::ModuleDirs>,
    changes: Option<&mut PendingChanges>,
) -> anyhow::Result<()> {
    let (Some(used), Some(changes)) = (&record.changes, changes) else {
        return Ok(());
    };
    let Some(fingerprint) = changes.fingerprint() else {
        return Ok(());
    };
    if record.fingerprint.as_ref() == Some(&fingerprint) {
        return Ok(());
    }
    if let Err(e) = key.save(
        io.system,
        started,
        record.files,
        Some(crate::replay::ChangedOnly {
            changes: used,
            fingerprint: Some(&fingerprint),
            layout: walked.as_ref(),
        }),
        &[record.output.as_bytes()],
        &record.stderr,
    ) {
        if !global.quiet {
            writeln!(io.stderr, "notice: cannot write the run record: {e}")?;
        }
    }
    Ok(())
}

/// The change set a record holds with the fingerprint it was taken with, if it has both.
fn recorded_changes(record: &crate::replay::Record) -> Option<crate::pipeline::Recorded> {
    let (files, submodules) = crate::replay::decode_changes(record.changes.as_deref()?)?;
    Some(crate::pipeline::Recorded {
        fingerprint: record.fingerprint.clone()?,
        files,
        submodules,
    })
}

/// What the repository's fingerprint leaves out: the cache directory and the output file,
/// which this run writes.
fn fingerprinting(
    system: &dyn System,
    started: std::time::SystemTime,
    key: &crate::replay::RunKey,
    args: &GenerateArgs,
) -> terraci_vcs::Fingerprinting {
    terraci_vcs::Fingerprinting {
        system: system.shared(),
        started,
        skip: vec![key.cache_dir().to_owned()],
        output: args
            .output
            .as_deref()
            .and_then(|path| system.absolute(path).ok()),
    }
}

/// The change set this run would use, as a run record holds it; `None` without
/// `--changed-only`, and when git fails (the run then goes the normal way and reports
/// it), which no record matches.
fn current_changes(
    changes: &mut Option<PendingChanges>,
    key: &crate::replay::RunKey,
) -> Option<Vec<u8>> {
    let (files, submodules) = changes.as_mut()?.paths(Some(key.cache_dir())).ok()?;
    Some(crate::replay::encode_changes(&files, &submodules))
}

/// The key under which this `generate` may be replayed ([`crate::replay`]): `None`
/// with `--no-cache`, or when something it needs cannot be read (the run then goes the
/// normal way and reports it).
fn replay_key(
    system: &dyn System,
    global: &GlobalArgs,
    args: &GenerateArgs,
    argv: &[String],
) -> Option<crate::replay::RunKey> {
    let root = project_dir(system, global).ok()?;
    let settings =
        terraci_db::store::CacheSettings::new(&root, global.no_cache, global.cache_dir.as_deref())?;
    settings.check(system, &root).ok()?;
    let config = find_config_file(system, &root, global.config.as_deref());
    crate::replay::RunKey::new(
        system,
        &settings,
        // A `--changed-only` run is recorded beside the full run, not over it: a merge
        // request's run leaves the base pipeline's record to replay (and replacing a
        // record of many megabytes was a tenth of such a run).
        if args.changes.changed_only {
            "generate-changed"
        } else {
            "generate"
        },
        &root,
        config.as_deref(),
        &args.pipeline.eval.var_file,
        argv,
        &consumed(global, args),
        &[format!(
            "color={}",
            crate::workspace::use_color(system, global.color)
        )],
        global.max_file_size,
    )
}

/// The parsed command line as the run acts on it, for the replay key: every flag and
/// every value clap took from the environment (`TERRACI_CONFIG`, `TERRACI_DIR`...). A
/// flag added later enters the key without anyone remembering to add it.
fn consumed(global: &GlobalArgs, args: &GenerateArgs) -> String {
    format!("{global:?}\n{args:?}")
}

/// The pipeline text, the stamps of the files read when the run can be replayed, the
/// notices printed (which a replay leaves out) and the change set used.
type Generated = (
    terraci_render::PipelineText,
    Vec<terraci_render::ChildPipeline>,
    Option<crate::workspace::RunFiles>,
    Vec<String>,
    Option<terraci_db::files::ChangeInput>,
    Option<terraci_engine::discover::ModuleDirs>,
);

/// `generate` up to the text to write. Everything for stderr goes to `err`.
fn generate_pipeline(
    global: &GlobalArgs,
    args: &GenerateArgs,
    system: &dyn System,
    argv: &[String],
    start: crate::workspace::Start,
    pending: Option<&mut PendingChanges>,
    err: &mut Vec<u8>,
) -> anyhow::Result<Generated> {
    let pipeline_args = &args.pipeline;
    let mut ws = load_workspace_overlapped(system, global, &pipeline_args.eval, start)?;
    ws.require_modules()?;
    let filters = ws.filters(&pipeline_args.select)?;
    ws.require_selected(&filters)?;
    let diagnostics = ws.all_diagnostics();
    let graph = dependency_graph(&ws.db, ws.project);
    if !graph.cycles.is_empty() {
        // The `dependency-cycle` error is among the diagnostics.
        ws.wait_for_cache();
        ws.print_diagnostics(&diagnostics, global.quiet, err)?;
        return Err(exit::reported(exit::VALIDATION));
    }
    let cache_dir = terraci_db::store::CacheSettings::new(
        &ws.root,
        global.no_cache,
        global.cache_dir.as_deref(),
    )
    .map(|s| s.dir);
    let changes = match pending {
        Some(pending) => {
            Some(pending.input(&args.changes, &ws.config.config, cache_dir.as_deref())?)
        }
        None => None,
    };
    let provider = select_provider(system, pipeline_args.provider.as_deref(), &ws.config.config)?;
    let options = plan_options(pipeline_args, provider, &ws.config.config);
    if pipeline_args.parallel_plans && !options.plan_only && !global.quiet {
        writeln!(
            err,
            "notice: --parallel-plans has no effect without --plan-only: each plan waits \
             for the applies of the modules it reads, so plans keep the dependency order"
        )?;
    }
    let selection = Selection::new(&ws.db, filters, options, changes.clone());
    let header = header(argv);
    let children_ci = args
        .output
        .as_deref()
        .and_then(|output| children_dir_for_ci(system, output));
    let generation = build_pipeline(
        &ws,
        diagnostics,
        &PipelineRequest {
            args: pipeline_args,
            provider,
            selection,
            explain: args.explain,
            header: &header,
            job_texts: None,
            children: children_ci
                .as_deref()
                .map_or(Children::NeedsOutput, Children::Into),
        },
    );
    ws.wait_for_cache();
    ws.print_diagnostics(&generation.diagnostics, global.quiet, err)?;
    if let Some(text) = &generation.explain {
        err.write_all(text.as_bytes())?;
    }
    let pipeline = generation.output?;
    if !global.quiet {
        for w in &pipeline.warnings {
            write!(err, "{}", w.render_human_styled(None, ws.color))?;
        }
    }
    let (stamps, notices) = ws.take_run_inputs(system.contents_id().is_some());
    let walked = ws.walked.take();
    ws.dismiss();
    Ok((
        pipeline.text,
        pipeline.children,
        stamps,
        notices,
        changes,
        walked,
    ))
}
