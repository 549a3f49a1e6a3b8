//! Posting the comment: GitLab merge-request notes and GitHub pull-request (issue)
//! comments, found again by [`super::MARKER`] and edited in place, and the labels terraci
//! manages.
//!
//! Input: the CI environment (through `System`), the comment and the labels. Output: what
//! was done, as [`Posted`], or an [`HttpError`] naming the method, endpoint and status.
//! The token is only ever a request header.

use crate::http::{Client, HttpError, Method, Request};
use terraci_db::system::System;

use super::labels;

/// Where the comment goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    GitLab(GitLabTarget),
    GitHub(GitHubTarget),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitLabTarget {
    /// `<CI_SERVER_URL>/api/v4`.
    pub(crate) api: String,
    pub(crate) project: String,
    pub(crate) merge_request: String,
    /// `(header, token)`: `PRIVATE-TOKEN` for `GITLAB_TOKEN`, `JOB-TOKEN` for
    /// `CI_JOB_TOKEN`.
    pub(crate) auth: (&'static str, String),
    /// The part of a split pipeline, whose own comment this is ([`Context::part`]).
    pub(crate) part: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitHubTarget {
    /// `GITHUB_API_URL`, default `https://api.github.com`.
    pub(crate) api: String,
    /// `owner/name`.
    pub(crate) repository: String,
    pub(crate) pull_request: u64,
    pub(crate) token: String,
}

impl Target {
    pub fn token(&self) -> &str {
        match self {
            Target::GitLab(t) => &t.auth.1,
            Target::GitHub(t) => &t.token,
        }
    }
}

/// The CI environment as the command sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Context {
    /// `gitlab`, `github` or none (a laptop).
    pub provider: Option<terraci_db::config::CommentProvider>,
    /// Where to post; `None` with the reason when outside a merge request or without a
    /// token.
    pub target: Result<Target, String>,
    /// The commits a current plan is made for: the merge request's head first, then the
    /// pipeline's own commit when it differs (a merged-results pipeline, GitHub's merge
    /// commit of a pull_request event).
    pub commits: Vec<String>,
    /// Pipeline / run id, for the footer.
    pub pipeline: Option<String>,
    /// `GITHUB_STEP_SUMMARY`.
    pub step_summary: Option<String>,
    /// The part of a split GitLab pipeline this summary is for (its child pipeline,
    /// [`terraci_engine::contrib::SUMMARY_PART_VARIABLE`]), when valid.
    pub part: Option<String>,
}

fn var(system: &dyn System, name: &str) -> Option<String> {
    system
        .env_var(name)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The distinct commits given, in order.
fn commits(given: &[Option<String>]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for sha in given.iter().flatten() {
        if !out.contains(sha) {
            out.push(sha.clone());
        }
    }
    out
}

/// Reads the CI environment. GitLab wins when both providers' variables are set.
pub fn detect(system: &dyn System) -> Context {
    use terraci_db::config::CommentProvider;
    let gitlab = var(system, "GITLAB_CI").is_some() || var(system, "CI_SERVER_URL").is_some();
    let github =
        var(system, "GITHUB_ACTIONS").is_some() || var(system, "GITHUB_EVENT_PATH").is_some();
    if gitlab {
        let commits = commits(&[
            var(system, "CI_MERGE_REQUEST_SOURCE_BRANCH_SHA"),
            var(system, "CI_COMMIT_SHA"),
        ]);
        let part = var(system, terraci_engine::contrib::SUMMARY_PART_VARIABLE)
            .filter(|part| super::valid_part(part));
        let target = (|| {
            let server = var(system, "CI_SERVER_URL").ok_or("CI_SERVER_URL is not set")?;
            let project = var(system, "CI_PROJECT_ID").ok_or("CI_PROJECT_ID is not set")?;
            let merge_request = var(system, "CI_MERGE_REQUEST_IID")
                .ok_or("not in a merge request pipeline (CI_MERGE_REQUEST_IID is not set)")?;
            let auth = match (var(system, "GITLAB_TOKEN"), var(system, "CI_JOB_TOKEN")) {
                (Some(token), _) => ("PRIVATE-TOKEN", token),
                (None, Some(token)) => ("JOB-TOKEN", token),
                (None, None) => return Err("neither GITLAB_TOKEN nor CI_JOB_TOKEN is set"),
            };
            Ok(Target::GitLab(GitLabTarget {
                api: format!("{}/api/v4", server.trim_end_matches('/')),
                project,
                merge_request,
                auth,
                part: part.clone(),
            }))
        })()
        .map_err(str::to_owned);
        return Context {
            provider: Some(CommentProvider::GitLab),
            target,
            commits,
            pipeline: var(system, "CI_PIPELINE_ID"),
            step_summary: None,
            part,
        };
    }
    if github {
        let event = var(system, "GITHUB_EVENT_PATH").and_then(|path| {
            let bytes = system.read(camino::Utf8Path::new(&path)).ok()?;
            serde_json::from_slice::<serde_json::Value>(&bytes).ok()
        });
        let pr = event
            .as_ref()
            .map(|e| &e["pull_request"])
            .filter(|p| p.is_object());
        let number = pr.and_then(|p| p["number"].as_u64());
        let commits = commits(&[
            pr.and_then(|p| p["head"]["sha"].as_str())
                .map(str::to_owned),
            var(system, "GITHUB_SHA"),
        ]);
        let target = (|| {
            let pull_request =
                number.ok_or("not in a pull request (the event has no pull_request.number)")?;
            let repository =
                var(system, "GITHUB_REPOSITORY").ok_or("GITHUB_REPOSITORY is not set")?;
            let token = var(system, "GITHUB_TOKEN").ok_or("GITHUB_TOKEN is not set")?;
            let api = var(system, "GITHUB_API_URL")
                .unwrap_or_else(|| "https://api.github.com".to_owned());
            Ok(Target::GitHub(GitHubTarget {
                api: api.trim_end_matches('/').to_owned(),
                repository,
                pull_request,
                token,
            }))
        })()
        .map_err(|e: &str| e.to_owned());
        return Context {
            provider: Some(CommentProvider::GitHub),
            target,
            commits,
            pipeline: var(system, "GITHUB_RUN_ID"),
            step_summary: var(system, "GITHUB_STEP_SUMMARY"),
            part: None,
        };
    }
    Context {
        provider: None,
        target: Err("not running in GitLab CI or GitHub Actions".to_owned()),
        commits: Vec::new(),
        pipeline: None,
        step_summary: None,
        part: None,
    }
}

/// A user of the provider: the author of a comment, or the token's own user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// The numeric id, when known (GitLab `author.id`, GitHub `user.id`).
    pub id: Option<u64>,
    /// GitLab `username`, GitHub `login`.
    pub login: String,
}

impl User {
    /// The same user: by id when both ids are known, else by a non-empty login.
    pub fn is(&self, other: &User) -> bool {
        match (self.id, other.id) {
            (Some(a), Some(b)) => a == b,
            _ => !self.login.is_empty() && self.login == other.login,
        }
    }
}

/// The login of the Actions `GITHUB_TOKEN`'s user. GitHub answers 403 to `GET /user`
/// with that token, so it is the user taken when the token is refused there.
pub const GITHUB_ACTIONS_LOGIN: &str = "github-actions[bot]";

/// A comment found on the merge request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Existing {
    pub(crate) id: u64,
    pub(crate) body: String,
    /// Who wrote it, when the API said.
    pub(crate) author: Option<User>,
}

