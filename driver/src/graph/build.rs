//! Building the graph from a job: names resolved in any order, expressions evaluated to
//! nodes, every shape and dtype checked before anything runs.
//!
//! Sizes are bounded as nodes are made: at most 2^50 elements per array (as in the job
//! file), [`MAX_BLOCKS_PER_ARRAY`] blocks per array and [`MAX_BLOCKS_PER_JOB`] in all.

use super::*;

#[derive(Debug, Clone)]
pub(super) enum Val {
    /// A Python number: a bool, an exact int64 or a float; weak in promotion (NEP 50).
    Num(Scalar),
    /// A NumPy scalar: its value (exact in its dtype) and its dtype. What NumPy's function
    /// of numbers alone returns (`sqrt(2)` is a float64), and what a Python caller's
    /// `np.int32(-1)` is. Strong in promotion, as a 0-d array is; a number wherever a
    /// number is wanted (an axis, a size, an index: [`Builder::eval`] gives it as one).
    NpScalar(Scalar, DType),
    Arr(NodeId),
    Tuple(Vec<Val>),
    /// NumPy's named tuple (a factorization's result): `.Q`, `.R` or `[0]`, `[1]`.
    Fields(Vec<(&'static str, Val)>),
    Str(String),
    None,
}

pub(super) struct Builder<'a> {
    pub(super) job: &'a Job,
    /// What the job's inputs hold (read before building: building does no I/O).
    pub(super) probes: &'a Probes,
    pub(super) g: Graph,
    /// Positions selected by boolean masks computed so far, by mask node.
    pub(super) masks: &'a HashMap<NodeId, Vec<u64>>,
    /// The first mask whose values are not known yet (its selection assumed all true).
    pub(super) need: Option<NodeId>,
    /// Values of small nodes computed so far (a sample sort's samples and partition
    /// sizes, a selection's counts per block), by node.
    pub(super) values: &'a HashMap<NodeId, Block>,
    /// The first such node whose values are not known yet (an assumption stands in).
    pub(super) need_values: Option<NodeId>,
    pub(super) defs: HashMap<&'a str, &'a ArrayDef>,
    /// Names being resolved, for cycle reports.
    pub(super) stack: Vec<String>,
    /// Blocks of all nodes so far.
    pub(super) blocks: u64,
    /// The first size limit a new node broke (see [`Builder::add`]).
    pub(super) too_big: Option<String>,
    /// TSQR trees made so far, by their operands: a factorization is made once.
    pub(super) tsqr_memo: HashMap<Vec<NodeId>, funcs::TsqrTree>,
    /// Blocked LU factorizations made so far (their panels node), by operand.
    pub(super) lu_memo: HashMap<NodeId, funcs::LuNodes>,
    /// Sample sorts' samples made so far (the sample node and its positions), by operand
    /// and axis: a sort and an argsort of one array share them.
    pub(super) sort_memo: HashMap<(NodeId, usize), funcs::SortSamples>,
    /// The per-block true counts of each mask selected with so far (a selection's values
    /// and their positions share one, computed once).
    pub(super) counts_memo: HashMap<NodeId, NodeId>,
    /// Nodes the names `$0`, `$1`, ... stand for (an expression of the Rust API, whose
    /// operands are nodes already in the graph); empty for a job.
    pub(super) bound: &'a [NodeId],
    /// The block length that default blocks take along an axis of each length
    /// ([`shared_splits`]); empty for the Rust API's graph.
    pub(super) splits: HashMap<u64, u64>,
}

/// The most blocks of all arrays of a job (intermediates included): what one plan holds.
/// Elementwise chains count once per operation, so the planning-scale job of a
/// million-block X (`1 / (1 + exp(-(X @ w)))`, then `X.T @ mu`) has about six million.
pub const MAX_BLOCKS_PER_JOB: u64 = 16_000_000;

/// The longest axis a boolean mask or an index list may select along: its positions are
/// held by the driver (8 bytes each: 128 MiB).
pub const MAX_SELECTION: u64 = 1 << 24;

/// A block shape for `shape` with at most `max` blocks, as close to `block` as that
/// allows: the axes with the most blocks grow first.
pub fn block_for(shape: &[u64], block: &[u64], max: u64) -> Vec<u64> {
    let mut b: Vec<u64> = block
        .iter()
        .zip(shape)
        .map(|(&b, &s)| b.clamp(1, s.max(1)))
        .collect();
    let grid = |b: &[u64]| -> Vec<u64> {
        shape
            .iter()
            .zip(b)
            .map(|(&s, &b)| s.div_ceil(b).max(1))
            .collect()
    };
    let mut order: Vec<usize> = (0..shape.len()).collect();
    order.sort_by_key(|&d| std::cmp::Reverse(grid(&b)[d]));
    for d in order {
        let g = grid(&b);
        let others = g
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != d)
            .fold(1u64, |a, (_, &n)| a.saturating_mul(n));
        if others.saturating_mul(g[d]) <= max {
            break;
        }
        // As many blocks along d as the other axes leave room for (at least one).
        let along = (max / others).max(1);
        b[d] = shape[d].div_ceil(along).max(b[d]);
    }
    b
}

/// The block length that default blocks take along an axis of each length, so that the
/// arrays a job uses together share their partitions (NumS's load-balanced layout): X
/// (2M x 32) and y (2M) in the same row blocks, A and B of `A @ B` (4096²) in the same
/// blocks along the contracted axis. For each length that is the first axis of a source
/// array: the row block of a source whose blocks are fixed (given by `block`, or a Zarr
/// array read in place), else the least of the sources' own default row blocks (the
/// widest rows' need, so that every block stays within the default's size). Default
/// blocks take it along the first axis and, for a 2-D array not read from a file, the
/// second ([`Builder::default_meta`]); an array's own default is never exceeded.
fn shared_splits(job: &Job, probes: &Probes) -> HashMap<u64, u64> {
    let c = &job.compute;
    let (mut fixed, mut own) = (HashMap::<u64, u64>::new(), HashMap::<u64, u64>::new());
    for a in &job.arrays {
        let (shape, dtype, stored) = match &a.source {
            Source::Random { dist, shape, .. } => {
                let natural = match dist {
                    RandomDist::Integers { .. } => DType::Int64,
                    _ => DType::Float64,
                };
                (shape.clone(), a.dtype.unwrap_or(natural), None)
            }
            Source::Full { shape, .. } => (shape.clone(), a.dtype.unwrap_or(DType::Float64), None),
            Source::Load { .. } => match probes.0.get(&a.name) {
                Some(p) => {
                    let (dtype, stored) = match p {
                        Probe::Npy { dtype, .. }
                        | Probe::Parquet { dtype, .. }
                        | Probe::Csv { dtype, .. } => (*dtype, None),
                        Probe::Zarr { meta, in_place, .. } => {
                            (meta.dtype, in_place.as_ref().map(|_| meta.block.clone()))
                        }
                    };
                    (p.shape().to_vec(), a.dtype.unwrap_or(dtype), stored)
                }
                None => continue,
            },
            _ => continue,
        };
        let Some(&rows) = shape.first() else { continue };
        match a.block.clone().or(stored) {
            Some(b) => {
                let r = b.first().copied().unwrap_or(rows).max(1);
                fixed
                    .entry(rows)
                    .and_modify(|x| *x = (*x).min(r))
                    .or_insert(r);
            }
            None => {
                let r = default_block(&shape, dtype, c.workers, c.memory_mb)[0];
                own.entry(rows)
                    .and_modify(|x| *x = (*x).min(r))
                    .or_insert(r);
            }
        }
    }
    own.extend(fixed);
    own
}

/// Builds and checks the graph of a job: unknown names, cycles, shapes and dtypes. A
/// boolean mask is assumed to select everything (the largest shape: what `check` and
/// `plan` show).
pub fn build(job: &Job, probes: &Probes) -> Result<Graph, JobError> {
    match build_staged(job, probes, &HashMap::new())? {
        Built::Done(g) | Built::NeedMask { graph: g, .. } | Built::NeedValues { graph: g, .. } => {
            Ok(g)
        }
    }
}

/// What the run has computed of the values that shapes and blocks depend on, before the
/// main stage: the positions each boolean mask selects, and the values of small nodes (a
/// sample sort's samples and partition sizes, a selection's counts per block).
#[derive(Debug, Clone, Default)]
pub struct Known {
    pub masks: HashMap<NodeId, Vec<u64>>,
    pub values: HashMap<NodeId, Block>,
}

