//! Lowers `hcl_edit` expressions and templates into [`Expr`] for text that only exists at
//! evaluation time: the contents of `templatefile` files and `templatestring` arguments
//! (and, in tests, expression snippets). Node ids are pre-order indexes, as in the
//! configuration lowering, but they point into that text, so callers re-point errors at
//! the call.

use hcl_edit::expr::{
    BinaryOperator, Expression, ObjectKey as HclKey, TraversalOperator, UnaryOperator,
};
use hcl_edit::template::{Directive, Element, Template};

use crate::facts::expr::{
    BinaryOp, Expr, ExprKind, ForExpr, NodeId, Num, ObjectKey, TemplatePart, Traverser, UnaryOp,
};

/// Parses a template (the body of a template file) into its parts.
pub(crate) fn parse_template(text: &str) -> Result<Vec<TemplatePart>, String> {
    let template = hcl_edit::parser::parse_template(text).map_err(|e| e.to_string())?;
    let mut lower = Lower { next: 0, depth: 0 };
    lower.template(&template)
}

/// Parses one expression.
#[cfg(test)]
pub(crate) fn parse_expr(text: &str) -> Result<Expr, String> {
    let expr = hcl_edit::parser::parse_expr(text).map_err(|e| e.to_string())?;
    let mut lower = Lower { next: 0, depth: 0 };
    lower.expr(&expr)
}

struct Lower {
    next: u32,
    depth: usize,
}

/// Deeper syntax than this is refused rather than lowered (the evaluator's own limit is
/// lower, so it would refuse it anyway).
const MAX_SYNTAX_DEPTH: usize = 512;

impl Lower {
    fn id(&mut self) -> NodeId {
        let id = NodeId(self.next);
        self.next += 1;
        id
    }

    fn expr(&mut self, e: &Expression) -> Result<Expr, String> {
        self.depth += 1;
        if self.depth > MAX_SYNTAX_DEPTH {
            return Err("the template is nested too deeply".into());
        }
        let r = self.expr_inner(e);
        self.depth -= 1;
        r
    }

    fn expr_inner(&mut self, e: &Expression) -> Result<Expr, String> {
        let id = self.id();
        let kind = match e {
            Expression::Null(_) => ExprKind::Null,
            Expression::Bool(b) => ExprKind::Bool(*b.value()),
            Expression::Number(n) => {
                ExprKind::Number(Num::new(n.value().as_f64().unwrap_or(f64::NAN)))
            }
            Expression::String(s) => ExprKind::String(s.value().clone()),
            Expression::Array(items) => ExprKind::Array(
                items
                    .iter()
                    .map(|i| self.expr(i))
                    .collect::<Result<_, _>>()?,
            ),
            Expression::Object(obj) => {
                let mut out = Vec::new();
                for (k, v) in obj.iter() {
                    let key = match k {
                        HclKey::Ident(i) => ObjectKey::Ident(i.value().to_string()),
                        HclKey::Expression(Expression::Variable(v)) => {
                            ObjectKey::Ident(v.value().to_string())
                        }
                        HclKey::Expression(e) => ObjectKey::Expr(self.expr(e)?),
                    };
                    out.push((key, self.expr(v.expr())?));
                }
                ExprKind::Object(out)
            }
            Expression::StringTemplate(t) => ExprKind::Template(self.template(t)?),
            Expression::HeredocTemplate(h) => {
                let mut h = (**h).clone();
                if h.indent().is_some() {
                    h.dedent();
                }
                ExprKind::Template(self.template(&h.template)?)
            }
            Expression::Parenthesis(p) => ExprKind::Paren(Box::new(self.expr(p.inner())?)),
            Expression::Variable(v) => ExprKind::Variable(v.value().to_string()),
            Expression::Conditional(c) => ExprKind::Conditional(
                Box::new(self.expr(&c.cond_expr)?),
                Box::new(self.expr(&c.true_expr)?),
                Box::new(self.expr(&c.false_expr)?),
            ),
            Expression::FuncCall(f) => {
                let mut name = String::new();
                for ns in &f.name.namespace {
                    name.push_str(ns.value());
                    name.push_str("::");
                }
                name.push_str(f.name.name.value());
                ExprKind::FuncCall {
                    name,
                    args: f
                        .args
                        .iter()
                        .map(|a| self.expr(a))
                        .collect::<Result<_, _>>()?,
                    expand_final: f.args.expand_final(),
                }
            }
            Expression::Traversal(t) => {
                let root = self.expr(&t.expr)?;
                let mut ops = Vec::new();
                for op in &t.operators {
                    ops.push(match op.value() {
                        TraversalOperator::AttrSplat(_) => Traverser::AttrSplat,
                        TraversalOperator::FullSplat(_) => Traverser::FullSplat,
                        TraversalOperator::GetAttr(a) => Traverser::Attr(a.value().to_string()),
                        TraversalOperator::Index(e) => Traverser::Index(self.expr(e)?),
                        TraversalOperator::LegacyIndex(i) => Traverser::LegacyIndex(*i.value()),
                    });
                }
                ExprKind::Traversal(Box::new(root), ops)
            }
            Expression::UnaryOp(u) => {
                let op = match u.operator.value() {
                    UnaryOperator::Neg => UnaryOp::Neg,
                    UnaryOperator::Not => UnaryOp::Not,
                };
                ExprKind::Unary(op, Box::new(self.expr(&u.expr)?))
            }
            Expression::BinaryOp(b) => {
                let op = match b.operator.value() {
                    BinaryOperator::Eq => BinaryOp::Eq,
                    BinaryOperator::NotEq => BinaryOp::NotEq,
                    BinaryOperator::LessEq => BinaryOp::LessEq,
                    BinaryOperator::GreaterEq => BinaryOp::GreaterEq,
                    BinaryOperator::Less => BinaryOp::Less,
                    BinaryOperator::Greater => BinaryOp::Greater,
                    BinaryOperator::Plus => BinaryOp::Plus,
                    BinaryOperator::Minus => BinaryOp::Minus,
                    BinaryOperator::Mul => BinaryOp::Mul,
                    BinaryOperator::Div => BinaryOp::Div,
                    BinaryOperator::Mod => BinaryOp::Mod,
                    BinaryOperator::And => BinaryOp::And,
                    BinaryOperator::Or => BinaryOp::Or,
                };
                ExprKind::Binary(
                    op,
                    Box::new(self.expr(&b.lhs_expr)?),
                    Box::new(self.expr(&b.rhs_expr)?),
                )
            }
            Expression::ForExpr(f) => {
                let collection = self.expr(&f.intro.collection_expr)?;
                let key_expr = match &f.key_expr {
                    Some(k) => Some(self.expr(k)?),
                    None => None,
                };
                let value_expr = self.expr(&f.value_expr)?;
                let cond = match &f.cond {
                    Some(c) => Some(self.expr(&c.expr)?),
                    None => None,
                };
                ExprKind::For(Box::new(ForExpr {
                    key_var: f.intro.key_var.as_ref().map(|k| k.value().to_string()),
                    value_var: f.intro.value_var.value().to_string(),
                    collection,
                    key_expr,
                    value_expr,
                    cond,
                    grouping: f.grouping,
                }))
            }
        };
        Ok(Expr { id, kind })
    }

