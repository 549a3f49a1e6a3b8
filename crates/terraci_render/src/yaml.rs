//! A small YAML writer for generated pipelines.
//!
//! Input: a `serde_yaml::Value` tree whose mappings keep insertion order. Output: block
//! YAML with two-space indentation, sequences indented under their key, multi-line
//! strings as literal blocks, and a blank line between top-level entries. serde_yaml's own
//! writer is valid but hard to read (unindented sequences), so terraci writes its own.
//!
//! Strings are quoted whenever a YAML 1.1 reader (GitLab's Ruby parser) or a YAML 1.2
//! reader could read them as anything but the same string.

use serde_yaml::{Mapping, Value};

use terraci_db::escape::is_unsafe_char;

/// Formatting choices of one document.
pub(crate) struct Style<'a> {
    /// Keys written plain even though YAML 1.1 reads them as booleans (GitHub's `on`).
    pub(crate) plain_keys: &'a [&'a str],
    /// Top-level keys whose own entries are separated by a blank line (GitHub's `jobs`).
    pub(crate) spaced_children: &'a [&'a str],
}

/// Writes `doc` as a YAML document after `comment_lines` (each written as `# line`).
pub(crate) fn write_document(comment_lines: &[String], doc: &Mapping, style: &Style) -> String {
    let mut out = String::new();
    for line in comment_lines {
        out.push_str("# ");
        out.push_str(line);
        out.push('\n');
    }
    for (i, (key, value)) in doc.iter().enumerate() {
        if i > 0 || !comment_lines.is_empty() {
            out.push('\n');
        }
        let spaced = key
            .as_str()
            .is_some_and(|k| style.spaced_children.contains(&k));
        match value {
            Value::Mapping(children) if spaced && !children.is_empty() => {
                write_spaced(&mut out, key, style, |put| {
                    for (k, v) in children {
                        put(k, v);
                    }
                });
            }
            _ => write_entry(&mut out, 0, key, value, style),
        }
    }
    out
}

/// Appends to a document [`write_document`] wrote the spaced top-level entry `key`
/// (a key of `style.spaced_children`) whose children come one at a time, as
/// [`write_document`] writes such an entry, so a document of thousands of children is
/// never one value tree. `children` calls its argument with each child in order.
pub(crate) fn push_spaced_entry(
    out: &mut String,
    key: &str,
    style: &Style,
    children: impl FnOnce(&mut dyn FnMut(&Value, &Value)),
) {
    // Never the first entry of a document: the others come first.
    out.push('\n');
    write_spaced(out, &Value::String(key.to_owned()), style, children);
}

/// A top-level entry whose children are each after a blank line.
fn write_spaced(
    out: &mut String,
    key: &Value,
    style: &Style,
    children: impl FnOnce(&mut dyn FnMut(&Value, &Value)),
) {
    write_key(out, 0, key, style);
    out.push('\n');
    let mut first = true;
    children(&mut |k, v| {
        if !first {
            out.push('\n');
        }
        first = false;
        write_entry(out, 2, k, v, style);
    });
}

/// The entries of `m` at `indent`, as they appear inside a mapping written at
/// `indent - 2`: a fixed tail of keys shared by many jobs is written once this way.
pub(crate) fn write_entries_text(indent: usize, m: &Mapping, style: &Style) -> String {
    let mut out = String::new();
    for (k, v) in m {
        write_entry(&mut out, indent, k, v, style);
    }
    out
}

fn write_key(out: &mut String, indent: usize, key: &Value, style: &Style) {
    match key {
        Value::String(s) if style.plain_keys.contains(&s.as_str()) => {
            push_indent(out, indent);
            out.push_str(s);
            out.push(':');
        }
        Value::String(s) => write_str_key(out, indent, s),
        other => {
            push_indent(out, indent);
            push_scalar(out, other);
            out.push(':');
        }
    }
}

/// Writes `key:` at `indent`, the key quoted as [`write_document`] quotes a string key
/// that no [`Style`] writes plain. Renderers write their jobs' text directly with this
/// and the other `write_str` functions, without a `Value` tree per job.
pub(crate) fn write_str_key(out: &mut String, indent: usize, key: &str) {
    push_indent(out, indent);
    push_quoted(out, key);
    out.push(':');
}

/// Writes what follows `key:` or `-` at `indent` for the string `s`: a plain or quoted
/// scalar, or a literal block for multi-line text.
pub(crate) fn write_str(out: &mut String, indent: usize, s: &str) {
    if block_literal_ok(s) {
        let (indicator, body) = match s.strip_suffix('\n') {
            Some(body) => ("|", body),
            None => ("|-", s),
        };
        out.push(' ');
        out.push_str(indicator);
        out.push('\n');
        for line in body.split('\n') {
            if !line.is_empty() {
                push_indent(out, indent + 2);
                out.push_str(line);
            }
            out.push('\n');
        }
    } else {
        out.push(' ');
        push_quoted(out, s);
        out.push('\n');
    }
}

