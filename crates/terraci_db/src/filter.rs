//! Target filters (spec §2.3): globs on module ids and `--filter key=value`.
//!
//! Filters decide which modules get jobs; they never affect dependency resolution.

use std::collections::BTreeMap;

use indexmap::IndexMap;

/// Whether `glob` matches the whole `id`. Matched per `/`-separated segment: `*` any run
/// of non-`/` characters, `?` one character, `[abc]`, `[!abc]`/`[^abc]` (with `a-z`
/// ranges), and `**` as a whole segment matching zero or more segments.
pub fn glob_matches(glob: &str, id: &str) -> bool {
    let g: Vec<&str> = glob.trim_matches('/').split('/').collect();
    let s: Vec<&str> = id.split('/').collect();
    match_segments(&g, &s)
}

/// Segment by segment over the set of glob positions reached, so a glob with many `**`
/// costs (glob segments x id segments), never the exponential backtracking of trying
/// every split.
fn match_segments(g: &[&str], s: &[&str]) -> bool {
    // `**` matches zero segments: a position before one also reaches the next.
    let close = |reach: &mut Vec<bool>| {
        for i in 0..g.len() {
            if reach[i] && g[i] == "**" {
                reach[i + 1] = true;
            }
        }
    };
    let mut reach = vec![false; g.len() + 1];
    reach[0] = true;
    close(&mut reach);
    for seg in s {
        let mut next = vec![false; g.len() + 1];
        for i in (0..g.len()).filter(|&i| reach[i]) {
            if g[i] == "**" {
                next[i] = true;
            } else if match_segment(g[i], seg) {
                next[i + 1] = true;
            }
        }
        close(&mut next);
        if !next.contains(&true) {
            return false;
        }
        reach = next;
    }
    reach[g.len()]
}

pub fn match_segment(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    // Iterative wildcard matching with backtracking to the last `*`.
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ti));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                '[' => {
                    if let Some((matched, next)) = match_class(&p, pi, t[ti]) {
                        if matched {
                            pi = next;
                            ti += 1;
                            continue;
                        }
                    } else if t[ti] == '[' {
                        pi += 1;
                        ti += 1;
                        continue;
                    }
                }
                c if c == t[ti] => {
                    pi += 1;
                    ti += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, st)) => {
                pi = sp + 1;
                ti = st + 1;
                star = Some((sp, st + 1));
            }
            None => return false,
        }
    }
    while pi < p.len() && p[pi] == '*' {
        pi += 1;
    }
    pi == p.len()
}

/// `[...]` at `start`: (whether `c` matches, index after `]`), or `None` if unterminated.
fn match_class(p: &[char], start: usize, c: char) -> Option<(bool, usize)> {
    let mut i = start + 1;
    let negate = matches!(p.get(i), Some('!') | Some('^'));
    if negate {
        i += 1;
    }
    let mut matched = false;
    let mut first = true;
    while i < p.len() {
        if p[i] == ']' && !first {
            return Some((matched != negate, i + 1));
        }
        first = false;
        if i + 2 < p.len() && p[i + 1] == '-' && p[i + 2] != ']' {
            if p[i] <= c && c <= p[i + 2] {
                matched = true;
            }
            i += 3;
        } else {
            if p[i] == c {
                matched = true;
            }
            i += 1;
        }
    }
    None
}

/// The target selection of spec §2.3.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filters {
    pub exclude: Vec<String>,
    pub include: Vec<String>,
    /// Segment name -> allowed values (OR within a key, AND across keys).
    pub segments: BTreeMap<String, Vec<String>>,
}

/// A `--filter` value that cannot be used: a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FilterError {
    #[error("--filter `{0}`: expected key=value")]
    NotKeyValue(String),
    #[error("--filter `{raw}`: `{key}` is not a pattern segment; valid keys: {}", .segments.join(", "))]
    UnknownKey {
        raw: String,
        key: String,
        segments: Vec<String>,
    },
}

