//! Terraform's automatic conversions between primitive types, the unification that
//! `tolist`/`toset`/`tomap` and friends perform, and type-constraint conversion for
//! `variable` blocks.

use crate::eval::Object;
use std::collections::BTreeMap;

use super::value::{format_number, Value};

/// Whether a string is a decimal number as Terraform reads one (`1`, `-1.5`, `1e3`).
fn is_decimal(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return false;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
            i += 1;
        }
        let exp_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == exp_start {
            return false;
        }
    }
    i == b.len()
}

pub(super) fn parse_number(s: &str) -> Option<f64> {
    let unsigned = s.strip_prefix(['+', '-']).unwrap_or(s);
    if unsigned.eq_ignore_ascii_case("inf") || unsigned.eq_ignore_ascii_case("infinity") {
        return Some(if s.starts_with('-') {
            f64::NEG_INFINITY
        } else {
            f64::INFINITY
        });
    }
    if is_decimal(s) {
        s.parse().ok()
    } else {
        None
    }
}

pub(super) fn to_number(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => Ok(*n),
        Value::String(s) => parse_number(s).ok_or_else(|| {
            format!("cannot convert \"{s}\" to number; given string must be a decimal representation of a number")
        }),
        other => Err(format!("number required, but have {}", other.type_name())),
    }
}

pub(super) fn to_bool(v: &Value) -> Result<bool, String> {
    match v {
        Value::Bool(b) => Ok(*b),
        Value::String(s) if s == "true" || s == "1" => Ok(true),
        Value::String(s) if s == "false" || s == "0" => Ok(false),
        Value::String(s) => Err(format!(
            "cannot convert \"{s}\" to bool; only the strings \"true\" or \"false\" are allowed"
        )),
        other => Err(format!("bool required, but have {}", other.type_name())),
    }
}

/// The string form of a primitive value, as templates and string parameters see it.
pub(super) fn to_string_primitive(v: &Value) -> Result<String, String> {
    match v {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(format_number(*n)),
        Value::Bool(b) => Ok(b.to_string()),
        other => Err(format!("string required, but have {}", other.type_name())),
    }
}

/// A primitive kind that values can be unified to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Prim {
    Bool,
    Number,
    String,
}

fn prim_of(v: &Value) -> Option<Prim> {
    match v {
        Value::Bool(_) => Some(Prim::Bool),
        Value::Number(_) => Some(Prim::Number),
        Value::String(_) => Some(Prim::String),
        _ => None,
    }
}

fn to_prim(v: Value, p: Prim) -> Result<Value, String> {
    match (p, v) {
        (_, Value::Null) => Ok(Value::Null),
        (_, u @ Value::Unknown(_)) => Ok(u),
        (Prim::String, v) => to_string_primitive(&v).map(Value::String),
        (Prim::Number, v) => to_number(&v).map(Value::Number),
        (Prim::Bool, v) => to_bool(&v).map(Value::Bool),
    }
}

/// Converts the elements of a tuple or object to one common type, as Terraform does when
/// a tuple becomes a list or set, or an object becomes a map: mixed primitives become
/// strings; bool and number without a string cannot be unified.
pub(super) fn unify(items: Vec<Value>) -> Result<Vec<Value>, String> {
    let mut kinds = items.iter().filter_map(prim_of).collect::<Vec<_>>();
    kinds.dedup();
    let mut seen = [false; 3];
    for k in &kinds {
        seen[*k as usize] = true;
    }
    let target = match seen {
        [false, false, false] => return Ok(items),
        [true, false, false] => Prim::Bool,
        [false, true, false] => Prim::Number,
        [_, _, true] => Prim::String,
        [true, true, false] => return Err("bool and number have no common type".into()),
    };
    let has_complex = items
        .iter()
        .any(|v| matches!(v, Value::List(_) | Value::Set(_) | Value::Map(_)));
    if has_complex {
        return Err("all elements must have the same type".into());
    }
    items.into_iter().map(|v| to_prim(v, target)).collect()
}

pub(super) fn unify_map(map: Object) -> Result<Object, String> {
    let (keys, values): (Vec<String>, Vec<Value>) = map.into_iter().unzip();
    Ok(keys.into_iter().zip(unify(values)?).collect())
}

/// Converts a variable's value to its declared type constraint (`string`, `list(string)`,
/// `map(object({...}))`, `optional(...)`, `any`...), as Terraform does on assignment.
/// Unknown values pass through; object attributes not in the type are dropped, missing
/// `optional` ones take their default (or null).
pub(crate) fn convert_to_type(value: Value, type_expr: &Expr) -> Result<Value, String> {
    convert(value, type_expr, 0)
}

use terraci_db::syntax::{Expr, ExprKind, ObjectKey};

const MAX_TYPE_DEPTH: usize = 64;

/// The name and arguments of a type expression: `string` -> ("string", []),
/// `list(string)` -> ("list", [string]); legacy quoted forms (`"string"`) too.
fn type_parts(t: &Expr) -> Result<(&str, &[Expr]), String> {
    match &t.kind {
        ExprKind::Variable(name) => Ok((name, &[])),
        ExprKind::String(name) => Ok((name, &[])),
        ExprKind::FuncCall(call) => Ok((&call.name, &call.args)),
        ExprKind::Paren(inner) => type_parts(inner),
        _ => Err("invalid type constraint".into()),
    }
}

