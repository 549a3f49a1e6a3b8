//! Collection functions.

use std::collections::BTreeMap;

use super::Args;
use crate::eval::convert::{to_bool, to_number, to_string_primitive, unify, unify_map};
use crate::eval::evaluator::{values_equal, Evaluator, R};
use crate::eval::functions::strings::graphemes;
use crate::eval::limits;
use crate::eval::value::{total_cmp, Value};

fn list_of(v: &Value) -> Option<&Vec<Value>> {
    match v {
        Value::List(items) | Value::Set(items) => Some(items),
        _ => None,
    }
}

fn contains_value(items: &[Value], needle: &Value) -> bool {
    items
        .iter()
        .any(|i| values_equal(i, needle).unwrap_or(false))
}

pub(super) fn element(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    a.not_null(0)?;
    let idx = a.int(1)?;
    match &a.values[0] {
        Value::List(items) => {
            if items.is_empty() {
                return Err(a.fail("cannot use element function with an empty list"));
            }
            if idx < 0 {
                return Err(a.fail("cannot use element function with a negative index"));
            }
            Ok(items[(idx as usize) % items.len()].clone())
        }
        Value::Set(_) => Err(a.fail("cannot read elements from set")),
        other => Err(a.fail(format!("cannot read elements from {}", other.type_name()))),
    }
}

pub(super) fn length(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let n = match a.not_null(0)? {
        Value::String(s) => graphemes(s).len(),
        Value::List(items) | Value::Set(items) => items.len(),
        Value::Map(map) => map.len(),
        _ => {
            return Err(a.fail("argument must be a string, a collection type, or a structural type"))
        }
    };
    Ok(Value::Number(n as f64))
}

pub(super) fn lookup(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    if a.len() > 3 {
        return Err(a.fail("lookup() takes no more than three arguments"));
    }
    let key = a.string(1)?;
    let map = a.map(0)?;
    match map.get(&key) {
        Some(v) => Ok(v.clone()),
        None if a.len() == 3 => Ok(a.take(2)),
        None => Err(a.arg_err(0, format!("the given object has no attribute \"{key}\""))),
    }
}

pub(super) fn concat(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    if a.len() == 0 {
        return Err(a.fail("at least one argument is required"));
    }
    let mut out = Vec::new();
    for i in 0..a.len() {
        match a.take(i) {
            Value::List(items) => {
                if out.len() + items.len() > limits::MAX_ELEMENTS {
                    return Err(a.limit("the result is too large"));
                }
                out.extend(items)
            }
            other => {
                return Err(a.arg_err(
                    i,
                    format!(
                        "all arguments must be lists or tuples; got {}",
                        other.type_name()
                    ),
                ))
            }
        }
    }
    Ok(Value::List(out))
}

pub(super) fn contains(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    a.not_null(0)?;
    match list_of(&a.values[0]) {
        Some(items) => Ok(Value::Bool(contains_value(items, &a.values[1]))),
        None => Err(a.arg_err(0, "argument must be list, tuple, or set")),
    }
}

pub(super) fn keys(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    match a.not_null(0)? {
        Value::Map(map) => Ok(Value::List(
            map.keys().map(|k| Value::String(k.clone())).collect(),
        )),
        _ => Err(a.arg_err(0, "must have map or object type")),
    }
}

pub(super) fn values(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    a.not_null(0)?;
    match a.take(0) {
        Value::Map(map) => Ok(Value::List(map.into_values().collect())),
        _ => Err(a.arg_err(0, "must have map or object type")),
    }
}

pub(super) fn merge(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let mut out = BTreeMap::new();
    for i in 0..a.len() {
        match a.take(i) {
            Value::Null => {}
            Value::Map(map) => out.extend(map),
            other => {
                return Err(a.fail(format!(
                    "arguments must be maps or objects, got \"{}\"",
                    other.type_name()
                )))
            }
        }
    }
    Ok(Value::Map(out.into()))
}

pub(super) fn flatten(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let items = a.seq(0)?;
    let mut out = Vec::new();
    // Depth-first without recursion: a stack of iterators over nested lists.
    let mut stack = vec![items.into_iter()];
    while let Some(top) = stack.last_mut() {
        match top.next() {
            None => {
                stack.pop();
            }
            Some(Value::List(inner) | Value::Set(inner)) => stack.push(inner.into_iter()),
            Some(u @ Value::Unknown(_)) => return Ok(u),
            Some(v) => {
                if out.len() >= limits::MAX_ELEMENTS {
                    return Err(a.limit("the result is too large"));
                }
                out.push(v)
            }
        }
    }
    Ok(Value::List(out))
}

