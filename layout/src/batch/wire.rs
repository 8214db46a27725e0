//! The wire format between driver and function: a batch of block tasks, the invocation
//! payload that carries it, and the stats a function measures.

use serde::{Deserialize, Serialize};

use super::kernel::Kernel;
use crate::meta::ArrayMeta;
use crate::store::StoreSpec;

/// An array a batch touches: where it is stored and how it is blocked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrayRef {
    /// Path of the Zarr array, relative to the store root.
    pub path: String,
    /// Shape, block shape and dtype. The function encodes and decodes the array's chunks
    /// as nums-cloud writes them for this metadata ([`crate::StoredArray::new`]), so an
    /// array read in place must be stored that way.
    pub meta: ArrayMeta,
    /// An input the job reads in place (outside its prefix): read only.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub read_only: bool,
    /// Chunks never written are the fill value, as Zarr allows (an array nums-cloud did not
    /// write). Otherwise a missing chunk is an error naming the array, block and key:
    /// nums-cloud writes every block of its arrays.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sparse: bool,
    /// A job intermediate (not an output or an import): written with the store's
    /// intermediate tag, counted apart, removed when the job ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub intermediate: bool,
    /// An input read in place that nums-cloud did not encode, or that lies outside the
    /// job's store: where it is (`path` is relative to that store) and its own metadata,
    /// which says how its chunks are decoded. Read only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub foreign: Option<crate::zarr::Foreign>,
}

/// One block of one of the batch's arrays.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockRef {
    /// Index into [`Batch::arrays`].
    pub array: u32,
    /// The block's position in its array's block grid, one entry per axis
    /// ([`ArrayMeta::grid`]).
    pub index: Vec<u64>,
}

/// One block task: a kernel, its input blocks, the block it produces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// What the task computes; flattened into the task's JSON, so a kernel's fields must
    /// not be named like the task's own.
    #[serde(flatten)]
    pub kernel: Kernel,
    /// The blocks the kernel reads, in the order it documents.
    pub inputs: Vec<BlockRef>,
    /// The block it produces; its shape is that block's in the output array's grid.
    pub output: BlockRef,
    /// Write the output to the store (a block consumed only inside the batch stays in memory).
    #[serde(default = "yes")]
    pub write_output: bool,
}

fn yes() -> bool {
    true
}

/// One invocation's work: tasks in an order where every input is produced earlier in
/// the batch or already stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// The job's store: every array path is relative to its root.
    pub store: StoreSpec,
    /// The function refuses to read or write any array outside this prefix.
    pub job_prefix: String,
    /// The arrays the tasks read and write, indexed by [`BlockRef::array`].
    pub arrays: Vec<ArrayRef>,
    /// The tasks, run in this order.
    pub tasks: Vec<Task>,
    /// Bytes the function may hold beyond what the plan projects for running the tasks
    /// one after the other, to overlap store I/O with compute: blocks read ahead for later
    /// tasks and outputs still being encoded and written (`nums_function::pipeline` says
    /// exactly what counts). The planner sets it to the headroom between the batch's
    /// projected peak and the memory limit. 0: each task's reads start when it is due and
    /// its output is written before the next task runs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub prefetch_budget: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Batch {
    /// Every array the batch writes lies under the job prefix, and every other array is
    /// either there too or a declared read-only input; checked before any I/O.
    pub fn check_confined(&self) -> crate::Result<()> {
        let prefix = format!("{}/", self.job_prefix.trim_matches('/'));
        let written: std::collections::HashSet<u32> =
            self.tasks.iter().map(|t| t.output.array).collect();
        for (i, a) in self.arrays.iter().enumerate() {
            let p = a.path.trim_matches('/');
            // A foreign array (maybe in another store) is only ever read.
            let inside = p.starts_with(&prefix)
                && a.foreign.is_none()
                && !(a.read_only && written.contains(&(i as u32)));
            let readable = a.read_only && !written.contains(&(i as u32)) && !p.is_empty();
            if !(inside || readable) || p.split('/').any(|s| s == ".." || s == ".") {
                return Err(crate::Error::OutsidePrefix {
                    key: a.path.clone(),
                    prefix: self.job_prefix.clone(),
                });
            }
        }
        Ok(())
    }
}

