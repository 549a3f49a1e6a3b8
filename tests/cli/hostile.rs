//! A hostile repository (docs/security.md): directory names made to break shells, YAML
//! readers and GitHub expressions, symlinks to the environment, a device and files
//! outside the repository, a FIFO. Built in a temp dir at test time. Every run of the
//! binary is bounded in time and its output must never hold the secret placed in its
//! environment.

use std::io::Read as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::{actionlint, client, commit_all, git, Project};

/// Placed in the environment of every run; no output may hold it.
const SECRET: &str = "s3cr3t-Token-0f-the-CI-job";

/// Module directory names (under `env/`) that a shell, YAML or GitHub would read as more
/// than a name, each paired with files the attacker hopes a shell creates.
const NAMES: &[&str] = &[
    "$(touch PWNED-subst)",
    "`touch PWNED-backtick`",
    "a;touch PWNED-semicolon",
    "q'uo\"te",
    "sp ace",
    "new\nline;touch PWNED-newline",
    "$CI_JOB_TOKEN",
    "${HOME}x",
    "nel\u{85}ls\u{2028}ps\u{2029}",
    "-P",
    "app-v2",
    "app_v2",
    "star*[x]",
    "#hash",
];

/// The GitHub-only hostile name: refused for GitHub, written (quoted) for GitLab.
const EXPRESSION: &str = "${{ github.token }}";

fn module_tf() -> String {
    "data \"terraform_remote_state\" \"vpc\" {\n  backend = \"local\"\n  config = {\n    path = \"../vpc/terraform.tfstate\"\n  }\n}\n".to_owned()
}

/// The hostile project, and a directory outside it holding a file a symlink points at.
struct Hostile {
    project: Project,
    /// Holds the file a symlink points at; removed with the project.
    _outside: tempfile::TempDir,
}

fn hostile() -> Hostile {
    let project = Project::empty();
    let outside = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        outside.path().join("secret.tf"),
        format!("locals {{\n  token = \"{SECRET}\n}}\n"),
    )
    .expect("write outside file");
    project.write(".terraci.yaml", PATTERN);
    project.write("env/vpc/main.tf", "# the network\n");
    for name in NAMES.iter().chain([&EXPRESSION]) {
        project.write(&format!("env/{name}/main.tf"), module_tf());
    }
    let env = project.path().join("env");
    // Links out of the project, to the environment and to a device.
    for (module, target) in [
        ("leak", PathBuf::from("/proc/self/environ")),
        ("zero", PathBuf::from("/dev/zero")),
        ("outside", outside.path().join("secret.tf")),
    ] {
        std::fs::create_dir_all(env.join(module)).expect("mkdir");
        std::os::unix::fs::symlink(target, env.join(module).join("main.tf")).expect("symlink");
    }
    // A FIFO nobody writes to: opening it for reading would block forever.
    std::fs::create_dir_all(env.join("fifo")).expect("mkdir");
    let fifo =
        std::ffi::CString::new(env.join("fifo/main.tf").to_str().expect("utf-8")).expect("no NUL");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    // Filesystem functions aimed outside the repository; a syntax error on a long line.
    project.write(
        "env/reads/main.tf",
        "locals {\n  environ = file(\"/proc/self/environ\")\n  passwd = file(\"/etc/passwd\")\n  all = fileset(\"/\", \"**\")\n}\ndata \"terraform_remote_state\" \"x\" {\n  backend = \"local\"\n  config = {\n    path = \"${local.environ}${local.passwd}${join(\",\", local.all)}\"\n  }\n}\n",
    );
    project.write(
        "env/long/main.tf",
        format!("locals {{\n  x = \"{}\" +\n}}\n", "a".repeat(200_000)),
    );
    Hostile {
        project,
        _outside: outside,
    }
}

/// What a bounded run printed.
struct Run {
    code: Option<i32>,
    stdout: Vec<u8>,
    stderr: Vec<u8>,
}

impl Run {
    fn text(&self) -> String {
        format!(
            "{}\n{}",
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        )
    }
}

/// Runs `cmd` with the secret in its environment, killing it after `limit`.
fn bounded(mut cmd: Command, limit: Duration) -> Run {
    cmd.env("SECRET_TOKEN", SECRET)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let out = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stdout.read_to_end(&mut b);
        b
    });
    let err = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = stderr.read_to_end(&mut b);
        b
    });
    let start = Instant::now();
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{cmd:?} did not finish within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code,
        stdout: out.join().expect("reader"),
        stderr: err.join().expect("reader"),
    }
}

fn terraci(h: &Hostile, args: &[&str]) -> Run {
    let run = bounded(h.project.command(args), Duration::from_secs(60));
    assert!(
        !run.text().contains(SECRET),
        "terraci {args:?} printed the secret:\n{}",
        run.text()
    );
    run
}

#[test]
fn reads_stay_inside_and_nothing_hangs_or_leaks() {
    let h = hostile();
    let run = terraci(&h, &["validate", "--no-cache"]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    // Errors were found (exit 3), and it finished.
    assert_eq!(run.code, Some(3), "{err}");
    for (file, what) in [
        ("env/leak/main.tf", "/environ"),
        ("env/zero/main.tf", "/dev/zero"),
        ("env/outside/main.tf", "outside"),
        ("env/fifo/main.tf", "FIFO"),
    ] {
        let line = err
            .lines()
            .find(|l| l.starts_with("error[unsafe-path]") && l.contains(file))
            .unwrap_or_else(|| panic!("no unsafe-path error for {file}:\n{err}"));
        assert!(line.contains(what), "{line}");
    }
    // file("/etc/passwd") and fileset("/") read nothing: no line of /etc/passwd shows.
    assert!(!err.contains("root:x:0:0"), "{err}");
    assert!(!err.contains("/bin/sh"), "{err}");
    // The syntax error on a 200,000-character line prints a bounded window of it.
    let long = err
        .lines()
        .filter(|l| l.contains("aaaa"))
        .map(str::len)
        .max()
        .unwrap_or(0);
    assert!(long < 400, "a {long}-byte line was printed");
    assert!(err.len() < 20_000, "{} bytes of diagnostics", err.len());
    // Terminal output carries no raw control characters or line separators.
    assert!(
        !err.contains(['\u{85}', '\u{2028}', '\u{2029}', '\u{1b}']),
        "{err}"
    );
    // A smaller size bound is honoured.
    h.project
        .write("env/big/main.tf", format!("# {}\n", "b".repeat(5000)));
    let run = terraci(&h, &["validate", "--no-cache", "--max-file-size", "4096"]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        err.lines()
            .any(|l| l.starts_with("error[file-too-large]") && l.contains("env/big/main.tf")),
        "{err}"
    );
}

#[test]
fn a_name_that_is_not_utf8_is_reported() {
    use std::os::unix::ffi::OsStrExt as _;
    let h = hostile();
    let name = std::ffi::OsStr::from_bytes(b"bad\xffname");
    let dir = h.project.path().join("env").join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    std::fs::write(dir.join("main.tf"), "# x\n").expect("write");
    let run = terraci(&h, &["validate", "--no-cache"]);
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        err.lines()
            .any(|l| l.starts_with("error[unsafe-name]") && l.contains("env/bad")),
        "{err}"
    );
}

const FAKE_TERRAFORM: &str = r#"#!/bin/sh
# Records each call's subcommand, working directory and TF_MODULE_PATH, NUL-separated.
printf '%s\0%s\0%s\0' "$1" "$PWD" "${TF_MODULE_PATH-unset}" >> "__LOG__"
case "$1" in
  plan) echo plan > plan.tfplan ;;
esac
exit 0
"#;

/// A `bin` directory in `work` whose `terraform` is [`FAKE_TERRAFORM`] logging to
/// `work/terraform.log`, and `PATH` with it first.
fn fake_terraform(work: &Path) -> (String, PathBuf) {
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    let log = work.join("terraform.log");
    let fake = bin.join("terraform");
    std::fs::write(
        &fake,
        FAKE_TERRAFORM.replace("__LOG__", log.to_str().expect("UTF-8")),
    )
    .expect("write fake");
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    (path, log)
}

