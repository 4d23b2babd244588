//! Quantiles of the latency histograms, shared by the per-worker history and
//! the per-upstream-server rates of the status page.

/// The `q` quantile (0..1) in milliseconds of a histogram with `counts[i]`
/// observations at or below `bounds[i]` seconds (and the last count above
/// every bound), interpolated linearly inside its bucket as Prometheus's
/// `histogram_quantile` does; beyond the last bound it is that bound. `None`
/// without observations.
pub fn quantile_ms(counts: &[u64], bounds: &[f64], q: f64) -> Option<f64> {
    let total: u64 = counts.iter().sum();
    if total == 0 {
        return None;
    }
    let rank = q * total as f64;
    let mut below = 0u64;
    for (i, &c) in counts.iter().enumerate() {
        if c > 0 && (below + c) as f64 >= rank {
            let Some(&upper) = bounds.get(i) else {
                return bounds.last().map(|b| b * 1000.0);
            };
            let lower = if i == 0 { 0.0 } else { bounds[i - 1] };
            let within = ((rank - below as f64) / c as f64).clamp(0.0, 1.0);
            return Some((lower + (upper - lower) * within) * 1000.0);
        }
        below += c;
    }
    bounds.last().map(|b| b * 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_inside_their_bucket() {
        let bounds = [0.001, 0.01, 0.1];
        let near = |got: Option<f64>, want: f64| {
            assert!(
                got.is_some_and(|g| (g - want).abs() < 1e-9),
                "{got:?} != {want}"
            )
        };
        assert_eq!(quantile_ms(&[0, 0, 0, 0], &bounds, 0.5), None);
        // 10 at or below 1 ms, 10 in (1 ms, 10 ms]: the median is 1 ms, p75 halfway.
        near(quantile_ms(&[10, 10, 0, 0], &bounds, 0.5), 1.0);
        near(quantile_ms(&[10, 10, 0, 0], &bounds, 0.75), 5.5);
        // Beyond the last bound, the last bound.
        near(quantile_ms(&[0, 0, 0, 5], &bounds, 0.99), 100.0);
    }
}
