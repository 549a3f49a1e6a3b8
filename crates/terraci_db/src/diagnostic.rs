//! Diagnostics are values: stages return them, the edge renders them once.
//!
//! Inside queries a diagnostic points at an expression node through an [`Anchor`]
//! (span-free, so a whitespace edit does not change it); [`terraci_engine::parse::locate`] turns the
//! anchor into a line and column when the diagnostic is printed.

use std::fmt::Write as _;

use serde::Serialize;

use crate::files::File;
use crate::syntax::{Name, NodeId};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Info => "info",
        }
    }
}

/// Which attribute of which block an expression came from.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ItemPath {
    /// Block type and labels: `["data", "terraform_remote_state", "vpc"]`, `["locals"]`.
    pub block: Vec<Name>,
    /// Nested block names then the attribute: `["config"]`, `["backend", "key"]`.
    pub attr: Vec<Name>,
}

/// A span-free pointer at an expression node.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Anchor {
    pub file: File,
    pub item: ItemPath,
    pub node: NodeId,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Stable kebab-case code, listed by `terraci explain-codes`.
    pub code: Code,
    pub module: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    pub message: String,
    /// Lines printed below the message, indented (the cycles of a `dependency-cycle`);
    /// in JSON they follow the message, each on its own line.
    pub details: Vec<String>,
    pub anchor: Option<Anchor>,
}

/// `severity`, `code`, `module`, `file`, `line`, `column`, `message` (with its details).
impl Serialize for Diagnostic {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("Diagnostic", 7)?;
        s.serialize_field("severity", &self.severity)?;
        s.serialize_field("code", &self.code)?;
        s.serialize_field("module", &self.module)?;
        s.serialize_field("file", &self.file)?;
        s.serialize_field("line", &self.line)?;
        s.serialize_field("column", &self.column)?;
        s.serialize_field("message", &self.full_message())?;
        s.end()
    }
}

impl Diagnostic {
    pub fn new(severity: Severity, code: Code, message: impl Into<String>) -> Self {
        Diagnostic {
            severity,
            code,
            module: None,
            file: None,
            line: None,
            column: None,
            message: message.into(),
            details: Vec::new(),
            anchor: None,
        }
    }

    pub fn error(code: Code, message: impl Into<String>) -> Self {
        Self::new(Severity::Error, code, message)
    }

    pub fn warning(code: Code, message: impl Into<String>) -> Self {
        Self::new(Severity::Warning, code, message)
    }

    pub fn with_module(mut self, module: impl Into<String>) -> Self {
        self.module = Some(module.into());
        self
    }

