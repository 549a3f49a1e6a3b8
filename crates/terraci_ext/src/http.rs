//! The network boundary: the only code that speaks HTTP. It owns how every client is
//! built ([`agent`]: timeouts, redirects, proxy and TLS), how much of a response is read,
//! and which credentials may go to which host ([`Endpoint`], [`bound_credentials`]).
//! Its users: the GitLab and GitHub REST APIs of `terraci summary` ([`Client`]), the OCI
//! registries of `policy pull` and the Terraform registries of `terraci tfupdate`
//! ([`get`]), and git's smart HTTP for git policy sources
//! (an [`agent`] for [`Purpose::GitFetch`], driven by gix's transport).
//!
//! Input: a [`Request`] (method, URL, headers, JSON body). Output: the [`Response`] or an
//! [`HttpError`] that names the method, the endpoint and the status. A [`Transport`] sends
//! one request; [`Client`] adds the retries (429 and 5xx, connection failures) with a
//! bounded backoff, and keeps secrets out of every message: the token travels in a header,
//! never in a URL, and any text that could echo it is redacted. Unit tests give `Client` a
//! fake transport; [`UreqTransport`] is the real one.

use std::time::Duration;

/// What a client is for; each purpose has its own timeouts, redirect rule and bound on
/// a response body. Every client speaks TLS with rustls and the webpki roots, and goes
/// through the proxy the usual environment variables name (`HTTPS_PROXY`, `NO_PROXY`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// The GitLab and GitHub REST APIs: 10 s to connect, 60 s in all, no redirects (one
    /// would carry the token header to wherever it points), 16 MiB responses.
    Api,
    /// OCI registries: 120 s in all, redirects followed (a blob is often served from
    /// another host; ureq sends no `Authorization` header across a redirect); each read
    /// says its own bound ([`get`]).
    Registry,
    /// A git fetch: 30 s to connect, 600 s in all (a pack can be large), redirects
    /// followed, 512 MiB responses.
    GitFetch,
    /// AWS's public bulk price lists (`terraci cost`): 10 s to connect, 600 s in all (the
    /// EC2 file of a region is hundreds of MB), redirects followed, no credentials; each
    /// read says its own bound ([`get_streamed`]).
    Pricing,
}

impl Purpose {
    /// The largest response body read, where the purpose has one.
    pub(crate) fn max_body(self) -> Option<u64> {
        match self {
            Purpose::Api => Some(16 << 20),
            Purpose::Registry => None,
            Purpose::GitFetch => Some(512 << 20),
            Purpose::Pricing => None,
        }
    }
}

/// The HTTP client for `purpose` (see [`Purpose`]). Statuses are answers, not errors.
pub(crate) fn agent(purpose: Purpose) -> ureq::Agent {
    let (connect, global) = match purpose {
        Purpose::Api => (Some(10), 60),
        Purpose::Registry => (None, 120),
        Purpose::GitFetch => (Some(30), 600),
        Purpose::Pricing => (Some(10), 600),
    };
    let mut config = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(ureq::Proxy::try_from_env())
        .timeout_connect(connect.map(Duration::from_secs))
        .timeout_global(Some(Duration::from_secs(global)))
        .user_agent(concat!("terraci/", env!("CARGO_PKG_VERSION")));
    if purpose == Purpose::Api {
        config = config.max_redirects(0);
    }
    config.build().into()
}

/// HTTP methods the APIs need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Patch => "PATCH",
            Method::Delete => "DELETE",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub(crate) method: Method,
    pub(crate) url: String,
    pub(crate) headers: Vec<(String, String)>,
    /// A JSON document (`Content-Type: application/json` is added).
    pub(crate) body: Option<String>,
    /// Not sent again once the server may have acted on it (see [`Request::once`]).
    pub(crate) once: bool,
}

impl Request {
    pub(crate) fn new(method: Method, url: impl Into<String>) -> Request {
        Request {
            method,
            url: url.into(),
            headers: Vec::new(),
            body: None,
            once: false,
        }
    }

    /// A request that must not take effect twice (creating a comment): after a 5xx or no
    /// response the server may have acted on it, so it is an error at once, for the
    /// caller to look before it tries again. A 429 is still retried (nothing was done).
    pub(crate) fn once(mut self) -> Request {
        self.once = true;
        self
    }

    pub(crate) fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub(crate) fn json(mut self, body: &serde_json::Value) -> Request {
        self.body = Some(body.to_string());
        self
    }

