//! Tree isomorphism for symmetry pruning ([Hourai2004] §4): AHU canonical labelling.
//!
//! Every vertex gets an integer *own label* first (the caller maps vertex kind, the parameters
//! of the link to its parent and any state — who holds the data, reserved link profiles — to
//! dense integer ids, so isomorphism also requires equal performance and equal state). Then,
//! level by level from the deepest, each vertex's label list (own label followed by its
//! children's classes in ascending order) is radix-sorted with AHU's variable-length string
//! sort and renumbered: equal class at equal depth <=> isomorphic labelled subtrees. Total work
//! is linear in the number of vertices per level plus the alphabet size.
//!
//! Orbits follow top-down: two vertices are exchanged by an automorphism of the rooted labelled
//! tree iff they sit at the same depth and their ancestors pairwise have equal classes, i.e.
//! iff (orbit of parent, own class) agree.
//!
//! Rooting and [Hourai2004]'s parent-side comparison: a labelling from one root only compares
//! sibling subtrees; [Hourai2004] additionally compares, for each edge, the component on the parent
//! side with the subtree on the child side. Those two can only be isomorphic when the edge
//! splits the tree into equal halves — there is at most one such edge, the one joining the two
//! centroids. [`Labeller::centroid_root`] roots the labelling at the unique centroid or, when
//! that balanced edge exists, at a virtual vertex in its middle, where the parent-side/child-side
//! comparison becomes an ordinary sibling comparison. The labelling then sees every automorphism
//! of the unrooted tree, still in linear time. When a vertex is fixed anyway (the sender of a
//! transfer), rooting at it gives exactly the automorphisms that fix it.

/// Where to root a labelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Root {
    /// At a vertex.
    Vertex(u32),
    /// At a virtual vertex in the middle of the link joining two vertices.
    Edge(u32, u32),
}

/// Reusable scratch space and the rooted shape of the current labelling.
#[derive(Clone, Debug, Default)]
pub struct Labeller {
    /// Adjacency: (neighbour, link id).
    adj: Vec<Vec<(u32, u32)>>,
    /// Rooted shape: vertices in BFS order (the virtual root, if any, is `n`).
    order: Vec<u32>,
    /// Parent in the rooting (`u32::MAX` for the root) and the link to it.
    parent: Vec<u32>,
    parent_link: Vec<u32>,
    /// `order[level_start[d]..level_start[d+1]]` are the vertices at depth d.
    level_start: Vec<usize>,
    depth: Vec<u32>,
    root: Option<Root>,
    // scratch
    radix: RadixScratch,
    seq_data: Vec<u32>,
    seq_range: Vec<(u32, u32)>,
    child_lists: Vec<Vec<u32>>,
    sorted: Vec<u32>,
}

impl Labeller {
    /// A labeller for a tree with `n` vertices given as undirected links `(a, b)`.
    pub fn new(n: usize, links: &[(u32, u32)]) -> Labeller {
        let mut adj = vec![Vec::new(); n];
        for (i, &(a, b)) in links.iter().enumerate() {
            adj[a as usize].push((b, i as u32));
            adj[b as usize].push((a, i as u32));
        }
        for a in &mut adj {
            a.sort_unstable();
        }
        Labeller {
            parent: vec![u32::MAX; n + 1],
            parent_link: vec![u32::MAX; n + 1],
            depth: vec![0; n + 1],
            child_lists: vec![Vec::new(); n + 1],
            adj,
            ..Labeller::default()
        }
    }

    pub fn num_vertices(&self) -> usize {
        self.adj.len()
    }

    /// The unique centroid, or the balanced edge between the two centroids. Invariant under
    /// every automorphism of the (unlabelled) tree.
    pub fn centroid_root(&self) -> Root {
        let n = self.adj.len();
        if n <= 1 {
            return Root::Vertex(0);
        }
        // Sizes of subtrees in a rooting at 0.
        let mut order = vec![0u32];
        let mut par = vec![u32::MAX; n];
        let mut i = 0;
        while i < order.len() {
            let u = order[i] as usize;
            for &(w, _) in &self.adj[u] {
                if w != par[u] {
                    par[w as usize] = u as u32;
                    order.push(w);
                }
            }
            i += 1;
        }
        let mut size = vec![1usize; n];
        for &u in order.iter().rev() {
            if par[u as usize] != u32::MAX {
                size[par[u as usize] as usize] += size[u as usize];
            }
        }
        // Balanced edge: a child side of exactly n/2.
        if n.is_multiple_of(2) {
            if let Some(&c) = order
                .iter()
                .find(|&&u| par[u as usize] != u32::MAX && 2 * size[u as usize] == n)
            {
                let p = par[c as usize];
                return Root::Edge(p.min(c), p.max(c));
            }
        }
        // Centroid: largest component after removal <= n/2.
        for &u in &order {
            let u = u as usize;
            let mut largest = n - size[u];
            for &(w, _) in &self.adj[u] {
                if w != par[u] {
                    largest = largest.max(size[w as usize]);
                }
            }
            if 2 * largest <= n {
                return Root::Vertex(u as u32);
            }
        }
        unreachable!("every tree has a centroid")
    }

