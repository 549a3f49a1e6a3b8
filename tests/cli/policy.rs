//! `policy pull` and `policy check`: results against OPA's (fixtures/policy/expected.json,
//! made by tools/policy-oracle/regen.py with OPA's Go engine), decisions and overrides,
//! exit codes, the report, bad policies, and each source kind (a path, a git repository
//! at a tag and a branch, an OCI registry served here).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;

use crate::changes::git_at;
use crate::support::{Output, Project};

/// `policy check` of the one module without resources of its own policy findings.
fn check_vpc(p: &Project) -> Output {
    p.run(&[
        "policy",
        "check",
        "--module",
        "platform/stage/eu-central-1/vpc",
    ])
}

fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"))
}

/// Every module's findings as OPA's expected file lists them: `data.ns.rule` -> values.
fn findings_by_rule(result: &serde_json::Value) -> BTreeMap<String, Vec<serde_json::Value>> {
    let mut out: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for f in result["failures"]
        .as_array()
        .unwrap()
        .iter()
        .chain(result["warnings"].as_array().unwrap())
    {
        let key = format!(
            "data.{}.{}",
            f["namespace"].as_str().unwrap(),
            f["rule"].as_str().unwrap()
        );
        let value = match f.get("metadata") {
            Some(meta) => {
                let mut obj = meta.as_object().unwrap().clone();
                obj.insert("msg".into(), f["msg"].clone());
                serde_json::Value::Object(obj)
            }
            None => f["msg"].clone(),
        };
        out.entry(key).or_default().push(value);
    }
    for v in out.values_mut() {
        v.sort_by_key(|x| x.to_string());
    }
    out
}

#[test]
fn regorus_gives_the_results_opa_gives_on_the_fixture_plans() {
    let p = Project::fixture("policy");
    // Every namespace, every module, nothing blocking: all findings are listed. The rules
    // are conftest style (`input.resource_changes`), as OPA was given the plan: `input: plan`.
    let config = |input: &str| {
        format!(
            "structure:\n  pattern: \"{{service}}/{{environment}}/{{region}}/{{module}}\"\n\
             extensions:\n  policy:\n    enabled: true\n{input}    sources:\n      - {{type: path, path: terraform}}\n      - {{type: path, path: compliance}}\n      - {{type: path, path: builtins}}\n\
             \x20   namespaces: [terraform, compliance, builtins]\n    decisions: {{deny: warn, warn: warn}}\n"
        )
    };
    let findings = |out: &Output| {
        json(&out.stdout)["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| findings_by_rule(r).values().map(Vec::len).sum::<usize>())
            .sum::<usize>()
    };
    // Without it, TerraCi's envelope: those rules find less (the plan is `input.plan`).
    p.write(".terraci.yaml", config(""));
    let envelope = p.run(&["policy", "check", "--format", "json"]);
    assert_eq!(envelope.code, 0, "{}", envelope.stderr);
    p.write(".terraci.yaml", config("    input: plan\n"));
    let out = p.run(&["policy", "check", "--format", "json"]);
    assert!(findings(&envelope) < findings(&out));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let got = json(&out.stdout);
    let expected = json(&p.read("expected.json"));
    let modules = expected["modules"].as_object().unwrap();
    assert_eq!(got["results"].as_array().unwrap().len(), modules.len());
    for result in got["results"].as_array().unwrap() {
        let module = result["module"].as_str().unwrap();
        let mut want: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
        for (rule, values) in modules[module].as_object().unwrap() {
            let values = values.as_array().unwrap();
            if !values.is_empty() {
                let mut v = values.clone();
                v.sort_by_key(|x| x.to_string());
                want.insert(rule.clone(), v);
            }
        }
        assert_eq!(findings_by_rule(result), want, "module {module}");
    }
}

#[test]
fn decisions_and_overrides_give_statuses_exit_code_and_report() {
    let p = Project::fixture("policy");
    let out = p.run(&["policy", "check"]);
    assert_eq!(
        out.code, 1,
        "a blocking deny fails the check\n{}{}",
        out.stdout, out.stderr
    );
    let statuses: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| !l.starts_with(' ') && l.contains(": "))
        .filter(|l| !l.contains("checked"))
        .map(|l| l.split(':').next().unwrap())
        .collect();
    assert_eq!(
        statuses,
        [
            "skip  legacy/old/eu-central-1/db",
            "fail  platform/prod/eu-central-1/db",
            "warn  platform/sandbox/eu-central-1/test",
            "warn  platform/stage/eu-central-1/app",
            "fail  platform/stage/eu-central-1/bad",
            "pass  platform/stage/eu-central-1/vpc",
        ],
        "{}",
        out.stdout
    );
    // The sandbox's deny is a warning by its override; prod also runs compliance.
    assert!(out.stdout.contains(
        "warning: terraform.deny: S3 bucket 'scratch' must not be public (acl public-read-write)"
    ));
    assert!(out.stdout.contains(
        "failure: compliance.deny: instance 'replica' uses expensive type 'x2iedn.32xlarge'"
    ));
    // Elsewhere compliance is not a namespace.
    assert!(!out.stdout.contains("compliance.deny: instance 'gpu'"));
    let last = out.stdout.lines().last().unwrap();
    assert_eq!(
        last,
        "5 modules checked: 1 passed, 2 warned, 2 failed, 1 skipped (5 failures, 11 warnings, 0 ignored)"
    );

    let report = json(&p.read(".terraci/policy-report.json"));
    // Exactly the keys of the summary's producer format (its reader refuses others).
    let keys: Vec<&String> = report.as_object().unwrap().keys().collect();
    assert_eq!(keys, ["producer", "title", "status", "summary", "modules"]);
    let module_keys: Vec<&String> = report["modules"][0].as_object().unwrap().keys().collect();
    assert_eq!(module_keys, ["module", "status", "summary", "details"]);
    let results = json(&p.read(".terraci/policy-results.json"));
    assert_eq!(results["failed_modules"], 2);
    assert_eq!(report["producer"], "policy");
    assert_eq!(report["title"], "Policy checks");
    assert_eq!(report["status"], "fail");
    assert_eq!(
        report["summary"],
        "5 modules checked: 1 passed, 2 warned, 2 failed, 1 skipped"
    );
    let bad = report["modules"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["module"] == "platform/stage/eu-central-1/bad")
        .unwrap();
    assert_eq!(bad["status"], "fail");
    assert_eq!(bad["summary"], "4 failures, 4 warnings");
    assert!(bad["details"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(
            "failure: terraform.violation: terraform_data.public has an unknown Environment qa"
        )));
}

