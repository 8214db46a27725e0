//! The wire format between driver and function: a batch of block tasks, the invocation
//! payload that carries it, and the stats a function measures.

use serde::{Deserialize, Serialize};

use crate::meta::ArrayMeta;
use crate::store::StoreSpec;

/// An array a batch touches: where it is stored and how it is blocked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ArrayRef {
    /// Path of the Zarr array, relative to the store root.
    pub path: String,
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
}

/// One block of one of the batch's arrays.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockRef {
    /// Index into [`Batch::arrays`].
    pub array: u32,
    pub index: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RandomDist {
    Normal,
    Uniform,
    /// Integers in `[low, high)`, int64.
    Integers {
        low: i64,
        high: i64,
    },
}

impl RandomDist {
    pub fn name(self) -> &'static str {
        match self {
            RandomDist::Normal => "normal",
            RandomDist::Uniform => "uniform",
            RandomDist::Integers { .. } => "integers",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum UnaryOp {
    Neg,
    Not,
    Abs,
    Exp,
    Expm1,
    Log,
    Log1p,
    Sqrt,
    Square,
    Sign,
    Sin,
    Cos,
    Tan,
    Tanh,
    Floor,
    Ceil,
    Sigmoid,
    IsNan,
    IsFinite,
    IsInf,
}

impl UnaryOp {
    /// The op on one float64, as NumPy computes it (`Not` gives 1.0 or 0.0).
    pub fn apply(self, v: f64) -> f64 {
        match self {
            UnaryOp::Neg => -v,
            UnaryOp::Not => (v == 0.0) as u8 as f64,
            UnaryOp::Abs => v.abs(),
            UnaryOp::Exp => v.exp(),
            UnaryOp::Expm1 => v.exp_m1(),
            UnaryOp::Log => v.ln(),
            UnaryOp::Log1p => v.ln_1p(),
            UnaryOp::Sqrt => v.sqrt(),
            UnaryOp::Square => v * v,
            UnaryOp::Sign if v.is_nan() => v,
            UnaryOp::Sign => (v > 0.0) as u8 as f64 - (v < 0.0) as u8 as f64,
            UnaryOp::Sin => v.sin(),
            UnaryOp::Cos => v.cos(),
            UnaryOp::Tan => v.tan(),
            UnaryOp::Tanh => v.tanh(),
            UnaryOp::Floor => v.floor(),
            UnaryOp::Ceil => v.ceil(),
            UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
            UnaryOp::IsNan => v.is_nan() as u8 as f64,
            UnaryOp::IsFinite => v.is_finite() as u8 as f64,
            UnaryOp::IsInf => v.is_infinite() as u8 as f64,
        }
    }

    /// Gives bool whatever the input (`~`, `isnan`, ...).
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            UnaryOp::Not | UnaryOp::IsNan | UnaryOp::IsFinite | UnaryOp::IsInf
        )
    }

