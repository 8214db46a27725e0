//! Linear algebra: NumPy's `np.linalg` functions (qr, lstsq, svd, svdvals, norm,
//! cholesky, solve, inv, det, slogdet), each lowered to a graph of block tasks on the
//! LAPACK kernels of `nums_function::linalg`.
//!
//! Tall-skinny factorizations are TSQR trees: level 0 is one R per block row of the
//! input, each further level the R of groups of `fan-in` R's stacked, until one R is left
//! (the fan-in is the largest at most [`MAX_FAN_IN`] whose combine fits `memory_mb`).
//! Q is made only when used, by direct TSQR: from the root down, each level's Q rows times
//! the Q rows above it. A square matrix of several blocks is factored blocked: Cholesky
//! left-looking (one task per block of L), LU (solve, inv, det, slogdet) right-looking with
//! partial pivoting on column panels of all rows (see [`LuStep`]); a matrix in one block is
//! one task, refused here when it cannot fit one invocation, with the memory it needs.

use nums_function::memory::{TaskBlocks, task_peak};
use nums_layout::batch::{DetOutput, Kernel, LstsqOutput, QrOutput, SvdOutput};

use super::*;
use crate::graph::{LuStep, TsqrQ};

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "qr",
        &["a", "mode"],
        "`np.linalg.qr` (mode \"reduced\", \"complete\" or \"r\"; rows >= columns: TSQR, a tree of R combines each within `memory_mb`; Q by direct TSQR only when used; a wide matrix, and mode \"complete\" of a tall one, in one task)",
        qr,
    ),
    FuncDef::new(
        "lstsq",
        &["a", "b", "rcond"],
        "`np.linalg.lstsq` (rows >= columns: TSQR of `[a | b]`, Q never formed; residuals always given when rows > columns)",
        lstsq,
    ),
    FuncDef::new(
        "svd",
        &["a", "full_matrices", "compute_uv", "hermitian"],
        "`np.linalg.svd` (full_matrices=False: TSQR, then the SVD of R in one task, U = Q U_R only when used; full_matrices=True of a non-square matrix: the whole matrix in one task)",
        svd,
    )
    .refusing(&["hermitian"]),
    FuncDef::new(
        "svdvals",
        &["x"],
        "`np.linalg.svdvals` (TSQR, then the singular values of R)",
        |s, b| {
            let (x, pos) = (b.array("x")?, b.pos);
            let (m, n) = s.matrix_shape(x, b, "the array")?;
            if m == 0 || n == 0 {
                let dtype = s.meta(x).dtype.to_float().real();
                return Ok(Val::Arr(s.empty(vec![0], dtype, Scalar::Int(0))));
            }
            let (r, _) = s.tall_r(x, b, pos)?;
            Ok(Val::Arr(s.svd_of(r, SvdOutput::Values, x)))
        },
    ),
    FuncDef::new(
        "norm",
        &["x", "ord", "axis", "keepdims"],
        "`np.linalg.norm` (vector norms of any `ord`; matrix norms None, \"fro\", 1, -1, inf, -inf, 2, -2, \"nuc\"; 2 and \"nuc\" by svdvals)",
        norm,
    ),
    FuncDef::new(
        "cholesky",
        &["a"],
        "`np.linalg.cholesky` (one block: one task; more: blocked left-looking Cholesky, one task per block of L on square blocks, each task within `memory_mb`)",
        cholesky,
    ),
    FuncDef::new(
        "solve",
        &["a", "b"],
        "`np.linalg.solve` (stacks: their batch axes broadcast, as NumPy's, a system at a time; one block: LU in one task, NumPy's LAPACK calls; more: blocked right-looking LU with partial pivoting on column panels of all rows, rows equilibrated, `b` carried through the steps, then a blocked back substitution; each task within `memory_mb`; LinAlgError \"Singular matrix\" on every block shape where a pivot is within n eps of what its elimination cancelled or `a` equilibrated has an estimated reciprocal condition number in the 1-norm below n eps, docs/guide.md)",
        solve,
    ),
    FuncDef::new(
        "inv",
        &["a"],
        "`np.linalg.inv` (as `solve(a, eye(n))`: one task, or blocked LU on column panels; singular where `solve` finds it so)",
        |s, b| lu_op(s, b, LuUse::Inverse),
    ),
    FuncDef::new(
        "det",
        &["a"],
        "`np.linalg.det` (LU: one task, or blocked LU on column panels, each panel's share of the sign and of the log; as NumPy's, sign * exp(logabsdet); 0 where `solve` finds a zero pivot)",
        |s, b| lu_op(s, b, LuUse::Det(DetOutput::Det)),
    ),
    FuncDef::new(
        "slogdet",
        &["a"],
        "`np.linalg.slogdet` (LU as `det`, one factorization for both results)",
        |s, b| {
            let sign = lu_op(s, b, LuUse::Det(DetOutput::Sign))?;
            let log = lu_op(s, b, LuUse::Det(DetOutput::Logabsdet))?;
            Ok(Val::Fields(vec![("sign", sign), ("logabsdet", log)]))
        },
    ),
];

/// The largest fan-in of a TSQR combine: more levels cost little (each is n x n blocks),
/// and a wide combine is one long task.
pub(crate) const MAX_FAN_IN: u64 = 32;

/// A TSQR tree of R factors.
#[derive(Debug, Clone)]
pub(crate) struct TsqrTree {
    /// The operands of level 0, side by side (blocked alike along axis 0).
    pub xs: Vec<NodeId>,
    /// R levels, level 0 first; the last is the one n x n R.
    pub levels: Vec<NodeId>,
    /// Each level's fan-in (level 0: 1, one block row each).
    pub fan_in: Vec<u64>,
}

impl TsqrTree {
    pub(crate) fn r(&self) -> NodeId {
        *self.levels.last().expect("a level")
    }
}

/// Bytes a TSQR combine of `f` n x n blocks of `elem` bytes each projects (the planner's
/// model, `task_peak`, with the QR kernel's workspace: the stacked copy, T and dgeqrf's
/// work).
fn combine_bytes(f: u64, n: u64, elem: u64) -> u64 {
    let nn = n * n * elem;
    task_peak(&TaskBlocks::whole(
        f * nn,
        f,
        nn,
        nn,
        f * nn + nn + 64 * n * elem,
    ))
}

/// Which axis of a name's one-line description: `(m, n)` as "m x n".
fn dims(shape: &[u64]) -> String {
    shape
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(" x ")
}

fn mib(bytes: u64) -> u64 {
    bytes.div_ceil(1 << 20)
}

impl<'a> Builder<'a> {
    /// `x` as a matrix, refused unless 2-D.
    /// The shape of a matrix operand that the factorizations take: not empty (each
    /// function answers an empty one as NumPy does before it factors, see `empty`).
    fn matrix_arg(&self, x: NodeId, b: &Bound, what: &str) -> Result<(u64, u64), EvalError> {
        match self.matrix_shape(x, b, what)? {
            (m, n) if m == 0 || n == 0 => Err(b.err(
                b.pos,
                format!(
                    "{}(): {what} is an empty matrix ({}); nums-cloud's linear algebra takes matrices with rows and columns",
                    b.f,
                    dims(&[m, n])
                ),
            )),
            mn => Ok(mn),
        }
    }

    /// An empty result of NumPy's for an empty matrix: `shape` of `value` (empty factors,
    /// det 1.0, slogdet's sign 1.0 and log 0.0, rank 0).
    pub(super) fn empty(&mut self, shape: Vec<u64>, dtype: DType, value: Scalar) -> NodeId {
        let meta = self.default_meta(shape, dtype);
        self.add(meta, NodeOp::Fill { value })
    }

    /// The shape of a 2-D operand.
    fn matrix_shape(&self, x: NodeId, b: &Bound, what: &str) -> Result<(u64, u64), EvalError> {
        match self.meta(x).shape[..] {
            [m, n] => Ok((m, n)),
            ref s => Err(b.err(
                b.pos,
                format!(
                    "{}(): {what} has shape {} ({}-D); it takes a 2-D matrix",
                    b.f,
                    shape_str(s),
                    s.len()
                ),
            )),
        }
    }