/// Like [`build`], with the selections of the masks computed so far.
pub fn build_staged(
    job: &Job,
    probes: &Probes,
    masks: &HashMap<NodeId, Vec<u64>>,
) -> Result<Built, JobError> {
    build_known(
        job,
        probes,
        &Known {
            masks: masks.clone(),
            values: HashMap::new(),
        },
    )
}

/// Like [`build`], with what the run has computed so far ([`Known`]): the first value the
/// graph still waits for (a mask's or a node's, whichever comes first) is in the answer.
pub fn build_known(job: &Job, probes: &Probes, known: &Known) -> Result<Built, JobError> {
    let masks = &known.masks;
    let mut b = Builder {
        job,
        probes,
        masks,
        need: None,
        values: &known.values,
        need_values: None,
        g: Graph::default(),
        defs: job.arrays.iter().map(|a| (a.name.as_str(), a)).collect(),
        stack: Vec::new(),
        blocks: 0,
        too_big: None,
        tsqr_memo: HashMap::new(),
        lu_memo: HashMap::new(),
        sort_memo: HashMap::new(),
        counts_memo: HashMap::new(),
        bound: &[],
        splits: shared_splits(job, probes),
    };
    for a in &job.arrays {
        if let Some(why) = reserved_name(&a.name) {
            return Err(job.err(
                a.line,
                format!("arrays.{}", a.name),
                format!(
                    "{:?} cannot name an array: it is {why}; choose another name",
                    a.name
                ),
            ));
        }
    }
    for a in dependency_order(job)? {
        if let Err(e) = b.resolve(a) {
            // With one value known and another still assumed, shapes that combine them
            // can clash for now: compute the pending one first.
            let started = !masks.is_empty() || !known.values.is_empty();
            if let (true, Ok(need)) = (started, pending(b.need, b.need_values, b.g)) {
                return Ok(need);
            }
            return Err(e);
        }
    }
    let (b_need, b_values) = (b.need, b.need_values);
    let mut g = b.g;
    for o in &job.outputs {
        let id = g.named[&o.name];
        g.nodes[id].persist = true;
        let ndim = g.nodes[id].meta.ndim();
        let kind = match o.target {
            crate::job::Target::Csv(_) => "a .csv",
            crate::job::Target::Parquet(_) => "a .parquet",
            _ => "",
        };
        if !kind.is_empty() && !(1..=2).contains(&ndim) {
            return Err(job.err(
                o.line,
                format!("outputs.{}", o.name),
                format!(
                    "{} has shape {} ({ndim}-D); {kind} file holds a 1-D or 2-D array: write a .npy or Zarr output",
                    o.name,
                    shape_str(&g.nodes[id].meta.shape)
                ),
            ));
        }
        let dtype = g.nodes[id].meta.dtype;
        if matches!(o.target, crate::job::Target::Parquet(_)) && dtype.is_complex() {
            return Err(job.err(
                o.line,
                format!("outputs.{}", o.name),
                format!(
                    "{} is {dtype}, and Parquet has no complex type: write a .npy, .csv or Zarr output (or its real and imag parts)",
                    o.name
                ),
            ));
        }
    }
    for n in &mut g.nodes {
        n.persist |= n.op.is_import();
    }
    Ok(pending(b_need, b_values, g).unwrap_or_else(Built::Done))
}

/// The first value `g` waits for: a mask's or a node's, the earlier node first (a later
/// one may be computed from it); `Err(g)` when none.
fn pending(mask: Option<NodeId>, values: Option<NodeId>, g: Graph) -> Result<Built, Graph> {
    match (mask, values) {
        (Some(m), Some(v)) if v < m => Ok(Built::NeedValues { graph: g, node: v }),
        (Some(mask), _) => Ok(Built::NeedMask { graph: g, mask }),
        (None, Some(node)) => Ok(Built::NeedValues { graph: g, node }),
        (None, None) => Err(g),
    }
}

/// Why `name` cannot name an array (a reserved word of the expression language); `None`:
/// free to use. A function's name is free: a call `sum(...)` is the function and a bare
/// `sum` the array, so a function the language gains breaks no job file.
pub fn reserved_name(name: &str) -> Option<String> {
    crate::expr::reserved_word(name).map(str::to_string)
}

/// The arrays in an order that resolves every array's names before it (depth first from
/// each array in file order, as evaluation meets the names), found without recursion: a
/// chain of thousands of arrays each naming the next then never nests `resolve` calls.
/// A cycle is reported here, at the array met again, with its path; unknown names and bad
/// expressions are left for `resolve` to report.
fn dependency_order(job: &Job) -> Result<Vec<&ArrayDef>, JobError> {
    let index: HashMap<&str, usize> = job
        .arrays
        .iter()
        .enumerate()
        .map(|(i, a)| (a.name.as_str(), i))
        .collect();
    let deps = |a: &ArrayDef| -> Vec<usize> {
        if let Source::GlmSums { x, y, w, b, .. } = &a.source {
            return [x, y, w]
                .into_iter()
                .chain(b)
                .filter_map(|n| index.get(n.as_str()).copied())
                .collect();
        }
        let Source::Expr { text } = &a.source else {
            return Vec::new();
        };
        match expr::parse(text) {
            Ok(e) => expr::names(&e)
                .into_iter()
                .filter_map(|n| index.get(n).copied())
                .collect(),
            Err(_) => Vec::new(),
        }
    };
    // 0: not seen, 1: on the stack, 2: placed.
    let mut state = vec![0u8; job.arrays.len()];
    let mut out = Vec::with_capacity(job.arrays.len());
    for root in 0..job.arrays.len() {
        if state[root] != 0 {
            continue;
        }
        state[root] = 1;
        let mut stack = vec![(root, deps(&job.arrays[root]), 0usize)];
        while let Some((i, ds, next)) = stack.last_mut() {
            if let Some(&d) = ds.get(*next) {
                *next += 1;
                if state[d] == 1 {
                    let from = stack.iter().position(|s| s.0 == d).unwrap_or(0);
                    let mut cycle: Vec<&str> = stack[from..]
                        .iter()
                        .map(|s| job.arrays[s.0].name.as_str())
                        .collect();
                    cycle.push(&job.arrays[d].name);
                    return Err(job.err(
                        job.arrays[d].line,
                        format!("arrays.{}", job.arrays[d].name),
                        format!("cyclic definition: {}", cycle.join(" -> ")),
                    ));
                }
                if state[d] == 0 {
                    state[d] = 1;
                    let dd = deps(&job.arrays[d]);
                    stack.push((d, dd, 0));
                }
            } else {
                state[*i] = 2;
                out.push(&job.arrays[*i]);
                stack.pop();
            }
        }
    }
    Ok(out)
}

impl<'a> Builder<'a> {
    /// A new node. One beyond the size limits is recorded in `too_big` (reported by
    /// [`Builder::eval`] or [`Builder::resolve`], whichever returns first) and stands in as
    /// a single element, so that nothing downstream computes with its absurd size.
    pub(super) fn add(&mut self, mut meta: ArrayMeta, op: NodeOp) -> NodeId {
        if let Err(m) = self.within_limits(&meta) {
            self.too_big.get_or_insert(m);
            meta = ArrayMeta::new(vec![1; meta.ndim()], vec![1; meta.ndim()], meta.dtype);
        }
        self.blocks += meta.num_blocks();
        let id = self.g.nodes.len();
        self.g.nodes.push(Node {
            id,
            meta,
            op,
            name: None,
            persist: false,
            def: self.stack.last().cloned(),
        });
        id
    }

    fn within_limits(&self, m: &ArrayMeta) -> Result<(), String> {
        let elements = m
            .shape
            .iter()
            .try_fold(1u64, |a, &s| a.checked_mul(s))
            .filter(|&n| n <= crate::config::MAX_ELEMENTS);
        if elements.is_none() {
            return Err(format!(
                "this makes an array of shape {}: more than 2^50 elements",
                shape_str(&m.shape)
            ));
        }
        let blocks = m.num_blocks();
        if blocks > MAX_BLOCKS_PER_ARRAY {
            return Err(format!(
                "shape {} in blocks of {} makes {blocks} blocks, more than the {MAX_BLOCKS_PER_ARRAY} an array may have; blocks of {} would do",
                shape_str(&m.shape),
                shape_str(&m.block),
                shape_str(&block_for(&m.shape, &m.block, MAX_BLOCKS_PER_ARRAY))
            ));
        }
        if self.blocks + blocks > MAX_BLOCKS_PER_JOB {
            // Which arrays hold the most blocks (anonymous nodes count for the array
            // whose expression made them).
            let mut per: HashMap<&str, u64> = HashMap::new();
            for n in &self.g.nodes {
                *per.entry(n.def.as_deref().unwrap_or("?")).or_default() += n.meta.num_blocks();
            }
            let mut per: Vec<(&str, u64)> = per.into_iter().collect();
            per.sort_by_key(|&(n, b)| (std::cmp::Reverse(b), n));
            let most: Vec<String> = per
                .iter()
                .take(3)
                .map(|(n, b)| format!("{n} ({b})"))
                .collect();
            return Err(format!(
                "with this array's {blocks} blocks the job has {} blocks in all, more than the {MAX_BLOCKS_PER_JOB} allowed; the most are in {}: give them larger blocks",
                self.blocks + blocks,
                most.join(", ")
            ));
        }
        Ok(())
    }

