//! A sort of ten times `memory_mb` of float64 plans with every invocation within
//! `memory_mb`: the graph is built as a run builds it (the sample, then the partition
//! sizes, each read back before the next build; here made up as the functions would find
//! them for normal data, partitions up to a third off their share), then planned by LSHS.

use std::path::Path;

use nums_cloud::graph::{self, Built, Known, NodeOp};
use nums_cloud::job::Job;
use nums_cloud::plan::{dry_run_prefix, plan_job};
use nums_function::memory::batch_memory;
use nums_layout::{Block, DType};

/// The tests of this file one at a time: one measures the process's peak allocation, which
/// the other's planning (half a million nodes) would raise when run beside it.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// What a stage would read back for node `node` of `g`: a sample's values, or the
/// partition sizes of each block.
fn made_up_values(g: &graph::Graph, node: usize) -> Block {
    let n = &g.nodes[node];
    match &n.op {
        // Several lanes' partition sizes, one after another.
        NodeOp::Concat { xs, axis: 0 } if matches!(g.nodes[xs[0]].op, NodeOp::SortCount { .. }) => {
            let parts: Vec<Block> = xs.iter().map(|&x| made_up_values(g, x)).collect();
            let views: Vec<_> = parts.iter().map(|p| p.to_i64().into_owned()).collect();
            let views: Vec<_> = views.iter().map(|v| v.view()).collect();
            Block::I64(ndarray::concatenate(ndarray::Axis(0), &views).unwrap())
        }
        NodeOp::SortCount { x, .. } => {
            let xm = &g.nodes[*x].meta;
            let (nb, splitters) = (n.meta.shape[0] as usize, n.meta.shape[1] as usize);
            let parts = splitters + 1;
            // Partition k's share of every block, between 2/3 and 4/3 of the even share.
            let weight: Vec<f64> = (0..parts)
                .map(|k| 1.0 + (splitmix(k as u64) % 1000) as f64 / 1000.0 * 0.66 - 0.33)
                .collect();
            let total: f64 = weight.iter().sum();
            let mut counts = Vec::with_capacity(nb * splitters);
            for i in 0..nb {
                let len = xm.block[0].min(xm.shape[0] - i as u64 * xm.block[0]) as f64;
                let mut acc = 0.0;
                for w in &weight[..splitters] {
                    acc += w / total;
                    counts.push((len * acc) as i64);
                }
            }
            Block::I64(ndarray::ArrayD::from_shape_vec(vec![nb, splitters], counts).unwrap())
        }
        _ => {
            assert_eq!(n.meta.dtype, DType::Float64, "a sample of X");
            // One row of samples per lane (several lanes) or the samples of one.
            let shape: Vec<usize> = n.meta.shape.iter().map(|&l| l as usize).collect();
            let len: usize = shape.iter().product();
            // Normal values (Box-Muller).
            let u = |i: u64| (splitmix(i) >> 11) as f64 / (1u64 << 53) as f64 + 1e-12;
            let v: Vec<f64> = (0..len as u64)
                .map(|i| {
                    (-2.0 * u(2 * i).ln()).sqrt() * (std::f64::consts::TAU * u(2 * i + 1)).cos()
                })
                .collect();
            Block::F64(ndarray::ArrayD::from_shape_vec(shape, v).unwrap())
        }
    }
}

