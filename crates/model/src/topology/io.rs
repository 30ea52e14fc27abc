//! Reading and writing topologies in the stable formats of docs/design.md §4.
//!
//! The format modules, and the API other modules code against:
//! - `topology::json::{from_str(text, file) -> Result<Topology, TopologyError>, to_string(&Topology) -> String}`
//!   (lossless)
//! - `topology::slurm::{from_str(text, file) -> Result<Topology, TopologyError>, to_string(&Topology) -> String}`
//!   (a Slurm tree has switches and host leaves of kind `node`; see `slurm` for what it drops)
//! - `topology::hostlist::{expand, compress}` (Slurm hostlist expressions)
//! - `topology::rtt_csv::{from_str(text, file) -> Result<RttMatrix, TopologyError>, to_string(&RttMatrix) -> String}`
//! - `topology::dot::to_string(&Topology) -> String`
//! - `topology::groups_string(&Topology) -> String`: one line per leaf switch, its host names
//!   sorted and space-separated, lines sorted (the `groups` output format; see `groups`).
//! - [`load_file`]: JSON or Slurm chosen by content; [`save_file`]: format chosen by extension.
//!
//! Every reader returns a one-line [`TopologyError`] naming file, line and field, never panics.

use super::{dot, groups_string, json, slurm, Topology, TopologyError};
use std::path::Path;

/// A square matrix of measured round-trip times between hosts, in microseconds.
/// `rtt_us[i][j]` is `None` where the pair was not measured; the diagonal is `Some(0.0)`.
#[derive(Clone, Debug, PartialEq)]
pub struct RttMatrix {
    pub hosts: Vec<String>,
    pub rtt_us: Vec<Vec<Option<f64>>>,
}

/// A topology output format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Json,
    Slurm,
    Dot,
    Groups,
    /// MPICH's coordinates file ([`super::mpich_coords`]); written only.
    MpichCoords,
}

impl Format {
    /// Every format's name as the CLI spells it, in the order help texts list them.
    pub const NAMES: [&'static str; 5] = ["json", "slurm", "dot", "groups", "mpich-coords"];

    /// Parse a format name as the CLI spells it: `json`, `slurm`, `dot`, `groups`,
    /// `mpich-coords`.
    pub fn from_name(name: &str) -> Option<Format> {
        match name {
            "json" => Some(Format::Json),
            "slurm" => Some(Format::Slurm),
            "dot" => Some(Format::Dot),
            "groups" => Some(Format::Groups),
            "mpich-coords" => Some(Format::MpichCoords),
            _ => None,
        }
    }

    /// [`Format::from_name`], or an error naming the valid names (for `--format` errors).
    pub fn parse_name(name: &str) -> Result<Format, UnknownFormat> {
        Format::from_name(name).ok_or_else(|| UnknownFormat(name.to_string()))
    }

    /// Format for a file name by extension: `.json`, `.conf` (Slurm), `.dot`, `.groups`.
    pub fn from_path(path: &Path) -> Option<Format> {
        match path.extension()?.to_str()? {
            "json" => Some(Format::Json),
            "conf" => Some(Format::Slurm),
            "dot" | "gv" => Some(Format::Dot),
            "groups" => Some(Format::Groups),
            _ => None,
        }
    }

    /// Render a topology in this format. Only `mpich-coords` can fail: it needs ranks.
    pub fn write(self, t: &Topology) -> Result<String, TopologyError> {
        Ok(match self {
            Format::Json => json::to_string(t),
            Format::Slurm => slurm::to_string(t),
            Format::Dot => dot::to_string(t),
            Format::Groups => groups_string(t),
            Format::MpichCoords => return super::mpich_coords::to_string(t),
        })
    }
}

/// A topology format name that is not one of [`Format::NAMES`]; its message lists them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownFormat(pub String);

impl std::fmt::Display for UnknownFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "--format: '{}' is not one of {}", self.0, Format::NAMES.join(", "))
    }
}

impl std::error::Error for UnknownFormat {}

/// Parse topology text, choosing the format by content: JSON if the first non-blank character
/// (after an optional UTF-8 byte-order mark) is `{`, else Slurm topology.conf.
pub fn from_str_auto(text: &str, file: &str) -> Result<Topology, TopologyError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if text.trim_start().starts_with('{') {
        json::from_str(text, file)
    } else {
        slurm::from_str(text, file)
    }
}

/// Load a topology file, choosing the format by content (see [`from_str_auto`]).
/// Errors name the file.
pub fn load_file(path: &Path) -> Result<Topology, TopologyError> {
    let file = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| TopologyError::new(format!("cannot read: {e}")).in_file(&file))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        TopologyError::new(format!("not UTF-8 text (byte {})", e.utf8_error().valid_up_to())).in_file(&file)
    })?;
    from_str_auto(&text, &file)
}

/// Save a topology, choosing the format by extension (`.json`, `.conf`, `.dot`, `.groups`).
pub fn save_file(path: &Path, t: &Topology) -> Result<(), TopologyError> {
    let file = path.display().to_string();
    let format = Format::from_path(path).ok_or_else(|| {
        TopologyError::new("unknown extension: use .json, .conf (Slurm), .dot or .groups").in_file(&file)
    })?;
    let text = format.write(t).map_err(|e| e.in_file(&file))?;
    std::fs::write(path, text).map_err(|e| TopologyError::new(format!("cannot write: {e}")).in_file(&file))
}
