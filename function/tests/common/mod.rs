//! Helpers the function's integration tests share: a file store in a fresh temporary
//! folder and a small builder of batches.

#![allow(dead_code)]

use std::path::PathBuf;

use nums_layout::batch::{ArrayRef, Batch, BlockRef, Kernel, Task};
use nums_layout::{ArrayMeta, DType, Store, StoreSpec};

/// A file store in a new folder, removed when dropped.
pub(crate) struct TempStore {
    pub dir: PathBuf,
    pub store: Store,
}

impl TempStore {
    pub(crate) fn new(name: &str) -> TempStore {
        let dir = std::env::temp_dir().join(format!("nums-fn-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let spec = StoreSpec {
            url: format!("file://{}/", dir.display()),
            endpoint: None,
        };
        let store = Store::open(&spec).unwrap();
        TempStore { dir, store }
    }

    /// Every object under the folder, by relative path, with its bytes.
    pub(crate) fn objects(&self) -> Vec<(String, Vec<u8>)> {
        fn walk(root: &std::path::Path, d: &std::path::Path, out: &mut Vec<(String, Vec<u8>)>) {
            for e in std::fs::read_dir(d).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    walk(root, &p, out);
                } else {
                    let rel = p.strip_prefix(root).unwrap().display().to_string();
                    out.push((rel, std::fs::read(&p).unwrap()));
                }
            }
        }
        let mut out = vec![];
        walk(&self.dir, &self.dir, &mut out);
        out.sort();
        out
    }
}

impl Drop for TempStore {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A batch under way: arrays under `job/`, tasks in order.
pub(crate) struct Builder {
    pub batch: Batch,
}

impl Builder {
    pub(crate) fn new(store: &Store) -> Builder {
        Builder {
            batch: Batch {
                store: store.spec().clone(),
                job_prefix: "job".into(),
                arrays: vec![],
                tasks: vec![],
                prefetch_budget: 0,
            },
        }
    }

    pub(crate) fn array(
        &mut self,
        name: &str,
        shape: Vec<u64>,
        block: Vec<u64>,
        dtype: DType,
    ) -> u32 {
        self.batch.arrays.push(ArrayRef {
            path: format!("job/{name}"),
            meta: ArrayMeta::new(shape, block, dtype),
            read_only: false,
            sparse: false,
            intermediate: false,
            foreign: None,
        });
        (self.batch.arrays.len() - 1) as u32
    }

    pub(crate) fn task(
        &mut self,
        kernel: Kernel,
        inputs: &[(u32, &[u64])],
        out: (u32, &[u64]),
        write: bool,
    ) {
        let r = |&(array, index): &(u32, &[u64])| BlockRef {
            array,
            index: index.to_vec(),
        };
        self.batch.tasks.push(Task {
            kernel,
            inputs: inputs.iter().map(r).collect(),
            output: r(&out),
            write_output: write,
        });
    }
}
