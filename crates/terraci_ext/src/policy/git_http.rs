//! Git's smart HTTP protocol for git policy sources, over the network boundary's client
//! for a git fetch ([`crate::http::Purpose::GitFetch`]: its timeouts, proxy, TLS and
//! response bound).
//!
//! Input: the requests gix's HTTP transport makes (a `GET` of `info/refs`, then `POST`s
//! of `git-upload-pack`). Output: their status, header lines and body. gix writes a
//! `POST`'s body before it reads the answer, so a `POST` is sent when its answer is first
//! read, with the body gathered in memory (a fetch's request is the list of wanted
//! objects: small). A 401 is reported as gix expects (`PermissionDenied` with the server's
//! challenge) when the headers are read; any other status than 2xx is an error naming it.
//!
//! Credentials are never looked up here: the URL's own user-info (gix sends it as basic
//! authentication, and only over HTTPS) or the ones [`super::git`] binds to the host.

use std::io::{BufRead, BufReader, Cursor, Read, Write};
use std::sync::{Arc, Mutex};

use gix_transport::client::blocking_io::http::{GetResponse, Http, PostBodyDataKind, PostResponse};

/// The ureq-backed [`Http`] of gix's transport.
pub(super) struct UreqHttp {
    agent: ureq::Agent,
}

impl UreqHttp {
    pub(super) fn new() -> UreqHttp {
        UreqHttp {
            agent: crate::http::agent(crate::http::Purpose::GitFetch),
        }
    }
}

/// One exchange: the request until it is sent, then the answer's parts until the
/// readers take them.
enum Exchange {
    Pending {
        agent: ureq::Agent,
        url: String,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    Answered {
        headers: Option<Vec<u8>>,
        body: Option<ureq::BodyReader<'static>>,
    },
    Failed(std::io::ErrorKind, String),
    Taken,
}

type Shared = Arc<Mutex<Exchange>>;

fn lock(shared: &Shared) -> std::sync::MutexGuard<'_, Exchange> {
    // A poisoned lock means a reader panicked; the exchange's state is still whole.
    shared.lock().unwrap_or_else(|e| e.into_inner())
}

fn split_header(line: &str) -> Option<(String, String)> {
    let (name, value) = line.split_once(':')?;
    Some((name.trim().to_owned(), value.trim().to_owned()))
}

/// The answer of a sent request, as the exchange keeps it.
fn answered(
    shown: &str,
    result: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Exchange {
    let response = match result {
        Ok(r) => r,
        Err(e) => return Exchange::Failed(std::io::ErrorKind::Other, format!("{shown}: {e}")),
    };
    let status = response.status().as_u16();
    if status == 401 {
        return Exchange::Failed(
            std::io::ErrorKind::PermissionDenied,
            format!("{shown}: HTTP 401 (the repository needs credentials)"),
        );
    }
    if !(200..300).contains(&status) {
        return Exchange::Failed(std::io::ErrorKind::Other, format!("{shown}: HTTP {status}"));
    }
    let mut lines = Vec::new();
    for (name, value) in response.headers() {
        if let Ok(value) = value.to_str() {
            lines.extend_from_slice(format!("{}: {value}\n", name.as_str()).as_bytes());
        }
    }
    let body = response
        .into_body()
        .into_with_config()
        // A bigger body is an error (a policy repository's pack).
        .limit(
            crate::http::Purpose::GitFetch
                .max_body()
                .unwrap_or(u64::MAX),
        )
        .reader();
    Exchange::Answered {
        headers: Some(lines),
        body: Some(body),
    }
}

/// Sends the exchange's request if it is still pending.
fn settle(exchange: &mut Exchange) {
    if let Exchange::Pending { .. } = exchange {
        let Exchange::Pending {
            agent,
            url,
            headers,
            body,
        } = std::mem::replace(exchange, Exchange::Taken)
        else {
            return;
        };
        let shown = format!("POST {}", crate::http::redact_url(&url));
        let mut request = agent.post(&url);
        for (k, v) in &headers {
            request = request.header(k, v);
        }
        *exchange = answered(&shown, request.send(&body[..]));
    }
}

fn failure(kind: std::io::ErrorKind, message: &str) -> std::io::Error {
    if kind == std::io::ErrorKind::PermissionDenied {
        // gix recognises an authentication failure by this payload.
        std::io::Error::new(
            kind,
            gix_transport::client::AuthenticationRequired::default(),
        )
    } else {
        std::io::Error::new(kind, message.to_owned())
    }
}

/// The header lines of an answer, read once the request was sent.
pub(super) struct Headers {
    shared: Shared,
    lines: Option<Cursor<Vec<u8>>>,
}

impl Headers {
    fn ready(&mut self) -> std::io::Result<&mut Cursor<Vec<u8>>> {
        if self.lines.is_none() {
            let mut exchange = lock(&self.shared);
            settle(&mut exchange);
            let lines = match &mut *exchange {
                Exchange::Answered { headers, .. } => headers.take().unwrap_or_default(),
                Exchange::Failed(kind, message) => return Err(failure(*kind, message)),
                Exchange::Pending { .. } | Exchange::Taken => Vec::new(),
            };
            self.lines = Some(Cursor::new(lines));
        }
        Ok(self.lines.get_or_insert_with(Default::default))
    }
}

impl Read for Headers {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.ready()?.read(buf)
    }
}

