//! The comment's text, its escaping, labels, the CI environment and the posting flow (on
//! a fake transport). The full comment of a multi-module change is a CLI snapshot
//! (`tests/cli/summary.rs`).

use std::sync::{Arc, Mutex};

use camino::Utf8Path;

use super::markdown::{
    code, fenced, html, render, text, Limit, RenderOptions, GITHUB_MAX_CHARS, GITLAB_MAX_CHARS,
};
use super::plan::{parse_plan, Counts, ResourceChange};
use super::post::{
    detect, find_existing, post, Existing, GitHubTarget, GitLabTarget, Target, User,
    GITHUB_ACTIONS_LOGIN,
};
use super::*;
use crate::http::{Client, Method, Request, Response, RetryPolicy, Transport};
use terraci_db::config::CommentProvider;
use terraci_db::system::MemorySystem;

fn plan_with(resources: &[(&str, Action)]) -> Plan {
    let mut counts = Counts::default();
    for (_, a) in resources {
        match a {
            Action::Create => counts.add += 1,
            Action::Update => counts.change += 1,
            Action::Delete => counts.destroy += 1,
            _ => {}
        }
    }
    Plan {
        terraform_version: None,
        resources: resources
            .iter()
            .map(|(address, action)| ResourceChange {
                address: (*address).to_owned(),
                resource_type: address.split('.').next().unwrap_or("").to_owned(),
                name: address.split('.').nth(1).unwrap_or("").to_owned(),
                mode: "managed".into(),
                action: action.clone(),
            })
            .collect(),
        outputs: Vec::new(),
        counts,
        errored: false,
    }
}

fn module(id: &str, status: Status, plan: Option<Plan>) -> ModuleResult {
    let parts: Vec<&str> = id.split('/').collect();
    let components = ["service", "environment", "region", "module"]
        .iter()
        .zip(&parts)
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    ModuleResult {
        id: id.to_owned(),
        components,
        status,
        stale: false,
        commit: "1111111111111111111111111111111111111111".into(),
        plan,
        error: None,
        plan_note: None,
    }
}

fn details() -> RenderOptions {
    RenderOptions {
        include_details: true,
        ..RenderOptions::default()
    }
}

#[test]
fn code_spans_hold_backticks_pipes_and_line_breaks_on_one_line() {
    for (value, span) in [
        ("a/b", "`a/b`"),
        ("x`y", "``x`y``"),
        ("`x", "`` `x ``"),
        ("a|b", "`a\\|b`"),
        ("a\nb", "`a\\nb`"),
    ] {
        assert_eq!(code(value), span, "{value:?}");
    }
}

#[test]
fn text_disarms_markup_links_html_and_mentions() {
    let t = text("**bold** [x](javascript:alert(1)) <img src=x> @admin #12");
    // Each sign is escaped (a backslash before it) or broken (a zero-width space after).
    for raw in ["**", "](", "<img", "@admin", "#12"] {
        let bare = t.match_indices(raw).any(|(at, _)| !t[..at].ends_with('\\'));
        assert!(!bare, "{raw} in {t}");
    }
    assert!(t.starts_with("\\*\\*bold\\*\\*"), "{t}");
    assert_eq!(text("line\nnext"), "line\\\\nnext");
}

#[test]
fn html_escapes_for_the_summary_line() {
    assert_eq!(
        html("<script>&\"'@x"),
        "&lt;script&gt;&amp;&quot;&#39;@\u{200b}x"
    );
}

#[test]
fn a_fence_is_longer_than_any_backtick_run_inside() {
    let block = fenced("```\n</details>\n````", "text");
    assert!(block.starts_with("`````text\n"), "{block}");
    assert!(block.ends_with("\n`````\n"), "{block}");
}

#[test]
fn only_changed_failed_and_stale_modules_get_rows_grouped_by_environment() {
    let mut stale = module("app/stage/eu/dns", Status::NoChanges, Some(plan_with(&[])));
    stale.stale = true;
    let summary = Summary {
        modules: vec![
            module(
                "app/prod/eu/vpc",
                Status::Changes,
                Some(plan_with(&[("aws_vpc.main", Action::Create)])),
            ),
            module("app/prod/eu/idle", Status::NoChanges, Some(plan_with(&[]))),
            stale,
        ],
        head: Some("2222222222222222222222222222222222222222".into()),
        ..Summary::default()
    };
    let text = render(&summary, &details());
    assert!(
        text.contains(
            "**3** modules planned: **1** with changes, **2** without changes, **1** stale"
        ),
        "{text}"
    );
    assert!(!text.contains("app/prod/eu/idle"), "{text}");
    let prod = text.find("### Environment `prod`").expect("prod");
    let stage = text.find("### Environment `stage`").expect("stage");
    assert!(prod < stage, "environments sorted");
    assert!(
        text.contains("| `app/stage/eu/dns` | ✅ no changes, ⏳ stale |"),
        "{text}"
    );
    assert!(text.contains("made for commit `11111111`"), "{text}");
    assert!(text.contains("for commit <code>22222222</code>"), "{text}");
    // Two affected modules, no edge between them: the graph still shows both.
    assert!(text.contains("```mermaid\nflowchart LR\n"), "{text}");
}

