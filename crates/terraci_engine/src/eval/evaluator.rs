//! The tree walker: references, operators, templates, `for` expressions and splats.
//!
//! Every node costs fuel and every nested node costs depth, so no input can hang the
//! evaluator or overflow its stack; both end in an `evaluation-limit` error instead.

use std::collections::BTreeMap;

use terraci_db::diagnostic::Code;
use terraci_db::syntax::{
    BinaryOp, Expr, ExprKind, ForExpr, NodeId, ObjectKey, TemplatePart, Traverser, UnaryOp,
};

use super::convert::{to_bool, to_number, to_string_primitive};
use super::value::{total_cmp, Value};
use super::{functions, limits, EvalContext, EvalError};

pub(crate) type R<T> = Result<T, EvalError>;

pub(crate) fn error(node: NodeId, message: impl Into<String>) -> EvalError {
    EvalError {
        node,
        code: Code::EvaluationError,
        message: message.into(),
    }
}

pub(crate) fn limit(node: NodeId, message: impl Into<String>) -> EvalError {
    EvalError {
        node,
        code: Code::EvaluationLimit,
        message: message.into(),
    }
}

/// Returns early with the value if it is unknown.
macro_rules! known {
    ($v:expr) => {
        match $v {
            v @ Value::Unknown(_) => return Ok(v),
            v => v,
        }
    };
}

pub(crate) struct Evaluator<'a, 'c> {
    pub(crate) ctx: &'a EvalContext<'c>,
    /// `for` iterator bindings and `templatefile` variables, innermost last.
    bindings: Vec<(String, Value)>,
    depth: usize,
    fuel: u64,
    /// Address of a local in the outermost frame, to measure the stack used since.
    stack_base: usize,
    /// In a rendered template every name must be one of the given variables.
    strict_roots: bool,
}

/// The address of a local in the caller's frame: a stack position.
#[inline(always)]
fn stack_position() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

impl<'a, 'c> Evaluator<'a, 'c> {
    pub(crate) fn new(ctx: &'a EvalContext<'c>) -> Self {
        Evaluator {
            ctx,
            bindings: Vec::new(),
            depth: 0,
            fuel: limits::FUEL,
            stack_base: stack_position(),
            strict_roots: false,
        }
    }

    /// An evaluator for text rendered inside a call (`templatefile`): its own scope, but
    /// the caller's depth and remaining budget.
    pub(crate) fn nested<'b, 'd>(&self, ctx: &'b EvalContext<'d>) -> Evaluator<'b, 'd> {
        Evaluator {
            ctx,
            bindings: Vec::new(),
            depth: self.depth,
            fuel: self.fuel,
            stack_base: self.stack_base,
            strict_roots: true,
        }
    }

    /// Remaining budget.
    pub(crate) fn fuel(&self) -> u64 {
        self.fuel
    }

    /// Spends `units` of the evaluation budget.
    pub(crate) fn charge(&mut self, node: NodeId, units: u64) -> R<()> {
        match self.fuel.checked_sub(units) {
            Some(rest) => {
                self.fuel = rest;
                Ok(())
            }
            None => {
                self.fuel = 0;
                Err(limit(
                    node,
                    "evaluation is too expensive (the expression does too much work)",
                ))
            }
        }
    }

    /// Spends budget in proportion to the size of a value that was just built or copied.
    pub(crate) fn charge_value(&mut self, node: NodeId, value: &Value) -> R<()> {
        let units = value_weight(value);
        self.charge(node, units)
    }

    /// Goes one level deeper; on error the level is not entered (no `leave` needed).
    pub(crate) fn enter(&mut self, node: NodeId) -> R<()> {
        // Frames are large in debug builds and nested `templatefile` calls add many per
        // level, so the node count alone does not bound the stack; measure it as well.
        if stack_position().abs_diff(self.stack_base) > limits::MAX_STACK {
            return Err(limit(
                node,
                "the expression is nested too deeply to evaluate (it needs too much stack)",
            ));
        }
        if self.depth >= limits::MAX_DEPTH {
            return Err(limit(
                node,
                format!(
                    "the expression is nested more than {} levels deep",
                    limits::MAX_DEPTH
                ),
            ));
        }
        self.depth += 1;
        Ok(())
    }

