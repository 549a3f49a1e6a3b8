//! The network boundary: the only code that speaks HTTP (GitLab's and GitHub's REST APIs
//! for `terraci summary`).
//!
//! Input: a [`Request`] (method, URL, headers, JSON body). Output: the [`Response`] or an
//! [`HttpError`] that names the method, the endpoint and the status. A [`Transport`] sends
//! one request; [`Client`] adds the retries (429 and 5xx, connection failures) with a
//! bounded backoff, and keeps secrets out of every message: the token travels in a header,
//! never in a URL, and any text that could echo it is redacted. Unit tests give `Client` a
//! fake transport; [`UreqTransport`] is the real one (rustls, timeouts).

use std::time::Duration;

/// HTTP methods the APIs need.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
    Put,
    Patch,
    Delete,
}

impl Method {
    pub fn as_str(self) -> &'static str {
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
    pub method: Method,
    pub url: String,
    pub headers: Vec<(String, String)>,
    /// A JSON document (`Content-Type: application/json` is added).
    pub body: Option<String>,
    /// Not sent again once the server may have acted on it (see [`Request::once`]).
    pub once: bool,
}

impl Request {
    pub fn new(method: Method, url: impl Into<String>) -> Request {
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
    pub fn once(mut self) -> Request {
        self.once = true;
        self
    }

    pub fn header(mut self, name: &str, value: &str) -> Request {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn json(mut self, body: &serde_json::Value) -> Request {
        self.body = Some(body.to_string());
        self
    }

    /// The URL without its query: what messages name.
    pub fn endpoint(&self) -> &str {
        self.url.split('?').next().unwrap_or(&self.url)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    pub status: u16,
    /// Names lower-case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
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
    pub method: &'static str,
    pub endpoint: String,
    /// `None` when no response came.
    pub status: Option<u16>,
    /// `401 Unauthorized (the server says: ...)`, or why no response came.
    pub what: String,
}

/// How often and how long to retry.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts in all, the first included.
    pub attempts: u32,
    /// Wait before the second attempt; doubled for each further one.
    pub first_delay: Duration,
    /// The longest wait, also for a server's `Retry-After`.
    pub max_delay: Duration,
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
    pub fn send(&self, request: &Request) -> Result<Response, HttpError> {
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
                let line: String = crate::escape::printable(m.trim())
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

/// The real transport: `ureq` with rustls, a 10 s connect and 60 s overall timeout, no
/// redirects, responses up to 16 MiB, proxies from the usual environment variables.
pub struct UreqTransport {
    agent: ureq::Agent,
}

impl Default for UreqTransport {
    fn default() -> Self {
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            // A redirect would carry the token header to wherever it points.
            .max_redirects(0)
            .timeout_connect(Some(Duration::from_secs(10)))
            .timeout_global(Some(Duration::from_secs(60)))
            .user_agent(concat!("terraci/", env!("CARGO_PKG_VERSION")))
            .build();
        UreqTransport {
            agent: config.into(),
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
            .limit(16 << 20)
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
