//! Quoting for the places where repository text (directory names, file contents) meets
//! an interpreter: POSIX `sh` words, one-line comments, and the terminal.
//!
//! Input: any string. Output: text that the reader takes for exactly that string and
//! nothing more (see `docs/security.md`). Pure functions, no state.

use std::borrow::Cow;
use std::fmt::Write as _;

/// `s` as one POSIX `sh` word: unchanged when it holds only characters no shell gives a
/// meaning to, else single-quoted (`'` becomes `'\''`). Inside single quotes nothing is
/// special to `sh`, newlines included, so the word is always exactly `s`.
pub fn sh_word(s: &str) -> Cow<'_, str> {
    let safe = |b: u8| b.is_ascii_alphanumeric() || b"_-./:=@%+,".contains(&b);
    if !s.is_empty() && s.bytes().all(safe) {
        Cow::Borrowed(s)
    } else {
        Cow::Owned(format!("'{}'", s.replace('\'', r"'\''")))
    }
}

/// The shell line that enters the project-relative directory `dir`: `cd <word>`, with a
/// name that starts with `-` made `./-...` so `cd` cannot take it for an option.
///
/// A name holding a backtick is built by `printf` from an octal escape instead
/// (`terraci_dir=$(printf '...\140...'.) && cd "${terraci_dir%.}"`, the `.` keeping
/// trailing newlines): the line then holds no backtick at all. Runners echo each script
/// line before running it, and gitlab-ci-local does so inside double quotes with only
/// `\`, `"` and `$` escaped, where a backtick would run what follows it.
pub fn sh_cd(dir: &str) -> String {
    let dir = if dir.starts_with('-') {
        Cow::Owned(format!("./{dir}"))
    } else {
        Cow::Borrowed(dir)
    };
    if !dir.contains('`') {
        return format!("cd {}", sh_word(&dir));
    }
    let format = dir
        .replace('\\', "\\\\")
        .replace('%', "%%")
        .replace('`', "\\140");
    format!(
        "terraci_dir=$(printf {}) && cd \"${{terraci_dir%.}}\"",
        sh_word(&format!("{format}."))
    )
}

/// Whether a terminal, a YAML 1.1 reader or a shell comment could take `c` for a line
/// break or a control sequence: C0 and C1 controls, DEL, the Unicode line and paragraph
/// separators, and the bidirectional overrides that reorder what a reader sees.
pub fn is_unsafe_char(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{2028}' | '\u{2029}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}'
        )
}

/// `s` with every [`is_unsafe_char`] written as a `\u{..}` escape (tab, newline and
/// carriage return as `\t`, `\n`, `\r`), so it stays on one line and prints as itself.
pub fn printable(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe_char) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if is_unsafe_char(c) => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// [`printable`] of each line of `s`, the line breaks kept: a message of several lines
/// (an error) whose parts may hold names from the repository, for a terminal.
pub fn printable_lines(s: &str) -> Cow<'_, str> {
    if !s.chars().any(|c| c != '\n' && is_unsafe_char(c)) {
        return Cow::Borrowed(s);
    }
    let lines: Vec<Cow<'_, str>> = s.split('\n').map(printable).collect();
    Cow::Owned(lines.join("\n"))
}

/// [`printable`] of `s` (tabs kept), cut to at most `max` characters around character
/// `at` (0-based) with `...` marking what was left out, and the padding that puts a
/// caret under `at` (tabs where the shown text has tabs).
pub(crate) fn snippet(s: &str, at: usize, max: usize) -> (String, String) {
    let count = s.chars().count();
    let (start, end) = if count <= max {
        (0, count)
    } else {
        let start = at.saturating_sub(max / 2).min(count - max);
        (start, start + max)
    };
    let mut out = String::new();
    let mut pad = String::new();
    if start > 0 {
        out.push_str("...");
        pad.push_str("   ");
    }
    for (i, c) in s.chars().enumerate().take(end).skip(start) {
        let shown = match c {
            '\t' => Cow::Borrowed("\t"),
            c => printable(c.encode_utf8(&mut [0; 4])).into_owned().into(),
        };
        if i < at {
            pad.extend(shown.chars().map(|c| if c == '\t' { '\t' } else { ' ' }));
        }
        out.push_str(&shown);
    }
    if end < count {
        out.push_str("...");
    }
    (out, pad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_words() {
        assert_eq!(sh_word("eu-central-1/vpc"), "eu-central-1/vpc");
        assert_eq!(sh_word("a b"), "'a b'");
        assert_eq!(sh_word("it's"), r"'it'\''s'");
        assert_eq!(sh_word(""), "''");
        assert_eq!(sh_word("$(touch PWNED)"), "'$(touch PWNED)'");
        assert_eq!(sh_word("a\nb"), "'a\nb'");
        assert_eq!(sh_cd("-P/x"), "cd ./-P/x");
        assert_eq!(sh_cd("app"), "cd app");
        assert_eq!(
            sh_cd("a`b%\\"),
            r#"terraci_dir=$(printf 'a\140b%%\\.') && cd "${terraci_dir%.}""#
        );
    }

    #[test]
    fn printable_text_stays_on_one_line() {
        assert_eq!(printable("plain text"), "plain text");
        assert_eq!(printable("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(printable("\u{1b}[2J"), "\\u{1b}[2J");
        assert_eq!(printable("x\u{85}y\u{2028}z"), "x\\u{85}y\\u{2028}z");
    }

    #[test]
    fn snippets_are_bounded_around_the_column() {
        let line = "a".repeat(1000) + "X" + &"b".repeat(1000);
        let (s, pad) = snippet(&line, 1000, 80);
        assert!(s.len() <= 86, "{}", s.len());
        assert_eq!(s.chars().nth(pad.len()), Some('X'));
        assert_eq!(
            snippet("\tab\u{1b}c", 4, 80),
            ("\tab\\u{1b}c".to_owned(), "\t   ".to_owned() + "     ")
        );
    }
}
