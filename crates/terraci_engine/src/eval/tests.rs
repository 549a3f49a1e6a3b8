//! Evaluator tests. Expected values were produced by `terraform console` (Terraform
//! 1.11.4) and are written in a compact notation: strings quoted, sets as `toset([...])`,
//! maps as `{"k" = v}`; an expected text starting with `!` is a substring of the error.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};

use super::value::format_number;
use super::{evaluate, EvalContext, EvalError, EvalHost, NoFilesystem, Object, Value};
use crate::parse::parse_expr_text as parse_expr;
use terraci_db::diagnostic::Code;
use terraci_db::syntax::{Expr, ExprKind, NodeId};

/// A small in-memory filesystem for the file functions.
pub(crate) struct MemHost(pub BTreeMap<Utf8PathBuf, String>);

impl EvalHost for MemHost {
    fn read_file(&self, path: &Utf8Path) -> Result<String, String> {
        self.0
            .get(path)
            .cloned()
            .ok_or_else(|| format!("no file exists at `{path}`"))
    }
    fn file_exists(&self, path: &Utf8Path) -> Result<bool, String> {
        Ok(self.0.contains_key(path))
    }
    fn list_files(&self, dir: &Utf8Path) -> Vec<String> {
        self.0
            .keys()
            .filter_map(|p| p.strip_prefix(dir).ok())
            .map(|p| p.as_str().to_string())
            .collect()
    }
}

fn s(x: &str) -> Value {
    Value::String(x.into())
}

fn map(items: &[(&str, Value)]) -> Value {
    Value::Map(
        items
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
    )
}

pub(crate) fn scope() -> Object {
    let mut scope = Object::new();
    scope.insert(
        "var".into(),
        map(&[
            ("env", s("prod")),
            ("region", s("eu-west-1")),
            ("list", Value::List(vec![s("a"), s("b"), s("c")])),
            ("nothing", Value::Null),
            (
                "unset",
                Value::unknown("`var.unset` has no default and no tfvars value"),
            ),
            (
                "objs",
                Value::List(vec![
                    map(&[("name", s("x")), ("n", Value::Number(1.0))]),
                    map(&[("name", s("y")), ("n", Value::Number(2.0))]),
                ]),
            ),
        ]),
    );
    scope.insert(
        "local".into(),
        map(&[
            ("service", s("api")),
            (
                "key",
                Value::unknown(
                    "`data.aws_caller_identity.me.account_id` is only known after apply",
                ),
            ),
            ("tags", map(&[("team", s("core")), ("tier", s("1"))])),
            ("tpl", s("${a}-${b}")),
        ]),
    );
    scope.insert(
        "path".into(),
        map(&[
            ("module", s("/repo/svc/prod")),
            ("root", s("/repo/svc/prod")),
            ("cwd", s("/repo/svc/prod")),
        ]),
    );
    scope.insert("terraform".into(), map(&[("workspace", s("default"))]));
    scope
}

fn eval_with(src: &str, host: &dyn EvalHost) -> Result<Value, EvalError> {
    let expr = parse_expr(src).unwrap_or_else(|e| panic!("cannot parse `{src}`: {e}"));
    let scope = scope();
    let ctx = EvalContext {
        scope: &scope,
        extra: &[],
        module_dir: Utf8PathBuf::from("/repo/svc/prod"),
        host,
    };
    evaluate(&expr, &ctx)
}

fn eval(src: &str) -> Result<Value, EvalError> {
    eval_with(src, &NoFilesystem)
}

