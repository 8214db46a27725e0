//! Sorting, searching and sets: NumPy's `sort`/`argsort` (stable; the Array API's
//! `descending=`), `searchsorted`, `nonzero` and its relatives, `unique` and the Array
//! API's `unique_*`, `isin`.
//!
//! A sort whose lanes fit one invocation sorts each block of whole lanes. A longer lane
//! (a 1-D array, or each lane of a larger one, taken out and stacked back) is
//! sample-sorted, bounded in memory at any size: a sample of it (stage
//! `values-N`, read back) gives the splitters, the counts of each block's elements below
//! each splitter (another stage) the partitions' sizes; then each block is sorted on its
//! own, cut into its partitions' pieces, and each block of the result merges the pieces of
//! the partitions it overlaps. An element's key is (value, position), so equal values
//! split between partitions and the result is stable. Shapes that depend on values
//! (`nonzero`, `unique`) select with counts per block computed first the same way
//! (`Builder::compress`).

use super::*;
use nums_function::memory::{BASE_MEMORY, TaskBlocks, task_peak};
use nums_function::order::{merge_scratch, sort_scratch};
use nums_layout::batch::Kernel;

const SORT: &[&str] = &["a", "axis", "kind", "order", "stable", "descending"];
const PARTITION: &[&str] = &["a", "kth", "axis", "kind", "order"];
const UNIQUE: &[&str] = &[
    "ar",
    "return_index",
    "return_inverse",
    "return_counts",
    "axis",
    "equal_nan",
    "sorted",
];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "sort",
        SORT,
        "`np.sort` (stable; the Array API's `descending=`; any length: a sample sort past one invocation)",
        |s, b| sort(s, b, false),
    )
    .refusing(&["order"]),
    FuncDef::new(
        "argsort",
        SORT,
        "`np.argsort` (stable; `descending=` keeps equal values in order)",
        |s, b| sort(s, b, true),
    )
    .refusing(&["order"]),
    FuncDef::new(
        "partition",
        PARTITION,
        "`np.partition` (a full sort: every `kth` in place, at any length)",
        |s, b| partition(s, b, false),
    )
    .refusing(&["order"]),
    FuncDef::new(
        "argpartition",
        PARTITION,
        "`np.argpartition` (a full, stable argsort)",
        |s, b| partition(s, b, true),
    )
    .refusing(&["order"]),
    FuncDef::new(
        "searchsorted",
        &["a", "v", "side", "sorter"],
        "`np.searchsorted` (`sorter`: a list or an array, its values computed first)",
        searchsorted,
    ),
    FuncDef::new("nonzero", &["a"], "`np.nonzero`, `np.where(condition)`", |s, b| {
        let x = b.array("a")?;
        s.nonzero(x, b.pos)
    }),
    FuncDef::new("flatnonzero", &["a"], "`np.flatnonzero`", |s, b| {
        let x = b.array("a")?;
        let n = s.meta(x).len();
        let flat = s.reshape(x, &[n]);
        Ok(Val::Arr(s.nonzero_positions(flat, b.pos)?))
    }),
    FuncDef::new("argwhere", &["a"], "`np.argwhere`", argwhere),
    FuncDef::new(
        "count_nonzero",
        &["a", "axis", "keepdims"],
        "`np.count_nonzero`",
        |s, b| {
            let x = b.array("a")?;
            let axes = b.axes(s.meta(x).ndim())?;
            let nz = s.is_nonzero(x, b.pos)?;
            Ok(Val::Arr(s.reduce(
                nz,
                ReduceOp::Sum,
                axes,
                b.flag("keepdims")?,
                b.pos,
            )?))
        },
    ),
    FuncDef::new(
        "unique",
        UNIQUE,
        "`np.unique` (flattened; `return_index`, `return_inverse`, `return_counts`, `equal_nan`)",
        unique,
    )
    .refusing(&["axis"]),
    FuncDef::new(
        "unique_values",
        &["x"],
        "`np.unique_values` (Array API: NaNs distinct)",
        |s, b| {
            let x = b.array("x")?;
            let u = s.unique_parts(x, false, false, false, false, b.pos)?;
            Ok(Val::Arr(u.values))
        },
    ),
    FuncDef::new(
        "unique_counts",
        &["x"],
        "`np.unique_counts` (`.values`, `.counts`)",
        |s, b| {
            let x = b.array("x")?;
            let u = s.unique_parts(x, false, false, false, true, b.pos)?;
            Ok(Val::Fields(vec![
                ("values", Val::Arr(u.values)),
                ("counts", Val::Arr(u.counts.expect("asked"))),
            ]))
        },
    ),
    FuncDef::new(
        "unique_inverse",
        &["x"],
        "`np.unique_inverse` (`.values`, `.inverse_indices`)",
        |s, b| {
            let x = b.array("x")?;
            let u = s.unique_parts(x, false, false, true, false, b.pos)?;
            Ok(Val::Fields(vec![
                ("values", Val::Arr(u.values)),
                ("inverse_indices", Val::Arr(u.inverse.expect("asked"))),
            ]))
        },
    ),
    FuncDef::new(
        "unique_all",
        &["x"],
        "`np.unique_all` (`.values`, `.indices`, `.inverse_indices`, `.counts`)",
        |s, b| {
            let x = b.array("x")?;
            let u = s.unique_parts(x, false, true, true, true, b.pos)?;
            Ok(Val::Fields(vec![
                ("values", Val::Arr(u.values)),
                ("indices", Val::Arr(u.index.expect("asked"))),
                ("inverse_indices", Val::Arr(u.inverse.expect("asked"))),
                ("counts", Val::Arr(u.counts.expect("asked"))),
            ]))
        },
    ),
    FuncDef::new(
        "isin",
        &["element", "test_elements", "assume_unique", "invert", "kind"],
        "`np.isin`",
        isin,
    ),
    FuncDef::new(
        "digitize",
        &["x", "bins", "right"],
        "`np.digitize` (bins increasing or decreasing, checked)",
        digitize,
    ),
    FuncDef::new(
        "lexsort",
        &["keys", "axis"],
        "`np.lexsort` of 1-D keys (the last key first; one stable argsort per key)",
        lexsort,
    ),
];

/// sort and argsort: along `axis` (-1 by default; None flattens).
fn sort(s: &mut Builder, b: &Bound, arg: bool) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    if let Some((v, p)) = b.get("kind") {
        match v {
            Val::Str(k)
                if ["quicksort", "mergesort", "heapsort", "stable"].contains(&k.as_str()) => {}
            _ => {
                return Err(b.err(
                    *p,
                    format!(
                        "{}(): kind is one of 'quicksort', 'mergesort', 'heapsort' or 'stable' (every sort here is stable)",
                        b.f
                    ),
                ));
            }
        }
    }
    let descending = b.flag("descending")?;
    let (x, axis) = sort_axis(s, b, x)?;
    Ok(Val::Arr(s.sort_along(x, axis, descending, arg, b.pos)?))
}