#[test]
fn warn_and_ignore_decisions_do_not_fail_and_one_module_can_be_checked() {
    let p = Project::fixture("policy");
    let config = p
        .read(".terraci.yaml")
        .replace("deny: block", "deny: ignore");
    p.write(".terraci.yaml", config);
    let out = p.run(&[
        "policy",
        "check",
        "--module",
        "platform/stage/eu-central-1/bad",
        "-o",
        "json",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let got = json(&out.stdout);
    assert_eq!(got["total_modules"], 1);
    assert_eq!(got["status"], "warn");
    assert_eq!(got["total_failures"], 0);
    assert_eq!(
        got["total_suppressed"], 4,
        "the four deny results are ignored"
    );
    assert_eq!(
        got["results"][0]["module"],
        "platform/stage/eu-central-1/bad"
    );
    let report = json(&p.read(".terraci/policy-report.json"));
    assert_eq!(report["modules"].as_array().unwrap().len(), 1);
    // In a pipeline the report names its commit, which the summary checks.
    let stamped = p.run_env(
        &[
            "policy",
            "check",
            "--module",
            "platform/stage/eu-central-1/bad",
        ],
        &[("CI_COMMIT_SHA", "0123abcd")],
    );
    assert_eq!(stamped.code, 0, "{}", stamped.stderr);
    let report = json(&p.read(".terraci/policy-report.json"));
    assert_eq!(report["commit"], "0123abcd");

    let missing = p.run(&[
        "policy",
        "check",
        "--module",
        "platform/stage/eu-central-1/nope",
    ]);
    assert_stderr(
        &missing,
        2,
        "`platform/stage/eu-central-1/nope` is not a module",
    );
}

#[test]
fn a_syntax_error_names_the_file_and_line_and_checks_nothing() {
    let p = Project::fixture("policy");
    p.write(
        "terraform/broken.rego",
        "package terraform\n\nimport rego.v1\n\ndeny contains msg if {\n  msg := \n}\n",
    );
    let out = p.run(&["policy", "check"]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .starts_with("error[policy-syntax]: terraform/broken.rego:"),
        "{}",
        out.stderr
    );
    let line: u32 = out.stderr["error[policy-syntax]: terraform/broken.rego:".len()..]
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!((5..=7).contains(&line), "{}", out.stderr);
    assert!(out.stdout.is_empty());
}

#[test]
fn a_runtime_error_or_a_loop_fails_the_module_with_a_coded_diagnostic() {
    let p = Project::fixture("policy");
    p.write(
        "terraform/conflict.rego",
        "package terraform\n\nimport rego.v1\n\nowner := \"a\" if { count(input.resource_changes) > 1 }\nowner := \"b\" if { count(input.resource_changes) > 1 }\n\nviolation_owner contains owner if { owner }\n",
    );
    let out = p.run(&[
        "policy",
        "check",
        "--module",
        "platform/stage/eu-central-1/app",
    ]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .starts_with("error[policy-runtime]: terraform/conflict.rego:"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.starts_with(
            "fail  platform/stage/eu-central-1/app: policy error: terraform/conflict.rego:"
        ),
        "{}",
        out.stdout
    );

    p.write(
        "terraform/conflict.rego",
        "package terraform\n\nimport rego.v1\n\ndeny_slow contains \"never\" if {\n  count([1 | some a in numbers.range(1, 20000); some b in numbers.range(1, 20000); a * b == -1]) > 0\n}\n",
    );
    let started = std::time::Instant::now();
    let out = p.run(&[
        "policy",
        "check",
        "--module",
        "platform/stage/eu-central-1/vpc",
        "--timeout",
        "0.5",
    ]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains("error[policy-limit]"), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("data.terraform.deny_slow did not finish within 0.5 s"),
        "{}",
        out.stderr
    );
}

#[test]
fn config_mistakes_are_reported() {
    let p = Project::fixture("policy");
    let config = p.read(".terraci.yaml");
    p.write(
        ".terraci.yaml",
        config.replace("path: compliance", "path: missing-dir"),
    );
    let out = p.run(&["policy", "check"]);
    assert_stderr(
        &out,
        2,
        "error[policy-source]: policy source path:missing-dir: `missing-dir` is not a directory",
    );
    p.write(".terraci.yaml", config.replace("deny: block", "deny: stop"));
    let out = p.run(&["policy", "check"]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("stop"), "{}", out.stderr);
    // TerraCi's older keys take effect: `on_failure: warn` is `decisions.deny: warn`, so
    // the denied modules pass with warnings (with `on_failure: block` they fail).
    for (on_failure, code) in [("warn", 0), ("block", 1)] {
        p.write(
            ".terraci.yaml",
            config.replace(
                "    decisions:\n      deny: block\n      warn: warn\n",
                &format!("    on_failure: {on_failure}\n"),
            ),
        );
        let out = p.run(&["policy", "check"]);
        assert_eq!(out.code, code, "{on_failure}: {}", out.stderr);
        assert!(
            !out.stderr.contains("not a key terraci knows"),
            "{}",
            out.stderr
        );
    }
    let no_section = Project::fixture("policy");
    no_section.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{service}/{environment}/{region}/{module}\"\n",
    );
    let out = no_section.run(&["policy", "check"]);
    assert_stderr(&out, 2, "extensions.policy is not configured");
}

/// Exit `code` with `message` on stderr.
fn assert_stderr(out: &Output, code: i32, message: &str) {
    assert_eq!(out.code, code, "{}{}", out.stdout, out.stderr);
    assert!(out.stderr.contains(message), "{}", out.stderr);
}

/// `policy pull` exits 2 with `message` on stderr.
fn assert_pull_fails(p: &Project, message: &str) {
    assert_stderr(&p.run(&["policy", "pull"]), 2, message);
}

/// Exit 1 and `line` among the results.
fn assert_failure(out: &Output, line: &str) {
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(out.stdout.contains(line), "{}", out.stdout);
}

const DENY_ALL: &str =
    "package terraform\n\nimport rego.v1\n\ndeny contains \"tagged policy\" if { true }\n";
const WARN_ALL: &str =
    "package terraform\n\nimport rego.v1\n\nwarn contains \"branch policy\" if { true }\n";

fn git_config(url: &str, reference: &str) -> String {
    format!(
        "structure:\n  pattern: \"{{service}}/{{environment}}/{{region}}/{{module}}\"\n\
         extensions:\n  policy:\n    enabled: true\n    sources:\n      - type: git\n        url: \"{url}\"\n        ref: \"{reference}\"\n"
    )
}

#[test]
fn a_git_source_is_pulled_at_a_tag_and_at_a_branch_and_cached_by_commit() {
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    git_at(r, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(r.join("policies")).unwrap();
    std::fs::write(r.join("policies/deny.rego"), DENY_ALL).unwrap();
    git_at(r, &["add", "."]);
    git_at(r, &["commit", "-q", "-m", "v1"]);
    git_at(r, &["tag", "-a", "v1", "-m", "v1"]);
    let tagged = git_at(r, &["rev-parse", "HEAD"]).trim().to_owned();
    git_at(r, &["checkout", "-q", "-b", "next"]);
    std::fs::remove_file(r.join("policies/deny.rego")).unwrap();
    std::fs::write(r.join("policies/warn.rego"), WARN_ALL).unwrap();
    git_at(r, &["add", "-A"]);
    git_at(r, &["commit", "-q", "-m", "next"]);
    let branch = git_at(r, &["rev-parse", "HEAD"]).trim().to_owned();
    let url = format!("file://{}", r.display());

    let p = Project::fixture("policy");
    p.write(".terraci.yaml", git_config(&url, "v1"));
    let before = p.run(&["policy", "check"]);
    assert_stderr(&before, 2, "not pulled: run `terraci policy pull` first");

    let pull = p.run(&["policy", "pull"]);
    assert_eq!(pull.code, 0, "{}", pull.stderr);
    assert!(
        pull.stdout.contains(&format!("at {tagged}")),
        "{tagged}: {}",
        pull.stdout
    );
    let lock = json(&p.read(".terraci/policy.lock.json"));
    assert_eq!(lock["sources"][0]["type"], "git");
    assert_eq!(lock["sources"][0]["ref"], "v1");
    assert_eq!(lock["sources"][0]["commit"], tagged.as_str());
    assert_eq!(lock["sources"][0]["files"], 1);
    let check = check_vpc(&p);
    assert_failure(&check, "failure: terraform.deny: tagged policy");

    p.write(".terraci.yaml", git_config(&url, "next"));
    assert_eq!(p.run(&["policy", "pull"]).code, 0);
    let lock = json(&p.read(".terraci/policy.lock.json"));
    assert_eq!(lock["sources"][0]["commit"], branch.as_str());
    let check = check_vpc(&p);
    assert_eq!(check.code, 0, "{}", check.stderr);
    assert!(
        check
            .stdout
            .contains("warning: terraform.warn: branch policy"),
        "{}",
        check.stdout
    );

    // A ref the repository does not have.
    p.write(".terraci.yaml", git_config(&url, "v9"));
    assert_pull_fails(&p, &format!("error[policy-source]: policy source git:{url}@v9: the repository has no branch or tag `v9`"));
    // A commit already fetched is read from the cache: the repository can be gone.
    p.write(".terraci.yaml", git_config(&url, &tagged));
    drop(repo);
    let pull = p.run(&["policy", "pull"]);
    assert_eq!(pull.code, 0, "{}", pull.stderr);
    assert!(p.run(&["policy", "check"]).stdout.contains("tagged policy"));

    // A repository that is not there.
    let elsewhere = tempfile::tempdir().unwrap();
    let gone = format!("file://{}/nothing-here", elsewhere.path().display());
    p.write(".terraci.yaml", git_config(&gone, "main"));
    assert_pull_fails(
        &p,
        &format!("error[policy-source]: policy source git:{gone}@main: cannot connect"),
    );
}

/// A bare repository committed where `policy pull` keeps a URL's objects, with a
/// `core.sshCommand` that would run a program: terraci never honours that config.
#[test]
fn a_git_store_committed_in_the_checkout_runs_nothing() {
    let url = "ssh://git@127.0.0.1:1/p.git";
    let p = Project::empty();
    p.write(".terraci.yaml", git_config(url, "main"));
    let digest = sha256(url.as_bytes());
    let store = p
        .path()
        .join(".terraci/policies/.git-store")
        .join(&digest.trim_start_matches("sha256:")[..16]);
    std::fs::create_dir_all(&store).unwrap();
    git_at(&store, &["init", "-q", "--bare", "."]);
    let pwned = p.path().join("PWNED");
    git_at(
        &store,
        &[
            "config",
            "core.sshCommand",
            &format!("sh -c 'touch {}' #", pwned.display()),
        ],
    );
    git_at(
        &store,
        &[
            "config",
            "core.gitProxy",
            &format!("sh -c 'touch {}' #", pwned.display()),
        ],
    );
    let pull = p.run(&["policy", "pull"]);
    assert!(
        !pwned.exists(),
        "the store's core.sshCommand ran: {}",
        pull.stderr
    );
    assert_stderr(
        &pull,
        2,
        "error[policy-source]: policy source git:ssh://127.0.0.1:1/p.git@main: cannot",
    );
    // The committed store is not the one terraci uses: the per-user cache home's is, and
    // even there its config is rewritten before use.
    let cached = p
        .cache_home()
        .join("policies/git-store")
        .join(digest.trim_start_matches("sha256:"));
    std::fs::create_dir_all(&cached).unwrap();
    git_at(&cached, &["init", "-q", "--bare", "."]);
    git_at(
        &cached,
        &[
            "config",
            "core.sshCommand",
            &format!("sh -c 'touch {}' #", pwned.display()),
        ],
    );
    let pull = p.run(&["policy", "pull"]);
    assert!(!pwned.exists(), "core.sshCommand ran: {}", pull.stderr);
    assert_eq!(pull.code, 2, "{}", pull.stderr);
    let config = std::fs::read_to_string(cached.join("config")).unwrap();
    assert!(!config.contains("sshCommand"), "{config}");
}

/// A `file://` URL or a local path into the checkout is refused: git would read that
/// repository's own config. Policies in the checkout are a `path` source.
#[test]
fn a_git_url_into_the_checkout_is_refused() {
    let p = Project::empty();
    let inside = p.path().join("evil.git");
    std::fs::create_dir_all(&inside).unwrap();
    git_at(&inside, &["init", "-q", "--bare", "."]);
    for url in [
        format!("file://{}", inside.display()),
        inside.display().to_string(),
        format!("file://{}/not-yet", p.path().display()),
    ] {
        p.write(".terraci.yaml", git_config(&url, "main"));
        let pull = p.run(&["policy", "pull"]);
        assert_stderr(&pull, 2, "use a `path` source");
    }
}

/// A request the test servers got.
pub(crate) struct Request {
    method: String,
    pub(crate) path: String,
    query: String,
    /// Lower-case names.
    pub(crate) headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

/// Serves HTTP/1.1 on a free local port, one connection per request (`Connection:
/// close`), answering each with what `answer` makes of it.
pub(crate) fn serve(answer: impl Fn(Request) -> Vec<u8> + Send + 'static) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let mut headers = BTreeMap::new();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                if let Some((k, v)) = header.split_once(':') {
                    headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
                }
            }
            let length = headers
                .get("content-length")
                .and_then(|l| l.parse().ok())
                .unwrap_or(0);
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let mut parts = line.split(' ');
            let method = parts.next().unwrap_or("GET").to_owned();
            let target = parts.next().unwrap_or("/");
            let (path, query) = target.split_once('?').unwrap_or((target, ""));
            let response = answer(Request {
                method,
                path: path.to_owned(),
                query: query.to_owned(),
                headers,
                body,
            });
            let _ = stream.write_all(&response);
            let _ = stream.flush();
        }
    });
    port
}

