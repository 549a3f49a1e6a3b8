//! Encoding and hashing functions.

use std::collections::BTreeMap;

use super::hash;
use super::Args;
use crate::eval::evaluator::{Evaluator, R};
use crate::eval::limits;
use crate::eval::value::{format_number, Value};

/// Terraform's `jsonencode` text: sorted keys, Go's HTML-safe string escaping.
pub(crate) fn json_string(v: &Value) -> Result<String, String> {
    let mut out = String::new();
    json_write(v, &mut out)?;
    Ok(out)
}

fn json_write(v: &Value, out: &mut String) -> Result<(), String> {
    if out.len() > limits::MAX_STRING {
        return Err("the result is too large".into());
    }
    match v {
        Value::Null => out.push_str("null"),
        Value::Unknown(u) => return Err(u.reason.clone()),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => {
            if !n.is_finite() {
                return Err("cannot encode an infinite number in JSON".into());
            }
            out.push_str(&format_number(*n));
        }
        Value::String(s) => json_quote(s, out),
        Value::List(items) | Value::Set(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_write(item, out)?;
            }
            out.push(']');
        }
        Value::Map(map) => {
            out.push('{');
            for (i, (k, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                json_quote(k, out);
                out.push(':');
                json_write(item, out)?;
            }
            out.push('}');
        }
    }
    Ok(())
}

fn json_quote(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                out.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

pub(super) fn jsonencode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    json_string(&a.values[0])
        .map(Value::String)
        .map_err(|m| a.fail(m))
}

fn from_json(v: serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(b),
        serde_json::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::String(s),
        serde_json::Value::Array(items) => Value::List(items.into_iter().map(from_json).collect()),
        serde_json::Value::Object(map) => {
            Value::Map(map.into_iter().map(|(k, v)| (k, from_json(v))).collect())
        }
    }
}

pub(super) fn jsondecode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    // serde_json stops at 128 levels of nesting, which bounds the value's depth.
    let v: serde_json::Value = serde_json::from_str(&s).map_err(|e| a.fail(e))?;
    Ok(from_json(v))
}

pub(super) fn yamlencode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let v = &a.values[0];
    let mut out = String::new();
    match v {
        Value::Map(m) if !m.is_empty() => yaml_block(v, 0, &mut out).map_err(|m| a.fail(m))?,
        Value::List(l) | Value::Set(l) if !l.is_empty() => {
            yaml_block(v, 0, &mut out).map_err(|m| a.fail(m))?
        }
        Value::String(s) if yaml_literal_ok(s) => {
            yaml_literal(s, 0, &mut out);
        }
        Value::String(_) => {
            out.push_str(&yaml_scalar(v, 0).map_err(|m| a.fail(m))?);
            out.push('\n');
        }
        Value::Map(_) | Value::List(_) | Value::Set(_) => {
            out.push_str(&yaml_scalar(v, 0).map_err(|m| a.fail(m))?);
            out.push('\n');
        }
        _ => {
            out.push_str(&yaml_scalar(v, 0).map_err(|m| a.fail(m))?);
            out.push_str("\n...\n");
        }
    }
    Ok(Value::String(out))
}

fn yaml_literal_ok(s: &str) -> bool {
    s.contains('\n')
        && !s
            .chars()
            .any(|c| (c.is_control() && c != '\n') || c == '\u{feff}')
        && !s.starts_with(' ')
        && !s.lines().any(|l| l.ends_with(' '))
}

/// A literal block scalar (`|-`, `|`, `|+`) whose lines sit at `indent + 2`.
fn yaml_literal(s: &str, indent: usize, out: &mut String) {
    let trailing = s.len() - s.trim_end_matches('\n').len();
    out.push_str(match trailing {
        0 => "|-\n",
        1 => "|\n",
        _ => "|+\n",
    });
    let body = s.trim_end_matches('\n');
    for line in body.split('\n') {
        if !line.is_empty() {
            out.push_str(&" ".repeat(indent + 2));
            out.push_str(line);
        }
        out.push('\n');
    }
    for _ in 1..trailing {
        out.push('\n');
    }
}

