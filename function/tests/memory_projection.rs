//! The model the driver plans with ([`nums_function::memory::task_peak`]) against the peak
//! resident memory a task really takes, measured: an upper bound for tasks of many small
//! inputs, of a few large ones, of many mapped ones and of an edge block far smaller than
//! its chunk, and a close one where a task reads many blocks (each read holds its encoded
//! bytes only while it decodes, and at most `IO_CONCURRENCY` reads are in flight). Alone
//! in its test binary, with the functions' allocator: the peak is the whole process's.

mod common;

use common::{Builder, TempStore};
use ndarray::{ArrayD, IxDyn};
use nums_function::memory::{BlockAllocator, TaskBlocks, batch_memory, task_peak};
use nums_layout::batch::{BinaryOp, BlockRef, Kernel, ReduceOp};
use nums_layout::{ArrayMeta, Block, DType, StoredArray};

#[global_allocator]
static ALLOC: BlockAllocator = BlockAllocator;

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

/// Writes `blocks` row blocks of `rows` x `cols` float64 noise as array `name`.
async fn write_array(t: &TempStore, name: &str, blocks: u64, rows: u64, cols: u64) {
    let meta = ArrayMeta::new(vec![blocks * rows, cols], vec![rows, cols], DType::Float64);
    let x = StoredArray::new(&format!("job/{name}"), meta).unwrap();
    for i in 0..blocks {
        let v = noise((rows * cols) as usize, i + 1 + 1000 * name.len() as u64);
        let b =
            Block::F64(ArrayD::from_shape_vec(IxDyn(&[rows as usize, cols as usize]), v).unwrap());
        x.write_block(&t.store, &[i, 0], &b).await.unwrap();
    }
}

/// One task's batch: its measured peak (no prefetch budget: the run the projection
/// models) and its projection (the task alone, with its batch's description).
async fn measure(t: &TempStore, b: &Builder) -> (u64, u64) {
    let batch = b.batch.clone();
    let s = nums_function::handle(&batch, &t.store).await.unwrap();
    assert!(s.peak_memory_bytes > 0, "peak memory is not measured here");
    // As the function process does after each invocation.
    nums_function::memory::release_kept_blocks();
    let task = &batch.tasks[0];
    let meta = |r: &BlockRef| &batch.arrays[r.array as usize].meta;
    let size = |r: &BlockRef| meta(r).block_nbytes(&r.index);
    let chunk = |r: &BlockRef| meta(r).max_block_nbytes();
    let t = TaskBlocks {
        fetched: task.inputs.iter().map(size).sum(),
        reads: task.inputs.len() as u64,
        fetched_chunks: task.inputs.iter().map(chunk).sum(),
        largest_chunk: task.inputs.iter().map(chunk).max().unwrap_or(0),
        max_in: task.inputs.iter().map(size).max().unwrap_or(0),
        out: size(&task.output),
        out_chunk: chunk(&task.output),
        work: 0,
    };
    let projected =
        task_peak(&t) + batch_memory(1, task.inputs.len() as u64, batch.arrays.len() as u64);
    (s.peak_memory_bytes, projected)
}

