//! Watch mode on a `MemorySystem`: each test edits the in-memory tree, hands the engine
//! the batch of paths a watcher would report, and checks the report line, what was
//! printed and what the pipeline file holds. No timing is involved.

use std::collections::VecDeque;

use camino::Utf8PathBuf;

use super::{Change, GraphDelta, Outcome, Report, Watch};
use crate::cli::WatchArgs;
use crate::testing::{global_args, memory_project};
use terraci_db::system::{ChangeEvents, MemorySystem, System};

/// With an image for the summary job that has terraci (no `image-without-terraci`
/// warning in these tests' output).
const CONFIG: &str = "structure:\n  pattern: \"{env}/{module}\"\nextensions:\n  gitlab:\n    mr:\n      summary_job:\n        image: registry.example.com/terraci:1\n";
const VPC: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
const DNS: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/dns/terraform.tfstate\"\n  }\n}\n";
const EKS: &str = "# reads the vpc\ndata \"terraform_remote_state\" \"net\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/vpc/terraform.tfstate\"\n  }\n}\n";
const READS_DNS: &str = "data \"terraform_remote_state\" \"dns\" {\n  backend = \"s3\"\n  config = {\n    bucket = \"b\"\n    key    = \"stage/dns/terraform.tfstate\"\n  }\n}\n";
const OUTPUT: &str = "/p/.gitlab-ci.yml";

/// A watch session on `/p` with the standard three modules, started; returns what the
/// start printed too.
fn session(fs: &MemorySystem) -> (Watch<'_>, String) {
    session_with(fs, WatchArgs::default())
}

fn session_with(fs: &MemorySystem, args: WatchArgs) -> (Watch<'_>, String) {
    let mut err = Vec::new();
    let watch = Watch::start(fs, &global_args(), &args, &argv(), &mut err).expect("watch starts");
    (watch, redact(&err))
}

fn project() -> MemorySystem {
    memory_project(&[
        (".terraci.yaml", CONFIG),
        ("stage/vpc/main.tf", VPC),
        ("stage/dns/main.tf", DNS),
        ("stage/eks/main.tf", EKS),
        ("stage/eks/backend.tf", EKS_BACKEND),
    ])
}

/// A state outside the checkout (no `local-state` warning in these tests' output).
const EKS_BACKEND: &str = "terraform {\n  backend \"s3\" {\n    bucket = \"b\"\n    key    = \"stage/eks/terraform.tfstate\"\n  }\n}\n";

fn argv() -> Vec<String> {
    vec!["terraci".into(), "watch".into()]
}

/// Timings are the one thing that differs between runs.
fn redact(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    regex::Regex::new(r"in \d+ ms")
        .expect("valid regex")
        .replace_all(&text, "in N ms")
        .into_owned()
}

fn paths(rel: &[&str]) -> Vec<Utf8PathBuf> {
    rel.iter()
        .map(|p| Utf8PathBuf::from(format!("/p/{p}")))
        .collect()
}

/// Runs one batch; returns its report and what it printed.
fn batch(watch: &mut Watch<'_>, rel: &[&str]) -> (Option<Report>, String) {
    let mut err = Vec::new();
    let report = watch
        .handle_batch(&paths(rel), &mut err)
        .expect("stderr is a Vec");
    (report, redact(&err))
}

fn output(fs: &MemorySystem) -> String {
    String::from_utf8(fs.read(OUTPUT.into()).expect("output written")).expect("UTF-8")
}