/// [`write_str`] for the string that `fill` appends: it is appended in place and only
/// copied out when it cannot stay plain, so a string made of pieces (`cd <module>`) is
/// not built first.
pub(crate) fn write_str_with(out: &mut String, indent: usize, fill: impl FnOnce(&mut String)) {
    out.push(' ');
    let start = out.len();
    fill(out);
    // Plain text is a single line, so it is never a literal block.
    if plain_ok(&out[start..]) {
        out.push('\n');
    } else {
        let s = out.split_off(start);
        out.pop();
        write_str(out, indent, &s);
    }
}

/// Writes each of `items` as a sequence entry `- item` at `indent`.
pub(crate) fn write_str_items<S: AsRef<str>>(out: &mut String, indent: usize, items: &[S]) {
    for item in items {
        push_indent(out, indent);
        out.push('-');
        write_str(out, indent, item.as_ref());
    }
}

fn write_entry(out: &mut String, indent: usize, key: &Value, value: &Value, style: &Style) {
    write_key(out, indent, key, style);
    write_value(out, indent, value, style);
}

/// Writes what follows `key:` or `- ` at `indent` (the indent of the key or dash).
fn write_value(out: &mut String, indent: usize, value: &Value, style: &Style) {
    match value {
        Value::Null => out.push('\n'),
        Value::Mapping(m) if m.is_empty() => out.push_str(" {}\n"),
        Value::Sequence(s) if s.is_empty() => out.push_str(" []\n"),
        Value::Mapping(m) => {
            out.push('\n');
            for (k, v) in m {
                write_entry(out, indent + 2, k, v, style);
            }
        }
        Value::Sequence(items) => {
            out.push('\n');
            write_sequence(out, indent + 2, items, style);
        }
        Value::String(s) => write_str(out, indent, s),
        Value::Tagged(t) => write_value(out, indent, &t.value, style),
        scalar => {
            out.push(' ');
            push_scalar(out, scalar);
            out.push('\n');
        }
    }
}

fn write_sequence(out: &mut String, indent: usize, items: &[Value], style: &Style) {
    for item in items {
        match item {
            Value::Mapping(m) if !m.is_empty() => {
                // Written as a mapping one level deeper, then its first indent becomes
                // the dash: `- key: value`.
                let mut inner = String::new();
                for (k, v) in m {
                    write_entry(&mut inner, indent + 2, k, v, style);
                }
                push_indent(out, indent);
                out.push_str("- ");
                out.push_str(&inner[indent + 2..]);
            }
            Value::Sequence(s) if !s.is_empty() => {
                let mut inner = String::new();
                write_sequence(&mut inner, indent + 2, s, style);
                push_indent(out, indent);
                out.push_str("- ");
                out.push_str(&inner[indent + 2..]);
            }
            Value::Null => {
                push_indent(out, indent);
                out.push_str("- null\n");
            }
            other => {
                push_indent(out, indent);
                out.push('-');
                write_value(out, indent, other, style);
            }
        }
    }
}

fn push_indent(out: &mut String, mut n: usize) {
    const SPACES: &str = "                                ";
    while n > 0 {
        let step = n.min(SPACES.len());
        out.push_str(&SPACES[..step]);
        n -= step;
    }
}

/// A scalar on one line: plain when unambiguous, else quoted.
fn push_scalar(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => push_quoted(out, s),
        Value::Tagged(t) => push_scalar(out, &t.value),
        // Collections never reach here: callers handle them.
        other => out.push_str(&serde_json::to_string(other).unwrap_or_default()),
    }
}

fn push_quoted(out: &mut String, s: &str) {
    if plain_ok(s) {
        out.push_str(s);
    } else if !s.chars().any(is_unsafe_char) {
        out.push('\'');
        out.push_str(&s.replace('\'', "''"));
        out.push('\'');
    } else {
        push_double_quoted(out, s);
    }
}

/// `s` double-quoted with every character a YAML 1.1 or 1.2 reader could take for a line
/// break or drop (controls, NEL, the line and paragraph separators, a byte order mark)
/// written as an escape. serde_json would leave NEL, LS and PS raw, and YAML 1.1 reads
/// them as line breaks, folding them into spaces inside quotes.
fn push_double_quoted(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
            out.push(c);
        } else if c == '\n' {
            out.push_str("\\n");
        } else if is_unsafe_char(c) {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out.push('"');
}

