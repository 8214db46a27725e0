//! Slices pushed toward the sources: a slice of an elementwise expression is the same
//! expression of its operands' slices, and a slice of a random array is a random array
//! of its own (its values depend on each element's place in the whole, not on blocks).
//! So `(x * 2 + 1)[:2, :2]` of a lazy 20M-row `x` makes four random numbers, not the
//! block of 500,000 rows that holds them. Used for the computes of a session, whose
//! slices are how a user peeks at an array.

use super::*;

/// `g` with the slices that can be pushed down made of their operands' regions, and for
/// each of its nodes the node of `g` it stands for (a node made for a slice's region
/// stands for the slice: errors name what the user wrote).
pub(crate) fn push_slices(g: Graph) -> (Graph, Vec<NodeId>) {
    if !g.nodes.iter().any(|n| matches!(n.op, NodeOp::Slice { .. })) {
        let back = (0..g.nodes.len()).collect();
        return (g, back);
    }
    // Whether a node is read whole by something other than a slice: then a region of it is
    // made on its own only if that is at most one of its blocks.
    let mut whole = vec![false; g.nodes.len()];
    for n in &g.nodes {
        whole[n.id] |= n.persist;
        if !matches!(n.op, NodeOp::Slice { .. }) {
            for i in n.op.operands() {
                whole[i] = true;
            }
        }
    }
    let mut p = Push {
        g: &g,
        whole,
        out: Graph::default(),
        map: vec![usize::MAX; g.nodes.len()],
        back: Vec::with_capacity(g.nodes.len()),
        def: None,
    };
    for n in &g.nodes {
        let id = match &n.op {
            NodeOp::Slice { x, start, step } if p.pushes(*x, &n.meta) => {
                p.def = n.def.clone();
                let r = Region {
                    start: start.clone(),
                    step: step.clone(),
                    meta: n.meta.clone(),
                };
                p.region(*x, &r, n.id)
            }
            _ => {
                let mut op = n.op.clone();
                op.map_inputs(|x| p.map[x]);
                if let NodeOp::Fit { x, y, .. } = &mut op {
                    (*x, *y) = (p.map[*x], p.map[*y]);
                }
                p.add(n.meta.clone(), op, n.id, n.def.clone())
            }
        };
        p.map[n.id] = id;
        let made = &mut p.out.nodes[id];
        made.persist = n.persist;
        made.name = n.name.clone();
    }
    let Push {
        mut out, map, back, ..
    } = p;
    out.named = (g.named.iter())
        .map(|(name, &id)| (name.clone(), map[id]))
        .collect();
    (out, back)
}

/// Output element `p` is element `start + p * step` of the node sliced; `meta` is the
/// region's shape and blocks (its dtype that of the node made).
struct Region {
    start: Vec<i64>,
    step: Vec<i64>,
    meta: ArrayMeta,
}

struct Push<'g> {
    g: &'g Graph,
    whole: Vec<bool>,
    out: Graph,
    map: Vec<NodeId>,
    back: Vec<NodeId>,
    /// The definition the slice being pushed came from.
    def: Option<String>,
}

