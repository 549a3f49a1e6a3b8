//! The commands: one file each; this one dispatches a parsed command line and holds the
//! small ones. All IO goes through [`Io`]: the `System` and the two writers.

mod cost;
mod generate;
mod graph;
mod local_exec;
mod lsp;
mod policy;
mod replayed;
mod summary;
mod tfupdate;
mod validate;
mod watch;

pub use lsp::serve as serve_lsp;

use std::io::Write;

use anyhow::Context as _;
use camino::Utf8Path;

use crate::cli::{Cli, Command, GlobalArgs};
use crate::workspace::project_dir;
use terraci_db::diagnostic::Code;
use terraci_db::exit::{self, Failure};
use terraci_db::system::System;

pub struct Io<'a> {
    pub system: &'a dyn System,
    pub stdout: &'a mut dyn Write,
    pub stderr: &'a mut dyn Write,
    /// The command line as typed, for the generated file's header.
    pub argv: Vec<String>,
}

/// Runs a parsed command line; returns the exit code.
pub fn run(cli: Cli, io: &mut Io<'_>) -> u8 {
    match dispatch(cli, io) {
        Ok(code) => code,
        // The reader of stdout went away (`terraci generate | head -1`): nothing is
        // wrong with the run, and there is no one left to tell.
        Err(err)
            if err.chain().any(|e| {
                e.downcast_ref::<std::io::Error>()
                    .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            exit::OK
        }
        Err(err) => {
            let failure = err.downcast_ref::<Failure>();
            // An empty message: the diagnostics printed say it ([`exit::reported`]).
            if !failure.is_some_and(|f| f.message.is_empty()) {
                // Messages quote names from the repository: no terminal control
                // sequence of theirs reaches the terminal.
                let text = format!("{err:#}");
                let text = terraci_db::escape::printable_lines(&text);
                let _ = writeln!(io.stderr, "error: {text}");
            }
            failure.map_or(exit::ERROR, |f| f.code)
        }
    }
}

fn dispatch(mut cli: Cli, io: &mut Io<'_>) -> anyhow::Result<u8> {
    // `--log-level debug` is `-v` and `error` is `-q`, as in TerraCi.
    match cli.global.log_level {
        crate::cli::LogLevel::Debug => cli.global.verbose = cli.global.verbose.max(1),
        crate::cli::LogLevel::Error => cli.global.quiet = true,
        crate::cli::LogLevel::Info | crate::cli::LogLevel::Warn => {}
    }
    match &cli.command {
        Command::Version => {
            version(io.stdout)?;
            Ok(exit::OK)
        }
        Command::ExplainCodes(args) => explain_codes(args, io.stdout),
        Command::Lsp(args) => lsp::lsp(&cli.global, args, io),
        Command::Generate(args) => generate::generate(&cli.global, args, io),
        Command::Watch(args) => watch::watch(&cli.global, args, io),
        Command::Validate(args) => validate::validate(&cli.global, args, io),
        Command::Graph(args) => graph::graph(&cli.global, args, io),
        Command::LocalExec(args) => local_exec::local_exec(&cli.global, args, io),
        Command::Summary(args) => summary::summary(&cli.global, args, io),
        Command::Init(args) => init(&cli.global, args, io),
        Command::Schema(args) => schema(args, io),
        Command::Completion(args) => completion(args, io),
        Command::Policy(cmd) => policy::run(&cli.global, cmd, io),
        Command::Cost(args) => cost::cost(&cli.global, args, io),
        Command::Tfupdate(args) => tfupdate::tfupdate(&cli.global, args, io),
    }
}

/// `explain-codes [CODE]`: every code with its meaning, or the one named (an unknown
/// name is an error that lists none: `explain-codes` alone lists them).
fn explain_codes(args: &crate::cli::ExplainCodesArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let codes = match args.code.as_deref() {
        None => Code::ALL.to_vec(),
        Some(name) => match Code::named(name) {
            Some(code) => vec![code],
            None => {
                return Err(exit::fail(
                    exit::USAGE,
                    format!(
                        "no diagnostic code `{}`; `terraci explain-codes` lists them",
                        terraci_db::escape::printable(name)
                    ),
                ))
            }
        },
    };
    for code in codes {
        writeln!(out, "{:<26} {}", code.as_str(), code.explanation())?;
    }
    Ok(exit::OK)
}

/// `version`: the version, the commit and date it was built from (`unknown` outside a
/// git checkout), and what terraci has of TerraCi's plugins.
fn version(out: &mut dyn Write) -> std::io::Result<()> {
    writeln!(out, "terraci {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(out, "  commit: {}", env!("TERRACI_COMMIT"))?;
    writeln!(out, "  built:  {}", env!("TERRACI_COMMIT_DATE"))?;
    writeln!(out, "  plugins:")?;
    for (name, what) in PLUGINS {
        writeln!(out, "    - {name}: {what}")?;
    }
    Ok(())
}

/// TerraCi's plugins, by name, and what terraci does of each.
const PLUGINS: &[(&str, &str)] = &[
    (
        "cost",
        "monthly AWS cost of the plans (`terraci cost`, `extensions.cost`)",
    ),
    ("git", "change detection for --changed-only (in process)"),
    ("github", "GitHub Actions workflows"),
    ("gitlab", "GitLab CI pipelines"),
    ("policy", "OPA policy checks on plans (`extensions.policy`)"),
    (
        "summary",
        "plan summaries on merge requests (`terraci summary`)",
    ),
    (
        "tfupdate",
        "provider and module version bumps, lock files synced (`terraci tfupdate`)",
    ),
    (
        "update",
        "not implemented: `extensions.update` is accepted and has no effect",
    ),
];

fn init(global: &GlobalArgs, args: &crate::cli::InitArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let dir = project_dir(io.system, global)?;
    crate::init::init(io.system, &dir, global, args, io.stdout, io.stderr).map_err(exit::coded)?;
    Ok(exit::OK)
}

fn schema(args: &crate::cli::SchemaArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    write_output(
        io,
        None,
        args.output.as_deref(),
        &terraci_db::config::config_schema(),
    )?;
    Ok(exit::OK)
}

fn completion(args: &crate::cli::CompletionArgs, io: &mut Io<'_>) -> anyhow::Result<u8> {
    let mut cmd = <Cli as clap::CommandFactory>::command();
    clap_complete::generate(args.shell, &mut cmd, "terraci", io.stdout);
    Ok(exit::OK)
}

/// Writes `text` to `-o path`, or to stdout. `project`: the project the command ran in,
/// where a committed link out of it is replaced, not followed
/// ([`System::write_output`](terraci_db::system::System::write_output)).
fn write_output(
    io: &mut Io<'_>,
    project: Option<&Utf8Path>,
    path: Option<&Utf8Path>,
    text: &str,
) -> anyhow::Result<()> {
    write_output_parts(io, project, path, &[text.as_bytes()])
}

/// [`write_output`] of a text in pieces (a pipeline's jobs), never joined into one.
fn write_output_parts(
    io: &mut Io<'_>,
    project: Option<&Utf8Path>,
    path: Option<&Utf8Path>,
    parts: &[&[u8]],
) -> anyhow::Result<()> {
    match path {
        Some(p) => {
            let abs = io.system.absolute(p)?;
            match project {
                Some(project) => io.system.write_output(project, &abs, parts),
                None => io.system.write_atomic_parts(&abs, parts),
            }
            .with_context(|| format!("cannot write {p}"))?;
        }
        None => {
            for part in parts {
                io.stdout.write_all(part)?;
            }
        }
    }
    Ok(())
}

/// The command line for the generated file's header: `terraci` plus the arguments.
pub fn display_argv(argv: &[String]) -> Vec<String> {
    std::iter::once("terraci".to_owned())
        .chain(argv.iter().skip(1).cloned())
        .collect()
}
