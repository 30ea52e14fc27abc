//! What a sender's transport holds for it: how soon a rank that sends over a slow link may
//! leave the call.
//!
//! A TCP sender's send completes once the kernel has taken its bytes, not once they have
//! crossed the network. Between hosts of the emulated 2x4 cluster (300 Mbit/s uplinks), a
//! 1 MiB send completed in 0.7-1.1 ms while its acknowledgement came after 27.7 ms; a 2-8 MiB
//! send completed 27-40 ms before its acknowledgement, i.e. with 1.0-1.5 MB still unsent. A
//! model that kept the root in the call until its last byte crossed the uplink predicted it
//! 1.50 ms at 64 KiB where it left after 220 us, and 6.9 ms at 256 KiB where it left after
//! 0.5-0.6 ms; with 8 ranks the median rank is the mean of two that straddle the switches, so
//! the root's time decided the median and both sizes missed.
//!
//! [`fit`] reads the buffer from the set-up burst probe (`runtime::burst`), whose sender also
//! times its own completion next to the acknowledged round trip; [`leave_times`] turns a
//! simulated call's transfers into when each sender may leave: once the bytes of a channel
//! that have not yet passed its bottleneck fit the buffer, no earlier than its last send is
//! issued, and no earlier than the first byte of its last rendezvous message leaves (a
//! rendezvous send completes only after the receiver answers its first fragment, which queues
//! behind the bytes ahead of it on the connection).

use crate::sim::TransferRecord;

/// The bytes a sender's transport holds unsent, from transfers that each started after a
/// rest: `acked`, `(bytes, seconds)` to the receiver's one-byte acknowledgement (the fastest
/// reading of each size), and `sent`, for the same sizes, the sender's own completion. For
/// each size, the bytes that had passed when the sender completed are read off the
/// acknowledged times (linear between sizes, whose times are made non-decreasing), and the
/// rest was held for it; the largest such rest wins (a size the transport held whole only
/// says the buffer is at least that large). `None` without usable readings (lengths differ,
/// no size, a time not positive and finite). Never negative: a transport that holds nothing
/// (the sender completes with the acknowledgement) reads 0.
pub fn fit(acked: &[(u64, f64)], sent: &[f64]) -> Option<f64> {
    let ok = |t: f64| t.is_finite() && t > 0.0;
    if acked.is_empty()
        || acked.len() != sent.len()
        || !acked.iter().all(|&(_, t)| ok(t))
        || !sent.iter().all(|&t| ok(t))
    {
        return None;
    }
    let mut points: Vec<(f64, f64)> = acked.iter().map(|&(b, t)| (t, b as f64)).collect();
    points.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut latest = 0.0f64;
    for p in &mut points {
        latest = latest.max(p.0);
        p.0 = latest;
    }
    let passed = |t: f64| passed_by(&points, t);
    let held = acked
        .iter()
        .zip(sent)
        .map(|(&(b, _), &t)| b as f64 - passed(t))
        .fold(0.0f64, f64::max);
    Some(held)
}

/// Bytes passed by time `t` through `(time, bytes)` points in order of both: zero at time
/// zero, linear between points, and at the last segment's rate beyond the last point.
fn passed_by(points: &[(f64, f64)], t: f64) -> f64 {
    let mut prev = (0.0, 0.0);
    for (i, &p) in points.iter().enumerate() {
        let last = i + 1 == points.len();
        if t <= p.0 || last {
            let dt = p.0 - prev.0;
            return if dt > 0.0 {
                prev.1 + (p.1 - prev.1) * (t - prev.0) / dt
            } else {
                p.1
            };
        }
        prev = p;
    }
    0.0
}

