//! The memory tier: decoded blocks kept in this process's memory between computes, so
//! that a block made or read once is not read back from the store and decoded again (as
//! NumS kept blocks in its workers' object store). The store stays the durable tier:
//!
//! - An entry is keyed by the store (URL and endpoint) and the object's key, and holds the
//!   object's version as the store named it when the block was read or written (the
//!   ETag: on S3 the server's; for a local file its inode, modification time and size, as
//!   object_store names it). A hit is served only after the store says the object still
//!   has that version (a `stat` of a local file, a HEAD on S3): a block rewritten or
//!   deleted in the store is never served from memory, whoever changed it.
//! - The dtype and shape the block was decoded as are part of the key: the same bytes
//!   read as another array's block are decoded again.
//! - Bounded by a budget in bytes ([`Tier::set_budget`], 0: off, the default), evicted
//!   least recently used. An evicted block is read back from the store when next needed.
//!   A block larger than a quarter of the budget is not kept (it would evict the rest).
//!
//! One tier per process ([`tier`]): the caller's process for in-process computes (a
//! session sets its budget), each local function process across its invocations.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};

use lru::LruCache;

use crate::{Block, DType, Result, Store, StoreSpec};

/// What an entry is found by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Key {
    /// The store's URL and endpoint.
    store: String,
    /// The object's key in it.
    key: String,
}

struct Entry {
    /// The object's version when the block was read or written.
    stamp: String,
    dtype: DType,
    shape: Vec<usize>,
    block: Arc<Block>,
    bytes: u64,
}

struct State {
    budget: u64,
    bytes: u64,
    entries: LruCache<Key, Entry>,
}

/// The process's memory tier ([`tier`]).
pub struct Tier {
    state: Mutex<State>,
    hits: AtomicU64,
    misses: AtomicU64,
    evicted: AtomicU64,
    stale: AtomicU64,
}

/// What the tier holds and has done ([`Tier::stats`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Its budget in bytes (0: off).
    pub budget: u64,
    /// Bytes of the blocks it holds.
    pub bytes: u64,
    /// Blocks it holds.
    pub blocks: u64,
    /// Reads served from memory.
    pub hits: u64,
    /// Reads that went to the store while the tier was on.
    pub misses: u64,
    /// Blocks evicted for room.
    pub evicted: u64,
    /// Blocks found changed or gone in the store, dropped rather than served.
    pub stale: u64,
}

/// This process's memory tier.
pub fn tier() -> &'static Tier {
    static TIER: OnceLock<Tier> = OnceLock::new();
    TIER.get_or_init(Tier::new)
}

fn key_of(store: &Store, key: &str) -> Key {
    key_in(store.spec(), key)
}

fn key_in(spec: &StoreSpec, key: &str) -> Key {
    Key {
        store: spec.to_string(),
        key: key.trim_matches('/').to_string(),
    }
}

