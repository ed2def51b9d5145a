//! The rate embedding proceeds at, measured from the batches every node records, and the
//! time a backlog takes at that rate.

use quarry_store::EmbeddedBatch;

/// The window over which the rate of embedding is measured: the chunks every node finished
/// (vectors written) in the last two minutes, over those two minutes of wall-clock time — or
/// over the time since embedding began, when that is shorter.
pub(crate) const RATE_WINDOW_MS: i64 = 120_000;
/// A pause longer than this between one batch's end and the next one's start (all nodes
/// together) ends a stretch of embedding: the rate of a new backlog is measured from where
/// its embedding began, not averaged with the idle time before it. Shorter pauses (between
/// rounds, a conversion taking the node's places) belong to the stretch and slow its rate,
/// as they slow the embedding.
pub(crate) const RATE_GAP_MS: i64 = 30_000;
/// The least wall-clock time a measured rate covers: below it (the first batch of a backlog)
/// the last rate measured stands in.
pub(crate) const RATE_MIN_SPAN_MS: i64 = 5_000;
/// Seconds `pending` chunks take at `rate` chunks a second, rounded up.
pub(crate) fn eta_seconds(pending: u64, rate: f64) -> u64 {
    (pending as f64 / rate).ceil() as u64
}

/// The rate embedding proceeds at, in chunks a second, from the batches every node recorded
/// (`now_ms` and the batches on the store's clock): the chunks finished in the last
/// [`RATE_WINDOW_MS`], or since the stretch of embedding going on began when that is later
/// (batches separated by pauses of at most [`RATE_GAP_MS`] make one stretch), over that
/// wall-clock time up to now. A batch that began before the window counts for the share of
/// its time inside it. `None` when that covers less than [`RATE_MIN_SPAN_MS`] or finished
/// nothing.
pub(crate) fn measured_rate(now_ms: i64, batches: &[EmbeddedBatch]) -> Option<f64> {
    let window_start = now_ms - RATE_WINDOW_MS;
    let mut latest_first: Vec<&EmbeddedBatch> = batches
        .iter()
        .filter(|b| b.ended_ms >= window_start && b.ended_ms <= now_ms)
        .collect();
    latest_first.sort_by_key(|b| std::cmp::Reverse(b.ended_ms));
    // Back from the latest batch, while each ended no more than a pause before the
    // earliest start seen so far (several nodes' batches overlap).
    let mut began = i64::MAX;
    let mut stretch = Vec::new();
    for b in latest_first {
        if !stretch.is_empty() && b.ended_ms < began.saturating_sub(RATE_GAP_MS) {
            break;
        }
        began = began.min(b.ended_ms - b.elapsed_ms.max(0));
        stretch.push(b);
    }
    let from = began.max(window_start);
    let span = now_ms.checked_sub(from)?;
    if stretch.is_empty() || span < RATE_MIN_SPAN_MS {
        return None;
    }
    let chunks: f64 = stretch
        .iter()
        .map(|b| {
            let elapsed = b.elapsed_ms.max(0);
            let inside = if b.ended_ms - elapsed >= from || elapsed == 0 {
                1.0
            } else {
                ((b.ended_ms - from) as f64 / elapsed as f64).clamp(0.0, 1.0)
            };
            b.chunks as f64 * inside
        })
        .sum();
    (chunks > 0.0).then(|| chunks / (span as f64 / 1000.0))
}

#[cfg(test)]
mod tests {
    use super::{
        EmbeddedBatch, RATE_GAP_MS, RATE_MIN_SPAN_MS, RATE_WINDOW_MS, eta_seconds, measured_rate,
    };

    /// A batch of `chunks` that ended at `end_s` seconds and took `took_s`.
    fn batch(end_s: f64, took_s: f64, chunks: u64) -> EmbeddedBatch {
        EmbeddedBatch {
            ended_ms: (end_s * 1000.0) as i64,
            elapsed_ms: (took_s * 1000.0) as i64,
            chunks,
        }
    }

    /// A node that finishes `chunks` every `every_s` seconds from `from_s` to `to_s`.
    fn steady(from_s: f64, to_s: f64, every_s: f64, chunks: u64) -> Vec<EmbeddedBatch> {
        let mut out = Vec::new();
        let mut end = from_s + every_s;
        while end <= to_s + 1e-9 {
            out.push(batch(end, every_s, chunks));
            end += every_s;
        }
        out
    }

    fn close(got: Option<f64>, want: f64) -> bool {
        got.is_some_and(|g| (g - want).abs() <= want * 0.02)
    }

