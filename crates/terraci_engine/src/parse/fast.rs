//! The fast path of fact extraction: native syntax parsed straight into a [`FactBody`].
//!
//! Input: the text hcl-edit would be given (after the nesting check and [`super::skim`]).
//! Output: the body with every attribute already lowered, or `None`, and then hcl-edit
//! parses the text as before. hcl-edit keeps every byte of trivia and span in its tree,
//! which fact extraction then lowers and drops; this parser builds only what the facts
//! are made of.
//!
//! Soundness rests on one rule: `Some` only for text that hcl-edit accepts and lowers to
//! the same body. The parser accepts a strict subset of the syntax and declines the rest:
//! heredocs, template directives, comments inside expressions, an expression continued
//! on the next line (`a = f(x)` then a line starting with an operator or `.`), one-line
//! blocks with content, duplicate keys, non-ASCII identifiers, unusual numbers, and deep
//! nesting or long operator chains (hcl-edit's own limits are 64 levels and 128
//! operators). Whatever is declined costs only the time spent before declining. The
//! differential tests check the rule on every fixture, on generated files and on
//! mutated ones.

use super::skim::{comment_end, is_ident_continue, is_ident_start};
use super::{finish_template, number_nodes, FactBlock, FactBody, FactItem};
use terraci_db::syntax::{
    BinaryOp, Expr, ExprKind, ForExpr, Name, NodeId, Num, ObjectKey, TemplatePart, Traverser,
    UnaryOp,
};

/// Nesting levels (expressions, blocks) this parser goes into before declining.
const MAX_DEPTH: u32 = 32;

/// Binary operators in one attribute's expression before declining.
const MAX_OPERATORS: u32 = 100;

/// The body of `text`, or `None` to leave the text to hcl-edit.
pub(crate) fn parse(text: &str) -> Option<FactBody> {
    let mut p = Parser {
        text,
        b: text.as_bytes(),
        i: 0,
        depth: 0,
        operators: 0,
        blank_run: (usize::MAX, 0),
    };
    p.body(false)
}

struct Parser<'a> {
    text: &'a str,
    b: &'a [u8],
    i: usize,
    depth: u32,
    /// Binary operators seen in the current attribute.
    operators: u32,
    /// The last run of blanks measured by [`Parser::ends_expression`]: where it started
    /// and ended, so [`Parser::blank`] does not scan it again.
    blank_run: (usize, usize),
}

/// An expression with its ids still to be assigned ([`number_nodes`] does it once the
/// attribute is complete).
/// A vector that is kept for the whole run (in the facts), without its growth slack.
fn tight<T>(mut items: Vec<T>) -> Vec<T> {
    items.shrink_to_fit();
    items
}

