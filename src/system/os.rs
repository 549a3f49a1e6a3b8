//! The real machine.
#![allow(clippy::disallowed_methods)]

use std::io::{self, Write};

use camino::{Utf8Path, Utf8PathBuf};

use super::{DirEntry, EntryKind, System};

#[derive(Debug, Default, Clone, Copy)]
pub struct OsSystem;

impl System for OsSystem {
    fn shared(&self) -> std::sync::Arc<dyn System> {
        std::sync::Arc::new(OsSystem)
    }

    fn watch(
        &self,
        root: &Utf8Path,
        outside: &[Utf8PathBuf],
    ) -> io::Result<Box<dyn super::ChangeEvents>> {
        Ok(Box::new(super::NotifyEvents::start(root, outside)?))
    }

    fn read(&self, path: &Utf8Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn read_dir(&self, path: &Utf8Path) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir(path)? {
            let entry = entry?;
            let Ok(name) = entry.file_name().into_string() else {
                continue;
            };
            let ft = entry.file_type()?;
            let kind = if ft.is_symlink() {
                EntryKind::Symlink {
                    to_dir: std::fs::metadata(entry.path()).is_ok_and(|m| m.is_dir()),
                }
            } else if ft.is_dir() {
                EntryKind::Dir
            } else {
                EntryKind::File
            };
            out.push(DirEntry { name, kind });
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    fn is_file(&self, path: &Utf8Path) -> bool {
        path.is_file()
    }

    fn is_dir(&self, path: &Utf8Path) -> bool {
        path.is_dir()
    }

    fn env_var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }

    fn current_dir(&self) -> io::Result<Utf8PathBuf> {
        let dir = std::env::current_dir()?;
        Utf8PathBuf::from_path_buf(dir)
            .map_err(|p| io::Error::other(format!("current directory {p:?} is not UTF-8")))
    }

    fn replace(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<()> {
        let dir = match path.parent() {
            Some(p) if !p.as_str().is_empty() => p.to_owned(),
            _ => Utf8PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir)?;
        let file_name = path.file_name().unwrap_or("output");
        // Unique per process and thread: concurrent writers never share a temp file.
        let tmp = dir.join(format!(
            ".{file_name}.{}.{:?}.tmp",
            std::process::id(),
            std::thread::current().id()
        ));
        let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result
    }

    fn write_atomic(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<bool> {
        if let Ok(existing) = std::fs::read(path) {
            if existing == bytes {
                return Ok(false);
            }
        }
        let dir = match path.parent() {
            Some(p) if !p.as_str().is_empty() => p.to_owned(),
            _ => Utf8PathBuf::from("."),
        };
        std::fs::create_dir_all(&dir)?;
        let file_name = path.file_name().unwrap_or("output");
        let tmp = dir.join(format!(".{file_name}.{}.tmp", std::process::id()));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map(|()| true)
    }
}