    pub(crate) fn leave(&mut self) {
        self.depth -= 1;
    }

    pub(crate) fn eval(&mut self, expr: &Expr) -> R<Value> {
        self.enter(expr.id)?;
        let result = self.charge(expr.id, 1).and_then(|()| self.eval_kind(expr));
        self.leave();
        result
    }

    fn eval_kind(&mut self, expr: &Expr) -> R<Value> {
        match &expr.kind {
            ExprKind::Null => Ok(Value::Null),
            ExprKind::Bool(b) => Ok(Value::Bool(*b)),
            ExprKind::Number(n) => Ok(Value::Number(n.get())),
            ExprKind::String(s) => Ok(Value::String(s.as_str().to_owned())),
            ExprKind::Template(parts) => self.eval_template(expr.id, parts),
            ExprKind::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for item in items {
                    out.push(self.eval(item)?);
                }
                Ok(Value::List(out))
            }
            ExprKind::Object(items) => self.eval_object(items),
            ExprKind::Variable(_) | ExprKind::Traversal(..) => self.eval_reference(expr),
            ExprKind::FuncCall(call) => {
                functions::call(self, expr.id, &call.name, &call.args, call.expand_final)
            }
            ExprKind::Conditional(cond, then, otherwise) => {
                let c = self.eval(cond)?;
                let c = known!(c);
                let c = match c {
                    Value::Null => {
                        return Err(error(
                            cond.id,
                            "Null condition: the condition value is null. Conditions must either be true or false.",
                        ))
                    }
                    other => to_bool(&other).map_err(|m| {
                        error(cond.id, format!("Incorrect condition type: {m}"))
                    })?,
                };
                if c {
                    self.eval(then)
                } else {
                    self.eval(otherwise)
                }
            }
            ExprKind::Unary(op, operand) => {
                let v = self.eval(operand)?;
                let v = known!(v);
                match op {
                    UnaryOp::Neg => {
                        let n = operand_number(&v, operand.id)?;
                        Ok(Value::Number(-n))
                    }
                    UnaryOp::Not => {
                        let b = operand_bool(&v, operand.id)?;
                        Ok(Value::Bool(!b))
                    }
                }
            }
            ExprKind::Binary(op, lhs, rhs) => self.eval_binary(expr.id, *op, lhs, rhs),
            ExprKind::For(f) => self.eval_for(expr.id, f),
            ExprKind::Paren(inner) => self.eval(inner),
        }
    }

    fn eval_object(&mut self, items: &[(ObjectKey, Expr)]) -> R<Value> {
        let mut out = BTreeMap::new();
        let mut unknown = None;
        for (key, value) in items {
            let key = match key {
                ObjectKey::Ident(name) => name.as_str().to_owned(),
                ObjectKey::Expr(e) => match self.eval(e)? {
                    Value::Unknown(u) => {
                        unknown.get_or_insert(Value::Unknown(u));
                        continue;
                    }
                    Value::Null => {
                        return Err(error(
                            e.id,
                            "Invalid object key: the key expression produced a null value",
                        ))
                    }
                    other => to_string_primitive(&other)
                        .map_err(|m| error(e.id, format!("Incorrect key type: {m}")))?,
                },
            };
            let v = self.eval(value)?;
            out.insert(key, v);
        }
        match unknown {
            Some(u) => Ok(u),
            None => Ok(Value::Map(out.into())),
        }
    }

    fn eval_binary(&mut self, node: NodeId, op: BinaryOp, lhs: &Expr, rhs: &Expr) -> R<Value> {
        let l = self.eval(lhs)?;
        let r = self.eval(rhs)?;
        match op {
            BinaryOp::Eq | BinaryOp::NotEq => {
                let eq = match values_equal(&l, &r) {
                    Ok(eq) => eq,
                    Err(u) => return Ok(u),
                };
                Ok(Value::Bool(if op == BinaryOp::Eq { eq } else { !eq }))
            }
            BinaryOp::And | BinaryOp::Or => {
                let decisive = op == BinaryOp::Or;
                // A known decisive operand settles the result even if the other is unknown.
                for (v, e) in [(&l, lhs), (&r, rhs)] {
                    if !v.is_unknown() && operand_bool(v, e.id)? == decisive {
                        return Ok(Value::Bool(decisive));
                    }
                }
                if let Some(u) = [l, r].into_iter().find(Value::is_unknown) {
                    return Ok(u);
                }
                Ok(Value::Bool(!decisive))
            }
            _ => {
                let l = known!(l);
                let r = known!(r);
                let a = operand_number(&l, lhs.id)?;
                let b = operand_number(&r, rhs.id)?;
                let v = match op {
                    BinaryOp::Plus => Value::Number(a + b),
                    BinaryOp::Minus => Value::Number(a - b),
                    BinaryOp::Mul => Value::Number(a * b),
                    BinaryOp::Div => Value::Number(a / b),
                    // Terraform answers `x % 0` with `x`.
                    BinaryOp::Mod if b == 0.0 => Value::Number(a),
                    BinaryOp::Mod => Value::Number(a % b),
                    BinaryOp::Less => Value::Bool(a < b),
                    BinaryOp::LessEq => Value::Bool(a <= b),
                    BinaryOp::Greater => Value::Bool(a > b),
                    BinaryOp::GreaterEq => Value::Bool(a >= b),
                    BinaryOp::Eq | BinaryOp::NotEq | BinaryOp::And | BinaryOp::Or => {
                        unreachable!("handled above")
                    }
                };
                if let Value::Number(n) = v {
                    if n.is_nan() {
                        return Err(error(node, "Operation failed: the result is not a number"));
                    }
                }
                Ok(v)
            }
        }
    }

    /// Runs `body` once per element of `collection` with the iterator names bound.
    fn for_each(
        &mut self,
        node: NodeId,
        collection: Value,
        key_var: Option<&str>,
        value_var: &str,
        mut body: impl FnMut(&mut Self) -> R<bool>,
    ) -> R<()> {
        let pairs: Vec<(Value, Value)> = match collection {
            Value::List(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (Value::Number(i as f64), v))
                .collect(),
            Value::Set(items) => items.into_iter().map(|v| (v.clone(), v)).collect(),
            Value::Map(map) => map
                .into_iter()
                .map(|(k, v)| (Value::String(k), v))
                .collect(),
            Value::Null => {
                return Err(error(
                    node,
                    "Iteration over null value: a null value cannot be used as the collection in a 'for' expression",
                ))
            }
            other => {
                return Err(error(
                    node,
                    format!(
                        "Iteration over non-iterable value: a value of type {} cannot be used as the collection in a 'for' expression",
                        other.type_name()
                    ),
                ))
            }
        };
        let mark = self.bindings.len();
        for (k, v) in pairs {
            self.charge(node, 1)?;
            if let Some(kv) = key_var {
                self.bindings.push((kv.to_string(), k));
            }
            self.bindings.push((value_var.to_string(), v));
            let more = body(self);
            self.bindings.truncate(mark);
            if !more? {
                break;
            }
        }
        Ok(())
    }

    fn eval_for(&mut self, node: NodeId, f: &ForExpr) -> R<Value> {
        let collection = self.eval(&f.collection)?;
        let collection = known!(collection);
        let mut unknown: Option<Value> = None;
        let mut list = Vec::new();
        let mut object: BTreeMap<String, Value> = BTreeMap::new();
        let mut groups: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        let mut count = 0usize;
        self.for_each(
            f.collection.id,
            collection,
            f.key_var.as_deref(),
            &f.value_var,
            |ev| {
                if let Some(cond) = &f.cond {
                    match ev.eval(cond)? {
                        Value::Unknown(u) => {
                            unknown = Some(Value::Unknown(u));
                            return Ok(false);
                        }
                        Value::Null => {
                            return Err(error(
                                cond.id,
                                "Condition is null: the value of the 'if' clause must not be null",
                            ))
                        }
                        c => {
                            if !to_bool(&c).map_err(|m| {
                                error(cond.id, format!("Invalid 'for' condition: {m}"))
                            })? {
                                return Ok(true);
                            }
                        }
                    }
                }
                count += 1;
                if count > limits::MAX_ELEMENTS {
                    return Err(limit(node, "the 'for' expression produces too many elements"));
                }
                match &f.key_expr {
                    None => list.push(ev.eval(&f.value_expr)?),
                    Some(key_expr) => {
                        let key = match ev.eval(key_expr)? {
                            Value::Unknown(u) => {
                                unknown = Some(Value::Unknown(u));
                                return Ok(false);
                            }
                            Value::Null => {
                                return Err(error(
                                    key_expr.id,
                                    "Invalid object key: key expression result must not be null",
                                ))
                            }
                            k => to_string_primitive(&k).map_err(|m| {
                                error(key_expr.id, format!("Invalid object key: {m}"))
                            })?,
                        };
                        let value = ev.eval(&f.value_expr)?;
                        if f.grouping {
                            groups.entry(key).or_default().push(value);
                        } else {
                            match object.entry(key) {
                                std::collections::btree_map::Entry::Occupied(e) => {
                                    return Err(error(
                                        key_expr.id,
                                        format!(
                                            "Duplicate object key: Two different items produced the key \"{}\" in this 'for' expression. If duplicates are expected, use the ellipsis (...) after the value expression to enable grouping by key.",
                                            e.key()
                                        ),
                                    ));
                                }
                                std::collections::btree_map::Entry::Vacant(e) => {
                                    e.insert(value);
                                }
                            }
                        }
                    }
                }
                Ok(true)
            },
        )?;
        if let Some(u) = unknown {
            return Ok(u);
        }
        Ok(match (&f.key_expr, f.grouping) {
            (None, _) => Value::List(list),
            (Some(_), false) => Value::Map(object.into()),
            (Some(_), true) => Value::Map(
                groups
                    .into_iter()
                    .map(|(k, v)| (k, Value::List(v)))
                    .collect(),
            ),
        })
    }

    pub(crate) fn eval_template(&mut self, node: NodeId, parts: &[TemplatePart]) -> R<Value> {
        // `"${x}"` is `x` itself, whatever its type.
        if let [TemplatePart::Interpolation(e)] = parts {
            return self.eval(e);
        }
        let mut out = String::new();
        match self.render_parts(node, parts, &mut out)? {
            Some(u) => Ok(u),
            None => Ok(Value::String(out)),
        }
    }

    /// Appends the rendered parts to `out`; returns the first unknown met, if any.
    fn render_parts(
        &mut self,
        node: NodeId,
        parts: &[TemplatePart],
        out: &mut String,
    ) -> R<Option<Value>> {
        self.enter(node)?;
        let result = self.render_parts_inner(node, parts, out);
        self.leave();
        result
    }

    fn render_parts_inner(
        &mut self,
        node: NodeId,
        parts: &[TemplatePart],
        out: &mut String,
    ) -> R<Option<Value>> {
        for part in parts {
            match part {
                TemplatePart::Literal(s) => push_limited(out, s, node)?,
                TemplatePart::Interpolation(e) => match self.eval(e)? {
                    u @ Value::Unknown(_) => return Ok(Some(u)),
                    Value::Null => {
                        return Err(error(
                            e.id,
                            "Invalid template interpolation value: the expression result is null. Cannot include a null value in a string template.",
                        ))
                    }
                    v => {
                        let s = to_string_primitive(&v).map_err(|_| {
                            error(
                                e.id,
                                format!(
                                    "Invalid template interpolation value: cannot include the given value in a string template: string required, but have {}.",
                                    v.type_name()
                                ),
                            )
                        })?;
                        self.charge(node, (s.len() / 16) as u64)?;
                        push_limited(out, &s, node)?;
                    }
                },
                TemplatePart::If {
                    cond,
                    then,
                    otherwise,
                } => {
                    let c = match self.eval(cond)? {
                        u @ Value::Unknown(_) => return Ok(Some(u)),
                        Value::Null => {
                            return Err(error(
                                cond.id,
                                "Invalid 'if' directive: the condition value is null",
                            ))
                        }
                        c => to_bool(&c).map_err(|m| {
                            error(cond.id, format!("Invalid 'if' directive condition: {m}"))
                        })?,
                    };
                    let branch = if c { then } else { otherwise };
                    if let Some(u) = self.render_parts(node, branch, out)? {
                        return Ok(Some(u));
                    }
                }
                TemplatePart::For {
                    key_var,
                    value_var,
                    collection,
                    body,
                } => {
                    let coll = match self.eval(collection)? {
                        u @ Value::Unknown(_) => return Ok(Some(u)),
                        c => c,
                    };
                    let mut unknown = None;
                    self.for_each(
                        collection.id,
                        coll,
                        key_var.as_deref(),
                        value_var,
                        |ev| match ev.render_parts(node, body, out)? {
                            Some(u) => {
                                unknown = Some(u);
                                Ok(false)
                            }
                            None => Ok(true),
                        },
                    )?;
                    if unknown.is_some() {
                        return Ok(unknown);
                    }
                }
            }
        }
        Ok(None)
    }

    /// A root name: a `for` iterator, then the context scope.
    fn lookup_root(&self, name: &str) -> Option<(&Value, bool)> {
        if let Some((_, v)) = self.bindings.iter().rev().find(|(n, _)| n == name) {
            return Some((v, false));
        }
        if let Some((_, v)) = self.ctx.extra.iter().find(|(n, _)| n == name) {
            return Some((v, true));
        }
        self.ctx.scope.get(name).map(|v| (v, true))
    }

    fn eval_reference(&mut self, expr: &Expr) -> R<Value> {
        let (root, ops): (&Expr, &[Traverser]) = match &expr.kind {
            ExprKind::Traversal(root, ops) => (root, ops),
            _ => (expr, &[]),
        };
        // Index keys do not depend on the element, so evaluate them once, up front.
        let mut keys = Vec::with_capacity(ops.len());
        for op in ops {
            keys.push(match op {
                Traverser::Index(k) => Some((self.eval(k)?, k.id)),
                _ => None,
            });
        }
        let mut value = match &root.kind {
            ExprKind::Variable(name) => match self.lookup_root(name) {
                Some((v, from_scope)) => {
                    let result = self.walk_borrowed(expr, v, from_scope, name, ops, &keys)?;
                    match result {
                        Walked::Done(v) => v,
                        Walked::Splat(v, at) => {
                            self.apply_ops(expr.id, v, &ops[at..], &keys[at..])?
                        }
                    }
                }
                None if self.strict_roots => {
                    return Err(error(
                        root.id,
                        format!(
                        "Invalid template variable: the vars map does not contain key \"{name}\"."
                    ),
                    ))
                }
                None => {
                    let text = expr
                        .as_reference()
                        .unwrap_or_else(|| name.as_str().to_owned());
                    Value::unknown(format!("`{text}` is only known after apply"))
                }
            },
            _ => {
                let v = self.eval(root)?;
                self.apply_ops(expr.id, v, ops, &keys)?
            }
        };
        self.charge_value(expr.id, &value)?;
        value.stamp_unknowns(expr.id);
        Ok(value)
    }

    /// Follows attribute and index steps without copying, up to the first splat.
    fn walk_borrowed(
        &self,
        expr: &Expr,
        root: &Value,
        from_scope: bool,
        name: &str,
        ops: &[Traverser],
        keys: &[Option<(Value, NodeId)>],
    ) -> R<Walked> {
        let mut cur = root;
        for (i, op) in ops.iter().enumerate() {
            let step = match op {
                Traverser::AttrSplat | Traverser::FullSplat => {
                    return Ok(Walked::Splat(cur.clone(), i));
                }
                Traverser::Attr(attr) => {
                    if let Value::Map(map) = cur {
                        if let Some(v) = map.get(attr.as_str()) {
                            cur = v;
                            continue;
                        }
                        if i == 0 && from_scope {
                            return Err(error(expr.id, format!("`{name}.{attr}` is not declared")));
                        }
                    }
                    get_attr(expr.id, cur, attr)
                }
                Traverser::LegacyIndex(n) => index(expr.id, cur, &Value::Number(*n as f64)),
                Traverser::Index(_) => {
                    let (key, key_id) = keys[i].as_ref().expect("index keys are evaluated");
                    index(*key_id, cur, key)
                }
            };
            match step? {
                Step::Borrowed(v) => cur = v,
                Step::Owned(v) => return Ok(Walked::Done(v)),
            }
        }
        Ok(Walked::Done(cur.clone()))
    }

    /// Applies traversal steps to an owned value, splats included.
    fn apply_ops(
        &mut self,
        node: NodeId,
        mut value: Value,
        ops: &[Traverser],
        keys: &[Option<(Value, NodeId)>],
    ) -> R<Value> {
        let mut i = 0;
        while i < ops.len() {
            value = known!(value);
            match &ops[i] {
                Traverser::Attr(attr) => value = get_attr(node, &value, attr)?.into_owned(),
                Traverser::LegacyIndex(n) => {
                    value = index(node, &value, &Value::Number(*n as f64))?.into_owned()
                }
                Traverser::Index(_) => {
                    let (key, key_id) = keys[i].as_ref().expect("index keys are evaluated");
                    value = index(*key_id, &value, key)?.into_owned();
                }
                splat @ (Traverser::AttrSplat | Traverser::FullSplat) => {
                    // `.*` takes only the attribute steps that follow; `[*]` takes them all.
                    let end = if matches!(splat, Traverser::AttrSplat) {
                        ops[i + 1..]
                            .iter()
                            .position(|o| !matches!(o, Traverser::Attr(_)))
                            .map_or(ops.len(), |p| i + 1 + p)
                    } else {
                        ops.len()
                    };
                    let items = match value {
                        Value::Null => Vec::new(),
                        Value::List(items) | Value::Set(items) => items,
                        other => vec![other],
                    };
                    let mut out = Vec::with_capacity(items.len());
                    for item in items {
                        self.charge(node, 1)?;
                        self.enter(node)?;
                        let r = self.apply_ops(node, item, &ops[i + 1..end], &keys[i + 1..end]);
                        self.leave();
                        out.push(r?);
                    }
                    value = Value::List(out);
                    i = end;
                    continue;
                }
            }
            i += 1;
        }
        Ok(value)
    }
}