#[tokio::test(flavor = "multi_thread")]
async fn projection_bounds_the_measured_peak_closely() {
    nums_function::memory::setup_block_memory(1 << 30);
    let t = TempStore::new("projection");
    let mut report = Vec::new();
    // Anonymous memory only: the program's own pages (file-backed) grow as code first runs.
    let anon = || {
        let s = std::fs::read_to_string("/proc/self/status").unwrap();
        let kib: u64 = s
            .lines()
            .find_map(|l| l.strip_prefix("RssAnon:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("RssAnon");
        kib << 10
    };

    // Many small inputs: the sum of 2,000 blocks of 128 KiB (250 MiB) in one task.
    write_array(&t, "S", 2000, 512, 32).await;
    let mut b = Builder::new(&t.store);
    let s = b.array("S", vec![2000 * 512, 32], vec![512, 32], DType::Float64);
    let out = b.array("s", vec![32], vec![32], DType::Float64);
    let ins: Vec<(u32, Vec<u64>)> = (0..2000).map(|i| (s, vec![i, 0])).collect();
    let ins: Vec<(u32, &[u64])> = ins.iter().map(|(a, i)| (*a, i.as_slice())).collect();
    let sum = Kernel::Reduce {
        op: ReduceOp::Sum,
        axes: vec![0],
    };
    b.task(sum.clone(), &ins, (out, &[0]), true);
    let before = anon();
    let many_small = measure(&t, &b).await;
    report.push(("2,000 x 128 KiB, sum", many_small));
    // The heap those blocks came from is handed back once the invocation is done, so
    // that the next invocation's peak (measured from the resident size it starts at)
    // does not start from it: 42-68 MiB more stayed, past the base the projection counts;
    // 8-11 MiB stay now (the blocking pool's idle threads, ~120 of them).
    let after = anon();
    eprintln!(
        "anonymous resident {} MiB before, {} MiB after",
        before / MIB,
        after / MIB
    );
    assert!(
        after <= before + 16 * MIB,
        "anonymous resident {} MiB after the invocation, {} MiB before",
        after / MIB,
        before / MIB
    );

    // Many mapped inputs (files of 1 MiB or more are mapped, not read): 40 x 2 MiB.
    write_array(&t, "M", 40, 8192, 32).await;
    let mut b = Builder::new(&t.store);
    let m = b.array("M", vec![40 * 8192, 32], vec![8192, 32], DType::Float64);
    let out = b.array("m", vec![32], vec![32], DType::Float64);
    let ins: Vec<(u32, Vec<u64>)> = (0..40).map(|i| (m, vec![i, 0])).collect();
    let ins: Vec<(u32, &[u64])> = ins.iter().map(|(a, i)| (*a, i.as_slice())).collect();
    b.task(sum, &ins, (out, &[0]), true);
    let many_mapped = measure(&t, &b).await;
    report.push(("40 x 2 MiB, sum", many_mapped));

    // A few large inputs: two 64 MiB blocks added.
    write_array(&t, "A", 1, 262_144, 32).await;
    write_array(&t, "B", 1, 262_144, 32).await;
    let mut b = Builder::new(&t.store);
    let shape = vec![262_144, 32];
    let a = b.array("A", shape.clone(), shape.clone(), DType::Float64);
    let bb = b.array("B", shape.clone(), shape.clone(), DType::Float64);
    let c = b.array("C", shape.clone(), shape.clone(), DType::Float64);
    b.task(
        Kernel::Binary { op: BinaryOp::Add },
        &[(a, &[0, 0]), (bb, &[0, 0])],
        (c, &[0, 0]),
        true,
    );
    let few_large = measure(&t, &b).await;
    report.push(("2 x 64 MiB, add", few_large));

    // An edge block far smaller than its chunk: the last row of an array in 64 MiB
    // chunks, decoded as its whole chunk and padded to one to be encoded.
    {
        let meta = ArrayMeta::new(vec![262_145, 32], vec![262_144, 32], DType::Float64);
        let x = StoredArray::new("job/E", meta).unwrap();
        let b = Block::F64(ArrayD::from_shape_vec(IxDyn(&[1, 32]), noise(32, 9)).unwrap());
        x.write_block(&t.store, &[1, 0], &b).await.unwrap();
    }
    let mut b = Builder::new(&t.store);
    let shape = vec![262_145, 32];
    let e = b.array("E", shape.clone(), vec![262_144, 32], DType::Float64);
    let f = b.array("F", shape, vec![262_144, 32], DType::Float64);
    let half = Kernel::Scalar {
        op: BinaryOp::Mul,
        value: 0.5.into(),
        scalar_left: false,
    };
    b.task(half, &[(e, &[1, 0])], (f, &[1, 0]), true);
    let edge = measure(&t, &b).await;
    report.push(("the 1-row edge block of 64 MiB chunks, halved", edge));

    for (what, (peak, projected)) in &report {
        eprintln!(
            "{what}: measured {:.1} MiB, projected {:.1} MiB ({:.2}x)",
            *peak as f64 / MIB as f64,
            *projected as f64 / MIB as f64,
            *projected as f64 / *peak as f64
        );
    }
    for (what, (peak, projected)) in &report {
        assert!(
            peak <= projected,
            "{what}: measured {} MiB over the projected {} MiB",
            peak / MIB,
            projected / MIB
        );
    }
    // Encoded bytes are held only while a read is in flight: the projection of the
    // 2,000-input sum is its fetched bytes, not three times them.
    let (peak, projected) = many_small;
    assert!(
        projected as f64 <= 1.5 * peak as f64,
        "2,000 x 128 KiB: projected {} MiB for a measured {} MiB",
        projected / MIB,
        peak / MIB
    );
}
