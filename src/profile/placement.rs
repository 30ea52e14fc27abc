//! Which ranks shared a CPU during a call: the calls' placement, set against the set-up's.
//!
//! Where ranks outnumber a host's cores, the scheduler decides which of them share one, and the
//! same broadcast runs at different speeds by that alone. Three Open MPI ranks on the 2-core VM,
//! 1 MiB, binary tree 0 -> 1, 2, each rank reading `sched_getcpu` per call
//! (`mpi-examples/bcast_placement.c`, 7 jobs of 1500-3000 calls, 2026-11-28): 103 us while
//! the root shared a core with a leaf, 162 us while the two leaves shared one (each receiver
//! copies its message itself, so theirs ran one after the other), switching within a job when
//! the scheduler moved a rank. The set-up's fit
//! (`runtime::library_fit`) reads one placement; the job's calls may run in another, and no
//! scale fitted in one predicts the other. So each call every rank times records the CPU each
//! rank finished it on, the set-up's calls too, and the report says when the class's calls ran
//! mostly in another grouping than the set-up's calls of that size: a miss there is the
//! scheduler's, which binding ranks to cores round robin (Open MPI: `mpirun --bind-to
//! core:overload-allowed`) takes away.
//!
//! Pure: groupings from CPU numbers, tested without MPI.

use super::arrival::AlignedCall;
use super::report::CpuGroups;
use std::collections::BTreeMap;

/// Which ranks shared a CPU in call `c` ([`grouping`]), where its CPUs were read (one per rank).
pub fn call_grouping(c: &AlignedCall) -> Option<Vec<u32>> {
    (c.cpus.len() == c.ranks.len()).then(|| grouping(&c.cpus)).flatten()
}

/// A grouping of a call's ranks by CPU: for each rank, the lowest rank on the same CPU (so two
/// calls in which the same ranks shared CPUs have equal groupings, whichever CPUs those were).
/// `None` when any rank's CPU is unknown. `cpus[r]`: rank `r`'s (kernel, CPU), the kernel told
/// apart by its boot id where ranks run on several hosts.
pub fn grouping(cpus: &[Option<(u64, u32)>]) -> Option<Vec<u32>> {
    let known: Vec<(u64, u32)> = cpus.iter().copied().collect::<Option<_>>()?;
    Some(
        known
            .iter()
            .map(|c| known.iter().position(|d| d == c).expect("itself") as u32)
            .collect(),
    )
}

/// The groups of ranks sharing a CPU in `grouping` (two or more ranks each), by lowest rank.
fn shared_groups(grouping: &[u32]) -> Vec<Vec<u32>> {
    let mut groups: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for (r, &lead) in grouping.iter().enumerate() {
        groups.entry(lead).or_default().push(r as u32);
    }
    groups.into_values().filter(|g| g.len() > 1).collect()
}

/// A grouping as people read it: the ranks sharing each CPU, joined by `+`, groups by a
/// space, e.g. `1+2` or `0+1 2+3`; `none` when no two ranks shared one.
pub fn label(grouping: &[u32]) -> String {
    let shared: Vec<String> = shared_groups(grouping)
        .iter()
        .map(|g| g.iter().map(u32::to_string).collect::<Vec<_>>().join("+"))
        .collect();
    if shared.is_empty() {
        "none".to_string()
    } else {
        shared.join(" ")
    }
}

/// The most frequent of `items` (the first seen on ties), with how many had it and how many
/// were known (`Some`); `None` when none was.
pub fn most_frequent<T: PartialEq>(items: impl IntoIterator<Item = Option<T>>) -> Option<(T, u64, u64)> {
    let mut seen: Vec<(T, u64)> = Vec::new();
    let mut known = 0;
    for x in items.into_iter().flatten() {
        known += 1;
        match seen.iter_mut().find(|(s, _)| *s == x) {
            Some(s) => s.1 += 1,
            None => seen.push((x, 1)),
        }
    }
    // The first of the largest count (max_by_key keeps the last: search from the end).
    let best = seen.iter().rev().max_by_key(|(_, n)| *n)?.1;
    let i = seen.iter().position(|(_, n)| *n == best)?;
    let (x, n) = seen.swap_remove(i);
    Some((x, n, known))
}

/// The groups of ranks that [`label`] wrote (`none`: no group); `None` if it is not a label.
pub fn parse_label(label: &str) -> Option<Vec<Vec<u32>>> {
    if label == "none" {
        return Some(Vec::new());
    }
    label
        .split(' ')
        .map(|g| g.split('+').map(|r| r.parse().ok()).collect::<Option<Vec<u32>>>())
        .collect()
}

/// What a grouping does to a broadcast, as far as the plan tells: each group of ranks sharing
/// a CPU as the sorted roles of its ranks (`roles[r]`: rank `r`'s, `Plan::rank_roles`), the
/// groups sorted. Two groupings with the same form put ranks of the same roles together (with
/// 3 ranks, the root with one leaf or with the other). Without roles, the groups themselves.
fn role_form(groups: &[Vec<u32>], roles: Option<&[(u32, u32)]>) -> Vec<Vec<(u32, u32)>> {
    let mut form: Vec<Vec<(u32, u32)>> = groups
        .iter()
        .map(|g| {
            let mut v: Vec<(u32, u32)> = g
                .iter()
                .map(|&r| match roles {
                    Some(roles) => roles.get(r as usize).copied().unwrap_or((u32::MAX, r)),
                    None => (u32::MAX, r),
                })
                .collect();
            v.sort_unstable();
            v
        })
        .collect();
    form.sort_unstable();
    form
}