impl BufRead for Headers {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.ready()?.fill_buf()
    }
    fn consume(&mut self, amt: usize) {
        if let Some(lines) = &mut self.lines {
            lines.consume(amt);
        }
    }
}

/// The body of an answer, read once the request was sent.
pub(super) struct Body {
    shared: Shared,
    reader: Option<BufReader<ureq::BodyReader<'static>>>,
    /// The body was taken, or the exchange failed and the failure was reported.
    done: bool,
}

impl Body {
    fn ready(&mut self) -> std::io::Result<Option<&mut BufReader<ureq::BodyReader<'static>>>> {
        if self.reader.is_none() && !self.done {
            let mut exchange = lock(&self.shared);
            settle(&mut exchange);
            match &mut *exchange {
                Exchange::Answered { body, .. } => {
                    self.reader = body.take().map(BufReader::new);
                    self.done = true;
                }
                Exchange::Failed(kind, message) => {
                    self.done = true;
                    return Err(failure(*kind, message));
                }
                Exchange::Pending { .. } | Exchange::Taken => self.done = true,
            }
        }
        Ok(self.reader.as_mut())
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.ready()? {
            Some(r) => r.read(buf),
            None => Ok(0),
        }
    }
}

impl BufRead for Body {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        match self.ready()? {
            Some(r) => r.fill_buf(),
            None => Ok(&[]),
        }
    }
    fn consume(&mut self, amt: usize) {
        if let Some(r) = &mut self.reader {
            r.consume(amt);
        }
    }
}

/// The body of a `POST`, gathered until the answer is read.
pub(super) struct PostBody {
    shared: Shared,
}

impl Write for PostBody {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut *lock(&self.shared) {
            Exchange::Pending { body, .. } => {
                body.extend_from_slice(buf);
                Ok(buf.len())
            }
            _ => Err(std::io::Error::other(
                "the request was already sent: no more body can be written",
            )),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn header_pairs(headers: impl IntoIterator<Item = impl AsRef<str>>) -> Vec<(String, String)> {
    headers
        .into_iter()
        .filter_map(|h| split_header(h.as_ref()))
        .collect()
}

fn readers(shared: &Shared) -> (Headers, Body) {
    (
        Headers {
            shared: shared.clone(),
            lines: None,
        },
        Body {
            shared: shared.clone(),
            reader: None,
            done: false,
        },
    )
}

impl Http for UreqHttp {
    type Headers = Headers;
    type ResponseBody = Body;
    type PostBody = PostBody;

    fn get(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
    ) -> gix_error::Result<GetResponse<Headers, Body>> {
        let shown = format!("GET {}", crate::http::redact_url(url));
        let mut request = self.agent.get(url);
        for (k, v) in header_pairs(headers) {
            request = request.header(k, v);
        }
        // A failure is read from the headers, as an I/O error: that is how gix's
        // transport tells a 401 (and asks for credentials) from other errors.
        let exchange = answered(&shown, request.call());
        let shared = Arc::new(Mutex::new(exchange));
        let (headers, body) = readers(&shared);
        Ok(GetResponse { headers, body })
    }

    fn post(
        &mut self,
        url: &str,
        _base_url: &str,
        headers: impl IntoIterator<Item = impl AsRef<str>>,
        _body: PostBodyDataKind,
    ) -> gix_error::Result<PostResponse<Headers, Body, PostBody>> {
        let shared = Arc::new(Mutex::new(Exchange::Pending {
            agent: self.agent.clone(),
            url: url.to_owned(),
            headers: header_pairs(headers),
            body: Vec::new(),
        }));
        let (headers, body) = readers(&shared);
        Ok(PostResponse {
            post_body: PostBody { shared },
            headers,
            body,
        })
    }

    fn configure(&mut self, _config: &dyn std::any::Any) -> gix_error::Result {
        // Proxies, timeouts and the like come from this client, not from git config.
        Ok(())
    }
}
