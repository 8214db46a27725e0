//! Discrete Fourier transforms of a block's lanes ([`Kernel::Fft`]): rustfft for complex
//! lanes, realfft (rustfft's real-to-complex and complex-to-real wrappers) for real input
//! or output. The lanes are moved last (a contiguous copy) and transformed in parallel;
//! the four-step FFT across blocks (the driver's `graph/funcs/fft.rs`) multiplies by its
//! twiddle here, in the same pass.
//!
//! [`Kernel::Fft`]: nums_layout::batch::Kernel::Fft

use std::f64::consts::PI;

use ndarray::{ArrayD, IxDyn};
use num_complex::Complex;
use nums_layout::batch::{FftKind, Twiddle};
use nums_layout::{Block, DType};
use rayon::prelude::*;
use realfft::RealFftPlanner;
use rustfft::{FftDirection, FftNum, FftPlanner};

/// The transform `kind` of `x`'s lanes along `axis`, times `scale` (then the twiddle), in
/// dtype `out` (complex, or a real inverse's float), the output block of `out_shape` at
/// `origin` in its array. (The fields of `Kernel::Fft` and the output block's geometry,
/// as the kernel dispatch has them.)
#[allow(clippy::too_many_arguments)]
pub fn fft(
    x: &Block,
    kind: FftKind,
    axis: usize,
    scale: f64,
    twiddle: Option<Twiddle>,
    out: DType,
    out_shape: &[usize],
    origin: &[u64],
) -> Result<Block, String> {
    if axis >= x.shape().len() || out_shape.len() != x.shape().len() {
        return Err(format!(
            "an FFT along axis {axis} of a block of shape {:?} into {out_shape:?}",
            x.shape()
        ));
    }
    let job = Lanes {
        kind,
        axis,
        scale,
        twiddle,
        out_shape,
        origin,
    };
    match out {
        DType::Complex64 | DType::Float32 => job.run::<f32>(x),
        DType::Complex128 | DType::Float64 => job.run::<f64>(x),
        d => Err(format!(
            "an FFT makes complex (or a real inverse's float) blocks, not {}",
            d.name()
        )),
    }
}

/// A float precision the transforms run in: its blocks in and out.
trait Precision: FftNum {
    fn reals(b: Block) -> ArrayD<Self>;
    fn complexes(b: Block) -> ArrayD<Complex<Self>>;
    fn real_block(a: ArrayD<Self>) -> Block;
    fn complex_block(a: ArrayD<Complex<Self>>) -> Block;
}

macro_rules! precision {
    ($t:ty, $r:ident, $c:ident, $rd:ident, $cd:ident) => {
        impl Precision for $t {
            fn reals(b: Block) -> ArrayD<$t> {
                match b.cast(DType::$rd) {
                    Block::$r(a) => a,
                    _ => unreachable!("cast to {}", DType::$rd.name()),
                }
            }
            fn complexes(b: Block) -> ArrayD<Complex<$t>> {
                match b.cast(DType::$cd) {
                    Block::$c(a) => a,
                    _ => unreachable!("cast to {}", DType::$cd.name()),
                }
            }
            fn real_block(a: ArrayD<$t>) -> Block {
                Block::$r(a)
            }
            fn complex_block(a: ArrayD<Complex<$t>>) -> Block {
                Block::$c(a)
            }
        }
    };
}
precision!(f32, F32, C64, Float32, Complex64);
precision!(f64, F64, C128, Float64, Complex128);

/// One kernel call's parameters.
struct Lanes<'a> {
    kind: FftKind,
    axis: usize,
    scale: f64,
    twiddle: Option<Twiddle>,
    out_shape: &'a [usize],
    origin: &'a [u64],
}

