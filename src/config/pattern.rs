//! `structure.pattern`: `{service}/{environment}/{region}/{module}`.

use std::fmt;

/// A validated directory pattern: the ordered segment names.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    segments: Vec<String>,
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let text = text.trim().trim_matches('/');
        if text.is_empty() {
            return Err("the pattern has no segments".into());
        }
        let mut segments: Vec<String> = Vec::new();
        for part in text.split('/') {
            let name = part
                .strip_prefix('{')
                .and_then(|p| p.strip_suffix('}'))
                .ok_or_else(|| {
                    format!("segment `{part}` must be a name in braces, e.g. `{{module}}`")
                })?;
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "segment `{part}` must be a name of letters, digits, `_` or `-`"
                ));
            }
            if segments.iter().any(|s| s == name) {
                return Err(format!("segment `{{{name}}}` appears more than once"));
            }
            segments.push(name.to_owned());
        }
        Ok(Pattern { segments })
    }

    pub fn segments(&self) -> &[String] {
        &self.segments
    }

    pub fn depth(&self) -> usize {
        self.segments.len()
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.segments.iter().map(|s| format!("{{{s}}}")).collect();
        f.write_str(&parts.join("/"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_default_pattern() {
        let p = Pattern::parse("{service}/{environment}/{region}/{module}").unwrap();
        assert_eq!(p.segments(), ["service", "environment", "region", "module"]);
    }

    #[test]
    fn rejects_bad_patterns() {
        assert_eq!(
            Pattern::parse("").unwrap_err(),
            "the pattern has no segments"
        );
        assert!(Pattern::parse("{a}/{a}")
            .unwrap_err()
            .contains("more than once"));
        assert!(Pattern::parse("{a}/b")
            .unwrap_err()
            .contains("name in braces"));
        assert!(Pattern::parse("{a}/x{b}")
            .unwrap_err()
            .contains("name in braces"));
    }
}