/// The compact notation the expectations are written in.
pub(crate) fn show(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Unknown(u) => format!("(unknown: {})", u.reason),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => format_number(*n),
        Value::String(s) => serde_json::to_string(s).expect("strings encode"),
        Value::List(items) => format!(
            "[{}]",
            items.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        Value::Set(items) => format!(
            "toset([{}])",
            items.iter().map(show).collect::<Vec<_>>().join(", ")
        ),
        Value::Map(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k:?} = {}", show(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

fn outcome(r: Result<Value, EvalError>) -> String {
    match r {
        Ok(v) => show(&v),
        Err(e) => format!("!{}: {}", e.code, e.message),
    }
}

/// Checks a table of `(expression, expected)`.
fn check_with(cases: &[(&str, &str)], host: &dyn EvalHost) {
    let mut failures = Vec::new();
    for (src, want) in cases {
        let got = outcome(eval_with(src, host));
        let ok = match want.strip_prefix('!') {
            Some(fragment) => got.starts_with('!') && got.contains(fragment),
            None => got == *want,
        };
        if !ok {
            failures.push(format!("  {src}\n    want: {want}\n    got:  {got}"));
        }
    }
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

fn check(cases: &[(&str, &str)]) {
    check_with(cases, &NoFilesystem)
}

#[test]
fn literals_and_number_formatting() {
    check(&[
        ("1", "1"),
        ("1.5e3", "1500"),
        ("0.1 + 0.2", "0.3"),
        ("10 / 4", "2.5"),
        ("1e20", "100000000000000000000"),
        ("1 / 0", "+Inf"),
        ("5 % 3", "2"),
        ("-5 % 3", "-2"),
        ("5.5 % 2", "1.5"),
        ("5 % 0", "5"),
        ("\"a\"", "\"a\""),
        ("null", "null"),
        ("[1, \"a\", true]", "[1, \"a\", true]"),
        ("{a = 1, \"b\" = 2}", "{\"a\" = 1, \"b\" = 2}"),
    ]);
}

#[test]
fn operators() {
    check(&[
        ("\"1\" + 2", "3"),
        ("true + 1", "!number required"),
        ("\"a\" + 1", "!cannot convert \"a\" to number"),
        ("\"a\" == \"a\"", "true"),
        ("1 == \"1\"", "false"),
        ("null == null", "true"),
        ("[1] == [1]", "true"),
        ("{a = 1} == {a = 1}", "true"),
        ("1 < \"2\"", "true"),
        ("true && \"true\"", "true"),
        ("false || !false", "true"),
        ("!null", "!argument must not be null"),
        ("-\"3\"", "-3"),
        ("3 >= 3 && 2 <= 1", "false"),
        ("1 != 2", "true"),
    ]);
}

#[test]
fn conditionals() {
    check(&[
        ("true ? 1 : 2", "1"),
        ("\"true\" ? 1 : 2", "1"),
        ("null ? 1 : 2", "!Null condition"),
        ("1 ? 1 : 2", "!bool required"),
        ("var.env == \"prod\" ? \"p\" : \"np\"", "\"p\""),
        // Only the chosen branch is evaluated for errors.
        ("var.nothing != null ? var.nothing.x : \"d\"", "\"d\""),
    ]);
}

#[test]
fn references_and_traversals() {
    check(&[
        ("var.env", "\"prod\""),
        ("var.list[1]", "\"b\""),
        ("var.list.1", "\"b\""),
        ("var.list[\"1\"]", "\"b\""),
        ("var.list[5]", "!does not identify an element"),
        ("var.list[-1]", "!a negative number is not a valid index"),
        ("var.list[1.5]", "!fractional part"),
        ("local.tags.team", "\"core\""),
        ("local.tags[\"tier\"]", "\"1\""),
        ("local.tags[\"nope\"]", "!does not identify an element"),
        (
            "local.tags.nope",
            "!does not have an attribute named \"nope\"",
        ),
        ("local.nope", "!`local.nope` is not declared"),
        ("var.nothing.x", "!Attempt to get attribute from null value"),
        ("var.list.x", "!list of objects"),
        ("var.env.x", "!primitive-typed value (string)"),
        ("terraform.workspace", "\"default\""),
        ("path.module", "\"/repo/svc/prod\""),
        ("{a = 1}.b", "!does not have an attribute named \"b\""),
        ("{a = 1}[\"b\"]", "!does not identify an element"),
        ("toset([1])[0]", "!elements of a set"),
    ]);
}

#[test]
fn splats() {
    check(&[
        ("var.objs[*].name", "[\"x\", \"y\"]"),
        ("var.objs.*.name", "[\"x\", \"y\"]"),
        ("[{b = 1}, {b = 2}][*].b", "[1, 2]"),
        ("null[*]", "[]"),
        ("\"x\"[*]", "[\"x\"]"),
        ("{a = 1}.*", "[{\"a\" = 1}]"),
        (
            "{a = {b = 1}}[*].b",
            "!does not have an attribute named \"b\"",
        ),
        ("toset([{a = 1}])[*].a", "[1]"),
        ("var.objs[*].name[0]", "!does not have any indices"),
        (
            "[{name = [\"x\"]}, {name = [\"y\"]}][*].name[0]",
            "[\"x\", \"y\"]",
        ),
        ("[{name = [\"x\"]}, {name = [\"y\"]}].*.name[0]", "[\"x\"]"),
        ("[{a = {b = 1}}][*].a.b", "[1]"),
        ("[[1, 2], [3]][*][0]", "[1, 3]"),
        ("var.objs.*.name[1]", "\"y\""),
        ("length(var.objs[*])", "2"),
    ]);
}

#[test]
fn unknowns_propagate_with_their_reason_and_position() {
    let reason = "(unknown: `data.aws_caller_identity.me.account_id` is only known after apply)";
    check(&[
        ("local.key", reason),
        ("\"${local.key}/x\"", reason),
        ("local.key + 1", reason),
        ("upper(local.key)", reason),
        ("join(\"/\", [var.env, local.key])", reason),
        ("local.key == \"x\"", reason),
        ("local.key ? 1 : 2", reason),
        ("[for x in local.key : x]", reason),
        ("local.key[0]", reason),
        ("can(local.key)", reason),
        ("try(local.key, \"d\")", reason),
        ("length([local.key])", "1"),
        ("{k = local.key}", &format!("{{\"k\" = {reason}}}")),
        (
            "data.aws_region.current.name",
            "(unknown: `data.aws_region.current.name` is only known after apply)",
        ),
        (
            "module.vpc.outputs[\"id\"]",
            "(unknown: `module.vpc.outputs[\"id\"]` is only known after apply)",
        ),
        (
            "\"${var.unset}-${local.key}\"",
            "(unknown: `var.unset` has no default and no tfvars value)",
        ),
        ("false && local.key", "false"),
        ("local.key || true", "true"),
        ("coalesce(\"a\", local.key)", "\"a\""),
        ("keys({a = local.key})", "[\"a\"]"),
        ("lookup({a = 1, b = local.key}, \"a\")", "1"),
    ]);
}

#[test]
fn unknown_points_at_the_reference_node() {
    // `"${var.env}-${local.key}"`: template 0, interpolation var.env is 1 and 2 (root),
    // local.key is the traversal 3 with its root 4.
    let Value::Unknown(u) = eval("\"${var.env}-${local.key}\"").unwrap() else {
        panic!("expected unknown")
    };
    assert_eq!(u.at, Some(NodeId(3)));
    let Value::Unknown(u) = eval("data.x.y.z").unwrap() else {
        panic!("expected unknown")
    };
    assert_eq!(u.at, Some(NodeId(0)));
    let v = eval("{k = local.key}").unwrap();
    assert_eq!(v.first_unknown().and_then(|u| u.at), Some(NodeId(1)));
}

#[test]
fn templates() {
    check(&[
        ("\"${var.env}-${1.0}-${true}\"", "\"prod-1-true\""),
        ("\"${1.0}\"", "1"),
        ("\"${null}\"", "null"),
        ("\"a${null}\"", "!null value"),
        ("\"a${[\"x\"]}\"", "!string required"),
        ("\"%{if true}yes%{else}no%{endif}\"", "\"yes\""),
        ("\"%{if var.env == \"dev\"}yes%{else}no%{endif}\"", "\"no\""),
        ("\"%{for x in [\"a\", \"b\"]}${x},%{endfor}\"", "\"a,b,\""),
        ("\"%{for k, x in {a = 1}}${k}${x}%{endfor}\"", "\"a1\""),
        ("\"%{for x in var.list}${x}%{endfor}\"", "\"abc\""),
        ("\"a ${~ \"b\" ~} c\"", "\"abc\""),
        ("<<EOT\nhello ${var.env}\nEOT", "\"hello prod\\n\""),
        ("<<-EOT\n    a\n      b\n    EOT", "\"a\\n  b\\n\""),
    ]);
}

#[test]
fn for_expressions() {
    check(&[
        (
            "[for k, v in {a = 1, b = 2} : \"${k}=${v}\"]",
            "[\"a=1\", \"b=2\"]",
        ),
        (
            "{for v in [\"a\", \"b\", \"a\"] : v => 1...}",
            "{\"a\" = [1, 1], \"b\" = [1]}",
        ),
        (
            "{for v in [\"a\", \"b\", \"a\"] : v => 1}",
            "!Two different items produced the key \"a\" in this 'for' expression",
        ),
        ("[for i, v in [\"a\", \"b\"] : i]", "[0, 1]"),
        ("[for v in toset([\"b\", \"a\"]) : v]", "[\"a\", \"b\"]"),
        ("[for v in [1, 2, 3, 4] : v * 2 if v % 2 == 0]", "[4, 8]"),
        (
            "{for o in var.objs : o.name => o.n}",
            "{\"x\" = 1, \"y\" = 2}",
        ),
        ("[for x in null : x]", "!null value"),
        ("[for x in 1 : x]", "!non-iterable"),
        (
            "[for x in [1] : y]",
            "[(unknown: `y` is only known after apply)]",
        ),
        (
            "[for x in [[1, 2], [3]] : [for y in x : y * 10]]",
            "[[10, 20], [30]]",
        ),
        ("[for x in [1, 2] : x if x]", "!bool required"),
    ]);
}

#[test]
fn unknown_and_wrong_functions() {
    check(&[
        ("foo(1)", "!unknown-function: unknown function `foo`"),
        (
            "provider::aws::arn_parse(\"x\")",
            "!unknown function `provider::aws::arn_parse`",
        ),
        ("lower()", "!Not enough function arguments"),
        ("lower(\"a\", \"b\")", "!Too many function arguments"),
        (
            "lower([1])",
            "!Invalid value for \"str\" parameter: string required",
        ),
        ("lower(null)", "!argument must not be null"),
        (
            "join(\",\", [\"a\"]...)",
            "!Invalid value for \"lists\" parameter: list of",
        ),
        ("concat([1], [[2]]...)", "[1, 2]"),
        ("max([3, 1]...)", "3"),
    ]);
}

#[test]
fn string_functions() {
    check(&[
        ("split(\",\", \"a,,b\")", "[\"a\", \"\", \"b\"]"),
        ("split(\",\", \"\")", "[\"\"]"),
        ("split(\"\", \"abc\")", "[\"a\", \"b\", \"c\"]"),
        ("join(\",\", [\"a\", 1, true])", "\"a,1,true\""),
        (
            "join(\",\", [\"a\", null])",
            "!element 1 is null; cannot concatenate null values",
        ),
        ("join(\",\", [])", "\"\""),
        ("join(\"-\", [\"a\"], [\"b\", \"c\"])", "\"a-b-c\""),
        ("lower(\"HeLLo\")", "\"hello\""),
        ("upper(\"héllo\")", "\"HÉLLO\""),
        ("title(\"hello wORLD foo-bar\")", "\"Hello WORLD Foo-Bar\""),
        ("trim(\"?!hello?!\", \"!?\")", "\"hello\""),
        ("trimprefix(\"helloworld\", \"hello\")", "\"world\""),
        ("trimprefix(\"helloworld\", \"x\")", "\"helloworld\""),
        ("trimsuffix(\"helloworld\", \"world\")", "\"hello\""),
        ("trimspace(\"  a \\n\")", "\"a\""),
        ("chomp(\"a\\n\\n\")", "\"a\""),
        ("chomp(\"a\\r\\n\")", "\"a\""),
        ("replace(\"a.b.c\", \".\", \"-\")", "\"a-b-c\""),
        (
            "replace(\"hello world\", \"/o(.)/\", \"<$1>\")",
            "\"hell< >w<r>ld\"",
        ),
        (
            "replace(\"abc\", \"/(/\", \"x\")",
            "!invalid regexp pattern",
        ),
        ("substr(\"hello\", 1, 100)", "\"ello\""),
        ("substr(\"hello\", -3, -1)", "\"llo\""),
        ("substr(\"hello\", 10, 1)", "\"\""),
        ("substr(\"hello\", 1, 0)", "\"\""),
        ("regex(\"(a)?(b)\", \"b\")", "[null, \"b\"]"),
        (
            "regex(\"(?P<x>a)(?P<y>b)\", \"ab\")",
            "{\"x\" = \"a\", \"y\" = \"b\"}",
        ),
        ("regex(\"[a-z]+\", \"123abc\")", "\"abc\""),
        (
            "regex(\"a(b)\", \"xyz\")",
            "!pattern did not match any part of the given string",
        ),
        (
            "regex(\"(?P<x>a)(b)\", \"ab\")",
            "!cannot mix both named and unnamed capture groups",
        ),
        ("regexall(\"a(b)?\", \"a ab\")", "[[null], [\"b\"]]"),
        ("regexall(\"x\", \"abc\")", "[]"),
        ("startswith(\"hello\", \"he\")", "true"),
        ("endswith(\"hello\", \"he\")", "false"),
        ("strcontains(\"hello\", \"ll\")", "true"),
        ("strrev(\"abc\")", "\"cba\""),
        ("replace(\"a.b\", \".\", \"$1\")", "\"a$1b\""),
        ("replace(\"abc\", \"\", \"-\")", "\"-a-b-c-\""),
        ("replace(\"abc\", \"/b/\", \"$$\")", "\"a$c\""),
        ("replace(\"abc\", \"/(?P<x>b)/\", \"[$x]\")", "\"a[b]c\""),
        ("element(split(\"/\", \"a/b/c\"), 1)", "\"b\""),
        (
            "trimprefix(null, \"a\")",
            "!Invalid value for \"str\" parameter: argument must not be null",
        ),
        (
            "split(\",\", null)",
            "!Invalid value for \"str\" parameter: argument must not be null",
        ),
        ("indent(2, \"a\\nb\\n\\nc\")", "\"a\\n  b\\n  \\n  c\""),
        ("length(\"héllo\")", "5"),
        ("length(\"👍🏽x\")", "2"),
    ]);
}

#[test]
fn format_function() {
    check(&[
        ("format(\"%03d\", 7)", "\"007\""),
        (
            "format(\"%s|%5s|%-5s|%d|%05d|%.2f|%x|%X|%o|%b|%e|%g|%q|%t|%v|%%\", \"a\", \"b\", \"c\", 42, 42, 3.14159, 255, 255, 8, 5, 1234.5, 0.000012, \"q\\\"\", true, [1])",
            "\"a|    b|c    |42|00042|3.14|ff|FF|10|101|1.234500e+03|1.2e-05|\\\"q\\\\\\\"\\\"|true|[1]|%\"",
        ),
        ("format(\"%v %v %v\", \"s\", 1.5, true)", "\"s 1.5 true\""),
        ("format(\"%#v\", {a = 1})", "\"{\\\"a\\\":1}\""),
        ("format(\"%[2]s %[1]s\", \"a\", \"b\")", "\"b a\""),
        ("format(\"%[1]s %s\", \"a\", \"b\")", "\"a b\""),
        ("format(\"%s\")", "!not enough arguments for \"%s\" at 0: need index 1 but have 0 total"),
        ("format(\"%[3]s\", \"a\")", "!need index 3 but have 1 total"),
        ("format(\"%s\", \"a\", \"b\")", "!too many arguments; only 1 used by format string"),
        ("format(\"%d\", 1.5)", "!an integer is required"),
        ("format(\"%d\", \"12\")", "\"12\""),
        ("format(\"%s\", 12)", "\"12\""),
        ("format(\"%s\", true)", "\"true\""),
        ("format(\"%5.1f|%+d|% d\", 3.14159, 5, 5)", "\"  3.1|+5| 5\""),
        ("format(\"%5t|%-6d|%06.2f\", true, 3, -3.14159)", "\"true|3     |-03.14\""),
        ("format(\"%10.3s|\", \"abcdef\")", "\"       abc|\""),
        ("format(\"%g|%g|%g|%g|%.3g|%G\", 1234567, 123456, 1e20, 0.5, 3.14159, 1e-7)", "\"1.234567e+06|123456|1e+20|0.5|3.14|1E-07\""),
        ("format(\"%#x|%#o|%x\", 255, 8, -255)", "\"0xff|010|-ff\""),
        ("format(\"%q\", \"a\\tb\")", "\"\\\"a\\\\tb\\\"\""),
        ("format(\"%c\", 65)", "!unsupported format verb"),
        ("format(\"%s\", [\"a\"])", "!unsupported value for \"%s\" at 0: string required"),
        ("format(\"%s-%s\", \"a\")", "!not enough arguments for \"%s\" at 3: need index 2 but have 1 total"),
        ("format(\"%s\", null)", "(unknown: `format` was given a null argument)"),
        ("formatlist(\"%s-%s\", [\"a\", \"b\"], \"x\")", "[\"a-x\", \"b-x\"]"),
        ("formatlist(\"%s-%s\", [\"a\", \"b\"], [\"x\"])", "!argument 2 has length 1, which is inconsistent with argument 1 of length 2"),
    ]);
}

#[test]
fn collection_functions() {
    check(&[
        ("element([\"a\", \"b\"], 3)", "\"b\""),
        ("element([], 0)", "!cannot use element function with an empty list"),
        ("element([\"a\"], -1)", "!negative index"),
        ("element(toset([\"b\", \"a\"]), 0)", "!cannot read elements from set"),
        ("length(null)", "!argument must not be null"),
        ("length(5)", "!argument must be a string, a collection type, or a structural type"),
        ("length({a = 1, b = 2})", "2"),
        ("length(toset([1, 1, 2]))", "2"),
        ("lookup({a = 1}, \"b\")", "!the given object has no attribute \"b\""),
        ("lookup({a = 1}, \"b\", \"d\")", "\"d\""),
        ("lookup({a = \"x\"}, \"a\", 1)", "\"x\""),
        ("lookup({a = {b = 1}}, \"a\")", "{\"b\" = 1}"),
        ("concat([1], toset([2]))", "!all arguments must be lists or tuples; got set"),
        ("concat([1], \"a\")", "!all arguments must be lists or tuples; got string"),
        ("concat()", "!at least one argument is required"),
        ("concat([1], [2, 3], [])", "[1, 2, 3]"),
        ("merge({a = 1}, null, {b = 2})", "{\"a\" = 1, \"b\" = 2}"),
        ("merge({a = 1, b = 1}, {b = 2})", "{\"a\" = 1, \"b\" = 2}"),
        ("merge({a = 1}, \"x\")", "!arguments must be maps or objects, got \"string\""),
        ("merge()", "{}"),
        ("flatten([[1, [2]], 3, null, toset([4])])", "[1, 2, 3, null, 4]"),
        ("flatten([[[[\"x\"]]]])", "[\"x\"]"),
        ("distinct([1, 2, 1, \"1\"])", "[\"1\", \"2\"]"),
        ("distinct([\"b\", \"a\", \"b\"])", "[\"b\", \"a\"]"),
        ("distinct([])", "[]"),
        ("compact([\"a\", \"\", null, \"b\"])", "[\"a\", \"b\"]"),
        ("compact([1, \"\", null])", "[\"1\"]"),
        ("coalesce(\"\", null, \"b\")", "\"b\""),
        ("coalesce(1, \"a\")", "\"1\""),
        ("coalesce(null, \"\")", "!no non-null, non-empty-string arguments"),
        ("coalesce(null, [])", "[]"),
        ("coalescelist([], [1])", "[1]"),
        ("index([\"a\", \"b\"], \"b\")", "1"),
        ("index([\"a\", \"b\"], \"c\")", "!item not found"),
        ("one([])", "null"),
        ("one(toset([\"x\"]))", "\"x\""),
        ("one([1, 2])", "!must be a list, set, or tuple value with either zero or one elements"),
        ("reverse([1, 2, 3])", "[3, 2, 1]"),
        ("reverse(toset([2, 1]))", "[2, 1]"),
        ("slice([1, 2, 3], 1, 5)", "!end index must not be greater than the length of the list"),
        ("slice([1, 2, 3], 2, 1)", "!start index must not be greater than end index"),
        ("slice([1, 2, 3], 1, 3)", "[2, 3]"),
        ("sort([10, 2, \"b\"])", "[\"10\", \"2\", \"b\"]"),
        ("sort([])", "[]"),
        ("sort([\"b\", null])", "!given list element 1 is null; a null string cannot be sorted"),
        ("keys({b = 1, a = 2})", "[\"a\", \"b\"]"),
        ("keys({})", "[]"),
        ("values({b = 1, a = 2})", "[2, 1]"),
        ("contains([\"a\"], \"a\")", "true"),
        ("contains([1], \"1\")", "false"),
        ("contains(toset([\"a\"]), \"a\")", "true"),
        ("setproduct([\"a\", \"b\"], [1, 2])", "[[\"a\", 1], [\"a\", 2], [\"b\", 1], [\"b\", 2]]"),
        ("setproduct(toset([\"b\", \"a\"]), toset([1]))", "toset([[\"a\", 1], [\"b\", 1]])"),
        ("setproduct([], [1])", "[]"),
        ("setunion([\"a\"], [\"b\", \"a\"])", "toset([\"a\", \"b\"])"),
        ("setintersection([\"a\", \"b\"], [\"b\", \"c\"])", "toset([\"b\"])"),
        ("setsubtract([\"a\", \"b\"], [\"b\"])", "toset([\"a\"])"),
        ("transpose({a = [\"1\", \"2\"], b = [\"2\", \"3\"]})", "{\"1\" = [\"a\"], \"2\" = [\"a\", \"b\"], \"3\" = [\"b\"]}"),
        ("zipmap([\"a\", \"b\"], [1, 2])", "{\"a\" = 1, \"b\" = 2}"),
        ("zipmap([\"a\", \"b\"], [1])", "!number of keys (2) does not match number of values (1)"),
        ("zipmap([\"a\", \"a\"], [1, 2])", "{\"a\" = 2}"),
        ("chunklist([1, 2, 3, 4, 5], 2)", "[[1, 2], [3, 4], [5]]"),
        ("chunklist([1, 2], 0)", "[[1, 2]]"),
        ("sum([1, 2.5, \"3\"])", "6.5"),
        ("sum([])", "!cannot sum an empty list"),
        ("alltrue([])", "true"),
        ("anytrue([\"true\"])", "true"),
        ("alltrue([true, null])", "false"),
        ("range(3)", "[0, 1, 2]"),
        ("range(1, 4)", "[1, 2, 3]"),
        ("range(10, 0, -3)", "[10, 7, 4, 1]"),
        ("range(0, 1, 0.25)", "[0, 0.25, 0.5, 0.75]"),
        ("range(1, 0)", "[1]"),
        ("range(0, 3, -1)", "!end must be less than start when step is negative"),
        ("range(0, 1, 0)", "!evaluation-limit: Call to function \"range\" failed: more than 1024 values were generated"),
        ("range(2000)", "!evaluation-limit"),
        ("matchkeys([\"a\", \"b\", \"c\"], [\"x\", \"y\", \"z\"], [\"y\", \"z\"])", "[\"b\", \"c\"]"),
        ("tolist([\"a\", 1, true])", "[\"a\", \"1\", \"true\"]"),
        ("toset([\"b\", \"a\", 1])", "toset([\"1\", \"a\", \"b\"])"),
        ("toset([3, 1, 10])", "toset([1, 3, 10])"),
        ("toset([true, false])", "toset([false, true])"),
        ("tomap({a = 1, b = \"x\"})", "{\"a\" = \"1\", \"b\" = \"x\"}"),
        ("tomap({a = true, b = 1})", "!cannot convert object to map of any single type"),
        ("try(local.tags.nope, \"fallback\")", "\"fallback\""),
        ("try(local.nope, \"fallback\")", "!`local.nope` is not declared"),
        ("try(foo(), \"fallback\")", "!unknown function"),
        ("try(1 + \"a\", 2 + \"b\")", "!no expression succeeded"),
        ("can(local.tags.nope)", "false"),
        ("can(local.tags.team)", "true"),
    ]);
}

#[test]
fn numeric_functions() {
    check(&[
        ("max(1, 5, \"3\")", "5"),
        ("max()", "!must pass at least one number"),
        ("min([1, 2]...)", "1"),
        ("log(8, 2)", "3"),
        ("log(0, 10)", "-Inf"),
        ("pow(2, 10)", "1024"),
        // Terraform prints 1.4142135623730951: its numbers are arbitrary-precision and
        // terraci rounds to 15 significant digits so that `0.1 + 0.2` reads `0.3`.
        ("pow(2, 0.5)", "1.4142135623731"),
        ("parseint(\"ff\", 16)", "255"),
        ("parseint(\"FF\", 16)", "255"),
        ("parseint(\"-101\", 2)", "-5"),
        ("parseint(\"zz\", 36)", "1295"),
        (
            "parseint(\"12\", 1)",
            "!base must be a whole number between 2 and 62 inclusive",
        ),
        (
            "parseint(\"1.5\", 10)",
            "!cannot parse \"1.5\" as a base 10 integer",
        ),
        ("signum(-3)", "-1"),
        ("abs(-2.5)", "2.5"),
        ("ceil(1.1)", "2"),
        ("floor(-1.1)", "-2"),
    ]);
}

#[test]
fn type_functions() {
    check(&[
        ("tobool(\"1\")", "true"),
        (
            "tobool(\"yes\")",
            "!only the strings \"true\" or \"false\" are allowed",
        ),
        (
            "tonumber(\" 1\")",
            "!given string must be a decimal representation of a number",
        ),
        (
            "tonumber(\"0x10\")",
            "!given string must be a decimal representation of a number",
        ),
        ("tonumber(\"1e3\")", "1000"),
        ("tonumber(\".5\")", "0.5"),
        ("tonumber(\"5.\")", "5"),
        ("tonumber(\"+1\")", "1"),
        ("tonumber(\"inf\")", "+Inf"),
        ("tonumber(true)", "!cannot convert bool to number"),
        ("tostring([1])", "!cannot convert tuple to string"),
        ("tostring(null)", "null"),
        ("tostring(1.5)", "\"1.5\""),
        ("tonumber(null)", "null"),
        ("sensitive(\"x\")", "\"x\""),
        (
            "timestamp()",
            "(unknown: `timestamp()` is only known when Terraform runs)",
        ),
    ]);
}

#[test]
fn encoding_functions() {
    check(&[
        (
            "jsonencode({b = \"<a>&\", a = [1, true, null, 1.5]})",
            "\"{\\\"a\\\":[1,true,null,1.5],\\\"b\\\":\\\"\\\\u003ca\\\\u003e\\\\u0026\\\"}\"",
        ),
        ("jsonencode(\"é\\u2028\")", "\"\\\"é\\\\u2028\\\"\""),
        ("jsonencode(1e21)", "\"1000000000000000000000\""),
        ("jsonencode(\"\\u0001\\n\")", "\"\\\"\\\\u0001\\\\n\\\"\""),
        ("jsondecode(\"{\\\"a\\\": [1, 2.5, \\\"x\\\", null, true]}\")", "{\"a\" = [1, 2.5, \"x\", null, true]}"),
        ("jsondecode(\"\\\"\\\\u00e9\\\"\")", "\"é\""),
        ("jsondecode(\"[1,\")", "!Call to function \"jsondecode\" failed"),
        (
            "yamlencode({a = 1, b = \"x\", c = [1, \"two\", {d = true, e = [1]}], e = {}, f = [], g = null, h = \"multi\\nline\", i = \"true\", j = \"1.5\", k = {l = {m = \"n\"}}, \"key with space\" = 1, z = [[1, 2], [3]], n = 1.5, o = \"\", p = \"a: b\", q = \"line\\n\"})",
            "\"\\\"a\\\": 1\\n\\\"b\\\": \\\"x\\\"\\n\\\"c\\\":\\n- 1\\n- \\\"two\\\"\\n- \\\"d\\\": true\\n  \\\"e\\\":\\n  - 1\\n\\\"e\\\": {}\\n\\\"f\\\": []\\n\\\"g\\\": null\\n\\\"h\\\": |-\\n  multi\\n  line\\n\\\"i\\\": \\\"true\\\"\\n\\\"j\\\": \\\"1.5\\\"\\n\\\"k\\\":\\n  \\\"l\\\":\\n    \\\"m\\\": \\\"n\\\"\\n\\\"key with space\\\": 1\\n\\\"n\\\": 1.5\\n\\\"o\\\": \\\"\\\"\\n\\\"p\\\": \\\"a: b\\\"\\n\\\"q\\\": |\\n  line\\n\\\"z\\\":\\n- - 1\\n  - 2\\n- - 3\\n\"",
        ),
        (
            "yamlencode([{a = 1, b = 2}, \"x\", [], null])",
            "\"- \\\"a\\\": 1\\n  \\\"b\\\": 2\\n- \\\"x\\\"\\n- []\\n- null\\n\"",
        ),
        ("yamlencode(1)", "\"1\\n...\\n\""),
        ("yamlencode(\"é\\t\")", "\"\\\"é\\\\t\\\"\\n\""),
        ("yamldecode(\"a: 1.0\\nb: [x, 2]\\nc: \\\"1\\\"\\nd: 1e3\\ne: ~\")", "{\"a\" = 1, \"b\" = [\"x\", 2], \"c\" = \"1\", \"d\" = 1000, \"e\" = null}"),
        ("yamldecode(\"{1: a, true: b}\")", "{\"1\" = \"a\", \"true\" = \"b\"}"),
        ("yamldecode(\"\")", "!missing start of document"),
        ("base64encode(\"héllo\")", "\"aMOpbGxv\""),
        ("base64decode(\"aMOpbGxv\")", "\"héllo\""),
        ("base64decode(\"!!\")", "!failed to decode base64 data \"!!\""),
        ("base64decode(\"/w==\")", "!not valid UTF-8"),
        ("urlencode(\"a b&c/d~é\")", "\"a+b%26c%2Fd~%C3%A9\""),
        ("csvdecode(\"a,b\\n1,2\\n3,4\")", "[{\"a\" = \"1\", \"b\" = \"2\"}, {\"a\" = \"3\", \"b\" = \"4\"}]"),
        ("csvdecode(\"a,b\\n1\")", "!CSV parse error on line 2: wrong number of fields"),
        ("csvdecode(\"a,\\\"b\\\"\\\"c\\\"\\n\\\"x\\ny\\\",2\\r\\n\\n3,4\\n\")", "[{\"a\" = \"x\\ny\", \"b\\\"c\" = \"2\"}, {\"a\" = \"3\", \"b\\\"c\" = \"4\"}]"),
        ("csvdecode(\"\")", "!missing header line"),
        ("csvdecode(\"a,b\\n\")", "[]"),
        ("md5(\"hello\")", "\"5d41402abc4b2a76b9719d911017c592\""),
        ("md5(\"\")", "\"d41d8cd98f00b204e9800998ecf8427e\""),
        ("sha1(\"hello\")", "\"aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d\""),
        ("sha256(\"hello\")", "\"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824\""),
        ("sha256(\"The quick brown fox jumps over the lazy dog, The quick brown fox jumps over the lazy dog!!\")", "\"569d91a6c07dbe3b36201b7c38fd3cb1bb1212b72f6b580c00a8bd81e59c9ada\""),
        ("sha512(\"hello\")", "\"9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043\""),
        ("base64sha256(\"hello\")", "\"LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=\""),
    ]);
}

#[test]
fn filesystem_functions() {
    let host = MemHost(
        [
            (
                "/repo/svc/prod/backend.tpl",
                "key = \"${env}/${name}.tfstate\"\n%{ for r in regions ~}\n${r}\n%{ endfor ~}\n",
            ),
            ("/repo/svc/prod/a.txt", "hello"),
            ("/repo/svc/prod/conf/x.yaml", "x: 1"),
            ("/repo/svc/prod/conf/sub/y.yaml", "y: 2"),
            ("/repo/svc/prod/conf/z.json", "{}"),
            (
                "/repo/svc/prod/conf/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
                "",
            ),
            (
                "/repo/svc/prod/self.tpl",
                "${templatefile(\"self.tpl\", {})}",
            ),
            ("/repo/svc/prod/bad.tpl", "${nope(1)}"),
        ]
        .into_iter()
        .map(|(p, c)| (Utf8PathBuf::from(p), c.to_string()))
        .collect(),
    );
    check_with(
        &[
            ("abspath(\"../dev\")", "\"/repo/svc/dev\""),
            ("abspath(\"/a/./b/../c/\")", "\"/a/c\""),
            ("abspath(path.module)", "\"/repo/svc/prod\""),
            ("basename(\"/a/b/c.tf\")", "\"c.tf\""),
            ("basename(\"/a/b/\")", "\"b\""),
            ("basename(\"\")", "\".\""),
            ("basename(\"/\")", "\"/\""),
            ("dirname(\"/a/b/c.tf\")", "\"/a/b\""),
            ("dirname(\"c.tf\")", "\".\""),
            ("dirname(\"/a/b/\")", "\"/a/b\""),
            ("dirname(\"/\")", "\"/\""),
            ("basename(dirname(path.module))", "\"svc\""),
            ("pathexpand(\"/x\")", "\"/x\""),
            ("file(\"a.txt\")", "\"hello\""),
            ("file(\"${path.module}/a.txt\")", "\"hello\""),
            ("file(\"missing.txt\")", "(unknown: no file exists at `/repo/svc/prod/missing.txt`)"),
            ("fileexists(\"a.txt\")", "true"),
            ("fileexists(\"b.txt\")", "false"),
            ("fileset(path.module, \"conf/*.yaml\")", "toset([\"conf/x.yaml\"])"),
            ("fileset(path.module, \"conf/**/*.yaml\")", "toset([\"conf/sub/y.yaml\", \"conf/x.yaml\"])"),
            ("fileset(\"conf\", \"*.{json,yaml}\")", "toset([\"x.yaml\", \"z.json\"])"),
            // Backtracking past the step bound is no answer, never a silent "no match".
            ("fileset(\"conf\", \"*a*a*a*a*a*a*a*a*a*a*a*a*b\")", "!evaluation-limit"),
            (
                "templatefile(\"backend.tpl\", {env = \"prod\", name = \"api\", regions = [\"a\", \"b\"]})",
                "\"key = \\\"prod/api.tfstate\\\"\\na\\nb\\n\"",
            ),
            ("templatefile(\"backend.tpl\", {env = \"prod\"})", "!vars map does not contain key \"name\""),
            ("templatefile(\"self.tpl\", {})", "!evaluation-limit"),
            ("templatefile(\"bad.tpl\", {})", "!unknown function `nope`"),
            ("templatestring(local.tpl, {a = 1, b = \"x\"})", "\"1-x\""),
            ("templatestring(local.tpl, {})", "!vars map does not contain key \"a\""),
            ("templatestring(\"$${a}\", {a = 1})", "!must be a direct reference"),
        ],
        &host,
    );
}

/// `depth` levels of `wrap` around a string literal, built directly: hcl-edit's parser
/// refuses more than 64 levels, but the evaluator must hold on any tree it is given.
fn nested(depth: usize, wrap: &dyn Fn(Expr) -> ExprKind) -> Expr {
    let mut e = Expr {
        id: NodeId(0),
        kind: ExprKind::String("x".into()),
    };
    for _ in 0..depth {
        e = Expr {
            id: NodeId(0),
            kind: wrap(e),
        };
    }
    e
}

type Wrap = Box<dyn Fn(Expr) -> ExprKind>;

#[test]
fn deep_nesting_is_a_limit_not_a_crash() {
    use terraci_db::syntax::{ForExpr, TemplatePart};
    let scope = scope();
    let ctx = EvalContext {
        scope: &scope,
        extra: &[],
        module_dir: Utf8PathBuf::from("/m"),
        host: &NoFilesystem,
    };
    let call = |name: &'static str| -> Wrap {
        Box::new(move |e| terraci_db::syntax::Call::kind(name.into(), vec![e], false))
    };
    let shapes: Vec<(&str, Wrap)> = vec![
        ("array", Box::new(|e| ExprKind::Array(vec![e]))),
        ("paren", Box::new(|e| ExprKind::Paren(Box::new(e)))),
        ("call", call("lower")),
        ("try", call("try")),
        ("tostring", call("tostring")),
        (
            "for",
            Box::new(|e| {
                ExprKind::For(Box::new(ForExpr {
                    key_var: None,
                    value_var: "x".into(),
                    collection: nested(1, &|e| ExprKind::Array(vec![e])),
                    key_expr: None,
                    value_expr: e,
                    cond: None,
                    grouping: false,
                }))
            }),
        ),
        (
            "template-if",
            Box::new(|e| {
                ExprKind::Template(vec![TemplatePart::If {
                    cond: Expr {
                        id: NodeId(0),
                        kind: ExprKind::Bool(true),
                    },
                    then: vec![
                        TemplatePart::Literal("a".into()),
                        TemplatePart::Interpolation(e),
                    ],
                    otherwise: Vec::new(),
                }])
            }),
        ),
    ];
    for (name, wrap) in &shapes {
        for depth in [60usize, 120, 250, 300, 5_000, 50_000] {
            let expr = nested(depth, wrap.as_ref());
            match evaluate(&expr, &ctx) {
                Ok(_) => assert!(depth <= 256, "{name} at depth {depth} evaluated"),
                Err(e) => {
                    assert!(depth > 100, "{name} at depth {depth}: {}", e.message);
                    assert_eq!(e.code, Code::EvaluationLimit, "{name} at depth {depth}");
                }
            }
            // Dropping a very deep tree recurses too; that is the tree owner's concern.
            if depth > 1_000 {
                std::mem::forget(expr);
            }
        }
    }
}

fn limit_code(src: &str) -> terraci_db::diagnostic::Code {
    match eval(src) {
        Err(e) => e.code,
        Ok(v) => panic!("`{src}` evaluated to {}", show(&v)),
    }
}

#[test]
fn runaway_work_ends_in_a_limit() {
    let started = std::time::Instant::now();
    for src in [
        // 10^9 iterations.
        "[for a in range(1000) : [for b in range(1000) : [for c in range(1000) : 1]]]",
        // Strings doubling past 16 MiB.
        "join(\"\", [for i in range(1000) : join(\"\", [for j in range(1000) : \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"])])",
        "replace(replace(replace(replace(replace(replace(\"aaaaaaaaaaaaaaaaaaaa\", \"a\", \"aaaaaaaaaaaaaaaaaaaa\"), \"a\", \"aaaaaaaaaaaaaaaaaaaa\"), \"a\", \"aaaaaaaaaaaaaaaaaaaa\"), \"a\", \"aaaaaaaaaaaaaaaaaaaa\"), \"a\", \"aaaaaaaaaaaaaaaaaaaa\"), \"a\", \"aaaaaaaaaaaaaaaaaaaa\")",
        "replace(replace(replace(replace(replace(replace(\"aaaaaaaaaaaaaaaaaaaa\", \"/a/\", \"$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0\"), \"/a/\", \"$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0\"), \"/a/\", \"$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0\"), \"/a/\", \"$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0\"), \"/a/\", \"$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0\"), \"/a/\", \"$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0$0\")",
        "setproduct(range(1000), range(1000), range(1000))",
        "flatten(setproduct(range(1000), range(1000), [1, 2, 3]))",
        "indent(16000000, \"a\\nb\\nc\")",
        "format(\"%99999d\", 1)",
        "range(1025)",
        "regex(\"((((a{100}){100}){100}){100})\", \"a\")",
    ] {
        assert_eq!(limit_code(src), Code::EvaluationLimit, "{src}");
    }
    assert!(started.elapsed().as_secs() < 60, "limits took too long");
}