    fn template(&mut self, t: &Template) -> Result<Vec<TemplatePart>, String> {
        self.depth += 1;
        if self.depth > MAX_SYNTAX_DEPTH {
            return Err("the template is nested too deeply".into());
        }
        let r = self.template_inner(t);
        self.depth -= 1;
        r
    }

    fn template_inner(&mut self, t: &Template) -> Result<Vec<TemplatePart>, String> {
        // (part, strip whitespace before it, strip whitespace after it)
        let mut parts: Vec<(TemplatePart, bool, bool)> = Vec::new();
        for el in t.iter() {
            match el {
                Element::Literal(s) => {
                    parts.push((TemplatePart::Literal(s.value().clone()), false, false))
                }
                Element::Interpolation(i) => parts.push((
                    TemplatePart::Interpolation(self.expr(&i.expr)?),
                    i.strip.strip_start(),
                    i.strip.strip_end(),
                )),
                Element::Directive(d) => match &**d {
                    Directive::If(d) => {
                        let cond = self.expr(&d.if_expr.cond_expr)?;
                        let mut then = self.template(&d.if_expr.template)?;
                        let mut otherwise = match &d.else_expr {
                            Some(e) => self.template(&e.template)?,
                            None => Vec::new(),
                        };
                        if d.if_expr.strip.strip_end() {
                            strip_first(&mut then);
                        }
                        match &d.else_expr {
                            Some(e) => {
                                if e.strip.strip_start() {
                                    strip_last(&mut then);
                                }
                                if e.strip.strip_end() {
                                    strip_first(&mut otherwise);
                                }
                                if d.endif_expr.strip.strip_start() {
                                    strip_last(&mut otherwise);
                                }
                            }
                            None => {
                                if d.endif_expr.strip.strip_start() {
                                    strip_last(&mut then);
                                }
                            }
                        }
                        parts.push((
                            TemplatePart::If {
                                cond,
                                then,
                                otherwise,
                            },
                            d.if_expr.strip.strip_start(),
                            d.endif_expr.strip.strip_end(),
                        ));
                    }
                    Directive::For(d) => {
                        let collection = self.expr(&d.for_expr.collection_expr)?;
                        let mut body = self.template(&d.for_expr.template)?;
                        if d.for_expr.strip.strip_end() {
                            strip_first(&mut body);
                        }
                        if d.endfor_expr.strip.strip_start() {
                            strip_last(&mut body);
                        }
                        parts.push((
                            TemplatePart::For {
                                key_var: d.for_expr.key_var.as_ref().map(|k| k.value().to_string()),
                                value_var: d.for_expr.value_var.value().to_string(),
                                collection,
                                body,
                            },
                            d.for_expr.strip.strip_start(),
                            d.endfor_expr.strip.strip_end(),
                        ));
                    }
                },
            }
        }
        for i in 0..parts.len() {
            let (before, after) = (parts[i].1, parts[i].2);
            if before && i > 0 {
                if let TemplatePart::Literal(s) = &mut parts[i - 1].0 {
                    *s = s.trim_end().to_string();
                }
            }
            if after && i + 1 < parts.len() {
                if let TemplatePart::Literal(s) = &mut parts[i + 1].0 {
                    *s = s.trim_start().to_string();
                }
            }
        }
        Ok(parts.into_iter().map(|(p, _, _)| p).collect())
    }
}

fn strip_first(parts: &mut [TemplatePart]) {
    if let Some(TemplatePart::Literal(s)) = parts.first_mut() {
        *s = s.trim_start().to_string();
    }
}

fn strip_last(parts: &mut [TemplatePart]) {
    if let Some(TemplatePart::Literal(s)) = parts.last_mut() {
        *s = s.trim_end().to_string();
    }
}
