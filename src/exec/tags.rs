//! Message tags: which call (sequence number) and which size class a message belongs to.
//!
//! Every call on a communicator gets the next sequence number on every rank (calls are
//! collective and ordered), so tagging by `seq` keeps a fast rank's next broadcast from matching
//! a slow rank's current receives. The size class in the tag lets a rank detect that the root's
//! message size differs from its own (an erroneous call): it sees a message of its current `seq`
//! with another class waiting, and joins the root's plan in error mode instead of hanging.
//! Size classes are 0 (an empty message: an empty broadcast still runs a plan of empty messages,
//! so a rank whose count differs from the root's finds out) to 64; one more value marks poison:
//! "the sender failed".

/// Number of distinct classes: the size classes 0..=64 and [`POISON_CLASS`].
pub const CLASSES: u64 = 66;

/// Class value used for poison messages.
pub const POISON_CLASS: u8 = 65;

/// Encodes (seq, class) into tags below the communicator's `MPI_TAG_UB`.
#[derive(Clone, Copy, Debug)]
pub struct TagCodec {
    seq_mod: u64,
    tag_ub: i32,
}

impl TagCodec {
    /// `tag_ub` is the communicator's `MPI_TAG_UB` (at least 32767 by the standard).
    pub fn new(tag_ub: i32) -> TagCodec {
        let tag_ub = tag_ub.max(32767);
        // Data tags use 0 .. seq_mod * CLASSES - 1 <= tag_ub - 1, leaving `tag_ub` itself for
        // control messages (clock synchronisation for profiles).
        TagCodec {
            seq_mod: (tag_ub as u64 / CLASSES).max(1),
            tag_ub,
        }
    }

    /// A tag no data message uses.
    pub fn control_tag(&self) -> i32 {
        self.tag_ub
    }

    /// Tag for call `seq`, class `class`.
    pub fn tag(&self, seq: u64, class: u8) -> i32 {
        ((seq % self.seq_mod) * CLASSES + class as u64) as i32
    }

    /// How many calls apart two calls must be for their tags to collide.
    pub fn seq_period(&self) -> u64 {
        self.seq_mod
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_stay_below_bound_and_distinguish() {
        for ub in [32767, 1 << 20, i32::MAX] {
            let c = TagCodec::new(ub);
            assert!(c.seq_period() >= 496);
            for seq in [0u64, 1, 2, c.seq_period() - 1, c.seq_period(), u64::MAX] {
                for class in [0u8, 1, 33, 64, POISON_CLASS] {
                    let t = c.tag(seq, class);
                    assert!(t >= 0 && t < c.control_tag(), "{t} >= {}", c.control_tag());
                }
            }
            assert_ne!(c.tag(5, 3), c.tag(6, 3));
            assert_ne!(c.tag(5, 3), c.tag(5, 4));
            assert_eq!(c.tag(5, 3), c.tag(5 + c.seq_period(), 3));
        }
    }
}