    /// `x` of lstsq, refused when complex: its kernel (the solution from the R of
    /// `[a | b]`) is real only; every other factorization takes complex matrices.
    fn real_operand(&self, x: NodeId, b: &Bound, what: &str) -> Result<(), EvalError> {
        let dt = self.meta(x).dtype;
        if !dt.is_complex() {
            return Ok(());
        }
        Err(b.err(
            b.pos,
            format!(
                "{}(): {what} is {dt}; nums-cloud's lstsq takes real matrices (qr, svd, pinv, solve, inv, det, cholesky take complex ones)",
                b.f
            ),
        ))
    }

    /// The dtype the kernels compute `xs` in: complex128 when one is complex, else float64
    /// (the results are cast to NumPy's dtypes).
    pub(crate) fn linalg_dtype(&self, xs: &[NodeId]) -> DType {
        if xs.iter().any(|&x| self.meta(x).dtype.is_complex()) {
            DType::Complex128
        } else {
            DType::Float64
        }
    }

    /// The TSQR tree of the operands `make` gives, side by side (`xs[0]` is m x n, m >= n;
    /// all blocked alike along axis 0), memoized by `key` (the operands as the user gave
    /// them): a factorization several keys or results use is made once.
    pub(crate) fn tsqr(
        &mut self,
        key: Vec<NodeId>,
        make: impl FnOnce(&mut Self) -> Vec<NodeId>,
        b: &Bound,
    ) -> Result<TsqrTree, EvalError> {
        if let Some(t) = self.tsqr_memo.get(&key) {
            return Ok(t.clone());
        }
        let xs = make(self);
        // float64 (complex128) whatever the input (the kernels compute in it; the results
        // are cast).
        let dtype = self.linalg_dtype(&xs);
        let n: u64 = xs.iter().map(|&x| self.meta(x).shape[1]).sum();
        let elem = dtype.size() as u64;
        let combine_bytes = |f, n| combine_bytes(f, n, elem);
        let limit = self.job.compute.memory_mb << 20;
        let fan_in = (2..=MAX_FAN_IN)
            .rev()
            .find(|&f| combine_bytes(f, n) <= limit / 2)
            .ok_or_else(|| {
                b.err(
                    b.pos,
                    format!(
                        "{}(): the R factor of {n} columns ({n} x {n}) cannot be combined within memory_mb = {}: a combine of two needs {} MiB (memory_mb = {} would do); TSQR is for tall-skinny matrices",
                        b.f,
                        self.job.compute.memory_mb,
                        mib(combine_bytes(2, n)),
                        mib(2 * combine_bytes(2, n))
                    ),
                )
            })?;
        let mut rows = self.meta(xs[0]).grid()[0];
        let r_meta = |rows: u64| ArrayMeta::new(vec![rows * n, n], vec![n, n], dtype);
        let mut levels = vec![self.add(
            r_meta(rows),
            NodeOp::Tsqr {
                xs: xs.clone(),
                group: 1,
                q: None,
            },
        )];
        let mut fans = vec![1];
        while rows > 1 {
            rows = rows.div_ceil(fan_in);
            let prev = *levels.last().expect("level 0");
            levels.push(self.add(
                r_meta(rows),
                NodeOp::Tsqr {
                    xs: vec![prev],
                    group: fan_in,
                    q: None,
                },
            ));
            fans.push(fan_in);
        }
        let t = TsqrTree {
            xs: xs.clone(),
            levels,
            fan_in: fans,
        };
        self.tsqr_memo.insert(key, t.clone());
        Ok(t)
    }

    /// Q of a TSQR tree (of its one operand) times `c` (n x w at the root; None: Q
    /// itself), by direct TSQR from the root down: an m x w array in `xs[0]`'s block rows.
    pub(crate) fn tsqr_q(&mut self, t: &TsqrTree, c: Option<NodeId>) -> NodeId {
        let x = self.meta(t.xs[0]).clone();
        let n = self.meta(t.r()).shape[1];
        let w = c.map_or(n, |c| self.meta(c).shape[1]);
        let dtype = self.meta(t.r()).dtype;
        let mut c = c;
        for l in (0..t.levels.len()).rev() {
            let (xs, meta) = if l == 0 {
                let meta = ArrayMeta::new(vec![x.shape[0], w], vec![x.block[0], w], dtype);
                (t.xs.clone(), meta)
            } else {
                let below = t.levels[l - 1];
                let rows = self.meta(below).shape[0];
                (
                    vec![below],
                    ArrayMeta::new(vec![rows, w], vec![n, w], dtype),
                )
            };
            c = Some(self.add(
                meta,
                NodeOp::Tsqr {
                    xs,
                    group: t.fan_in[l],
                    q: Some(TsqrQ { c }),
                },
            ));
        }
        c.expect("a level")
    }

    /// The R of a matrix of any aspect, for its singular values: of `x` when tall, of
    /// `x.T` when wide (the same singular values). Also says whether it transposed.
    fn tall_r(&mut self, x: NodeId, b: &Bound, _pos: usize) -> Result<(NodeId, bool), EvalError> {
        let (m, n) = self.matrix_arg(x, b, "the array")?;
        Ok((self.tall_tree(x, m < n, b)?.r(), m < n))
    }

    /// The TSQR tree of `x` (of `x.T` when `transpose`).
    fn tall_tree(&mut self, x: NodeId, transpose: bool, b: &Bound) -> Result<TsqrTree, EvalError> {
        // The key tells x.T from x by a node id no operand has.
        let key = if transpose {
            vec![x, usize::MAX]
        } else {
            vec![x]
        };
        self.tsqr(
            key,
            |s| {
                let x = if transpose {
                    s.transpose(x, vec![1, 0])
                } else {
                    x
                };
                vec![s.one_col_block(x)]
            },
            b,
        )
    }

    /// `x` with its columns in one block (TSQR's operands hold whole rows).
    fn one_col_block(&mut self, x: NodeId) -> NodeId {
        let m = self.meta(x).clone();
        // Rows per block so that a block row stays about as large as the input's blocks.
        let rows = (m.max_block_nbytes() / (m.shape[1] * m.dtype.size() as u64).max(1))
            .clamp(1, m.shape[0]);
        let rows = if m.block[1] == m.shape[1] {
            m.block[0]
        } else {
            rows.max(m.block[0].min(m.shape[1]))
        };
        self.rechunk(x, vec![rows, m.shape[1]])
    }

    /// A one-task node: `kernel` on the operands (each made one block).
    fn dense(&mut self, kernel: Kernel, xs: Vec<NodeId>, shape: Vec<u64>, dtype: DType) -> NodeId {
        let xs = xs
            .into_iter()
            .map(|x| {
                let s = self.meta(x).shape.clone();
                self.rechunk(x, s)
            })
            .collect();
        let block = shape.clone();
        self.add(
            ArrayMeta::new(shape, block, dtype),
            NodeOp::Dense { kernel, xs },
        )
    }

    /// Singular values (or U, Vh) of the n x n R of a TSQR, in `like`'s float dtype (the
    /// singular values of a complex matrix in its real dtype).
    fn svd_of(&mut self, r: NodeId, output: SvdOutput, like: NodeId) -> NodeId {
        let n = self.meta(r).shape[1];
        let dtype = self.meta(like).dtype.to_float();
        let (shape, dtype) = match output {
            SvdOutput::Values | SvdOutput::S => (vec![n], dtype.real()),
            SvdOutput::U | SvdOutput::Vh => (vec![n, n], dtype),
        };
        self.dense(Kernel::Svd { output }, vec![r], shape, dtype)
    }
}