/// `x` and the axis a sort of it goes along: `axis` (-1 by default; None flattens).
fn sort_axis(s: &mut Builder, b: &Bound, x: NodeId) -> Result<(NodeId, usize), EvalError> {
    let ndim = s.meta(x).ndim();
    Ok(match b.given("axis") {
        Some((Val::None, _)) => {
            let n = s.meta(x).len();
            (s.reshape(x, &[n]), 0)
        }
        Some((v, p)) => (x, axis_of(v, ndim).map_err(|e| b.refused(*p, e))?),
        None => (x, one_axis(-1, ndim).map_err(|e| b.refused(b.pos, e))?),
    })
}

/// partition and argpartition: a full sort (argsort) along `axis`, which puts every
/// `kth` element where a sort puts it, the smaller before and the larger after.
fn partition(s: &mut Builder, b: &Bound, arg: bool) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    if let Some((v, p)) = b.get("kind")
        && !matches!(v, Val::Str(k) if k == "introselect")
    {
        let got = match v {
            Val::Str(k) => format!(" (got '{k}')"),
            _ => String::new(),
        };
        return Err(b.err(*p, format!("select kind must be 'introselect'{got}")));
    }
    let (x, axis) = sort_axis(s, b, x)?;
    let n = s.meta(x).shape[axis] as i64;
    let (_, kp) = b.need("kth")?;
    let kth = super::shapes::ints(b, "kth").map_err(|_| {
        b.raising(
            crate::refusal::PyException::TypeError,
            *kp,
            "Partition index must be integer",
        )
    })?;
    if let Some(k) = kth
        .iter()
        .map(|&k| if k < 0 { k + n } else { k })
        .find(|&k| !(0..n).contains(&k))
    {
        return Err(b.err(*kp, format!("kth(={k}) out of bounds ({n})")));
    }
    Ok(Val::Arr(s.sort_along(x, axis, false, arg, b.pos)?))
}

/// searchsorted(a, v, side): `a` 1-D and sorted.
fn searchsorted(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut a = b.array("a")?;
    if s.meta(a).ndim() != 1 {
        return Err(b.err(b.pos, "searchsorted(): a must be 1-D"));
    }
    if let Some((v, p)) = b.get("sorter").cloned() {
        // `a` in the order `sorter` gives: a[sorter], its values computed first when an
        // array.
        let n = s.meta(a).shape[0];
        let bad = |m: String| b.err(p, format!("searchsorted(): {m}"));
        a = match v {
            Val::Arr(id) => {
                let sm = s.meta(id).clone();
                if !sm.dtype.is_int() || sm.ndim() != 1 || sm.shape[0] != n {
                    return Err(bad(format!(
                        "sorter must be {n} integers (got {} of shape {})",
                        sm.dtype.name(),
                        shape_str(&sm.shape)
                    )));
                }
                s.gather(a, id, 0)
                    .map_err(|e| bad(format!("sorter: {e}")))?
            }
            _ => {
                let v = super::shapes::ints(b, "sorter")?;
                if v.len() as u64 != n {
                    return Err(bad(format!(
                        "sorter must be {n} integers (got {})",
                        v.len()
                    )));
                }
                let idx = v
                    .iter()
                    .map(|&i| {
                        u64::try_from(i)
                            .ok()
                            .filter(|&i| i < n)
                            .ok_or_else(|| bad(format!("sorter index {i} is out of range")))
                    })
                    .collect::<Result<Vec<u64>, _>>()?;
                super::shapes::take_node(s, a, 0, idx)
            }
        };
    }
    let right = match b.get("side") {
        None => false,
        Some((Val::Str(side), _)) if side == "left" => false,
        Some((Val::Str(side), _)) if side == "right" => true,
        Some((_, p)) => {
            return Err(b.err(*p, "searchsorted(): side must be 'left' or 'right'"));
        }
    };
    let (v, p) = b.need("v")?.clone();
    Ok(Val::Arr(s.searchsorted(a, v, right, p)?))
}

fn argwhere(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    if s.meta(x).ndim() == 0 {
        // NumPy's: a row of no columns when the value is non-zero, else no rows.
        let one = s.reshape(x, &[1]);
        let p = s.nonzero_positions(one, b.pos)?;
        let n = s.meta(p).shape[0];
        let col = s.reshape(p, &[n, 1]);
        return Ok(Val::Arr(s.slice(col, &[(1, 0, 0)])));
    }
    let Val::Tuple(parts) = s.nonzero(x, b.pos)? else {
        unreachable!("a tuple")
    };
    let cols = parts
        .into_iter()
        .map(|v| {
            let id = s.node(v, b.pos)?;
            let n = s.meta(id).shape[0];
            Ok(s.reshape(id, &[n, 1]))
        })
        .collect::<Result<Vec<_>, EvalError>>()?;
    Ok(Val::Arr(s.concat(cols, 1, b.pos)?))
}

fn unique(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("ar")?;
    let (index, inverse, counts) = (
        b.flag("return_index")?,
        b.flag("return_inverse")?,
        b.flag("return_counts")?,
    );
    let equal_nan = match b.num("equal_nan")? {
        None => true,
        Some(v) => v.as_bool(),
    };
    let u = s.unique_parts(x, equal_nan, index, inverse, counts, b.pos)?;
    if !(index || inverse || counts) {
        return Ok(Val::Arr(u.values));
    }
    let mut out = vec![Val::Arr(u.values)];
    out.extend(
        [u.index, u.inverse, u.counts]
            .into_iter()
            .flatten()
            .map(Val::Arr),
    );
    Ok(Val::Tuple(out))
}

/// isin: whether each element is among the test elements (found between the left and
/// right search positions in their sorted values; a NaN never is, as NumPy's `==`).
fn isin(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (e, p) = b.need("element")?.clone();
    let (t, tp) = b.need("test_elements")?.clone();
    if let Some((v, kp)) = b.get("kind")
        && !matches!(v, Val::Str(k) if k == "sort" || k == "table")
    {
        return Err(b.err(*kp, "isin(): kind is None, 'sort' or 'table'"));
    }
    let t = s.node(t, tp)?;
    let n = s.meta(t).len();
    let flat = s.reshape(t, &[n]);
    let e_dtype = match &e {
        Val::Arr(id) => s.meta(*id).dtype,
        Val::Num(x) => DType::of_kind(x.kind()),
        _ => return Err(b.err(p, "isin(): element must be an array or a number")),
    };
    let dtype = e_dtype.promote(s.meta(flat).dtype);
    let flat = s.cast(flat, dtype);
    let sorted = s.sort_along(flat, 0, false, false, b.pos)?;
    let e = match e {
        Val::Num(x) => s.scalar_node(x, dtype),
        v => {
            let id = s.node(v, p)?;
            s.cast(id, dtype)
        }
    };
    let lo = s.searchsorted(sorted, Val::Arr(e), false, p)?;
    let hi = s.searchsorted(sorted, Val::Arr(e), true, p)?;
    let mut found = s.elementwise2(BinaryOp::Gt, Val::Arr(hi), Val::Arr(lo), b.pos)?;
    if !dtype.is_exact() {
        let nan = s.unary(UnaryOp::IsNan, Val::Arr(e), b.pos)?;
        let ok = s.unary(UnaryOp::Not, nan, b.pos)?;
        found = s.elementwise2(BinaryOp::And, found, ok, b.pos)?;
    }
    if b.flag("invert")? {
        found = s.unary(UnaryOp::Not, found, b.pos)?;
    }
    Ok(found)
}

