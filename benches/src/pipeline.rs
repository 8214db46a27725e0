//! Inside an invocation: one realistic batch run in-process through the function's
//! handler, the sequential way nums-cloud ran it before (zarrs' codec chain, then zstd
//! called directly) against the pipeline (reads ahead, writes behind) at several prefetch
//! budgets, side by side in one run; plus the codec alone on one block.
//!
//!     cargo run --release -p nums-benches --bin pipeline [-- --blocks 8 --rows 262144 --reps 3]
//!
//! The data is X, `blocks` row blocks of `rows` x 32 float64 (64 MiB each by default),
//! uniform random (zstd barely compresses it), in a file store under the temporary
//! folder, deleted at the end. Two batches, each one invocation over all of X:
//! - newton: per row block z = X_i @ w, mu = sigmoid(z), r = mu - y_i, g_i = X_i.T @ r,
//!   H_i = X_i.T @ X_i; then g and H summed over the row blocks (the pieces of a logistic
//!   regression Newton step; small outputs).
//! - scale: per row block Y_i = 2 X_i written to the store (64 MiB each), c_i = column
//!   sums of Y_i; then c summed (elementwise with large outputs, then a reduction).

use std::time::Instant;

use anyhow::Context;
use ndarray::{ArrayD, IxDyn};
use nums_function::Codec;
use nums_layout::batch::{ArrayRef, Batch, BinaryOp, BlockRef, Kernel, ReduceOp, Stats, Task};
use nums_layout::{ArrayMeta, Block, DType, Store, StoreSpec, StoredArray, UnaryOp};

const COLS: u64 = 32;

fn arg<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().position(|a| a == name) {
        Some(i) => args
            .get(i + 1)
            .and_then(|s| s.parse().ok())
            .with_context(|| format!("{name} wants a value")),
        None => Ok(default),
    }
}

/// Uniform random values in [-1, 1) (xorshift), as incompressible as real float64 noise.
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
        })
        .collect()
}

/// Builds batches over arrays declared as they are used.
struct Builder {
    arrays: Vec<ArrayRef>,
    tasks: Vec<Task>,
}

impl Builder {
    fn array(&mut self, name: &str, shape: Vec<u64>, block: Vec<u64>) -> u32 {
        self.arrays.push(ArrayRef {
            path: format!("job/{name}"),
            meta: ArrayMeta::new(shape, block, DType::Float64),
            read_only: false,
            sparse: false,
            intermediate: false,
            foreign: None,
        });
        (self.arrays.len() - 1) as u32
    }

    fn task(
        &mut self,
        kernel: Kernel,
        inputs: &[(u32, Vec<u64>)],
        out: (u32, Vec<u64>),
        write: bool,
    ) {
        let r = |(array, index): &(u32, Vec<u64>)| BlockRef {
            array: *array,
            index: index.clone(),
        };
        self.tasks.push(Task {
            kernel,
            inputs: inputs.iter().map(r).collect(),
            output: r(&out),
            write_output: write,
        });
    }

    fn batch(self, spec: &StoreSpec) -> Batch {
        Batch {
            store: spec.clone(),
            job_prefix: "job".into(),
            arrays: self.arrays,
            tasks: self.tasks,
            prefetch_budget: 0,
        }
    }
}

fn einsum(subscripts: &str) -> Kernel {
    Kernel::Einsum {
        subscripts: subscripts.into(),
        operands: 2,
    }
}

fn sum(axes: Vec<usize>) -> Kernel {
    Kernel::Reduce {
        op: ReduceOp::Sum,
        axes,
    }
}

