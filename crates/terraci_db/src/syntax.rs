//! The syntax tree every stage shares: span-free expressions and the bodies facts are
//! read from. It imports no other stage: the parser builds it, facts, evaluation and
//! resolution read it, and diagnostics point into it by [`NodeId`].
//!
//! Input: an `hcl_edit` expression (native syntax) or a JSON value (JSON syntax), lowered
//! by `terraci_engine::parse` and `terraci_engine::facts`. Output: [`Expr`], which is `Eq + Hash` and
//! carries no byte offsets, so a whitespace or comment edit produces an equal tree and
//! salsa backdates everything downstream; and [`FactBody`], a native file's attributes
//! and blocks as fact extraction reads them.
//!
//! Every node has a [`NodeId`]: its pre-order index within the attribute expression it
//! belongs to. Diagnostics carry node ids; the line and column are looked up at the edge
//! by `terraci_engine::parse::locate`, which lowers the same attribute again and reads the
//! span recorded for that index. Lowering is the single place that assigns ids, so the two
//! can never disagree.

use std::fmt;

/// An identifier, object key, function name or literal of the tree. Nearly all are
/// shorter than 24 bytes (`local`, `path_arr`, `bucket`, `"/"`), and every fact's tree
/// is alive for the whole run: stored inline, such a string costs no heap block of its
/// own on top of its 24 bytes (a `String` costs both). Derefs to `&str`.
pub type Name = compact_str::CompactString;

/// Pre-order index of a node inside one attribute's expression (root = 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NodeId(pub u32);

/// A number literal. Stored as the `f64` bit pattern so the tree can be `Eq + Hash`.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Num(u64);

impl Num {
    pub fn new(value: f64) -> Self {
        Num(value.to_bits())
    }
    pub fn get(self) -> f64 {
        f64::from_bits(self.0)
    }
}

impl fmt::Debug for Num {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.get())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Expr {
    pub id: NodeId,
    pub kind: ExprKind,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ExprKind {
    Null,
    Bool(bool),
    Number(Num),
    /// A string without interpolation.
    String(Name),
    /// A quoted or heredoc template with at least one interpolation or directive.
    Template(Vec<TemplatePart>),
    Array(Vec<Expr>),
    Object(Vec<(ObjectKey, Expr)>),
    /// A bare identifier: `var`, `local`, `each`, `path`, `count`, `terraform`, `data`, a
    /// `for` iterator variable, ...
    Variable(Name),
    /// `root.attr[index].*` and friends, applied left to right.
    Traversal(Box<Expr>, Vec<Traverser>),
    /// Boxed: the largest variant otherwise, it made every node of every tree 64 bytes
    /// instead of 40.
    FuncCall(Box<Call>),
    Conditional(Box<Expr>, Box<Expr>, Box<Expr>),
    Unary(UnaryOp, Box<Expr>),
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    For(Box<ForExpr>),
    /// `( expr )`: kept because Terraform treats a parenthesised object key as an expression.
    Paren(Box<Expr>),
}

/// A function call: `name(args...)`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Call {
    pub name: Name,
    pub args: Vec<Expr>,
    /// `f(args...)`: the last argument is expanded into the argument list.
    pub expand_final: bool,
}

