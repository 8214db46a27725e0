//! The first stage of importing a large CSV file, run by the functions before the job is
//! checked: each task counts the rows of a few pieces of the file (`Kernel::CsvCount`),
//! so that the driver never reads the file through; the probe then merges the counts
//! with its own scan of the first piece (the header) into the same row index a scan of
//! the whole file gives. Small files, and local files the functions cannot reach (the
//! Lambda backend uploads them later), are scanned by the probe alone.

use std::collections::HashMap;

use futures::{StreamExt, TryStreamExt};
use nums_function::csv_index::{CsvIndex, PIECE_ROW};
use nums_layout::batch::{ArrayRef, Batch, BlockRef, CSV_PIECE, Kernel, Task};
use nums_layout::{ArrayMeta, Block, DType, Store, StoredArray};

use crate::backend::Backend;
use crate::graph;
use crate::job::{self, Job, Source};
use crate::sched::PlannedBatch;
use crate::stage::{Observer, Resume, Stages};

/// Files of at least this many pieces are counted by the functions. The driver reads a
/// bucket's pieces 4 at once: below that its scan is one round of reads.
pub(crate) const COUNT_FROM_PIECES: u64 = 4;

/// Most pieces one task counts (64 MiB read).
const PIECES_PER_TASK: u64 = 16;

/// Whether the job's functions read the file at `path` where it is (a local file with the
/// Lambda backend is uploaded first, after the count).
fn reachable(job: &Job, path: &str) -> bool {
    path.starts_with("s3://") || job.compute.backend == job::Backend::Local
}

/// Pieces one count task takes: at most a quarter of `memory_mb` read.
fn pieces_per_task(job: &Job) -> u64 {
    (job.compute.memory_mb * (1 << 20) / 4 / CSV_PIECE).clamp(1, PIECES_PER_TASK)
}

/// Whether the run counts the CSV input at `path` of `size` bytes in the functions.
fn counted_there(job: &Job, path: &str, size: u64) -> bool {
    path.ends_with(".csv") && reachable(job, path) && size.div_ceil(CSV_PIECE) >= COUNT_FROM_PIECES
}

/// What `plan` says of the CSV input at `path` of `size` bytes: the pieces and tasks of
/// its count in the functions when the run counts it there.
pub(crate) fn planned(job: &Job, path: &str, size: u64) -> Option<String> {
    let n = size.div_ceil(CSV_PIECE);
    let tasks = (n.max(1) - 1).div_ceil(pieces_per_task(job));
    counted_there(job, path, size).then(|| {
        format!(
            "the functions count the rows of {path}: {} pieces of {} MiB in {}, \
             the first piece (its header) in the driver (plan scanned the file in the driver)",
            n - 1,
            CSV_PIECE >> 20,
            crate::human::plural(tasks, "task", "tasks")
        )
    })
}

