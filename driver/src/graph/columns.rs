//! The names of a computed array's columns, as pandas keeps them: an array made from a
//! named input column for column (elementwise operations, casts, row selections and
//! sorts, column slices and picks, rows joined) keeps the input's names, so that a save
//! names its columns as the data was read rather than `c0, c1, ...`.

use std::collections::HashMap;

use super::{Graph, NodeId, NodeOp};

impl Graph {
    /// The names of `id`'s columns (a 2-D array's, one per column; a 1-D array's one), from `roots` (the
    /// named inputs' nodes) through the operations that keep columns; `op` gives a node's
    /// operation (a stored node's is the one it was made by).
    pub(crate) fn column_names<'a>(
        &'a self,
        id: NodeId,
        op: &dyn Fn(NodeId) -> &'a NodeOp,
        roots: &HashMap<NodeId, Vec<String>>,
    ) -> Option<Vec<String>> {
        let w = width(self, id)?;
        let names = self.column_names_of(id, w, op, roots)?;
        (names.len() as u64 == w).then(|| unique(names))
    }

    fn column_names_of<'a>(
        &'a self,
        id: NodeId,
        w: u64,
        op: &dyn Fn(NodeId) -> &'a NodeOp,
        roots: &HashMap<NodeId, Vec<String>>,
    ) -> Option<Vec<String>> {
        // The operand that is column for column the result: 2-D of the same width.
        let mut id = id;
        loop {
            let ndim = self.nodes[id].meta.ndim();
            let same =
                |n: &NodeId| self.nodes[*n].meta.ndim() == ndim && width(self, *n) == Some(w);
            if let Some(n) = roots.get(&id) {
                return (n.len() as u64 == w).then(|| n.clone());
            }
            let next = match op(id) {
                NodeOp::Unary { x, .. }
                | NodeOp::Scalar { x, .. }
                | NodeOp::Rechunk { x }
                | NodeOp::CheckBelow { x, .. }
                | NodeOp::Put { x, .. } => *x,
                // The same shape, or one column as a 1-D array (`X[:, 2]`) and back.
                NodeOp::Reshape { x }
                    if width(self, *x) == Some(w)
                        && self.nodes[*x].meta.shape[0] == self.nodes[id].meta.shape[0] =>
                {
                    id = *x;
                    continue;
                }
                NodeOp::Sort {
                    x,
                    axis: 0,
                    arg: false,
                    ..
                }
                | NodeOp::Compress { x, axis: 0, .. }
                | NodeOp::Gather { x, axis: 0, .. }
                | NodeOp::Take { x, axis: 0, .. } => *x,
                NodeOp::Take {
                    x,
                    axis: 1,
                    indices,
                } if same_ndim(self, *x) => {
                    let xw = self.nodes[*x].meta.shape[1];
                    let names = self.column_names_of(*x, xw, op, roots)?;
                    return indices
                        .iter()
                        .map(|&i| names.get(i as usize).cloned())
                        .collect();
                }
                NodeOp::Slice { x, start, step } if same_ndim(self, *x) && start.len() == 2 => {
                    let xw = self.nodes[*x].meta.shape[1];
                    let names = self.column_names_of(*x, xw, op, roots)?;
                    return (0..w as i64)
                        .map(|j| {
                            usize::try_from(start[1] + j * step[1])
                                .ok()
                                .and_then(|i| names.get(i).cloned())
                        })
                        .collect();
                }
                NodeOp::Binary { a, b, .. } | NodeOp::Where { a, b, .. } => {
                    return [a, b]
                        .into_iter()
                        .filter(|n| same(n))
                        .find_map(|n| self.column_names_of(*n, w, op, roots));
                }
                NodeOp::Concat { xs, axis: 0 } => {
                    return xs
                        .iter()
                        .find_map(|n| self.column_names_of(*n, w, op, roots));
                }
                NodeOp::Concat { xs, axis: 1 } => {
                    let mut all = Vec::new();
                    for n in xs {
                        let nw = width(self, *n)?;
                        all.extend(self.column_names_of(*n, nw, op, roots)?);
                    }
                    return Some(all);
                }
                _ => return None,
            };
            if !same(&next) {
                return None;
            }
            id = next;
        }
    }
}

fn same_ndim(g: &Graph, x: NodeId) -> bool {
    g.nodes[x].meta.ndim() == 2
}

/// Columns of a 2-D array, 1 for a 1-D array (a column).
fn width(g: &Graph, x: NodeId) -> Option<u64> {
    let m = &g.nodes[x].meta;
    match m.ndim() {
        1 => Some(1),
        2 => Some(m.shape[1]),
        _ => None,
    }
}

/// A name that repeats an earlier one gets `.1`, `.2`, ... (pandas' names for a file's
/// repeated columns): Parquet's columns must differ.
fn unique(names: Vec<String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .map(|n| {
            let mut name = n.clone();
            let mut k = 0;
            while !seen.insert(name.clone()) {
                k += 1;
                name = format!("{n}.{k}");
            }
            name
        })
        .collect()
}
