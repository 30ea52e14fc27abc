//! The tree under construction: hosts are leaves, switches are inferred branch points, every link
//! carries a one-way latency estimate.
//!
//! Unlike [`Topology`](crate::topology::Topology) it is mutable: inference splits links to insert
//! switches, hangs hosts, detaches hosts for re-location and contracts links. It is rooted (at
//! a switch as soon as one exists) with parent pointers, depths and distances to the root, so
//! the distance between two vertices costs O(depth).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// A point of the tree: a vertex, or the interior of the link from `child` to its parent at
/// distance `up` from `child` (0 < up < link length).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Point {
    At(usize),
    On { child: usize, up: f64 },
}

/// One branch at a vertex: the component reached through neighbour `via` of vertex `at`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Branch {
    pub at: usize,
    pub via: usize,
}

/// Serialisable so that a far-apart part's leader can send its tree to the coordinator
/// (`part_run`).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub(crate) struct WorkTree {
    parent: Vec<Option<usize>>,
    /// Length (one-way latency, s) of the link to the parent.
    len: Vec<f64>,
    children: Vec<Vec<usize>>,
    host_of: Vec<Option<usize>>,
    vertex_of: Vec<Option<usize>>,
    alive: Vec<bool>,
    depth: Vec<u32>,
    droot: Vec<f64>,
    root: usize,
    hosts_in: usize,
}

impl WorkTree {
    pub fn new(num_hosts: usize) -> Self {
        WorkTree {
            vertex_of: vec![None; num_hosts],
            ..WorkTree::default()
        }
    }

    fn new_vertex(&mut self, host: Option<usize>) -> usize {
        self.parent.push(None);
        self.len.push(0.0);
        self.children.push(Vec::new());
        self.host_of.push(host);
        self.alive.push(true);
        self.depth.push(0);
        self.droot.push(0.0);
        if let Some(h) = host {
            self.vertex_of[h] = Some(self.parent.len() - 1);
            self.hosts_in += 1;
        }
        self.parent.len() - 1
    }

    /// Start with two hosts joined by one link of length `d`.
    pub fn init_pair(&mut self, a: usize, b: usize, d: f64) {
        assert_eq!(self.hosts_in, 0, "init_pair on a non-empty tree");
        let va = self.new_vertex(Some(a));
        let vb = self.new_vertex(Some(b));
        self.root = va;
        self.parent[vb] = Some(va);
        self.len[vb] = d.max(0.0);
        self.children[va].push(vb);
        self.depth[vb] = 1;
        self.droot[vb] = self.len[vb];
    }

    /// Build the whole tree from links `(node, parent node, length)` hanging below host `root`.
    /// Node ids below the tree's host count are hosts, the others switches. The tree is then
    /// rooted at the switch the root host hangs from, as [`split`](Self::split) leaves it.
    pub fn build_rooted(&mut self, root: usize, links: &[(usize, usize, f64)]) {
        assert_eq!(self.hosts_in, 0, "build_rooted on a non-empty tree");
        let n = self.vertex_of.len();
        let mut vid: std::collections::HashMap<usize, usize> = std::collections::HashMap::new();
        let mut vertex = |t: &mut WorkTree, node: usize| -> usize {
            *vid.entry(node)
                .or_insert_with(|| t.new_vertex((node < n).then_some(node)))
        };
        let r = vertex(self, root);
        self.root = r;
        for &(node, parent, len) in links {
            let (v, p) = (vertex(self, node), vertex(self, parent));
            self.parent[v] = Some(p);
            self.len[v] = len.max(0.0);
            self.children[p].push(v);
        }
        self.refresh_depths_all();
        if let Some(&top) = self.children[r].first() {
            if !self.is_host(top) {
                self.reroot(top);
            }
        }
    }

    /// Start with a single host (a one-host job).
    pub fn init_single(&mut self, a: usize) {
        assert_eq!(self.hosts_in, 0);
        self.root = self.new_vertex(Some(a));
    }

    pub fn num_hosts_in(&self) -> usize {
        self.hosts_in
    }
    pub fn vertex_of(&self, host: usize) -> Option<usize> {
        self.vertex_of[host]
    }