/// What `unique` computes: the sorted distinct values and, when asked, the position of
/// each one's first occurrence, each element's index into them, each one's count.
pub(super) struct Unique {
    pub(super) values: NodeId,
    pub(super) index: Option<NodeId>,
    pub(super) inverse: Option<NodeId>,
    pub(super) counts: Option<NodeId>,
}

/// Sample sort sizes for sorting `n` elements of `size` bytes within `memory_mb`.
struct SampleSort {
    /// Elements per locally sorted block.
    run: u64,
    /// Elements per block of the merged result.
    out: u64,
    /// Partitions.
    parts: u64,
    /// Samples in all.
    samples: u64,
}

/// A sample sort's samples (the sample node: one lane's, or a row per lane) and their
/// positions along the lane ([`Builder::sort_memo`]).
pub(crate) type SortSamples = (NodeId, Arc<Vec<u64>>);

/// A sort along an axis ([`Builder::sorted_lanes`]): whole lanes in each block, or each
/// lane a 1-D array of its own (its sample sort), in C order of the other axes.
pub(super) enum Sorted {
    Whole(NodeId),
    Lanes(Vec<NodeId>),
}

/// Samples per partition: enough that no partition is more than about a third over its
/// share (the merge is sized for that).
const SAMPLES_PER_PART: u64 = 128;

impl<'a> Builder<'a> {
    /// Bytes one sort or merge task may project: half of what an invocation holds past its
    /// base, the rest for the tasks that make its inputs in the same batch.
    fn sort_budget(&self) -> u64 {
        let limit = self.job.compute.memory_mb << 20;
        limit.saturating_sub(BASE_MEMORY) / 2 + BASE_MEMORY
    }

    /// The most elements of `size` bytes one task sorts (values, or positions with `arg`).
    fn sort_limit(&self, size: u64, arg: bool) -> u64 {
        let budget = self.sort_budget();
        let out = if arg { 8 } else { size };
        // task_peak is linear in the block's elements, but for its few KiB per block read
        // (not per element: left out here, within the other half of the budget).
        let per = task_peak(&TaskBlocks::whole(
            size,
            0,
            size,
            out,
            sort_scratch(1, size, arg),
        )) - BASE_MEMORY;
        (budget.saturating_sub(BASE_MEMORY) / per).max(1)
    }

    fn sample_sort_sizes(&self, n: u64, size: u64, arg: bool) -> SampleSort {
        let budget = self.sort_budget().saturating_sub(BASE_MEMORY);
        let run = self.sort_limit(size, arg);
        // A merge block of o elements reads the partitions it overlaps: partitions of about
        // o elements (a third over at most) make it read up to o + 2 * 4/3 o.
        let out = (3 * budget / merge_peak(size, arg, 11, 3, 4)).max(2);
        let parts = n.div_ceil(out).max(2);
        SampleSort {
            run,
            out,
            parts,
            samples: (parts * SAMPLES_PER_PART).min(n),
        }
    }

    /// `x` sorted along `axis` (or its argsort): in blocks of whole lanes when a lane fits
    /// one task, else each lane by a sample sort (see [`Builder::sorted_lanes`]).
    pub(super) fn sort_along(
        &mut self,
        x: NodeId,
        axis: usize,
        descending: bool,
        arg: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        match self.sorted_lanes(x, axis, descending, arg, pos)? {
            Sorted::Whole(s) => Ok(s),
            Sorted::Lanes(lanes) => {
                let shape = self.meta(x).shape.clone();
                self.stack_lanes(lanes, &shape, axis, pos)
            }
        }
    }

    /// `x` sorted along `axis` (or its argsort): whole lanes per block when a lane fits one
    /// task, else each lane (a 1-D array: x itself) sample-sorted, the lanes' samples
    /// computed together and so their partition sizes (a stage each, whatever the number
    /// of lanes).
    pub(super) fn sorted_lanes(
        &mut self,
        x: NodeId,
        axis: usize,
        descending: bool,
        arg: bool,
        pos: usize,
    ) -> Result<Sorted, EvalError> {
        let m = self.meta(x).clone();
        let dtype = if arg { DType::Int64 } else { m.dtype };
        let n = m.shape[axis];
        let size = m.dtype.size() as u64;
        let limit = self.sort_limit(size, arg);
        if n <= limit || m.is_empty() {
            // Whole lanes per block, the other axes cut so that a block fits.
            let mut block = m.block.clone();
            block[axis] = n.max(1);
            let mut room = (limit / n.max(1)).max(1);
            for d in (0..m.ndim()).filter(|&d| d != axis) {
                block[d] = block[d].clamp(1, room);
                room = (room / block[d]).max(1);
            }
            let xr = self.rechunk(x, block.clone());
            return Ok(Sorted::Whole(self.add(
                ArrayMeta::new(m.shape.clone(), block, dtype),
                NodeOp::Sort {
                    x: xr,
                    axis,
                    descending,
                    arg,
                },
            )));
        }
        if m.ndim() == 1 {
            return Ok(Sorted::Lanes(vec![self.sample_sort(x, descending, arg)]));
        }
        // Lane by lane: a plan of each one's sample sort, so bounded by the plan's size.
        let count = m.len() / n;
        let z = self.sample_sort_sizes(n, size, arg);
        let nb = n.div_ceil(z.run);
        let per_lane = nb * (z.parts + 4) + 2 * n.div_ceil(m.block[axis]) + n.div_ceil(z.out);
        let blocks = count.saturating_mul(per_lane);
        let left = MAX_BLOCKS_PER_JOB.saturating_sub(self.blocks);
        let samples = count.saturating_mul(z.samples);
        let over = if blocks > left {
            Some(format!(
                "about {blocks} blocks, more than the {left} left of the {MAX_BLOCKS_PER_JOB} a plan may hold"
            ))
        } else if samples > MAX_SELECTION {
            Some(format!(
                "{samples} samples, more than the {MAX_SELECTION} the driver holds"
            ))
        } else {
            None
        };
        if let Some(over) = over {
            let name = self.g.nodes[x]
                .name
                .clone()
                .or_else(|| self.stack.last().cloned())
                .map_or_else(String::new, |n| format!("{n}, "));
            return Err(EvalError::Expr(ExprError::new(
                pos,
                format!(
                    "sorting an array ({name}shape {}) along axis {axis}: its {count} lanes of {n} elements, each more than one task sorts within memory_mb = {} ({limit}), are sample-sorted one by one, {over}: give more memory_mb, sort fewer lanes at a time (a slice of the other axes), or sort the array raveled (axis=None)",
                    shape_str(&m.shape),
                    self.job.compute.memory_mb
                ),
            )));
        }
        let lanes = self.lanes(x, axis);
        Ok(Sorted::Lanes(self.sample_sort_lanes(
            &lanes,
            (x, axis),
            descending,
            arg,
        )))
    }

