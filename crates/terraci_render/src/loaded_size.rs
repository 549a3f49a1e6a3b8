//! GitLab's measure of a CI configuration, estimated from the text terraci writes.
//!
//! Input: a GitLab pipeline as the YAML writer wrote it (block mappings and sequences,
//! `{}` and `[]`, plain or quoted one-line scalars, literal blocks, `!reference [...]`).
//! Output: an upper bound of the size GitLab checks against `max_yaml_size_bytes`.
//!
//! GitLab loads the document with Psych before it resolves `extends`, `!reference` or
//! `include`, and sums Ruby's `ObjectSpace.memsize_of` over the loaded value and, depth
//! first, every array element and every hash key and value (`Gitlab::Utils::DeepSize`).
//! That memory, on Ruby 3.1 (measured with `tools/gitlab-yaml-size/deep_size.rb`):
//! - a string: 40 bytes up to 23 bytes long, else 41 + its length;
//! - `true`, `false`, `nil`, small integers: nothing (they are not objects);
//! - an array: 40 bytes up to 3 elements, else 40 + 8 per slot of its capacity, which
//!   grows by half as Psych appends (bounded here by 1.6 slots per element);
//! - a hash: 40 empty, 168 up to 8 entries, else a table of `E` entries (the power of
//!   two at or above the count, at least 32) of 24 bytes each and `2E` bins of 1, 2 or 4
//!   bytes (up to 128, 32768 and beyond), plus 96;
//! - a `!reference`: one object of 40 bytes; what it names is not counted.
//!
//! A quoted scalar is charged its length with the quotes, never less than the string it
//! loads to, so the estimate is at or above GitLab's figure for terraci's own output.

use rayon::prelude::*;

use super::{PipelineText, RenderError};
use terraci_db::config::Config;
use terraci_db::diagnostic::{Code, Diagnostic};
use terraci_engine::ir::JobPlan;

/// GitLab's default `max_yaml_size_bytes` (2 MiB).
pub const DEFAULT_MAX_YAML_SIZE_BYTES: u64 = 2 * 1024 * 1024;

/// What GitLab on Ruby 3.2 or later may count over the Ruby 3.1 figure
/// [`gitlab_loaded_size`] follows (about 6%, by a model of the newer object layout not
/// checked against such a Ruby), in percent: the check adds it, so that a pipeline GitLab
/// would refuse is not written.
pub(crate) const NEWER_RUBY_HEADROOM_PERCENT: u64 = 7;

/// Checks a rendered GitLab pipeline against `extensions.gitlab.max_yaml_size_bytes`
/// (by [`gitlab_loaded_size`]) and `max_jobs`: over either it is an error, unless
/// `force`, then a `pipeline-limit` warning. GitLab would refuse the pipeline when it
/// runs; said at `generate`, it is not found on a merge request.
pub fn check_gitlab_limits(
    text: &PipelineText,
    plan: &JobPlan,
    config: &Config,
    force: bool,
) -> Result<Vec<Diagnostic>, RenderError> {
    check_gitlab_sizes(&LoadedSizes::of(text), plan, config, force)
}

/// [`check_gitlab_limits`] of a pipeline whose pieces were measured already.
pub fn check_gitlab_sizes(
    sizes: &LoadedSizes,
    plan: &JobPlan,
    config: &Config,
    force: bool,
) -> Result<Vec<Diagnostic>, RenderError> {
    let gitlab = config.extensions.gitlab.clone().unwrap_or_default();
    let mut over = Vec::new();
    let limit = gitlab
        .max_yaml_size_bytes
        .unwrap_or(DEFAULT_MAX_YAML_SIZE_BYTES);
    let size = sizes.total();
    let counted = counted_size(size);
    if counted > limit {
        over.push(RenderError::GitlabTooLarge {
            size,
            counted,
            limit,
        });
    }
    let jobs = (plan.jobs.len() + plan.contributed.len()).max(1);
    if let Some(max) = gitlab.max_jobs.filter(|max| jobs > *max) {
        over.push(RenderError::GitlabTooManyJobs { jobs, limit: max });
    }
    if !force {
        return over.into_iter().next().map_or(Ok(Vec::new()), Err);
    }
    Ok(over
        .into_iter()
        .map(|error| {
            Diagnostic::warning(
                Code::PipelineLimit,
                format!("{error}; written anyway (--force): GitLab will refuse to run it"),
            )
        })
        .collect())
}

/// [`gitlab_loaded_size`] of a [`PipelineText`] piece by piece: each piece's part (the
/// memory below the top-level hash, and its top-level entries), so that a document made
/// of some of the pieces is measured without reading them again.
#[derive(Debug, Clone)]
pub struct LoadedSizes {
    pub(crate) head: (u64, usize),
    /// In the order of the text's jobs.
    pub(crate) jobs: Vec<(u64, usize)>,
}

