//! The element types the LAPACK kernels compute in: float64 (LAPACK's d* routines, CBLAS's
//! cblas_d*) and complex128 (z*), behind one trait so that each kernel is written once.
//! Where a real kernel transposes, a complex one takes the conjugate transpose (A^H, as
//! NumPy's complex linear algebra does: Cholesky's A = L L^H, QR's Q^H Q = I); for a real
//! matrix the two are the same. float32 and complex64 operands are computed in these
//! (widened, then cast back), as the real kernels always did for float32.

use cblas_sys::{CBLAS_DIAG, CBLAS_LAYOUT, CBLAS_SIDE, CBLAS_TRANSPOSE, CBLAS_UPLO};
use ndarray::LinalgScalar;
use nums_layout::{C128, Elem};

/// float64 or complex128: arithmetic, and the LAPACK and CBLAS routines of that type.
///
/// # Safety
/// The routines are LAPACK's and CBLAS's, with their contracts on sizes and leading
/// dimensions; callers check those as for the real routines.
pub(crate) trait Field: Elem + LinalgScalar + std::ops::Neg<Output = Self> {
    /// LAPACK's letter for op(A) = A^H (A^T for a real A).
    const ADJOINT: u8;

    /// A real value of this type.
    fn real(r: f64) -> Self;
    /// The modulus.
    fn abs(self) -> f64;
    /// The complex conjugate (itself when real).
    fn conj(self) -> Self;
    /// Neither part is NaN or infinite.
    fn is_finite(self) -> bool;
    /// A part is NaN.
    fn is_nan(self) -> bool;
    /// The unit d with self = d |self|: a real's sign (+1 for 0 and NaN), a complex's
    /// phase (1 for 0, or where it is not finite).
    fn phase(self) -> Self;
    /// LAPACK's optimal-size answer of a workspace query.
    fn lwork(self) -> usize;

    /// CBLAS's op(A) = A^H when `t`, else A.
    fn cblas_op(t: bool) -> CBLAS_TRANSPOSE {
        if !t {
            CBLAS_TRANSPOSE::CblasNoTrans
        } else if Self::ADJOINT == b'C' {
            CBLAS_TRANSPOSE::CblasConjTrans
        } else {
            CBLAS_TRANSPOSE::CblasTrans
        }
    }

    unsafe fn geqrt3(m: i32, n: i32, a: &mut [Self], lda: i32, t: &mut [Self], ldt: i32) -> i32;
    unsafe fn geqrf(
        m: i32,
        n: i32,
        a: &mut [Self],
        lda: i32,
        tau: &mut [Self],
        work: &mut [Self],
        lwork: i32,
    ) -> i32;
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemqrt(
        m: i32,
        n: i32,
        k: i32,
        v: &[Self],
        ldv: i32,
        t: &[Self],
        c: &mut [Self],
        ldc: i32,
        work: &mut [Self],
    ) -> i32;
    #[allow(clippy::too_many_arguments)]
    unsafe fn unmqr(
        m: i32,
        n: i32,
        k: i32,
        a: &[Self],
        lda: i32,
        tau: &[Self],
        c: &mut [Self],
        ldc: i32,
        work: &mut [Self],
        lwork: i32,
    ) -> i32;
    /// gesdd; the complex one's real work array is allocated here.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gesdd(
        jobz: u8,
        m: i32,
        n: i32,
        a: &mut [Self],
        s: &mut [f64],
        u: &mut [Self],
        ldu: i32,
        vt: &mut [Self],
        ldvt: i32,
        work: &mut [Self],
        lwork: i32,
        iwork: &mut [i32],
    ) -> i32;
    unsafe fn potrf(uplo: u8, n: i32, a: &mut [Self], lda: i32) -> i32;
    unsafe fn getrf(n: i32, a: &mut [Self], ipiv: &mut [i32]) -> i32;
    #[allow(clippy::too_many_arguments)]
    unsafe fn getrs(
        trans: u8,
        n: i32,
        nrhs: i32,
        a: &[Self],
        ipiv: &[i32],
        b: &mut [Self],
        ldb: i32,
    ) -> i32;
    /// lacn2's reverse communication (`isgn` is the real routine's; the complex one has
    /// none).
    unsafe fn lacn2(
        n: i32,
        v: &mut [Self],
        x: &mut [Self],
        isgn: &mut [i32],
        est: &mut f64,
        kase: &mut i32,
        isave: &mut [i32; 3],
    );
    #[allow(clippy::too_many_arguments)]
    unsafe fn trsm(
        side: CBLAS_SIDE,
        uplo: CBLAS_UPLO,
        trans: CBLAS_TRANSPOSE,
        diag: CBLAS_DIAG,
        m: i32,
        n: i32,
        a: *const Self,
        lda: i32,
        b: *mut Self,
        ldb: i32,
    );
    /// C = C - op(A) op(B), row-major.
    #[allow(clippy::too_many_arguments)]
    unsafe fn gemm_sub(
        ta: CBLAS_TRANSPOSE,
        tb: CBLAS_TRANSPOSE,
        m: i32,
        n: i32,
        k: i32,
        a: *const Self,
        lda: i32,
        b: *const Self,
        ldb: i32,
        c: *mut Self,
        ldc: i32,
    );
    /// C's lower triangle = C - op(A) op(A)^H, row-major (syrk; herk for complex).
    #[allow(clippy::too_many_arguments)]
    unsafe fn gram_sub(
        trans: CBLAS_TRANSPOSE,
        n: i32,
        k: i32,
        a: *const Self,
        lda: i32,
        c: *mut Self,
        ldc: i32,
    );
}

