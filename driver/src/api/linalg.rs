//! `nums_cloud::api::linalg`: NumPy's `np.linalg` over [`Array`]s, by TSQR, blocked
//! Cholesky and blocked LU (see the README's factorizations).

use super::{Arg, Array, Error, Value};

/// `f(args)` of the function table whose value has the named fields `fields`, in order.
fn fields<const N: usize>(
    f: &str,
    args: &[Arg],
    kwargs: &[(&str, Arg)],
    fields: [&str; N],
) -> [Array; N] {
    let first = args.iter().find_map(|a| match a {
        Arg::Array(x) => Some(x.clone()),
        _ => None,
    });
    let s = first.as_ref().expect("an array argument").session().clone();
    let v = s.call(f, args, kwargs);
    fields.map(|name| match &v {
        Ok(v) => match v.get(name) {
            Some(Value::Array(a)) => a.clone(),
            _ => Array::made(
                &s,
                Err(Error::Job {
                    raises: Default::default(),
                    array: None,
                    message: format!("{f}() has no field {name}"),
                }),
                format!("{f}().{name}"),
            ),
        },
        Err(e) => Array::made(&s, Err(e.clone()), format!("{f}().{name}")),
    })
}

/// `np.linalg.qr` (reduced) of a matrix with rows >= columns, by TSQR: `(Q, R)`. Q is
/// computed only when it is used; both share one factorization.
///
/// ```
/// # use nums_cloud::api::{Session, linalg};
/// # fn main() -> Result<(), nums_cloud::Error> {
/// # let dir = std::env::temp_dir().join("nums-cloud-doc-qr");
/// # let s = Session::new(&format!("file://{}", dir.display()))?
/// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
/// let a = s.random_normal(&[50, 3], 1).block(&[7, 3]);
/// let [q, r] = linalg::qr(&a);
/// let err = (q.matmul(&r) - &a).abs().max(None).compute_blocking::<f64>()?;
/// assert!(err.sum() < 1e-12);
/// let x = linalg::lstsq(&a, &s.ones(&[50]));
/// assert_eq!(x.compute_blocking::<f64>()?.shape(), &[3]);
/// # Ok(())
/// # }
/// ```
pub fn qr(a: &Array) -> [Array; 2] {
    fields("qr", &[a.into()], &[], ["Q", "R"])
}

/// `np.linalg.svd(a, full_matrices=False)` of a matrix (TSQR, then the SVD of R):
/// `[U, S, Vh]`.
pub fn svd(a: &Array) -> [Array; 3] {
    fields(
        "svd",
        &[a.into()],
        &[("full_matrices", Arg::Bool(false))],
        ["U", "S", "Vh"],
    )
}

/// `np.linalg.svdvals`: the singular values, largest first.
pub fn svdvals(a: &Array) -> Array {
    a.call("svdvals", &[], &[])
}

/// `np.linalg.norm` with no `ord` or `axis`: the 2-norm of all elements (Frobenius).
pub fn norm(a: &Array) -> Array {
    a.call("norm", &[], &[])
}

/// `np.linalg.cholesky`: L, lower triangular, with L L^T = a.
pub fn cholesky(a: &Array) -> Array {
    a.call("cholesky", &[], &[])
}

/// `np.linalg.inv`.
pub fn inv(a: &Array) -> Array {
    a.call("inv", &[], &[])
}

/// `np.linalg.det`.
pub fn det(a: &Array) -> Array {
    a.call("det", &[], &[])
}

/// `np.linalg.solve(a, b)`.
pub fn solve(a: &Array, b: &Array) -> Array {
    a.call("solve", &[b.into()], &[])
}

/// `np.linalg.lstsq(a, b)[0]`: the least-squares solution (TSQR of `[a | b]`).
pub fn lstsq(a: &Array, b: &Array) -> Array {
    let s = a.session().clone();
    match s.call("lstsq", &[a.into(), b.into()], &[]) {
        Ok(v) => match v.get("0") {
            Some(Value::Array(x)) => x.clone(),
            _ => Array::made(
                &s,
                Err(Error::Job {
                    raises: Default::default(),
                    array: None,
                    message: "lstsq() gave no solution".into(),
                }),
                "lstsq()[0]".into(),
            ),
        },
        Err(e) => Array::made(&s, Err(e), "lstsq()[0]".into()),
    }
}