/// The pieces after the first of each large CSV input, counted by the functions in stage
/// `csv-count` (on the run's backend, before the run exists), by the input's path.
pub(crate) async fn count(
    job: &Job,
    backend: &Backend,
    observer: &dyn Observer,
    t0: std::time::Instant,
    io: &std::sync::Arc<nums_layout::IoCounters>,
) -> anyhow::Result<graph::Counted> {
    let mut files = Vec::new();
    // A file loaded by several arrays is counted once.
    let mut seen = std::collections::HashSet::new();
    for def in &job.arrays {
        let Source::Load { path, csv } = &def.source else {
            continue;
        };
        if !path.ends_with(".csv") || !reachable(job, path) || !seen.insert(path) {
            continue;
        }
        // Not counted when every array that loads it reads an unchanged earlier import.
        let loads = job.arrays.iter().filter_map(|d| match &d.source {
            Source::Load { path: p, csv } if p == path => Some((csv, d.dtype)),
            _ => None,
        });
        let mut reused = true;
        for (csv, dtype) in loads {
            reused &= graph::reuse_import(job, path, csv, dtype, io)
                .await
                .is_some();
        }
        if reused {
            continue;
        }
        let (source, key) = graph::split_zarr_location(path, &job.storage);
        // A file that cannot be read is left to the probe, which says why.
        let Ok(s) = Store::open_counted(&source, io) else {
            continue;
        };
        let Ok(Some(size)) = s.head(&key).await else {
            continue;
        };
        if counted_there(job, path, size) {
            files.push((path.clone(), source, key, size, csv.delimiter));
        }
    }
    if files.is_empty() {
        return Ok(Default::default());
    }
    let store = Store::open_counted(&job.storage, io)?;
    let id = format!("count-{}", crate::runs::new_run_id());
    let prefix = crate::runs::run_prefix(&job.name, &id);
    let per_task = pieces_per_task(job);
    let mut batches = Vec::new();
    let mut outputs = Vec::new();
    for (f, (path, source, key, size, delimiter)) in files.iter().enumerate() {
        let n = size.div_ceil(CSV_PIECE);
        let meta = ArrayMeta::new(
            vec![n - 1, PIECE_ROW],
            vec![per_task, PIECE_ROW],
            DType::Int64,
        );
        let array = ArrayRef {
            path: format!("{prefix}/csv{f}"),
            meta: meta.clone(),
            read_only: false,
            sparse: false,
            intermediate: true,
            foreign: None,
        };
        for b in 0..(n - 1).div_ceil(per_task) {
            let i0 = 1 + b * per_task;
            let task = Task {
                kernel: Kernel::CsvCount {
                    source: source.clone(),
                    key: key.clone(),
                    size: *size,
                    piece: CSV_PIECE,
                    pieces: (i0, (i0 + per_task).min(n)),
                    delimiter: *delimiter,
                },
                inputs: vec![],
                output: BlockRef {
                    array: 0,
                    index: vec![b, 0],
                },
                write_output: true,
            };
            let batch = Batch {
                store: job.storage.clone(),
                job_prefix: prefix.clone(),
                arrays: vec![array.clone()],
                tasks: vec![task],
                prefetch_budget: 0,
            };
            batches.push(PlannedBatch::from_batch(batch, vec![]));
        }
        outputs.push((path.clone(), StoredArray::new(&array.path, meta)?));
    }
    let stages = Stages::new(job.engine(), Some(job), &store, backend, observer, t0, &id);
    let tasks = batches.len() as u64;
    let read = async {
        stages
            .run("csv-count", &batches, tasks, Resume::Never)
            .await?;
        let mut counted = HashMap::new();
        for (path, arr) in &outputs {
            // Each block becomes its pieces' indexes as it arrives (the blocks are mostly
            // padding: 48 KiB per piece).
            let per_block: Vec<Vec<(u64, CsvIndex)>> = futures::stream::iter(arr.meta.blocks())
                .map(|idx| {
                    let store = &store;
                    async move {
                        let Block::I64(a) = arr.read_block(store, &idx).await? else {
                            anyhow::bail!("a CSV count of {path} is not int64 (a function bug)");
                        };
                        let a = a.as_standard_layout();
                        let flat = a.as_slice().expect("standard layout");
                        Ok(flat
                            .chunks(PIECE_ROW as usize)
                            .map(CsvIndex::from_piece_row)
                            .collect())
                    }
                })
                .buffered(8)
                .try_collect()
                .await?;
            let pieces: Vec<(u64, CsvIndex)> = per_block.into_iter().flatten().collect();
            tracing::info!(
                "{path}: rows counted by the functions ({} pieces)",
                pieces.len() + 1
            );
            counted.insert(path.clone(), pieces);
        }
        Ok(graph::Counted(counted))
    }
    .await;
    let _ = store.delete_prefix(&prefix).await;
    // A failed invocation's error names the job already.
    read.map_err(|e: anyhow::Error| e.context("counting CSV rows"))
}
