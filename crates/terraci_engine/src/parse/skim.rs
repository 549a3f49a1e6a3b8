//! Skimming: blank out the top-level blocks terraci never reads before hcl-edit sees them.
//!
//! Input: the text of a native `.tf`/`.tofu` file. Output: the same text with every
//! top-level block that cannot contribute a fact (`resource`, `output`, `provider`, data
//! sources other than `terraform_remote_state`, ...) replaced by a `/* ... */` comment of
//! the same length with the same line breaks, or `None` when the file is to be parsed as
//! it is. Most bytes of real modules are `resource` blocks, and hcl-edit builds a full
//! syntax tree with decor for each of them; the scanner here only matches brackets.
//!
//! Soundness rests on two rules:
//! - Byte offsets and line numbers are unchanged, so every span hcl-edit records in the
//!   skimmed text is the span of the same node in the original, and [`super::locate`]
//!   and syntax-error positions need no translation.
//! - The scanner is conservative: anything it does not fully understand at the top level
//!   (an attribute, a non-ASCII identifier, a label with an escape, text after a closing
//!   brace, an unbalanced bracket, an unterminated string, heredoc or comment) makes it
//!   return `None`, and the whole file is parsed by hcl-edit as before. A block it keeps is
//!   never touched, so a block that matters can never be lost.
//!
//! What is no longer reported: a grammar error *inside* a skipped block whose brackets,
//! strings, heredocs and comments are all well formed (say `count = = 1` in a `resource`).
//! Terraform's own `validate` reports those; they cannot change the dependency graph.
//! Lexical damage anywhere (a half-typed block, a missing `}` or `"`) still reaches
//! hcl-edit and is a `syntax-error` with its position, as before.

/// Whether a top-level block can hold a fact: see [`crate::facts::file_facts`].
fn needed(ident: &[u8], first_label: Option<&[u8]>) -> bool {
    match ident {
        b"terraform" | b"locals" | b"variable" | b"module" => true,
        b"data" => first_label.is_none_or(|l| l == b"terraform_remote_state"),
        _ => false,
    }
}

/// The text to hand to hcl-edit in place of `text`, or `None` to parse `text` itself
/// (nothing to skip, or a construct the scanner leaves to the real parser).
pub(super) fn skim(text: &str) -> Option<String> {
    let mut skipped: Vec<(usize, usize)> = Vec::new();
    let mut lx = Lexer {
        b: text.as_bytes(),
        i: 0,
    };
    loop {
        lx.skip_blank()?;
        if lx.eof() {
            break;
        }
        let start = lx.i;
        let ident = lx.ident()?;
        let mut first_label: Option<&[u8]> = None;
        loop {
            lx.skip_inline_space();
            let label = match lx.peek() {
                Some(b'"') => lx.label_string()?,
                Some(c) if is_ident_start(c) => lx.ident()?,
                _ => break,
            };
            first_label.get_or_insert(label);
        }
        if lx.peek() != Some(b'{') {
            // A top-level attribute or something malformed: hcl-edit decides.
            return None;
        }
        lx.i += 1;
        lx.balanced(b'}')?;
        let end = lx.i;
        lx.rest_of_line()?;
        if !needed(ident, first_label) {
            skipped.push((start, end));
        }
    }
    if skipped.is_empty() {
        return None;
    }
    let mut out = text.as_bytes().to_vec();
    for (start, end) in skipped {
        // Every byte but the line breaks, a line's run at a time.
        let region = &mut out[start..end];
        let mut from = 0;
        while from < region.len() {
            let to = memchr(b'\n', &region[from..]).map_or(region.len(), |n| from + n);
            region[from..to].fill(b' ');
            from = to + 1;
        }
        // One comment instead of a run of blank lines: hcl-edit skips it in one search.
        // It closes on the last two adjacent bytes that were not line breaks, so every
        // line break stays where it was.
        let close = (start + 2..end.saturating_sub(1))
            .rev()
            .find(|&p| out[p] != b'\n' && out[p + 1] != b'\n');
        if let Some(p) = close {
            out[start..start + 2].copy_from_slice(b"/*");
            out[p..p + 2].copy_from_slice(b"*/");
        }
    }
    // Only ASCII bytes were written, each over a whole skipped region, so every multi-byte
    // character is either kept whole or overwritten whole.
    Some(String::from_utf8(out).expect("blanking keeps UTF-8 valid"))
}

