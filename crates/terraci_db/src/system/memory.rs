//! An in-memory filesystem and environment for unit tests.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Arc, Mutex};

use camino::{Utf8Path, Utf8PathBuf};

use super::{DirEntry, EntryKind, Stamp, System};

#[derive(Debug, Clone, Default)]
pub struct MemorySystem {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    files: BTreeMap<Utf8PathBuf, Vec<u8>>,
    /// Bumped on every write: the file's stamp.
    versions: BTreeMap<Utf8PathBuf, u64>,
    writes: u64,
    /// Paths read so far, in order (tests of what a run does not read).
    reads: Vec<Utf8PathBuf>,
    env: BTreeMap<String, String>,
    /// Names of the environment variables read, in order.
    env_reads: Vec<String>,
}

impl Inner {
    fn put(&mut self, path: &Utf8Path, bytes: Vec<u8>) {
        self.writes += 1;
        self.versions.insert(path.to_owned(), self.writes);
        self.files.insert(path.to_owned(), bytes);
    }

    fn stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        let len = self.files.get(path)?.len() as u64;
        Some(Stamp {
            dev: 0,
            ino: self.versions.get(path).copied().unwrap_or(0),
            len,
            mtime_ns: 0,
            ctime_ns: 0,
        })
    }
}

impl MemorySystem {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds or replaces a file; `path` must be absolute.
    pub fn write_file(&self, path: impl AsRef<Utf8Path>, contents: impl Into<Vec<u8>>) {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.put(path.as_ref(), contents.into());
    }

    pub fn remove_file(&self, path: impl AsRef<Utf8Path>) {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.files.remove(path.as_ref());
        inner.versions.remove(path.as_ref());
    }

    /// Takes the paths read since the last call.
    pub fn take_reads(&self) -> Vec<Utf8PathBuf> {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        std::mem::take(&mut inner.reads)
    }

    /// The environment variables read since the last call, by name.
    pub fn take_env_reads(&self) -> Vec<String> {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        std::mem::take(&mut inner.env_reads)
    }

    pub fn set_env(&self, name: &str, value: &str) {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.env.insert(name.to_owned(), value.to_owned());
    }
}

impl System for MemorySystem {
    /// Directories exist in memory as the prefixes of files: nothing to create.
    fn create_dir_all(&self, _path: &Utf8Path) -> io::Result<()> {
        Ok(())
    }

    fn remove_file(&self, path: &Utf8Path) -> io::Result<()> {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.versions.remove(path);
        match inner.files.remove(path) {
            Some(_) => Ok(()),
            None => Err(io::Error::new(io::ErrorKind::NotFound, path.to_string())),
        }
    }

    fn rename(&self, from: &Utf8Path, to: &Utf8Path) -> io::Result<()> {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        let bytes = inner
            .files
            .remove(from)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, from.to_string()))?;
        inner.versions.remove(from);
        inner.put(to, bytes);
        Ok(())
    }

    fn shared(&self) -> Arc<dyn System> {
        // Clones share the tree, so the handle sees later writes.
        Arc::new(self.clone())
    }

    fn read(&self, path: &Utf8Path) -> io::Result<Vec<u8>> {
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.reads.push(path.to_owned());
        inner
            .files
            .get(path)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{path}: not found")))
    }

    fn read_stamped(&self, path: &Utf8Path) -> io::Result<(Vec<u8>, Option<Stamp>)> {
        let bytes = self.read(path)?;
        let inner = self.inner.lock().expect("memory system lock poisoned");
        Ok((bytes, inner.stamp(path)))
    }

    fn stamp(&self, path: &Utf8Path) -> Option<Stamp> {
        let inner = self.inner.lock().expect("memory system lock poisoned");
        inner.stamp(path)
    }

    fn program_id(&self) -> Option<Vec<u8>> {
        Some(b"memory".to_vec())
    }

    /// A fixed moment long after every stamp this system hands out.
    fn now(&self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000)
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
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        inner.env_reads.push(name.to_owned());
        inner.env.get(name).cloned()
    }

    fn current_dir(&self) -> io::Result<Utf8PathBuf> {
        Ok(Utf8PathBuf::from("/"))
    }

    fn write_atomic_parts(&self, path: &Utf8Path, parts: &[&[u8]]) -> io::Result<bool> {
        let bytes = parts.concat();
        let mut inner = self.inner.lock().expect("memory system lock poisoned");
        if inner.files.get(path).is_some_and(|b| *b == bytes) {
            return Ok(false);
        }
        inner.put(path, bytes);
        Ok(true)
    }
}
