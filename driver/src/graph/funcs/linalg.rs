//! Linear algebra: where NumPy's `np.linalg` functions go (qr, lstsq, cholesky, solve,
//! inv, svd, norm), each lowered to a blocked algorithm's graph.

use super::*;

pub(super) const DEFS: &[FuncDef] = &[];
