//! The HTTP boundary of policy sources: blocking GETs (ureq, rustls with webpki roots).
//!
//! Input: a URL and request headers. Output: status, headers and a body read up to a
//! size bound. Every network read of `policy pull` (OCI registries) goes through [`get`].

use std::time::Duration;

/// A response: status, headers (lower-case names) and body.
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// GETs `url` (redirects followed, credentials never sent to another host); the body is
/// read up to `max_bytes` (more is an error).
pub fn get(url: &str, headers: &[(&str, &str)], max_bytes: u64) -> Result<Response, String> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(Duration::from_secs(120)))
        .user_agent(concat!("terraci/", env!("CARGO_PKG_VERSION")))
        .build()
        .into();
    let mut request = agent.get(url);
    for (k, v) in headers {
        request = request.header(*k, *v);
    }
    let shown = redact_url(url);
    let mut response = request.call().map_err(|e| format!("GET {shown}: {e}"))?;
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
        .map_err(|e| format!("GET {shown}: reading the body: {e}"))?;
    Ok(Response {
        status,
        headers,
        body,
    })
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

#[cfg(test)]
mod tests {
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
}