impl Lanes<'_> {
    /// The permutation that moves `axis` last, and the one that moves it back.
    fn perms(&self, ndim: usize) -> (Vec<usize>, Vec<usize>) {
        let mut last: Vec<usize> = (0..ndim).filter(|&d| d != self.axis).collect();
        last.push(self.axis);
        let mut back = vec![0; ndim];
        for (i, &p) in last.iter().enumerate() {
            back[p] = i;
        }
        (last, back)
    }

    /// `a`'s elements in C order with `axis` last.
    fn lanes_last<T: Clone>(&self, a: ArrayD<T>) -> Vec<T> {
        let (last, _) = self.perms(a.ndim());
        a.permuted_axes(last)
            .as_standard_layout()
            .into_owned()
            .into_raw_vec_and_offset()
            .0
    }

    /// The output block from its lanes (`axis` last, C order).
    fn block_of<T: Clone>(&self, data: Vec<T>) -> Result<ArrayD<T>, String> {
        let (last, back) = self.perms(self.out_shape.len());
        let shape: Vec<usize> = last.iter().map(|&d| self.out_shape[d]).collect();
        let a = ArrayD::from_shape_vec(IxDyn(&shape), data).map_err(|e| e.to_string())?;
        Ok(a.permuted_axes(back).as_standard_layout().into_owned())
    }

    fn run<T: Precision>(&self, x: &Block) -> Result<Block, String> {
        let n_in = x.shape()[self.axis];
        let n_out = self.out_shape[self.axis];
        let lanes: usize = (self.out_shape.iter().product::<usize>())
            .checked_div(n_out)
            .unwrap_or(0);
        let scale = T::from_f64(self.scale).expect("a float");
        let expect = match self.kind {
            FftKind::Forward | FftKind::Inverse => n_in,
            FftKind::Real => n_in / 2 + 1,
            FftKind::RealInverse => 2 * n_in.saturating_sub(1),
        };
        let fits = match self.kind {
            // n_out = 2 (m - 1) or 2 (m - 1) + 1 for m input frequencies.
            FftKind::RealInverse => n_in == n_out / 2 + 1,
            _ => n_out == expect,
        };
        if !fits || n_in == 0 {
            return Err(format!(
                "an FFT ({:?}) of lanes of {n_in} into lanes of {n_out}",
                self.kind
            ));
        }
        match self.kind {
            FftKind::Forward | FftKind::Inverse => {
                let mut data = self.lanes_last(T::complexes(x.clone()));
                let dir = if self.kind == FftKind::Forward {
                    FftDirection::Forward
                } else {
                    FftDirection::Inverse
                };
                let plan = FftPlanner::<T>::new().plan_fft(n_in, dir);
                let twiddle = self.twiddle_of(dir)?;
                let zero = Complex::new(T::zero(), T::zero());
                data.par_chunks_mut(n_in).enumerate().for_each_init(
                    || vec![zero; plan.get_inplace_scratch_len()],
                    |scratch, (l, lane)| {
                        plan.process_with_scratch(lane, scratch);
                        if self.scale != 1.0 {
                            lane.iter_mut().for_each(|v| *v = *v * scale);
                        }
                        if let Some(t) = &twiddle {
                            t.apply(lane, t.index(l));
                        }
                    },
                );
                debug_assert_eq!(data.len(), lanes * n_out);
                Ok(T::complex_block(self.block_of(data)?))
            }
            FftKind::Real => {
                let mut data = self.lanes_last(T::reals(x.clone()));
                let plan = RealFftPlanner::<T>::new().plan_fft_forward(n_in);
                let zero = Complex::new(T::zero(), T::zero());
                let mut out = vec![zero; lanes * n_out];
                let failed = (data.par_chunks_mut(n_in))
                    .zip(out.par_chunks_mut(n_out))
                    .map_init(
                        || plan.make_scratch_vec(),
                        |scratch, (lane, res)| {
                            plan.process_with_scratch(lane, res, scratch)?;
                            if self.scale != 1.0 {
                                res.iter_mut().for_each(|v| *v = *v * scale);
                            }
                            Ok(())
                        },
                    )
                    .find_any(|r: &Result<(), realfft::FftError>| r.is_err());
                if let Some(Err(e)) = failed {
                    return Err(format!("rfft: {e}"));
                }
                Ok(T::complex_block(self.block_of(out)?))
            }
            FftKind::RealInverse => {
                let mut data = self.lanes_last(T::complexes(x.clone()));
                let plan = RealFftPlanner::<T>::new().plan_fft_inverse(n_out);
                let mut out = vec![T::zero(); lanes * n_out];
                let failed = (data.par_chunks_mut(n_in))
                    .zip(out.par_chunks_mut(n_out))
                    .map_init(
                        || plan.make_scratch_vec(),
                        |scratch, (lane, res)| {
                            // NumPy's c2r ignores these imaginary parts; realfft refuses
                            // them (they make no real signal).
                            lane[0].im = T::zero();
                            if n_out.is_multiple_of(2) {
                                lane[n_in - 1].im = T::zero();
                            }
                            plan.process_with_scratch(lane, res, scratch)?;
                            if self.scale != 1.0 {
                                res.iter_mut().for_each(|v| *v = *v * scale);
                            }
                            Ok(())
                        },
                    )
                    .find_any(|r: &Result<(), realfft::FftError>| r.is_err());
                if let Some(Err(e)) = failed {
                    return Err(format!("irfft: {e}"));
                }
                Ok(T::real_block(self.block_of(out)?))
            }
        }
    }

    /// The twiddle of a four-step FFT: which lanes take which index along its axis.
    fn twiddle_of(&self, dir: FftDirection) -> Result<Option<Phase>, String> {
        let Some(t) = self.twiddle else {
            return Ok(None);
        };
        if t.axis == self.axis || t.axis >= self.out_shape.len() || t.n == 0 {
            return Err(format!(
                "a twiddle along axis {} of an FFT along axis {} of a {}-D block",
                t.axis,
                self.axis,
                self.out_shape.len()
            ));
        }
        // The lanes are in C order over the other axes: the twiddle axis' index is the
        // lane number over the axes after it, modulo its length.
        let after: usize = (t.axis + 1..self.out_shape.len())
            .filter(|&d| d != self.axis)
            .map(|d| self.out_shape[d])
            .product();
        Ok(Some(Phase {
            n: t.n,
            sign: if dir == FftDirection::Forward {
                -1.0
            } else {
                1.0
            },
            stride: after.max(1),
            len: self.out_shape[t.axis].max(1),
            origin: self.origin[t.axis],
        }))
    }
}