/// Whether `s` reads back as the same string when written plain, in YAML 1.1 and 1.2.
fn plain_ok(s: &str) -> bool {
    const SPECIAL: [&str; 16] = [
        "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~", ".inf", "-.inf", "+.inf",
        ".nan", "=", "<<",
    ];
    // Job names, paths and commands: a letter, then only characters no YAML reader gives
    // a meaning to, and no space at the end. Every check below passes for these but the
    // special words, so they are answered first, in one pass over the bytes: most
    // scalars of a large pipeline are of this kind.
    let bytes = s.as_bytes();
    if bytes.first().is_some_and(u8::is_ascii_alphabetic)
        && bytes.last() != Some(&b' ')
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./= ".contains(b))
    {
        return !SPECIAL.iter().any(|w| w.eq_ignore_ascii_case(s));
    }
    let Some(first) = s.chars().next() else {
        return false;
    };
    if s.trim() != s || s.chars().any(is_unsafe_char) {
        return false;
    }
    if "-?:,[]{}#&*!|>'\"%@`".contains(first) {
        return false;
    }
    if s.contains(": ") || s.contains(" #") || s.ends_with(':') {
        return false;
    }
    if SPECIAL.iter().any(|w| w.eq_ignore_ascii_case(s)) {
        return false;
    }
    // Anything number-like (`1.6`, `0x1F`, `1_000`, `12:30`, `1e3`) stays a string only
    // when quoted.
    if (first.is_ascii_digit() || "+-.".contains(first))
        && s.chars()
            .all(|c| c.is_ascii_hexdigit() || "xXoO._:+-".contains(c))
    {
        return false;
    }
    // The same strings recur in every job (`${TERRAFORM_BINARY} init`): ask the parser
    // once per distinct string.
    thread_local! {
        static READS_BACK: std::cell::RefCell<std::collections::HashMap<String, bool>> =
            std::cell::RefCell::default();
    }
    READS_BACK.with(|memo| {
        if let Some(&known) = memo.borrow().get(s) {
            return known;
        }
        let ok = matches!(serde_yaml::from_str::<Value>(s), Ok(Value::String(back)) if back == s);
        let mut memo = memo.borrow_mut();
        if memo.len() > 4096 {
            memo.clear();
        }
        memo.insert(s.to_owned(), ok);
        ok
    })
}

/// Multi-line text that a literal block (`|`/`|-`) reproduces exactly.
fn block_literal_ok(s: &str) -> bool {
    s.contains('\n')
        && !s.ends_with("\n\n")
        && !s.starts_with(' ')
        && !s.starts_with('\n')
        && !s.chars().any(|c| is_unsafe_char(c) && c != '\n')
        && s.split('\n').all(|line| line.trim_end() == line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(value: &Value) {
        let Value::Mapping(m) = value else {
            panic!("test documents are mappings")
        };
        let text = write_document(
            &[],
            m,
            &Style {
                plain_keys: &[],
                spaced_children: &[],
            },
        );
        let back: Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(&back, value, "{text}");
    }

    #[test]
    fn ambiguous_strings_are_quoted_and_read_back() {
        for s in [
            "1.6",
            "yes",
            "on",
            "No",
            "null",
            "~",
            "",
            " lead",
            "trail ",
            "a: b",
            "a #b",
            "#x",
            "-x",
            "- x",
            "0x1F",
            "1_000",
            "12:30",
            "1e3",
            ".inf",
            "'q'",
            "\"dq\"",
            "tab\there",
            "it's",
            "x:",
            "nel\u{85}x",
            "ls\u{2028}ps\u{2029}",
            "bom\u{feff}",
            "esc\u{1b}[1m",
            "nl\u{85}\nboth",
            "back\\slash\u{85}\"",
        ] {
            let mut m = Mapping::new();
            m.insert("k".into(), Value::String(s.into()));
            m.insert(
                "list".into(),
                Value::Sequence(vec![Value::String(s.into())]),
            );
            roundtrip(&Value::Mapping(m));
        }
    }

    #[test]
    fn plain_where_readable() {
        for s in [
            "hashicorp/terraform:1.6",
            "cd platform/stage/eu-central-1/vpc",
            "${TERRAFORM_BINARY} plan -out=plan.tfplan",
            "$CI_PIPELINE_SOURCE == \"merge_request_event\"",
            "1 day",
            "${{ github.ref == 'refs/heads/main' }}",
            "plan-stage-eu-central-1-vpc",
            "Yesterday",
        ] {
            assert!(plain_ok(s), "{s}");
        }
        // Words a YAML 1.1 reader takes for booleans or null, in any case, and spaces at
        // either end: quoted, although every character is one plain text may hold.
        for s in ["yes", "On", "N", "null", "NULL", "a b ", " a", ""] {
            assert!(!plain_ok(s), "{s:?}");
        }
    }

    #[test]
    fn line_breaks_of_yaml_1_1_are_escaped() {
        // A YAML 1.1 reader (GitLab's) takes NEL, LS and PS for line breaks: written raw
        // they end a plain or single-quoted scalar's line, or a comment.
        for s in ["a\u{85}b", "a\u{2028}b", "a\u{2029}b", "x\u{85}\ny\n"] {
            let mut out = String::new();
            write_str(&mut out, 0, s);
            assert!(!out.contains(['\u{85}', '\u{2028}', '\u{2029}']), "{out:?}");
            assert!(out.starts_with(" \""), "{out:?}");
        }
    }

    #[test]
    fn nested_structures_and_blocks_read_back() {
        let text = "a:\n  - x: 1\n    y: [1, [2, 3], {}]\n  - [p, q]\n  - run: \"l1\\nl2\\n\"\n  - \"l1\\nl2\"\n  - \"l1\\n\\n\"\nb: {}\nc: null\n";
        let value: Value = serde_yaml::from_str(text).unwrap();
        roundtrip(&value);
    }
}
