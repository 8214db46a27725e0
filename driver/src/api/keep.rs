//! How long a session keeps what it stores, as Dask keeps persisted arrays: a computed
//! array's blocks while a handle to it lives; an input from memory or an import while an
//! array that holds a handle may read it. What is let go is deleted when the next compute
//! starts while none runs (a running compute may read any stored array), beside that
//! compute, or by [`Session::close`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Session;
use crate::graph::NodeId;

/// The live handles of each node ([`super::handle::Handle`]): clones of an array share
/// one; several arrays may be the same node.
#[derive(Clone, Default)]
pub(crate) struct Holders(Arc<Mutex<HashMap<NodeId, usize>>>);

impl Holders {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, usize>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// One more handle on node `id`.
    pub(crate) fn hold(&self, id: NodeId) {
        *self.lock().entry(id).or_default() += 1;
    }

    /// One handle on node `id` fewer.
    pub(crate) fn let_go(&self, id: NodeId) {
        let mut h = self.lock();
        if let Some(n) = h.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                h.remove(&id);
            }
        }
    }

    /// The nodes some handle holds.
    fn held(&self) -> Vec<NodeId> {
        self.lock().keys().copied().collect()
    }
}

/// The session's computes in flight, and what is to be deleted.
#[derive(Default)]
pub(crate) struct Running {
    computes: usize,
    /// Paths whose deletion failed: tried again by the next collection.
    doomed: Vec<String>,
    /// The deletion under way (on the session's runtime): the paths it could not delete.
    deleting: Option<tokio::task::JoinHandle<Vec<String>>>,
}

/// A compute in flight: while one is, nothing the session stored is deleted.
pub(crate) struct Busy<'a>(&'a Session);

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        self.0.running().computes -= 1;
    }
}

impl Session {
    fn running(&self) -> std::sync::MutexGuard<'_, Running> {
        self.st.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Marks a compute in flight until the guard drops. The first while none runs lets go
    /// of what no handle holds any more and starts deleting it, beside the compute: no
    /// compute can be reading it (none runs), nor read it later (the graph no longer says
    /// it is stored). The deletion before, if it still runs, ends first: deletions do not
    /// pile up behind a loop of computes.
    pub(crate) async fn busy(&self) -> Busy<'_> {
        self.cfg.apply_tier().await;
        let (mut doomed, before) = {
            let mut r = self.running();
            let collected = match r.computes {
                0 => (self.let_go(&mut r), r.deleting.take()),
                _ => (Vec::new(), None),
            };
            r.computes += 1;
            collected
        };
        let busy = Busy(self);
        if let Some(before) = before {
            doomed.extend(before.await.unwrap_or_default());
        }
        if !doomed.is_empty() {
            let started = match (self.store(), self.st.runtime_handle()) {
                (Ok(store), Ok(rt)) => Ok(rt.spawn(delete(store, doomed))),
                _ => Err(doomed),
            };
            let mut r = self.running();
            match started {
                Ok(task) => r.deleting = Some(task),
                Err(doomed) => r.doomed.extend(doomed),
            }
        }
        busy
    }

    /// Deletes now what no array holds any more (see [`Session`]) and waits for it. Computes
    /// do this by themselves as they start; this is for a program that lets go of large
    /// arrays and wants the space back before its next compute. A compute running
    /// meanwhile (another thread's) defers it to the next.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-collect");
    /// let s = Session::new(&format!("file://{}", dir.display()))?;
    /// let x = s.ones(&[1000]) * 2.0;
    /// x.compute_blocking::<f64>()?; // its blocks are in the store
    /// assert!(x.computed());
    /// let y = &x + 1.0; // lazy, made from x
    /// drop(x);
    /// s.collect_blocking(); // x's blocks are deleted
    /// assert_eq!(y.sum(None).compute_blocking::<f64>()?.sum(), 3000.0); // x computed again
    /// # Ok(())
    /// # }
    /// ```
    pub async fn collect(&self) {
        drop(self.busy().await);
        self.deleted().await;
    }

    /// [`Session::collect`] for code that is not async.
    pub fn collect_blocking(&self) {
        let _ = super::blocking::block_on(self.collect());
    }

    /// Waits for the deletion under way, if any.
    pub(crate) async fn deleted(&self) {
        let task = self.running().deleting.take();
        if let Some(task) = task {
            let failed = task.await.unwrap_or_default();
            self.running().doomed.extend(failed);
        }
    }

    /// What no handle holds any more, taken off the graph (under the lock of `r`, so that
    /// no compute starts meanwhile); the paths to delete.
    fn let_go(&self, r: &mut Running) -> Vec<String> {
        let held = self.st.holders.held();
        let released = self.graph().release(&held);
        if !released.inputs.is_empty() {
            let mut pending = self.st.pending.lock().unwrap_or_else(|p| p.into_inner());
            for id in &released.inputs {
                pending.remove(id);
            }
        }
        let mut doomed = std::mem::take(&mut r.doomed);
        doomed.extend(released.paths);
        doomed
    }
}

/// Deletes every object under `prefix`, and the blocks this process's memory tier keeps
/// of them (a kept block is checked against the store when read anyway; this frees the
/// memory now). Every deletion of the session's goes through here.
pub(super) async fn delete_prefix(
    store: &nums_layout::Store,
    prefix: &str,
) -> nums_layout::Result<usize> {
    nums_layout::tier::tier().forget_prefix(store, prefix);
    store.delete_prefix(prefix).await
}

/// Deletes each path's folder (`path/`: `.../n1` is not `.../n17`); returns those that
/// failed, tried again by the next collection (they go with the session at the latest).
async fn delete(store: nums_layout::Store, paths: Vec<String>) -> Vec<String> {
    let mut failed = Vec::new();
    for path in paths {
        if delete_prefix(&store, &format!("{path}/")).await.is_err() {
            failed.push(path);
        }
    }
    failed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_path_let_go_takes_its_folder_not_a_longer_name() {
        let dir = std::env::temp_dir().join(format!("nums-keep-unit-{}", std::process::id()));
        let s = Session::new(&format!("file://{}", dir.display())).unwrap();
        let store = s.store().unwrap();
        let key = |n: &str| format!("{}/c1/out/{n}/zarr.json", s.st.id);
        for n in ["n1", "n17"] {
            store.put(&key(n), "{}".into()).await.unwrap();
        }
        let failed = delete(store.clone(), vec![format!("{}/c1/out/n1", s.st.id)]).await;
        assert!(failed.is_empty());
        assert_eq!(store.head(&key("n1")).await.unwrap(), None);
        assert_eq!(store.head(&key("n17")).await.unwrap(), Some(2));
        s.close().await.unwrap();
        std::fs::remove_dir_all(dir).ok();
    }
}
