//! `terraci init`: writes a starter `.terraci.yaml`.
//!
//! Input: the flags, or the answers to three questions on a terminal. Output: a commented
//! config file, written through `System`, that loads and generates without edits.

mod evidence;

use std::io::{BufRead, Write};

use camino::{Utf8Path, Utf8PathBuf};

use crate::cli::{GlobalArgs, InitArgs, InitBinary, InitProvider};
use terraci_db::config::{find_config_file, Binary, Pattern, Structure};
use terraci_db::diagnostic::Code;
use terraci_db::system::System;

#[derive(Debug, thiserror::Error)]
pub(crate) enum InitError {
    #[error("config file already exists: {0} (use --force to overwrite)")]
    Exists(String),
    #[error(
        "config file already exists above the current directory: {0} (use --force to overwrite it, or -d . to start a separate project here)"
    )]
    ExistsAbove(String),
    #[error("--pattern `{pattern}` is invalid: {reason}")]
    Pattern {
        pattern: String,
        reason: terraci_db::config::PatternError,
    },
    #[error("cannot write {path}: {source}")]
    Write {
        path: Utf8PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl terraci_db::exit::Coded for InitError {
    /// A bad flag value is a usage error (2); everything else is an error (1).
    fn exit_code(&self) -> u8 {
        match self {
            InitError::Pattern { .. } => terraci_db::exit::USAGE,
            _ => terraci_db::exit::ERROR,
        }
    }
}

/// What the written file configures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Choices {
    pub(crate) provider: InitProvider,
    pub(crate) binary: Binary,
    /// A pattern, or [`ROOTS`] for `structure.discovery: roots`.
    pub pattern: String,
    /// Local call targets for `library_modules.paths`, each with a directory that calls it.
    pub(crate) libraries: Vec<(String, String)>,
    /// Why roots mode (comment lines), when the pattern is [`ROOTS`].
    pub(crate) roots_note: Option<String>,
    /// `backend_config` and `variables` read from the repository.
    pub(crate) evidence: evidence::Evidence,
}

/// The pattern answer that means `structure.discovery: roots`.
pub(crate) const ROOTS: &str = "roots";

fn check_pattern(answer: &str) -> Result<(), terraci_db::config::PatternError> {
    if answer == ROOTS {
        return Ok(());
    }
    Pattern::parse(answer).map(|_| ())
}

