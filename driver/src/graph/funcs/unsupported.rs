//! NumPy names nums-cloud does not have, each with what to write instead: the "is not
//! supported" error of a call and docs/unsupported.md (a test keeps the page in step).

/// (NumPy's name, what to write instead: Markdown, one line).
pub(super) const UNSUPPORTED: &[(&str, &str)] = &[
    ("allclose", "`all(abs(a - b) <= atol + rtol * abs(b))`"),
    (
        "apply_along_axis",
        "no Python functions run in a job; write the function as an expression of arrays",
    ),
    ("array_equal", "`all(a == b)` (same shapes)"),
    ("array_split", "slices: `x[:k]`, `x[k:]`"),
    (
        "cbrt",
        "`sign(x) * abs(x) ** (1 / 3)` (may differ in the last bit)",
    ),
    (
        "column_stack",
        "`stack((a, b), axis=1)` of 1-D arrays, `concatenate` of 2-D ones",
    ),
    (
        "convolve",
        "not supported; short kernels: a sum of shifted slices, `a[2:] * k0 + a[1:-1] * k1 + a[:-2] * k2`",
    ),
    (
        "correlate",
        "not supported; as `convolve`, with the kernel reversed",
    ),
    (
        "cross",
        "slices: `a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1]` and so on",
    ),
    ("deg2rad", "`x * (np.pi / 180)`"),
    ("degrees", "`x * (180 / np.pi)`"),
    (
        "diag",
        "`diagonal(a)` for a 2-D `a`; `eye(n) * v` for a 1-D `v`",
    ),
    (
        "dstack",
        "`stack((a, b), axis=2)` or `concatenate` along axis 2",
    ),
    ("ediff1d", "`diff(ravel(x))`"),
    ("empty", "`zeros(shape)` (every value is computed anyway)"),
    ("empty_like", "`zeros_like(a)`"),
    ("exp2", "`2.0 ** x`"),
    ("fabs", "`abs(x)`"),
    ("fft", "not supported (no FFT over blocks yet)"),
    ("fliplr", "`flip(m, axis=1)`"),
    ("flipud", "`flip(m, axis=0)`"),
    ("float_power", "`x.astype('float64') ** y`"),
    (
        "fmax",
        "`where(isnan(x2), x1, maximum(x1, x2))` (a NaN in `x1` still wins: swap them for it)",
    ),
    ("fmin", "`where(isnan(x2), x1, minimum(x1, x2))`"),
    (
        "gradient",
        "`(x[2:] - x[:-2]) / 2` inside, `diff` at the edges",
    ),
    ("heaviside", "`where(x < 0, 0.0, where(x > 0, 1.0, h))`"),
    (
        "interp",
        "not supported; `searchsorted(xp, x)` gives the intervals",
    ),
    ("isclose", "`abs(a - b) <= atol + rtol * abs(b)`"),
    (
        "kron",
        "`einsum('ij,kl->ikjl', a, b).reshape(a.shape[0] * b.shape[0], -1)`",
    ),
    (
        "lexsort",
        "`argsort` of one key (several keys are not supported)",
    ),
    (
        "logaddexp2",
        "`logaddexp(x1 * np.log(2), x2 * np.log(2)) / np.log(2)`",
    ),
    ("matrix_transpose", "`swapaxes(x, -1, -2)`"),
    (
        "nan_to_num",
        "`where(isnan(x), 0.0, x)` (and `clip` for the infinities)",
    ),
    (
        "place",
        "not supported (no assignment in a job); `where(mask, v, a)` for one value",
    ),
    (
        "polyfit",
        "`np.linalg.lstsq` of the powers of x: `lstsq(stack((x ** 2, x, ones_like(x)), axis=1), y)[0]`",
    ),
    (
        "polyval",
        "Horner's rule in arithmetic: `(p0 * x + p1) * x + p2`",
    ),
    (
        "put",
        "not supported (no assignment in a job); `where(mask, v, a)` for one value",
    ),
    ("put_along_axis", "not supported (no assignment in a job)"),
    ("putmask", "`where(mask, values, a)`"),
    ("rad2deg", "`x * (180 / np.pi)`"),
    ("radians", "`x * (np.pi / 180)`"),
    (
        "reciprocal",
        "`1 / x` (for ints NumPy's reciprocal is an integer division: `1 // x`)",
    ),
    ("resize", "`reshape`, with `tile` for repeats"),
    (
        "rot90",
        "`flip(swapaxes(m, 0, 1), axis=0)` (one turn counter-clockwise)",
    ),
    ("sinc", "`where(x == 0, 1.0, sin(np.pi * x) / (np.pi * x))`"),
    ("split", "slices: `x[:k]`, `x[k:]`"),
    (
        "take_along_axis",
        "`sort(a, axis)` for the values `argsort` orders; other index arrays are not supported",
    ),
    ("trapezoid", "`sum((y[1:] + y[:-1]) * diff(x)) / 2`"),
    ("tri", "`tril(ones((n, m)), k)`"),
    (
        "vander",
        "`stack((x ** 2, x, ones_like(x)), axis=1)` (one power per column)",
    ),
    ("vecdot", "`sum(conj(x1) * x2, axis=-1)`"),
    (
        "vectorize",
        "no Python functions run in a job; write the function as an expression of arrays",
    ),
];

/// What to write instead of NumPy's `name`, if it is a name of the table.
pub(super) fn instead(name: &str) -> Option<&'static str> {
    UNSUPPORTED
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, i)| *i)
}