pub(crate) fn response(status: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let mut r = format!(
        "HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    r.extend_from_slice(body);
    r
}

/// A git smart-HTTP server for the bare repositories under `root`: each request is
/// answered by `git http-backend` (git's own CGI program). With `token`, every request
/// must carry it as basic authentication, or it gets a 401.
fn git_http_server(root: std::path::PathBuf, token: Option<&'static str>) -> u16 {
    serve(
        move |Request {
                  method,
                  path,
                  query,
                  headers,
                  body,
              }| {
            let authorised =
                token.is_none_or(|t| headers.get("authorization").map(String::as_str) == Some(t));
            if !authorised {
                return response(
                    "401 Unauthorized",
                    "WWW-Authenticate: Basic realm=\"policies\"\r\n",
                    b"",
                );
            }
            let mut cgi = std::process::Command::new("git");
            cgi.arg("http-backend")
                .env("GIT_PROJECT_ROOT", &root)
                .env("GIT_HTTP_EXPORT_ALL", "1")
                .env("PATH_INFO", &path)
                .env("QUERY_STRING", &query)
                .env("REQUEST_METHOD", &method)
                .env("CONTENT_LENGTH", body.len().to_string())
                .env(
                    "CONTENT_TYPE",
                    headers.get("content-type").cloned().unwrap_or_default(),
                )
                .env(
                    "GIT_PROTOCOL",
                    headers.get("git-protocol").cloned().unwrap_or_default(),
                )
                .env("REMOTE_ADDR", "127.0.0.1")
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped());
            let mut child = cgi.spawn().unwrap();
            child.stdin.take().unwrap().write_all(&body).unwrap();
            let out = child.wait_with_output().unwrap().stdout;
            // CGI: header lines (`Status:` among them), a blank line, the body.
            let (end, gap) = out
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|i| (i, 4))
                .or_else(|| out.windows(2).position(|w| w == b"\n\n").map(|i| (i, 2)))
                .unwrap_or((out.len(), 0));
            let mut status = "200 OK".to_owned();
            let mut lines = String::new();
            for line in String::from_utf8_lossy(&out[..end]).lines() {
                match line.strip_prefix("Status:") {
                    Some(s) => status = s.trim().to_owned(),
                    None => lines.push_str(&format!("{line}\r\n")),
                }
            }
            response(&status, &lines, &out[end + gap..])
        },
    )
}