fn qr(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = b.array("a")?;
    let (m, n) = s.matrix_shape(a, b, "a")?;
    let mode = match b.get("mode") {
        None => "reduced".to_string(),
        Some((Val::Str(t), _)) => t.clone(),
        Some((_, p)) => return Err(b.err(*p, "qr(): mode is a string such as \"reduced\"")),
    };
    if mode != "reduced" && mode != "r" && mode != "complete" {
        return Err(b.err(
            b.given("mode").map_or(b.pos, |g| g.1),
            format!(
                "qr(): mode {mode:?} is not supported; supported: \"reduced\", \"complete\", \"r\""
            ),
        ));
    }
    let dtype = s.meta(a).dtype.to_float();
    if m == 0 && n > 0 {
        // NumPy's factors of a 0 x n matrix: Q is 0 x 0, R is 0 x n.
        let r = s.empty(vec![0, n], dtype, Scalar::Int(0));
        if mode == "r" {
            return Ok(Val::Arr(r));
        }
        let q = s.empty(vec![0, 0], dtype, Scalar::Int(0));
        return Ok(Val::Fields(vec![("Q", Val::Arr(q)), ("R", Val::Arr(r))]));
    }
    if m < n {
        // Wide: Q is m x m, R m x n (LAPACK's geqrf of the whole, one task).
        let qr = |output| Kernel::Qr { cols: 1, output };
        let mut kernels = vec![(qr(QrOutput::R), vec![m, n], dtype)];
        if mode != "r" {
            kernels.push((qr(QrOutput::Q { part: 0 }), vec![m, m], dtype));
        }
        let out = whole_matrix(
            s,
            b,
            a,
            kernels,
            "the QR of a wide matrix (rows < columns) is not TSQR's",
        )?;
        return Ok(match out[..] {
            [r] => Val::Arr(r),
            [r, q] => Val::Fields(vec![("Q", Val::Arr(q)), ("R", Val::Arr(r))]),
            _ => unreachable!("one or two kernels"),
        });
    }
    let complete = mode == "complete" && m > n;
    if n == 0 {
        // NumPy's factors of an m x 0 matrix: Q is m x 0, R is 0 x 0 (complete: the m x m
        // identity and m x 0).
        let r = s.empty(vec![if complete { m } else { 0 }, 0], dtype, Scalar::Int(0));
        if mode == "r" {
            return Ok(Val::Arr(r));
        }
        let q = if complete {
            let meta = s.default_meta(vec![m, m], dtype);
            s.add(meta, NodeOp::Eye { k: 0 })
        } else {
            s.empty(vec![m, 0], dtype, Scalar::Int(0))
        };
        return Ok(Val::Fields(vec![("Q", Val::Arr(q)), ("R", Val::Arr(r))]));
    }
    if complete {
        // Q m x m and R m x n: LAPACK's Q of the whole matrix, one task (TSQR's is thin).
        let qr = |output| Kernel::Qr { cols: 1, output };
        let out = whole_matrix(
            s,
            b,
            a,
            vec![
                (qr(QrOutput::Q { part: 0 }), vec![m, m], dtype),
                (qr(QrOutput::R), vec![m, n], dtype),
            ],
            "mode=\"complete\" of a tall matrix is the QR of the whole matrix (\"reduced\" is TSQR's)",
        )?;
        return Ok(Val::Fields(vec![
            ("Q", Val::Arr(out[0])),
            ("R", Val::Arr(out[1])),
        ]));
    }
    let t = s.tall_tree(a, false, b)?;
    let r = s.cast(t.r(), dtype);
    if mode == "r" {
        return Ok(Val::Arr(r));
    }
    let q = s.tsqr_q(&t, None);
    let q = s.cast(q, dtype);
    Ok(Val::Fields(vec![("Q", Val::Arr(q)), ("R", Val::Arr(r))]))
}

fn lstsq(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (a, y) = (b.array("a")?, b.array("b")?);
    let (m, n) = s.matrix_shape(a, b, "a")?;
    s.real_operand(a, b, "a")?;
    s.real_operand(y, b, "b")?;
    let ym = s.meta(y).clone();
    let p = match ym.shape[..] {
        [r] if r == m => 1,
        [r, p] if r == m => p,
        _ => {
            return Err(b.err(
                b.pos,
                format!(
                    "lstsq(): a is {} and b has shape {}: b must have {m} rows (1-D or 2-D)",
                    dims(&[m, n]),
                    shape_str(&ym.shape)
                ),
            ));
        }
    };
    if m < n {
        return Err(b.err(
            b.pos,
            format!(
                "lstsq(): a is {} (fewer rows than columns); nums-cloud's lstsq (TSQR) takes rows >= columns",
                dims(&[m, n])
            ),
        ));
    }
    if n == 0 {
        return lstsq_of_no_columns(s, b, y, m, p);
    }
    let rcond = match b.num("rcond")? {
        None => f64::EPSILON * m.max(n) as f64,
        Some(v) if v.as_f64() < 0.0 => f64::EPSILON,
        Some(v) => v.as_f64(),
    };
    let t = s.tsqr(
        vec![a, y],
        |s| {
            let x = s.one_col_block(a);
            let rows = s.meta(x).block[0];
            let y2 = s.reshape(y, &[m, p]);
            vec![x, s.rechunk(y2, vec![rows, p])]
        },
        b,
    )?;
    let dtype = s
        .meta(a)
        .dtype
        .to_float()
        .promote(s.meta(y).dtype.to_float());
    let out = |s: &mut Builder, output, shape: Vec<u64>, dt| {
        s.dense(
            Kernel::Lstsq {
                n: n as usize,
                rcond,
                output,
            },
            vec![t.r()],
            shape,
            dt,
        )
    };
    let xshape = if ym.ndim() == 1 { vec![n] } else { vec![n, p] };
    let sol = out(s, LstsqOutput::X, xshape, dtype);
    // NumPy gives no residuals (an empty array) when rows <= columns.
    let res = if m > n {
        Val::Arr(out(s, LstsqOutput::Residuals, vec![p], dtype))
    } else {
        Val::Arr(s.empty(vec![0], dtype, Scalar::Int(0)))
    };
    let rank = out(s, LstsqOutput::Rank, vec![], DType::Int32);
    let sv = out(s, LstsqOutput::SingularValues, vec![n], dtype);
    Ok(Val::Tuple(vec![
        Val::Arr(sol),
        res,
        Val::Arr(rank),
        Val::Arr(sv),
    ]))
}

/// lstsq of an m x 0 `a`, as NumPy answers it: no unknowns (x empty), rank 0, no singular
/// values, and (m > 0) the residuals are all of `b`: the sum of its squares per column.
fn lstsq_of_no_columns(
    s: &mut Builder,
    b: &Bound,
    y: NodeId,
    m: u64,
    p: u64,
) -> Result<Val, EvalError> {
    let a = b.array("a")?;
    let ym = s.meta(y).clone();
    let dtype = s.meta(a).dtype.to_float().promote(ym.dtype.to_float());
    let xshape = if ym.ndim() == 1 { vec![0] } else { vec![0, p] };
    let x = s.empty(xshape, dtype, Scalar::Int(0));
    let res = if m > 0 {
        let y = s.cast(y, dtype);
        let y2 = s.reshape(y, &[m, p]);
        let sq = s.elementwise2(BinaryOp::Mul, Val::Arr(y2), Val::Arr(y2), b.pos)?;
        let sq = s.node(sq, b.pos)?;
        Val::Arr(s.reduce(sq, ReduceOp::Sum, vec![0], false, b.pos)?)
    } else {
        Val::Arr(s.empty(vec![0], dtype, Scalar::Int(0)))
    };
    let rank = s.empty(vec![], DType::Int32, Scalar::Int(0));
    let sv = s.empty(vec![0], dtype, Scalar::Int(0));
    Ok(Val::Tuple(vec![
        Val::Arr(x),
        res,
        Val::Arr(rank),
        Val::Arr(sv),
    ]))
}

