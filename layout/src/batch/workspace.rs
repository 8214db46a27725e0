//! The kernels' memory model: the bytes a task's kernel holds beyond its input and output
//! blocks (its workspace), in one place, beside [`Kernel`], for everyone who projects
//! memory: the driver's planner (`sched`) and the graph (which sizes linear-algebra tasks
//! before planning). The rest of a task's
//! projected peak (its blocks, reads in flight, the process's base) is the function
//! process's model, `nums_function::memory::task_peak`.
//!
//! [`kernel_workspace`] is the entry point; [`element_workspace`] is the same number for a
//! kernel that is not [`is_linalg`], from its blocks' element counts alone.

use super::kernel::{Kernel, QrOutput, SvdOutput, is_linalg};
use super::ops::{BinaryOp, compute_dtype, unary_compute_dtype};
use crate::meta::DType;

/// Bytes a task's kernel needs beyond its input and output blocks, for inputs and an
/// output of these block shapes and dtypes: the LAPACK kernels' copies and work arrays
/// ([`workspace_bytes`]); the others' scratch ([`Kernel::scratch_bytes`]: the text a CSV
/// import parses, ...) and operands cast to a wider dtype ([`cast_workspace`]). Every
/// kernel's one input-sized temporary is in the task's projection already
/// (`nums_function::memory::task_peak`).
pub fn kernel_workspace(
    kernel: &Kernel,
    inputs: &[(Vec<usize>, DType)],
    out: (&[usize], DType),
) -> u64 {
    if !is_linalg(kernel) {
        let n = |s: &[usize]| s.iter().product::<usize>() as u64;
        let ins: Vec<(u64, DType)> = inputs.iter().map(|(s, d)| (n(s), *d)).collect();
        return element_workspace(kernel, &ins, (n(out.0), out.1));
    }
    let ins: Vec<&[usize]> = inputs.iter().map(|(s, _)| s.as_slice()).collect();
    // The kernels compute a complex operand in complex128: twice float64's bytes.
    let complex = inputs.iter().any(|(_, d)| d.is_complex());
    workspace_bytes(kernel, &ins, out.0).unwrap_or(0) * if complex { 2 } else { 1 }
}

/// [`kernel_workspace`] of a kernel that is not [`is_linalg`], whose workspace depends only
/// on its blocks' element counts and dtypes (`inputs` in order, and `out`): the planner
/// has those for every task without making the blocks' shapes.
pub fn element_workspace(kernel: &Kernel, inputs: &[(u64, DType)], out: (u64, DType)) -> u64 {
    kernel.scratch_bytes() + cast_workspace(kernel, inputs, out)
}

impl Kernel {
    /// Bytes the kernel holds beyond its inputs and output (for memory projections): the
    /// text a CSV import parses, the metadata and column chunks a Parquet import decodes.
    /// A `.npy` import reads no more than its block's elements, at most as wide as the
    /// output's, which the output's own share covers.
    pub fn scratch_bytes(&self) -> u64 {
        match self {
            Kernel::ImportCsv { start, end, .. } => end.saturating_sub(*start),
            // Its file read 1 MiB at a time into one buffer, and a line carried from one
            // read to the next (a row of numbers is far shorter).
            Kernel::CsvCount { .. } => 2 << 20,
            Kernel::ImportParquet {
                metadata, fetch, ..
            } => metadata.1 + fetch,
            Kernel::ImportZarr { scratch, .. }
            | Kernel::Sort { scratch, .. }
            | Kernel::SortMerge { scratch, .. } => *scratch,
            Kernel::ExportNpyPart { header, bytes, .. } => header.len() as u64 + bytes,
            Kernel::ExportNpyBlock { bytes, .. } => *bytes,
            // The chunk padded to its full shape, and its encoded bytes.
            Kernel::ExportZarrChunk { bytes, .. } => 2 * bytes,
            _ => 0,
        }
    }
}

/// Bytes a kernel of these ops allocates beyond its inputs and output: copies of operands
/// cast to the dtype it computes in (elements of each input not already in it).
pub fn cast_bytes(inputs: &[(u64, DType)], compute: DType) -> u64 {
    inputs
        .iter()
        .filter(|(_, d)| *d != compute)
        .map(|(n, _)| n * compute.size() as u64)
        .sum()
}

/// Bytes of the casts the function's `compute::binary` makes for operands of `a` and `b`
/// elements.
pub fn binary_cast_bytes(op: BinaryOp, a: (u64, DType), b: (u64, DType)) -> u64 {
    if op.is_logical() {
        return cast_bytes(&[a, b], DType::Bool);
    }
    cast_bytes(&[a, b], compute_dtype(op, a.1, b.1))
}

