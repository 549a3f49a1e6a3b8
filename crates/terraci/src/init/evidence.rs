//! What the repository says about `terraform init` and variables, read the way a careful
//! engineer reads it before writing `backend_config` and `variables` by hand:
//!
//! - backend files beside a root (`backend.hcl`, `*.tfbackend`, `backend.conf`,
//!   `backend.config`, `*.backend`) or one level up: one file is what `terraform init
//!   -backend-config=FILE` is given; several (`dev.tfbackend`, `prod.tfbackend`) mean one
//!   directory deployed as several states, and none is written;
//! - command lines in CI files (`.gitlab-ci.yml`, `.github/workflows/*`), `Makefile`s,
//!   `*.mk`, shell scripts and fenced code in Markdown: `-backend-config=`, `-var-file=`,
//!   `-var` and `TF_VAR_*` settings, attributed to the root the command runs in
//!   (`-chdir=DIR`, else the last `cd DIR` before it in the same block, else the file's
//!   own directory when that is a root).
//!
//! Nothing is written that the repository does not state: a value built from a shell
//! variable (`key=${STACK}.tfstate`), a command whose directory is unknown, or a key given
//! two different values is a comment (a note), never an entry. Each entry names the file
//! and line it came from. Only text is read, through [`System::read_confined`]: nothing
//! in the checkout is run or expanded.

use std::collections::{BTreeMap, BTreeSet};

use camino::{Utf8Path, Utf8PathBuf};
use terraci_db::system::{normalize, ReadPolicy, System};

/// A `backend_config` or `variables` entry for one root.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) module: String,
    /// Relative to the module's directory.
    pub(crate) files: Vec<String>,
    pub(crate) values: BTreeMap<String, String>,
    /// Where each part came from (`file:line`), in the order found.
    pub(crate) sources: Vec<String>,
}

/// What was read, for the config and for `init`'s report.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Evidence {
    pub(crate) backend_config: Vec<Entry>,
    pub(crate) variables: Vec<Entry>,
    /// Comment lines for the config: what was found and deliberately not written.
    pub(crate) notes: Vec<String>,
    /// Every file that gave an entry or a note, project-relative.
    pub(crate) used: BTreeSet<String>,
}

/// The largest file read for command lines.
const MAX_TEXT: u64 = 1 << 20;
/// How deep the walk for command files goes.
const MAX_DEPTH: usize = 12;

/// Whether `name` is a backend settings file.
fn is_backend_file(name: &str) -> bool {
    matches!(name, "backend.hcl" | "backend.conf" | "backend.config")
        || name.ends_with(".tfbackend")
        || name.ends_with(".backend")
}

/// Which kind of command file `rel` is, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Shell,
    Make,
    /// CI YAML: `script:`/`run:` lines.
    Yaml,
    /// Only fenced code blocks are commands.
    Markdown,
}

fn command_file(rel: &str) -> Option<Kind> {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    if name.ends_with(".gitlab-ci.yml")
        || (rel.starts_with(".github/workflows/")
            && (name.ends_with(".yml") || name.ends_with(".yaml")))
    {
        return Some(Kind::Yaml);
    }
    if matches!(name, "Makefile" | "makefile" | "GNUmakefile") || name.ends_with(".mk") {
        return Some(Kind::Make);
    }
    if name.ends_with(".sh") || name.ends_with(".bash") {
        return Some(Kind::Shell);
    }
    name.ends_with(".md").then_some(Kind::Markdown)
}

/// Reads the evidence below `dir` for `roots` (project-relative ids).
pub(crate) fn gather(system: &dyn System, dir: &Utf8Path, roots: &BTreeSet<String>) -> Evidence {
    let policy = ReadPolicy::new(system, dir, MAX_TEXT);
    let name = |rel: &str| rel.rsplit('/').next().unwrap_or(rel).to_owned();
    let files = crate::workspace::files_below(
        system,
        dir,
        MAX_DEPTH,
        &[".github", ".github/workflows"],
        &|rel| is_backend_file(&name(rel)) || command_file(rel).is_some(),
    );
    let mut backend_files: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for rel in files.iter().filter(|rel| is_backend_file(&name(rel))) {
        let parent = rel.rsplit_once('/').map_or("", |(d, _)| d);
        backend_files
            .entry(parent.to_owned())
            .or_default()
            .push(name(rel));
    }
    let mut found = Found::default();
    for rel in &files {
        let Some(kind) = command_file(rel) else {
            continue;
        };
        let Ok((bytes, _)) = system.read_confined(&dir.join(rel), &policy, true) else {
            continue;
        };
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        scan(&text, rel, kind, roots, dir, system, &mut found);
    }
    beside_roots(roots, &backend_files, &mut found);
    found.finish()
}