/// The job sorting (and argsorting) ten times `memory_mb` of float64, its graph as a run
/// builds it, and its plan.
fn sort_plan(memory_mb: u64) -> (u64, graph::Graph, nums_cloud::sched::Plan) {
    let n = 10 * (memory_mb << 20) / 8;
    let text = format!(
        "[compute]\nmemory_mb = {memory_mb}\nworkers = 4\n[arrays]\n\
         X = {{ random = \"normal\", shape = [{n}], seed = 1 }}\n\
         s = \"sort(X)\"\na = \"argsort(X, descending=True)\"\n\
         [outputs]\ns = \"s.zarr\"\na = \"a.zarr\"\n"
    );
    let job = Job::parse(Path::new("/tmp/nums-sort-plan/job.toml"), &text).unwrap();
    let probes = graph::Probes::default();
    let mut known = Known::default();
    let mut stages = 0;
    let g = loop {
        match graph::build_known(&job, &probes, &known).unwrap() {
            Built::Done(g) => break g,
            Built::NeedMask { .. } => panic!("no mask in this job"),
            Built::NeedValues { graph, node } => {
                stages += 1;
                assert!(
                    stages <= 3,
                    "more stages than the sample and two partitionings"
                );
                known.values.insert(node, made_up_values(&graph, node));
            }
        }
    };
    // One sample (sort and argsort share it), then each sort's partition sizes.
    assert_eq!(stages, 3);
    let merges = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, NodeOp::SortMerge { .. }))
        .count();
    assert_eq!(merges, 2);
    let plan = plan_job(&job, &g, &dry_run_prefix(&job), &probes).unwrap();
    (n, g, plan)
}

#[test]
fn a_sort_of_ten_times_memory_plans_every_invocation_within_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let memory_mb = 128u64;
    let (n, g, plan) = sort_plan(memory_mb);
    let limit = memory_mb << 20;
    assert!(
        plan.max_projected_peak() <= limit,
        "a batch projects {} MiB, over memory_mb = {memory_mb}",
        plan.max_projected_peak() >> 20
    );
    eprintln!(
        "{n} float64 ({} MiB) under memory_mb = {memory_mb}: {} nodes, {} tasks in {} batches, largest projection {} MiB",
        (n * 8) >> 20,
        g.nodes.len(),
        plan.tasks,
        plan.batches.len(),
        plan.max_projected_peak() >> 20
    );
}

/// What a function holds for the batch itself, besides its blocks: the payload as it
/// arrives, the decoded batch, its arrays' stored forms and the pipeline's table of uses.
/// It grows with the tasks (a sample sort's main stage once went out as one invocation of
/// ~39,000 tiny tasks, projected within memory_mb and killed at it), so the projection
/// counts it ([`batch_memory`]) and invocations run at most `MAX_BATCH_TASKS` tasks.
#[test]
fn a_sort_of_ten_times_memory_counts_what_its_batches_hold_besides_blocks() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let memory_mb = 128u64;
    let (_, _, plan) = sort_plan(memory_mb);
    let limit = memory_mb << 20;
    for b in &plan.batches {
        assert!(
            b.num_tasks() <= nums_cloud::sched::MAX_BATCH_TASKS,
            "an invocation of {} tasks",
            b.num_tasks()
        );
        assert!(b.projected_peak <= limit);
    }
    let largest = plan
        .batches
        .iter()
        .max_by_key(|b| b.num_tasks())
        .expect("batches");
    let batch = largest.batch();
    let inputs: u64 = batch.tasks.iter().map(|t| t.inputs.len() as u64).sum();
    let model = batch_memory(batch.tasks.len() as u64, inputs, batch.arrays.len() as u64);
    let payload = serde_json::to_vec(&batch).unwrap();
    drop((plan, batch));
    // Freed memory handed back, so that what follows is measured in new pages.
    // SAFETY: only returns free heap memory to the system.
    unsafe { libc::malloc_trim(0) };
    nums_function::memory::reset_peak();
    let before = nums_function::memory::peak();
    let decoded: nums_layout::batch::Batch = serde_json::from_slice(&payload).unwrap();
    let arrays: Vec<_> = decoded
        .arrays
        .iter()
        .map(|a| nums_layout::StoredArray::new(&a.path, a.meta.clone()).unwrap())
        .collect();
    let mut uses = std::collections::HashMap::new();
    for t in &decoded.tasks {
        for r in &t.inputs {
            *uses.entry(r.clone()).or_insert(0usize) += 1;
        }
    }
    let held = nums_function::memory::peak().saturating_sub(before) + payload.len() as u64;
    std::hint::black_box((&arrays, &uses));
    eprintln!(
        "largest invocation: {} tasks, {inputs} inputs, {} arrays; holds {} KiB besides blocks, modelled {} KiB",
        decoded.tasks.len(),
        decoded.arrays.len(),
        held >> 10,
        model >> 10
    );
    assert!(
        held <= model,
        "the largest invocation ({} tasks) holds {} KiB for its description, the model {} KiB",
        decoded.tasks.len(),
        held >> 10,
        model >> 10
    );
}