    pub fn with_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }

    pub fn at(mut self, line: u32, column: u32) -> Self {
        self.line = Some(line);
        self.column = Some(column);
        self
    }

    /// Adds lines printed below the message ([`Diagnostic::details`]).
    pub fn with_details(mut self, details: impl IntoIterator<Item = String>) -> Self {
        self.details.extend(details);
        self
    }

    /// The message with its [`Diagnostic::details`], each on a line of its own indented by
    /// two spaces: what JSON outputs carry as `message`.
    pub fn full_message(&self) -> std::borrow::Cow<'_, str> {
        if self.details.is_empty() {
            return self.message.as_str().into();
        }
        let mut text = self.message.clone();
        for line in &self.details {
            text.push_str("\n  ");
            text.push_str(line);
        }
        text.into()
    }

    pub fn with_anchor(mut self, anchor: Anchor) -> Self {
        self.anchor = Some(anchor);
        self
    }

    /// Sort key: file, position, code, message: the order diagnostics are printed in.
    pub fn sort_key(&self) -> (Option<&str>, Option<&str>, u32, u32, &str, &str) {
        (
            self.module.as_deref(),
            self.file.as_deref(),
            self.line.unwrap_or(0),
            self.column.unwrap_or(0),
            self.code.as_str(),
            &self.message,
        )
    }

    /// `warning[code]: file:line:col: message`, then the source line and a caret.
    /// Repository text (paths, the message's values, the source line) is printed with
    /// control characters escaped, and the source line only as a [`SNIPPET_CHARS`]-wide
    /// window around the column: a minified 50 MB line prints a line, not 50 MB.
    pub fn render_human(&self, source_line: Option<&str>) -> String {
        self.render_human_styled(source_line, false)
    }

    /// [`Diagnostic::render_human`], with the `severity[code]` label in colour when
    /// `color` (ANSI: red errors, yellow warnings, cyan notes).
    pub fn render_human_styled(&self, source_line: Option<&str>, color: bool) -> String {
        use crate::escape::printable;
        let label = format!("{}[{}]", self.severity.as_str(), self.code);
        let mut out = if color {
            let style = match self.severity {
                Severity::Error => "1;31",
                Severity::Warning => "1;33",
                Severity::Info => "1;36",
            };
            format!("\x1b[{style}m{label}\x1b[0m: ")
        } else {
            format!("{label}: ")
        };
        match (&self.file, self.line, self.column) {
            (Some(f), Some(l), Some(c)) => {
                let _ = write!(out, "{}:{l}:{c}: ", printable(f));
            }
            (Some(f), Some(l), None) => {
                let _ = write!(out, "{}:{l}: ", printable(f));
            }
            (Some(f), _, _) => {
                let _ = write!(out, "{}: ", printable(f));
            }
            (None, _, _) => {
                if let Some(m) = &self.module {
                    let _ = write!(out, "{}: ", printable(m));
                }
            }
        }
        out.push_str(&bounded(&printable(&self.message), MESSAGE_CHARS));
        out.push('\n');
        for line in &self.details {
            out.push_str("  ");
            out.push_str(&bounded(&printable(line), MESSAGE_CHARS));
            out.push('\n');
        }
        if let (Some(src), Some(line), Some(col)) = (source_line, self.line, self.column) {
            let gutter = line.to_string();
            let pad = " ".repeat(gutter.len());
            let (shown, caret_pad) = crate::escape::snippet(
                src.trim_end(),
                col.saturating_sub(1) as usize,
                SNIPPET_CHARS,
            );
            let _ = writeln!(out, "{pad} |");
            let _ = writeln!(out, "{gutter} | {shown}");
            let _ = writeln!(out, "{pad} | {caret_pad}^");
        }
        out
    }
}

/// The widest window of a source line that a printed diagnostic shows.
pub(crate) const SNIPPET_CHARS: usize = 160;
/// The longest message printed; the rest is cut (values from files can be long).
pub(crate) const MESSAGE_CHARS: usize = 1000;

/// `s` cut to `max` characters, with `...` where it was cut.
fn bounded(s: &str, max: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}...", &s[..at]).into(),
        None => s.into(),
    }
}

/// `a, b, c and 4 more`: the first few of `items` (in their order, control characters
/// escaped), for messages that stand for many modules at once.
pub fn first_few<'a>(items: impl IntoIterator<Item = &'a str>) -> String {
    const SHOWN: usize = 3;
    let mut shown = Vec::with_capacity(SHOWN);
    let mut more = 0usize;
    for item in items {
        if shown.len() < SHOWN {
            shown.push(crate::escape::printable(item).into_owned());
        } else {
            more += 1;
        }
    }
    let mut text = shown.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// Every diagnostic code terraci emits, with a one-line explanation: printed as
/// `severity[code]`, written in JSON as the kebab-case name, listed by
/// `terraci explain-codes` (in this order) and in the README's code table. A new code is
/// one line here.
macro_rules! codes {
    ($($variant:ident = $name:literal: $explanation:literal,)*) => {
        /// A stable diagnostic code.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code {
            $($variant,)*
        }

        impl Code {
            /// Every code, in the order `explain-codes` lists them.
            pub const ALL: &'static [Code] = &[$(Code::$variant,)*];

            /// The kebab-case name users see and grep for.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Code::$variant => $name,)*
                }
            }

            /// What the code means, in one line.
            pub fn explanation(self) -> &'static str {
                match self {
                    $(Code::$variant => $explanation,)*
                }
            }
        }
    };
}