/// One thing a command line said about a root.
#[derive(Debug, Clone)]
enum Said {
    BackendFile(String),
    BackendValue(String, String),
    VarFile(String),
    Var(String, String),
}

#[derive(Default)]
struct Found {
    /// root -> what was said, with `file:line`.
    backend: BTreeMap<String, Vec<(Said, String)>>,
    variables: BTreeMap<String, Vec<(Said, String)>>,
    notes: Vec<String>,
    used: BTreeSet<String>,
}

/// Backend files in a root, else one level up, for roots no command line gave files.
fn beside_roots(
    roots: &BTreeSet<String>,
    backend_files: &BTreeMap<String, Vec<String>>,
    found: &mut Found,
) {
    for root in roots {
        let given = found
            .backend
            .get(root)
            .is_some_and(|said| said.iter().any(|(s, _)| matches!(s, Said::BackendFile(_))));
        if given {
            continue;
        }
        let parent = root.rsplit_once('/').map_or("", |(p, _)| p);
        let (at, prefix) = match backend_files.get(root.as_str()) {
            Some(_) => (root.as_str(), ""),
            None if roots.contains(parent) => continue,
            None => match backend_files.get(parent) {
                Some(_) if root.as_str() != parent => (parent, "../"),
                _ => continue,
            },
        };
        let files = &backend_files[at];
        let shown = |f: &str| {
            if at.is_empty() {
                f.to_owned()
            } else {
                format!("{at}/{f}")
            }
        };
        match files.as_slice() {
            [one] => {
                found.used.insert(shown(one));
                found
                    .backend
                    .entry(root.clone())
                    .or_default()
                    .push((Said::BackendFile(format!("{prefix}{one}")), shown(one)));
            }
            several => {
                let names: Vec<&str> = several.iter().map(String::as_str).collect();
                for f in several {
                    found.used.insert(shown(f));
                }
                found.notes.push(format!(
                    "{root}: {} backend files {} ({}): one state per environment, none written; pick one with backend_config: [{{modules: [\"{root}\"], files: [\"{prefix}{}\"]}}]",
                    names.len(),
                    if prefix.is_empty() { "beside it" } else { "one level up" },
                    names.join(", "),
                    names[0]
                ));
            }
        }
    }
}

impl Found {
    fn finish(self) -> Evidence {
        let mut notes = self.notes;
        let backend_config = entries(self.backend, "backend_config", &mut notes);
        let variables = entries(self.variables, "variables", &mut notes);
        notes.sort();
        notes.dedup();
        Evidence {
            backend_config,
            variables,
            notes,
            used: self.used,
        }
    }
}

/// Per root: the files in the order found, the values; a key said with two values
/// (per-environment jobs) is left out with a note.
fn entries(
    by_root: BTreeMap<String, Vec<(Said, String)>>,
    key: &str,
    notes: &mut Vec<String>,
) -> Vec<Entry> {
    let mut out = Vec::new();
    for (module, said) in by_root {
        let mut entry = Entry {
            module: module.clone(),
            ..Entry::default()
        };
        let mut values: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        let mut files: BTreeSet<String> = BTreeSet::new();
        for (s, at) in said {
            match s {
                Said::BackendFile(f) | Said::VarFile(f) => {
                    if files.insert(f.clone()) {
                        entry.files.push(f);
                    }
                }
                Said::BackendValue(k, v) | Said::Var(k, v) => {
                    values.entry(k).or_default().insert(v);
                }
            }
            if !entry.sources.contains(&at) {
                entry.sources.push(at);
            }
        }
        if files.len() > 1 && key == "backend_config" {
            // Several files for one root from several commands: environments.
            notes.push(format!(
                "{module}: `-backend-config` files {}: one state per environment, none written",
                entry.files.join(", ")
            ));
            entry.files.clear();
        }
        for (k, vs) in values {
            if vs.len() == 1 {
                entry.values.insert(k, vs.into_iter().next().expect("one"));
            } else {
                let vs: Vec<String> = vs.into_iter().collect();
                notes.push(format!(
                    "{module}: `{k}` is given {} values ({}): one per environment, none written",
                    vs.len(),
                    vs.join(", ")
                ));
            }
        }
        if !entry.files.is_empty() || !entry.values.is_empty() {
            out.push(entry);
        }
    }
    out
}