/// The `needs` of a GitLab job, by job name.
fn needs(fs: &MemorySystem, job: &str) -> Vec<String> {
    let doc: serde_yaml::Value = serde_yaml::from_str(&output(fs)).expect("YAML");
    doc[job]["needs"]
        .as_sequence()
        .map(|s| {
            s.iter()
                .filter_map(|n| n["job"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn start_writes_the_pipeline_and_says_so() {
    let fs = project();
    let (_watch, err) = session(&fs);
    assert_eq!(
        err,
        "watching /p: 3 modules, 1 edge -> .gitlab-ci.yml written in N ms\n"
    );
    assert_eq!(needs(&fs, "plan-stage-eks"), ["apply-stage-vpc"]);
}

#[test]
fn start_leaves_an_identical_file_alone() {
    let fs = project();
    drop(session(&fs));
    let (_watch, err) = session(&fs);
    assert_eq!(
        err,
        "watching /p: 3 modules, 1 edge -> .gitlab-ci.yml unchanged in N ms\n"
    );
}

#[test]
fn an_edit_that_adds_a_dependency_is_applied_to_the_file_input_and_rewrites() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    let eks = watch
        .workspace()
        .db
        .module_file("stage/eks/main.tf")
        .expect("a module file");
    watch.workspace().db.start_logging();
    fs.write_file("/p/stage/eks/main.tf", format!("{EKS}{READS_DNS}"));
    let (report, err) = batch(&mut watch, &["stage/eks/main.tf"]);
    assert_eq!(
        report,
        Some(Report {
            trigger: "stage/eks/main.tf changed".into(),
            graph: Some(GraphDelta {
                edges_changed: 1,
                ..GraphDelta::default()
            }),
            outcome: Outcome::Written(".gitlab-ci.yml".into()),
        })
    );
    assert_eq!(
        err,
        "stage/eks/main.tf changed -> 1 edge changed -> .gitlab-ci.yml rewritten in N ms\n"
    );
    assert_eq!(
        needs(&fs, "plan-stage-eks"),
        ["apply-stage-dns", "apply-stage-vpc"]
    );
    // The fast path: the same input got new text, and only that file was parsed again.
    assert_eq!(
        watch
            .workspace()
            .db
            .module_file("stage/eks/main.tf")
            .expect("a module file"),
        eks
    );
    let log = watch.workspace().db.take_log();
    let parsed = log.iter().filter(|l| l.starts_with("file_facts")).count();
    assert_eq!(parsed, 1, "{log:#?}");
}

#[test]
fn a_comment_edit_leaves_the_file_alone() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    // If anything wrote the file, this marker would be gone.
    let marker = format!("{}# marker\n", output(&fs));
    fs.write_file(OUTPUT, marker.clone());
    fs.write_file(
        "/p/stage/eks/main.tf",
        EKS.replace("# reads the vpc", "# reads the network  "),
    );
    let (report, err) = batch(&mut watch, &["stage/eks/main.tf"]);
    assert_eq!(
        err,
        "stage/eks/main.tf changed -> 0 edges changed -> output unchanged in N ms\n"
    );
    assert_eq!(report.expect("regenerated").outcome, Outcome::Unchanged);
    assert_eq!(output(&fs), marker);
}

#[test]
fn an_event_that_changes_no_input_prints_nothing() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    fs.write_file("/p/README.md", "notes");
    fs.write_file("/p/.git/index", "x");
    fs.write_file("/p/stage/eks/.main.tf.swp", "x");
    let touched = [
        "stage/eks/main.tf", // saved without a change
        "README.md",
        ".git/index",
        ".terraci/cache/facts.bin",
        "stage/eks/.main.tf.swp",
        ".gitlab-ci.yml",
    ];
    assert_eq!(batch(&mut watch, &touched), (None, String::new()));
}

#[test]
fn a_half_typed_block_prints_the_diagnostic_and_keeps_the_last_good_file() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    let good = output(&fs);
    fs.write_file(
        "/p/stage/eks/main.tf",
        format!("{EKS}data \"terraform_remote_state\" \"dns\" {{\n  backend =\n"),
    );
    let (report, err) = batch(&mut watch, &["stage/eks/main.tf"]);
    assert_eq!(
        report.expect("regenerated").outcome,
        Outcome::Kept {
            file: ".gitlab-ci.yml".into(),
            why: "1 new error".into()
        }
    );
    let mut lines = err.lines();
    let first = lines.next().expect("a diagnostic");
    assert!(
        first.starts_with("error[syntax-error]: stage/eks/main.tf:10:12: "),
        "{err}"
    );
    assert_eq!(
        lines.last(),
        // The file's blocks before the half-typed one still count (its edge to the vpc
        // stays), but a pipeline is not written over a new error.
        Some("stage/eks/main.tf changed -> 0 edges changed -> .gitlab-ci.yml kept (1 new error) in N ms")
    );
    assert_eq!(output(&fs), good);

    // Finishing the block writes again.
    fs.write_file("/p/stage/eks/main.tf", format!("{EKS}{READS_DNS}"));
    let (report, _) = batch(&mut watch, &["stage/eks/main.tf"]);
    assert_eq!(
        report.expect("regenerated").outcome,
        Outcome::Written(".gitlab-ci.yml".into())
    );
    assert_eq!(
        needs(&fs, "plan-stage-eks"),
        ["apply-stage-dns", "apply-stage-vpc"]
    );
}

#[test]
fn a_comment_edit_while_the_file_is_kept_still_says_so() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    fs.write_file("/p/stage/dns/main.tf", format!("{DNS}locals {{\n  x =\n"));
    let (report, _) = batch(&mut watch, &["stage/dns/main.tf"]);
    assert!(matches!(
        report.expect("regenerated").outcome,
        Outcome::Kept { .. }
    ));
    // Facts of eks are unchanged, but the file is still behind the broken dns.
    fs.write_file("/p/stage/eks/main.tf", format!("# note\n{EKS}"));
    let (_, err) = batch(&mut watch, &["stage/eks/main.tf"]);
    assert_eq!(
        err,
        "stage/eks/main.tf changed -> 0 edges changed -> .gitlab-ci.yml kept (1 new error) in N ms\n"
    );
}

