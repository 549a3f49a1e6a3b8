//! Between terraci's positions and the protocol's: file URIs and paths, byte offsets and
//! 1-based character columns to 0-based UTF-16 positions, diagnostics.

use std::collections::BTreeMap;

use camino::{Utf8Path, Utf8PathBuf};
use lsp_types::{NumberOrString, Position, Range, Uri};

use terraci_db::diagnostic::Severity;

use crate::Host;

/// The path of a `file:` URI (percent-decoded); `None` for another scheme.
pub fn path_of_uri(uri: &Uri) -> Option<Utf8PathBuf> {
    let rest = uri.as_str().strip_prefix("file://")?;
    // `file://host/path`: only the local host.
    let rest = rest.strip_prefix("localhost").unwrap_or(rest);
    let mut bytes = Vec::with_capacity(rest.len());
    let raw = rest.as_bytes();
    let mut i = 0;
    while i < raw.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (raw[i], raw.get(i + 1).copied(), raw.get(i + 2).copied()) {
            (b'%', Some(h), Some(l)) if hex(h).is_some() && hex(l).is_some() => {
                let value = hex(h).unwrap_or(0) * 16 + hex(l).unwrap_or(0);
                bytes.push(value as u8);
                i += 3;
            }
            (b, _, _) => {
                bytes.push(b);
                i += 1;
            }
        }
    }
    let path = String::from_utf8(bytes).ok()?;
    path.starts_with('/').then(|| Utf8PathBuf::from(path))
}