#[test]
fn without_details_there_is_no_details_section() {
    let summary = Summary {
        modules: vec![module(
            "app/prod/eu/vpc",
            Status::Changes,
            Some(plan_with(&[("aws_vpc.main", Action::Create)])),
        )],
        ..Summary::default()
    };
    let text = render(&summary, &RenderOptions::default());
    assert!(!text.contains("<details>"), "{text}");
    assert!(
        text.contains("| `app/prod/eu/vpc` | 🔄 changes | 1 | 0 | 0 | 0 |"),
        "{text}"
    );
}

#[test]
fn a_hostile_module_id_stays_inside_its_cell() {
    let id = "app/prod/eu/x|<img src=x>@all`";
    let summary = Summary {
        modules: vec![module(id, Status::Failed, None)],
        ..Summary::default()
    };
    let text = render(&summary, &details());
    let row = text
        .lines()
        .find(|l| l.contains("img"))
        .expect("a row for the module");
    // Seven cell borders: the id's own `|` is escaped.
    assert_eq!(
        row.matches('|').count() - row.matches("\\|").count(),
        7,
        "{row}"
    );
    assert!(
        text.contains(
            "<summary>❌ failed <code>app/prod/eu/x|&lt;img src=x&gt;@\u{200b}all`</code>"
        ),
        "{text}"
    );
}

#[test]
fn a_comment_over_the_limit_leaves_the_details_out() {
    let resources: Vec<(String, Action)> = (0..90)
        .map(|i| {
            (
                format!("terraform_data.resource_with_a_long_name_{i}"),
                Action::Create,
            )
        })
        .collect();
    let refs: Vec<(&str, Action)> = resources
        .iter()
        .map(|(a, b)| (a.as_str(), b.clone()))
        .collect();
    let modules = (0..20)
        .map(|i| {
            module(
                &format!("app/prod/eu/m{i:02}"),
                Status::Changes,
                Some(plan_with(&refs)),
            )
        })
        .collect();
    let summary = Summary {
        modules,
        ..Summary::default()
    };
    let text = render(&summary, &details());
    assert!(text.chars().count() <= GITHUB_MAX_CHARS, "{}", text.len());
    assert!(!text.contains("<details>"));
    assert!(text.contains("details are left out"), "{text}");
    assert_eq!(text.matches("| 🔄 changes |").count(), 20);
}

/// Thousands of modules with long ids (and a report row for each): the comment fits the
/// provider's limit, keeps its marker and footer, and says what it left out.
fn many_modules(n: usize) -> Summary {
    let modules: Vec<ModuleResult> = (0..n)
        .map(|i| {
            let id = format!(
                "svc/{}/eu-central-1/{i:05}-{}",
                ["prod", "stage"][i % 2],
                "m".repeat(90)
            );
            let status = if i % 5 == 0 {
                Status::NoChanges
            } else {
                Status::Changes
            };
            let mut m = module(&id, status, Some(plan_with(&[("a.b", Action::Create)])));
            m.stale = status == Status::NoChanges;
            m
        })
        .collect();
    let edges = modules
        .windows(2)
        .map(|w| (w[1].id.clone(), w[0].id.clone()))
        .collect();
    let report = super::report::Report {
        producer: "policy".into(),
        title: "Policy checks".into(),
        status: super::report::ReportStatus::Warn,
        summary: String::new(),
        modules: modules
            .iter()
            .enumerate()
            .map(|(i, m)| super::report::ModuleReport {
                module: m.id.clone(),
                status: if i % 3 == 0 {
                    super::report::ReportStatus::Warn
                } else {
                    super::report::ReportStatus::Pass
                },
                summary: "all policies pass".into(),
                details: vec!["warning: terraform.warn: x".into()],
                cost: None,
            })
            .collect(),
        commit: String::new(),
        cost: None,
    };
    Summary {
        modules,
        edges,
        reports: vec![report],
        head: Some("2222222222222222222222222222222222222222".into()),
        warnings: Vec::new(),
    }
}