    /// The URL without its query: what messages name.
    pub(crate) fn endpoint(&self) -> &str {
        self.url.split('?').next().unwrap_or(&self.url)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub(crate) status: u16,
    /// Names lower-case.
    pub(crate) headers: Vec<(String, String)>,
    pub(crate) body: String,
}

impl Response {
    pub(crate) fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one request. `Err` is a failure to get any response (refused, timed out, TLS),
/// as text.
pub trait Transport: Send + Sync {
    fn send(&self, request: &Request) -> Result<Response, String>;
}

/// A request that failed: after the retries, or at once for a status that retrying does
/// not fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{method} {endpoint}: {what}")]
pub struct HttpError {
    pub(crate) method: &'static str,
    pub(crate) endpoint: String,
    /// `None` when no response came.
    pub(crate) status: Option<u16>,
    /// `401 Unauthorized (the server says: ...)`, or why no response came.
    pub(crate) what: String,
}

/// How often and how long to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub(crate) attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub(crate) first_delay: Duration,
    /// The longest wait, also for a server's `Retry-After`.
    pub(crate) max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            attempts: 4,
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(10),
        }
    }
}

/// A [`Transport`] with retries and redaction.
pub struct Client {
    transport: Box<dyn Transport>,
    policy: RetryPolicy,
    /// Values never shown in a message (the token).
    secrets: Vec<String>,
    sleep: fn(Duration),
}

impl Client {
    pub fn new(transport: Box<dyn Transport>, policy: RetryPolicy) -> Client {
        Client {
            transport,
            policy,
            secrets: Vec::new(),
            sleep: std::thread::sleep,
        }
    }

    /// A client whose waits return at once (tests).
    pub fn without_waiting(mut self) -> Client {
        fn no_wait(_: Duration) {}
        self.sleep = no_wait;
        self
    }

    /// `secret` is replaced by `[redacted]` wherever a message would show it.
    pub fn redacting(mut self, secret: &str) -> Client {
        if !secret.is_empty() {
            self.secrets.push(secret.to_owned());
        }
        self
    }

    fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for secret in &self.secrets {
            out = out.replace(secret.as_str(), "[redacted]");
        }
        out
    }

    /// Sends `request`; a 2xx response is `Ok`, anything else an error after the retries
    /// that can help (429, 5xx, no response).
    pub(crate) fn send(&self, request: &Request) -> Result<Response, HttpError> {
        let attempts = self.policy.attempts.max(1);
        let mut delay = self.policy.first_delay;
        let mut attempt = 1;
        loop {
            let outcome = match self.transport.send(request) {
                Ok(r) if (200..300).contains(&r.status) => return Ok(r),
                other => other,
            };
            // `Some(server's wait)` when another attempt can help.
            let retry: Option<Option<Duration>> = match &outcome {
                Ok(r) if r.status == 429 || (r.status >= 500 && !request.once) => Some(
                    r.header("retry-after")
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(Duration::from_secs),
                ),
                Ok(_) => None,
                Err(_) if request.once => None,
                Err(_) => Some(None),
            };
            if let Some(server_wait) = retry.filter(|_| attempt < attempts) {
                (self.sleep)(server_wait.unwrap_or(delay).min(self.policy.max_delay));
                delay = (delay * 2).min(self.policy.max_delay);
                attempt += 1;
                continue;
            }
            let tries = if attempt > 1 {
                format!(" (after {attempt} attempts)")
            } else {
                String::new()
            };
            let (status, what) = match outcome {
                Ok(response) => (
                    Some(response.status),
                    format!(
                        "{}{}{tries}",
                        status_text(response.status),
                        self.server_says(&response.body)
                    ),
                ),
                Err(why) => (None, format!("no response: {}{tries}", self.redact(&why))),
            };
            return Err(HttpError {
                method: request.method.as_str(),
                endpoint: self.redact(request.endpoint()),
                status,
                what,
            });
        }
    }

    /// ` (the server says: ...)` from a JSON error body's `message` or `error`, one line,
    /// at most 200 characters, redacted.
    fn server_says(&self, body: &str) -> String {
        let Ok(value) = serde_json::from_str::<serde_json::Value>(body) else {
            return String::new();
        };
        let message = ["message", "error", "error_description"]
            .iter()
            .find_map(|k| match &value[k] {
                serde_json::Value::String(s) => Some(s.clone()),
                serde_json::Value::Null => None,
                other => Some(other.to_string()),
            });
        match message {
            Some(m) if !m.trim().is_empty() => {
                let line: String = terraci_db::escape::printable(m.trim())
                    .chars()
                    .take(200)
                    .collect();
                format!(" (the server says: {})", self.redact(&line))
            }
            _ => String::new(),
        }
    }
}

