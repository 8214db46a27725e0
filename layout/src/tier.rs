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
//! - A block made by work running in this process may be kept *unwritten*
//!   ([`Tier::keep_unwritten`]): in memory only, with what writes it when it must be.
//!   Such a block is never evicted; it is written to the store (and from then on is an
//!   ordinary entry) by [`Tier::write_back`], which whoever lets another process read the
//!   store, or needs the room, calls first. Unwritten blocks never pass half the budget
//!   (the rest is for blocks read): one that would is refused, and its maker writes it
//!   as before. (Dask keeps a persisted
//!   array only in its workers' memory; here the store stays one call away.)
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

/// What writes an unwritten block to the store: its array's encoding of it.
pub type Encoder = Arc<dyn Fn(&Block) -> Result<bytes::Bytes> + Send + Sync>;

/// An unwritten block's way to the store.
struct Unwritten {
    store: Store,
    encode: Encoder,
    /// Whether it is to be written as an intermediate ([`Store::put_stamped`]).
    intermediate: bool,
}

struct Entry {
    /// The object's version when the block was read or written; `None` while it is
    /// unwritten (then `unwritten` says how to write it).
    stamp: Option<String>,
    unwritten: Option<Unwritten>,
    dtype: DType,
    shape: Vec<usize>,
    block: Arc<Block>,
    bytes: u64,
}

struct State {
    budget: u64,
    bytes: u64,
    /// Of `bytes`, those of unwritten blocks.
    unwritten: u64,
    entries: LruCache<Key, Entry>,
}

/// The process's memory tier ([`tier`]).
pub struct Tier {
    state: Mutex<State>,
    hits: AtomicU64,
    hit_bytes: AtomicU64,
    misses: AtomicU64,
    evicted: AtomicU64,
    stale: AtomicU64,
    written_back: AtomicU64,
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
    /// Bytes of the blocks those reads served.
    pub hit_bytes: u64,
    /// Reads that went to the store while the tier was on.
    pub misses: u64,
    /// Blocks evicted for room.
    pub evicted: u64,
    /// Blocks found changed or gone in the store, dropped rather than served.
    pub stale: u64,
    /// Of `bytes`, those of blocks made here and not written to the store yet.
    pub unwritten: u64,
    /// Blocks written to the store from memory ([`Tier::write_back`]).
    pub written_back: u64,
}

/// This process's memory tier.
pub fn tier() -> &'static Tier {
    static TIER: OnceLock<Tier> = OnceLock::new();
    TIER.get_or_init(Tier::new)
}

