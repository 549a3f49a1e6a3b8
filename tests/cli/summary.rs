//! `terraci summary` against a local server that implements the GitLab and GitHub REST
//! endpoints it uses (merge-request notes and labels; issue comments and labels), with
//! response bodies shaped like the APIs' documented examples.

use std::collections::{BTreeSet, VecDeque};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::snap;
use crate::support::Project;

const TOKEN: &str = "glpat-s3cr3t-t0ken-value";
const PLAN_COMMIT: &str = "1111111111111111111111111111111111111111";
const MARKER: &str = "<!-- terraci-summary -->";

/// One request the server got.
#[derive(Debug, Clone)]
struct Seen {
    method: String,
    path: String,
}

#[derive(Default)]
struct State {
    /// (id, body, system note, author)
    comments: Vec<(u64, String, bool, String)>,
    next_id: u64,
    labels: BTreeSet<String>,
    seen: Vec<Seen>,
    /// Statuses to answer with, in order, before serving requests normally.
    fail_with: VecDeque<u16>,
    /// (method, status): the next request of that method is served, then answered with
    /// the status (a server that failed after it acted).
    fail_after: Option<(String, u16)>,
}

impl State {
    /// Stores a new comment; its id.
    fn create(&mut self, input: &Value, author: &str) -> (u64, String) {
        self.next_id += 1;
        let text = input["body"].as_str().unwrap_or("").to_owned();
        self.comments
            .push((self.next_id, text.clone(), false, author.into()));
        (self.next_id, text)
    }

    /// The author of comment `id` (the path segment).
    fn author(&self, id: &str) -> Option<String> {
        let id: u64 = id.parse().ok()?;
        self.comments
            .iter()
            .find(|c| c.0 == id)
            .map(|c| c.3.clone())
    }

    /// Replaces the body of comment `id` (the path segment); `None` when there is none.
    fn edit(&mut self, id: &str, input: &Value) -> Option<(u64, String)> {
        let id: u64 = id.parse().ok()?;
        let text = input["body"].as_str().unwrap_or("").to_owned();
        let comment = self.comments.iter_mut().find(|c| c.0 == id)?;
        comment.1 = text.clone();
        Some((id, text))
    }
}

/// The fake API: GitLab under `/api/v4`, GitHub under `/repos`.
struct Server {
    url: String,
    state: Arc<Mutex<State>>,
}