codes! {
    SyntaxError = "syntax-error": "a Terraform file could not be parsed; the module keeps what parsed",
    UnreadablePath = "unreadable-path": "a directory or file could not be read; the walk continues",
    BinaryFile = "binary-file": "a file is not text (invalid UTF-8 or NUL bytes: encrypted or binary): a tfvars file is a warning and its values are not used; a Terraform file is an error",
    UnresolvedRemoteState = "unresolved-remote-state": "a remote state location depends on a value that is not known statically; no edge",
    UnmatchedRemoteState = "unmatched-remote-state": "no module has the referenced state; no edge",
    AmbiguousRemoteState = "ambiguous-remote-state": "two or more modules match the referenced state; no edge",
    UnknownRemoteOutput = "unknown-remote-output": "`data.terraform_remote_state.X.outputs.Y` where the module that owns X's state declares no `output \"Y\"` (renamed, removed, a typo), which Terraform finds only at plan time (a warning: the state keeps the output until the owner is applied); the hint names the closest output. Not checked when the owner is unresolved, nor for `outputs` used whole or through a dynamic key",
    SelfReference = "self-reference": "a module reads its own state; no edge",
    LocalCycle = "local-cycle": "locals refer to each other in a cycle",
    EvaluationError = "evaluation-error": "an expression is invalid (wrong type, missing attribute, bad argument)",
    EvaluationLimit = "evaluation-limit": "evaluation hit a size, depth or time bound",
    UnknownFunction = "unknown-function": "a function that Terraform does not have, or one terraci does not evaluate (the message says why)",
    DependencyCycle = "dependency-cycle": "modules depend on each other in a cycle; generate refuses to write a pipeline",
    ConfigWarning = "config-warning": "a configuration section is accepted but has no effect",
    ImageWithoutTerraci = "image-without-terraci": "a generated job runs terraci (a policy gate, the summary or the policy job) in an official terraform/OpenTofu image, which has no terraci; the message names the key that sets its image",
    DeletedModule = "deleted-module": "a module directory was deleted by the change; its resources are not destroyed by this pipeline",
    UnusedLibrary = "unused-library": "a listed library module is used by no module",
    UndiscoveredRoot = "undiscovered-root": "a directory with a `backend` or `cloud` block is above the pattern's depth: it gets no jobs and no reference reaches it (the message names the config that includes it)",
    PatternDepth = "pattern-depth": "no module is at the pattern's depth and roots with a `backend` or `cloud` block sit deeper (the pattern is shallower than the roots): their components name a directory that is not a module (the message names the pattern that fits)",
    NeedsLimit = "needs-limit": "a job has more needs than the CI allows; it relies on its stage instead",
    LocalState = "local-state": "modules of the pipeline keep their state inside the checkout, which each CI job gets afresh",
    JobRenamed = "job-renamed": "a job's name is not a valid GitHub job id; it is written with `_` in place of other characters",
    PipelineLimit = "pipeline-limit": "the generated pipeline is over the CI's limits (GitHub's 512 KB file size; GitLab's `max_yaml_size_bytes`, as GitLab measures the loaded YAML, and `max_jobs`): an error (exit 1) naming the size and the limit, a warning with `generate --force`; a GitLab pipeline written with `generate -o FILE` is split into child pipelines instead, unless `extensions.gitlab.split_pipelines: false`",
    RemoteModuleSource = "remote-module-source": "info (-v): a module call's source is outside the repository (registry, git...); its remote_state blocks are not read",
    MissingModuleSource = "missing-module-source": "a local module call's source is not a directory with Terraform files in the project; its remote_state blocks are not read",
    ModuleCallCycle = "module-call-cycle": "local module calls lead back to a module already on the call chain; not followed",
    ConfigVariables = "config-variables": "a `variables:` entry names no module, or could not be applied to one (a file missing, unreadable or invalid)",
    ConfigBackend = "config-backend": "a `backend_config:` entry names no module, or could not be applied to one (a bad placeholder or file)",
    UnusedDependencyRule = "unused-dependency-rule": "a `dependencies.add`/`ignore` rule names no module or no found edge",
    IgnoredDependency = "ignored-dependency": "info (-v): a found edge is dropped by `dependencies.ignore`",
    UnknownModuleCount = "unknown-module-count": "info (-v): a module call's count is unknown; its remote_state blocks are read as for one instance",
    UnsafePath = "unsafe-path": "a symlink that leaves the project (or repository), a device, FIFO or socket: never opened",
    UnsafeName = "unsafe-name": "a module path that cannot be written safely: not UTF-8, `${{` or a line break in a GitHub workflow, or a GitLab variable reference (`$NAME`, `${...}`) in a GitLab pipeline; the module gets no jobs",
    FileTooLarge = "file-too-large": "a file over the size bound (`--max-file-size`, default 16 MiB) is not read",
    PrivilegedTrigger = "privileged-trigger": "`extensions.github.on` has `pull_request_target` or `workflow_run`: runs that hold a write token and the repository's secrets while what they check out or download is not the pull request's own plan",
    CommittedCache = "committed-cache": "a file of the cache dir (`facts.bin`, `summaries.bin`) is tracked by git: whoever committed it wrote it, so the cache is neither read nor written in this run",
    ContributionInvalid = "contribution-invalid": "a job an extension contributes is malformed (a name other than letters, digits, `-`, `_`; an empty command; a gate of the applies that does not read the plans); nothing is generated or run",
    ContributionClash = "contribution-clash": "a contributed job has the name of another job (a module's plan or apply job, another contributed job) or produces a report another job produces; nothing is generated or run",
    ContributionUnknownInput = "contribution-unknown-input": "a contributed job consumes a report no job produces; nothing is generated or run",
    ContributionCycle = "contribution-cycle": "contributed jobs would wait for each other: they read each other's reports in a circle, or a gate of the applies reads plans that wait for applies; nothing is generated or run",
    UnknownOverwriteType = "unknown-overwrite-type": "an `overwrites[].type` names no job of the pipeline (not plan, apply, a contributed job or a job a TerraCi plugin contributes); the entry has no effect",
    SummaryReport = "summary-report": "summary: a `<service_dir>/*-report.json` cannot be read or is not a report; it is left out of the comment",
    SummaryLabel = "summary-label": "summary: a label template gives no label for a module or resource (a placeholder without a value, an empty label, a comma or control character); that label is skipped",
    PolicySource = "policy-source": "a policy source is missing, unreachable, over a bound or not pulled (`policy pull`), or holds no .rego files (with a blocking decision an error: terraci fails closed); the message names the source",
    PolicySyntax = "policy-syntax": "a .rego file does not parse or compile (file:line); nothing is checked",
    PolicyRuntime = "policy-runtime": "a policy rule fails while evaluating a module's plan (a conflict between values, file:line); the module fails",
    PolicyLimit = "policy-limit": "a policy rule did not finish within `policy check --timeout` (a loop or too much work), or one builtin call would make too much (`numbers.range` of over 1,000,000 items, a `sprintf` width over 10,000); the module fails",
    PolicyInput = "policy-input": "a module's plan.json is not valid JSON; the module fails",
    PolicyNamespace = "policy-namespace": "a configured namespace has no rules (no policy file declares the package, or it has no deny, violation or warn rule): a module a blocking decision applies to fails, otherwise a warning",
    CostPrices = "cost-prices": "cost: a price list cannot be downloaded or read (no network, over its bound, missing from `--pricing-dir`, not a price list), or the cache home is unusable; the resources it would price are listed as not priced",
    CostPlan = "cost-plan": "cost: a module's plan.json cannot be read or is not a plan; the module is shown as not estimated and the cost report warns",
    TfupdateRead = "tfupdate-read": "tfupdate: a .tf or lock file cannot be read or parsed, or a `version` is not a constraint terraform reads (file:line); the run exits 1",
    TfupdateUpdate = "tfupdate-update": "tfupdate: a dependency could not be checked or updated (a registry cannot be asked or answers outside the protocol, a package's SHA-256 is not the one SHA256SUMS lists, a file cannot be written); its row says why and the run exits 1",
}

impl Code {
    /// The code named `name`, if terraci has one by that name.
    pub fn named(name: &str) -> Option<Code> {
        Code::ALL.iter().copied().find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for Code {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl PartialEq<&str> for Code {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<str> for Code {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn details_are_printed_below_the_message_escaped_and_follow_it_in_json() {
        // A module id is repository text: a line break or an escape sequence in it must
        // not start a line of its own on the terminal.
        let d = Diagnostic::error(Code::DependencyCycle, "circular dependency detected")
            .with_details([
                "a -> b\u{1b}[2J\nerror: forged -> a".to_owned(),
                "c -> c".to_owned(),
            ]);
        assert_eq!(
            d.render_human(None),
            "error[dependency-cycle]: circular dependency detected\n  a -> b\\u{1b}[2J\\nerror: forged -> a\n  c -> c\n"
        );
        let json = serde_json::to_value(&d).expect("serializes");
        assert_eq!(
            json["message"],
            "circular dependency detected\n  a -> b\u{1b}[2J\nerror: forged -> a\n  c -> c"
        );
        assert_eq!(json["code"], "dependency-cycle");
    }
}