impl Tier {
    /// An empty tier, off (the process's is [`tier`]).
    fn new() -> Tier {
        Tier {
            state: Mutex::new(State {
                budget: 0,
                bytes: 0,
                entries: LruCache::unbounded(),
            }),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            stale: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // An entry is inserted or removed whole: a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the budget in bytes (0 turns the tier off and empties it); evicts down to it.
    pub fn set_budget(&self, bytes: u64) {
        let mut s = self.state();
        s.budget = bytes;
        self.evict_to(&mut s, bytes);
    }

    /// Raises the budget to at least `bytes` (several sessions in one process: the
    /// largest asked for holds).
    pub fn raise_budget(&self, bytes: u64) {
        let mut s = self.state();
        s.budget = s.budget.max(bytes);
    }

    /// The budget in bytes (0: off).
    pub fn budget(&self) -> u64 {
        self.state().budget
    }

    /// Whether blocks are kept at all.
    pub fn on(&self) -> bool {
        self.budget() > 0
    }

    fn evict_to(&self, s: &mut State, bytes: u64) {
        while s.bytes > bytes {
            let Some((_, e)) = s.entries.pop_lru() else {
                break;
            };
            s.bytes -= e.bytes;
            self.evicted.fetch_add(1, Relaxed);
        }
    }

    /// What it holds and has done.
    pub fn stats(&self) -> TierStats {
        let s = self.state();
        TierStats {
            budget: s.budget,
            bytes: s.bytes,
            blocks: s.entries.len() as u64,
            hits: self.hits.load(Relaxed),
            misses: self.misses.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            stale: self.stale.load(Relaxed),
        }
    }

    /// Whether it holds the object at `key` of `store` (not checked against the store: for
    /// deciding where work runs, never for serving it).
    pub fn holds(&self, spec: &StoreSpec, key: &str) -> bool {
        self.state().entries.contains(&key_in(spec, key))
    }

    /// Keeps `block`, the object at `key` of `store` whose version is `stamp`, decoded as
    /// `dtype` (its shape is the block's). Too large a block, or a tier that is off, keeps
    /// nothing.
    pub fn keep(&self, store: &Store, key: &str, stamp: String, dtype: DType, block: Arc<Block>) {
        let bytes = block.nbytes() as u64;
        let mut s = self.state();
        if s.budget == 0 || bytes > s.budget / 4 {
            return;
        }
        let entry = Entry {
            stamp,
            dtype,
            shape: block.shape().to_vec(),
            block,
            bytes,
        };
        if let Some(old) = s.entries.put(key_of(store, key), entry) {
            s.bytes -= old.bytes;
        }
        s.bytes += bytes;
        let budget = s.budget;
        self.evict_to(&mut s, budget);
    }

    /// Forgets every block of `store` under `prefix` (deleted there).
    pub fn forget_prefix(&self, store: &Store, prefix: &str) {
        let at = key_of(store, prefix);
        let mut s = self.state();
        if s.entries.is_empty() {
            return;
        }
        let gone: Vec<Key> = s
            .entries
            .iter()
            .filter(|(k, _)| {
                k.store == at.store
                    && (at.key.is_empty()
                        || k.key == at.key
                        || k.key
                            .strip_prefix(&at.key)
                            .is_some_and(|r| r.starts_with('/')))
            })
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            if let Some(e) = s.entries.pop(&k) {
                s.bytes -= e.bytes;
            }
        }
    }

    fn forget(&self, k: &Key) {
        let mut s = self.state();
        if let Some(e) = s.entries.pop(k) {
            s.bytes -= e.bytes;
        }
    }

    /// The block at `key` of `store`, decoded as `dtype` in `shape`, if the tier holds it
    /// and the store still has the version it was kept at (else it is dropped). A store
    /// that cannot say is a miss; its error is the read's to meet.
    pub async fn get(
        &self,
        store: &Store,
        key: &str,
        dtype: DType,
        shape: &[usize],
    ) -> Option<Arc<Block>> {
        let k = key_of(store, key);
        let (stamp, block) = {
            let mut s = self.state();
            if s.budget == 0 {
                return None;
            }
            match s.entries.get(&k) {
                Some(e) if e.dtype == dtype && e.shape == shape => {
                    (e.stamp.clone(), e.block.clone())
                }
                _ => {
                    self.misses.fetch_add(1, Relaxed);
                    return None;
                }
            }
        };
        match store.stamp(key).await {
            Ok(Some(now)) if now == stamp => {
                self.hits.fetch_add(1, Relaxed);
                Some(block)
            }
            _ => {
                self.stale.fetch_add(1, Relaxed);
                self.misses.fetch_add(1, Relaxed);
                self.forget(&k);
                None
            }
        }
    }
}

/// A block read through the tier: served from memory when it holds the current version,
/// else `read` gets the object's bytes and version from the store and `decode` makes the
/// block, which is kept for the next read.
pub async fn read_through<R, D>(
    store: &Store,
    key: &str,
    dtype: DType,
    shape: &[usize],
    read: R,
    decode: D,
) -> Result<Arc<Block>>
where
    R: std::future::Future<Output = Result<(Option<bytes::Bytes>, Option<String>)>>,
    D: AsyncFnOnce(Option<bytes::Bytes>) -> Result<Block>,
{
    tier()
        .read_through(store, key, dtype, shape, read, decode)
        .await
}

impl Tier {
    async fn read_through<R, D>(
        &self,
        store: &Store,
        key: &str,
        dtype: DType,
        shape: &[usize],
        read: R,
        decode: D,
    ) -> Result<Arc<Block>>
    where
        R: std::future::Future<Output = Result<(Option<bytes::Bytes>, Option<String>)>>,
        D: AsyncFnOnce(Option<bytes::Bytes>) -> Result<Block>,
    {
        let t = self;
        if let Some(b) = t.get(store, key, dtype, shape).await {
            return Ok(b);
        }
        let (bytes, stamp) = read.await?;
        let block = Arc::new(decode(bytes).await?);
        if let Some(stamp) = stamp {
            t.keep(store, key, stamp, dtype, block.clone());
        }
        Ok(block)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ArrayMeta, StoredArray};

    fn store(dir: &std::path::Path) -> Store {
        std::fs::create_dir_all(dir).unwrap();
        Store::open(&crate::StoreSpec {
            url: url::Url::from_directory_path(dir).unwrap().to_string(),
            endpoint: None,
        })
        .unwrap()
    }

