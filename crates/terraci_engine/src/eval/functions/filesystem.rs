//! Filesystem functions. Paths are Go `path/filepath` strings on a Unix host; relative
//! paths resolve against the module directory; reads go through the [`EvalHost`].
//!
//! [`EvalHost`]: crate::eval::EvalHost

use crate::eval::Object;

use camino::Utf8PathBuf;

use super::Args;
use crate::eval::evaluator::{Evaluator, R};
use crate::eval::value::Value;
use crate::eval::{limits, EvalContext};

/// Go's `filepath.Clean`.
pub(crate) fn clean(path: &str) -> String {
    if path.is_empty() {
        return ".".into();
    }
    let rooted = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in path.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let joined = parts.join("/");
    match (rooted, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".into(),
        (false, false) => joined,
    }
}

fn resolve(ctx: &EvalContext<'_>, path: &str) -> Utf8PathBuf {
    if path.starts_with('/') {
        Utf8PathBuf::from(clean(path))
    } else {
        Utf8PathBuf::from(clean(&format!("{}/{path}", ctx.module_dir)))
    }
}

pub(super) fn abspath(ev: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let p = a.string(0)?;
    Ok(Value::String(resolve(ev.ctx, &p).into_string()))
}

pub(super) fn basename(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let p = a.string(0)?;
    if p.is_empty() {
        return Ok(Value::String(".".into()));
    }
    let trimmed = p.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok(Value::String("/".into()));
    }
    let base = trimmed.rsplit('/').next().unwrap_or(trimmed);
    Ok(Value::String(base.into()))
}

pub(super) fn dirname(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let p = a.string(0)?;
    let dir = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    Ok(Value::String(clean(dir)))
}

pub(super) fn pathexpand(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let p = a.string(0)?;
    if p == "~" || p.starts_with("~/") {
        return Ok(Value::unknown(format!(
            "`pathexpand(\"{p}\")` depends on the home directory of whoever runs Terraform"
        )));
    }
    Ok(Value::String(p))
}

fn read(ev: &Evaluator<'_, '_>, a: &Args, path: &str) -> R<Result<String, String>> {
    let full = resolve(ev.ctx, path);
    match ev.ctx.host.read_file(&full) {
        Ok(text) if text.len() > limits::MAX_STRING => {
            Err(a.limit(format!("the file `{path}` is larger than 16 MiB")))
        }
        Ok(text) => Ok(Ok(text)),
        Err(reason) => Ok(Err(reason)),
    }
}

pub(super) fn file(ev: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let p = a.string(0)?;
    Ok(match read(ev, a, &p)? {
        Ok(text) => Value::String(text),
        Err(reason) => Value::unknown(reason),
    })
}

pub(super) fn fileexists(ev: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let p = a.string(0)?;
    Ok(match ev.ctx.host.file_exists(&resolve(ev.ctx, &p)) {
        Ok(exists) => Value::Bool(exists),
        Err(reason) => Value::unknown(reason),
    })
}

/// How many matching steps one file may take against a `fileset` pattern.
const GLOB_STEPS: u32 = 1_000_000;

/// Terraform's `fileset` glob: `*` and `?` within a path segment, `**` across segments,
/// `[...]` classes and `{a,b}` alternatives. `None` when the match took more than
/// [`GLOB_STEPS`] steps: no answer, which the caller reports (a "no match" there would
/// silently drop a file, and with it perhaps a dependency).
pub(crate) fn glob_match(pattern: &str, path: &str) -> Option<bool> {
    let p: Vec<char> = pattern.chars().collect();
    let s: Vec<char> = path.chars().collect();
    let mut budget = GLOB_STEPS;
    let matched = glob_at(&p, &s, &mut budget);
    (matched || budget > 0).then_some(matched)
}