fn newton(spec: &StoreSpec, blocks: u64, rows: u64) -> Batch {
    let mut b = Builder {
        arrays: vec![],
        tasks: vec![],
    };
    let n = blocks * rows;
    let x = b.array("X", vec![n, COLS], vec![rows, COLS]);
    let y = b.array("y", vec![n], vec![rows]);
    let w = b.array("w", vec![COLS], vec![COLS]);
    let z = b.array("z", vec![n], vec![rows]);
    let mu = b.array("mu", vec![n], vec![rows]);
    let r = b.array("r", vec![n], vec![rows]);
    let gp = b.array("gp", vec![blocks * COLS], vec![COLS]);
    let hp = b.array("hp", vec![blocks * COLS, COLS], vec![COLS, COLS]);
    let g = b.array("g", vec![COLS], vec![COLS]);
    let h = b.array("H", vec![COLS, COLS], vec![COLS, COLS]);
    for i in 0..blocks {
        let (xi, row) = ((x, vec![i, 0]), vec![i]);
        b.task(
            einsum("ij,j->i"),
            &[xi.clone(), (w, vec![0])],
            (z, row.clone()),
            false,
        );
        let sigmoid = Kernel::Unary {
            op: UnaryOp::Sigmoid,
        };
        b.task(sigmoid, &[(z, row.clone())], (mu, row.clone()), false);
        let sub = Kernel::Binary { op: BinaryOp::Sub };
        b.task(
            sub,
            &[(mu, row.clone()), (y, row.clone())],
            (r, row.clone()),
            false,
        );
        b.task(
            einsum("ij,i->j"),
            &[xi.clone(), (r, row.clone())],
            (gp, row.clone()),
            false,
        );
        b.task(
            einsum("ij,ik->jk"),
            &[xi.clone(), xi],
            (hp, vec![i, 0]),
            false,
        );
    }
    let parts = |a: u32, two: bool| -> Vec<(u32, Vec<u64>)> {
        (0..blocks)
            .map(|i| (a, if two { vec![i, 0] } else { vec![i] }))
            .collect()
    };
    b.task(sum(vec![]), &parts(gp, false), (g, vec![0]), true);
    b.task(sum(vec![]), &parts(hp, true), (h, vec![0, 0]), true);
    b.batch(spec)
}

fn scale(spec: &StoreSpec, blocks: u64, rows: u64) -> Batch {
    let mut b = Builder {
        arrays: vec![],
        tasks: vec![],
    };
    let n = blocks * rows;
    let x = b.array("X", vec![n, COLS], vec![rows, COLS]);
    let yy = b.array("Y", vec![n, COLS], vec![rows, COLS]);
    let cp = b.array("cp", vec![blocks * COLS], vec![COLS]);
    let c = b.array("c", vec![COLS], vec![COLS]);
    for i in 0..blocks {
        let times2 = Kernel::Scalar {
            op: BinaryOp::Mul,
            value: 2.0.into(),
            scalar_left: false,
        };
        b.task(times2, &[(x, vec![i, 0])], (yy, vec![i, 0]), true);
        b.task(sum(vec![0]), &[(yy, vec![i, 0])], (cp, vec![i]), false);
    }
    let parts: Vec<(u32, Vec<u64>)> = (0..blocks).map(|i| (cp, vec![i])).collect();
    b.task(sum(vec![]), &parts, (c, vec![0]), true);
    b.batch(spec)
}

/// Writes the batch's stored inputs (X, y, w) once.
async fn write_inputs(store: &Store, blocks: u64, rows: u64) -> anyhow::Result<()> {
    let n = blocks * rows;
    let x = StoredArray::new(
        "job/X",
        ArrayMeta::new(vec![n, COLS], vec![rows, COLS], DType::Float64),
    )?;
    let y = StoredArray::new("job/y", ArrayMeta::new(vec![n], vec![rows], DType::Float64))?;
    let w = StoredArray::new(
        "job/w",
        ArrayMeta::new(vec![COLS], vec![COLS], DType::Float64),
    )?;
    for i in 0..blocks {
        let v = data((rows * COLS) as usize, i + 1);
        let b = Block::F64(ArrayD::from_shape_vec(
            IxDyn(&[rows as usize, COLS as usize]),
            v,
        )?);
        x.write_block(store, &[i, 0], &b).await?;
        let v: Vec<f64> = data(rows as usize, 1000 + i)
            .iter()
            .map(|v| (*v > 0.0) as u8 as f64)
            .collect();
        y.write_block(
            store,
            &[i],
            &Block::F64(ArrayD::from_shape_vec(IxDyn(&[rows as usize]), v)?),
        )
        .await?;
    }
    let v: Vec<f64> = data(COLS as usize, 7).iter().map(|v| v * 0.1).collect();
    w.write_block(
        store,
        &[0],
        &Block::F64(ArrayD::from_shape_vec(IxDyn(&[COLS as usize]), v)?),
    )
    .await?;
    Ok(())
}

#[derive(Clone, Copy)]
enum Way {
    Sequential(Codec),
    Pipeline(u64),
}

impl Way {
    fn name(self) -> String {
        match self {
            Way::Sequential(Codec::ZarrsChain) => "sequential, zarrs codec chain (main)".into(),
            Way::Sequential(Codec::Direct) => "sequential, direct zstd".into(),
            Way::Pipeline(b) => format!("pipeline, budget {} MiB", b >> 20),
        }
    }
}

async fn run(batch: &Batch, store: &Store, way: Way) -> anyhow::Result<Stats> {
    Ok(match way {
        Way::Sequential(codec) => nums_function::sequential::handle(batch, store, codec).await?,
        Way::Pipeline(budget) => {
            let b = Batch {
                prefetch_budget: budget,
                ..batch.clone()
            };
            nums_function::handle(&b, store).await?
        }
    })
}