/// The invocation payload. A batch whose JSON would exceed Lambda's 6 MB payload limit is
/// written to the store and travels by key.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Payload {
    /// The batch itself.
    Inline(Batch),
    /// The batch's JSON, written to the store by the driver as an intermediate.
    Stored {
        /// The store that holds it: the batch's own [`Batch::store`].
        store: StoreSpec,
        /// The batch's [`Batch::job_prefix`]; `key` must lie under it, and the batch read
        /// must name the same prefix and store.
        job_prefix: String,
        /// Key of the batch's JSON (`<job_prefix>/_batches/<n>.json`).
        key: String,
    },
}

/// What one invocation measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Invocations these figures add up (1 for one invocation's own).
    pub invocations: u64,
    /// Tasks run.
    pub tasks: u64,
    /// Bytes read from stores: input chunks and the bytes of files imports read.
    pub bytes_read: u64,
    /// Bytes written to stores: chunks and export parts.
    pub bytes_written: u64,
    /// Store requests of every kind the invocation counted
    /// ([`IoCounters::requests`](crate::IoCounters::requests)): GETs, PUTs and others.
    pub requests: u64,
    /// Of `bytes_written`, the bytes of intermediates ([`ArrayRef::intermediate`]).
    pub intermediate_bytes_written: u64,
    /// Of `requests`, the PUTs (priced higher than GETs).
    pub put_requests: u64,
    /// Seconds inside the handler (what Lambda bills).
    pub wall_seconds: f64,
    /// Seconds in block kernels (an invocation runs one kernel at a time).
    pub compute_seconds: f64,
    /// Seconds the kernels waited on the store: for a task's inputs to be read and
    /// decoded, for earlier outputs to be written when there was no room to write them
    /// behind, and for the last writes at the end. Reads and writes that overlap a kernel
    /// are not counted, so `wall_seconds` is about `compute_seconds + io_seconds`.
    pub io_seconds: f64,
    /// High-water mark of the process's resident memory during the invocation.
    pub peak_memory_bytes: u64,
    /// Input blocks the process served from its memory tier (no store read).
    #[serde(default)]
    pub memory_hits: u64,
    /// Their bytes (decoded).
    #[serde(default)]
    pub memory_bytes_read: u64,
    /// The local function process (its endpoint's slot) that ran the invocation; `None`
    /// on Lambda, where an execution environment cannot be addressed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<u32>,
    /// Which of its slot's processes it was (the endpoint numbers each one it starts, a
    /// replacement after the one before: a new one holds nothing in memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_generation: Option<u64>,
}

impl Stats {
    /// Adds another invocation's figures (peak memory is the largest, not the sum).
    pub fn add(&mut self, o: &Stats) {
        self.invocations += o.invocations;
        self.tasks += o.tasks;
        self.bytes_read += o.bytes_read;
        self.bytes_written += o.bytes_written;
        self.requests += o.requests;
        self.put_requests += o.put_requests;
        self.intermediate_bytes_written += o.intermediate_bytes_written;
        self.wall_seconds += o.wall_seconds;
        self.compute_seconds += o.compute_seconds;
        self.io_seconds += o.io_seconds;
        self.peak_memory_bytes = self.peak_memory_bytes.max(o.peak_memory_bytes);
        self.memory_hits += o.memory_hits;
        self.memory_bytes_read += o.memory_bytes_read;
    }
}

/// What a running invocation has done so far: a local function process sends it to its
/// endpoint as it goes (`POST /2018-06-01/runtime/invocation/{id}/progress`, an addition
/// of nums-cloud's local endpoint to the Lambda Runtime API), so that the driver's
/// progress moves before the invocation answers. Lambda has no such channel: there the
/// invocation's [`Stats`] are all the driver hears.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// The batch's [`Batch::job_prefix`]: which computation's stage hears it.
    pub job_prefix: String,
    /// Tasks finished (their kernels run) so far.
    pub tasks: u64,
    /// Store bytes read so far (as [`Stats::bytes_read`] counts them).
    pub bytes_read: u64,
    /// Store bytes written so far (as [`Stats::bytes_written`] counts them).
    pub bytes_written: u64,
}