/// A `bin` directory in `work` holding each `(program, script)`, and `PATH` with it
/// first.
fn fake_programs(work: &Path, programs: &[(&str, &str)]) -> String {
    let bin = work.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for (program, script) in programs {
        std::fs::write(bin.join(program), script).expect("write fake");
        std::fs::set_permissions(bin.join(program), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
    }
    format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// The checkout a pipeline runs in: each module directory with a `main.tf`, nothing
/// git cannot hold (no FIFO, no links out).
fn checkout(work: &Path, pipeline: &str, names: &[&str]) -> PathBuf {
    let repo = work.join("repo");
    for name in names {
        let dir = repo.join("env").join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("main.tf"), "# x\n").expect("write");
    }
    std::fs::write(repo.join(".gitlab-ci.yml"), pipeline).expect("write pipeline");
    commit_all(&repo);
    repo
}

/// `pipeline` without `artifacts` and `cache`: gitlab-ci-local copies those with shell
/// lines of its own, built from the paths unquoted (GitLab's runner uses no shell for
/// them), so with them it is gitlab-ci-local that runs `;touch PWNED`. What is left is
/// every line terraci gives a shell.
fn without_file_transfers(pipeline: &str) -> String {
    let mut doc: serde_yaml::Value = serde_yaml::from_str(pipeline).expect("YAML");
    for (_, job) in doc.as_mapping_mut().expect("mapping").iter_mut() {
        let Some(job) = job.as_mapping_mut() else {
            continue;
        };
        job.remove("artifacts");
        job.remove("cache");
        if let Some(needs) = job.get_mut("needs").and_then(|n| n.as_sequence_mut()) {
            for need in needs.iter_mut().filter_map(|n| n.as_mapping_mut()) {
                need.insert("artifacts".into(), false.into());
            }
        }
    }
    serde_yaml::to_string(&doc).expect("YAML")
}

/// Every file below `dir` whose name starts with `PWNED`.
fn pwned(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let path = e.path();
            if e.file_name().to_string_lossy().starts_with("PWNED") {
                found.push(path.clone());
            }
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                stack.push(path);
            }
        }
    }
    found
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn gitlab_ci_local_cds_into_exactly_each_directory() {
    let h = hostile();
    let run = terraci(&h, &["generate", "--no-cache", "--auto-approve"]);
    assert_eq!(run.code, Some(0), "{}", run.text());
    let generate_stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    let pipeline = String::from_utf8(run.stdout).expect("UTF-8");
    assert!(
        !pipeline.contains(['\u{85}', '\u{2028}', '\u{2029}']),
        "raw YAML 1.1 line breaks"
    );
    // A YAML 1.1 reader (PyYAML) and a YAML 1.2 reader (serde_yaml) read the same names.
    let yaml12: serde_yaml::Value = serde_yaml::from_str(&pipeline).expect("YAML 1.2");
    let py = Command::new("python3")
        .args([
            "-c",
            // A `!reference` as serde_yaml gives a tagged value to JSON: `{tag: value}`.
            "import sys, yaml, json; yaml.SafeLoader.add_constructor('!reference', lambda l, n: {'!reference': l.construct_sequence(n)}); print(json.dumps(yaml.safe_load(sys.stdin)))",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    // `.ci/clients.sh` installs PyYAML: without it this check must fail, not pass.
    let mut py = py.expect("python3 runs");
    {
        use std::io::Write as _;
        py.stdin
            .take()
            .expect("piped")
            .write_all(pipeline.as_bytes())
            .expect("write");
    }
    let out = py.wait_with_output().expect("python3");
    assert!(
        out.status.success(),
        "PyYAML could not read the pipeline (is it installed? `.ci/clients.sh`): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml11: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json from PyYAML");
    let yaml12: serde_json::Value = serde_json::to_value(&yaml12).expect("YAML as JSON");
    assert_eq!(yaml11, yaml12, "YAML 1.1 and 1.2 readers disagree");

    let work = tempfile::tempdir().expect("temp dir");
    let mut names: Vec<&str> = NAMES.to_vec();
    names.extend([
        // Not `fifo`: a directory whose only Terraform file is a FIFO is no module.
        "vpc", "reads", "long", "leak", "zero", "outside", EXPRESSION,
    ]);
    let repo = checkout(work.path(), &without_file_transfers(&pipeline), &names);
    let (path, log) = fake_terraform(work.path());
    let mut cmd = Command::new(client("gitlab-ci-local"));
    cmd.args([
        "--force-shell-executor",
        "--shell-isolation",
        "--artifacts-to-source=false",
        "--home",
    ])
    .arg(work.path().join("home"))
    .current_dir(&repo)
    .env("PATH", path)
    .env("NO_COLOR", "1");
    let run = bounded(cmd, Duration::from_secs(600));
    let output = run.text();
    assert!(!output.contains(SECRET), "{output}");
    assert_eq!(run.code, Some(0), "gitlab-ci-local failed:\n{output}");
    assert_eq!(pwned(work.path()), Vec::<PathBuf>::new(), "{output}");
    assert_eq!(pwned(h.project.path()), Vec::<PathBuf>::new());

    // Each plan and apply ran in its own module's directory, named exactly.
    let raw = std::fs::read(&log).expect("terraform log");
    let fields: Vec<String> = raw
        .split(|b| *b == 0)
        .filter(|f| !f.is_empty())
        .map(|f| String::from_utf8_lossy(f).into_owned())
        .collect();
    let mut seen = std::collections::BTreeMap::<String, Vec<String>>::new();
    for call in fields.chunks(3) {
        let [sub, pwd, module_path] = call else {
            panic!("odd log: {fields:?}")
        };
        let module = pwd
            .split_once("/env/")
            .map(|(_, m)| m.to_owned())
            .unwrap_or_else(|| panic!("{sub} ran outside every module: {pwd:?}"));
        // GitLab expands `$NAME` in variables: the path arrives as it is, not expanded.
        assert_eq!(module_path, &format!("env/{module}"), "{sub} in {pwd:?}");
        seen.entry(module).or_default().push(sub.clone());
    }
    // A name GitLab would expand as a variable (`$CI_JOB_TOKEN`, `${HOME}x`) gets no jobs.
    let (refused, kept): (Vec<&str>, Vec<&str>) = names.iter().partition(|n| gitlab_variable(n));
    assert_eq!(refused.len(), 3, "{refused:?}");
    for name in &kept {
        let subs = seen
            .get(*name)
            .unwrap_or_else(|| panic!("no job ran in env/{name:?}: {seen:?}"));
        assert!(subs.contains(&"plan".to_owned()), "{name:?}: {subs:?}");
        assert!(subs.contains(&"apply".to_owned()), "{name:?}: {subs:?}");
    }
    assert_eq!(seen.len(), kept.len(), "{seen:?}");
    let err = &generate_stderr;
    let unsafe_names = err
        .lines()
        .filter(|l| l.starts_with("error[unsafe-name]") && l.contains("GitLab variable"))
        .count();
    assert_eq!(unsafe_names, refused.len(), "{err}");
}

/// What GitLab expands as a variable in a name: `$` then a letter, `_` or `{`.
fn gitlab_variable(name: &str) -> bool {
    name.as_bytes()
        .windows(2)
        .any(|w| w[0] == b'$' && (w[1].is_ascii_alphabetic() || w[1] == b'_' || w[1] == b'{'))
}

#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn github_workflow_passes_actionlint_without_expressions_terraci_did_not_write() {
    let h = hostile();
    let run = terraci(&h, &["generate", "--no-cache", "--provider", "github"]);
    assert_eq!(run.code, Some(0), "{}", run.text());
    let workflow = String::from_utf8_lossy(&run.stdout).into_owned();
    let err = String::from_utf8_lossy(&run.stderr).into_owned();
    // The only expressions are the ones terraci writes itself (the plans' concurrency
    // group, the commit a plan is made for, the summary job's token, the affected job's
    // event, base and outputs), none from a module name.
    let own = workflow
        .replace("${{ github.event_name }}", "")
        .replace(
            "${{ github.event.pull_request.base.sha || github.event.before }}",
            "",
        )
        .replace("${{ steps.affected.outputs.skip }}", "")
        .replace("${{ github.workflow }}", "")
        .replace("${{ github.ref }}", "")
        .replace(
            "${{ github.event.pull_request.head.sha || github.sha }}",
            "",
        )
        .replace("${{ secrets.GITHUB_TOKEN }}", "")
        .replace("${{ runner.temp }}", "");
    assert!(!own.contains("${{"), "{workflow}");
    assert!(!workflow.contains("github.token"), "{workflow}");
    // The token reaches the summary job only, which comments on the pull request.
    assert_eq!(
        workflow.matches("secrets.GITHUB_TOKEN").count(),
        1,
        "{workflow}"
    );
    let doc: serde_yaml::Value = serde_yaml::from_str(&workflow).expect("YAML");
    assert_eq!(
        doc["jobs"]["terraci-summary"]["env"]["GITHUB_TOKEN"].as_str(),
        Some("${{ secrets.GITHUB_TOKEN }}")
    );
    assert!(
        err.lines()
            .any(|l| l.starts_with("error[unsafe-name]") && l.contains("env/${{")),
        "{err}"
    );
    assert_eq!(actionlint(&workflow), "");
    // The other hostile names still have their jobs.
    assert!(workflow.contains("sp ace"), "{workflow}");
}

#[test]
fn local_exec_dry_run_piped_to_sh_runs_nothing_the_names_say() {
    let h = hostile();
    let run = terraci(&h, &["local-exec", "plan", "--dry-run", "--no-cache"]);
    assert_eq!(run.code, Some(0), "{}", run.text());
    let script = String::from_utf8(run.stdout).expect("UTF-8");
    // Run it with a fake terraform: only `cd` and the fake may do anything.
    let work = tempfile::tempdir().expect("temp dir");
    let (path, _log) = fake_terraform(work.path());
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(&script)
        .current_dir(h.project.path())
        .env("PATH", &path);
    let sh = bounded(cmd, Duration::from_secs(60));
    assert_eq!(sh.code, Some(0), "{}\n{script}", sh.text());
    assert_eq!(pwned(h.project.path()), Vec::<PathBuf>::new(), "{script}");
    assert_eq!(pwned(work.path()), Vec::<PathBuf>::new(), "{script}");

    // Run for real with the fake: progress lines name the jobs with line breaks escaped.
    let mut cmd = h.project.command(&["local-exec", "plan", "--no-cache"]);
    cmd.env("PATH", &path);
    let run = bounded(cmd, Duration::from_secs(120));
    let text = run.text();
    assert!(!text.contains(SECRET), "{text}");
    assert!(!text.contains("new\nline"), "{text}");
    assert!(!text.contains(['\u{85}', '\u{2028}']), "{text}");
    assert_eq!(pwned(h.project.path()), Vec::<PathBuf>::new(), "{text}");
}

#[test]
fn graph_formats_keep_every_module_apart() {
    let h = hostile();
    for format in ["mermaid", "plantuml"] {
        let run = terraci(&h, &["graph", "--no-cache", "--format", format]);
        let text = String::from_utf8_lossy(&run.stdout).into_owned();
        // app-v2 and app_v2 are two nodes with two ids.
        let ids: std::collections::BTreeSet<&str> = text
            .lines()
            .filter(|l| l.contains("app") && l.contains("v2"))
            .filter(|l| l.contains('[') || l.contains(" as "))
            .filter_map(|l| {
                let l = l.trim();
                match format {
                    "mermaid" => l.split('[').next(),
                    _ => l.rsplit(" as ").next(),
                }
            })
            .collect();
        assert_eq!(ids.len(), 2, "{format}:\n{text}");
        // No label lets a quote end it early: every label line has its quotes paired.
        for line in text.lines().filter(|l| l.contains('"')) {
            assert_eq!(line.matches('"').count(), 2, "{format}: {line}");
        }
        assert!(
            !text.contains("new\nline"),
            "{format}: a raw newline in a label"
        );
    }
    // Terminal formats: one line per module, control characters escaped.
    for args in [
        &["graph", "--no-cache", "--format", "list"][..],
        &["graph", "--no-cache", "--format", "levels"],
        &["generate", "--no-cache", "--dry-run"],
    ] {
        let format = args.join(" ");
        let run = terraci(&h, args);
        let text = String::from_utf8_lossy(&run.stdout).into_owned();
        assert!(text.contains("env/new\\nline"), "{format}:\n{text}");
        assert!(
            !text.contains(['\u{85}', '\u{2028}', '\u{2029}']),
            "{format}"
        );
    }
    let run = terraci(&h, &["graph", "--no-cache", "--format", "dot"]);
    let text = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(text.contains(r#""env/q'uo\"te""#), "{text}");
    assert!(!text.contains("new\nline"), "{text}");
}

/// The bytes a shell gives a meaning to.
const SHELL_BYTES: &[u8] = b"$`'\"\\;&|<>(){}[]*?!#~ \t\n=%";

/// Random bytes as directory names: the `cd` line terraci writes for each is one that
/// `sh -n` accepts and that enters exactly that directory.
#[test]
#[cfg_attr(
    not(feature = "clients"),
    ignore = "runs a CI client or terraform: the clients tier (bash .ci/test)"
)]
fn random_directory_names_give_sound_cd_lines() {
    let h = Project::empty();
    h.write(".terraci.yaml", PATTERN);
    let mut state: u64 = 0x5eed_1234_abcd_0042;
    let mut next = || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut names = Vec::new();
    while names.len() < 40 {
        let len = 1 + (next() % 12) as usize;
        let bytes: Vec<u8> = (0..len)
            .map(|_| match next() % 4 {
                // Mostly the bytes shells care about.
                0 => SHELL_BYTES[(next() % SHELL_BYTES.len() as u64) as usize],
                1 => (next() % 128) as u8,
                _ => (0x20 + next() % 0x5f) as u8,
            })
            .filter(|b| *b != b'/' && *b != 0)
            .collect();
        let Ok(name) = String::from_utf8(bytes) else {
            continue;
        };
        if name.is_empty() || name.starts_with('.') || name == ".." || names.contains(&name) {
            continue;
        }
        names.push(name);
    }
    for name in &names {
        let dir = h.path().join("env").join(name);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join("main.tf"), "# x\n").expect("write");
    }
    let run = bounded(
        h.command(&["local-exec", "plan", "--dry-run", "--no-cache"]),
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}", run.text());
    let script = String::from_utf8(run.stdout).expect("UTF-8");
    let check = Command::new("sh")
        .arg("-n")
        .arg("-c")
        .arg(&script)
        .output()
        .expect("sh -n");
    assert!(
        check.status.success(),
        "sh -n rejects:\n{}\n{script}",
        String::from_utf8_lossy(&check.stderr)
    );
    // Run only the `cd` lines, each printing where it landed.
    let gitlab = bounded(
        h.command(&["generate", "--no-cache"]),
        Duration::from_secs(60),
    );
    assert_eq!(gitlab.code, Some(0), "{}", gitlab.text());
    let pipeline: serde_yaml::Value = serde_yaml::from_slice(&gitlab.stdout).expect("YAML");
    let mut checked = 0;
    for (key, job) in pipeline.as_mapping().expect("mapping") {
        let Some(key) = key.as_str().filter(|k| k.starts_with("plan-")) else {
            continue;
        };
        let script = job["script"][0].as_str().expect("cd line");
        // As GitLab reads it: `$$` is a literal `$`.
        let module = job["variables"]["TF_MODULE_PATH"]
            .as_str()
            .expect("TF_MODULE_PATH")
            .replace("$$", "$");
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!("{script} && printf '%s' \"$PWD\""))
            .current_dir(h.path())
            .output()
            .expect("sh");
        assert!(out.status.success(), "{key}: {script:?}");
        let landed = String::from_utf8_lossy(&out.stdout).into_owned();
        let want = h
            .path()
            .canonicalize()
            .expect("canonical")
            .join(&module)
            .display()
            .to_string();
        assert_eq!(landed, want, "{key}: {script:?}");
        checked += 1;
    }
    let refused = names.iter().filter(|n| gitlab_variable(n)).count();
    assert_eq!(checked, names.len() - refused);
}