    /// Keeps an int64 (or bool, for `abs`) input's dtype instead of computing in floats,
    /// as NumPy does.
    pub fn keeps_ints(self) -> bool {
        matches!(
            self,
            UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Square | UnaryOp::Sign
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    FloorDiv,
    Mod,
    Maximum,
    Minimum,
    Lt,
    Le,
    Gt,
    Ge,
    Eq,
    Ne,
    And,
    Or,
    Xor,
}

impl BinaryOp {
    /// Comparisons and logic give bool; arithmetic gives float64.
    pub fn is_predicate(self) -> bool {
        matches!(
            self,
            BinaryOp::Lt
                | BinaryOp::Le
                | BinaryOp::Gt
                | BinaryOp::Ge
                | BinaryOp::Eq
                | BinaryOp::Ne
                | BinaryOp::And
                | BinaryOp::Or
                | BinaryOp::Xor
        )
    }

    /// `& | ^` on bool (and on int64 as bitwise ops, which nums-cloud does not do).
    pub fn is_logical(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Xor)
    }

    /// The op on two float64s as NumPy computes it; predicates give 1.0 or 0.0.
    pub fn apply(self, x: f64, y: f64) -> f64 {
        let b = |v: bool| v as u8 as f64;
        match self {
            BinaryOp::Add => x + y,
            BinaryOp::Sub => x - y,
            BinaryOp::Mul => x * y,
            BinaryOp::Div => x / y,
            BinaryOp::Pow => x.powf(y),
            // Python's floor division and modulo: the remainder takes the divisor's sign.
            BinaryOp::FloorDiv => (x / y).floor(),
            BinaryOp::Mod => {
                let r = x % y;
                if r != 0.0 && (r < 0.0) != (y < 0.0) {
                    r + y
                } else {
                    r
                }
            }
            // NumPy's maximum and minimum propagate NaN.
            BinaryOp::Maximum if x.is_nan() || y.is_nan() => f64::NAN,
            BinaryOp::Maximum => x.max(y),
            BinaryOp::Minimum if x.is_nan() || y.is_nan() => f64::NAN,
            BinaryOp::Minimum => x.min(y),
            BinaryOp::Lt => b(x < y),
            BinaryOp::Le => b(x <= y),
            BinaryOp::Gt => b(x > y),
            BinaryOp::Ge => b(x >= y),
            BinaryOp::Eq => b(x == y),
            BinaryOp::Ne => b(x != y),
            BinaryOp::And => b(x != 0.0 && y != 0.0),
            BinaryOp::Or => b(x != 0.0 || y != 0.0),
            BinaryOp::Xor => b((x != 0.0) != (y != 0.0)),
        }
    }

    pub fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Pow => "**",
            BinaryOp::FloorDiv => "//",
            BinaryOp::Mod => "%",
            BinaryOp::Maximum => "maximum",
            BinaryOp::Minimum => "minimum",
            BinaryOp::Lt => "<",
            BinaryOp::Le => "<=",
            BinaryOp::Gt => ">",
            BinaryOp::Ge => ">=",
            BinaryOp::Eq => "==",
            BinaryOp::Ne => "!=",
            BinaryOp::And => "&",
            BinaryOp::Or => "|",
            BinaryOp::Xor => "^",
        }
    }
}

/// How a reduction combines values. Each is associative, so any grouping of blocks into
/// partial results gives the same value (up to float rounding, in a fixed order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReduceOp {
    Sum,
    Prod,
    Min,
    Max,
    All,
    Any,
    /// Like Sum, Prod, Min, Max but NaN values are skipped (NumPy's `nansum` etc.).
    NanSum,
    NanProd,
    NanMin,
    NanMax,
}

impl ReduceOp {
    /// The value of a reduction over nothing.
    pub fn identity(self) -> f64 {
        match self {
            ReduceOp::Sum | ReduceOp::NanSum | ReduceOp::Any => 0.0,
            ReduceOp::Prod | ReduceOp::NanProd | ReduceOp::All => 1.0,
            ReduceOp::Min | ReduceOp::NanMin => f64::INFINITY,
            ReduceOp::Max | ReduceOp::NanMax => f64::NEG_INFINITY,
        }
    }

