//! `terraci init`: writes a starter `.terraci.yaml`.
//!
//! Input: the flags, or the answers to three questions on a terminal. Output: a commented
//! config file, written through `System`, that loads and generates without edits.

use std::io::{BufRead, Write};

use camino::{Utf8Path, Utf8PathBuf};

use crate::cli::{GlobalArgs, InitArgs, InitBinary, InitProvider};
use terraci_db::config::{find_config_file, Binary, Pattern, Structure};
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

    if args.dry_run {
        stdout.write_all(render_config(&choices).as_bytes())?;
        return Ok(());
    }
    // Inside the project, following no symlink below it (a committed link is replaced);
    // an explicit `--config` elsewhere is the user's own path.
    let rendered = render_config(&choices);
    let written = if target.starts_with(dir) {
        system.write_beneath(dir, &target, &[rendered.as_bytes()])
    } else {
        system.write_atomic(&target, rendered.as_bytes())
    };
    written.map_err(|source| InitError::Write {
        path: shown.clone().into(),
        source,
    })?;
    if !global.quiet {
        if let Some(why) = why.filter(|_| choices.pattern == proposed) {
            writeln!(stderr, "{why}")?;
        }
        let output = match choices.provider {
            InitProvider::Gitlab => ".gitlab-ci.yml",
            InitProvider::Github => ".github/workflows/terraform.yml",
        };
        writeln!(
            stderr,
            "wrote {shown}\nnext: `terraci validate`, then `terraci generate -o {output}`"
        )?;
    }
    Ok(())
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
    let depth_of = |d: &str| d.split('/').count();
    let Some(shallowest) = roots.iter().map(|d| depth_of(d)).min() else {
        let pattern = Structure::default().pattern;
        let why = format!("pattern {pattern} (the default): no Terraform files found yet");
        return Found {
            pattern,
            why: Some(why),
            roots_note: None,
            libraries,
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
             \x20   # Apply jobs wait for a click; remove to apply on success.\n\
             \x20   overwrites:\n\
             \x20     - type: apply\n\
             \x20       when: manual\n",
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
         # variables:        # values set in CI or kept in other tfvars, per module glob\n\
         #   - modules: [\"*/prod/**\"]\n\
         #     values: {{stack: blue}}\n\
         #     files: [\"../../vars/{{environment}}.tfvars\"]\n\
         # backend_config:   # what `terraform init -backend-config` gives the modules\n\
         #   - modules: [\"**\"]\n\
         #     values: {{key: \"{{module_path}}/terraform.tfstate\"}}\n\
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
    use terraci_db::config::{parse_config, GitLabWhen, OverwriteType};

    fn choices(provider: InitProvider, binary: Binary) -> Choices {
        Choices {
            provider,
            binary,
            pattern: "{team}/{stack}".into(),
            libraries: Vec::new(),
            roots_note: None,
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
        assert_eq!(gitlab.overwrites[0].job_type, OverwriteType::Apply);
        assert_eq!(gitlab.overwrites[0].when, Some(GitLabWhen::Manual));
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
