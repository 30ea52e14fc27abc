//! Far-apart parts: a network whose hosts fall into groups joined by routed or wide-area links
//! (round trips of a millisecond and more) is inferred part by part, and the parts are joined
//! from coarse measurements.
//!
//! Why: the statistic of [Shirai2007] spends dozens of round trips on every pair, which is what
//! microsecond-scale structure needs; on a 5 ms path one such pair costs 0.2-0.45 s, more than
//! the whole inference of the parts. Mixing one-sample measurements of far pairs into the
//! search of fine structure makes it fragile (their error is larger than the snapping
//! tolerance). So far pairs are kept out of the search entirely:
//! 1. **Cross-block round.** After the warm-up (far pairs cut short after one round trip,
//!    [`crate::probe::PingSpec::far_s`]), one round pairs every block (a contiguous run of
//!    hosts, see `insertion_groups`) with every other through distinct hosts, one round trip
//!    each: it costs little more than its coordination. Blocks with any pair read below the far
//!    threshold are in one part (jitter only inflates a round trip, so one such reading proves
//!    the pair near); the far readings are what the graft uses.
//! 2. **Parts grow concurrently**, each as the single tree grew before: its blocks grow their
//!    own trees and a skeleton of two hosts per block absorbs them; every round holds requests
//!    of every part. Refinement also runs on all parts in shared rounds.
//! 3. **Graft** (`graft`): the coarse pairs between parts place each part's exit point in its
//!    tree and the distances between exits; a small tree joins the exits.
//!
//! Only speed depends on the blocks following the network: a block that spans two parts joins
//! them into one (its far pairs are then measured in full), and a graft that does not fit falls
//! back to one tree over all hosts.

use super::driver::{Builder, Run};
use super::locate::LocateParams;
use super::store::Store;
use super::tree::WorkTree;
use super::InferError;
use std::collections::VecDeque;

/// The cross-block round: every pair of blocks gets `floor(len / (blocks - 1))` pairs (at least
/// one), each host in at most one pair; block `i` spreads the hosts it gives each partner over
/// its host list (every `(blocks - 1)`-th host), so they come from different switches. `None`
/// when some block is smaller than its number of partners.
pub(crate) fn cross_block_pairs(blocks: &[Vec<usize>]) -> Option<Vec<(usize, usize)>> {
    let k = blocks.len();
    if k < 2 {
        return None;
    }
    let sorted: Vec<Vec<usize>> = blocks
        .iter()
        .map(|b| {
            let mut s = b.clone();
            s.sort_unstable();
            s
        })
        .collect();
    if sorted.iter().any(|b| b.len() < k - 1) {
        return None;
    }
    // Hosts block i gives partner j: positions congruent to j's slot among i's partners.
    let share = |i: usize, j: usize| -> Vec<usize> {
        let slot = if j < i { j } else { j - 1 };
        sorted[i].iter().copied().skip(slot).step_by(k - 1).collect()
    };
    let mut pairs = Vec::new();
    for i in 0..k {
        for j in (i + 1)..k {
            pairs.extend(share(i, j).into_iter().zip(share(j, i)));
        }
    }
    Some(pairs)
}

/// Group blocks into parts: blocks joined by any of the `near` pairs are in one part. Returns
/// the parts as lists of block indices, in order of their first block.
pub(crate) fn of_blocks(blocks: &[Vec<usize>], near: &[(usize, usize)]) -> Vec<Vec<usize>> {
    let n = blocks.iter().flatten().copied().max().map_or(0, |m| m + 1);
    let mut block_of = vec![usize::MAX; n];
    for (i, b) in blocks.iter().enumerate() {
        for &h in b {
            block_of[h] = i;
        }
    }
    let mut sets = crate::util::dsu::Dsu::new(blocks.len());
    for &(a, b) in near {
        let (Some(&x), Some(&y)) = (block_of.get(a), block_of.get(b)) else {
            continue;
        };
        if x != usize::MAX && y != usize::MAX {
            sets.union(x, y);
        }
    }
    let mut parts: Vec<Vec<usize>> = Vec::new();
    let mut index = vec![usize::MAX; blocks.len()];
    for i in 0..blocks.len() {
        let r = sets.find(i);
        if index[r] == usize::MAX {
            index[r] = parts.len();
            parts.push(Vec::new());
        }
        parts[index[r]].push(i);
    }
    parts
}

