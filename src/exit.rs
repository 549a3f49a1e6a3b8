//! Process exit codes (spec §8) and the error that carries one. It sits below the stages
//! that use it: the project loader, pipeline building and the commands all fail with a
//! code.

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