/// Removes duplicates, keeping the first occurrence, in O(n log n).
fn dedup_stable(items: Vec<Value>) -> Vec<Value> {
    let mut order: Vec<usize> = (0..items.len()).collect();
    order.sort_by(|&x, &y| total_cmp(&items[x], &items[y]).then(x.cmp(&y)));
    let mut keep = vec![false; items.len()];
    for (n, &i) in order.iter().enumerate() {
        keep[i] = n == 0 || !total_cmp(&items[order[n - 1]], &items[i]).is_eq();
    }
    items
        .into_iter()
        .zip(keep)
        .filter_map(|(v, k)| k.then_some(v))
        .collect()
}

pub(super) fn distinct(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let items = a.seq(0)?;
    let items = unify(items).map_err(|m| a.arg_err(0, m))?;
    Ok(Value::List(dedup_stable(items)))
}

pub(super) fn compact(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let items = a.seq(0)?;
    let mut out = Vec::new();
    for (i, v) in items.into_iter().enumerate() {
        match v {
            Value::Null => {}
            v => {
                let s = to_string_primitive(&v)
                    .map_err(|_| a.arg_err(0, format!("element {i}: string required")))?;
                if !s.is_empty() {
                    out.push(Value::String(s));
                }
            }
        }
    }
    Ok(Value::List(out))
}

pub(super) fn coalesce(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    if a.len() == 0 {
        return Err(a.fail("all arguments must have the same type"));
    }
    // Terraform unifies the arguments' types first: primitives unify (to string), a
    // primitive never unifies with a collection, a sequence never with a map.
    let mut classes = a.values.iter().filter_map(shape).collect::<Vec<_>>();
    classes.dedup();
    if classes.len() > 1 {
        return Err(a.fail("all arguments must have the same type"));
    }
    let any_string = a.values.iter().any(|v| matches!(v, Value::String(_)));
    for i in 0..a.len() {
        match &a.values[i] {
            Value::Null => continue,
            Value::String(s) if s.is_empty() => continue,
            u @ Value::Unknown(_) => return Ok(u.clone()),
            Value::Number(_) | Value::Bool(_) if any_string => {
                let v = a.take(i);
                return Ok(Value::String(
                    to_string_primitive(&v).expect("a primitive converts to string"),
                ));
            }
            _ => return Ok(a.take(i)),
        }
    }
    Err(a.fail("no non-null, non-empty-string arguments"))
}

/// The kind of type a value has, for the unifications Terraform does before a call:
/// 0 primitive, 1 sequence, 2 map or object; `None` for null and unknown.
fn shape(v: &Value) -> Option<u8> {
    match v {
        Value::Null | Value::Unknown(_) => None,
        Value::Bool(_) | Value::Number(_) | Value::String(_) => Some(0),
        Value::List(_) | Value::Set(_) => Some(1),
        Value::Map(_) => Some(2),
    }
}

pub(super) fn coalescelist(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    if a.len() == 0 {
        return Err(a.fail("at least one argument is required"));
    }
    // Every argument is checked, not only those before the first non-empty one.
    if let Some(i) = (0..a.len()).find(|&i| matches!(shape(&a.values[i]), Some(0 | 2))) {
        return Err(a.arg_err(
            i,
            format!(
                "a list or tuple is required, but have {}",
                a.values[i].type_name()
            ),
        ));
    }
    for i in 0..a.len() {
        match &a.values[i] {
            Value::Null => continue,
            Value::List(items) | Value::Set(items) => {
                if !items.is_empty() {
                    return Ok(a.take(i));
                }
            }
            other => {
                return Err(a.arg_err(
                    i,
                    format!(
                        "a list or tuple is required, but have {}",
                        other.type_name()
                    ),
                ))
            }
        }
    }
    Err(a.fail("no non-null arguments"))
}

pub(super) fn index(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    a.not_null(0)?;
    let Value::List(items) = &a.values[0] else {
        return Err(a.arg_err(0, "argument must be a list or tuple"));
    };
    match items
        .iter()
        .position(|i| values_equal(i, &a.values[1]).unwrap_or(false))
    {
        Some(i) => Ok(Value::Number(i as f64)),
        None => Err(a.fail("item not found")),
    }
}

pub(super) fn one(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let mut items = a.seq(0)?;
    match items.len() {
        0 => Ok(Value::Null),
        1 => Ok(items.pop().expect("one element")),
        _ => Err(a.arg_err(
            0,
            "must be a list, set, or tuple value with either zero or one elements",
        )),
    }
}

