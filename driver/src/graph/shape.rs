//! A shape's text and its element count within the engine's bound: what the builder, the
//! operators and the functions all say and check of shapes, below each of them.

use crate::config::MAX_ELEMENTS;

/// The most blocks one array may have: the planner plans a million blocks in seconds,
/// and a block is an object in the store (a million objects per array is already far
/// past what a useful block size gives: 1 TB in blocks of 1 MB).
pub const MAX_BLOCKS_PER_ARRAY: u64 = 1_000_000;

/// A shape as Python prints a tuple: `(3,)`, `(2, 3)`.
pub(super) fn shape_str(s: &[u64]) -> String {
    match s {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// `shape`'s element count, refused past [`MAX_ELEMENTS`] (the engine's one bound on
/// an array's elements).
pub(super) fn check_elements(shape: &[u64]) -> Result<u64, String> {
    shape
        .iter()
        .try_fold(1u64, |acc, &s| acc.checked_mul(s))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| format!("shape {} has more than 2^50 elements", shape_str(shape)))
}