    /// Whether this is a well-formed tree over `num_hosts` host slots holding exactly `hosts`:
    /// what the coordinator checks of a tree a far-apart part's leader sent (it arrives as
    /// bytes, and every later step indexes it without checking).
    pub fn holds_exactly(&self, num_hosts: usize, hosts: &[usize]) -> bool {
        let n = self.parent.len();
        let same_len = [
            self.len.len(),
            self.children.len(),
            self.host_of.len(),
            self.alive.len(),
            self.depth.len(),
            self.droot.len(),
        ]
        .iter()
        .all(|&l| l == n);
        let links_in_range = self.parent.iter().flatten().all(|&p| p < n)
            && self.children.iter().flatten().all(|&c| c < n)
            && (n == 0 || self.root < n);
        same_len
            && links_in_range
            && self.vertex_of.len() == num_hosts
            && self.hosts_in == hosts.len()
            && self.vertex_of.iter().flatten().count() == hosts.len()
            && hosts
                .iter()
                .all(|&h| h < num_hosts && self.vertex_of[h].is_some_and(|v| v < n && self.host_of[v] == Some(h)))
    }
    pub fn host_of(&self, v: usize) -> Option<usize> {
        self.host_of[v]
    }
    pub fn is_host(&self, v: usize) -> bool {
        self.host_of[v].is_some()
    }
    pub fn parent(&self, v: usize) -> Option<usize> {
        self.parent[v]
    }
    pub fn len(&self, v: usize) -> f64 {
        self.len[v]
    }
    pub fn set_len(&mut self, v: usize, l: f64) {
        let delta = l - self.len[v];
        self.len[v] = l;
        // Distances to the root below v shift by delta.
        let mut stack = vec![v];
        while let Some(u) = stack.pop() {
            self.droot[u] += delta;
            stack.extend(self.children[u].iter().copied());
        }
    }
    pub fn children(&self, v: usize) -> &[usize] {
        &self.children[v]
    }
    pub fn root(&self) -> usize {
        self.root
    }
    /// Is `v` a live vertex (not removed by a detach, contraction or merge)?
    pub fn is_alive(&self, v: usize) -> bool {
        self.alive.get(v).copied().unwrap_or(false)
    }

