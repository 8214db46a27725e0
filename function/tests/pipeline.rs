//! The pipelined handler against the sequential one it replaced: the same bytes written
//! under the same keys, the same answer as a direct computation, and the same errors
//! (a missing or corrupt input names its key; an earlier kernel's error comes first).

mod common;

use common::{Builder, TempStore};
use ndarray::{Array2, ArrayD, Axis, IxDyn};
use nums_function::Codec;
use nums_layout::batch::{BinaryOp, Kernel, ReduceOp, Stats};
use nums_layout::{ArrayMeta, Block, DType, ErrorKind, StoredArray, UnaryOp};

fn x_values() -> Array2<f64> {
    Array2::from_shape_fn((10, 6), |(i, j)| ((i * 7 + j * 3) % 11) as f64 - 4.5)
}

fn w_values() -> Array2<f64> {
    Array2::from_shape_fn((6, 4), |(i, j)| (i as f64 + 1.0) / (j as f64 + 2.0))
}

/// Writes X (10 x 6 in row blocks of 4: the last one ragged) and W (6 x 4) to `t`.
async fn write_inputs(t: &TempStore) {
    let x = StoredArray::new(
        "job/X",
        ArrayMeta::new(vec![10, 6], vec![4, 6], DType::Float64),
    )
    .unwrap();
    let xv = x_values();
    for i in 0..3u64 {
        let rows = xv.slice(ndarray::s![
            (i as usize * 4)..((i as usize + 1) * 4).min(10),
            ..
        ]);
        let b = Block::F64(rows.to_owned().into_dyn());
        x.write_block(&t.store, &[i, 0], &b).await.unwrap();
    }
    let w = StoredArray::new(
        "job/W",
        ArrayMeta::new(vec![6, 4], vec![6, 4], DType::Float64),
    )
    .unwrap();
    w.write_block(&t.store, &[0, 0], &Block::F64(w_values().into_dyn()))
        .await
        .unwrap();
}

/// Per row block: A = 3 X (an intermediate, written and used again), B = A @ W (written),
/// M = isnan(B) (bool, written); then the column sums of B, summed over the blocks
/// (written).
fn program(t: &TempStore) -> nums_layout::Batch {
    let mut b = Builder::new(&t.store);
    let x = b.array("X", vec![10, 6], vec![4, 6], DType::Float64);
    let w = b.array("W", vec![6, 4], vec![6, 4], DType::Float64);
    let a = b.array("A", vec![10, 6], vec![4, 6], DType::Float64);
    b.batch.arrays[a as usize].intermediate = true;
    let bb = b.array("B", vec![10, 4], vec![4, 4], DType::Float64);
    let m = b.array("M", vec![10, 4], vec![4, 4], DType::Bool);
    let p = b.array("P", vec![12], vec![4], DType::Float64);
    let s = b.array("S", vec![4], vec![4], DType::Float64);
    for i in 0..3u64 {
        let scale = Kernel::Scalar {
            op: BinaryOp::Mul,
            value: 3.0.into(),
            scalar_left: false,
        };
        b.task(scale, &[(x, &[i, 0])], (a, &[i, 0]), true);
        let matmul = Kernel::Einsum {
            subscripts: "ij,jk->ik".into(),
            operands: 2,
        };
        b.task(matmul, &[(a, &[i, 0]), (w, &[0, 0])], (bb, &[i, 0]), true);
        let isnan = Kernel::Unary { op: UnaryOp::IsNan };
        b.task(isnan, &[(bb, &[i, 0])], (m, &[i, 0]), true);
        let colsum = Kernel::Reduce {
            op: ReduceOp::Sum,
            axes: vec![0],
        };
        b.task(colsum, &[(bb, &[i, 0])], (p, &[i]), false);
    }
    let total = Kernel::Reduce {
        op: ReduceOp::Sum,
        axes: vec![],
    };
    b.task(total, &[(p, &[0]), (p, &[1]), (p, &[2])], (s, &[0]), true);
    b.batch
}

async fn run_in(name: &str, how: Option<u64>) -> (Vec<(String, Vec<u8>)>, Stats) {
    let t = TempStore::new(name);
    write_inputs(&t).await;
    let mut batch = program(&t);
    let stats = match how {
        None => nums_function::sequential::handle(&batch, &t.store, Codec::ZarrsChain)
            .await
            .unwrap(),
        Some(budget) => {
            batch.prefetch_budget = budget;
            nums_function::handle(&batch, &t.store).await.unwrap()
        }
    };
    // The answer itself, against a direct computation.
    let s = StoredArray::new("job/S", ArrayMeta::new(vec![4], vec![4], DType::Float64)).unwrap();
    let got = s.read_block(&t.store, &[0]).await.unwrap();
    let want = (x_values() * 3.0).dot(&w_values()).sum_axis(Axis(0));
    let Block::F64(got) = got else {
        panic!("dtype")
    };
    for (g, w) in got.iter().zip(want.iter()) {
        assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{got} vs {want}");
    }
    (t.objects(), stats)
}

