//! `nums_cloud::api::fft`: NumPy's `np.fft` over [`Array`]s. An axis in several blocks is
//! transformed by the four-step FFT across blocks, never gathered (docs/guide.md, "FFT
//! along chunked axes"). Every other function and parameter of the extension (`fft2`,
//! `rfftn`, `hfft`, `fftshift`, `s=`, `axes=`) is `x.call("fftn", ...)`.

use super::{Arg, Array};

/// NumPy's `norm=`: which direction of a transform is scaled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Norm {
    /// The inverse by 1/n (NumPy's default).
    #[default]
    Backward,
    /// Both by 1/sqrt(n).
    Ortho,
    /// The forward transform by 1/n.
    Forward,
}

impl Norm {
    fn arg(self) -> (&'static str, Arg) {
        let name = match self {
            Norm::Backward => "backward",
            Norm::Ortho => "ortho",
            Norm::Forward => "forward",
        };
        ("norm", name.into())
    }
}

fn along(a: &Array, f: &str, n: Option<u64>, axis: i64, norm: Norm) -> Array {
    let mut kw = vec![("axis", Arg::Int(axis)), norm.arg()];
    if let Some(n) = n {
        kw.push(("n", Arg::Int(n as i64)));
    }
    a.call(f, &[], &kw)
}

/// `np.fft.fft(a, n, axis, norm)`: complex128 (complex64 from float32 or complex64).
///
/// ```
/// # use nums_cloud::api::{Session, fft};
/// # fn main() -> Result<(), nums_cloud::Error> {
/// # let dir = std::env::temp_dir().join("nums-cloud-doc-fft");
/// # let s = Session::new(&format!("file://{}", dir.display()))?
/// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
/// let x = s.random_normal(&[4096], 1).block(&[512]);
/// let back = fft::ifft(&fft::fft(&x, None, -1, fft::Norm::Backward), None, -1, fft::Norm::Backward);
/// let err = (back.call("real", &[], &[]) - &x).abs().max(None).compute_blocking::<f64>()?;
/// assert!(err.sum() < 1e-12);
/// # Ok(())
/// # }
/// ```
pub fn fft(a: &Array, n: Option<u64>, axis: i64, norm: Norm) -> Array {
    along(a, "fft", n, axis, norm)
}

/// `np.fft.ifft(a, n, axis, norm)`.
pub fn ifft(a: &Array, n: Option<u64>, axis: i64, norm: Norm) -> Array {
    along(a, "ifft", n, axis, norm)
}

/// `np.fft.rfft(a, n, axis, norm)` of a real array: the n / 2 + 1 non-negative frequencies.
pub fn rfft(a: &Array, n: Option<u64>, axis: i64, norm: Norm) -> Array {
    along(a, "rfft", n, axis, norm)
}

/// `np.fft.irfft(a, n, axis, norm)`: the real signal of length `n` (default 2 (m - 1)).
pub fn irfft(a: &Array, n: Option<u64>, axis: i64, norm: Norm) -> Array {
    along(a, "irfft", n, axis, norm)
}

/// `np.fft.fftn(a, axes=None, norm)`: the FFT along every axis.
pub fn fftn(a: &Array, norm: Norm) -> Array {
    a.call("fftn", &[], &[norm.arg()])
}

/// `np.fft.ifftn(a, axes=None, norm)`.
pub fn ifftn(a: &Array, norm: Norm) -> Array {
    a.call("ifftn", &[], &[norm.arg()])
}
