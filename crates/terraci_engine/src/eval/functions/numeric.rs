//! Numeric functions.

use super::Args;
use crate::eval::evaluator::{Evaluator, R};
use crate::eval::value::Value;

pub(super) fn abs(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Number(a.number(0)?.abs()))
}

pub(super) fn ceil(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Number(a.number(0)?.ceil()))
}

pub(super) fn floor(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Number(a.number(0)?.floor()))
}

fn numbers(a: &Args) -> R<Vec<f64>> {
    if a.len() == 0 {
        return Err(a.fail("must pass at least one number"));
    }
    (0..a.len()).map(|i| a.number(i)).collect()
}

pub(super) fn max(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Number(
        numbers(a)?.into_iter().fold(f64::NEG_INFINITY, f64::max),
    ))
}

pub(super) fn min(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Number(
        numbers(a)?.into_iter().fold(f64::INFINITY, f64::min),
    ))
}

pub(super) fn log(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let n = a.number(0)?;
    let base = a.number(1)?;
    let v = n.ln() / base.ln();
    if v.is_nan() {
        return Err(a.fail("the result is not a number"));
    }
    Ok(Value::Number(v))
}

pub(super) fn pow(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let v = a.number(0)?.powf(a.number(1)?);
    if v.is_nan() {
        return Err(a.fail("the result is not a number"));
    }
    Ok(Value::Number(v))
}

pub(super) fn parseint(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let s = a.string(0)?;
    let base = a.number(1)?;
    if base.fract() != 0.0 || !(2.0..=62.0).contains(&base) {
        return Err(a.arg_err(1, "base must be a whole number between 2 and 62 inclusive"));
    }
    let base = base as u32;
    let bad = || a.arg_err(0, format!("cannot parse \"{s}\" as a base {base} integer"));
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s.strip_prefix('+').unwrap_or(&s)),
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let mut n = 0f64;
    for c in digits.chars() {
        // Go's big.Int: 0-9, a-z, A-Z; letters are case-insensitive up to base 36.
        let d = match c {
            '0'..='9' => c as u32 - '0' as u32,
            'a'..='z' => c as u32 - 'a' as u32 + 10,
            'A'..='Z' if base <= 36 => c as u32 - 'A' as u32 + 10,
            'A'..='Z' => c as u32 - 'A' as u32 + 36,
            _ => return Err(bad()),
        };
        if d >= base {
            return Err(bad());
        }
        n = n * f64::from(base) + f64::from(d);
    }
    Ok(Value::Number(if neg { -n } else { n }))
}

pub(super) fn signum(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    // Terraform converts the argument to an integer first: `signum(2.5)` is an error.
    let n = a.int(0)? as f64;
    Ok(Value::Number(if n > 0.0 {
        1.0
    } else if n < 0.0 {
        -1.0
    } else {
        0.0
    }))
}