impl Push<'_> {
    fn add(&mut self, meta: ArrayMeta, op: NodeOp, of: NodeId, def: Option<String>) -> NodeId {
        let id = self.out.nodes.len();
        self.out.nodes.push(Node {
            id,
            meta,
            op,
            name: None,
            persist: false,
            def,
        });
        self.back.push(of);
        id
    }

    /// Whether a region (`meta`) of `x` is made of x's operands' regions rather than read
    /// from x's blocks.
    fn pushes(&self, x: NodeId, meta: &ArrayMeta) -> bool {
        let n = &self.g.nodes[x];
        let pushable = matches!(
            &n.op,
            NodeOp::Random { .. }
                | NodeOp::Fill { .. }
                | NodeOp::Unary { .. }
                | NodeOp::CheckBelow { .. }
                | NodeOp::Scalar { .. }
                | NodeOp::Binary { .. }
                | NodeOp::Where { .. }
                | NodeOp::Rechunk { .. }
                | NodeOp::Slice { .. }
                | NodeOp::Transpose { .. }
        );
        let small = meta.shape.iter().product::<u64>() <= n.meta.block.iter().product::<u64>();
        pushable && !meta.shape.contains(&0) && (small || !self.whole[x])
    }

    /// A node of the output graph holding region `r` of node `x` of `g`, made for the
    /// node `of` of `g`.
    fn region(&mut self, x: NodeId, r: &Region, of: NodeId) -> NodeId {
        let n = &self.g.nodes[x];
        let meta = ArrayMeta::new(r.meta.shape.clone(), r.meta.block.clone(), n.meta.dtype);
        if !self.pushes(x, &meta) {
            let op = NodeOp::Slice {
                x: self.map[x],
                start: r.start.clone(),
                step: r.step.clone(),
            };
            return self.add(meta, op, of, self.def.clone());
        }
        let op = match &n.op {
            NodeOp::Random { dist, seed, frame } => {
                let frame = match frame {
                    Some(f) => f.then(&r.start, &r.step),
                    None => Frame {
                        shape: n.meta.shape.clone(),
                        start: r.start.clone(),
                        step: r.step.clone(),
                    },
                };
                NodeOp::Random {
                    dist: *dist,
                    seed: *seed,
                    frame: Some(Arc::new(frame)),
                }
            }
            NodeOp::Fill { value } => NodeOp::Fill { value: *value },
            NodeOp::Slice { x: y, start, step } => {
                // A slice of a slice: one slice of the first's operand.
                let inner = Region {
                    start: (start.iter().zip(&r.start).zip(step))
                        .map(|((a, s), b)| a + s * b)
                        .collect(),
                    step: step.iter().zip(&r.step).map(|(a, b)| a * b).collect(),
                    meta: meta.clone(),
                };
                return self.region(*y, &inner, of);
            }
            NodeOp::Rechunk { x: y } if self.g.nodes[*y].meta.dtype == n.meta.dtype => {
                // Blocks are the region's own: the operand's region is the answer.
                return self.region(*y, r, of);
            }
            NodeOp::Transpose { x: y, perm } => {
                let ym = &self.g.nodes[*y].meta;
                let mut inner = Region {
                    start: vec![0; ym.ndim()],
                    step: vec![1; ym.ndim()],
                    meta: ArrayMeta::new(vec![1; ym.ndim()], vec![1; ym.ndim()], ym.dtype),
                };
                let (mut shape, mut block) = (vec![1; ym.ndim()], vec![1; ym.ndim()]);
                for (i, &d) in perm.iter().enumerate() {
                    inner.start[d] = r.start[i];
                    inner.step[d] = r.step[i];
                    shape[d] = meta.shape[i];
                    block[d] = meta.block[i];
                }
                inner.meta = ArrayMeta::new(shape, block, ym.dtype);
                let y = self.region(*y, &inner, of);
                NodeOp::Transpose {
                    x: y,
                    perm: perm.clone(),
                }
            }
            op => {
                // Elementwise: each operand's region, broadcast axes kept whole (length 1).
                let mut op = op.clone();
                let mut made = HashMap::new();
                for y in op.inputs() {
                    if made.contains_key(&y) {
                        continue;
                    }
                    let inner = self.operand(y, &n.meta, r);
                    let id = self.region(y, &inner, of);
                    made.insert(y, id);
                }
                op.map_inputs(|y| made[&y]);
                op
            }
        };
        self.add(meta, op, of, self.def.clone())
    }

    /// The region of operand `y` of an elementwise node (of `out`'s shape) that region `r`
    /// of the node reads: y's trailing axes, whole along those it broadcasts.
    fn operand(&self, y: NodeId, out: &ArrayMeta, r: &Region) -> Region {
        let ym = &self.g.nodes[y].meta;
        let off = out.ndim() - ym.ndim();
        let mut inner = Region {
            start: Vec::with_capacity(ym.ndim()),
            step: Vec::with_capacity(ym.ndim()),
            meta: ym.clone(),
        };
        let (mut shape, mut block) = (Vec::new(), Vec::new());
        for d in 0..ym.ndim() {
            if ym.shape[d] == 1 && out.shape[off + d] != 1 {
                inner.start.push(0);
                inner.step.push(1);
                shape.push(1);
                block.push(1);
            } else {
                inner.start.push(r.start[off + d]);
                inner.step.push(r.step[off + d]);
                shape.push(r.meta.shape[off + d]);
                block.push(r.meta.block[off + d]);
            }
        }
        inner.meta = ArrayMeta::new(shape, block, ym.dtype);
        inner
    }
}
