//! Process exit codes (spec §8) and the error that carries one. It sits below the stages
//! that use it: the project loader, pipeline building and the commands all fail with a
//! code. A stage's error type says its own code ([`Coded`]); the driver turns it into a
//! [`Failure`] with [`coded`], so the code follows the error, not the call site.

pub const OK: u8 = 0;
pub const ERROR: u8 = 1;
pub const USAGE: u8 = 2;
pub const VALIDATION: u8 = 3;

/// An error that carries its exit code.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

/// A stage's error that knows the exit code a run that ends on it exits with.
pub trait Coded: std::fmt::Display {
    fn exit_code(&self) -> u8;
}

/// The [`Failure`] of a stage's error: its message and its exit code.
pub fn coded<E: Coded>(error: E) -> anyhow::Error {
    fail(error.exit_code(), error.to_string())
}

/// An error with exit code `code` whose cause is already printed (as diagnostics): the
/// run ends with the code and prints nothing more.
pub fn reported(code: u8) -> anyhow::Error {
    fail(code, "")
}

/// An error with exit code `code`.
pub fn fail(code: u8, message: impl Into<String>) -> anyhow::Error {
    Failure {
        code,
        message: message.into(),
    }
    .into()
}