/// Writes the config file of `dir`: `-c FILE` if given, else the config file the other
/// commands would load, else `.terraci.yaml`. Asks on a terminal unless `--ci` or a
/// choice flag is given (as TerraCi does).
pub(crate) fn init(
    system: &dyn System,
    dir: &Utf8Path,
    global: &GlobalArgs,
    args: &InitArgs,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> Result<(), InitError> {
    let explicit = match &global.config {
        Some(path) => Some(system.absolute(path)?),
        None => None,
    };
    let target = find_config_file(system, dir, explicit.as_deref())
        .unwrap_or_else(|| dir.join(".terraci.yaml"));
    let shown = target
        .strip_prefix(dir)
        .map_or_else(|_| target.to_string(), Utf8Path::to_string);
    // Checked before asking, so nobody answers questions only to be refused. A dry run
    // writes nothing, so it is not refused.
    if system.is_file(&target) && !args.force && !args.dry_run {
        // Found above the current directory (see `project_dir`): name it in full.
        if global.dir.is_none() && system.absolute(Utf8Path::new("."))? != dir {
            return Err(InitError::ExistsAbove(target.to_string()));
        }
        return Err(InitError::Exists(shown));
    }

    let (defaults, why) = default_choices(system, dir, args);
    let proposed = defaults.pattern.clone();
    let any_flag = args.provider.is_some() || args.binary.is_some() || args.pattern.is_some();
    let terminal = match !args.ci && !any_flag {
        true => system.interactive_stdin(),
        false => None,
    };
    let choices = match terminal {
        Some(mut input) => ask(&mut input, stdout, defaults)?,
        None => defaults,
    };
    check_pattern(&choices.pattern).map_err(|reason| InitError::Pattern {
        pattern: choices.pattern.clone(),
        reason,
    })?;

    let text = render_config(&choices);
    let (lines, ignores) = report(system, dir, global, &choices, &text);
    let text = with_cycle_proposal(text, &ignores);
    if !global.quiet {
        if let Some(why) = why.filter(|_| choices.pattern == proposed) {
            writeln!(stderr, "{}", terraci_db::escape::printable_lines(&why))?;
        }
        for line in lines {
            writeln!(stderr, "{}", terraci_db::escape::printable_lines(&line))?;
        }
    }
    if args.dry_run {
        stdout.write_all(text.as_bytes())?;
        return Ok(());
    }
    // Inside the project, following no symlink below it (a committed link is replaced);
    // an explicit `--config` elsewhere is the user's own path.
    let written = if target.starts_with(dir) {
        system.write_beneath(dir, &target, &[text.as_bytes()])
    } else {
        system.write_atomic(&target, text.as_bytes())
    };
    written.map_err(|source| InitError::Write {
        path: shown.clone().into(),
        source,
    })?;
    let ignored = ignore_run_outputs(system, dir).map_err(|source| InitError::Write {
        path: ".gitignore".into(),
        source,
    })?;
    if !global.quiet {
        writeln!(stderr, "wrote {shown}")?;
        if ignored > 0 {
            writeln!(
                stderr,
                "added {ignored} entries to .gitignore (what terraform and terraci runs leave behind)"
            )?;
        }
        let output = crate::watch::default_output(match choices.provider {
            InitProvider::Gitlab => terraci_render::Provider::Gitlab,
            InitProvider::Github => terraci_render::Provider::Github,
        });
        writeln!(
            stderr,
            "next: `terraci validate`, then `terraci generate -o {output}`"
        )?;
    }
    Ok(())
}

/// What terraform and terraci runs leave in a checkout: `--changed-only` never counts
/// them as changes, and `init` adds them to `.gitignore` so that nobody commits them.
const RUN_OUTPUTS: [&str; 7] = [
    ".terraform/",
    "*.tfplan",
    "plan.txt",
    "plan.json",
    "plan.result.json",
    ".terraci/logs/",
    ".terraci/cache/",
];

/// Appends the [`RUN_OUTPUTS`] that `.gitignore` (of the project directory) lacks; how
/// many it added. Lines already there, in any order, are kept as they are.
fn ignore_run_outputs(system: &dyn System, dir: &Utf8Path) -> std::io::Result<usize> {
    let path = dir.join(".gitignore");
    let policy = terraci_db::system::ReadPolicy::new(system, dir, 1 << 20);
    let old = match system.read_confined(&path, &policy, false) {
        Ok((bytes, _)) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(terraci_db::system::ReadError::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
            String::new()
        }
        Err(e) => return Err(std::io::Error::other(e.to_string())),
    };
    let have: std::collections::BTreeSet<&str> = old.lines().map(str::trim).collect();
    let missing: Vec<&str> = RUN_OUTPUTS
        .into_iter()
        .filter(|p| !have.contains(p) && !have.contains(p.trim_end_matches('/')))
        .collect();
    if missing.is_empty() {
        return Ok(0);
    }
    let mut text = old.clone();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if !text.is_empty() {
        text.push('\n');
    }
    text.push_str("# What terraform and terraci runs leave behind (added by `terraci init`)\n");
    for p in &missing {
        text.push_str(p);
        text.push('\n');
    }
    // A committed link in its place is replaced, never followed.
    system.write_beneath(dir, &path, &[text.as_bytes()])?;
    Ok(missing.len())
}

/// The config's commented `dependencies` example replaced, when the graph has cycles, by
/// the fewest `dependencies.ignore` entries that break them, still commented out: which
/// read does not need its state written first is the user's call.
fn with_cycle_proposal(text: String, ignores: &[String]) -> String {
    const EXAMPLE: &str = "# dependencies:     # edges to add, found edges to ignore\n\
                           #   add: [{from: \"*/*/*/app\", to: \"*/*/*/dns\", reason: \"...\"}]\n\
                           #   ignore: []\n";
    if ignores.is_empty() || !text.contains(EXAMPLE) {
        return text;
    }
    let mut proposal = String::from(
        "# The modules read each other in a cycle, and `generate` refuses cycles. These are\n\
         # the fewest edges whose removal breaks every cycle; uncomment them once you know\n\
         # which read does not need the other's state written first (`terraci validate`\n\
         # shows each cycle):\n",
    );
    for line in ignores {
        proposal.push_str(&format!("# {line}\n"));
    }
    text.replacen(EXAMPLE, &proposal, 1)
}

/// What `init` read and what the config it writes gives: the libraries, the files it
/// took settings from, and the graph of the project under that config (modules, edges,
/// cycles, references left without an edge), for stderr; and, when the graph has cycles,
/// the `dependencies.ignore` section that breaks them ([`with_cycle_proposal`]). The
/// project is loaded without the fact cache, so `init` writes nothing but the config.
fn report(
    system: &dyn System,
    dir: &Utf8Path,
    global: &GlobalArgs,
    choices: &Choices,
    text: &str,
) -> (Vec<String>, Vec<String>) {
    let mut lines = Vec::new();
    if !choices.libraries.is_empty() {
        let shown: Vec<&str> = choices.libraries.iter().map(|(d, _)| d.as_str()).collect();
        lines.push(format!(
            "libraries (local module sources, never planned): {}",
            shown.join(", ")
        ));
    }
    let evidence = &choices.evidence;
    if !evidence.used.is_empty() {
        let files: Vec<&str> = evidence.used.iter().map(String::as_str).collect();
        lines.push(format!(
            "read {}: {} backend_config and {} variables entries written, {} noted but not written",
            files.join(", "),
            evidence.backend_config.len(),
            evidence.variables.len(),
            evidence.notes.len()
        ));
    }
    let Ok(config) = terraci_db::config::load_config_text(text, ".terraci.yaml") else {
        return (lines, Vec::new());
    };
    let mut quiet = global.clone();
    quiet.dir = Some(dir.to_owned());
    quiet.no_cache = true;
    let start = crate::workspace::Start {
        config: Some(config),
        ..crate::workspace::Start::default()
    };
    let Ok(mut ws) = crate::workspace::load_workspace_overlapped(
        system,
        &quiet,
        &crate::cli::EvalArgs::default(),
        start,
    ) else {
        return (lines, Vec::new());
    };
    ws.wait_for_cache();
    let graph = terraci_engine::graph::dependency_graph(&ws.db, ws.project);
    let edges = graph.edge_count();
    let open = ws
        .all_diagnostics()
        .iter()
        .filter(|d| {
            matches!(
                d.code,
                Code::UnresolvedRemoteState
                    | Code::UnmatchedRemoteState
                    | Code::AmbiguousRemoteState
            )
        })
        .count();
    let cycles = match graph.cycles.len() {
        1 => "1 cycle".to_owned(),
        n => format!("{n} cycles"),
    };
    lines.push(format!(
        "graph: {} modules, {edges} edges, {cycles}, {open} references without an edge{}",
        graph.modules.len(),
        if open > 0 || !graph.cycles.is_empty() {
            " (`terraci validate` says why)"
        } else {
            ""
        }
    ));
    let ignores = match graph.proposed_ignores.is_empty() {
        true => Vec::new(),
        false => {
            lines.push(format!(
                "{cycles}: the config proposes {} dependencies.ignore entries that break them, commented out",
                graph.proposed_ignores.len()
            ));
            terraci_engine::graph::ignore_yaml(&graph.proposed_ignores)
        }
    };
    ws.dismiss();
    (lines, ignores)
}

/// The flags, else: gitlab unless the project only has GitHub workflows, terraform, and
/// the pattern that fits where the tree's Terraform files are (the default pattern in a
/// tree without any), with a line for stderr that says why.
fn default_choices(
    system: &dyn System,
    dir: &Utf8Path,
    args: &InitArgs,
) -> (Choices, Option<String>) {
    let provider = args.provider.unwrap_or_else(|| {
        let github = system.is_dir(&dir.join(".github/workflows"));
        let gitlab = system.is_file(&dir.join(".gitlab-ci.yml"));
        if github && !gitlab {
            InitProvider::Github
        } else {
            InitProvider::Gitlab
        }
    });
    let binary = match args.binary {
        Some(InitBinary::Tofu) => Binary::Tofu,
        Some(InitBinary::Terraform) | None => Binary::Terraform,
    };
    let found = propose(system, dir);
    let (pattern, why, roots_note) = match &args.pattern {
        Some(pattern) => (pattern.clone(), None, None),
        None => (found.pattern, found.why, found.roots_note),
    };
    (
        Choices {
            provider,
            binary,
            pattern,
            libraries: found.libraries,
            roots_note,
            evidence: found.evidence,
        },
        why,
    )
}

/// What `init` proposes for the tree below `dir`.
struct Found {
    /// A pattern, or [`ROOTS`].
    pattern: String,
    why: Option<String>,
    roots_note: Option<String>,
    libraries: Vec<(String, String)>,
    evidence: evidence::Evidence,
}

/// The roots below `dir` are every directory with Terraform files that no local module
/// call names as its source (the libraries). One pattern when every root fits it (all
/// at one depth, or below a root at that depth), else `discovery: roots`.
fn propose(system: &dyn System, dir: &Utf8Path) -> Found {
    let policy =
        terraci_db::system::ReadPolicy::new(system, dir, terraci_db::system::DEFAULT_MAX_FILE_SIZE);
    let discovered =
        terraci_engine::discover::discover_modules(system, &policy, &Pattern::roots(), &[]);
    let ids: std::collections::BTreeSet<&str> = discovered
        .modules
        .iter()
        .map(|m| m.info.id.as_str())
        .collect();
    let roots: Vec<&str> = discovered
        .modules
        .iter()
        .filter(|m| m.info.is_root())
        .map(|m| m.info.id.as_str())
        .collect();
    // Listed: each call target that is a module here and not inside another listed one.
    let targets: Vec<(&String, &String)> = discovered
        .called
        .iter()
        .filter(|(target, _)| ids.contains(target.as_str()))
        .collect();
    let libraries: Vec<(String, String)> = targets
        .iter()
        .filter(|(target, _)| {
            !targets
                .iter()
                .any(|(other, _)| target.starts_with(&format!("{other}/")))
        })
        .map(|(target, caller)| ((*target).clone(), (*caller).clone()))
        .collect();
    let evidence = evidence::gather(
        system,
        dir,
        &roots.iter().map(|r| (*r).to_owned()).collect(),
    );
    let depth_of = |d: &str| d.split('/').count();
    let Some(shallowest) = roots.iter().map(|d| depth_of(d)).min() else {
        let pattern = Structure::default().pattern;
        let why = format!("pattern {pattern} (the default): no Terraform files found yet");
        return Found {
            pattern,
            why: Some(why),
            roots_note: None,
            libraries,
            evidence,
        };
    };
    let root_set: std::collections::BTreeSet<&str> = roots.iter().copied().collect();
    let fits = roots.iter().all(|d| {
        let parts: Vec<&str> = d.split('/').collect();
        parts.len() == shallowest || root_set.contains(parts[..shallowest].join("/").as_str())
    });
    let at_depth: Vec<&str> = roots
        .iter()
        .copied()
        .filter(|d| depth_of(d) == shallowest)
        .collect();
    match terraci_engine::discover::propose_pattern(&at_depth).filter(|_| fits) {
        Some(p) => {
            let levels = if p.depth == 1 { "level" } else { "levels" };
            let why = format!(
                "pattern {}: the root modules here are {} {levels} deep (e.g. `{}`)",
                p.pattern, p.depth, p.example
            );
            Found {
                pattern: p.pattern,
                why: Some(why),
                roots_note: None,
                libraries,
                evidence,
            }
        }
        None => {
            let depths: std::collections::BTreeSet<usize> =
                roots.iter().map(|d| depth_of(d)).collect();
            let depths: Vec<String> = depths.iter().map(usize::to_string).collect();
            let note = format!(
                "root modules at depths {}: no single pattern fits them all",
                depths.join(", ")
            );
            Found {
                pattern: ROOTS.to_owned(),
                why: Some(format!("discovery: roots ({note})")),
                roots_note: Some(note),
                libraries,
                evidence,
            }
        }
    }
}

/// Asks the three questions; an empty answer (or end of input) keeps the default shown in
/// brackets, an answer that is not a choice asks again.
pub(crate) fn ask(
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    defaults: Choices,
) -> Result<Choices, InitError> {
    let provider = ask_choice(
        input,
        out,
        "CI provider",
        &["gitlab", "github"],
        match defaults.provider {
            InitProvider::Gitlab => "gitlab",
            InitProvider::Github => "github",
        },
    )?;
    let binary = ask_choice(
        input,
        out,
        "Terraform binary",
        &["terraform", "tofu"],
        defaults.binary.command(),
    )?;
    let pattern = loop {
        let answer = ask_line(
            input,
            out,
            "Directory pattern (or `roots`)",
            &defaults.pattern,
        )?;
        match check_pattern(&answer) {
            Ok(()) => break answer,
            Err(reason) => writeln!(out, "  invalid pattern: {reason}")?,
        }
    };
    Ok(Choices {
        provider: if provider == "github" {
            InitProvider::Github
        } else {
            InitProvider::Gitlab
        },
        binary: if binary == "tofu" {
            Binary::Tofu
        } else {
            Binary::Terraform
        },
        pattern,
        libraries: defaults.libraries,
        roots_note: defaults.roots_note,
        evidence: defaults.evidence,
    })
}

fn ask_choice(
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    question: &str,
    choices: &[&str],
    default: &str,
) -> Result<String, InitError> {
    let prompt = format!("{question} ({})", choices.join("/"));
    loop {
        let answer = ask_line(input, out, &prompt, default)?.to_ascii_lowercase();
        if choices.contains(&answer.as_str()) {
            return Ok(answer);
        }
        writeln!(out, "  please answer one of: {}", choices.join(", "))?;
    }
}

fn ask_line(
    input: &mut dyn BufRead,
    out: &mut dyn Write,
    prompt: &str,
    default: &str,
) -> Result<String, InitError> {
    write!(out, "{prompt} [{default}]: ")?;
    out.flush()?;
    let mut line = String::new();
    if input.read_line(&mut line)? == 0 {
        // End of input: take the default rather than asking forever.
        writeln!(out)?;
        return Ok(default.to_owned());
    }
    let answer = line.trim();
    Ok(if answer.is_empty() {
        default.to_owned()
    } else {
        answer.to_owned()
    })
}

/// The config text: the chosen keys, the defaults worth seeing, and a comment on each.
pub(crate) fn render_config(choices: &Choices) -> String {
    let binary = choices.binary.command();
    let provider = match choices.provider {
        InitProvider::Gitlab => format!(
            "  gitlab:\n\
             \x20   # Image of every job; by default the official image of execution.binary.\n\
             \x20   # Its entrypoint is the binary: `[\"\"]` gives GitLab's docker runner a shell.\n\
             \x20   image:\n\
             \x20     name: {image}\n\
             \x20     entrypoint: [\"\"]\n\
             \x20   # Stages are named <stages_prefix>-<level>.\n\
             \x20   stages_prefix: deploy\n\
             \x20   # Per-module .terraform/ cache.\n\
             \x20   cache_enabled: true\n\
             \x20   # Apply jobs wait for a click (as in TerraCi); `true` applies on success.\n\
             \x20   auto_approve: false\n\
             \x20   # The merge-request summary job runs terraci, which the official image lacks\n\
             \x20   # (`generate` warns: image-without-terraci). An image with both (the\n\
             \x20   # Dockerfile in terraci's repository builds one):\n\
             \x20   # mr:\n\
             \x20   #   summary_job:\n\
             \x20   #     image: registry.example.com/terraci:1\n",
            image = terraci_render::default_image(choices.binary, None),
        ),
        InitProvider::Github => "  github:\n\
             \x20   runs_on: ubuntu-latest\n\
             \x20   # Branch whose pushes run the workflow (pull requests always do).\n\
             \x20   default_branch: main\n\
             \x20   permissions:\n\
             \x20     contents: read\n\
             \x20   # Adds the setup-terraform / setup-opentofu step after the checkout.\n\
             \x20   setup_step: true\n"
            .to_owned(),
    };
    let structure = if choices.pattern == ROOTS {
        let note = choices.roots_note.as_deref().map_or(String::new(), |n| {
            format!("\x20 # {n}; TerraCi itself needs a pattern.\n")
        });
        format!(
            "\x20 # Every directory with Terraform files is a root module, at any depth, but\n\
             \x20 # the libraries (below, and any directory a local module call names).\n\
             {note}\
             \x20 discovery: roots\n"
        )
    } else {
        format!(
            "\x20 # Directory layout of a root module; the last segment names the module.\n\
             \x20 pattern: {}\n",
            yaml_string(&choices.pattern)
        )
    };
    let libraries = if choices.libraries.is_empty() {
        "\x20 paths: []\n".to_owned()
    } else {
        let mut text = "\x20 paths:\n".to_owned();
        for (dir, caller) in &choices.libraries {
            text.push_str(&format!(
                "\x20   - {}  # called by {}\n",
                yaml_string(dir),
                escape_comment(caller)
            ));
        }
        text
    };
    let read = render_evidence(&choices.evidence);
    format!(
        "# terraci configuration. Every key is optional; `terraci schema` describes them all.\n\
         \n\
         structure:\n\
         {structure}\
         \n\
         # Globs on module ids (e.g. \"*/sandbox/**\"): matching modules get no jobs.\n\
         exclude: []\n\
         \n\
         library_modules:\n\
         \x20 # Directories of shared modules: dependencies, never targets.\n\
         {libraries}\
         \n\
         # What the code alone cannot say (see docs/configuration.md):\n\
         {read}\
         # dependencies:     # edges to add, found edges to ignore\n\
         #   add: [{{from: \"*/*/*/app\", to: \"*/*/*/dns\", reason: \"...\"}}]\n\
         #   ignore: []\n\
         # external_state:   # state other repositories own: listed, not warned about\n\
         #   - \"s3://other-team-state/*\"\n\
         \n\
         execution:\n\
         \x20 binary: {binary}\n\
         \x20 init_enabled: true\n\
         \n\
         extensions:\n\
         {provider}",
    )
}

/// The `variables` and `backend_config` read from the repository, each entry with the
/// files and lines it came from; the commented examples when nothing was read.
fn render_evidence(evidence: &evidence::Evidence) -> String {
    let mut out = String::new();
    let section = |out: &mut String, key: &str, what: &str, entries: &[evidence::Entry]| {
        if entries.is_empty() {
            return;
        }
        out.push_str(&format!("# {what}\n{key}:\n"));
        for e in entries {
            out.push_str(&format!(
                "  - modules: [{}]  # from {}\n",
                yaml_string(&e.module),
                escape_comment(&e.sources.join(", "))
            ));
            if !e.files.is_empty() {
                let files: Vec<String> = e.files.iter().map(|f| yaml_string(f)).collect();
                out.push_str(&format!("    files: [{}]\n", files.join(", ")));
            }
            if !e.values.is_empty() {
                let values: Vec<String> = e
                    .values
                    .iter()
                    .map(|(k, v)| format!("{}: {}", yaml_string(k), yaml_string(v)))
                    .collect();
                out.push_str(&format!("    values: {{{}}}\n", values.join(", ")));
            }
        }
        out.push('\n');
    };
    section(
        &mut out,
        "variables",
        "Variables the repository's commands pass (-var-file, -var, TF_VAR_*):",
        &evidence.variables,
    );
    section(
        &mut out,
        "backend_config",
        "What the repository gives `terraform init -backend-config` (backend files, commands):",
        &evidence.backend_config,
    );
    if evidence.variables.is_empty() {
        out.push_str(
            "# variables:        # values set in CI or kept in other tfvars, per module glob\n\
             #   - modules: [\"*/prod/**\"]\n\
             #     values: {stack: blue}\n\
             #     files: [\"../../vars/{environment}.tfvars\"]\n",
        );
    }
    if evidence.backend_config.is_empty() {
        out.push_str(
            "# backend_config:   # what `terraform init -backend-config` gives the modules\n\
             #   - modules: [\"**\"]\n\
             #     values: {key: \"{module_path}/terraform.tfstate\"}\n",
        );
    }
    if !evidence.notes.is_empty() {
        out.push_str("# Read but not written (the repository does not state one value):\n");
        for note in &evidence.notes {
            out.push_str(&format!("#   {}\n", escape_comment(note)));
        }
    }
    out
}

/// A directory name inside a YAML comment: one line.
fn escape_comment(text: &str) -> String {
    text.replace(['\n', '\r'], " ")
}

/// A YAML double-quoted scalar (a pattern starts with `{`, which plain YAML reads as a map).
fn yaml_string(text: &str) -> String {
    serde_json::to_string(text).expect("a string is always JSON")
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;

    use super::*;
    use terraci_db::config::parse_config;

    fn choices(provider: InitProvider, binary: Binary) -> Choices {
        Choices {
            provider,
            binary,
            pattern: "{team}/{stack}".into(),
            libraries: Vec::new(),
            roots_note: None,
            evidence: evidence::Evidence::default(),
        }
    }

    #[test]
    fn the_written_config_loads_with_the_choices() {
        for provider in [InitProvider::Gitlab, InitProvider::Github] {
            for binary in [Binary::Terraform, Binary::Tofu] {
                let text = render_config(&choices(provider, binary));
                let config = parse_config(&text, ".terraci.yaml").expect("loads");
                assert_eq!(config.structure.pattern, "{team}/{stack}");
                assert_eq!(config.execution.binary, binary);
                assert_eq!(
                    config.extensions.gitlab.is_some(),
                    provider == InitProvider::Gitlab
                );
                assert_eq!(
                    config.extensions.github.is_some(),
                    provider == InitProvider::Github
                );
            }
        }
        let text = render_config(&choices(InitProvider::Gitlab, Binary::Tofu));
        let gitlab = parse_config(&text, "t")
            .expect("loads")
            .extensions
            .gitlab
            .expect("gitlab");
        assert_eq!(
            gitlab.image.as_ref().map(|i| i.name().to_owned()),
            Some(terraci_render::default_image(Binary::Tofu, None))
        );
        assert_eq!(gitlab.auto_approve, Some(false));
    }

    #[test]
    fn prompts_take_defaults_and_ask_again_on_a_bad_answer() {
        let defaults = choices(InitProvider::Gitlab, Binary::Terraform);
        let mut out = Vec::new();
        let mut input = Cursor::new("GitHub\nterraformm\ntofu\n{a}/x\n{a}/{b}\n");
        let got = ask(&mut input, &mut out, defaults.clone()).expect("answers");
        assert_eq!(
            got,
            Choices {
                provider: InitProvider::Github,
                binary: Binary::Tofu,
                pattern: "{a}/{b}".into(),
                libraries: Vec::new(),
                roots_note: None,
                evidence: evidence::Evidence::default(),
            }
        );
        let transcript = String::from_utf8(out).expect("utf-8");
        insta::assert_snapshot!(transcript, @r"
        CI provider (gitlab/github) [gitlab]: Terraform binary (terraform/tofu) [terraform]:   please answer one of: terraform, tofu
        Terraform binary (terraform/tofu) [terraform]: Directory pattern (or `roots`) [{team}/{stack}]:   invalid pattern: segment `x` must be a name in braces, e.g. `{module}`
        Directory pattern (or `roots`) [{team}/{stack}]:
        ");

        let mut out = Vec::new();
        let got = ask(&mut Cursor::new("\n\n"), &mut out, defaults.clone()).expect("answers");
        assert_eq!(
            got, defaults,
            "empty answers and end of input keep defaults"
        );
    }
}