pub(super) fn range(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let nums = (0..a.len()).map(|i| a.number(i)).collect::<R<Vec<f64>>>()?;
    let (start, end, step) = match nums[..] {
        [] => return Err(a.fail("must have one, two, or three arguments")),
        [end] => (0.0, end, 1.0),
        [start, end] => (start, end, if start > end { -1.0 } else { 1.0 }),
        [start, end, step] => (start, end, step),
        _ => return Err(a.fail("must have one, two, or three arguments")),
    };
    if step < 0.0 && start < end {
        return Err(a.arg_err(0, "end must be less than start when step is negative"));
    }
    if step > 0.0 && start > end {
        return Err(a.arg_err(
            0,
            "start must be less than or equal to end when step is positive",
        ));
    }
    let mut out = Vec::new();
    let mut v = start;
    while (step > 0.0 && v < end) || (step < 0.0 && v > end) || step == 0.0 {
        if out.len() >= limits::MAX_RANGE {
            return Err(a.limit(
                "more than 1024 values were generated; either decrease the difference between start and end or use a smaller step",
            ));
        }
        out.push(Value::Number(v));
        v += step;
    }
    Ok(Value::List(out))
}

pub(super) fn reverse(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let mut items = a.seq(0)?;
    items.reverse();
    Ok(Value::List(items))
}

pub(super) fn slice(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let start = a.int(1)?;
    let end = a.int(2)?;
    let mut items = a.seq(0)?;
    if start < 0 {
        return Err(a.arg_err(1, "start index must not be less than zero"));
    }
    if end > items.len() as i64 {
        return Err(a.arg_err(
            2,
            "end index must not be greater than the length of the list",
        ));
    }
    if start > end {
        return Err(a.arg_err(1, "start index must not be greater than end index"));
    }
    items.truncate(end as usize);
    Ok(Value::List(items.split_off(start as usize)))
}

pub(super) fn sort(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let items = a.seq(0)?;
    let mut strings = Vec::with_capacity(items.len());
    for (i, v) in items.iter().enumerate() {
        if matches!(v, Value::Null) {
            return Err(a.fail(format!(
                "given list element {i} is null; a null string cannot be sorted"
            )));
        }
        strings.push(
            to_string_primitive(v)
                .map_err(|_| a.arg_err(0, format!("element {i}: string required")))?,
        );
    }
    strings.sort();
    Ok(Value::List(
        strings.into_iter().map(Value::String).collect(),
    ))
}

fn set_args(a: &mut Args) -> R<Vec<Vec<Value>>> {
    (0..a.len())
        .map(|i| {
            let items = a.seq(i)?;
            unify(items).map_err(|m| a.arg_err(i, m))
        })
        .collect()
}

pub(super) fn setproduct(ev: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    if a.len() < 2 {
        return Err(a.fail("at least two arguments are required"));
    }
    let any_set = a.values.iter().any(|v| matches!(v, Value::Set(_)));
    let sets = set_args(a)?;
    let mut total: usize = 1;
    for s in &sets {
        total = total.saturating_mul(s.len());
    }
    if total > limits::MAX_ELEMENTS {
        return Err(a.limit("the product has too many elements"));
    }
    ev.charge(a.node, (total as u64).saturating_mul(sets.len() as u64))?;
    let mut out: Vec<Vec<Value>> = vec![Vec::new()];
    for s in &sets {
        let mut next = Vec::with_capacity(out.len() * s.len());
        for prefix in &out {
            for v in s {
                let mut row = prefix.clone();
                row.push(v.clone());
                next.push(row);
            }
        }
        out = next;
    }
    let rows: Vec<Value> = if total == 0 {
        Vec::new()
    } else {
        out.into_iter().map(Value::List).collect()
    };
    Ok(if any_set {
        Value::set(rows)
    } else {
        Value::List(rows)
    })
}

pub(super) fn setunion(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let sets = set_args(a)?;
    let all: Vec<Value> = sets.into_iter().flatten().collect();
    Ok(Value::set(unify(all).map_err(|m| a.arg_err(0, m))?))
}

pub(super) fn setintersection(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let mut sets = set_args(a)?.into_iter();
    let first = sets.next().unwrap_or_default();
    let rest: Vec<Vec<Value>> = sets.collect();
    let out = first
        .into_iter()
        .filter(|v| rest.iter().all(|s| contains_value(s, v)))
        .collect();
    Ok(Value::set(out))
}

pub(super) fn setsubtract(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let sets = set_args(a)?;
    let out = sets[0]
        .iter()
        .filter(|v| !contains_value(&sets[1], v))
        .cloned()
        .collect();
    Ok(Value::set(out))
}

pub(super) fn transpose(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let map = a.map(0)?;
    let mut out: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (k, v) in map {
        let Some(items) = list_of(&v) else {
            return Err(a.arg_err(0, "the value must be a map of lists of strings"));
        };
        for item in items {
            let s = to_string_primitive(item)
                .map_err(|_| a.arg_err(0, "the value must be a map of lists of strings"))?;
            out.entry(s).or_default().push(Value::String(k.clone()));
        }
    }
    Ok(Value::Map(
        out.into_iter().map(|(k, v)| (k, Value::List(v))).collect(),
    ))
}