fn svd(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = b.array("a")?;
    let (m, n) = s.matrix_shape(a, b, "a")?;
    let full = b
        .given("full_matrices")
        .is_none_or(|_| b.flag("full_matrices").unwrap_or(true));
    let uv = b
        .given("compute_uv")
        .is_none_or(|_| b.flag("compute_uv").unwrap_or(true));
    if full && uv && m != n && m > 0 && n > 0 {
        // U m x m and Vh n x n: gesdd's full SVD of the whole matrix (TSQR gives the thin one).
        let dtype = s.meta(a).dtype.to_float();
        let svd = |output| Kernel::Svd { output };
        let out = whole_matrix(
            s,
            b,
            a,
            vec![
                (svd(SvdOutput::U), vec![m, m], dtype),
                (svd(SvdOutput::S), vec![m.min(n)], dtype.real()),
                (svd(SvdOutput::Vh), vec![n, n], dtype),
            ],
            "full_matrices=True (NumPy's default) is gesdd's full SVD of the whole matrix (full_matrices=False is TSQR's, in tasks within memory_mb)",
        )?;
        return Ok(Val::Fields(vec![
            ("U", Val::Arr(out[0])),
            ("S", Val::Arr(out[1])),
            ("Vh", Val::Arr(out[2])),
        ]));
    }
    if m == 0 || n == 0 {
        // No singular values: U is m x 0, S empty, Vh 0 x n (NumPy's thin SVD).
        let dtype = s.meta(a).dtype.to_float();
        let mut e = |shape: Vec<u64>, dt: DType| Val::Arr(s.empty(shape, dt, Scalar::Int(0)));
        if !uv {
            return Ok(e(vec![0], dtype.real()));
        }
        return Ok(Val::Fields(vec![
            ("U", e(vec![m, 0], dtype)),
            ("S", e(vec![0], dtype.real())),
            ("Vh", e(vec![0, n], dtype)),
        ]));
    }
    let (r, wide) = s.tall_r(a, b, b.pos)?;
    if !uv {
        return Ok(Val::Arr(s.svd_of(r, SvdOutput::Values, a)));
    }
    let dtype = s.meta(a).dtype.to_float();
    let ur = s.svd_of(r, SvdOutput::U, a);
    let sv = s.svd_of(r, SvdOutput::S, a);
    let vh = s.svd_of(r, SvdOutput::Vh, a);
    // The tree tall_r made (memoized) gives Q; U = Q U_R.
    let t = s.tall_tree(a, wide, b)?;
    let ur64 = s.cast(ur, s.meta(t.r()).dtype);
    let u = s.tsqr_q(&t, Some(ur64));
    let u = s.cast(u, dtype);
    // a.T = U' S Vh' gives a = Vh'^T S U'^T.
    let (u, vh) = if wide {
        (s.transpose(vh, vec![1, 0]), s.transpose(u, vec![1, 0]))
    } else {
        (u, vh)
    };
    Ok(Val::Fields(vec![
        ("U", Val::Arr(u)),
        ("S", Val::Arr(sv)),
        ("Vh", Val::Arr(vh)),
    ]))
}

/// `ord` of norm: None, a number (inf too) or a string.
enum Ord {
    Default,
    Num(f64),
    Fro,
    Nuc,
}

fn norm(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("x")?;
    let nd = s.meta(x).ndim();
    let ord = match b.get("ord") {
        None => Ord::Default,
        Some((Val::Num(v), _)) => Ord::Num(v.as_f64()),
        Some((Val::Str(t), _)) if t == "fro" => Ord::Fro,
        Some((Val::Str(t), _)) if t == "nuc" => Ord::Nuc,
        Some((_, p)) => {
            return Err(b.err(
                *p,
                "norm(): ord is None, a number, inf, -inf, \"fro\" or \"nuc\"",
            ));
        }
    };
    let keepdims = b.flag("keepdims")?;
    let mut axes = match b.get("axis") {
        None => (0..nd).collect::<Vec<_>>(),
        Some((v, p)) => axes_of(v, nd).map_err(|m| b.refused(*p, m.after("norm(): ")))?,
    };
    // A matrix norm's axes are (row axis, column axis) in the order given (axes_of sorts).
    if let Some((Val::Tuple(t), p)) = b.get("axis")
        && t.len() == 2
    {
        axes = t
            .iter()
            .map(|v| axis_of(v, nd).map_err(|m| b.refused(*p, m.after("norm(): "))))
            .collect::<Result<_, _>>()?;
    }
    let pos = b.pos;
    let abs = |s: &mut Builder, x: NodeId| -> Result<NodeId, EvalError> {
        let v = s.unary(UnaryOp::Abs, Val::Arr(x), pos)?;
        s.node(v, pos)
    };
    // A complex array's norms are its moduli's (a real dtype), but for the singular
    // values (ord 2, -2, "nuc" of a non-empty matrix), which are the complex SVD's.
    let svd = matches!(ord, Ord::Nuc) || matches!(ord, Ord::Num(p) if p.abs() == 2.0);
    let x = if s.meta(x).dtype.is_complex() && !(axes.len() == 2 && svd && !s.meta(x).is_empty()) {
        abs(s, x)?
    } else {
        x
    };
    let fdt = s.meta(x).dtype.to_float();
    let x = s.cast(x, fdt);
    let red = |s: &mut Builder, x: NodeId, op: ReduceOp, axes: Vec<usize>, keep: bool| {
        s.reduce(x, op, axes, keep, pos)
    };
    // NumPy's norm takes the max of |x| with initial=0: 0 over nothing, like a sum.
    let max0 = |s: &Builder, x: NodeId, axes: &[usize]| {
        if axes.iter().any(|&d| s.meta(x).shape[d] == 0) {
            ReduceOp::Sum
        } else {
            ReduceOp::Max
        }
    };
    let empty = s.meta(x).is_empty();
    match (axes.len(), ord) {
        (0, _) => Err(b.err(pos, "norm(): of a 0-d array; give a 1-D or 2-D one")),
        // Frobenius / 2-norm of a vector, or of all elements (ord None).
        (1, Ord::Default) | (_, Ord::Default) | (2, Ord::Fro) => {
            // NumPy: with neither ord nor axis, the 2-norm of all elements, any ndim.
            if axes.len() > 2 && b.get("axis").is_some() {
                return Err(b.err(pos, "norm(): improper number of dimensions to norm"));
            }
            let sq = s.unary(UnaryOp::Square, Val::Arr(x), pos)?;
            let sq = s.node(sq, pos)?;
            let t = red(s, sq, ReduceOp::Sum, axes, keepdims)?;
            s.unary(UnaryOp::Sqrt, Val::Arr(t), pos)
        }
        (1, Ord::Num(p)) => {
            let a = abs(s, x)?;
            if p == f64::INFINITY {
                let op = max0(s, a, &axes);
                return Ok(Val::Arr(red(s, a, op, axes, keepdims)?));
            }
            if p == f64::NEG_INFINITY {
                return Ok(Val::Arr(red(s, a, ReduceOp::Min, axes, keepdims)?));
            }
            if p == 0.0 {
                let nz =
                    s.elementwise2(BinaryOp::Ne, Val::Arr(x), Val::Num(Scalar::Float(0.0)), pos)?;
                let nz = s.node(nz, pos)?;
                let nz = s.cast(nz, fdt);
                return Ok(Val::Arr(red(s, nz, ReduceOp::Sum, axes, keepdims)?));
            }
            if p == 1.0 {
                return Ok(Val::Arr(red(s, a, ReduceOp::Sum, axes, keepdims)?));
            }
            let pw = s.elementwise2(BinaryOp::Pow, Val::Arr(a), Val::Num(Scalar::Float(p)), pos)?;
            let pw = s.node(pw, pos)?;
            let t = red(s, pw, ReduceOp::Sum, axes, keepdims)?;
            s.elementwise2(
                BinaryOp::Pow,
                Val::Arr(t),
                Val::Num(Scalar::Float(1.0 / p)),
                pos,
            )
        }
        (1, _) => Err(b.err(
            pos,
            "norm(): \"fro\" and \"nuc\" are matrix norms; a vector norm takes a number",
        )),
        (2, _) if keepdims && nd != 2 => {
            Err(b.err(pos, "norm(): keepdims with a matrix norm takes a 2-D array"))
        }
        (2, ord) => {
            let (r0, r1) = (axes[0], axes[1]);
            let keep = |s: &mut Builder, v: NodeId| -> NodeId {
                if keepdims {
                    let shape: Vec<u64> = vec![1; nd];
                    s.reshape(v, &shape)
                } else {
                    v
                }
            };
            match ord {
                Ord::Num(p) if p.abs() == 1.0 || p.abs() == f64::INFINITY => {
                    // 1: the largest column sum of |x|; inf: the largest row sum.
                    let a = abs(s, x)?;
                    let (sum_axis, other) = if p.abs() == 1.0 { (r0, r1) } else { (r1, r0) };
                    let t = red(s, a, ReduceOp::Sum, vec![sum_axis], false)?;
                    let other = if other > sum_axis { other - 1 } else { other };
                    let op = if p > 0.0 {
                        max0(s, t, &[other])
                    } else {
                        ReduceOp::Min
                    };
                    let v = red(s, t, op, vec![other], false)?;
                    Ok(Val::Arr(keep(s, v)))
                }
                // The singular values of an empty matrix: none. NumPy's 2-norm and
                // nuclear norm of one are 0 (a sum of nothing); its -2 norm has no value.
                Ord::Num(p) if p == 2.0 && empty && nd == 2 => {
                    Ok(Val::Arr(red(s, x, ReduceOp::Sum, vec![0, 1], keepdims)?))
                }
                Ord::Nuc if empty && nd == 2 => {
                    Ok(Val::Arr(red(s, x, ReduceOp::Sum, vec![0, 1], keepdims)?))
                }
                Ord::Num(p) if p == -2.0 && empty && nd == 2 => {
                    Ok(Val::Arr(red(s, x, ReduceOp::Min, vec![0, 1], keepdims)?))
                }
                Ord::Num(p) if p.abs() == 2.0 => {
                    let xm = if nd == 2 && (r0, r1) == (0, 1) {
                        x
                    } else if nd == 2 {
                        s.transpose(x, vec![1, 0])
                    } else {
                        return Err(b.err(pos, "norm(): ord=2 takes a 2-D array"));
                    };
                    let (r, _) = s.tall_r(xm, b, pos)?;
                    let sv = s.svd_of(r, SvdOutput::Values, x);
                    let op = if p > 0.0 { ReduceOp::Max } else { ReduceOp::Min };
                    let v = red(s, sv, op, vec![0], false)?;
                    Ok(Val::Arr(keep(s, v)))
                }
                Ord::Nuc => {
                    if nd != 2 {
                        return Err(b.err(pos, "norm(): \"nuc\" takes a 2-D array"));
                    }
                    let (r, _) = s.tall_r(x, b, pos)?;
                    let sv = s.svd_of(r, SvdOutput::Values, x);
                    let v = red(s, sv, ReduceOp::Sum, vec![0], false)?;
                    Ok(Val::Arr(keep(s, v)))
                }
                _ => Err(b.err(
                    pos,
                    "norm(): matrix norms take ord None, \"fro\", \"nuc\", 1, -1, 2, -2, inf or -inf",
                )),
            }
        }
        _ => Err(b.err(pos, "norm(): improper number of dimensions to norm")),
    }
}