    /// Root the labelling. Afterwards [`Labeller::parent`] etc. describe this rooting.
    pub fn set_root(&mut self, root: Root) {
        let n = self.adj.len();
        self.order.clear();
        self.level_start.clear();
        match root {
            Root::Vertex(r) => {
                self.order.push(r);
                self.parent[r as usize] = u32::MAX;
                self.parent_link[r as usize] = u32::MAX;
                self.depth[r as usize] = 0;
            }
            Root::Edge(a, b) => {
                let link = self.adj[a as usize]
                    .iter()
                    .find(|&&(w, _)| w == b)
                    .map(|&(_, l)| l)
                    .expect("Root::Edge needs adjacent vertices");
                self.order.push(n as u32);
                self.parent[n] = u32::MAX;
                self.depth[n] = 0;
                for v in [a, b] {
                    self.order.push(v);
                    self.parent[v as usize] = n as u32;
                    self.parent_link[v as usize] = link;
                    self.depth[v as usize] = 1;
                }
            }
        }
        let skip_first = matches!(root, Root::Edge(..));
        let mut i = usize::from(skip_first);
        while i < self.order.len() {
            let u = self.order[i] as usize;
            let pu = self.parent[u];
            for k in 0..self.adj[u].len() {
                let (w, l) = self.adj[u][k];
                if w == pu || (skip_first && self.depth[u] == 1 && self.parent_link[u] == l) {
                    continue;
                }
                self.parent[w as usize] = u as u32;
                self.parent_link[w as usize] = l;
                self.depth[w as usize] = self.depth[u] + 1;
                self.order.push(w);
            }
            i += 1;
        }
        let mut d = u32::MAX;
        for (i, &v) in self.order.iter().enumerate() {
            if self.depth[v as usize] != d {
                d = self.depth[v as usize];
                self.level_start.push(i);
            }
        }
        self.level_start.push(self.order.len());
        self.root = Some(root);
    }

    pub fn root(&self) -> Option<Root> {
        self.root
    }
    /// Vertices in BFS order of the current rooting (the virtual root, if any, is `n`).
    pub fn order(&self) -> &[u32] {
        &self.order
    }
    /// Parent of `v` in the current rooting (`u32::MAX` for the root; `n` for the two
    /// vertices under a virtual root).
    pub fn parent(&self, v: u32) -> u32 {
        self.parent[v as usize]
    }
    /// Link from `v` to its parent (`u32::MAX` for the root).
    pub fn parent_link(&self, v: u32) -> u32 {
        self.parent_link[v as usize]
    }
    pub fn depth(&self, v: u32) -> u32 {
        self.depth[v as usize]
    }
    pub fn num_levels(&self) -> usize {
        self.level_start.len() - 1
    }