fn node(kind: ExprKind) -> Expr {
    Expr {
        id: NodeId(0),
        kind,
    }
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn at(&self, k: usize) -> Option<u8> {
        self.b.get(self.i + k).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        let hit = self.peek() == Some(c);
        if hit {
            self.i += 1;
        }
        hit
    }

    fn expect(&mut self, c: u8) -> Option<()> {
        self.eat(c).then_some(())
    }

    fn deeper(&mut self) -> Option<()> {
        self.depth += 1;
        (self.depth <= MAX_DEPTH).then_some(())
    }

    /// Spaces and tabs.
    fn sp(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    /// A `#` or `//` comment up to (not including) its line break.
    fn line_comment(&mut self) -> Option<()> {
        let rest = &self.b[self.i..];
        let newline = rest.iter().position(|&c| c == b'\n');
        let len = newline.unwrap_or(rest.len());
        // A carriage return is a line break only right before a newline.
        match rest[..len].iter().position(|&c| c == b'\r') {
            None => {}
            Some(cr) if newline.is_some() && cr + 1 == len => {}
            Some(_) => return None,
        }
        self.i += len;
        Some(())
    }

    /// Blanks, line breaks and comments: between body items and bracketed items.
    fn blank(&mut self) -> Option<()> {
        // Every position inside a measured run that parsing stops at is a token boundary
        // (comments are consumed whole), from which the run ends at the same place.
        if (self.blank_run.0..=self.blank_run.1).contains(&self.i) {
            self.i = self.blank_run.1;
            return Some(());
        }
        loop {
            match (self.peek(), self.at(1)) {
                (Some(b' ' | b'\t' | b'\n'), _) => self.i += 1,
                (Some(b'\r'), Some(b'\n')) => self.i += 2,
                (Some(b'#'), _) | (Some(b'/'), Some(b'/')) => self.line_comment()?,
                (Some(b'/'), Some(b'*')) => self.i += 2 + comment_end(&self.b[self.i + 2..])?,
                (Some(b'\r'), _) => return None,
                _ => return Some(()),
            }
        }
    }

    /// After an expression that stopped at a line break or comment: whether the text
    /// after the blanks could continue it in hcl-edit's reading (an operator, `.`, `[`,
    /// `(`, `?`, `:` ...). Only a closing bracket, a comma, a string, an identifier or the
    /// end of the text is sure to start something else.
    fn ends_expression(&mut self) -> Option<()> {
        let start = self.i;
        self.blank()?;
        let end = self.i;
        let next = self.peek();
        self.i = start;
        self.blank_run = (start, end);
        match next {
            None | Some(b'}' | b']' | b')' | b',' | b'"') => Some(()),
            Some(c) if is_ident_start(c) => Some(()),
            _ => None,
        }
    }

    /// After an expression on its line: spaces, then what may end it. A line break or
    /// comment must not be followed by a continuation ([`Parser::ends_expression`]).
    fn after_expression(&mut self) -> Option<()> {
        self.sp();
        match (self.peek(), self.at(1)) {
            (Some(b'\n' | b'\r' | b'#'), _) | (Some(b'/'), Some(b'/' | b'*')) => {
                self.ends_expression()
            }
            _ => Some(()),
        }
    }

    /// The end of a body item: spaces, an optional line comment, then a line break (or
    /// the end of the text when `eof_ok`).
    fn line_end(&mut self, eof_ok: bool) -> Option<()> {
        self.sp();
        if matches!(
            (self.peek(), self.at(1)),
            (Some(b'#'), _) | (Some(b'/'), Some(b'/'))
        ) {
            self.line_comment()?;
        }
        match (self.peek(), self.at(1)) {
            (None, _) => eof_ok.then_some(()),
            (Some(b'\n'), _) => {
                self.i += 1;
                Some(())
            }
            (Some(b'\r'), Some(b'\n')) => {
                self.i += 2;
                Some(())
            }
            _ => None,
        }
    }

    fn ident(&mut self) -> Option<&'a str> {
        let start = self.i;
        if !self.peek().is_some_and(is_ident_start) {
            return None;
        }
        while self.peek().is_some_and(is_ident_continue) {
            self.i += 1;
        }
        // A non-ASCII character may continue a Unicode identifier: hcl-edit decides.
        if self.peek().is_some_and(|c| c >= 0x80) {
            return None;
        }
        Some(&self.text[start..self.i])
    }

    /// A body up to the end of the text, or (`nested`) up to and including its `}`.
    fn body(&mut self, nested: bool) -> Option<FactBody> {
        let mut items = Vec::new();
        let mut keys: Vec<&str> = Vec::new();
        loop {
            self.blank()?;
            match self.peek() {
                None if !nested => return Some(FactBody { items }),
                Some(b'}') if nested => {
                    self.i += 1;
                    return Some(FactBody { items });
                }
                Some(c) if is_ident_start(c) => {}
                _ => return None,
            }
            let ident = self.ident()?;
            self.sp();
            match self.peek()? {
                b'=' => {
                    if self.at(1) == Some(b'=') || keys.contains(&ident) {
                        return None;
                    }
                    keys.push(ident);
                    self.i += 1;
                    self.sp();
                    self.operators = 0;
                    let mut value = self.expr()?;
                    number_nodes(&mut value, &mut 0);
                    items.push(FactItem::Attribute(ident.into(), value));
                    self.line_end(true)?;
                }
                _ => {
                    let block = self.block(ident)?;
                    items.push(FactItem::Block(block));
                    self.line_end(true)?;
                }
            }
        }
    }

    /// A block after its type: labels, then a body on the following lines (or `{}`).
    fn block(&mut self, ident: &str) -> Option<FactBlock> {
        let mut labels = Vec::new();
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    let start = self.i;
                    loop {
                        match self.peek()? {
                            b'"' => break,
                            b'\\' | b'$' | b'%' | b'\n' | b'\r' => return None,
                            _ => self.i += 1,
                        }
                    }
                    labels.push(self.text[start..self.i].into());
                    self.i += 1;
                }
                c if is_ident_start(c) => labels.push(self.ident()?.into()),
                b'{' => break,
                _ => return None,
            }
            self.sp();
        }
        self.i += 1;
        self.sp();
        let body = if self.eat(b'}') {
            FactBody { items: Vec::new() }
        } else {
            self.line_end(false)?;
            self.deeper()?;
            let body = self.body(true)?;
            self.depth -= 1;
            body
        };
        Some(FactBlock {
            ident: ident.into(),
            labels,
            body,
        })
    }

    /// An expression: binary operations, then an optional conditional.
    fn expr(&mut self) -> Option<Expr> {
        self.deeper()?;
        let cond = self.binary()?;
        let save = self.i;
        self.sp();
        let e = if self.eat(b'?') {
            self.sp();
            let yes = self.expr()?;
            self.sp();
            self.expect(b':')?;
            self.sp();
            let no = self.expr()?;
            node(ExprKind::Conditional(
                Box::new(cond),
                Box::new(yes),
                Box::new(no),
            ))
        } else {
            self.i = save;
            cond
        };
        self.depth -= 1;
        self.after_expression()?;
        Some(e)
    }

    /// Terms joined by binary operators, grouped by precedence, left to right.
    fn binary(&mut self) -> Option<Expr> {
        let first = self.term()?;
        // Most expressions are a single term: no operator, no vectors.
        let save = self.i;
        self.sp();
        if !matches!(
            self.peek(),
            Some(b'=' | b'!' | b'<' | b'>' | b'+' | b'-' | b'*' | b'/' | b'%' | b'&' | b'|')
        ) {
            self.i = save;
            return Some(first);
        }
        self.i = save;
        let mut terms = vec![first];
        let mut ops: Vec<BinaryOp> = Vec::new();
        loop {
            let save = self.i;
            self.sp();
            let (op, len) = match (self.peek(), self.at(1)) {
                (Some(b'='), Some(b'=')) => (BinaryOp::Eq, 2),
                (Some(b'!'), Some(b'=')) => (BinaryOp::NotEq, 2),
                (Some(b'<'), Some(b'=')) => (BinaryOp::LessEq, 2),
                (Some(b'>'), Some(b'=')) => (BinaryOp::GreaterEq, 2),
                (Some(b'<'), _) => (BinaryOp::Less, 1),
                (Some(b'>'), _) => (BinaryOp::Greater, 1),
                (Some(b'+'), _) => (BinaryOp::Plus, 1),
                (Some(b'-'), _) => (BinaryOp::Minus, 1),
                (Some(b'*'), _) => (BinaryOp::Mul, 1),
                (Some(b'/'), Some(b'/' | b'*')) => {
                    self.i = save;
                    break;
                }
                (Some(b'/'), _) => (BinaryOp::Div, 1),
                (Some(b'%'), _) => (BinaryOp::Mod, 1),
                (Some(b'&'), Some(b'&')) => (BinaryOp::And, 2),
                (Some(b'|'), Some(b'|')) => (BinaryOp::Or, 2),
                (Some(b'!' | b'&' | b'|'), _) => return None,
                _ => {
                    self.i = save;
                    break;
                }
            };
            self.operators += 1;
            if self.operators > MAX_OPERATORS {
                return None;
            }
            self.i += len;
            self.sp();
            terms.push(self.term()?);
            ops.push(op);
        }
        Some(group(terms, ops))
    }

    /// An expression term with its traversals (`.attr`, `[index]`, splats).
    fn term(&mut self) -> Option<Expr> {
        self.deeper()?;
        let base = match self.peek()? {
            b'"' => self.quoted()?,
            b'[' => self.array()?,
            b'{' => self.object()?,
            b'0'..=b'9' => self.number(false)?,
            b'-' => {
                self.i += 1;
                self.sp();
                if self.peek()?.is_ascii_digit() {
                    self.number(true)?
                } else {
                    let operand = self.term()?;
                    self.depth -= 1;
                    return Some(node(ExprKind::Unary(UnaryOp::Neg, Box::new(operand))));
                }
            }
            b'!' => {
                self.i += 1;
                self.sp();
                let operand = self.term()?;
                self.depth -= 1;
                return Some(node(ExprKind::Unary(UnaryOp::Not, Box::new(operand))));
            }
            b'(' => {
                self.i += 1;
                self.blank()?;
                let inner = self.expr()?;
                self.blank()?;
                self.expect(b')')?;
                node(ExprKind::Paren(Box::new(inner)))
            }
            c if is_ident_start(c) => self.identlike()?,
            _ => return None,
        };
        let e = self.traversal(base)?;
        self.depth -= 1;
        Some(e)
    }

    fn traversal(&mut self, base: Expr) -> Option<Expr> {
        let mut ops = Vec::new();
        loop {
            let save = self.i;
            self.sp();
            match (self.peek(), self.at(1)) {
                (Some(b'.'), Some(b'.')) => {
                    self.i = save;
                    break;
                }
                (Some(b'.'), Some(b'*')) => {
                    self.i += 2;
                    ops.push(Traverser::AttrSplat);
                }
                (Some(b'.'), Some(c)) if c.is_ascii_digit() => {
                    self.i += 1;
                    let digits = self.digits();
                    if digits.len() > 15 {
                        return None;
                    }
                    ops.push(Traverser::LegacyIndex(digits.parse().ok()?));
                }
                (Some(b'.'), _) => {
                    self.i += 1;
                    ops.push(Traverser::Attr(self.ident()?.into()));
                }
                (Some(b'['), _) => {
                    self.i += 1;
                    self.blank()?;
                    if self.eat(b'*') {
                        ops.push(Traverser::FullSplat);
                    } else {
                        ops.push(Traverser::Index(self.expr()?));
                    }
                    self.blank()?;
                    self.expect(b']')?;
                }
                _ => {
                    self.i = save;
                    break;
                }
            }
        }
        Some(if ops.is_empty() {
            base
        } else {
            // Kept for the whole run: no growth slack (a one-step traversal would keep
            // room for four).
            ops.shrink_to_fit();
            node(ExprKind::Traversal(Box::new(base), ops))
        })
    }

    fn digits(&mut self) -> &'a str {
        let start = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
        }
        &self.text[start..self.i]
    }

    /// A number literal (after a `-` when `negative`). Integers of more than 15 digits and
    /// a negative zero are left to hcl-edit (its integer and float types round them
    /// differently).
    fn number(&mut self, negative: bool) -> Option<Expr> {
        let start = self.i;
        let int = self.digits();
        let mut float = false;
        if self.peek() == Some(b'.') && self.at(1).is_some_and(|c| c.is_ascii_digit()) {
            self.i += 1;
            self.digits();
            float = true;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.i += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.i += 1;
            }
            if self.digits().is_empty() {
                return None;
            }
            float = true;
        }
        let value = if float {
            let v: f64 = self.text[start..self.i].parse().ok()?;
            v.is_finite().then_some(v)?
        } else if int.len() <= 15 {
            int.parse::<u64>().ok()? as f64
        } else {
            return None;
        };
        if negative && value == 0.0 {
            return None;
        }
        Some(node(ExprKind::Number(Num::new(if negative {
            -value
        } else {
            value
        }))))
    }

    /// An identifier: a function call, `null`, `true`, `false` or a variable.
    fn identlike(&mut self) -> Option<Expr> {
        let first = self.ident()?;
        let save = self.i;
        self.sp();
        let call = matches!(
            (self.peek(), self.at(1)),
            (Some(b':'), Some(b':')) | (Some(b'('), _)
        );
        if !call {
            self.i = save;
            return Some(node(match first {
                "null" => ExprKind::Null,
                "true" => ExprKind::Bool(true),
                "false" => ExprKind::Bool(false),
                var => ExprKind::Variable(var.into()),
            }));
        }
        let mut name = Name::from(first);
        while self.peek() == Some(b':') {
            self.i += 1;
            self.expect(b':')?;
            name.push_str("::");
            name.push_str(self.ident()?);
            self.sp();
        }
        self.expect(b'(')?;
        let (args, expand_final) = self.list(b')')?;
        Some(node(terraci_db::syntax::Call::kind(
            name,
            args,
            expand_final,
        )))
    }

    /// After `[` or `{`, blanks skipped: whether a `for` expression starts here.
    fn at_for(&self) -> bool {
        self.b[self.i..].starts_with(b"for")
            && matches!(self.at(3), Some(b' ' | b'\t' | b'#' | b'/' | b'\n'))
    }

    /// After `[` or `{` (`close` is its partner): a `for` expression up to and including
    /// `close` if one starts here, else `None` with the blanks skipped.
    fn opening(&mut self, close: u8) -> Option<Option<Expr>> {
        self.i += 1;
        self.blank()?;
        if !self.at_for() {
            return Some(None);
        }
        let f = self.for_expr(close == b'}')?;
        self.expect(close)?;
        Some(Some(f))
    }

    fn array(&mut self) -> Option<Expr> {
        if let Some(f) = self.opening(b']')? {
            return Some(f);
        }
        let (items, expanded) = self.list(b']')?;
        (!expanded).then(|| node(ExprKind::Array(items)))
    }

    /// Comma-separated expressions up to and including `close`, an optional trailing
    /// comma, or `...` after the last one (whether it was there is returned).
    fn list(&mut self, close: u8) -> Option<(Vec<Expr>, bool)> {
        let mut items = Vec::new();
        self.blank()?;
        if self.eat(close) {
            return Some((tight(items), false));
        }
        loop {
            items.push(self.expr()?);
            self.blank()?;
            match self.peek()? {
                c if c == close => {
                    self.i += 1;
                    return Some((tight(items), false));
                }
                b',' => {
                    self.i += 1;
                    self.blank()?;
                    if self.eat(close) {
                        return Some((tight(items), false));
                    }
                }
                b'.' if self.b[self.i..].starts_with(b"...") => {
                    self.i += 3;
                    self.blank()?;
                    self.expect(close)?;
                    return Some((tight(items), true));
                }
                _ => return None,
            }
        }
    }

    fn object(&mut self) -> Option<Expr> {
        if let Some(f) = self.opening(b'}')? {
            return Some(f);
        }
        let mut entries: Vec<(ObjectKey, Expr)> = Vec::new();
        loop {
            self.blank()?;
            if self.eat(b'}') {
                break;
            }
            let key = match self.peek()? {
                b'"' => {
                    let key = self.quoted()?;
                    if !matches!(key.kind, ExprKind::String(_)) {
                        return None;
                    }
                    ObjectKey::Expr(key)
                }
                _ => match self.ident()? {
                    "null" | "true" | "false" | "for" => return None,
                    name => ObjectKey::Ident(name.into()),
                },
            };
            let name = match &key {
                ObjectKey::Ident(name) => name.as_str(),
                ObjectKey::Expr(Expr {
                    kind: ExprKind::String(name),
                    ..
                }) => name.as_str(),
                ObjectKey::Expr(_) => return None,
            };
            if entries.iter().any(|(k, _)| match k {
                ObjectKey::Ident(n) => n == name,
                ObjectKey::Expr(Expr {
                    kind: ExprKind::String(n),
                    ..
                }) => n == name,
                ObjectKey::Expr(_) => true,
            }) {
                return None;
            }
            self.sp();
            match (self.peek(), self.at(1)) {
                (Some(b'='), Some(b'=')) => return None,
                (Some(b'=' | b':'), _) => self.i += 1,
                _ => return None,
            }
            self.sp();
            let value = self.expr()?;
            entries.push((key, value));
            self.sp();
            match (self.peek()?, self.at(1)) {
                (b'}', _) => {
                    self.i += 1;
                    break;
                }
                (b',', _) => self.i += 1,
                (b'\n' | b'\r' | b'#', _) | (b'/', Some(b'/')) => self.line_end(false)?,
                _ => return None,
            }
        }
        Some(node(ExprKind::Object(tight(entries))))
    }

    /// `for k, v in coll : ...` after `[` (`object`: after `{`), up to its closing bracket.
    fn for_expr(&mut self, object: bool) -> Option<Expr> {
        self.i += 3;
        self.blank()?;
        let first = Name::from(self.ident()?);
        self.blank()?;
        let (key_var, value_var) = if self.eat(b',') {
            self.blank()?;
            let second = Name::from(self.ident()?);
            self.blank()?;
            (Some(first), second)
        } else {
            (None, first)
        };
        self.keyword(b"in")?;
        let collection = self.expr()?;
        self.blank()?;
        self.expect(b':')?;
        self.blank()?;
        let (key_expr, value_expr, grouping) = if object {
            let key = self.expr()?;
            self.blank()?;
            if !self.b[self.i..].starts_with(b"=>") {
                return None;
            }
            self.i += 2;
            self.blank()?;
            let value = self.expr()?;
            self.blank()?;
            let grouping = self.b[self.i..].starts_with(b"...");
            if grouping {
                self.i += 3;
                self.blank()?;
            }
            (Some(key), value, grouping)
        } else {
            let value = self.expr()?;
            self.blank()?;
            (None, value, false)
        };
        let cond = if self.b[self.i..].starts_with(b"if") {
            self.keyword(b"if")?;
            let cond = self.expr()?;
            self.blank()?;
            Some(cond)
        } else {
            None
        };
        Some(node(ExprKind::For(Box::new(ForExpr {
            key_var,
            value_var,
            collection,
            key_expr,
            value_expr,
            cond,
            grouping,
        }))))
    }

    /// `word` followed by a blank, and the blanks after it.
    fn keyword(&mut self, word: &[u8]) -> Option<()> {
        if !self.b[self.i..].starts_with(word)
            || !matches!(self.at(word.len()), Some(b' ' | b'\t' | b'\n'))
        {
            return None;
        }
        self.i += word.len();
        self.blank()
    }

    /// A quoted string: a literal, or a template with interpolations (no directives).
    fn quoted(&mut self) -> Option<Expr> {
        self.i += 1;
        let mut parts: Vec<(TemplatePart, bool, bool)> = Vec::new();
        let mut literal = Name::default();
        loop {
            let start = self.i;
            while self
                .peek()
                .is_some_and(|c| !matches!(c, b'"' | b'\\' | b'$' | b'%' | b'\n' | b'\r'))
            {
                self.i += 1;
            }
            literal.push_str(&self.text[start..self.i]);
            match (self.peek()?, self.at(1), self.at(2)) {
                (b'"', _, _) => {
                    self.i += 1;
                    break;
                }
                (b'\\', Some(c), _) => {
                    self.i += 2;
                    match c {
                        b'n' => literal.push('\n'),
                        b'r' => literal.push('\r'),
                        b't' => literal.push('\t'),
                        b'\\' => literal.push('\\'),
                        b'"' => literal.push('"'),
                        b'u' => literal.push(self.hex_char(4)?),
                        b'U' => literal.push(self.hex_char(8)?),
                        _ => return None,
                    }
                }
                (b'$', Some(b'{'), _) => {
                    self.i += 2;
                    let strip_before = self.eat(b'~');
                    self.blank()?;
                    let e = self.expr()?;
                    self.blank()?;
                    let strip_after = self.eat(b'~');
                    self.expect(b'}')?;
                    if !literal.is_empty() {
                        parts.push((
                            TemplatePart::Literal(std::mem::take(&mut literal)),
                            false,
                            false,
                        ));
                    }
                    parts.push((TemplatePart::Interpolation(e), strip_before, strip_after));
                }
                (b'%', Some(b'{'), _) => return None,
                (b'$' | b'%', Some(c), Some(b'{')) if c == self.b[self.i] => {
                    literal.push(c as char);
                    literal.push('{');
                    self.i += 3;
                }
                (b'$' | b'%', _, _) => {
                    literal.push(self.b[self.i] as char);
                    self.i += 1;
                }
                _ => return None,
            }
        }
        if parts.is_empty() {
            // No interpolation: the common plain string.
            return Some(node(ExprKind::String(literal)));
        }
        if !literal.is_empty() {
            parts.push((TemplatePart::Literal(literal), false, false));
        }
        let mut parts = finish_template(parts);
        Some(node(match parts.as_slice() {
            [] => ExprKind::String(Name::default()),
            [TemplatePart::Literal(_)] => match parts.pop() {
                Some(TemplatePart::Literal(s)) => ExprKind::String(s),
                _ => unreachable!("matched a single literal"),
            },
            _ => ExprKind::Template(parts),
        }))
    }

    /// The character of a `\u`/`\U` escape's `n` hex digits.
    fn hex_char(&mut self, n: usize) -> Option<char> {
        let hex = self.text.get(self.i..self.i + n)?;
        if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        self.i += n;
        char::from_u32(u32::from_str_radix(hex, 16).ok()?)
    }
}