    /// Live vertices.
    pub fn vertices(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.alive.len()).filter(|&v| self.alive[v])
    }
    /// Live switch vertices.
    pub fn switches(&self) -> impl Iterator<Item = usize> + '_ {
        self.vertices().filter(|&v| self.host_of[v].is_none())
    }
    /// Hosts in the tree.
    pub fn hosts(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.vertex_of.len()).filter(|&h| self.vertex_of[h].is_some())
    }

    /// Neighbours: children then parent.
    pub fn neighbors(&self, v: usize) -> Vec<usize> {
        let mut n = self.children[v].clone();
        n.extend(self.parent[v]);
        n
    }
    pub fn degree(&self, v: usize) -> usize {
        self.children[v].len() + usize::from(self.parent[v].is_some())
    }
    /// Length of the link between neighbours u and w.
    pub fn link_len(&self, u: usize, w: usize) -> f64 {
        if self.parent[u] == Some(w) {
            self.len[u]
        } else {
            debug_assert_eq!(self.parent[w], Some(u));
            self.len[w]
        }
    }

    pub fn lca(&self, mut u: usize, mut v: usize) -> usize {
        while self.depth[u] > self.depth[v] {
            u = self.parent[u].unwrap();
        }
        while self.depth[v] > self.depth[u] {
            v = self.parent[v].unwrap();
        }
        while u != v {
            u = self.parent[u].unwrap();
            v = self.parent[v].unwrap();
        }
        u
    }

    pub fn dist(&self, u: usize, v: usize) -> f64 {
        let w = self.lca(u, v);
        self.droot[u] + self.droot[v] - 2.0 * self.droot[w]
    }

    /// Distance from a vertex to a point.
    pub fn dist_point(&self, u: usize, p: Point) -> f64 {
        match p {
            Point::At(v) => self.dist(u, v),
            Point::On { child, up } => {
                let parent = self.parent[child].unwrap();
                // Is u below the link (in child's subtree)?
                if self.is_ancestor(child, u) {
                    self.dist(u, child) + up
                } else {
                    self.dist(u, parent) + self.len[child] - up
                }
            }
        }
    }

    /// Is `a` an ancestor of (or equal to) `v`?
    pub fn is_ancestor(&self, a: usize, mut v: usize) -> bool {
        while self.depth[v] > self.depth[a] {
            v = self.parent[v].unwrap();
        }
        v == a
    }

    /// Vertices along the path from `u` to `v` with their distance from `u`, both ends included.
    pub fn path(&self, u: usize, v: usize) -> Vec<(usize, f64)> {
        let w = self.lca(u, v);
        let mut out = Vec::new();
        let mut x = u;
        while x != w {
            out.push((x, self.droot[u] - self.droot[x]));
            x = self.parent[x].unwrap();
        }
        out.push((w, self.droot[u] - self.droot[w]));
        let mut tail = Vec::new();
        let mut y = v;
        while y != w {
            tail.push(y);
            y = self.parent[y].unwrap();
        }
        let base = self.droot[u] - self.droot[w];
        for &y in tail.iter().rev() {
            out.push((y, base + self.droot[y] - self.droot[w]));
        }
        out
    }

    /// The links on the path from `u` to `v`, each named by its lower (child) vertex, in path
    /// order (up from `u` to the common ancestor, then down to `v`), written into `out`
    /// (cleared first). [`Self::path`] without its allocations or distances, for the
    /// least-squares fit that walks every measured path each round.
    pub fn path_links(&self, u: usize, v: usize, out: &mut Vec<usize>) {
        out.clear();
        let w = self.lca(u, v);
        let mut x = u;
        while x != w {
            out.push(x);
            x = self.parent[x].unwrap();
        }
        let up = out.len();
        let mut y = v;
        while y != w {
            out.push(y);
            y = self.parent[y].unwrap();
        }
        out[up..].reverse();
    }

    /// The point at distance `g` from `u` along the path to `v` (clamped into the path), snapped
    /// to the nearest *switch* on the path when it lies within `tol` of it. Hosts are never
    /// branch points: a point near a host stays on its link.
    pub fn point_on_path(&self, u: usize, v: usize, g: f64, tol: f64) -> Point {
        let path = self.path(u, v);
        let total = path.last().unwrap().1;
        let g = g.max(0.0).min(total.max(0.0));
        let snap = path
            .iter()
            .filter(|&&(x, _)| !self.is_host(x))
            .map(|&(x, d)| (x, (d - g).abs()))
            .min_by(|a, b| a.1.total_cmp(&b.1));
        if let Some((x, e)) = snap {
            if e <= tol {
                return Point::At(x);
            }
        }
        // The segment containing g.
        for w in path.windows(2) {
            let ((x, dx), (y, dy)) = (w[0], w[1]);
            if g <= dy || y == v {
                let (child, d_child, seg) = if self.parent[x] == Some(y) {
                    (x, g - dx, dy - dx)
                } else {
                    (y, dy - g, dy - dx)
                };
                let seg = seg.max(0.0);
                let up = d_child.max(0.0).min(seg);
                // Keep strictly inside the link so a switch can be inserted there.
                let eps = seg * 1e-9;
                return if seg <= 0.0 {
                    Point::At(if self.is_host(x) { y } else { x })
                } else {
                    Point::On {
                        child,
                        up: up.max(eps).min(seg - eps),
                    }
                };
            }
        }
        Point::At(u)
    }

    /// The neighbour of `v` on the path from `v` towards `x` (x != v).
    pub fn toward(&self, v: usize, x: usize) -> usize {
        if self.depth[x] > self.depth[v] && self.is_ancestor(v, x) {
            let mut y = x;
            while self.parent[y] != Some(v) {
                y = self.parent[y].unwrap();
            }
            y
        } else {
            self.parent[v].expect("x outside v's subtree implies v has a parent")
        }
    }

    /// Up to `k` hosts of branch `b` accepted by `ok`, nearest to `b.at` first, with their
    /// distance from `b.at`.
    pub fn nearest_hosts(&self, b: Branch, k: usize, ok: impl Fn(usize) -> bool) -> Vec<(f64, usize)> {
        #[derive(PartialEq)]
        struct Item(f64, usize, usize); // dist, vertex, came-from
        impl Eq for Item {}
        impl PartialOrd for Item {
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Some(self.cmp(o))
            }
        }
        impl Ord for Item {
            fn cmp(&self, o: &Self) -> Ordering {
                o.0.total_cmp(&self.0).then(o.1.cmp(&self.1))
            }
        }
        let mut heap = BinaryHeap::new();
        heap.push(Item(self.link_len(b.at, b.via), b.via, b.at));
        let mut out = Vec::new();
        while let Some(Item(d, x, from)) = heap.pop() {
            if let Some(h) = self.host_of[x].filter(|&h| ok(h)) {
                out.push((d, h));
                if out.len() >= k {
                    break;
                }
            }
            for w in self.neighbors(x) {
                if w != from {
                    heap.push(Item(d + self.link_len(x, w), w, x));
                }
            }
        }
        out
    }

    /// The host of branch `b` accepted by `ok` whose distance from `b.at` is closest to
    /// `target` (ties: the nearer one, then the smaller host number).
    pub fn host_at_distance(&self, b: Branch, target: f64, ok: impl Fn(usize) -> bool) -> Option<usize> {
        let mut best: Option<(f64, f64, usize)> = None;
        let mut stack = vec![(b.via, b.at, self.link_len(b.at, b.via))];
        while let Some((x, from, d)) = stack.pop() {
            if let Some(h) = self.host_of[x].filter(|&h| ok(h)) {
                let key = ((d - target).abs(), d, h);
                if best.is_none_or(|bb| key < bb) {
                    best = Some(key);
                }
            }
            for w in self.neighbors(x) {
                if w != from {
                    stack.push((w, x, d + self.link_len(x, w)));
                }
            }
        }
        best.map(|(_, _, h)| h)
    }

    /// Number of hosts in branch `b`.
    /// The hosts in the subtree of `v` (in no particular order).
    pub fn hosts_below(&self, v: usize) -> Vec<usize> {
        let mut out = Vec::new();
        let mut stack = vec![v];
        while let Some(u) = stack.pop() {
            out.extend(self.host_of[u]);
            stack.extend(self.children[u].iter().copied());
        }
        out
    }

    /// The hosts of branch `b` (in no particular order): below `b.via`, or, where the branch
    /// leads up, every host not below `b.at`.
    pub fn branch_hosts(&self, b: Branch) -> Vec<usize> {
        if self.parent[b.at] == Some(b.via) {
            let inside: std::collections::HashSet<usize> = self.hosts_below(b.at).into_iter().collect();
            self.hosts().filter(|x| !inside.contains(x)).collect()
        } else {
            self.hosts_below(b.via)
        }
    }

    pub fn branch_host_count(&self, b: Branch) -> usize {
        let below = |v: usize| -> usize {
            let mut n = 0;
            let mut stack = vec![v];
            while let Some(u) = stack.pop() {
                n += usize::from(self.host_of[u].is_some());
                stack.extend(self.children[u].iter().copied());
            }
            n
        };
        if self.parent[b.at] == Some(b.via) {
            self.hosts_in - below(b.at)
        } else {
            below(b.via)
        }
    }

    /// Insert a switch on the link from `child` to its parent at distance `up` from `child`.
    pub fn split(&mut self, child: usize, up: f64) -> usize {
        let p = self.parent[child].expect("split needs a link");
        let l = self.len[child];
        let up = up.max(0.0).min(l.max(0.0));
        let x = self.new_vertex(None);
        self.parent[x] = Some(p);
        self.len[x] = l - up;
        let slot = self.children[p].iter().position(|&c| c == child).unwrap();
        self.children[p][slot] = x;
        self.children[x].push(child);
        self.parent[child] = Some(x);
        self.len[child] = up;
        self.droot[x] = self.droot[p] + self.len[x];
        self.depth[x] = self.depth[p] + 1;
        self.refresh_depths(child);
        if self.is_host(self.root) {
            self.reroot(x);
        }
        x
    }

    /// Hang `host` from point `p` with a link of length `leaf`; returns the host's vertex.
    pub fn attach(&mut self, p: Point, host: usize, leaf: f64) -> usize {
        let at = match p {
            Point::At(v) => v,
            Point::On { child, up } => self.split(child, up),
        };
        assert!(
            !self.is_host(at),
            "hosts are leaves: cannot attach below host vertex {at}"
        );
        let h = self.new_vertex(Some(host));
        self.parent[h] = Some(at);
        self.len[h] = leaf.max(0.0);
        self.children[at].push(h);
        self.depth[h] = self.depth[at] + 1;
        self.droot[h] = self.droot[at] + self.len[h];
        h
    }

    /// Remove `host` from the tree; a switch left with two neighbours is contracted.
    /// Returns false (and does nothing) if the host is the root or the tree would drop below
    /// two hosts.
    pub fn detach(&mut self, host: usize) -> bool {
        let Some(h) = self.vertex_of[host] else { return false };
        if h == self.root || self.hosts_in <= 2 {
            return false;
        }
        let p = self.parent[h].unwrap();
        self.children[p].retain(|&c| c != h);
        self.alive[h] = false;
        self.vertex_of[host] = None;
        self.hosts_in -= 1;
        if self.degree(p) == 2 {
            self.contract_vertex(p);
        }
        true
    }

    /// Remove a switch of degree 2 by joining its two links (lengths add).
    fn contract_vertex(&mut self, v: usize) {
        debug_assert!(!self.is_host(v) && self.degree(v) == 2);
        if let Some(p) = self.parent[v] {
            let c = self.children[v][0];
            let slot = self.children[p].iter().position(|&x| x == v).unwrap();
            self.children[p][slot] = c;
            self.parent[c] = Some(p);
            self.len[c] += self.len[v];
            self.alive[v] = false;
            self.refresh_depths(c);
        } else {
            // v is the root with two children: one of them becomes the root.
            let (a, b) = (self.children[v][0], self.children[v][1]);
            let (newroot, other) = if !self.is_host(a) { (a, b) } else { (b, a) };
            if self.is_host(newroot) {
                return; // two hosts joined through one switch: keep it.
            }
            self.children[newroot].push(other);
            self.parent[other] = Some(newroot);
            self.len[other] += self.len[newroot];
            self.parent[newroot] = None;
            self.len[newroot] = 0.0;
            self.alive[v] = false;
            self.root = newroot;
            self.droot[newroot] = 0.0;
            self.depth[newroot] = 0;
            self.refresh_depths_all();
        }
    }

    /// Merge switch `c` into its parent switch (the link between them disappears; `c`'s children
    /// keep their link lengths).
    pub fn merge_into_parent(&mut self, c: usize) {
        let p = self.parent[c].expect("merge needs a parent");
        assert!(!self.is_host(c) && !self.is_host(p));
        self.children[p].retain(|&x| x != c);
        let kids = std::mem::take(&mut self.children[c]);
        for &k in &kids {
            self.parent[k] = Some(p);
        }
        self.children[p].extend(kids);
        self.alive[c] = false;
        self.refresh_depths_all();
    }

    /// Merge switch `b` into its sibling switch `a` (both children of one parent): `b`'s
    /// children move below `a` with their link lengths; `a`'s own link becomes the mean of both.
    pub fn merge_siblings(&mut self, a: usize, b: usize) {
        let p = self.parent[a].expect("siblings have a parent");
        assert_eq!(self.parent[b], Some(p));
        assert!(!self.is_host(a) && !self.is_host(b));
        self.children[p].retain(|&x| x != b);
        let kids = std::mem::take(&mut self.children[b]);
        for &k in &kids {
            self.parent[k] = Some(a);
        }
        self.children[a].extend(kids);
        self.len[a] = (self.len[a] + self.len[b]) / 2.0;
        self.alive[b] = false;
        self.refresh_depths_all();
    }

    /// Re-root the tree at vertex `r`.
    pub fn reroot(&mut self, r: usize) {
        if r == self.root {
            return;
        }
        // Reverse the parent pointers on the path from r up to the old root.
        let mut path = vec![r];
        while let Some(p) = self.parent[*path.last().unwrap()] {
            path.push(p);
        }
        for i in (1..path.len()).rev() {
            let (up, down) = (path[i], path[i - 1]);
            let l = self.len[down];
            self.children[up].retain(|&x| x != down);
            self.children[down].push(up);
            self.parent[up] = Some(down);
            self.len[up] = l;
        }
        self.parent[r] = None;
        self.len[r] = 0.0;
        self.root = r;
        self.refresh_depths_all();
    }

    fn refresh_depths(&mut self, v: usize) {
        let mut stack = vec![v];
        while let Some(u) = stack.pop() {
            let p = self.parent[u].unwrap();
            self.depth[u] = self.depth[p] + 1;
            self.droot[u] = self.droot[p] + self.len[u];
            stack.extend(self.children[u].iter().copied());
        }
    }

    fn refresh_depths_all(&mut self) {
        let r = self.root;
        self.depth[r] = 0;
        self.droot[r] = 0.0;
        let kids = self.children[r].clone();
        for c in kids {
            self.refresh_depths(c);
        }
    }

    /// The attachment vertex of a host (its parent), if any.
    pub fn host_parent(&self, host: usize) -> Option<usize> {
        self.vertex_of[host].and_then(|v| {
            if v == self.root {
                self.children[v].first().copied()
            } else {
                self.parent[v]
            }
        })
    }

    /// Length of a host's link (its leaf length).
    pub fn leaf_len(&self, host: usize) -> f64 {
        let v = self.vertex_of[host].expect("host in tree");
        if v == self.root {
            self.children[v].first().map(|&c| self.len[c]).unwrap_or(0.0)
        } else {
            self.len[v]
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_tree_whose_tables_disagree_is_not_well_formed() {
        let mut t = WorkTree::new(4);
        t.init_pair(0, 1, 25e-6);
        assert!(t.holds_exactly(4, &[0, 1]));
        let mut short = t.clone();
        short.len.pop();
        assert!(!short.holds_exactly(4, &[0, 1]), "a table one short");
        let mut dangling = t.clone();
        dangling.parent[1] = Some(7);
        assert!(!dangling.holds_exactly(4, &[0, 1]), "a parent beyond the vertices");
        let mut swapped = t.clone();
        swapped.host_of[0] = Some(1);
        assert!(!swapped.holds_exactly(4, &[0, 1]), "host and vertex tables disagree");
    }

    use super::*;

    /// h0 -- 3 -- X -- 4 -- h1, X -- 2 -- h2
    fn three() -> (WorkTree, usize) {
        let mut t = WorkTree::new(4);
        t.init_pair(0, 1, 7.0);
        let v1 = t.vertex_of(1).unwrap();
        // Point at 3 from h0 = 4 from h1.
        let p = t.point_on_path(t.vertex_of(0).unwrap(), v1, 3.0, 0.0);
        assert_eq!(p, Point::On { child: v1, up: 4.0 });
        t.attach(p, 2, 2.0);
        let x = t.host_parent(2).unwrap();
        (t, x)
    }

    #[test]
    fn split_attach_distances() {
        let (t, x) = three();
        assert_eq!(t.root(), x, "re-rooted at the first switch");
        let v = |h| t.vertex_of(h).unwrap();
        assert_eq!(t.dist(v(0), v(1)), 7.0);
        assert_eq!(t.dist(v(0), v(2)), 5.0);
        assert_eq!(t.dist(v(1), v(2)), 6.0);
        assert_eq!(t.leaf_len(0), 3.0);
        assert_eq!(t.degree(x), 3);
        let b = Branch { at: x, via: v(1) };
        assert_eq!(t.toward(x, v(1)), v(1));
        assert_eq!(t.branch_host_count(b), 1);
        assert_eq!(
            t.nearest_hosts(Branch { at: v(0), via: x }, 5, |_| true),
            vec![(5.0, 2), (7.0, 1)]
        );
        assert_eq!(
            t.nearest_hosts(Branch { at: v(0), via: x }, 5, |h| h != 2),
            vec![(7.0, 1)]
        );
        // Snapping: 2.9 from h0 towards h1 within 0.2 of X snaps; with 0.05 it does not.
        assert_eq!(t.point_on_path(v(0), v(1), 2.9, 0.2), Point::At(x));
        assert!(matches!(t.point_on_path(v(0), v(1), 2.9, 0.05), Point::On { .. }));
        assert_eq!(t.dist_point(v(1), Point::On { child: v(0), up: 1.0 }), 6.0);
    }

    #[test]
    fn detach_contracts_and_merge() {
        let (mut t, _) = three();
        assert!(t.detach(2));
        let v = |h| t.vertex_of(h).unwrap();
        assert_eq!(t.dist(v(0), v(1)), 7.0);
        assert_eq!(t.switches().count(), 1, "two hosts keep their switch");
        // Build h0,h1,h2 again plus h3 on X's link towards h1 at 1.0 -> two switches 1.0 apart.
        let mut t = three().0;
        let x = t.host_parent(2).unwrap();
        let v1 = t.vertex_of(1).unwrap();
        let y = {
            let p = t.point_on_path(x, v1, 1.0, 0.0);
            t.attach(p, 3, 0.5);
            t.host_parent(3).unwrap()
        };
        assert_eq!(t.switches().count(), 2);
        let (a, b) = (t.vertex_of(0).unwrap(), t.vertex_of(3).unwrap());
        assert!((t.dist(a, b) - 4.5).abs() < 1e-12);
        let child = if t.parent(y) == Some(x) { y } else { x };
        t.merge_into_parent(child);
        assert_eq!(t.switches().count(), 1);
        assert!((t.dist(t.vertex_of(0).unwrap(), t.vertex_of(1).unwrap()) - 6.0).abs() < 1e-12);
        assert!(t.detach(3));
        assert!(t.detach(0));
        assert_eq!(t.num_hosts_in(), 2);
        assert!(!t.detach(1), "a tree keeps at least two hosts");
    }
}
