//! Terraform versions and version constraints, as `terraform` 1.11 reads a provider's
//! `version` argument.
//!
//! Input: the constraint text. Output: a [`Constraints`] that answers whether a
//! [`Version`] is allowed, or a [`ConstraintError`] naming what was expected.
//!
//! The rules, each checked against terraform 1.11.4 (the table in the tests is what it
//! answered for one provider version per filesystem mirror):
//! - a clause is `OP VERSION`, `OP` one of `=` (or none), `!=`, `>`, `>=`, `<`, `<=`, `~>`;
//!   clauses are joined by commas and all must hold;
//! - a version may leave out its minor and patch parts, which count as zero (`= 1.2`
//!   allows 1.2.0 only);
//! - `~> 1.2` allows 1.2.0 up to, not including, 2.0.0; `~> 1.2.3` up to 1.3.0; `~> 1`
//!   up to 2.0.0;
//! - a pre-release is allowed only by a clause that names it exactly (`= 2.0.0-beta1`):
//!   `>= 2.0.0-beta1` allows 2.0.0 and later but not the pre-release itself.

use std::cmp::Ordering;
use std::fmt;

/// A semantic version: `MAJOR.MINOR.PATCH[-PRE][+BUILD]`. The build metadata is kept for
/// display; terraform's `=` tells `1.2.3+build` from `1.2.3`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Version {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// The pre-release identifiers after `-`, empty for a release.
    pub pre: String,
    pub build: String,
}

impl Version {
    /// A whole version as registries list them (`5.80.0`, `2.0.0-beta1`).
    pub fn parse(text: &str) -> Option<Version> {
        let (version, parts) = parse_partial(text)?;
        (parts == 3).then_some(version)
    }

    pub fn is_prerelease(&self) -> bool {
        !self.pre.is_empty()
    }
}

/// Parses `1`, `1.2`, `1.2.3` with an optional pre-release and build; returns the version
/// (missing parts zero) and how many numeric parts were written.
fn parse_partial(text: &str) -> Option<(Version, usize)> {
    let (rest, build) = match text.split_once('+') {
        Some((r, b)) if valid_identifiers(b) => (r, b),
        Some(_) => return None,
        None => (text, ""),
    };
    let (core, pre) = match rest.split_once('-') {
        Some((c, p)) if valid_identifiers(p) => (c, p),
        Some(_) => return None,
        None => (rest, ""),
    };
    let mut numbers = [0u64; 3];
    let mut parts = 0;
    for piece in core.split('.') {
        if parts == 3 || piece.is_empty() || !piece.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        numbers[parts] = piece.parse().ok()?;
        parts += 1;
    }
    let version = Version {
        major: numbers[0],
        minor: numbers[1],
        patch: numbers[2],
        pre: pre.to_owned(),
        build: build.to_owned(),
    };
    Some((version, parts))
}

fn valid_identifiers(text: &str) -> bool {
    text.split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

impl Ord for Version {
    fn cmp(&self, other: &Self) -> Ordering {
        (self.major, self.minor, self.patch)
            .cmp(&(other.major, other.minor, other.patch))
            .then_with(|| compare_pre(&self.pre, &other.pre))
            // Terraform tells `1.2.3+a` from `1.2.3`; the order only needs to agree.
            .then_with(|| self.build.cmp(&other.build))
    }
}

impl PartialOrd for Version {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Semantic-versioning precedence of pre-releases: a release sorts after all of its
/// pre-releases; identifiers compare numerically when both are numbers, numbers before
/// words, and a shorter list first when one is a prefix of the other.
fn compare_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        (false, false) => {}
    }
    let mut left = a.split('.');
    let mut right = b.split('.');
    loop {
        match (left.next(), right.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(x), Some(y)) => {
                let order = match (x.parse::<u64>(), y.parse::<u64>()) {
                    (Ok(m), Ok(n)) => m.cmp(&n),
                    (Ok(_), Err(_)) => Ordering::Less,
                    (Err(_), Ok(_)) => Ordering::Greater,
                    (Err(_), Err(_)) => x.cmp(y),
                };
                if order != Ordering::Equal {
                    return order;
                }
            }
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?;
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        if !self.build.is_empty() {
            write!(f, "+{}", self.build)?;
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    /// `~>`: the rightmost written part may grow.
    Pessimistic,
}

impl Op {
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Pessimistic => "~>",
        }
    }
}

