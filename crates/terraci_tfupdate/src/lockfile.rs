//! `.terraform.lock.hcl`: read, updated and written as terraform writes it.
//!
//! Input: the file's text. Output: a [`LockFile`] (providers by address) and, written back,
//! the same bytes `terraform providers lock` would write: the two header comments, one
//! `provider` block per address in byte order, `version`, `constraints` (when any) aligned
//! on `=`, and the hashes sorted, one a line with a trailing comma.

use std::collections::{BTreeMap, BTreeSet};

use hcl_edit::expr::Expression;
use hcl_edit::structure::{Body, Structure};

use crate::version::{Clause, Constraints, Op};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockedProvider {
    pub version: String,
    /// Terraform's text of every constraint that reaches the provider; empty for none.
    pub constraints: String,
    pub hashes: BTreeSet<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LockFile {
    /// By full address (`registry.terraform.io/hashicorp/aws`).
    pub providers: BTreeMap<String, LockedProvider>,
}

/// A lock file that is not one terraform wrote: the line and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct LockError {
    pub line: usize,
    pub what: String,
}

fn string_of(expr: &Expression) -> Option<String> {
    match expr {
        Expression::String(s) => Some(s.value().to_string()),
        _ => None,
    }
}

impl LockFile {
    pub fn parse(text: &str) -> Result<LockFile, LockError> {
        let body: Body = hcl_edit::parser::parse_body(text).map_err(|e| LockError {
            line: e.location().line(),
            what: e.message().to_string(),
        })?;
        let line_of = |span: Option<std::ops::Range<usize>>| {
            span.map_or(0, |s| {
                text[..s.start.min(text.len())].matches('\n').count() + 1
            })
        };
        let mut lock = LockFile::default();
        for structure in body.iter() {
            let Structure::Block(block) = structure else {
                continue;
            };
            if block.ident.as_str() != "provider" {
                continue;
            }
            let line = line_of(hcl_edit::Span::span(block));
            let [label] = block.labels.as_slice() else {
                return Err(LockError {
                    line,
                    what: "expected `provider \"<address>\" {`".to_owned(),
                });
            };
            let mut provider = LockedProvider::default();
            for attr in block.body.attributes() {
                let attr_line = line_of(hcl_edit::Span::span(attr));
                let expected = |what: &str| LockError {
                    line: attr_line,
                    what: format!("`{}` must be {what}", attr.key.as_str()),
                };
                match attr.key.as_str() {
                    "version" => {
                        provider.version =
                            string_of(&attr.value).ok_or_else(|| expected("a string"))?;
                    }
                    "constraints" => {
                        provider.constraints =
                            string_of(&attr.value).ok_or_else(|| expected("a string"))?;
                    }
                    "hashes" => {
                        let Expression::Array(items) = &attr.value else {
                            return Err(expected("a list of strings"));
                        };
                        for item in items.iter() {
                            provider.hashes.insert(
                                string_of(item).ok_or_else(|| expected("a list of strings"))?,
                            );
                        }
                    }
                    _ => {}
                }
            }
            lock.providers.insert(label.as_str().to_owned(), provider);
        }
        Ok(lock)
    }

    /// The file terraform would write for these providers.
    pub fn render(&self) -> String {
        let mut out = String::from(
            "# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n",
        );
        for (address, provider) in &self.providers {
            out.push_str(&format!("\nprovider \"{address}\" {{\n"));
            if provider.constraints.is_empty() {
                out.push_str(&format!("  version = \"{}\"\n", provider.version));
            } else {
                out.push_str(&format!("  version     = \"{}\"\n", provider.version));
                out.push_str(&format!("  constraints = \"{}\"\n", provider.constraints));
            }
            out.push_str("  hashes = [\n");
            for hash in &provider.hashes {
                out.push_str(&format!("    \"{hash}\",\n"));
            }
            out.push_str("  ]\n}\n");
        }
        out
    }
}

