//! The cost model behind `plan`'s projections and a run's "projected" figure: how long
//! each planned invocation takes (start-up, store I/O, kernels), when it runs (free workers, its
//! dependencies, how fast the platform starts new workers) and what that costs.
//!
//! Two calibrations, one per backend: `local` (function processes on the project's 2-core
//! machine kind, file store; rates fitted to `--stats` of the peers workloads, BENCHMARKS.md)
//! and `lambda` (AWS Lambda and S3; published figures, stated in BENCHMARKS.md).

use std::cmp::Reverse;
use std::collections::{BTreeSet, BinaryHeap};

use nums_layout::batch::{BinaryOp, Kernel, QrOutput, SvdOutput, UnaryOp};

use crate::invocation::Invocation;
use crate::job::Backend;

/// One function's rates on one platform.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    pub name: &'static str,
    /// Seconds from sending a warm invocation to its reply, beyond its work.
    pub invoke_s: f64,
    /// Extra seconds of a worker's first invocation (a new process or execution
    /// environment: start, binary load, first connections).
    pub cold_start_s: f64,
    /// Workers the platform starts at once, then new ones per second (Lambda: 1,000 per
    /// 10 s per function).
    pub burst: usize,
    pub scale_per_s: f64,
    /// Block bytes per second one function reads from and writes to the store, decoding
    /// and encoding (zstd) included.
    pub read_bps: f64,
    pub write_bps: f64,
    /// Block bytes per second of a batch's first read ([`BatchWork::first_read`]): nothing
    /// runs beside it, and its blocks are decoded into pages the process has not touched.
    /// The reads after it overlap kernels (`read_bps` is fitted to the wait they leave).
    pub first_read_bps: f64,
    /// Seconds of a block read from the process's memory tier: its version checked
    /// against the store (a file's metadata; a HEAD on S3), nothing read or decoded.
    pub hit_s: f64,
    /// Kernel rates of one function: floating-point operations per second of BLAS and
    /// LAPACK kernels, and block bytes per second through every kernel (inputs and output).
    pub flops: f64,
    pub stream_bps: f64,
    /// Elements per second of the costly element functions (exp, log, trigonometry, random
    /// draws: [`TaskWork::evals`]), beyond streaming them.
    pub evals_per_s: f64,
    /// Bytes per second of a task's first touch of the output it makes (the kernel's own
    /// rates are fitted to blocks already in cache; a new block's pages fault in first).
    pub touch_bps: f64,
    /// Bytes of CSV text per second one function reads from its source and parses into a
    /// block ([`TaskWork::parsed`]): no other term sees a text import's work.
    pub parse_bps: f64,
    /// Seconds of every task beyond its work (decoding its batch entry, small blocks'
    /// fixed costs).
    pub task_s: f64,
    /// How far its projections are known to be off (what `plan` prints beside them).
    pub error_band: &'static str,
}

/// Function processes on this machine kind with the file store (2 cores), fitted by
/// `benches/calibrate.py` to the wall times of the peers workloads' main stages, two
/// fits' passes (Newton, L-BFGS; 2M x 32 in blocks of 250,000 rows), a solve, a CSV's
/// fit and the quick-start, at the peers' base size and at 4x (BENCHMARKS.md). A batch's
/// first read is apart (`first_read_bps`): nothing overlaps it, so one rate for all reads
/// over-projected large reads (4x: +42% to +101%) to fit the small jobs' first ones. The processes start with the run, before its main stage: no cold
/// start in the stage's projection. `invoke_s` holds the driver's turn-around between
/// dependent invocations as well as the send; small tasks cost `task_s` and their output's
/// first touch, not the 5 ms per task that the peers' 8 MB blocks alone had suggested.
pub(crate) const LOCAL: CostModel = CostModel {
    name: "local",
    invoke_s: 0.0285,
    cold_start_s: 0.0,
    burst: usize::MAX,
    scale_per_s: f64::INFINITY,
    read_bps: 3.07e9,
    first_read_bps: 1.05e9,
    // A stat of the block's file and a lookup.
    hit_s: 2e-5,
    write_bps: 6.1e8,
    flops: 60e9,
    stream_bps: 1.4e11,
    evals_per_s: 9.2e7,
    touch_bps: 3.0e10,
    // `ImportCsv`: the text read from the page cache, split, floats parsed, the block
    // made; fitted to benches/csv_fit.py's imports (BENCHMARKS.md).
    parse_bps: 5.0e8,
    task_s: 0.0013,
    error_band: "20% under to 24% over the measured stages of the peers workloads, of fits' passes and of a solve, at two sizes (0.1-10.7 s; medians of three runs); up to 3.3x over on stages of 0.02-0.03 s (a 250,000-row CSV's fit)",
};