#[tokio::test(flavor = "multi_thread")]
async fn pipelined_batch_writes_the_same_bytes() {
    let (before, s0) = run_in("seq", None).await;
    assert!(
        before.iter().any(|(k, _)| k == "job/M/c/2/0"),
        "{:?}",
        before.iter().map(|o| &o.0).collect::<Vec<_>>()
    );
    for budget in [0, 4096, 1 << 30] {
        let (after, s) = run_in(&format!("pipe{budget}"), Some(budget)).await;
        let keys = |o: &[(String, Vec<u8>)]| o.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(keys(&after), keys(&before), "budget {budget}");
        for ((k, a), (_, b)) in after.iter().zip(&before) {
            assert!(a == b, "budget {budget}: {k} differs");
        }
        assert_eq!(
            (
                s.tasks,
                s.bytes_read,
                s.bytes_written,
                s.requests,
                s.put_requests
            ),
            (
                s0.tasks,
                s0.bytes_read,
                s0.bytes_written,
                s0.requests,
                s0.put_requests
            ),
            "budget {budget}"
        );
        assert_eq!(s.intermediate_bytes_written, s0.intermediate_bytes_written);
        assert!(s.intermediate_bytes_written > 0);
        assert!(s.compute_seconds > 0.0 && s.io_seconds > 0.0, "{s:?}");
        assert!(
            s.compute_seconds + s.io_seconds <= s.wall_seconds * 1.01,
            "{s:?}"
        );
    }
}

/// Four row blocks of X, each scaled into Y (written).
fn scale_all(t: &TempStore, budget: u64) -> nums_layout::Batch {
    let mut b = Builder::new(&t.store);
    let x = b.array("X", vec![16, 6], vec![4, 6], DType::Float64);
    let y = b.array("Y", vec![16, 6], vec![4, 6], DType::Float64);
    for i in 0..4u64 {
        let k = Kernel::Scalar {
            op: BinaryOp::Add,
            value: 1.0.into(),
            scalar_left: false,
        };
        b.task(k, &[(x, &[i, 0])], (y, &[i, 0]), true);
    }
    b.batch.prefetch_budget = budget;
    b.batch
}

async fn write_x4(t: &TempStore) {
    let x = StoredArray::new(
        "job/X",
        ArrayMeta::new(vec![16, 6], vec![4, 6], DType::Float64),
    )
    .unwrap();
    for i in 0..4u64 {
        let b = Block::F64(ArrayD::from_elem(IxDyn(&[4, 6]), i as f64));
        x.write_block(&t.store, &[i, 0], &b).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_and_corrupt_inputs_fail_with_their_key() {
    for budget in [0, 1 << 30] {
        // Missing: block 2 of X, read ahead with a large budget.
        let t = TempStore::new(&format!("missing{budget}"));
        write_x4(&t).await;
        std::fs::remove_file(t.dir.join("job/X/c/2/0")).unwrap();
        let e = nums_function::handle(&scale_all(&t, budget), &t.store)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::MissingBlock, "{e}");
        assert!(e.to_string().contains("job/X/c/2/0"), "{e}");
        // The tasks before it ran and wrote their outputs, as in the sequential run.
        assert!(t.dir.join("job/Y/c/1/0").exists() && !t.dir.join("job/Y/c/2/0").exists());

        // Corrupt: one byte of block 3 flipped.
        let t = TempStore::new(&format!("corrupt{budget}"));
        write_x4(&t).await;
        let p = t.dir.join("job/X/c/3/0");
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 6] ^= 0xff;
        std::fs::write(&p, bytes).unwrap();
        let e = nums_function::handle(&scale_all(&t, budget), &t.store)
            .await
            .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::CorruptBlock, "{e}");
        assert!(e.to_string().contains("job/X/c/3/0"), "{e}");
        assert!(t.dir.join("job/Y/c/2/0").exists());
    }
}

/// A kernel that fails before a missing block's task is the error reported, however far
/// ahead the missing block was read.
#[tokio::test(flavor = "multi_thread")]
async fn an_earlier_kernel_error_comes_first() {
    let t = TempStore::new("order");
    write_x4(&t).await;
    std::fs::remove_file(t.dir.join("job/X/c/3/0")).unwrap();
    let mut b = Builder {
        batch: scale_all(&t, 1 << 30),
    };
    // Task 1 adds blocks whose shapes do not broadcast: (4, 6) + (5,).
    let v = b.array("V", vec![5], vec![5], DType::Float64);
    let va = StoredArray::new("job/V", b.batch.arrays[v as usize].meta.clone()).unwrap();
    va.write_block(
        &t.store,
        &[0],
        &Block::F64(ArrayD::from_elem(IxDyn(&[5]), 1.0)),
    )
    .await
    .unwrap();
    b.batch.tasks[1].kernel = Kernel::Binary { op: BinaryOp::Add };
    b.batch.tasks[1].inputs.push(nums_layout::BlockRef {
        array: v,
        index: vec![0],
    });
    let e = nums_function::handle(&b.batch, &t.store).await.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Kernel, "{e}");
    assert!(e.to_string().contains("job/Y/c/1/0"), "{e}");
}