/// What [`post`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Posted {
    /// `created`, `updated` or `skipped`.
    pub action: &'static str,
    pub comment_id: Option<u64>,
    /// The endpoint of the comment.
    pub endpoint: String,
    pub labels_added: Vec<String>,
    pub labels_removed: Vec<String>,
    /// What the caller should print as warnings.
    pub warnings: Vec<String>,
}

/// Whether `comment` looks like the summary whose first line is `marker`.
fn is_summary(comment: &Existing, marker: &str) -> bool {
    comment.body.trim_start().starts_with(marker)
}

/// The comment of an earlier run: the oldest one whose body starts with `marker`
/// ([`super::MARKER`], or a part's [`super::marker`]) and that `me` (the token's own user)
/// wrote. Anyone can write the marker, so a comment by someone else is never ours
/// (editing it would fail on GitLab, and the labels it lists are not ours to remove);
/// with `me` unknown no comment is.
pub(crate) fn find_existing<'c>(
    comments: &'c [Existing],
    me: Option<&User>,
    marker: &str,
) -> Option<&'c Existing> {
    let me = me?;
    comments
        .iter()
        .filter(|c| is_summary(c, marker))
        .filter(|c| c.author.as_ref().is_some_and(|a| a.is(me)))
        .min_by_key(|c| c.id)
}