    /// The lanes of `x` along `axis`, each 1-D: x at each position of its other axes, in
    /// C order.
    fn lanes(&mut self, x: NodeId, axis: usize) -> Vec<NodeId> {
        let m = self.meta(x).clone();
        let n = m.shape[axis];
        let others: Vec<usize> = (0..m.ndim()).filter(|&d| d != axis).collect();
        let count = m.len() / n.max(1);
        let mut lanes = Vec::with_capacity(count as usize);
        for l in 0..count {
            let mut rest = l;
            let mut ranges = vec![(0, 0, 1); others.len()];
            for (j, &d) in others.iter().enumerate().rev() {
                ranges[j] = (d, rest % m.shape[d], 1);
                rest /= m.shape[d];
            }
            let lane = self.slice(x, &ranges);
            lanes.push(self.reshape(lane, &[n]));
        }
        lanes
    }

    /// The 1-D `lanes` (of `shape`'s positions off `axis`, in C order, each of
    /// `shape[axis]` elements) as one array of `shape`: concatenated along the other axes,
    /// the last first.
    pub(super) fn stack_lanes(
        &mut self,
        lanes: Vec<NodeId>,
        shape: &[u64],
        axis: usize,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let mut one = vec![1; shape.len()];
        one[axis] = shape[axis];
        let mut parts: Vec<NodeId> = lanes.into_iter().map(|l| self.reshape(l, &one)).collect();
        for d in (0..shape.len()).rev().filter(|&d| d != axis) {
            let mut next = Vec::with_capacity(parts.len() / shape[d].max(1) as usize);
            for group in parts.chunks(shape[d].max(1) as usize) {
                next.push(match group {
                    [one] => *one,
                    _ => self.concat(group.to_vec(), d, pos)?,
                });
            }
            parts = next;
        }
        match parts[..] {
            [whole] => Ok(whole),
            _ => unreachable!("one array of {} lanes", parts.len()),
        }
    }

    /// The sample sort of the 1-D `x` (see the module's doc).
    fn sample_sort(&mut self, x: NodeId, descending: bool, arg: bool) -> NodeId {
        self.sample_sort_lanes(&[x], (x, 0), descending, arg)[0]
    }

    /// The sample sorts of the 1-D `lanes`, alike in length, blocks and dtype: the lanes
    /// of array `of.0` along axis `of.1`, whose sorts share their samples. The lanes'
    /// samples are one node and their partition sizes another, each computed in one stage.
    fn sample_sort_lanes(
        &mut self,
        lanes: &[NodeId],
        of: (NodeId, usize),
        descending: bool,
        arg: bool,
    ) -> Vec<NodeId> {
        let m = self.meta(lanes[0]).clone();
        let n = m.shape[0];
        let size = m.dtype.size() as u64;
        let z = self.sample_sort_sizes(n, size, arg);
        let (samp, positions) = match self.sort_memo.get(&of) {
            Some(s) => s.clone(),
            None => {
                // Stratified positions, each at a pseudo-random offset within its stratum.
                let positions: Vec<u64> = (0..z.samples)
                    .map(|j| {
                        let lo = j * n / z.samples;
                        let hi = ((j + 1) * n / z.samples).max(lo + 1);
                        lo + splitmix(j ^ n) % (hi - lo)
                    })
                    .collect();
                // A sample block reads about one block of x.
                let per = z.samples.div_ceil(m.grid()[0]).max(1);
                let mut takes = Vec::with_capacity(lanes.len());
                for &x in lanes {
                    takes.push(self.add(
                        ArrayMeta::new(vec![z.samples], vec![per], m.dtype),
                        NodeOp::Take {
                            x,
                            axis: 0,
                            indices: positions.clone(),
                        },
                    ));
                }
                let samp = match takes[..] {
                    [one] => one,
                    // A row of samples per lane.
                    _ => {
                        let rows = takes
                            .into_iter()
                            .map(|t| self.reshape(t, &[1, z.samples]))
                            .collect();
                        self.concat(rows, 0, 0)
                            .unwrap_or_else(|_| unreachable!("rows alike"))
                    }
                };
                let positions = Arc::new(positions);
                self.sort_memo.insert(of, (samp, positions.clone()));
                (samp, positions)
            }
        };
        // Sorted runs: x's blocks when they fit a sort and are not too many, else larger.
        let run = if m.block[0] <= z.run && m.grid()[0] * z.parts <= 1 << 16 {
            m.block[0]
        } else {
            z.run
        };
        let xs: Vec<NodeId> = lanes.iter().map(|&x| self.rechunk(x, vec![run])).collect();
        let nb = n.div_ceil(run);
        let block_len = |i: u64| run.min(n - i * run);
        // counts[l][i][k]: elements of lane l's block i before splitter k; assumed even
        // until known.
        let even =
            |i: u64| -> Vec<u64> { (1..z.parts).map(|k| block_len(i) * k / z.parts).collect() };
        let assumed = vec![(0..nb).map(even).collect::<Vec<_>>(); lanes.len()];
        let counts: Vec<Vec<Vec<u64>>> = match self.values.get(&samp) {
            None => {
                self.need_values.get_or_insert(samp);
                assumed
            }
            Some(values) => {
                let mut nodes = Vec::with_capacity(lanes.len());
                for (l, &x) in xs.iter().enumerate() {
                    let row;
                    let values = match lanes.len() {
                        1 => values,
                        _ => {
                            row = nums_layout::map_block!(values, a => a
                                .index_axis(ndarray::Axis(0), l)
                                .to_owned());
                            &row
                        }
                    };
                    let splitters = nums_function::order::splitters(
                        values,
                        &positions,
                        z.parts as usize,
                        descending,
                    );
                    nodes.push(self.add(
                        ArrayMeta::new(
                            vec![nb, splitters.len() as u64],
                            vec![1, splitters.len() as u64],
                            DType::Int64,
                        ),
                        NodeOp::SortCount {
                            x,
                            splitters: Arc::new(splitters),
                            descending,
                        },
                    ));
                }
                // The lanes' counts one after another.
                let counts_node = match nodes[..] {
                    [one] => one,
                    _ => self
                        .concat(nodes, 0, 0)
                        .unwrap_or_else(|_| unreachable!("counts alike")),
                };
                match self.values.get(&counts_node) {
                    None => {
                        self.need_values.get_or_insert(counts_node);
                        assumed
                    }
                    Some(c) => {
                        let c = c.to_i64();
                        let row = c.shape().get(1).copied().unwrap_or(0);
                        (0..lanes.len())
                            .map(|l| {
                                (l * nb as usize..(l + 1) * nb as usize)
                                    .map(|i| (0..row).map(|k| c[[i, k]] as u64).collect())
                                    .collect()
                            })
                            .collect()
                    }
                }
            }
        };
        xs.into_iter()
            .zip(&counts)
            .map(|(xs, counts)| self.sample_merge(xs, counts, &z, descending, arg))
            .collect()
    }