/// Function processes on this machine kind with an S3 server on the same machine (Garage
/// on 127.0.0.1), fitted as `LOCAL` is (`benches/calibrate.py --store garage`): reads of
/// about 270 MB/s per function (HTTP and copies, where the file store maps files), and
/// kernels slower than `LOCAL`'s because the server shares the two cores.
pub(crate) const LOCAL_S3: CostModel = CostModel {
    name: "local-s3",
    invoke_s: 0.0218,
    cold_start_s: 0.0,
    burst: usize::MAX,
    scale_per_s: f64::INFINITY,
    read_bps: 273e6,
    // Not told apart on this store: its reads stream through HTTP at one rate.
    first_read_bps: 273e6,
    // A HEAD to the server on this machine.
    hit_s: 1e-3,
    // The calibration jobs write too little to fit it: the earlier fit's rate.
    write_bps: 1.9e9,
    flops: 40e9,
    stream_bps: 21e9,
    evals_per_s: 1.48e8,
    touch_bps: 1.0e11,
    // The text comes through the server at about its block read rate, then is parsed at
    // `LOCAL`'s rate: 1 / (1 / 273e6 + 1 / 5.0e8).
    parse_bps: 1.77e8,
    task_s: 0.0017,
    error_band: "6% under to 27% over the measured stages of the peers workloads and of fits' passes on Garage (0.15-2.3 s; medians of three runs)",
};

/// AWS Lambda with S3, at 1,769 MB or more (one vCPU): S3 reads and writes of about 90
/// and 70 MB/s per function (numpywren, Cubed's and AWS's measurements), a cold start of
/// a static Rust binary of 0.3 s, 20 ms per warm invoke, 1,000 environments at once then
/// 100 per second, one core's BLAS.
pub(crate) const LAMBDA: CostModel = CostModel {
    name: "lambda",
    invoke_s: 0.02,
    cold_start_s: 0.3,
    burst: 1000,
    scale_per_s: 100.0,
    read_bps: 90e6,
    first_read_bps: 90e6,
    // A HEAD to S3 (no plan counts on it: Lambda's environments cannot be addressed).
    hit_s: 0.015,
    write_bps: 70e6,
    flops: 20e9,
    stream_bps: 1.0e9,
    // One core's rate of element functions, as measured on this machine's functions.
    evals_per_s: 9.2e7,
    touch_bps: f64::INFINITY,
    // The text read from S3 at its read rate, then parsed at `LOCAL`'s rate (one core):
    // 1 / (1 / 90e6 + 1 / 5.0e8).
    parse_bps: 7.6e7,
    task_s: 0.005,
    error_band: "from published Lambda and S3 rates, not measured by this project",
};

impl CostModel {
    /// The model of a job's backend and store: local function processes with a local
    /// folder or with an S3 server, or Lambda.
    pub fn for_job(job: &crate::job::Job) -> CostModel {
        CostModel::of(job.compute.backend, &job.storage.url)
    }

    /// The model of a configuration's backend and store.
    pub(crate) fn for_config(cfg: &crate::config::EngineConfig) -> CostModel {
        CostModel::of(cfg.compute.backend, &cfg.storage.url)
    }

    fn of(backend: Backend, url: &str) -> CostModel {
        match backend {
            Backend::Local if url.starts_with("file:") => LOCAL,
            Backend::Local => LOCAL_S3,
            Backend::Lambda => LAMBDA,
        }
    }

    /// Seconds of one invocation: the invoke overhead, then its store I/O and its kernels.
    /// The functions measure store I/O as the time a task waits for its blocks (read-ahead
    /// hides the rest behind kernels), and the rates are fitted to that, so the two add.
    pub fn batch_seconds(&self, b: &BatchWork) -> f64 {
        self.invoke_s + self.io_seconds(b) + self.compute_seconds(b)
    }