/// The logical lines of `text` that are commands, with their 1-based line numbers and
/// whether a new block starts there, where a `cd` stops applying: a fenced block in
/// Markdown, a top-level key (a job) in CI YAML, every recipe line of a Makefile (each
/// runs in its own shell); a shell script is one block.
fn logical_lines(text: &str, kind: Kind) -> Vec<(usize, String, bool)> {
    let mut out = Vec::new();
    let mut fenced = false;
    let mut pending: Option<(usize, String, bool)> = None;
    let mut new_block = true;
    for (i, raw) in text.lines().enumerate() {
        let trimmed = raw.trim();
        match kind {
            Kind::Markdown => {
                if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
                    fenced = !fenced;
                    new_block = true;
                    continue;
                }
                if !fenced {
                    continue;
                }
            }
            Kind::Yaml => {
                if pending.is_none() && !raw.is_empty() && !raw.starts_with([' ', '\t']) {
                    new_block = true;
                }
            }
            Kind::Make => {
                if pending.is_none() {
                    new_block = true;
                }
            }
            Kind::Shell => {}
        }
        let (n, mut acc, block) = match pending.take() {
            Some((n, mut acc, block)) => {
                acc.push(' ');
                acc.push_str(trimmed);
                (n, acc, block)
            }
            None => (i + 1, trimmed.to_owned(), std::mem::take(&mut new_block)),
        };
        if acc.ends_with('\\') {
            acc.pop();
            pending = Some((n, acc, block));
            continue;
        }
        out.push((n, acc, block));
    }
    if let Some(p) = pending {
        out.push(p);
    }
    out
}

/// Splits a command line into words, as a POSIX shell would before expansion: quotes
/// removed, `$` left in place (a word with `$` is then known to be unknown). Operators
/// (`&&`, `||`, `;`, `|`) are words of their own.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut has = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                has = true;
                for c in chars.by_ref() {
                    if c == '\'' {
                        break;
                    }
                    cur.push(c);
                }
            }
            '"' => {
                has = true;
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(n) = chars.next() {
                                cur.push(n);
                            }
                        }
                        _ => cur.push(c),
                    }
                }
            }
            '\\' => {
                has = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            '#' if !has => break,
            c if c.is_whitespace() => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
            }
            ';' | '|' | '&' | '(' | ')' => {
                if has {
                    out.push(std::mem::take(&mut cur));
                    has = false;
                }
                let mut op = c.to_string();
                if matches!(c, '|' | '&') && chars.peek() == Some(&c) {
                    op.push(chars.next().expect("peeked"));
                }
                out.push(op);
            }
            _ => {
                has = true;
                cur.push(c);
            }
        }
    }
    if has {
        out.push(cur);
    }
    out
}

/// The root that `path` (as written in `file`) names: relative to the project, else to
/// the file's directory.
fn root_named(path: &str, base: &str, file_dir: &str, roots: &BTreeSet<String>) -> Option<String> {
    if path.contains('$') || path.starts_with('/') {
        return None;
    }
    for from in [base, file_dir, ""] {
        let joined = normalize(&Utf8Path::new(from).join(path));
        let joined = joined.as_str().trim_end_matches('/');
        if roots.contains(joined) {
            return Some(joined.to_owned());
        }
    }
    None
}