    #[test]
    fn the_rate_is_what_was_finished_over_the_window_of_wall_clock_time() {
        // 64 chunks every 5 s for ten minutes: 12.8 a second, whatever the model's own
        // speed was inside each batch (issue 65 item 19).
        let b = steady(0.0, 600.0, 5.0, 64);
        assert!(
            close(measured_rate(600_000, &b), 12.8),
            "{:?}",
            measured_rate(600_000, &b)
        );
        // Half-way through a batch: the one in flight counts for nothing yet, the one that
        // began before the window for its half inside it.
        let r = measured_rate(602_500, &b);
        assert!(close(r, (23.0 * 64.0 + 32.0) / 120.0), "{r:?}");
        // Only the window counts: a faster start long ago does not lift it.
        let mut fast_then_slow = steady(0.0, 300.0, 1.0, 64);
        fast_then_slow.extend(steady(300.0, 600.0, 5.0, 64));
        assert!(close(measured_rate(600_000, &fast_then_slow), 12.8));
        // Out of order, and with batches outside the window or in the future: the same.
        let mut shuffled = b.clone();
        shuffled.reverse();
        shuffled.push(batch(700.0, 5.0, 10_000));
        assert!(close(measured_rate(600_000, &shuffled), 12.8));
    }

    #[test]
    fn several_nodes_add_up_and_a_batch_across_the_window_counts_for_its_share() {
        // Two nodes, each 32 chunks every 5 s, staggered: 12.8 a second together.
        let mut b = steady(0.0, 600.0, 5.0, 32);
        b.extend(steady(2.5, 597.5, 5.0, 32));
        let r = measured_rate(600_000, &b);
        assert!(close(r, 12.8), "{r:?}");
        // One slow batch of 120 chunks in 120 s that began 20 s before the window: the 100
        // chunks of its time inside count.
        let slow = [batch(200.0, 120.0, 120)];
        let r = measured_rate(220_000, &slow);
        let window = RATE_WINDOW_MS as f64 / 1000.0;
        assert!(close(r, 100.0 / window), "{r:?}");
    }

    #[test]
    fn a_new_backlog_is_measured_from_where_its_embedding_began() {
        // Fast embedding that ended 60 s ago (a pause longer than RATE_GAP_MS), then a slow
        // backlog for the last 40 s: the rate is the slow one, not the mix.
        const { assert!(RATE_GAP_MS < 60_000) };
        let mut b = steady(0.0, 40.0, 1.0, 64);
        b.extend(steady(100.0, 140.0, 5.0, 20));
        let r = measured_rate(140_000, &b);
        assert!(close(r, 4.0), "{r:?}");
        // Pauses shorter than the gap (between rounds) belong to it and slow it.
        let mut rounds = Vec::new();
        for round in 0..6 {
            let start = 10.0 * f64::from(round);
            rounds.push(batch(start + 5.0, 5.0, 50));
        }
        // 6 rounds of 50 chunks in 55 s (each 5 s of work, 5 s apart).
        let r = measured_rate(55_000, &rounds);
        assert!(close(r, 300.0 / 55.0), "{r:?}");
        // Embedding that stopped: the rate falls as the window passes without batches.
        let stopped = steady(0.0, 100.0, 5.0, 64);
        let then = measured_rate(100_000, &stopped).unwrap_or(0.0);
        let later = measured_rate(160_000, &stopped).unwrap_or(0.0);
        assert!(later < then * 0.6, "{then} then, {later} later");
        assert_eq!(measured_rate(100_000 + RATE_WINDOW_MS + 1, &stopped), None);
    }

    #[test]
    fn too_little_history_measures_nothing() {
        assert_eq!(measured_rate(1_000_000, &[]), None);
        // One batch of 2 s, just finished: under the least span, the recorded rate stands in.
        let first = [batch(1_000.0, 2.0, 64)];
        const { assert!(2_000 < RATE_MIN_SPAN_MS) };
        assert_eq!(measured_rate(1_000_000, &first), None);
        // Once the span is long enough, the batch's own time counts from its start.
        let r = measured_rate(1_003_000, &first);
        assert!(close(r, 64.0 / 5.0), "{r:?}");
        // Batches that finished no chunk (texts whose chunks were deleted meanwhile).
        assert_eq!(measured_rate(1_010_000, &[batch(1_000.0, 10.0, 0)]), None);
        assert_eq!(eta_seconds(100, 12.8), 8);
    }
}