fn status_text(status: u16) -> String {
    let reason = match status {
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        409 => "Conflict",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "",
    };
    if reason.is_empty() {
        format!("status {status}")
    } else {
        format!("{status} {reason}")
    }
}

/// The real transport: the [`agent`] for [`Purpose::Api`].
pub struct UreqTransport {
    agent: ureq::Agent,
}

impl Default for UreqTransport {
    fn default() -> Self {
        UreqTransport {
            agent: agent(Purpose::Api),
        }
    }
}

impl Transport for UreqTransport {
    fn send(&self, request: &Request) -> Result<Response, String> {
        let url = request.url.as_str();
        let result = match (request.method, &request.body) {
            (Method::Get, _) => with_headers(self.agent.get(url), request).call(),
            (Method::Delete, _) => with_headers(self.agent.delete(url), request).call(),
            (Method::Post, body) => with_headers(self.agent.post(url), request)
                .header("Content-Type", "application/json")
                .send(body.as_deref().unwrap_or("")),
            (Method::Put, body) => with_headers(self.agent.put(url), request)
                .header("Content-Type", "application/json")
                .send(body.as_deref().unwrap_or("")),
            (Method::Patch, body) => with_headers(self.agent.patch(url), request)
                .header("Content-Type", "application/json")
                .send(body.as_deref().unwrap_or("")),
        };
        let mut response = result.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        let headers = response
            .headers()
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_ascii_lowercase(),
                    v.to_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let body = response
            .body_mut()
            .with_config()
            .limit(Purpose::Api.max_body().unwrap_or(u64::MAX))
            .read_to_string()
            .map_err(|e| format!("reading the response: {e}"))?;
        Ok(Response {
            status,
            headers,
            body,
        })
    }
}

fn with_headers<B>(
    mut builder: ureq::RequestBuilder<B>,
    request: &Request,
) -> ureq::RequestBuilder<B> {
    for (name, value) in &request.headers {
        builder = builder.header(name.as_str(), value.as_str());
    }
    builder
}

/// A response read as bytes ([`get`]): status, headers (lower-case names) and body.
pub struct Download {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Download {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// A [`get`] that got no whole answer; the URL is shown without its credentials.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("GET {shown}: {source}")]
    Request { shown: String, source: ureq::Error },
    #[error("GET {shown}: reading the body: {source}")]
    Body { shown: String, source: ureq::Error },
}

/// GETs `url` with the [`Purpose::Registry`] client (redirects followed, credentials never
/// sent to another host); the body is read up to `max_bytes` (more is an error).
pub fn get(url: &str, headers: &[(&str, &str)], max_bytes: u64) -> Result<Download, FetchError> {
    let mut request = agent(Purpose::Registry).get(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let shown = || redact_url(url);
    let mut response = request.call().map_err(|source| FetchError::Request {
        shown: shown(),
        source,
    })?;
    let status = response.status().as_u16();
    let headers = response
        .headers()
        .iter()
        .filter_map(|(k, v)| Some((k.as_str().to_ascii_lowercase(), v.to_str().ok()?.to_owned())))
        .collect();
    let body = response
        .body_mut()
        .with_config()
        .limit(max_bytes)
        .read_to_vec()
        .map_err(|source| FetchError::Body {
            shown: shown(),
            source,
        })?;
    Ok(Download {
        status,
        headers,
        body,
    })
}

/// GETs `url` with the [`Purpose::Pricing`] client and hands its body to `read` as it
/// arrives, bounded to `max_bytes` (reading more is an error): a price list is parsed as
/// a stream, never held whole. A status other than 200 is an error naming it.
pub fn get_streamed<T>(
    url: &str,
    max_bytes: u64,
    read: impl FnOnce(&mut dyn std::io::Read) -> Result<T, String>,
) -> Result<T, String> {
    let shown = redact_url(url);
    let mut response = agent(Purpose::Pricing)
        .get(url)
        .call()
        .map_err(|e| format!("GET {shown}: no response: {e}"))?;
    let status = response.status().as_u16();
    if status != 200 {
        return Err(format!("GET {shown}: {}", status_text(status)));
    }
    let mut body = response.body_mut().with_config().limit(max_bytes).reader();
    read(&mut body).map_err(|e| format!("GET {shown}: {e}"))
}

/// `url` without the credentials of its user-info part (`https://user:token@host` ->
/// `https://host`), for messages and the lock.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Where a request goes: the scheme, host and port of a URL as the transport itself reads
/// it. It is built on `ureq::http::Uri`, the parser ureq uses for every request terraci
/// sends, so one parser decides both where a request goes and which credential (or which
/// plain-http exception) goes with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Endpoint {
    /// Lower case.
    pub(crate) scheme: String,
    /// Lower case; an IPv6 address without its brackets.
    pub(crate) host: String,
    /// The URL's port, or the scheme's default (80, 443), or `None` for another scheme
    /// without one.
    pub(crate) port: Option<u16>,
    /// The user-info (`user:password`), as written.
    user_info: Option<String>,
}

/// Why a URL has no [`Endpoint`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlError {
    #[error("not a URL with a scheme and a host")]
    NoHost,
    #[error("the URL holds whitespace, a control character or `\\`")]
    BadCharacter,
    #[error(
        "ambiguous authority: the host is not what the text before the first `/` says (a `?` or `#` before an `@`)"
    )]
    Ambiguous,
    #[error("not a URL: {0}")]
    Invalid(String),
}