/// cholesky: one task when `a` is one block; otherwise left-looking blocked Cholesky on
/// square blocks of `a`'s smaller block side (rechunked when its blocks are not square),
/// halved until the largest task (a block of L in the last row: A_ij, two blocks per
/// earlier column and L_jj) fits `memory_mb`.
fn cholesky(s: &mut Builder, bd: &Bound) -> Result<Val, EvalError> {
    let a = bd.array("a")?;
    let (m, n) = s.matrix_shape(a, bd, "a")?;
    let meta = s.meta(a).clone();
    if (m, n) == (0, 0) {
        return Ok(Val::Arr(s.empty(
            vec![0, 0],
            meta.dtype.to_float(),
            Scalar::Int(0),
        )));
    }
    if m != n || meta.num_blocks() <= 1 {
        return square_op(s, bd, "a", Kernel::Cholesky, None);
    }
    let elem = s.linalg_dtype(&[a]).size() as u64;
    let need = |blk: u64| cholesky_task_bytes(n, blk, elem);
    let limit = s.job.compute.memory_mb << 20;
    let mut blk = meta.block[0].min(meta.block[1]).min(n);
    while need(blk) > limit && blk > 64 {
        blk /= 2;
    }
    if need(blk) > limit {
        return Err(bd.err(
            bd.pos,
            format!(
                "{}(): a is {}; blocked Cholesky on blocks of {blk} x {blk} needs {} MiB in its largest task; memory_mb is {}",
                bd.f,
                dims(&[m, n]),
                mib(need(blk)),
                s.job.compute.memory_mb
            ),
        ));
    }
    let dtype = meta.dtype.to_float();
    let x = s.cast(a, s.linalg_dtype(&[a]));
    let x = s.rechunk(x, vec![blk, blk]);
    Ok(Val::Arr(s.add(
        ArrayMeta::new(vec![n, n], vec![blk, blk], dtype),
        NodeOp::CholeskyBlocked { x },
    )))
}

/// The planner's projection of blocked Cholesky's largest task (n x n in blocks of
/// `blk`): 2 nb - 2 input blocks (nb on the diagonal when nb < 2), a block out.
fn cholesky_task_bytes(n: u64, blk: u64, elem: u64) -> u64 {
    let nb = n.div_ceil(blk);
    let bb = blk * blk * elem;
    let reads = (2 * nb).saturating_sub(2).max(nb);
    task_peak(&TaskBlocks::whole(reads * bb, reads, bb, bb, 0))
}

/// The planner's projection of blocked LU's largest task (n x n in column panels of `w`):
/// a step reads F_k and a panel (n + 2 rows each), writes a panel, and getrf copies the
/// rows it factors.
fn lu_task_bytes(n: u64, w: u64) -> u64 {
    let panel = (n + 2) * w * 8;
    task_peak(&TaskBlocks::whole(2 * panel, 2, panel, panel, panel))
}

/// What a blocked LU is for.
#[derive(Clone, Copy)]
enum LuUse {
    Solve,
    Inverse,
    Det(DetOutput),
}

/// solve, inv, det, slogdet: one task when `a` is one block (LAPACK on the whole matrix);
/// otherwise blocked right-looking LU with partial pivoting on column panels of all rows
/// (see [`LuStep`]): `b` (for inv, the identity) is carried through the factorization's
/// steps and then solved by a blocked back substitution; det is the product of each
/// panel's share.
/// NumPy's solve: of matrices as [`lu_op`]'s; of stacks, `a` (..., n, n) and `b`
/// (..., n, k), or `b` (n,) one vector, their batch axes broadcast against each other
/// (NumPy's rules), a system at a time: each matrix of the result by its own solve, then
/// joined (nodes per matrix: meant for small stacks).
fn solve(s: &mut Builder, bd: &Bound) -> Result<Val, EvalError> {
    let (a, b) = (bd.array("a")?, bd.array("b")?);
    let (ma, mb) = (s.meta(a).clone(), s.meta(b).clone());
    if ma.ndim() < 2 || (ma.ndim() <= 2 && mb.ndim() <= 2) {
        return lu_op(s, bd, LuUse::Solve);
    }
    let vector = mb.ndim() == 1;
    let mut bm = mb.shape.clone();
    if vector {
        bm.push(1);
    }
    let (na, nb) = (ma.ndim(), bm.len());
    let n = ma.shape[na - 1];
    if ma.shape[na - 2] != n {
        return Err(bd.err(
            bd.pos,
            format!(
                "{}(): a has shape {}; its matrices must be square",
                bd.f,
                shape_str(&ma.shape)
            ),
        ));
    }
    if bm[nb - 2] != n {
        return Err(bd.err(
            bd.pos,
            format!(
                "{}(): a has shape {} and b {}: b's matrices (its vector) must have {n} rows",
                bd.f,
                shape_str(&ma.shape),
                shape_str(&mb.shape)
            ),
        ));
    }
    let (ba, bb) = (&ma.shape[..na - 2], &bm[..nb - 2]);
    let Some(batch) = nums_layout::meta::broadcast(ba, bb) else {
        return Err(bd.err(
            bd.pos,
            format!(
                "{}(): the stacks' batch shapes {} (a) and {} (b) do not broadcast",
                bd.f,
                shape_str(ba),
                shape_str(bb)
            ),
        ));
    };
    let k = bm[nb - 1];
    let mut out_shape = batch.clone();
    out_shape.push(n);
    if !vector {
        out_shape.push(k);
    }
    let count: u64 = batch.iter().product();
    if count == 0 {
        let dtype = ma.dtype.to_float().promote(mb.dtype.to_float());
        return Ok(Val::Arr(s.empty(out_shape, dtype, Scalar::Float(0.0))));
    }
    let flat_a = s.reshape(a, &[ba.iter().product(), n, n]);
    let flat_b = s.reshape(b, &[bb.iter().product(), n, k]);
    // The matrix of an operand for the result's batch index `idx`: its own batch axes
    // aligned at the end, an axis of length 1 read at 0.
    let source = |shape: &[u64], idx: &[u64]| -> u64 {
        let off = idx.len() - shape.len();
        shape.iter().enumerate().fold(0, |acc, (d, &len)| {
            acc * len + if len == 1 { 0 } else { idx[off + d] }
        })
    };
    let one = |s: &mut Builder, x: NodeId, i: u64, shape: &[u64]| {
        let t = super::shapes::take_node(s, x, 0, vec![i]);
        s.reshape(t, shape)
    };
    let mut parts = Vec::with_capacity(count as usize);
    for i in 0..count {
        let idx = nums_layout::meta::unravel(i, &batch);
        let ai = one(s, flat_a, source(ba, &idx), &[n, n]);
        let bi = if vector {
            one(s, flat_b, source(bb, &idx), &[n])
        } else {
            one(s, flat_b, source(bb, &idx), &[n, k])
        };
        let sub = Bound {
            f: bd.f.clone(),
            pos: bd.pos,
            vals: vec![Some((Val::Arr(ai), bd.pos)), Some((Val::Arr(bi), bd.pos))],
            names: &["a", "b"],
            rest: Vec::new(),
            seed: None,
        };
        let x = lu_op(s, &sub, LuUse::Solve)?;
        let x = s.node(x, bd.pos)?;
        let mut shape = vec![1, n];
        if !vector {
            shape.push(k);
        }
        parts.push(s.reshape(x, &shape));
    }
    let joined = s.concat(parts, 0, bd.pos)?;
    Ok(Val::Arr(s.reshape(joined, &out_shape)))
}