    /// Combines an accumulated value with the next one, as NumPy does (Min and Max
    /// propagate NaN, the nan variants skip it).
    pub fn apply(self, acc: f64, v: f64) -> f64 {
        match self {
            ReduceOp::Sum => acc + v,
            ReduceOp::Prod => acc * v,
            ReduceOp::Min if acc.is_nan() || v.is_nan() => f64::NAN,
            ReduceOp::Min => acc.min(v),
            ReduceOp::Max if acc.is_nan() || v.is_nan() => f64::NAN,
            ReduceOp::Max => acc.max(v),
            ReduceOp::All => (acc != 0.0 && v != 0.0) as u8 as f64,
            ReduceOp::Any => (acc != 0.0 || v != 0.0) as u8 as f64,
            ReduceOp::NanSum if v.is_nan() => acc,
            ReduceOp::NanSum => acc + v,
            ReduceOp::NanProd if v.is_nan() => acc,
            ReduceOp::NanProd => acc * v,
            // f64::min/max return the non-NaN operand: NumPy's nanmin/nanmax.
            ReduceOp::NanMin => acc.min(v),
            ReduceOp::NanMax => acc.max(v),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Min => "min",
            ReduceOp::Max => "max",
            ReduceOp::All => "all",
            ReduceOp::Any => "any",
            ReduceOp::NanSum => "nansum",
            ReduceOp::NanProd => "nanprod",
            ReduceOp::NanMin => "nanmin",
            ReduceOp::NanMax => "nanmax",
        }
    }
}

/// What a task computes. Inputs are listed in [`Task::inputs`] in the order each kernel
/// documents; the output block's shape comes from the output array's grid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kernel", rename_all = "snake_case")]
pub enum Kernel {
    /// No inputs; every element `value`.
    Fill {
        #[serde(with = "any_f64")]
        value: f64,
    },
    /// No inputs; element at flat index `i` of the whole array is a pure function of
    /// (`seed`, `i`), so values do not depend on the block shape.
    Random { dist: RandomDist, seed: u64 },
    /// One input.
    Unary { op: UnaryOp },
    /// Two inputs whose block shapes broadcast (NumPy's rules) to the output block's.
    Binary { op: BinaryOp },
    /// One input and a scalar; `scalar_left` puts the scalar on the left (`2 - x`).
    Scalar {
        op: BinaryOp,
        #[serde(with = "any_f64")]
        value: f64,
        scalar_left: bool,
    },
    /// Three inputs (condition, then values where true and where false) whose block shapes
    /// broadcast to the output block's (`where`).
    Where,
    /// No inputs; element at global index `g` is `start + step * g[axis]` (arange,
    /// linspace, index arrays).
    Iota {
        axis: usize,
        #[serde(with = "any_f64")]
        start: f64,
        #[serde(with = "any_f64")]
        step: f64,
    },
    /// No inputs; 2-D, 1 where `column - row == k`, else 0 (eye, identity).
    Eye { k: i64 },
    /// Inputs: terms of `operands` blocks each; the sum over terms of the Einstein sum
    /// `subscripts` (like "ij,jk->ik") of each term's blocks, added in term order.
    Einsum { subscripts: String, operands: usize },
    /// One input; its axes permuted: output axis i is input axis `perm[i]`.
    Transpose { perm: Vec<usize> },
    /// Inputs: blocks that reduce into this output block; each is reduced over `axes`,
    /// then the partial results are combined in input order with the same op.
    Reduce { op: ReduceOp, axes: Vec<usize> },
    /// Inputs: blocks of arrays in one frame of coordinates; `offsets[k]` is input k's
    /// origin minus the source coordinate of the output block's first element. Output
    /// element `p` takes the source element at `p * step` from there (`step` empty: all 1).
    /// Re-blocking, concatenation, slicing with steps.
    Assemble {
        offsets: Vec<Vec<i64>>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        step: Vec<i64>,
    },
    /// Inputs: source blocks along `axis`; output position `p` along `axis` is the slice
    /// `picks[p].1` of input `picks[p].0` (integer-list and boolean-mask indexing).
    Take { axis: usize, picks: Vec<(u32, u64)> },
    /// Inputs: blocks whose elements, in C order, from flat position `ranges[k].0` up to
    /// `ranges[k].1` of input k, concatenated, are the output block's in C order (reshape,
    /// expand_dims, squeeze).
    Reshape { ranges: Vec<(u64, u64)> },
}