impl Endpoint {
    pub(crate) fn parse(url: &str) -> Result<Endpoint, UrlError> {
        if url
            .chars()
            .any(|c| c.is_whitespace() || c.is_control() || c == '\\')
        {
            return Err(UrlError::BadCharacter);
        }
        let uri: ureq::http::Uri = url
            .parse()
            .map_err(|e: ureq::http::uri::InvalidUri| UrlError::Invalid(e.to_string()))?;
        let (Some(scheme), Some(authority)) = (uri.scheme_str(), uri.authority()) else {
            return Err(UrlError::NoHost);
        };
        // Any other reader that ends the authority at the first `/` only (and takes the
        // host after the last `@`) must see the same authority, or the URL is refused.
        let rest = url.split_once("://").map_or("", |(_, r)| r);
        let naive = rest.split('/').next().unwrap_or("");
        if naive != authority.as_str() {
            return Err(UrlError::Ambiguous);
        }
        let user_info = authority
            .as_str()
            .rsplit_once('@')
            .map(|(info, _)| info.to_owned());
        if user_info
            .as_deref()
            .is_some_and(|i| i.contains(['?', '#', '/', '\\', '@']))
        {
            return Err(UrlError::Ambiguous);
        }
        let host = authority.host();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(host)
            .to_ascii_lowercase();
        if host.is_empty() {
            return Err(UrlError::NoHost);
        }
        let scheme = scheme.to_ascii_lowercase();
        let port = authority.port_u16().or(match scheme.as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        });
        Ok(Endpoint {
            scheme,
            host,
            port,
            user_info,
        })
    }

    /// `http` to this machine (a test server, a local mirror).
    pub(crate) fn is_local_http(&self) -> bool {
        self.scheme == "http" && matches!(self.host.as_str(), "localhost" | "127.0.0.1" | "::1")
    }

    /// HTTPS anywhere, or plain HTTP to this machine: where a credential may travel.
    pub(crate) fn is_safe_for_credentials(&self) -> bool {
        self.scheme == "https" || self.is_local_http()
    }

    /// The same scheme, host and port.
    pub(crate) fn same_origin(&self, other: &Endpoint) -> bool {
        self.scheme == other.scheme && self.host == other.host && self.port == other.port
    }
}