/// Best of `reps` milliseconds of `f`.
fn best_ms(reps: usize, mut f: impl FnMut()) -> f64 {
    (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

fn codec(rows: u64) -> anyhow::Result<()> {
    let meta = ArrayMeta::new(vec![rows, COLS], vec![rows, COLS], DType::Float64);
    let direct = StoredArray::new("c/X", meta)?;
    let chain = direct.clone().with_codec_chain();
    let v = data((rows * COLS) as usize, 99);
    let b = Block::F64(ArrayD::from_shape_vec(
        IxDyn(&[rows as usize, COLS as usize]),
        v,
    )?);
    let mib = b.nbytes() as f64 / (1 << 20) as f64;
    let bytes = direct.encode(&[0, 0], &b)?;
    anyhow::ensure!(
        bytes == chain.encode(&[0, 0], &b)?,
        "the two encoders disagree"
    );
    println!("\ncodec on one {mib:.0} MiB block (best of 5 ms, one core each):");
    println!("| step | zarrs codec chain | direct zstd | ratio |\n|---|---|---|---|");
    for (step, f) in [("encode", true), ("decode", false)] {
        let time = |a: &StoredArray| {
            best_ms(5, || {
                if f {
                    std::hint::black_box(a.encode(&[0, 0], &b).unwrap());
                } else {
                    std::hint::black_box(a.decode(&[0, 0], Some(bytes.clone())).unwrap());
                }
            })
        };
        let (c, d) = (time(&chain), time(&direct));
        println!("| {step} | {c:.1} | {d:.1} | {:.2}x |", c / d);
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    nums_function::memory::setup_block_memory(0);
    let blocks: u64 = arg("--blocks", 8)?;
    let rows: u64 = arg("--rows", 262_144)?;
    let reps: usize = arg("--reps", 3)?;
    let tmp = std::env::temp_dir().join(format!("nums-bench-pipeline-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let spec = StoreSpec {
        url: url::Url::from_directory_path(&tmp)
            .expect("abs")
            .to_string(),
        endpoint: None,
    };
    let store = Store::open(&spec)?;
    let result = async {
        write_inputs(&store, blocks, rows).await?;
        let mib = (rows * COLS * 8) >> 20;
        println!(
            "X: {blocks} row blocks of {rows} x {COLS} float64 ({mib} MiB each), file store, \
             one invocation per batch in-process, best wall of {reps}"
        );
        let ways = [
            Way::Sequential(Codec::ZarrsChain),
            Way::Sequential(Codec::Direct),
            Way::Pipeline(0),
            Way::Pipeline(256 << 20),
            Way::Pipeline(1 << 30),
        ];
        for (name, batch) in [
            ("newton", newton(&spec, blocks, rows)),
            ("scale", scale(&spec, blocks, rows)),
        ] {
            println!("\n{name}:");
            println!(
                "| way | wall s | io-wait s | compute s | peak MiB | wall vs main |\n|---|---|---|---|---|---|"
            );
            let mut base = None;
            let mut outputs = None;
            for way in ways {
                let mut best: Option<Stats> = None;
                for _ in 0..reps {
                    let s = run(&batch, &store, way).await?;
                    if best.as_ref().is_none_or(|b| s.wall_seconds < b.wall_seconds) {
                        best = Some(s);
                    }
                }
                let s = best.expect("reps > 0");
                // Every way must write the same bytes.
                let written = read_outputs(&store, &batch).await?;
                match &outputs {
                    None => outputs = Some(written),
                    Some(o) => anyhow::ensure!(*o == written, "{}: other bytes written", way.name()),
                }
                let base = *base.get_or_insert(s.wall_seconds);
                println!(
                    "| {} | {:.2} | {:.2} | {:.2} | {} | {:.2}x |",
                    way.name(),
                    s.wall_seconds,
                    s.io_seconds,
                    s.compute_seconds,
                    s.peak_memory_bytes >> 20,
                    base / s.wall_seconds
                );
            }
        }
        codec(rows)
    }
    .await;
    std::fs::remove_dir_all(&tmp)?;
    result
}

/// The bytes of every block the batch writes.
async fn read_outputs(store: &Store, batch: &Batch) -> anyhow::Result<Vec<bytes::Bytes>> {
    let mut out = vec![];
    for t in batch.tasks.iter().filter(|t| t.write_output) {
        let a = &batch.arrays[t.output.array as usize];
        let key = nums_layout::zarr::chunk_key(&a.path, &t.output.index);
        out.push(store.get(&key).await?);
    }
    Ok(out)
}