#[test]
fn a_comment_of_thousands_of_modules_fits_the_providers_limit() {
    let summary = many_modules(3000);
    let options = |limit| RenderOptions {
        include_details: true,
        managed_labels: Some(vec!["terraform".into()]),
        pipeline: Some("42".into()),
        limit,
        part: None,
    };
    let github = render(&summary, &options(Limit::Chars(GITHUB_MAX_CHARS)));
    assert!(
        github.chars().count() <= 65_536,
        "{}",
        github.chars().count()
    );
    assert!(
        github.starts_with(&format!("{MARKER}\n<!-- terraci-labels:")),
        "{}",
        &github[..200]
    );
    assert!(
        github.ends_with("for commit <code>22222222</code>.</sub>\n"),
        "{}",
        &github[github.len() - 300..]
    );
    assert!(
        github.contains("_The per-module details, the graph, 600 unchanged modules, 2,000 passing report rows and "),
        "{}",
        &github[github.len() - 600..]
    );
    assert!(github
        .contains("more table rows are left out: the comment would be over 65,000 characters."));
    assert!(github.contains(" more modules |"));
    assert!(!github.contains("<details>") && !github.contains("mermaid"));
    let github_rows = github.matches("| 🔄 changes |").count();
    assert!(github_rows > 100, "{github_rows}");

    let gitlab = render(&summary, &options(Limit::Chars(GITLAB_MAX_CHARS)));
    assert!(
        gitlab.chars().count() <= 1_000_000,
        "{}",
        gitlab.chars().count()
    );
    assert!(gitlab.starts_with(MARKER));
    let gitlab_rows = gitlab.matches("| 🔄 changes |").count();
    assert!(gitlab_rows > github_rows, "{gitlab_rows} <= {github_rows}");
    assert!(gitlab.contains("left out: the comment would be over 999,000 characters."));

    // Small enough: everything, no note.
    let small = render(&many_modules(3), &options(Limit::Chars(GITHUB_MAX_CHARS)));
    assert!(
        small.contains("<details>") && small.contains("mermaid") && !small.contains("left out")
    );

    // A limit nothing but the frame fits: cut at a line, the footer kept.
    let tiny = render(&summary, &options(Limit::Bytes(700)));
    assert!(tiny.len() <= 700, "{}", tiny.len());
    assert!(
        tiny.starts_with(MARKER) && tiny.ends_with(".</sub>\n"),
        "{tiny}"
    );
    assert!(
        tiny.contains("_The rest of the comment is left out: it would be over 700 bytes."),
        "{tiny}"
    );
}

#[test]
fn a_plan_json_over_its_bound_is_too_large_not_failed() {
    let system = MemorySystem::new();
    let big = format!(
        r#"{{"format_version": "1.2", "resource_changes": [], "padding": "{}"}}"#,
        "x".repeat(4096)
    );
    // With the plan job's exit code: changes, the counts too large to say.
    system.write_file("/repo/a/prod/eu/one/plan.json", big.as_str());
    system.write_file(
        "/repo/a/prod/eu/one/plan.result.json",
        r#"{"exit_code": 2, "commit": "new"}"#,
    );
    // Without: not summarised, never failed.
    system.write_file("/repo/a/prod/eu/two/plan.json", big.as_str());
    let summary = collect_bounded(&system, Some("new"), 1024);
    let got: Vec<(&str, Status, Option<&str>)> = summary
        .modules
        .iter()
        .map(|m| (m.id.as_str(), m.status, m.error.as_deref()))
        .collect();
    assert_eq!(
        got,
        [
            ("a/prod/eu/one", Status::Changes, None),
            ("a/prod/eu/two", Status::Unknown, None)
        ]
    );
    let text = render(&summary, &details());
    assert!(
        !text.contains("❌ failed") && !text.contains("the plan failed"),
        "{text}"
    );
    assert!(
        text.contains("| 🔄 changes | too large | too large | too large | too large |"),
        "{text}"
    );
    assert!(text.contains("❔ not summarised"), "{text}");
    assert!(
        text.contains("too large to summarise\\: over the 1024 bytes terraci reads"),
        "{text}"
    );
    // Under the bound the same plan is read.
    let summary = collect_bounded(&system, Some("new"), 1 << 20);
    assert_eq!(summary.modules[1].status, Status::NoChanges);
}

#[test]
fn labels_static_per_module_and_per_resource() {
    let modules = vec![
        module(
            "platform/prod/eu/vpc",
            Status::Changes,
            Some(plan_with(&[
                ("aws_vpc.main", Action::Create),
                ("aws_subnet.a", Action::NoOp),
            ])),
        ),
        module("platform/stage/eu/db", Status::Failed, None),
        module(
            "platform/dev/eu/db",
            Status::NoChanges,
            Some(plan_with(&[])),
        ),
    ];
    let templates: Vec<String> = [
        "terraform",
        "env:{environment}",
        "{resource_type}:{resource_action}",
        "team:{team}",
        "a,b",
    ]
    .map(String::from)
    .to_vec();
    let (got, warnings) = labels::resolve(&templates, &modules);
    assert_eq!(
        got,
        ["aws_vpc:create", "env:prod", "env:stage", "terraform"]
    );
    assert_eq!(warnings.len(), 3, "{warnings:?}");
    assert!(warnings[0].contains("no value for {team}"), "{warnings:?}");
    assert!(warnings[2].contains("comma"), "{warnings:?}");
}