/// A deterministic xorshift generator: the same trees on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const FUNCTION_NAMES: &[&str] = &[
    "format",
    "formatlist",
    "join",
    "split",
    "lower",
    "upper",
    "title",
    "trim",
    "trimprefix",
    "trimsuffix",
    "trimspace",
    "chomp",
    "replace",
    "substr",
    "regex",
    "regexall",
    "startswith",
    "endswith",
    "strcontains",
    "strrev",
    "indent",
    "templatestring",
    "element",
    "length",
    "lookup",
    "concat",
    "contains",
    "keys",
    "values",
    "merge",
    "flatten",
    "distinct",
    "compact",
    "coalesce",
    "coalescelist",
    "index",
    "one",
    "range",
    "reverse",
    "slice",
    "sort",
    "setproduct",
    "setunion",
    "setintersection",
    "setsubtract",
    "transpose",
    "zipmap",
    "chunklist",
    "tolist",
    "toset",
    "tomap",
    "sum",
    "alltrue",
    "anytrue",
    "matchkeys",
    "abs",
    "ceil",
    "floor",
    "max",
    "min",
    "log",
    "pow",
    "parseint",
    "signum",
    "jsonencode",
    "jsondecode",
    "yamlencode",
    "yamldecode",
    "base64encode",
    "base64decode",
    "urlencode",
    "csvdecode",
    "md5",
    "sha1",
    "sha256",
    "sha512",
    "base64sha256",
    "tostring",
    "tonumber",
    "tobool",
    "abspath",
    "basename",
    "dirname",
    "pathexpand",
    "file",
    "fileexists",
    "fileset",
    "templatefile",
    "try",
    "can",
    "nope",
    "timestamp",
];