fn one_arg<'e>(name: &str, args: &'e [Expr]) -> Result<Option<&'e Expr>, String> {
    match args {
        [] => Ok(None),
        [t] => Ok(Some(t)),
        _ => Err(format!("the {name} type constructor requires one argument")),
    }
}

fn convert(value: Value, t: &Expr, depth: usize) -> Result<Value, String> {
    if depth > MAX_TYPE_DEPTH {
        return Err("the type constraint is nested too deeply".into());
    }
    if matches!(value, Value::Unknown(_) | Value::Null) {
        return Ok(value);
    }
    let (name, args) = type_parts(t)?;
    match name {
        "any" => Ok(value),
        "string" => to_string_primitive(&value).map(Value::String),
        "number" => to_number(&value).map(Value::Number),
        "bool" => to_bool(&value).map(Value::Bool),
        "list" | "set" => {
            let elem = one_arg(name, args)?;
            let items = match value {
                Value::List(items) | Value::Set(items) => items,
                other => {
                    return Err(format!(
                        "{name} of {} required, but have {}",
                        elem_name(elem),
                        other.type_name()
                    ))
                }
            };
            let items = convert_elements(items, elem, depth)?;
            Ok(if name == "set" {
                Value::set(items)
            } else {
                Value::List(items)
            })
        }
        "map" => {
            let elem = one_arg(name, args)?;
            let Value::Map(map) = value else {
                return Err(format!(
                    "map of {} required, but have {}",
                    elem_name(elem),
                    value.type_name()
                ));
            };
            let (keys, values): (Vec<String>, Vec<Value>) = map.into_iter().unzip();
            let values = convert_elements(values, elem, depth)
                .map_err(|m| m.replacen("element", "map element", 1))?;
            Ok(Value::Map(keys.into_iter().zip(values).collect()))
        }
        "tuple" => {
            let [Expr {
                kind: ExprKind::Array(types),
                ..
            }] = args
            else {
                return Err("the tuple type constructor requires a list of element types".into());
            };
            let (Value::List(items) | Value::Set(items)) = value else {
                return Err(format!("tuple required, but have {}", value.type_name()));
            };
            if items.len() != types.len() {
                return Err(format!(
                    "tuple required with {} elements, but have {}",
                    types.len(),
                    items.len()
                ));
            }
            items
                .into_iter()
                .zip(types)
                .enumerate()
                .map(|(i, (v, t))| {
                    convert(v, t, depth + 1).map_err(|m| format!("element {i}: {m}"))
                })
                .collect::<Result<_, _>>()
                .map(Value::List)
        }
        "object" => {
            let [Expr {
                kind: ExprKind::Object(attrs),
                ..
            }] = args
            else {
                return Err(
                    "the object type constructor requires an object of attribute types".into(),
                );
            };
            let Value::Map(mut map) = value else {
                return Err(format!("object required, but have {}", value.type_name()));
            };
            let mut out = BTreeMap::new();
            for (key, attr_type) in attrs {
                let key = match key {
                    ObjectKey::Ident(k) => k.as_str().to_owned(),
                    ObjectKey::Expr(Expr {
                        kind: ExprKind::String(k),
                        ..
                    }) => k.as_str().to_owned(),
                    ObjectKey::Expr(_) => {
                        return Err("object attribute names must be literal".into())
                    }
                };
                let (attr_type, optional, default) = match type_parts(attr_type)? {
                    ("optional", [t]) => (t, true, None),
                    ("optional", [t, d]) => (t, true, Some(d)),
                    _ => (attr_type, false, None),
                };
                let v = match map.remove(&key) {
                    Some(Value::Null) | None if optional => match default {
                        Some(d) => literal(d)?,
                        None => Value::Null,
                    },
                    Some(v) => v,
                    None => return Err(format!("attribute \"{key}\" is required")),
                };
                let v = convert(v, attr_type, depth + 1)
                    .map_err(|m| format!("attribute \"{key}\": {m}"))?;
                out.insert(key, v);
            }
            Ok(Value::Map(out.into()))
        }
        other => Err(format!(
            "the keyword \"{other}\" is not a valid type constraint"
        )),
    }
}

fn elem_name(elem: Option<&Expr>) -> String {
    match elem.map(type_parts) {
        Some(Ok((name, []))) => name.to_string(),
        Some(Ok((name, _))) => name.to_string(),
        _ => "any single type".to_string(),
    }
}

/// Converts every element to `elem`; without an element type (`list(any)`, bare `list`)
/// the elements are unified to one type as Terraform does.
fn convert_elements(
    items: Vec<Value>,
    elem: Option<&Expr>,
    depth: usize,
) -> Result<Vec<Value>, String> {
    let is_any = match elem {
        None => true,
        Some(t) => matches!(type_parts(t), Ok(("any", []))),
    };
    if is_any {
        return unify(items);
    }
    let t = elem.expect("checked above");
    items
        .into_iter()
        .enumerate()
        .map(|(i, v)| convert(v, t, depth + 1).map_err(|m| format!("element {i}: {m}")))
        .collect()
}

/// The value of an `optional(type, default)` default, which must be a constant.
fn literal(e: &Expr) -> Result<Value, String> {
    let scope = Object::new();
    let ctx = super::EvalContext {
        scope: &scope,
        extra: &[],
        module_dir: camino::Utf8PathBuf::from("/"),
        host: &super::NoFilesystem,
    };
    match super::evaluate(e, &ctx) {
        Ok(v) if v.first_unknown().is_none() => Ok(v),
        Ok(_) => Err("an optional attribute's default must be a constant".into()),
        Err(e) => Err(e.message),
    }
}