enum Walked {
    Done(Value),
    /// Reached a splat at this op index; the value is the splat's source.
    Splat(Value, usize),
}

pub(crate) enum Step<'v> {
    Borrowed(&'v Value),
    Owned(Value),
}

impl Step<'_> {
    fn into_owned(self) -> Value {
        match self {
            Step::Borrowed(v) => v.clone(),
            Step::Owned(v) => v,
        }
    }
}

fn get_attr<'v>(node: NodeId, value: &'v Value, attr: &str) -> R<Step<'v>> {
    match value {
        Value::Unknown(_) => Ok(Step::Owned(value.clone())),
        Value::Map(map) => map.get(attr).map(Step::Borrowed).ok_or_else(|| {
            error(
                node,
                format!("Unsupported attribute: this object does not have an attribute named \"{attr}\"."),
            )
        }),
        Value::Null => Err(error(
            node,
            format!("Attempt to get attribute from null value: this value is null, so it does not have an attribute named \"{attr}\"."),
        )),
        Value::List(_) | Value::Set(_) => Err(error(
            node,
            format!("Unsupported attribute: can't access attributes on a list of objects. Did you mean to access attribute \"{attr}\" for a specific element of the list, or across all elements of the list?"),
        )),
        other => Err(error(
            node,
            format!(
                "Unsupported attribute: can't access attributes on a primitive-typed value ({}).",
                other.type_name()
            ),
        )),
    }
}

