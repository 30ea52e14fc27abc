//! Disjoint sets (union-find with path halving): which items a set of links joins.

/// Disjoint sets over `0..n`.
#[derive(Clone, Debug)]
pub struct Dsu {
    up: Vec<usize>,
}

impl Dsu {
    /// `n` singletons.
    pub fn new(n: usize) -> Self {
        Dsu { up: (0..n).collect() }
    }

    /// The representative of `x`'s set.
    pub fn find(&mut self, mut x: usize) -> usize {
        while self.up[x] != x {
            self.up[x] = self.up[self.up[x]];
            x = self.up[x];
        }
        x
    }

    /// Join the sets of `a` and `b`; false if they were one set already. The smaller
    /// representative stays (so representatives are the least member of each set).
    pub fn union(&mut self, a: usize, b: usize) -> bool {
        let (ra, rb) = (self.find(a), self.find(b));
        if ra == rb {
            return false;
        }
        self.up[ra.max(rb)] = ra.min(rb);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unions_join_sets_and_report_cycles() {
        let mut d = Dsu::new(5);
        assert!(d.union(3, 1) && d.union(1, 4));
        assert!(!d.union(4, 3), "3 and 4 are already joined");
        assert_eq!((d.find(4), d.find(3)), (1, 1));
        assert_ne!(d.find(0), d.find(1));
        assert_eq!(d.find(2), 2);
    }
}