    /// The sample sort of one lane `xs` (1-D, in its sorted runs' blocks) from its blocks'
    /// partition sizes `counts`: each block sorted, cut into its partitions' pieces, and
    /// the pieces of each partition merged.
    fn sample_merge(
        &mut self,
        xs: NodeId,
        counts: &[Vec<u64>],
        z: &SampleSort,
        descending: bool,
        arg: bool,
    ) -> NodeId {
        let m = self.meta(xs).clone();
        let (n, run) = (m.shape[0], m.block[0]);
        let size = m.dtype.size() as u64;
        let nb = counts.len() as u64;
        let block_len = |i: u64| run.min(n - i * run);
        let sorted = self.add(
            ArrayMeta::new(vec![n], vec![run], m.dtype),
            NodeOp::Sort {
                x: xs,
                axis: 0,
                descending,
                arg: false,
            },
        );
        let argsorted = arg.then(|| {
            self.add(
                ArrayMeta::new(vec![n], vec![run], DType::Int64),
                NodeOp::Sort {
                    x: xs,
                    axis: 0,
                    descending,
                    arg: true,
                },
            )
        });
        let parts = counts.first().map_or(0, Vec::len) + 1;
        let (mut runs, mut pos_runs) = (Vec::new(), Vec::new());
        let mut buckets = Vec::new();
        let mut at = 0u64;
        for k in 0..parts {
            let first = runs.len();
            let mut size_k = 0;
            for i in 0..nb {
                let c = &counts[i as usize];
                let lo = if k == 0 { 0 } else { c[k - 1] };
                let hi = if k + 1 == parts { block_len(i) } else { c[k] };
                if hi <= lo {
                    continue;
                }
                let start = i * run + lo;
                runs.push(self.slice(sorted, &[(0, start, hi - lo)]));
                if let Some(a) = argsorted {
                    pos_runs.push(self.slice(a, &[(0, start, hi - lo)]));
                }
                size_k += hi - lo;
            }
            if size_k > 0 {
                buckets.push((at, first..runs.len()));
                at += size_k;
            }
        }
        // The merge blocks as large as fit what the partitions turned out to be.
        let sizes: Vec<u64> = buckets
            .iter()
            .enumerate()
            .map(|(k, b)| buckets.get(k + 1).map_or(n, |c| c.0) - b.0)
            .collect();
        let largest = sizes.iter().copied().max().unwrap_or(0);
        let budget = self.sort_budget().saturating_sub(BASE_MEMORY);
        let fits = |o: u64| {
            // Per output block, the elements of the partitions it overlaps.
            let (mut k, mut a) = (0, 0);
            while a < n {
                let e = (a + o).min(n);
                while k + 1 < buckets.len() && buckets[k + 1].0 <= a {
                    k += 1;
                }
                let (mut j, mut f) = (k, 0);
                while j < buckets.len() && buckets[j].0 < e {
                    f += sizes[j];
                    j += 1;
                }
                if merge_peak(size, arg, f, e - a, largest) > budget {
                    return false;
                }
                a = e;
            }
            true
        };
        let mut out = z.out.min(n).max(1);
        while out > 1 && !fits(out) {
            out = out * 4 / 5;
        }
        self.add(
            ArrayMeta::new(vec![n], vec![out], if arg { DType::Int64 } else { m.dtype }),
            NodeOp::SortMerge {
                runs,
                positions: pos_runs,
                buckets: Arc::new(buckets),
                descending,
                arg,
            },
        )
    }

    /// NumPy's searchsorted of `v` in the sorted 1-D `a`, both in their promoted dtype. A
    /// Python number takes part as the array NumPy makes of it (int64, uint64 above that,
    /// float64), not as a weak scalar: NumPy compares exactly (`-1` in a uint8 array comes
    /// first, `0.3` in float32 compares as float64), where the array's dtype would wrap or
    /// round it.
    pub(super) fn searchsorted(
        &mut self,
        a: NodeId,
        v: Val,
        right: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let v = self.node(v, pos)?;
        let dtype = self.meta(a).dtype.promote(self.meta(v).dtype);
        let (a, v) = (self.cast(a, dtype), self.cast(v, dtype));
        let vm = self.meta(v).clone();
        Ok(self.add(
            ArrayMeta {
                dtype: DType::Int64,
                ..vm
            },
            NodeOp::SearchSorted { a, v, right },
        ))
    }

    /// `x != 0` as bool (a bool array is its own).
    fn is_nonzero(&mut self, x: NodeId, pos: usize) -> Result<NodeId, EvalError> {
        if self.meta(x).dtype == DType::Bool {
            return Ok(x);
        }
        let v = self.elementwise2(BinaryOp::Ne, Val::Arr(x), Val::Num(Scalar::Int(0)), pos)?;
        self.node(v, pos)
    }

    /// The positions (int64) of the non-zero elements of the 1-D `x`.
    pub(in crate::graph) fn nonzero_positions(
        &mut self,
        x: NodeId,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let mask = self.is_nonzero(x, pos)?;
        let mm = self.meta(mask).clone();
        let iota = self.add(
            ArrayMeta {
                dtype: DType::Int64,
                ..mm
            },
            NodeOp::Iota {
                axis: 0,
                start: Scalar::Int(0),
                step: Scalar::Int(1),
                last: None,
            },
        );
        Ok(self.compress(iota, mask))
    }

    /// NumPy's nonzero: a tuple of each axis' indices of the non-zero elements, C order.
    pub(super) fn nonzero(&mut self, x: NodeId, pos: usize) -> Result<Val, EvalError> {
        let m = self.meta(x).clone();
        if m.ndim() == 0 {
            return Err(EvalError::Expr(ExprError::new(
                pos,
                "Calling nonzero on 0d arrays is not allowed. Use np.atleast_1d(scalar).nonzero() instead",
            )));
        }
        let flat = self.reshape(x, &[m.len()]);
        let p = self.nonzero_positions(flat, pos)?;
        let mut out = Vec::new();
        let mut stride: u64 = m.shape.iter().product();
        for &len in &m.shape {
            stride /= len.max(1);
            let mut v = Val::Arr(p);
            if stride > 1 {
                v = self.elementwise2(
                    BinaryOp::FloorDiv,
                    v,
                    Val::Num(Scalar::Int(stride as i64)),
                    pos,
                )?;
            }
            if !out.is_empty() {
                v = self.elementwise2(
                    BinaryOp::Mod,
                    v,
                    Val::Num(Scalar::Int(len.max(1) as i64)),
                    pos,
                )?;
            }
            out.push(v);
        }
        Ok(Val::Tuple(out))
    }

    /// The elements of the 1-D `x` where the 1-D bool `mask` is true.
    pub(in crate::graph) fn compress(&mut self, x: NodeId, mask: NodeId) -> NodeId {
        self.compress_along(x, mask, 0)
    }