    /// Store I/O seconds of a batch (waiting for reads and writes).
    pub fn io_seconds(&self, b: &BatchWork) -> f64 {
        let first = b.first_read.min(b.bytes_in);
        first as f64 / self.first_read_bps
            + (b.bytes_in - first) as f64 / self.read_bps
            + b.memory_hits as f64 * self.hit_s
            + b.bytes_out as f64 / self.write_bps
    }

    /// Kernel seconds of a batch.
    pub fn compute_seconds(&self, b: &BatchWork) -> f64 {
        b.flops / self.flops
            + b.streamed as f64 / self.stream_bps
            + b.evals as f64 / self.evals_per_s
            + b.made as f64 / self.touch_bps
            + b.parsed as f64 / self.parse_bps
            + b.tasks as f64 * self.task_s
    }
}

/// What one planned invocation does, as the model needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchWork {
    pub tasks: u64,
    pub bytes_in: u64,
    /// Of `bytes_in`, what the batch's first task that reads reads: fetched before any
    /// kernel runs.
    pub first_read: u64,
    /// Stored blocks it reads that its process holds in memory (not in `bytes_in`): each
    /// costs a version check ([`CostModel::hit_s`]), no transfer and no decoding.
    pub memory_hits: u64,
    pub bytes_out: u64,
    /// Floating-point operations of its BLAS and LAPACK kernels.
    pub flops: f64,
    /// Bytes its kernels read and write in memory.
    pub streamed: u64,
    /// Bytes of the blocks its tasks make (each task's output).
    pub made: u64,
    /// Elements its tasks compute with costly element functions.
    pub evals: u64,
    /// Bytes of CSV text its tasks read and parse.
    pub parsed: u64,
}

/// A task's work, as the cost model counts it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct TaskWork {
    /// Floating-point operations of BLAS and LAPACK kernels (the usual LAPACK counts).
    pub flops: f64,
    /// Bytes it reads and writes in memory: its inputs and its output, once.
    pub streamed: u64,
    /// Output elements of a costly element function (exp, log, trigonometry, powers,
    /// random draws), each tens of nanoseconds where an add is one.
    pub evals: u64,
    /// Bytes of CSV text it reads from the file and parses (a CSV import's byte range).
    pub parsed: u64,
}

/// A task's work. Every kernel streams its inputs and its output once; contractions and
/// linear algebra count operations too, and element functions count their evaluations.
/// `shapes` gives the input blocks' shapes (asked only for the kernels that count
/// operations), `shapes(n_inputs)` the output block's.
pub(crate) fn task_work(
    kernel: &Kernel,
    inputs_bytes: u64,
    output_bytes: u64,
    shapes: impl Fn(usize) -> Vec<usize>,
    n_inputs: usize,
) -> TaskWork {
    let streamed = inputs_bytes + output_bytes;
    let (streamed, evals) = match kernel {
        Kernel::GlmSums {
            cols,
            intercept,
            hessian,
            ..
        } => {
            let (_, elements, scaled) =
                glm_terms(*cols, *intercept, *hessian, n_inputs, &|i| dims(&shapes, i));
            // Its exp and log1p per element, in registers, cost about what one element
            // function costs a kernel of its own (which allocates and streams too).
            (
                streamed + 16 * elements as u64 + 16 * scaled as u64,
                elements as u64,
            )
        }
        k if costly_elements(k) => (streamed, shapes(n_inputs).iter().product::<usize>() as u64),
        _ => (streamed, 0),
    };
    let parsed = match kernel {
        Kernel::ImportCsv { start, end, .. } => end.saturating_sub(*start),
        _ => 0,
    };
    TaskWork {
        flops: flops(kernel, &shapes, n_inputs),
        streamed,
        evals,
        parsed,
    }
}

/// Rows and columns of block `i`'s matrix: its last two axes (1 where it has fewer; blocked
/// LU's panels and step versions lead with an axis of length 1).
fn dims(shapes: &impl Fn(usize) -> Vec<usize>, i: usize) -> (f64, f64) {
    let s = shapes(i);
    let s = &s[s.len().saturating_sub(2)..];
    let m = s.first().copied().unwrap_or(1) as f64;
    let n = s.get(1).copied().unwrap_or(1) as f64;
    (m, n)
}