    /// AHU classes of all vertices of the current rooting. `own[v]` (indexed by vertex,
    /// including the virtual root at `n` when present) must be < `alphabet`. Writes per-level
    /// dense class ids into `class`: equal ids at equal depth <=> isomorphic subtrees.
    pub fn classes(&mut self, own: &[u32], alphabet: usize, class: &mut Vec<u32>) {
        let nv = self.adj.len() + 1;
        class.clear();
        class.resize(nv, 0);
        for l in &mut self.child_lists {
            l.clear();
        }
        let levels = self.num_levels();
        let mut max_level_size = 0;
        for d in 0..levels {
            max_level_size = max_level_size.max(self.level_start[d + 1] - self.level_start[d]);
        }
        let alphabet = alphabet.max(max_level_size).max(1);
        for d in (0..levels).rev() {
            // Label lists of this level: own label, then the children's classes ascending
            // (children were appended in ascending class order by the previous level).
            self.seq_data.clear();
            self.seq_range.clear();
            for i in self.level_start[d]..self.level_start[d + 1] {
                let v = self.order[i] as usize;
                let start = self.seq_data.len() as u32;
                self.seq_data.push(own[v]);
                self.seq_data.extend_from_slice(&self.child_lists[v]);
                self.seq_range.push((start, self.seq_data.len() as u32));
            }
            let mut sorted = std::mem::take(&mut self.sorted);
            radix_sort_sequences(&self.seq_data, &self.seq_range, alphabet, &mut self.radix, &mut sorted);
            // Renumber: equal lists get equal classes.
            let base = self.level_start[d];
            let mut next = 0u32;
            let mut prev: Option<(u32, u32)> = None;
            for &k in &sorted {
                let r = self.seq_range[k as usize];
                if let Some(p) = prev {
                    if self.seq_data[p.0 as usize..p.1 as usize] != self.seq_data[r.0 as usize..r.1 as usize] {
                        next += 1;
                    }
                }
                prev = Some(r);
                let v = self.order[base + k as usize];
                class[v as usize] = next;
            }
            // Hand the classes to the parents in ascending order.
            if d > 0 {
                for &k in &sorted {
                    let v = self.order[base + k as usize];
                    let p = self.parent[v as usize] as usize;
                    self.child_lists[p].push(class[v as usize]);
                }
            }
            self.sorted = sorted;
        }
    }

    /// Orbit ids from classes (see module docs): vertices with equal ids are exchanged by an
    /// automorphism of the rooted labelled tree. Ids are unique across levels.
    pub fn orbits(&mut self, class: &[u32], orbit: &mut Vec<u32>) {
        let nv = self.adj.len() + 1;
        orbit.clear();
        orbit.resize(nv, 0);
        let mut next_id = 1u32; // the root's orbit is 0
        for d in 1..self.num_levels() {
            let lv_start = self.level_start[d];
            let lv_len = self.level_start[d + 1] - lv_start;
            // Sort (parent orbit, class) pairs.
            self.seq_data.clear();
            self.seq_range.clear();
            for i in lv_start..lv_start + lv_len {
                let v = self.order[i];
                let start = self.seq_data.len() as u32;
                self.seq_data.push(orbit[self.parent[v as usize] as usize]);
                self.seq_data.push(class[v as usize]);
                self.seq_range.push((start, start + 2));
            }
            let alphabet = (next_id as usize).max(lv_len).max(1);
            let mut sorted = std::mem::take(&mut self.sorted);
            radix_sort_sequences(&self.seq_data, &self.seq_range, alphabet, &mut self.radix, &mut sorted);
            let mut prev: Option<(u32, u32)> = None;
            let mut id = next_id;
            for &k in &sorted {
                let i = 2 * k as usize;
                let key = (self.seq_data[i], self.seq_data[i + 1]);
                if prev.is_some() && prev != Some(key) {
                    id += 1;
                }
                prev = Some(key);
                orbit[self.order[lv_start + k as usize] as usize] = id;
            }
            next_id = id + 1;
            self.sorted = sorted;
        }
    }
}

/// Up to this many sequences [`radix_sort_sequences`] uses a comparison sort.
pub const SMALL_SORT: usize = 24;

/// Reusable buffers of [`radix_sort_sequences`].
#[derive(Clone, Debug, Default)]
pub struct RadixScratch {
    buckets: Vec<Vec<u32>>,
    pair_pos: Vec<(u32, u32)>,
    by_sym: Vec<u32>,
    nonempty: Vec<Vec<u32>>,
    by_len: Vec<Vec<u32>>,
    queue: Vec<u32>,
    next: Vec<u32>,
}