/// Grow one tree per part (`parts`: block indices into `blocks`, each block an insertion order)
/// in shared rounds, and return them in the order of `parts`, every host of a part in its tree.
pub(crate) fn grow(
    run: &mut Run,
    num_hosts: usize,
    blocks: &[Vec<usize>],
    parts: &[Vec<usize>],
    params: &dyn Fn(&Store, &[&WorkTree]) -> LocateParams,
) -> Result<Vec<Builder>, InferError> {
    // A skeleton of two hosts per block for every part of several blocks, then the blocks,
    // each feeding its part's skeleton.
    let mut builders: Vec<Builder> = Vec::new();
    let mut main_of: Vec<usize> = Vec::with_capacity(parts.len());
    let mut feed: Vec<Option<usize>> = Vec::new();
    for part in parts {
        if part.len() > 1 {
            main_of.push(builders.len());
            builders.push(Builder::new(
                num_hosts,
                part.iter().flat_map(|&b| blocks[b].iter().take(2).copied()).collect(),
            ));
            feed.push(None);
        } else {
            main_of.push(usize::MAX);
        }
    }
    for (pi, part) in parts.iter().enumerate() {
        for &b in part {
            if part.len() == 1 {
                main_of[pi] = builders.len();
            }
            feed.push((part.len() > 1).then_some(main_of[pi]));
            builders.push(Builder::new(num_hosts, blocks[b].iter().copied().collect()));
        }
    }
    run.grow_feeding(&mut builders, params, &feed)?;
    let mut slots: Vec<Option<Builder>> = builders.into_iter().map(Some).collect();
    let mut mains: Vec<Builder> = main_of
        .iter()
        .map(|&i| slots[i].take().expect("one main builder per part"))
        .collect();
    // Hosts a block moved after they were merged (or never merged) go in now.
    let mut missing = false;
    for (main, part) in mains.iter_mut().zip(parts) {
        let left: VecDeque<usize> = part
            .iter()
            .flat_map(|&b| blocks[b].iter().copied())
            .filter(|&h| main.tree.vertex_of(h).is_none())
            .collect();
        missing |= !left.is_empty();
        main.pending = left;
    }
    if missing {
        run.grow(&mut mains, params)?;
    }
    Ok(mains)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cross_block_pairs_are_disjoint_and_cover_every_block_pair() {
        let blocks: Vec<Vec<usize>> = (0..4).map(|b| (b * 10..b * 10 + 10).rev().collect()).collect();
        let pairs = cross_block_pairs(&blocks).unwrap();
        let mut seen = std::collections::HashSet::new();
        for &(a, b) in &pairs {
            assert!(seen.insert(a) && seen.insert(b), "host twice in {pairs:?}");
            assert_ne!(a / 10, b / 10);
        }
        // 10 hosts, 3 partners: 3 or 4 hosts per partner, 3 pairs per block pair at least.
        for i in 0..4 {
            for j in (i + 1)..4 {
                let c = pairs.iter().filter(|&&(a, b)| a / 10 == i && b / 10 == j).count();
                assert!(c >= 3, "blocks {i}-{j}: {c}");
            }
        }
        // Block 0 gives partner 1 its hosts 0, 3, 6, 9 (every third, sorted).
        let to1: Vec<usize> = pairs.iter().filter(|p| p.1 / 10 == 1).map(|p| p.0).collect();
        assert_eq!(to1, vec![0, 3, 6, 9]);
        assert!(cross_block_pairs(&[vec![0], vec![1], vec![2]]).is_none());
        assert!(cross_block_pairs(&[vec![0, 1]]).is_none());
    }

    #[test]
    fn blocks_with_a_fine_pair_share_a_part() {
        let blocks: Vec<Vec<usize>> = (0..4).map(|b| vec![2 * b, 2 * b + 1]).collect();
        // 0-1 and 2-3 in blocks; 1-6 joins blocks 0 and 3.
        assert_eq!(
            of_blocks(&blocks, &[(0, 1), (2, 3), (1, 6)]),
            vec![vec![0, 3], vec![1], vec![2]]
        );
    }
}
