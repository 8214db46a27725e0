//! The array graph: every array of a job (named or an anonymous sub-expression) as a node
//! with its shape, block grid and dtype, checked before anything runs.

use std::collections::HashMap;

use nums_layout::batch::{BinaryOp, RandomDist, ReduceOp, UnaryOp};
use nums_layout::meta::ScalarKind;
use nums_layout::{ArrayMeta, DType, StoreSpec};

use crate::expr::{self, Expr, ExprError, ExprKind, Op, UnOp};
use crate::job::{ArrayDef, Job, JobError, Source};

mod funcs;
pub use funcs::SUPPORTED_FUNCTIONS;

pub type NodeId = usize;

/// How a node's blocks come to be.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeOp {
    Random {
        dist: RandomDist,
        seed: u64,
    },
    Fill {
        value: f64,
    },
    /// `start + step * index along axis` (arange, linspace, index arrays).
    Iota {
        axis: usize,
        start: f64,
        step: f64,
    },
    /// 1 on the `k`-th diagonal.
    Eye {
        k: i64,
    },
    /// A `.npy` file the driver imports into the store.
    ImportNpy {
        path: String,
    },
    /// A `.csv` file of numbers the driver imports into the store.
    ImportCsv {
        path: String,
    },
    /// A Zarr array already in the job's store, encoded as nums-cloud encodes: read in
    /// place by the functions, never copied or written.
    Stored {
        path: String,
    },
    /// A Zarr v3 array the driver imports (re-blocked) into the job's prefix.
    ImportZarr {
        store: StoreSpec,
        path: String,
    },
    Unary {
        op: UnaryOp,
        x: NodeId,
    },
    Binary {
        op: BinaryOp,
        a: NodeId,
        b: NodeId,
    },
    Scalar {
        op: BinaryOp,
        x: NodeId,
        value: f64,
        scalar_left: bool,
    },
    Where {
        c: NodeId,
        a: NodeId,
        b: NodeId,
    },
    /// An Einstein sum (explicit output) of the operands; every letter has one block size.
    Einsum {
        subscripts: String,
        xs: Vec<NodeId>,
    },
    /// Output axis i is input axis `perm[i]`.
    Transpose {
        x: NodeId,
        perm: Vec<usize>,
    },
    Reduce {
        x: NodeId,
        op: ReduceOp,
        axes: Vec<usize>,
    },
    /// The same values in another block grid or dtype.
    Rechunk {
        x: NodeId,
    },
    /// The same elements in C order under another shape. Either only axes of length 1
    /// differ (blocks map one to one), or both arrays are blocked along axis 0 only.
    Reshape {
        x: NodeId,
    },
    /// Output element `p` is input element `start + p * step` along every axis.
    Slice {
        x: NodeId,
        start: Vec<i64>,
        step: Vec<i64>,
    },
    /// The operands one after another along `axis`.
    Concat {
        xs: Vec<NodeId>,
        axis: usize,
    },
    /// The slices `indices` of `x` along `axis` (an integer list, or a boolean mask once
    /// its values are known).
    Take {
        x: NodeId,
        axis: usize,
        indices: Vec<u64>,
    },
}

impl NodeOp {
    pub fn inputs(&self) -> Vec<NodeId> {
        match self {
            NodeOp::Random { .. }
            | NodeOp::Fill { .. }
            | NodeOp::Iota { .. }
            | NodeOp::Eye { .. }
            | NodeOp::ImportNpy { .. }
            | NodeOp::ImportCsv { .. }
            | NodeOp::ImportZarr { .. }
            | NodeOp::Stored { .. } => vec![],
            NodeOp::Unary { x, .. }
            | NodeOp::Scalar { x, .. }
            | NodeOp::Transpose { x, .. }
            | NodeOp::Reduce { x, .. }
            | NodeOp::Rechunk { x }
            | NodeOp::Reshape { x }
            | NodeOp::Slice { x, .. }
            | NodeOp::Take { x, .. } => vec![*x],
            NodeOp::Binary { a, b, .. } => vec![*a, *b],
            NodeOp::Where { c, a, b } => vec![*c, *a, *b],
            NodeOp::Einsum { xs, .. } | NodeOp::Concat { xs, .. } => xs.clone(),
        }
    }

    /// Renames the inputs (for a sub-graph).
    fn map_inputs(&mut self, f: impl Fn(NodeId) -> NodeId) {
        match self {
            NodeOp::Unary { x, .. }
            | NodeOp::Scalar { x, .. }
            | NodeOp::Transpose { x, .. }
            | NodeOp::Reduce { x, .. }
            | NodeOp::Rechunk { x }
            | NodeOp::Reshape { x }
            | NodeOp::Slice { x, .. }
            | NodeOp::Take { x, .. } => *x = f(*x),
            NodeOp::Binary { a, b, .. } => {
                *a = f(*a);
                *b = f(*b);
            }
            NodeOp::Where { c, a, b } => {
                *c = f(*c);
                *a = f(*a);
                *b = f(*b);
            }
            NodeOp::Einsum { xs, .. } | NodeOp::Concat { xs, .. } => {
                for x in xs {
                    *x = f(*x);
                }
            }
            _ => {}
        }
    }

    /// Blocks that are in the store before any task runs (imported or read in place).
    pub fn is_stored_input(&self) -> bool {
        self.is_import() || matches!(self, NodeOp::Stored { .. })
    }

    pub fn is_import(&self) -> bool {
        matches!(
            self,
            NodeOp::ImportNpy { .. } | NodeOp::ImportCsv { .. } | NodeOp::ImportZarr { .. }
        )
    }
}

#[derive(Debug, Clone)]
pub struct Node {
    pub id: NodeId,
    pub meta: ArrayMeta,
    pub op: NodeOp,
    /// The job-file name of this node, if any.
    pub name: Option<String>,
    /// Kept in the store under `<job>/<name>` after the job: the job's outputs and imported
    /// inputs. Every other array is an intermediate, written only where another invocation
    /// needs it and removed when the job ends.
    pub stored: bool,
}

impl Node {
    pub fn stored_name(&self) -> Option<&str> {
        self.name.as_deref().filter(|_| self.stored)
    }
}

/// All arrays of a job, in an order where inputs come first.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    pub nodes: Vec<Node>,
    pub named: HashMap<String, NodeId>,
}