/// Scans one file's command lines.
fn scan(
    text: &str,
    rel: &str,
    kind: Kind,
    roots: &BTreeSet<String>,
    dir: &Utf8Path,
    system: &dyn System,
    found: &mut Found,
) {
    let file_dir = rel.rsplit_once('/').map_or("", |(d, _)| d);
    // The directory a `cd` moved to, project-relative (`$` when a shell variable).
    let mut cwd: Option<String> = None;
    // A CI job's `TF_VAR_x: v` variables, for the root its commands run in.
    let mut job_vars: Vec<(String, String, String)> = Vec::new();
    let unused = |job_vars: &mut Vec<(String, String, String)>, found: &mut Found| {
        for (name, _, at) in job_vars.drain(..) {
            found.notes.push(format!(
                "`TF_VAR_{name}` at {at}: not written, no terraform command of its job names a root module"
            ));
        }
    };
    for (line_no, line, block) in logical_lines(text, kind) {
        if block {
            cwd = None;
            unused(&mut job_vars, found);
        }
        let at = format!("{rel}:{line_no}");
        let all = words(&line);
        if kind == Kind::Yaml {
            if let [key, value] = all.as_slice() {
                if let Some(name) = key
                    .strip_prefix("TF_VAR_")
                    .and_then(|k| k.strip_suffix(':'))
                {
                    found.used.insert(rel.to_owned());
                    if is_name(name) {
                        job_vars.push((name.to_owned(), value.clone(), at));
                    }
                    continue;
                }
            }
        }
        // YAML list items and keys (`- cd x && ...`, `run: terraform ...`), console
        // prompts in Markdown (`$ terraform init`).
        let all: Vec<String> = all
            .into_iter()
            .skip_while(|w| matches!(w.as_str(), "-" | "$" | "%" | ">") || w.ends_with(':'))
            .collect();
        for command in
            all.split(|w| matches!(w.as_str(), "&&" | "||" | ";" | "|" | "&" | "(" | ")"))
        {
            let mut env: Vec<(String, String)> = Vec::new();
            let mut rest = command;
            while let Some((first, tail)) = rest.split_first() {
                if first == "export" || first == "env" {
                    rest = tail;
                    continue;
                }
                match first.split_once('=') {
                    Some((k, v)) if is_name(k) => {
                        env.push((k.to_owned(), v.to_owned()));
                        rest = tail;
                    }
                    _ => break,
                }
            }
            let Some((program, args)) = rest.split_first() else {
                // Only assignments (`export TF_VAR_x=y`): they apply to what follows.
                for (k, v) in env {
                    if let Some(name) = k.strip_prefix("TF_VAR_") {
                        tf_var(name, &v, cwd.as_deref(), file_dir, roots, &at, found);
                    }
                }
                continue;
            };
            if program == "cd" {
                cwd = args.first().map(|d| {
                    root_named(d, cwd.as_deref().unwrap_or(""), file_dir, roots).unwrap_or_else(
                        || {
                            if d.contains('$') {
                                "$".to_owned()
                            } else {
                                normalize(&Utf8Path::new(cwd.as_deref().unwrap_or("")).join(d))
                                    .to_string()
                            }
                        },
                    )
                });
                continue;
            }
            let program = program.rsplit('/').next().unwrap_or(program);
            if !matches!(program, "terraform" | "tofu") {
                continue;
            }
            for (k, v) in &env {
                if let Some(name) = k.strip_prefix("TF_VAR_") {
                    tf_var(name, v, cwd.as_deref(), file_dir, roots, &at, found);
                }
            }
            if !job_vars.is_empty() && working_root(None, cwd.as_deref(), file_dir, roots).is_ok() {
                for (name, value, var_at) in job_vars.drain(..) {
                    tf_var(
                        &name,
                        &value,
                        cwd.as_deref(),
                        file_dir,
                        roots,
                        &var_at,
                        found,
                    );
                }
            }
            command_args(
                args,
                cwd.as_deref(),
                file_dir,
                roots,
                dir,
                system,
                rel,
                &at,
                found,
            );
        }
    }
    unused(&mut job_vars, found);
}

fn is_name(k: &str) -> bool {
    !k.is_empty()
        && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !k.starts_with(|c: char| c.is_ascii_digit())
}

/// The root a command runs in: `-chdir`, else the `cd`, else the file's own directory.
fn working_root(
    chdir: Option<&str>,
    cwd: Option<&str>,
    file_dir: &str,
    roots: &BTreeSet<String>,
) -> Result<String, String> {
    if let Some(d) = chdir {
        return root_named(d, cwd.unwrap_or(""), file_dir, roots)
            .ok_or_else(|| format!("`-chdir={d}` is no root module"));
    }
    match cwd {
        Some("$") => Err("it runs in a directory set by a shell variable".to_owned()),
        Some(d) if roots.contains(d) => Ok(d.to_owned()),
        Some(d) => Err(format!("it runs in `{d}`, which is no root module")),
        None if roots.contains(file_dir) => Ok(file_dir.to_owned()),
        None => Err("the command names no root module (no `-chdir`, no `cd`)".to_owned()),
    }
}

fn tf_var(
    name: &str,
    value: &str,
    cwd: Option<&str>,
    file_dir: &str,
    roots: &BTreeSet<String>,
    at: &str,
    found: &mut Found,
) {
    found
        .used
        .insert(at.rsplit_once(':').map_or(at, |(f, _)| f).to_owned());
    match working_root(None, cwd, file_dir, roots) {
        Ok(root) if !value.contains('$') => found
            .variables
            .entry(root)
            .or_default()
            .push((Said::Var(name.to_owned(), value.to_owned()), at.to_owned())),
        Ok(root) => found.notes.push(format!(
            "{root}: `TF_VAR_{name}` at {at} is set from a shell variable; not written"
        )),
        Err(why) => found
            .notes
            .push(format!("`TF_VAR_{name}` at {at}: not written, {why}")),
    }
}