impl crate::exit::Coded for FilterError {
    fn exit_code(&self) -> u8 {
        crate::exit::USAGE
    }
}

impl Filters {
    /// Parses `key=value` filters; `key` must be a pattern segment name.
    pub fn add_segment_filter(
        &mut self,
        raw: &str,
        segments: &[String],
    ) -> Result<(), FilterError> {
        let (key, value) = raw
            .split_once('=')
            .ok_or_else(|| FilterError::NotKeyValue(raw.to_owned()))?;
        if !segments.iter().any(|s| s == key) && key != "submodule" {
            return Err(FilterError::UnknownKey {
                raw: raw.to_owned(),
                key: key.to_owned(),
                segments: segments.to_vec(),
            });
        }
        self.segments
            .entry(key.to_owned())
            .or_default()
            .push(value.to_owned());
        Ok(())
    }

    pub fn allows(&self, id: &str, components: &IndexMap<String, String>) -> bool {
        if self.exclude.iter().any(|g| glob_matches(g, id)) {
            return false;
        }
        if !self.include.is_empty() && !self.include.iter().any(|g| glob_matches(g, id)) {
            return false;
        }
        self.segments.iter().all(|(key, values)| {
            components
                .get(key)
                .is_some_and(|v| values.iter().any(|want| want == v))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn many_double_stars_match_in_bounded_time() {
        // Trying every split of the id between 3,000 `**` took tens of seconds.
        let glob = format!("{}x", "**/".repeat(3000));
        assert!(!glob_matches(&glob, "a/b/c/d/e/f/g/h/i/j/k/l"));
        assert!(glob_matches(&glob, "a/b/c/d/e/f/g/h/i/j/k/x"));
        assert!(glob_matches("a/**/**/c", "a/c"));
        assert!(glob_matches("a/**/b/**", "a/x/b"));
        assert!(!glob_matches("a/**/b", "a/x/c"));
    }

    #[test]
    fn globs_match_whole_ids_per_segment() {
        assert!(glob_matches(
            "platform/*/eu-*/vpc",
            "platform/stage/eu-central-1/vpc"
        ));
        assert!(!glob_matches(
            "platform/*",
            "platform/stage/eu-central-1/vpc"
        ));
        assert!(glob_matches(
            "platform/**",
            "platform/stage/eu-central-1/vpc"
        ));
        assert!(glob_matches(
            "platform/**",
            "platform/stage/eu-central-1/eks/addons"
        ));
        assert!(glob_matches("**/vpc", "platform/stage/eu-central-1/vpc"));
        assert!(glob_matches("*/stage/**", "a/stage/b/c"));
        assert!(!glob_matches("*/prod/**", "a/stage/b/c"));
        assert!(glob_matches("a/?/c", "a/b/c"));
        assert!(glob_matches("a/[bx]/c", "a/b/c"));
        assert!(!glob_matches("a/[!b]/c", "a/b/c"));
        assert!(glob_matches("a/[^x]/c", "a/b/c"));
        assert!(glob_matches("a/[a-c]*/c", "a/bee/c"));
        assert!(!glob_matches("*/test/*", "x/test/y/z"));
    }

    #[test]
    fn filter_keys_must_be_segments() {
        let mut f = Filters::default();
        let segs = vec!["service".to_owned(), "environment".to_owned()];
        let err = f.add_segment_filter("env=prod", &segs).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--filter `env=prod`: `env` is not a pattern segment; valid keys: service, environment"
        );
        f.add_segment_filter("environment=prod", &segs).unwrap();
        f.add_segment_filter("environment=stage", &segs).unwrap();
        let mut c = IndexMap::new();
        c.insert("environment".to_owned(), "stage".to_owned());
        assert!(f.allows("x", &c));
        c.insert("environment".to_owned(), "dev".to_owned());
        assert!(!f.allows("x", &c));
    }
}