/// The `file:` URI of an absolute path, every byte but the unreserved ones and `/`
/// percent-encoded.
pub fn uri_of_path(path: &Utf8Path) -> String {
    let mut out = String::from("file://");
    for b in path.as_str().bytes() {
        if b.is_ascii_alphanumeric() || b"-._~/".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The URI of a project file.
pub(crate) fn file_uri(host: &dyn Host, rel: &str) -> Option<Uri> {
    uri_of_path(&host.root().join(rel)).parse().ok()
}

/// The position of byte `offset` of `text`.
pub(crate) fn position_at(text: &str, offset: usize) -> Position {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() as u32;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    let character = before[start..].encode_utf16().count() as u32;
    Position { line, character }
}

/// The byte offset of `pos` in `text` (clamped to its line and to the text).
pub(crate) fn offset_at(text: &str, pos: Position) -> usize {
    let mut start = 0;
    for _ in 0..pos.line {
        match text[start..].find('\n') {
            Some(i) => start += i + 1,
            None => return text.len(),
        }
    }
    let line = &text[start..];
    let line = &line[..line.find('\n').unwrap_or(line.len())];
    let mut units = 0;
    for (i, c) in line.char_indices() {
        if units >= pos.character {
            return start + i;
        }
        units += c.len_utf16() as u32;
    }
    start + line.len()
}

pub(crate) fn range_of(text: &str, bytes: &std::ops::Range<usize>) -> Range {
    Range {
        start: position_at(text, bytes.start),
        end: position_at(text, bytes.end),
    }
}

/// The range a diagnostic at 1-based `line`, `column` (characters) covers: the word
/// there (a name, a traversal), else to the end of the line.
fn diagnostic_range(text: &str, line: u32, column: u32) -> Range {
    let line0 = line.saturating_sub(1);
    let line_text = text.split('\n').nth(line0 as usize).unwrap_or("");
    // A byte order mark takes no column.
    let (line_text, bom) = match line0 {
        0 => match line_text.strip_prefix('\u{feff}') {
            Some(rest) => (rest, 1),
            None => (line_text, 0),
        },
        _ => (line_text, 0),
    };
    let chars: Vec<char> = line_text.chars().collect();
    let from = (column.saturating_sub(1) as usize).min(chars.len());
    let word = |c: &char| c.is_alphanumeric() || "_-.".contains(*c);
    let mut to = from + chars[from..].iter().take_while(|c| word(c)).count();
    if to == from {
        to = chars.len().max(from);
    }
    let utf16 = |n: usize| bom + chars[..n].iter().map(|c| c.len_utf16() as u32).sum::<u32>();
    Range {
        start: Position {
            line: line0,
            character: utf16(from),
        },
        end: Position {
            line: line0,
            character: utf16(to),
        },
    }
}

/// A diagnostic as the protocol's: its code, a link naming `terraci explain-codes CODE`,
/// which the message names too (an editor may show only one of them).
fn protocol_diagnostic(
    range: Range,
    severity: lsp_types::DiagnosticSeverity,
    code: terraci_db::diagnostic::Code,
    message: &str,
) -> lsp_types::Diagnostic {
    let code = code.as_str();
    lsp_types::Diagnostic {
        range,
        severity: Some(severity),
        code: Some(NumberOrString::String(code.to_owned())),
        code_description: format!("terraci:explain-codes/{code}")
            .parse()
            .ok()
            .map(|href| lsp_types::CodeDescription { href }),
        source: Some("terraci".to_owned()),
        message: format!("{message} (terraci explain-codes {code})"),
        ..lsp_types::Diagnostic::default()
    }
}

/// Every diagnostic of the project that names a file, as the protocol's, by file URI.
pub(crate) fn diagnostics_by_uri(host: &dyn Host) -> BTreeMap<String, Vec<lsp_types::Diagnostic>> {
    let db = host.db();
    let mut out: BTreeMap<String, Vec<lsp_types::Diagnostic>> = BTreeMap::new();
    for d in host.diagnostics() {
        let Some(rel) = d.file.as_deref() else {
            continue;
        };
        let range = match d.line {
            Some(line) => {
                let file = db.module_file(rel);
                let text = file.as_ref().and_then(|f| f.contents(db).text());
                diagnostic_range(text.as_deref().unwrap_or(""), line, d.column.unwrap_or(1))
            }
            None => Range::default(),
        };
        let severity = match d.severity {
            Severity::Error => lsp_types::DiagnosticSeverity::ERROR,
            Severity::Warning => lsp_types::DiagnosticSeverity::WARNING,
            Severity::Info => lsp_types::DiagnosticSeverity::INFORMATION,
        };
        let message = match d.details.is_empty() {
            true => d.message.clone(),
            false => format!("{}\n{}", d.message, d.details.join("\n")),
        };
        let diagnostic = protocol_diagnostic(range, severity, d.code, &message);
        let uri = crate::convert::uri_of_path(&host.root().join(rel));
        out.entry(uri).or_default().push(diagnostic);
    }
    for (at, message) in crate::features::cycle_blocks(host) {
        let diagnostic = protocol_diagnostic(
            at.range,
            lsp_types::DiagnosticSeverity::ERROR,
            terraci_db::diagnostic::Code::DependencyCycle,
            &message,
        );
        out.entry(at.uri.as_str().to_owned())
            .or_default()
            .push(diagnostic);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_and_paths_round_trip_with_spaces_and_non_ascii() {
        let path = Utf8Path::new("/tmp/my infra/stagé/main.tf");
        let uri: Uri = uri_of_path(path).parse().expect("a valid URI");
        assert_eq!(uri.as_str(), "file:///tmp/my%20infra/stag%C3%A9/main.tf");
        assert_eq!(path_of_uri(&uri).as_deref(), Some(path));
    }

    #[test]
    fn positions_count_utf16_units() {
        let text = "a = \"é😀\"\nb = 1\n";
        let pos = position_at(text, text.find('"').expect("quote") + 1 + "é😀".len());
        assert_eq!(
            pos,
            Position {
                line: 0,
                character: 8
            }
        );
        assert_eq!(
            offset_at(text, pos),
            text.find("😀").expect("emoji") + "😀".len()
        );
        assert_eq!(
            offset_at(
                text,
                Position {
                    line: 1,
                    character: 2
                }
            ),
            15
        );
    }

    #[test]
    fn a_diagnostic_covers_the_word_at_its_column() {
        let text = "locals {\n  a = data.x.outputs.vpc_idd\n}\n";
        let range = diagnostic_range(text, 2, 22);
        assert_eq!((range.start.character, range.end.character), (21, 28));
    }
}