pub(crate) fn index<'v>(node: NodeId, value: &'v Value, key: &Value) -> R<Step<'v>> {
    if value.is_unknown() {
        return Ok(Step::Owned(value.clone()));
    }
    if key.is_unknown() {
        return Ok(Step::Owned(key.clone()));
    }
    if matches!(key, Value::Null) {
        return Err(error(
            node,
            "Invalid index: can't use a null value as an indexing key.",
        ));
    }
    match value {
        Value::List(items) => {
            let n = match key {
                Value::Number(n) => *n,
                Value::String(s) => to_number(&Value::String(s.clone())).map_err(|_| {
                    error(node, "Invalid index: the given key does not identify an element in this collection value: a number is required.")
                })?,
                _ => return Err(error(node, "Invalid index: the given key does not identify an element in this collection value: a number is required.")),
            };
            if n.fract() != 0.0 {
                return Err(error(node, "Invalid index: the given key does not identify an element in this collection value: indexing a sequence requires a whole number, but the given index has a fractional part."));
            }
            if n < 0.0 {
                return Err(error(node, "Invalid index: the given key does not identify an element in this collection value: a negative number is not a valid index for a sequence."));
            }
            items.get(n as usize).map(Step::Borrowed).ok_or_else(|| {
                error(node, "Invalid index: the given key does not identify an element in this collection value.")
            })
        }
        Value::Map(map) => {
            let k = to_string_primitive(key).map_err(|_| {
                error(node, "Invalid index: the given key does not identify an element in this collection value: string required.")
            })?;
            map.get(&k).map(Step::Borrowed).ok_or_else(|| {
                error(node, format!("Invalid index: the given key does not identify an element in this collection value (no key \"{k}\")."))
            })
        }
        Value::Set(_) => Err(error(node, "Invalid index: elements of a set are identified only by their value and don't have any separate index or key to select with, so it's only possible to perform operations across all elements of the set.")),
        Value::Null => Err(error(node, "Attempt to index null value: this value is null, so it does not have any indices.")),
        other => Err(error(node, format!("Invalid index: this value does not have any indices (it is a {}).", other.type_name()))),
    }
}