/// The graph of `text` as a run builds it (values made up), with the number of stages.
fn staged(text: &str) -> (graph::Graph, usize, Job) {
    let job = Job::parse(Path::new("/tmp/nums-sort-plan/job.toml"), text).unwrap();
    let probes = graph::Probes::default();
    let mut known = Known::default();
    let mut stages = 0;
    loop {
        match graph::build_known(&job, &probes, &known).unwrap() {
            Built::Done(g) => return (g, stages, job),
            Built::NeedMask { .. } => panic!("no mask in this job"),
            Built::NeedValues { graph, node } => {
                stages += 1;
                assert!(stages <= 8, "a stage per lane? node {node}");
                known.values.insert(node, made_up_values(&graph, node));
            }
        }
    }
}

/// The issue's `median(X, axis=0)` of a tall X (20M x 16 at 2 GB), scaled to 128 MB: each
/// of its columns, past what one task sorts (about 0.7M float64), is sample-sorted, the columns' samples in one stage and their
/// partition sizes in another (not two stages a column), every invocation within memory.
#[test]
fn sorts_and_medians_along_axis_0_of_long_columns_plan_within_memory() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let memory_mb = 128u64;
    let rows = 3_000_000u64;
    let text = format!(
        "[compute]\nmemory_mb = {memory_mb}\nworkers = 4\n[arrays]\n\
         X = {{ random = \"normal\", shape = [{rows}, 16], seed = 1 }}\n\
         m = \"median(X, axis=0)\"\ns = \"argsort(X, axis=0)\"\n\
         [outputs]\nm = \"m.zarr\"\ns = \"s.zarr\"\n"
    );
    let (g, stages, job) = staged(&text);
    // The columns' samples (shared by both), then each one's partition sizes.
    assert_eq!(stages, 3);
    let merges = g
        .nodes
        .iter()
        .filter(|n| matches!(n.op, NodeOp::SortMerge { .. }))
        .count();
    assert_eq!(
        merges,
        2 * 16,
        "a sample sort of each column, for each of the two"
    );
    let plan = plan_job(&job, &g, &dry_run_prefix(&job), &graph::Probes::default()).unwrap();
    assert!(
        plan.max_projected_peak() <= memory_mb << 20,
        "a batch projects {} MiB, over memory_mb = {memory_mb}",
        plan.max_projected_peak() >> 20
    );
    let m = &g.nodes[g.named["m"]].meta;
    let s = &g.nodes[g.named["s"]].meta;
    assert_eq!(
        (m.shape.clone(), s.shape.clone()),
        (vec![16], vec![rows, 16])
    );
    assert_eq!(s.dtype, DType::Int64);
}

/// So many lanes that their sample sorts would not fit a plan are refused up front,
/// naming the array and what to do instead.
#[test]
fn too_many_long_lanes_to_sort_are_refused_naming_the_array() {
    let text = "[compute]\nmemory_mb = 128\n[arrays]\n\
         X = { random = \"normal\", shape = [2000000, 200000], seed = 1 }\n\
         big = \"sort(X, axis=0)\"\n[outputs]\nbig = \"big.zarr\"\n";
    let job = Job::parse(Path::new("/tmp/nums-sort-plan/job.toml"), text).unwrap();
    let e = graph::build_known(&job, &graph::Probes::default(), &Known::default())
        .err()
        .expect("refused")
        .to_string();
    assert!(
        e.contains("arrays.big")
            && e.contains("200000 lanes of 2000000 elements")
            && e.contains("a plan may hold")
            && e.contains("give more memory_mb"),
        "{e}"
    );
}
