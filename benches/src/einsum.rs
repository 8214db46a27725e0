//! The one contraction kernel (einsum) against the direct call it replaces, on the same
//! blocks in one run: BLAS `dot` for matmul shapes, and a hand-written loop for MTTKRP.
//! A ratio near 1 means routing every contraction through einsum costs nothing. Then
//! int64 contractions (BLAS has no integer GEMM): the kernel's blocked wrapping loop
//! against ndarray's generic `dot` and against float64 `dgemm` on the same shapes.
//!
//!     cargo run --release -p nums-benches --bin einsum

use std::time::Instant;

use std::num::Wrapping;

use ndarray::{Array2, Array3, ArrayD, Ix2};
use nums_function::einsum::{Spec, einsum, sum_of_terms};
use nums_layout::Block;

/// Best of `reps` runs, in seconds.
fn best(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn block(shape: &[usize], seed: u64) -> Block {
    let n: usize = shape.iter().product();
    let v: Vec<f64> = (0..n as u64)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 1000) as f64 / 500.0 - 1.0)
        .collect();
    Block::F64(ArrayD::from_shape_vec(shape.to_vec(), v).expect("shape"))
}

fn f64s(b: &Block) -> &ArrayD<f64> {
    match b {
        Block::F64(a) => a,
        _ => unreachable!("float64 blocks"),
    }
}

fn main() {
    println!(
        "{:<34} {:>12} {:>12} {:>8}",
        "contraction (block shapes)", "einsum ms", "direct ms", "ratio"
    );
    let row = |name: &str, e: f64, d: f64| {
        println!(
            "{name:<34} {:>12.2} {:>12.2} {:>8.2}",
            e * 1e3,
            d * 1e3,
            e / d
        );
    };
    for (m, k, n) in [(1024, 1024, 1024), (65536, 128, 128), (128, 65536, 128)] {
        let (a, b) = (block(&[m, k], 1), block(&[k, n], 2));
        let spec = Spec::parse("ij,jk->ik").expect("spec");
        let e = best(5, || {
            einsum(&spec, &[&a, &b]).expect("einsum");
        });
        let (a2, b2) = (
            f64s(&a).view().into_dimensionality::<Ix2>().expect("2-D"),
            f64s(&b).view().into_dimensionality::<Ix2>().expect("2-D"),
        );
        let d = best(5, || {
            let _: Array2<f64> = a2.dot(&b2);
        });
        row(&format!("matmul {m}x{k} @ {k}x{n}"), e, d);
    }
    // X.T @ X on a tall block, the Newton step's Hessian term.
    let x = block(&[65536, 128], 3);
    let spec = Spec::parse("ji,jk->ik").expect("spec");
    let e = best(5, || {
        einsum(&spec, &[&x, &x]).expect("einsum");
    });
    let x2 = f64s(&x).view().into_dimensionality::<Ix2>().expect("2-D");
    let d = best(5, || {
        let _: Array2<f64> = x2.t().dot(&x2);
    });
    row("X.T @ X, X 65536x128", e, d);
    // MTTKRP: M[i,f] = sum_jk X[i,j,k] B[j,f] C[k,f], against the loop it replaces.
    let (i, j, k, f) = (64, 64, 64, 16);
    let (xt, bm, cm) = (block(&[i, j, k], 4), block(&[j, f], 5), block(&[k, f], 6));
    let spec = Spec::parse("ijk,jf,kf->if").expect("spec");
    let e = best(3, || {
        einsum(&spec, &[&xt, &bm, &cm]).expect("einsum");
    });
    let x3 = f64s(&xt)
        .view()
        .into_dimensionality::<ndarray::Ix3>()
        .expect("3-D");
    let (b2, c2) = (
        f64s(&bm).view().into_dimensionality::<Ix2>().expect("2-D"),
        f64s(&cm).view().into_dimensionality::<Ix2>().expect("2-D"),
    );
    let d = best(3, || {
        let mut out = Array2::<f64>::zeros((i, f));
        for ii in 0..i {
            for jj in 0..j {
                for kk in 0..k {
                    let v = x3[[ii, jj, kk]];
                    for ff in 0..f {
                        out[[ii, ff]] += v * b2[[jj, ff]] * c2[[kk, ff]];
                    }
                }
            }
        }
        let _: Array3<f64> = out.insert_axis(ndarray::Axis(2));
    });
    row(&format!("MTTKRP {i}x{j}x{k}, rank {f}"), e, d);
    int64_contractions();
}

fn int_block(shape: &[usize], seed: u64) -> Block {
    let n: usize = shape.iter().product();
    let v: Vec<i64> = (0..n as u64)
        .map(|i| ((i.wrapping_mul(2654435761) ^ seed) % 2001) as i64 - 1000)
        .collect();
    Block::I64(ArrayD::from_shape_vec(shape.to_vec(), v).expect("shape"))
}

fn int64_contractions() {
    println!(
        "\n{:<30} {:>10} {:>12} {:>8} {:>12} {:>8}",
        "int64 matmul", "einsum ms", "nd dot ms", "ratio", "f64 BLAS ms", "ratio"
    );
    for (m, k, n) in [(512, 512, 512), (1024, 1024, 1024), (65536, 128, 128)] {
        let (a, b) = (int_block(&[m, k], 1), int_block(&[k, n], 2));
        let e = best(3, || {
            sum_of_terms("ij,jk->ik", 2, &[&a, &b]).expect("einsum");
        });
        let wrap = |x: &Block| match x {
            Block::I64(v) => v.mapv(Wrapping).into_dimensionality::<Ix2>().expect("2-D"),
            _ => unreachable!("int64 blocks"),
        };
        let (wa, wb) = (wrap(&a), wrap(&b));
        // ndarray's generic product (no BLAS, no matrixmultiply for integers).
        let d = best(1, || {
            let _: Array2<Wrapping<i64>> = wa.dot(&wb);
        });
        let (fa, fb) = (block(&[m, k], 1), block(&[k, n], 2));
        let f = best(3, || {
            sum_of_terms("ij,jk->ik", 2, &[&fa, &fb]).expect("einsum");
        });
        println!(
            "{:<30} {:>10.1} {:>12.1} {:>8.2} {:>12.1} {:>8.2}",
            format!("{m}x{k} @ {k}x{n}"),
            e * 1e3,
            d * 1e3,
            d / e,
            f * 1e3,
            e / f
        );
    }
}
