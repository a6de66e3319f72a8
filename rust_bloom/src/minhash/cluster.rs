//! Connected components of candidate pairs (union-find with path halving). Nodes are u64 ids
//! ordered as the global document order ((file index << 32) | document index), and every
//! component's root is its smallest node, so the root is the component's survivor: the first
//! of its documents in the global order, whatever order the pairs arrive in. Memory grows with
//! the nodes that appear in pairs, never with the corpus.
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for u64 keys that are already well spread after one multiply-xorshift.
#[derive(Default)]
pub struct U64Hasher(u64);

impl Hasher for U64Hasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, x: u64) {
        self.0 = super::shingle::fmix64(x);
    }
}

pub type U64Map<V> = HashMap<u64, V, BuildHasherDefault<U64Hasher>>;

#[derive(Default)]
pub struct Components {
    index: U64Map<u32>,
    nodes: Vec<u64>,
    parent: Vec<u32>,
}

/// One member of a component: the node, its component's root (smallest node) and size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Member {
    pub node: u64,
    pub root: u64,
    pub size: u32,
}

impl Components {
    pub fn new() -> Components {
        Components::default()
    }

    fn id(&mut self, node: u64) -> u32 {
        if let Some(&i) = self.index.get(&node) {
            return i;
        }
        let i = self.nodes.len() as u32;
        self.index.insert(node, i);
        self.nodes.push(node);
        self.parent.push(i);
        i
    }

    fn find(&mut self, mut i: u32) -> u32 {
        while self.parent[i as usize] != i {
            let grand = self.parent[self.parent[i as usize] as usize];
            self.parent[i as usize] = grand;
            i = grand;
        }
        i
    }

    /// Joins the components of `a` and `b`.
    pub fn union(&mut self, a: u64, b: u64) {
        let (ia, ib) = (self.id(a), self.id(b));
        let (ra, rb) = (self.find(ia), self.find(ib));
        if ra == rb {
            return;
        }
        // The smaller node stays root: the root is always the component's smallest node.
        if self.nodes[ra as usize] < self.nodes[rb as usize] {
            self.parent[rb as usize] = ra;
        } else {
            self.parent[ra as usize] = rb;
        }
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// Every node with its root and component size, sorted by (root, node): components in the
    /// global order of their survivors, each listing its survivor first.
    pub fn members(&mut self) -> Vec<Member> {
        let n = self.nodes.len();
        let roots: Vec<u32> = (0..n as u32).map(|i| self.find(i)).collect();
        let mut sizes = vec![0u32; n];
        for &r in &roots {
            sizes[r as usize] += 1;
        }
        let mut out: Vec<Member> = (0..n)
            .map(|i| {
                let r = roots[i] as usize;
                Member { node: self.nodes[i], root: self.nodes[r], size: sizes[r] }
            })
            .collect();
        out.sort_unstable_by_key(|m| (m.root, m.node));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roots_are_the_smallest_nodes_whatever_the_order() {
        let pairs = [(50u64, 7u64), (7, 9), (100, 101), (9, 3), (200, 101)];
        let mut forward = Components::new();
        for &(a, b) in &pairs {
            forward.union(a, b);
        }
        let mut backward = Components::new();
        for &(a, b) in pairs.iter().rev() {
            backward.union(b, a);
        }
        let m = forward.members();
        assert_eq!(m, backward.members());
        let roots: Vec<(u64, u64, u32)> = m.iter().map(|x| (x.node, x.root, x.size)).collect();
        assert_eq!(
            roots,
            vec![(3, 3, 4), (7, 3, 4), (9, 3, 4), (50, 3, 4), (100, 100, 3), (101, 100, 3), (200, 100, 3)]
        );
    }

    #[test]
    fn self_pairs_and_repeats() {
        let mut c = Components::new();
        c.union(5, 5);
        c.union(5, 6);
        c.union(6, 5);
        assert_eq!(c.len(), 2);
        assert_eq!(c.members().iter().map(|m| m.size).collect::<Vec<_>>(), vec![2, 2]);
    }
}
