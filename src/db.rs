//! The salsa database.
//!
//! Inputs ([`crate::files`]): file text, modules, the project. Every query in the crate
//! takes `&dyn Db`. Clones share storage, so worker threads can run queries in parallel.

use std::sync::{Arc, Mutex};

/// The database trait every query is written against.
#[salsa::db]
pub trait Db: salsa::Database {}

#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    /// Names of the queries that executed, when logging is on (tests of incrementality).
    log: Arc<Mutex<Option<Vec<String>>>>,
}

impl Default for Database {
    fn default() -> Self {
        let log: Arc<Mutex<Option<Vec<String>>>> = Arc::default();
        let sink = log.clone();
        Database {
            storage: salsa::Storage::new(Some(Box::new(move |event| {
                if let salsa::EventKind::WillExecute { database_key } = event.kind {
                    if let Ok(mut guard) = sink.lock() {
                        if let Some(entries) = guard.as_mut() {
                            entries.push(format!("{database_key:?}"));
                        }
                    }
                }
            }))),
            log,
        }
    }
}

impl Database {
    /// Starts recording which queries execute.
    pub fn start_logging(&self) {
        if let Ok(mut guard) = self.log.lock() {
            *guard = Some(Vec::new());
        }
    }

    /// The queries executed since the last call (or since logging started).
    pub fn take_log(&self) -> Vec<String> {
        match self.log.lock() {
            Ok(mut guard) => guard.as_mut().map(std::mem::take).unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }
}

#[salsa::db]
impl salsa::Database for Database {}

#[salsa::db]
impl Db for Database {}