/// Lambda's synchronous payload limit, each way.
pub const PAYLOAD_LIMIT: usize = 6 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{BinaryOp, DetOutput, LstsqOutput, QrOutput, SvdOutput};
    use crate::meta::DType;
    use crate::scalar::Scalar;

    #[test]
    fn kernel_values_cross_the_wire_exactly() {
        let specials = [
            Scalar::Float(f64::NAN),
            Scalar::Float(f64::INFINITY),
            Scalar::Float(f64::NEG_INFINITY),
            Scalar::Float(-0.0),
            Scalar::Float(0.1),
            Scalar::Int(i64::MIN),
            Scalar::Int(9_007_199_254_740_993),
            Scalar::Bool(true),
        ];
        for &v in &specials {
            for kernel in [
                Kernel::Fill { value: v },
                Kernel::Scalar {
                    op: BinaryOp::Maximum,
                    value: v,
                    scalar_left: true,
                },
                Kernel::Iota {
                    axis: 0,
                    start: v,
                    step: Scalar::Int(3_000_000_000),
                    last: Some(v),
                },
            ] {
                // As a task (the kernel flattened into it), as batches carry it.
                let task = Task {
                    kernel,
                    inputs: vec![],
                    output: BlockRef {
                        array: 0,
                        index: vec![0],
                    },
                    write_output: true,
                };
                let json = serde_json::to_string(&task).unwrap();
                let back: Task = serde_json::from_str(&json).unwrap();
                assert_eq!(back, task, "{json}");
            }
        }
    }

    /// Kernels with a field of their own named like a task's: as a task, both survive.
    #[test]
    fn linalg_kernels_cross_the_wire_as_tasks() {
        for kernel in [
            Kernel::Qr {
                cols: 2,
                output: QrOutput::QProduct { part: 3 },
            },
            Kernel::Lstsq {
                n: 4,
                rcond: 1e-15,
                output: LstsqOutput::Residuals,
            },
            Kernel::Svd {
                output: SvdOutput::Vh,
            },
            Kernel::Det {
                output: DetOutput::Logabsdet,
            },
            Kernel::LuDet {
                w: 64,
                step: 2,
                output: DetOutput::Sign,
            },
            Kernel::LuPanel {
                w: 64,
                apply: Some(1),
                factor: true,
                scale: true,
            },
            Kernel::LuBack {
                w: 64,
                step: 0,
                estimate: true,
            },
        ] {
            let task = Task {
                kernel,
                inputs: vec![],
                output: BlockRef {
                    array: 1,
                    index: vec![2, 0],
                },
                write_output: true,
            };
            let json = serde_json::to_string(&task).unwrap();
            let back: Task = serde_json::from_str(&json).unwrap();
            assert_eq!(back, task, "{json}");
        }
    }

    #[test]
    fn arrays_outside_the_job_prefix_are_refused() {
        let meta = ArrayMeta::new(vec![2], vec![2], DType::Float64);
        let batch = |path: &str, read_only: bool, writes: bool| Batch {
            store: StoreSpec {
                url: "file:///tmp/x/".into(),
                endpoint: None,
            },
            job_prefix: "job".into(),
            arrays: vec![ArrayRef {
                path: path.into(),
                meta: meta.clone(),
                read_only,
                sparse: false,
                intermediate: false,
                foreign: None,
            }],
            tasks: if writes {
                vec![Task {
                    kernel: Kernel::Fill {
                        value: Scalar::Float(0.0),
                    },
                    inputs: vec![],
                    output: BlockRef {
                        array: 0,
                        index: vec![0],
                    },
                    write_output: true,
                }]
            } else {
                vec![]
            },
            prefetch_budget: 0,
        };
        assert!(batch("job/X", false, true).check_confined().is_ok());
        for bad in ["other/X", "job", "jobX/a", "job/../other/X", "/job/./X"] {
            assert!(batch(bad, false, false).check_confined().is_err(), "{bad}");
        }
        // A declared read-only input may lie elsewhere, but is never written.
        assert!(batch("data/X", true, false).check_confined().is_ok());
        assert!(batch("data/X", true, true).check_confined().is_err());
        assert!(batch("job/X", true, true).check_confined().is_err());
        assert!(batch("data/../etc", true, false).check_confined().is_err());
    }
}