fn lu_op(s: &mut Builder, bd: &Bound, what: LuUse) -> Result<Val, EvalError> {
    let kernel = match what {
        LuUse::Solve => Kernel::LuSolve,
        LuUse::Inverse => Kernel::Inverse,
        LuUse::Det(output) => Kernel::Det { output },
    };
    let a = bd.array("a")?;
    let (m, n) = s.matrix_shape(a, bd, "a")?;
    if (m, n) == (0, 0) {
        // NumPy's answers for a 0 x 0 matrix: det 1 (an empty product), empty solutions.
        let mut dtype = s.meta(a).dtype.to_float();
        let (shape, value) = match what {
            LuUse::Solve => {
                let y = s.rhs_arg(bd, "a", 0, "b")?;
                dtype = dtype.promote(s.meta(y).dtype.to_float());
                (s.meta(y).shape.clone(), 0.0)
            }
            LuUse::Inverse => (vec![0, 0], 0.0),
            LuUse::Det(DetOutput::Logabsdet) => {
                dtype = dtype.real();
                (vec![], 0.0)
            }
            LuUse::Det(_) => (vec![], 1.0),
        };
        return Ok(Val::Arr(s.empty(shape, dtype, Scalar::Float(value))));
    }
    // The blocked LU's steps are real only: a complex matrix of several blocks is solved
    // in one task too (refused, with the memory it needs, where it cannot fit one).
    let complex = s.meta(a).dtype.is_complex()
        || (matches!(what, LuUse::Solve) && s.meta(bd.array("b")?).dtype.is_complex());
    if m != n || s.meta(a).num_blocks() <= 1 || complex {
        let b = matches!(what, LuUse::Solve).then_some("b");
        return square_op(s, bd, "a", kernel, b);
    }
    let mut dtype = s.meta(a).dtype.to_float();
    let rhs = match what {
        LuUse::Solve => {
            let y = s.rhs_arg(bd, "a", n, "b")?;
            dtype = dtype.promote(s.meta(y).dtype.to_float());
            Some(y)
        }
        _ => None,
    };
    let LuNodes { lu, m, .. } = s.lu_panels(a, bd)?;
    let w = s.meta(lu).block[2];
    Ok(Val::Arr(match (what, rhs) {
        (LuUse::Solve, Some(y)) => s.lu_solution(a, bd, y, dtype)?,
        (LuUse::Det(output), _) => {
            let p = s.meta(lu).shape[0];
            let of = |s: &mut Builder, out: DetOutput, op| {
                let shares = s.add(
                    ArrayMeta::new(vec![p], vec![1], DType::Float64),
                    NodeOp::Lu {
                        xs: vec![lu, m],
                        step: LuStep::Det(out),
                    },
                );
                s.reduce(shares, op, vec![0], false, bd.pos)
            };
            let r = match output {
                DetOutput::Sign => of(s, DetOutput::Sign, ReduceOp::Prod)?,
                DetOutput::Logabsdet => of(s, DetOutput::Logabsdet, ReduceOp::Sum)?,
                // NumPy's det: sign * exp(logabsdet).
                DetOutput::Det => {
                    let sign = of(s, DetOutput::Sign, ReduceOp::Prod)?;
                    let log = of(s, DetOutput::Logabsdet, ReduceOp::Sum)?;
                    let meta = s.meta(log).clone();
                    let exp = s.add(
                        meta,
                        NodeOp::Unary {
                            op: UnaryOp::Exp,
                            x: log,
                        },
                    );
                    let det =
                        s.elementwise2(BinaryOp::Mul, Val::Arr(sign), Val::Arr(exp), bd.pos)?;
                    s.node(det, bd.pos)?
                }
            };
            s.cast(r, dtype)
        }
        _ => {
            let eye = s.add(
                ArrayMeta::new(vec![n, n], vec![n, w], DType::Float64),
                NodeOp::Eye { k: 0 },
            );
            s.lu_solution(a, bd, eye, dtype)?
        }
    }))
}

/// The rows of blocked LU's condition probe ([`Builder::lu_condition`]): a few random
/// columns, each a lower bound of the inverse's norm.
const PROBE_COLUMNS: u64 = 3;
/// Its seed (the probe is the same for every run of a matrix, so are the answers).
const PROBE_SEED: u64 = 0x0039_5eed;

/// The nodes of a blocked LU of one operand (memoized by it): the panels, A's row
/// magnitudes, and once asked for, the condition estimate's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LuNodes {
    pub(crate) lu: NodeId,
    pub(crate) m: NodeId,
    cond: Option<LuCond>,
}

/// What the last back-substitution step of a solve or inverse reads to estimate A's
/// condition ([`Kernel::LuBack`]'s `estimate`): the probe G's forward and back
/// substitution versions (G is solved with D A: no row scaling; its back substitution
/// scales the rows it solves by D A's column 1-norms), and G.
#[derive(Clone, Copy, Debug)]
struct LuCond {
    forward: NodeId,
    backward: Option<NodeId>,
    g: NodeId,
}

impl LuNodes {
    /// Whether every node is one of the first `len` of the graph.
    pub(crate) fn within(&self, len: NodeId) -> bool {
        let c = self
            .cond
            .map_or(vec![], |c| vec![c.forward, c.backward.unwrap_or(0), c.g]);
        [self.lu, self.m].iter().chain(&c).all(|&i| i < len)
    }
}