impl LoadedSizes {
    pub fn of(text: &PipelineText) -> LoadedSizes {
        LoadedSizes {
            head: Scan::run(&text.head),
            jobs: text
                .jobs
                .par_iter()
                .with_min_len(64)
                .map(|piece| Scan::run(piece))
                .collect(),
        }
    }

    /// The whole document's figure, as [`gitlab_loaded_size`] gives it.
    pub fn total(&self) -> u64 {
        let (bytes, entries) = self
            .jobs
            .iter()
            .fold(self.head, |(b, e), (pb, pe)| (b + pb, e + pe));
        bytes + hash_size(entries)
    }
}

/// An upper bound of the size GitLab's loader measures for the document made of `pieces`
/// (the document's text in order, each piece starting at a top-level entry).
pub fn gitlab_loaded_size<S: AsRef<str> + Sync>(pieces: &[S]) -> u64 {
    let (bytes, entries) = pieces
        .par_iter()
        .with_min_len(64)
        .map(|piece| Scan::run(piece.as_ref()))
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    bytes + hash_size(entries)
}

/// What [`check_gitlab_limits`] compares with the limit for an estimate of `size`: the
/// estimate with the headroom kept for newer Rubies.
pub(crate) fn counted_size(size: u64) -> u64 {
    size + (size * NEWER_RUBY_HEADROOM_PERCENT).div_ceil(100)
}

/// The parts of [`gitlab_loaded_size`] for one piece: the memory of everything below the
/// document's top-level hash, and how many top-level entries the piece adds to that hash
/// (whose own memory is [`root_hash_size`] of all entries).
pub(crate) fn piece_size(piece: &str) -> (u64, usize) {
    Scan::run(piece)
}

/// The memory of a document's top-level hash of `entries` entries.
pub(crate) fn root_hash_size(entries: usize) -> u64 {
    hash_size(entries)
}

/// A string's memory.
fn string_size(len: usize) -> u64 {
    if len <= 23 {
        40
    } else {
        41 + len as u64
    }
}

/// A hash's memory (without its keys and values).
fn hash_size(entries: usize) -> u64 {
    match entries {
        0 => 40,
        1..=8 => 168,
        n => {
            let table = n.next_power_of_two().max(32) as u64;
            let bin = if table <= 128 {
                1
            } else if table <= 32_768 {
                2
            } else {
                4
            };
            96 + 24 * table + 2 * table * bin
        }
    }
}

/// An array's memory (without its elements).
pub(crate) fn array_size(items: usize) -> u64 {
    if items <= 3 {
        40
    } else {
        40 + 8 * ((8 * items as u64).div_ceil(5) + 8).max(20)
    }
}

/// A plain or quoted scalar's memory: nothing for booleans, null and small integers.
fn scalar_size(text: &[u8]) -> u64 {
    match text.first() {
        Some(b'0'..=b'9' | b'-') if text.len() <= 18 => {
            let digits = text.strip_prefix(b"-").unwrap_or(text);
            if !digits.is_empty() && digits.iter().all(u8::is_ascii_digit) {
                return 0;
            }
        }
        Some(b't' | b'f' | b'n' | b'~') if matches!(text, b"true" | b"false" | b"null" | b"~") => {
            return 0;
        }
        Some(b'!') if text.starts_with(b"!reference") => return 40,
        _ => {}
    }
    string_size(text.len())
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Hash,
    Array,
}

/// An open collection: the column of its entries, its kind and how many it has.
struct Open {
    column: usize,
    kind: Kind,
    count: usize,
}

/// One piece's scan: the memory of everything below the document's top-level hash, and
/// how many top-level entries the piece has.
#[derive(Default)]
struct Scan {
    bytes: u64,
    root_entries: usize,
    open: Vec<Open>,
}

impl Scan {
    fn run(text: &str) -> (u64, usize) {
        let text = text.as_bytes();
        let mut scan = Scan::default();
        // Inside a literal block: the column its lines are deeper than, and its length.
        let mut block: Option<(usize, usize)> = None;
        let mut start = 0;
        while start < text.len() {
            let end = memchr::memchr(b'\n', &text[start..]).map_or(text.len(), |i| start + i);
            let line = &text[start..end];
            start = end + 1;
            let column = line.iter().take_while(|b| **b == b' ').count();
            let content = &line[column..];
            if let Some((owner, len)) = &mut block {
                if content.is_empty() || column > *owner {
                    *len += line.len().saturating_sub(*owner + 1) + 1;
                    continue;
                }
                scan.bytes += string_size(*len);
                block = None;
            }
            if content.is_empty() || (column == 0 && content[0] == b'#') {
                continue;
            }
            if let Some(owner) = scan.line(column, content) {
                block = Some((owner, 0));
            }
        }
        if let Some((_, len)) = block {
            scan.bytes += string_size(len);
        }
        scan.close(0);
        (scan.bytes, scan.root_entries)
    }

    /// Closes the collections whose entries are deeper than `column`.
    fn close(&mut self, column: usize) {
        while self.open.last().is_some_and(|open| open.column > column) {
            if let Some(open) = self.open.pop() {
                self.bytes += match open.kind {
                    Kind::Hash => hash_size(open.count),
                    Kind::Array => array_size(open.count),
                };
            }
        }
    }