#[test]
fn a_git_source_is_pulled_over_http_at_a_tag_and_at_a_branch() {
    let served = tempfile::tempdir().unwrap();
    let work = served.path().join("work");
    std::fs::create_dir_all(work.join("policies")).unwrap();
    git_at(&work, &["init", "-q", "-b", "main"]);
    std::fs::write(work.join("policies/deny.rego"), DENY_ALL).unwrap();
    git_at(&work, &["add", "."]);
    git_at(&work, &["commit", "-q", "-m", "v1"]);
    git_at(&work, &["tag", "-a", "v1", "-m", "v1"]);
    let tagged = git_at(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    git_at(&work, &["checkout", "-q", "-b", "next"]);
    std::fs::write(work.join("policies/warn.rego"), WARN_ALL).unwrap();
    git_at(&work, &["add", "-A"]);
    git_at(&work, &["commit", "-q", "-m", "next"]);
    let branch = git_at(&work, &["rev-parse", "HEAD"]).trim().to_owned();
    git_at(
        served.path(),
        &["clone", "-q", "--bare", "work", "policies.git"],
    );

    let open = git_http_server(served.path().to_owned(), None);
    let url = format!("http://127.0.0.1:{open}/policies.git");
    let p = Project::fixture("policy");
    p.write(".terraci.yaml", git_config(&url, "v1"));
    let pull = p.run(&["policy", "pull"]);
    assert_eq!(pull.code, 0, "{}", pull.stderr);
    let lock = json(&p.read(".terraci/policy.lock.json"));
    assert_eq!(lock["sources"][0]["commit"], tagged.as_str());
    assert_eq!(lock["sources"][0]["files"], 1);
    assert_failure(&check_vpc(&p), "failure: terraform.deny: tagged policy");

    p.write(".terraci.yaml", git_config(&url, "next"));
    let pull = p.run(&["policy", "pull"]);
    assert_eq!(pull.code, 0, "{}", pull.stderr);
    let lock = json(&p.read(".terraci/policy.lock.json"));
    assert_eq!(lock["sources"][0]["commit"], branch.as_str());
    assert_eq!(lock["sources"][0]["files"], 2);

    // A server that wants credentials: none are sent over plain HTTP, none are asked
    // for, and the message says where they go.
    let closed = git_http_server(served.path().to_owned(), Some("Basic dTpw"));
    let url = format!("http://127.0.0.1:{closed}/policies.git");
    p.write(".terraci.yaml", git_config(&url, "v1"));
    let out = p.run_env(
        &["policy", "pull"],
        &[("TERRACI_POLICY_GIT_CREDENTIALS", "http://u:p@127.0.0.1")],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "Failed to obtain credentials: the repository needs credentials: put them in TERRACI_POLICY_GIT_CREDENTIALS"
        ),
        "{}",
        out.stderr
    );

    // Plain HTTP to another machine is refused before any connection.
    p.write(
        ".terraci.yaml",
        git_config("http://git.example.com/org/policies.git", "v1"),
    );
    assert_pull_fails(
        &p,
        "error[policy-source]: policy source git:http://git.example.com/org/policies.git@v1: git over plain http:// is only spoken to this machine: use https://",
    );
}

/// A registry serving `routes` (path -> (content type, body)) to any number of GETs.
fn registry(routes: BTreeMap<String, (String, Vec<u8>)>) -> u16 {
    serve(move |request| match routes.get(&request.path) {
        Some((ctype, body)) => response("200 OK", &format!("Content-Type: {ctype}\r\n"), body),
        None => response(
            "404 Not Found",
            "Content-Type: text/plain\r\n",
            b"not found",
        ),
    })
}

fn sha256(bytes: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let hex: String = d.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn tar_gz(files: &[(&str, &str)]) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(gz);
    for (path, text) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(text.len() as u64);
        header.set_mode(0o644);
        header.set_cksum();
        tar.append_data(&mut header, path, text.as_bytes()).unwrap();
    }
    tar.into_inner().unwrap().finish().unwrap()
}

/// A conftest-style layer (one .rego file, titled) and an OPA bundle (tar.gz), with
/// the manifest: the registry's routes and the manifest's digest.
fn policy_artifact() -> (BTreeMap<String, (String, Vec<u8>)>, String) {
    let rego = DENY_ALL.as_bytes().to_vec();
    let bundle = tar_gz(&[
        ("bundle/warn.rego", WARN_ALL),
        ("bundle/warn_test.rego", "package x\n"),
    ]);
    let config = b"{}".to_vec();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.cncf.openpolicyagent.config.v1+json", "digest": sha256(&config), "size": config.len()},
        "layers": [
            {"mediaType": "application/vnd.cncf.openpolicyagent.policy.layer.v1+rego", "digest": sha256(&rego), "size": rego.len(),
             "annotations": {"org.opencontainers.image.title": "policies/deny.rego"}},
            {"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip", "digest": sha256(&bundle), "size": bundle.len()}
        ]
    })
    .to_string()
    .into_bytes();
    let digest = sha256(&manifest);
    let mut routes = BTreeMap::new();
    routes.insert(
        "/v2/org/policies/manifests/v1".to_owned(),
        (
            "application/vnd.oci.image.manifest.v1+json".to_owned(),
            manifest,
        ),
    );
    routes.insert(
        format!("/v2/org/policies/blobs/{}", sha256(&rego)),
        ("application/octet-stream".to_owned(), rego),
    );
    routes.insert(
        format!("/v2/org/policies/blobs/{}", sha256(&bundle)),
        ("application/octet-stream".to_owned(), bundle),
    );
    (routes, digest)
}

fn oci_config(url: &str) -> String {
    format!(
        "structure:\n  pattern: \"{{service}}/{{environment}}/{{region}}/{{module}}\"\n\
         extensions:\n  policy:\n    enabled: true\n    sources:\n      - type: oci\n        url: \"{url}\"\n"
    )
}

