//! Terraform values as the evaluator sees them.

use std::collections::BTreeMap;

use crate::syntax::NodeId;

/// Why a value is not known statically, and where the unknown entered the expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Unknown {
    /// Human reason naming the root cause: "`var.env` has no default and no tfvars value",
    /// "`data.aws_region.current.name` is only known after apply".
    pub reason: String,
    /// The node of the expression being evaluated where the unknown came in (the reference).
    /// `None` while the value sits in the scope (e.g. a local); the evaluator sets it to the
    /// referencing node the first time a reference yields it.
    pub at: Option<NodeId>,
}

/// A Terraform value. Lists and tuples share `List`; maps and objects share `Map` (keys
/// sorted, as Terraform iterates them). Sets are kept sorted and deduplicated.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Unknown(Unknown),
    Bool(bool),
    Number(f64),
    String(String),
    List(Vec<Value>),
    Set(Vec<Value>),
    Map(Object),
}

/// The attributes of a map or object value, in key order (a `BTreeMap`'s order, lookup
/// and comparison).
///
/// A sorted vector of exact length rather than a `BTreeMap`: every module's scope keeps
/// several small objects for the whole run (`var`, `local`, `path`, `terraform`, the
/// scope itself), and a `BTreeMap` allocates a node for eleven entries (700 bytes) for
/// one or two. Building stays `O(n log n)`: [`FromIterator`] sorts once, and
/// [`Object::insert`] in key order appends.
#[derive(Clone, Default, PartialEq)]
pub struct Object(Vec<(String, Value)>);

impl Object {
    pub const fn new() -> Self {
        Object(Vec::new())
    }

    /// From entries already in strictly increasing key order (a `BTreeMap`'s).
    pub fn from_sorted(entries: impl IntoIterator<Item = (String, Value)>) -> Self {
        let entries: Vec<(String, Value)> = entries.into_iter().collect();
        debug_assert!(entries.windows(2).all(|w| w[0].0 < w[1].0));
        Object(entries)
    }

    fn position(&self, key: &str) -> Result<usize, usize> {
        self.0.binary_search_by(|(k, _)| k.as_str().cmp(key))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.position(key).ok().map(|i| &self.0[i].1)
    }

