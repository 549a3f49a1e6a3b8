//! The HTTP boundary of policy sources: blocking GETs (ureq, rustls with webpki roots).
//!
//! Input: a URL and request headers. Output: status, headers and a body read up to a
//! size bound. Every network read of `policy pull` (OCI registries) goes through [`get`].

use std::time::Duration;

/// A response: status, headers (lower-case names) and body.
pub(super) struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// GETs `url` (redirects followed, credentials never sent to another host); the body is
/// read up to `max_bytes` (more is an error).
pub(super) fn get(url: &str, headers: &[(&str, &str)], max_bytes: u64) -> Result<Response, String> {
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

/// `http://` to this machine (a test server, a local mirror).
pub(super) fn is_local_http(url: &str) -> bool {
    let Some(rest) = url.strip_prefix("http://") else {
        return false;
    };
    let authority = rest.split('/').next().unwrap_or("");
    let host = authority.rsplit('@').next().unwrap_or("");
    let host = match host.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => host.split(':').next().unwrap_or(""),
    };
    matches!(host, "localhost" | "127.0.0.1" | "::1")
}

/// `scheme://host[:port]` of a URL, lower-cased, without user-info or path.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split('/').next()?;
    let host = authority.rsplit('@').next()?;
    (!host.is_empty()).then(|| {
        format!(
            "{}://{}",
            scheme.to_ascii_lowercase(),
            host.to_ascii_lowercase()
        )
    })
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
pub(super) fn bound_credentials(
    system: &dyn crate::system::System,
    var: &str,
    url: &str,
) -> Option<(String, String)> {
    if !(url.starts_with("https://") || is_local_http(url)) {
        return None;
    }
    let wanted = origin(url)?;
    let store = system.env_var(var)?;
    store.lines().map(str::trim).find_map(|line| {
        if origin(line)? != wanted {
            return None;
        }
        let rest = line.split_once("://")?.1;
        let authority = rest.split('/').next()?;
        let (user_info, _) = authority.rsplit_once('@')?;
        let (user, password) = user_info.split_once(':')?;
        Some((percent_decode(user), percent_decode(password)))
    })
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

    #[test]
    fn credentials_are_bound_to_the_host_their_owner_named() {
        let system = crate::system::MemorySystem::default();
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
    }
}
