//! Median and p99 of timing samples, the same definition in every arm
//! (the C++ and Python anchors spell it out identically).

/// Summary of one measurement's samples, in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Summary {
    pub median: f64,
    /// Nearest-rank 99th percentile.
    pub p99: f64,
    pub reps: usize,
}

/// Median (mean of the middle two for an even count) and nearest-rank p99.
/// Panics on an empty slice: every measurement takes at least one sample.
pub fn summarize(samples: &[f64]) -> Summary {
    assert!(!samples.is_empty(), "no samples");
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let i99 = ((0.99 * n as f64).ceil() as usize).max(1) - 1;
    Summary {
        median,
        p99: v[i99],
        reps: n,
    }
}

/// Repetitions that fit `budget_us` at `est_us` each, within `[lo, hi]`.
pub fn reps_for(budget_us: f64, est_us: f64, lo: usize, hi: usize) -> usize {
    ((budget_us / est_us.max(0.01)) as usize).clamp(lo, hi)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_p99() {
        let s = summarize(&[3.0, 1.0, 2.0]);
        assert_eq!((s.median, s.p99, s.reps), (2.0, 3.0, 3));
        let s = summarize(&[4.0, 1.0, 3.0, 2.0]);
        assert_eq!(s.median, 2.5);
        let v: Vec<f64> = (1..=200).map(f64::from).collect();
        let s = summarize(&v);
        assert_eq!(s.p99, 198.0);
        assert_eq!(s.median, 100.5);
    }

    #[test]
    fn reps_are_clamped() {
        assert_eq!(reps_for(1000.0, 10.0, 15, 3000), 100);
        assert_eq!(reps_for(1000.0, 1000.0, 15, 3000), 15);
        assert_eq!(reps_for(1e9, 0.0, 15, 3000), 3000);
    }
}