    async fn read(t: &Tier, store: &Store, arr: &StoredArray, idx: &[u64]) -> Arc<Block> {
        let key = arr.block_key(idx);
        let shape = arr.meta.block_shape(idx);
        t.read_through(
            store,
            &key,
            arr.meta.dtype,
            &shape,
            async {
                let (b, s) = store.get_stamped(&key).await?;
                Ok((Some(b), s))
            },
            async |b| arr.decode(idx, b),
        )
        .await
        .unwrap()
    }

    fn values(b: &Arc<Block>) -> Vec<f64> {
        match b.as_ref() {
            Block::F64(a) => a.iter().copied().collect(),
            _ => panic!("f64 block"),
        }
    }

    #[tokio::test]
    async fn hits_misses_changes_and_evictions() {
        let dir = std::env::temp_dir().join(format!("nums-tier-test-{}", std::process::id()));
        let s = store(&dir.join("a"));
        let meta = ArrayMeta::new(vec![8], vec![4], DType::Float64);
        let arr = StoredArray::new("a", meta).unwrap();
        arr.write_metadata(&s).await.unwrap();
        let b = |v: f64| Block::F64(ndarray::Array1::from_elem(4, v).into_dyn());
        arr.write_block(&s, &[0], &b(1.0)).await.unwrap();
        arr.write_block(&s, &[1], &b(2.0)).await.unwrap();
        // A tier of its own (the process's is shared by every test running).
        let t = Tier::new();
        t.set_budget(1 << 20);
        let s0 = t.stats();
        assert_eq!(values(&read(&t, &s, &arr, &[0]).await), [1.0; 4]);
        assert_eq!(values(&read(&t, &s, &arr, &[0]).await), [1.0; 4]);
        let s1 = t.stats();
        assert_eq!((s1.hits - s0.hits, s1.blocks), (1, 1));
        // Rewritten in the store by another writer (a plain PUT, nothing kept here): the
        // new version is read, never the kept one.
        let bytes = arr.encode(&[0], &b(5.0)).unwrap();
        s.put(&arr.block_key(&[0]), bytes).await.unwrap();
        assert_eq!(values(&read(&t, &s, &arr, &[0]).await), [5.0; 4]);
        assert_eq!(t.stats().stale - s0.stale, 1);
        // Deleted: an error, not the kept block.
        s.delete(&arr.block_key(&[0])).await.unwrap();
        let key = arr.block_key(&[0]);
        assert!(t.get(&s, &key, DType::Float64, &[4]).await.is_none());
        // Another store's object of the same key is its own.
        let s2 = store(&dir.join("b"));
        arr.write_metadata(&s2).await.unwrap();
        arr.write_block(&s2, &[1], &b(7.0)).await.unwrap();
        assert_eq!(values(&read(&t, &s, &arr, &[1]).await), [2.0; 4]);
        assert_eq!(values(&read(&t, &s2, &arr, &[1]).await), [7.0; 4]);
        assert_eq!(values(&read(&t, &s, &arr, &[1]).await), [2.0; 4]);
        // A block written here is kept at the version its PUT made: read without a miss.
        let m = t.stats();
        let write = |a: &StoredArray, i: u64, v: f64| {
            let (a, s, t) = (a.clone(), s.clone(), &t);
            async move {
                let key = a.block_key(&[i]);
                let bytes = a.encode(&[i], &b(v)).unwrap();
                let stamp = s.put_stamped(&key, bytes, false).await.unwrap().unwrap();
                t.keep(&s, &key, stamp, DType::Float64, Arc::new(b(v)));
            }
        };
        write(&arr, 0, 9.0).await;
        assert_eq!(values(&read(&t, &s, &arr, &[0]).await), [9.0; 4]);
        let after = t.stats();
        assert_eq!((after.hits - m.hits, after.misses - m.misses), (1, 0));
        // A budget of four blocks: the least recently used go, and are read back.
        t.set_budget(4 * 32);
        let many =
            StoredArray::new("many", ArrayMeta::new(vec![40], vec![4], DType::Float64)).unwrap();
        many.write_metadata(&s).await.unwrap();
        let e0 = t.stats();
        for i in 0..10 {
            write(&many, i, i as f64).await;
            let st = t.stats();
            assert!(st.bytes <= 4 * 32 && st.blocks <= 4, "{st:?}");
        }
        assert!(t.stats().evicted - e0.evicted >= 6);
        let m = t.stats();
        assert_eq!(values(&read(&t, &s, &many, &[0]).await), [0.0; 4]); // evicted: read back
        assert_eq!(values(&read(&t, &s, &many, &[9]).await), [9.0; 4]); // still here
        let after = t.stats();
        assert_eq!((after.hits - m.hits, after.misses - m.misses), (1, 1));
        t.set_budget(0);
        assert_eq!(t.stats().bytes, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
