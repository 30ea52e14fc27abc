//! Errors from building or reading a topology: one line naming what is wrong and where.

use std::fmt;

/// A one-line error naming the file, line and field when known.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopologyError {
    /// File the error was found in, if any.
    pub file: Option<String>,
    /// 1-based line number, if known.
    pub line: Option<usize>,
    /// The field or column at fault, if known.
    pub field: Option<String>,
    pub message: String,
}

impl TopologyError {
    pub fn new(message: impl Into<String>) -> Self {
        TopologyError {
            file: None,
            line: None,
            field: None,
            message: message.into(),
        }
    }
    pub fn at_line(mut self, line: usize) -> Self {
        self.line = Some(line);
        self
    }
    pub fn field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
    pub fn in_file(mut self, file: impl Into<String>) -> Self {
        self.file = Some(file.into());
        self
    }
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(file) = &self.file {
            write!(f, "{file}")?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
            }
            write!(f, ": ")?;
        } else if let Some(line) = self.line {
            write!(f, "line {line}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "field '{field}': ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for TopologyError {}
