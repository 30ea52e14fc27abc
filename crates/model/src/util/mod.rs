//! Small shared helpers.

pub mod bytes;
pub mod dsu;
pub mod fasthash;
pub mod rng;
pub mod svg;

/// 64-bit FNV-1a hash: stable across runs, platforms and Rust versions (unlike `DefaultHasher`),
/// so it can name cache files and compare texts across ranks.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