/// Kernels whose every output element costs a transcendental function or a random draw.
fn costly_elements(kernel: &Kernel) -> bool {
    use UnaryOp as U;
    match kernel {
        // A four-step FFT's twiddle: a sine and cosine per element.
        Kernel::Random { .. }
        | Kernel::Fft {
            twiddle: Some(_), ..
        } => true,
        Kernel::Unary { op } => matches!(
            op,
            U::Exp
                | U::Expm1
                | U::Log
                | U::Log1p
                | U::Log2
                | U::Log10
                | U::Sin
                | U::Cos
                | U::Tan
                | U::Tanh
                | U::Sigmoid
                | U::Angle
                | U::Sinh
                | U::Cosh
                | U::Asin
                | U::Acos
                | U::Atan
                | U::Asinh
                | U::Acosh
                | U::Atanh
                | U::Cbrt
                | U::Exp2
        ),
        Kernel::Binary { op } | Kernel::Scalar { op, .. } => matches!(
            op,
            BinaryOp::Pow | BinaryOp::Atan2 | BinaryOp::Hypot | BinaryOp::LogAddExp
        ),
        _ => false,
    }
}

/// Floating-point operations of a task's BLAS and LAPACK kernel (0 for the others).
fn flops(kernel: &Kernel, shapes: &impl Fn(usize) -> Vec<usize>, n_inputs: usize) -> f64 {
    let output = || shapes(n_inputs);
    let dims = |i: usize| dims(shapes, i);
    match kernel {
        Kernel::Einsum {
            subscripts,
            operands,
        } => einsum_flops(subscripts, *operands, n_inputs, shapes),
        Kernel::Qr { cols, output: out } => {
            // The stacked matrix: rows of its first grid column, width of its first row.
            let m: f64 = (0..n_inputs)
                .step_by((*cols).max(1))
                .map(|i| dims(i).0)
                .sum();
            let n: f64 = (0..(*cols).min(n_inputs)).map(|i| dims(i).1).sum();
            let qr = 2.0 * m * n * n - 2.0 * n * n * n / 3.0;
            match out {
                QrOutput::R => qr,
                QrOutput::Q { .. } | QrOutput::QProduct { .. } => 2.0 * qr,
            }
        }
        Kernel::Lstsq { .. } => {
            let (m, _) = dims(0);
            12.0 * m * m * m
        }
        Kernel::Svd { output: out } => {
            let (m, n) = dims(0);
            let (big, small) = (m.max(n), m.min(n));
            match out {
                SvdOutput::Values => 4.0 * big * small * small,
                _ => 4.0 * big * small * small + 8.0 * small * small * small,
            }
        }
        Kernel::Cholesky => dims(0).0.powi(3) / 3.0,
        // The update (syrk on the diagonal, gemm below), then potrf or trsm.
        Kernel::CholeskyBlock { diagonal } => {
            let (m, n) = dims(0);
            let k: f64 = (1..n_inputs - usize::from(!diagonal))
                .step_by(if *diagonal { 1 } else { 2 })
                .map(|i| dims(i).1)
                .sum();
            if *diagonal {
                n * n * k + n * n * n / 3.0
            } else {
                2.0 * m * n * k + m * n * n
            }
        }
        Kernel::TriangularSolve { .. } => {
            let (t, _) = dims(0);
            let (m, n) = dims(1);
            t * m * n
        }
        // C (m x n) minus A_k B_k: each product is 2 m n k, and A_k holds m k elements.
        Kernel::SubtractProducts { .. } => {
            let n = output().get(1).copied().unwrap_or(1) as f64;
            (1..n_inputs)
                .step_by(2)
                .map(|i| {
                    let (a0, a1) = dims(i);
                    2.0 * n * a0 * a1
                })
                .sum()
        }
        // C (n x n) minus A_k A_k^T: half of 2 n n k.
        Kernel::SubtractGram { .. } => {
            let n = output().first().copied().unwrap_or(1) as f64;
            (1..n_inputs)
                .map(|i| {
                    let (a0, a1) = dims(i);
                    n * a0 * a1
                })
                .sum()
        }
        Kernel::LuSolve => {
            let (n, _) = dims(0);
            let (_, k) = dims(1);
            2.0 * n * n * n / 3.0 + 2.0 * n * n * k
        }
        Kernel::Inverse => 2.0 * dims(0).0.powi(3),
        Kernel::Det { .. } => 2.0 * dims(0).0.powi(3) / 3.0,
        // Blocked LU: with F_k (n + 2 x w_k), the trsm of row block k and the gemm below
        // it; then getrf of the rows from the next row block down.
        Kernel::LuPanel {
            w,
            apply,
            factor,
            scale,
        } => {
            // Q is the last input but A's row magnitudes (or its row blocks, up to there).
            let c = dims(n_inputs - 1 - *scale as usize).1;
            let n = match apply {
                Some(_) => dims(0).0 - 2.0,
                None => (0..n_inputs - *scale as usize).map(|i| dims(i).0).sum(),
            };
            let mut f = 0.0;
            if let Some(k) = apply {
                let (r, wk) = ((k * w) as f64, dims(0).1);
                f += wk * wk * c + 2.0 * (n - r - wk).max(0.0) * wk * c;
            }
            if *factor {
                let r1 = apply.map_or(0, |k| (k + 1) * w) as f64;
                let m = (n - r1).max(c);
                f += m * c * c - c * c * c / 3.0;
            }
            f
        }
        // The trsm of row block k, the gemm of the rows above it (in the solution's tasks,
        // of the condition probe's columns too).
        Kernel::LuBack { w, step, .. } => {
            let wk = dims(0).1;
            let c = dims(1).1 + if n_inputs > 2 { dims(2).1 } else { 0.0 };
            wk * wk * c + 2.0 * (step * w) as f64 * wk * c
        }
        Kernel::GlmSums {
            cols,
            intercept,
            hessian,
            ..
        } => glm_terms(*cols, *intercept, *hessian, n_inputs, &dims).0,
        _ => 0.0,
    }
}

