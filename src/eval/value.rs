//! Terraform values as the evaluator sees them.

use std::collections::BTreeMap;

use crate::facts::expr::NodeId;

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
    Map(BTreeMap<String, Value>),
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