/// The `constraints` text terraform records for the constraints that reach a provider:
/// every clause once, by version and then operator; `~>` keeps at least two parts
/// (`~> 1` is `~> 1.0`), the others are written in full and `=` without its operator.
pub fn constraints_text(all: &[Constraints]) -> String {
    let rank = |op: Op| match op {
        Op::Gt => 0,
        Op::Ge => 1,
        Op::Eq => 2,
        Op::Pessimistic => 3,
        Op::Ne => 4,
        Op::Le => 5,
        Op::Lt => 6,
    };
    let mut clauses: Vec<(&Clause, String)> = all
        .iter()
        .flat_map(|c| c.clauses.iter())
        .map(|c| {
            let text = match c.op {
                Op::Pessimistic if c.parts == 3 => format!("~> {}", c.version),
                Op::Pessimistic => format!("~> {}.{}", c.version.major, c.version.minor),
                Op::Eq => c.version.to_string(),
                op => format!("{} {}", op.as_str(), c.version),
            };
            (c, text)
        })
        .collect();
    // `~> 1.2.0` before `~> 1.2`: the narrower bound first.
    clauses.sort_by(|(a, at), (b, bt)| {
        a.version
            .cmp(&b.version)
            .then(rank(a.op).cmp(&rank(b.op)))
            .then(b.parts.cmp(&a.parts))
            .then(at.cmp(bt))
    });
    clauses.dedup_by(|a, b| a.1 == b.1);
    clauses
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(list: &[&str]) -> String {
        let parsed: Vec<Constraints> = list
            .iter()
            .map(|c| Constraints::parse(c).expect("constraint"))
            .collect();
        constraints_text(&parsed)
    }

    /// What terraform 1.11.4 wrote as `constraints` for each `version` argument.
    #[test]
    fn constraints_are_recorded_as_terraform_records_them() {
        assert_eq!(text(&[">=1.2,<1.3"]), ">= 1.2.0, < 1.3.0");
        assert_eq!(text(&["=1.2.3"]), "1.2.3");
        assert_eq!(text(&["~> 1.2"]), "~> 1.2");
        assert_eq!(
            text(&[">= 1, != 1.2.9, ~> 1.2.0"]),
            ">= 1.0.0, ~> 1.2.0, != 1.2.9"
        );
        assert_eq!(
            text(&["< 1.3, ~> 1.2.0, > 1.2, != 1.2, >= 1.2, <= 1.2.9, 1.2.3"]),
            "> 1.2.0, >= 1.2.0, ~> 1.2.0, != 1.2.0, 1.2.3, <= 1.2.9, < 1.3.0"
        );
        assert_eq!(
            text(&["~> 1.2, ~> 1.2.0, ~> 1, ~>1.2, 1.2.3, 1.2.3"]),
            "~> 1.0, ~> 1.2.0, ~> 1.2, 1.2.3"
        );
        assert_eq!(
            text(&["<= 1.2.3, 1.2.3, >= 1.2.3, ~> 1.2.3"]),
            ">= 1.2.3, 1.2.3, ~> 1.2.3, <= 1.2.3"
        );
        assert_eq!(text(&["< 2, ~> 1"]), "~> 1.0, < 2.0.0");
    }

    #[test]
    fn a_lock_file_reads_back_to_the_same_bytes() {
        let text = "# This file is maintained automatically by \"terraform init\".\n# Manual edits may be lost in future updates.\n\nprovider \"registry.terraform.io/example/tiny\" {\n  version     = \"1.2.3\"\n  constraints = \"~> 1.2\"\n  hashes = [\n    \"h1:Out+kO8vLLgrzv34TpNQMq+FrWY0rrWsbF/6LV0J9sw=\",\n    \"zh:00\",\n  ]\n}\n\nprovider \"registry.terraform.io/hashicorp/null\" {\n  version = \"3.2.0\"\n  hashes = [\n    \"h1:x\",\n  ]\n}\n";
        let lock = LockFile::parse(text).expect("lock file");
        assert_eq!(lock.render(), text);
    }

    #[test]
    fn a_damaged_lock_file_names_the_line() {
        let err = LockFile::parse("provider \"a\" {\n  version = 3\n}\n").unwrap_err();
        assert_eq!(err.to_string(), "line 2: `version` must be a string");
    }
}