#[test]
fn an_oci_source_is_pulled_from_a_registry_by_tag() {
    let (routes, digest) = policy_artifact();
    let port = registry(routes);

    let p = Project::fixture("policy");
    p.write(
        ".terraci.yaml",
        oci_config(&format!("oci://127.0.0.1:{port}/org/policies:v1")),
    );
    let pull = p.run(&["policy", "pull"]);
    assert_eq!(pull.code, 0, "{}", pull.stderr);
    let lock = json(&p.read(".terraci/policy.lock.json"));
    assert_eq!(lock["sources"][0]["digest"], digest.as_str());
    assert_eq!(
        lock["sources"][0]["files"], 2,
        "the _test.rego file is not a policy"
    );
    let check = check_vpc(&p);
    assert_failure(&check, "failure: terraform.deny: tagged policy");
    assert!(
        check
            .stdout
            .contains("warning: terraform.warn: branch policy"),
        "{}",
        check.stdout
    );

    // A tag the registry does not have; a registry that is not there.
    p.write(
        ".terraci.yaml",
        oci_config(&format!("oci://127.0.0.1:{port}/org/policies:v2")),
    );
    let pull = p.run(&["policy", "pull"]);
    assert_eq!(pull.code, 2);
    assert!(pull.stderr.contains(&format!("policy source oci:oci://127.0.0.1:{port}/org/policies:v2: org/policies:v2 was not found")), "{}", pull.stderr);
    let closed = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    p.write(
        ".terraci.yaml",
        oci_config(&format!("oci://127.0.0.1:{closed}/org/policies:v1")),
    );
    assert_pull_fails(
        &p,
        &format!(
            "error[policy-source]: policy source oci:oci://127.0.0.1:{closed}/org/policies:v1: GET"
        ),
    );
}

const ALLOW_ALL: &str = "package terraform\n";

/// A slot committed where `policy pull` used to keep the artifact (`.terraci/policies/
/// oci/<hex>/`, complete, with a permissive policy) is not what was pulled: the real
/// artifact's deny fires.
#[test]
fn a_slot_committed_in_the_checkout_is_not_what_was_pulled() {
    let (routes, digest) = policy_artifact();
    let port = registry(routes);
    let p = Project::fixture("policy");
    p.write(
        ".terraci.yaml",
        oci_config(&format!("oci://127.0.0.1:{port}/org/policies:v1")),
    );
    let slot = format!(
        ".terraci/policies/oci/{}",
        digest.trim_start_matches("sha256:")
    );
    p.write(&format!("{slot}/.terraci-complete"), &digest);
    p.write(&format!("{slot}/allow.rego"), ALLOW_ALL);
    let pull = p.run(&["policy", "pull"]);
    assert_eq!(pull.code, 0, "{}", pull.stderr);
    assert_failure(&check_vpc(&p), "failure: terraform.deny: tagged policy");
}

/// A lock committed in the checkout (naming a directory with a permissive policy) is
/// never read: without a pull, the source is not pulled.
#[test]
fn a_lock_committed_in_the_checkout_is_not_read() {
    let url = "oci://127.0.0.1:1/org/policies:v1";
    let p = Project::fixture("policy");
    p.write(".terraci.yaml", oci_config(url));
    p.write("permissive/allow.rego", ALLOW_ALL);
    p.write("permissive/.terraci-complete", "");
    let lock = format!(
        "{{\"sources\":[{{\"type\":\"oci\",\"source\":\"{url}\",\"digest\":\"sha256:{}\",\"dir\":\"permissive\",\"files\":1}}]}}\n",
        "0".repeat(64)
    );
    p.write(".terraci/policies/policy.lock.json", &lock);
    p.write(".terraci/policy.lock.json", &lock);
    assert_stderr(
        &p.run(&["policy", "check"]),
        2,
        "not pulled: run `terraci policy pull` first",
    );
}

/// A file of a pulled slot changed after the pull: `policy check` refuses it, naming it.
#[test]
fn a_changed_slot_file_is_refused() {
    let (routes, digest) = policy_artifact();
    let port = registry(routes);
    let p = Project::fixture("policy");
    p.write(
        ".terraci.yaml",
        oci_config(&format!("oci://127.0.0.1:{port}/org/policies:v1")),
    );
    assert_eq!(p.run(&["policy", "pull"]).code, 0);
    let file = p
        .cache_home()
        .join("policies/oci")
        .join(digest.trim_start_matches("sha256:"))
        .join("policies/deny.rego");
    std::fs::write(&file, ALLOW_ALL).unwrap();
    let check = p.run(&["policy", "check"]);
    assert_stderr(
        &check,
        2,
        "policies/deny.rego is not the file that was pulled",
    );
    // A new pull puts the artifact's file back.
    assert_eq!(p.run(&["policy", "pull"]).code, 0);
    assert_failure(&check_vpc(&p), "failure: terraform.deny: tagged policy");
}

/// A cache home inside the project (as when HOME is the build directory) is refused.
#[test]
fn a_cache_home_inside_the_project_is_refused() {
    let p = Project::fixture("policy");
    p.write(
        ".terraci.yaml",
        oci_config("oci://127.0.0.1:1/org/policies:v1"),
    );
    let inside = p.path().join(".cache");
    for args in [["policy", "pull"], ["policy", "check"]] {
        let out = p.run_env(&args, &[("TERRACI_CACHE_HOME", inside.to_str().unwrap())]);
        assert_stderr(&out, 2, "set TERRACI_CACHE_HOME outside the checkout");
    }
    let out = p.run_env(
        &["policy", "pull"],
        &[("TERRACI_CACHE_HOME", ""), ("XDG_CACHE_HOME", "")],
    );
    assert_stderr(&out, 2, "set TERRACI_CACHE_HOME outside the checkout");
}