impl Graph {
    /// The nodes `target` depends on (and it), renumbered, with only `target` and the
    /// imports kept in the store; `target` is stored under `<job>/<name>`.
    pub fn subgraph(&self, target: NodeId, name: &str) -> (Graph, NodeId) {
        let mut need = vec![false; self.nodes.len()];
        need[target] = true;
        for id in (0..=target).rev() {
            if need[id] {
                for i in self.nodes[id].op.inputs() {
                    need[i] = true;
                }
            }
        }
        let mut map = vec![usize::MAX; self.nodes.len()];
        let mut g = Graph::default();
        for n in self.nodes.iter().filter(|n| need[n.id]) {
            map[n.id] = g.nodes.len();
            let mut op = n.op.clone();
            op.map_inputs(|x| map[x]);
            let keep = n.id == target || op.is_import();
            let id = g.nodes.len();
            let name = if n.id == target {
                Some(name.to_string())
            } else {
                n.name.clone()
            };
            if let Some(nm) = &name {
                g.named.insert(nm.clone(), id);
            }
            g.nodes.push(Node {
                id,
                meta: n.meta.clone(),
                op,
                name,
                stored: keep,
            });
        }
        (g, map[target])
    }
}

/// What staged building found: the whole graph, or a boolean mask whose values the rest
/// depends on (computed first from `graph`, whose nodes up to `mask` are final).
pub enum Built {
    Done(Graph),
    NeedMask { graph: Graph, mask: NodeId },
}

/// How big a default block may be: a block should be a small part of what one invocation
/// holds, and blocks should spread over the workers.
pub fn default_block(shape: &[u64], dtype: DType, workers: usize, memory_mb: u64) -> Vec<u64> {
    let target = (memory_mb << 20) / 16;
    let target = target.clamp(1 << 16, 64 << 20);
    let elems = (target / dtype.size() as u64).max(1);
    let mut block = shape.to_vec();
    if shape.is_empty() {
        return block;
    }
    // Split rows so that every worker gets some, then further until a block fits the target.
    let per_row: u64 = shape[1..].iter().product::<u64>().max(1);
    let rows = shape[0].max(1);
    let mut r = rows.div_ceil(workers as u64).max(1);
    if rows * per_row * (dtype.size() as u64) < (1 << 20) {
        r = rows; // small arrays: one block
    }
    r = r.min((elems / per_row).max(1));
    block[0] = r;
    // A single row larger than the target: split the trailing axes as well.
    let mut d = shape.len() - 1;
    while d > 0 && block.iter().product::<u64>() > elems {
        let others: u64 = block
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != d)
            .map(|(_, b)| *b)
            .product();
        block[d] = (elems / others.max(1)).max(1).min(shape[d]);
        d -= 1;
    }
    block
        .iter()
        .zip(shape)
        .map(|(&b, &s)| b.min(s).max(1))
        .collect()
}

#[derive(Debug, Clone)]
enum Val {
    Num(f64, ScalarKind),
    Arr(NodeId),
    Tuple(Vec<Val>),
    Str(String),
    None,
}

struct Builder<'a> {
    job: &'a Job,
    g: Graph,
    /// Positions selected by boolean masks computed so far, by mask node.
    masks: &'a HashMap<NodeId, Vec<u64>>,
    /// The first mask whose values are not known yet (its selection assumed all true).
    need: Option<NodeId>,
    defs: HashMap<&'a str, &'a ArrayDef>,
    /// Names being resolved, for cycle reports.
    stack: Vec<String>,
}

/// Builds and checks the graph of a job: unknown names, cycles, shapes and dtypes. A
/// boolean mask is assumed to select everything (the largest shape: what `check` and
/// `plan` show).
pub fn build(job: &Job) -> Result<Graph, JobError> {
    match build_staged(job, &HashMap::new())? {
        Built::Done(g) | Built::NeedMask { graph: g, .. } => Ok(g),
    }
}

/// Like [`build`], with the selections of the masks computed so far.
pub fn build_staged(job: &Job, masks: &HashMap<NodeId, Vec<u64>>) -> Result<Built, JobError> {
    let mut b = Builder {
        job,
        masks,
        need: None,
        g: Graph::default(),
        defs: job.arrays.iter().map(|a| (a.name.as_str(), a)).collect(),
        stack: Vec::new(),
    };
    for a in &job.arrays {
        b.resolve(a)?;
    }
    let b_need = b.need;
    let mut g = b.g;
    for o in &job.outputs {
        let id = g.named[&o.name];
        g.nodes[id].stored = true;
    }
    for n in &mut g.nodes {
        n.stored |= n.op.is_import();
    }
    Ok(match b_need {
        Some(mask) => Built::NeedMask { graph: g, mask },
        None => Built::Done(g),
    })
}

fn shape_str(s: &[u64]) -> String {
    match s {
        [x] => format!("({x},)"),
        _ => format!(
            "({})",
            s.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
        ),
    }
}

impl<'a> Builder<'a> {
    fn add(&mut self, meta: ArrayMeta, op: NodeOp) -> NodeId {
        let id = self.g.nodes.len();
        self.g.nodes.push(Node {
            id,
            meta,
            op,
            name: None,
            stored: false,
        });
        id
    }

    fn meta(&self, id: NodeId) -> &ArrayMeta {
        &self.g.nodes[id].meta
    }

    fn default_meta(&self, shape: Vec<u64>, dtype: DType) -> ArrayMeta {
        let c = &self.job.compute;
        let block = default_block(&shape, dtype, c.workers, c.memory_mb);
        ArrayMeta::new(shape, block, dtype)
    }