fn random_expr(rng: &mut Rng, depth: usize) -> terraci_db::syntax::Expr {
    use terraci_db::syntax::{
        BinaryOp, Expr, ExprKind, ForExpr, Num, ObjectKey, TemplatePart, Traverser, UnaryOp,
    };
    let leaf = depth == 0 || rng.below(4) == 0;
    let kind = if leaf {
        match rng.below(9) {
            0 => ExprKind::Null,
            1 => ExprKind::Bool(rng.below(2) == 0),
            2 => ExprKind::Number(Num::new(
                [0.0, 1.0, -1.0, 2.5, 1e300, -0.0, 3.0, 1024.0, f64::NAN][rng.below(9)],
            )),
            3 => ExprKind::String(
                rng.pick(&[
                    "",
                    "a",
                    "a,b",
                    "/x/",
                    "${",
                    "%{",
                    "(a)+",
                    "1",
                    "true",
                    "{\"a\":1}",
                    "é👍🏽",
                ])
                .into(),
            ),
            4 => ExprKind::Variable(
                rng.pick(&["var", "local", "path", "x", "data", "each"])
                    .into(),
            ),
            5 => ExprKind::Traversal(
                Box::new(Expr {
                    id: Default::default(),
                    kind: ExprKind::Variable(rng.pick(&["var", "local", "data"]).into()),
                }),
                vec![Traverser::Attr(
                    rng.pick(&[
                        "env", "list", "objs", "key", "tags", "nothing", "unset", "nope",
                    ])
                    .into(),
                )],
            ),
            6 => ExprKind::Array(Vec::new()),
            7 => ExprKind::Object(Vec::new()),
            _ => ExprKind::Variable("x".into()),
        }
    } else {
        let d = depth - 1;
        match rng.below(12) {
            0 => ExprKind::Array((0..rng.below(4)).map(|_| random_expr(rng, d)).collect()),
            1 => ExprKind::Object(
                (0..rng.below(3))
                    .map(|_| {
                        let key = if rng.below(2) == 0 {
                            ObjectKey::Ident(rng.pick(&["a", "b", "c"]).into())
                        } else {
                            ObjectKey::Expr(random_expr(rng, d))
                        };
                        (key, random_expr(rng, d))
                    })
                    .collect(),
            ),
            2 => ExprKind::Template(
                (0..rng.below(4))
                    .map(|_| match rng.below(4) {
                        0 => TemplatePart::Literal("lit".into()),
                        1 => TemplatePart::If {
                            cond: random_expr(rng, d),
                            then: vec![TemplatePart::Interpolation(random_expr(rng, d))],
                            otherwise: vec![TemplatePart::Literal("no".into())],
                        },
                        2 => TemplatePart::For {
                            key_var: None,
                            value_var: "x".into(),
                            collection: random_expr(rng, d),
                            body: vec![TemplatePart::Interpolation(random_expr(rng, d))],
                        },
                        _ => TemplatePart::Interpolation(random_expr(rng, d)),
                    })
                    .collect(),
            ),
            3 => ExprKind::Traversal(
                Box::new(random_expr(rng, d)),
                (0..1 + rng.below(3))
                    .map(|_| match rng.below(5) {
                        0 => Traverser::Attr(rng.pick(&["a", "name", "env"]).into()),
                        1 => Traverser::Index(random_expr(rng, d)),
                        2 => Traverser::LegacyIndex(rng.below(3) as u64),
                        3 => Traverser::AttrSplat,
                        _ => Traverser::FullSplat,
                    })
                    .collect(),
            ),
            4..=6 => terraci_db::syntax::Call::kind(
                rng.pick(FUNCTION_NAMES).into(),
                (0..rng.below(4)).map(|_| random_expr(rng, d)).collect(),
                rng.below(8) == 0,
            ),
            7 => ExprKind::Conditional(
                Box::new(random_expr(rng, d)),
                Box::new(random_expr(rng, d)),
                Box::new(random_expr(rng, d)),
            ),
            8 => ExprKind::Unary(
                if rng.below(2) == 0 {
                    UnaryOp::Neg
                } else {
                    UnaryOp::Not
                },
                Box::new(random_expr(rng, d)),
            ),
            9 => ExprKind::Binary(
                [
                    BinaryOp::Eq,
                    BinaryOp::NotEq,
                    BinaryOp::Less,
                    BinaryOp::Plus,
                    BinaryOp::Mul,
                    BinaryOp::Div,
                    BinaryOp::Mod,
                    BinaryOp::And,
                    BinaryOp::Or,
                ][rng.below(9)],
                Box::new(random_expr(rng, d)),
                Box::new(random_expr(rng, d)),
            ),
            10 => ExprKind::For(Box::new(ForExpr {
                key_var: (rng.below(2) == 0).then(|| "k".into()),
                value_var: "x".into(),
                collection: random_expr(rng, d),
                key_expr: (rng.below(2) == 0).then(|| random_expr(rng, d)),
                value_expr: random_expr(rng, d),
                cond: (rng.below(3) == 0).then(|| random_expr(rng, d)),
                grouping: rng.below(3) == 0,
            })),
            _ => ExprKind::Paren(Box::new(random_expr(rng, d))),
        }
    };
    Expr {
        id: Default::default(),
        kind,
    }
}

