//! `watch`: the first pipeline, then one regeneration per batch of file events.

use crate::cli::{GlobalArgs, WatchArgs};
use crate::workspace::project_dir;
use terraci_db::exit::{self, fail};

use super::Io;

/// `watch`: the first pipeline, then one regeneration per batch of file events until
/// SIGINT or SIGTERM (exit 0).
pub(super) fn watch(global: &GlobalArgs, args: &WatchArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    if args.pipeline.format.is_report_only() && !args.pipeline.dry_run {
        return Err(terraci_db::exit::coded(
            crate::pipeline::PipelineError::ModulesWithoutDryRun,
        ));
    }
    let root = project_dir(io.system, global)?;
    let mut outside = Vec::new();
    if args.changes.changed_only {
        // A commit, a checkout or a fetch changes the change set without touching the
        // project: the repository's HEAD, index and branch refs are watched too (inside
        // the project they are seen anyway).
        let git = terraci_vcs::repository_root(io.system, &root).join(".git");
        for dir in ["", "refs/heads", "refs/remotes/origin"] {
            let dir = git.join(dir);
            if io.system.is_dir(&dir) {
                // The watcher watches the directory of each file named here.
                outside.push(dir.join("HEAD"));
            }
        }
    }
    if let Some(config) = &global.config {
        outside.push(io.system.absolute(config)?);
    }
    for f in &args.pipeline.eval.var_file {
        outside.push(io.system.absolute(f)?);
    }
    // Watching starts before the project is read, so an edit made while it loads is
    // seen; the signal handler is in place from here on, so Ctrl-C always exits 0.
    let mut events = io
        .system
        .watch(&root, &outside)
        .map_err(|e| fail(exit::ERROR, format!("cannot watch `{root}`: {e}")))?;
    let mut watch = crate::watch::Watch::start(io.system, global, args, &io.argv, io.stderr)?;
    watch.run(events.as_mut(), io.stderr)?;
    Ok(exit::OK)
}
