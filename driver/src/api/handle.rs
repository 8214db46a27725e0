//! [`Array`] itself: a session and a handle on a node of its graph, and what every use
//! of an array reads (its node, its label, its error). Below the operations
//! (`array.rs`) and the expressions they build (`build.rs`), which both hold arrays.

use std::sync::{Arc, OnceLock};

use super::Session;
use crate::error::Error;
use crate::graph::NodeId;

/// One node of the session's graph as the API holds it.
pub(crate) struct Handle {
    pub id: NodeId,
    /// How NumPy users would write the operation that made it (over its operands' labels).
    pub label: String,
    /// The name given with [`Array::named`], which messages use instead of the label.
    pub name: OnceLock<String>,
    /// The session's count of handles by node: a stored node no handle holds is let go.
    holders: super::keep::Holders,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.holders.let_go(self.id);
    }
}

/// A lazy array: a node of its [`Session`]'s graph. Cloning is cheap (a shared handle);
/// arrays are `Send + Sync`.
///
/// Operations add nodes to the graph at once, shapes and dtypes checked as NumPy checks
/// them: an operation that NumPy would refuse makes an array that holds the error
/// ([`Array::check`] returns it; computing it, or an array made from it, returns it too).
/// [`Array::compute`] runs what the array needs and returns its values. Arithmetic works
/// with owned and borrowed arrays and with numbers on either side (NumPy's broadcasting
/// and dtype rules apply):
///
/// ```
/// # use nums_cloud::api::Session;
/// # fn main() -> Result<(), nums_cloud::Error> {
/// # let dir = std::env::temp_dir().join("nums-cloud-doc-ops");
/// # let s = Session::new(&format!("file://{}", dir.display()))?
/// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
/// let a = s.arange(4.0); // [0, 1, 2, 3]
/// let b = s.ones(&[4]);
/// let c = &a + &b;                  // borrowed + borrowed
/// let d = 2.0 * &c - a.clone() / 2.0; // f64 on either side, owned and borrowed mixed
/// let e = -(d + f64::NAN * s.zeros(&[4]).gt(1.0)); // NaN * false is NaN, as in NumPy
/// assert!(e.compute_blocking::<f64>()?.iter().all(|x| x.is_nan()));
/// let v = (2.0 * &c - a / 2.0).compute_blocking::<f64>()?;
/// assert_eq!(v.into_raw_vec_and_offset().0, vec![2.0, 3.5, 5.0, 6.5]);
/// // A shape NumPy refuses is the operation's error, at once:
/// let bad = &s.ones(&[3]) + &s.ones(&[4]);
/// assert!(bad.check().unwrap_err().to_string().contains("(3,) and (4,)"));
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Array {
    pub(super) s: Session,
    pub(super) h: Result<Arc<Handle>, Error>,
}

impl std::fmt::Debug for Array {
    /// Its label, shape, dtype and whether it is computed:
    /// `Array(X @ w, shape=(4,), dtype=float64)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.h {
            Ok(h) => {
                let m = self.s.meta(h.id);
                write!(
                    f,
                    "Array({}, shape={}, dtype={}, blocks={}{})",
                    self.label(),
                    crate::graph::shape_text(&m.shape),
                    m.dtype,
                    crate::graph::shape_text(&m.block),
                    if self.computed() { ", computed" } else { "" }
                )
            }
            Err(e) => write!(f, "Array(error: {e})"),
        }
    }
}

impl Array {
    /// The array of node `id` (or the error that stopped its operation).
    pub(crate) fn made(s: &Session, id: Result<NodeId, Error>, label: String) -> Array {
        let h = id.map(|id| {
            s.st.holders.hold(id);
            let h = Arc::new(Handle {
                id,
                label,
                name: OnceLock::new(),
                holders: s.st.holders.clone(),
            });
            s.st.owners
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .entry(id)
                .or_insert_with(|| Arc::downgrade(&h));
            h
        });
        Array { s: s.clone(), h }
    }
    /// The session it belongs to.
    pub fn session(&self) -> &Session {
        &self.s
    }

    pub(crate) fn id(&self) -> Result<NodeId, &Error> {
        self.h.as_ref().map(|h| h.id)
    }

    /// Whether `self` and `other` are the same node.
    pub(crate) fn same(&self, other: &Array) -> bool {
        match (&self.h, &other.h) {
            (Ok(a), Ok(b)) => a.id == b.id && self.s.same(&other.s),
            _ => false,
        }
    }

    /// Whether its values are in the store (computed, or an input read in place).
    pub fn computed(&self) -> bool {
        self.id().is_ok_and(|id| {
            matches!(
                self.s.graph().graph().nodes[id].op,
                crate::graph::NodeOp::InPlace { .. }
            )
        })
    }

    /// The error of the operation that made it (or of one it was made from), if any.
    pub fn check(&self) -> Result<(), Error> {
        self.h.as_ref().map(|_| ()).map_err(Clone::clone)
    }

    /// Its name for messages: what [`Array::named`] gave, or the expression that made it.
    pub fn label(&self) -> String {
        match &self.h {
            Ok(h) => h.name.get().cloned().unwrap_or_else(|| h.label.clone()),
            Err(_) => "(an array whose operation failed)".into(),
        }
    }
}