#[test]
fn managed_labels_round_trip_through_the_comment() {
    let recorded = vec!["env:prod".to_owned(), "x -->".to_owned()];
    let body = render(
        &Summary::default(),
        &RenderOptions {
            managed_labels: Some(recorded.clone()),
            ..RenderOptions::default()
        },
    );
    assert!(body.starts_with(MARKER));
    assert_eq!(labels::decode_managed(&body), recorded);
    assert!(labels::decode_managed("<!-- terraci-labels: zz -->").is_empty());
    let (add, remove) = labels::diff(&recorded, &["env:prod".into(), "new".into()]);
    assert_eq!(
        (add, remove),
        (vec!["new".to_owned()], vec!["x -->".to_owned()])
    );
}

fn user(id: u64, login: &str) -> User {
    User {
        id: Some(id),
        login: login.into(),
    }
}

#[test]
fn only_a_comment_that_starts_with_the_marker_is_ours() {
    let bot = user(5, "terraci-bot");
    let comments = vec![
        Existing {
            id: 5,
            body: format!("> {MARKER}\n> quoted by a reviewer"),
            author: Some(bot.clone()),
        },
        Existing {
            id: 9,
            body: format!("{MARKER}\nnewer duplicate"),
            author: Some(bot.clone()),
        },
        Existing {
            id: 7,
            body: format!("\n{MARKER}\nours"),
            author: Some(bot.clone()),
        },
    ];
    assert_eq!(
        find_existing(&comments, Some(&bot), MARKER).map(|c| c.id),
        Some(7)
    );
}

#[test]
fn only_a_comment_by_the_tokens_own_user_is_ours() {
    let bot = user(5, "terraci-bot");
    let comments = vec![
        Existing {
            id: 3,
            body: format!("{MARKER}\nwritten by someone else"),
            author: Some(user(666, "mallory")),
        },
        Existing {
            id: 4,
            body: format!("{MARKER}\nsame name, another account"),
            author: Some(user(667, "terraci-bot")),
        },
        Existing {
            id: 6,
            body: format!("{MARKER}\nno author given"),
            author: None,
        },
        Existing {
            id: 8,
            body: format!("{MARKER}\nours"),
            author: Some(bot.clone()),
        },
    ];
    assert_eq!(
        find_existing(&comments, Some(&bot), MARKER).map(|c| c.id),
        Some(8)
    );
    // Without the token's user, no comment is ours.
    assert_eq!(find_existing(&comments, None, MARKER), None);
    // The Actions token's user is known by its login only.
    let actions = User {
        id: None,
        login: GITHUB_ACTIONS_LOGIN.into(),
    };
    let by_actions = Existing {
        id: 10,
        body: MARKER.into(),
        author: Some(user(41898282, GITHUB_ACTIONS_LOGIN)),
    };
    assert_eq!(
        find_existing(&[comments[0].clone(), by_actions], Some(&actions), MARKER).map(|c| c.id),
        Some(10)
    );
}

#[test]
fn each_child_pipelines_summary_keeps_its_own_comment() {
    let bot = user(5, "terraci-bot");
    let comment = |id, body: String| Existing {
        id,
        body,
        author: Some(bot.clone()),
    };
    let comments = vec![
        comment(3, format!("{MARKER}\nthe whole pipeline's")),
        comment(
            4,
            "<!-- terraci-summary part=child-10 -->\nchild-10's".into(),
        ),
        comment(6, "<!-- terraci-summary part=child-1 -->\nchild-1's".into()),
    ];
    let of = |part| find_existing(&comments, Some(&bot), &marker(part)).map(|c| c.id);
    assert_eq!(of(Some("child-1")), Some(6));
    assert_eq!(of(Some("child-10")), Some(4));
    assert_eq!(of(Some("child-2")), None);
    assert_eq!(of(None), Some(3));
    // The comment a child's summary writes starts with its marker and names it.
    let summary = Summary {
        modules: vec![module("a", Status::NoChanges, None)],
        ..Summary::default()
    };
    let body = render(
        &summary,
        &RenderOptions {
            part: Some("child-3".into()),
            ..RenderOptions::default()
        },
    );
    assert!(
        body.starts_with("<!-- terraci-summary part=child-3 -->\n")
            && body.contains("## Terraform plan summary (child-3)\n"),
        "{body}"
    );
}

