//! GitHub Actions expressions, as far as the workflows terraci writes use them, and a run
//! of a workflow's jobs that decides which run: enough to check what a workflow does for
//! an event without GitHub. Semantics follow GitHub's documentation of expressions:
//! `||`/`&&` return an operand and evaluate lazily, `!`, `==`/`!=` (strings compared
//! without regard to case, other types after coercion to numbers), literals, property
//! access (`a.b`, `a['b']`, `a.*.b`), and the functions `contains`, `startsWith`,
//! `endsWith`, `fromJSON`, `toJSON`, and the status checks (`success`, `failure`,
//! `cancelled`, `always`). Anything else is a test failure, never a guess.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

/// Evaluates one expression (without `${{ }}`) in `context`, where the top-level keys are
/// the contexts (`github`, `needs`, `env`, ...). `failed`: what `failure()` answers.
pub(crate) fn evaluate(expr: &str, context: &Value, failed: bool) -> Value {
    let tokens = tokenize(expr);
    let mut parser = Parser {
        tokens: &tokens,
        pos: 0,
        context,
        failed,
    };
    let value = parser.or();
    assert_eq!(parser.pos, tokens.len(), "trailing tokens in `{expr}`");
    value
}

/// A string with `${{ ... }}` parts replaced by their values.
pub(crate) fn interpolate(text: &str, context: &Value) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("${{") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("}}").expect("unclosed ${{") + start;
        out.push_str(&to_text(&evaluate(&rest[start + 3..end], context, false)));
        rest = &rest[end + 2..];
    }
    out.push_str(rest);
    out
}

/// Whether a value is truthy: false, 0, '', null are not.
pub(crate) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0 && !f.is_nan()),
        Value::String(s) => !s.is_empty(),
        Value::Array(_) | Value::Object(_) => true,
    }
}

fn to_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        other => other.to_string(),
    }
}

fn to_number(v: &Value) -> f64 {
    match v {
        Value::Null => 0.0,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        Value::String(s) if s.trim().is_empty() => 0.0,
        Value::String(s) => s.trim().parse().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

fn equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.to_lowercase() == y.to_lowercase(),
        (Value::Null, Value::Null) => true,
        (Value::Array(_) | Value::Object(_), _) | (_, Value::Array(_) | Value::Object(_)) => {
            std::ptr::eq(a, b)
        }
        _ => to_number(a) == to_number(b),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Str(String),
    Num(f64),
    Punct(&'static str),
}

fn tokenize(s: &str) -> Vec<Token> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i] as char;
        if c.is_whitespace() {
            i += 1;
        } else if c == '\'' {
            let mut text = String::new();
            i += 1;
            loop {
                assert!(i < b.len(), "unclosed string in `{s}`");
                if b[i] == b'\'' {
                    if b.get(i + 1) == Some(&b'\'') {
                        text.push('\'');
                        i += 2;
                        continue;
                    }
                    i += 1;
                    break;
                }
                let ch = s[i..].chars().next().expect("a char");
                text.push(ch);
                i += ch.len_utf8();
            }
            out.push(Token::Str(text));
        } else if c.is_ascii_digit() {
            let start = i;
            while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
                i += 1;
            }
            out.push(Token::Num(s[start..i].parse().expect("a number")));
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'-') {
                i += 1;
            }
            out.push(Token::Ident(s[start..i].to_owned()));
        } else {
            let two = s.get(i..i + 2).unwrap_or("");
            let punct = ["||", "&&", "==", "!=", "<=", ">="]
                .into_iter()
                .find(|p| *p == two);
            if let Some(p) = punct {
                out.push(Token::Punct(p));
                i += 2;
            } else {
                let one = ["(", ")", "[", "]", ".", ",", "!", "*", "<", ">"]
                    .into_iter()
                    .find(|p| p.as_bytes()[0] == b[i])
                    .unwrap_or_else(|| panic!("unexpected `{c}` in `{s}`"));
                out.push(Token::Punct(one));
                i += 1;
            }
        }
    }
    out
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    context: &'a Value,
    failed: bool,
}