fn yaml_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\0' => out.push_str("\\0"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{b}' => out.push_str("\\v"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            '\u{1b}' => out.push_str("\\e"),
            '\u{85}' => out.push_str("\\N"),
            '\u{a0}' => out.push_str("\\_"),
            '\u{2028}' => out.push_str("\\L"),
            '\u{2029}' => out.push_str("\\P"),
            c if c.is_control() || c == '\u{feff}' => out.push_str(&format!("\\x{:02X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn yaml_scalar(v: &Value, _indent: usize) -> Result<String, String> {
    Ok(match v {
        Value::Null => "null".into(),
        Value::Unknown(u) => return Err(u.reason.clone()),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) if n.is_nan() => ".nan".into(),
        Value::Number(n) if n.is_infinite() => {
            if *n > 0.0 {
                ".inf".into()
            } else {
                "-.inf".into()
            }
        }
        Value::Number(n) => format_number(*n),
        Value::String(s) => yaml_quote(s),
        Value::Map(_) => "{}".into(),
        Value::List(_) | Value::Set(_) => "[]".into(),
    })
}

/// Writes a non-empty map or list in block style. The caller has already written the
/// indentation of the first line when the block starts after `- `.
fn yaml_block(v: &Value, indent: usize, out: &mut String) -> Result<(), String> {
    if out.len() > limits::MAX_STRING {
        return Err("the result is too large".into());
    }
    let pad = " ".repeat(indent);
    let mut first = true;
    let line_start = |out: &mut String, first: &mut bool| {
        if !*first || !out.ends_with("- ") {
            out.push_str(&pad);
        }
        *first = false;
    };
    match v {
        Value::Map(map) => {
            for (k, item) in map {
                line_start(out, &mut first);
                out.push_str(&yaml_quote(k));
                out.push(':');
                yaml_value_after(item, indent, indent + 2, out)?;
            }
        }
        Value::List(items) | Value::Set(items) => {
            for item in items {
                line_start(out, &mut first);
                out.push_str("- ");
                match item {
                    Value::Map(m) if !m.is_empty() => yaml_block(item, indent + 2, out)?,
                    Value::List(l) | Value::Set(l) if !l.is_empty() => {
                        yaml_block(item, indent + 2, out)?
                    }
                    Value::String(s) if yaml_literal_ok(s) => yaml_literal(s, indent, out),
                    other => {
                        out.push_str(&yaml_scalar(other, indent)?);
                        out.push('\n');
                    }
                }
            }
        }
        other => {
            out.push_str(&yaml_scalar(other, indent)?);
            out.push('\n');
        }
    }
    Ok(())
}

/// The value of a mapping entry, after `"key":`. Nested lists stay at the key's indent
/// (as go-yaml writes them), nested maps move in by two.
fn yaml_value_after(
    item: &Value,
    indent: usize,
    nested: usize,
    out: &mut String,
) -> Result<(), String> {
    match item {
        Value::Map(m) if !m.is_empty() => {
            out.push('\n');
            yaml_block(item, nested, out)
        }
        Value::List(l) | Value::Set(l) if !l.is_empty() => {
            out.push('\n');
            yaml_block(item, indent, out)
        }
        Value::String(s) if yaml_literal_ok(s) => {
            out.push(' ');
            yaml_literal(s, indent, out);
            Ok(())
        }
        other => {
            out.push(' ');
            out.push_str(&yaml_scalar(other, indent)?);
            out.push('\n');
            Ok(())
        }
    }
}

fn from_yaml(v: serde_yaml::Value) -> Result<Value, String> {
    Ok(match v {
        serde_yaml::Value::Null => Value::Null,
        serde_yaml::Value::Bool(b) => Value::Bool(b),
        serde_yaml::Value::Number(n) => Value::Number(n.as_f64().unwrap_or(f64::NAN)),
        serde_yaml::Value::String(s) => Value::String(s),
        serde_yaml::Value::Sequence(items) => {
            Value::List(items.into_iter().map(from_yaml).collect::<Result<_, _>>()?)
        }
        serde_yaml::Value::Mapping(map) => {
            let mut out = BTreeMap::new();
            for (k, v) in map {
                let key = match from_yaml(k)? {
                    Value::String(s) => s,
                    Value::Number(n) => format_number(n),
                    Value::Bool(b) => b.to_string(),
                    Value::Null => "null".into(),
                    _ => return Err("only scalar keys are supported".into()),
                };
                out.insert(key, from_yaml(v)?);
            }
            Value::Map(out.into())
        }
        serde_yaml::Value::Tagged(t) => from_yaml(t.value)?,
    })
}

pub(super) fn yamldecode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    if s.trim().is_empty() {
        return Err(a.fail("on line 1, column 1: missing start of document"));
    }
    // serde_yaml bounds recursion (128 levels) and rejects alias expansion bombs.
    let v: serde_yaml::Value = serde_yaml::from_str(&s).map_err(|e| a.fail(e))?;
    from_yaml(v).map_err(|m| a.fail(m))
}