/// Posts `body` (made by `render(labels)`): edits the earlier comment, or creates one
/// when there is none and `create` holds. Then adds the labels of `labels` that the
/// earlier comment did not record and the merge request does not have, and removes those
/// it recorded that are gone. `render` is given the labels terraci manages: those it
/// recorded before or adds now, never one the merge request had already.
pub fn post(
    client: &Client,
    target: &Target,
    render: &dyn Fn(&[String]) -> String,
    labels: &[String],
    create: bool,
) -> Result<Posted, HttpError> {
    let api = Api::new(client, target);
    let comments = api.list()?;
    let mut warnings = Vec::new();
    let existing = api.ours(&comments, &mut warnings);
    let previous = existing
        .as_ref()
        .map(|c| labels::decode_managed(&c.body))
        .unwrap_or_default();
    // A wanted label the merge request has already (a reviewer's `do-not-merge`, or one
    // a module's name renders to) is not terraci's: it is neither added nor recorded, so
    // a later run never removes it.
    let new: Vec<String> = labels
        .iter()
        .filter(|l| !previous.contains(l))
        .cloned()
        .collect();
    let present = if new.is_empty() {
        Vec::new()
    } else {
        api.present_labels()?
    };
    let managed: Vec<String> = labels
        .iter()
        .filter(|l| previous.contains(l) || !present.contains(l))
        .cloned()
        .collect();
    let body = render(&managed);
    let mut posted = match &existing {
        Some(c) => {
            let endpoint = api.update(c.id, &body)?;
            Posted {
                action: "updated",
                comment_id: Some(c.id),
                endpoint,
                ..Posted::default()
            }
        }
        None if create => {
            let (id, endpoint) = match api.create(&body) {
                Ok(created) => created,
                // The server may have stored the comment before it failed: look again,
                // and edit what is there rather than post a second comment.
                Err(e) if e.status.is_none_or(|s| s >= 500) => {
                    match api.ours(&api.list()?, &mut warnings) {
                        Some(c) => (c.id, api.update(c.id, &body)?),
                        None => api.create(&body)?,
                    }
                }
                Err(e) => return Err(e),
            };
            Posted {
                action: "created",
                comment_id: Some(id),
                endpoint,
                ..Posted::default()
            }
        }
        None => {
            return Ok(Posted {
                action: "skipped",
                warnings,
                ..Posted::default()
            })
        }
    };
    let (add, remove) = labels::diff(&previous, &managed);
    if !add.is_empty() || !remove.is_empty() {
        api.labels(&add, &remove)?;
    }
    posted.labels_added = add;
    posted.labels_removed = remove;
    posted.warnings = warnings;
    Ok(posted)
}

/// The few REST calls, for one provider.
struct Api<'a> {
    client: &'a Client,
    target: &'a Target,
    /// The token's own user, asked once and only when a summary comment is found; the
    /// error says why it is unknown.
    me: std::cell::OnceCell<Result<User, String>>,
}