impl Call {
    /// The call as an expression kind.
    pub fn kind(name: Name, args: Vec<Expr>, expand_final: bool) -> ExprKind {
        ExprKind::FuncCall(Box::new(Call {
            name,
            args,
            expand_final,
        }))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ObjectKey {
    /// `name = ...`: a bare identifier key (a literal string, not a variable reference).
    Ident(Name),
    /// Any other key: a quoted string, template or `(expr)`.
    Expr(Expr),
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Traverser {
    /// `.name`
    Attr(Name),
    /// `[expr]`
    Index(Expr),
    /// `.0` (legacy index syntax)
    LegacyIndex(u64),
    /// `.*`: attribute-only splat
    AttrSplat,
    /// `[*]`: full splat
    FullSplat,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Not,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Eq,
    NotEq,
    LessEq,
    GreaterEq,
    Less,
    Greater,
    Plus,
    Minus,
    Mul,
    Div,
    Mod,
    And,
    Or,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ForExpr {
    pub key_var: Option<Name>,
    pub value_var: Name,
    pub collection: Expr,
    /// `Some` makes the result an object (`{for ...: k => v}`), `None` a tuple.
    pub key_expr: Option<Expr>,
    pub value_expr: Expr,
    pub cond: Option<Expr>,
    /// `...` after the value: group values with the same key into lists.
    pub grouping: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TemplatePart {
    Literal(Name),
    Interpolation(Expr),
    If {
        cond: Expr,
        then: Vec<TemplatePart>,
        otherwise: Vec<TemplatePart>,
    },
    For {
        key_var: Option<Name>,
        value_var: Name,
        collection: Expr,
        body: Vec<TemplatePart>,
    },
}

impl Expr {
    /// A literal string node, used where syntax gives a plain string (JSON keys, block labels).
    pub fn string(id: NodeId, s: impl Into<Name>) -> Expr {
        Expr {
            id,
            kind: ExprKind::String(s.into()),
        }
    }

    /// `a.b.c` written as a dotted reference, for messages ("`var.env` has no value").
    /// Returns `None` if the expression is not a plain attribute traversal of a variable.
    pub fn as_reference(&self) -> Option<String> {
        match &self.kind {
            ExprKind::Variable(name) => Some(name.as_str().to_owned()),
            ExprKind::Traversal(root, ops) => {
                let mut out = root.as_reference()?;
                for op in ops {
                    match op {
                        Traverser::Attr(a) => {
                            out.push('.');
                            out.push_str(a);
                        }
                        Traverser::LegacyIndex(i) => {
                            out.push_str(&format!("[{i}]"));
                        }
                        Traverser::Index(e) => match &e.kind {
                            ExprKind::String(s) => out.push_str(&format!("[\"{s}\"]")),
                            ExprKind::Number(n) => out.push_str(&format!("[{}]", n.get())),
                            _ => out.push_str("[...]"),
                        },
                        Traverser::AttrSplat => out.push_str(".*"),
                        Traverser::FullSplat => out.push_str("[*]"),
                    }
                }
                Some(out)
            }
            _ => None,
        }
    }
}

/// Defines a pre-order walk over an expression's nodes, through shared or unique
/// references: the one place that fixes the order in which children are visited, which
/// is the order node ids are numbered in.
macro_rules! pre_order {
    ($walk:ident, $parts:ident $(, $m:ident)?) => {
        /// Calls `f` on every node of `e`, pre-order.
        pub fn $walk(e: &$($m)? Expr, f: &mut dyn FnMut(&$($m)? Expr)) {
            f(e);
            match &$($m)? e.kind {
                ExprKind::Template(ps) => $parts(ps, f),
                ExprKind::Array(items) => {
                    for i in items {
                        $walk(i, f);
                    }
                }
                ExprKind::Object(entries) => {
                    for (k, v) in entries {
                        if let ObjectKey::Expr(k) = k {
                            $walk(k, f);
                        }
                        $walk(v, f);
                    }
                }
                ExprKind::Traversal(root, ops) => {
                    $walk(root, f);
                    for op in ops {
                        if let Traverser::Index(i) = op {
                            $walk(i, f);
                        }
                    }
                }
                ExprKind::FuncCall(call) => {
                    for a in &$($m)? call.args {
                        $walk(a, f);
                    }
                }
                ExprKind::Conditional(a, b, c) => {
                    $walk(a, f);
                    $walk(b, f);
                    $walk(c, f);
                }
                ExprKind::Unary(_, a) | ExprKind::Paren(a) => $walk(a, f),
                ExprKind::Binary(_, a, b) => {
                    $walk(a, f);
                    $walk(b, f);
                }
                ExprKind::For(fe) => {
                    $walk(&$($m)? fe.collection, f);
                    if let Some(k) = &$($m)? fe.key_expr {
                        $walk(k, f);
                    }
                    $walk(&$($m)? fe.value_expr, f);
                    if let Some(c) = &$($m)? fe.cond {
                        $walk(c, f);
                    }
                }
                ExprKind::Null
                | ExprKind::Bool(_)
                | ExprKind::Number(_)
                | ExprKind::String(_)
                | ExprKind::Variable(_) => {}
            }
        }

        fn $parts(ps: &$($m)? [TemplatePart], f: &mut dyn FnMut(&$($m)? Expr)) {
            for p in ps {
                match p {
                    TemplatePart::Literal(_) => {}
                    TemplatePart::Interpolation(e) => $walk(e, f),
                    TemplatePart::If {
                        cond,
                        then,
                        otherwise,
                    } => {
                        $walk(cond, f);
                        $parts(then, f);
                        $parts(otherwise, f);
                    }
                    TemplatePart::For {
                        collection, body, ..
                    } => {
                        $walk(collection, f);
                        $parts(body, f);
                    }
                }
            }
        }
    };
}

pre_order!(visit, visit_parts);
pre_order!(visit_mut, visit_parts_mut, mut);

/// A native body as fact extraction reads it: attributes with their lowered expressions
/// (node ids from 0 within each) and blocks, in source order.
#[derive(Debug, Clone, PartialEq)]
pub struct FactBody {
    pub items: Vec<FactItem>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FactItem {
    Attribute(Name, Expr),
    Block(FactBlock),
}

#[derive(Debug, Clone, PartialEq)]
pub struct FactBlock {
    pub ident: Name,
    pub labels: Vec<Name>,
    pub body: FactBody,
}

impl FactBody {
    pub fn attributes(&self) -> impl Iterator<Item = (&str, &Expr)> {
        self.items.iter().filter_map(|i| match i {
            FactItem::Attribute(k, v) => Some((k.as_str(), v)),
            FactItem::Block(_) => None,
        })
    }

    pub fn blocks(&self) -> impl Iterator<Item = &FactBlock> {
        self.items.iter().filter_map(|i| match i {
            FactItem::Block(b) => Some(b),
            FactItem::Attribute(..) => None,
        })
    }

    /// The first attribute named `key`.
    pub fn attribute(&self, key: &str) -> Option<&Expr> {
        self.attributes().find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

impl FactBlock {
    /// The block's body as an object expression (`config { key = ... }`), numbered as
    /// the parser's lowering numbers it: the block first, then each entry in order.
    pub fn as_object(&self) -> Expr {
        self.object_from(&mut 0)
    }

    fn object_from(&self, next: &mut u32) -> Expr {
        let id = NodeId(*next);
        *next += 1;
        let entries = self
            .body
            .items
            .iter()
            .map(|item| match item {
                FactItem::Attribute(k, v) => {
                    let mut v = v.clone();
                    number_nodes(&mut v, next);
                    (ObjectKey::Ident(k.clone()), v)
                }
                FactItem::Block(b) => (ObjectKey::Ident(b.ident.clone()), b.object_from(next)),
            })
            .collect();
        Expr {
            id,
            kind: ExprKind::Object(entries),
        }
    }
}

/// Gives `e`'s nodes ids in pre-order from `*next`: the order lowering assigns them.
pub fn number_nodes(e: &mut Expr, next: &mut u32) {
    visit_mut(e, &mut |node| {
        node.id = NodeId(*next);
        *next += 1;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every fact of every file is a tree of these, alive for the whole run (about a
    /// third of the peak heap at 10,000 modules): a variant that grows the node grows
    /// every node. Box what is bigger than a pointer and a vector.
    #[test]
    fn an_expression_node_stays_small() {
        assert_eq!(std::mem::size_of::<ExprKind>(), 32);
        assert_eq!(std::mem::size_of::<Expr>(), 40);
    }

    /// A [`Name`] is as big as a `String`, and holds the usual identifier without a heap
    /// block.
    #[test]
    fn a_short_name_needs_no_heap_block() {
        assert_eq!(std::mem::size_of::<Name>(), std::mem::size_of::<String>());
        assert!(!Name::from("terraform_remote_state").is_heap_allocated());
        assert!(!Name::from("abcdefghijklmnopqrstuvwx").is_heap_allocated());
        assert!(Name::from("abcdefghijklmnopqrstuvwxy").is_heap_allocated());
    }
}
