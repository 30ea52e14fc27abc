//! An indexed binary min-heap of items keyed by time, with in-place key updates.
//!
//! The engine keeps one entry per sending flow: its predicted source-completion time. A flow's
//! rate changes many times while it runs; updating its entry in place (O(log F)) keeps the heap
//! as small as the number of live flows instead of piling up stale events to skip later.

/// Min-heap over items `0..` (dense ids) with `f64` keys; ties broken by item id.
#[derive(Clone, Debug, Default)]
pub(crate) struct IndexedHeap {
    heap: Vec<(f64, u32)>,
    /// Position of each item in `heap`, or `u32::MAX` when absent.
    pos: Vec<u32>,
}

const ABSENT: u32 = u32::MAX;

impl IndexedHeap {
    fn less(a: (f64, u32), b: (f64, u32)) -> bool {
        a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).is_lt()
    }

    pub fn peek(&self) -> Option<(f64, u32)> {
        self.heap.first().copied()
    }

    pub fn capacity_bytes(&self) -> usize {
        self.heap.capacity() * 16 + self.pos.capacity() * 4
    }

    /// Insert `item` with `key`, or move it to `key` if present.
    pub fn set(&mut self, item: u32, key: f64) {
        let i = item as usize;
        if i >= self.pos.len() {
            self.pos.resize(i + 1, ABSENT);
        }
        let p = self.pos[i];
        if p == ABSENT {
            self.heap.push((key, item));
            let at = self.heap.len() - 1;
            self.pos[i] = at as u32;
            self.up(at);
        } else {
            let old = self.heap[p as usize].0;
            self.heap[p as usize].0 = key;
            if key < old {
                self.up(p as usize);
            } else {
                self.down(p as usize);
            }
        }
    }

    /// Remove `item` if present.
    pub fn remove(&mut self, item: u32) {
        let i = item as usize;
        let Some(&p) = self.pos.get(i) else { return };
        if p == ABSENT {
            return;
        }
        self.pos[i] = ABSENT;
        let last = self.heap.pop().expect("present item");
        if (p as usize) < self.heap.len() {
            self.heap[p as usize] = last;
            self.pos[last.1 as usize] = p;
            self.up(p as usize);
            self.down(self.pos[last.1 as usize] as usize);
        }
    }

    fn swap(&mut self, a: usize, b: usize) {
        self.heap.swap(a, b);
        self.pos[self.heap[a].1 as usize] = a as u32;
        self.pos[self.heap[b].1 as usize] = b as u32;
    }

    fn up(&mut self, mut i: usize) {
        while i > 0 {
            let p = (i - 1) / 2;
            if Self::less(self.heap[i], self.heap[p]) {
                self.swap(i, p);
                i = p;
            } else {
                break;
            }
        }
    }

    fn down(&mut self, mut i: usize) {
        loop {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            let mut m = i;
            if l < self.heap.len() && Self::less(self.heap[l], self.heap[m]) {
                m = l;
            }
            if r < self.heap.len() && Self::less(self.heap[r], self.heap[m]) {
                m = r;
            }
            if m == i {
                break;
            }
            self.swap(i, m);
            i = m;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng::Rng;

    #[test]
    fn behaves_like_a_sorted_map() {
        let mut h = IndexedHeap::default();
        let mut model: Vec<Option<f64>> = vec![None; 50];
        let mut rng = Rng::new(5);
        for _ in 0..5000 {
            let item = rng.below(50) as u32;
            if rng.below(3) == 0 {
                h.remove(item);
                model[item as usize] = None;
            } else {
                let k = rng.below(100) as f64;
                h.set(item, k);
                model[item as usize] = Some(k);
            }
            let want = model
                .iter()
                .enumerate()
                .filter_map(|(i, k)| k.map(|k| (k, i as u32)))
                .min_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            assert_eq!(h.peek(), want);
        }
    }
}