impl Builder<'_> {
    /// `b` of solve(a, b) for an n x n `a`: 1-D or 2-D with n rows.
    fn rhs_arg(&self, bd: &Bound, a_name: &str, n: u64, b_name: &str) -> Result<NodeId, EvalError> {
        let y = bd.array(b_name)?;
        let ym = self.meta(y);
        if ym.shape.is_empty() || ym.shape[0] != n || ym.ndim() > 2 {
            return Err(bd.err(
                bd.pos,
                format!(
                    "{}(): {a_name} is {} and {b_name} has shape {}: {b_name} must be 1-D or 2-D with {n} rows",
                    bd.f,
                    dims(&[n, n]),
                    shape_str(&ym.shape)
                ),
            ));
        }
        Ok(y)
    }

    /// The factored panels of `a` (n x n) by blocked LU ([`LuStep::Panels`]) and the row
    /// magnitudes its steps equilibrate the rows by, memoized by operand: panels of all n
    /// rows and `a`'s smaller block side, halved until the largest task (a step reading
    /// F_k and a panel, writing a panel, getrf's copy of the rows it factors) fits
    /// `memory_mb`.
    fn lu_panels(&mut self, a: NodeId, bd: &Bound) -> Result<LuNodes, EvalError> {
        if let Some(&lu) = self.lu_memo.get(&a) {
            return Ok(lu);
        }
        let meta = self.meta(a).clone();
        let n = meta.shape[0];
        let need = |w: u64| lu_task_bytes(n, w);
        let limit = self.job.compute.memory_mb << 20;
        let mut w = meta.block[0].min(meta.block[1]).min(n);
        while need(w) > limit && w > 64 {
            w /= 2;
        }
        if need(w) > limit {
            return Err(bd.err(
                bd.pos,
                format!(
                    "{}(): a is {}; blocked LU on column panels of {} needs {} MiB in its largest task; memory_mb is {}",
                    bd.f,
                    dims(&[n, n]),
                    dims(&[n, w]),
                    mib(need(w)),
                    self.job.compute.memory_mb
                ),
            ));
        }
        // One block per (step, panel): a matrix of very many narrow panels is refused here,
        // by what it is, rather than as an internal array past the block limit.
        let p = n.div_ceil(w);
        if p * p > super::shape::MAX_BLOCKS_PER_ARRAY {
            return Err(bd.err(
                bd.pos,
                format!(
                    "{}(): a is {}; blocked LU on column panels of {} takes {p} steps of {p} panels ({} panel versions, over the limit of {}): give `a` larger blocks (a panel is as wide as a's smaller block side, and a task holds about 11 panels within memory_mb)",
                    bd.f,
                    dims(&[n, n]),
                    dims(&[n, w]),
                    p * p,
                    super::shape::MAX_BLOCKS_PER_ARRAY
                ),
            ));
        }
        let a = self.cast(a, DType::Float64);
        let x = self.rechunk(a, vec![n, w]);
        // The panels' first versions read `a`'s own blocks where its block columns are the
        // panels (each panel's row blocks stacked in the task), else the panels assembled:
        // an assembled panel is written to the store by the invocation that takes the
        // magnitudes from it and read back by the panel's first step (the 8192^2 solve
        // wrote 512 MB of panels before its first factorization could start).
        let q = if meta.block[1] == w { a } else { x };
        // Each row's largest magnitude (NaN where the row has one), in one block: taken
        // from the panels, so that `a` is read once for them (from `a`'s own blocks, the
        // 8192^2 solve read `a` three times over).
        let abs = self.add(
            self.meta(x).clone(),
            NodeOp::Unary {
                op: UnaryOp::Abs,
                x,
            },
        );
        let m = self.reduce(abs, ReduceOp::Max, vec![1], false, bd.pos)?;
        let m = self.rechunk(m, vec![n]);
        let lu = self.add(
            ArrayMeta::new(
                vec![n.div_ceil(w), n + 2, n],
                vec![1, n + 2, w],
                DType::Float64,
            ),
            NodeOp::Lu {
                xs: vec![q, m],
                step: LuStep::Panels,
            },
        );
        let nodes = LuNodes { lu, m, cond: None };
        self.lu_memo.insert(a, nodes);
        Ok(nodes)
    }

    /// The condition estimate's nodes of `a`'s blocked LU (memoized with it, so that solve
    /// and inv of one matrix share them): the probe G, n x PROBE_COLUMNS standard normals,
    /// carried through the forward steps without A's row scaling and through the back
    /// substitution ([`LuStep::Probe`]) up to its last step (that step, in each task of
    /// the solution, gives M^-1 G: see [`Kernel::LuBack`]). A solve of 3 columns beside
    /// that of b, reading the same factored panels: 2 p small tasks beside the
    /// factorization's p (p + 1) / 2.
    fn lu_condition(&mut self, a: NodeId, bd: &Bound) -> Result<LuCond, EvalError> {
        let nodes = self.lu_panels(a, bd)?;
        if let Some(c) = nodes.cond {
            return Ok(c);
        }
        let n = self.meta(nodes.lu).shape[2];
        let g = self.add(
            ArrayMeta::new(
                vec![n, PROBE_COLUMNS],
                vec![n, PROBE_COLUMNS],
                DType::Float64,
            ),
            NodeOp::Random {
                dist: nums_layout::batch::RandomDist::Normal,
                seed: PROBE_SEED,
                frame: None,
            },
        );
        let (forward, backward) = self.lu_substitution(nodes.lu, g, None);
        let cond = LuCond {
            forward,
            backward,
            g,
        };
        self.lu_memo.insert(
            a,
            LuNodes {
                cond: Some(cond),
                ..nodes
            },
        );
        Ok(cond)
    }

    /// y (n x c, float64, in [n, wb] blocks, or [n]) carried through A's factored panels'
    /// steps ([`LuStep::Forward`], its rows first scaled as A's by the row magnitudes `m`
    /// when given), then through the back substitution but its last step
    /// ([`LuStep::Backward`], or for the probe, without `m`, [`LuStep::Probe`]; none when
    /// there is one panel).
    fn lu_substitution(
        &mut self,
        lu: NodeId,
        y: NodeId,
        m: Option<NodeId>,
    ) -> (NodeId, Option<NodeId>) {
        let (p, n) = (self.meta(lu).shape[0], self.meta(lu).shape[2]);
        let ym = self.meta(y);
        let c = if ym.ndim() == 1 { 1 } else { ym.shape[1] };
        let wb = *ym.block.get(1).unwrap_or(&1);
        let versions = |s: &mut Self, steps: u64, xs: Vec<NodeId>, step: LuStep| {
            s.add(
                ArrayMeta::new(vec![steps, n, c], vec![1, n, wb], DType::Float64),
                NodeOp::Lu { xs, step },
            )
        };
        let forward = versions(
            self,
            p,
            [vec![lu, y], m.into_iter().collect()].concat(),
            LuStep::Forward,
        );
        let back = if m.is_some() {
            LuStep::Backward
        } else {
            LuStep::Probe
        };
        let backward = (p > 1).then(|| versions(self, p - 1, vec![lu, forward], back));
        (forward, backward)
    }

    /// A^-1 y from `a`'s blocked LU: y carried through the steps, then the back
    /// substitution, in `dtype`; its last step first estimates A's condition and refuses a
    /// singular A ([`Builder::lu_condition`]).
    fn lu_solution(
        &mut self,
        a: NodeId,
        bd: &Bound,
        y: NodeId,
        dtype: DType,
    ) -> Result<NodeId, EvalError> {
        let LuNodes { lu, m, .. } = self.lu_panels(a, bd)?;
        let cond = self.lu_condition(a, bd)?;
        let (n, w) = (self.meta(lu).shape[2], self.meta(lu).block[2]);
        let vector = self.meta(y).ndim() == 1;
        let c = if vector { 1 } else { self.meta(y).shape[1] };
        let wb = c.min(w);
        let y = self.cast(y, DType::Float64);
        let y = self.rechunk(y, if vector { vec![n] } else { vec![n, wb] });
        let (forward, backward) = self.lu_substitution(lu, y, Some(m));
        let mut xs = vec![lu, forward];
        xs.extend(backward);
        xs.push(cond.forward);
        xs.extend(cond.backward);
        xs.push(cond.g);
        let (shape, block) = if vector {
            (vec![n], vec![n])
        } else {
            (vec![n, c], vec![n, wb])
        };
        Ok(self.add(
            ArrayMeta::new(shape, block, dtype),
            NodeOp::Lu {
                xs,
                step: LuStep::Solution,
            },
        ))
    }
}

/// cholesky, solve, inv, det: one task on the square matrix `a` (and `b`), refused when
/// it cannot fit one invocation.
fn square_op(
    s: &mut Builder,
    bd: &Bound,
    a_name: &str,
    kernel: Kernel,
    b_name: Option<&str>,
) -> Result<Val, EvalError> {
    let a = bd.array(a_name)?;
    let (m, n) = s.matrix_shape(a, bd, a_name)?;
    if m != n {
        return Err(bd.err(
            bd.pos,
            format!(
                "{}(): {a_name} is {}; the matrix must be square",
                bd.f,
                dims(&[m, n])
            ),
        ));
    }
    s.matrix_arg(a, bd, a_name)?;
    let mut xs = vec![a];
    let mut dtype = s.meta(a).dtype.to_float();
    let mut out_shape = match kernel {
        Kernel::Det { .. } => vec![],
        _ => vec![n, n],
    };
    if let Kernel::Det {
        output: DetOutput::Logabsdet,
    } = kernel
    {
        dtype = dtype.real();
    }
    if let Some(bn) = b_name {
        let y = s.rhs_arg(bd, a_name, n, bn)?;
        let ym = s.meta(y);
        dtype = dtype.promote(ym.dtype.to_float());
        out_shape = ym.shape.clone();
        xs.push(y);
    }
    let (need, compute) = one_task_need(s, &kernel, &xs, &out_shape);
    let limit = s.job.compute.memory_mb << 20;
    if need > limit {
        let (how, blocked) = if compute.is_complex() && !matches!(kernel, Kernel::Cholesky) {
            (
                "",
                "a complex matrix's LU (solve, inv, det) is done in one task whatever its blocks: the blocked LU is real only",
            )
        } else {
            (
                " in one block",
                "in smaller blocks it is factored blocked, each task within memory_mb",
            )
        };
        return Err(bd.err(
            bd.pos,
            format!(
                "{}(): {a_name} is {}{how}, done in one task, which needs {} MiB; memory_mb is {} ({blocked})",
                bd.f,
                dims(&[m, n]),
                mib(need),
                s.job.compute.memory_mb
            ),
        ));
    }
    let xs: Vec<NodeId> = xs.into_iter().map(|x| s.cast(x, compute)).collect();
    Ok(Val::Arr(s.dense(kernel, xs, out_shape, dtype)))
}