impl Kernel {
    /// The kernel that combines partial results of this reduction kernel.
    pub fn combiner(&self) -> Kernel {
        match self {
            Kernel::Reduce { op, .. } => Kernel::Reduce {
                op: *op,
                axes: vec![],
            },
            _ => Kernel::Reduce {
                op: ReduceOp::Sum,
                axes: vec![],
            },
        }
    }
}

/// One block task: a kernel, its input blocks, the block it produces.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Task {
    #[serde(flatten)]
    pub kernel: Kernel,
    pub inputs: Vec<BlockRef>,
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
    pub store: StoreSpec,
    /// The function refuses to read or write any array outside this prefix.
    pub job_prefix: String,
    pub arrays: Vec<ArrayRef>,
    pub tasks: Vec<Task>,
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
            let inside = p.starts_with(&prefix) && !(a.read_only && written.contains(&(i as u32)));
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
    Inline(Batch),
    Stored {
        store: StoreSpec,
        job_prefix: String,
        key: String,
    },
}

/// What one invocation measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub invocations: u64,
    pub tasks: u64,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub requests: u64,
    /// Of `bytes_written`, the bytes of intermediates ([`ArrayRef::intermediate`]).
    pub intermediate_bytes_written: u64,
    /// Of `requests`, the PUTs (priced higher than GETs).
    pub put_requests: u64,
    /// Seconds inside the handler (what Lambda bills).
    pub wall_seconds: f64,
    pub compute_seconds: f64,
    pub io_seconds: f64,
    /// High-water mark of the process's resident memory during the invocation.
    pub peak_memory_bytes: u64,
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
    }
}

/// Kernel parameters that may be NaN or infinite (`np.nan`, `full(..., value = inf)`):
/// JSON has no such numbers (serde_json writes `null`), so they travel as the strings
/// `"NaN"`, `"inf"` and `"-inf"`; finite values stay JSON numbers.
mod any_f64 {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match *v {
            v if v.is_finite() => s.serialize_f64(v),
            v if v.is_nan() => s.serialize_str("NaN"),
            v if v > 0.0 => s.serialize_str("inf"),
            _ => s.serialize_str("-inf"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Wire {
            Number(f64),
            Name(String),
        }
        match Wire::deserialize(d)? {
            Wire::Number(v) => Ok(v),
            Wire::Name(n) => match n.as_str() {
                "NaN" => Ok(f64::NAN),
                "inf" => Ok(f64::INFINITY),
                "-inf" => Ok(f64::NEG_INFINITY),
                _ => Err(D::Error::custom(format!(
                    "{n:?} is not a number (NaN, inf, -inf)"
                ))),
            },
        }
    }
}

/// Lambda's synchronous payload limit, each way.
pub const PAYLOAD_LIMIT: usize = 6 * 1024 * 1024;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::meta::DType;

    #[test]
    fn non_finite_kernel_parameters_travel() {
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5, 1e300] {
            let k = Kernel::Scalar {
                op: BinaryOp::Mul,
                value: v,
                scalar_left: true,
            };
            let back: Kernel = serde_json::from_slice(&serde_json::to_vec(&k).unwrap()).unwrap();
            let Kernel::Scalar { value, .. } = back else {
                panic!("{back:?}")
            };
            assert!(value == v || (v.is_nan() && value.is_nan()), "{v} -> {value}");
            // As a batch carries it: flattened into its task.
            let t = Task {
                kernel: Kernel::Fill { value: v },
                inputs: vec![],
                output: BlockRef {
                    array: 0,
                    index: vec![0],
                },
                write_output: true,
            };
            let text = serde_json::to_string(&t).unwrap();
            let back: Task = serde_json::from_str(&text).unwrap();
            let Kernel::Fill { value } = back.kernel else {
                panic!("{text}")
            };
            assert!(value == v || (v.is_nan() && value.is_nan()), "{text}");
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
            }],
            tasks: if writes {
                vec![Task {
                    kernel: Kernel::Fill { value: 0.0 },
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