fn operand_number(v: &Value, node: NodeId) -> R<f64> {
    match v {
        Value::Null => Err(error(node, "Operation failed: argument must not be null.")),
        other => to_number(other)
            .map_err(|m| error(node, format!("Invalid operand: unsuitable value: {m}."))),
    }
}

fn operand_bool(v: &Value, node: NodeId) -> R<bool> {
    match v {
        Value::Null => Err(error(node, "Operation failed: argument must not be null.")),
        other => to_bool(other)
            .map_err(|m| error(node, format!("Invalid operand: unsuitable value: {m}."))),
    }
}

/// Terraform's `==`: no conversion between types; unknown if either side has unknowns.
pub(crate) fn values_equal(a: &Value, b: &Value) -> Result<bool, Value> {
    if let Some(u) = a.first_unknown().or_else(|| b.first_unknown()) {
        return Err(Value::Unknown(u.clone()));
    }
    Ok(total_cmp(a, b).is_eq())
}

/// Appends to a string under the size cap.
pub(crate) fn push_limited(out: &mut String, s: &str, node: NodeId) -> R<()> {
    if out.len() + s.len() > limits::MAX_STRING {
        return Err(limit(node, "the string would be longer than 16 MiB"));
    }
    out.push_str(s);
    Ok(())
}

/// Budget units for a value: one per node plus one per 16 bytes of string.
pub(crate) fn value_weight(v: &Value) -> u64 {
    // Most values are scalars: no stack to allocate.
    match v {
        Value::String(s) => return 1 + (s.len() / 16) as u64,
        Value::List(_) | Value::Set(_) | Value::Map(_) => {}
        _ => return 1,
    }
    let mut n = 0u64;
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        n += 1;
        match v {
            Value::String(s) => n += (s.len() / 16) as u64,
            Value::List(items) | Value::Set(items) => stack.extend(items.iter()),
            Value::Map(map) => {
                n += map.len() as u64;
                stack.extend(map.values())
            }
            _ => {}
        }
    }
    n
}