/// The fused GLM sums' work, each term (X's blocks of m rows, y, W of d x k, b): two
/// products of 2 m d k (z = X W, then X^T r), and the m k elements of z and r, each swept
/// in and out once (16 bytes), with one exp and one log1p each; with `hessian`, the
/// syrk of the m x p rows scaled by sqrt(s), those m p elements written and read once.
/// The syrk is counted as gemm's 2 m p², not its own m p²: on pieces of 33 columns it
/// takes about gemm's time (a 250,000 x 32 block: 15-18 ms without the Hessian, 29-32
/// ms with it, release build, one thread). Returns the operations, the elements of z and
/// of the scaled rows.
fn glm_terms(
    cols: usize,
    intercept: bool,
    hessian: bool,
    n_inputs: usize,
    dims: &impl Fn(usize) -> (f64, f64),
) -> (f64, f64, f64) {
    let arity = cols + 2 + usize::from(intercept);
    let (mut flops, mut elements, mut scaled) = (0.0, 0.0, 0.0);
    for t in (0..n_inputs / arity).map(|t| t * arity) {
        let (m, _) = dims(t);
        let (d, k) = dims(t + cols + 1);
        flops += 4.0 * m * d * k;
        elements += m * k;
        if hessian {
            let p = d + f64::from(u8::from(intercept));
            // A multinomial pass's k columns are its classes: a syrk of each class's
            // block, then one of all k p columns.
            let (blocks, copies) = if k > 1.0 {
                (k + k * k, 2.0 * k)
            } else {
                (1.0, 1.0)
            };
            flops += 2.0 * m * p * p * blocks;
            scaled += m * p * copies;
        }
    }
    (flops, elements, scaled)
}

/// Multiply-adds of each term's contraction, counted as 2 operations each: twice the
/// product of every index's extent (no contraction order is assumed; with three or more
/// operands this is an upper bound).
fn einsum_flops(
    subscripts: &str,
    operands: usize,
    n_inputs: usize,
    shapes: &impl Fn(usize) -> Vec<usize>,
) -> f64 {
    let lhs = subscripts.split("->").next().unwrap_or("");
    let subs: Vec<&str> = lhs.split(',').collect();
    let mut total = 0.0;
    for term in 0..n_inputs / operands.max(1) {
        let mut extent = [0usize; 128];
        for (k, s) in subs.iter().enumerate().take(operands) {
            let shape = shapes(term * operands + k);
            for (c, &d) in s.bytes().filter(u8::is_ascii_alphabetic).zip(&shape) {
                extent[c as usize] = extent[c as usize].max(d);
            }
        }
        total += 2.0
            * extent
                .iter()
                .filter(|&&e| e > 0)
                .map(|&e| e as f64)
                .product::<f64>();
    }
    total
}

