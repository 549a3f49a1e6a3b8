//! `format` and `formatlist`: Go's `fmt` verbs as Terraform exposes them.

use super::encoding::json_string;
use super::Args;
use crate::eval::convert::{to_bool, to_number, to_string_primitive};
use crate::eval::evaluator::{push_limited, Evaluator, R};
use crate::eval::limits;
use crate::eval::value::{format_number, Value};

pub(super) fn format(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let fmt = a.string(0)?;
    // Terraform answers a null argument with an unknown result.
    if a.values[1..].iter().any(|v| matches!(v, Value::Null)) {
        return Ok(Value::unknown("`format` was given a null argument"));
    }
    let args: Vec<Value> = a.values[1..].to_vec();
    render(a, &fmt, &args).map(Value::String)
}

pub(super) fn formatlist(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let fmt = a.string(0)?;
    let mut len: Option<(usize, usize)> = None;
    for (i, v) in a.values.iter().enumerate().skip(1) {
        if let Value::List(items) | Value::Set(items) = v {
            match len {
                None => len = Some((items.len(), i)),
                Some((n, j)) if n != items.len() => {
                    return Err(a.arg_err(
                        i,
                        format!(
                            "argument {i} has length {}, which is inconsistent with argument {j} of length {n}",
                            items.len()
                        ),
                    ))
                }
                Some(_) => {}
            }
        }
    }
    let n = len.map_or(1, |(n, _)| n);
    let mut out = Vec::with_capacity(n);
    let mut total = 0usize;
    for k in 0..n {
        let row: Vec<Value> = a.values[1..]
            .iter()
            .map(|v| match v {
                Value::List(items) | Value::Set(items) => items[k].clone(),
                other => other.clone(),
            })
            .collect();
        let s = render(a, &fmt, &row)?;
        total += s.len();
        if total > limits::MAX_STRING {
            return Err(a.limit("the result is too large"));
        }
        out.push(Value::String(s));
    }
    Ok(Value::List(out))
}

struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    zero: bool,
    space: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

fn render(a: &Args, fmt: &str, args: &[Value]) -> R<String> {
    let mut out = String::new();
    let mut chars = fmt.char_indices().peekable();
    let mut arg_num = 0usize;
    let mut max_used = 0usize;
    while let Some((start, c)) = chars.next() {
        if c != '%' {
            push_limited(&mut out, c.encode_utf8(&mut [0; 4]), a.node)?;
            continue;
        }
        let mut spec = Spec {
            minus: false,
            plus: false,
            sharp: false,
            zero: false,
            space: false,
            width: None,
            precision: None,
        };
        loop {
            match chars.peek().map(|&(_, c)| c) {
                Some('-') => spec.minus = true,
                Some('+') => spec.plus = true,
                Some('#') => spec.sharp = true,
                Some('0') => spec.zero = true,
                Some(' ') => spec.space = true,
                _ => break,
            }
            chars.next();
        }
        let mut read_index = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| -> R<()> {
            if chars.peek().map(|&(_, c)| c) == Some('[') {
                chars.next();
                let mut n = 0usize;
                let mut ok = false;
                while let Some(&(_, d)) = chars.peek() {
                    chars.next();
                    if d == ']' {
                        break;
                    }
                    match d.to_digit(10) {
                        Some(v) => {
                            n = n.saturating_mul(10).saturating_add(v as usize);
                            ok = true;
                        }
                        None => {
                            ok = false;
                            break;
                        }
                    }
                }
                if !ok || n == 0 {
                    return Err(a.fail(format!("invalid argument index at {start}")));
                }
                arg_num = n - 1;
            }
            Ok(())
        };
        read_index(&mut chars)?;
        let digits = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>| {
            let mut n: Option<usize> = None;
            while let Some(&(_, d)) = chars.peek() {
                match d.to_digit(10) {
                    Some(v) => {
                        n = Some(n.unwrap_or(0).saturating_mul(10).saturating_add(v as usize));
                        chars.next();
                    }
                    None => break,
                }
            }
            n
        };
        spec.width = digits(&mut chars);
        if chars.peek().map(|&(_, c)| c) == Some('.') {
            chars.next();
            spec.precision = Some(digits(&mut chars).unwrap_or(0));
        }
        read_index(&mut chars)?;
        if spec.width.unwrap_or(0) > 4096 || spec.precision.unwrap_or(0) > 4096 {
            return Err(a.limit("the width or precision of a verb is too large"));
        }
        let Some((vi, verb)) = chars.next() else {
            return Err(a.fail(format!("invalid format string starting at offset {start}")));
        };
        let verb_text = &fmt[start..vi + verb.len_utf8()];
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(arg_num) else {
            return Err(a.fail(format!(
                "not enough arguments for \"{verb_text}\" at {start}: need index {} but have {} total",
                arg_num + 1,
                args.len()
            )));
        };
        arg_num += 1;
        max_used = max_used.max(arg_num);
        let unsupported = |why: &str| {
            a.fail(format!(
                "unsupported value for \"{verb_text}\" at {start}: {why}"
            ))
        };
        let text = match verb {
            'v' => {
                if spec.sharp {
                    json_string(arg).map_err(|m| unsupported(&m))?
                } else {
                    match arg {
                        Value::Null => "null".into(),
                        Value::List(_) | Value::Set(_) | Value::Map(_) => {
                            json_string(arg).map_err(|m| unsupported(&m))?
                        }
                        other => to_string_primitive(other).map_err(|m| unsupported(&m))?,
                    }
                }
            }
            't' => to_bool(arg)
                .map_err(|_| unsupported("bool required"))?
                .to_string(),
            's' | 'q' => {
                if matches!(arg, Value::Null) {
                    return Err(unsupported("null value cannot be formatted"));
                }
                let mut s = to_string_primitive(arg).map_err(|_| unsupported("string required"))?;
                if let Some(p) = spec.precision {
                    s = s.chars().take(p).collect();
                }
                if verb == 'q' {
                    go_quote(&s)
                } else {
                    s
                }
            }
            'b' | 'd' | 'o' | 'x' | 'X' => {
                let n = to_number(arg).map_err(|_| unsupported("number required"))?;
                if n.fract() != 0.0 || !n.is_finite() {
                    return Err(unsupported("an integer is required"));
                }
                let neg = n < 0.0;
                let m = n.abs();
                let digits = if m < 1.8e19 {
                    let u = m as u64;
                    match verb {
                        'b' => format!("{u:b}"),
                        'o' => format!("{u:o}"),
                        'x' => format!("{u:x}"),
                        'X' => format!("{u:X}"),
                        _ => u.to_string(),
                    }
                } else {
                    format_number(m)
                };
                let prefix = match (spec.sharp, verb) {
                    (true, 'o') => "0",
                    (true, 'x') => "0x",
                    (true, 'X') => "0X",
                    _ => "",
                };
                signed(&spec, neg, &format!("{prefix}{digits}"))
            }
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' => {
                let n = to_number(arg).map_err(|_| unsupported("number required"))?;
                let body = match verb {
                    'e' | 'E' => go_exp(n.abs(), spec.precision.unwrap_or(6)),
                    'f' | 'F' => format!("{:.*}", spec.precision.unwrap_or(6), n.abs()),
                    _ => go_general(n.abs(), spec.precision),
                };
                let body = if verb.is_uppercase() {
                    body.to_uppercase()
                } else {
                    body
                };
                signed(&spec, n.is_sign_negative() && n != 0.0, &body)
            }
            other => return Err(a.fail(format!("unsupported format verb %{other} at {start}"))),
        };
        // Terraform ignores the width of `%t`.
        let spec = Spec {
            width: if verb == 't' { None } else { spec.width },
            ..spec
        };
        let padded = pad(
            &spec,
            &text,
            matches!(
                verb,
                'b' | 'd' | 'o' | 'x' | 'X' | 'e' | 'E' | 'f' | 'F' | 'g' | 'G'
            ),
        );
        push_limited(&mut out, &padded, a.node)?;
    }
    if max_used < args.len() {
        return Err(a.arg_err(
            1,
            format!("too many arguments; only {max_used} used by format string"),
        ));
    }
    Ok(out)
}