/// Bytes a kernel allocates beyond what the memory model counts for every task (its
/// inputs, one input-sized temporary and its output, `nums_function::memory::task_peak`): its
/// operands cast to the dtype it computes in, and its result in that dtype where the
/// output's differs (`int8 + float64` copies the int8 block as float64; an int8 einsum
/// computes in int64). `inputs`: elements and dtype of each input block, in order; `out`:
/// the output block's. 0 for the kernels that compute in their operands' dtype.
pub fn cast_workspace(kernel: &Kernel, inputs: &[(u64, DType)], out: (u64, DType)) -> u64 {
    let (compute, result) = match (kernel, inputs) {
        (Kernel::Binary { op }, [a, b]) if op.is_logical() => {
            return cast_bytes(&[*a, *b], DType::Bool);
        }
        (Kernel::Binary { op }, [a, b]) => (compute_dtype(*op, a.1, b.1), *op),
        (Kernel::Scalar { op, value, .. }, [x]) => (
            compute_dtype(*op, x.1, x.1.promote_scalar(value.kind())),
            *op,
        ),
        (Kernel::Unary { op }, [x]) => {
            let c = unary_compute_dtype(*op, x.1, out.1);
            return cast_bytes(inputs, c)
                + if c != out.1 {
                    out.0 * c.size() as u64
                } else {
                    0
                };
        }
        // A copy of its input in the output's precision (complex), lanes moved last,
        // and the transformed lanes before they take the output's order.
        (Kernel::Fft { .. }, [x]) => {
            let c = if out.1 == DType::Float32 || out.1 == DType::Complex64 {
                8
            } else {
                16
            };
            return (x.0 + 2 * out.0.max(x.0)) * c;
        }
        (Kernel::Where, [c, rest @ ..]) => {
            return cast_bytes(&[*c], DType::Bool) + cast_bytes(rest, out.1);
        }
        (Kernel::Einsum { .. }, _) => {
            let p = inputs.iter().map(|x| x.1).reduce(DType::promote);
            let c = match p {
                Some(d) if d.is_exact() => DType::Int64,
                Some(d) => d,
                None => return 0,
            };
            return cast_bytes(inputs, c)
                + if c != out.1 {
                    out.0 * c.size() as u64
                } else {
                    0
                };
        }
        _ => return 0,
    };
    let made = if result.is_predicate() {
        DType::Bool
    } else {
        compute
    };
    cast_bytes(inputs, compute)
        + if made != out.1 {
            out.0 * made.size() as u64
        } else {
            0
        }
}

/// Bytes a linear-algebra kernel needs beyond its input and output blocks, for inputs of
/// `inputs` shapes and an output block of `out` shape: the copies LAPACK overwrites and its
/// work arrays (sizes as LAPACK documents them, with block size 64). Float64 inputs; an
/// input of another dtype adds a float64 copy of it. `None` for other kernels. OpenBLAS's
/// own per-thread buffers are allocated once per process and are not counted here.
pub fn workspace_bytes(kernel: &Kernel, inputs: &[&[usize]], out: &[usize]) -> Option<u64> {
    let mat = |s: &[usize]| -> (u64, u64) {
        match *s {
            [m] => (m as u64, 1),
            [m, n, ..] => (m as u64, n as u64),
            [] => (1, 1),
        }
    };
    let first = inputs.first().map_or((0, 0), |s| mat(s));
    let f64s = |n: u64| 8 * n;
    Some(match kernel {
        // The stacked M x N copy and T (N x N, or dgeqrf's work, N x 64); for Q (or Q C),
        // all M rows of it (M x w) and dgemqrt's work (K x w).
        Kernel::Qr { cols, output } => {
            let cols = (*cols).max(1);
            let grid = match output {
                QrOutput::QProduct { .. } => &inputs[..inputs.len().saturating_sub(1)],
                _ => inputs,
            };
            let m: u64 = grid.iter().step_by(cols).map(|s| mat(s).0).sum();
            let n: u64 = grid.iter().take(cols).map(|s| mat(s).1).sum();
            let k = m.min(n);
            let q = match output {
                QrOutput::R => 0,
                QrOutput::Q { .. } => (m + k) * k,
                QrOutput::QProduct { .. } => (m + k) * inputs.last().map_or(0, |s| mat(s).1),
            };
            f64s(m * n + n * n + 64 * n + q)
        }
        // R11 and R12 copies, the SVD of R11 (values, or vectors when a is rank deficient:
        // the projection takes the worse case), x's copy for the residuals.
        Kernel::Lstsq { n, .. } => {
            let n = *n as u64;
            let p = first.1.saturating_sub(n);
            f64s(n * n + 2 * n * p) + gesdd_bytes(n, n, true)
        }
        Kernel::Svd { output } => {
            gesdd_bytes(first.0, first.1, *output != SvdOutput::Values)
                + if *output == SvdOutput::Values {
                    0
                } else {
                    // U and Vh are both computed (the full ones, m x m and n x n, for an
                    // output block of that shape); one of them (or S) is the output.
                    let (m, n) = first;
                    let k = m.min(n);
                    let full = m != n && (out == [m as usize; 2] || out == [n as usize; 2]);
                    let (uc, vr) = if full { (m, n) } else { (k, k) };
                    f64s(m * uc + vr * n + k)
                        .saturating_sub(f64s(out.iter().product::<usize>() as u64))
                }
        }
        // potrf, trsm, gemm and syrk work in place in the output (a copy of an input).
        Kernel::Cholesky
        | Kernel::CholeskyBlock { .. }
        | Kernel::TriangularSolve { .. }
        | Kernel::SubtractProducts { .. }
        | Kernel::SubtractGram { .. } => 0,
        // The LU factors (column-major) and the pivots; solve's column-major right-hand side;
        // the condition estimate's scales and vectors (6 n).
        Kernel::LuSolve | Kernel::Det { .. } => {
            let rhs = inputs.get(1).map_or(0, |s| mat(s).0 * mat(s).1);
            f64s(first.0 * first.0 + rhs + 6 * first.0) + 8 * first.0
        }
        // getrf's column-major copy of the rows it factors, and the pivots.
        Kernel::LuPanel {
            factor: true,
            apply,
            scale,
            ..
        } => {
            // Q: one panel, or its row blocks (a panel of A read from A's own blocks).
            let end = inputs.len().saturating_sub(*scale as usize);
            let qs = inputs.get(apply.is_some() as usize..end).unwrap_or(&[]);
            let rc = |s: &[usize]| match *s {
                [.., m, n] => (m as u64, n as u64),
                [m] => (m as u64, 1),
                [] => (1, 1),
            };
            let m: u64 = qs.iter().map(|s| rc(s).0).sum();
            let c = qs.first().map_or(0, |s| rc(s).1);
            f64s(m * c) + 4 * c
        }
        // The last step's copy of the probe (n x t) for the condition estimate.
        Kernel::LuBack { estimate: true, .. } => {
            inputs.get(2).map_or(0, |s| f64s(mat(s).0 * mat(s).1))
        }
        Kernel::LuPanel { .. } | Kernel::LuBack { .. } | Kernel::LuDet { .. } => 0,
        // The factors and the identity solved in place (column-major), and the pivots; the
        // condition estimate's scales and vectors.
        Kernel::Inverse => f64s(2 * first.0 * first.0 + 6 * first.0) + 8 * first.0,
        _ => return None,
    })
}