/// A plan's projection: wall time, GB-seconds, dollars, and each invocation's place in time.
#[derive(Debug, Clone)]
pub struct Projection {
    pub model: CostModel,
    pub wall_seconds: f64,
    pub gb_seconds: f64,
    pub usd: f64,
    pub timeline: Vec<Invocation>,
}

/// One planned invocation as [`project`] takes it: its work, the batches it waits for, its
/// projected peak memory and the slot the scheduler planned it for.
pub(crate) type Planned<'a> = (BatchWork, &'a [usize], u64, usize);

/// Projects batches (with the batches each waits for) onto `workers` workers: a batch is
/// sent, in plan order, once its dependencies are done and a worker is free, as the driver
/// sends them; each worker's first invocation pays the cold start and waits for the
/// platform to start it. A batch runs in its planned slot when that worker is free and no
/// worse off than the lowest-numbered free one (so that the figures number slots as the
/// plan does, and the times are those of any free worker).
pub(crate) fn project(
    model: CostModel,
    workers: usize,
    memory_mb: u64,
    batches: &[Planned<'_>],
    gets: u64,
    puts: u64,
) -> Projection {
    let n = batches.len();
    let workers = workers.max(1);
    let mut waiting: Vec<usize> = batches.iter().map(|(_, d, _, _)| d.len()).collect();
    let mut dependents: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (b, (_, deps, _, _)) in batches.iter().enumerate() {
        for &d in deps.iter() {
            dependents[d].push(b as u32);
        }
    }
    // Ready batches by plan order; running ones by end time; free workers by number.
    let mut ready: BinaryHeap<Reverse<usize>> =
        (0..n).filter(|&b| waiting[b] == 0).map(Reverse).collect();
    let mut running: BinaryHeap<Reverse<(Time, usize, usize)>> = BinaryHeap::new();
    let mut free: BTreeSet<usize> = (0..workers.min(n)).collect();
    let mut started = vec![false; workers.min(n)];
    let mut timeline = Vec::with_capacity(n);
    let (mut now, mut busy) = (0.0f64, 0.0f64);
    loop {
        while let (Some(&Reverse(b)), Some(&lowest)) = (ready.peek(), free.first()) {
            ready.pop();
            let (work, _, peak, planned) = batches[b];
            // The planned worker stands in for the lowest free one when the two are alike:
            // both started, or both yet to start within the burst.
            let alike = |w: usize| {
                started[w] == started[lowest]
                    && (started[w] || (w < model.burst && lowest < model.burst))
            };
            let w = if free.contains(&planned) && alike(planned) {
                planned
            } else {
                lowest
            };
            free.remove(&w);
            let mut start = now;
            let mut secs = model.batch_seconds(&work);
            if !started[w] {
                started[w] = true;
                if w >= model.burst {
                    start = start.max((w - model.burst + 1) as f64 / model.scale_per_s);
                }
                secs += model.cold_start_s;
            }
            busy += secs;
            let end = start + secs;
            timeline.push(Invocation {
                stage: "projected".into(),
                batch: b,
                slot: w,
                planned_slot: planned,
                start,
                end,
                tasks: work.tasks,
                bytes_read: work.bytes_in,
                bytes_written: work.bytes_out,
                function_seconds: secs - model.invoke_s,
                compute_seconds: model.compute_seconds(&work),
                io_seconds: model.io_seconds(&work),
                peak_memory_bytes: peak,
                projected_peak_memory_bytes: peak,
                projected_seconds: secs,
                attempt: 1,
                backup: false,
                status: "ok".into(),
                error: None,
            });
            running.push(Reverse((Time(end), w, b)));
        }
        let Some(Reverse((Time(end), w, b))) = running.pop() else {
            break;
        };
        now = end;
        free.insert(w);
        for &d in &dependents[b] {
            waiting[d as usize] -= 1;
            if waiting[d as usize] == 0 {
                ready.push(Reverse(d as usize));
            }
        }
    }
    let gb_seconds = busy * memory_mb as f64 / 1024.0;
    let usd = crate::invocation::usd(gb_seconds, n as u64, gets, puts);
    Projection {
        model,
        wall_seconds: now,
        gb_seconds,
        usd,
        timeline,
    }
}

/// Seconds, ordered (they are never NaN).
#[derive(Debug, Clone, Copy)]
struct Time(f64);
impl PartialEq for Time {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Time {}
impl PartialOrd for Time {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Time {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_backend_and_store_kind_has_its_model() {
        let model = |compute: &str, storage: &str| {
            let text =
                format!("name = \"j\"\n{storage}[compute]\n{compute}[arrays]\nx = \"arange(4)\"\n");
            let job = crate::job::Job::parse(std::path::Path::new("/tmp/j.toml"), &text);
            CostModel::for_job(&job.unwrap()).name
        };
        let s3 = "[storage]\nurl = \"s3://b/p\"\nendpoint = \"http://127.0.0.1:3900\"\n";
        assert_eq!(model("", ""), "local");
        assert_eq!(model("", s3), "local-s3");
        assert_eq!(model("backend = \"lambda\"\n", s3), "lambda");
    }

    fn work(bytes_in: u64, flops: f64) -> BatchWork {
        BatchWork {
            tasks: 1,
            bytes_in,
            first_read: 0,
            memory_hits: 0,
            bytes_out: 0,
            flops,
            streamed: 0,
            made: 0,
            evals: 0,
            parsed: 0,
        }
    }

    #[test]
    fn a_csv_import_costs_its_text() {
        // A quarter of benches/csv_fit.py's CSV: 250,000 rows of 21 fields, 134 MB of text
        // parsed into a 42 MB block, which a quiet function makes in about 0.3 s.
        let k = Kernel::ImportCsv {
            source: nums_layout::StoreSpec {
                url: "file:///data".into(),
                endpoint: None,
            },
            key: "d.csv".into(),
            start: 1_000,
            end: 1_000 + 133_750_000,
            line: 1,
            skip: 0,
            columns: 21,
            usecols: (0..21).collect(),
            delimiter: b',',
            dtypes: vec![],
        };
        let out = 250_000 * 21 * 8;
        let w = task_work(&k, 0, out, |_| vec![250_000, 21], 0);
        assert_eq!(w.parsed, 133_750_000);
        let b = BatchWork {
            tasks: 1,
            streamed: w.streamed,
            made: out,
            parsed: w.parsed,
            ..Default::default()
        };
        let s = LOCAL.compute_seconds(&b);
        assert!((0.2..0.6).contains(&s), "{s} s");
    }

    #[test]
    fn matmul_flops_are_2mnk() {
        let shapes = |i: usize| match i {
            0 => vec![100, 30],
            1 => vec![30, 7],
            _ => vec![100, 7],
        };
        let k = Kernel::Einsum {
            subscripts: "ij,jk->ik".into(),
            operands: 2,
        };
        assert_eq!(
            task_work(&k, 0, 0, shapes, 2).flops,
            2.0 * 100.0 * 30.0 * 7.0
        );
        // Two terms: twice the work.
        assert_eq!(
            task_work(&k, 0, 0, shapes_two_terms, 4).flops,
            4.0 * 100.0 * 30.0 * 7.0
        );
        fn shapes_two_terms(i: usize) -> Vec<usize> {
            if i.is_multiple_of(2) {
                vec![100, 30]
            } else {
                vec![30, 7]
            }
        }
    }

    /// A blocked LU step's flops come from its blocks' matrix axes: panels and the
    /// right-hand side's versions are [1, rows, cols] blocks, not 1 x rows matrices.
    #[test]
    fn blocked_lu_steps_count_their_panels_flops() {
        let (n, w) = (8192usize, 1024usize);
        // Step 2 of panel 5: F_1 and the panel after step 1, both [1, n + 2, w].
        let shapes = |_: usize| vec![1, n + 2, w];
        let k = Kernel::LuPanel {
            w,
            apply: Some(1),
            factor: false,
            scale: false,
        };
        let (nf, wf) = (n as f64, w as f64);
        let want = wf * wf * wf + 2.0 * (nf - 2.0 * wf) * wf * wf;
        assert_eq!(task_work(&k, 0, 0, shapes, 2).flops, want);
    }

    #[test]
    fn a_chain_waits_and_independent_batches_share_the_workers() {
        let m = CostModel {
            invoke_s: 0.0,
            cold_start_s: 0.0,
            read_bps: 1.0,
            task_s: 0.0,
            ..LOCAL
        };
        let none: &[usize] = &[];
        // Three one-second batches on two workers: two at once, then the third.
        let three = [
            (work(1, 0.0), none, 0, 0),
            (work(1, 0.0), none, 0, 0),
            (work(1, 0.0), none, 0, 0),
        ];
        assert_eq!(project(m, 2, 1024, &three, 0, 0).wall_seconds, 2.0);
        // A chain runs one after another whatever the workers.
        let (d0, d1): (&[usize], &[usize]) = (&[0], &[1]);
        let chain = [
            (work(1, 0.0), none, 0, 0),
            (work(2, 0.0), d0, 0, 0),
            (work(1, 0.0), d1, 0, 0),
        ];
        let p = project(m, 8, 2048, &chain, 0, 0);
        assert_eq!(p.wall_seconds, 4.0);
        assert_eq!(p.gb_seconds, 8.0);
        // Past the burst, new workers start at the platform's rate.
        let slow = CostModel {
            burst: 1,
            scale_per_s: 0.5,
            ..m
        };
        assert_eq!(project(slow, 2, 1024, &three, 0, 0).wall_seconds, 3.0);
    }

    #[test]
    fn batches_run_in_the_slots_the_plan_gives_them() {
        let m = CostModel {
            invoke_s: 0.0,
            read_bps: 1.0,
            task_s: 0.0,
            ..LOCAL
        };
        // As the quick-start's plan: #0 in slot 0 ends after #1 in slot 1; #2 (slot 1)
        // and #3 (slot 0) wait for both.
        let (none, both): (&[usize], &[usize]) = (&[], &[0, 1]);
        let plan = [
            (work(3, 0.0), none, 0, 0),
            (work(2, 0.0), none, 0, 1),
            (work(1, 0.0), both, 0, 1),
            (work(1, 0.0), both, 0, 0),
        ];
        let p = project(m, 2, 1024, &plan, 0, 0);
        for i in &p.timeline {
            assert_eq!(
                (i.batch, i.slot),
                (i.batch, plan[i.batch].3),
                "{:?}",
                p.timeline
            );
        }
        assert_eq!(p.wall_seconds, 4.0);
        // A slot busy when its batch is ready: the batch takes a free one.
        let plan = [(work(3, 0.0), none, 0, 0), (work(1, 0.0), none, 0, 0)];
        let p = project(m, 2, 1024, &plan, 0, 0);
        assert_eq!(p.timeline[1].slot, 1);
        assert_eq!(p.timeline[1].planned_slot, 0);
        assert_eq!(p.wall_seconds, 3.0);
    }

    #[test]
    fn a_batch_is_invoke_io_and_compute() {
        let m = CostModel {
            invoke_s: 0.5,
            read_bps: 2.0,
            first_read_bps: 0.5,
            write_bps: 1.0,
            flops: 4.0,
            stream_bps: 8.0,
            task_s: 0.25,
            ..LOCAL
        };
        let b = BatchWork {
            tasks: 2,
            bytes_in: 4,
            // Its first task's read: nothing runs beside it.
            first_read: 1,
            memory_hits: 0,
            bytes_out: 1,
            flops: 8.0,
            streamed: 8,
            made: 4,
            evals: 6,
            parsed: 12,
        };
        let m = CostModel {
            touch_bps: 16.0,
            evals_per_s: 4.0,
            parse_bps: 3.0,
            ..m
        };
        assert_eq!(
            m.batch_seconds(&b),
            0.5 + (2.0 + 1.5 + 1.0) + (2.0 + 1.0 + 1.5 + 0.25 + 4.0 + 0.5)
        );
    }
}