fn signed(spec: &Spec, neg: bool, digits: &str) -> String {
    let sign = if neg {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    format!("{sign}{digits}")
}

fn pad(spec: &Spec, text: &str, numeric: bool) -> String {
    let width = spec.width.unwrap_or(0);
    let len = text.chars().count();
    if len >= width {
        return text.to_string();
    }
    let fill = width - len;
    if spec.minus {
        format!("{text}{}", " ".repeat(fill))
    } else if spec.zero && numeric {
        let (sign, rest) = match text.chars().next() {
            Some(c @ ('-' | '+' | ' ')) => (c.to_string(), &text[1..]),
            _ => (String::new(), text),
        };
        format!("{sign}{}{rest}", "0".repeat(fill))
    } else {
        format!("{}{text}", " ".repeat(fill))
    }
}

/// `%e`: mantissa with `prec` decimals and an exponent of at least two digits.
fn go_exp(n: f64, prec: usize) -> String {
    let s = format!("{n:.prec$e}");
    fix_exponent(&s)
}

fn fix_exponent(s: &str) -> String {
    match s.split_once('e') {
        Some((mant, exp)) => {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            format!("{mant}e{sign}{digits:0>2}")
        }
        None => s.to_string(),
    }
}

/// `%g`: the shortest representation, in exponent form for very small or large numbers.
fn go_general(n: f64, precision: Option<usize>) -> String {
    if n == 0.0 {
        return "0".into();
    }
    let sci = match precision {
        Some(p) => format!("{:.*e}", p.max(1) - 1, n),
        None => format!("{n:e}"),
    };
    let (mant, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mant = if mant.contains('.') {
        mant.trim_end_matches('0').trim_end_matches('.')
    } else {
        mant
    };
    let digits = mant.chars().filter(char::is_ascii_digit).count() as i32;
    let eprec = match precision {
        None => 6,
        Some(p) => {
            let p = p.max(1) as i32;
            if p > digits && digits > exp {
                digits
            } else {
                p
            }
        }
    };
    if exp < -4 || exp >= eprec {
        fix_exponent(&format!("{mant}e{exp}"))
    } else {
        let value: f64 = format!("{mant}e{exp}").parse().unwrap_or(n);
        format!("{value}")
    }
}

/// Go's `strconv.Quote`.
fn go_quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32))
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