#[allow(clippy::too_many_arguments)]
fn command_args(
    args: &[String],
    cwd: Option<&str>,
    file_dir: &str,
    roots: &BTreeSet<String>,
    dir: &Utf8Path,
    system: &dyn System,
    rel: &str,
    at: &str,
    found: &mut Found,
) {
    // (flag, value) pairs: `-backend-config=x`, `-backend-config x`, `--var-file=x`.
    let mut chdir = None;
    let mut pairs = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].trim_start_matches('-');
        let dashed = args[i].starts_with('-');
        let (flag, value) = match a.split_once('=') {
            Some((f, v)) if dashed => (f, Some(v.to_owned())),
            _ if dashed && matches!(a, "backend-config" | "var-file" | "var" | "chdir") => {
                i += 1;
                (a, args.get(i).cloned())
            }
            _ => (a, None),
        };
        i += 1;
        let Some(value) = value else { continue };
        match flag {
            "chdir" => chdir = Some(value),
            "backend-config" | "var-file" | "var" => pairs.push((flag.to_owned(), value)),
            _ => {}
        }
    }
    if pairs.is_empty() {
        return;
    }
    found.used.insert(rel.to_owned());
    let root = match working_root(chdir.as_deref(), cwd, file_dir, roots) {
        Ok(root) => root,
        Err(why) => {
            let flags: Vec<String> = pairs.iter().map(|(f, v)| format!("-{f}={v}")).collect();
            found
                .notes
                .push(format!("{at}: {}: not written, {why}", flags.join(" ")));
            return;
        }
    };
    for (flag, value) in pairs {
        if value.contains('$') {
            found.notes.push(format!(
                "{root}: `-{flag}={value}` at {at} uses a shell variable; not written"
            ));
            continue;
        }
        let said = match flag.as_str() {
            "backend-config" | "var" => match value.split_once('=') {
                Some((k, v)) if is_name(k) || flag == "backend-config" => {
                    if flag == "var" {
                        Said::Var(k.to_owned(), v.to_owned())
                    } else {
                        Said::BackendValue(k.to_owned(), v.to_owned())
                    }
                }
                _ if flag == "backend-config" => match file_of(&value, &root, dir, system) {
                    Some(f) => Said::BackendFile(f),
                    None => {
                        found.notes.push(format!(
                            "{root}: `-backend-config={value}` at {at} names no file of the repository; not written"
                        ));
                        continue;
                    }
                },
                _ => continue,
            },
            _ => match file_of(&value, &root, dir, system) {
                Some(f) => Said::VarFile(f),
                None => {
                    found.notes.push(format!(
                        "{root}: `-var-file={value}` at {at} names no file of the repository; not written"
                    ));
                    continue;
                }
            },
        };
        let target = if matches!(said, Said::BackendFile(_) | Said::BackendValue(..)) {
            &mut found.backend
        } else {
            &mut found.variables
        };
        target
            .entry(root.clone())
            .or_default()
            .push((said, at.to_owned()));
    }
}

/// `path` as a `-backend-config`/`-var-file` argument of a command run in `root`: the
/// path relative to the root when the file is in the repository.
fn file_of(path: &str, root: &str, dir: &Utf8Path, system: &dyn System) -> Option<String> {
    if path.starts_with('/') {
        return None;
    }
    let joined = normalize(&Utf8Path::new(root).join(path));
    if joined.as_str().starts_with("..") {
        return None;
    }
    system
        .is_file(&dir.join(&joined))
        .then(|| Utf8PathBuf::from(path).to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_like_a_shell_before_expansion() {
        assert_eq!(
            words(r#"cd stacks/app && terraform init -backend-config="key=a b" -var 'x=1' # c"#),
            [
                "cd",
                "stacks/app",
                "&&",
                "terraform",
                "init",
                "-backend-config=key=a b",
                "-var",
                "x=1"
            ]
        );
        assert_eq!(words("a;b|c||d"), ["a", ";", "b", "|", "c", "||", "d"]);
        assert_eq!(words("echo ${X}/y"), ["echo", "${X}/y"]);
    }

    #[test]
    fn continued_lines_are_one_command_at_their_first_line() {
        let text = "x:\n  terraform init \\\n    -backend-config=k=v\nother\n";
        let lines = logical_lines(text, Kind::Yaml);
        assert_eq!(
            lines[1],
            (2, "terraform init  -backend-config=k=v".to_owned(), false)
        );
        assert!(lines[2].2, "a top-level line starts a block");
        let md = "text -var-file=no.tfvars\n```sh\nterraform plan -var-file=a.tfvars\n```\n";
        let lines = logical_lines(md, Kind::Markdown);
        assert_eq!(lines.len(), 1);
        assert_eq!(lines[0].0, 3);
    }
}
