//! String functions.

use crate::eval::Object;

use regex::{Regex, RegexBuilder};

use super::Args;
use crate::eval::evaluator::{push_limited, Evaluator, R};
use crate::eval::limits;
use crate::eval::value::Value;

/// Splits a string into user-perceived characters: a base character with its combining
/// marks, variation selectors, skin-tone modifiers and zero-width-joined sequences.
/// An approximation of Unicode grapheme clusters that covers what Terraform counts.
pub(crate) fn graphemes(s: &str) -> Vec<&str> {
    fn extends(c: char) -> bool {
        matches!(c as u32,
            0x0300..=0x036F | 0x0483..=0x0489 | 0x0591..=0x05BD | 0x0610..=0x061A
            | 0x064B..=0x065F | 0x0900..=0x0903 | 0x093A..=0x094F | 0x1AB0..=0x1AFF
            | 0x1DC0..=0x1DFF | 0x200C | 0x200D | 0x20D0..=0x20FF | 0xFE00..=0xFE0F
            | 0xFE20..=0xFE2F | 0x1F3FB..=0x1F3FF | 0xE0020..=0xE007F | 0xE0100..=0xE01EF)
    }
    fn regional(c: char) -> bool {
        (0x1F1E6..=0x1F1FF).contains(&(c as u32))
    }
    let mut out = Vec::new();
    let mut start = 0;
    let mut prev: Option<char> = None;
    let mut regional_run = 0;
    for (i, c) in s.char_indices() {
        let joins = match prev {
            None => false,
            Some('\r') => c == '\n',
            Some(p) => {
                extends(c)
                    || p == '\u{200D}'
                    || (regional(c) && regional(p) && regional_run % 2 == 1)
            }
        };
        regional_run = if regional(c) { regional_run + 1 } else { 0 };
        if !joins && i > start {
            out.push(&s[start..i]);
            start = i;
        }
        prev = Some(c);
    }
    if start < s.len() {
        out.push(&s[start..]);
    }
    out
}

pub(super) fn join(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    if a.len() < 2 {
        return Err(a.fail("at least one list is required"));
    }
    let sep = a.string(0)?;
    let mut out = String::new();
    let mut first = true;
    let mut idx = 0;
    for i in 1..a.len() {
        for item in a.seq(i)? {
            if matches!(item, Value::Null) {
                return Err(a.arg_err(
                    i,
                    format!("element {idx} is null; cannot concatenate null values"),
                ));
            }
            let s = crate::eval::convert::to_string_primitive(&item)
                .map_err(|_| a.arg_err(i, format!("element {idx}: string required")))?;
            if !first {
                push_limited(&mut out, &sep, a.node)?;
            }
            push_limited(&mut out, &s, a.node)?;
            first = false;
            idx += 1;
        }
    }
    Ok(Value::String(out))
}

pub(super) fn split(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let sep = a.string(0)?;
    let s = a.string(1)?;
    let parts: Vec<Value> = if sep.is_empty() {
        s.chars().map(|c| Value::String(c.to_string())).collect()
    } else {
        s.split(sep.as_str())
            .map(|p| Value::String(p.into()))
            .collect()
    };
    if parts.len() > limits::MAX_ELEMENTS {
        return Err(a.limit("too many elements"));
    }
    Ok(Value::List(parts))
}

/// Go's case mapping is rune by rune: a letter whose other case is longer than one
/// character (`ß` -> `SS`) stays as it is.
fn map_runes<I: Iterator<Item = char>>(s: &str, f: impl Fn(char) -> I) -> String {
    s.chars()
        .map(|c| {
            let mut mapped = f(c);
            match (mapped.next(), mapped.next()) {
                (Some(m), None) => m,
                _ => c,
            }
        })
        .collect()
}

pub(super) fn lower(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(map_runes(&a.string(0)?, char::to_lowercase)))
}

pub(super) fn upper(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(map_runes(&a.string(0)?, char::to_uppercase)))
}

/// Go's `strings.Title`: upper-case every letter that follows a separator.
pub(super) fn title(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    fn separator(c: char) -> bool {
        if c.is_ascii() {
            return !(c.is_ascii_alphanumeric() || c == '_');
        }
        if c.is_alphanumeric() {
            return false;
        }
        c.is_whitespace()
    }
    let s = a.string(0)?;
    let mut out = String::with_capacity(s.len());
    let mut prev = ' ';
    for c in s.chars() {
        if separator(prev) {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        prev = c;
    }
    Ok(Value::String(out))
}

pub(super) fn trim(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let cutset: Vec<char> = a.string(1)?.chars().collect();
    Ok(Value::String(s.trim_matches(cutset.as_slice()).into()))
}

pub(super) fn trimprefix(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let p = a.string(1)?;
    Ok(Value::String(
        s.strip_prefix(p.as_str()).unwrap_or(&s).into(),
    ))
}

pub(super) fn trimsuffix(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let p = a.string(1)?;
    Ok(Value::String(
        s.strip_suffix(p.as_str()).unwrap_or(&s).into(),
    ))
}

pub(super) fn trimspace(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(a.string(0)?.trim().into()))
}

pub(super) fn chomp(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(
        a.string(0)?.trim_end_matches(['\r', '\n']).into(),
    ))
}

