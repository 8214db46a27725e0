//! The array graph: every array of a job (named or an anonymous sub-expression) as a node
//! with its shape, block grid and dtype, checked before anything runs.

use std::collections::HashMap;

use nums_layout::batch::{BinaryOp, RandomDist, UnaryOp};
use nums_layout::{ArrayMeta, DType, StoreSpec};

use crate::expr::{self, Expr, ExprError, ExprKind, Op, UnOp};
use crate::job::{ArrayDef, Job, JobError, Source};

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
    /// A `.npy` file the driver imports into the store.
    ImportNpy {
        path: String,
    },
    /// A Zarr v3 array the driver imports (re-blocked) into the job's prefix.
    /// A Zarr array already in the job's store, encoded as nums-cloud encodes: read in
    /// place by the functions, never copied or written.
    Stored {
        path: String,
    },
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
    Matmul {
        a: NodeId,
        b: NodeId,
    },
    Transpose {
        x: NodeId,
    },
    Sum {
        x: NodeId,
        axes: Vec<usize>,
    },
    /// The same values in another block grid or dtype.
    Rechunk {
        x: NodeId,
    },
    /// The same values with axes of length 1 inserted at `new_axes` (of the output).
    ExpandDims {
        x: NodeId,
        new_axes: Vec<usize>,
    },
}

impl NodeOp {
    pub fn inputs(&self) -> Vec<NodeId> {
        match self {
            NodeOp::Random { .. }
            | NodeOp::Fill { .. }
            | NodeOp::ImportNpy { .. }
            | NodeOp::ImportZarr { .. }
            | NodeOp::Stored { .. } => vec![],
            NodeOp::Unary { x, .. }
            | NodeOp::Scalar { x, .. }
            | NodeOp::Transpose { x }
            | NodeOp::Sum { x, .. }
            | NodeOp::Rechunk { x }
            | NodeOp::ExpandDims { x, .. } => {
                vec![*x]
            }
            NodeOp::Binary { a, b, .. } | NodeOp::Matmul { a, b } => vec![*a, *b],
        }
    }

    /// Blocks that are in the store before any task runs (imported or read in place).
    pub fn is_stored_input(&self) -> bool {
        self.is_import() || matches!(self, NodeOp::Stored { .. })
    }

    pub fn is_import(&self) -> bool {
        matches!(self, NodeOp::ImportNpy { .. } | NodeOp::ImportZarr { .. })
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
    Num(f64),
    Arr(NodeId),
    Tuple(Vec<Val>),
    Str,
    None,
}

struct Builder<'a> {
    job: &'a Job,
    g: Graph,
    defs: HashMap<&'a str, &'a ArrayDef>,
    /// Names being resolved, for cycle reports.
    stack: Vec<String>,
}