    /// The slices of `x` along `axis` where the 1-D bool `mask` (as long as that axis) is
    /// true: the count in each of the mask's blocks is computed first (a stage), then each
    /// output block assembles the selected slices of the blocks that hold them (a term
    /// each, bounded by memory as a sum's are). Until the counts are known every slice is
    /// assumed selected (the largest the array can be). Any length: the driver holds a
    /// count per block.
    pub(in crate::graph) fn compress_along(
        &mut self,
        x: NodeId,
        mask: NodeId,
        axis: usize,
    ) -> NodeId {
        let mask = self.cast(mask, DType::Bool);
        let xm = self.meta(x).clone();
        // A 1-D x follows the mask's blocks; rows of x keep theirs (the mask is cheaper to
        // cut again).
        let (x, mask) = if xm.ndim() == 1 {
            let mb = self.meta(mask).block.clone();
            (self.rechunk(x, mb), mask)
        } else {
            (x, self.rechunk(mask, vec![xm.block[axis]]))
        };
        let mm = self.meta(mask).clone();
        let nb = mm.grid()[0];
        let counts_node = match self.counts_memo.get(&mask) {
            Some(&c) => c,
            None => {
                let c = self.add(
                    ArrayMeta::new(vec![nb], vec![1], DType::Int64),
                    NodeOp::ScanTotal {
                        x: mask,
                        op: ReduceOp::Sum,
                        axis: 0,
                        chained: false,
                    },
                );
                self.counts_memo.insert(mask, c);
                c
            }
        };
        let counts: Vec<u64> = match self.values.get(&counts_node) {
            Some(c) => c.to_i64().iter().map(|&c| c as u64).collect(),
            None if nb == 0 => vec![],
            None => {
                self.need_values.get_or_insert(counts_node);
                (0..nb)
                    .map(|i| mm.block[0].min(mm.shape[0] - i * mm.block[0]))
                    .collect()
            }
        };
        let mut offsets = vec![0u64];
        for c in counts {
            offsets.push(offsets.last().copied().unwrap_or(0) + c);
        }
        let total = offsets.last().copied().unwrap_or(0);
        let before = self.ints(offsets[..nb as usize].iter().map(|&o| o as i64).collect());
        let xm = self.meta(x).clone();
        let mut shape = xm.shape.clone();
        shape[axis] = total;
        // As many output blocks as the mask has (the selected slices spread evenly), not
        // x's block length: a selection of a sixth of the rows in blocks as long as x's
        // put them in one or two tasks, most of the copying on one thread.
        let mut block = xm.block.clone();
        block[axis] = block[axis].min(total.div_ceil(nb.max(1))).max(1);
        self.add(
            ArrayMeta::new(shape, block, xm.dtype),
            NodeOp::Compress {
                x,
                mask,
                axis,
                before,
                offsets: Arc::new(offsets),
            },
        )
    }

    /// A 1-D int64 array of known `values`, a block each ([`NodeOp::Ints`]).
    fn ints(&mut self, values: Vec<i64>) -> NodeId {
        self.add(
            ArrayMeta::new(vec![values.len() as u64], vec![1], DType::Int64),
            NodeOp::Ints {
                values: Arc::new(values),
            },
        )
    }

    /// `x.take(idx, axis)` for an int array `idx` of any shape and length (negatives
    /// count from the end), which takes the place of `axis` in the result (NumPy's): how
    /// many indices of each block of idx fall in each block of x is computed first (a
    /// stage), then each output block gathers from the blocks of x its indices hit, a
    /// term each. The driver holds those counts, never the indices. An index out of
    /// bounds is an error (NumPy's message).
    pub(in crate::graph) fn gather(
        &mut self,
        x: NodeId,
        idx: NodeId,
        axis: usize,
    ) -> Result<NodeId, String> {
        let xm = self.meta(x).clone();
        let im = self.meta(idx).clone();
        if !im.dtype.is_int() {
            return Err(format!(
                "an index array of dtype {} is not integers",
                im.dtype
            ));
        }
        let len = xm.shape[axis];
        let flat = self.reshape(idx, &[im.len()]);
        // Output blocks no longer than x's along the axis (as much memory as its blocks).
        let fb = self.meta(flat).block[0].min(xm.block[axis]).max(1);
        let flat = self.rechunk(flat, vec![fb]);
        let fm = self.meta(flat).clone();
        let (nj, xb, nxb) = (fm.grid()[0], xm.block[axis].max(1), xm.grid()[axis]);
        let hits_node = self.add(
            ArrayMeta::new(vec![nj, nxb + 2], vec![1, nxb + 2], DType::Int64),
            NodeOp::IndexHits {
                idx: flat,
                len,
                block: xb,
            },
        );
        let hits: Vec<Vec<u32>> = match self.values.get(&hits_node) {
            Some(v) => {
                let v = v.to_i64();
                let v = v.as_slice().expect("a block is standard layout").to_vec();
                let row = (nxb + 2) as usize;
                let mut hits = Vec::with_capacity(nj as usize);
                for r in v.chunks(row) {
                    let (lo, hi) = (r[row - 2], r[row - 1]);
                    let n = len as i64;
                    // An empty block of indices has lo > hi.
                    if lo <= hi && (lo < -n || hi >= n) {
                        let bad = if hi >= n { hi } else { lo };
                        return Err(format!(
                            "index {bad} is out of bounds for axis {axis} with size {len}"
                        ));
                    }
                    hits.push((0..nxb as u32).filter(|&i| r[i as usize] > 0).collect());
                }
                hits
            }
            None => {
                self.need_values.get_or_insert(hits_node);
                // Until known: every block of x for each block of indices (the largest
                // plan), or for plans too large to list, the blocks in proportion.
                (0..nj)
                    .map(|j| {
                        if nj * nxb <= 1 << 20 {
                            (0..nxb as u32).collect()
                        } else {
                            let lo = j * nxb / nj.max(1);
                            let hi = ((j + 1) * nxb).div_ceil(nj.max(1)).min(nxb);
                            (lo as u32..hi as u32).collect()
                        }
                    })
                    .collect()
            }
        };
        let starts = self.ints((0..nxb).map(|i| (i * xb) as i64).collect());
        let mut shape = xm.shape.clone();
        shape[axis] = fm.shape[0];
        let mut block = xm.block.clone();
        block[axis] = fm.block[0];
        let g = self.add(
            ArrayMeta::new(shape, block, xm.dtype),
            NodeOp::Gather {
                x,
                idx: flat,
                axis,
                starts,
                hits: Arc::new(hits),
            },
        );
        let out: Vec<u64> = xm.shape[..axis]
            .iter()
            .chain(&im.shape)
            .chain(&xm.shape[axis + 1..])
            .copied()
            .collect();
        Ok(self.reshape(g, &out))
    }