impl Parser<'_> {
    fn peek(&self, p: &str) -> bool {
        matches!(self.tokens.get(self.pos), Some(Token::Punct(q)) if *q == p)
    }

    fn expect(&mut self, p: &str) {
        assert!(self.peek(p), "expected `{p}` at token {}", self.pos);
        self.pos += 1;
    }

    fn or(&mut self) -> Value {
        let mut left = self.and();
        while self.peek("||") {
            self.pos += 1;
            if truthy(&left) {
                self.skip_operand(Self::and);
            } else {
                left = self.and();
            }
        }
        left
    }

    fn and(&mut self) -> Value {
        let mut left = self.compare();
        while self.peek("&&") {
            self.pos += 1;
            if truthy(&left) {
                left = self.compare();
            } else {
                self.skip_operand(Self::compare);
            }
        }
        left
    }

    /// Moves past one operand without evaluating it: parsed with every lookup null and
    /// `fromJSON` answering null, so nothing in it can fail.
    fn skip_operand(&mut self, parse: fn(&mut Self) -> Value) {
        static NULL: Value = Value::Null;
        let mut skipping = Parser {
            tokens: self.tokens,
            pos: self.pos,
            context: &NULL,
            failed: self.failed,
        };
        SKIPPING.with(|s| s.set(s.get() + 1));
        parse(&mut skipping);
        SKIPPING.with(|s| s.set(s.get() - 1));
        self.pos = skipping.pos;
    }

    fn compare(&mut self) -> Value {
        let left = self.unary();
        for (op, want) in [("==", true), ("!=", false)] {
            if self.peek(op) {
                self.pos += 1;
                let right = self.unary();
                return Value::Bool(equal(&left, &right) == want);
            }
        }
        left
    }

    fn unary(&mut self) -> Value {
        if self.peek("!") {
            self.pos += 1;
            return Value::Bool(!truthy(&self.unary()));
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Value {
        let mut value = self.primary();
        loop {
            if self.peek(".") {
                self.pos += 1;
                if self.peek("*") {
                    self.pos += 1;
                    value = match value {
                        Value::Array(items) => Value::Array(items),
                        Value::Object(map) => {
                            Value::Array(map.into_iter().map(|(_, v)| v).collect())
                        }
                        _ => Value::Array(Vec::new()),
                    };
                    continue;
                }
                let name = match self.tokens.get(self.pos) {
                    Some(Token::Ident(name)) => name.clone(),
                    other => panic!("expected a property name, found {other:?}"),
                };
                self.pos += 1;
                value = property(&value, &name);
            } else if self.peek("[") {
                self.pos += 1;
                let key = self.or();
                self.expect("]");
                value = match (&value, &key) {
                    (Value::Array(items), Value::Number(n)) => items
                        .get(n.as_u64().unwrap_or(u64::MAX) as usize)
                        .cloned()
                        .unwrap_or(Value::Null),
                    _ => property(&value, &to_text(&key)),
                };
            } else {
                return value;
            }
        }
    }

    fn primary(&mut self) -> Value {
        let token = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        match token {
            Some(Token::Punct("(")) => {
                let v = self.or();
                self.expect(")");
                v
            }
            Some(Token::Str(s)) => Value::String(s),
            Some(Token::Num(n)) => json!(n),
            Some(Token::Ident(name)) if self.peek("(") => {
                self.pos += 1;
                let mut args = Vec::new();
                while !self.peek(")") {
                    args.push(self.or());
                    if self.peek(",") {
                        self.pos += 1;
                    }
                }
                self.expect(")");
                self.call(&name, &args)
            }
            Some(Token::Ident(name)) => match name.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                "null" => Value::Null,
                _ => property(self.context, &name),
            },
            other => panic!("unexpected token {other:?}"),
        }
    }

    fn call(&self, name: &str, args: &[Value]) -> Value {
        let skipping = SKIPPING.with(|s| s.get() > 0);
        match (name.to_lowercase().as_str(), args) {
            ("success", []) => Value::Bool(!self.failed),
            ("failure", []) => Value::Bool(self.failed),
            ("cancelled", []) => Value::Bool(false),
            ("always", []) => Value::Bool(true),
            ("contains", [Value::Array(items), item]) => {
                Value::Bool(items.iter().any(|i| equal(i, item)))
            }
            ("contains", [haystack, needle]) => Value::Bool(
                to_text(haystack)
                    .to_lowercase()
                    .contains(&to_text(needle).to_lowercase()),
            ),
            ("startswith", [a, b]) => Value::Bool(
                to_text(a)
                    .to_lowercase()
                    .starts_with(&to_text(b).to_lowercase()),
            ),
            ("endswith", [a, b]) => Value::Bool(
                to_text(a)
                    .to_lowercase()
                    .ends_with(&to_text(b).to_lowercase()),
            ),
            ("fromjson", [_]) if skipping => Value::Null,
            ("fromjson", [text]) => serde_json::from_str(&to_text(text))
                .unwrap_or_else(|e| panic!("fromJSON({text}): {e}")),
            ("tojson", [v]) => Value::String(serde_json::to_string_pretty(v).expect("json")),
            _ => panic!("unsupported call {name}({args:?})"),
        }
    }
}