/// A project of one module, `env/vpc`.
fn one_module() -> Project {
    let p = Project::empty();
    p.write(".terraci.yaml", PATTERN);
    p.write("env/vpc/main.tf", "# x\n");
    p
}

const PATTERN: &str = "structure:\n  pattern: \"{environment}/{module}\"\n";

#[test]
fn the_cache_dir_is_terracis_own() {
    let p = one_module();
    p.write(".gitignore", "secrets/\n");
    // The project dir itself: refused, its .gitignore untouched.
    let out = p.run(&["generate", "--cache-dir", "."]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("is the project directory"),
        "{}",
        out.stderr
    );
    assert_eq!(p.read(".gitignore"), "secrets/\n");
    // A directory holding files terraci did not write: refused.
    p.write("elsewhere/notes.txt", "mine\n");
    let out = p.run(&["generate", "--cache-dir", "elsewhere"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stderr.contains("`notes.txt`"), "{}", out.stderr);
    assert_eq!(p.read("elsewhere/notes.txt"), "mine\n");
    // Its own: used, twice (the second run finds only what the first wrote).
    for _ in 0..2 {
        let out = p.run(&["generate", "--cache-dir", "own"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(out.stdout.contains("plan-env-vpc"), "{}", out.stdout);
    }
}

#[test]
fn invalid_variable_names_in_the_config_are_refused() {
    for config in [
        "execution:\n  env:\n    \"BAD-NAME\": x\n",
        "extensions:\n  github:\n    env:\n      \"A B\": x\n",
        "extensions:\n  gitlab:\n    variables:\n      \"X;rm\": x\n",
    ] {
        let p = one_module();
        p.write(".terraci.yaml", format!("{PATTERN}{config}"));
        let out = p.run(&["generate", "--provider", "github"]);
        assert_eq!(out.code, 1, "{config}: {}", out.stderr);
        assert!(
            out.stderr.contains("is not a valid variable name"),
            "{config}: {}",
            out.stderr
        );
    }
}

#[test]
fn the_output_file_keeps_its_mode() {
    let p = one_module();
    p.write("out.yml", "old\n");
    let out_file = p.path().join("out.yml");
    std::fs::set_permissions(&out_file, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let out = p.run(&["generate", "--no-cache", "-o", "out.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(p.read("out.yml").contains("plan-env-vpc"));
    let mode = std::fs::metadata(&out_file)
        .expect("stat")
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
}

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let c = std::ffi::CString::new(path.to_str().expect("utf-8")).expect("no NUL");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
}

#[test]
fn watch_meets_fifos_and_still_stops_on_sigterm() {
    let p = one_module();
    std::fs::create_dir_all(p.path().join("env/fifo")).expect("mkdir");
    mkfifo(&p.path().join("env/fifo/main.tf"));
    let mut child = p
        .command(&["watch", "--no-cache", "-o", "out.yml"])
        .env("SECRET_TOKEN", SECRET)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("terraci watch starts");
    let out = p.path().join("out.yml");
    let wait = |what: &str, done: &dyn Fn() -> bool, child: &mut std::process::Child| {
        let start = Instant::now();
        while !done() {
            if start.elapsed() > Duration::from_secs(20) {
                let _ = child.kill();
                panic!("timed out waiting for {what}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait("the first pipeline", &|| out.exists(), &mut child);
    let read = || std::fs::read_to_string(&out).unwrap_or_default();
    p.write("env/app/main.tf", "# app\n");
    wait(
        "the new module",
        &|| read().contains("plan-env-app"),
        &mut child,
    );
    // A FIFO appears while watching: reported (the file is kept for the new error),
    // never opened, so the session still answers SIGTERM.
    std::fs::create_dir_all(p.path().join("env/fifo2")).expect("mkdir");
    mkfifo(&p.path().join("env/fifo2/main.tf"));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill(2) on our own child's pid has no memory effects.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    assert_eq!(sent, 0);
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("watch did not stop on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0));
}

#[test]
fn a_config_linked_out_of_the_project_is_refused_unread() {
    for target in ["/proc/self/environ", "/dev/zero"] {
        let p = one_module();
        std::fs::remove_file(p.path().join(".terraci.yaml")).expect("rm");
        std::os::unix::fs::symlink(target, p.path().join(".terraci.yaml")).expect("symlink");
        let run = bounded(p.command(&["generate"]), Duration::from_secs(60));
        assert!(!run.text().contains(SECRET), "{target}: {}", run.text());
        // Nothing of what the link points at is kept in the cache either.
        let record = std::fs::read(p.path().join(".terraci/cache/run.bin")).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&record).contains(SECRET),
            "{target}: the run record holds the secret"
        );
        if target == "/proc/self/environ" {
            assert_eq!(run.code, Some(1), "{}", run.text());
            assert!(run.text().contains("outside"), "{}", run.text());
        }
    }
}

#[test]
fn ignore_files_of_the_enclosing_repository_are_read_confined() {
    // The project is a subdirectory of the checkout; the checkout's own `.gitignore` (above
    // the project) and `.git/info/exclude` are FIFOs: never opened, nothing hangs.
    let work = tempfile::tempdir().expect("temp dir");
    let repo = work.path();
    let git = Command::new("git")
        .args(["init", "-q"])
        .current_dir(repo)
        .status()
        .expect("git init");
    assert!(git.success());
    for fifo in [repo.join(".gitignore"), repo.join(".git/info/exclude")] {
        let _ = std::fs::remove_file(&fifo);
        std::fs::create_dir_all(fifo.parent().expect("parent")).expect("mkdir");
        let c = std::ffi::CString::new(fifo.to_str().expect("utf-8")).expect("no NUL");
        // SAFETY: mkfifo reads a NUL-terminated path and creates a file.
        let made = unsafe { libc::mkfifo(c.as_ptr(), 0o644) };
        assert_eq!(made, 0, "mkfifo {fifo:?}");
    }
    let project = repo.join("infra");
    std::fs::create_dir_all(project.join("stage/vpc")).expect("mkdir");
    std::fs::write(
        project.join(".terraci.yaml"),
        "structure:\n  pattern: \"{env}/{module}\"\n",
    )
    .expect("config");
    std::fs::write(project.join("stage/vpc/main.tf"), "# empty\n").expect("module");
    let cache = tempfile::tempdir().expect("temp dir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_terraci"));
    cmd.args(["validate", "--no-cache", "-d"])
        .arg(&project)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", repo)
        .env("TERRACI_CACHE_HOME", cache.path());
    let run = bounded(cmd, Duration::from_secs(60));
    assert_eq!(run.code, Some(0), "{}", run.text());
    assert!(
        String::from_utf8_lossy(&run.stdout).contains("modules: 1"),
        "{}",
        run.text()
    );
}

/// A directory outside the project holding `victim` (and anything else a test puts
/// there): a write through a committed link would change it.
fn outside_with_victim(names: &[&str]) -> tempfile::TempDir {
    let outside = tempfile::tempdir().expect("temp dir");
    std::fs::write(outside.path().join("victim"), "precious\n").expect("victim");
    for name in names {
        std::fs::write(outside.path().join(name), "precious\n").expect("victim");
    }
    outside
}

/// Every file under `dir` (not following links) with its bytes.
fn files_under(dir: &Path) -> std::collections::BTreeMap<PathBuf, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read dir") {
            let entry = entry.expect("entry");
            let kind = entry.file_type().expect("file type");
            if kind.is_dir() {
                stack.push(entry.path());
            } else {
                let bytes = if kind.is_symlink() {
                    std::fs::read_link(entry.path())
                        .expect("link")
                        .into_os_string()
                        .into_encoded_bytes()
                } else {
                    std::fs::read(entry.path()).expect("read")
                };
                out.insert(entry.path(), bytes);
            }
        }
    }
    out
}

/// Replaces `rel` in the project (whatever is there) with a symlink to `target`.
fn link(p: &Project, rel: &str, target: &Path) {
    let at = p.path().join(rel);
    std::fs::create_dir_all(at.parent().expect("parent")).expect("mkdir");
    let _ = std::fs::remove_file(&at);
    let _ = std::fs::remove_dir_all(&at);
    std::os::unix::fs::symlink(target, &at).expect("symlink");
}

fn is_regular_file(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

/// `policy pull` writes its lock copy into the checkout's `.terraci/`: never through a
/// committed link there (the old `.terraci/policies` location is not written at all).
#[test]
fn policy_pull_writes_nothing_through_a_linked_terraci_dir() {
    // `.terraci` itself is a link: the lock copy is refused, naming it.
    let p = Project::fixture("policy");
    let outside = outside_with_victim(&["policy.lock.json"]);
    link(&p, ".terraci", outside.path());
    let before = files_under(outside.path());
    let out = p.run(&["policy", "pull"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "/.terraci` is a symlink: terraci does not write through links in the project"
        ),
        "{}",
        out.stderr
    );
    assert_eq!(files_under(outside.path()), before);
    // `.terraci/policies` is a link: nothing goes there.
    let p = Project::fixture("policy");
    let outside = outside_with_victim(&["policy.lock.json"]);
    link(&p, ".terraci/policies", outside.path());
    let before = files_under(outside.path());
    let out = p.run(&["policy", "pull"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(is_regular_file(&p.path().join(".terraci/policy.lock.json")));
    assert_eq!(files_under(outside.path()), before);
    // The lock copy is a link to a file elsewhere: replaced by the lock, not followed.
    link(
        &p,
        ".terraci/policy.lock.json",
        &outside.path().join("victim"),
    );
    let out = p.run(&["policy", "pull"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(is_regular_file(&p.path().join(".terraci/policy.lock.json")));
    assert_eq!(files_under(outside.path()), before);
}

/// `policy check` writes its report into `.terraci/`: a committed `.terraci` link is an
/// error, a linked report file is replaced.
#[test]
fn policy_check_writes_no_report_through_a_linked_terraci_dir() {
    let args = [
        "policy",
        "check",
        "--no-cache",
        "--module",
        "platform/stage/eu-central-1/vpc",
    ];
    let p = Project::fixture("policy");
    let outside = outside_with_victim(&["policy-report.json", "policy-results.json"]);
    link(&p, ".terraci", outside.path());
    let before = files_under(outside.path());
    let out = p.run(&args);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("cannot write .terraci/policy-report.json")
            && out.stderr.contains("is a symlink"),
        "{}",
        out.stderr
    );
    assert_eq!(files_under(outside.path()), before);
    // The report files themselves are links: replaced.
    let p = Project::fixture("policy");
    link(
        &p,
        ".terraci/policy-report.json",
        &outside.path().join("victim"),
    );
    link(
        &p,
        ".terraci/policy-results.json",
        &outside.path().join("policy-results.json"),
    );
    let out = p.run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    for name in ["policy-report.json", "policy-results.json"] {
        assert!(
            is_regular_file(&p.path().join(".terraci").join(name)),
            "{name}"
        );
    }
    assert_eq!(files_under(outside.path()), before);
}

/// `local-exec` writes its logs into `.terraci/logs`: a committed link there is an error
/// before any job runs.
#[test]
fn local_exec_writes_no_log_through_a_linked_log_dir() {
    let p = one_module();
    let outside = outside_with_victim(&["plan-env-vpc.log"]);
    link(&p, ".terraci/logs", outside.path());
    let before = files_under(outside.path());
    let work = tempfile::tempdir().expect("temp dir");
    let (path, terraform_log) = fake_terraform(work.path());
    let mut cmd = p.command(&["local-exec", "plan", "--no-cache"]);
    cmd.env("PATH", &path);
    let run = bounded(cmd, Duration::from_secs(60));
    assert_ne!(run.code, Some(0), "{}", run.text());
    assert!(
        run.text()
            .contains("/.terraci/logs` is a symlink: terraci does not write through links"),
        "{}",
        run.text()
    );
    assert_eq!(files_under(outside.path()), before);
    assert!(!terraform_log.exists(), "a job ran");
}

/// `local-exec plan` writes `plan.txt`, `plan.json`, `plan.result.json` and the job's log:
/// a committed link at any of them is replaced by a regular file, never followed (it
/// used to truncate and rewrite the target, `~/.bashrc` say).
#[test]
fn local_exec_replaces_linked_plan_files_and_logs() {
    let p = one_module();
    let outside = outside_with_victim(&["plan.json", "result", "log"]);
    let files = [
        ("env/vpc/plan.txt", "victim"),
        ("env/vpc/plan.json", "plan.json"),
        ("env/vpc/plan.result.json", "result"),
        (".terraci/logs/plan-env-vpc.log", "log"),
    ];
    for (rel, target) in files {
        link(&p, rel, &outside.path().join(target));
    }
    let before = files_under(outside.path());
    let work = tempfile::tempdir().expect("temp dir");
    let (path, _log) = fake_terraform(work.path());
    let mut cmd = p.command(&["local-exec", "plan", "--no-cache"]);
    cmd.env("PATH", &path);
    let run = bounded(cmd, Duration::from_secs(60));
    assert_eq!(run.code, Some(0), "{}", run.text());
    for (rel, _) in files {
        assert!(
            is_regular_file(&p.path().join(rel)),
            "{rel} is not a regular file"
        );
    }
    assert!(p
        .read("env/vpc/plan.result.json")
        .contains("\"exit_code\":0"));
    assert_eq!(files_under(outside.path()), before);
}

/// The fact cache, the summary cache and the run record go into `.terraci/cache`: a
/// committed link there (or at `.terraci`) is refused before anything is read or
/// written through it.
#[test]
fn the_cache_is_never_written_through_a_link() {
    for linked in [".terraci/cache", ".terraci"] {
        let p = one_module();
        let outside = outside_with_victim(&[]);
        link(&p, linked, outside.path());
        let before = files_under(outside.path());
        let run = bounded(p.command(&["generate"]), Duration::from_secs(60));
        assert_eq!(run.code, Some(1), "{linked}: {}", run.text());
        assert!(
            run.text().contains(&format!(
                "/{linked}` is a symlink: terraci does not write through links in the project"
            )),
            "{linked}: {}",
            run.text()
        );
        assert_eq!(files_under(outside.path()), before, "{linked}");
    }
    // A cache dir outside the project that the user named is theirs: used.
    let p = one_module();
    let cache = tempfile::tempdir().expect("temp dir");
    let dir = cache.path().join("c");
    let run = bounded(
        p.command(&["generate", "--cache-dir", dir.to_str().expect("utf-8")]),
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}", run.text());
    assert!(dir.join("facts.bin").exists());
}

/// `-o FILE` and `init` write into the project: a committed link there to a file
/// outside is replaced, not followed; a link inside the project is still followed.
#[test]
fn output_and_config_links_out_of_the_project_are_replaced() {
    let p = one_module();
    let outside = outside_with_victim(&[]);
    let before = files_under(outside.path());
    link(&p, "out.yml", &outside.path().join("victim"));
    let out = p.run(&["generate", "--no-cache", "-o", "out.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(is_regular_file(&p.path().join("out.yml")));
    assert!(p.read("out.yml").contains("plan-env-vpc"));
    // A link to a file of the project is followed, as before.
    p.write("ci/pipeline.yml", "old\n");
    link(&p, "in.yml", &p.path().join("ci/pipeline.yml"));
    let out = p.run(&["generate", "--no-cache", "-o", "in.yml"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(p.read("ci/pipeline.yml").contains("plan-env-vpc"));
    assert!(std::fs::symlink_metadata(p.path().join("in.yml"))
        .expect("stat")
        .file_type()
        .is_symlink());
    // `init --force` over a config that is a link out of the project.
    link(&p, ".terraci.yaml", &outside.path().join("victim"));
    let out = p.run(&["init", "--force", "--ci"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(is_regular_file(&p.path().join(".terraci.yaml")));
    assert_eq!(files_under(outside.path()), before);
}

/// `--var-file` is read as `variables.files` are: a FIFO in the repository is refused
/// at once instead of blocking the run.
#[test]
fn a_var_file_fifo_is_refused() {
    let p = one_module();
    mkfifo(&p.path().join("prod.tfvars"));
    for cache in [&[][..], &["--no-cache"][..]] {
        let mut args = vec!["generate", "--var-file", "prod.tfvars"];
        args.extend_from_slice(cache);
        let run = bounded(p.command(&args), Duration::from_secs(10));
        assert_ne!(run.code, Some(0), "{}", run.text());
        assert!(
            run.text()
                .contains("cannot read --var-file prod.tfvars: not a regular file but a FIFO"),
            "{}",
            run.text()
        );
    }
}

/// A `--var-file` in the repository that is a link out of it is refused and its content
/// never shown; a file outside the repository that the runner names is read.
#[test]
fn a_var_file_link_out_of_the_repository_is_refused() {
    let p = one_module();
    let outside = tempfile::tempdir().expect("temp dir");
    let secret = outside.path().join("secret.tfvars");
    std::fs::write(&secret, format!("x = \"{SECRET}\"\n")).expect("write");
    link(&p, "prod.tfvars", &secret);
    for args in [
        &["generate", "--var-file", "prod.tfvars"][..],
        &["validate", "--no-cache", "--var-file", "prod.tfvars"][..],
    ] {
        let run = bounded(p.command(args), Duration::from_secs(60));
        assert_ne!(run.code, Some(0), "{args:?}: {}", run.text());
        assert!(
            run.text()
                .contains("cannot read --var-file prod.tfvars: a symlink to")
                && run.text().contains("outside"),
            "{args:?}: {}",
            run.text()
        );
        assert!(!run.text().contains(SECRET), "{args:?}: {}", run.text());
    }
    std::fs::write(&secret, "x = 1\n").expect("write");
    let run = bounded(
        p.command(&["generate", "--var-file", secret.to_str().expect("utf-8")]),
        Duration::from_secs(60),
    );
    assert_eq!(run.code, Some(0), "{}", run.text());
}

#[test]
fn terminal_sequences_in_names_never_reach_stderr() {
    // A name that sets the window title, clears the screen and rings the bell: echoed
    // raw, it can hide or rewrite what the terminal shows (the list of modules an apply
    // asks about).
    let name = "a\u{1b}]0;pwn\u{7}\u{1b}[2J\u{1b}[1A";
    let project = Project::empty();
    project.write(&format!("{name}/main.tf"), "# a module\n");
    project.write("b/main.tf", "# another\n");
    let raw = |run: &Run| run.stderr.iter().any(|&b| b == 0x1b || b == 0x07);
    // No config: the default pattern finds no module, and the error names the roots.
    let none = bounded(project.command(&["generate"]), Duration::from_secs(60));
    assert_ne!(none.code, Some(0));
    assert!(!raw(&none), "{:?}", String::from_utf8_lossy(&none.stderr));
    assert!(String::from_utf8_lossy(&none.stderr).contains("\\u{1b}]0;pwn"));
    // init says which pattern fits, naming a module.
    let init = bounded(
        project.command(&["init", "--ci", "--dry-run"]),
        Duration::from_secs(60),
    );
    assert_eq!(
        init.code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    assert!(!raw(&init), "{:?}", String::from_utf8_lossy(&init.stderr));
    // The apply's confirmation lists the modules it would apply.
    project.write(".terraci.yaml", "structure:\n  pattern: \"{module}\"\n");
    let apply = bounded(
        project.command(&["local-exec", "apply"]),
        Duration::from_secs(60),
    );
    assert_eq!(
        apply.code,
        Some(2),
        "{}",
        String::from_utf8_lossy(&apply.stderr)
    );
    assert!(!raw(&apply), "{:?}", String::from_utf8_lossy(&apply.stderr));
}

#[test]
fn file_functions_never_read_the_git_directory() {
    // A CI checkout keeps its credentials in `.git/config`: GitLab's remote URL holds the
    // job token, actions/checkout writes the token (base64, which log masking misses) as
    // an `extraheader`. A value read from there and shown in a diagnostic (an unmatched
    // state path) would print them in the job log of a public project.
    let project = Project::empty();
    project.write(".terraci.yaml", "structure:\n  pattern: \"{module}\"\n");
    project.write("vpc/main.tf", "# the network\n");
    let state = |path: &str| {
        format!(
            "data \"terraform_remote_state\" \"s\" {{\n  backend = \"local\"\n  config = {{\n    path = {path}\n  }}\n}}\n"
        )
    };
    project.write(
        "direct/main.tf",
        state("file(\"${path.module}/../.git/config\")"),
    );
    project.write("linked/main.tf", state("file(\"${path.module}/../cfg\")"));
    project.write(
        "listed/main.tf",
        state("join(\",\", fileset(\"${path.module}/..\", \"**/config\"))"),
    );
    project.write(
        "template/main.tf",
        state("templatefile(\"${path.module}/../.GIT/config\", {})"),
    );
    commit_all(project.path());
    let git = |args: &[&str]| git(project.path(), args);
    let token = "glcbt-J0b-T0ken-In-The-Remote";
    let header = "eC1hY2Nlc3MtdG9rZW46Z2hzX0FjdGlvbnM=";
    git(&[
        "remote",
        "set-url",
        "origin",
        &format!("https://gitlab-ci-token:{token}@gitlab.example.com/infra/live.git"),
    ]);
    git(&[
        "config",
        "http.https://github.com/.extraheader",
        &format!("AUTHORIZATION: basic {header}"),
    ]);
    std::os::unix::fs::symlink(".git/config", project.path().join("cfg")).expect("symlink");
    let run = bounded(
        project.command(&["validate", "--no-cache"]),
        Duration::from_secs(60),
    );
    let text = run.text();
    for secret in [token, header] {
        assert!(!text.contains(secret), "{secret} shown:\n{text}");
    }
    assert!(text.contains("git directory"), "{text}");
}

#[test]
fn a_committed_policy_report_is_not_shown_when_the_check_cannot_run() {
    // The checkout commits a passing `.terraci/policy-report.json`; the check fails
    // closed (a blocking decision, a source without policies) before it writes one. The
    // summary comment must not show the committed "every module passes" as this run's.
    let project = Project::empty();
    project.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{module}\"\nextensions:\n  policy:\n    enabled: true\n    sources:\n      - type: path\n        path: policies\n",
    );
    project.write("app/main.tf", "# a module\n");
    project.write("policies/README.md", "no policies here\n");
    let plans = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("fixtures/summary/plans/create");
    for file in ["plan.json", "plan.result.json"] {
        if let Ok(bytes) = std::fs::read(plans.join(file)) {
            project.write(&format!("app/{file}"), bytes);
        }
    }
    project.write(
        ".terraci/policy-report.json",
        r#"{"producer": "policy", "title": "Policy checks", "status": "pass", "summary": "every module passes", "modules": []}"#,
    );
    let check = bounded(
        project.command(&["policy", "check"]),
        Duration::from_secs(60),
    );
    assert_eq!(check.code, Some(2), "{}", check.text());
    let report = project.read(".terraci/policy-report.json");
    assert!(report.contains("\"fail\""), "{report}");
    let summary = bounded(project.command(&["summary"]), Duration::from_secs(60));
    assert_eq!(summary.code, Some(0), "{}", summary.text());
    let comment = String::from_utf8_lossy(&summary.stdout);
    assert!(!comment.contains("every module passes"), "{comment}");
    assert!(comment.contains("could not run"), "{comment}");
}

#[test]
fn a_plan_job_never_writes_through_nor_prints_a_committed_plan_file_link() {
    // A merge request commits `plan.txt` (and the other plan files) as links to files of
    // the runner. The plan job's `> plan.txt` would overwrite the target (a shell
    // executor's `~/.bashrc`, `~/.ssh/authorized_keys`) with plan output the merge
    // request words, or, where the target is not writable, `cat plan.txt` would print it
    // (`/proc/self/environ`: the job's variables) in the job log.
    let outside = tempfile::tempdir().expect("temp dir");
    let project = Project::empty();
    project.write(".terraci.yaml", "structure:\n  pattern: \"{module}\"\n");
    project.write("vpc/main.tf", "# the network\n");
    let mut targets = Vec::new();
    for name in ["plan.txt", "plan.json", "plan.result.json", "plan.tfplan"] {
        let target = outside.path().join(format!("runner-{name}"));
        std::fs::write(&target, "the runner's own file\n").expect("write");
        std::os::unix::fs::symlink(&target, project.path().join("vpc").join(name))
            .expect("symlink");
        targets.push(target);
    }
    let out = project
        .command(&["generate", "--provider", "gitlab", "--no-cache"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The job as GitLab runs it: its script holds the template's lines by `!reference`.
    let jobs = crate::support::gitlab_merged_jobs(&String::from_utf8_lossy(&out.stdout));
    let (_, plan) = jobs
        .iter()
        .find(|(name, _)| name == "plan-vpc")
        .expect("a plan job");
    let script: Vec<String> = plan["script"]
        .as_sequence()
        .expect("a plan job with a script")
        .iter()
        .map(|line| line.as_str().expect("a line").to_owned())
        .collect();
    // A Terraform that plans (with changes) and shows, nothing else.
    let path = fake_programs(
        outside.path(),
        &[(
            "terraform",
            "#!/bin/sh\ncase \"$1\" in\n  plan) echo planned; exit 2 ;;\n  show) echo '{}' ;;\nesac\n",
        )],
    );
    let run = Command::new("sh")
        .args(["-ec", &script.join("\n")])
        .current_dir(project.path())
        .env("PATH", path)
        .output()
        .expect("sh runs");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(run.status.success(), "{log}");
    assert!(log.contains("planned"), "{log}");
    for target in &targets {
        assert_eq!(
            std::fs::read_to_string(target).expect("read"),
            "the runner's own file\n",
            "{} was written through a link",
            target.display()
        );
    }
    assert!(!log.contains("the runner's own file"), "{log}");
}

#[test]
fn a_cache_committed_in_the_checkout_is_neither_read_nor_written() {
    // The fact cache is sealed with a CRC, not authenticated: a merge request that
    // commits `.terraci/cache/facts.bin` could claim facts its files do not hold (a
    // dependency that reorders the applies). A tracked cache is never trusted.
    let p = one_module();
    p.write("env/app/main.tf", "# an app\n");
    commit_all(p.path());
    let first = p.run(&["generate", "--provider", "gitlab"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(
        !first.stderr.contains("committed-cache"),
        "{}",
        first.stderr
    );
    let facts = p.path().join(".terraci/cache/facts.bin");
    let committed = std::fs::read(&facts).expect("the first run wrote the fact cache");
    git(p.path(), &["add", "--force", ".terraci/cache/facts.bin"]);
    git(p.path(), &["commit", "--quiet", "--message", "a cache"]);
    p.write("env/app/main.tf", "# an app, changed\n");
    // Warned of, the committed file left as it was.
    let refused = |args: &[&str]| {
        let out = p.run(args);
        assert_eq!(out.code, 0, "{}", out.stderr);
        assert!(
            out.stderr.contains("warning[committed-cache]")
                && out.stderr.contains(".terraci/cache/facts.bin"),
            "{}",
            out.stderr
        );
        let now = std::fs::read(&facts).expect("still there");
        assert!(now == committed, "the committed cache was rewritten");
        out
    };
    let second = refused(&["generate", "--provider", "gitlab"]);
    assert!(second.stdout.contains("plan-env-app"), "{}", second.stdout);
    // `--from-commit` asks the commit it reads: the cache is committed there even when
    // git's index no longer lists it.
    git(
        p.path(),
        &["rm", "--quiet", "--cached", ".terraci/cache/facts.bin"],
    );
    refused(&["generate", "--provider", "gitlab", "--from-commit"]);
}

/// The workflow `generate --provider github` writes for `p`, with its stderr.
fn github_workflow(p: &Project) -> (serde_yaml::Value, String) {
    let out = p.run(&["generate", "--provider", "github", "--no-cache"]);
    let workflow = serde_yaml::from_str(&out.stdout).expect("YAML");
    (workflow, out.stderr)
}

/// Each `with:` input `key` of the steps of `job` that use `action`.
fn action_inputs(workflow: &serde_yaml::Value, job: &str, action: &str, key: &str) -> Vec<String> {
    workflow["jobs"][job]["steps"]
        .as_sequence()
        .expect("steps")
        .iter()
        .filter(|s| s["uses"].as_str().is_some_and(|u| u.starts_with(action)))
        .filter_map(|s| s["with"][key].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn github_artifact_paths_name_exactly_each_module() {
    // upload-artifact reads each line of `path` as an @actions/glob pattern: a line `x`
    // (a module `x<newline>z`) uploads the directory `x` whole (a link to `/`, `.git` with
    // the checkout's token) into an artifact anyone who can read the repository may
    // download; `!` excludes, `#` is a comment, `*` takes in other modules' plans, `~` is
    // the home directory, and the input is trimmed.
    let p = Project::empty();
    p.write(".terraci.yaml", "structure:\n  pattern: \"{module}\"\n");
    for module in [
        "x\nz", "!neg", "#c", "a*b", "aXb", "~", " sp", "q?", "br[ace", "plain",
    ] {
        p.write(&format!("{module}/main.tf"), "# a module\n");
    }
    let (workflow, stderr) = github_workflow(&p);
    assert!(
        stderr.contains(
            "error[unsafe-name]: x\\nz: the module gets no jobs: its path holds a line break"
        ),
        "{stderr}"
    );
    let uploads = |job: &str| -> Vec<String> {
        action_inputs(&workflow, job, "actions/upload-artifact", "path")
            .iter()
            .flat_map(|p| p.lines().map(str::to_owned).collect::<Vec<_>>())
            .collect()
    };
    let jobs = workflow["jobs"].as_mapping().expect("jobs");
    for (id, _) in jobs {
        let id = id.as_str().expect("an id");
        for line in uploads(id) {
            let file = line.rsplit('/').next().unwrap_or_default();
            assert!(
                ["plan.tfplan", "plan.txt", "plan.json", "plan.result.json"].contains(&file),
                "{id}: {line:?}"
            );
        }
        for name in action_inputs(&workflow, id, "actions/", "name") {
            assert!(
                !name.contains(['"', ':', '<', '>', '|', '*', '?', '\\', '/', '\n', '\r']),
                "{id}: artifact name {name:?}"
            );
        }
    }
    for (job, line) in [
        ("plan-_neg", "./!neg/plan.tfplan"),
        ("plan-_c", "./#c/plan.tfplan"),
        ("plan-a_b", "a[*]b/plan.tfplan"),
        ("plan-aXb", "aXb/plan.tfplan"),
        ("plan-_", "./~/plan.tfplan"),
        ("plan-_sp", "./ sp/plan.tfplan"),
        ("plan-q_", "q[?]/plan.tfplan"),
        ("plan-br_ace", "br[[]ace/plan.tfplan"),
        ("plan-plain", "plain/plan.tfplan"),
    ] {
        let dir = line.strip_suffix("plan.tfplan").expect("a plan file");
        let lines = uploads(job);
        assert_eq!(lines.first().map(String::as_str), Some(line), "{job}");
        assert!(lines.iter().all(|l| l.starts_with(dir)), "{job}: {lines:?}");
    }
    // Downloads go to the runner's temp dir, never into the checkout by a module's name.
    for (id, _) in jobs {
        let id = id.as_str().expect("an id");
        for path in action_inputs(&workflow, id, "actions/download-artifact", "path") {
            assert!(path.starts_with("${{ runner.temp }}/"), "{id}: {path}");
        }
    }
}

/// The `run` of the step named `name` of `job`.
fn step_run(workflow: &serde_yaml::Value, job: &str, name: &str) -> String {
    workflow["jobs"][job]["steps"]
        .as_sequence()
        .expect("steps")
        .iter()
        .find(|s| s["name"].as_str().is_some_and(|n| n.starts_with(name)))
        .and_then(|s| s["run"].as_str())
        .unwrap_or_else(|| panic!("{job} has no step {name:?}"))
        .to_owned()
}

#[test]
fn downloaded_artifacts_never_write_through_committed_links() {
    // download-artifact writes into the paths it is given, following links. A merge
    // request that commits `plan.tfplan`, `plan.txt` or `.terraci/policy-report.json` as
    // links to files of the runner (a self-hosted runner's `~/.bashrc`, its `.env`) had
    // the apply job, the summary job (which holds a write token) or the policy job write
    // artifact bytes there. Artifacts now land in the runner's temp dir and are put in
    // place by name, replacing whatever the checkout has there.
    let outside = tempfile::tempdir().expect("temp dir");
    let victim = |name: &str| {
        let path = outside.path().join(name);
        std::fs::write(&path, "the runner's own file\n").expect("write");
        path
    };
    let p = Project::empty();
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{module}\"\nextensions:\n  summary:\n    enabled: true\n  policy:\n    enabled: true\n    sources:\n      - type: path\n        path: policies\n",
    );
    p.write("vpc/main.tf", "# the network\n");
    p.write("policies/deny.rego", "package terraform\n");
    let links = [
        ("vpc/plan.tfplan", victim("tfplan")),
        ("vpc/plan.txt", victim("txt")),
        (".terraci/policy-report.json", victim("report")),
    ];
    for (rel, target) in &links {
        std::fs::create_dir_all(p.path().join(rel).parent().expect("a parent")).expect("mkdir");
        std::os::unix::fs::symlink(target, p.path().join(rel)).expect("symlink");
    }
    let (workflow, stderr) = github_workflow(&p);
    assert!(workflow["jobs"]["apply-vpc"].is_mapping(), "{stderr}");
    // What the download steps leave in the runner's temp dir.
    let temp = tempfile::tempdir().expect("temp dir");
    let put = |rel: &str, text: &str| {
        let path = temp.path().join(rel);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    put("terraci-plan/plan.tfplan", "the plan to apply\n");
    put("terraci-plan/main.tf", "# not a plan file\n");
    put(
        "terraci-plans/terraci-plan-vpc/plan.txt",
        "echo pwned # planned\n",
    );
    put(
        "terraci-reports/policy-report.json",
        "{\"producer\": \"policy\"}\n",
    );
    // A terraform that applies nothing, a terraci whose checks pass.
    let echo = "#!/bin/sh\necho \"$@\"\n";
    let path = fake_programs(outside.path(), &[("terraform", echo), ("terraci", echo)]);
    // The workflow's `env` (the apply's script that takes the plan is there), as GitHub
    // sets it for every step.
    let workflow_env: Vec<(String, String)> = workflow["env"]
        .as_mapping()
        .expect("env")
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().expect("a name").to_owned(),
                v.as_str().expect("a value").to_owned(),
            )
        })
        .collect();
    let run = |dir: &str, script: &str| {
        let out = Command::new("sh")
            .args(["-ec", script])
            .current_dir(p.path().join(dir))
            .envs(workflow_env.iter().map(|(k, v)| (k, v)))
            .env("RUNNER_TEMP", temp.path())
            .env("PATH", &path)
            .output()
            .expect("sh runs");
        assert!(
            out.status.success(),
            "{script}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    run("vpc", &step_run(&workflow, "apply-vpc", "Apply"));
    run(
        ".",
        &step_run(&workflow, "terraci-summary", "Put the plans"),
    );
    run(
        ".",
        &step_run(&workflow, "terraci-summary", "Put the reports"),
    );
    for (rel, target) in &links {
        assert_eq!(
            std::fs::read_to_string(target).expect("read"),
            "the runner's own file\n",
            "{rel} was written through"
        );
        assert!(is_regular_file(&p.path().join(rel)), "{rel}");
    }
    assert_eq!(p.read("vpc/plan.tfplan"), "the plan to apply\n");
    assert_eq!(p.read("vpc/plan.txt"), "echo pwned # planned\n");
    assert_eq!(p.read("vpc/main.tf"), "# the network\n");
    assert_eq!(
        p.read(".terraci/policy-report.json"),
        "{\"producer\": \"policy\"}\n"
    );
}

#[test]
fn fileexists_answers_nothing_about_the_git_directory() {
    // `file()` refuses the git directory; `fileexists()` answered for it as for any file,
    // so a module could still choose its dependencies by what the runner's `.git` holds.
    let project = Project::empty();
    project.write(".terraci.yaml", "structure:\n  pattern: \"{module}\"\n");
    project.write("vpc/main.tf", "# the network\n");
    for (module, path) in [
        ("direct", "${path.module}/../.git/config"),
        ("linked", "${path.module}/../cfg"),
    ] {
        project.write(
            &format!("{module}/main.tf"),
            format!(
                "data \"terraform_remote_state\" \"s\" {{\n  backend = \"local\"\n  config = {{\n    path = fileexists(\"{path}\") ? \"../vpc/terraform.tfstate\" : \"../none/terraform.tfstate\"\n  }}\n}}\n"
            ),
        );
    }
    commit_all(project.path());
    std::os::unix::fs::symlink(".git/config", project.path().join("cfg")).expect("symlink");
    let out = project.run(&["graph", "--format", "list", "--no-cache", "-v"]);
    for module in ["direct", "linked"] {
        assert!(
            out.stderr
                .lines()
                .any(|l| l.contains(&format!("{module}/main.tf:"))
                    && l.contains("cannot tell whether")
                    && l.contains("git directory")),
            "{module}:\n{}\n{}",
            out.stdout,
            out.stderr
        );
    }
}

#[test]
fn a_terraform_file_linked_into_the_git_directory_is_never_read() {
    // `main.tf -> ../.git/config` lies inside the project, so it was read, and its syntax
    // error showed the line it starts with: the runner's git configuration.
    let project = Project::empty();
    project.write(".terraci.yaml", "structure:\n  pattern: \"{module}\"\n");
    project.write("vpc/main.tf", "# the network\n");
    project.write("shared/main.tf", "# reached through a link, still read\n");
    commit_all(project.path());
    git(
        project.path(),
        &["config", "core.x-secret", "T0ken-In-Git-Config"],
    );
    std::fs::create_dir_all(project.path().join("app")).expect("mkdir");
    std::fs::create_dir_all(project.path().join("other")).expect("mkdir");
    std::os::unix::fs::symlink("../.git/config", project.path().join("app/main.tf"))
        .expect("symlink");
    std::os::unix::fs::symlink("../shared/main.tf", project.path().join("other/main.tf"))
        .expect("symlink");
    let out = project.run(&["validate", "--no-cache"]);
    let text = format!("{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains(
            "error[unsafe-path]: app/main.tf: not read: a symlink into the git directory (`.git/config`)"
        ),
        "{text}"
    );
    for secret in ["[core]", "T0ken-In-Git-Config", "x-secret"] {
        assert!(!text.contains(secret), "{secret} shown:\n{text}");
    }
    assert!(!out.stderr.contains("other/main.tf"), "{text}");
}

#[test]
fn a_plan_result_committed_in_the_checkout_is_flagged_stale() {
    // The merge request changes `app` and commits, beside it, a plan result saying "no
    // changes" that names no commit: no plan job of this pipeline made it (each records
    // the pipeline's commit), so the comment must not show it as this run's plan.
    let p = Project::empty();
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{module}\"\nextensions:\n  summary:\n    enabled: true\n",
    );
    p.write("app/main.tf", "resource \"null_resource\" \"x\" {}\n");
    p.write("app/plan.result.json", r#"{"exit_code": 0, "commit": ""}"#);
    p.write(
        "app/plan.json",
        r#"{"format_version": "1.2", "resource_changes": []}"#,
    );
    let out = p.run_env(
        &["summary"],
        &[
            ("GITLAB_CI", "true"),
            ("CI_COMMIT_SHA", "0123456789abcdef0123456789abcdef01234567"),
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = out
        .stdout
        .lines()
        .find(|l| l.contains("`app`"))
        .unwrap_or_else(|| panic!("no row for app:\n{}", out.stdout));
    assert!(row.contains("stale"), "{row}\n{}", out.stdout);
    assert!(
        out.stdout
            .contains("This plan names no commit: no plan job of this pipeline made it"),
        "{}",
        out.stdout
    );
}

#[test]
fn privileged_github_triggers_are_warned_about() {
    // `pull_request_target` and `workflow_run` runs hold a write token and the secrets
    // whoever opened the pull request; with them the plans are not the pull request's.
    for (on, warned) in [
        (
            "{pull_request_target: {branches: [main]}, push: null}",
            Some("pull_request_target"),
        ),
        ("[push, workflow_run]", Some("workflow_run")),
        ("pull_request_target", Some("pull_request_target")),
        ("{pull_request: null, push: {branches: [main]}}", None),
    ] {
        let p = Project::empty();
        p.write(
            ".terraci.yaml",
            format!(
                "structure:\n  pattern: \"{{module}}\"\nextensions:\n  github:\n    on: {on}\n"
            ),
        );
        p.write("vpc/main.tf", "# the network\n");
        let out = p.run(&["generate", "--provider", "github", "--no-cache"]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        let warning = out
            .stderr
            .lines()
            .find(|l| l.starts_with("warning[privileged-trigger]"));
        match warned {
            Some(name) => assert!(
                warning.is_some_and(|w| w.contains(&format!("`{name}`"))),
                "{on}:\n{}",
                out.stderr
            ),
            None => assert!(warning.is_none(), "{on}:\n{}", out.stderr),
        }
    }
}

#[test]
fn gitlab_artifact_paths_name_exactly_each_module() {
    // GitLab Runner matches `artifacts:paths` as doublestar globs: `a*b/plan.json` also
    // took `aXb/plan.json` (which a merge request can commit) into the artifact of
    // `a*b`'s plan job.
    let p = Project::empty();
    p.write(".terraci.yaml", "structure:\n  pattern: \"{module}\"\n");
    for module in [
        "a*b",
        "aXb",
        "q?",
        "br[ace",
        "{x,y}",
        "back\\slash",
        "plain",
    ] {
        p.write(&format!("{module}/main.tf"), "# a module\n");
    }
    let out = p.run(&["generate", "--provider", "gitlab", "--no-cache"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pipeline: serde_yaml::Value = serde_yaml::from_str(&out.stdout).expect("YAML");
    for (module, literal) in [
        ("a*b", "a\\*b"),
        ("aXb", "aXb"),
        ("q?", "q\\?"),
        ("br[ace", "br\\[ace"),
        ("{x,y}", "\\{x,y}"),
        ("back\\slash", "back\\\\slash"),
        ("plain", "plain"),
    ] {
        let paths: Vec<&str> = pipeline[format!("plan-{module}").as_str()]["artifacts"]["paths"]
            .as_sequence()
            .unwrap_or_else(|| panic!("plan-{module} has artifact paths:\n{}", out.stdout))
            .iter()
            .filter_map(serde_yaml::Value::as_str)
            .collect();
        assert!(
            !paths.is_empty() && paths.iter().all(|p| p.starts_with(&format!("{literal}/"))),
            "{module}: {paths:?}"
        );
    }
}