/// The groupings of `calls` (those of one size class) against `setup`, the set-up's grouping
/// at the class's size as [`label`] wrote it, judged by what they do to the plan whose ranks
/// have `roles` ([`role_form`]); `None` when no call's CPUs were all read.
pub fn class_groups<'a>(
    calls: impl IntoIterator<Item = &'a AlignedCall>,
    setup: Option<&str>,
    roles: Option<&[(u32, u32)]>,
) -> Option<CpuGroups> {
    let groupings: Vec<Vec<u32>> = calls
        .into_iter()
        .filter_map(|c| grouping(&c.cpus).filter(|g| g.len() == c.ranks.len() && !g.is_empty()))
        .collect();
    let forms: Vec<Vec<Vec<(u32, u32)>>> = groupings.iter().map(|g| role_form(&shared_groups(g), roles)).collect();
    let (most, count, known) = most_frequent(forms.iter().map(Some))?;
    let first = forms.iter().position(|f| f == most).expect("seen");
    let setup_form = setup.and_then(parse_label).map(|g| role_form(&g, roles));
    Some(CpuGroups {
        most_calls: label(&groupings[first]),
        known_calls: known,
        most_calls_count: count,
        setup: setup.map(str::to_string),
        setup_count: setup_form.map_or(0, |s| forms.iter().filter(|f| **f == s).count() as u64),
    })
}

/// This process's CPU now (`sched_getcpu`); `None` where the kernel does not say.
pub fn current_cpu() -> Option<u32> {
    // SAFETY: no arguments; returns -1 on failure.
    let c = unsafe { libc::sched_getcpu() };
    u32::try_from(c).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groupings_name_the_ranks_that_shared_a_cpu_whichever_it_was() {
        let on = |cpus: &[u32]| grouping(&cpus.iter().map(|&c| Some((7, c))).collect::<Vec<_>>()).unwrap();
        // Leaves 1 and 2 on one CPU, on CPU 1 or on CPU 0: the same grouping.
        assert_eq!(on(&[0, 1, 1]), on(&[1, 0, 0]));
        assert_eq!(label(&on(&[0, 1, 1])), "1+2");
        assert_eq!(label(&on(&[1, 1, 0])), "0+1");
        assert_ne!(on(&[1, 1, 0]), on(&[0, 1, 1]));
        assert_eq!(label(&on(&[0, 1, 0, 1])), "0+2 1+3");
        assert_eq!(label(&on(&[0, 1, 2])), "none");
        // The same CPU number on two kernels is not shared.
        assert_eq!(label(&grouping(&[Some((1, 0)), Some((2, 0))]).unwrap()), "none");
        assert_eq!(grouping(&[Some((1, 0)), None]), None);
    }

    fn call(cpus: &[u32]) -> AlignedCall {
        AlignedCall {
            seq: 0,
            root: 0,
            bytes: 1 << 20,
            by_mpi: false,
            ranks: (0..cpus.len() as u32).map(|r| (r, 0.0, 1e-4)).collect(),
            cpus: cpus.iter().map(|&c| Some((7, c))).collect(),
        }
    }

    #[test]
    fn groupings_are_judged_by_the_roles_they_put_together() {
        // 3 ranks, root 0 sending to the leaves 1 and 2: the root with either leaf is one
        // placement; the two leaves together another.
        let roles = [(0, 2), (1, 0), (1, 0)];
        let calls: Vec<AlignedCall> = [[0, 0, 1], [0, 1, 0], [0, 1, 0], [1, 0, 0]]
            .iter()
            .map(|c| call(c))
            .collect();
        let g = class_groups(&calls, Some("0+2"), Some(&roles)).unwrap();
        assert_eq!(
            (g.most_calls.as_str(), g.most_calls_count, g.known_calls),
            ("0+1", 3, 4)
        );
        assert_eq!(g.setup_count, 3);
        assert!(!g.unlike_setup());
        let g = class_groups(&calls, Some("1+2"), Some(&roles)).unwrap();
        assert_eq!(g.setup_count, 1);
        assert!(g.unlike_setup());
        // Without roles, every rank is its own: 0+2 is another grouping than 0+1.
        let g = class_groups(&calls, Some("0+1"), None).unwrap();
        assert_eq!(
            (g.most_calls.as_str(), g.most_calls_count, g.setup_count),
            ("0+2", 2, 1)
        );
        assert_eq!(parse_label("0+2 1+3"), Some(vec![vec![0, 2], vec![1, 3]]));
        assert_eq!(parse_label("none"), Some(vec![]));
        assert_eq!(parse_label("0+x"), None);
        // No CPU read: nothing to say.
        let mut unread = call(&[0, 0, 1]);
        unread.cpus[1] = None;
        assert_eq!(class_groups([&unread], None, None), None);
    }

    #[test]
    fn the_most_frequent_grouping_counts_only_known_ones() {
        let (a, b) = (vec![0, 1, 1], vec![0, 1, 0]);
        let calls = [Some(&a), Some(&b), None, Some(&a)];
        assert_eq!(most_frequent(calls), Some((&a, 2, 3)));
        // Ties go to the first seen.
        assert_eq!(most_frequent([Some(&b), Some(&a)]), Some((&b, 1, 2)));
        assert_eq!(most_frequent::<u32>([None, None]), None);
    }
}