fn precedence(op: BinaryOp) -> u8 {
    match op {
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => 6,
        BinaryOp::Plus | BinaryOp::Minus => 5,
        BinaryOp::LessEq | BinaryOp::GreaterEq | BinaryOp::Less | BinaryOp::Greater => 4,
        BinaryOp::Eq | BinaryOp::NotEq => 3,
        BinaryOp::And => 2,
        BinaryOp::Or => 1,
    }
}

/// `terms` joined by `ops` (one fewer), higher precedence first, each level left to right.
fn group(terms: Vec<Expr>, ops: Vec<BinaryOp>) -> Expr {
    let mut terms = terms.into_iter();
    let mut out: Vec<Expr> = vec![terms.next().expect("a chain starts with a term")];
    let mut pending: Vec<BinaryOp> = Vec::new();
    let reduce = |out: &mut Vec<Expr>, op: BinaryOp| {
        let rhs = out.pop().expect("an operator has two operands");
        let lhs = out.pop().expect("an operator has two operands");
        out.push(node(ExprKind::Binary(op, Box::new(lhs), Box::new(rhs))));
    };
    for (op, term) in ops.into_iter().zip(terms) {
        while let Some(&top) = pending.last() {
            if precedence(top) < precedence(op) {
                break;
            }
            pending.pop();
            reduce(&mut out, top);
        }
        pending.push(op);
        out.push(term);
    }
    while let Some(op) = pending.pop() {
        reduce(&mut out, op);
    }
    out.pop().expect("one expression remains")
}