impl Server {
    fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let state = Arc::new(Mutex::new(State {
            next_id: 1000,
            ..State::default()
        }));
        {
            let mut s = state.lock().unwrap();
            // What a merge request already holds: a system note, a reviewer's comment
            // and a label someone set by hand.
            s.comments.push((
                301,
                "added 1 commit\n\n* 1111111 - change".into(),
                true,
                "alice".into(),
            ));
            s.comments.push((
                302,
                "Looks good, but see the VPC.".into(),
                false,
                "bob".into(),
            ));
            s.labels.insert("needs-review".into());
        }
        let shared = state.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = shared.clone();
                std::thread::spawn(move || serve(stream, &state));
            }
        });
        Server { url, state }
    }

    fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// How many requests of `method` it got.
    fn count(&self, method: &str) -> usize {
        self.seen().iter().filter(|r| r.method == method).count()
    }

    fn ours(&self) -> Vec<(u64, String)> {
        self.state
            .lock()
            .unwrap()
            .comments
            .iter()
            .filter(|c| c.1.contains(MARKER))
            .map(|c| (c.0, c.1.clone()))
            .collect()
    }

    fn labels(&self) -> Vec<String> {
        self.state.lock().unwrap().labels.iter().cloned().collect()
    }

    fn fail_next(&self, statuses: &[u16]) {
        self.state.lock().unwrap().fail_with.extend(statuses);
    }

    fn fail_after_next(&self, method: &str, status: u16) {
        self.state.lock().unwrap().fail_after = Some((method.to_owned(), status));
    }

    fn gitlab_env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("GITLAB_CI", "true".into()),
            ("CI_SERVER_URL", self.url.clone()),
            ("CI_PROJECT_ID", "42".into()),
            ("CI_MERGE_REQUEST_IID", "7".into()),
            ("CI_PIPELINE_ID", "9001".into()),
            ("CI_COMMIT_SHA", PLAN_COMMIT.into()),
            ("GITLAB_TOKEN", TOKEN.into()),
        ]
    }
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or("").to_owned();
    let target = parts.next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).is_err() || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
    }
    let header = |name: &str| {
        headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    let len: usize = header("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    let _ = reader.read_exact(&mut body);
    let body = String::from_utf8_lossy(&body).into_owned();
    let (path, _query) = target.split_once('?').unwrap_or((&target, ""));
    let (status, reply) = {
        let mut s = state.lock().unwrap();
        s.seen.push(Seen {
            method: method.clone(),
            path: path.to_owned(),
        });
        match s.fail_with.pop_front() {
            Some(status) => (
                status,
                json!({"message": format!("{status} Internal Server Error")}),
            ),
            None => {
                let served = route(&mut s, &method, path, &body, &header);
                match s.fail_after.take() {
                    Some((m, status)) if m == method => (status, json!({"message": "Bad Gateway"})),
                    other => {
                        s.fail_after = other;
                        served
                    }
                }
            }
        }
    };
    let text = reply.to_string();
    let mut stream = stream;
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
}

/// The numeric id of each user of the fake server.
fn user_id(login: &str) -> u64 {
    match login {
        "alice" => 1,
        "bob" => 2,
        "mallory" => 666,
        "project_42_bot" => 4242,
        "github-actions[bot]" => 41898282,
        _ => 9999,
    }
}

fn gitlab_note(id: u64, body: &str, system: bool, author: &str) -> Value {
    json!({
        "id": id, "type": null, "body": body, "attachment": null,
        "author": {"id": user_id(author), "username": author, "name": author, "state": "active",
                   "avatar_url": "https://gitlab.example.com/uploads/a.png",
                   "web_url": format!("https://gitlab.example.com/{author}")},
        "created_at": "2026-12-01T10:00:00.000Z", "updated_at": "2026-12-01T10:00:00.000Z",
        "system": system, "noteable_id": 377, "noteable_type": "MergeRequest",
        "project_id": 42, "noteable_iid": 7, "resolvable": false, "confidential": false,
        "internal": false
    })
}

fn github_comment(id: u64, body: &str, author: &str) -> Value {
    json!({
        "id": id, "node_id": "MDEyOklzc3VlQ29tbWVudDE=",
        "url": format!("https://api.github.com/repos/acme/infra/issues/comments/{id}"),
        "html_url": format!("https://github.com/acme/infra/pull/5#issuecomment-{id}"),
        "body": body,
        "user": {"login": author, "id": user_id(author),
                 "type": if author.ends_with("[bot]") { "Bot" } else { "User" },
                 "site_admin": false},
        "created_at": "2026-12-01T10:00:00Z", "updated_at": "2026-12-01T10:00:00Z",
        "issue_url": "https://api.github.com/repos/acme/infra/issues/5",
        "author_association": "MEMBER"
    })
}

fn github_labels(labels: &BTreeSet<String>) -> Value {
    Value::Array(
        labels
            .iter()
            .enumerate()
            .map(|(i, name)| {
                json!({"id": 208045946 + i, "node_id": "MDU6TGFiZWwyMDgwNDU5NDY=",
                       "url": format!("https://api.github.com/repos/acme/infra/labels/{name}"),
                       "name": name, "description": null, "color": "f29513", "default": false})
            })
            .collect(),
    )
}

fn unescape(segment: &str) -> String {
    let bytes = segment.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() + 1 {
            if let Ok(b) = u8::from_str_radix(&segment[i + 1..i + 3], 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn route(
    s: &mut State,
    method: &str,
    path: &str,
    body: &str,
    header: &dyn Fn(&str) -> Option<String>,
) -> (u16, Value) {
    let input: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    // A comment over the provider's limit is refused, as the APIs refuse it.
    let chars = input["body"].as_str().map_or(0, |b| b.chars().count());
    if segments.first() == Some(&"api") {
        if header("private-token").as_deref() != Some(TOKEN) {
            return (401, json!({"message": "401 Unauthorized"}));
        }
        if matches!(method, "POST" | "PUT") && chars > 1_000_000 {
            return (
                400,
                json!({"message": {"note": ["is too long (maximum is 1000000 characters)"]}}),
            );
        }
        return match (method, &segments[2..]) {
            ("GET", ["user"]) => (
                200,
                json!({"id": user_id("project_42_bot"), "username": "project_42_bot",
                       "name": "project_42_bot", "state": "active", "bot": true}),
            ),
            ("GET", ["projects", "42", "merge_requests", "7", "notes"]) => (
                200,
                Value::Array(
                    s.comments
                        .iter()
                        .map(|(id, b, sys, who)| gitlab_note(*id, b, *sys, who))
                        .collect(),
                ),
            ),
            ("POST", ["projects", "42", "merge_requests", "7", "notes"]) => {
                let (id, text) = s.create(&input, "project_42_bot");
                (201, gitlab_note(id, &text, false, "project_42_bot"))
            }
            ("PUT", ["projects", "42", "merge_requests", "7", "notes", id]) => {
                // GitLab lets only a note's author edit it.
                if s.author(id).is_some_and(|a| a != "project_42_bot") {
                    return (403, json!({"message": "403 Forbidden"}));
                }
                match s.edit(id, &input) {
                    Some((id, text)) => (200, gitlab_note(id, &text, false, "project_42_bot")),
                    None => (404, json!({"message": "404 Not found"})),
                }
            }
            ("GET", ["projects", "42", "merge_requests", "7"]) => (
                200,
                json!({"id": 377, "iid": 7, "project_id": 42, "title": "Grow the VPC",
                       "state": "opened", "labels": s.labels.iter().collect::<Vec<_>>(),
                       "sha": PLAN_COMMIT}),
            ),
            ("PUT", ["projects", "42", "merge_requests", "7"]) => {
                for l in input["add_labels"].as_str().unwrap_or("").split(',') {
                    if !l.is_empty() {
                        s.labels.insert(l.to_owned());
                    }
                }
                for l in input["remove_labels"].as_str().unwrap_or("").split(',') {
                    s.labels.remove(l);
                }
                (
                    200,
                    json!({"id": 377, "iid": 7, "project_id": 42, "title": "Grow the VPC",
                           "state": "opened", "labels": s.labels.iter().collect::<Vec<_>>(),
                           "sha": PLAN_COMMIT}),
                )
            }
            _ => (404, json!({"message": "404 Not found"})),
        };
    }
    if header("authorization").as_deref() != Some(&format!("Bearer {TOKEN}")) {
        return (
            401,
            json!({"message": "Bad credentials",
                   "documentation_url": "https://docs.github.com/rest"}),
        );
    }
    match (method, segments.as_slice()) {
        // What GitHub answers the Actions `GITHUB_TOKEN`.
        ("GET", ["user"]) => (
            403,
            json!({"message": "Resource not accessible by integration",
                   "documentation_url": "https://docs.github.com/rest/users/users#get-the-authenticated-user",
                   "status": "403"}),
        ),
        ("GET", ["repos", "acme", "infra", "issues", "5", "comments"]) => (
            200,
            Value::Array(
                s.comments
                    .iter()
                    .filter(|c| !c.2)
                    .map(|(id, b, _, who)| github_comment(*id, b, who))
                    .collect(),
            ),
        ),
        ("POST" | "PATCH", ["repos", "acme", "infra", "issues", ..]) if chars > 65_536 => (
            422,
            json!({"message": "Validation Failed",
                   "errors": [{"resource": "IssueComment", "code": "custom", "field": "body",
                               "message": "Body is too long (maximum is 65536 characters)"}],
                   "documentation_url": "https://docs.github.com/rest/issues/comments#create-an-issue-comment",
                   "status": "422"}),
        ),
        ("POST", ["repos", "acme", "infra", "issues", "5", "comments"]) => {
            let (id, text) = s.create(&input, "github-actions[bot]");
            (201, github_comment(id, &text, "github-actions[bot]"))
        }
        ("PATCH", ["repos", "acme", "infra", "issues", "comments", id]) => match s.edit(id, &input)
        {
            Some((id, text)) => (200, github_comment(id, &text, "github-actions[bot]")),
            None => (404, json!({"message": "Not Found"})),
        },
        ("GET", ["repos", "acme", "infra", "issues", "5", "labels"]) => {
            (200, github_labels(&s.labels))
        }
        ("POST", ["repos", "acme", "infra", "issues", "5", "labels"]) => {
            for l in input["labels"].as_array().into_iter().flatten() {
                if let Some(l) = l.as_str() {
                    s.labels.insert(l.to_owned());
                }
            }
            (200, github_labels(&s.labels))
        }
        ("DELETE", ["repos", "acme", "infra", "issues", "5", "labels", name]) => {
            if s.labels.remove(&unescape(name)) {
                (200, github_labels(&s.labels))
            } else {
                (404, json!({"message": "Label does not exist"}))
            }
        }
        _ => (404, json!({"message": "Not Found"})),
    }
}

/// The fixture project with each module's plan files copied from `fixtures/summary/plans`.
fn project() -> Project {
    let p = Project::fixture("summary/project");
    for (module, plan) in [
        ("platform/prod/eu-central-1/vpc", "create"),
        ("platform/prod/eu-central-1/eks", "update"),
        ("platform/prod/eu-central-1/s3", "replace"),
        ("platform/stage/eu-central-1/vpc", "nochange"),
        ("platform/stage/eu-central-1/db", "failed"),
        ("platform/stage/eu-central-1/queue", "delete"),
    ] {
        copy_plan(&p, module, plan);
    }
    p.write(
        ".terraci/policy-report.json",
        json!({
            "producer": "policy", "title": "Policy checks", "status": "fail",
            "commit": PLAN_COMMIT,
            "summary": "1 module fails <b>policy</b>",
            "modules": [
                {"module": "platform/prod/eu-central-1/s3", "status": "fail",
                 "summary": "bucket | is public",
                 "details": ["<img src=x onerror=alert(1)> ask @security-team [here](javascript:alert(1))"]},
                {"module": "platform/prod/eu-central-1/vpc", "status": "pass", "summary": "ok"}
            ]
        })
        .to_string(),
    );
    p
}

fn copy_plan(p: &Project, module: &str, plan: &str) {
    let from = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("fixtures/summary/plans")
        .join(plan);
    for file in ["plan.json", "plan.txt", "plan.result.json"] {
        if let Ok(bytes) = std::fs::read(from.join(file)) {
            p.write(&format!("{module}/{file}"), bytes);
        }
    }
}

fn run(p: &Project, args: &[&str], env: &[(&str, String)]) -> crate::support::Output {
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    p.run_env(args, &env)
}

#[test]
fn outside_a_merge_request_the_comment_is_printed() {
    let p = project();
    let out = p.run(&["summary"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with(MARKER), "{}", out.stdout);
    assert!(out.stderr.contains("not posting"), "{}", out.stderr);
    // Nothing from the repository reaches the comment as markup.
    let raw = |needle: &str| {
        out.stdout
            .match_indices(needle)
            .any(|(at, _)| !out.stdout[..at].ends_with('\\'))
    };
    assert!(!raw("<img"), "{}", out.stdout);
    assert!(!out.stdout.contains("<b>"), "{}", out.stdout);
    assert!(!out.stdout.contains("@security-team"), "{}", out.stdout);
    assert!(!out.stdout.contains("](javascript"), "{}", out.stdout);
    snap!("summary_multi_module", out.snapshot());
}

#[test]
fn gitlab_first_run_creates_the_note_and_the_second_edits_it() {
    let server = Server::start();
    let p = project();
    let env = server.gitlab_env();
    let first = run(&p, &["summary", "-v"], &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(first.stdout, "", "posting prints nothing on stdout");
    let ours = server.ours();
    assert_eq!(ours.len(), 1, "one comment");
    let (id, body) = ours[0].clone();
    assert!(body.starts_with(MARKER), "{body}");
    assert!(body.contains("platform/prod/eu-central-1/vpc"), "{body}");
    assert!(
        first.stderr.contains(&format!(
            "summary: created comment {id} (POST {}/api/v4/projects/42/merge_requests/7/notes)",
            server.url
        )),
        "{}",
        first.stderr
    );
    assert!(!first.stderr.contains(TOKEN), "{}", first.stderr);
    // Static, per-module and per-resource labels, next to the one set by hand.
    assert_eq!(
        server.labels(),
        [
            "env:prod",
            "env:stage",
            "needs-review",
            "service:platform",
            "terraform",
            "terraform_data"
        ]
    );

    // The next push: only stage changes now, and `terraform` is no longer configured.
    for module in [
        "platform/prod/eu-central-1/vpc",
        "platform/prod/eu-central-1/eks",
        "platform/prod/eu-central-1/s3",
    ] {
        copy_plan(&p, module, "nochange");
    }
    let config = p.read(".terraci.yaml").replace("      - terraform\n", "");
    p.write(".terraci.yaml", config);
    let second = run(&p, &["summary", "-v"], &env);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let ours = server.ours();
    assert_eq!(ours.len(), 1, "still one comment: {ours:?}");
    assert_eq!(ours[0].0, id, "the same comment, edited");
    assert_ne!(ours[0].1, body, "with the new content");
    assert!(
        second
            .stderr
            .contains(&format!("summary: updated comment {id} (PUT ")),
        "{}",
        second.stderr
    );
    // What terraci added and no longer wants goes; the hand-set label stays.
    assert_eq!(
        server.labels(),
        [
            "env:stage",
            "needs-review",
            "service:platform",
            "terraform_data"
        ]
    );
    assert_eq!(server.count("POST"), 1, "never a second note");
}

#[test]
fn github_creates_then_edits_the_pr_comment_and_writes_the_step_summary() {
    let server = Server::start();
    let p = project();
    p.write(
        "event.json",
        json!({"action": "synchronize", "number": 5,
               "pull_request": {"number": 5, "head": {"sha": PLAN_COMMIT, "ref": "grow-vpc"},
                                 "base": {"ref": "main"}}})
        .to_string(),
    );
    let dir = p.path().display().to_string();
    let env = vec![
        ("GITHUB_ACTIONS", "true".to_owned()),
        ("GITHUB_API_URL", server.url.clone()),
        ("GITHUB_REPOSITORY", "acme/infra".into()),
        ("GITHUB_EVENT_PATH", format!("{dir}/event.json")),
        ("GITHUB_STEP_SUMMARY", format!("{dir}/step-summary.md")),
        ("GITHUB_RUN_ID", "123".into()),
        ("GITHUB_TOKEN", TOKEN.into()),
    ];
    let first = run(&p, &["summary", "-v"], &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let ours = server.ours();
    assert_eq!(ours.len(), 1);
    let step = p.read("step-summary.md");
    assert!(
        step.starts_with(MARKER) && step.contains("Terraform plan summary"),
        "{step}"
    );
    assert!(server.labels().contains(&"terraform".to_owned()));

    let config = p
        .read(".terraci.yaml")
        .replace("      - \"{resource_type}\"\n", "");
    p.write(".terraci.yaml", config);
    let second = run(&p, &["summary", "-v"], &env);
    assert_eq!(second.code, 0, "{}", second.stderr);
    let after = server.ours();
    assert_eq!(after.len(), 1);
    assert_eq!(after[0].0, ours[0].0);
    let seen = server.seen();
    assert!(
        seen.iter().any(|r| r.method == "PATCH"
            && r.path == format!("/repos/acme/infra/issues/comments/{}", ours[0].0)),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|r| r.method == "DELETE"
            && r.path == "/repos/acme/infra/issues/5/labels/terraform_data"),
        "{seen:?}"
    );
    assert!(!server.labels().contains(&"terraform_data".to_owned()));
    assert!(server.labels().contains(&"needs-review".to_owned()));
    // Appended, not replaced: both runs are in the step summary.
    assert_eq!(p.read("step-summary.md").matches(MARKER).count(), 2);
}

#[test]
fn a_server_error_is_retried() {
    let server = Server::start();
    let p = project();
    server.fail_next(&[500]);
    let out = run(&p, &["summary"], &server.gitlab_env());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(server.ours().len(), 1);
    let lists = server
        .seen()
        .iter()
        .filter(|s| s.method == "GET" && s.path.contains("/notes"))
        .count();
    assert_eq!(lists, 2, "the failed list was sent again");
}

#[test]
fn a_comment_the_server_stored_before_failing_is_edited_not_posted_twice() {
    let server = Server::start();
    let p = project();
    server.fail_after_next("POST", 502);
    let out = run(&p, &["summary"], &server.gitlab_env());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(server.ours().len(), 1, "one comment on the merge request");
    assert_eq!(server.count("POST"), 1, "the create was not sent again");
    let edits = server
        .seen()
        .iter()
        .filter(|s| s.method == "PUT" && s.path.contains("/notes/"))
        .count();
    assert_eq!(edits, 1, "the stored comment was edited instead");
}

#[test]
fn a_bad_token_fails_naming_the_endpoint_and_status_but_not_the_token() {
    let server = Server::start();
    let p = project();
    let mut env = server.gitlab_env();
    let wrong = "glpat-wrong-token-123";
    for (k, v) in &mut env {
        if *k == "GITLAB_TOKEN" {
            *v = wrong.into();
        }
    }
    let out = run(&p, &["summary", "-v"], &env);
    assert_eq!(out.code, 1, "{}", out.snapshot());
    assert_eq!(
        out.stderr.trim_end(),
        format!(
            "error: cannot post the summary: GET {}/api/v4/projects/42/merge_requests/7/notes: \
             401 Unauthorized (the server says: 401 Unauthorized)",
            server.url
        )
    );
    assert!(!out.stderr.contains(wrong) && !out.stdout.contains(wrong));
    assert!(server.ours().is_empty());
}

#[test]
fn on_changes_only_posts_nothing_when_nothing_changes() {
    let server = Server::start();
    let p = Project::fixture("summary/project");
    p.write(
        ".terraci.yaml",
        "extensions:\n  summary:\n    on_changes_only: true\n",
    );
    copy_plan(&p, "platform/prod/eu-central-1/vpc", "nochange");
    copy_plan(&p, "platform/stage/eu-central-1/vpc", "nochange");
    let out = run(&p, &["summary"], &server.gitlab_env());
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(
        out.stderr.contains("no changes, so no comment"),
        "{}",
        out.stderr
    );
    assert!(server.ours().is_empty());
    assert!(
        server.seen().iter().all(|r| r.method == "GET"),
        "{:?}",
        server.seen()
    );
    // Outside a merge request too: nothing printed.
    let local = p.run(&["summary"]);
    assert_eq!((local.code, local.stdout.as_str()), (0, ""));
}

#[test]
fn a_plan_for_an_older_commit_is_marked_stale() {
    let server = Server::start();
    let p = project();
    // A pipeline for a newer push (a merged-results pipeline: its own commit is the
    // merge, the MR's head is the source branch's)...
    let mut env = server.gitlab_env();
    env.retain(|(k, _)| *k != "CI_COMMIT_SHA");
    env.push((
        "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA",
        "2222222222222222222222222222222222222222".into(),
    ));
    env.push((
        "CI_COMMIT_SHA",
        "3333333333333333333333333333333333333333".into(),
    ));
    // ...where one module was planned for the merge commit and the others come from an
    // older commit.
    p.write(
        "platform/prod/eu-central-1/eks/plan.result.json",
        r#"{"exit_code": 2, "commit": "3333333333333333333333333333333333333333"}"#,
    );
    let out = run(&p, &["summary"], &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let body = server.ours()[0].1.clone();
    let row = |id: &str| {
        body.lines()
            .find(|l| l.starts_with(&format!("| `{id}`")))
            .unwrap_or_else(|| panic!("no row for {id} in {body}"))
            .to_owned()
    };
    assert!(
        row("platform/prod/eu-central-1/vpc").contains("stale"),
        "{body}"
    );
    assert!(
        !row("platform/prod/eu-central-1/eks").contains("stale"),
        "{body}"
    );
    // A stale plan without changes is shown too.
    assert!(
        row("platform/stage/eu-central-1/vpc").contains("stale"),
        "{body}"
    );
    assert!(body.contains("**5** stale"), "{body}");
}

/// Each scenario's actions, outputs and exit code, the parts of a plan that do not vary
/// between runs (ids and timestamps do).
fn plan_facts(dir: &Path) -> Vec<String> {
    let mut facts = Vec::new();
    for scenario in [
        "create", "update", "replace", "delete", "nochange", "failed",
    ] {
        let result: Value = serde_json::from_slice(
            &std::fs::read(dir.join(scenario).join("plan.result.json")).expect("result"),
        )
        .expect("result JSON");
        facts.push(format!("{scenario}: exit {}", result["exit_code"]));
        let Ok(bytes) = std::fs::read(dir.join(scenario).join("plan.json")) else {
            facts.push(format!("{scenario}: no plan.json"));
            continue;
        };
        let plan: Value = serde_json::from_slice(&bytes).expect("plan JSON");
        facts.push(format!(
            "{scenario}: terraform {}",
            plan["terraform_version"]
        ));
        for r in plan["resource_changes"].as_array().into_iter().flatten() {
            facts.push(format!(
                "{scenario}: {} {}",
                r["address"], r["change"]["actions"]
            ));
        }
        for (name, o) in plan["output_changes"].as_object().into_iter().flatten() {
            facts.push(format!("{scenario}: output {name} {}", o["actions"]));
        }
    }
    facts
}

#[test]
fn the_plan_fixtures_are_what_terraform_makes() {
    // regen.sh writes beside itself: run a copy in a temp dir and compare with the
    // committed fixtures.
    let fixtures =
        Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures/summary/plans");
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::copy(fixtures.join("regen.sh"), dir.path().join("regen.sh")).expect("copy");
    let out = std::process::Command::new("bash")
        .arg(dir.path().join("regen.sh"))
        .output()
        .expect("run regen.sh (terraform on PATH)");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(plan_facts(dir.path()), plan_facts(&fixtures));
}

#[test]
fn on_changes_only_still_edits_an_earlier_comment_when_the_changes_are_gone() {
    let server = Server::start();
    let p = project();
    let first = run(&p, &["summary"], &server.gitlab_env());
    assert_eq!(first.code, 0, "{}", first.stderr);
    let (id, _) = server.ours()[0].clone();
    // The next push undoes everything: the comment must not keep showing the changes.
    p.write(
        ".terraci.yaml",
        "extensions:\n  summary:\n    on_changes_only: true\n",
    );
    std::fs::remove_file(p.path().join(".terraci/policy-report.json")).expect("rm");
    for module in [
        "platform/prod/eu-central-1/vpc",
        "platform/prod/eu-central-1/eks",
        "platform/prod/eu-central-1/s3",
        "platform/stage/eu-central-1/db",
        "platform/stage/eu-central-1/queue",
    ] {
        copy_plan(&p, module, "nochange");
    }
    let second = run(&p, &["summary"], &server.gitlab_env());
    assert_eq!(second.code, 0, "{}", second.stderr);
    let ours = server.ours();
    assert_eq!(ours.len(), 1);
    assert_eq!(ours[0].0, id);
    assert!(ours[0].1.contains("**6** without changes"), "{}", ours[0].1);
    assert_eq!(server.count("POST"), 1);
}

impl Server {
    /// Adds a comment by `author`.
    fn seed(&self, id: u64, body: &str, author: &str) {
        self.state
            .lock()
            .unwrap()
            .comments
            .push((id, body.to_owned(), false, author.to_owned()));
    }

    fn comment(&self, id: u64) -> Option<String> {
        let s = self.state.lock().unwrap();
        s.comments.iter().find(|c| c.0 == id).map(|c| c.1.clone())
    }
}

/// A summary comment that lists `labels` as terraci's own.
fn summary_listing(labels: &[&str]) -> String {
    let json = serde_json::to_string(labels).unwrap();
    let hex: String = json.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{MARKER}\n<!-- terraci-labels: {hex} -->\nplease merge")
}

#[test]
fn a_marker_comment_by_someone_else_is_left_alone() {
    let server = Server::start();
    let p = project();
    let theirs = summary_listing(&["needs-review"]);
    server.seed(303, &theirs, "mallory");
    let env = server.gitlab_env();
    let first = run(&p, &["summary", "-v"], &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(server.comment(303).as_deref(), Some(theirs.as_str()));
    let ours = server.ours();
    assert_eq!(ours.len(), 2, "a new comment next to theirs: {ours:?}");
    let (id, _) = ours.iter().find(|c| c.0 != 303).cloned().unwrap();
    assert!(
        first
            .stderr
            .contains(&format!("summary: created comment {id}")),
        "{}",
        first.stderr
    );
    assert!(server.labels().contains(&"needs-review".to_owned()));
    assert!(!first.stderr.contains("removed label"), "{}", first.stderr);
    assert!(
        !server.seen().iter().any(|r| r.path.ends_with("/notes/303")),
        "{:?}",
        server.seen()
    );

    // The next run edits its own comment.
    let second = run(&p, &["summary", "-v"], &env);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        second
            .stderr
            .contains(&format!("summary: updated comment {id} (PUT ")),
        "{}",
        second.stderr
    );
    assert_eq!(server.count("POST"), 1, "never a second note");
    assert_eq!(server.comment(303).as_deref(), Some(theirs.as_str()));
    assert!(server.labels().contains(&"needs-review".to_owned()));
}

#[test]
fn github_finds_its_own_comment_by_the_actions_login_and_leaves_others_alone() {
    let server = Server::start();
    let p = project();
    p.write(
        "event.json",
        json!({"action": "synchronize", "number": 5,
               "pull_request": {"number": 5, "head": {"sha": PLAN_COMMIT, "ref": "grow-vpc"},
                                 "base": {"ref": "main"}}})
        .to_string(),
    );
    let dir = p.path().display().to_string();
    let env = vec![
        ("GITHUB_ACTIONS", "true".to_owned()),
        ("GITHUB_API_URL", server.url.clone()),
        ("GITHUB_REPOSITORY", "acme/infra".into()),
        ("GITHUB_EVENT_PATH", format!("{dir}/event.json")),
        ("GITHUB_TOKEN", TOKEN.into()),
    ];
    // Older than ours, by someone else, listing the hand-set label.
    let theirs = summary_listing(&["needs-review"]);
    server.seed(303, &theirs, "mallory");
    server.seed(304, &summary_listing(&[]), "github-actions[bot]");
    let out = run(&p, &["summary", "-v"], &env);
    assert_eq!(out.code, 0, "{}", out.stderr);
    // GET /user was refused (the Actions token): the Actions bot is taken as us.
    let seen = server.seen();
    assert!(
        seen.iter().any(|r| r.method == "GET" && r.path == "/user"),
        "{seen:?}"
    );
    assert!(
        seen.iter()
            .any(|r| r.method == "PATCH" && r.path == "/repos/acme/infra/issues/comments/304"),
        "{seen:?}"
    );
    assert!(!seen.iter().any(|r| r.path.ends_with("/303")), "{seen:?}");
    assert!(!seen.iter().any(|r| r.method == "DELETE"), "{seen:?}");
    assert_eq!(server.comment(303).as_deref(), Some(theirs.as_str()));
    assert!(
        !seen
            .iter()
            .any(|r| r.method == "POST" && r.path.ends_with("/comments")),
        "no new comment: {seen:?}"
    );
    assert!(server.labels().contains(&"needs-review".to_owned()));
    assert!(
        !out.stderr.contains("warning[summary-comment]"),
        "{}",
        out.stderr
    );
}

/// The GitHub pull-request environment of the fake server, with the event file in `p`.
fn github_env(p: &Project, server: &Server) -> Vec<(&'static str, String)> {
    p.write(
        "event.json",
        json!({"action": "synchronize", "number": 5,
               "pull_request": {"number": 5, "head": {"sha": PLAN_COMMIT, "ref": "grow"},
                                 "base": {"ref": "main"}}})
        .to_string(),
    );
    let dir = p.path().display().to_string();
    vec![
        ("GITHUB_ACTIONS", "true".to_owned()),
        ("GITHUB_API_URL", server.url.clone()),
        ("GITHUB_REPOSITORY", "acme/infra".into()),
        ("GITHUB_EVENT_PATH", format!("{dir}/event.json")),
        ("GITHUB_RUN_ID", "123".into()),
        ("GITHUB_TOKEN", TOKEN.into()),
    ]
}

/// 1,500 changed modules with long ids: the full comment is far over GitHub's 65,536
/// characters (the fake API answers a longer body with GitHub's 422, as GitHub does). The
/// comment is posted fitted to each provider's limit, saying what it left out.
#[test]
fn a_comment_of_many_modules_fits_the_providers_limit() {
    let p = Project::empty();
    p.write(
        ".terraci.yaml",
        "structure:\n  pattern: \"{service}/{environment}/{region}/{module}\"\n",
    );
    let long = "a_module_with_a_rather_long_name_".repeat(3);
    for i in 0..1500 {
        let env = ["prod", "stage"][i % 2];
        let module = format!("platform/{env}/eu-central-1/{long}{i:04}");
        p.write(
            &format!("{module}/main.tf"),
            "resource \"terraform_data\" \"x\" {}\n",
        );
        copy_plan(&p, &module, "create");
    }
    let server = Server::start();
    let out = run(&p, &["summary"], &github_env(&p, &server));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ours = server.ours();
    assert_eq!(ours.len(), 1, "{}", out.stderr);
    let body = &ours[0].1;
    assert!(body.chars().count() <= 65_536, "{}", body.chars().count());
    assert!(body.starts_with(MARKER), "{}", &body[..200]);
    assert!(
        body.contains("The per-module details, the graph and ")
            && body.contains(
                " more table rows are left out: the comment would be over 65,000 characters."
            ),
        "{}",
        &body[body.len() - 800..]
    );
    assert!(body.contains(" more modules | | | | | |"), "{body}");
    let github_rows = body.matches("| 🔄 changes |").count();
    assert!(github_rows > 100, "{github_rows}");

    // GitLab takes up to 1,000,000 characters: every module has its row, only the details
    // are left out.
    let server = Server::start();
    let out = run(&p, &["summary"], &server.gitlab_env());
    assert_eq!(out.code, 0, "{}", out.stderr);
    let ours = server.ours();
    assert_eq!(ours.len(), 1, "{}", out.stderr);
    let body = &ours[0].1;
    assert!(
        body.chars().count() <= 1_000_000,
        "{}",
        body.chars().count()
    );
    assert_eq!(body.matches("| 🔄 changes |").count(), 1500);
}

/// A valid plan.json over `--max-file-size` (16 MiB) is summarised: plans have their own
/// bound (`--max-plan-size`, 512 MiB). Over that bound the module says "too large", never
/// that its plan failed.
#[test]
fn a_large_valid_plan_is_summarised() {
    let p = project();
    let module = "platform/prod/eu-central-1/vpc";
    let padding = "x".repeat(200);
    let mut plan = String::from(
        r#"{"format_version": "1.2", "terraform_version": "1.11.4", "resource_changes": ["#,
    );
    for i in 0..80_000 {
        if i > 0 {
            plan.push(',');
        }
        plan.push_str(&format!(
            r#"{{"address": "terraform_data.r{i}", "mode": "managed", "type": "terraform_data", "name": "r{i}", "change": {{"actions": ["create"], "before": null, "after": {{"input": "{padding}"}}}}}}"#
        ));
    }
    plan.push_str("]}");
    assert!(plan.len() > 17 << 20, "{}", plan.len());
    p.write(&format!("{module}/plan.json"), &plan);
    let failed = format!("<code>{module}</code>: the plan failed");
    let out = p.run(&["summary"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row = format!("| `{module}` | 🔄 changes | 80000 | 0 | 0 | 0 |");
    assert!(out.stdout.contains(&row), "{}", out.stdout);
    assert!(!out.stdout.contains(&failed), "{}", out.stdout);

    // Over the plan bound: too large, with the plan job's exit code, not failed.
    let out = p.run_env(&["summary"], &[("TERRACI_MAX_PLAN_SIZE", "1048576")]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let row =
        format!("| `{module}` | 🔄 changes | too large | too large | too large | too large |");
    assert!(out.stdout.contains(&row), "{}", out.stdout);
    assert!(
        out.stdout.contains("plan.json too large to summarise"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(&failed), "{}", out.stdout);
}

#[test]
fn a_label_set_by_hand_is_never_removed_even_when_terraci_wanted_it_too() {
    // `needs-review` is set by hand. A run that wants it as well (a template, or the
    // name a merge request gave a module or resource to render it) must not take it
    // over: when no longer wanted, it stays.
    let server = Server::start();
    let p = project();
    let env = server.gitlab_env();
    let config = p.read(".terraci.yaml");
    p.write(
        ".terraci.yaml",
        config.replace(
            "        - \"service:{service}\"\n",
            "        - \"service:{service}\"\n        - needs-review\n",
        ),
    );
    let first = run(&p, &["summary"], &env);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(server.labels().contains(&"needs-review".to_owned()));
    p.write(".terraci.yaml", config);
    let second = run(&p, &["summary"], &env);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(
        server.labels().contains(&"needs-review".to_owned()),
        "{:?}",
        server.labels()
    );
    assert!(server.labels().contains(&"terraform".to_owned()));
}

#[test]
fn a_child_pipelines_summary_is_a_comment_of_its_own() {
    // A split GitLab pipeline's trigger gives its child TERRACI_SUMMARY_PART.
    let p = project();
    let out = p.run_env(
        &["summary"],
        &[("GITLAB_CI", "true"), ("TERRACI_SUMMARY_PART", "child-2")],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("<!-- terraci-summary part=child-2 -->\n"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("## Terraform plan summary (child-2)"),
        "{}",
        out.stdout
    );
}