    /// unique of `x` flattened; `equal_nan`: all NaNs are one value (NumPy's unique), else
    /// each is its own (the Array API's).
    pub(super) fn unique_parts(
        &mut self,
        x: NodeId,
        equal_nan: bool,
        want_index: bool,
        want_inverse: bool,
        want_counts: bool,
        pos: usize,
    ) -> Result<Unique, EvalError> {
        let m = self.meta(x).clone();
        let n = m.len();
        let flat = self.reshape(x, &[n]);
        if !(want_index || want_inverse || m.dtype.is_complex() || n == 0)
            && let Some(u) = self.unique_by_counts(flat, equal_nan, want_counts)
        {
            return Ok(u);
        }
        let sorted = self.sort_along(flat, 0, false, false, pos)?;
        // A value starts where it differs from the one before (the first always does).
        let first = self.add(
            ArrayMeta::new(vec![n.min(1)], vec![1], DType::Bool),
            NodeOp::Fill {
                value: Scalar::Bool(true),
            },
        );
        let flags = if n > 1 {
            let hi = self.slice(sorted, &[(0, 1, n - 1)]);
            let lo = self.slice(sorted, &[(0, 0, n - 1)]);
            let mut neq = self.elementwise2(BinaryOp::Ne, Val::Arr(hi), Val::Arr(lo), pos)?;
            if equal_nan && !m.dtype.is_exact() {
                let a = self.unary(UnaryOp::IsNan, Val::Arr(hi), pos)?;
                let b = self.unary(UnaryOp::IsNan, Val::Arr(lo), pos)?;
                let both = self.elementwise2(BinaryOp::And, a, b, pos)?;
                let not_both = self.unary(UnaryOp::Not, both, pos)?;
                neq = self.elementwise2(BinaryOp::And, neq, not_both, pos)?;
            }
            let neq = self.node(neq, pos)?;
            self.concat(vec![first, neq], 0, pos)?
        } else {
            first
        };
        let values = self.compress(sorted, flags);
        let index = if want_index {
            let perm = self.sort_along(flat, 0, false, true, pos)?;
            Some(self.compress(perm, flags))
        } else {
            None
        };
        let counts = if want_counts {
            let fm = self.meta(flags).clone();
            let iota = self.add(
                ArrayMeta {
                    dtype: DType::Int64,
                    ..fm
                },
                NodeOp::Iota {
                    axis: 0,
                    start: Scalar::Int(0),
                    step: Scalar::Int(1),
                    last: None,
                },
            );
            let starts = self.compress(iota, flags);
            let end = self.add(
                ArrayMeta::new(vec![1], vec![1], DType::Int64),
                NodeOp::Fill {
                    value: Scalar::Int(n as i64),
                },
            );
            let bounds = self.concat(vec![starts, end], 0, pos)?;
            let k = self.meta(bounds).shape[0];
            let hi = self.slice(bounds, &[(0, 1, k - 1)]);
            let lo = self.slice(bounds, &[(0, 0, k - 1)]);
            let c = self.elementwise2(BinaryOp::Sub, Val::Arr(hi), Val::Arr(lo), pos)?;
            Some(self.node(c, pos)?)
        } else {
            None
        };
        let inverse = if want_inverse {
            let mut inv = Val::Arr(self.searchsorted(values, Val::Arr(flat), false, pos)?);
            let k = self.meta(values).shape[0];
            if equal_nan && m.dtype.is_complex() && k > 0 {
                // Every NaN is the one NaN value, the last; NaNs of another class (a NaN
                // real part rather than imaginary) sort past it.
                inv = self.elementwise2(
                    BinaryOp::Minimum,
                    inv,
                    Val::Num(Scalar::Int(k as i64 - 1)),
                    pos,
                )?;
            } else if !equal_nan && m.dtype.is_complex() {
                // Each NaN is its own value, in the sort's (stable) order, which for complex
                // NaNs is by class and the other part, not by position: a NaN's index is its
                // place in the sorted elements, past the n - k elements that repeat
                // earlier values (every repeat is a number).
                let nan = self.unary(UnaryOp::IsNan, Val::Arr(flat), pos)?;
                let perm = self.sort_along(flat, 0, false, true, pos)?;
                let rank = self.sort_along(perm, 0, false, true, pos)?;
                let at = self.elementwise2(
                    BinaryOp::Add,
                    Val::Arr(rank),
                    Val::Num(Scalar::Int(k as i64 - n as i64)),
                    pos,
                )?;
                inv = self.where_(nan, at, inv, pos)?;
            } else if !equal_nan && !m.dtype.is_exact() {
                // Each NaN is its own value, in the order they come: the first NaN's index
                // plus how many NaNs came before.
                let nan = self.unary(UnaryOp::IsNan, Val::Arr(flat), pos)?;
                let nan = self.node(nan, pos)?;
                let before = self.scan(nan, ReduceOp::Sum, 0, DType::Int64);
                let before = self.elementwise2(
                    BinaryOp::Sub,
                    Val::Arr(before),
                    Val::Num(Scalar::Int(1)),
                    pos,
                )?;
                let add = self.where_(Val::Arr(nan), before, Val::Num(Scalar::Int(0)), pos)?;
                inv = self.elementwise2(BinaryOp::Add, inv, add, pos)?;
            }
            let inv = self.node(inv, pos)?;
            Some(self.reshape(inv, &m.shape))
        } else {
            None
        };
        Ok(Unique {
            values,
            index,
            inverse,
            counts,
        })
    }
}

/// The most distinct values `unique` counts by hashing ([`Builder::unique_by_counts`]):
/// their table (24 bytes a value) is read back by the driver, as a sort's sample is.
const DISTINCT_CAP: u64 = 1024;

impl Builder<'_> {
    /// unique's values (and counts) of the non-empty 1-D `flat` by a hash count of its
    /// blocks, no sort: their table is computed first (a stage) and read back; None when
    /// the values are more than [`DISTINCT_CAP`] (or, with `equal_nan` false, NaNs that
    /// are each their own value): then they are sorted. Until the table is known, the
    /// values are assumed as many as can be.
    fn unique_by_counts(
        &mut self,
        flat: NodeId,
        equal_nan: bool,
        want_counts: bool,
    ) -> Option<Unique> {
        let m = self.meta(flat).clone();
        let rows = vec![DISTINCT_CAP + 1, 3];
        let table = self.add(
            ArrayMeta::new(rows.clone(), rows, DType::Int64),
            NodeOp::DistinctCounts {
                x: flat,
                cap: DISTINCT_CAP,
            },
        );
        let entries = match self.values.get(&table) {
            Some(t) => nums_function::distinct::distinct_entries(t, m.dtype).ok()??,
            None => {
                self.need_values.get_or_insert(table);
                let k = m.len().min(DISTINCT_CAP) as usize;
                vec![(Scalar::Int(0), 0); k]
            }
        };
        let nan_apart = !equal_nan
            && entries
                .iter()
                .any(|(v, c)| *c > 1 && matches!(v, Scalar::Float(f) if f.is_nan()));
        if nan_apart {
            return None;
        }
        let mut constant = |values: Vec<Scalar>, dtype: DType| {
            let k = values.len() as u64;
            self.add(
                ArrayMeta::new(vec![k], vec![k.max(1)], dtype),
                NodeOp::Dense {
                    kernel: Kernel::Constant { values },
                    xs: vec![],
                },
            )
        };
        let values = constant(entries.iter().map(|e| e.0).collect(), m.dtype);
        let counts = want_counts.then(|| {
            constant(
                entries.iter().map(|e| Scalar::Int(e.1)).collect(),
                DType::Int64,
            )
        });
        Some(Unique {
            values,
            index: None,
            inverse: None,
            counts,
        })
    }
}