/// Lane `l`'s twiddle: element k times exp(sign 2 pi i k m / n), m its index in the array.
struct Phase {
    n: u64,
    sign: f64,
    stride: usize,
    len: usize,
    origin: u64,
}

impl Phase {
    fn index(&self, lane: usize) -> u64 {
        self.origin + ((lane / self.stride) % self.len) as u64
    }

    fn apply<T: FftNum>(&self, lane: &mut [Complex<T>], m: u64) {
        for (k, v) in lane.iter_mut().enumerate() {
            // k m reduced modulo n exactly (in integers): the angle stays within one turn,
            // as accurate as sin and cos of a small argument.
            let j = (k as u128 * m as u128 % self.n as u128) as f64;
            let (s, c) = (self.sign * 2.0 * PI * j / self.n as f64).sin_cos();
            let w = Complex::new(
                T::from_f64(c).expect("a float"),
                T::from_f64(s).expect("a float"),
            );
            *v = *v * w;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The DFT by its definition, in f64.
    fn dft(x: &[Complex<f64>], sign: f64) -> Vec<Complex<f64>> {
        let n = x.len();
        (0..n)
            .map(|k| {
                (0..n)
                    .map(|j| {
                        let a = sign * 2.0 * PI * ((j * k) % n) as f64 / n as f64;
                        x[j] * Complex::new(a.cos(), a.sin())
                    })
                    .sum()
            })
            .collect()
    }

    fn close(a: &[Complex<f64>], b: &[Complex<f64>]) {
        assert_eq!(a.len(), b.len());
        let norm: f64 = b.iter().map(|v| v.norm()).fold(1.0, f64::max);
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).norm() <= 1e-12 * norm, "{x} != {y}");
        }
    }

    fn signal(n: usize) -> Vec<Complex<f64>> {
        (0..n)
            .map(|i| Complex::new((i as f64 * 0.37).sin(), (i as f64 * 1.3).cos()))
            .collect()
    }

    fn c128(shape: &[usize], v: Vec<Complex<f64>>) -> Block {
        Block::C128(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
    }

    fn values(b: Block) -> Vec<Complex<f64>> {
        match b {
            Block::C128(a) => a.as_standard_layout().iter().copied().collect(),
            _ => panic!("complex128"),
        }
    }

    #[test]
    fn lanes_along_either_axis_are_the_dft() {
        let x = signal(12);
        let b = c128(&[3, 4], x.clone());
        let rows = values(
            fft(
                &b,
                FftKind::Forward,
                1,
                1.0,
                None,
                DType::Complex128,
                &[3, 4],
                &[0, 0],
            )
            .unwrap(),
        );
        for r in 0..3 {
            close(&rows[r * 4..r * 4 + 4], &dft(&x[r * 4..r * 4 + 4], -1.0));
        }
        let cols = values(
            fft(
                &b,
                FftKind::Inverse,
                0,
                0.5,
                None,
                DType::Complex128,
                &[3, 4],
                &[0, 0],
            )
            .unwrap(),
        );
        for c in 0..4 {
            let lane: Vec<_> = (0..3).map(|r| x[r * 4 + c]).collect();
            let want: Vec<_> = dft(&lane, 1.0).iter().map(|v| v * 0.5).collect();
            let got: Vec<_> = (0..3).map(|r| cols[r * 4 + c]).collect();
            close(&got, &want);
        }
    }

    /// The four-step decomposition by hand, with this kernel: N = N1 N2, element
    /// n = N2 n1 + n2 at [n1, n2]; length-N1 FFTs down the columns with the twiddle,
    /// length-N2 FFTs along the rows; frequency k1 + N1 k2 is at [k1, k2].
    #[test]
    fn four_step_is_the_dft_of_the_whole() {
        let (n1, n2) = (6, 10);
        let x = signal(n1 * n2);
        let a = c128(&[n1, n2], x.clone());
        // Columns in two blocks of 5 (the twiddle's index counts from the block's origin).
        let mut cols = vec![Complex::default(); n1 * n2];
        for c0 in [0, 5] {
            let part: Vec<_> = (0..n1)
                .flat_map(|r| x[r * n2 + c0..r * n2 + c0 + 5].to_vec())
                .collect();
            let t = Twiddle {
                axis: 1,
                n: (n1 * n2) as u64,
            };
            let out = values(
                fft(
                    &c128(&[n1, 5], part),
                    FftKind::Forward,
                    0,
                    1.0,
                    Some(t),
                    DType::Complex128,
                    &[n1, 5],
                    &[0, c0 as u64],
                )
                .unwrap(),
            );
            for r in 0..n1 {
                cols[r * n2 + c0..r * n2 + c0 + 5].copy_from_slice(&out[r * 5..r * 5 + 5]);
            }
        }
        let _ = a;
        let d = values(
            fft(
                &c128(&[n1, n2], cols),
                FftKind::Forward,
                1,
                1.0,
                None,
                DType::Complex128,
                &[n1, n2],
                &[0, 0],
            )
            .unwrap(),
        );
        let want = dft(&x, -1.0);
        let got: Vec<_> = (0..n1 * n2).map(|k| d[(k % n1) * n2 + k / n1]).collect();
        close(&got, &want);
    }

    #[test]
    fn real_transforms_round_trip() {
        for n in [7usize, 8] {
            let x: Vec<f64> = (0..2 * n).map(|i| (i as f64 * 0.7).sin()).collect();
            let b = Block::F64(ArrayD::from_shape_vec(IxDyn(&[2, n]), x.clone()).unwrap());
            let h = n / 2 + 1;
            let spec = fft(
                &b,
                FftKind::Real,
                1,
                1.0,
                None,
                DType::Complex128,
                &[2, h],
                &[0, 0],
            )
            .unwrap();
            let full: Vec<_> = x[..n].iter().map(|&v| Complex::new(v, 0.0)).collect();
            close(&values(spec.clone())[..h], &dft(&full, -1.0)[..h]);
            let back = fft(
                &spec,
                FftKind::RealInverse,
                1,
                1.0 / n as f64,
                None,
                DType::Float64,
                &[2, n],
                &[0, 0],
            )
            .unwrap();
            let Block::F64(back) = back else {
                panic!("float64")
            };
            for (a, b) in back.iter().zip(&x) {
                assert!((a - b).abs() < 1e-12, "{a} != {b}");
            }
        }
    }

    #[test]
    fn float32_computes_in_complex64() {
        let b = Block::F32(ArrayD::from_shape_vec(IxDyn(&[4]), vec![1.0, 2.0, 3.0, 4.0]).unwrap());
        let out = fft(
            &b,
            FftKind::Forward,
            0,
            1.0,
            None,
            DType::Complex64,
            &[4],
            &[0],
        )
        .unwrap();
        let Block::C64(a) = out else {
            panic!("complex64")
        };
        assert_eq!(a[[0]], Complex::new(10.0f32, 0.0));
        assert_eq!(a[[2]], Complex::new(-2.0f32, 0.0));
    }
}