/// Per rank of `nranks`, the earliest time its sends let it leave the call (0 for a rank that
/// sends nothing), from a simulated call's `transfers`. On a channel (a sender and a
/// receiver) whose transport holds `buffer(src, dst)` bytes, that is the later of: its last
/// send issued, the first byte of its last message longer than `rendezvous_bytes` leaving, and
/// the moment the bytes not yet passed fit the buffer (each transfer passing its bytes evenly
/// between its first and last byte leaving; a channel's transfers follow one another). With a
/// buffer of 0 it is the last byte leaving, as before there was a buffer.
pub fn leave_times(
    transfers: &[TransferRecord],
    nranks: usize,
    rendezvous_bytes: f64,
    buffer: impl Fn(u32, u32) -> f64,
) -> Vec<f64> {
    let mut by_channel: Vec<&TransferRecord> = transfers.iter().filter(|t| (t.src as usize) < nranks).collect();
    by_channel.sort_by(|a, b| {
        (a.src, a.dst)
            .cmp(&(b.src, b.dst))
            .then(a.start_s.total_cmp(&b.start_s))
    });
    let mut leave = vec![0.0f64; nranks];
    for ch in by_channel.chunk_by(|a, b| (a.src, a.dst) == (b.src, b.dst)) {
        let held = buffer(ch[0].src, ch[0].dst).max(0.0);
        let mut t = ch
            .iter()
            .map(|x| {
                if x.bytes as f64 > rendezvous_bytes {
                    x.issued_s.max(x.start_s)
                } else {
                    x.issued_s
                }
            })
            .fold(0.0f64, f64::max);
        // Walk back from the channel's last byte: the transfer in which the unsent bytes
        // first exceed the buffer is where the sender must still have been.
        let mut behind = 0.0f64;
        for x in ch.iter().rev() {
            let b = x.bytes as f64;
            if behind + b > held {
                let unsent = (held - behind) / b.max(1.0);
                t = t.max(x.start_s + (x.src_done_s - x.start_s) * (1.0 - unsent));
                break;
            }
            behind += b;
        }
        let r = ch[0].src as usize;
        leave[r] = leave[r].max(t);
    }
    leave
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transfer(src: u32, dst: u32, bytes: u64, issued: f64, start: f64, src_done: f64) -> TransferRecord {
        TransferRecord {
            src,
            dst,
            segs: None,
            bytes,
            issued_s: issued,
            start_s: start,
            src_done_s: src_done,
            end_s: src_done + 1e-4,
        }
    }

    #[test]
    fn the_buffer_is_what_had_not_passed_when_the_sender_completed() {
        // 37.5 MB/s after 100 us: s bytes acknowledged at 100 us + s / 37.5e6.
        let rate = 37.5e6;
        let sizes = [4096u64, 65536, 262144, 1 << 20];
        let acked: Vec<(u64, f64)> = sizes.iter().map(|&s| (s, 100e-6 + s as f64 / rate)).collect();
        // A transport holding 300 KB: the sender completes once all but 300 KB have passed
        // (with 20 us of its own work where it holds everything).
        let held = 300e3;
        let sent: Vec<f64> = sizes
            .iter()
            .map(|&s| (100e-6 + (s as f64 - held).max(0.0) / rate).max(20e-6))
            .collect();
        let b = fit(&acked, &sent).unwrap();
        assert!((b - held).abs() < 0.01 * held, "{b}");
        // Held whole at every size: at least the largest size less what passed at once.
        let quick = vec![50e-6; sizes.len()];
        let b = fit(&acked, &quick).unwrap();
        assert!(b > 0.9 * (1 << 20) as f64 && b <= (1 << 20) as f64, "{b}");
        // A sender that completes with the acknowledgement: nothing held.
        let acked_times: Vec<f64> = acked.iter().map(|a| a.1).collect();
        assert!(fit(&acked, &acked_times).unwrap() < 1e-6);
        // Unusable readings.
        assert_eq!(fit(&acked, &sent[1..]), None);
        assert_eq!(fit(&[], &[]), None);
        assert_eq!(fit(&acked, &[0.0, 1e-3, 1e-3, 1e-3]), None);
        assert_eq!(fit(&[(4096, f64::NAN)], &[1e-3]), None);
        // A reading slower than the next size's does not make bytes pass backwards.
        let noisy = [(4096u64, 300e-6), (65536, 200e-6), (1 << 20, 28e-3)];
        let b = fit(&noisy, &[250e-6, 250e-6, 1e-3]).unwrap();
        assert!(b > 0.9 * (1 << 20) as f64, "{b}");
    }

    #[test]
    fn a_sender_leaves_once_its_unsent_bytes_fit_the_buffer() {
        // One 1 MB transfer passing from 1 ms to 11 ms.
        let one = [transfer(0, 1, 1_000_000, 0.5e-3, 1e-3, 11e-3)];
        let at = |buffer: f64| leave_times(&one, 2, 64e3, |_, _| buffer)[0];
        // No buffer: the last byte leaving.
        assert!((at(0.0) - 11e-3).abs() < 1e-12);
        // 400 KB held: when 600 KB have passed, at 7 ms.
        assert!((at(400e3) - 7e-3).abs() < 1e-12, "{}", at(400e3));
        // Held whole: its rendezvous handshake (first byte leaving) is the bound.
        assert!((at(2e6) - 1e-3).abs() < 1e-12);
        // An eager message held whole leaves when it is issued.
        let eager = [transfer(0, 1, 8_000, 0.5e-3, 1e-3, 2e-3)];
        assert!((leave_times(&eager, 2, 64e3, |_, _| 1e6)[0] - 0.5e-3).abs() < 1e-12);
        // Eager segments on one channel, 100 KB each passing in 1 ms from 0 to 4 ms: with
        // 250 KB held, the sender leaves halfway through the second.
        let segs: Vec<TransferRecord> = (0..4)
            .map(|k| transfer(0, 2, 100_000, 0.0, k as f64 * 1e-3, (k + 1) as f64 * 1e-3))
            .collect();
        let l = leave_times(&segs, 3, 128e3, |_, _| 250e3);
        assert!((l[0] - 1.5e-3).abs() < 1e-12, "{l:?}");
        // Sent by rendezvous, the last segment's first byte is the bound.
        let l = leave_times(&segs, 3, 64e3, |_, _| 250e3);
        assert!((l[0] - 3e-3).abs() < 1e-12, "{l:?}");
        let l = leave_times(&segs, 3, 128e3, |_, _| 250e3);
        assert!((l[0] - 1.5e-3).abs() < 1e-12, "{l:?}");
        assert_eq!(l[1..], [0.0, 0.0]);
        // Channels apart: each its own buffer; the sender leaves with the later one. The
        // receiver-dependent buffer applies per channel: none towards rank 1 here.
        let both = [segs.clone(), one.to_vec()].concat();
        let l = leave_times(&both, 3, 128e3, |_, dst| if dst == 1 { 0.0 } else { 250e3 });
        assert!((l[0] - 11e-3).abs() < 1e-12, "{l:?}");
        let l = leave_times(&both, 3, 128e3, |_, _| 250e3);
        assert!((l[0] - 8.5e-3).abs() < 1e-12, "{l:?}");
    }
}