#[test]
fn random_expressions_never_panic() {
    let host = MemHost(
        [("/m/t.tpl", "${x}"), ("/m/a", "a,b\n1,2")]
            .into_iter()
            .map(|(p, c)| (Utf8PathBuf::from(p), c.to_string()))
            .collect(),
    );
    let scope = scope();
    let ctx = EvalContext {
        scope: &scope,
        extra: &[],
        module_dir: Utf8PathBuf::from("/m"),
        host: &host,
    };
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut outcomes = BTreeMap::<&str, usize>::new();
    for _ in 0..3000 {
        let expr = random_expr(&mut rng, 6);
        let key = match evaluate(&expr, &ctx) {
            Ok(Value::Unknown(_)) => "unknown",
            Ok(_) => "value",
            Err(e) => e.code.as_str(),
        };
        *outcomes.entry(key).or_default() += 1;
    }
    // The generator must exercise both successes and errors to be worth anything.
    assert!(
        outcomes.get("value").copied().unwrap_or(0) > 300,
        "{outcomes:?}"
    );
    assert!(
        outcomes.get("evaluation-error").copied().unwrap_or(0) > 300,
        "{outcomes:?}"
    );
}

fn converted(value_src: &str, type_src: &str) -> String {
    let value = eval(value_src).expect("value evaluates");
    let t = parse_expr(type_src).expect("type parses");
    match super::convert_to_type(value, &t) {
        Ok(v) => show(&v),
        Err(m) => format!("!{m}"),
    }
}

