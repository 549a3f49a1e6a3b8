//! Run replay for every command that only reads the project (`generate`, `validate`,
//! `graph`, `local-exec --dry-run`): the key of a run, its lookup and its record, in one
//! place ([`crate::replay`] holds the record format).

use camino::{Utf8Path, Utf8PathBuf};

use crate::cli::GlobalArgs;
use crate::workspace::{project_dir, use_color, RunFiles};
use terraci_db::config::find_config_file;
use terraci_db::exit;
use terraci_db::system::System;
use terraci_engine::discover::Layout;

use super::{write_output, Io};

/// What a command made, for its caller to print and for the record.
pub(super) struct Produced {
    /// The text for `-o` or stdout.
    pub(crate) output: String,
    /// Its exit code: only a run that exits 0 is recorded.
    pub(crate) code: u8,
    /// The stamps of the files read, when the run may be recorded (it read nothing
    /// outside the modules' files).
    pub(crate) stamps: Option<RunFiles>,
    /// Cache notices printed, which a replay leaves out.
    pub(crate) notices: Vec<String>,
}

/// What the key of a command's run is made of, besides the command line.
pub(super) struct KeyInputs<'a> {
    pub(crate) command: &'a str,
    /// `--changed-only` runs depend on git and are never replayed.
    pub(crate) changed_only: bool,
    pub(crate) var_files: &'a [Utf8PathBuf],
    /// What else the output depends on (see [`crate::replay::RunKey::new`]).
    pub(crate) extra: Vec<String>,
}

impl<'a> KeyInputs<'a> {
    /// The inputs of a command that depends on nothing else and is never `--changed-only`.
    pub(super) fn plain(command: &'a str, var_files: &'a [Utf8PathBuf]) -> Self {
        KeyInputs {
            command,
            changed_only: false,
            var_files,
            extra: Vec::new(),
        }
    }
}

/// Runs `run` unless an identical earlier run can be replayed: a hit prints that run's
/// stderr and writes its output (to `output` or stdout) without reading a Terraform file.
/// `run` gets the walk the lookup made and a buffer for everything meant for stderr, so
/// a recorded run replays it exactly; an `Err` from it is the command's error, after its
/// stderr.
pub(super) fn replayed(
    global: &GlobalArgs,
    io: &mut Io<'_>,
    inputs: KeyInputs<'_>,
    output: Option<&Utf8Path>,
    run: impl FnOnce(Option<Layout>, &mut Vec<u8>) -> anyhow::Result<Produced>,
) -> anyhow::Result<u8> {
    // Before any stamp is taken: a run records only files that changed before it began.
    let started = io.system.now();
    let project = project_dir(io.system, global).ok();
    let key = run_key(io.system, global, &inputs, &io.argv);
    let mut layout = None;
    if let Some(key) = &key {
        match key.lookup(io.system, &key.index()) {
            // A record of this key never holds a change set (`--changed-only` has no
            // key here; `generate` replays those itself).
            Ok(crate::replay::Lookup::Hit(record, _)) if record.changes.is_none() => {
                io.stderr.write_all(&record.stderr)?;
                write_output(io, project.as_deref(), output, &record.output)?;
                return Ok(exit::OK);
            }
            Ok(crate::replay::Lookup::Hit(_, walked)) => layout = walked,
            Ok(crate::replay::Lookup::Miss(walked)) => layout = walked,
            Err(notice) if !global.quiet => writeln!(io.stderr, "notice: {notice}")?,
            Err(_) => {}
        }
    }
    let mut stderr = Vec::new();
    let outcome = run(layout, &mut stderr);
    io.stderr.write_all(&stderr)?;
    let produced = outcome?;
    write_output(io, project.as_deref(), output, &produced.output)?;
    if let (Some(key), Some(stamps), exit::OK) = (key, produced.stamps, produced.code) {
        // A cache notice is about this run (the fact cache it found damaged is rewritten
        // now): a replay of the run must not repeat it.
        let mut replayed = String::from_utf8_lossy(&stderr).into_owned();
        for notice in produced.notices {
            replayed = replayed.replacen(&format!("notice: {notice}\n"), "", 1);
        }
        if let Err(e) = key.save(
            io.system,
            started,
            stamps,
            None,
            &[produced.output.as_bytes()],
            replayed.as_bytes(),
        ) {
            if !global.quiet {
                writeln!(io.stderr, "notice: cannot write the run record: {e}")?;
            }
        }
    }
    Ok(produced.code)
}

/// The key under which a run may be replayed ([`crate::replay`]): `None` with
/// `--no-cache` or `--changed-only`, or when something it needs cannot be read (the run
/// then goes the normal way and reports it). Whether stderr is coloured is part of it.
fn run_key(
    system: &dyn System,
    global: &GlobalArgs,
    inputs: &KeyInputs<'_>,
    argv: &[String],
) -> Option<crate::replay::RunKey> {
    if inputs.changed_only {
        return None;
    }
    let root = project_dir(system, global).ok()?;
    let settings =
        terraci_db::store::CacheSettings::new(&root, global.no_cache, global.cache_dir.as_deref())?;
    settings.check(system, &root).ok()?;
    let config = find_config_file(system, &root, global.config.as_deref());
    let mut extra = inputs.extra.clone();
    extra.push(format!("color={}", use_color(system, global.color)));
    crate::replay::RunKey::new(
        system,
        &settings,
        inputs.command,
        &root,
        config.as_deref(),
        inputs.var_files,
        argv,
        // The parsed global flags (those clap took from the environment included); the
        // command's own flags are in `argv`.
        &format!("{global:?}"),
        &extra,
        global.max_file_size,
    )
}
