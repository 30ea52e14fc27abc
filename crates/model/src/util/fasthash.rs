//! A hasher for small keys on hot paths: one multiply per word (FxHash's step) instead of
//! SipHash, whose flooding resistance is pointless for keys such as code addresses or
//! (root, size class) pairs that no outsider chooses.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// FxHash-style hasher (see the module docs).
#[derive(Clone, Copy, Default)]
pub struct FastHasher(u64);

impl Hasher for FastHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.write_u64(x as u64);
    }
    fn write_u32(&mut self, x: u32) {
        self.write_u64(x as u64);
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_usize(&mut self, x: usize) {
        self.write_u64(x as u64);
    }
}

/// A `HashMap` with [`FastHasher`].
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FastHasher>>;

/// A `HashSet` with [`FastHasher`].
pub type FastSet<K> = std::collections::HashSet<K, BuildHasherDefault<FastHasher>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_keys_spread_and_maps_work() {
        let mut m: FastMap<(u32, u8), u32> = FastMap::default();
        for r in 0..64u32 {
            for c in 0..32u8 {
                m.insert((r, c), r * 100 + c as u32);
            }
        }
        assert_eq!(m.len(), 64 * 32);
        assert_eq!(m[&(17, 5)], 1705);
        let h = |k: (u32, u8)| {
            let mut s = FastHasher::default();
            std::hash::Hash::hash(&k, &mut s);
            s.finish()
        };
        let mut hashes: Vec<u64> = (0..64u32).flat_map(|r| (0..32u8).map(move |c| h((r, c)))).collect();
        hashes.sort_unstable();
        hashes.dedup();
        assert_eq!(hashes.len(), 64 * 32, "distinct keys, distinct hashes");
    }
}
