//! `structure.pattern`: `{service}/{environment}/{region}/{module}`.

use std::fmt;

/// A validated directory pattern: the ordered segment names, and how roots are found
/// (`structure.discovery`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Pattern {
    segments: Vec<String>,
    discovery: super::Discovery,
}

/// Why a pattern is invalid (the caller names the pattern and where it came from).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PatternError {
    #[error("the pattern has no segments")]
    Empty,
    #[error("segment `{0}` must be a name in braces, e.g. `{{module}}`")]
    NotInBraces(String),
    #[error("segment `{0}` must be a name of letters, digits, `_` or `-`")]
    BadName(String),
    #[error("segment `{{{0}}}` appears more than once")]
    Repeated(String),
}

impl Pattern {
    pub fn parse(text: &str) -> Result<Pattern, PatternError> {
        let text = text.trim().trim_matches('/');
        if text.is_empty() {
            return Err(PatternError::Empty);
        }
        let mut segments: Vec<String> = Vec::new();
        for part in text.split('/') {
            let name = part
                .strip_prefix('{')
                .and_then(|p| p.strip_suffix('}'))
                .ok_or_else(|| PatternError::NotInBraces(part.to_owned()))?;
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(PatternError::BadName(part.to_owned()));
            }
            if segments.iter().any(|s| s == name) {
                return Err(PatternError::Repeated(name.to_owned()));
            }
            segments.push(name.to_owned());
        }
        Ok(Pattern {
            segments,
            discovery: super::Discovery::Pattern,
        })
    }

    /// `discovery: roots`: every non-library directory with Terraform files is a root,
    /// at any depth; its one component is `module`, the directory's name.
    pub fn roots() -> Pattern {
        Pattern {
            segments: vec!["module".to_owned()],
            discovery: super::Discovery::Roots,
        }
    }

    /// Roots are every non-library directory (`discovery: roots`), not the directories
    /// at the pattern's depth.
    pub fn is_roots(&self) -> bool {
        self.discovery == super::Discovery::Roots
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
        if self.is_roots() {
            return f.write_str("(discovery: roots) {module}");
        }
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
            Pattern::parse("").unwrap_err().to_string(),
            "the pattern has no segments"
        );
        assert!(Pattern::parse("{a}/{a}")
            .unwrap_err()
            .to_string()
            .contains("more than once"));
        assert!(Pattern::parse("{a}/b")
            .unwrap_err()
            .to_string()
            .contains("name in braces"));
        assert!(Pattern::parse("{a}/x{b}")
            .unwrap_err()
            .to_string()
            .contains("name in braces"));
    }
}
