//! Python ints in NumPy's integer arithmetic: whether one fits an int array's dtype, and
//! Python's `//`. Used by the builder, the operators and the creation functions alike.

use nums_layout::meta::ScalarKind;
use nums_layout::{DType, Scalar};

/// The int dtype of an array a Python int `v` does not fit (NumPy 2 raises for it), or
/// `None` where it fits or the array is not of ints.
pub(super) fn out_of_range(v: Scalar, dtype: DType) -> Option<DType> {
    // With a bool array a Python int is an int64.
    let dtype = if dtype == DType::Bool {
        DType::Int64
    } else {
        dtype
    };
    let (lo, hi) = dtype.int_range().filter(|_| dtype.is_int())?;
    let i = v.as_i128().filter(|_| v.kind() == ScalarKind::Int)?;
    (i < lo || i > hi).then_some(dtype)
}

/// Python's `a // b` (rounded toward -inf) for `b != 0`.
pub(super) fn floor_div(a: i128, b: i128) -> i128 {
    a.div_euclid(b) - i128::from(b < 0 && a.rem_euclid(b) != 0)
}