#[test]
fn a_registry_that_wants_credentials_gets_only_those_bound_to_it() {
    // The token service wants `u:p` as basic authentication; the registry wants its token.
    let tokens = serve(|request| {
        if request.headers.get("authorization").map(String::as_str) == Some("Basic dTpw") {
            response(
                "200 OK",
                "Content-Type: application/json\r\n",
                br#"{"token":"T1"}"#,
            )
        } else {
            response("401 Unauthorized", "", b"")
        }
    });
    let (routes, digest) = policy_artifact();
    let port = serve(move |request| {
        if request.headers.get("authorization").map(String::as_str) != Some("Bearer T1") {
            let challenge = format!(
                "WWW-Authenticate: Bearer realm=\"http://127.0.0.1:{tokens}/token\",service=\"registry\",scope=\"repository:org/policies:pull\"\r\n"
            );
            return response("401 Unauthorized", &challenge, b"");
        }
        match routes.get(&request.path) {
            Some((ctype, body)) => response("200 OK", &format!("Content-Type: {ctype}\r\n"), body),
            None => response("404 Not Found", "", b""),
        }
    });
    let p = Project::fixture("policy");
    p.write(
        ".terraci.yaml",
        oci_config(&format!("oci://127.0.0.1:{port}/org/policies:v1")),
    );
    let refused = format!(
        "error[policy-source]: policy source oci:oci://127.0.0.1:{port}/org/policies:v1: the registry refused an anonymous token (HTTP 401): put credentials in TERRACI_POLICY_OCI_CREDENTIALS"
    );
    // None, or credentials bound to another registry: nothing is sent.
    assert_pull_fails(&p, &refused);
    let elsewhere = format!("http://u:p@127.0.0.1:{tokens}\nhttps://u:p@127.0.0.1:{port}");
    let out = p.run_env(
        &["policy", "pull"],
        &[("TERRACI_POLICY_OCI_CREDENTIALS", elsewhere.as_str())],
    );
    assert_stderr(&out, 2, &refused);
    // Bound to this registry: its token service gets them, and the pull works.
    let bound = format!("http://u:p@127.0.0.1:{port}");
    let out = p.run_env(
        &["policy", "pull"],
        &[("TERRACI_POLICY_OCI_CREDENTIALS", bound.as_str())],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let lock = json(&p.read(".terraci/policy.lock.json"));
    assert_eq!(lock["sources"][0]["digest"], digest.as_str());
}

#[test]
fn the_summary_comment_renders_the_policy_report() {
    let p = Project::fixture("policy");
    assert_eq!(p.run(&["policy", "check"]).code, 1);
    let out = p.run(&["summary"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!out.stderr.contains("summary-report"), "{}", out.stderr);
    assert!(
        out.stdout.contains("### ❌ Policy checks"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("| `platform/stage/eu-central-1/bad` | ❌ fail | 4 failures\\, 4 warnings |"),
        "{}",
        out.stdout
    );
}

/// The requests a server saw: (method and path, `Authorization` header).
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(String, Option<String>)>>>;

/// A server standing for a host that is not this machine (`attacker.invalid`): terraci
/// reaches it through `HTTP_PROXY`, while `NO_PROXY` keeps this machine's servers direct.
/// It records the `Authorization` header of every request (`None` when there was none)
/// and answers 404.
fn elsewhere() -> (u16, Seen) {
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let port = serve(move |request| {
        log.lock().unwrap().push((
            format!("{} {}", request.method, request.path),
            request.headers.get("authorization").cloned(),
        ));
        response("404 Not Found", "", b"")
    });
    (port, seen)
}

/// `http://attacker.invalid?@127.0.0.1:N/` is one host to a reader that ends the authority
/// at the first `/` and another to the transport, which ends it at the `?`: the host whose
/// credentials are bound and the host the request goes to are the same, decided by one
/// parser, so such a URL is refused (git) or gets no credentials (a token realm).
#[test]
fn credentials_go_only_to_the_host_the_transport_connects_to() {
    let (attacker, seen) = elsewhere();
    let proxy = format!("http://127.0.0.1:{attacker}");
    let no_proxy = "127.0.0.1,localhost";

    // A git source: refused before any connection.
    let git = serve(|_| response("404 Not Found", "", b""));
    let p = Project::fixture("policy");
    p.write(
        ".terraci.yaml",
        git_config(
            &format!("http://attacker.invalid?@127.0.0.1:{git}/p.git"),
            "main",
        ),
    );
    let credentials = format!("http://u:tok@127.0.0.1:{git}");
    let out = p.run_env(
        &["policy", "pull"],
        &[
            ("TERRACI_POLICY_GIT_CREDENTIALS", credentials.as_str()),
            ("HTTP_PROXY", proxy.as_str()),
            ("NO_PROXY", no_proxy),
        ],
    );
    assert_stderr(&out, 2, "ambiguous authority");
    assert_eq!(
        *seen.lock().unwrap(),
        vec![],
        "nothing reaches the other host"
    );

    // An OCI registry whose token realm names the other host: the registry's credentials
    // are not sent there.
    let registry = serve(move |_| {
        let challenge = format!(
            "WWW-Authenticate: Bearer realm=\"http://attacker.invalid?@127.0.0.1:{attacker}/token\",service=\"registry\"\r\n"
        );
        response("401 Unauthorized", &challenge, b"")
    });
    p.write(
        ".terraci.yaml",
        oci_config(&format!("oci://127.0.0.1:{registry}/org/policies:v1")),
    );
    let credentials = format!("http://u:p@127.0.0.1:{registry}");
    let out = p.run_env(
        &["policy", "pull"],
        &[
            ("TERRACI_POLICY_OCI_CREDENTIALS", credentials.as_str()),
            ("HTTP_PROXY", proxy.as_str()),
            ("NO_PROXY", no_proxy),
        ],
    );
    assert_eq!(out.code, 2, "{}", out.stderr);
    let sent: Vec<_> = seen
        .lock()
        .unwrap()
        .iter()
        .filter_map(|(_, auth)| auth.clone())
        .collect();
    assert_eq!(
        sent,
        Vec::<String>::new(),
        "no credentials to the other host"
    );
}

/// A plan.json that is a symlink to a file outside the project is not read: `policy check`
/// fails and names the file (the checkout decides what is at that name).
#[test]
fn a_plan_json_linked_out_of_the_project_is_refused() {
    let p = Project::fixture("policy");
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("plan.json");
    std::fs::write(&secret, r#"{"resource_changes":[],"secret":"OUTSIDE"}"#).unwrap();
    let plan = p.path().join("platform/stage/eu-central-1/vpc/plan.json");
    std::fs::remove_file(&plan).unwrap();
    std::os::unix::fs::symlink(&secret, &plan).unwrap();
    let out = check_vpc(&p);
    assert_ne!(out.code, 0, "{}", out.stdout);
    assert!(
        out.stderr
            .contains("cannot read platform/stage/eu-central-1/vpc/plan.json: a symlink to")
            && out.stderr.contains("outside"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("OUTSIDE") && !out.stderr.contains("OUTSIDE"));
}

/// A `path` source that is a symlink out of the project (or under a linked parent) loads
/// nothing from there: `policy pull` and `policy check` refuse it.
#[test]
fn a_path_source_linked_out_of_the_project_is_refused() {
    let p = Project::fixture("policy");
    let outside = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(outside.path().join("inner")).unwrap();
    std::fs::write(outside.path().join("deny.rego"), DENY_ALL).unwrap();
    std::fs::write(outside.path().join("inner/deny.rego"), DENY_ALL).unwrap();
    std::os::unix::fs::symlink(outside.path(), p.path().join("linked")).unwrap();
    for source in ["linked", "linked/inner"] {
        p.write(
            ".terraci.yaml",
            format!(
                "structure:\n  pattern: \"{{service}}/{{environment}}/{{region}}/{{module}}\"\n\
                 extensions:\n  policy:\n    enabled: true\n    sources:\n      - type: path\n        path: {source}\n"
            ),
        );
        for args in [&["policy", "pull"][..], &["policy", "check"][..]] {
            let out = p.run(args);
            assert_stderr(&out, 2, &format!("`{source}` resolves to"));
            assert!(
                out.stderr.contains("outside the project") && !out.stdout.contains("tagged policy"),
                "{args:?}: {}",
                out.stderr
            );
        }
    }
}

/// A project whose one path source `envelope/` holds `rego`, with `input` set when given.
fn envelope_project(rego: &str, input: Option<&str>) -> Project {
    let p = Project::fixture("policy");
    let input = input.map_or(String::new(), |i| format!("    input: {i}\n"));
    p.write(
        ".terraci.yaml",
        format!(
            "structure:\n  pattern: \"{{service}}/{{environment}}/{{region}}/{{module}}\"\n\
             extensions:\n  policy:\n    enabled: true\n{input}    sources:\n      - type: path\n        path: envelope\n"
        ),
    );
    p.write("envelope/policy.rego", rego);
    p
}

/// By default the policies get TerraCi's input: the plan under `input.plan`, the module
/// under `input.terraci`. A rule written for TerraCi fires.
#[test]
fn the_input_is_terracis_envelope_by_default() {
    let warn = "package terraform\n\nimport rego.v1\n\n\
        warn contains msg if {\n  some r in input.plan.resource_changes\n  \"create\" in r.change.actions\n  msg := sprintf(\"New resource: %s\", [r.address])\n}\n";
    let p = envelope_project(warn, None);
    let out = p.run(&[
        "policy",
        "check",
        "--module",
        "platform/stage/eu-central-1/app",
    ]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    for address in ["terraform_data.assets", "terraform_data.web"] {
        assert!(
            out.stdout
                .contains(&format!("warning: terraform.warn: New resource: {address}")),
            "{}",
            out.stdout
        );
    }

    let deny = "package terraform\n\nimport rego.v1\n\n\
        deny contains msg if {\n  input.terraci.module.path == \"platform/prod/eu-central-1/db\"\n  \"terraform\" in input.terraci.policy.namespaces\n  msg := sprintf(\"%s/%s\", [input.terraci.module.components.environment, input.terraci.plan.path])\n}\n";
    let p = envelope_project(deny, Some("envelope"));
    let out = p.run(&["policy", "check"]);
    assert_failure(
        &out,
        "failure: terraform.deny: prod/platform/prod/eu-central-1/db/plan.json",
    );
    assert_eq!(out.stdout.matches("failure:").count(), 1, "{}", out.stdout);
}

/// Conftest-style rules (`input.resource_changes`) need `input: plan`; under the default
/// envelope they find nothing.
#[test]
fn conftest_style_policies_work_with_input_plan() {
    let warn = "package terraform\n\nimport rego.v1\n\n\
        warn contains r.address if { some r in input.resource_changes }\n";
    let check = |p: &Project| {
        p.run(&[
            "policy",
            "check",
            "--module",
            "platform/stage/eu-central-1/app",
        ])
    };
    let out = check(&envelope_project(warn, Some("plan")));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("warning: terraform.warn: terraform_data.web"),
        "{}",
        out.stdout
    );
    let out = check(&envelope_project(warn, None));
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(!out.stdout.contains("warning:"), "{}", out.stdout);
}

/// `terraci ARGS` in `p`, killed (and the test failed) when it runs past `limit`.
fn run_bounded(p: &Project, args: &[&str], limit: std::time::Duration) -> Output {
    let mut cmd = p.command(args);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn terraci");
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
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("terraci {args:?} did not finish within {limit:?}");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    Output {
        code: status.code().unwrap_or(-1),
        stdout: p.redact(&out.join().unwrap()),
        stderr: p.redact(&err.join().unwrap()),
    }
}

/// A project whose sources are the path sources `dirs`, with `extra` config lines of the
/// policy section.
fn path_project(dirs: &[&str], extra: &str) -> Project {
    let p = Project::fixture("policy");
    let sources: String = dirs
        .iter()
        .map(|d| format!("      - type: path\n        path: {d}\n"))
        .collect();
    p.write(
        ".terraci.yaml",
        format!(
            "structure:\n  pattern: \"{{service}}/{{environment}}/{{region}}/{{module}}\"\n\
             extensions:\n  policy:\n    enabled: true\n{extra}    sources:\n{sources}"
        ),
    );
    p
}

/// Sources that hold no `.rego` (a merge request deleted them, a source resolved to an
/// empty tree) would pass every plan: with a blocking decision `policy check` fails closed;
/// with none it warns. `policy pull` refuses a source without policy files of any kind.
#[test]
fn an_empty_source_fails_closed_when_a_decision_blocks() {
    let p = path_project(&["empty"], "");
    p.write("empty/README.md", "policies were here\n");
    p.write("empty/deny_test.rego", "package terraform_test\n");
    let out = p.run(&["policy", "check"]);
    assert_stderr(
        &out,
        2,
        "error[policy-source]: the policy sources hold no .rego files; with a blocking decision terraci fails closed",
    );
    assert!(!out.stdout.contains("pass"), "{}", out.stdout);
    // One empty source among others fails closed too.
    let p = path_project(&["terraform", "empty"], "");
    p.write("empty/README.md", "policies were here\n");
    assert_stderr(
        &p.run(&["policy", "check"]),
        2,
        "policy source path:empty holds no .rego files; with a blocking decision terraci fails closed",
    );
    assert_pull_fails(
        &p,
        "policy source path:empty: holds no policy files (`.rego`, not `_test.rego`)",
    );

    // Nothing blocks: a warning, and every module passes.
    let p = path_project(
        &["empty"],
        "    decisions:\n      deny: warn\n      warn: warn\n",
    );
    p.write("empty/README.md", "policies were here\n");
    let out = p.run(&["policy", "check"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "warning[policy-source]: the policy sources hold no .rego files: every module passes"
        ),
        "{}",
        out.stderr
    );
    // An override that blocks is a blocking decision.
    let p = path_project(
        &["empty"],
        "    decisions:\n      deny: warn\n    overrides:\n      - match: \"**/prod/**\"\n        decisions:\n          warn: block\n",
    );
    p.write("empty/README.md", "policies were here\n");
    assert_stderr(&p.run(&["policy", "check"]), 2, "terraci fails closed");

    // A git repository without policy files at the ref: the pull is refused.
    let repo = tempfile::tempdir().unwrap();
    let r = repo.path();
    git_at(r, &["init", "-q", "-b", "main"]);
    std::fs::write(r.join("README.md"), "no policies\n").unwrap();
    std::fs::write(r.join("x_test.rego"), "package x\n").unwrap();
    git_at(r, &["add", "."]);
    git_at(r, &["commit", "-q", "-m", "empty"]);
    let url = format!("file://{}", r.display());
    let p = Project::fixture("policy");
    p.write(".terraci.yaml", git_config(&url, "main"));
    assert_pull_fails(&p, "holds no policy files (`.rego`, not `_test.rego`)");
}

/// A wanted namespace that no policy gives a rule fails every module a blocking decision
/// applies to (a warning for the others): `compliance` is wanted, only `terraform` exists.
#[test]
fn a_missing_namespace_fails_a_blocking_module() {
    let config = "    namespaces: [terraform, compliance]\n    decisions:\n      deny: warn\n    overrides:\n      - match: \"**/prod/**\"\n        decisions:\n          deny: block\n";
    let p = path_project(&["terraform"], config);
    let out = p.run(&["policy", "check"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("error[policy-namespace]: platform/prod/eu-central-1/db: namespace `compliance` has no rules (no policy file declares `package compliance` with a deny, violation or warn rule): with a blocking decision terraci fails closed"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout
            .lines()
            .any(|l| l.starts_with("fail") && l.contains("platform/prod/")),
        "{}",
        out.stdout
    );
    assert!(
        !out.stdout
            .lines()
            .any(|l| l.starts_with("fail") && l.contains("platform/stage/")),
        "{}",
        out.stdout
    );
    // Nothing blocks: the namespace is a warning, no module fails by it.
    let p = path_project(
        &["terraform"],
        "    namespaces: [terraform, compliance]\n    decisions:\n      deny: warn\n",
    );
    let out = p.run(&["policy", "check"]);
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr
            .contains("warning[policy-namespace]: namespace `compliance` has no rules"),
        "{}",
        out.stderr
    );
    // A package with no decision rule is no rules either.
    let p = path_project(&["terraform"], "    namespaces: [terraform, compliance]\n");
    p.write(
        "terraform/compliance.rego",
        "package compliance\n\nhelper := 1\n",
    );
    let out = p.run(&["policy", "check"]);
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("namespace `compliance` has no rules"),
        "{}",
        out.stderr
    );
}

/// A tar.gz of one file of `size` zero bytes (a gzip bomb: about a thousandth of its size).
fn zero_bomb(name: &str, size: u64) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let mut tar = tar::Builder::new(gz);
    let mut header = tar::Header::new_gnu();
    header.set_size(size);
    header.set_mode(0o644);
    header.set_cksum();
    tar.append_data(&mut header, name, std::io::repeat(0).take(size))
        .unwrap();
    tar.into_inner().unwrap().finish().unwrap()
}

/// A registry serving `org/policies:v1` made of `layers` (media type, bytes), listed in
/// the manifest in that order (a layer may be listed more than once).
fn artifact_of(layers: &[(&str, Vec<u8>)]) -> BTreeMap<String, (String, Vec<u8>)> {
    let descriptors: Vec<serde_json::Value> = layers
        .iter()
        .map(|(media, bytes)| {
            serde_json::json!({"mediaType": media, "digest": sha256(bytes), "size": bytes.len()})
        })
        .collect();
    let config = b"{}".to_vec();
    let manifest = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.cncf.openpolicyagent.config.v1+json", "digest": sha256(&config), "size": config.len()},
        "layers": descriptors,
    })
    .to_string()
    .into_bytes();
    let mut routes = BTreeMap::new();
    routes.insert(
        "/v2/org/policies/manifests/v1".to_owned(),
        (
            "application/vnd.oci.image.manifest.v1+json".to_owned(),
            manifest,
        ),
    );
    for (_, bytes) in layers {
        routes.insert(
            format!("/v2/org/policies/blobs/{}", sha256(bytes)),
            ("application/octet-stream".to_owned(), bytes.clone()),
        );
    }
    routes
}

/// The artifact is bounded as a whole: one small gzip bomb listed 8 times is refused (a
/// layer is listed once), and 8 distinct bombs stop at the bound of unpacked bytes; so do
/// too many layers. Each error names its bound, and the pull ends quickly.
#[test]
fn an_artifact_that_unpacks_without_bound_is_refused() {
    const TAR: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
    const MIB: u64 = 1 << 20;
    let limit = std::time::Duration::from_secs(60);
    let p = Project::fixture("policy");
    let pull = |routes| {
        let port = registry(routes);
        p.write(
            ".terraci.yaml",
            oci_config(&format!("oci://127.0.0.1:{port}/org/policies:v1")),
        );
        run_bounded(&p, &["policy", "pull"], limit)
    };

    let bomb = zero_bomb("policies/zero.rego", 40 * MIB);
    assert!(bomb.len() < 256 << 10, "{}", bomb.len());
    let repeated: Vec<(&str, Vec<u8>)> = (0..8).map(|_| (TAR, bomb.clone())).collect();
    let out = pull(artifact_of(&repeated));
    assert_stderr(
        &out,
        2,
        &format!(
            "layer {} is listed twice in the manifest: a layer is unpacked once",
            sha256(&bomb)
        ),
    );

    let distinct: Vec<(&str, Vec<u8>)> = (0..8)
        .map(|i| (TAR, zero_bomb(&format!("policies/zero{i}.rego"), 40 * MIB)))
        .collect();
    let out = pull(artifact_of(&distinct));
    assert_stderr(&out, 2, "the artifact unpacks to more than 64 MiB");

    // Many small files, many layers.
    let many: Vec<(&str, Vec<u8>)> = (0..65)
        .map(|i| {
            (
                "application/vnd.cncf.openpolicyagent.policy.layer.v1+rego",
                format!("package p{i}\n").into_bytes(),
            )
        })
        .collect();
    let out = pull(artifact_of(&many));
    assert_stderr(
        &out,
        2,
        "the manifest lists 65 layers, over the 64 an artifact may have",
    );
    let files: Vec<(String, String)> = (0..6_000)
        .map(|i| (format!("p/{i}.rego"), format!("package p{i}\n")))
        .collect();
    let files: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let two: Vec<(&str, Vec<u8>)> = vec![(TAR, tar_gz(&files)), (TAR, tar_gz(&files[..4_500]))];
    let out = pull(artifact_of(&two));
    assert_stderr(&out, 2, "the artifact has more than 10000 files");
    // Nothing was kept of a refused artifact.
    assert!(
        !p.cache_home().join("policies/locks").exists()
            || std::fs::read_dir(p.cache_home().join("policies/locks"))
                .unwrap()
                .next()
                .is_none()
    );
}

/// One builtin call that would allocate without bound (`numbers.range` over a billion
/// numbers) is refused before it starts: the module fails with `policy-limit` naming the
/// builtin, quickly, instead of running past `--timeout` into gigabytes.
#[test]
fn a_huge_builtin_call_is_a_policy_limit() {
    let rego = "package terraform\n\nimport rego.v1\n\n\
        deny contains msg if {\n  n := count(numbers.range(1, 1000000000))\n  msg := sprintf(\"%d\", [n])\n}\n";
    let p = envelope_project(rego, None);
    let out = run_bounded(
        &p,
        &[
            "policy",
            "check",
            "--module",
            "platform/stage/eu-central-1/app",
        ],
        std::time::Duration::from_secs(20),
    );
    assert_eq!(out.code, 1, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("error[policy-limit]")
            && out.stderr.contains("data.terraform.deny: numbers.range would make 1000000000 numbers, over the 1000000 one call may make"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("envelope/policy.rego:"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_job_that_runs_terraci_in_an_image_without_it_is_a_warning() {
    let p = Project::fixture("policy");
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("warning[image-without-terraci]: the apply jobs run terraci for their policy checks, but their image `hashicorp/terraform:"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("the `policy-check` job runs terraci, but its image"),
        "{}",
        out.stderr
    );
    // An image of one's own (with terraci): no warning.
    let config = p.read(".terraci.yaml");
    p.write(
        ".terraci.yaml",
        config.replace(
            "extensions:\n",
            "extensions:\n  gitlab:\n    image: registry.example.com/terraci:1\n",
        ),
    );
    let out = p.run(&["generate"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        !out.stderr.contains("image-without-terraci"),
        "{}",
        out.stderr
    );
}