impl Key {
    /// Whether `k` is this key or under it (a prefix: `a/n1` holds `a/n1/0.0`, not
    /// `a/n17/0.0`; an empty one, the whole store).
    fn holds(&self, k: &Key) -> bool {
        k.store == self.store
            && (self.key.is_empty()
                || k.key == self.key
                || (k.key.strip_prefix(&self.key)).is_some_and(|r| r.starts_with('/')))
    }
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
                unwritten: 0,
                entries: LruCache::unbounded(),
            }),
            hits: AtomicU64::new(0),
            hit_bytes: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            evicted: AtomicU64::new(0),
            stale: AtomicU64::new(0),
            written_back: AtomicU64::new(0),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // An entry is inserted or removed whole: a panic elsewhere leaves it consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the budget in bytes (0 turns the tier off and empties it); evicts down to it.
    /// Blocks not written yet are written first where the new budget cannot hold them.
    pub async fn set_budget(&self, bytes: u64) -> Result<()> {
        self.write_back(None, bytes).await?;
        let mut s = self.state();
        s.budget = bytes;
        self.evict_to(&mut s, bytes);
        Ok(())
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

    /// Evicts written blocks, least recently used first, until the tier holds at most
    /// `bytes` (or only unwritten blocks).
    fn evict_to(&self, s: &mut State, bytes: u64) {
        if s.bytes <= bytes {
            return;
        }
        let mut over = s.bytes - bytes;
        let mut gone = Vec::new();
        for (k, e) in s.entries.iter().rev() {
            if over == 0 {
                break;
            }
            if e.unwritten.is_none() {
                over = over.saturating_sub(e.bytes);
                gone.push(k.clone());
            }
        }
        for k in gone {
            if let Some(e) = s.entries.pop(&k) {
                s.bytes -= e.bytes;
                self.evicted.fetch_add(1, Relaxed);
            }
        }
    }

    /// Removes entry `k`, keeping the counts.
    fn remove(s: &mut State, k: &Key) -> Option<Entry> {
        let e = s.entries.pop(k)?;
        s.bytes -= e.bytes;
        if e.unwritten.is_some() {
            s.unwritten -= e.bytes;
        }
        Some(e)
    }

    /// Inserts `e` at `k` as the most recently used, replacing what was there.
    fn insert(&self, s: &mut State, k: Key, e: Entry) {
        Self::remove(s, &k);
        s.bytes += e.bytes;
        if e.unwritten.is_some() {
            s.unwritten += e.bytes;
        }
        s.entries.put(k, e);
        let budget = s.budget;
        self.evict_to(s, budget);
    }

    /// What it holds and has done.
    pub fn stats(&self) -> TierStats {
        let s = self.state();
        TierStats {
            budget: s.budget,
            bytes: s.bytes,
            blocks: s.entries.len() as u64,
            hits: self.hits.load(Relaxed),
            hit_bytes: self.hit_bytes.load(Relaxed),
            misses: self.misses.load(Relaxed),
            evicted: self.evicted.load(Relaxed),
            stale: self.stale.load(Relaxed),
            unwritten: s.unwritten,
            written_back: self.written_back.load(Relaxed),
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
        let bytes = held_bytes(&block);
        let mut s = self.state();
        if s.budget == 0 || bytes > s.budget / 4 {
            return;
        }
        let entry = Entry {
            stamp: Some(stamp),
            unwritten: None,
            dtype,
            shape: block.shape().to_vec(),
            block,
            bytes,
        };
        self.insert(&mut s, key_of(store, key), entry);
    }

    /// Keeps `block`, made here as the object at `key` of `store`, without writing it
    /// there: [`Tier::write_back`] writes it with `encode` when another process is to
    /// read the store or the room is needed. Returns whether it was kept; when not (a
    /// tier that is off, a block over a quarter of the budget, unwritten blocks that would
    /// pass the budget), the caller writes it as it would have.
    pub fn keep_unwritten(
        &self,
        store: &Store,
        key: &str,
        intermediate: bool,
        dtype: DType,
        block: Arc<Block>,
        encode: Encoder,
    ) -> bool {
        let bytes = held_bytes(&block);
        let mut s = self.state();
        if s.budget == 0 || bytes > s.budget / 4 || s.unwritten + bytes > s.budget / 2 {
            return false;
        }
        let entry = Entry {
            stamp: None,
            unwritten: Some(Unwritten {
                store: store.clone(),
                encode,
                intermediate,
            }),
            dtype,
            shape: block.shape().to_vec(),
            block,
            bytes,
        };
        self.insert(&mut s, key_of(store, key), entry);
        true
    }

    /// Writes unwritten blocks to their stores (only those of `store` under `prefix`, if
    /// given), least recently used first, until at most `keep` bytes of them are left
    /// unwritten; each stays in memory as an ordinary entry at the version its PUT made.
    /// A block forgotten or replaced while it was being written is left as it is now.
    pub async fn write_back(&self, only: Option<(&StoreSpec, &str)>, keep: u64) -> Result<()> {
        let only = only.map(|(spec, prefix)| key_in(spec, prefix));
        let todo: Vec<(Key, Arc<Block>, Store, Encoder, bool)> = {
            let s = self.state();
            let mut left = s.unwritten;
            let mut todo = Vec::new();
            for (k, e) in s.entries.iter().rev() {
                if left <= keep {
                    break;
                }
                let Some(u) = &e.unwritten else { continue };
                if only.as_ref().is_some_and(|o| !o.holds(k)) {
                    continue;
                }
                left -= e.bytes;
                let w = (u.store.clone(), u.encode.clone(), u.intermediate);
                todo.push((k.clone(), e.block.clone(), w.0, w.1, w.2));
            }
            todo
        };
        for (k, block, store, encode, intermediate) in todo {
            let b = block.clone();
            let put = async {
                let bytes = tokio::task::spawn_blocking(move || encode(&b))
                    .await
                    .expect("encode task panicked")?;
                store.put_stamped(&k.key, bytes, intermediate).await
            };
            let put = put.await;
            // Still the block that was written (not forgotten, not replaced)?
            let same = |s: &State| {
                (s.entries.peek(&k))
                    .is_some_and(|e| e.unwritten.is_some() && Arc::ptr_eq(&e.block, &block))
            };
            let stamp = match put {
                Ok(stamp) => stamp,
                // Its array was deleted meanwhile (a session lets go of what no handle
                // holds beside a compute): its folder went with it, and so did the need.
                Err(_) if !{ same(&self.state()) } => continue,
                Err(e) => return Err(e),
            };
            self.written_back.fetch_add(1, Relaxed);
            let (kept, forgotten) = {
                let s = self.state();
                (same(&s), !s.entries.contains(&k))
            };
            if !kept {
                if forgotten {
                    // Forgotten while it was written: what was written goes too.
                    let _ = store.delete(&k.key).await;
                }
                continue;
            }
            let mut s = self.state();
            if !same(&s) {
                continue;
            }
            let e = s.entries.peek_mut(&k).expect("just seen");
            e.unwritten = None;
            e.stamp = stamp;
            let bytes = e.bytes;
            s.unwritten -= bytes;
            if s.entries.peek(&k).is_some_and(|e| e.stamp.is_none()) {
                // A store that names no versions: the block cannot be checked, so it goes.
                Self::remove(&mut s, &k);
            }
            let budget = s.budget;
            self.evict_to(&mut s, budget);
        }
        Ok(())
    }

    /// Forgets every block of `store` under `prefix` (deleted there).
    pub fn forget_prefix(&self, store: &Store, prefix: &str) {
        let at = key_of(store, prefix);
        let mut s = self.state();
        if s.entries.is_empty() {
            return;
        }
        let gone: Vec<Key> = (s.entries.iter())
            .filter(|(k, _)| at.holds(k))
            .map(|(k, _)| k.clone())
            .collect();
        for k in gone {
            Self::remove(&mut s, &k);
        }
    }

    fn hit(&self, bytes: u64) {
        self.hits.fetch_add(1, Relaxed);
        self.hit_bytes.fetch_add(bytes, Relaxed);
    }

    fn forget(&self, k: &Key) {
        Self::remove(&mut self.state(), k);
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
                // Made here and not written: this is the only version there is.
                Some(e) if e.dtype == dtype && e.shape == shape && e.stamp.is_none() => {
                    self.hit(e.bytes);
                    return Some(e.block.clone());
                }
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
            Ok(Some(now)) if Some(&now) == stamp.as_ref() => {
                self.hit(block.nbytes() as u64);
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

/// What a kept block costs beyond its values: its buffer's rounding and the allocator's
/// gaps around it, its key, stamp and shape, its entries in the tier's tables (a function
/// process's read of a block measured 7.9 KiB beyond its bytes: `READ_MEMORY`). Counted
/// against the budget, so that thousands of small blocks cannot hold several times what
/// the budget says: a function process at `memory_mb = 128` holding 4 KB blocks of an
/// earlier compute was killed over its limit.
pub const ENTRY_MEMORY: u64 = 8 << 10;

/// The bytes a kept `block` is counted at ([`ENTRY_MEMORY`] beyond its values).
fn held_bytes(block: &Block) -> u64 {
    block.nbytes() as u64 + ENTRY_MEMORY
}

#[cfg(test)]
mod tests {
    /// What a kept block of four float64s is counted at.
    const B: u64 = 32 + ENTRY_MEMORY;
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
        t.set_budget(1 << 20).await.unwrap();
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
        t.set_budget(4 * B).await.unwrap();
        let many =
            StoredArray::new("many", ArrayMeta::new(vec![40], vec![4], DType::Float64)).unwrap();
        many.write_metadata(&s).await.unwrap();
        let e0 = t.stats();
        for i in 0..10 {
            write(&many, i, i as f64).await;
            let st = t.stats();
            assert!(st.bytes <= 4 * B && st.blocks <= 4, "{st:?}");
        }
        assert!(t.stats().evicted - e0.evicted >= 6);
        let m = t.stats();
        assert_eq!(values(&read(&t, &s, &many, &[0]).await), [0.0; 4]); // evicted: read back
        assert_eq!(values(&read(&t, &s, &many, &[9]).await), [9.0; 4]); // still here
        let after = t.stats();
        assert_eq!((after.hits - m.hits, after.misses - m.misses), (1, 1));
        t.set_budget(0).await.unwrap();
        assert_eq!(t.stats().bytes, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn unwritten_blocks_are_served_written_back_and_never_evicted() {
        let dir = std::env::temp_dir().join(format!("nums-tier-unwritten-{}", std::process::id()));
        let s = store(&dir);
        let arr = StoredArray::new("u", ArrayMeta::new(vec![16], vec![4], DType::Float64)).unwrap();
        arr.write_metadata(&s).await.unwrap();
        let b = |v: f64| Arc::new(Block::F64(ndarray::Array1::from_elem(4, v).into_dyn()));
        let t = Tier::new();
        let keep = |i: u64, v: f64| {
            let key = arr.block_key(&[i]);
            t.keep_unwritten(&s, &key, true, DType::Float64, b(v), arr.encoder(&[i]))
        };
        // Off: refused (the maker writes it).
        assert!(!keep(0, 1.0));
        t.set_budget(6 * B).await.unwrap(); // three blocks unwritten at most
        assert!(keep(0, 1.0) && keep(1, 2.0) && keep(2, 3.0));
        // Not in the store, served from memory, with no store version to check.
        assert_eq!(s.stamp(&arr.block_key(&[0])).await.unwrap(), None);
        assert_eq!(values(&read(&t, &s, &arr, &[1]).await), [2.0; 4]);
        // A fourth would pass half the budget: refused (the maker writes it).
        assert!(!keep(3, 4.0));
        let st = t.stats();
        assert_eq!((st.blocks, st.unwritten, st.evicted), (3, 3 * B, 0));
        // Written back down to one block's worth: the least recently used two (0, 2).
        t.write_back(Some((s.spec(), "")), B).await.unwrap();
        let st = t.stats();
        assert_eq!((st.unwritten, st.written_back, st.blocks), (B, 2, 3));
        assert!(s.stamp(&arr.block_key(&[0])).await.unwrap().is_some());
        assert!(s.stamp(&arr.block_key(&[1])).await.unwrap().is_none());
        // What was written back reads the same from the store.
        assert_eq!(arr.read_block(&s, &[2]).await.unwrap(), *b(3.0));
        // Now a fourth fits (two unwritten: half the budget).
        assert!(keep(3, 4.0));
        // A smaller budget evicts written blocks, least recently used first (0), never an
        // unwritten one, even past the budget (1 and 3 are the only copies)...
        t.set_budget(3 * B).await.unwrap();
        let st = t.stats();
        assert_eq!(
            (st.blocks, st.bytes, st.unwritten, st.evicted),
            (3, 3 * B, 2 * B, 1)
        );
        t.set_budget(2 * B).await.unwrap();
        assert_eq!((t.stats().blocks, t.stats().unwritten), (2, 2 * B));
        // ... unless it cannot hold them: then they are written first, then evicted.
        t.set_budget(B).await.unwrap();
        let st = t.stats();
        assert_eq!((st.blocks, st.unwritten, st.written_back), (1, B, 3));
        assert_eq!(arr.read_block(&s, &[1]).await.unwrap(), *b(2.0));
        assert_eq!(values(&read(&t, &s, &arr, &[3]).await), [4.0; 4]);
        // Forgotten (its array deleted): gone from memory, never written.
        t.forget_prefix(&s, "u");
        assert_eq!(t.stats().unwritten, 0);
        assert!(s.stamp(&arr.block_key(&[3])).await.unwrap().is_none());
        // Turning the tier off writes what it would otherwise lose.
        t.set_budget(6 * B).await.unwrap();
        assert!(keep(3, 5.0));
        t.set_budget(0).await.unwrap();
        assert_eq!(arr.read_block(&s, &[3]).await.unwrap(), *b(5.0));
        assert_eq!(t.stats().bytes, 0);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
