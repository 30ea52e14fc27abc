//! CLI errors carry their exit code: 2 for bad input, 1 for anything else.

use std::fmt;

#[derive(Debug)]
pub enum CliError {
    /// Bad input (file, flag value): exit code 2.
    Input(String),
    /// Failure while running: exit code 1.
    Failed(String),
    /// A verdict already printed (e.g. "differs"): exit with this code, print nothing more.
    Quiet(i32),
}

impl CliError {
    pub fn exit_code(&self) -> i32 {
        match self {
            CliError::Input(_) => 2,
            CliError::Failed(_) => 1,
            CliError::Quiet(code) => *code,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CliError::Input(m) | CliError::Failed(m) => f.write_str(m),
            CliError::Quiet(_) => Ok(()),
        }
    }
}

impl From<treecast::topology::TopologyError> for CliError {
    fn from(e: treecast::topology::TopologyError) -> Self {
        CliError::Input(e.to_string())
    }
}
