//! The prefetch budget bounds what the pipeline holds beyond the sequential run, measured:
//! the invocation's peak resident memory with a budget stays within the peak with none
//! plus the budget, whatever the budget (up to 1 GiB, more than the batch's blocks). How
//! much of a budget the reads ahead use depends on timing (whether a read gets ahead of
//! the kernel before it, on a busy machine or not): that is measured by the `pipeline`
//! benchmark (`benches/src/pipeline.rs`, its peak MiB per budget), not asserted here.
//! Alone in its test binary: the peak is the whole process's.

mod common;

use common::{Builder, TempStore};
use ndarray::{ArrayD, IxDyn};
use nums_layout::batch::{BinaryOp, Kernel};
use nums_layout::{ArrayMeta, Block, DType, StoredArray};

const ROWS: u64 = 131_072;
const COLS: u64 = 32;
const BLOCKS: u64 = 6;
const MIB: u64 = 1 << 20;

/// Random-looking values that zstd cannot shrink (so a block's encoded bytes are its size).
fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn peak_memory_stays_within_the_budget() {
    nums_function::memory::setup_block_memory(0);
    let t = TempStore::new("memory");
    let meta = ArrayMeta::new(vec![BLOCKS * ROWS, COLS], vec![ROWS, COLS], DType::Float64);
    let x = StoredArray::new("job/X", meta).unwrap();
    for i in 0..BLOCKS {
        let v = noise((ROWS * COLS) as usize, i + 1);
        let b =
            Block::F64(ArrayD::from_shape_vec(IxDyn(&[ROWS as usize, COLS as usize]), v).unwrap());
        x.write_block(&t.store, &[i, 0], &b).await.unwrap();
    }
    let mut b = Builder::new(&t.store);
    let xa = b.array(
        "X",
        vec![BLOCKS * ROWS, COLS],
        vec![ROWS, COLS],
        DType::Float64,
    );
    let ya = b.array(
        "Y",
        vec![BLOCKS * ROWS, COLS],
        vec![ROWS, COLS],
        DType::Float64,
    );
    for i in 0..BLOCKS {
        let k = Kernel::Scalar {
            op: BinaryOp::Mul,
            value: 0.5.into(),
            scalar_left: false,
        };
        b.task(k, &[(xa, &[i, 0])], (ya, &[i, 0]), true);
    }
    let peak = |budget: u64| {
        let mut batch = b.batch.clone();
        batch.prefetch_budget = budget;
        let store = t.store.clone();
        async move {
            let s = nums_function::handle(&batch, &store).await.unwrap();
            assert!(s.peak_memory_bytes > 0, "peak memory is not measured here");
            s.peak_memory_bytes
        }
    };
    let none = peak(0).await;
    // 70 MiB: one output written behind (32 MiB block + its encoding), no read ahead;
    // 160 MiB: reads ahead too; 1 GiB: as many as the timing lets get ahead.
    for budget in [70 * MIB, 160 * MIB, 1 << 30] {
        let p = peak(budget).await;
        assert!(
            p <= none + budget + 16 * MIB,
            "budget {} MiB: peak {} MiB, {} MiB without a budget",
            budget / MIB,
            p / MIB,
            none / MIB
        );
    }
    // And the sequential figure is what it was (nothing was left behind).
    let again = peak(0).await;
    assert!(
        again <= none + 16 * MIB,
        "{} then {} MiB",
        none / MIB,
        again / MIB
    );
}