/// An ASCII identifier's first byte (both scanners leave other identifiers to hcl-edit).
pub(super) fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

pub(super) fn is_ident_continue(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c == b'-'
}

struct Lexer<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Lexer<'a> {
    fn eof(&self) -> bool {
        self.i >= self.b.len()
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    fn peek2(&self) -> Option<u8> {
        self.b.get(self.i + 1).copied()
    }

    fn skip_inline_space(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }

    fn skip_to_newline(&mut self) {
        match memchr(b'\n', &self.b[self.i..]) {
            Some(n) => self.i += n,
            None => self.i = self.b.len(),
        }
    }

    /// After `/*`: up to and including `*/`.
    fn block_comment(&mut self) -> Option<()> {
        self.i += comment_end(&self.b[self.i..])?;
        Some(())
    }

    /// Whitespace, newlines and comments between top-level structures.
    fn skip_blank(&mut self) -> Option<()> {
        loop {
            match (self.peek(), self.peek2()) {
                (Some(b' ' | b'\t' | b'\r' | b'\n'), _) => self.i += 1,
                (Some(b'#'), _) | (Some(b'/'), Some(b'/')) => self.skip_to_newline(),
                (Some(b'/'), Some(b'*')) => {
                    self.i += 2;
                    self.block_comment()?;
                }
                _ => return Some(()),
            }
        }
    }

    fn ident(&mut self) -> Option<&'a [u8]> {
        let start = self.i;
        if !self.peek().is_some_and(is_ident_start) {
            return None;
        }
        while self.peek().is_some_and(is_ident_continue) {
            self.i += 1;
        }
        Some(&self.b[start..self.i])
    }

    /// A quoted block label without escapes or interpolation (anything else: `None`).
    fn label_string(&mut self) -> Option<&'a [u8]> {
        self.i += 1;
        let start = self.i;
        loop {
            match self.peek()? {
                b'"' => {
                    let label = &self.b[start..self.i];
                    self.i += 1;
                    return Some(label);
                }
                b'\\' | b'\n' | b'$' | b'%' => return None,
                _ => self.i += 1,
            }
        }
    }

    /// After a top-level block's `}`: only blanks or a line comment up to the newline.
    fn rest_of_line(&mut self) -> Option<()> {
        self.skip_inline_space();
        match (self.peek(), self.peek2()) {
            (None, _) | (Some(b'\n'), _) | (Some(b'\r'), Some(b'\n')) => Some(()),
            (Some(b'#'), _) | (Some(b'/'), Some(b'/')) => {
                self.skip_to_newline();
                Some(())
            }
            _ => None,
        }
    }

    /// Inside brackets, after the opener: up to and including the matching `close`.
    /// Strings, templates, heredocs and comments are stepped over as HCL's lexer would.
    fn balanced(&mut self, close: u8) -> Option<()> {
        // An explicit stack: the nesting limit was checked before, but a scanner should
        // not depend on it for its stack depth.
        let mut stack: Vec<u8> = vec![close];
        while let Some(c) = self.peek() {
            match c {
                b'"' => {
                    self.i += 1;
                    self.string(&mut stack)?;
                    continue;
                }
                b'#' => self.skip_to_newline(),
                b'/' if self.peek2() == Some(b'/') => self.skip_to_newline(),
                b'/' if self.peek2() == Some(b'*') => {
                    self.i += 2;
                    self.block_comment()?;
                }
                b'<' if self.peek2() == Some(b'<') => self.heredoc()?,
                b'{' => {
                    stack.push(b'}');
                    self.i += 1;
                }
                b'[' => {
                    stack.push(b']');
                    self.i += 1;
                }
                b'(' => {
                    stack.push(b')');
                    self.i += 1;
                }
                b'}' | b']' | b')' => {
                    if stack.pop() != Some(c) {
                        return None;
                    }
                    self.i += 1;
                    if stack.is_empty() {
                        return Some(());
                    }
                    // Closing an interpolation returns into its template string.
                    if c == b'}' && stack.last() == Some(&b'"') {
                        stack.pop();
                        self.string(&mut stack)?;
                    }
                }
                // A run of bytes none of the arms above looks at, in one tight loop: most
                // of a skipped block.
                _ => {
                    self.i += 1;
                    while self
                        .b
                        .get(self.i)
                        .is_some_and(|&b| !BALANCED_STOP[usize::from(b)])
                    {
                        self.i += 1;
                    }
                }
            }
        }
        None
    }

    /// Inside a quoted template, after `"` (or after an interpolation's `}`): up to and
    /// including the closing `"`, or up to and including the `${`/`%{` that opens an
    /// interpolation, which is then pushed (with a `"` marker to come back here).
    fn string(&mut self, stack: &mut Vec<u8>) -> Option<()> {
        loop {
            match self.peek()? {
                b'"' => {
                    self.i += 1;
                    return Some(());
                }
                b'\\' => self.i += 2,
                b'\n' => return None,
                c @ (b'$' | b'%') => {
                    if self.peek2() == Some(b'{') {
                        self.i += 2;
                        stack.push(b'"');
                        stack.push(b'}');
                        return Some(());
                    }
                    // `$${` and `%%{` are escapes for a literal `${` / `%{`.
                    if self.peek2() == Some(c) && self.b.get(self.i + 2) == Some(&b'{') {
                        self.i += 3;
                    } else {
                        self.i += 1;
                    }
                }
                _ => self.i += 1,
            }
        }
    }

    /// At `<<`: `<<ID` or `<<-ID`, a newline, then lines up to one that is `ID` alone
    /// (leading and trailing blanks allowed), which is consumed without its newline.
    fn heredoc(&mut self) -> Option<()> {
        self.i += 2;
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        let marker = self.ident()?;
        match (self.peek(), self.peek2()) {
            (Some(b'\n'), _) => self.i += 1,
            (Some(b'\r'), Some(b'\n')) => self.i += 2,
            _ => return None,
        }
        loop {
            if self.eof() {
                return None;
            }
            let line_start = self.i;
            self.skip_to_newline();
            let line = &self.b[line_start..self.i];
            if line.trim_ascii() == marker {
                return Some(());
            }
            if !self.eof() {
                self.i += 1;
            }
        }
    }
}

