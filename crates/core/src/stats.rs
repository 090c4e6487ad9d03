//! The one statistic several parts of greenup share.

/// The median of `sorted` (ascending): its middle value, or the mean of the two middle
/// ones; `None` when it is empty.
pub fn median_of_sorted(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::median_of_sorted;

    #[test]
    fn odd_and_even_counts_and_none() {
        assert_eq!(median_of_sorted(&[]), None);
        assert_eq!(median_of_sorted(&[1.0, 5.0, 9.0]), Some(5.0));
        assert_eq!(median_of_sorted(&[1.0, 2.0, 4.0, 9.0]), Some(3.0));
    }
}