#[test]
fn type_constraints_convert_like_terraform() {
    let cases = [
        ("\"a\"", "string", "\"a\""),
        ("1", "string", "\"1\""),
        ("true", "string", "\"true\""),
        ("\"1.5\"", "number", "1.5"),
        ("\"x\"", "number", "!cannot convert \"x\" to number"),
        ("\"true\"", "bool", "true"),
        ("[1]", "string", "!string required"),
        ("null", "string", "null"),
        (
            "local.key",
            "list(string)",
            "(unknown: `data.aws_caller_identity.me.account_id` is only known after apply)",
        ),
        ("[1, \"a\"]", "list(string)", "[\"1\", \"a\"]"),
        (
            "[\"b\", \"a\", \"b\"]",
            "set(string)",
            "toset([\"a\", \"b\"])",
        ),
        ("[1, \"a\"]", "list(any)", "[\"1\", \"a\"]"),
        ("[1, \"a\"]", "list", "[\"1\", \"a\"]"),
        ("[1, [2]]", "any", "[1, [2]]"),
        ("{a = 1}", "map(string)", "{\"a\" = \"1\"}"),
        (
            "{a = [1]}",
            "map(string)",
            "!map element 0: string required",
        ),
        (
            "\"x\"",
            "list(string)",
            "!list of string required, but have string",
        ),
        ("[1, \"a\"]", "tuple([number, string])", "[1, \"a\"]"),
        (
            "[1]",
            "tuple([number, string])",
            "!tuple required with 2 elements",
        ),
        (
            "{name = \"x\", extra = 1}",
            "object({name = string, size = optional(number, 3), tags = optional(map(string))})",
            "{\"name\" = \"x\", \"size\" = 3, \"tags\" = null}",
        ),
        (
            "{size = 1}",
            "object({name = string})",
            "!attribute \"name\" is required",
        ),
        (
            "{a = {name = 1}}",
            "map(object({name = string}))",
            "{\"a\" = {\"name\" = \"1\"}}",
        ),
        ("\"a\"", "\"string\"", "\"a\""),
        ("\"a\"", "strin", "!not a valid type constraint"),
    ];
    let mut failures = Vec::new();
    for (value, t, want) in cases {
        let got = converted(value, t);
        let ok = match want.strip_prefix('!') {
            Some(fragment) => got.starts_with('!') && got.contains(fragment),
            None => got == want,
        };
        if !ok {
            failures.push(format!(
                "  {value} as {t}\n    want: {want}\n    got:  {got}"
            ));
        }
    }
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
fn an_object_orders_looks_up_and_compares_as_a_map_of_its_entries() {
    let entries = [("b", 1.0), ("a", 2.0), ("c", 3.0), ("a", 4.0)];
    let map: BTreeMap<String, Value> = entries
        .iter()
        .map(|(k, v)| (k.to_string(), Value::Number(*v)))
        .collect();
    let collected: Object = entries
        .iter()
        .map(|(k, v)| (k.to_string(), Value::Number(*v)))
        .collect();
    let mut inserted = Object::new();
    for (k, v) in entries {
        inserted.insert(k.to_string(), Value::Number(v));
    }
    let mut extended = Object::from([("c".to_string(), Value::Null)]);
    extended.extend(
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), Value::Number(*v))),
    );
    for object in [&collected, &inserted, &extended] {
        // The last value given for a key wins, and entries come in key order.
        let got: Vec<(&String, &Value)> = object.iter().collect();
        assert_eq!(got, map.iter().collect::<Vec<_>>());
        assert_eq!(format!("{object:?}"), format!("{map:?}"));
        assert_eq!(object.get("a"), Some(&Value::Number(4.0)));
        assert_eq!(object.get("d"), None);
    }
    assert_eq!(
        inserted.insert("b".into(), Value::Null),
        Some(Value::Number(1.0))
    );
    assert_eq!(inserted.remove("b"), Some(Value::Null));
    assert_eq!(inserted.keys().collect::<Vec<_>>(), ["a", "c"]);
}