/// Where `text` first nests brackets deeper than `limit`: the offset of that opening
/// bracket. Brackets in strings and comments do not count (hcl-edit does not recurse
/// into them); those of interpolations do. A heredoc's body, and everything from a point
/// the scanner does not understand on (an unterminated string or comment, a closing
/// bracket that does not match), count bracket by bracket, as hcl-edit may recurse into
/// them.
pub(super) fn too_deep(text: &str, limit: usize) -> Option<usize> {
    let mut lx = Lexer {
        b: text.as_bytes(),
        i: 0,
    };
    // As in `Lexer::balanced`; `depth` counts the brackets on it, not the `"` markers.
    let mut stack: Vec<u8> = Vec::new();
    let mut depth = 0;
    let raw_from = loop {
        let c = lx.peek()?;
        let at = lx.i;
        match c {
            b'"' => {
                lx.i += 1;
                match template(&mut lx, &mut stack, &mut depth, limit) {
                    Err(()) => break at,
                    Ok(Some(deep)) => return Some(deep),
                    Ok(None) => {}
                }
            }
            b'#' => lx.skip_to_newline(),
            b'/' if lx.peek2() == Some(b'/') => lx.skip_to_newline(),
            b'/' if lx.peek2() == Some(b'*') => {
                lx.i += 2;
                if lx.block_comment().is_none() {
                    break at;
                }
            }
            b'<' if lx.peek2() == Some(b'<') => {
                if lx.heredoc().is_none() {
                    break at;
                }
                if let Some(deep) = raw_too_deep(&lx.b[at..lx.i], depth, limit) {
                    return Some(at + deep);
                }
            }
            b'{' | b'[' | b'(' => {
                stack.push(match c {
                    b'{' => b'}',
                    b'[' => b']',
                    _ => b')',
                });
                depth += 1;
                lx.i += 1;
                if depth > limit {
                    return Some(at);
                }
            }
            b'}' | b']' | b')' => {
                if stack.pop() != Some(c) {
                    break at;
                }
                depth -= 1;
                lx.i += 1;
                // Closing an interpolation returns into its template string.
                if c == b'}' && stack.last() == Some(&b'"') {
                    stack.pop();
                    let resume = lx.i;
                    match template(&mut lx, &mut stack, &mut depth, limit) {
                        Err(()) => break resume,
                        Ok(Some(deep)) => return Some(deep),
                        Ok(None) => {}
                    }
                }
            }
            _ => lx.i += 1,
        }
    };
    raw_too_deep(&lx.b[raw_from..], depth, limit).map(|deep| raw_from + deep)
}