/// Builds and checks the graph of a job: unknown names, cycles, shapes and dtypes.
pub fn build(job: &Job) -> Result<Graph, JobError> {
    let mut b = Builder {
        job,
        g: Graph::default(),
        defs: job.arrays.iter().map(|a| (a.name.as_str(), a)).collect(),
        stack: Vec::new(),
    };
    for a in &job.arrays {
        b.resolve(a)?;
    }
    let mut g = b.g;
    for o in &job.outputs {
        let id = g.named[&o.name];
        g.nodes[id].stored = true;
    }
    for n in &mut g.nodes {
        n.stored |= n.op.is_import();
    }
    Ok(g)
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
                if def.dtype == Some(DType::Bool) {
                    return Err(self.job.err(
                        def.line,
                        format!("{key}.dtype"),
                        "random arrays are float64",
                    ));
                }
                let m = leaf_meta(shape.clone(), DType::Float64, self);
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
                let (shape, dtype, op) = if path.starts_with("s3://") || !path.ends_with(".npy") {
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
                    Val::Num(x) => {
                        let m = ArrayMeta::new(vec![], vec![], DType::Float64);
                        self.add(m, NodeOp::Fill { value: x })
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
            ExprKind::Num(v) => Val::Num(*v),
            ExprKind::Bool(b) => Val::Num(*b as u8 as f64),
            ExprKind::Str(_) => Val::Str,
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
                    (UnOp::Neg, Val::Num(x)) => Val::Num(-x),
                    (UnOp::Invert, Val::Num(x)) => Val::Num((x == 0.0) as u8 as f64),
                    (UnOp::Neg, Val::Arr(id)) => {
                        if self.meta(id).dtype == DType::Bool {
                            return Err(at(
                                "the - operator is not supported for bool arrays; use ~".into(),
                            ));
                        }
                        self.elementwise1(UnaryOp::Neg, id)
                    }
                    (UnOp::Invert, Val::Arr(id)) => {
                        if self.meta(id).dtype != DType::Bool {
                            return Err(at("~ applies to bool arrays".into()));
                        }
                        self.elementwise1(UnaryOp::Not, id)
                    }
                    _ => return Err(at("unary operator on a non-array".into())),
                }
            }
            ExprKind::Binary(op, a, b) => {
                let (va, vb) = (self.eval(a)?, self.eval(b)?);
                self.binary(*op, va, vb, e.pos)?
            }
            ExprKind::Attr(x, attr) => {
                let v = self.eval(x)?;
                match (attr.as_str(), v) {
                    ("T", Val::Arr(id)) => self.transpose(id),
                    ("T", v @ Val::Num(_)) => v,
                    (a, _) => return Err(at(format!("unknown attribute .{a}; supported: .T"))),
                }
            }
            ExprKind::Call(f, args, kwargs) => self.call(f, args, kwargs, e.pos)?,
            ExprKind::Index(x, items) => {
                let Val::Arr(id) = self.eval(x)? else {
                    return Err(at("only arrays can be indexed".into()));
                };
                self.expand_dims(id, items)?
            }
            ExprKind::Slice(..) => return Err(at("a slice is only allowed inside [ ]".into())),
        })
    }

    /// `x[:, None]` and the like: every item a full slice `:` or `None` (a new axis).
    fn expand_dims(&mut self, x: NodeId, items: &[Expr]) -> Result<Val, EvalError> {
        let m = self.meta(x).clone();
        let (mut shape, mut block, mut src) = (Vec::new(), Vec::new(), 0);
        let mut new_axes = Vec::new();
        for it in items {
            match &it.kind {
                ExprKind::None => {
                    new_axes.push(shape.len());
                    shape.push(1);
                    block.push(1);
                }
                ExprKind::Slice(None, None, None) if src < m.ndim() => {
                    shape.push(m.shape[src]);
                    block.push(m.block[src]);
                    src += 1;
                }
                ExprKind::Slice(None, None, None) => {
                    return Err(EvalError::Expr(ExprError::new(
                        it.pos,
                        format!("too many indices for an array of dimension {}", m.ndim()),
                    )));
                }
                _ => {
                    return Err(EvalError::Expr(ExprError::new(
                        it.pos,
                        "only `:` and `None` (new axes) are supported in indexing yet",
                    )));
                }
            }
        }
        shape.extend_from_slice(&m.shape[src..]);
        block.extend_from_slice(&m.block[src..]);
        if new_axes.is_empty() {
            return Ok(Val::Arr(x));
        }
        let meta = ArrayMeta {
            shape,
            block,
            dtype: m.dtype,
        };
        Ok(Val::Arr(self.add(meta, NodeOp::ExpandDims { x, new_axes })))
    }

    fn known(&self) -> String {
        let mut names: Vec<&str> = self.defs.keys().copied().collect();
        names.sort_unstable();
        names.join(", ")
    }

    fn elementwise1(&mut self, op: UnaryOp, x: NodeId) -> Val {
        let m = self.meta(x).clone();
        let dtype = if op == UnaryOp::Not {
            DType::Bool
        } else {
            DType::Float64
        };
        Val::Arr(self.add(ArrayMeta { dtype, ..m }, NodeOp::Unary { op, x }))
    }

    fn transpose(&mut self, x: NodeId) -> Val {
        let m = self.meta(x).clone();
        if m.ndim() < 2 {
            return Val::Arr(x);
        }
        let meta = ArrayMeta {
            shape: m.shape.iter().rev().copied().collect(),
            block: m.block.iter().rev().copied().collect(),
            dtype: m.dtype,
        };
        Val::Arr(self.add(meta, NodeOp::Transpose { x }))
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

    fn binary(&mut self, op: Op, a: Val, b: Val, pos: usize) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
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
            Op::MatMul => {
                let (Val::Arr(x), Val::Arr(y)) = (a, b) else {
                    return Err(at("@ needs two arrays".into()));
                };
                return self.matmul(x, y, pos);
            }
            Op::FloorDiv => BinaryOp::FloorDiv,
            Op::Mod => BinaryOp::Mod,
        };
        self.elementwise2(bop, a, b, pos)
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
        let dtype = if bop.is_predicate() {
            DType::Bool
        } else {
            DType::Float64
        };
        let logic = matches!(bop, BinaryOp::And | BinaryOp::Or);
        let check_logic = |b: &Builder, id: NodeId| {
            if logic && b.meta(id).dtype != DType::Bool {
                Err(at(format!(
                    "{} needs bool operands; got {}",
                    bop.symbol(),
                    b.meta(id).dtype
                )))
            } else {
                Ok(())
            }
        };
        let scalar_left = matches!((&a, &b), (Val::Num(_), Val::Arr(_)));
        Ok(match (a, b) {
            (Val::Num(x), Val::Num(y)) => Val::Num(bop.apply(x, y)),
            (Val::Arr(x), Val::Num(value)) | (Val::Num(value), Val::Arr(x)) => {
                check_logic(self, x)?;
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
                check_logic(self, x)?;
                check_logic(self, y)?;
                let (mx, my) = (self.meta(x).clone(), self.meta(y).clone());
                let Some(shape) = nums_layout::meta::broadcast(&mx.shape, &my.shape) else {
                    return Err(at(format!(
                        "operands of {} have shapes {} and {}, which do not broadcast",
                        bop.symbol(),
                        shape_str(&mx.shape),
                        shape_str(&my.shape)
                    )));
                };
                // The output takes its blocks from the operand that spans each axis (the
                // left one first); the other is re-blocked to match where it spans it too.
                let n = shape.len();
                let along = |m: &ArrayMeta, d: usize| (d + m.ndim() >= n).then(|| d + m.ndim() - n);
                let block: Vec<u64> = (0..n)
                    .map(|d| match (along(&mx, d), along(&my, d)) {
                        (Some(i), _) if mx.shape[i] == shape[d] => mx.block[i],
                        (_, Some(j)) if my.shape[j] == shape[d] => my.block[j],
                        _ => 1,
                    })
                    .collect();
                let fit = |b: &mut Self, id: NodeId, m: &ArrayMeta| {
                    let want: Vec<u64> = (0..m.ndim())
                        .map(|i| {
                            if m.shape[i] == 1 {
                                1
                            } else {
                                block[i + n - m.ndim()]
                            }
                        })
                        .collect();
                    b.rechunk(id, want)
                };
                let x = fit(self, x, &mx);
                let y = fit(self, y, &my);
                Val::Arr(self.add(
                    ArrayMeta::new(shape, block, dtype),
                    NodeOp::Binary {
                        op: bop,
                        a: x,
                        b: y,
                    },
                ))
            }
            _ => return Err(at(format!("{} needs arrays or numbers", bop.symbol()))),
        })
    }

    fn matmul(&mut self, a: NodeId, b: NodeId, pos: usize) -> Result<Val, EvalError> {
        let (ma, mb) = (self.meta(a).clone(), self.meta(b).clone());
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        if ma.ndim() == 0 || mb.ndim() == 0 || ma.ndim() > 2 || mb.ndim() > 2 {
            return Err(at(format!(
                "@ needs 1-D or 2-D operands; got shapes {} and {}",
                shape_str(&ma.shape),
                shape_str(&mb.shape)
            )));
        }
        let ka = *ma.shape.last().expect("ndim>0");
        let kb = mb.shape[0];
        if ka != kb {
            return Err(at(format!(
                "@ of shapes {} and {}: inner sizes {ka} and {kb} differ",
                shape_str(&ma.shape),
                shape_str(&mb.shape)
            )));
        }
        // Align b's row blocks with a's column blocks.
        let mut bblock = mb.block.clone();
        bblock[0] = *ma.block.last().expect("ndim>0");
        let b = self.rechunk(b, bblock.clone());
        let (shape, block): (Vec<u64>, Vec<u64>) = match (ma.ndim(), mb.ndim()) {
            (2, 2) => (vec![ma.shape[0], mb.shape[1]], vec![ma.block[0], bblock[1]]),
            (2, 1) => (vec![ma.shape[0]], vec![ma.block[0]]),
            (1, 2) => (vec![mb.shape[1]], vec![bblock[1]]),
            _ => (vec![], vec![]),
        };
        Ok(Val::Arr(self.add(
            ArrayMeta::new(shape, block, DType::Float64),
            NodeOp::Matmul { a, b },
        )))
    }

    fn call(
        &mut self,
        f: &str,
        args: &[Expr],
        kwargs: &[(String, Expr)],
        pos: usize,
    ) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let unary = match f {
            "exp" => Some(UnaryOp::Exp),
            "expm1" => Some(UnaryOp::Expm1),
            "log" => Some(UnaryOp::Log),
            "log1p" => Some(UnaryOp::Log1p),
            "sqrt" => Some(UnaryOp::Sqrt),
            "square" => Some(UnaryOp::Square),
            "sign" => Some(UnaryOp::Sign),
            "sin" => Some(UnaryOp::Sin),
            "cos" => Some(UnaryOp::Cos),
            "tan" => Some(UnaryOp::Tan),
            "tanh" => Some(UnaryOp::Tanh),
            "floor" => Some(UnaryOp::Floor),
            "ceil" => Some(UnaryOp::Ceil),
            "abs" | "absolute" => Some(UnaryOp::Abs),
            "sigmoid" | "expit" => Some(UnaryOp::Sigmoid),
            "negative" => Some(UnaryOp::Neg),
            "logical_not" => Some(UnaryOp::Not),
            _ => None,
        };
        let allowed: &[&str] = match f {
            "sum" | "mean" => &["axis"],
            _ => &[],
        };
        if let Some((k, v)) = kwargs.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
            return Err(EvalError::Expr(ExprError::new(
                v.pos,
                format!("{f}() got an unexpected keyword argument {k:?}"),
            )));
        }
        let nargs = |n: usize| -> Result<(), EvalError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(at(format!(
                    "{f}() takes {n} positional argument(s), got {}",
                    args.len()
                )))
            }
        };
        if let Some(op) = unary {
            nargs(1)?;
            return match self.eval(&args[0])? {
                Val::Arr(id) => Ok(
                    if op == UnaryOp::Not && self.meta(id).dtype != DType::Bool {
                        return Err(at("logical_not applies to bool arrays".into()));
                    } else {
                        self.elementwise1(op, id)
                    },
                ),
                Val::Num(x) => Ok(Val::Num(op.apply(x))),
                _ => Err(at(format!("{f}() needs an array"))),
            };
        }
        match f {
            "transpose" => {
                nargs(1)?;
                match self.eval(&args[0])? {
                    Val::Arr(id) => Ok(self.transpose(id)),
                    _ => Err(at("transpose() needs an array".into())),
                }
            }
            "maximum" | "minimum" | "add" | "subtract" | "multiply" | "divide" | "power"
            | "floor_divide" | "mod" | "remainder" => {
                nargs(2)?;
                let bop = match f {
                    "maximum" => BinaryOp::Maximum,
                    "minimum" => BinaryOp::Minimum,
                    "add" => BinaryOp::Add,
                    "subtract" => BinaryOp::Sub,
                    "multiply" => BinaryOp::Mul,
                    "divide" => BinaryOp::Div,
                    "power" => BinaryOp::Pow,
                    "floor_divide" => BinaryOp::FloorDiv,
                    _ => BinaryOp::Mod,
                };
                let (a, b) = (self.eval(&args[0])?, self.eval(&args[1])?);
                self.elementwise2(bop, a, b, pos)
            }
            "matmul" | "dot" => {
                nargs(2)?;
                let (a, b) = (self.eval(&args[0])?, self.eval(&args[1])?);
                self.binary(Op::MatMul, a, b, pos)
            }
            "sum" | "mean" => {
                nargs(1)?;
                let Val::Arr(x) = self.eval(&args[0])? else {
                    return Err(at(format!("{f}() needs an array")));
                };
                let m = self.meta(x).clone();
                let axis = match kwargs.first() {
                    Some((_, v)) => (self.eval(v)?, v.pos),
                    None => (Val::None, pos),
                };
                let axes = axes_of(&axis.0, m.ndim())
                    .map_err(|msg| EvalError::Expr(ExprError::new(axis.1, msg)))?;
                let shape: Vec<u64> = (0..m.ndim())
                    .filter(|d| !axes.contains(d))
                    .map(|d| m.shape[d])
                    .collect();
                let block: Vec<u64> = (0..m.ndim())
                    .filter(|d| !axes.contains(d))
                    .map(|d| m.block[d])
                    .collect();
                let count: u64 = axes.iter().map(|&d| m.shape[d]).product();
                let s = self.add(
                    ArrayMeta::new(shape, block, DType::Float64),
                    NodeOp::Sum { x, axes },
                );
                if f == "mean" {
                    let sm = self.meta(s).clone();
                    Ok(Val::Arr(self.add(
                        sm,
                        NodeOp::Scalar {
                            op: BinaryOp::Div,
                            x: s,
                            value: count as f64,
                            scalar_left: false,
                        },
                    )))
                } else {
                    Ok(Val::Arr(s))
                }
            }
            _ => Err(at(format!(
                "unknown function {f}(); supported: {}",
                SUPPORTED_FUNCTIONS.join(", ")
            ))),
        }
    }
}