#[test]
fn an_error_the_project_started_with_does_not_block_writes() {
    let fs = project();
    fs.write_file("/p/stage/dns/broken.tf", "locals {\n  x =\n");
    let (mut watch, err) = session(&fs);
    assert!(
        err.starts_with("error[syntax-error]: stage/dns/broken.tf:2:6: "),
        "{err}"
    );
    assert!(
        err.ends_with("-> .gitlab-ci.yml written in N ms\n"),
        "{err}"
    );
    fs.write_file("/p/stage/eks/main.tf", format!("{EKS}{READS_DNS}"));
    let (report, err) = batch(&mut watch, &["stage/eks/main.tf"]);
    assert_eq!(
        report.expect("regenerated").outcome,
        Outcome::Written(".gitlab-ci.yml".into()),
        "{err}"
    );
    assert!(
        !err.contains("syntax-error"),
        "printed once, not at every change: {err}"
    );
}

#[test]
fn a_new_module_directory_appears_in_the_pipeline() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    fs.write_file("/p/stage/app/main.tf", READS_DNS);
    fs.write_file(
        "/p/stage/app/variables.tf",
        format!("variable \"x\" {{}}\n{}", EKS_BACKEND.replace("eks", "app")),
    );
    let (report, err) = batch(
        &mut watch,
        &["stage/app", "stage/app/main.tf", "stage/app/variables.tf"],
    );
    assert_eq!(
        err,
        "2 files added -> 1 module added, 1 edge changed -> .gitlab-ci.yml rewritten in N ms\n"
    );
    assert_eq!(
        report.expect("regenerated").graph,
        Some(GraphDelta {
            modules_added: 1,
            modules_removed: 0,
            edges_changed: 1
        })
    );
    assert_eq!(needs(&fs, "plan-stage-app"), ["apply-stage-dns"]);
}

#[test]
fn a_new_file_in_a_known_module_is_read() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    fs.write_file("/p/stage/eks/dns.tf", READS_DNS);
    let (_, err) = batch(&mut watch, &["stage/eks/dns.tf"]);
    assert_eq!(
        err,
        "stage/eks/dns.tf added -> 1 edge changed -> .gitlab-ci.yml rewritten in N ms\n"
    );
    assert_eq!(
        needs(&fs, "plan-stage-eks"),
        ["apply-stage-dns", "apply-stage-vpc"]
    );
}

#[test]
fn a_deleted_module_disappears_from_the_pipeline() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    fs.remove_file("/p/stage/vpc/main.tf");
    let (report, err) = batch(&mut watch, &["stage/vpc/main.tf", "stage/vpc"]);
    assert_eq!(
        report.expect("regenerated").graph,
        Some(GraphDelta {
            modules_added: 0,
            modules_removed: 1,
            edges_changed: 1
        })
    );
    // eks now reads a state no module has: a warning, not an error, so it is written.
    assert!(err.contains("warning[unmatched-remote-state]"), "{err}");
    assert!(
        err.ends_with(
            "stage/vpc/main.tf removed -> 1 module removed, 1 edge changed -> .gitlab-ci.yml rewritten in N ms\n"
        ),
        "{err}"
    );
    let text = output(&fs);
    assert!(!text.contains("plan-stage-vpc"), "{text}");
    assert!(needs(&fs, "plan-stage-eks").is_empty());
}

#[test]
fn a_config_change_is_applied() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    fs.write_file(
        "/p/.terraci.yaml",
        format!(
            "{}exclude: [\"stage/dns\"]\n",
            CONFIG.replace("  gitlab:\n", "  gitlab:\n    stages_prefix: ship\n")
        ),
    );
    let (_, err) = batch(&mut watch, &[".terraci.yaml"]);
    assert_eq!(
        err,
        ".terraci.yaml changed -> 0 edges changed -> .gitlab-ci.yml rewritten in N ms\n"
    );
    let text = output(&fs);
    assert!(text.contains("stage: ship-0"), "{text}");
    assert!(!text.contains("plan-stage-dns"), "{text}");
}