/// The rest of a quoted template (see [`Lexer::string`]), counting the interpolation it
/// may open: `Err` when it is unterminated, the interpolation's offset when it goes past
/// `limit`.
fn template(
    lx: &mut Lexer<'_>,
    stack: &mut Vec<u8>,
    depth: &mut usize,
    limit: usize,
) -> Result<Option<usize>, ()> {
    let before = stack.len();
    lx.string(stack).ok_or(())?;
    if stack.len() > before {
        *depth += 1;
        if *depth > limit {
            return Ok(Some(lx.i - 1));
        }
    }
    Ok(None)
}

/// Every bracket of `b` counted, from `depth`: the offset of the first opening bracket
/// past `limit`.
fn raw_too_deep(b: &[u8], mut depth: usize, limit: usize) -> Option<usize> {
    for (i, &c) in b.iter().enumerate() {
        match c {
            b'(' | b'[' | b'{' => {
                depth += 1;
                if depth > limit {
                    return Some(i);
                }
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

/// After a `/*`: the length up to and including its `*/`.
pub(super) fn comment_end(rest: &[u8]) -> Option<usize> {
    let mut from = 0;
    loop {
        let star = from + memchr(b'*', &rest[from..])?;
        if rest.get(star + 1) == Some(&b'/') {
            return Some(star + 2);
        }
        from = star + 1;
    }
}

/// The bytes [`Lexer::balanced`] stops at: its arms' first bytes.
static BALANCED_STOP: [bool; 256] = {
    let mut stop = [false; 256];
    let mut i = 0;
    let bytes = *b"\"#/<{[(}])";
    while i < bytes.len() {
        stop[bytes[i] as usize] = true;
        i += 1;
    }
    stop
};

fn memchr(needle: u8, hay: &[u8]) -> Option<usize> {
    memchr::memchr(needle, hay)
}

#[cfg(test)]
mod tests {
    use super::skim;

    #[test]
    fn skips_resources_and_keeps_what_matters() {
        let text = "resource \"a\" \"b\" {\n  x = \"}\"\n}\n\nlocals {\n  a = 1\n}\n";
        let out = skim(text).expect("a resource to skip");
        assert_eq!(out.len(), text.len());
        assert_eq!(out.lines().count(), text.lines().count());
        assert!(out.starts_with("/*"));
        assert!(out.contains("*/"));
        assert!(out.ends_with("locals {\n  a = 1\n}\n"));
    }

    #[test]
    fn nothing_to_skip_parses_the_file_itself() {
        assert_eq!(skim("locals {\n  a = 1\n}\n"), None);
    }

    #[test]
    fn lexical_damage_leaves_the_file_to_hcl_edit() {
        for text in [
            "resource \"a\" \"b\" {\n  x = 1\n",
            "resource \"a\" \"b\" {\n  x = \"open\n}\n",
            "resource \"a\" \"b\" {\n  x = <<EOT\nno end\n}\n",
            "resource \"a\" \"b\" {\n  x = (1]\n}\n",
            "resource \"a\" \"b\" {\n  /* open\n}\n",
            "resource \"a\" \"b\" {\n}  x\n",
            "x = 1\nresource \"a\" \"b\" {\n}\n",
        ] {
            assert_eq!(skim(text), None, "{text}");
        }
    }

    #[test]
    fn templates_heredocs_and_comments_inside_a_skipped_block() {
        let text = concat!(
            "resource \"a\" \"b\" {\n",
            "  s = \"${format(\"}%s{\", \"}\")} $${ %%{ \\\" }\"\n",
            "  h = <<-EOT\n    } \" {\n    EOT\n",
            "  # }\n  // }\n  /* } */\n",
            "  d { e = [for x in y : x if x != \"]\"] }\n",
            "}\n",
            "data \"terraform_remote_state\" \"x\" {\n  backend = \"s3\"\n}\n",
        );
        let out = skim(text).expect("a resource to skip");
        assert!(out.ends_with("data \"terraform_remote_state\" \"x\" {\n  backend = \"s3\"\n}\n"));
        assert!(!out.contains("resource"));
    }
}

/// Differential tests of both shortcuts before hcl-edit: the facts (and the spans behind
/// every diagnostic position) of a skimmed parse equal those of a full parse, and the
/// fast parser ([`crate::parse::fast`]) gives hcl-edit's lowered body or declines, on
/// every fixture, on generated files and on damaged ones.
#[cfg(test)]
mod differential {
    use camino::{Utf8Path, Utf8PathBuf};

    use crate::facts::{native_facts, AttrExpr, FileFacts};
    use crate::parse::{item_spans, parse_native, ParsedFile, SyntaxError};
    use terraci_db::db::Database;
    use terraci_db::files::{File, FileContents, FileKind};
    use terraci_db::system::{EntryKind, OsSystem, System};

    /// `None` where `locate` finds no node (a local in a second `locals` block): the
    /// two parses must agree on that too.
    type Spans = Option<Vec<Option<std::ops::Range<usize>>>>;

    /// Facts, spans and the syntax error of a file that parsed only in part.
    type Outcome = (FileFacts, Vec<Spans>, Option<SyntaxError>);

    fn outcome(file: File, text: &str, skim: bool) -> Result<Outcome, SyntaxError> {
        match parse_native(text, skim) {
            ParsedFile::Native(tree) => {
                let facts = native_facts(file, crate::parse::lower_tree(&tree));
                let mut exprs: Vec<&AttrExpr> = facts.locals.iter().map(|(_, e)| e).collect();
                exprs.extend(facts.variables.iter().filter_map(|v| v.default.as_ref()));
                exprs.extend(facts.backend.as_ref().map(|b| &b.config));
                for r in &facts.remote_states {
                    exprs.extend(
                        [&r.backend, &r.config, &r.workspace, &r.for_each, &r.count]
                            .into_iter()
                            .flatten(),
                    );
                }
                exprs.extend(facts.module_calls.iter().filter_map(|m| m.source.as_ref()));
                let spans = exprs.iter().map(|e| item_spans(&tree, &e.item)).collect();
                Ok((facts, spans, tree.error.clone()))
            }
            ParsedFile::Error(e) => Err(e),
            other => panic!("unexpected {other:?}"),
        }
    }

    fn check(db: &Database, name: &str, text: &str) {
        let file = File::new(
            db,
            Utf8PathBuf::from("m/main.tf"),
            FileKind::Native,
            FileContents::Text(text.into()),
        );
        fast_agrees(name, text);
        if let Some(skimmed) = super::skim(text) {
            fast_agrees(name, &skimmed);
        }
        let full = outcome(file, text, false);
        let lazy = outcome(file, text, true);
        match (&full, &lazy) {
            (Ok((f, fs, fe)), Ok((l, ls, le))) => {
                assert_eq!(f, l, "{name}: facts differ\n{text}");
                assert_eq!(fs, ls, "{name}: spans differ\n{text}");
                assert_eq!(fe, le, "{name}: errors differ\n{text}");
            }
            (Err(f), Err(l)) => assert_eq!(f, l, "{name}: errors differ\n{text}"),
            _ => panic!("{name}: full {full:?}\nlazy {lazy:?}\n{text}"),
        }
    }

    /// The fast parser declines `text` or gives the body hcl-edit's tree lowers to, and
    /// never accepts what hcl-edit rejects. Returns whether it accepted.
    fn fast_agrees(name: &str, text: &str) -> bool {
        let Some(fast) = crate::parse::fast::parse(text) else {
            return false;
        };
        match hcl_edit::parser::parse_body(text) {
            Ok(body) => assert_eq!(
                fast,
                crate::parse::lower_hcl(&body),
                "{name}: bodies differ\n{text:?}"
            ),
            Err(e) => {
                panic!("{name}: the fast parser accepted what hcl-edit rejects ({e})\n{text:?}")
            }
        }
        true
    }

    fn walk(system: &OsSystem, dir: &Utf8Path, out: &mut Vec<Utf8PathBuf>) {
        for e in system.read_dir(dir).expect("fixtures are readable") {
            let path = dir.join(&e.name);
            match e.kind {
                EntryKind::Dir => walk(system, &path, out),
                EntryKind::File if FileKind::of(&e.name) == Some(FileKind::Native) => {
                    out.push(path)
                }
                _ => {}
            }
        }
    }

    #[test]
    fn every_fixture_gives_the_same_facts() {
        let system = OsSystem;
        let root =
            Utf8PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../..")).join("fixtures");
        let mut files = Vec::new();
        walk(&system, &root, &mut files);
        assert!(files.len() > 10, "fixtures found: {}", files.len());
        let db = Database::default();
        for path in files {
            let text = String::from_utf8(system.read(&path).expect("readable")).expect("UTF-8");
            check(&db, path.as_str(), &text);
        }
    }

    /// A small deterministic generator (no dependency): xorshift.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
            items[(self.next() % items.len() as u64) as usize]
        }
        fn chance(&mut self, n: u64) -> bool {
            self.next() % n == 0
        }
    }

    const VALUES: &[&str] = &[
        "\"plain\"",
        "\"${local.a}/b\"",
        "\"brace } in { string\"",
        "\"nested ${format(\"%s}\", \"{\")} done\"",
        "\"escaped $${not} %%{ also } \\\" quote\"",
        "\"%{ if var.x }yes%{ else }no%{ endif }\"",
        "<<EOT\n  } \" {\n  ${local.a}\nEOT\n",
        "<<-EOT\n    text # not a comment }\n    EOT\n",
        "[for k, v in var.m : \"${k}=${v}\" if v != \"]\"]",
        "{ for k in [\"a\", \"}\"] : k => upper(k) }",
        "merge(var.tags, { component = \"x-1\" })",
        "jsonencode({\n    a = [1, 2, { b = \"c\" }]\n  })",
        "var.x == null ? \"a\" : (var.y ? 1 : 2)",
        "42 # trailing } comment",
        "true // another { comment",
        "\"/* not a comment */\"",
        "abspath(path.module)",
        "-1",
        "- 2.5e3",
        "!var.enabled",
        "-var.n",
        "local.a.b[0].c",
        "var.list.*.id",
        "var.list[*].id",
        "local.m[\"k\"]",
        "format(\"%s-%s\", var.a, var.b)",
        "concat(local.a, local.b...)",
        "provider::aws::arn_parse(var.arn)",
        "1 + 2 * 3 - 4 / 5 % 6",
        "var.a == var.b && var.c != var.d || !var.e",
        "var.a < 1 ? var.b >= 2 : var.c <= 3",
        "{ \"k\" = 1, k2 : 2, }",
        "[1, 2, ]",
        "[\n    \"a\",\n    # note\n    \"b\",\n  ]",
        "{\n    a = 1\n    b = [\n      2,\n    ]\n  }",
        "{ for k, v in var.m : k => v... if v != null }",
        "\"\\u00e9\\t\\\\ $$ %x \\\"q\\\"\"",
        "\"${~ local.a ~} b ${local.c}\"",
        "[]",
        "{}",
        "tomap({})",
        "(var.x)",
        "var.x ? var.y : var.z ? 1 : 2",
        "007",
        "1.5e-3",
    ];

    fn body(rng: &mut Rng, depth: u32) -> String {
        let mut s = String::new();
        for i in 0..(rng.next() % 4) {
            match rng.next() % 6 {
                0 if depth < 2 => {
                    s.push_str(&format!("  nested_{i} {{\n{}  }}\n", body(rng, depth + 1)));
                }
                1 => s.push_str("  # comment with { and \" and }\n"),
                2 => s.push_str("  /* block\n     comment } */\n"),
                _ => s.push_str(&format!("  attr_{i} = {}\n", rng.pick(VALUES))),
            }
        }
        s
    }

    fn generate(seed: u64) -> String {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let mut text = String::new();
        for i in 0..(1 + rng.next() % 8) {
            if rng.chance(4) {
                text.push_str(rng.pick(&[
                    "# top comment {\n",
                    "// top } comment\n",
                    "/* a\n } */\n",
                    "\n",
                ]));
            }
            let header = match rng.next() % 11 {
                0 => "terraform".to_owned(),
                1 => "locals".to_owned(),
                2 => format!("variable \"v{i}\""),
                3 => format!("data \"terraform_remote_state\" \"r{i}\""),
                4 => format!("module \"m{i}\""),
                5 => format!("data \"aws_x\" \"d{i}\""),
                6 => format!("output \"o{i}\""),
                7 => "provider \"aws\"".to_owned(),
                8 => format!("data terraform_remote_state r{i}"),
                _ => format!("resource \"aws_x\" \"r{i}\""),
            };
            let inner = match header.as_str() {
                "terraform" => format!(
                    "  backend \"s3\" {{\n    key = {}\n  }}\n{}",
                    rng.pick(VALUES),
                    body(&mut rng, 1)
                ),
                _ => body(&mut rng, 0),
            };
            if rng.chance(5) && !inner.contains('\n') {
                text.push_str(&format!("{header} {{ {} }}\n", inner.trim()));
            } else {
                text.push_str(&format!("{header} {{\n{inner}}}\n"));
            }
            if rng.chance(6) {
                text.push('\n');
            }
        }
        if rng.chance(3) {
            // Half-typed: cut anywhere (on a character boundary).
            let mut cut = (rng.next() as usize) % text.len().max(1);
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            text.truncate(cut);
        }
        if rng.chance(8) {
            text = text.replace('\n', "\r\n");
        }
        text
    }

    #[test]
    fn generated_files_give_the_same_facts() {
        let db = Database::default();
        let (mut skimmed, mut fast) = (0, 0);
        for seed in 0..3000 {
            let text = generate(seed);
            let prepared = super::skim(&text);
            skimmed += usize::from(prepared.is_some());
            fast += usize::from(fast_agrees("", prepared.as_deref().unwrap_or(&text)));
            check(&db, &format!("seed {seed}"), &text);
        }
        // The generator must exercise the skimming and fast paths, not only the fallbacks.
        assert!(skimmed > 1000, "only {skimmed} of 3000 files were skimmed");
        assert!(
            fast > 1000,
            "the fast parser took only {fast} of 3000 files"
        );
    }

    /// Damage that often leaves a file almost valid: the fast parser must still decline
    /// what hcl-edit rejects and agree on what it accepts.
    const EDITS: &[&str] = &[
        "", " ", "\n", "\r\n", "\r", "\t", "{", "}", "[", "]", "(", ")", "\"", "=", "==", ":",
        "::", ",", ".", "..", "...", "*", "-", "!", "?", "#", "//", "/*", "*/", "${", "%{", "~",
        "\\", "$$", "for ", "in ", "if ", "=>", "<<", "a", "null", "1", "0", "é", "\u{feff}",
    ];

    #[test]
    fn mutated_files_never_fool_the_fast_parser() {
        let mut rng = Rng(0x5EED);
        let mut accepted = 0;
        for seed in 0..10_000 {
            let mut text = generate(seed % 1000);
            for _ in 0..=(rng.next() % 2) {
                let mut at = (rng.next() as usize) % (text.len() + 1);
                while !text.is_char_boundary(at) {
                    at -= 1;
                }
                let mut end = (at + (rng.next() % 3) as usize).min(text.len());
                while !text.is_char_boundary(end) {
                    end += 1;
                }
                text.replace_range(at..end, rng.pick(EDITS));
            }
            let name = format!("mutation {seed}");
            accepted += usize::from(fast_agrees(&name, &text));
            if let Some(skimmed) = super::skim(&text) {
                accepted += usize::from(fast_agrees(&name, &skimmed));
            }
        }
        assert!(
            accepted > 1000,
            "the fast parser took only {accepted} mutated files"
        );
    }
}