const ROW: CBLAS_LAYOUT = CBLAS_LAYOUT::CblasRowMajor;

impl Field for f64 {
    const ADJOINT: u8 = b'T';

    fn real(r: f64) -> f64 {
        r
    }
    fn abs(self) -> f64 {
        f64::abs(self)
    }
    fn conj(self) -> f64 {
        self
    }
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
    fn is_nan(self) -> bool {
        f64::is_nan(self)
    }
    fn phase(self) -> f64 {
        if self < 0.0 { -1.0 } else { 1.0 }
    }
    fn lwork(self) -> usize {
        (self as usize).max(1)
    }

    unsafe fn geqrt3(m: i32, n: i32, a: &mut [f64], lda: i32, t: &mut [f64], ldt: i32) -> i32 {
        let mut info = 0;
        unsafe { lapack::dgeqrt3(m, n, a, lda, t, ldt, &mut info) };
        info
    }
    unsafe fn geqrf(
        m: i32,
        n: i32,
        a: &mut [f64],
        lda: i32,
        tau: &mut [f64],
        work: &mut [f64],
        lwork: i32,
    ) -> i32 {
        let mut info = 0;
        unsafe { lapack::dgeqrf(m, n, a, lda, tau, work, lwork, &mut info) };
        info
    }
    unsafe fn gemqrt(
        m: i32,
        n: i32,
        k: i32,
        v: &[f64],
        ldv: i32,
        t: &[f64],
        c: &mut [f64],
        ldc: i32,
        work: &mut [f64],
    ) -> i32 {
        let mut info = 0;
        unsafe {
            lapack::dgemqrt(
                b'L', b'N', m, n, k, k, v, ldv, t, k, c, ldc, work, &mut info,
            )
        };
        info
    }
    unsafe fn unmqr(
        m: i32,
        n: i32,
        k: i32,
        a: &[f64],
        lda: i32,
        tau: &[f64],
        c: &mut [f64],
        ldc: i32,
        work: &mut [f64],
        lwork: i32,
    ) -> i32 {
        let mut info = 0;
        unsafe {
            lapack::dormqr(
                b'L', b'N', m, n, k, a, lda, tau, c, ldc, work, lwork, &mut info,
            )
        };
        info
    }
    unsafe fn gesdd(
        jobz: u8,
        m: i32,
        n: i32,
        a: &mut [f64],
        s: &mut [f64],
        u: &mut [f64],
        ldu: i32,
        vt: &mut [f64],
        ldvt: i32,
        work: &mut [f64],
        lwork: i32,
        iwork: &mut [i32],
    ) -> i32 {
        let mut info = 0;
        unsafe {
            lapack::dgesdd(
                jobz, m, n, a, m, s, u, ldu, vt, ldvt, work, lwork, iwork, &mut info,
            )
        };
        info
    }
    unsafe fn potrf(uplo: u8, n: i32, a: &mut [f64], lda: i32) -> i32 {
        let mut info = 0;
        unsafe { lapack::dpotrf(uplo, n, a, lda, &mut info) };
        info
    }
    unsafe fn getrf(n: i32, a: &mut [f64], ipiv: &mut [i32]) -> i32 {
        let mut info = 0;
        unsafe { lapack::dgetrf(n, n, a, n, ipiv, &mut info) };
        info
    }
    unsafe fn getrs(
        trans: u8,
        n: i32,
        nrhs: i32,
        a: &[f64],
        ipiv: &[i32],
        b: &mut [f64],
        ldb: i32,
    ) -> i32 {
        let mut info = 0;
        unsafe { lapack::dgetrs(trans, n, nrhs, a, n.max(1), ipiv, b, ldb, &mut info) };
        info
    }
    unsafe fn lacn2(
        n: i32,
        v: &mut [f64],
        x: &mut [f64],
        isgn: &mut [i32],
        est: &mut f64,
        kase: &mut i32,
        isave: &mut [i32; 3],
    ) {
        let mut e = [*est];
        unsafe { lapack::dlacn2(n, v, x, isgn, &mut e, kase, isave) };
        *est = e[0];
    }
    unsafe fn trsm(
        side: CBLAS_SIDE,
        uplo: CBLAS_UPLO,
        trans: CBLAS_TRANSPOSE,
        diag: CBLAS_DIAG,
        m: i32,
        n: i32,
        a: *const f64,
        lda: i32,
        b: *mut f64,
        ldb: i32,
    ) {
        unsafe { cblas_sys::cblas_dtrsm(ROW, side, uplo, trans, diag, m, n, 1.0, a, lda, b, ldb) }
    }
    unsafe fn gemm_sub(
        ta: CBLAS_TRANSPOSE,
        tb: CBLAS_TRANSPOSE,
        m: i32,
        n: i32,
        k: i32,
        a: *const f64,
        lda: i32,
        b: *const f64,
        ldb: i32,
        c: *mut f64,
        ldc: i32,
    ) {
        unsafe { cblas_sys::cblas_dgemm(ROW, ta, tb, m, n, k, -1.0, a, lda, b, ldb, 1.0, c, ldc) }
    }
    unsafe fn gram_sub(
        trans: CBLAS_TRANSPOSE,
        n: i32,
        k: i32,
        a: *const f64,
        lda: i32,
        c: *mut f64,
        ldc: i32,
    ) {
        unsafe {
            cblas_sys::cblas_dsyrk(
                ROW,
                CBLAS_UPLO::CblasLower,
                trans,
                n,
                k,
                -1.0,
                a,
                lda,
                1.0,
                c,
                ldc,
            )
        }
    }
}