#[test]
fn a_pattern_change_rediscovers_the_modules() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    // One segment deeper: stage/* are no longer deep enough to be modules.
    fs.write_file(
        "/p/.terraci.yaml",
        "structure:\n  pattern: \"{env}/{region}/{module}\"\n",
    );
    let (report, _) = batch(&mut watch, &[".terraci.yaml"]);
    assert_eq!(
        report.expect("regenerated").graph,
        Some(GraphDelta {
            modules_added: 0,
            modules_removed: 3,
            edges_changed: 1
        })
    );
}

#[test]
fn an_invalid_config_keeps_everything_until_it_is_fixed() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    let good = output(&fs);
    fs.write_file("/p/.terraci.yaml", "structur:\n  pattern: x\n");
    let (report, err) = batch(&mut watch, &[".terraci.yaml"]);
    assert_eq!(
        report,
        Some(Report {
            trigger: ".terraci.yaml changed".into(),
            graph: None,
            outcome: Outcome::Kept {
                file: ".gitlab-ci.yml".into(),
                why: "invalid config".into()
            },
        })
    );
    assert!(err.starts_with("error: unknown key `structur`"), "{err}");
    assert_eq!(output(&fs), good);

    fs.write_file("/p/.terraci.yaml", CONFIG);
    let (report, _) = batch(&mut watch, &[".terraci.yaml"]);
    // Back to what was written: nothing to write.
    assert_eq!(report.expect("regenerated").outcome, Outcome::Unchanged);
}

#[test]
fn a_cycle_keeps_the_file() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    let good = output(&fs);
    let reads_eks = EKS
        .replace("\"net\"", "\"eks\"")
        .replace("stage/vpc/", "stage/eks/");
    fs.write_file("/p/stage/vpc/main.tf", format!("{VPC}{reads_eks}"));
    let (report, err) = batch(&mut watch, &["stage/vpc/main.tf"]);
    assert_eq!(
        report.expect("regenerated").outcome,
        Outcome::Kept {
            file: ".gitlab-ci.yml".into(),
            why: "dependency cycle".into()
        }
    );
    assert!(
        err.contains(
            "error[dependency-cycle]: circular dependency detected\n  stage/eks -> stage/vpc -> stage/eks\n"
        ),
        "{err}"
    );
    assert_eq!(output(&fs), good);
}

#[test]
fn a_file_read_by_an_expression_is_followed() {
    let fs = project();
    let reads_key_file = EKS.replace(
        "\"stage/vpc/terraform.tfstate\"",
        "trimspace(file(\"${path.module}/key.txt\"))",
    );
    fs.write_file("/p/stage/eks/main.tf", reads_key_file);
    fs.write_file("/p/stage/eks/key.txt", "stage/vpc/terraform.tfstate\n");
    let (mut watch, _) = session(&fs);
    assert_eq!(needs(&fs, "plan-stage-eks"), ["apply-stage-vpc"]);
    fs.write_file("/p/stage/eks/key.txt", "stage/dns/terraform.tfstate\n");
    let (_, err) = batch(&mut watch, &["stage/eks/key.txt"]);
    assert_eq!(
        err,
        "stage/eks/key.txt changed -> 2 edges changed -> .gitlab-ci.yml rewritten in N ms\n"
    );
    assert_eq!(needs(&fs, "plan-stage-eks"), ["apply-stage-dns"]);
}