/// `http://` to this machine (a test server, a local mirror), as [`Endpoint`] reads it.
#[cfg(test)]
fn is_local_http(url: &str) -> bool {
    Endpoint::parse(url).is_ok_and(|e| e.is_local_http())
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match escaped {
            Some(b) => {
                out.push(b);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The (user, password) the environment variable `var` binds to `url`: its lines are
/// URLs with user-info (the `~/.git-credentials` format, `https://user:token@host`), and
/// the one whose scheme, host and port are `url`'s is taken. Never for a URL in clear
/// text to another machine. A repository under review names the URL, so a credential
/// reaches only the host its owner wrote next to it.
pub(crate) fn bound_credentials(
    system: &dyn terraci_db::system::System,
    var: &str,
    url: &str,
) -> Option<(String, String)> {
    bound_credentials_for(system, var, &Endpoint::parse(url).ok()?)
}

/// [`bound_credentials`] for an endpoint already parsed: each line of `var` is read with
/// the same parser, and its user-info only once that parser accepted the line.
pub(crate) fn bound_credentials_for(
    system: &dyn terraci_db::system::System,
    var: &str,
    wanted: &Endpoint,
) -> Option<(String, String)> {
    if !wanted.is_safe_for_credentials() {
        return None;
    }
    let store = system.env_var(var)?;
    store.lines().map(str::trim).find_map(|line| {
        let line = Endpoint::parse(line).ok()?;
        if !line.same_origin(wanted) {
            return None;
        }
        let (user, password) = line.user_info.as_deref()?.split_once(':')?;
        Some((percent_decode(user), percent_decode(password)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// Answers from a script and records what it was sent.
    struct Scripted {
        answers: Mutex<Vec<Result<Response, String>>>,
        sent: std::sync::Arc<Mutex<Vec<Request>>>,
    }

    fn response(status: u16, body: &str) -> Result<Response, String> {
        Ok(Response {
            status,
            headers: Vec::new(),
            body: body.to_owned(),
        })
    }

    fn client(
        answers: Vec<Result<Response, String>>,
    ) -> (Client, std::sync::Arc<Mutex<Vec<Request>>>) {
        let sent = std::sync::Arc::new(Mutex::new(Vec::new()));
        let transport = Scripted {
            answers: Mutex::new(answers.into_iter().rev().collect()),
            sent: sent.clone(),
        };
        let client = Client::new(Box::new(transport), RetryPolicy::default())
            .without_waiting()
            .redacting("glpat-SECRET");
        (client, sent)
    }

    impl Transport for Scripted {
        fn send(&self, request: &Request) -> Result<Response, String> {
            self.sent.lock().expect("lock").push(request.clone());
            self.answers
                .lock()
                .expect("lock")
                .pop()
                .unwrap_or_else(|| Err("no more answers".into()))
        }
    }

    fn get() -> Request {
        Request::new(
            Method::Get,
            "https://gitlab.example.com/api/v4/projects/7/notes?per_page=100",
        )
        .header("PRIVATE-TOKEN", "glpat-SECRET")
    }

    #[test]
    fn server_errors_and_rate_limits_are_retried_until_success() {
        let (client, sent) = client(vec![
            response(500, "{}"),
            response(429, "{}"),
            response(200, "[]"),
        ]);
        let got = client.send(&get()).expect("third attempt succeeds");
        assert_eq!(got.body, "[]");
        assert_eq!(sent.lock().expect("lock").len(), 3);
    }

    #[test]
    fn retries_are_bounded_and_the_error_names_method_endpoint_and_status() {
        let (client, sent) = client(vec![response(503, "{}"); 10]);
        let err = client.send(&get()).expect_err("always 503");
        assert_eq!(sent.lock().expect("lock").len(), 4);
        assert_eq!(err.status, Some(503));
        assert_eq!(
            err.to_string(),
            "GET https://gitlab.example.com/api/v4/projects/7/notes: 503 Service Unavailable (after 4 attempts)"
        );
    }

    #[test]
    fn a_client_error_is_not_retried_and_never_shows_the_token() {
        let (client, sent) = client(vec![response(
            401,
            r#"{"message":"401 Unauthorized: token glpat-SECRET is revoked"}"#,
        )]);
        let err = client.send(&get()).expect_err("401");
        assert_eq!(sent.lock().expect("lock").len(), 1);
        let text = err.to_string();
        assert!(!text.contains("glpat-SECRET"), "{text}");
        assert_eq!(
            text,
            "GET https://gitlab.example.com/api/v4/projects/7/notes: 401 Unauthorized (the server says: 401 Unauthorized: token [redacted] is revoked)"
        );
    }

    #[test]
    fn no_response_is_retried_then_reported() {
        let (client, _) = client(vec![Err("connection refused".into()); 4]);
        let err = client.send(&get()).expect_err("refused");
        assert_eq!(err.status, None);
        assert!(
            err.what.starts_with("no response: connection refused"),
            "{err}"
        );
    }

    #[test]
    fn a_request_sent_once_is_not_repeated_after_the_server_may_have_acted() {
        for answer in [response(502, "{}"), Err("connection reset".into())] {
            let (client, sent) = client(vec![answer, response(201, "{}")]);
            client.send(&get().once()).expect_err("not sent again");
            assert_eq!(sent.lock().expect("lock").len(), 1);
        }
        // A rate limit means nothing was done: that is retried.
        let (client, sent) = client(vec![response(429, "{}"), response(201, "{}")]);
        client.send(&get().once()).expect("second attempt");
        assert_eq!(sent.lock().expect("lock").len(), 2);
    }
}

#[cfg(test)]
mod credential_tests {
    #[test]
    fn credentials_are_left_out_of_shown_urls() {
        assert_eq!(
            super::redact_url("https://user:tok@git.example.com/org/p.git"),
            "https://git.example.com/org/p.git"
        );
        assert_eq!(
            super::redact_url("oci://ghcr.io/org/p:v1"),
            "oci://ghcr.io/org/p:v1"
        );
        assert_eq!(super::redact_url("https://h/a@b"), "https://h/a@b");
    }

    #[test]
    fn credentials_are_bound_to_the_host_their_owner_named() {
        let system = terraci_db::system::MemorySystem::default();
        let var = "TERRACI_POLICY_GIT_CREDENTIALS";
        system.set_env(
            var,
            "https://other:x@git.other.example\nhttps://oauth2:t%40k@Git.Example.com/ignored\nhttp://u:p@127.0.0.1:5000\n",
        );
        let found = super::bound_credentials(&system, var, "https://git.example.com/org/p.git");
        assert_eq!(found, Some(("oauth2".to_owned(), "t@k".to_owned())));
        let local = super::bound_credentials(&system, var, "http://127.0.0.1:5000/v2/");
        assert_eq!(local, Some(("u".to_owned(), "p".to_owned())));
        // Another host, another port, or clear text to another machine: nothing.
        for url in [
            "https://evil.example/org/p.git",
            "https://git.example.com:8443/org/p.git",
            "http://git.example.com/org/p.git",
            "https://git.example.com.evil.example/p.git",
            "http://127.0.0.1:5001/v2/",
        ] {
            assert!(
                super::bound_credentials(&system, var, url).is_none(),
                "{url}"
            );
        }
    }

    #[test]
    fn plain_http_is_only_for_this_machine() {
        assert!(super::is_local_http("http://127.0.0.1:8080/p.git"));
        assert!(super::is_local_http("http://u:p@localhost/p.git"));
        assert!(super::is_local_http("http://[::1]:80/p.git"));
        assert!(!super::is_local_http("https://127.0.0.1/p.git"));
        assert!(!super::is_local_http("http://git.example.com/p.git"));
        assert!(!super::is_local_http("http://127.0.0.1.evil.example/p.git"));
        assert!(!super::is_local_http("http://localhost@evil.example/p.git"));
        assert!(!super::is_local_http(
            "http://evil.example?@127.0.0.1/p.git"
        ));
        assert!(!super::is_local_http("http://evil.example#@localhost/"));
        assert!(!super::is_local_http("http://evil.example\\@localhost/"));
    }

    /// The transport (ureq's `http::Uri`) ends the authority at `?` or `#`: a credential
    /// written for the host after the `@` never goes to the host before it.
    #[test]
    fn an_ambiguous_authority_binds_no_credentials() {
        let system = terraci_db::system::MemorySystem::default();
        let var = "TERRACI_POLICY_GIT_CREDENTIALS";
        system.set_env(var, "https://u:tok@git.example.com\n");
        for url in [
            "https://attacker.invalid?@git.example.com/p.git",
            "https://attacker.invalid#@git.example.com/",
            "https://attacker.invalid\\@git.example.com/p.git",
            "https://attacker.invalid/?@git.example.com/p.git",
        ] {
            assert!(
                super::bound_credentials(&system, var, url).is_none(),
                "{url}"
            );
        }
        assert_eq!(
            super::Endpoint::parse("https://attacker.invalid?@git.example.com/p.git"),
            Err(super::UrlError::Ambiguous)
        );
        // A credential line is read by the same parser: an ambiguous one binds nothing.
        system.set_env(var, "https://u:tok@git.example.com?@attacker.invalid\n");
        for url in [
            "https://git.example.com/p.git",
            "https://attacker.invalid/p.git",
        ] {
            assert!(
                super::bound_credentials(&system, var, url).is_none(),
                "{url}"
            );
        }
        let e = super::Endpoint::parse("HTTPS://U:p@Git.Example.COM/p.git").expect("a URL");
        assert_eq!(
            (e.scheme.as_str(), e.host.as_str(), e.port),
            ("https", "git.example.com", Some(443))
        );
        let e = super::Endpoint::parse("http://[::1]:8080/").expect("a URL");
        assert!(e.is_local_http());
        assert_eq!(e.port, Some(8080));
    }
}
