//! The graph operations expressions lower to: elementwise ops with NumPy's promotion and
//! broadcasting, reductions, reshapes, transposes, re-blocking, contractions, concatenation.

use super::*;
use crate::refusal::{PyException, Refusal};

/// A refusal at `pos` as the builder's error.
pub(super) fn refused(pos: usize) -> impl Fn(Refusal) -> EvalError {
    move |r| EvalError::Expr(ExprError::refused(pos, r))
}

impl<'a> Builder<'a> {
    pub(super) fn scalar_node(&mut self, value: Scalar, dtype: DType) -> NodeId {
        self.add(
            ArrayMeta::new(vec![], vec![], dtype),
            NodeOp::Fill { value },
        )
    }

    /// `x` in `dtype` (a new node only where it differs).
    pub(super) fn cast(&mut self, x: NodeId, dtype: DType) -> NodeId {
        let m = self.meta(x).clone();
        if m.dtype == dtype {
            return x;
        }
        self.add(ArrayMeta { dtype, ..m }, NodeOp::Rechunk { x })
    }

    /// `op` of an array, or of a number as NumPy's ufunc computes it on a NumPy scalar of
    /// the number's dtype (the result a number of the same strength: a function makes it
    /// a NumPy scalar, see `funcs/elementwise.rs`).
    pub(super) fn unary(&mut self, op: UnaryOp, v: Val, pos: usize) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        // `~` inverts the bits of ints.
        let int = match &v {
            Val::NpScalar(_, d) => d.is_int(),
            Val::Arr(id) => self.meta(*id).dtype.is_int(),
            _ => false,
        };
        let op = if op == UnaryOp::Not && int {
            UnaryOp::Invert
        } else {
            op
        };
        let x = match v {
            Val::Num(x) => {
                let dtype = unary_dtype(op, x.dtype()).map_err(refused(pos))?;
                return Ok(Val::Num(
                    fold_unary(op, x).map_err(refused(pos))?.cast(dtype),
                ));
            }
            Val::NpScalar(x, d) => {
                let dtype = unary_dtype(op, d).map_err(refused(pos))?;
                let v = fold_unary(op, x).map_err(refused(pos))?.cast(dtype);
                return Ok(Val::NpScalar(v, dtype));
            }
            Val::Arr(id) => id,
            _ => return Err(at("expected an array or a number".into())),
        };
        let dtype = unary_dtype(op, self.meta(x).dtype).map_err(refused(pos))?;
        let m = self.meta(x).clone();
        Ok(Val::Arr(
            self.add(ArrayMeta { dtype, ..m }, NodeOp::Unary { op, x }),
        ))
    }

    pub(super) fn binary(&mut self, op: Op, a: Val, b: Val, pos: usize) -> Result<Val, EvalError> {
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
            // `& | ^` are logical of bools, bitwise of ints (`bitwise_and` etc. decide).
            Op::And => BinaryOp::And,
            Op::Or => BinaryOp::Or,
            Op::Xor => BinaryOp::Xor,
            Op::Shl => BinaryOp::Shl,
            Op::Shr => BinaryOp::Shr,
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
    pub(super) fn result_dtype(
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
        let type_error =
            |m: String| EvalError::Expr(ExprError::raising(PyException::TypeError, pos, m));
        let no_complex = |what: &str| {
            type_error(format!(
                "{what} is not defined for complex numbers (NumPy raises TypeError); got {} and {}",
                a.0, b.0
            ))
        };
        Ok(match op {
            BinaryOp::FloorDiv | BinaryOp::Mod if common.is_complex() => {
                return Err(no_complex(op.symbol()));
            }
            _ if op.is_float_fn() && common.is_complex() => {
                return Err(no_complex(op.symbol()));
            }
            // NumPy's float16 loop, which nums-cloud does not have (its steps are its own).
            BinaryOp::NextAfter if common.is_exact() && common.size() == 1 => {
                return Err(at(format!(
                    "nextafter of {} and {} computes in float16 in NumPy, which nums-cloud does not store; cast to float32 first",
                    a.0, b.0
                )));
            }
            // NumPy's loop: the smallest float both arrays cast to safely (a weak Python
            // number takes the array's).
            _ if op.is_float_fn() => match (a, b) {
                ((x, false), (y, false)) => x.to_float_fn().promote(y.to_float_fn()),
                _ => common.to_float_fn(),
            },
            _ if op.is_logical() || op.is_bitwise() => {
                // (int64 with uint64 promotes to float64: NumPy has no loop either.)
                if !common.is_exact() {
                    return Err(type_error(format!(
                        "{} is defined for bools and integers (NumPy raises TypeError); got {} and {}",
                        op.symbol(),
                        a.0,
                        b.0
                    )));
                }
                match op {
                    _ if common != DType::Bool => common,
                    // NumPy has no bool loop of the shifts.
                    BinaryOp::Shl | BinaryOp::Shr => DType::Int8,
                    _ => DType::Bool,
                }
            }
            _ if op.is_predicate() => DType::Bool,
            BinaryOp::Sub if common == DType::Bool => {
                return Err(type_error(
                    "- of two bool operands is not supported (NumPy raises TypeError); use ^ or logical_xor"
                        .into(),
                ));
            }
            BinaryOp::Div => common.to_float(),
            // NumPy has no bool loop of these: two bools compute as int8.
            BinaryOp::Pow | BinaryOp::FloorDiv | BinaryOp::Mod if common == DType::Bool => {
                DType::Int8
            }
            _ => common,
        })
    }

    /// An elementwise op of two operands (arrays broadcast, numbers fold).
    pub(super) fn elementwise2(
        &mut self,
        mut bop: BinaryOp,
        a: Val,
        b: Val,
        pos: usize,
    ) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        // A list operand is NumPy's array of it (`A * [1, 2, 3]`).
        let (a, b) = (self.list_operand(a, pos)?, self.list_operand(b, pos)?);
        // Two Python numbers: Python computes them before NumPy sees the result.
        if let (Val::Num(x), Val::Num(y)) = (&a, &b) {
            return fold_python(bop, *x, *y).map(Val::Num).map_err(refused(pos));
        }
        // True division of an int array by a Python int past its dtype: NumPy 2.4 divides
        // in float64 by the int's exact value (an int array's float64 loop), never by the
        // int wrapped into the array's dtype.
        let as_float = |v: Val, other: &Val, s: &Self| match (v, other) {
            (Val::Num(x), Val::Arr(id))
                if bop == BinaryOp::Div && out_of_range(x, s.meta(*id).dtype).is_some() =>
            {
                Val::Num(Scalar::Float(x.as_f64()))
            }
            (v, _) => v,
        };
        let a = as_float(a, &b, self);
        let b = as_float(b, &a, self);
        let dt = |b: &Self, v: &Val| match v {
            Val::Arr(id) => Some((b.meta(*id).dtype, false)),
            Val::Num(x) => Some((x.dtype(), true)),
            Val::NpScalar(_, d) => Some((*d, false)),
            _ => None,
        };
        let (Some(da), Some(db)) = (dt(self, &a), dt(self, &b)) else {
            return Err(at(format!("{} needs arrays or numbers", bop.symbol())));
        };
        let mut dtype = self.result_dtype(bop, da, db, pos)?;
        // `& | ^` of ints are bitwise, `bitwise_and` of bools logical.
        bop = bop.for_bools(dtype == DType::Bool);
        let scalar_left = matches!((&a, &b), (Val::Num(..), Val::Arr(_)));
        // NumPy computes `x ** 2` as `square(x)`: int8 for bools, as `M ** True` is.
        if let (BinaryOp::Pow, (DType::Bool, false), Val::Num(Scalar::Int(2))) = (bop, da, &b) {
            dtype = DType::Int8;
        }
        // A Python int with an int array takes the array's dtype (NEP 50), and NumPy
        // raises where it does not fit; a comparison compares the values exactly.
        if let (Val::Arr(x), Val::Num(v)) | (Val::Num(v), Val::Arr(x)) = (&a, &b)
            && let Some(dt) = out_of_range(*v, self.meta(*x).dtype)
        {
            // (NumPy compares int arrays with any int exactly; a bool array's is int64.)
            if !bop.is_predicate() || self.meta(*x).dtype == DType::Bool {
                return Err(EvalError::Expr(ExprError::raising(
                    PyException::OverflowError,
                    pos,
                    format!(
                        "Python integer {v} out of bounds for {dt} (NumPy raises OverflowError)"
                    ),
                )));
            }
            // Past every element: the left operand is less than the right one where the
            // int is above the range and on the right, or below it and on the left.
            let above = v.as_i128() > dt.int_range().map(|r| r.1);
            let lt = above != scalar_left;
            let truth = match bop {
                BinaryOp::Lt | BinaryOp::Le => lt,
                BinaryOp::Gt | BinaryOp::Ge => !lt,
                BinaryOp::Eq => false,
                _ => true, // !=
            };
            let m = ArrayMeta {
                dtype: DType::Bool,
                ..self.meta(*x).clone()
            };
            return Ok(Val::Arr(self.add(
                m,
                NodeOp::Fill {
                    value: Scalar::Bool(truth),
                },
            )));
        }
        // NumPy raises for an int array to a negative int power; a literal exponent is
        // known now (an array of exponents is checked when the kernel runs).
        if let (BinaryOp::Pow, Val::Arr(_), Val::Num(e) | Val::NpScalar(e, _)) = (bop, &a, &b)
            && dtype.is_exact()
            && e.as_i128().is_some_and(|v| v < 0)
            && e.as_i64() < 0
        {
            return Err(at(format!(
                "{} (NumPy raises ValueError for ** {e} of an {dtype} array); use a float exponent such as {e:.1}",
                nums_layout::batch::NEGATIVE_POWER
            )));
        }
        Ok(match (a, b) {
            // A NumPy scalar's op with a number is one too.
            (Val::Num(x) | Val::NpScalar(x, _), Val::Num(y) | Val::NpScalar(y, _)) => {
                Val::NpScalar(fold(bop, x, y, dtype).map_err(refused(pos))?, dtype)
            }
            (Val::Arr(x), Val::Num(value)) | (Val::Num(value), Val::Arr(x)) => {
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
            // Two arrays, or an array and a NumPy scalar (a 0-d array).
            (a @ (Val::Arr(_) | Val::NpScalar(..)), b @ (Val::Arr(_) | Val::NpScalar(..))) => {
                let (x, y) = (self.node(a, pos)?, self.node(b, pos)?);
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

    /// A list or tuple of numbers (nested: rows) as `np.asarray` makes it: bool, int64,
    /// float64 or complex128 by the widest kind in it; other values as they are.
    pub(super) fn list_operand(&mut self, v: Val, pos: usize) -> Result<Val, EvalError> {
        /// The most numbers a list operand may hold: it is a node per number.
        const MAX_LIST: usize = 4096;
        let Val::Tuple(items) = v else {
            return Ok(v);
        };
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        fn flatten(v: &[Val], shape: &mut Vec<u64>, depth: usize, out: &mut Vec<Scalar>) -> bool {
            if shape.len() == depth {
                shape.push(v.len() as u64);
            } else if shape[depth] != v.len() as u64 {
                return false;
            }
            for i in v {
                match i {
                    Val::Tuple(t) => {
                        if !flatten(t, shape, depth + 1, out) {
                            return false;
                        }
                    }
                    Val::Num(x) | Val::NpScalar(x, _) if shape.len() == depth + 1 => out.push(*x),
                    _ => return false,
                }
            }
            true
        }
        let (mut shape, mut xs) = (Vec::new(), Vec::new());
        if !flatten(&items, &mut shape, 0, &mut xs)
            || xs.len() as u64 != shape.iter().product::<u64>()
        {
            return Err(at(
                "a list operand holds numbers, or lists of numbers of one length (NumPy's array of it)"
                    .into(),
            ));
        }
        if xs.len() > MAX_LIST {
            return Err(at(format!(
                "a list operand of {} numbers; at most {MAX_LIST} (load larger data from a file)",
                xs.len()
            )));
        }
        let dtype = match xs.iter().map(|x| x.kind()).max() {
            None | Some(ScalarKind::Float) => DType::Float64,
            Some(ScalarKind::Bool) => DType::Bool,
            Some(ScalarKind::Int) => xs
                .iter()
                .map(|x| x.dtype())
                .reduce(DType::promote)
                .unwrap_or(DType::Int64),
            Some(ScalarKind::Complex) => DType::Complex128,
        };
        let parts: Vec<NodeId> = xs
            .iter()
            .map(|x| {
                let m = ArrayMeta::new(vec![1], vec![1], dtype);
                self.add(
                    m,
                    NodeOp::Fill {
                        value: x.cast(dtype),
                    },
                )
            })
            .collect();
        let flat = if parts.is_empty() {
            let m = ArrayMeta::new(vec![0], vec![1], dtype);
            self.add(
                m,
                NodeOp::Fill {
                    value: Scalar::Float(0.0).cast(dtype),
                },
            )
        } else {
            self.concat(parts, 0, pos)?
        };
        Ok(Val::Arr(self.reshape(flat, &shape)))
    }

    /// Broadcasts operands: the output shape, its blocks (each axis from the first operand
    /// that spans it) and the operands re-blocked to match where they span an axis too.
    pub(super) fn align(
        &mut self,
        xs: &[NodeId],
        what: &str,
        pos: usize,
    ) -> Result<Aligned, EvalError> {
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
        check_elements(&shape).map_err(|m| {
            EvalError::Expr(ExprError::new(pos, format!("the result of {what}: {m}")))
        })?;
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

    pub(super) fn where_(&mut self, c: Val, a: Val, b: Val, pos: usize) -> Result<Val, EvalError> {
        let dt = |s: &Self, v: &Val| match v {
            Val::Arr(id) => (s.meta(*id).dtype, false),
            Val::Num(x) => (x.dtype(), true),
            Val::NpScalar(_, d) => (*d, false),
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
    /// Over axes of length 0 it is the op's identity (sum 0, prod 1); min and max have
    /// none and are refused with NumPy's error.
    pub(super) fn reduce(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        axes: Vec<usize>,
        keepdims: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let m = self.meta(x).clone();
        if axes.iter().any(|&d| m.shape[d] == 0) {
            let ufunc = match op {
                ReduceOp::Max => Some("maximum"),
                ReduceOp::Min => Some("minimum"),
                ReduceOp::NanMax => Some("fmax"),
                ReduceOp::NanMin => Some("fmin"),
                _ => None,
            };
            if let Some(u) = ufunc {
                return Err(EvalError::Expr(ExprError::new(
                    pos,
                    format!("zero-size array to reduction operation {u} which has no identity"),
                )));
            }
        }
        let dtype = match op {
            ReduceOp::All | ReduceOp::Any => DType::Bool,
            ReduceOp::Sum | ReduceOp::Prod | ReduceOp::NanSum | ReduceOp::NanProd => {
                m.dtype.sum_dtype()
            }
            _ => m.dtype,
        };
        let kept = |v: &[u64]| -> Vec<u64> {
            (0..m.ndim())
                .filter(|d| !axes.contains(d))
                .map(|d| v[d])
                .collect()
        };
        let r = match self.product_sum(x, op, &axes, pos)? {
            Some(r) => r,
            None => self.add(
                ArrayMeta::new(kept(&m.shape), kept(&m.block), dtype),
                NodeOp::Reduce {
                    x,
                    op,
                    axes: axes.clone(),
                },
            ),
        };
        if !keepdims {
            return Ok(r);
        }
        let shape: Vec<u64> = (0..m.ndim())
            .map(|d| if axes.contains(&d) { 1 } else { m.shape[d] })
            .collect();
        Ok(self.reshape(r, &shape))
    }

    /// `sum(U * V, axis=0)` of float64 arrays of one shape, summed over leading or
    /// trailing axes: an einsum (`ij,ij->j`) that the function sums a row at a time, so no
    /// product block is made (`nums_function::einsum`'s product sums). `None` otherwise.
    fn product_sum(
        &mut self,
        x: NodeId,
        op: ReduceOp,
        axes: &[usize],
        pos: usize,
    ) -> Result<Option<NodeId>, EvalError> {
        let NodeOp::Binary {
            op: BinaryOp::Mul,
            a,
            b,
        } = self.g.nodes[x].op
        else {
            return Ok(None);
        };
        let m = self.meta(x);
        let same = [a, b].iter().all(|&n| {
            let o = self.meta(n);
            o.dtype == DType::Float64 && o.shape == m.shape
        });
        let shape_ok = (1..=26).contains(&m.ndim()) && !axes.is_empty();
        if op != ReduceOp::Sum || m.dtype != DType::Float64 || !same || !shape_ok {
            return Ok(None);
        }
        let letters: Vec<char> = ('a'..='z').take(m.ndim()).collect();
        let out: Vec<char> = (0..m.ndim())
            .filter(|d| !axes.contains(d))
            .map(|d| letters[d])
            .collect();
        let spec = nums_function::einsum::Spec {
            inputs: vec![letters.clone(), letters],
            output: out,
        };
        if !spec.is_product_sum() {
            return Ok(None);
        }
        let subscripts = format!(
            "{0},{0}->{1}",
            spec.inputs[0].iter().collect::<String>(),
            spec.output.iter().collect::<String>()
        );
        match self.einsum(&subscripts, vec![a, b], pos)? {
            Val::Arr(r) => Ok(Some(r)),
            _ => Ok(None),
        }
    }

    /// `x[.., start:start + len, ..]` on each axis of `ranges` (axis, start, len), in bounds.
    pub(super) fn slice(&mut self, x: NodeId, ranges: &[(usize, u64, u64)]) -> NodeId {
        let m = self.meta(x).clone();
        let mut start = vec![0i64; m.ndim()];
        let mut shape = m.shape.clone();
        for &(d, s, l) in ranges {
            start[d] = s as i64;
            shape[d] = l;
        }
        if shape == m.shape {
            return x;
        }
        self.add(
            ArrayMeta::new(shape, m.block.clone(), m.dtype),
            NodeOp::Slice {
                x,
                start,
                step: vec![1; m.ndim()],
            },
        )
    }

    /// `x` with another shape of the same size (checked by the caller).
    pub(super) fn reshape(&mut self, x: NodeId, shape: &[u64]) -> NodeId {
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

    pub(super) fn transpose(&mut self, x: NodeId, perm: Vec<usize>) -> NodeId {
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
    pub(super) fn rechunk(&mut self, x: NodeId, block: Vec<u64>) -> NodeId {
        let m = self.meta(x).clone();
        let want = ArrayMeta::new(m.shape.clone(), block, m.dtype);
        if want == m {
            return x;
        }
        self.reblock(x, want)
    }

    /// A new node of `x` as `want` (its shape; other blocks, dtype or both): each block
    /// task reads the source blocks its block overlaps, whole. Where one task would read
    /// more than [`REBLOCK_SHARE`] of memory_mb (time-contiguous blocks to space-contiguous
    /// ones read every block of the array), it goes through intermediate grids
    /// ([`staged_blocks`]), so no task reads more than that and no array is gathered.
    pub(super) fn reblock(&mut self, x: NodeId, want: ArrayMeta) -> NodeId {
        let m = self.meta(x).clone();
        // Values that do not depend on the blocks (random ones are a function of their
        // flat index) are made in the new blocks, with no tasks that move them.
        let op = &self.g.nodes[x].op;
        if m.dtype == want.dtype && matches!(op, NodeOp::Random { .. } | NodeOp::Fill { .. }) {
            let op = op.clone();
            return self.add(want, op);
        }
        let size = m.dtype.size().max(want.dtype.size()) as u64;
        let budget = (self.job.compute.memory_mb << 20) / REBLOCK_SHARE;
        let mut x = x;
        for mid in staged_blocks(&m.shape, &m.block, &want.block, size, budget) {
            let mid = ArrayMeta::new(m.shape.clone(), mid, want.dtype);
            x = self.add(mid, NodeOp::Rechunk { x });
        }
        self.add(want, NodeOp::Rechunk { x })
    }

    /// An Einstein sum; `subscripts` may leave out the output (NumPy's implicit form).
    /// Every letter has one size in every operand (the contractions built on it: `@`,
    /// `dot`, `tensordot`, `inner`, `trace`, as NumPy's do not broadcast).
    pub(super) fn einsum(
        &mut self,
        subscripts: &str,
        xs: Vec<NodeId>,
        pos: usize,
    ) -> Result<Val, EvalError> {
        self.einsum_with(subscripts, xs, pos, false)
    }

    /// NumPy's `einsum` itself: as [`Builder::einsum`], but an operand's length-1 axis
    /// broadcasts against its letter's size in the others (that operand is the same for
    /// every value of the letter, so the axis is dropped from it).
    pub(super) fn einsum_broadcasting(
        &mut self,
        subscripts: &str,
        xs: Vec<NodeId>,
        pos: usize,
    ) -> Result<Val, EvalError> {
        self.einsum_with(subscripts, xs, pos, true)
    }

    fn einsum_with(
        &mut self,
        subscripts: &str,
        xs: Vec<NodeId>,
        pos: usize,
        broadcast: bool,
    ) -> Result<Val, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let ndims: Vec<usize> = xs.iter().map(|&x| self.meta(x).ndim()).collect();
        let spelled;
        let subscripts = if subscripts.contains('.') {
            spelled = ellipsis_spelled(subscripts, &ndims).map_err(at)?;
            spelled.as_str()
        } else {
            subscripts
        };
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
        for (k, (&x, letters)) in xs.iter().zip(&spec.inputs).enumerate() {
            let m = self.meta(x).clone();
            if m.ndim() != letters.len() {
                return Err(at(format!(
                    "einsum operand {k} has shape {} but subscripts {:?}",
                    shape_str(&m.shape),
                    letters.iter().collect::<String>()
                )));
            }
            let mut own: HashMap<char, u64> = HashMap::new();
            for (d, c) in letters.iter().enumerate() {
                let n = m.shape[d];
                // A letter repeated in one operand (a diagonal) never broadcasts.
                let ok = |s: u64, same: bool| s == n || (broadcast && !same && (s == 1 || n == 1));
                let clash = match (own.get(c), size.get(c)) {
                    (Some(&s), _) => (!ok(s, true)).then_some(s),
                    (None, Some(&s)) => (!ok(s, false)).then_some(s),
                    _ => None,
                };
                if let Some(s) = clash {
                    return Err(at(format!(
                        "einsum letter {c:?} has sizes {s} and {n} (operand {k})"
                    )));
                }
                own.insert(*c, n);
                // A broadcast letter takes the size that is not 1.
                let s = size.entry(*c).or_insert(n);
                if *s == 1 {
                    *s = n;
                }
            }
        }
        // Operands' length-1 axes of broadcast letters: dropped, with their letters.
        let mut spec = spec;
        let xs: Vec<NodeId> = xs
            .iter()
            .zip(spec.inputs.iter_mut())
            .map(|(&x, letters)| {
                let m = self.meta(x).clone();
                let keep: Vec<usize> = (0..letters.len())
                    .filter(|&d| m.shape[d] == size[&letters[d]])
                    .collect();
                if keep.len() == letters.len() {
                    return x;
                }
                *letters = keep.iter().map(|&d| letters[d]).collect();
                let shape: Vec<u64> = keep.iter().map(|&d| m.shape[d]).collect();
                self.reshape(x, &shape)
            })
            .collect();
        // Each letter's block size: the first operand's that spans it.
        let mut block: HashMap<char, u64> = HashMap::new();
        for (&x, letters) in xs.iter().zip(&spec.inputs) {
            for (d, c) in letters.iter().enumerate() {
                block.entry(*c).or_insert(self.meta(x).block[d]);
            }
        }
        // An operand that is a transpose is read through: its source with the letters
        // permuted (no transposed copy of the blocks is made).
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
        let xs = self.read_through_scaling(xs, &mut spec, &size);
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
        let shape: Vec<u64> = spec.output.iter().map(|c| size[c]).collect();
        check_elements(&shape).map_err(|m| at(format!("the result: {m}")))?;
        let meta = ArrayMeta::new(shape, spec.output.iter().map(|c| block[c]).collect(), dtype);
        Ok(Val::Arr(self.add(
            meta,
            NodeOp::Einsum {
                subscripts: explicit,
                xs,
            },
        )))
    }

    /// `A.T @ (B * v[:, None])` (a fit's Hessian, a weighted Gram matrix): the operand
    /// that is a float64 matrix times a float64 vector along the contracted letter is read
    /// as those two, an einsum of three operands that the function computes a piece of rows
    /// at a time (`nums_function::einsum`'s scaled products), so no scaled copy of `B` is
    /// made, stored or read. Anything else is left as it is.
    fn read_through_scaling(
        &mut self,
        xs: Vec<NodeId>,
        spec: &mut nums_function::einsum::Spec,
        size: &HashMap<char, u64>,
    ) -> Vec<NodeId> {
        if xs.len() != 2 {
            return xs;
        }
        for p in 0..2 {
            let NodeOp::Binary {
                op: BinaryOp::Mul,
                a,
                b,
            } = self.g.nodes[xs[p]].op
            else {
                continue;
            };
            let f64s = [xs[p], a, b]
                .iter()
                .all(|&n| self.meta(n).dtype == DType::Float64);
            if !f64s {
                continue;
            }
            // Each factor's letters (right-aligned, as it broadcasts), less its length-1
            // axes where the letter is longer.
            let letters = spec.inputs[p].clone();
            let factor = |s: &Self, n: NodeId| -> Option<(Vec<char>, Vec<u64>)> {
                let shape = &s.meta(n).shape;
                let own = letters.get(letters.len().checked_sub(shape.len())?..)?;
                Some(
                    own.iter()
                        .zip(shape)
                        .filter(|&(c, &d)| d == size[c])
                        .map(|(&c, &d)| (c, d))
                        .unzip(),
                )
            };
            let (Some((la, sa)), Some((lb, sb))) = (factor(self, a), factor(self, b)) else {
                continue;
            };
            let mut inputs = spec.inputs.clone();
            inputs[p] = la.clone();
            inputs.insert(p + 1, lb.clone());
            let folded = nums_function::einsum::Spec {
                inputs,
                output: spec.output.clone(),
            };
            if !folded.is_scaled_product() {
                continue;
            }
            let a = self.reshape(a, &sa);
            let b = self.reshape(b, &sb);
            *spec = folded;
            let mut out = xs;
            out[p] = a;
            out.insert(p + 1, b);
            return out;
        }
        xs
    }

    /// `a @ b` (NumPy's matmul: 1-D and 2-D operands, and stacks, their batch axes
    /// broadcast against each other).
    pub(super) fn matmul(&mut self, a: NodeId, b: NodeId, pos: usize) -> Result<Val, EvalError> {
        let (ma, mb) = (self.meta(a).clone(), self.meta(b).clone());
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let (na, nb) = (ma.ndim(), mb.ndim());
        if na == 0 || nb == 0 {
            return Err(at(
                "@ needs arrays of at least 1 dimension; use * for scalars".into(),
            ));
        }
        // Checked before the batch letters below are sliced for them.
        if na > 8 || nb > 8 {
            return Err(at(
                "@ of arrays of more than 8 dimensions is not supported".into()
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
            _ if ma.shape[..na - 2] != mb.shape[..nb - 2] => {
                // NumPy's: the stacks' batch axes broadcast against each other (trailing
                // axes aligned). The batch letters are aligned so; a missing axis or one
                // of length 1 broadcasts in the einsum (that operand is the same along it,
                // so nothing is copied).
                let Some(out) =
                    nums_layout::meta::broadcast(&ma.shape[..na - 2], &mb.shape[..nb - 2])
                else {
                    return Err(at(format!(
                        "@ of stacks of shapes {} and {}: the batch shapes {} and {} do not broadcast",
                        shape_str(&ma.shape),
                        shape_str(&mb.shape),
                        shape_str(&ma.shape[..na - 2]),
                        shape_str(&mb.shape[..nb - 2])
                    )));
                };
                let n = out.len();
                let (ba, bb, bo) = (
                    &batch[n - (na - 2)..n],
                    &batch[n - (nb - 2)..n],
                    &batch[..n],
                );
                let spec = format!("{ba}xz,{bb}zy->{bo}xy");
                return self.einsum_broadcasting(&spec, vec![a, b], pos);
            }
            _ => {
                let bb = &batch[..na - 2];
                (format!("{bb}xz"), format!("{bb}zy"), format!("{bb}xy"))
            }
        };
        self.einsum(&format!("{sa},{sb}->{so}"), vec![a, b], pos)
    }

    /// The operands (same dtype after promotion) one after another along `axis`.
    pub(super) fn concat(
        &mut self,
        xs: Vec<NodeId>,
        axis: usize,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let at = |m: String| EvalError::Expr(ExprError::new(pos, m));
        let Some(&x0) = xs.first() else {
            return Err(at("nothing to concatenate".into()));
        };
        let first = self.meta(x0).clone();
        if axis >= first.ndim() {
            return Err(at(format!(
                "cannot concatenate {}-d arrays along axis {axis}",
                first.ndim()
            )));
        }
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
        // The blocks of the longest operand along `axis` (the first of them): a short one
        // in front (a prepended slice, a first element) does not cut the result into its
        // blocks.
        let mut base = &first;
        for &x in &xs {
            if self.meta(x).shape[axis] > base.shape[axis] {
                base = self.meta(x);
            }
        }
        let block = base.block.clone();
        Ok(self.add(
            ArrayMeta::new(shape, block, dtype),
            NodeOp::Concat { xs, axis },
        ))
    }
}

/// Broadcast operands: the output's shape and blocks, and the operands re-blocked to fit.
pub(super) type Aligned = (Vec<u64>, Vec<u64>, Vec<NodeId>);

/// `x op y` of two numbers as NumPy's ufunc computes it on NumPy scalars of their dtypes,
/// `dtype` its result's (the promotion rules): ints in int64 as the kernel computes them
/// (wrapping, `x // 0` is 0), a float operand or true division in float64, bools as
/// bools (`True + True` is True). An int to a negative int power is refused, as NumPy
/// raises.
fn fold(op: BinaryOp, x: Scalar, y: Scalar, dtype: DType) -> Result<Scalar, Refusal> {
    if x.kind() == ScalarKind::Complex || y.kind() == ScalarKind::Complex {
        let z = op.apply_complex(complex(x), complex(y));
        return Ok(if op.is_predicate() {
            Scalar::Bool(z.re != 0.0)
        } else {
            Scalar::Complex(z.re, z.im).cast(dtype)
        });
    }
    let ints = x.kind() != ScalarKind::Float && y.kind() != ScalarKind::Float;
    if (op, dtype) == (BinaryOp::NextAfter, DType::Float32) {
        let v = nums_layout::batch::nextafter_f32(x.as_f64() as f32, y.as_f64() as f32);
        return Ok(Scalar::Float(v as f64).cast(dtype));
    }
    let v = match op.apply_i64(x.as_i64(), y.as_i64()) {
        _ if !ints || op == BinaryOp::Div || op.is_float_fn() => {
            Scalar::Float(op.apply(x.as_f64(), y.as_f64()))
        }
        Some(v) => Scalar::Int(v),
        None => {
            return Err(format!(
                "{} (NumPy raises ValueError for {x} ** {y})",
                nums_layout::batch::NEGATIVE_POWER
            )
            .into());
        }
    };
    Ok(v.cast(dtype))
}

/// `x op y` of two Python numbers (literals, `np.pi`, `X.shape[0]`), as Python computes
/// it before NumPy sees the result, so that `X * 10**20` means what it means in NumPy
/// code: ints exact (bools count as ints, `True + True` is 2), an int to a negative power a
/// float, comparisons of an int with a float exact. Where Python raises (division by
/// zero, a float overflow) nums-cloud refuses; so it does for an int past int64, which it
/// cannot hold (write a float: `1e20`).
pub(super) fn fold_python(op: BinaryOp, x: Scalar, y: Scalar) -> Result<Scalar, Refusal> {
    let ints = x.kind() <= ScalarKind::Int && y.kind() <= ScalarKind::Int;
    let zero_division = || {
        Err(Refusal::new(
            PyException::ZeroDivisionError,
            format!(
                "{x} {} {y}: division by zero (Python raises ZeroDivisionError)",
                op.symbol()
            ),
        ))
    };
    if x.kind() == ScalarKind::Complex || y.kind() == ScalarKind::Complex {
        // Python's complex numbers: no order, no `//` or `%`.
        let ordered = matches!(
            op,
            BinaryOp::Lt | BinaryOp::Le | BinaryOp::Gt | BinaryOp::Ge
        );
        if ordered || matches!(op, BinaryOp::FloorDiv | BinaryOp::Mod) {
            return Err(Refusal::new(
                PyException::TypeError,
                format!(
                    "{x} {} {y}: {} is not defined for complex numbers (Python raises TypeError)",
                    op.symbol(),
                    op.symbol()
                ),
            ));
        }
        if op == BinaryOp::Div && complex(y) == nums_layout::C128::new(0.0, 0.0) {
            return zero_division();
        }
        let z = op.apply_complex(complex(x), complex(y));
        return Ok(if op.is_predicate() {
            Scalar::Bool(z.re != 0.0)
        } else {
            Scalar::Complex(z.re, z.im)
        });
    }
    if op.is_logical() || op.is_bitwise() {
        let bools = x.kind() == ScalarKind::Bool && y.kind() == ScalarKind::Bool;
        if !ints {
            return Err(Refusal::new(
                PyException::TypeError,
                format!(
                    "{x} {} {y}: {} of a float (Python raises TypeError)",
                    op.symbol(),
                    op.symbol()
                ),
            ));
        }
        let op = op.for_bools(bools);
        if op.is_logical() {
            return Ok(Scalar::Bool(op.apply(x.as_f64(), y.as_f64()) != 0.0));
        }
        let (a, b) = (x.as_i128().expect("an int"), y.as_i128().expect("an int"));
        let v = match op {
            BinaryOp::BitAnd => Some(a & b),
            BinaryOp::BitOr => Some(a | b),
            BinaryOp::BitXor => Some(a ^ b),
            _ if b < 0 => {
                return Err(format!(
                    "{x} {} {y}: negative shift count (Python raises ValueError)",
                    op.symbol()
                )
                .into());
            }
            BinaryOp::Shl => u32::try_from(b)
                .ok()
                .and_then(|k| a.checked_shl(k))
                .filter(|v| v >> b == a),
            _ => Some(if b >= 127 {
                if a < 0 { -1 } else { 0 }
            } else {
                a >> b
            }),
        };
        return v.and_then(Scalar::from_i128).ok_or_else(|| {
            format!(
                "{x} {} {y} is past int64's range (and uint64's)",
                op.symbol()
            )
            .into()
        });
    }
    if op.is_predicate() {
        let t = match (exact_int(x), exact_int(y)) {
            (Some(a), Some(b)) => compare_i128(op, a, b),
            _ => op.apply(x.as_f64(), y.as_f64()) != 0.0,
        };
        return Ok(Scalar::Bool(t));
    }
    if ints {
        let exact = |s: Scalar| s.as_i128().expect("a bool or an int");
        let (a, b) = (exact(x), exact(y));
        let v = match op {
            // arctan2, hypot, copysign, logaddexp, nextafter of two ints: NumPy's float64.
            _ if op.is_float_fn() => return Ok(Scalar::Float(op.apply(a as f64, b as f64))),
            BinaryOp::Div | BinaryOp::FloorDiv | BinaryOp::Mod if b == 0 => return zero_division(),
            BinaryOp::Div => return Ok(Scalar::Float(a as f64 / b as f64)),
            BinaryOp::Pow if b < 0 && a == 0 => return zero_division(),
            BinaryOp::Pow if b < 0 => return Ok(Scalar::Float((a as f64).powf(b as f64))),
            BinaryOp::Pow => u32::try_from(b).ok().and_then(|e| a.checked_pow(e)),
            BinaryOp::FloorDiv => Some(floor_div(a, b)),
            BinaryOp::Mod => Some(a - b * floor_div(a, b)),
            BinaryOp::Add => a.checked_add(b),
            BinaryOp::Sub => a.checked_sub(b),
            BinaryOp::Mul => a.checked_mul(b),
            BinaryOp::Maximum | BinaryOp::ClipLow => Some(a.max(b)),
            BinaryOp::Minimum | BinaryOp::ClipHigh => Some(a.min(b)),
            _ => unreachable!("predicates and logical ops are folded above"),
        };
        // Up to uint64's largest, which a uint64 array takes (others refuse it).
        return match v.and_then(Scalar::from_i128) {
            Some(v) => Ok(v),
            None => Err(format!(
                "{x} {} {y} is past int64's range (and uint64's): Python's ints have no \
                 limit, nums-cloud's stop at uint64's (write a float, such as {:e})",
                op.symbol(),
                op.apply(x.as_f64(), y.as_f64())
            )
            .into()),
        };
    }
    let (a, b) = (x.as_f64(), y.as_f64());
    let by_zero = matches!(op, BinaryOp::Div | BinaryOp::FloorDiv | BinaryOp::Mod) && b == 0.0;
    // (Zero to a negative finite power raises; to -inf it is inf, as C's pow says.)
    if by_zero || (op == BinaryOp::Pow && a == 0.0 && b < 0.0 && b.is_finite()) {
        return zero_division();
    }
    let v = op.apply(a, b);
    if op == BinaryOp::Pow && a < 0.0 && b.is_finite() && b.fract() != 0.0 {
        return Err(format!(
            "{x} ** {y} is a complex number in Python; nums-cloud's numbers are real"
        )
        .into());
    }
    if op == BinaryOp::Pow && v.is_infinite() && a.is_finite() && b.is_finite() {
        return Err(Refusal::new(
            PyException::OverflowError,
            format!("{x} ** {y} overflows float64 (Python raises OverflowError)"),
        ));
    }
    Ok(Scalar::Float(v))
}

/// A number's exact integer value: an int or bool, or a float that holds an integer.
fn exact_int(x: Scalar) -> Option<i128> {
    match x {
        Scalar::Float(f) if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 => Some(f as i128),
        Scalar::Float(_) => None,
        x => x.as_i128(),
    }
}

/// A number as a complex128 (a real one with imaginary part 0).
fn complex(x: Scalar) -> nums_layout::C128 {
    let (re, im) = x.as_complex();
    nums_layout::C128::new(re, im)
}

/// A comparison of two exact integers.
fn compare_i128(op: BinaryOp, a: i128, b: i128) -> bool {
    match op {
        BinaryOp::Lt => a < b,
        BinaryOp::Le => a <= b,
        BinaryOp::Gt => a > b,
        BinaryOp::Ge => a >= b,
        BinaryOp::Eq => a == b,
        _ => a != b,
    }
}

/// A unary operator (`-`, `+`, `~`) of a Python number, as Python computes it: bools count
/// as ints (`-True` is -1), ints exact (refused past int64); `~` of a float refused
/// (Python raises TypeError), and of a bool (an int in Python, which deprecates it).
pub(super) fn unary_python(op: crate::expr::UnOp, x: Scalar) -> Result<Scalar, Refusal> {
    use crate::expr::UnOp;
    if x.kind() == ScalarKind::Float {
        let f = x.as_f64();
        return match op {
            UnOp::Neg => Ok(Scalar::Float(-f)),
            UnOp::Pos => Ok(Scalar::Float(f)),
            UnOp::Invert => Err(Refusal::new(
                PyException::TypeError,
                format!("~{x}: ~ of a float (Python raises TypeError); ~ inverts bool arrays"),
            )),
        };
    }
    if let Scalar::Complex(re, im) = x {
        return match op {
            UnOp::Neg => Ok(Scalar::Complex(-re, -im)),
            UnOp::Pos => Ok(x),
            UnOp::Invert => Err(Refusal::new(
                PyException::TypeError,
                format!("~{x}: ~ of a complex number (Python raises TypeError)"),
            )),
        };
    }
    if (op, x.kind()) == (UnOp::Invert, ScalarKind::Bool) {
        return Err(Refusal::new(
            PyException::TypeError,
            format!(
                "~{x}: ~ of a Python bool is an int (-1 or -2), deprecated by Python, which \
             will raise TypeError; write logical_not({x}) or {}",
                !x.as_bool()
            ),
        ));
    }
    let v = x.as_i128().expect("a bool or an int");
    let r = match op {
        UnOp::Neg => -v,
        UnOp::Pos => v,
        UnOp::Invert => -v - 1,
    };
    Scalar::from_i128(r).ok_or_else(|| {
        format!(
            "-({x}) is past int64's range: Python's ints have no limit, nums-cloud's stop at int64's smallest"
        )
        .into()
    })
}

/// `op` of one number as NumPy's ufunc computes it (the caller casts the result to the
/// op's dtype): ints and bools in int64 where the op keeps ints (`floor` and `ceil` too),
/// predicates as bools, a complex in complex128 (real results for `abs`, `angle`, `real`
/// and `imag`), the rest in float64.
fn fold_unary(op: UnaryOp, x: Scalar) -> Result<Scalar, Refusal> {
    if x.kind() == ScalarKind::Complex {
        unary_dtype(op, DType::Complex128)?;
        let z = op.apply_complex(complex(x));
        return Ok(if op.is_predicate() {
            Scalar::Bool(z.re != 0.0)
        } else if op.is_real_of_complex() {
            Scalar::Float(z.re)
        } else {
            Scalar::Complex(z.re, z.im)
        });
    }
    let keeps = op.keeps_ints() || op.rounds();
    if let (Scalar::UInt(u), false) = (x, op.is_predicate())
        && keeps
    {
        // Past int64: a uint64, as NumPy makes such a Python int.
        return Ok(op
            .apply_int(u)
            .map_or(Scalar::Float(op.apply(u as f64)), Scalar::UInt));
    }
    Ok(match op.apply_i64(x.as_i64()) {
        _ if op.is_predicate() => Scalar::Bool(op.apply(x.as_f64()) != 0.0),
        Some(v) if keeps && x.kind() != ScalarKind::Float => Scalar::Int(v),
        _ => Scalar::Float(op.apply(x.as_f64())),
    })
}

/// The dtype NumPy 2 gives `op` of an array of `dt`, or its error where it has no loop.
pub(super) fn unary_dtype(op: UnaryOp, dt: DType) -> Result<DType, Refusal> {
    use DType::{Bool, Float64, Int8};
    Ok(match (op, dt) {
        (UnaryOp::Not, Bool) => Bool,
        (UnaryOp::Not | UnaryOp::Invert, d) if !d.is_int() => {
            return Err(Refusal::new(
                PyException::TypeError,
                format!(
                    "~ and bitwise_invert need a bool or integer array; got {d} (NumPy raises TypeError)"
                ),
            ));
        }
        (UnaryOp::Floor | UnaryOp::Ceil | UnaryOp::Trunc | UnaryOp::Signbit | UnaryOp::Cbrt, d)
            if d.is_complex() =>
        {
            return Err(Refusal::new(
                PyException::TypeError,
                format!(
                    "{} is not defined for complex numbers (NumPy raises TypeError); got {d}",
                    op.name()
                ),
            ));
        }
        (UnaryOp::Neg, Bool) => {
            return Err(Refusal::new(
                PyException::TypeError,
                "the - operator is not supported for bool arrays (NumPy raises TypeError); use ~",
            ));
        }
        (UnaryOp::Sign, Bool) => {
            return Err(Refusal::new(
                PyException::TypeError,
                "sign is not defined for bool arrays (NumPy raises TypeError)",
            ));
        }
        (UnaryOp::Sigmoid, d) if d.is_complex() => {
            return Err(Refusal::new(
                PyException::TypeError,
                format!(
                    "sigmoid is not defined for complex numbers (NumPy raises TypeError); got {d}"
                ),
            ));
        }
        (op, _) if op.is_predicate() => Bool,
        (op, d) if op.is_real_of_complex() && d.is_complex() => d.real(),
        // NumPy's loops for bools: abs, floor, ceil, real and imag keep bool; square and
        // conj compute in int8; angle is float64.
        (
            UnaryOp::Abs
            | UnaryOp::Floor
            | UnaryOp::Ceil
            | UnaryOp::Trunc
            | UnaryOp::Real
            | UnaryOp::Imag,
            Bool,
        ) => Bool,
        (UnaryOp::Square | UnaryOp::Conj, Bool) => Int8,
        (UnaryOp::Angle, Bool) => Float64,
        (op, d) if op.keeps_ints() && d.kind() != ScalarKind::Float => d,
        (op, d) if op.rounds() && d.is_exact() => d,
        (_, d) => d.to_float_fn(),
    })
}

/// A re-blocking task reads at most 1/REBLOCK_SHARE of memory_mb of source blocks (the
/// rest: their decoding, the output block and its encoding).
const REBLOCK_SHARE: u64 = 4;

/// Elements along one axis that a block of `to` elements reads from source blocks of
/// `from` (whole blocks: at most the axis, `len`, rounded up to blocks): one block where
/// it lies inside one, `to / from` where blocks align, else one more than fit.
fn reblock_span(len: u64, from: u64, to: u64) -> u64 {
    let count = if from.is_multiple_of(to) || to.is_multiple_of(from) {
        to.div_ceil(from)
    } else {
        (to - 1) / from + 2
    };
    count.min(len.div_ceil(from)) * from
}

/// Stages of more than one intermediate grid tried (Cubed's multistage rechunk).
const MAX_STAGES: u32 = 5;

/// The intermediate block grids, in order, of re-blocking `shape` from blocks `from` to
/// `to` when a direct task would read more than `budget` bytes of source blocks (elements
/// of `size` bytes): the plan of fewest bytes read in all among [`staged_block`]'s one
/// grid and chains of 2 to [`MAX_STAGES`] - 1 grids whose blocks go geometrically from
/// `from` to `to` along each axis, every stage's reads within `budget`. Empty when a
/// direct task fits, or when no plan does (a source or target block too large on its
/// own). Where one axis goes from whole to split and another the other way, a task of
/// one stage reads whole blocks of the last along the axis it splits: each stage reads
/// the array times the ratio of its blocks' sizes there, so k stages reading the k-th root
/// of the whole ratio each beat two reading its square root once the ratio is large
/// (N x N from rows to columns: about 2 N^0.5 times the array for two, 3 N^(1/3) for
/// three).
pub(crate) fn staged_blocks(
    shape: &[u64],
    from: &[u64],
    to: &[u64],
    size: u64,
    budget: u64,
) -> Vec<Vec<u64>> {
    let Some(mid) = staged_block(shape, from, to, size, budget) else {
        return Vec::new();
    };
    let read = |f: &[u64], t: &[u64]| -> u64 {
        (0..shape.len())
            .map(|d| reblock_span(shape[d], f[d].max(1), t[d].max(1)))
            .product::<u64>()
            .saturating_mul(size)
    };
    let blocks = |b: &[u64]| -> f64 {
        (shape.iter().zip(b))
            .map(|(&n, &k)| n.div_ceil(k.max(1)) as f64)
            .product()
    };
    // Bytes read by every stage of `from`, `mids`, `to`; None where a stage's task
    // would read more than `budget`.
    let cost = |mids: &[Vec<u64>]| -> Option<f64> {
        let chain: Vec<&[u64]> = std::iter::once(from)
            .chain(mids.iter().map(|m| m.as_slice()))
            .chain([to])
            .collect();
        chain.windows(2).try_fold(0.0, |sum, w| {
            let r = read(w[0], w[1]);
            (r <= budget).then(|| sum + blocks(w[1]) * r as f64)
        })
    };
    let mut best = (cost(std::slice::from_ref(&mid)), vec![mid]);
    for stages in 3..=MAX_STAGES {
        let mids: Vec<Vec<u64>> = (1..stages)
            .map(|i| {
                let t = i as f64 / stages as f64;
                (0..shape.len())
                    .map(|d| {
                        let (f, g) = (from[d].max(1) as f64, to[d].max(1) as f64);
                        (f.powf(1.0 - t) * g.powf(t))
                            .round()
                            .clamp(1.0, shape[d] as f64) as u64
                    })
                    .collect()
            })
            .collect();
        // Rounding may make neighbours equal: a stage that moves nothing is left out.
        let mut mids = mids;
        mids.dedup();
        mids.retain(|m| m.as_slice() != from && m.as_slice() != to);
        if let Some(c) = cost(&mids)
            && best.0.is_none_or(|b| c < b)
        {
            best = (Some(c), mids);
        }
    }
    best.1
}

/// The intermediate block grid of re-blocking `shape` from blocks `from` to `to`, when
/// a direct task would read more than `budget` bytes of source blocks (elements of
/// `size` bytes); None when it would not, or when no grid keeps both stages under it (a
/// source or target block too large on its own: the plan then names it).
///
/// rechunker's two-stage plan: the intermediate blocks start at the smaller of the two
/// blocks along each axis, so a stage-1 task reads about one source block and a stage-2
/// task about one target block; they then grow (doubling along one axis at a time) while
/// both stages' reads stay within `budget` and the bytes the two stages read in all
/// (each source block is read once for every intermediate block it overlaps, each
/// intermediate block once for every target block) go down.
pub(crate) fn staged_block(
    shape: &[u64],
    from: &[u64],
    to: &[u64],
    size: u64,
    budget: u64,
) -> Option<Vec<u64>> {
    if shape.contains(&0) || from == to {
        return None;
    }
    let read = |f: &[u64], t: &[u64]| -> u64 {
        (0..shape.len())
            .map(|d| reblock_span(shape[d], f[d].max(1), t[d].max(1)))
            .product::<u64>()
            .saturating_mul(size)
    };
    if read(from, to) <= budget {
        return None;
    }
    // The bytes both stages read in all: blocks of the array times what each reads.
    let total = |mid: &[u64]| -> f64 {
        let blocks = |b: &[u64]| -> f64 {
            shape
                .iter()
                .zip(b)
                .map(|(&n, &k)| n.div_ceil(k.max(1)) as f64)
                .product()
        };
        blocks(mid) * read(from, mid) as f64 + blocks(to) * read(mid, to) as f64
    };
    let fits = |mid: &[u64]| read(from, mid) <= budget && read(mid, to) <= budget;
    let mut mid: Vec<u64> = (0..shape.len())
        .map(|d| from[d].min(to[d]).max(1))
        .collect();
    if !fits(&mid) {
        return None;
    }
    loop {
        let now = total(&mid);
        let best = (0..shape.len())
            .rev()
            .filter(|&d| mid[d] < from[d].max(to[d]).min(shape[d]))
            .map(|d| {
                let mut m = mid.clone();
                m[d] = (m[d] * 2).min(from[d].max(to[d])).min(shape[d]);
                m
            })
            .filter(|m| fits(m))
            .map(|m| (total(&m), m))
            .filter(|(t, _)| *t < now)
            .min_by(|a, b| a.0.total_cmp(&b.0));
        match best {
            Some((_, m)) => mid = m,
            None => return Some(mid),
        }
    }
}

/// einsum's subscripts with each `...` spelled as letters the string does not use, as
/// NumPy reads it: an operand's `...` stands for its axes the letters leave (the
/// operands' broadcast right-aligned); an implicit output is the `...` axes, then the
/// letters that appear once, sorted; an explicit output without `...` is an error when
/// any `...` stands for axes.
fn ellipsis_spelled(subscripts: &str, ndims: &[usize]) -> Result<String, String> {
    let text: String = subscripts.chars().filter(|c| !c.is_whitespace()).collect();
    let (lhs, rhs) = match text.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (text.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != ndims.len() {
        return Err(format!(
            "einsum subscripts {subscripts:?} name {} operands, but {} are given",
            terms.len(),
            ndims.len()
        ));
    }
    let malformed = |t: &str| {
        t.matches('.').count() != t.matches("...").count() * 3 || t.matches("...").count() > 1
    };
    if terms.iter().copied().chain(rhs).any(malformed) {
        return Err(format!(
            "einsum subscripts {subscripts:?}: '.' only as one '...' per operand and output"
        ));
    }
    // Axes each operand's `...` stands for.
    let mut ell = Vec::with_capacity(terms.len());
    for (k, (t, &n)) in terms.iter().zip(ndims).enumerate() {
        let letters = t.chars().filter(|c| *c != '.').count();
        if t.contains("...") {
            ell.push(n.checked_sub(letters).ok_or_else(|| {
                format!(
                    "einstein sum subscripts string contains too many subscripts for operand {k}"
                )
            })?);
        } else {
            ell.push(0);
        }
    }
    let most = ell.iter().copied().max().unwrap_or(0);
    let free: Vec<char> = ('a'..='z')
        .chain('A'..='Z')
        .filter(|c| !text.contains(*c))
        .take(most)
        .collect();
    if free.len() < most {
        return Err(format!(
            "einsum subscripts {subscripts:?}: too many axes for '...' (52 letters in all)"
        ));
    }
    let spelled_term =
        |t: &str, e: usize| t.replace("...", &free[most - e..].iter().collect::<String>());
    let inputs: Vec<String> = terms
        .iter()
        .zip(&ell)
        .map(|(t, &e)| spelled_term(t, e))
        .collect();
    let out = match rhs {
        Some(r) if r.contains("...") => spelled_term(r, most),
        Some(_) if most > 0 => {
            return Err("output has more dimensions than subscripts given in einstein sum, but no '...' ellipsis provided to broadcast the extra dimensions.".into());
        }
        Some(r) => r.to_string(),
        None => {
            let mut once: Vec<char> = lhs
                .chars()
                .filter(|c| c.is_ascii_alphabetic() && lhs.matches(*c).count() == 1)
                .collect();
            once.sort_unstable();
            free.iter().chain(&once).collect()
        }
    };
    Ok(format!("{}->{out}", inputs.join(",")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_to_space_reblocking_goes_through_a_grid_both_stages_fit() {
        // 4096 x 48 x 48 float64 (75 MB), time-contiguous to space-contiguous, 32 MiB.
        let (shape, from, to) = ([4096, 48, 48], [32, 48, 48], [4096, 6, 6]);
        let budget = 32 << 20;
        let direct: u64 = shape.iter().product::<u64>() * 8;
        assert!(direct > budget);
        let mid = staged_block(&shape, &from, &to, 8, budget).expect("staged");
        let read = |f: &[u64], t: &[u64]| -> u64 {
            (0..3)
                .map(|d| reblock_span(shape[d], f[d], t[d]))
                .product::<u64>()
                * 8
        };
        assert!(
            read(&from, &mid) <= budget && read(&mid, &to) <= budget,
            "{mid:?}"
        );
        // Larger than the smallest start (fewer, larger blocks), never past either side.
        assert!(mid.iter().product::<u64>() > 32 * 6 * 6, "{mid:?}");
        for d in 0..3 {
            assert!(mid[d] <= from[d].max(to[d]), "{mid:?}");
        }
    }

    /// Rows to columns of a square array: each stage of a grid reads whole blocks along
    /// the axis it splits, so past two stages the reads shrink (3 N^(1/3) times the array
    /// against about 2 N^(1/2)); every stage within the budget.
    #[test]
    fn rows_to_columns_goes_through_more_grids_when_they_read_less() {
        let read = |shape: &[u64], f: &[u64], t: &[u64]| -> u64 {
            (0..2)
                .map(|d| reblock_span(shape[d], f[d], t[d]))
                .product::<u64>()
                * 8
        };
        let total = |shape: &[u64], chain: &[Vec<u64>]| -> u64 {
            (chain.windows(2))
                .map(|w| {
                    let blocks: u64 = (0..2).map(|d| shape[d].div_ceil(w[1][d])).product();
                    blocks * read(shape, &w[0], &w[1])
                })
                .sum()
        };
        for n in [1024u64, 1 << 14] {
            let (shape, from, to) = ([n, n], vec![1, n], vec![n, 1]);
            let budget = n * n * 8 / 2;
            let mids = staged_blocks(&shape, &from, &to, 8, budget);
            let two = staged_block(&shape, &from, &to, 8, budget).expect("a grid fits");
            assert!(mids.len() >= 2, "{n}: {mids:?}");
            let chain: Vec<Vec<u64>> = std::iter::once(from.clone())
                .chain(mids.clone())
                .chain([to.clone()])
                .collect();
            for w in chain.windows(2) {
                assert!(read(&shape, &w[0], &w[1]) <= budget, "{n}: {chain:?}");
            }
            let (many, once) = (
                total(&shape, &chain),
                total(&shape, &[from.clone(), two, to.clone()]),
            );
            assert!(
                many < once,
                "{n}: {many} bytes through {mids:?}, {once} through one grid"
            );
        }
        // A reblocking one grid serves best keeps one (time-contiguous to space-contiguous
        // of a small cube).
        let (shape, from, to) = ([4096, 48, 48], [32, 48, 48], [4096, 6, 6]);
        assert_eq!(staged_blocks(&shape, &from, &to, 8, 32 << 20).len(), 1);
    }

    #[test]
    fn reblocking_that_fits_or_cannot_fit_is_direct() {
        // Reads of a few blocks: direct.
        assert_eq!(
            staged_block(&[1000, 10], &[100, 10], &[250, 10], 8, 1 << 20),
            None
        );
        // A target block larger than the budget by itself: no stage helps.
        assert_eq!(
            staged_block(&[1 << 20], &[1 << 10], &[1 << 20], 8, 1 << 20),
            None
        );
        // Spans: inside one block, aligned, unaligned, capped at the axis.
        assert_eq!(reblock_span(100, 50, 10), 50);
        assert_eq!(reblock_span(100, 10, 50), 50);
        assert_eq!(reblock_span(100, 30, 40), 90);
        assert_eq!(reblock_span(100, 30, 100), 120);
        assert_eq!(reblock_span(10, 30, 7), 30);
    }
}