    pub fn get_mut(&mut self, key: &str) -> Option<&mut Value> {
        self.position(key).ok().map(|i| &mut self.0[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.position(key).is_ok()
    }

    /// Sets `key`, returning the value it replaced.
    pub fn insert(&mut self, key: String, value: Value) -> Option<Value> {
        if self.0.last().is_none_or(|(last, _)| *last < key) {
            self.0.push((key, value));
            return None;
        }
        match self.position(&key) {
            Ok(i) => Some(std::mem::replace(&mut self.0[i].1, value)),
            Err(i) => {
                self.0.insert(i, (key, value));
                None
            }
        }
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.position(key).ok().map(|i| self.0.remove(i).1)
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (&String, &Value)> + ExactSizeIterator {
        self.0.iter().map(|(k, v)| (k, v))
    }

    pub fn iter_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = (&String, &mut Value)> + ExactSizeIterator {
        self.0.iter_mut().map(|(k, v)| (&*k, v))
    }

    pub fn keys(&self) -> impl DoubleEndedIterator<Item = &String> + ExactSizeIterator {
        self.0.iter().map(|(k, _)| k)
    }

    pub fn values(&self) -> impl DoubleEndedIterator<Item = &Value> + ExactSizeIterator {
        self.0.iter().map(|(_, v)| v)
    }

    pub fn values_mut(
        &mut self,
    ) -> impl DoubleEndedIterator<Item = &mut Value> + ExactSizeIterator {
        self.0.iter_mut().map(|(_, v)| v)
    }

    pub fn into_values(self) -> impl DoubleEndedIterator<Item = Value> + ExactSizeIterator {
        self.0.into_iter().map(|(_, v)| v)
    }

    pub fn into_keys(self) -> impl DoubleEndedIterator<Item = String> + ExactSizeIterator {
        self.0.into_iter().map(|(k, _)| k)
    }

    /// Drops growth slack: the object is kept as it is from here on.
    pub fn shrink_to_fit(&mut self) {
        self.0.shrink_to_fit();
    }
}

impl FromIterator<(String, Value)> for Object {
    /// The last value given for a key wins, as with a `BTreeMap`.
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Self {
        let mut entries: Vec<(String, Value)> = iter.into_iter().collect();
        if !entries.windows(2).all(|w| w[0].0 < w[1].0) {
            // Stable: equal keys stay in the order given, and the last one is kept.
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let mut kept: Vec<(String, Value)> = Vec::with_capacity(entries.len());
            for entry in entries {
                match kept.last_mut() {
                    Some(last) if last.0 == entry.0 => *last = entry,
                    _ => kept.push(entry),
                }
            }
            entries = kept;
        }
        entries.shrink_to_fit();
        Object(entries)
    }
}

impl Extend<(String, Value)> for Object {
    fn extend<I: IntoIterator<Item = (String, Value)>>(&mut self, iter: I) {
        let added: Vec<(String, Value)> = iter.into_iter().collect();
        if added.is_empty() {
            return;
        }
        let mut all = std::mem::take(&mut self.0);
        all.extend(added);
        *self = all.into_iter().collect();
    }
}

impl<const N: usize> From<[(String, Value); N]> for Object {
    fn from(entries: [(String, Value); N]) -> Self {
        entries.into_iter().collect()
    }
}

impl From<BTreeMap<String, Value>> for Object {
    fn from(map: BTreeMap<String, Value>) -> Self {
        Object::from_sorted(map)
    }
}

impl IntoIterator for Object {
    type Item = (String, Value);
    type IntoIter = std::vec::IntoIter<(String, Value)>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Object {
    type Item = (&'a String, &'a Value);
    type IntoIter = std::iter::Map<
        std::slice::Iter<'a, (String, Value)>,
        fn(&'a (String, Value)) -> (&'a String, &'a Value),
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter().map(|(k, v)| (k, v))
    }
}

impl std::fmt::Debug for Object {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl Value {
    pub fn unknown(reason: impl Into<String>) -> Value {
        Value::Unknown(Unknown {
            reason: reason.into(),
            at: None,
        })
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// The first unknown found in this value (depth-first, keys in order).
    pub fn first_unknown(&self) -> Option<&Unknown> {
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
    pub fn type_name(&self) -> &'static str {
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

    pub fn is_unknown(&self) -> bool {
        matches!(self, Value::Unknown(_))
    }

    /// A set built from arbitrary elements: sorted and deduplicated.
    pub fn set(mut items: Vec<Value>) -> Value {
        items.sort_by(total_cmp);
        items.dedup_by(|a, b| total_cmp(a, b).is_eq());
        Value::Set(items)
    }

    /// Sets `at` on every unknown (nested ones included) that does not have it yet.
    pub fn stamp_unknowns(&mut self, at: NodeId) {
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
    pub fn repoint_unknowns(&mut self, at: NodeId) {
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
    pub fn depth(&self) -> usize {
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

    /// Number of nodes in the value, counted without recursion.
    pub fn size(&self) -> usize {
        let mut n = 0;
        let mut stack = vec![self];
        while let Some(v) = stack.pop() {
            n += 1;
            match v {
                Value::List(items) | Value::Set(items) => stack.extend(items.iter()),
                Value::Map(map) => stack.extend(map.values()),
                _ => {}
            }
        }
        n
    }
}

/// Terraform's textual form of a number: integers without a fraction, others with up to
/// 15 significant digits so that `0.1 + 0.2` reads `0.3` as it does with Terraform's
/// arbitrary-precision numbers.
pub fn format_number(n: f64) -> String {
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
