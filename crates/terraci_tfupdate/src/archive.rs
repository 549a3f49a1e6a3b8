//! Provider packages: the `zh:` and `h1:` hashes terraform records for a provider zip.
//!
//! Input: the bytes of a zip as the registry serves it. Output: its hashes, or an
//! [`ArchiveError`] that says what in the archive was not as expected. Reading is bounded:
//! an archive whose files would unpack to more than [`MAX_UNPACKED`] is refused.

use std::io::Read;

use base64::Engine as _;
use ring::digest::{digest, Context, SHA256};

/// The most the files of one provider archive may unpack to (the largest providers are
/// about 700 MB unpacked).
pub const MAX_UNPACKED: u64 = 2 << 30;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a provider zip archive: {0}")]
pub struct ArchiveError(pub String);

/// `zh:` + the hex SHA-256 of the archive itself: what the registry's SHA256SUMS lists.
pub fn zip_hash(zip: &[u8]) -> String {
    format!("zh:{}", hex(digest(&SHA256, zip).as_ref()))
}

/// `h1:`: Go's dirhash "Hash1" over the files of the zip, as terraform hashes a package
/// (each entry, directories included, as a `SHA256(content)  name` line, names in byte
/// order; the SHA-256 of those lines, base64).
pub fn h1_hash(zip: &[u8]) -> Result<String, ArchiveError> {
    let mut entries = entries(zip)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    let mut summary = Context::new(&SHA256);
    let mut total = 0u64;
    for entry in &entries {
        if entry.name.contains('\n') {
            return Err(ArchiveError(format!(
                "the file name {:?} holds a line break",
                entry.name
            )));
        }
        let content = entry.content(zip, MAX_UNPACKED.saturating_sub(total))?;
        total += content.len() as u64;
        let line = format!(
            "{}  {}\n",
            hex(digest(&SHA256, &content).as_ref()),
            entry.name
        );
        summary.update(line.as_bytes());
    }
    let sum = summary.finish();
    Ok(format!(
        "h1:{}",
        base64::engine::general_purpose::STANDARD.encode(sum.as_ref())
    ))
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

struct Entry {
    name: String,
    method: u16,
    compressed: u64,
    size: u64,
    local_header: u64,
}

fn u16_at(data: &[u8], at: usize) -> Result<u16, ArchiveError> {
    data.get(at..at + 2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .ok_or_else(|| ArchiveError("truncated".to_owned()))
}

fn u32_at(data: &[u8], at: usize) -> Result<u32, ArchiveError> {
    data.get(at..at + 4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .ok_or_else(|| ArchiveError("truncated".to_owned()))
}

/// The central directory's entries.
fn entries(zip: &[u8]) -> Result<Vec<Entry>, ArchiveError> {
    // The end-of-central-directory record is in the last 22 + 65535 bytes.
    let floor = zip.len().saturating_sub(22 + 0xffff);
    let end = (floor..zip.len().saturating_sub(21))
        .rev()
        .find(|&i| zip[i..].starts_with(b"PK\x05\x06"))
        .ok_or_else(|| ArchiveError("no end of central directory record".to_owned()))?;
    let count = u16_at(zip, end + 10)? as usize;
    let mut at = u32_at(zip, end + 16)? as usize;
    if count == 0xffff || at == 0xffff_ffff {
        return Err(ArchiveError("zip64 archives are not read".to_owned()));
    }
    let mut out = Vec::with_capacity(count.min(4096));
    for _ in 0..count {
        if u32_at(zip, at)? != 0x0201_4b50 {
            return Err(ArchiveError(
                "a central directory entry is damaged".to_owned(),
            ));
        }
        let method = u16_at(zip, at + 10)?;
        let compressed = u64::from(u32_at(zip, at + 20)?);
        let size = u64::from(u32_at(zip, at + 24)?);
        let name_len = u16_at(zip, at + 28)? as usize;
        let extra_len = u16_at(zip, at + 30)? as usize;
        let comment_len = u16_at(zip, at + 32)? as usize;
        let local_header = u64::from(u32_at(zip, at + 42)?);
        let name = zip
            .get(at + 46..at + 46 + name_len)
            .ok_or_else(|| ArchiveError("truncated".to_owned()))?;
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| ArchiveError("a file name is not UTF-8".to_owned()))?;
        out.push(Entry {
            name,
            method,
            compressed,
            size,
            local_header,
        });
        at += 46 + name_len + extra_len + comment_len;
    }
    Ok(out)
}

impl Entry {
    fn content(&self, zip: &[u8], budget: u64) -> Result<Vec<u8>, ArchiveError> {
        if self.size > budget {
            return Err(ArchiveError(format!(
                "{} unpacks to more than the {MAX_UNPACKED} bytes read",
                self.name
            )));
        }
        let at =
            usize::try_from(self.local_header).map_err(|_| ArchiveError("truncated".to_owned()))?;
        if u32_at(zip, at)? != 0x0403_4b50 {
            return Err(ArchiveError(format!(
                "the local header of {} is damaged",
                self.name
            )));
        }
        let start = at + 30 + u16_at(zip, at + 26)? as usize + u16_at(zip, at + 28)? as usize;
        let data = usize::try_from(self.compressed)
            .ok()
            .and_then(|len| zip.get(start..start.checked_add(len)?))
            .ok_or_else(|| ArchiveError(format!("{} is truncated", self.name)))?;
        match self.method {
            0 => Ok(data.to_vec()),
            8 => {
                let mut out = Vec::new();
                flate2::read::DeflateDecoder::new(data)
                    .take(self.size + 1)
                    .read_to_end(&mut out)
                    .map_err(|e| ArchiveError(format!("{}: {e}", self.name)))?;
                if out.len() as u64 != self.size {
                    return Err(ArchiveError(format!(
                        "{} does not unpack to the size its entry says",
                        self.name
                    )));
                }
                Ok(out)
            }
            m => Err(ArchiveError(format!(
                "{} is packed with method {m}, not stored or deflate",
                self.name
            ))),
        }
    }
}

/// A zip of `files` (name, content), deflated when `deflate`: the packages the tests serve
/// from their fake registry and filesystem mirror, so every hash is known. Fixed
/// timestamps, so the same files give the same bytes.
pub fn build_zip(files: &[(&str, &[u8])], deflate: bool) -> Vec<u8> {
    use std::io::Write as _;
    let mut out = Vec::new();
    let mut central = Vec::new();
    for (name, content) in files {
        let data = if deflate {
            let mut encoder =
                flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
            encoder
                .write_all(content)
                .expect("writing to a Vec cannot fail");
            encoder.finish().expect("writing to a Vec cannot fail")
        } else {
            content.to_vec()
        };
        let crc = crc32fast::hash(content);
        let offset = out.len() as u32;
        let method: u16 = if deflate { 8 } else { 0 };
        // Version needed 2.0, no flags, 1980-01-01 00:00.
        let common = |buf: &mut Vec<u8>| {
            buf.extend_from_slice(&20u16.to_le_bytes());
            buf.extend_from_slice(&0u16.to_le_bytes());
            buf.extend_from_slice(&method.to_le_bytes());
            buf.extend_from_slice(&0u16.to_le_bytes());
            buf.extend_from_slice(&0x21u16.to_le_bytes());
            buf.extend_from_slice(&crc.to_le_bytes());
            buf.extend_from_slice(&(data.len() as u32).to_le_bytes());
            buf.extend_from_slice(&(content.len() as u32).to_le_bytes());
            buf.extend_from_slice(&(name.len() as u16).to_le_bytes());
            buf.extend_from_slice(&0u16.to_le_bytes());
        };
        out.extend_from_slice(b"PK\x03\x04");
        common(&mut out);
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(&data);
        central.extend_from_slice(b"PK\x01\x02");
        central.extend_from_slice(&0x0314u16.to_le_bytes());
        common(&mut central);
        central.extend_from_slice(&[0; 6]);
        // Unix mode 0755 for the provider binary, as release zips carry it.
        central.extend_from_slice(&(0o100755u32 << 16).to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let start = out.len() as u32;
    out.extend_from_slice(&central);
    out.extend_from_slice(b"PK\x05\x06");
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(files.len() as u16).to_le_bytes());
    out.extend_from_slice(&(central.len() as u32).to_le_bytes());
    out.extend_from_slice(&start.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The package terraform 1.11.4 hashed in the constraint oracle (`zip -X` of one
    /// 11-byte file); terraform recorded this `h1:` for it.
    #[test]
    fn h1_is_the_hash_terraform_records() {
        let zip = build_zip(
            &[("terraform-provider-tiny_v1.2.3", b"tiny 1.2.3\n")],
            false,
        );
        assert_eq!(
            h1_hash(&zip).unwrap(),
            "h1:Out+kO8vLLgrzv34TpNQMq+FrWY0rrWsbF/6LV0J9sw="
        );
        let deflated = build_zip(&[("terraform-provider-tiny_v1.2.3", b"tiny 1.2.3\n")], true);
        assert_ne!(zip_hash(&zip), zip_hash(&deflated));
        assert_eq!(
            h1_hash(&zip),
            h1_hash(&deflated),
            "h1 hashes the files, not the packing"
        );
    }

    #[test]
    fn a_damaged_archive_is_an_error_not_a_panic() {
        let zip = build_zip(&[("a", b"hello")], true);
        for cut in 0..zip.len() {
            let _ = h1_hash(&zip[..cut]);
        }
        assert!(h1_hash(b"not a zip").is_err());
    }
}