/// Compiles a user pattern under size limits; RE2 syntax as in Terraform.
pub(super) fn compile(a: &Args, i: usize, pattern: &str) -> R<Regex> {
    if pattern.len() > limits::MAX_REGEX_LEN {
        return Err(a.limit("the regular expression is too long"));
    }
    RegexBuilder::new(pattern)
        .size_limit(limits::REGEX_SIZE)
        .dfa_size_limit(limits::REGEX_SIZE)
        .nest_limit(limits::MAX_DEPTH as u32)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(_) => a.limit("the regular expression is too large"),
            other => a.arg_err(i, format!("invalid regexp pattern: {other}")),
        })
}

pub(super) fn replace(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let substr = a.string(1)?;
    let repl = a.string(2)?;
    let mut out = String::new();
    if substr.len() > 1 && substr.starts_with('/') && substr.ends_with('/') {
        let re = compile(a, 1, &substr[1..substr.len() - 1])?;
        let mut last = 0;
        let mut buf = String::new();
        for caps in re.captures_iter(&s) {
            let m = caps.get(0).expect("group 0 always matches");
            push_limited(&mut out, &s[last..m.start()], a.node)?;
            buf.clear();
            caps.expand(&repl, &mut buf);
            push_limited(&mut out, &buf, a.node)?;
            last = m.end();
        }
        push_limited(&mut out, &s[last..], a.node)?;
    } else if substr.is_empty() {
        // Go inserts the replacement around every character.
        push_limited(&mut out, &repl, a.node)?;
        for c in s.chars() {
            push_limited(&mut out, c.encode_utf8(&mut [0; 4]), a.node)?;
            push_limited(&mut out, &repl, a.node)?;
        }
    } else {
        let mut last = 0;
        for (i, _) in s.match_indices(substr.as_str()) {
            push_limited(&mut out, &s[last..i], a.node)?;
            push_limited(&mut out, &repl, a.node)?;
            last = i + substr.len();
        }
        push_limited(&mut out, &s[last..], a.node)?;
    }
    Ok(Value::String(out))
}

pub(super) fn substr(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let mut offset = a.int(1)?;
    let length = a.int(2)?;
    let g = graphemes(&s);
    let total = g.len() as i64;
    if offset < 0 {
        offset = (offset + total).max(0);
    } else if length == 0 {
        return Ok(Value::String(String::new()));
    }
    let start = offset.min(total) as usize;
    let end = if length < 0 {
        g.len()
    } else {
        (offset.saturating_add(length)).min(total) as usize
    };
    Ok(Value::String(g[start..end.max(start)].concat()))
}

fn match_value(re: &Regex, caps: &regex::Captures<'_>) -> Value {
    let names: Vec<Option<&str>> = re.capture_names().skip(1).collect();
    let group = |i: usize| match caps.get(i) {
        Some(m) => Value::String(m.as_str().into()),
        None => Value::Null,
    };
    if names.is_empty() {
        return group(0);
    }
    if names.iter().all(Option::is_some) {
        let map: Object = names
            .iter()
            .enumerate()
            .map(|(i, n)| (n.expect("all named").to_string(), group(i + 1)))
            .collect();
        return Value::Map(map);
    }
    Value::List((1..=names.len()).map(group).collect())
}

fn compile_groups(a: &Args) -> R<Regex> {
    let re = compile(a, 0, &a.string(0)?)?;
    let names: Vec<_> = re.capture_names().skip(1).collect();
    if names.iter().any(Option::is_some) && names.iter().any(Option::is_none) {
        return Err(a.arg_err(
            0,
            "invalid regexp pattern: cannot mix both named and unnamed capture groups",
        ));
    }
    Ok(re)
}

pub(super) fn regex(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let re = compile_groups(a)?;
    let s = a.string(1)?;
    match re.captures(&s) {
        Some(caps) => Ok(match_value(&re, &caps)),
        None => Err(a.fail("pattern did not match any part of the given string")),
    }
}

pub(super) fn regexall(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let re = compile_groups(a)?;
    let s = a.string(1)?;
    let mut out = Vec::new();
    for caps in re.captures_iter(&s) {
        if out.len() >= limits::MAX_ELEMENTS {
            return Err(a.limit("too many matches"));
        }
        out.push(match_value(&re, &caps));
    }
    Ok(Value::List(out))
}

pub(super) fn startswith(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Bool(a.string(0)?.starts_with(&a.string(1)?)))
}

pub(super) fn endswith(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Bool(a.string(0)?.ends_with(&a.string(1)?)))
}

pub(super) fn strcontains(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Bool(a.string(0)?.contains(&a.string(1)?)))
}

pub(super) fn strrev(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    Ok(Value::String(graphemes(&s).into_iter().rev().collect()))
}

pub(super) fn indent(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let n = a.int(0)?;
    let s = a.string(1)?;
    if n < 0 || n as usize > limits::MAX_STRING {
        return Err(a.arg_err(0, "the number of spaces must be between 0 and 16777216"));
    }
    let pad = " ".repeat(n as usize);
    let mut out = String::new();
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            push_limited(&mut out, "\n", a.node)?;
            push_limited(&mut out, &pad, a.node)?;
        }
        push_limited(&mut out, line, a.node)?;
    }
    Ok(Value::String(out))
}

pub(super) fn templatestring(ev: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let template = a.string(0)?;
    let vars = a.map(1)?;
    crate::eval::functions::filesystem::render_template(ev, a, &template, vars)
}