/// Functions the expression language knows (README's table is checked against this).
pub const SUPPORTED_FUNCTIONS: &[&str] = &[
    "abs",
    "absolute",
    "add",
    "ceil",
    "cos",
    "divide",
    "dot",
    "exp",
    "expit",
    "expm1",
    "floor",
    "floor_divide",
    "log",
    "log1p",
    "logical_not",
    "matmul",
    "maximum",
    "mean",
    "minimum",
    "mod",
    "multiply",
    "negative",
    "power",
    "remainder",
    "sigmoid",
    "sign",
    "sin",
    "sqrt",
    "square",
    "subtract",
    "sum",
    "tan",
    "tanh",
    "transpose",
];

fn axes_of(v: &Val, ndim: usize) -> Result<Vec<usize>, String> {
    let one = |x: f64| -> Result<usize, String> {
        let i = x as i64;
        if i as f64 != x {
            return Err(format!("axis {x} is not an integer"));
        }
        let n = ndim as i64;
        if i < -n || i >= n {
            return Err(format!(
                "axis {i} is out of bounds for an array of dimension {ndim}"
            ));
        }
        Ok(i.rem_euclid(n.max(1)) as usize)
    };
    let mut axes = match v {
        Val::None => (0..ndim).collect(),
        Val::Num(x) => vec![one(*x)?],
        Val::Tuple(items) => items
            .iter()
            .map(|i| match i {
                Val::Num(x) => one(*x),
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