    fn resolve(&mut self, def: &'a ArrayDef) -> Result<NodeId, JobError> {
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
        let leaf_meta = |shape: Vec<u64>, dtype: DType, b: &Builder| -> ArrayMeta {
            match &def.block {
                Some(bl) => ArrayMeta::new(shape, bl.clone(), dtype),
                None => b.default_meta(shape, dtype),
            }
        };
        let id = match &def.source {
            Source::Random { dist, shape, seed } => {
                check_block(&def.block, shape)?;
                let natural = match dist {
                    RandomDist::Integers { .. } => DType::Int64,
                    _ => DType::Float64,
                };
                let dtype = def.dtype.unwrap_or(natural);
                if dtype == DType::Bool || (natural == DType::Int64) != (dtype == DType::Int64) {
                    return Err(self.job.err(
                        def.line,
                        format!("{key}.dtype"),
                        format!(
                            "random {} arrays are {natural}; convert with astype in an expression",
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
                    },
                )
            }
            Source::Full { shape, value } => {
                check_block(&def.block, shape)?;
                let m = leaf_meta(shape.clone(), def.dtype.unwrap_or(DType::Float64), self);
                self.add(m, NodeOp::Fill { value: *value })
            }
            Source::Load { path } => {
                let (shape, dtype, op) = if path.ends_with(".csv") && !path.starts_with("s3://") {
                    let b = crate::npy::read_csv(std::path::Path::new(path))
                        .map_err(|m| self.job.err(def.line, format!("{key}.load"), m))?;
                    let shape = b.shape().iter().map(|&s| s as u64).collect();
                    (
                        shape,
                        DType::Float64,
                        NodeOp::ImportCsv { path: path.clone() },
                    )
                } else if path.starts_with("s3://") || !path.ends_with(".npy") {
                    let (store, apath) = split_zarr_location(path, &self.job.storage);
                    let arr = load_zarr_meta(&store, &apath)
                        .map_err(|m| self.job.err(def.line, format!("{key}.load"), m))?;
                    if let Some(rel) = relative_to(&self.job.storage, &store, &apath)
                        && arr.native
                    {
                        // In the job's own store and in nums-cloud's encoding: read it in place,
                        // re-blocked (by tasks) only where the job asks for other blocks.
                        check_block(&def.block, &arr.meta.shape)?;
                        let mut id = self.add(arr.meta.clone(), NodeOp::Stored { path: rel });
                        let want = ArrayMeta::new(
                            arr.meta.shape.clone(),
                            def.block.clone().unwrap_or(arr.meta.block.clone()),
                            def.dtype.unwrap_or(arr.meta.dtype),
                        );
                        if want != arr.meta {
                            id = self.add(want, NodeOp::Rechunk { x: id });
                        }
                        self.stack.pop();
                        self.g.nodes[id].name = Some(def.name.clone());
                        self.g.named.insert(def.name.clone(), id);
                        return Ok(id);
                    }
                    let m = arr.meta;
                    (m.shape, m.dtype, NodeOp::ImportZarr { store, path: apath })
                } else {
                    let h = crate::npy::read_header(std::path::Path::new(path))
                        .map_err(|m| self.job.err(def.line, format!("{key}.load"), m))?;
                    let dtype = h.dtype().map_err(|m| {
                        self.job
                            .err(def.line, format!("{key}.load"), format!("{path}: {m}"))
                    })?;
                    (h.shape, dtype, NodeOp::ImportNpy { path: path.clone() })
                };
                check_block(&def.block, &shape)?;
                let m = leaf_meta(shape, def.dtype.unwrap_or(dtype), self);
                self.add(m, op)
            }
            Source::Expr { text } => {
                let e = expr::parse(text).map_err(|e| err(e.render(text)))?;
                let v = self.eval(&e).map_err(|e| match e {
                    EvalError::Expr(x) => err(x.render(text)),
                    EvalError::Job(j) => j,
                })?;
                let mut id = match v {
                    Val::Arr(id) => id,
                    Val::Num(x, k) => self.scalar_node(x, DType::of_kind(k)),
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
                    id = self.add(want, NodeOp::Rechunk { x: id });
                }
                id
            }
        };
        self.stack.pop();
        self.g.nodes[id].name = Some(def.name.clone());
        self.g.named.insert(def.name.clone(), id);
        Ok(id)
    }

    fn eval(&mut self, e: &Expr) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(e.pos, m));
        Ok(match &e.kind {
            ExprKind::Num(v) => Val::Num(*v, ScalarKind::Float),
            ExprKind::Int(v) => Val::Num(*v as f64, ScalarKind::Int),
            ExprKind::Bool(b) => Val::Num(*b as u8 as f64, ScalarKind::Bool),
            ExprKind::Str(s) => Val::Str(s.clone()),
            ExprKind::None => Val::None,
            ExprKind::Name(n) => match self.defs.get(n.as_str()) {
                Some(def) => Val::Arr(self.resolve(def).map_err(EvalError::Job)?),
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
                let v = self.eval(x)?;
                match (op, v) {
                    (UnOp::Pos, v) => v,
                    (UnOp::Neg, Val::Num(x, k)) => Val::Num(-x, k.max(ScalarKind::Int)),
                    (UnOp::Invert, Val::Num(x, ScalarKind::Bool)) => {
                        Val::Num((x == 0.0) as u8 as f64, ScalarKind::Bool)
                    }
                    (UnOp::Neg, v @ Val::Arr(_)) => self.unary(UnaryOp::Neg, v, e.pos)?,
                    (UnOp::Invert, v @ Val::Arr(_)) => self.unary(UnaryOp::Not, v, e.pos)?,
                    _ => return Err(at("~ needs a bool, - a number or an array".into())),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (va, vb) = (self.eval(a)?, self.eval(b)?);
                self.binary(*op, va, vb, e.pos)?
            }
            ExprKind::Attr(x, attr) => {
                if let ExprKind::Name(n) = &x.kind
                    && (n == "np" || n == "numpy")
                {
                    return match attr.as_str() {
                        "pi" => Ok(Val::Num(std::f64::consts::PI, ScalarKind::Float)),
                        "e" => Ok(Val::Num(std::f64::consts::E, ScalarKind::Float)),
                        "inf" => Ok(Val::Num(f64::INFINITY, ScalarKind::Float)),
                        "nan" => Ok(Val::Num(f64::NAN, ScalarKind::Float)),
                        "newaxis" => Ok(Val::None),
                        a => Err(at(format!(
                            "unknown constant np.{a}; supported: np.pi, np.e, np.inf, np.nan, np.newaxis"
                        ))),
                    };
                }
                let v = self.eval(x)?;
                let Val::Arr(id) = v else {
                    return Err(at(format!("only arrays have the attribute .{attr}")));
                };
                let m = self.meta(id).clone();
                let int = |v: u64| Val::Num(v as f64, ScalarKind::Int);
                match attr.as_str() {
                    "T" => Val::Arr(self.transpose(id, (0..m.ndim()).rev().collect())),
                    "shape" => Val::Tuple(m.shape.iter().map(|&s| int(s)).collect()),
                    "ndim" => int(m.ndim() as u64),
                    "size" => int(m.len()),
                    a => {
                        return Err(at(format!(
                            "unknown attribute .{a}; supported: .T, .shape, .ndim, .size"
                        )));
                    }
                }
            }
            ExprKind::Call(f, args, kwargs) => self.call(f, args, kwargs, e.pos)?,
            ExprKind::Index(x, items) => match self.eval(x)? {
                Val::Arr(id) => self.index(id, items)?,
                Val::Tuple(t) => {
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
    fn int(&mut self, e: &Expr) -> Result<i64, EvalError> {
        match self.eval(e)? {
            Val::Num(v, k) if k != ScalarKind::Float || v.fract() == 0.0 => Ok(v as i64),
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
    fn index(&mut self, x: NodeId, items: &[Expr]) -> Result<Val, EvalError> {
        let m = self.meta(x).clone();
        // `...` stands for the whole axes the other items leave.
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
        let expanded: Vec<Expr>;
        let items = if let Some(dot) = dots.first() {
            let used = items
                .iter()
                .filter(|i| !matches!(i.kind, ExprKind::None | ExprKind::Ellipsis))
                .count();
            let whole = Expr {
                kind: ExprKind::Slice(None, None, None),
                pos: dot.pos,
            };
            expanded = items
                .iter()
                .flat_map(|i| match i.kind {
                    ExprKind::Ellipsis => vec![whole.clone(); m.ndim().saturating_sub(used)],
                    _ => vec![i.clone()],
                })
                .collect();
            expanded.as_slice()
        } else {
            items
        };
        let (mut start, mut step, mut len) = (Vec::new(), Vec::new(), Vec::new());
        // Output axes: Some(d) is source axis d, None a new axis of length 1.
        let mut out: Vec<Option<usize>> = Vec::new();
        let mut takes: Vec<(usize, Vec<u64>, usize)> = Vec::new();
        let mut d = 0;
        for it in items {
            let err = |m: String| EvalError::Expr(ExprError::new(it.pos, m));
            if matches!(it.kind, ExprKind::None) {
                out.push(None);
                continue;
            }
            if d >= m.ndim() {
                return Err(err(format!(
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
                    if l == 0 {
                        return Err(err(format!(
                            "this slice of axis {d} (size {n}) is empty; nums-cloud arrays are not empty"
                        )));
                    }
                    start.push(s0);
                    step.push(st);
                    len.push(l as u64);
                    out.push(Some(d));
                }
                _ => match self.eval(it)? {
                    Val::Num(v, k) if k != ScalarKind::Float => {
                        let i = v as i64;
                        if i < -n || i >= n {
                            return Err(err(format!(
                                "index {i} is out of bounds for axis {d} with size {n}"
                            )));
                        }
                        start.push(i.rem_euclid(n));
                        step.push(1);
                        len.push(1);
                    }
                    Val::Tuple(items) => {
                        // An integer list: those slices, in that order.
                        let mut idx = Vec::new();
                        for v in items {
                            match v {
                                Val::Num(i, k) if k != ScalarKind::Float => {
                                    let i = i as i64;
                                    if i < -n || i >= n {
                                        return Err(err(format!(
                                            "index {i} is out of bounds for axis {d} with size {n}"
                                        )));
                                    }
                                    idx.push(i.rem_euclid(n) as u64);
                                }
                                _ => return Err(err("an index list holds integers".into())),
                            }
                        }
                        if idx.is_empty() {
                            return Err(err("an empty index list selects nothing".into()));
                        }
                        takes.push((d, idx, it.pos));
                        whole(&mut start, &mut step, &mut len);
                        out.push(Some(d));
                    }
                    Val::Arr(mask) => {
                        let mm = self.meta(mask).clone();
                        if mm.dtype != DType::Bool || mm.shape != [m.shape[d]] {
                            return Err(err(format!(
                                "an array index must be a 1-D bool mask as long as axis {d} ({n}); got {} {}",
                                mm.dtype,
                                shape_str(&mm.shape)
                            )));
                        }
                        let idx = match self.masks.get(&mask) {
                            Some(idx) => idx.clone(),
                            None => {
                                // Not known until the mask is computed: assume all.
                                self.need.get_or_insert(mask);
                                (0..m.shape[d]).collect()
                            }
                        };
                        takes.push((d, idx, it.pos));
                        whole(&mut start, &mut step, &mut len);
                        out.push(Some(d));
                    }
                    _ => {
                        return Err(err(
                            "an index is an integer, a slice, None, an integer list or a bool mask"
                                .into(),
                        ));
                    }
                },
            }
            d += 1;
        }
        for k in d..m.ndim() {
            start.push(0);
            step.push(1);
            len.push(m.shape[k]);
            out.push(Some(k));
        }
        // NumPy's rules for several advanced indices (broadcast together, moved to the
        // front) are not implemented: one list or mask, and no integer beside it.
        let ints = out.iter().flatten().count() < m.ndim();
        if takes.len() > 1 || (!takes.is_empty() && ints) {
            return Err(EvalError::Expr(ExprError::new(
                takes.last().map_or(0, |t| t.2),
                "only one integer list or bool mask per index, and no integer beside it",
            )));
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
        for (axis, indices, pos) in takes {
            if indices.is_empty() {
                return Err(EvalError::Expr(ExprError::new(
                    pos,
                    "the mask selects nothing; nums-cloud arrays are not empty",
                )));
            }
            let t = self.meta(id).clone();
            let mut shape = t.shape.clone();
            shape[axis] = indices.len() as u64;
            id = self.add(
                ArrayMeta::new(shape, t.block, t.dtype),
                NodeOp::Take {
                    x: id,
                    axis,
                    indices,
                },
            );
        }
        let now = self.meta(id).shape.clone();
        let shape: Vec<u64> = out.iter().map(|a| a.map_or(1, |d| now[d])).collect();
        Ok(Val::Arr(self.reshape(id, &shape)))
    }

    fn known(&self) -> String {
        let mut names: Vec<&str> = self.defs.keys().copied().collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// An operand as a node: numbers become 0-d arrays of their kind's dtype.
    fn node(&mut self, v: Val, pos: usize) -> Result<NodeId, EvalError> {
        match v {
            Val::Arr(id) => Ok(id),
            Val::Num(x, k) => Ok(self.scalar_node(x, DType::of_kind(k))),
            _ => Err(EvalError::Expr(ExprError::new(
                pos,
                "expected an array or a number",
            ))),
        }
    }

    fn scalar_node(&mut self, value: f64, dtype: DType) -> NodeId {
        self.add(
            ArrayMeta::new(vec![], vec![], dtype),
            NodeOp::Fill { value },
        )
    }

    /// `x` in `dtype` (a new node only where it differs).
    fn cast(&mut self, x: NodeId, dtype: DType) -> NodeId {
        let m = self.meta(x).clone();
        if m.dtype == dtype {
            return x;
        }
        self.add(ArrayMeta { dtype, ..m }, NodeOp::Rechunk { x })
    }

    fn unary(&mut self, op: UnaryOp, v: Val, pos: usize) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let x = match v {
            Val::Num(x, k) => {
                let kind = if op.is_predicate() {
                    ScalarKind::Bool
                } else if op.keeps_ints() {
                    k.max(ScalarKind::Int)
                } else {
                    ScalarKind::Float
                };
                return Ok(Val::Num(op.apply(x), kind));
            }
            Val::Arr(id) => id,
            _ => return Err(at("expected an array or a number".into())),
        };
        let dt = self.meta(x).dtype;
        let dtype = match (op, dt) {
            (UnaryOp::Not, DType::Bool) => DType::Bool,
            (UnaryOp::Not, d) => {
                return Err(at(format!(
                    "~ and logical_not need a bool array; got {d} (bitwise invert is not supported)"
                )));
            }
            (UnaryOp::Neg, DType::Bool) => {
                return Err(at(
                    "the - operator is not supported for bool arrays (NumPy refuses it); use ~"
                        .into(),
                ));
            }
            (UnaryOp::Sign, DType::Bool) => {
                return Err(at(
                    "sign is not defined for bool arrays (NumPy refuses it)".into()
                ));
            }
            (op, _) if op.is_predicate() => DType::Bool,
            (op, d) if op.keeps_ints() && !d.is_float() => d,
            (UnaryOp::Floor | UnaryOp::Ceil, d) if !d.is_float() => d,
            (_, d) => d.to_float(),
        };
        let m = self.meta(x).clone();
        Ok(Val::Arr(
            self.add(ArrayMeta { dtype, ..m }, NodeOp::Unary { op, x }),
        ))
    }

    fn binary(&mut self, op: Op, a: Val, b: Val, pos: usize) -> Result<Val, EvalError> {
        let bop = match op {
            Op::Add => BinaryOp::Add,
            Op::Sub => BinaryOp::Sub,
            Op::Mul => BinaryOp::Mul,
            Op::Div => BinaryOp::Div,
            Op::Pow => BinaryOp::Pow,
            Op::Lt => BinaryOp::Lt,
            Op::Le => BinaryOp::Le,
            Op::Gt => BinaryOp::Gt,
            Op::Ge => BinaryOp::Ge,
            Op::Eq => BinaryOp::Eq,
            Op::Ne => BinaryOp::Ne,
            Op::And => BinaryOp::And,
            Op::Or => BinaryOp::Or,
            Op::Xor => BinaryOp::Xor,
            Op::MatMul => {
                let (Val::Arr(x), Val::Arr(y)) = (a, b) else {
                    return Err(EvalError::Expr(ExprError::new(pos, "@ needs two arrays")));
                };
                return self.matmul(x, y, pos);
            }
            Op::FloorDiv => BinaryOp::FloorDiv,
            Op::Mod => BinaryOp::Mod,
        };
        self.elementwise2(bop, a, b, pos)
    }

    /// The dtype NumPy gives `op` of two operands (arrays, or Python scalars that are weak).
    fn result_dtype(
        &self,
        op: BinaryOp,
        a: (DType, bool),
        b: (DType, bool),
        pos: usize,
    ) -> Result<DType, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        // A scalar operand (weak) takes the array's dtype where its kind fits.
        let common = match (a, b) {
            ((x, false), (y, false)) => x.promote(y),
            ((x, false), (y, true)) => x.promote_scalar(y.kind()),
            ((x, true), (y, false)) => y.promote_scalar(x.kind()),
            ((x, true), (y, true)) => x.promote(y),
        };
        Ok(match op {
            _ if op.is_logical() => {
                if common != DType::Bool {
                    return Err(at(format!(
                        "{} needs bool operands; got {} and {} (bitwise ops on numbers are not supported)",
                        op.symbol(),
                        a.0,
                        b.0
                    )));
                }
                DType::Bool
            }
            _ if op.is_predicate() => DType::Bool,
            BinaryOp::Sub if common == DType::Bool => {
                return Err(at(
                    "- of two bool operands is not supported (NumPy refuses it); use ^ or logical_xor"
                        .into(),
                ));
            }
            BinaryOp::Div => common.to_float(),
            BinaryOp::Pow | BinaryOp::FloorDiv | BinaryOp::Mod if common == DType::Bool => {
                DType::Int64
            }
            _ => common,
        })
    }

    /// An elementwise op of two operands (arrays broadcast, numbers fold).
    fn elementwise2(
        &mut self,
        bop: BinaryOp,
        a: Val,
        b: Val,
        pos: usize,
    ) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let dt = |b: &Self, v: &Val| match v {
            Val::Arr(id) => Some((b.meta(*id).dtype, false)),
            Val::Num(_, k) => Some((DType::of_kind(*k), true)),
            _ => None,
        };
        let (Some(da), Some(db)) = (dt(self, &a), dt(self, &b)) else {
            return Err(at(format!("{} needs arrays or numbers", bop.symbol())));
        };
        let dtype = self.result_dtype(bop, da, db, pos)?;
        let scalar_left = matches!((&a, &b), (Val::Num(..), Val::Arr(_)));
        Ok(match (a, b) {
            (Val::Num(x, _), Val::Num(y, _)) => Val::Num(bop.apply(x, y), dtype.kind()),
            (Val::Arr(x), Val::Num(value, _)) | (Val::Num(value, _), Val::Arr(x)) => {
                let m = ArrayMeta {
                    dtype,
                    ..self.meta(x).clone()
                };
                let op = NodeOp::Scalar {
                    op: bop,
                    x,
                    value,
                    scalar_left,
                };
                Val::Arr(self.add(m, op))
            }
            (Val::Arr(x), Val::Arr(y)) => {
                let (shape, block, xs) = self.align(&[x, y], bop.symbol(), pos)?;
                Val::Arr(self.add(
                    ArrayMeta::new(shape, block, dtype),
                    NodeOp::Binary {
                        op: bop,
                        a: xs[0],
                        b: xs[1],
                    },
                ))
            }
            _ => unreachable!("checked above"),
        })
    }

    /// Broadcasts operands: the output shape, its blocks (each axis from the first operand
    /// that spans it) and the operands re-blocked to match where they span an axis too.
    fn align(&mut self, xs: &[NodeId], what: &str, pos: usize) -> Result<Aligned, EvalError> {
        let metas: Vec<ArrayMeta> = xs.iter().map(|&x| self.meta(x).clone()).collect();
        let mut shape: Vec<u64> = vec![];
        for m in &metas {
            shape = nums_layout::meta::broadcast(&shape, &m.shape).ok_or_else(|| {
                EvalError::Expr(ExprError::new(
                    pos,
                    format!(
                        "operands of {what} have shapes {}, which do not broadcast",
                        metas
                            .iter()
                            .map(|m| shape_str(&m.shape))
                            .collect::<Vec<_>>()
                            .join(" and ")
                    ),
                ))
            })?;
        }
        let n = shape.len();
        let block: Vec<u64> = (0..n)
            .map(|d| {
                metas
                    .iter()
                    .find_map(|m| {
                        let i = (d + m.ndim()).checked_sub(n)?;
                        (m.shape[i] == shape[d] && shape[d] > 1).then(|| m.block[i])
                    })
                    .unwrap_or(1)
            })
            .collect();
        let out = xs
            .iter()
            .zip(&metas)
            .map(|(&x, m)| {
                let want: Vec<u64> = (0..m.ndim())
                    .map(|i| {
                        if m.shape[i] == 1 {
                            1
                        } else {
                            block[i + n - m.ndim()]
                        }
                    })
                    .collect();
                self.rechunk(x, want)
            })
            .collect();
        Ok((shape, block, out))
    }

    fn where_(&mut self, c: Val, a: Val, b: Val, pos: usize) -> Result<Val, EvalError> {
        let dt = |s: &Self, v: &Val| match v {
            Val::Arr(id) => (s.meta(*id).dtype, false),
            Val::Num(_, k) => (DType::of_kind(*k), true),
            _ => (DType::Float64, true),
        };
        let dtype = self.result_dtype(BinaryOp::Maximum, dt(self, &a), dt(self, &b), pos)?;
        let c = self.node(c, pos)?;
        let (a, b) = (self.node(a, pos)?, self.node(b, pos)?);
        let (shape, block, xs) = self.align(&[c, a, b], "where", pos)?;
        Ok(Val::Arr(self.add(
            ArrayMeta::new(shape, block, dtype),
            NodeOp::Where {
                c: xs[0],
                a: xs[1],
                b: xs[2],
            },
        )))
    }

    /// `op` over `axes` (sorted, distinct), optionally keeping them as length-1 axes.
    fn reduce(&mut self, x: NodeId, op: ReduceOp, axes: Vec<usize>, keepdims: bool) -> NodeId {
        let m = self.meta(x).clone();
        let dtype = match op {
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::NanSum | ReduceOp::NanProd
                if !m.dtype.is_float() =>
            {
                DType::Int64
            }
            _ => m.dtype,
        };
        let kept = |v: &[u64]| -> Vec<u64> {
            (0..m.ndim())
                .filter(|d| !axes.contains(d))
                .map(|d| v[d])
                .collect()
        };
        let r = self.add(
            ArrayMeta::new(kept(&m.shape), kept(&m.block), dtype),
            NodeOp::Reduce {
                x,
                op,
                axes: axes.clone(),
            },
        );
        if !keepdims {
            return r;
        }
        let shape: Vec<u64> = (0..m.ndim())
            .map(|d| if axes.contains(&d) { 1 } else { m.shape[d] })
            .collect();
        self.reshape(r, &shape)
    }

    /// `x` with another shape of the same size (checked by the caller).
    fn reshape(&mut self, x: NodeId, shape: &[u64]) -> NodeId {
        let m = self.meta(x).clone();
        if m.shape == shape {
            return x;
        }
        let non_unit = |s: &[u64]| -> Vec<u64> { s.iter().copied().filter(|&v| v != 1).collect() };
        if non_unit(&m.shape) == non_unit(shape) {
            // Only length-1 axes come or go: block i of the input is block i of the output.
            let mut blocks = m
                .shape
                .iter()
                .zip(&m.block)
                .filter(|(s, _)| **s != 1)
                .map(|(_, b)| *b);
            let block = shape
                .iter()
                .map(|&s| {
                    if s == 1 {
                        1
                    } else {
                        blocks.next().expect("same")
                    }
                })
                .collect();
            return self.add(
                ArrayMeta::new(shape.to_vec(), block, m.dtype),
                NodeOp::Reshape { x },
            );
        }
        // Otherwise both are blocked along axis 0 only (whole rows are contiguous runs),
        // with blocks about as large as the input's.
        let target = m.max_block_nbytes().max(1 << 20) / m.dtype.size() as u64;
        let rows = |s: &[u64]| -> Vec<u64> {
            let row: u64 = s.iter().skip(1).product::<u64>().max(1);
            let mut b = s.to_vec();
            if let Some(b0) = b.first_mut() {
                *b0 = (target / row).max(1);
            }
            b
        };
        let xr = self.rechunk(x, rows(&m.shape));
        self.add(
            ArrayMeta::new(shape.to_vec(), rows(shape), m.dtype),
            NodeOp::Reshape { x: xr },
        )
    }

    fn transpose(&mut self, x: NodeId, perm: Vec<usize>) -> NodeId {
        let m = self.meta(x).clone();
        if perm.iter().enumerate().all(|(i, &p)| i == p) {
            return x;
        }
        let meta = ArrayMeta {
            shape: perm.iter().map(|&p| m.shape[p]).collect(),
            block: perm.iter().map(|&p| m.block[p]).collect(),
            dtype: m.dtype,
        };
        self.add(meta, NodeOp::Transpose { x, perm })
    }

    /// `x` with the block grid `block` (a new node only where it differs).
    fn rechunk(&mut self, x: NodeId, block: Vec<u64>) -> NodeId {
        let m = self.meta(x).clone();
        let want = ArrayMeta::new(m.shape.clone(), block, m.dtype);
        if want == m {
            return x;
        }
        self.add(want, NodeOp::Rechunk { x })
    }

    /// An Einstein sum; `subscripts` may leave out the output (NumPy's implicit form).
    fn einsum(&mut self, subscripts: &str, xs: Vec<NodeId>, pos: usize) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let explicit = if subscripts.contains("->") {
            subscripts.to_string()
        } else {
            // Implicit output: the letters that appear once, in alphabetical order.
            let mut once: Vec<char> = subscripts
                .chars()
                .filter(|c| c.is_ascii_alphabetic())
                .filter(|c| subscripts.matches(*c).count() == 1)
                .collect();
            once.sort_unstable();
            format!("{subscripts}->{}", once.iter().collect::<String>())
        };
        let spec = nums_function::einsum::Spec::parse(&explicit).map_err(at)?;
        if spec.inputs.len() != xs.len() {
            return Err(at(format!(
                "einsum subscripts {subscripts:?} name {} operands, but {} are given",
                spec.inputs.len(),
                xs.len()
            )));
        }
        let mut size: HashMap<char, u64> = HashMap::new();
        let mut block: HashMap<char, u64> = HashMap::new();
        for (k, (&x, letters)) in xs.iter().zip(&spec.inputs).enumerate() {
            let m = self.meta(x).clone();
            if m.ndim() != letters.len() {
                return Err(at(format!(
                    "einsum operand {k} has shape {} but subscripts {:?}",
                    shape_str(&m.shape),
                    letters.iter().collect::<String>()
                )));
            }
            for (d, c) in letters.iter().enumerate() {
                match size.get(c) {
                    Some(&s) if s != m.shape[d] => {
                        return Err(at(format!(
                            "einsum letter {c:?} has sizes {s} and {} (operand {k})",
                            m.shape[d]
                        )));
                    }
                    _ => {
                        size.insert(*c, m.shape[d]);
                        block.entry(*c).or_insert(m.block[d]);
                    }
                }
            }
        }
        // An operand that is a transpose is read through: its source with the letters
        // permuted (no transposed copy of the blocks is made).
        let mut spec = spec;
        let xs: Vec<NodeId> = xs
            .iter()
            .zip(spec.inputs.iter_mut())
            .map(|(&x, letters)| match &self.g.nodes[x].op {
                NodeOp::Transpose { x: src, perm } => {
                    let mut src_letters = letters.clone();
                    for (i, &p) in perm.iter().enumerate() {
                        src_letters[p] = letters[i];
                    }
                    *letters = src_letters;
                    *src
                }
                _ => x,
            })
            .collect();
        let explicit = format!(
            "{}->{}",
            spec.inputs
                .iter()
                .map(|l| l.iter().collect::<String>())
                .collect::<Vec<_>>()
                .join(","),
            spec.output.iter().collect::<String>()
        );
        let xs: Vec<NodeId> = xs
            .iter()
            .zip(&spec.inputs)
            .map(|(&x, letters)| self.rechunk(x, letters.iter().map(|c| block[c]).collect()))
            .collect();
        let dtype = xs
            .iter()
            .map(|&x| self.meta(x).dtype)
            .reduce(DType::promote)
            .expect("operands");
        let meta = ArrayMeta::new(
            spec.output.iter().map(|c| size[c]).collect(),
            spec.output.iter().map(|c| block[c]).collect(),
            dtype,
        );
        Ok(Val::Arr(self.add(
            meta,
            NodeOp::Einsum {
                subscripts: explicit,
                xs,
            },
        )))
    }

    /// `a @ b` (NumPy's matmul: 1-D and 2-D operands, and stacks of equal batch shape).
    fn matmul(&mut self, a: NodeId, b: NodeId, pos: usize) -> Result<Val, EvalError> {
        let (ma, mb) = (self.meta(a).clone(), self.meta(b).clone());
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let (na, nb) = (ma.ndim(), mb.ndim());
        if na == 0 || nb == 0 {
            return Err(at(
                "@ needs arrays of at least 1 dimension; use * for scalars".into(),
            ));
        }
        let ka = ma.shape[na - 1];
        let kb = mb.shape[nb.saturating_sub(2)];
        if ka != kb {
            return Err(at(format!(
                "@ of shapes {} and {}: inner sizes {ka} and {kb} differ",
                shape_str(&ma.shape),
                shape_str(&mb.shape)
            )));
        }
        let batch = "abcdefgh";
        let (sa, sb, so) = match (na, nb) {
            (1, 1) => ("z".to_string(), "z".to_string(), String::new()),
            (1, _) => {
                let bb = &batch[..nb - 2];
                ("z".to_string(), format!("{bb}zy"), format!("{bb}y"))
            }
            (_, 1) => {
                let ba = &batch[..na - 2];
                (format!("{ba}xz"), "z".to_string(), format!("{ba}x"))
            }
            _ => {
                if ma.shape[..na - 2] != mb.shape[..nb - 2] {
                    return Err(at(format!(
                        "@ of stacks of shapes {} and {}: the batch shapes differ (broadcasting stacks is not supported)",
                        shape_str(&ma.shape),
                        shape_str(&mb.shape)
                    )));
                }
                let bb = &batch[..na - 2];
                (format!("{bb}xz"), format!("{bb}zy"), format!("{bb}xy"))
            }
        };
        if na > 8 || nb > 8 {
            return Err(at(
                "@ of arrays of more than 8 dimensions is not supported".into()
            ));
        }
        self.einsum(&format!("{sa},{sb}->{so}"), vec![a, b], pos)
    }

    /// The operands (same dtype after promotion) one after another along `axis`.
    fn concat(&mut self, xs: Vec<NodeId>, axis: usize, pos: usize) -> Result<NodeId, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let first = self.meta(xs[0]).clone();
        let mut total = 0;
        for &x in &xs {
            let m = self.meta(x);
            let same = m.ndim() == first.ndim()
                && (0..m.ndim()).all(|d| d == axis || m.shape[d] == first.shape[d]);
            if !same {
                return Err(at(format!(
                    "cannot concatenate shapes {} and {} along axis {axis}",
                    shape_str(&first.shape),
                    shape_str(&m.shape)
                )));
            }
            total += m.shape[axis];
        }
        let dtype = xs
            .iter()
            .map(|&x| self.meta(x).dtype)
            .reduce(DType::promote)
            .expect("operands");
        let xs: Vec<NodeId> = xs.into_iter().map(|x| self.cast(x, dtype)).collect();
        let mut shape = first.shape.clone();
        shape[axis] = total;
        Ok(self.add(
            ArrayMeta::new(shape, first.block.clone(), dtype),
            NodeOp::Concat { xs, axis },
        ))
    }
}

/// Broadcast operands: the output's shape and blocks, and the operands re-blocked to fit.
type Aligned = (Vec<u64>, Vec<u64>, Vec<NodeId>);

/// Python's slice semantics on an axis of `n`: (first index, step, length).
fn python_slice(
    start: Option<i64>,
    stop: Option<i64>,
    step: i64,
    n: i64,
) -> Result<(i64, i64, i64), String> {
    if step == 0 {
        return Err("slice step cannot be zero".into());
    }
    let norm = |v: i64, lo: i64, hi: i64| if v < 0 { (v + n).max(lo) } else { v.min(hi) };
    if step > 0 {
        let a = start.map_or(0, |v| norm(v, 0, n));
        let b = stop.map_or(n, |v| norm(v, 0, n));
        Ok((a, step, ((b - a).max(0) + step - 1) / step))
    } else {
        let a = start.map_or(n - 1, |v| norm(v, -1, n - 1));
        let b = stop.map_or(-1, |v| norm(v, -1, n - 1));
        Ok((a, step, ((a - b).max(0) + (-step) - 1) / (-step)))
    }
}

/// One axis NumPy-style: negatives count from the end.
fn one_axis(i: i64, ndim: usize) -> Result<usize, String> {
    let n = ndim as i64;
    if i < -n || i >= n {
        return Err(format!(
            "axis {i} is out of bounds for an array of dimension {ndim}"
        ));
    }
    Ok(i.rem_euclid(n.max(1)) as usize)
}

/// Axes NumPy-style: None is all, an int or a tuple of ints, negatives from the end.
fn axes_of(v: &Val, ndim: usize) -> Result<Vec<usize>, String> {
    let one = |x: f64| -> Result<usize, String> {
        if x.fract() != 0.0 {
            return Err(format!("axis {x} is not an integer"));
        }
        one_axis(x as i64, ndim)
    };
    let mut axes = match v {
        Val::None => (0..ndim).collect(),
        Val::Num(x, _) => vec![one(*x)?],
        Val::Tuple(items) => items
            .iter()
            .map(|i| match i {
                Val::Num(x, _) => one(*x),
                _ => Err("axis entries must be integers".to_string()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        _ => return Err("axis must be None, an integer or a tuple of integers".into()),
    };
    let n = axes.len();
    axes.sort_unstable();
    axes.dedup();
    if axes.len() != n {
        return Err("repeated axis".into());
    }
    Ok(axes)
}

enum EvalError {
    Expr(ExprError),
    Job(JobError),
}

/// Splits a Zarr location into its store and the array path in it.
pub fn split_zarr_location(loc: &str, storage: &StoreSpec) -> (StoreSpec, String) {
    if let Some(rest) = loc.strip_prefix("s3://") {
        let (bucket, path) = rest.split_once('/').unwrap_or((rest, ""));
        (
            StoreSpec {
                url: format!("s3://{bucket}"),
                endpoint: storage.endpoint.clone(),
            },
            path.trim_matches('/').to_string(),
        )
    } else {
        let p = std::path::Path::new(loc);
        let parent = p.parent().unwrap_or(std::path::Path::new("/"));
        let url = url::Url::from_directory_path(parent)
            .map(|u| u.to_string())
            .unwrap_or_default();
        (
            StoreSpec {
                url,
                endpoint: None,
            },
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        )
    }
}

/// Reads a Zarr array's metadata (before anything runs) to learn its shape and dtype.
fn load_zarr_meta(store: &StoreSpec, path: &str) -> Result<nums_layout::StoredArray, String> {
    if store.url.starts_with("file://") {
        let dir = url::Url::parse(&store.url)
            .ok()
            .and_then(|u| u.to_file_path().ok())
            .unwrap_or_default();
        if !dir.join(path).join("zarr.json").exists() {
            return Err(format!(
                "{} is neither a .npy file nor a Zarr v3 array (no zarr.json)",
                dir.join(path).display()
            ));
        }
    }
    let s = nums_layout::Store::open(store).map_err(|e| e.to_string())?;
    let rt = tokio::runtime::Handle::try_current();
    let fut = nums_layout::StoredArray::open(&s, path);
    let arr = match rt {
        Ok(h) => tokio::task::block_in_place(|| h.block_on(fut)),
        Err(_) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(fut),
    }
    .map_err(|e| e.to_string())?;
    Ok(arr)
}

/// The path of `path` in `store` relative to the job's store root, if it lies inside it.
pub fn relative_to(job_store: &StoreSpec, store: &StoreSpec, path: &str) -> Option<String> {
    if job_store.endpoint != store.endpoint {
        return None;
    }
    let full = format!(
        "{}/{}",
        store.url.trim_end_matches('/'),
        path.trim_matches('/')
    );
    let root = format!("{}/", job_store.url.trim_end_matches('/'));
    full.strip_prefix(&root)
        .map(str::to_string)
        .filter(|r| !r.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn graph(text: &str) -> Result<Graph, JobError> {
        build(&Job::parse(Path::new("/tmp/g/job.toml"), text).unwrap())
    }

    #[test]
    fn shapes_and_blocks_flow() {
        let g = graph(
            "[arrays]\nX = { random = \"normal\", shape = [7, 5], block = [3, 4] }\nw = { ones = [5] }\ny = \"X @ w > 0.5\"\ns = \"sum(X.T, axis=0)\"\n",
        )
        .unwrap();
        let y = &g.nodes[g.named["y"]];
        assert_eq!(
            (y.meta.shape.clone(), y.meta.block.clone(), y.meta.dtype),
            (vec![7], vec![3], DType::Bool)
        );
        let s = &g.nodes[g.named["s"]];
        assert_eq!(
            (s.meta.shape.clone(), s.meta.block.clone()),
            (vec![7], vec![3])
        );
    }

    #[test]
    fn errors_name_line_key_and_shapes() {
        let e = graph("[arrays]\nA = { zeros = [3, 4] }\nB = { zeros = [4, 3] }\nC = \"A + B\"\n")
            .unwrap_err();
        assert_eq!((e.line, e.key.as_str()), (4, "arrays.C"));
        assert!(e.message.contains("(3, 4) and (4, 3)"), "{e}");
        let e = graph("[arrays]\na = \"b + 1\"\nb = \"a * 2\"\n").unwrap_err();
        assert!(e.message.contains("cyclic definition: a -> b -> a"), "{e}");
        let e = graph("[arrays]\na = \"c + 1\"\n").unwrap_err();
        assert!(e.message.contains("unknown array \"c\""), "{e}");
        let e = graph("[arrays]\na = { zeros = [2, 2] }\nb = \"sum(a, axis=2)\"\n").unwrap_err();
        assert!(e.message.contains("out of bounds"), "{e}");
        let e = graph("[arrays]\na = { zeros = [2, 2] }\nb = \"frobnicate(a)\"\n").unwrap_err();
        assert!(e.message.contains("unknown function frobnicate"), "{e}");
    }

    #[test]
    fn default_blocks_split_rows_over_workers() {
        // 2048 MB / 16 = 128 MiB, capped at 64 MiB per block: 131072 rows of 64 float64.
        let blocks = |shape: &[u64], workers| default_block(shape, DType::Float64, workers, 2048);
        assert_eq!(blocks(&[1_000_000, 64], 4), [131_072, 64]);
        assert_eq!(blocks(&[1_000_000, 64], 16), [62_500, 64]);
        assert_eq!(blocks(&[7, 5], 4), [7, 5]);
        assert!(blocks(&[], 4).is_empty());
    }
}

#[cfg(test)]
mod readme {
    /// README's table of supported names lists exactly the functions the code knows.
    #[test]
    fn readme_lists_every_supported_function() {
        let readme = include_str!("../../README.md");
        let table: Vec<&str> = readme
            .lines()
            .skip_while(|l| !l.starts_with("| name | NumPy equivalent |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .flat_map(|l| {
                l.split('|')
                    .nth(1)
                    .unwrap_or("")
                    .split(',')
                    .map(|s| s.trim().trim_matches('`'))
            })
            .collect();
        let mut listed: Vec<&str> = table.into_iter().filter(|s| !s.is_empty()).collect();
        listed.sort_unstable();
        let mut known = super::SUPPORTED_FUNCTIONS.to_vec();
        known.sort_unstable();
        assert_eq!(listed, known);
    }
}