#[test]
fn the_part_comes_from_the_child_pipelines_variable_when_it_is_a_plain_name() {
    let system = MemorySystem::new();
    system.set_env("GITLAB_CI", "true");
    system.set_env("CI_SERVER_URL", "https://gitlab.example.com");
    system.set_env("CI_PROJECT_ID", "42");
    system.set_env("CI_MERGE_REQUEST_IID", "7");
    system.set_env("CI_JOB_TOKEN", "job");
    assert_eq!(detect(&system).part, None);
    system.set_env("TERRACI_SUMMARY_PART", "child-3");
    let context = detect(&system);
    assert_eq!(context.part.as_deref(), Some("child-3"));
    let Ok(Target::GitLab(t)) = context.target else {
        panic!("a GitLab merge request")
    };
    assert_eq!(t.part.as_deref(), Some("child-3"));
    // Nothing that could end the hidden comment.
    system.set_env("TERRACI_SUMMARY_PART", "x --> <b>");
    assert_eq!(detect(&system).part, None);
}

/// Serves a merge request's comments in two pages and the token's user, and records
/// requests. The first page holds a summary comment by someone else that lists a label.
struct FakeApi {
    sent: Arc<Mutex<Vec<Request>>>,
    github: bool,
    /// The answer to `GET /user`: the user, or the error status.
    me: Result<serde_json::Value, u16>,
}