#[test]
fn the_provider_decides_the_default_file_and_o_overrides_it() {
    let fs = project();
    let args = WatchArgs {
        pipeline: crate::cli::PipelineArgs {
            provider: Some("github".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    let (_watch, err) = session_with(&fs, args);
    assert!(err.ends_with("-> .github/workflows/terraform.yml written in N ms\n"));
    assert!(fs.is_file("/p/.github/workflows/terraform.yml".into()));

    let args = WatchArgs {
        output: Some("/p/ci/out.yml".into()),
        ..Default::default()
    };
    let (_watch, err) = session_with(&fs, args);
    assert!(err.ends_with("-> /p/ci/out.yml written in N ms\n"), "{err}");
}

/// One scripted batch: files to write (`Some`) or delete (`None`), then the paths the
/// watcher reports.
type Step = (Vec<(&'static str, Option<String>)>, Vec<&'static str>);

/// Batches that each edit the tree first, as a real editor would before the watcher
/// reports.
struct Scripted<'a> {
    fs: &'a MemorySystem,
    steps: VecDeque<Step>,
}

impl ChangeEvents for Scripted<'_> {
    fn next_batch(&mut self) -> std::io::Result<Option<Vec<Utf8PathBuf>>> {
        let Some((edits, reported)) = self.steps.pop_front() else {
            return Ok(None);
        };
        for (path, text) in edits {
            let abs = format!("/p/{path}");
            match text {
                Some(text) => self.fs.write_file(abs, text),
                None => self.fs.remove_file(abs),
            }
        }
        Ok(Some(paths(&reported)))
    }
}

#[test]
fn the_loop_regenerates_once_per_batch_until_the_events_end() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    let mut events = Scripted {
        fs: &fs,
        steps: VecDeque::from([
            (
                vec![("stage/eks/main.tf", Some(format!("{EKS}{READS_DNS}")))],
                vec!["stage/eks/main.tf"],
            ),
            (vec![], vec!["README.md"]),
            (
                vec![("stage/dns/main.tf", None)],
                vec!["stage/dns/main.tf", "stage/dns"],
            ),
        ]),
    };
    let mut err = Vec::new();
    watch.run(&mut events, &mut err).expect("runs");
    let err = redact(&err);
    let lines: Vec<&str> = err.lines().filter(|l| l.contains(" -> ")).collect();
    assert_eq!(
        lines,
        [
            "stage/eks/main.tf changed -> 1 edge changed -> .gitlab-ci.yml rewritten in N ms",
            "stage/dns/main.tf removed -> 1 module removed, 1 edge changed -> .gitlab-ci.yml rewritten in N ms",
        ]
    );
    assert_eq!(needs(&fs, "plan-stage-eks"), ["apply-stage-vpc"]);
}

#[test]
fn changes_are_named_by_what_happened_to_the_path() {
    use super::trigger;
    assert_eq!(
        trigger(&[("a/main.tf".into(), Change::Changed, false)]),
        "a/main.tf changed"
    );
    assert_eq!(
        trigger(&[
            ("a/main.tf".into(), Change::Changed, false),
            ("b/main.tf".into(), Change::Added, false),
            ("c/main.tf".into(), Change::Added, false),
            ("c/".into(), Change::Added, true),
        ]),
        "1 file changed, 2 files added"
    );
    assert_eq!(
        trigger(&[
            ("a/".into(), Change::Removed, true),
            ("b/".into(), Change::Added, true),
        ]),
        "1 directory added, 1 directory removed"
    );
}

/// What `generate` writes for the tree as it is now, below its header lines.
fn generated(fs: &MemorySystem) -> String {
    use clap::Parser as _;
    let cli = crate::cli::Cli::parse_from(["terraci", "generate", "-d", "/p", "--no-cache"]);
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut io = crate::commands::Io {
        system: fs,
        stdout: &mut out,
        stderr: &mut err,
        argv: argv(),
    };
    assert_eq!(crate::commands::run(cli, &mut io), 0, "{}", redact(&err));
    String::from_utf8(out).expect("UTF-8")
}

/// The file below its two header lines (which name the command that wrote it).
fn body(text: &str) -> &str {
    text.splitn(3, '\n').nth(2).unwrap_or_default()
}

#[test]
fn after_edits_the_file_is_what_generate_writes() {
    let fs = project();
    let (mut watch, _) = session(&fs);
    let steps: [(&str, String); 4] = [
        ("stage/eks/main.tf", format!("{EKS}{READS_DNS}")),
        ("stage/app/main.tf", READS_DNS.to_owned()),
        ("stage/eks/main.tf", EKS.to_owned()),
        (
            "stage/dns/main.tf",
            format!("{DNS}{}", EKS.replace("\"net\"", "\"vpc\"")),
        ),
    ];
    for (path, text) in steps {
        fs.write_file(format!("/p/{path}"), text);
        let (report, _) = batch(&mut watch, &[path]);
        assert!(
            matches!(report.map(|r| r.outcome), Some(Outcome::Written(_))),
            "{path}"
        );
        // Job texts kept from earlier renders and pieces written one by one: still
        // exactly the bytes of a fresh run.
        assert_eq!(body(&output(&fs)), body(&generated(&fs)), "after {path}");
    }
}