pub(super) fn base64encode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(hash::base64_encode(a.string(0)?.as_bytes())))
}

pub(super) fn base64decode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let bytes = hash::base64_decode(&s)
        .ok_or_else(|| a.fail(format!("failed to decode base64 data \"{s}\"")))?;
    String::from_utf8(bytes)
        .map(Value::String)
        .map_err(|_| a.fail("the result of decoding the provided string is not valid UTF-8"))
}

/// Go's `url.QueryEscape`.
pub(super) fn urlencode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    Ok(Value::String(out))
}

/// Go's `encoding/csv` reader with default settings: RFC 4180 quoting, blank lines
/// skipped, every record as wide as the header.
fn parse_csv(s: &str) -> Result<Vec<Vec<String>>, String> {
    let mut records = Vec::new();
    let mut chars = s.chars().peekable();
    let mut line = 1;
    while chars.peek().is_some() {
        let record_line = line;
        // Skip blank lines.
        if matches!(chars.peek(), Some('\n')) {
            chars.next();
            line += 1;
            continue;
        }
        if matches!(chars.peek(), Some('\r')) {
            chars.next();
            if matches!(chars.peek(), Some('\n')) {
                chars.next();
            }
            line += 1;
            continue;
        }
        let mut record = Vec::new();
        loop {
            let mut field = String::new();
            if matches!(chars.peek(), Some('"')) {
                chars.next();
                loop {
                    match chars.next() {
                        None => {
                            return Err(format!(
                                "CSV parse error on line {record_line}: extraneous or missing \" in quoted-field"
                            ))
                        }
                        Some('"') => match chars.peek() {
                            Some('"') => {
                                chars.next();
                                field.push('"');
                            }
                            Some(',') | Some('\n') | Some('\r') | None => break,
                            Some(_) => {
                                return Err(format!(
                                    "CSV parse error on line {line}: extraneous or missing \" in quoted-field"
                                ))
                            }
                        },
                        Some('\r') if matches!(chars.peek(), Some('\n')) => {}
                        Some(c) => {
                            if c == '\n' {
                                line += 1;
                            }
                            field.push(c);
                        }
                    }
                }
            } else {
                while let Some(&c) = chars.peek() {
                    if c == ',' || c == '\n' || c == '\r' {
                        break;
                    }
                    if c == '"' {
                        return Err(format!(
                            "CSV parse error on line {line}: bare \" in non-quoted-field"
                        ));
                    }
                    field.push(c);
                    chars.next();
                }
            }
            record.push(field);
            match chars.next() {
                Some(',') => continue,
                Some('\r') => {
                    if matches!(chars.peek(), Some('\n')) {
                        chars.next();
                    }
                    line += 1;
                    break;
                }
                Some('\n') => {
                    line += 1;
                    break;
                }
                _ => break,
            }
        }
        if let Some(first) = records.first() {
            let first: &Vec<String> = first;
            if first.len() != record.len() {
                return Err(format!(
                    "CSV parse error on line {record_line}: wrong number of fields"
                ));
            }
        }
        records.push(record);
    }
    Ok(records)
}

pub(super) fn csvdecode(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let mut records = parse_csv(&s).map_err(|m| a.fail(m))?.into_iter();
    let Some(header) = records.next() else {
        return Err(a.fail("missing header line"));
    };
    Ok(Value::List(
        records
            .map(|r| {
                Value::Map(
                    header
                        .iter()
                        .cloned()
                        .zip(r.into_iter().map(Value::String))
                        .collect(),
                )
            })
            .collect(),
    ))
}

pub(super) fn md5(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(hash::hex(&hash::md5(
        a.string(0)?.as_bytes(),
    ))))
}

pub(super) fn sha1(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(hash::hex(&hash::sha1(
        a.string(0)?.as_bytes(),
    ))))
}

pub(super) fn sha256(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(hash::hex(&hash::sha256(
        a.string(0)?.as_bytes(),
    ))))
}

pub(super) fn sha512(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(hash::hex(&hash::sha512(
        a.string(0)?.as_bytes(),
    ))))
}

pub(super) fn base64sha256(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(hash::base64_encode(&hash::sha256(
        a.string(0)?.as_bytes(),
    ))))
}

pub(super) fn base64sha512(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::String(hash::base64_encode(&hash::sha512(
        a.string(0)?.as_bytes(),
    ))))
}
