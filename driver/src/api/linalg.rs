//! `nums_cloud::api::linalg`: NumPy's `np.linalg` functions as free functions over
//! [`Array`]s (the same as the methods, `linalg::lstsq(&a, &b)` being `a.lstsq(&b)`).

use super::Array;

/// `np.linalg.qr` (reduced, TSQR): `(Q, R)`.
pub fn qr(a: &Array) -> (Array, Array) {
    a.qr()
}

/// `np.linalg.lstsq(a, b)[0]`.
pub fn lstsq(a: &Array, b: &Array) -> Array {
    a.lstsq(b)
}

/// `np.linalg.svd(a, full_matrices=False)`: `(U, S, Vh)`.
pub fn svd(a: &Array) -> (Array, Array, Array) {
    a.svd()
}

/// `np.linalg.svdvals`.
pub fn svdvals(a: &Array) -> Array {
    a.svdvals()
}

/// `np.linalg.norm(a)`.
pub fn norm(a: &Array) -> Array {
    a.norm()
}

/// `np.linalg.cholesky`.
pub fn cholesky(a: &Array) -> Array {
    a.cholesky()
}

/// `np.linalg.solve`.
pub fn solve(a: &Array, b: &Array) -> Array {
    a.solve(b)
}

/// `np.linalg.inv`.
pub fn inv(a: &Array) -> Array {
    a.inv()
}

/// `np.linalg.det`.
pub fn det(a: &Array) -> Array {
    a.det()
}
