//! Terraform values as the evaluator sees them.

use terraci_db::syntax::NodeId;

/// Why a value is not known statically, and where the unknown entered the expression.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Unknown {
    /// Human reason naming the root cause: "`var.env` has no default and no tfvars value",
    /// "`data.aws_region.current.name` is only known after apply".
    pub(crate) reason: String,
    /// The node of the expression being evaluated where the unknown came in (the reference).
    /// `None` while the value sits in the scope (e.g. a local); the evaluator sets it to the
    /// referencing node the first time a reference yields it.
    pub(crate) at: Option<NodeId>,
}

/// A Terraform value. Lists and tuples share `List`; maps and objects share `Map` (keys
/// sorted, as Terraform iterates them). Sets are kept sorted and deduplicated.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    Unknown(Unknown),
    Bool(bool),
    Number(f64),
    String(String),
    List(Vec<Value>),
    Set(Vec<Value>),
    Map(Object),
}

/// The attributes of a map or object value, in key order.
pub(crate) type Object = terraci_db::sorted::SortedMap<String, Value>;

impl Value {
    pub(crate) fn unknown(reason: impl Into<String>) -> Value {
        Value::Unknown(Unknown {
            reason: reason.into(),
            at: None,
        })
    }

    /// The first unknown found in this value (depth-first, keys in order).
    pub(crate) fn first_unknown(&self) -> Option<&Unknown> {
        match self {
            Value::Unknown(u) => Some(u),
            Value::List(items) | Value::Set(items) => items.iter().find_map(Value::first_unknown),
            Value::Map(map) => map.values().find_map(Value::first_unknown),
            _ => None,
        }
    }
}

impl Value {
    /// Terraform's name for the value's type, for messages.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Unknown(_) => "unknown",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::List(_) => "tuple",
            Value::Set(_) => "set",
            Value::Map(_) => "object",
        }
    }

    pub(crate) fn is_unknown(&self) -> bool {
        matches!(self, Value::Unknown(_))
    }

    /// A set built from arbitrary elements: sorted and deduplicated.
    pub(crate) fn set(mut items: Vec<Value>) -> Value {
        items.sort_by(total_cmp);
        items.dedup_by(|a, b| total_cmp(a, b).is_eq());
        Value::Set(items)
    }

    /// Sets `at` on every unknown (nested ones included) that does not have it yet.
    pub(crate) fn stamp_unknowns(&mut self, at: NodeId) {
        // Most values are scalars: no stack to allocate.
        match self {
            Value::Unknown(u) => {
                if u.at.is_none() {
                    u.at = Some(at);
                }
                return;
            }
            Value::List(_) | Value::Set(_) | Value::Map(_) => {}
            _ => return,
        }
        let mut stack = vec![self];
        while let Some(v) = stack.pop() {
            match v {
                Value::Unknown(u) if u.at.is_none() => u.at = Some(at),
                Value::List(items) | Value::Set(items) => stack.extend(items.iter_mut()),
                Value::Map(map) => stack.extend(map.values_mut()),
                _ => {}
            }
        }
    }

    /// Points every unknown (nested ones included) at `at`, for values computed from text
    /// whose node ids mean nothing to the caller (rendered templates).
    pub(crate) fn repoint_unknowns(&mut self, at: NodeId) {
        let mut stack = vec![self];
        while let Some(v) = stack.pop() {
            match v {
                Value::Unknown(u) => u.at = Some(at),
                Value::List(items) | Value::Set(items) => stack.extend(items.iter_mut()),
                Value::Map(map) => stack.extend(map.values_mut()),
                _ => {}
            }
        }
    }

    /// Nesting depth (a primitive is 0), computed without recursion.
    pub(crate) fn depth(&self) -> usize {
        if !matches!(self, Value::List(_) | Value::Set(_) | Value::Map(_)) {
            return 0;
        }
        let mut max = 0;
        let mut stack = vec![(self, 0usize)];
        while let Some((v, d)) = stack.pop() {
            max = max.max(d);
            match v {
                Value::List(items) | Value::Set(items) => {
                    stack.extend(items.iter().map(|i| (i, d + 1)))
                }
                Value::Map(map) => stack.extend(map.values().map(|i| (i, d + 1))),
                _ => {}
            }
        }
        max
    }
}

/// Terraform's textual form of a number: integers without a fraction, others with up to
/// 15 significant digits so that `0.1 + 0.2` reads `0.3` as it does with Terraform's
/// arbitrary-precision numbers.
pub(crate) fn format_number(n: f64) -> String {
    if n.is_nan() {
        return "NaN".into();
    }
    if n.is_infinite() {
        return if n > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    if n == n.trunc() && n.abs() < 1e21 {
        return format!("{n:.0}");
    }
    // Leading zeros (`0.00...`) are not significant: `log(2.5, 3)` keeps its 16 digits.
    let significant = |s: &str| {
        s.chars()
            .filter(char::is_ascii_digit)
            .skip_while(|c| *c == '0')
            .count()
    };
    let shortest = format!("{n}");
    if significant(&shortest) <= 16 {
        return shortest;
    }
    let rounded: f64 = format!("{n:.14e}").parse().unwrap_or(n);
    let text = format!("{rounded}");
    if significant(&text) <= 16 {
        text
    } else {
        shortest
    }
}

fn rank(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Unknown(_) => 1,
        Value::Bool(_) => 2,
        Value::Number(_) => 3,
        Value::String(_) => 4,
        Value::List(_) => 5,
        Value::Set(_) => 6,
        Value::Map(_) => 7,
    }
}

/// A total order used to keep sets canonical: numbers numerically, strings lexically,
/// `false` before `true`, collections element-wise.
pub(super) fn total_cmp(a: &Value, b: &Value) -> std::cmp::Ordering {
    use std::cmp::Ordering;
    match (a, b) {
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        // NaN sorts last and equal to itself, so the order stays total (sorting needs it).
        (Value::Number(x), Value::Number(y)) => match (x.is_nan(), y.is_nan()) {
            (false, false) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
            (a, b) => a.cmp(&b),
        },
        (Value::String(x), Value::String(y)) => x.cmp(y),
        (Value::Unknown(x), Value::Unknown(y)) => x.reason.cmp(&y.reason),
        (Value::List(x), Value::List(y)) | (Value::Set(x), Value::Set(y)) => {
            for (i, j) in x.iter().zip(y) {
                let o = total_cmp(i, j);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Value::Map(x), Value::Map(y)) => {
            for ((ki, vi), (kj, vj)) in x.iter().zip(y) {
                let o = ki.cmp(kj).then_with(|| total_cmp(vi, vj));
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        _ => rank(a).cmp(&rank(b)),
    }
}