/// gesdd of an m x n matrix: the copy it overwrites, S, and its work arrays (with U and Vh
/// when `vectors`).
fn gesdd_bytes(m: u64, n: u64, vectors: bool) -> u64 {
    let (k, mx) = (m.min(n), m.max(n));
    let work = if vectors {
        m * k + k * n + 3 * k + mx.max(4 * k * k + 4 * k)
    } else {
        3 * k + mx.max(7 * k)
    };
    8 * (m * n + k + work) + 4 * 8 * k
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::UnaryOp;

    #[test]
    fn casts_are_counted_where_a_kernel_widens() {
        use DType::*;
        let bin = |op| Kernel::Binary { op };
        // Same dtypes: nothing beyond the model's one temporary.
        let k = bin(BinaryOp::Add);
        assert_eq!(
            cast_workspace(&k, &[(10, Float64), (10, Float64)], (10, Float64)),
            0
        );
        // int8 + float64: the int8 operand copied as float64.
        assert_eq!(
            cast_workspace(&k, &[(10, Int8), (10, Float64)], (10, Float64)),
            80
        );
        // int8 / int8: both as float64.
        let d = bin(BinaryOp::Div);
        assert_eq!(
            cast_workspace(&d, &[(10, Int8), (10, Int8)], (10, Float64)),
            160
        );
        // A comparison makes bools, the output's dtype: the casts only (int16 as float32).
        let lt = bin(BinaryOp::Lt);
        assert_eq!(
            cast_workspace(&lt, &[(10, Int16), (10, Float32)], (10, Bool)),
            40
        );
        // exp of int8 computes in float32 (its output); an int8 einsum in int64, then cast.
        let exp = Kernel::Unary { op: UnaryOp::Exp };
        assert_eq!(cast_workspace(&exp, &[(10, Int8)], (10, Float32)), 40);
        let e = Kernel::Einsum {
            subscripts: "ij,jk->ik".into(),
            operands: 2,
        };
        assert_eq!(
            cast_workspace(&e, &[(6, Int8), (6, Int8)], (4, Int8)),
            2 * 6 * 8 + 4 * 8
        );
        assert_eq!(
            cast_workspace(&e, &[(6, Complex64), (6, Complex64)], (4, Complex64)),
            0
        );
    }

    #[test]
    fn linalg_workspace() {
        let r = Kernel::Qr {
            cols: 1,
            output: QrOutput::R,
        };
        let w = workspace_bytes(&r, &[&[65536, 128]], &[128, 128]).unwrap();
        assert!((65536 * 128 * 8..65536 * 128 * 9).contains(&w), "{w}");
        assert_eq!(
            workspace_bytes(&Kernel::Cholesky, &[&[9, 9]], &[9, 9]),
            Some(0)
        );
        assert_eq!(workspace_bytes(&Kernel::Where, &[], &[1]), None);
        assert!(is_linalg(&Kernel::Inverse) && !is_linalg(&Kernel::Where));
    }
}
