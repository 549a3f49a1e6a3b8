use std::path::{Path, PathBuf};
use std::process::Command;

pub(crate) struct Project {
    pub dir: tempfile::TempDir,
    /// The per-user cache home (`TERRACI_CACHE_HOME`), outside the project: tests set
    /// HOME to the project, where terraci refuses to keep its cache.
    pub cache: tempfile::TempDir,
}

impl Project {
    /// A copy of `fixtures/<name>`.
    pub(crate) fn fixture(name: &str) -> Project {
        let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
            .join("fixtures")
            .join(name);
        let dir = tempfile::tempdir().expect("temp dir");
        copy_dir(&src, dir.path());
        Project {
            dir,
            cache: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn empty() -> Project {
        Project {
            dir: tempfile::tempdir().expect("temp dir"),
            cache: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The cache home the commands get (`TERRACI_CACHE_HOME`).
    pub(crate) fn cache_home(&self) -> &Path {
        self.cache.path()
    }

    pub(crate) fn write(&self, rel: &str, contents: impl AsRef<[u8]>) {
        let p = self.dir.path().join(rel);
        std::fs::create_dir_all(p.parent().expect("file has a parent")).expect("mkdir");
        std::fs::write(p, contents).expect("write");
    }

    pub(crate) fn remove(&self, rel: &str) {
        std::fs::remove_file(self.dir.path().join(rel)).expect("remove");
    }

    pub(crate) fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(rel)).expect("read")
    }

    /// Runs `terraci ARGS` with the project as the working directory and a clean
    /// environment (no CI variables leak in from the machine running the tests).
    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.run_env(args, &[])
    }

    /// [`Project::run`] with the subdirectory `sub` of the project as the working directory.
    pub(crate) fn run_in(&self, sub: &str, args: &[&str]) -> Output {
        let mut cmd = self.command(args);
        cmd.current_dir(self.path().join(sub));
        self.finish(cmd)
    }

    pub(crate) fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut cmd = self.command(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.finish(cmd)
    }

    fn finish(&self, mut cmd: Command) -> Output {
        let out = cmd.output().expect("run terraci");
        Output {
            code: out.status.code().unwrap_or(-1),
            stdout: self.redact(&out.stdout),
            stderr: self.redact(&out.stderr),
        }
    }

    /// `terraci ARGS` in the project, with a clean environment (see [`Project::run`]).
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_terraci"));
        cmd.args(args)
            .current_dir(self.path())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("HOME", self.path())
            .env("TERRACI_CACHE_HOME", self.cache.path());
        cmd
    }

    /// Output with the project directory and terraci's version replaced by placeholders.
    pub(crate) fn redact(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let real = self
            .path()
            .canonicalize()
            .unwrap_or(self.path().to_path_buf());
        text.replace(&real.display().to_string(), "[PROJECT]")
            .replace(&self.path().display().to_string(), "[PROJECT]")
            .replace(env!("CARGO_PKG_VERSION"), "[VERSION]")
    }
}

pub(crate) struct Output {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// The snapshot form: exit code, stdout, stderr.
    pub(crate) fn snapshot(&self) -> String {
        format!(
            "exit: {}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Copies a fixture, leaving out `.terraci/` (the caches and logs a run of the README's
/// quick start leaves in `fixtures/example`), so every test starts without them.
fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for entry in std::fs::read_dir(src).expect("read fixture dir") {
        let entry = entry.expect("dir entry");
        if entry.file_name() == ".terraci" {
            continue;
        }
        let to = dst.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            copy_dir(&entry.path(), &to);
        } else {
            std::fs::copy(entry.path(), &to).expect("copy");
        }
    }
}

/// The crate's CI client binary `name` (installed by `.ci/clients.sh`).
pub(crate) fn client(name: &str) -> PathBuf {
    let p = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("tools/ci-clients/node_modules/.bin")
        .join(name);
    assert!(
        p.exists(),
        "{} is missing: run `bash .ci/clients.sh` first",
        p.display()
    );
    p
}

#[macro_export]
macro_rules! snap {
    ($name:expr, $value:expr) => {
        insta::with_settings!({snapshot_path => "../../snapshots/cli", prepend_module_to_snapshot => false}, {
            insta::assert_snapshot!($name, $value);
        })
    };
}

/// actionlint's findings on a workflow (empty when it passes).
pub(crate) fn actionlint(workflow: &str) -> String {
    let dir = tempfile::tempdir().expect("temp dir");
    let wf = dir.path().join(".github/workflows");
    std::fs::create_dir_all(&wf).expect("mkdir");
    std::fs::write(wf.join("terraform.yml"), workflow).expect("write");
    let out = Command::new(client("actionlint"))
        .arg(".github/workflows/terraform.yml")
        .current_dir(dir.path())
        .output()
        .expect("actionlint runs");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if !out.status.success() && report.trim().is_empty() {
        return "actionlint failed without output".into();
    }
    report
}

/// Runs `git args` in `dir` (with an author for commits), asserting it succeeds.
pub(crate) fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git runs")
        .status
        .success();
    assert!(ok, "git {args:?}");
}