thread_local! {
    static SKIPPING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

fn property(value: &Value, name: &str) -> Value {
    match value {
        Value::Object(map) => map
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
            .unwrap_or(Value::Null),
        Value::Array(items) => Value::Array(items.iter().map(|i| property(i, name)).collect()),
        _ => Value::Null,
    }
}

/// A workflow run: which jobs ran, given the `github` context and what each job that
/// runs leaves as outputs (`outputs(job id)` is called for each job that runs, in an
/// order where every job comes after its needs). Every job that runs succeeds.
pub(crate) fn run_workflow(
    workflow: &serde_yaml::Value,
    github: &Value,
    mut outputs: impl FnMut(&str, &serde_yaml::Value) -> BTreeMap<String, String>,
) -> BTreeSet<String> {
    let jobs = workflow["jobs"].as_mapping().expect("jobs");
    let mut results: BTreeMap<String, (&'static str, BTreeMap<String, String>)> = BTreeMap::new();
    let mut ran = BTreeSet::new();
    while results.len() < jobs.len() {
        let before = results.len();
        for (id, job) in jobs {
            let id = id.as_str().expect("job id").to_owned();
            if results.contains_key(&id) {
                continue;
            }
            let needs: Vec<String> = match &job["needs"] {
                serde_yaml::Value::Null => Vec::new(),
                serde_yaml::Value::String(s) => vec![s.clone()],
                serde_yaml::Value::Sequence(s) => s
                    .iter()
                    .map(|n| n.as_str().expect("need").to_owned())
                    .collect(),
                other => panic!("needs: {other:?}"),
            };
            if !needs.iter().all(|n| results.contains_key(n)) {
                continue;
            }
            let mut needs_context = serde_json::Map::new();
            for n in &needs {
                let (result, outs) = &results[n];
                needs_context.insert(n.clone(), json!({ "result": result, "outputs": outs }));
            }
            let context = json!({ "github": github, "needs": needs_context });
            // A job whose need was skipped or failed runs only when its `if:` says so;
            // without an `if:` it is `success()`, which needs every need to succeed.
            let all_succeeded = needs.iter().all(|n| results[n].0 == "success");
            let runs = match &job["if"] {
                serde_yaml::Value::Null => all_succeeded,
                serde_yaml::Value::String(expr) => {
                    let expr = expr.trim();
                    let expr = expr
                        .strip_prefix("${{")
                        .and_then(|e| e.strip_suffix("}}"))
                        .unwrap_or(expr);
                    // A job-level `if:` without a status function means `success() && (...)`.
                    let status = ["success(", "failure(", "cancelled(", "always("]
                        .iter()
                        .any(|f| expr.contains(f));
                    let value = truthy(&evaluate(expr, &context, false));
                    value && (status || all_succeeded)
                }
                other => panic!("if: {other:?}"),
            };
            if runs {
                ran.insert(id.clone());
                let outs = outputs(&id, job);
                results.insert(id, ("success", outs));
            } else {
                results.insert(id, ("skipped", BTreeMap::new()));
            }
        }
        assert!(
            results.len() > before,
            "the needs of the workflow's jobs form a cycle"
        );
    }
    ran
}

#[test]
fn expressions_evaluate_as_github_documents() {
    let ctx = json!({
        "github": {"event_name": "push", "event": {"before": "abc", "pull_request": null}},
        "needs": {"a-b": {"outputs": {"all": "false", "modules": "[\"x/y\",\"It's\"]"}}}
    });
    let eval = |e: &str| evaluate(e, &ctx, false);
    assert_eq!(
        eval("github.event.pull_request.base.sha || github.event.before"),
        json!("abc")
    );
    assert_eq!(eval("github.event_name != 'pull_request'"), json!(true));
    assert_eq!(eval("github.event_name == 'PUSH'"), json!(true));
    assert_eq!(
        eval("contains(fromJSON(needs.a-b.outputs.modules), 'X/Y')"),
        json!(true)
    );
    assert_eq!(
        eval("contains(fromJSON(needs.a-b.outputs.modules), 'It''s')"),
        json!(true)
    );
    assert_eq!(
        eval("contains(fromJSON(needs.a-b.outputs.modules), 'x')"),
        json!(false)
    );
    assert_eq!(
        eval("!cancelled() && !failure() && (true || fromJSON('not json'))"),
        json!(true)
    );
    assert_eq!(eval("false && fromJSON('not json')"), json!(false));
    assert_eq!(
        interpolate("a ${{ github.event.before }} b", &ctx),
        "a abc b"
    );
}
