//! Slices of a block along one axis copied into another's, a run at a time (selections,
//! gathers and takes: [`crate::kernels`], [`crate::order`]).

use ndarray::{ArrayD, Axis};

/// Runs of slices along one axis to copy ([`copy_slices`]): `(to, from, len)`, appended
/// a slice at a time, merging a slice that continues the last run.
#[derive(Default)]
pub(crate) struct Runs(pub(crate) Vec<(usize, usize, usize)>);

impl Runs {
    pub(crate) fn push(&mut self, to: usize, from: usize) {
        match self.0.last_mut() {
            Some((t, f, n)) if *t + *n == to && *f + *n == from => *n += 1,
            _ => self.0.push((to, from, 1)),
        }
    }
}

/// The output of shape `shape` made of runs of rows (slices along axis 0) of
/// standard-layout blocks appended in order, when they tile it exactly from its first
/// row (a selection's rows): no zeroed output written first and then overwritten. None
/// when they do not (a caller then copies into a zeroed output: [`copy_slices`]).
pub(crate) fn append_rows<T: Clone>(
    parts: &[(&ArrayD<T>, Runs)],
    shape: &[usize],
) -> Option<ArrayD<T>> {
    let inner: usize = shape.get(1..)?.iter().product();
    let mut v: Vec<T> = Vec::with_capacity(shape.iter().product());
    let mut next = 0;
    for (x, runs) in parts {
        let s = x.as_slice()?;
        if x.shape().get(1..) != shape.get(1..) {
            return None;
        }
        for &(to, from, len) in &runs.0 {
            if to != next {
                return None;
            }
            v.extend_from_slice(&s[from * inner..(from + len) * inner]);
            next += len;
        }
    }
    (next == shape[0])
        .then(|| ArrayD::from_shape_vec(shape, v).expect("rows of the output's shape"))
}

/// Slices of `x` along `axis` copied into `out`'s, a run at a time: `len` consecutive
/// slices from `from` go to `to` (callers check both are in range). Standard-layout
/// blocks copy each run as one slice per index of the axes before (ndarray's `assign` of
/// a dynamic-dimension subview per slice costs more than the copy for narrow rows).
pub(crate) fn copy_slices<T: Clone>(
    out: &mut ArrayD<T>,
    x: &ArrayD<T>,
    axis: usize,
    runs: &Runs,
) -> Result<(), String> {
    let (os, xs) = (out.shape(), x.shape());
    if os.len() != xs.len() || (0..os.len()).any(|d| d != axis && os[d] != xs[d]) {
        return Err(format!(
            "slices along axis {axis} of a block of shape {xs:?} into one of shape {os:?}"
        ));
    }
    let (dn, sn) = (os[axis], xs[axis]);
    let inner: usize = xs[axis + 1..].iter().product();
    let outer: usize = xs[..axis].iter().product();
    if let (Some(s), true) = (x.as_slice(), out.is_standard_layout()) {
        let d = out.as_slice_mut().expect("standard layout");
        for o in 0..outer {
            for &(to, from, len) in &runs.0 {
                let (to, from, len) = ((o * dn + to) * inner, (o * sn + from) * inner, len * inner);
                d[to..to + len].clone_from_slice(&s[from..from + len]);
            }
        }
    } else {
        for &(to, from, len) in &runs.0 {
            for i in 0..len {
                out.index_axis_mut(Axis(axis), to + i)
                    .assign(&x.index_axis(Axis(axis), from + i));
            }
        }
    }
    Ok(())
}