/// One `OP VERSION` of a constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    pub op: Op,
    /// Whether the operator was written (`= 1.2` rather than `1.2`).
    pub op_written: bool,
    pub version: Version,
    /// How many numeric parts were written (1 to 3).
    pub parts: usize,
}

impl Clause {
    fn allows(&self, v: &Version) -> bool {
        let c = &self.version;
        match self.op {
            Op::Eq => v == c,
            Op::Ne => v != c,
            Op::Gt => v > c,
            Op::Ge => v >= c,
            Op::Lt => v < c,
            Op::Le => v <= c,
            Op::Pessimistic => v >= c && *v < self.pessimistic_bound(),
        }
    }

    /// The first version `~>` no longer allows: the part before the rightmost written one
    /// grows (`~> 1.2.3` -> 1.3.0, `~> 1.2` and `~> 1` -> 2.0.0).
    fn pessimistic_bound(&self) -> Version {
        let c = &self.version;
        let (major, minor) = match self.parts {
            3 => (c.major, c.minor.saturating_add(1)),
            _ => (c.major.saturating_add(1), 0),
        };
        Version {
            major,
            minor,
            patch: 0,
            pre: String::new(),
            build: String::new(),
        }
    }

    /// This clause with `version` in place of its own, written with as many parts as it
    /// had (`~> 5.0` with 5.80.1 -> `~> 5.80`), so the operator means the same.
    pub fn with_version(&self, version: &Version) -> Clause {
        let mut v = version.clone();
        v.build.clear();
        if self.parts < 3 && !v.is_prerelease() {
            v.patch = 0;
            if self.parts < 2 {
                v.minor = 0;
            }
        }
        Clause {
            op: self.op,
            op_written: self.op_written,
            version: v,
            parts: if version.is_prerelease() {
                3
            } else {
                self.parts
            },
        }
    }
}

impl fmt::Display for Clause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op_written {
            write!(f, "{} ", self.op.as_str())?;
        }
        let v = &self.version;
        match self.parts {
            1 => write!(f, "{}", v.major),
            2 => write!(f, "{}.{}", v.major, v.minor),
            _ => write!(f, "{v}"),
        }
    }
}

/// A parsed `version` argument: every clause must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Constraints {
    pub clauses: Vec<Clause>,
}

/// Why a constraint is not one terraform reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version constraint {text:?}: {why}")]
pub struct ConstraintError {
    pub text: String,
    pub why: String,
}

impl Constraints {
    pub fn parse(text: &str) -> Result<Constraints, ConstraintError> {
        let error = |why: String| ConstraintError {
            text: text.to_owned(),
            why,
        };
        let mut clauses = Vec::new();
        for raw in text.split(',') {
            let clause = raw.trim();
            if clause.is_empty() {
                return Err(error(
                    "expected a version after each comma (`>= 1.0, < 2.0`)".to_owned(),
                ));
            }
            let (op, rest) = [
                ("~>", Op::Pessimistic),
                (">=", Op::Ge),
                ("<=", Op::Le),
                ("!=", Op::Ne),
                (">", Op::Gt),
                ("<", Op::Lt),
                ("=", Op::Eq),
            ]
            .iter()
            .find_map(|(s, op)| clause.strip_prefix(s).map(|rest| (Some(*op), rest)))
            .unwrap_or((None, clause));
            let number = rest.trim_start();
            let Some((version, parts)) = parse_partial(number) else {
                return Err(error(format!(
                    "{clause:?} is not an operator (=, !=, >, >=, <, <=, ~>) and a version like 1.2.3"
                )));
            };
            if op == Some(Op::Pessimistic) && version.is_prerelease() && parts < 3 {
                return Err(error(format!(
                    "{clause:?}: a pre-release after ~> needs all three version parts"
                )));
            }
            clauses.push(Clause {
                op: op.unwrap_or(Op::Eq),
                op_written: op.is_some(),
                version,
                parts,
            });
        }
        Ok(Constraints { clauses })
    }

    /// Whether terraform would select `version` under these constraints.
    pub fn allows(&self, version: &Version) -> bool {
        if version.is_prerelease()
            && !self
                .clauses
                .iter()
                .any(|c| c.op == Op::Eq && c.version == *version)
        {
            return false;
        }
        self.clauses.iter().all(|c| c.allows(version))
    }

    /// The first clause that rules `version` out.
    pub fn first_refusing(&self, version: &Version) -> Option<&Clause> {
        self.clauses.iter().find(|c| !c.allows(version))
    }
}

impl fmt::Display for Constraints {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, clause) in self.clauses.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{clause}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