    pub(super) fn meta(&self, id: NodeId) -> &ArrayMeta {
        &self.g.nodes[id].meta
    }

    /// An array made with the default blocks, co-partitioned with the job's other arrays
    /// ([`shared_splits`]): along its first axis and, for a 2-D array, its second.
    pub(super) fn default_meta(&self, shape: Vec<u64>, dtype: DType) -> ArrayMeta {
        self.default_meta_along(shape, dtype, 2)
    }

    /// [`Builder::default_meta`], shared along the first `axes` axes (1: rows only, for a
    /// file read by ranged reads of whole rows).
    fn default_meta_along(&self, shape: Vec<u64>, dtype: DType, axes: usize) -> ArrayMeta {
        let c = &self.job.compute;
        let mut block = default_block(&shape, dtype, c.workers, c.memory_mb);
        let axes = if shape.len() == 2 { axes } else { 1 };
        for (d, b) in block.iter_mut().enumerate().take(axes) {
            if let Some(&s) = self.splits.get(&shape[d]) {
                *b = (*b).min(s);
            }
        }
        ArrayMeta::new(shape, block, dtype)
    }

    pub(super) fn resolve(&mut self, def: &'a ArrayDef) -> Result<NodeId, JobError> {
        if let Some(&id) = self.g.named.get(&def.name) {
            return Ok(id);
        }
        let key = format!("arrays.{}", def.name);
        if let Some(pos) = self.stack.iter().position(|n| *n == def.name) {
            let mut cycle = self.stack[pos..].to_vec();
            cycle.push(def.name.clone());
            return Err(self.job.err(
                def.line,
                key,
                format!("cyclic definition: {}", cycle.join(" -> ")),
            ));
        }
        self.stack.push(def.name.clone());
        // Where a size limit points: at `block` when the job gives one.
        let block_key = match def.block {
            Some(_) => format!("{key}.block"),
            None => key.clone(),
        };
        let err = |m: String| self.job.err(def.line, key.clone(), m);
        let check_block = |block: &Option<Vec<u64>>, shape: &[u64]| -> Result<(), JobError> {
            match block {
                Some(b) if b.len() != shape.len() => Err(self.job.err(
                    def.line,
                    format!("{key}.block"),
                    format!(
                        "block {:?} has {} sizes but the array {} has shape {}",
                        b,
                        b.len(),
                        def.name,
                        shape_str(shape)
                    ),
                )),
                _ => Ok(()),
            }
        };
        // A file is read in whole rows (its columns cut would be a ranged read per row):
        // its default blocks are shared along the rows only.
        let file = matches!(def.source, Source::Load { .. });
        let leaf_meta = |shape: Vec<u64>, dtype: DType, b: &Builder| -> ArrayMeta {
            match &def.block {
                Some(bl) => ArrayMeta::new(shape, bl.clone(), dtype),
                None => b.default_meta_along(shape, dtype, if file { 1 } else { 2 }),
            }
        };
        let id = match &def.source {
            Source::Random { dist, shape, seed } => {
                check_block(&def.block, shape)?;
                // As NumPy's Generator: integers in any int dtype that holds [low, high),
                // normal and uniform in float32 or float64.
                let (natural, fits) = match *dist {
                    RandomDist::Integers { low, high } => (
                        DType::Int64,
                        def.dtype.is_none_or(|d| {
                            d.is_int()
                                && d.int_range().is_some_and(|(lo, hi)| {
                                    lo <= low.into() && i128::from(high) - 1 <= hi
                                })
                        }),
                    ),
                    _ => (DType::Float64, def.dtype.is_none_or(DType::is_float)),
                };
                let dtype = def.dtype.unwrap_or(natural);
                if !fits {
                    let kinds = match dist {
                        RandomDist::Integers { .. } => "an int dtype that holds low and high - 1",
                        _ => "float32 or float64",
                    };
                    return Err(self.job.err(
                        def.line,
                        format!("{key}.dtype"),
                        format!(
                            "random {} arrays are {kinds}, not {dtype}; convert with astype in an expression",
                            dist.name()
                        ),
                    ));
                }
                let m = leaf_meta(shape.clone(), dtype, self);
                self.add(
                    m,
                    NodeOp::Random {
                        dist: *dist,
                        seed: *seed,
                        frame: None,
                    },
                )
            }
            Source::Full { shape, value } => {
                check_block(&def.block, shape)?;
                let dtype = def.dtype.unwrap_or(DType::Float64);
                if let Some(dt) = out_of_range(*value, dtype) {
                    return Err(self.job.err(
                        def.line,
                        format!("{key}.value"),
                        format!("{value} is out of bounds for {dt} (NumPy raises OverflowError)"),
                    ));
                }
                let m = leaf_meta(shape.clone(), dtype, self);
                self.add(m, NodeOp::Fill { value: *value })
            }
            Source::Load { .. } => {
                let probe = self.probes.0.get(&def.name).ok_or_else(|| {
                    self.job.err(
                        def.line,
                        format!("{key}.load"),
                        "the input was not probed before the graph was built",
                    )
                })?;
                check_block(&def.block, probe.shape())?;
                let (dtype, op) = match probe.clone() {
                    Probe::Npy {
                        source,
                        key,
                        dtype,
                        header,
                        ..
                    } => (
                        dtype,
                        NodeOp::ImportNpy {
                            source,
                            key,
                            header,
                        },
                    ),
                    Probe::Csv {
                        source,
                        key,
                        index,
                        delimiter,
                        usecols,
                        dtype,
                        dtypes,
                        ..
                    } => (
                        dtype,
                        NodeOp::ImportCsv {
                            source,
                            key,
                            index,
                            delimiter,
                            usecols,
                            dtypes,
                        },
                    ),
                    Probe::Parquet {
                        source,
                        key,
                        dtype,
                        metadata,
                        columns,
                        row_groups,
                        ..
                    } => (
                        dtype,
                        NodeOp::ImportParquet {
                            source,
                            key,
                            metadata,
                            columns,
                            row_groups,
                        },
                    ),
                    Probe::Zarr {
                        meta,
                        in_place: Some(rel),
                        sparse,
                        foreign,
                        ..
                    } => {
                        // In the job's own store and in nums-cloud's encoding, or any other
                        // Zarr array (`foreign`): read in place, in its own blocks, re-blocked
                        // (by tasks) only where the job asks for other blocks.
                        let wrap = foreign.is_some();
                        let op = NodeOp::InPlace {
                            path: rel,
                            sparse,
                            foreign,
                        };
                        let mut id = self.add(meta.clone(), op);
                        let want = ArrayMeta::new(
                            meta.shape.clone(),
                            def.block.clone().unwrap_or(meta.block.clone()),
                            def.dtype.unwrap_or(meta.dtype),
                        );
                        // A foreign array is only ever an operand: what the job names is
                        // made from it block by block (in memory, inside the batches that
                        // read it), so whatever reads a named array by its path reads
                        // nums-cloud's blocks.
                        if want != meta || wrap {
                            id = self.reblock(id, want);
                        }
                        if let Some(m) = self.too_big.take() {
                            return Err(self.job.err(def.line, block_key.clone(), m));
                        }
                        self.stack.pop();
                        self.g.nodes[id].name = Some(def.name.clone());
                        self.g.named.insert(def.name.clone(), id);
                        return Ok(id);
                    }
                    Probe::Zarr {
                        store, path, meta, ..
                    } => (
                        meta.dtype,
                        NodeOp::ImportZarr {
                            store,
                            path,
                            src: meta,
                        },
                    ),
                };
                let m = leaf_meta(probe.shape().to_vec(), def.dtype.unwrap_or(dtype), self);
                self.add(m, op)
            }
            Source::Param { shape } => {
                let m = ArrayMeta::new(shape.clone(), shape.clone(), DType::Float64);
                self.add(
                    m,
                    NodeOp::Param {
                        name: def.name.clone(),
                    },
                )
            }
            Source::GlmSums {
                loss,
                x,
                y,
                w,
                b,
                hessian,
            } => {
                let mut node = |n: &str| match self.defs.get(n) {
                    Some(def) => self.resolve(def),
                    None => Err(self.job.err(def.line, key.clone(), format!("no array {n}"))),
                };
                let (x, y, w) = (node(x)?, node(y)?, node(w)?);
                let b = b.as_deref().map(&mut node).transpose()?;
                funcs::glm_sums(self, *loss, x, y, w, b, *hessian).map_err(err)?
            }
            Source::Expr { text } => {
                let e = expr::parse(text).map_err(|e| err(e.render(text)))?;
                let v = self.eval(&e).map_err(|e| match e {
                    EvalError::Expr(x) => err(x.render(text)),
                    EvalError::Job(j) => j,
                })?;
                let mut id = match v {
                    Val::Arr(id) => id,
                    Val::Num(x) => self.scalar_node(x, x.dtype()),
                    Val::Fields(f) => {
                        let names: Vec<String> = f.iter().map(|(n, _)| format!(".{n}")).collect();
                        return Err(err(format!(
                            "{text:?} is a result with {}: name one of them (e.g. {text}{})",
                            names.join(", "),
                            names[0]
                        )));
                    }
                    _ => return Err(err(format!("{text:?} is not an array expression"))),
                };
                let m = self.meta(id).clone();
                check_block(&def.block, &m.shape)?;
                let want = ArrayMeta::new(
                    m.shape.clone(),
                    def.block.clone().unwrap_or(m.block.clone()),
                    def.dtype.unwrap_or(m.dtype),
                );
                // A named array owns its storage: rechunk where the block or dtype differs, or where
                // the expression is just another array's name.
                if want != m || self.g.nodes[id].name.is_some() {
                    id = self.reblock(id, want);
                }
                id
            }
        };
        if let Some(m) = self.too_big.take() {
            return Err(self.job.err(def.line, block_key, m));
        }
        self.stack.pop();
        self.g.nodes[id].name = Some(def.name.clone());
        self.g.named.insert(def.name.clone(), id);
        Ok(id)
    }