/// Makes `dir` a git repository with one commit of everything in it, and the GitLab
/// remote gitlab-ci-local reads the project's name from.
pub(crate) fn commit_all(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    git(
        dir,
        &[
            "remote",
            "add",
            "origin",
            "https://gitlab.example.com/infra/live.git",
        ],
    );
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "p"]);
}

/// The jobs of a GitLab pipeline as GitLab runs them, by name: each top-level mapping
/// that is not hidden (`.name`) nor a keyword, merged over the hidden job it `extends`
/// as GitLab merges (hashes key by key, the job's own keys winning).
pub(crate) fn gitlab_merged_jobs(pipeline: &str) -> Vec<(String, serde_yaml::Mapping)> {
    use serde_yaml::{Mapping, Value};
    fn merge(base: &mut Mapping, over: &Mapping) {
        for (key, value) in over {
            match (base.get_mut(key), value) {
                (Some(Value::Mapping(b)), Value::Mapping(o)) => merge(b, o),
                _ => {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
    }
    let doc: Mapping = serde_yaml::from_str(pipeline).expect("pipeline is YAML");
    let keywords = ["stages", "variables", "default", "workflow", "include"];
    let mut jobs = Vec::new();
    for (name, job) in &doc {
        let (Some(name), Value::Mapping(job)) = (name.as_str(), job) else {
            continue;
        };
        if name.starts_with('.') || keywords.contains(&name) {
            continue;
        }
        let mut job = job.clone();
        let merged = match job.remove("extends") {
            Some(Value::String(template)) => {
                let mut base = doc
                    .get(template.as_str())
                    .and_then(Value::as_mapping)
                    .unwrap_or_else(|| panic!("{name} extends {template}, which is not there"))
                    .clone();
                merge(&mut base, &job);
                base
            }
            Some(other) => panic!("{name}: extends {other:?}"),
            None => job,
        };
        let mut merged = merged;
        terraci_render::resolve_references(&mut merged, &doc).unwrap_or_else(|e| panic!("{e}"));
        jobs.push((name.to_owned(), merged));
    }
    jobs
}

/// `gitlab-ci-local --list` on a pipeline: Ok(job list) or Err(its complaint).
pub(crate) fn gitlab_ci_local_list(pipeline: &str) -> Result<String, String> {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(dir.path().join(".gitlab-ci.yml"), pipeline).expect("write");
    commit_all(dir.path());
    let out = Command::new(client("gitlab-ci-local"))
        .arg("--list")
        .current_dir(dir.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("gitlab-ci-local runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{stdout}{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// A synthetic monorepo of `n` root modules at `{service}/{environment}/{region}/{module}`
/// (the default pattern), written here so that no test needs files outside the
/// repository: every module keeps its state in s3 under its own id; module `i` reads
/// module `i - 1` of its context through a literal key and, every third one, module
/// `i - 2` through a `for_each` over a local map and a key built from locals. Returns
/// the project and the number of edges those reads make.
pub(crate) fn synthetic_monorepo(n: usize) -> (Project, usize) {
    let p = Project::empty();
    let per_context = 10;
    let mut edges = 0;
    for i in 0..n {
        let (context, k) = (i / per_context, i % per_context);
        let service = format!("svc{}", context % 7);
        let env = ["dev", "stage", "prod"][(context / 7) % 3];
        let region = format!("r{}", context / 21);
        let dir = format!("{service}/{env}/{region}");
        let id = |k: usize| format!("{dir}/m{k}");
        let mut text = format!(
            "terraform {{\n  backend \"s3\" {{\n    bucket = \"state\"\n    key    = \"{}/terraform.tfstate\"\n  }}\n}}\n\nlocals {{\n  context = \"{dir}\"\n}}\n",
            id(k)
        );
        if k >= 1 {
            text.push_str(&format!(
                "\ndata \"terraform_remote_state\" \"previous\" {{\n  backend = \"s3\"\n  config = {{\n    bucket = \"state\"\n    key    = \"{}/terraform.tfstate\"\n  }}\n}}\n",
                id(k - 1)
            ));
            edges += 1;
        }
        if k >= 2 && k % 3 == 0 {
            text.push_str(&format!(
                "\nlocals {{\n  deps = {{ older = \"m{}\" }}\n}}\n\ndata \"terraform_remote_state\" \"older\" {{\n  for_each = local.deps\n  backend  = \"s3\"\n  config = {{\n    bucket = \"state\"\n    key    = \"${{local.context}}/${{each.value}}/terraform.tfstate\"\n  }}\n}}\n",
                k - 2
            ));
            edges += 1;
        }
        p.write(&format!("{}/main.tf", id(k)), text);
    }
    (p, edges)
}