impl Transport for FakeApi {
    fn send(&self, request: &Request) -> Result<Response, String> {
        self.sent.lock().expect("lock").push(request.clone());
        let note = |id: u64, body: String, author_id: u64, login: &str| {
            if self.github {
                serde_json::json!({"id": id, "body": body,
                                   "user": {"id": author_id, "login": login}})
            } else {
                serde_json::json!({"id": id, "body": body, "system": false,
                                   "author": {"id": author_id, "username": login}})
            }
        };
        let theirs = format!(
            "{MARKER}\n{}",
            labels::encode_managed(&["do-not-merge".to_owned()])
        );
        let (status, body, next) = match (request.method, request.url.as_str()) {
            (Method::Get, url) if url.ends_with("/user") => match &self.me {
                Ok(me) => (200, me.to_string(), ""),
                Err(status) => (*status, "{\"message\": \"no\"}".to_owned(), ""),
            },
            // The merge request's labels: a reviewer's `do-not-merge`.
            (Method::Get, url) if url.ends_with("/merge_requests/7") => (
                200,
                r#"{"iid": 7, "labels": ["do-not-merge"]}"#.to_owned(),
                "",
            ),
            (Method::Get, url) if url.contains("/labels?") => {
                (200, r#"[{"name": "do-not-merge"}]"#.to_owned(), "")
            }
            (Method::Get, url) if !url.contains("page=2") => {
                let mut page = vec![
                    note(1, theirs, 666, "mallory"),
                    note(4, "hello".into(), 2, "bob"),
                ];
                if self.github {
                    // One page: GitHub pages by its `link` header.
                    page.push(note(
                        2,
                        format!("{MARKER}\nold"),
                        41898282,
                        GITHUB_ACTIONS_LOGIN,
                    ));
                }
                (200, serde_json::Value::Array(page).to_string(), "2")
            }
            (Method::Get, _) => {
                let (id, login) = if self.github {
                    (41898282, GITHUB_ACTIONS_LOGIN)
                } else {
                    (5, "terraci-bot")
                };
                let mut page = vec![note(2, format!("{MARKER}\nold"), id, login)];
                if !self.github {
                    page.push(serde_json::json!({"id": 3, "body": MARKER, "system": true,
                                                 "author": {"id": 5, "username": "terraci-bot"}}));
                }
                (200, serde_json::Value::Array(page).to_string(), "")
            }
            _ => (200, "{\"id\": 2000}".to_owned(), ""),
        };
        Ok(Response {
            status,
            headers: vec![("x-next-page".into(), next.into())],
            body,
        })
    }
}

fn fake(github: bool, me: Result<serde_json::Value, u16>) -> (Client, Arc<Mutex<Vec<Request>>>) {
    let sent = Arc::new(Mutex::new(Vec::new()));
    let client = Client::new(
        Box::new(FakeApi {
            sent: sent.clone(),
            github,
            me,
        }),
        RetryPolicy::default(),
    );
    (client, sent)
}

fn gitlab_target() -> Target {
    Target::GitLab(GitLabTarget {
        api: "https://gitlab.example.com/api/v4".into(),
        project: "group/infra".into(),
        merge_request: "7".into(),
        auth: ("JOB-TOKEN", "job-token".into()),
        part: None,
    })
}

fn sent_urls(sent: &Mutex<Vec<Request>>) -> Vec<String> {
    sent.lock()
        .expect("lock")
        .iter()
        .map(|r| format!("{} {}", r.method.as_str(), r.endpoint()))
        .collect()
}

#[test]
fn gitlab_notes_are_read_page_by_page_and_ours_is_edited() {
    let (client, sent) = fake(
        false,
        Ok(serde_json::json!({"id": 5, "username": "terraci-bot"})),
    );
    let target = gitlab_target();
    let posted = post(&client, &target, &|_| format!("{MARKER}\nnew"), &[], true).expect("posts");
    assert_eq!((posted.action, posted.comment_id), ("updated", Some(2)));
    // Not the older comment by someone else, and not the labels it lists.
    assert_eq!(posted.labels_removed, Vec::<String>::new());
    assert_eq!(posted.warnings, Vec::<String>::new());
    assert_eq!(
        sent_urls(&sent),
        [
            "GET https://gitlab.example.com/api/v4/projects/group%2Finfra/merge_requests/7/notes",
            "GET https://gitlab.example.com/api/v4/projects/group%2Finfra/merge_requests/7/notes",
            "GET https://gitlab.example.com/api/v4/user",
            "PUT https://gitlab.example.com/api/v4/projects/group%2Finfra/merge_requests/7/notes/2",
        ]
    );
    assert!(sent.lock().expect("lock").iter().all(|r| r
        .headers
        .contains(&("JOB-TOKEN".into(), "job-token".into()))));
}

#[test]
fn when_the_tokens_user_is_unknown_no_comment_is_edited() {
    let (client, sent) = fake(false, Err(401));
    let target = gitlab_target();
    let posted = post(&client, &target, &|_| format!("{MARKER}\nnew"), &[], true).expect("posts");
    assert_eq!((posted.action, posted.comment_id), ("created", Some(2000)));
    assert_eq!(posted.labels_removed, Vec::<String>::new());
    assert_eq!(posted.warnings.len(), 1, "{:?}", posted.warnings);
    assert!(
        posted.warnings[0].contains("cannot tell which user the token is"),
        "{:?}",
        posted.warnings
    );
    assert_eq!(
        sent_urls(&sent),
        [
            "GET https://gitlab.example.com/api/v4/projects/group%2Finfra/merge_requests/7/notes",
            "GET https://gitlab.example.com/api/v4/projects/group%2Finfra/merge_requests/7/notes",
            "GET https://gitlab.example.com/api/v4/user",
            "POST https://gitlab.example.com/api/v4/projects/group%2Finfra/merge_requests/7/notes",
        ]
    );
    // Without `create`, nothing is posted at all.
    let (client, sent) = fake(false, Err(403));
    let posted = post(&client, &target, &|_| MARKER.into(), &[], false).expect("skips");
    assert_eq!(posted.action, "skipped");
    assert!(sent_urls(&sent).iter().all(|u| u.starts_with("GET ")));
}

#[test]
fn github_refusing_get_user_means_the_actions_bot() {
    let target = Target::GitHub(GitHubTarget {
        api: "https://api.github.com".into(),
        repository: "acme/infra".into(),
        pull_request: 5,
        token: "ghs_x".into(),
    });
    let (client, sent) = fake(true, Err(403));
    let posted = post(&client, &target, &|_| format!("{MARKER}\nnew"), &[], true).expect("posts");
    assert_eq!((posted.action, posted.comment_id), ("updated", Some(2)));
    assert_eq!(posted.warnings, Vec::<String>::new());
    assert!(
        sent_urls(&sent).contains(
            &"PATCH https://api.github.com/repos/acme/infra/issues/comments/2".to_owned()
        ),
        "{:?}",
        sent_urls(&sent)
    );
    // A personal token's user is who GitHub says: the Actions bot's comment is not its.
    let (client, sent) = fake(true, Ok(serde_json::json!({"id": 77, "login": "octocat"})));
    let posted = post(&client, &target, &|_| format!("{MARKER}\nnew"), &[], true).expect("posts");
    assert_eq!((posted.action, posted.comment_id), ("created", Some(2000)));
    assert!(sent_urls(&sent).iter().all(|u| !u.starts_with("PATCH ")));
}

#[test]
fn the_environment_decides_where_the_comment_goes() {
    let system = MemorySystem::new();
    assert!(detect(&system).target.is_err());
    assert_eq!(detect(&system).provider, None);

    system.set_env("GITLAB_CI", "true");
    system.set_env("CI_SERVER_URL", "https://gitlab.example.com/");
    system.set_env("CI_PROJECT_ID", "42");
    system.set_env("CI_COMMIT_SHA", "aaa");
    let context = detect(&system);
    assert_eq!(context.provider, Some(CommentProvider::GitLab));
    let reason = context.target.expect_err("no MR");
    assert!(reason.contains("CI_MERGE_REQUEST_IID"), "{reason}");
    system.set_env("CI_MERGE_REQUEST_IID", "7");
    system.set_env("CI_MERGE_REQUEST_SOURCE_BRANCH_SHA", "bbb");
    system.set_env("CI_JOB_TOKEN", "job");
    assert_eq!(detect(&system).commits, ["bbb", "aaa"]);
    let Ok(Target::GitLab(t)) = detect(&system).target else {
        panic!("a GitLab merge request")
    };
    assert_eq!(t.api, "https://gitlab.example.com/api/v4");
    assert_eq!(t.auth, ("JOB-TOKEN", "job".to_owned()));
    system.set_env("GITLAB_TOKEN", "personal");
    let Ok(Target::GitLab(t)) = detect(&system).target else {
        panic!("a GitLab merge request")
    };
    assert_eq!(t.auth.0, "PRIVATE-TOKEN");
}

#[test]
fn github_reads_the_pull_request_from_the_event() {
    let system = MemorySystem::new();
    system.write_file(
        "/event.json",
        r#"{"pull_request": {"number": 12, "head": {"sha": "cafe"}}}"#,
    );
    system.set_env("GITHUB_ACTIONS", "true");
    system.set_env("GITHUB_EVENT_PATH", "/event.json");
    system.set_env("GITHUB_REPOSITORY", "acme/infra");
    system.set_env("GITHUB_TOKEN", "ghs_x");
    let context = detect(&system);
    assert_eq!(context.commits, ["cafe"]);
    let Ok(Target::GitHub(t)) = context.target else {
        panic!("a GitHub pull request")
    };
    assert_eq!(
        (t.api.as_str(), t.pull_request),
        ("https://api.github.com", 12)
    );
    // A push event has no pull request.
    system.write_file("/event.json", r#"{"ref": "refs/heads/main"}"#);
    assert!(detect(&system).target.is_err());
}

fn collect_from(system: &MemorySystem, head: Option<&str>) -> Summary {
    collect_bounded(system, head, 1 << 20)
}

fn collect_bounded(system: &MemorySystem, head: Option<&str>, max_plan: u64) -> Summary {
    let policy = terraci_db::system::ReadPolicy::new(system, Utf8Path::new("/repo"), 1 << 20);
    let modules: Vec<ModuleRef> = [
        "a/prod/eu/one",
        "a/prod/eu/two",
        "a/prod/eu/three",
        "a/prod/eu/none",
    ]
    .iter()
    .map(|id| ModuleRef {
        id: (*id).to_owned(),
        components: IndexMap::new(),
    })
    .collect();
    let edges = vec![
        ("a/prod/eu/two".to_owned(), "a/prod/eu/one".to_owned()),
        ("a/prod/eu/none".to_owned(), "a/prod/eu/one".to_owned()),
    ];
    let current: Vec<String> = head.into_iter().map(str::to_owned).collect();
    collect(
        system,
        &policy,
        max_plan,
        &modules,
        &edges,
        Utf8Path::new(".terraci"),
        &current,
    )
}

#[test]
fn results_come_from_the_files_each_module_has() {
    let system = MemorySystem::new();
    let plan = r#"{"format_version": "1.2", "resource_changes": [{"address": "a.b", "mode": "managed", "type": "a", "name": "b", "change": {"actions": ["delete"]}}]}"#;
    // plan.json alone: the status comes from the plan; in CI, naming no commit, it is
    // flagged stale (no plan job of the pipeline left it).
    system.write_file("/repo/a/prod/eu/one/plan.json", plan);
    // A result that is not JSON: failed, saying so (and naming no commit: stale).
    system.write_file("/repo/a/prod/eu/two/plan.result.json", "exit 2");
    // A failed plan with its output.
    system.write_file(
        "/repo/a/prod/eu/three/plan.result.json",
        r#"{"exit_code": 1, "commit": "old"}"#,
    );
    system.write_file(
        "/repo/a/prod/eu/three/plan.txt",
        "\u{1b}[31mnoise\n\u{1b}[0m│ Error: Unsupported argument\n│ \n│   on main.tf line 3\n",
    );
    system.write_file(
        "/repo/.terraci/policy-report.json",
        r#"{"producer": "policy", "title": "Policy", "status": "warn", "commit": "new"}"#,
    );
    system.write_file("/repo/.terraci/cost-report.json", "{broken");
    // A report committed in the checkout cannot name the pipeline's commit.
    system.write_file(
        "/repo/.terraci/security-report.json",
        r#"{"producer": "security", "title": "Approved", "status": "pass"}"#,
    );
    let summary = collect_from(&system, Some("new"));
    let ids: Vec<(&str, Status, bool)> = summary
        .modules
        .iter()
        .map(|m| (m.id.as_str(), m.status, m.stale))
        .collect();
    assert_eq!(
        ids,
        [
            ("a/prod/eu/one", Status::Changes, true),
            ("a/prod/eu/three", Status::Failed, true),
            ("a/prod/eu/two", Status::Failed, true),
        ]
    );
    assert_eq!(
        summary.modules[1].error.as_deref(),
        Some("Error: Unsupported argument\n\n  on main.tf line 3")
    );
    let two = summary.modules[2].error.as_deref().unwrap_or("");
    assert!(two.starts_with("a/prod/eu/two/plan.result.json: "), "{two}");
    assert_eq!(
        summary.edges,
        [("a/prod/eu/two".to_owned(), "a/prod/eu/one".to_owned())]
    );
    assert_eq!(summary.reports.len(), 1);
    assert_eq!(summary.reports[0].producer, "policy");
    assert_eq!(summary.warnings.len(), 2, "{:?}", summary.warnings);
    assert!(
        summary.warnings[0].contains(".terraci/cost-report.json"),
        "{:?}",
        summary.warnings
    );
    assert!(
        summary.warnings[1]
            .contains(".terraci/security-report.json is left out: it names no commit"),
        "{:?}",
        summary.warnings
    );
    assert!(summary.has_reportable_changes());
}

#[test]
fn the_plan_parser_takes_what_terraform_writes() {
    // The schema subset the comment needs, on one of terraform's own plans.
    let bytes = include_bytes!("../../../../fixtures/summary/plans/delete/plan.json");
    let plan = parse_plan(bytes).expect("parses");
    assert_eq!(plan.counts.destroy, 1);
}

#[test]
fn a_label_the_merge_request_has_already_is_not_recorded_as_terracis() {
    // A wanted label the merge request already has (a reviewer's `do-not-merge`, or the
    // name a module was given to render it) is not added, and not recorded: the run after
    // the module is gone must not remove it.
    let github = Target::GitHub(GitHubTarget {
        api: "https://api.github.com".into(),
        repository: "acme/infra".into(),
        pull_request: 5,
        token: "ghs_x".into(),
    });
    for (target, is_github, me) in [
        (
            gitlab_target(),
            false,
            serde_json::json!({"id": 5, "username": "terraci-bot"}),
        ),
        (
            github,
            true,
            serde_json::json!({"id": 41898282, "login": GITHUB_ACTIONS_LOGIN}),
        ),
    ] {
        let (client, _) = fake(is_github, Ok(me));
        let recorded = Mutex::new(Vec::new());
        let render = |managed: &[String]| {
            *recorded.lock().expect("lock") = managed.to_vec();
            format!("{MARKER}\n{}", labels::encode_managed(managed))
        };
        let wanted = ["do-not-merge".to_owned(), "terraform".to_owned()];
        let posted = post(&client, &target, &render, &wanted, true).expect("posts");
        assert_eq!(posted.labels_added, ["terraform"]);
        assert_eq!(posted.labels_removed, Vec::<String>::new());
        assert_eq!(*recorded.lock().expect("lock"), ["terraform"]);
    }
}

#[test]
fn a_cost_report_is_a_module_before_after_diff_table_with_its_totals() {
    let report: super::report::Report = serde_json::from_str(
        r#"{"producer": "cost", "title": "Cost estimation", "status": "pass",
            "summary": "2 modules",
            "cost": {"before": "$8.39", "after": "$15.98", "diff": "+$7.59"},
            "modules": [
              {"module": "p/prod/eu/b", "status": "pass", "summary": "s",
               "cost": {"before": "$0.00", "after": "$0.00", "diff": "$0.00"}},
              {"module": "p/prod/eu/a", "status": "pass", "summary": "s",
               "cost": {"before": "$8.39", "after": "$15.98", "diff": "+$7.59"}}]}"#,
    )
    .expect("a cost report");
    let summary = Summary {
        reports: vec![report],
        ..Summary::default()
    };
    let text = render(&summary, &details());
    assert!(
        text.contains(
            "| Module | Before | After | Diff |\n| --- | ---: | ---: | ---: |\n\
             | `p/prod/eu/a` | \\$8\\.39 | \\$15\\.98 | \\+\\$7\\.59 |\n\
             | `p/prod/eu/b` | \\$0\\.00 | \\$0\\.00 | \\$0\\.00 |\n\
             | **Total** | **\\$8\\.39** | **\\$15\\.98** | **\\+\\$7\\.59** |\n"
        ),
        "{text}"
    );
}