    /// Counts one more entry of a `kind` collection at `column` (column 0: the top-level
    /// hash), opening it if it is new.
    fn entry(&mut self, column: usize, kind: Kind) {
        self.close(column);
        if column == 0 && kind == Kind::Hash {
            self.root_entries += 1;
            return;
        }
        match self.open.last_mut() {
            Some(open) if open.column == column && open.kind == kind => open.count += 1,
            _ => {
                // Another kind at the same column cannot follow in the writer's output;
                // counting both keeps the figure an upper bound.
                self.open.push(Open {
                    column,
                    kind,
                    count: 1,
                });
            }
        }
    }

    /// Counts the entries and scalars of one line; `Some(column)` when its value is a
    /// literal block whose lines are deeper than `column`.
    fn line(&mut self, mut column: usize, mut content: &[u8]) -> Option<usize> {
        // `- ` items, possibly nested (`- - x`), each one level deeper.
        let mut owner = column;
        while let Some(rest) = content
            .strip_prefix(b"- ")
            .or_else(|| (content == b"-").then_some(&[][..]))
        {
            self.entry(column, Kind::Array);
            owner = column;
            column += 2;
            content = rest;
        }
        let value = match key_end(content) {
            Some(end) => {
                self.entry(column, Kind::Hash);
                self.bytes += string_size(end);
                owner = column;
                let value = &content[end + 1..];
                &value[value.iter().take_while(|b| **b == b' ').count()..]
            }
            None => content,
        };
        match value {
            // A key whose value is on the next lines, or null.
            b"" => None,
            b"{}" => {
                self.bytes += hash_size(0);
                None
            }
            b"[]" => {
                self.bytes += array_size(0);
                None
            }
            [b'|', ..] => Some(owner),
            _ => {
                self.bytes += scalar_size(value);
                None
            }
        }
    }
}

/// Where the `:` after a mapping key on this line is, if the line starts with a key.
fn key_end(content: &[u8]) -> Option<usize> {
    let after = match content.first()? {
        b'"' => {
            let mut i = 1;
            loop {
                match content.get(i)? {
                    b'\\' => i += 2,
                    b'"' => break i + 1,
                    _ => i += 1,
                }
            }
        }
        b'\'' => {
            let mut i = 1;
            loop {
                match content.get(i)? {
                    b'\'' if content.get(i + 1) == Some(&b'\'') => i += 2,
                    b'\'' => break i + 1,
                    _ => i += 1,
                }
            }
        }
        // `!reference [...]` and flow collections are values, never keys here.
        b'!' | b'[' | b'{' => return None,
        // A plain key ends at the first `: ` or a `:` that ends the line; a plain value
        // has neither (the writer quotes one that has).
        _ => {
            let mut from = 0;
            return loop {
                let colon = from + memchr::memchr(b':', &content[from..])?;
                if matches!(content.get(colon + 1), None | Some(b' ')) {
                    break Some(colon);
                }
                from = colon + 1;
            };
        }
    };
    (content.get(after) == Some(&b':') && matches!(content.get(after + 1), None | Some(b' ')))
        .then_some(after)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Figures `tools/gitlab-yaml-size/deep_size.rb` printed (Ruby 3.1) for these
    /// documents; the estimate is at or above each, and close.
    #[test]
    fn estimate_is_at_or_above_what_ruby_measured() {
        let cases: [(&str, u64); 5] = [
            ("a: 1\n", 208),
            ("a: b\n", 248),
            (
                "a:\n  - x\n  - 'it''s'\n  - \"q\\\"\"\n  - yyyyyyyyyyyyyyyyyyyyyyyyyyyyyyyy\n",
                601,
            ),
            ("job:\n  script:\n    - |\n      l1\n      l2\n  extends: .t\n", 576),
            (
                "job:\n  script:\n    - cd m\n    - !reference [.t, script]\n  needs:\n    - job: a\n      artifacts: true\n",
                904,
            ),
        ];
        for (text, ruby) in cases {
            let estimate = gitlab_loaded_size(&[text]);
            assert!(estimate >= ruby, "{text:?}: {estimate} < {ruby}");
        }
    }

    #[test]
    fn collections_cost_what_ruby_gives_them() {
        for (n, ruby) in [(0, 40), (1, 168), (8, 168), (9, 928), (32, 928), (33, 1760)] {
            assert_eq!(hash_size(n), ruby, "hash of {n}");
        }
        for (n, ruby) in [
            (200, 7264),
            (1000, 28768),
            (20_000, 917_600),
            (40_000, 2_097_248),
        ] {
            assert_eq!(hash_size(n), ruby, "hash of {n}");
        }
        for (n, ruby) in [
            (3, 40),
            (4, 200),
            (20, 200),
            (21, 336),
            (129, 1584),
            (20_000, 201_816),
        ] {
            assert!(array_size(n) >= ruby, "array of {n}");
        }
    }
}