pub(super) fn zipmap(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let keys = a.seq(0)?;
    let values = a.seq(1)?;
    if let Some(u) = keys.iter().find_map(Value::first_unknown) {
        return Ok(Value::Unknown(u.clone()));
    }
    if keys.len() != values.len() {
        return Err(a.fail(format!(
            "number of keys ({}) does not match number of values ({})",
            keys.len(),
            values.len()
        )));
    }
    let mut out = BTreeMap::new();
    for (i, (k, v)) in keys.into_iter().zip(values).enumerate() {
        if matches!(k, Value::Null) {
            return Err(a.arg_err(0, format!("element {i} is null")));
        }
        let k = to_string_primitive(&k)
            .map_err(|_| a.arg_err(0, format!("element {i}: string required")))?;
        out.insert(k, v);
    }
    Ok(Value::Map(out.into()))
}

pub(super) fn chunklist(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let size = a.int(1)?;
    let items = a.seq(0)?;
    if size < 0 {
        return Err(a.arg_err(1, "the size argument must be positive"));
    }
    if size == 0 {
        return Ok(Value::List(vec![Value::List(items)]));
    }
    Ok(Value::List(
        items
            .chunks(size as usize)
            .map(|c| Value::List(c.to_vec()))
            .collect(),
    ))
}

pub(super) fn tolist(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    match a.take(0) {
        Value::Null => Ok(Value::Null),
        Value::Set(items) => Ok(Value::List(items)),
        Value::List(items) => unify(items).map(Value::List).map_err(|m| {
            a.arg_err(
                0,
                format!("cannot convert tuple to list of any single type: {m}"),
            )
        }),
        other => Err(a.arg_err(
            0,
            format!(
                "cannot convert {} to list of any single type",
                other.type_name()
            ),
        )),
    }
}

pub(super) fn toset(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    match a.take(0) {
        Value::Null => Ok(Value::Null),
        Value::Set(items) => Ok(Value::Set(items)),
        Value::List(items) => unify(items).map(Value::set).map_err(|m| {
            a.arg_err(
                0,
                format!("cannot convert tuple to set of any single type: {m}"),
            )
        }),
        other => Err(a.arg_err(
            0,
            format!(
                "cannot convert {} to set of any single type",
                other.type_name()
            ),
        )),
    }
}

pub(super) fn tomap(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    match a.take(0) {
        Value::Null => Ok(Value::Null),
        Value::Map(map) => unify_map(map)
            .map(Value::Map)
            .map_err(|_| a.arg_err(0, "cannot convert object to map of any single type")),
        other => Err(a.arg_err(
            0,
            format!(
                "cannot convert {} to map of any single type",
                other.type_name()
            ),
        )),
    }
}

pub(super) fn sum(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let items = a.seq(0)?;
    if items.is_empty() {
        return Err(a.arg_err(0, "cannot sum an empty list"));
    }
    let mut total = 0.0;
    for v in &items {
        if matches!(v, Value::Null) {
            return Err(a.arg_err(0, "argument must be list, set, or tuple of number values"));
        }
        total += to_number(v).map_err(|m| a.arg_err(0, m))?;
    }
    Ok(Value::Number(total))
}

fn bools(a: &mut Args) -> R<Vec<Option<bool>>> {
    let items = a.seq(0)?;
    items
        .iter()
        .map(|v| match v {
            Value::Null => Ok(None),
            v => to_bool(v).map(Some).map_err(|m| a.arg_err(0, m)),
        })
        .collect()
}

pub(super) fn alltrue(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Bool(bools(a)?.into_iter().all(|b| b == Some(true))))
}

pub(super) fn anytrue(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    Ok(Value::Bool(bools(a)?.into_iter().any(|b| b == Some(true))))
}

pub(super) fn matchkeys(_: &mut Evaluator<'_, '_>, a: &mut Args) -> R<Value> {
    let values = a.seq(0)?;
    let keys = a.seq(1)?;
    let search = a.seq(2)?;
    if values.len() != keys.len() {
        return Err(a.fail("length of keys and values should be equal"));
    }
    // `keys` and `searchset` must have the same element type.
    if let (Some(k), Some(s)) = (keys.iter().find_map(shape), search.iter().find_map(shape)) {
        if k != s {
            return Err(a.fail("keys and searchset must be of the same type"));
        }
    }
    Ok(Value::List(
        values
            .into_iter()
            .zip(keys)
            .filter(|(_, k)| contains_value(&search, k))
            .map(|(v, _)| v)
            .collect(),
    ))
}