impl Field for C128 {
    const ADJOINT: u8 = b'C';

    fn real(r: f64) -> C128 {
        C128::new(r, 0.0)
    }
    fn abs(self) -> f64 {
        self.norm()
    }
    fn conj(self) -> C128 {
        C128::conj(&self)
    }
    fn is_finite(self) -> bool {
        C128::is_finite(self)
    }
    fn is_nan(self) -> bool {
        C128::is_nan(self)
    }
    fn phase(self) -> C128 {
        let r = self.norm();
        if r > 0.0 && r.is_finite() {
            self / r
        } else {
            C128::new(1.0, 0.0)
        }
    }
    fn lwork(self) -> usize {
        (self.re as usize).max(1)
    }

    unsafe fn geqrt3(m: i32, n: i32, a: &mut [C128], lda: i32, t: &mut [C128], ldt: i32) -> i32 {
        let mut info = 0;
        unsafe { lapack::zgeqrt3(m, n, a, lda, t, ldt, &mut info) };
        info
    }
    unsafe fn geqrf(
        m: i32,
        n: i32,
        a: &mut [C128],
        lda: i32,
        tau: &mut [C128],
        work: &mut [C128],
        lwork: i32,
    ) -> i32 {
        let mut info = 0;
        unsafe { lapack::zgeqrf(m, n, a, lda, tau, work, lwork, &mut info) };
        info
    }
    unsafe fn gemqrt(
        m: i32,
        n: i32,
        k: i32,
        v: &[C128],
        ldv: i32,
        t: &[C128],
        c: &mut [C128],
        ldc: i32,
        work: &mut [C128],
    ) -> i32 {
        let mut info = 0;
        unsafe {
            lapack::zgemqrt(
                b'L', b'N', m, n, k, k, v, ldv, t, k, c, ldc, work, &mut info,
            )
        };
        info
    }
    unsafe fn unmqr(
        m: i32,
        n: i32,
        k: i32,
        a: &[C128],
        lda: i32,
        tau: &[C128],
        c: &mut [C128],
        ldc: i32,
        work: &mut [C128],
        lwork: i32,
    ) -> i32 {
        let mut info = 0;
        unsafe {
            lapack::zunmqr(
                b'L', b'N', m, n, k, a, lda, tau, c, ldc, work, lwork, &mut info,
            )
        };
        info
    }
    unsafe fn gesdd(
        jobz: u8,
        m: i32,
        n: i32,
        a: &mut [C128],
        s: &mut [f64],
        u: &mut [C128],
        ldu: i32,
        vt: &mut [C128],
        ldvt: i32,
        work: &mut [C128],
        lwork: i32,
        iwork: &mut [i32],
    ) -> i32 {
        // zgesdd's real work: 7 min(m, n) without vectors (LAPACK before 3.7 asks 7, later
        // 5), else max(5 mn^2 + 5 mn, 2 mx mn + 2 mn^2 + mn).
        let (mn, mx) = (m.min(n).max(0) as usize, m.max(n).max(0) as usize);
        let lr = if jobz == b'N' {
            7 * mn
        } else {
            (5 * mn * mn + 5 * mn).max(2 * mx * mn + 2 * mn * mn + mn)
        };
        let mut rwork = vec![0.0; lr.max(1)];
        let mut info = 0;
        unsafe {
            lapack::zgesdd(
                jobz, m, n, a, m, s, u, ldu, vt, ldvt, work, lwork, &mut rwork, iwork, &mut info,
            )
        };
        info
    }
    unsafe fn potrf(uplo: u8, n: i32, a: &mut [C128], lda: i32) -> i32 {
        let mut info = 0;
        unsafe { lapack::zpotrf(uplo, n, a, lda, &mut info) };
        info
    }
    unsafe fn getrf(n: i32, a: &mut [C128], ipiv: &mut [i32]) -> i32 {
        let mut info = 0;
        unsafe { lapack::zgetrf(n, n, a, n, ipiv, &mut info) };
        info
    }
    unsafe fn getrs(
        trans: u8,
        n: i32,
        nrhs: i32,
        a: &[C128],
        ipiv: &[i32],
        b: &mut [C128],
        ldb: i32,
    ) -> i32 {
        let mut info = 0;
        unsafe { lapack::zgetrs(trans, n, nrhs, a, n.max(1), ipiv, b, ldb, &mut info) };
        info
    }
    unsafe fn lacn2(
        n: i32,
        v: &mut [C128],
        x: &mut [C128],
        _isgn: &mut [i32],
        est: &mut f64,
        kase: &mut i32,
        isave: &mut [i32; 3],
    ) {
        let mut e = [*est];
        unsafe { lapack::zlacn2(n, v, x, &mut e, kase, isave) };
        *est = e[0];
    }
    unsafe fn trsm(
        side: CBLAS_SIDE,
        uplo: CBLAS_UPLO,
        trans: CBLAS_TRANSPOSE,
        diag: CBLAS_DIAG,
        m: i32,
        n: i32,
        a: *const C128,
        lda: i32,
        b: *mut C128,
        ldb: i32,
    ) {
        let one = C128::new(1.0, 0.0);
        unsafe {
            cblas_sys::cblas_ztrsm(
                ROW,
                side,
                uplo,
                trans,
                diag,
                m,
                n,
                (&raw const one).cast(),
                a.cast(),
                lda,
                b.cast(),
                ldb,
            )
        }
    }
    unsafe fn gemm_sub(
        ta: CBLAS_TRANSPOSE,
        tb: CBLAS_TRANSPOSE,
        m: i32,
        n: i32,
        k: i32,
        a: *const C128,
        lda: i32,
        b: *const C128,
        ldb: i32,
        c: *mut C128,
        ldc: i32,
    ) {
        let (minus, one) = (C128::new(-1.0, 0.0), C128::new(1.0, 0.0));
        unsafe {
            cblas_sys::cblas_zgemm(
                ROW,
                ta,
                tb,
                m,
                n,
                k,
                (&raw const minus).cast(),
                a.cast(),
                lda,
                b.cast(),
                ldb,
                (&raw const one).cast(),
                c.cast(),
                ldc,
            )
        }
    }
    unsafe fn gram_sub(
        trans: CBLAS_TRANSPOSE,
        n: i32,
        k: i32,
        a: *const C128,
        lda: i32,
        c: *mut C128,
        ldc: i32,
    ) {
        unsafe {
            cblas_sys::cblas_zherk(
                ROW,
                CBLAS_UPLO::CblasLower,
                trans,
                n,
                k,
                -1.0,
                a.cast(),
                lda,
                1.0,
                c.cast(),
                ldc,
            )
        }
    }
}