/// AHU's lexicographic sort of variable-length integer sequences (Aho, Hopcroft, Ullman,
/// Algorithm 3.2): `ranges[i]` delimits sequence i in `data`; every symbol is < `alphabet`.
/// Writes the sequence indices in ascending lexicographic order (a proper prefix first), stable.
/// O(total length + alphabet).
pub fn radix_sort_sequences(
    data: &[u32],
    ranges: &[(u32, u32)],
    alphabet: usize,
    sc: &mut RadixScratch,
    out: &mut Vec<u32>,
) {
    out.clear();
    let m = ranges.len();
    if m == 0 {
        return;
    }
    if m <= SMALL_SORT {
        // A handful of sequences: a comparison sort beats the bucket passes; the linear
        // bound is unaffected (each level of at most SMALL_SORT sequences costs O(1)).
        out.extend(0..m as u32);
        let seq = |i: u32| &data[ranges[i as usize].0 as usize..ranges[i as usize].1 as usize];
        out.sort_by(|&a, &b| seq(a).cmp(seq(b)).then(a.cmp(&b)));
        return;
    }
    let lmax = ranges.iter().map(|r| (r.1 - r.0) as usize).max().unwrap_or(0);
    if sc.buckets.len() < alphabet {
        sc.buckets.resize(alphabet, Vec::new());
    }
    if sc.nonempty.len() < lmax {
        sc.nonempty.resize(lmax, Vec::new());
    }
    if sc.by_len.len() < lmax + 1 {
        sc.by_len.resize(lmax + 1, Vec::new());
    }
    // NONEMPTY[p]: the distinct symbols at position p, ascending. Sort (position, symbol)
    // pairs by symbol, then stably by position.
    sc.pair_pos.clear();
    for r in ranges {
        for (p, k) in (r.0..r.1).enumerate() {
            sc.pair_pos.push((p as u32, data[k as usize]));
        }
    }
    for (i, &(_, sym)) in sc.pair_pos.iter().enumerate() {
        sc.buckets[sym as usize].push(i as u32);
    }
    sc.by_sym.clear();
    for b in sc.buckets[..alphabet].iter_mut() {
        if !b.is_empty() {
            sc.by_sym.append(b);
        }
    }
    for l in sc.nonempty[..lmax].iter_mut() {
        l.clear();
    }
    for &i in &sc.by_sym {
        let (p, sym) = sc.pair_pos[i as usize];
        let l = &mut sc.nonempty[p as usize];
        if l.last() != Some(&sym) {
            l.push(sym);
        }
    }
    // Sequences grouped by length.
    for l in sc.by_len[..=lmax].iter_mut() {
        l.clear();
    }
    for (i, r) in ranges.iter().enumerate() {
        sc.by_len[(r.1 - r.0) as usize].push(i as u32);
    }
    sc.queue.clear();
    for p in (0..lmax).rev() {
        // Sequences of length p+1 join in front of the (already suffix-sorted) longer ones.
        sc.next.clear();
        sc.next.extend_from_slice(&sc.by_len[p + 1]);
        sc.next.extend_from_slice(&sc.queue);
        for &i in &sc.next {
            let sym = data[(ranges[i as usize].0 as usize) + p];
            sc.buckets[sym as usize].push(i);
        }
        sc.queue.clear();
        for &sym in &sc.nonempty[p] {
            sc.queue.append(&mut sc.buckets[sym as usize]);
        }
    }
    out.extend_from_slice(&sc.by_len[0]);
    out.extend_from_slice(&sc.queue);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::rng::Rng;

    #[test]
    fn radix_sort_matches_lexicographic() {
        let mut rng = Rng::new(3);
        let mut sc = RadixScratch::default();
        for _ in 0..200 {
            let m = rng.below(3 * SMALL_SORT as u64) as usize;
            let mut data = Vec::new();
            let mut ranges = Vec::new();
            for _ in 0..m {
                let len = rng.below(4) as usize;
                let s = data.len() as u32;
                for _ in 0..len {
                    data.push(rng.below(5) as u32);
                }
                ranges.push((s, data.len() as u32));
            }
            let mut out = Vec::new();
            radix_sort_sequences(&data, &ranges, 5, &mut sc, &mut out);
            let seq = |i: u32| &data[ranges[i as usize].0 as usize..ranges[i as usize].1 as usize];
            let mut expect: Vec<u32> = (0..m as u32).collect();
            expect.sort_by(|&a, &b| seq(a).cmp(seq(b)).then(a.cmp(&b)));
            assert_eq!(out, expect, "{data:?} {ranges:?}");
        }
    }

    /// Star: centre 0 with leaves 1..=4; leaf 4 labelled differently.
    #[test]
    fn star_orbits() {
        let links: Vec<(u32, u32)> = (1..=4).map(|i| (0, i)).collect();
        let mut lab = Labeller::new(5, &links);
        assert_eq!(lab.centroid_root(), Root::Vertex(0));
        lab.set_root(Root::Vertex(0));
        let own = vec![0, 1, 1, 1, 2, 0];
        let mut class = Vec::new();
        lab.classes(&own, 3, &mut class);
        assert_eq!(class[1], class[2]);
        assert_eq!(class[2], class[3]);
        assert_ne!(class[3], class[4]);
        let mut orbit = Vec::new();
        lab.orbits(&class, &mut orbit);
        assert_eq!(orbit[1], orbit[3]);
        assert_ne!(orbit[1], orbit[4]);
        assert_ne!(orbit[0], orbit[1]);
    }

    /// Two identical halves joined by one edge: 0-1 with leaves {2,3} on 0 and {4,5} on 1.
    /// The parent-side component of edge 0-1 equals its child side, so the leaves of both
    /// halves fall in one orbit only when rooting at the balanced edge.
    #[test]
    fn balanced_edge_parent_side_comparison() {
        let links = vec![(0, 1), (0, 2), (0, 3), (1, 4), (1, 5)];
        let mut lab = Labeller::new(6, &links);
        assert_eq!(lab.centroid_root(), Root::Edge(0, 1));
        let own = vec![0, 0, 1, 1, 1, 1, 2];
        let mut class = Vec::new();
        let mut orbit = Vec::new();
        lab.set_root(Root::Edge(0, 1));
        lab.classes(&own, 3, &mut class);
        lab.orbits(&class, &mut orbit);
        assert_eq!(orbit[2], orbit[5]);
        assert_eq!(orbit[0], orbit[1]);
        // Rooted at vertex 0 instead, 0 is fixed and the halves cannot swap.
        lab.set_root(Root::Vertex(0));
        lab.classes(&own, 3, &mut class);
        lab.orbits(&class, &mut orbit);
        assert_eq!(orbit[2], orbit[3]);
        assert_ne!(orbit[2], orbit[4]);
        // Break the symmetry with a label: halves differ.
        let own2 = vec![0, 0, 1, 1, 1, 2, 2];
        lab.set_root(Root::Edge(0, 1));
        lab.classes(&own2, 3, &mut class);
        lab.orbits(&class, &mut orbit);
        assert_ne!(orbit[0], orbit[1]);
        assert_ne!(orbit[2], orbit[4]);
        assert_eq!(orbit[2], orbit[3]);
    }

    /// Brute-force check on random small trees: vertices share an orbit iff some permutation
    /// preserving edges and labels maps one to the other (centroid rooting).
    #[test]
    fn orbits_match_brute_force_automorphisms() {
        let mut rng = Rng::new(11);
        for _ in 0..60 {
            let n = 2 + rng.below(6) as usize;
            let links: Vec<(u32, u32)> = (1..n).map(|v| (rng.below(v as u64) as u32, v as u32)).collect();
            let own: Vec<u32> = (0..=n).map(|_| rng.below(2) as u32).collect();
            let mut lab = Labeller::new(n, &links);
            let root = lab.centroid_root();
            let mut own_r = own.clone();
            own_r[n] = 2;
            lab.set_root(root);
            let mut class = Vec::new();
            let mut orbit = Vec::new();
            lab.classes(&own_r, 3, &mut class);
            lab.orbits(&class, &mut orbit);
            // Brute force over all permutations.
            let mut edges = std::collections::HashSet::new();
            for &(a, b) in &links {
                edges.insert((a.min(b), a.max(b)));
            }
            let mut same = vec![vec![false; n]; n];
            let mut perm: Vec<usize> = (0..n).collect();
            permute(&mut perm, 0, &mut |p: &[usize]| {
                let ok = (0..n).all(|v| own[p[v]] == own[v])
                    && links.iter().all(|&(a, b)| {
                        let (x, y) = (p[a as usize] as u32, p[b as usize] as u32);
                        edges.contains(&(x.min(y), x.max(y)))
                    });
                if ok {
                    for v in 0..n {
                        same[v][p[v]] = true;
                    }
                }
            });
            for u in 0..n {
                for v in 0..n {
                    assert_eq!(orbit[u] == orbit[v], same[u][v], "{links:?} {own:?} {u} {v}");
                }
            }
        }
    }

    fn permute(p: &mut Vec<usize>, k: usize, f: &mut dyn FnMut(&[usize])) {
        if k == p.len() {
            f(p);
            return;
        }
        for i in k..p.len() {
            p.swap(k, i);
            permute(p, k + 1, f);
            p.swap(k, i);
        }
    }
}