fn glob_at(p: &[char], s: &[char], budget: &mut u32) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    match p.first() {
        None => s.is_empty(),
        Some('*') if p.get(1) == Some(&'*') => {
            let mut rest = &p[2..];
            // `**/` also matches zero directories.
            if rest.first() == Some(&'/') {
                if glob_at(&rest[1..], s, budget) {
                    return true;
                }
                rest = &rest[1..];
                return (0..s.len())
                    .filter(|&i| s[i] == '/')
                    .any(|i| glob_at(rest, &s[i + 1..], budget));
            }
            (0..=s.len()).any(|i| glob_at(rest, &s[i..], budget))
        }
        Some('*') => {
            let mut i = 0;
            loop {
                if glob_at(&p[1..], &s[i..], budget) {
                    return true;
                }
                if i >= s.len() || s[i] == '/' {
                    return false;
                }
                i += 1;
            }
        }
        Some('?') => !s.is_empty() && s[0] != '/' && glob_at(&p[1..], &s[1..], budget),
        Some('[') => {
            let Some(end) = p.iter().skip(1).position(|c| *c == ']').map(|e| e + 1) else {
                return false;
            };
            if s.is_empty() || s[0] == '/' {
                return false;
            }
            let class = &p[1..end];
            let (negate, class) = match class.first() {
                Some('^') | Some('!') => (true, &class[1..]),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == '-' {
                    hit |= class[i] <= s[0] && s[0] <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == s[0];
                    i += 1;
                }
            }
            hit != negate && glob_at(&p[end + 1..], &s[1..], budget)
        }
        Some('{') => {
            let Some(end) = p.iter().position(|c| *c == '}') else {
                return false;
            };
            let rest = &p[end + 1..];
            p[1..end].split(|c| *c == ',').any(|alt| {
                let mut joined = alt.to_vec();
                joined.extend_from_slice(rest);
                glob_at(&joined, s, budget)
            })
        }
        Some('\\') if p.len() > 1 => {
            !s.is_empty() && s[0] == p[1] && glob_at(&p[2..], &s[1..], budget)
        }
        Some(c) => !s.is_empty() && s[0] == *c && glob_at(&p[1..], &s[1..], budget),
    }
}

pub(super) fn fileset(ev: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let dir = a.string(0)?;
    let pattern = a.string(1)?;
    if pattern.len() > 4096 {
        return Err(a.limit("the pattern is too long"));
    }
    let root = resolve(ev.ctx, &dir);
    let files = ev.ctx.host.list_files(&root);
    ev.charge(a.node, files.len() as u64)?;
    let pattern = clean(&pattern);
    let mut matched = Vec::new();
    for f in files {
        match glob_match(&pattern, &f) {
            Some(true) => matched.push(Value::String(f)),
            Some(false) => {}
            None => {
                return Err(a.limit(format!(
                    "matching `{f}` against the pattern took more than {GLOB_STEPS} steps"
                )))
            }
        }
    }
    Ok(Value::set(matched))
}

pub(super) fn templatefile(ev: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let path = a.string(0)?;
    let vars = a.map(1)?;
    match read(ev, a, &path)? {
        Ok(text) => render_template(ev, a, &text, vars),
        Err(reason) => Ok(Value::unknown(reason)),
    }
}

/// Renders template text with only `vars` in scope, as `templatefile` and
/// `templatestring` do. Errors and unknowns are re-pointed at the call.
pub(crate) fn render_template(
    ev: &mut Evaluator<'_, '_>,
    a: &Args,
    text: &str,
    vars: Object,
) -> R<Value> {
    for key in vars.keys() {
        if !is_identifier(key) {
            return Err(a.arg_err(
                1,
                format!("invalid template variable name \"{key}\": must start with a letter, followed by zero or more letters, digits, and underscores"),
            ));
        }
    }
    let parts = crate::parse::parse_template_text(text)
        .map_err(|m| a.fail(format!("invalid template: {m}")))?;
    let ctx = EvalContext {
        scope: &vars,
        extra: &[],
        module_dir: ev.ctx.module_dir.clone(),
        host: ev.ctx.host,
    };
    let mut nested = ev.nested(&ctx);
    let result = nested.eval_template(a.node, &parts);
    let spent = ev.fuel().saturating_sub(nested.fuel());
    ev.charge(a.node, spent)?;
    match result {
        Ok(mut v) => {
            v.repoint_unknowns(a.node);
            Ok(v)
        }
        Err(mut e) => {
            e.node = a.node;
            e.message = format!("in the rendered template: {}", e.message);
            Err(e)
        }
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_alphabetic() || c == '_')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '-')
}