    /// Evaluates an expression to a value (new nodes as needed). A size limit broken on
    /// the way is the error, pointing at the innermost expression that broke it.
    /// A NumPy scalar comes back as a number (see [`Builder::eval_operand`]).
    pub(super) fn eval(&mut self, e: &Expr) -> Result<Val, EvalError> {
        Ok(match self.eval_operand(e)? {
            Val::NpScalar(x, _) => Val::Num(x),
            v => v,
        })
    }

    /// As [`Builder::eval`], but a NumPy scalar stays one: for the operands of operators
    /// and elementwise functions, where it promotes as an array.
    pub(super) fn eval_operand(&mut self, e: &Expr) -> Result<Val, EvalError> {
        let v = self.eval_inner(e);
        match self.too_big.take() {
            Some(m) => Err(EvalError::Expr(ExprError::new(e.pos, m))),
            None => v,
        }
    }

    fn eval_inner(&mut self, e: &Expr) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(e.pos, m));
        Ok(match &e.kind {
            ExprKind::Num(v) => Val::Num(Scalar::Float(*v)),
            ExprKind::Imag(v) => Val::Num(Scalar::Complex(0.0, *v)),
            ExprKind::Int(v) => Val::Num(Scalar::Int(*v)),
            ExprKind::UInt(v) => Val::Num(Scalar::UInt(*v)),
            ExprKind::Bool(b) => Val::Num(Scalar::Bool(*b)),
            ExprKind::Str(s) => Val::Str(s.clone()),
            ExprKind::None => Val::None,
            ExprKind::Name(n) if n.starts_with('$') => {
                match n[1..].parse::<usize>().ok().and_then(|k| self.bound.get(k)) {
                    Some(&id) => Val::Arr(id),
                    None => return Err(at(format!("no operand {n}"))),
                }
            }
            ExprKind::Name(n) => match self.defs.get(n.as_str()) {
                Some(def) => Val::Arr(self.resolve(def).map_err(EvalError::Job)?),
                // Python's type names as NumPy takes them for a dtype (`dtype=complex`).
                None if ["bool", "int", "float", "complex"].contains(&n.as_str()) => {
                    Val::Str(DType::parse(n).expect("a dtype name").name().into())
                }
                // A function's name, bare: the array of that name, and there is none.
                None if funcs::is_function(n) => {
                    return Err(at(format!(
                        "unknown array {n:?} ({n} is a function: call it, {n}(...)); the job defines {}",
                        self.known()
                    )));
                }
                None => {
                    return Err(at(format!(
                        "unknown array {n:?}; the job defines {}",
                        self.known()
                    )));
                }
            },
            ExprKind::Tuple(items) => Val::Tuple(
                items
                    .iter()
                    .map(|i| self.eval(i))
                    .collect::<Result<_, _>>()?,
            ),
            ExprKind::Unary(op, x) => {
                let v = self.eval_operand(x)?;
                // A Python number's operator is Python's (`-True` is -1, `~True` -2,
                // `-(-2**63)` past int64 refused); NumPy's ufuncs of arrays and NumPy
                // scalars (`-M` of a bool array refused, `~M` its logical not).
                match (op, v) {
                    (op, Val::Num(x)) => {
                        Val::Num(ops::unary_python(*op, x).map_err(ops::refused(e.pos))?)
                    }
                    (UnOp::Pos, v @ (Val::NpScalar(..) | Val::Arr(_))) => {
                        let bool_ = match &v {
                            Val::NpScalar(_, d) => *d == DType::Bool,
                            Val::Arr(id) => self.meta(*id).dtype == DType::Bool,
                            _ => false,
                        };
                        if bool_ {
                            return Err(at(
                                "the unary + operator is not supported for bools (NumPy refuses it)"
                                    .into(),
                            ));
                        }
                        v
                    }
                    (UnOp::Neg, v @ (Val::NpScalar(..) | Val::Arr(_))) => {
                        self.unary(UnaryOp::Neg, v, e.pos)?
                    }
                    (UnOp::Invert, v @ (Val::NpScalar(..) | Val::Arr(_))) => {
                        self.unary(UnaryOp::Not, v, e.pos)?
                    }
                    _ => return Err(at("~ needs a bool, - a number or an array".into())),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (va, vb) = (self.eval_operand(a)?, self.eval_operand(b)?);
                self.binary(*op, va, vb, e.pos)?
            }
            ExprKind::Attr(x, attr) => {
                if let ExprKind::Name(n) = &x.kind
                    && (n == "np" || n == "numpy")
                {
                    return match attr.as_str() {
                        "pi" => Ok(Val::Num(Scalar::Float(std::f64::consts::PI))),
                        "e" => Ok(Val::Num(Scalar::Float(std::f64::consts::E))),
                        "inf" => Ok(Val::Num(Scalar::Float(f64::INFINITY))),
                        "nan" => Ok(Val::Num(Scalar::Float(f64::NAN))),
                        "newaxis" => Ok(Val::None),
                        // A dtype (np.int8, np.complex128, np.double, ...) as its name, as
                        // `dtype=` and astype take it; NumPy 2 has no np.float, np.int or
                        // np.complex, and type codes are no attributes.
                        a if a.len() > 3
                            && !["float", "complex"].contains(&a)
                            && DType::parse(a).is_some() =>
                        {
                            Ok(Val::Str(DType::parse(a).expect("parsed").name().into()))
                        }
                        a => Err(at(format!(
                            "unknown constant np.{a}; supported: np.pi, np.e, np.inf, np.nan, np.newaxis and the dtypes ({})",
                            DType::ALL.map(|d| format!("np.{}", d.name())).join(", ")
                        ))),
                    };
                }
                let v = self.eval(x)?;
                if let Val::Fields(fields) = &v {
                    return match fields.iter().find(|(n, _)| n == attr) {
                        Some((_, f)) => Ok(f.clone()),
                        None => Err(at(format!(
                            "unknown attribute .{attr}; this result has {}",
                            fields
                                .iter()
                                .map(|(n, _)| format!(".{n}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))),
                    };
                }
                let Val::Arr(id) = v else {
                    return Err(at(format!("only arrays have the attribute .{attr}")));
                };
                let m = self.meta(id).clone();
                let int = |v: u64| Val::Num(Scalar::Int(v as i64));
                match attr.as_str() {
                    "T" => Val::Arr(self.transpose(id, (0..m.ndim()).rev().collect())),
                    "shape" => Val::Tuple(m.shape.iter().map(|&s| int(s)).collect()),
                    "ndim" => int(m.ndim() as u64),
                    "size" => int(m.len()),
                    "dtype" => Val::Str(m.dtype.name().into()),
                    "real" => self.unary(UnaryOp::Real, Val::Arr(id), e.pos)?,
                    "imag" => self.unary(UnaryOp::Imag, Val::Arr(id), e.pos)?,
                    "at" => {
                        return Err(at(
                            "x.at[index] is only followed by .set(value): x.at[index].set(value)"
                                .into(),
                        ));
                    }
                    a => {
                        return Err(at(format!(
                            "unknown attribute .{a}; supported: .T, .shape, .ndim, .size, .dtype, .real, .imag"
                        )));
                    }
                }
            }
            ExprKind::Call(f, args, kwargs) => match self.at_set(f, args, kwargs, e.pos) {
                Some(r) => r?,
                None => match self.random_call(f, args, kwargs, e.pos) {
                    Some(r) => r?,
                    None => self.call(f, args, kwargs, e.pos)?,
                },
            },
            ExprKind::Index(x, items) => match self.eval(x)? {
                Val::Arr(id) => self.index(id, items)?,
                v @ (Val::Tuple(_) | Val::Fields(_)) => {
                    let t: Vec<Val> = match v {
                        Val::Fields(f) => f.into_iter().map(|(_, v)| v).collect(),
                        Val::Tuple(t) => t,
                        _ => unreachable!(),
                    };
                    let [it] = items.as_slice() else {
                        return Err(at("a tuple takes one index".into()));
                    };
                    let i = self.int(it)?;
                    let n = t.len() as i64;
                    if i < -n || i >= n {
                        return Err(EvalError::Expr(ExprError::new(
                            it.pos,
                            format!("index {i} is out of range for a tuple of {n}"),
                        )));
                    }
                    t[i.rem_euclid(n) as usize].clone()
                }
                _ => return Err(at("only arrays and tuples can be indexed".into())),
            },
            ExprKind::Slice(..) | ExprKind::Ellipsis => {
                return Err(at("slices and ... are only allowed inside [ ]".into()));
            }
        })
    }

    /// An expression that must be an integer (an index, a size, an axis).
    pub(super) fn int(&mut self, e: &Expr) -> Result<i64, EvalError> {
        match self.eval(e)? {
            Val::Num(v) if v.integer().is_some() => Ok(v.as_i64()),
            _ => Err(EvalError::Expr(ExprError::new(
                e.pos,
                "expected an integer",
            ))),
        }
    }

    /// `x[...]`: integers, slices with steps (negative too), `None` (new axes), integer
    /// lists and 1-D boolean masks, one per axis from the left; missing trailing axes are
    /// whole. Slicing comes first, then the lists and masks, then the axes of the integers
    /// go and the new ones come.
    pub(super) fn index(&mut self, x: NodeId, items: &[Expr]) -> Result<Val, EvalError> {
        let m = self.meta(x).clone();
        let items = &expand_ellipsis(items, m.ndim())?;
        let (mut start, mut step, mut len) = (Vec::new(), Vec::new(), Vec::new());
        // Output axes: Some(d) is source axis d, None a new axis of length 1.
        let mut out: Vec<Option<usize>> = Vec::new();
        // Advanced indices: (axis, what picks, item position, index shape).
        let mut takes: Vec<(usize, Pick, usize, Vec<u64>)> = Vec::new();
        let mut d = 0;
        for it in items {
            let err = |m: String| EvalError::Expr(ExprError::new(it.pos, m));
            let index_err = |m: String| {
                EvalError::Expr(ExprError::raising(
                    crate::refusal::PyException::IndexError,
                    it.pos,
                    m,
                ))
            };
            if matches!(it.kind, ExprKind::None) {
                out.push(None);
                continue;
            }
            if d >= m.ndim() {
                return Err(index_err(format!(
                    "too many indices for an array of dimension {}",
                    m.ndim()
                )));
            }
            let n = m.shape[d] as i64;
            let whole = |start: &mut Vec<i64>, step: &mut Vec<i64>, len: &mut Vec<u64>| {
                start.push(0);
                step.push(1);
                len.push(m.shape[d]);
            };
            match &it.kind {
                ExprKind::Slice(a, b, c) => {
                    let mut opt = |e: &Option<Box<Expr>>| -> Result<Option<i64>, EvalError> {
                        match e {
                            None => Ok(None),
                            Some(e) if matches!(e.kind, ExprKind::None) => Ok(None),
                            Some(e) => self.int(e).map(Some),
                        }
                    };
                    let (a, b, c) = (opt(a)?, opt(b)?, opt(c)?);
                    let (s0, st, l) = python_slice(a, b, c.unwrap_or(1), n).map_err(err)?;
                    start.push(s0);
                    step.push(st);
                    len.push(l as u64);
                    out.push(Some(d));
                }
                _ => {
                    match self.eval(it)? {
                        Val::Num(v) if v.kind() == ScalarKind::Bool => {
                            return Err(err(format!(
                                "a bool index ({}) adds an axis in NumPy, which nums-cloud does not do; use an integer",
                                if v.as_i64() != 0 { "True" } else { "False" }
                            )));
                        }
                        Val::Num(v) if v.kind() != ScalarKind::Float => {
                            let i = v.as_i64();
                            if i < -n || i >= n {
                                return Err(index_err(format!(
                                    "index {i} is out of bounds for axis {d} with size {n}"
                                )));
                            }
                            start.push(i.rem_euclid(n));
                            step.push(1);
                            len.push(1);
                        }
                        Val::Tuple(items)
                            if !items.is_empty()
                                && items.iter().all(
                                    |v| matches!(v, Val::Num(b) if b.kind() == ScalarKind::Bool),
                                ) =>
                        {
                            // A list of bools is a mask, as in NumPy.
                            if items.len() as i64 != n {
                                return Err(err(format!(
                                    "a bool index list of {} values for axis {d} of size {n}",
                                    items.len()
                                )));
                            }
                            let idx: Vec<u64> = (0..n as u64)
                            .filter(|&i| matches!(&items[i as usize], Val::Num(b) if b.as_i64() != 0))
                            .collect();
                            let l = vec![idx.len() as u64];
                            takes.push((d, Pick::At(idx), it.pos, l));
                            whole(&mut start, &mut step, &mut len);
                            out.push(Some(d));
                        }
                        Val::Tuple(items) => {
                            // An integer list: those slices, in that order.
                            let mut idx = Vec::new();
                            for v in items {
                                match v {
                                    Val::Num(i) if i.kind() != ScalarKind::Float => {
                                        let i = i.as_i64();
                                        if i < -n || i >= n {
                                            return Err(index_err(format!(
                                                "index {i} is out of bounds for axis {d} with size {n}"
                                            )));
                                        }
                                        idx.push(i.rem_euclid(n) as u64);
                                    }
                                    _ => return Err(err("an index list holds integers".into())),
                                }
                            }
                            let l = vec![idx.len() as u64];
                            takes.push((d, Pick::At(idx), it.pos, l));
                            whole(&mut start, &mut step, &mut len);
                            out.push(Some(d));
                        }
                        Val::Arr(a)
                            if self.meta(a).dtype == DType::Bool && self.meta(a).ndim() > 1 =>
                        {
                            // A mask of several axes: the whole index, as `A[A > 0]`.
                            let k = self.meta(a).ndim();
                            if d != 0
                                || items.len() != 1
                                || self.meta(a).shape[..] != m.shape[..k.min(m.ndim())]
                            {
                                return Err(err(format!(
                                    "a bool mask of {k} axes ({}) must be the whole index and match the first {k} axes of the array ({})",
                                    shape_str(&self.meta(a).shape),
                                    shape_str(&m.shape)
                                )));
                            }
                            return Ok(Val::Arr(self.mask_nd(x, a)));
                        }
                        Val::Arr(mask) if self.meta(mask).dtype == DType::Bool => {
                            let mm = self.meta(mask).clone();
                            if mm.shape != [m.shape[d]] {
                                // NumPy's IndexError ("boolean index did not match").
                                return Err(index_err(format!(
                                    "an array index must be a 1-D bool mask as long as axis {d} ({n}); got {} {}",
                                    mm.dtype,
                                    shape_str(&mm.shape)
                                )));
                            }
                            takes.push((d, Pick::Mask(mask), it.pos, vec![m.shape[d]]));
                            whole(&mut start, &mut step, &mut len);
                            out.push(Some(d));
                        }
                        Val::Arr(a) if self.meta(a).dtype.is_int() => {
                            // An integer array: how many of its values fall in each block
                            // of x is computed first (a stage), then gathered (any length).
                            let shape = self.meta(a).shape.clone();
                            takes.push((d, Pick::Ints(a), it.pos, shape));
                            whole(&mut start, &mut step, &mut len);
                            out.push(Some(d));
                        }
                        Val::Arr(a) => {
                            return Err(err(format!(
                                "an array index is an integer array or a bool mask; got {} {}",
                                self.meta(a).dtype,
                                shape_str(&self.meta(a).shape)
                            )));
                        }
                        _ => {
                            return Err(err(
                            "an index is an integer, a slice, None, an integer list or a bool mask"
                                .into(),
                        ));
                        }
                    }
                }
            }
            d += 1;
        }
        for k in d..m.ndim() {
            start.push(0);
            step.push(1);
            len.push(m.shape[k]);
            out.push(Some(k));
        }
        let whole = start.iter().all(|&s| s == 0) && step.iter().all(|&s| s == 1) && len == m.shape;
        let mut id = x;
        if !whole {
            let block = m
                .block
                .iter()
                .zip(&step)
                .map(|(&b, &s)| (b / s.unsigned_abs()).max(1))
                .collect();
            id = self.add(
                ArrayMeta::new(len, block, m.dtype),
                NodeOp::Slice { x, start, step },
            );
        }
        // Integers beside an advanced index are advanced too (NumPy's rules).
        let ints: Vec<usize> = (0..m.ndim()).filter(|a| !out.contains(&Some(*a))).collect();
        let simple = takes.len() == 1
            && ints.is_empty()
            && (takes[0].3.len() == 1 || matches!(takes[0].1, Pick::Ints(_)));
        if !takes.is_empty() && !simple {
            if out.contains(&None) {
                return Err(EvalError::Expr(ExprError::new(
                    takes[0].2,
                    "None (a new axis) beside several advanced indices is not supported; add the axis in a second index",
                )));
            }
            // Several advanced indices broadcast together: their positions are computed
            // first (at most MAX_SELECTION).
            let mut adv: Vec<(usize, Vec<u64>, Vec<u64>)> = Vec::new();
            for (a, pick, pos, shape) in takes {
                let err = |m: String| EvalError::Expr(ExprError::new(pos, m));
                let n = m.shape[a];
                let (idx, shape) = match pick {
                    Pick::At(idx) => (idx, shape),
                    Pick::Mask(mask) => {
                        let idx = self.selection(mask, n).map_err(err)?;
                        let l = vec![idx.len() as u64];
                        (idx, l)
                    }
                    Pick::Ints(i) => (self.index_values(i, n).map_err(err)?, shape),
                };
                adv.push((a, shape, idx));
            }
            adv.extend(ints.into_iter().map(|a| (a, vec![], vec![0])));
            adv.sort_by_key(|t| t.0);
            return self
                .advanced(id, adv)
                .map_err(|m| EvalError::Expr(ExprError::new(items[0].pos, m)));
        }
        // The index array's shape where its axis stood (an N-D one adds axes).
        let mut spread: Option<(usize, Vec<u64>)> = None;
        for (axis, pick, pos, shape) in takes {
            id = match pick {
                Pick::At(indices) => {
                    let t = self.meta(id).clone();
                    let mut shape = t.shape.clone();
                    shape[axis] = indices.len() as u64;
                    self.add(
                        ArrayMeta::new(shape, t.block, t.dtype),
                        NodeOp::Take {
                            x: id,
                            axis,
                            indices,
                        },
                    )
                }
                Pick::Mask(mask) => self.compress_along(id, mask, axis),
                Pick::Ints(i) => {
                    let before = self.meta(id).shape.clone();
                    let g = self.gather(id, i, axis).map_err(|m| {
                        EvalError::Expr(ExprError::raising(
                            crate::refusal::PyException::IndexError,
                            pos,
                            m,
                        ))
                    })?;
                    spread = Some((axis, shape));
                    // Back to one axis per source axis; spread out below.
                    let mut flat = before;
                    flat[axis] = self.meta(i).len();
                    self.reshape(g, &flat)
                }
            };
        }
        let now = self.meta(id).shape.clone();
        let shape: Vec<u64> = out
            .iter()
            .flat_map(|a| match (a, &spread) {
                (Some(d), Some((s, ishape))) if d == s => ishape.clone(),
                (Some(d), _) => vec![now[*d]],
                (None, _) => vec![1],
            })
            .collect();
        Ok(Val::Arr(self.reshape(id, &shape)))
    }

    pub(super) fn known(&self) -> String {
        let mut names: Vec<&str> = self.defs.keys().copied().collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// An operand as a node: numbers become 0-d arrays of their kind's dtype.
    pub(super) fn node(&mut self, v: Val, pos: usize) -> Result<NodeId, EvalError> {
        match v {
            Val::Arr(id) => Ok(id),
            Val::Num(x) => Ok(self.scalar_node(x, x.dtype())),
            Val::NpScalar(x, d) => Ok(self.scalar_node(x, d)),
            _ => Err(EvalError::Expr(ExprError::new(
                pos,
                "expected an array or a number",
            ))),
        }
    }
}

/// What one advanced index picks along its axis.
enum Pick {
    /// Positions known when the graph is built (an integer or bool list).
    At(Vec<u64>),
    /// A 1-D bool mask's true positions: counted per block first, never listed.
    Mask(NodeId),
    /// An int array's values: counted per block of x first, never listed.
    Ints(NodeId),
}

/// An index's items with `...` replaced by the whole axes (`:`) the other items leave.
pub(super) fn expand_ellipsis(items: &[Expr], ndim: usize) -> Result<Vec<Expr>, EvalError> {
    let dots: Vec<&Expr> = items
        .iter()
        .filter(|i| matches!(i.kind, ExprKind::Ellipsis))
        .collect();
    if dots.len() > 1 {
        return Err(EvalError::Expr(ExprError::new(
            dots[1].pos,
            "an index can only have a single ellipsis ('...')",
        )));
    }
    let used = items
        .iter()
        .filter(|i| !matches!(i.kind, ExprKind::None | ExprKind::Ellipsis))
        .count();
    Ok(items
        .iter()
        .flat_map(|i| match i.kind {
            ExprKind::Ellipsis => {
                let whole = Expr {
                    kind: ExprKind::Slice(None, None, None),
                    pos: i.pos,
                };
                vec![whole; ndim.saturating_sub(used)]
            }
            _ => vec![i.clone()],
        })
        .collect())
}

/// Python's slice semantics on an axis of `n`: (first index, step, length).
pub(super) fn python_slice(
    start: Option<i64>,
    stop: Option<i64>,
    step: i64,
    n: i64,
) -> Result<(i64, i64, i64), String> {
    if step == 0 {
        return Err("slice step cannot be zero".into());
    }
    let norm = |v: i64, lo: i64, hi: i64| {
        if v < 0 {
            v.saturating_add(n).max(lo)
        } else {
            v.min(hi)
        }
    };
    // ceil(span / |step|) without overflow, for steps up to i64::MIN.
    let count = |span: i64| match span {
        ..=0 => 0,
        s => ((s as u64 - 1) / step.unsigned_abs() + 1) as i64,
    };
    let (a, len) = if step > 0 {
        let a = start.map_or(0, |v| norm(v, 0, n));
        let b = stop.map_or(n, |v| norm(v, 0, n));
        (a, count(b - a))
    } else {
        let a = start.map_or(n - 1, |v| norm(v, -1, n - 1));
        let b = stop.map_or(-1, |v| norm(v, -1, n - 1));
        (a, count(a - b))
    };
    // One element: any step selects it; a step of 1 keeps huge ones out of later sums.
    Ok((a, if len == 1 { 1 } else { step }, len))
}

/// One axis NumPy-style: negatives count from the end.
pub(super) fn one_axis(i: i64, ndim: usize) -> Result<usize, Refusal> {
    let n = ndim as i64;
    if i < -n || i >= n {
        return Err(Refusal::new(
            PyException::AxisError,
            format!("axis {i} is out of bounds for an array of dimension {ndim}"),
        ));
    }
    Ok(i.rem_euclid(n.max(1)) as usize)
}

/// Axes NumPy-style: None is all, an int or a tuple of ints, negatives from the end.
pub(super) fn axes_of(v: &Val, ndim: usize) -> Result<Vec<usize>, Refusal> {
    let one = |x: Scalar| -> Result<usize, Refusal> {
        // NumPy refuses a float axis, whole or not (TypeError).
        let i = Some(x)
            .filter(|x| x.kind() != ScalarKind::Float)
            .and_then(Scalar::integer)
            .ok_or_else(|| {
                Refusal::new(
                    PyException::TypeError,
                    format!("axis {x} is not an integer"),
                )
            })?;
        one_axis(i, ndim)
    };
    let mut axes = match v {
        Val::None => (0..ndim).collect(),
        Val::Num(x) => vec![one(*x)?],
        Val::Tuple(items) => items
            .iter()
            .map(|i| match i {
                Val::Num(x) => one(*x),
                _ => Err(Refusal::new(
                    PyException::TypeError,
                    "axis entries must be integers",
                )),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => {
            return Err(Refusal::new(
                PyException::TypeError,
                "axis must be None, an integer or a tuple of integers",
            ));
        }
    };
    let n = axes.len();
    axes.sort_unstable();
    axes.dedup();
    if axes.len() != n {
        return Err("repeated axis".into());
    }
    Ok(axes)
}

pub(super) enum EvalError {
    Expr(ExprError),
    Job(JobError),
}

impl EvalError {
    /// The message, without a position (the Rust API's expressions have no text).
    fn message(self) -> String {
        match self {
            EvalError::Expr(e) => e.message,
            EvalError::Job(e) => e.message,
        }
    }
}

/// What an expression of the Rust API evaluates to.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Array(NodeId),
    /// A Python number (`x.shape[0]` is one, as is a literal).
    Number(Scalar),
    /// A NumPy scalar of a dtype (what NumPy's functions of numbers return: `sqrt(2)`).
    NumPy(Scalar, DType),
    Tuple(Vec<Value>),
    /// NumPy's named tuple (a factorization's result): its fields in order.
    Fields(Vec<(&'static str, Value)>),
}

impl Value {
    fn of(v: Val) -> Result<Value, String> {
        Ok(match v {
            Val::Arr(id) => Value::Array(id),
            Val::Num(x) => Value::Number(x),
            Val::NpScalar(x, d) => Value::NumPy(x, d),
            Val::Tuple(t) => Value::Tuple(t.into_iter().map(Value::of).collect::<Result<_, _>>()?),
            Val::Fields(f) => Value::Fields(
                f.into_iter()
                    .map(|(n, v)| Ok((n, Value::of(v)?)))
                    .collect::<Result<_, String>>()?,
            ),
            Val::Str(s) => return Err(format!("a string ({s:?}) is not a value")),
            Val::None => return Err("None is not a value".into()),
        })
    }
}

/// A graph built one expression at a time, as the Rust API builds it: each expression
/// names its operands `$0`, `$1`, ... (nodes already in the graph), is lowered by the same
/// builder and function table as a job file's, and adds its nodes; shapes and dtypes are
/// checked as each is added. Nodes are never removed (a node no stored array needs makes
/// no tasks), and a computed node becomes an array read in place ([`Incremental::stored`])
/// until it is let go ([`Incremental::release`]).
pub struct Incremental {
    /// The settings the builder reads (default blocks from workers and memory); no arrays.
    job: Job,
    g: Graph,
    blocks: u64,
    tsqr_memo: HashMap<Vec<NodeId>, funcs::TsqrTree>,
    lu_memo: HashMap<NodeId, funcs::LuNodes>,
    masks: HashMap<NodeId, Vec<u64>>,
    /// Values of small nodes a function's shapes depend on, computed by the caller when
    /// an evaluation asked for them ([`Incremental::take_need_values`]).
    values: HashMap<NodeId, Block>,
    /// The node whose values the last failed evaluation needed, with the graph's length
    /// and block count before and its length after that evaluation.
    need_values: Option<(NodeId, (usize, u64), usize)>,
    /// The operation of each node a compute stored ([`Incremental::stored`]): put back
    /// when the node is let go, so that what is made from it computes it again.
    made: HashMap<NodeId, NodeOp>,
    /// Stored nodes that nothing could make again, kept while an array may read them:
    /// values from memory ([`Incremental::input`]) and imports (their files may be gone).
    kept: std::collections::BTreeSet<NodeId>,
    /// Nodes stored beside values an evaluation needed ([`Incremental::keep_while_needed`]):
    /// kept while an array may read them, then let go as computed nodes are (`made`
    /// holds their operations).
    while_needed: std::collections::BTreeSet<NodeId>,
    /// Such nodes of a failed evaluation taken off the graph, to be stored again when the
    /// next evaluation makes the same nodes.
    restore: Option<Restore>,
    /// Paths of stored nodes taken off the graph ([`Incremental::set_values`]).
    orphans: Vec<String>,
    /// The exception NumPy raises for the last refused evaluation.
    raises: crate::refusal::PyException,
}

/// Nodes [`Incremental::set_values`] took off the graph, to store again.
struct Restore {
    /// The graph's length they were taken off at.
    len: usize,
    /// The nodes from there (to the node whose values were needed) as they were made.
    made: Vec<(ArrayMeta, NodeOp)>,
    /// Of each to store again, its id and path.
    again: Vec<(NodeId, String)>,
}

/// What [`Incremental::release`] let go.
#[derive(Debug, Default, PartialEq)]
pub struct Released {
    /// Where their blocks are (each path's whole folder goes).
    pub paths: Vec<String>,
    /// The inputs (from memory, imports) among them: a value from memory not written
    /// yet has nothing stored, but is let go too.
    pub inputs: Vec<NodeId>,
}

impl Incremental {
    /// An empty graph whose default blocks follow `job`'s compute settings.
    pub fn new(job: Job) -> Incremental {
        Incremental {
            job,
            g: Graph::default(),
            blocks: 0,
            tsqr_memo: HashMap::new(),
            lu_memo: HashMap::new(),
            masks: HashMap::new(),
            values: HashMap::new(),
            need_values: None,
            made: HashMap::new(),
            kept: Default::default(),
            while_needed: Default::default(),
            restore: None,
            orphans: Vec::new(),
            raises: Default::default(),
        }
    }

    /// The exception NumPy raises for what the last failed evaluation refused.
    pub(crate) fn raises(&self) -> crate::refusal::PyException {
        self.raises
    }

    pub fn graph(&self) -> &Graph {
        &self.g
    }

    /// The compute settings the graph's default blocks follow.
    pub fn set_compute(&mut self, compute: crate::job::Compute) {
        self.job.compute = compute;
    }

    /// Runs `f` with a builder over this graph, then takes the graph back.
    fn with<'s, T>(
        &'s mut self,
        probes: &'s Probes,
        bound: &'s [NodeId],
        f: impl FnOnce(&mut Builder<'s>) -> Result<T, EvalError>,
    ) -> Result<T, String> {
        let before = (self.g.nodes.len(), self.blocks);
        self.need_values = None;
        let mut b = Builder {
            job: &self.job,
            probes,
            masks: &self.masks,
            need: None,
            g: std::mem::take(&mut self.g),
            defs: HashMap::new(),
            stack: Vec::new(),
            blocks: self.blocks,
            too_big: None,
            tsqr_memo: std::mem::take(&mut self.tsqr_memo),
            lu_memo: std::mem::take(&mut self.lu_memo),
            sort_memo: HashMap::new(),
            counts_memo: HashMap::new(),
            values: &self.values,
            need_values: None,
            bound,
            splits: HashMap::new(),
        };
        let r = f(&mut b);
        let need = b.need;
        let need_values = b.need_values;
        self.g = b.g;
        self.blocks = b.blocks;
        self.tsqr_memo = b.tsqr_memo;
        self.lu_memo = b.lu_memo;
        self.raises = match &r {
            Err(EvalError::Expr(e)) => e.raises,
            _ => Default::default(),
        };
        // A mask's positions (several advanced indices together) come from its values.
        // Values still unknown come first: an error built on their stand-ins (a mask
        // assumed to select everything) may not be one once they are known.
        if let Some(node) = need_values.or(need) {
            // As a job computes such values in a stage of its own, then builds again, the
            // caller computes node `node` (its nodes are final), gives its values
            // ([`Incremental::set_values`]) and evaluates again.
            self.need_values = Some((node, before, self.g.nodes.len()));
            return Err(format!(
                "its shape depends on the values of node {node} (a sample sort's sample, a \
                 selection's counts), computed first"
            ));
        }
        r.map_err(EvalError::message)
    }

    /// Evaluates `e`, whose names `$k` are `bound[k]`.
    pub(crate) fn eval(&mut self, e: &Expr, bound: &[NodeId]) -> Result<Value, String> {
        // A NumPy scalar comes back as one (NumPy's function of numbers gives one).
        let v = self.with(&Probes::default(), bound, |b| b.eval_operand(e));
        self.store_again();
        Value::of(v?)
    }

    /// Adds the array `def` describes (random, full, or a load whose probe is
    /// `probes[def.name]`), with its `block` and `dtype`.
    pub fn define<'s>(
        &'s mut self,
        def: &'s ArrayDef,
        probes: &'s Probes,
    ) -> Result<NodeId, String> {
        let id = self.with(probes, &[], |b| b.resolve(def).map_err(EvalError::Job));
        self.store_again();
        id
    }

    /// An array stored at `path` (values from memory the caller writes there before a
    /// compute reads them).
    pub fn input(&mut self, meta: ArrayMeta, path: String) -> NodeId {
        let id = self.g.nodes.len();
        self.blocks += meta.num_blocks();
        self.g.nodes.push(Node {
            id,
            meta,
            op: NodeOp::InPlace {
                path,
                sparse: false,
                foreign: None,
            },
            name: None,
            persist: false,
            def: None,
        });
        self.kept.insert(id);
        id
    }

    /// `x` in blocks of `block`.
    pub fn rechunk(&mut self, x: NodeId, block: Vec<u64>) -> Result<NodeId, String> {
        let ndim = self.g.nodes[x].meta.ndim();
        if block.len() != ndim || block.contains(&0) {
            return Err(format!(
                "block {block:?} is not {ndim} positive sizes for an array of shape {}",
                shape_str(&self.g.nodes[x].meta.shape)
            ));
        }
        let id = self.with(&Probes::default(), &[], |b| Ok(b.rechunk(x, block)));
        self.store_again();
        id
    }

    /// The node whose values the last evaluation needed (it failed for want of them).
    pub fn need_values(&self) -> Option<NodeId> {
        self.need_values.map(|(node, _, _)| node)
    }

    /// Node `node`'s values, now computed (the failed evaluation's nodes stored it): the
    /// nodes that evaluation added are taken off again, so that evaluating it again makes
    /// the same nodes, `node` among them, and builds with the values. Unless nodes were
    /// added since (another thread's), whose ids must stay.
    pub fn set_values(&mut self, node: NodeId, values: Block) {
        let restore = match self.need_values {
            Some((n, before, after)) if n == node => {
                self.need_values = None;
                (self.g.nodes.len() == after).then_some(before)
            }
            _ => None,
        };
        if let Some((len, blocks)) = restore {
            // Nodes of that evaluation stored since (`node` itself): their blocks go, but
            // those kept while needed (a sort the build reads again), which the next
            // evaluation makes again: stored again then.
            let taken: Vec<NodeId> = (self.made.keys().copied())
                .chain(self.kept.iter().copied())
                .filter(|&id| id >= len)
                .collect();
            let mut again = Vec::new();
            for id in taken {
                let op = self.made.remove(&id);
                self.kept.remove(&id);
                let NodeOp::InPlace { path, .. } = &self.g.nodes[id].op else {
                    continue;
                };
                match (self.while_needed.remove(&id), op) {
                    (true, Some(op)) if id < node => {
                        again.push((id, path.clone()));
                        self.g.nodes[id].op = op;
                    }
                    _ => self.orphans.push(path.clone()),
                }
            }
            if let Some(r) = self.restore.take() {
                self.orphans.extend(r.again.into_iter().map(|(_, p)| p));
            }
            if !again.is_empty() {
                let made = (self.g.nodes[len..node].iter())
                    .map(|n| (n.meta.clone(), n.op.clone()))
                    .collect();
                self.restore = Some(Restore { len, made, again });
            }
            self.g.nodes.truncate(len);
            self.blocks = blocks;
            self.tsqr_memo
                .retain(|k, t| k.iter().chain(&t.xs).chain(&t.levels).all(|&i| i < len));
            self.lu_memo.retain(|&k, lu| k < len && lu.within(len));
        }
        self.values.insert(node, values);
    }

    /// Nodes `ids`, stored beside values an evaluation needed, are kept while an array
    /// may read them (not only while one holds them), and stored again when the next
    /// evaluation makes them again: the build that follows reads them in place.
    pub fn keep_while_needed(&mut self, ids: &[NodeId]) {
        self.while_needed
            .extend(ids.iter().filter(|id| self.made.contains_key(id)));
    }

    /// After an evaluation: the nodes [`Incremental::set_values`] took off are stored
    /// again if it made the same nodes (the same operations and metadata from the first
    /// taken off, as evaluating the same expression again does), else their blocks go.
    fn store_again(&mut self) {
        let Some(Restore { len, made, again }) = self.restore.take() else {
            return;
        };
        let same = self.g.nodes.len() >= len + made.len()
            && (self.g.nodes[len..len + made.len()].iter())
                .zip(&made)
                .all(|(n, (meta, op))| n.meta == *meta && n.op == *op);
        for (id, path) in again {
            if same {
                self.stored(id, path);
                self.while_needed.insert(id);
            } else {
                self.orphans.push(path);
            }
        }
    }

    /// Node `id`'s array is stored at `path` (a compute made it): later computes read it
    /// in place instead of computing it again, until [`Incremental::release`] lets it go.
    /// The names of `id`'s columns ([`Graph::column_names`]) from the named inputs'
    /// (`roots`), through stored nodes' operations too.
    pub fn column_names(
        &self,
        id: NodeId,
        roots: &HashMap<NodeId, Vec<String>>,
    ) -> Option<Vec<String>> {
        let op = |n: NodeId| self.made.get(&n).unwrap_or(&self.g.nodes[n].op);
        self.g.column_names(id, &op, roots)
    }

    pub fn stored(&mut self, id: NodeId, path: String) {
        // A foreign array is read where it is, always.
        if let NodeOp::InPlace {
            foreign: Some(_), ..
        } = &self.g.nodes[id].op
        {
            return;
        }
        let op = NodeOp::InPlace {
            path,
            sparse: false,
            foreign: None,
        };
        match std::mem::replace(&mut self.g.nodes[id].op, op) {
            NodeOp::InPlace { .. } => {}
            op if op.is_import() => {
                self.kept.insert(id);
            }
            op => {
                self.made.insert(id, op);
            }
        }
    }

    /// Lets go of the stored nodes no array holds any more (`held`: the nodes arrays
    /// hold). A computed node gets its operation back: an array made from it computes it
    /// again (the engine is deterministic: the same values). An input from memory or an
    /// import goes only when no held node can need it: none is made from it, through
    /// the operations of stored nodes too (which they get back when let go). Returns
    /// where their blocks are, for the caller to delete once no compute can read them.
    pub fn release(&mut self, held: &[NodeId]) -> Released {
        let n = self.g.nodes.len();
        let mut is_held = vec![false; n];
        for &id in held.iter().filter(|&&id| id < n) {
            is_held[id] = true;
        }
        let mut out = Released {
            paths: std::mem::take(&mut self.orphans),
            inputs: Vec::new(),
        };
        let mut gone: Vec<NodeId> = self
            .made
            .keys()
            .copied()
            .filter(|&id| !is_held[id] && !self.while_needed.contains(&id))
            .collect();
        gone.sort_unstable();
        for id in gone {
            self.put_back(id, &mut out);
        }
        if (self.kept.iter().chain(&self.while_needed)).all(|&id| is_held[id]) {
            return out;
        }
        // What the held nodes read as they are (a node kept while needed goes once what
        // reads it is computed: it could be made again), and as they are or once let go
        // (nodes come after their operands).
        let (mut now, mut need) = (is_held.clone(), is_held);
        for id in (0..n).rev() {
            if now[id] {
                for i in self.g.nodes[id].op.operands() {
                    now[i] = true;
                }
            }
            if need[id] {
                let op = self.made.get(&id).unwrap_or(&self.g.nodes[id].op);
                for i in op.operands() {
                    need[i] = true;
                }
            }
        }
        let unneeded: Vec<NodeId> = (self.while_needed.iter().copied())
            .filter(|&id| !now[id])
            .collect();
        for id in unneeded {
            self.while_needed.remove(&id);
            self.put_back(id, &mut out);
        }
        let unneeded: Vec<NodeId> = self.kept.iter().copied().filter(|&id| !need[id]).collect();
        for id in unneeded {
            self.kept.remove(&id);
            if let NodeOp::InPlace { path, .. } = &self.g.nodes[id].op {
                out.paths.push(path.clone());
            }
            out.inputs.push(id);
        }
        out
    }

    /// Computed node `id` gets its operation back; where it was stored goes in `out`.
    fn put_back(&mut self, id: NodeId, out: &mut Released) {
        let op = self.made.remove(&id).expect("a computed node");
        if let NodeOp::InPlace { path, .. } = std::mem::replace(&mut self.g.nodes[id].op, op) {
            out.paths.push(path);
        }
    }

    /// The graph of one compute: the nodes `targets` need, renumbered, with only the
    /// targets stored (under the names given); and the node of this graph each of its
    /// nodes is ([`Graph::pruned`]).
    pub fn for_compute(&self, targets: &[(NodeId, String)]) -> (Graph, Vec<NodeId>) {
        self.g.pruned(targets)
    }
}