/// The projected peak (past the base) of a merge that reads `fetched` elements of
/// `size` bytes (with `arg`, and as many positions), its largest run `largest`, for an
/// output of `out` elements (linear in them: the few KiB per block read are left out, as
/// in `sort_limit`).
fn merge_peak(size: u64, arg: bool, fetched: u64, out: u64, largest: u64) -> u64 {
    let (each, out_each) = if arg { (size + 8, 8) } else { (size, size) };
    task_peak(&TaskBlocks::whole(
        fetched * each,
        0,
        largest * each,
        out * out_each,
        merge_scratch(out),
    )) - BASE_MEMORY
}

/// A well-mixed 64-bit hash (SplitMix64's finalizer): the sample positions.
fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A check tied to `v`: `v` itself, or the run fails with `error` (`"ValueError: ..."`)
/// where `fails` (a 0-d bool) is true.
pub(super) fn checked(
    s: &mut Builder,
    v: Val,
    fails: Val,
    error: String,
    pos: usize,
) -> Result<Val, EvalError> {
    let f = s.node(fails, pos)?;
    let f = s.cast(f, DType::Int64);
    let check = s.add(
        s.meta(f).clone(),
        NodeOp::CheckBelow {
            x: f,
            limit: 1,
            error,
        },
    );
    let ok = s.elementwise2(BinaryOp::Eq, Val::Arr(check), Val::Num(Scalar::Int(0)), pos)?;
    s.where_(ok, v.clone(), v, pos)
}

/// NumPy's digitize: `searchsorted(bins, x, side)` for increasing bins, `len(bins) -
/// searchsorted(bins[::-1], x, side)` for decreasing ones (side "right", "left" with
/// `right=True`); bins neither fail the run with NumPy's ValueError.
fn digitize(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, _) = b.need("x")?.clone();
    // `bins` is not array_like in the table (histogram's is a count too): a list here.
    let (bins, p) = b.need("bins")?.clone();
    let bins = match s.list_operand(bins, p)? {
        Val::Arr(id) => id,
        _ => return Err(b.err(p, "digitize(): bins must be a 1-D array or list")),
    };
    let bm = s.meta(bins).clone();
    if bm.ndim() != 1 {
        return Err(b.err(b.pos, "digitize(): bins must be 1-dimensional"));
    }
    let xn = s.node(x.clone(), b.pos)?;
    if s.meta(xn).dtype.is_complex() {
        return Err(b.raising(
            crate::refusal::PyException::TypeError,
            b.pos,
            "digitize(): x may not be complex",
        ));
    }
    let side = Val::Str(if b.flag("right")? { "left" } else { "right" }.into());
    let up = s.apply(
        "searchsorted",
        &[
            ("a", Val::Arr(bins)),
            ("v", x.clone()),
            ("side", side.clone()),
        ],
        b.pos,
    )?;
    if bm.shape[0] < 2 {
        return Ok(up);
    }
    let rev = s.apply(
        "flip",
        &[("m", Val::Arr(bins)), ("axis", Val::Num(Scalar::Int(0)))],
        b.pos,
    )?;
    let down = s.apply(
        "searchsorted",
        &[("a", rev), ("v", x), ("side", side)],
        b.pos,
    )?;
    let n = Val::Num(Scalar::Int(bm.shape[0] as i64));
    let down = s.elementwise2(BinaryOp::Sub, n, down, b.pos)?;
    // Monotonic: every difference >= 0 (increasing) or every one <= 0 (decreasing); a
    // NaN is neither.
    let d = s.apply("diff", &[("a", Val::Arr(bins))], b.pos)?;
    let zero = Val::Num(Scalar::Int(0));
    let all = |s: &mut Builder, v: Val| s.apply("all", &[("a", v)], b.pos);
    let ge = s.elementwise2(BinaryOp::Ge, d.clone(), zero.clone(), b.pos)?;
    let inc = all(s, ge)?;
    let le = s.elementwise2(BinaryOp::Le, d, zero, b.pos)?;
    let dec = all(s, le)?;
    let r = s.where_(inc.clone(), up, down, b.pos)?;
    let mono = s.elementwise2(BinaryOp::Or, inc, dec, b.pos)?;
    let fails = s.unary(UnaryOp::Not, mono, b.pos)?;
    checked(
        s,
        r,
        fails,
        "ValueError: digitize(): bins must be monotonically increasing or decreasing".into(),
        b.pos,
    )
}

/// NumPy's lexsort of 1-D keys: the order that sorts by the last key, ties by the one
/// before, and so on: a stable argsort by the first key, then by each next key in the
/// order so far.
fn lexsort(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let keys: Vec<NodeId> = match b.need("keys")? {
        (Val::Tuple(items), p) => items
            .iter()
            .map(|v| match s.list_operand(v.clone(), *p)? {
                Val::Arr(id) => Ok(id),
                _ => Err(b.err(*p, "lexsort(): keys are arrays")),
            })
            .collect::<Result<_, _>>()?,
        // A 2-D array: its rows are the keys.
        (Val::Arr(id), p) => {
            let m = s.meta(*id).clone();
            if m.ndim() != 2 {
                return Err(b.err(*p, "lexsort(): keys are 1-D arrays, or a 2-D array's rows"));
            }
            (0..m.shape[0])
                .map(|i| {
                    let r = s.apply(
                        "take",
                        &[
                            ("a", Val::Arr(*id)),
                            ("indices", Val::Num(Scalar::Int(i as i64))),
                            ("axis", Val::Num(Scalar::Int(0))),
                        ],
                        b.pos,
                    )?;
                    s.node(r, b.pos)
                })
                .collect::<Result<_, _>>()?
        }
        (_, p) => return Err(b.err(*p, "lexsort(): keys are a tuple of arrays")),
    };
    if let Some((v, p)) = b.get("axis")
        && !matches!(v, Val::Num(x) if matches!(x.integer(), Some(-1 | 0)))
    {
        return Err(b.err(*p, "lexsort(): keys are 1-D: axis is -1 (or 0)"));
    }
    let Some(&first) = keys.first() else {
        return Err(b.raising(
            crate::refusal::PyException::TypeError,
            b.pos,
            "lexsort(): need sequence of keys with len > 0 in lexsort",
        ));
    };
    let n = s.meta(first).shape.clone();
    for &k in &keys {
        let m = s.meta(k);
        if m.ndim() != 1 || m.shape != n {
            return Err(b.err(
                b.pos,
                format!(
                    "lexsort(): keys are 1-D of one length; got shapes {} and {}",
                    shape_str(&n),
                    shape_str(&m.shape)
                ),
            ));
        }
    }
    let argsort = |s: &mut Builder, k: Val| {
        s.apply(
            "argsort",
            &[("a", k), ("kind", Val::Str("stable".into()))],
            b.pos,
        )
    };
    let mut order = argsort(s, Val::Arr(first))?;
    for &k in &keys[1..] {
        let in_order = s.apply(
            "take",
            &[("a", Val::Arr(k)), ("indices", order.clone())],
            b.pos,
        )?;
        let by = argsort(s, in_order)?;
        order = s.apply("take", &[("a", order), ("indices", by)], b.pos)?;
    }
    Ok(order)
}