/// The one task of `kernel` on `xs` (each made one block) for an output of `out_shape`:
/// its projection as the planner makes it (`task_peak`, with the kernel's workspace), and
/// the dtype it computes in (float64, or complex128: twice the bytes of every array).
fn one_task_need(s: &Builder, kernel: &Kernel, xs: &[NodeId], out_shape: &[u64]) -> (u64, DType) {
    let shapes: Vec<Vec<usize>> = xs
        .iter()
        .map(|&x| s.meta(x).shape.iter().map(|&d| d as usize).collect())
        .collect();
    let out_usize: Vec<usize> = out_shape.iter().map(|&d| d as usize).collect();
    let refs: Vec<&[usize]> = shapes.iter().map(|v| v.as_slice()).collect();
    let compute = s.linalg_dtype(xs);
    let elem = compute.size() as u64;
    let work =
        nums_function::linalg::workspace_bytes(kernel, &refs, &out_usize).unwrap_or(0) * (elem / 8);
    let ins: u64 = xs.iter().map(|&x| s.meta(x).len() * elem).sum();
    let max_in = xs
        .iter()
        .map(|&x| s.meta(x).len() * elem)
        .max()
        .unwrap_or(0);
    let out = out_shape.iter().product::<u64>() * elem;
    let need = task_peak(&TaskBlocks::whole(ins, xs.len() as u64, max_in, out, work));
    (need, compute)
}

/// The outputs of `kernels` on the whole of `a` (one task each, `shape` and dtype given),
/// refused where one cannot fit one invocation: `why` says why the task is whole.
fn whole_matrix(
    s: &mut Builder,
    bd: &Bound,
    a: NodeId,
    kernels: Vec<(Kernel, Vec<u64>, DType)>,
    why: &str,
) -> Result<Vec<NodeId>, EvalError> {
    let limit = s.job.compute.memory_mb << 20;
    for (kernel, shape, _) in &kernels {
        let (need, _) = one_task_need(s, kernel, &[a], shape);
        if need > limit {
            return Err(bd.err(
                bd.pos,
                format!(
                    "{}(): a is {}; {why}, done in one task, which needs {} MiB; memory_mb is {}",
                    bd.f,
                    dims(&s.meta(a).shape),
                    mib(need),
                    s.job.compute.memory_mb
                ),
            ));
        }
    }
    let x = s.cast(a, s.linalg_dtype(&[a]));
    Ok(kernels
        .into_iter()
        .map(|(kernel, shape, dtype)| s.dense(kernel, vec![x], shape, dtype))
        .collect())
}

/// The factorizations of a graph as `plan` shows them (text, and lines of the plan's
/// SVG): each TSQR tree (its operand, levels and fan-in; per level its blocks and one
/// task's projected memory, `task_peak` with the QR kernel's workspace), each blocked LU
/// (its column panels and tasks) and blocked Cholesky.
pub fn factorizations_text(g: &Graph) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for n in &g.nodes {
        let name = n.def.as_deref().unwrap_or("?");
        match &n.op {
            NodeOp::Lu {
                step: LuStep::Panels,
                ..
            } => {
                let (p, size, w) = (n.meta.shape[0], n.meta.shape[2], n.meta.block[2]);
                let _ = writeln!(
                    s,
                    "\nLU in {name}: {size} x {size} in {p} column panels of {size} x {w}, right-looking with partial pivoting: {} panel tasks, about {} MiB per task",
                    p * (p + 1) / 2,
                    mib(lu_task_bytes(size, w))
                );
            }
            NodeOp::CholeskyBlocked { .. } => {
                let (size, blk) = (n.meta.shape[0], n.meta.block[0]);
                let nb = size.div_ceil(blk);
                let _ = writeln!(
                    s,
                    "\nCholesky in {name}: {size} x {size} in {nb} x {nb} blocks of {blk}, left-looking: {} block tasks, about {} MiB in the largest",
                    nb * (nb + 1) / 2,
                    mib(cholesky_task_bytes(size, blk, n.meta.dtype.size() as u64))
                );
            }
            _ => {}
        }
    }
    let is_r = |id: NodeId| matches!(&g.nodes[id].op, NodeOp::Tsqr { q: None, .. });
    for n in &g.nodes {
        let NodeOp::Tsqr { xs, q: None, .. } = &n.op else {
            continue;
        };
        if xs.iter().any(|&x| is_r(x)) {
            continue; // not a level 0
        }
        // The chain of levels above this one.
        let mut levels = vec![n.id];
        while let Some(up) = g.nodes.iter().find(|m| {
            matches!(&m.op, NodeOp::Tsqr { xs, q: None, .. } if xs == &[*levels.last().expect("one")])
        }) {
            levels.push(up.id);
        }
        let x = &g.nodes[xs[0]];
        // The job-file array whose definition made the tree.
        let name = n.def.as_deref().unwrap_or("?");
        let cols: u64 = xs.iter().map(|&x| g.nodes[x].meta.shape[1]).sum();
        let fan = match &g.nodes[*levels.last().expect("one")].op {
            NodeOp::Tsqr { group, .. } if levels.len() > 1 => *group,
            _ => 1,
        };
        let _ = writeln!(
            s,
            "\nTSQR in {name}: {} x {cols}{} in {} row blocks, {} levels, fan-in {fan}",
            x.meta.shape[0],
            if xs.len() > 1 { " ([a | b])" } else { "" },
            x.meta.grid()[0],
            levels.len()
        );
        for (l, &id) in levels.iter().enumerate() {
            let m = &g.nodes[id].meta;
            let NodeOp::Tsqr { xs, group, .. } = &g.nodes[id].op else {
                continue;
            };
            // The first task's inputs: `group` block rows of the operands.
            let mut ins: Vec<Vec<usize>> = Vec::new();
            for r in 0..(*group).min(g.nodes[xs[0]].meta.grid()[0]) {
                for &x in xs {
                    let xm = &g.nodes[x].meta;
                    ins.extend((0..xm.grid()[1]).map(|c| xm.block_shape(&[r, c])));
                }
            }
            let out = m.block_shape(&[0, 0]);
            let kernel = Kernel::Qr {
                cols: xs.iter().map(|&x| g.nodes[x].meta.grid()[1] as usize).sum(),
                output: nums_layout::batch::QrOutput::R,
            };
            let refs: Vec<&[usize]> = ins.iter().map(Vec::as_slice).collect();
            let work = nums_function::linalg::workspace_bytes(&kernel, &refs, &out).unwrap_or(0);
            let bytes = |s: &[usize]| s.iter().product::<usize>() as u64 * 8;
            let in_bytes: u64 = ins.iter().map(|s| bytes(s)).sum();
            // All inputs taken as the largest: a bound, as the description rounds anyway.
            let need = task_peak(&TaskBlocks::whole(
                in_bytes,
                ins.len() as u64,
                in_bytes,
                bytes(&out),
                work,
            ));
            let what = if l == 0 {
                "one R per row block".to_string()
            } else {
                format!("each the R of up to {group} stacked R's")
            };
            let _ = writeln!(
                s,
                "  level {l}: {} blocks ({what}), about {} MiB per task",
                m.grid()[0],
                mib(need)
            );
        }
    }
    s
}