impl<'a> Api<'a> {
    fn new(client: &'a Client, target: &'a Target) -> Api<'a> {
        Api {
            client,
            target,
            me: std::cell::OnceCell::new(),
        }
    }

    /// Our earlier comment among `comments` ([`find_existing`]). When there are summary
    /// comments but the token's user cannot be told, none is adopted and `warnings` says
    /// so (once).
    fn ours(&self, comments: &[Existing], warnings: &mut Vec<String>) -> Option<Existing> {
        let part = match self.target {
            Target::GitLab(target) => target.part.as_deref(),
            Target::GitHub(_) => None,
        };
        let marker = super::marker(part);
        if !comments.iter().any(|c| is_summary(c, &marker)) {
            return None;
        }
        match self.me.get_or_init(|| self.whoami()) {
            Ok(me) => find_existing(comments, Some(me), &marker).cloned(),
            Err(why) => {
                let warning = format!(
                    "cannot tell which user the token is ({why}); earlier summary comments \
                     are not edited and the labels they list are not removed"
                );
                if !warnings.contains(&warning) {
                    warnings.push(warning);
                }
                None
            }
        }
    }

    /// The token's own user: GitLab `GET /user` (`id`, `username`), GitHub `GET /user`
    /// (`id`, `login`). GitHub refuses that to the Actions `GITHUB_TOKEN` (403): then the
    /// user is [`GITHUB_ACTIONS_LOGIN`].
    fn whoami(&self) -> Result<User, String> {
        let api = match self.target {
            Target::GitLab(t) => &t.api,
            Target::GitHub(t) => &t.api,
        };
        let request = self.request(Method::Get, format!("{api}/user"));
        let response = match self.client.send(&request) {
            Ok(response) => response,
            Err(e) if e.status == Some(403) && matches!(self.target, Target::GitHub(_)) => {
                return Ok(User {
                    id: None,
                    login: GITHUB_ACTIONS_LOGIN.to_owned(),
                })
            }
            Err(e) => return Err(e.to_string()),
        };
        let value: serde_json::Value = serde_json::from_str(&response.body)
            .map_err(|e| format!("{}: the response is not JSON: {e}", request.endpoint()))?;
        let user = match self.target {
            Target::GitLab(_) => author(&value, "username"),
            Target::GitHub(_) => author(&value, "login"),
        };
        user.ok_or_else(|| format!("{}: the response names no user", request.endpoint()))
    }

    fn request(&self, method: Method, url: String) -> Request {
        match self.target {
            Target::GitLab(t) => Request::new(method, url).header(t.auth.0, &t.auth.1),
            Target::GitHub(t) => Request::new(method, url)
                .header("Authorization", &format!("Bearer {}", t.token))
                .header("Accept", "application/vnd.github+json")
                .header("X-GitHub-Api-Version", "2022-11-28"),
        }
    }

    fn comments_url(&self) -> String {
        match self.target {
            Target::GitLab(t) => format!(
                "{}/projects/{}/merge_requests/{}/notes",
                t.api,
                path_segment(&t.project),
                path_segment(&t.merge_request)
            ),
            Target::GitHub(t) => format!(
                "{}/repos/{}/issues/{}/comments",
                t.api,
                repo_path(&t.repository),
                t.pull_request
            ),
        }
    }

    /// Every comment, page by page (100 a page, at most 50 pages).
    fn list(&self) -> Result<Vec<Existing>, HttpError> {
        let mut out = Vec::new();
        for page in 1..=50 {
            let url = match self.target {
                Target::GitLab(_) => format!(
                    "{}?sort=asc&order_by=created_at&per_page=100&page={page}",
                    self.comments_url()
                ),
                Target::GitHub(_) => format!("{}?per_page=100&page={page}", self.comments_url()),
            };
            let request = self.request(Method::Get, url);
            let response = self.client.send(&request)?;
            let items: Vec<serde_json::Value> =
                serde_json::from_str(&response.body).map_err(|e| {
                    unexpected(&request, format!("the response is not a JSON list: {e}"))
                })?;
            let count = items.len();
            for item in items {
                // GitLab's system notes ("added 1 commit") are never ours.
                if item["system"].as_bool() == Some(true) {
                    continue;
                }
                if let (Some(id), Some(body)) = (item["id"].as_u64(), item["body"].as_str()) {
                    let author = match self.target {
                        Target::GitLab(_) => author(&item["author"], "username"),
                        Target::GitHub(_) => author(&item["user"], "login"),
                    };
                    out.push(Existing {
                        id,
                        body: body.to_owned(),
                        author,
                    });
                }
            }
            let next = response.header("x-next-page").map(str::trim);
            let more = match self.target {
                Target::GitLab(_) => match next {
                    Some(n) => !n.is_empty(),
                    None => count == 100,
                },
                Target::GitHub(_) => response
                    .header("link")
                    .map_or(count == 100, |l| l.contains("rel=\"next\"")),
            };
            if !more {
                break;
            }
        }
        Ok(out)
    }

    fn update(&self, id: u64, body: &str) -> Result<String, HttpError> {
        let (method, url) = match self.target {
            Target::GitLab(_) => (Method::Put, format!("{}/{id}", self.comments_url())),
            Target::GitHub(t) => (
                Method::Patch,
                format!(
                    "{}/repos/{}/issues/comments/{id}",
                    t.api,
                    repo_path(&t.repository)
                ),
            ),
        };
        let request = self
            .request(method, url)
            .json(&serde_json::json!({ "body": body }));
        self.client.send(&request)?;
        Ok(format!("{} {}", method.as_str(), request.endpoint()))
    }

    fn create(&self, body: &str) -> Result<(u64, String), HttpError> {
        let request = self
            .request(Method::Post, self.comments_url())
            .json(&serde_json::json!({ "body": body }))
            .once();
        let response = self.client.send(&request)?;
        let value: serde_json::Value = serde_json::from_str(&response.body)
            .map_err(|e| unexpected(&request, format!("the response is not JSON: {e}")))?;
        let id = value["id"]
            .as_u64()
            .ok_or_else(|| unexpected(&request, "the response has no `id`".to_owned()))?;
        Ok((id, format!("POST {}", request.endpoint())))
    }

    /// The labels the merge request has now: GitLab's merge request `labels`, GitHub's
    /// issue labels (page by page, at most 10 pages of 100).
    fn present_labels(&self) -> Result<Vec<String>, HttpError> {
        match self.target {
            Target::GitLab(t) => {
                let request = self.request(Method::Get, merge_request_url(t));
                let response = self.client.send(&request)?;
                let value: serde_json::Value = serde_json::from_str(&response.body)
                    .map_err(|e| unexpected(&request, format!("the response is not JSON: {e}")))?;
                let list = value["labels"].as_array().ok_or_else(|| {
                    unexpected(&request, "the response has no `labels` list".to_owned())
                })?;
                Ok(list
                    .iter()
                    .filter_map(|l| l.as_str().map(str::to_owned))
                    .collect())
            }
            Target::GitHub(t) => {
                let mut out = Vec::new();
                for page in 1..=10 {
                    let url = format!(
                        "{}/repos/{}/issues/{}/labels?per_page=100&page={page}",
                        t.api,
                        repo_path(&t.repository),
                        t.pull_request
                    );
                    let request = self.request(Method::Get, url);
                    let response = self.client.send(&request)?;
                    let items: Vec<serde_json::Value> = serde_json::from_str(&response.body)
                        .map_err(|e| {
                            unexpected(&request, format!("the response is not a JSON list: {e}"))
                        })?;
                    let count = items.len();
                    out.extend(
                        items
                            .iter()
                            .filter_map(|l| l["name"].as_str().map(str::to_owned)),
                    );
                    if count < 100 {
                        break;
                    }
                }
                Ok(out)
            }
        }
    }

    fn labels(&self, add: &[String], remove: &[String]) -> Result<(), HttpError> {
        match self.target {
            Target::GitLab(t) => {
                let request =
                    self.request(Method::Put, merge_request_url(t))
                        .json(&serde_json::json!({
                            "add_labels": add.join(","),
                            "remove_labels": remove.join(","),
                        }));
                self.client.send(&request)?;
            }
            Target::GitHub(t) => {
                let issue = format!(
                    "{}/repos/{}/issues/{}/labels",
                    t.api,
                    repo_path(&t.repository),
                    t.pull_request
                );
                if !add.is_empty() {
                    let request = self
                        .request(Method::Post, issue.clone())
                        .json(&serde_json::json!({ "labels": add }));
                    self.client.send(&request)?;
                }
                for label in remove {
                    let request =
                        self.request(Method::Delete, format!("{issue}/{}", path_segment(label)));
                    match self.client.send(&request) {
                        // Already gone (someone removed it by hand).
                        Err(e) if e.status == Some(404) => {}
                        other => {
                            other?;
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

/// GitLab's URL of the merge request itself (its labels are read and set there).
fn merge_request_url(t: &GitLabTarget) -> String {
    format!(
        "{}/projects/{}/merge_requests/{}",
        t.api,
        path_segment(&t.project),
        path_segment(&t.merge_request)
    )
}

/// The user described by `value` (`id` and the login field `login`); `None` without a
/// login.
fn author(value: &serde_json::Value, login: &str) -> Option<User> {
    let name = value[login].as_str().filter(|l| !l.is_empty())?;
    Some(User {
        id: value["id"].as_u64(),
        login: name.to_owned(),
    })
}

fn unexpected(request: &Request, what: String) -> HttpError {
    HttpError {
        method: request.method.as_str(),
        endpoint: request.endpoint().to_owned(),
        status: None,
        what,
    }
}

/// `s` percent-encoded as one URL path segment (unreserved characters kept).
pub(crate) fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `owner/name` with each part encoded.
fn repo_path(repository: &str) -> String {
    repository
        .split('/')
        .map(path_segment)
        .collect::<Vec<_>>()
        .join("/")
}
