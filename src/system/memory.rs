//! An in-memory filesystem and environment for unit tests.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use camino::{Utf8Path, Utf8PathBuf};

use super::{DirEntry, EntryKind, System};

#[derive(Debug, Clone, Default)]
pub struct MemorySystem {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    files: BTreeMap<Utf8PathBuf, Vec<u8>>,
    env: BTreeMap<String, String>,
}

impl MemorySystem {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file; `path` must be absolute.
    pub fn write_file(&self, path: impl AsRef<Utf8Path>, contents: impl Into<Vec<u8>>) {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner
            .files
            .insert(path.as_ref().to_owned(), contents.into());
    }

    pub fn remove_file(&self, path: impl AsRef<Utf8Path>) {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.files.remove(path.as_ref());
    }

    pub fn set_env(&self, name: &str, value: &str) {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.env.insert(name.to_owned(), value.to_owned());
    }
}

impl System for MemorySystem {
    fn shared(&self) -> Arc<dyn System> {
        // Clones share the tree, so the handle sees later writes.
        Arc::new(self.clone())
    }

    fn read(&self, path: &Utf8Path) -> io::Result<Vec<u8>> {
        let inner = self.inner.lock().expect("memory system lock poisoned");
        inner
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{path}: not found")))
    }

    fn read_dir(&self, path: &Utf8Path) -> io::Result<Vec<DirEntry>> {
        let inner = self.inner.lock().expect("memory system lock poisoned");
        let mut out: BTreeMap<String, EntryKind> = BTreeMap::new();
        for file in inner.files.keys() {
            if let Ok(rest) = file.strip_prefix(path) {
                let mut comps = rest.components();
                if let Some(first) = comps.next() {
                    let kind = if comps.next().is_some() {
                        EntryKind::Dir
                    } else {
                        EntryKind::File
                    };
                    out.entry(first.as_str().to_owned()).or_insert(kind);
                }
            }
        }
        if out.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{path}: not found"),
            ));
        }
        Ok(out
            .into_iter()
            .map(|(name, kind)| DirEntry { name, kind })
            .collect())
    }

    fn is_file(&self, path: &Utf8Path) -> bool {
        let inner = self.inner.lock().expect("memory system lock poisoned");
        inner.files.contains_key(path)
    }

    fn is_dir(&self, path: &Utf8Path) -> bool {
        let inner = self.inner.lock().expect("memory system lock poisoned");
        inner
            .files
            .keys()
            .any(|f| f.starts_with(path) && f.as_path() != path)
    }

    fn env_var(&self, name: &str) -> Option<String> {
        let inner = self.inner.lock().expect("memory system lock poisoned");
        inner.env.get(name).cloned()
    }

    fn current_dir(&self) -> io::Result<Utf8PathBuf> {
        Ok(Utf8PathBuf::from("/"))
    }

    fn write_atomic(&self, path: &Utf8Path, bytes: &[u8]) -> io::Result<bool> {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        if inner.files.get(path).is_some_and(|b| b == bytes) {
            return Ok(false);
        }
        inner.files.insert(path.to_owned(), bytes.to_vec());
        Ok(true)
    }
}
