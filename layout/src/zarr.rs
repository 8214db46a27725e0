//! A stored array is a Zarr v3 array: `zarr.json` plus chunks under `c/i/j`, encoded by
//! zarrs' codec chain (`bytes` little-endian + `zstd` with its frame checksum, so a
//! corrupted block is detected when it is decoded). Edge blocks are padded to the full
//! chunk shape on write, as the regular chunk grid requires, and cropped on read.

use std::borrow::Cow;
use std::num::NonZeroU64;
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use ndarray::{ArrayD, IxDyn, SliceInfoElem};
use serde_json::json;
use zarrs::array::codec::api::ArrayToBytesCodecTraits;
use zarrs::array::{Array, ArrayBytes, ArrayMetadata};

use crate::block::{Block, Elem, le_bytes};
use crate::meta::{ArrayMeta, DType, ScalarKind};
use crate::scalar::Scalar;
use crate::store::{Store, StoreSpec};
use crate::{Error, Result};
use serde::{Deserialize, Serialize};

/// zstd level for blocks: level 1 runs at about 1 GB/s per core, which keeps block I/O
/// close to the store's own throughput; higher levels gain little on float64.
pub const ZSTD_LEVEL: i64 = 1;

/// The key under a `zarr.json`'s `attributes` where nums-cloud records what it wrote.
pub const ATTRIBUTES_KEY: &str = "nums_cloud";

/// A Zarr array that nums-cloud reads where it is but did not encode itself: in any store
/// (a local folder or a bucket, the job's or not), as Zarr v2 or v3, with any codecs,
/// chunk keys and fill value zarrs knows. It travels to the functions with each batch
/// that reads it, so that they decode its chunks as its own metadata says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Foreign {
    /// The store that holds it: array paths are relative to its root.
    pub store: StoreSpec,
    /// Its metadata as read: a `zarr.json` (v3) or a `.zarray` (v2).
    pub metadata: serde_json::Value,
    /// Its chunks when it was opened ([`StoredArray::chunks_fingerprint`]): a reader that
    /// finds them changed after reading refuses what it read (a mix of old and new).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunks: Option<u64>,
}

/// One array at `path` in a store, with the codec chain its metadata names.
#[derive(Clone, Debug)]
pub struct StoredArray {
    /// Path of the array relative to the store root, without leading or trailing `/`.
    pub path: String,
    /// Shape, chunk shape (as the block shape) and dtype, as its `zarr.json` says.
    pub meta: ArrayMeta,
    /// Encoded exactly as nums-cloud encodes (codecs, chunk keys, fill value), so a
    /// function can read it in place with [`StoredArray::new`].
    pub native: bool,
    /// Written by nums-cloud, which writes every block (its `attributes` say so): a
    /// missing chunk is then an error, not the fill value.
    pub complete: bool,
    /// The metadata it was opened with, where it is not nums-cloud's own (a foreign array's).
    foreign: Option<Arc<serde_json::Value>>,
    /// A Zarr v2 array: its metadata is `.zarray`, not `zarr.json`.
    v2: bool,
    codec: Arc<Array<()>>,
    /// Whether [`encode`](Self::encode) and [`decode`](Self::decode) may call zstd
    /// themselves (see [`StoredArray::direct`]); off only to measure zarrs' codec chain.
    direct_codec: bool,
}

/// The `zarr.json` nums-cloud writes for an array.
pub fn zarr_json(meta: &ArrayMeta) -> serde_json::Value {
    let le = json!({"name": "bytes", "configuration": {"endian": "little"}});
    // As zarr-python 3 writes them: one-byte types have no byte order, a complex fill
    // value is the pair [re, im].
    let bytes_codec = if meta.dtype.size() == 1 {
        json!({"name": "bytes"})
    } else {
        le
    };
    let fill = match meta.dtype.kind() {
        ScalarKind::Bool => json!(false),
        ScalarKind::Int => json!(0),
        ScalarKind::Float => json!(0.0),
        ScalarKind::Complex => json!([0.0, 0.0]),
    };
    json!({
        "zarr_format": 3,
        "node_type": "array",
        "shape": meta.shape,
        "data_type": meta.dtype.name(),
        "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": meta.block}},
        "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
        "fill_value": fill,
        "codecs": [bytes_codec, {"name": "zstd", "configuration": {"level": ZSTD_LEVEL, "checksum": true}}],
        "attributes": {},
    })
}

fn meta_err(path: &str, message: impl std::fmt::Display) -> Error {
    Error::Meta {
        path: path.to_string(),
        message: message.to_string(),
    }
}

impl StoredArray {
    /// The array nums-cloud writes at `path` for `meta`. Its codec chain depends on
    /// `meta` alone and costs more to build than a small compute's kernels: built once per
    /// `meta` in this process (a few thousand kept).
    pub fn new(path: &str, meta: ArrayMeta) -> Result<StoredArray> {
        use std::collections::HashMap;
        use std::sync::Mutex;
        static MADE: Mutex<Option<HashMap<ArrayMeta, StoredArray>>> = Mutex::new(None);
        const KEPT: usize = 4096;
        let made = |m: &mut Option<HashMap<ArrayMeta, StoredArray>>| {
            m.get_or_insert_default().get(&meta).cloned()
        };
        if let Some(mut a) = made(&mut MADE.lock().unwrap_or_else(|e| e.into_inner())) {
            a.path = path.trim_matches('/').to_string();
            return Ok(a);
        }
        let a = Self::from_json(path, &zarr_json(&meta))?;
        let mut m = MADE.lock().unwrap_or_else(|e| e.into_inner());
        let m = m.get_or_insert_default();
        if m.len() >= KEPT {
            m.clear();
        }
        m.insert(meta, a.clone());
        Ok(a)
    }

    /// An array described by any Zarr v3 `zarr.json`, or a Zarr v2 `.zarray`, whose dtype
    /// nums-cloud supports and whose chunk grid is regular (its chunks are the blocks).
    pub fn from_json(path: &str, json: &serde_json::Value) -> Result<StoredArray> {
        let metadata: ArrayMetadata =
            serde_json::from_value(json.clone()).map_err(|e| meta_err(path, e))?;
        let (md, v2) = match &metadata {
            ArrayMetadata::V3(v3) => (v3.clone(), false),
            ArrayMetadata::V2(v2) => (
                zarrs::convert::array_metadata_v2_to_v3(v2).map_err(|e| meta_err(path, e))?,
                true,
            ),
        };
        let array =
            Array::new_with_metadata(Arc::new(()), "/", metadata).map_err(|e| meta_err(path, e))?;
        if md.chunk_grid.name() != "regular" {
            return Err(meta_err(
                path,
                format!(
                    "chunk grid {:?}: nums-cloud reads arrays in regular chunks (its blocks)",
                    md.chunk_grid.name()
                ),
            ));
        }
        let dtype_name = md.data_type.name();
        let dtype = DType::parse(dtype_name)
            .ok_or_else(|| meta_err(path, format!("unsupported data type {dtype_name}")))?;
        let block = array
            .chunk_shape(&vec![0; array.dimensionality()])
            .map_err(|e| meta_err(path, e))?
            .iter()
            .map(|c| c.get())
            .collect();
        let meta = ArrayMeta {
            shape: array.shape().to_vec(),
            block,
            dtype,
        };
        let ours = zarr_json(&meta);
        let native = !v2
            && ["codecs", "chunk_key_encoding", "fill_value"]
                .iter()
                .all(|k| json.get(*k) == ours.get(*k));
        let complete = json
            .get("attributes")
            .and_then(|a| a.get(ATTRIBUTES_KEY))
            .is_some_and(|n| n.get("complete") == Some(&json!(true)));
        Ok(StoredArray {
            path: path.trim_matches('/').to_string(),
            meta,
            native,
            complete,
            foreign: (!native).then(|| Arc::new(json.clone())),
            v2,
            codec: Arc::new(array),
            direct_codec: true,
        })
    }

    /// A foreign array as the batch describes it ([`Foreign`]), refused unless it has the
    /// shape, chunks and dtype the plan was made for.
    pub fn foreign(path: &str, f: &Foreign, meta: &ArrayMeta) -> Result<StoredArray> {
        let a = Self::from_json(path, &f.metadata)?;
        if a.meta != *meta {
            return Err(meta_err(
                path,
                format!(
                    "its metadata says {} {:?} in chunks {:?}, the plan was made for {} {:?} in {:?}",
                    a.meta.dtype, a.meta.shape, a.meta.block, meta.dtype, meta.shape, meta.block
                ),
            ));
        }
        Ok(a)
    }

    /// How the functions find and decode this array where it is, in `store`, and what
    /// its chunks are now.
    pub async fn foreign_in(&self, store: &Store) -> Result<Foreign> {
        Ok(Foreign {
            store: store.spec().clone(),
            metadata: match &self.foreign {
                Some(j) => (**j).clone(),
                None => zarr_json(&self.meta),
            },
            chunks: Some(self.chunks_fingerprint(store).await?),
        })
    }

    /// Opens the array stored at `path`.
    pub async fn open(store: &Store, path: &str) -> Result<StoredArray> {
        Ok(Self::open_stamped(store, path).await?.0)
    }

    /// Opens the array stored at `path` (a Zarr v3 `zarr.json`, else a Zarr v2 `.zarray`),
    /// with a stamp of its metadata (a hash of its bytes) that changes when the array is
    /// replaced.
    pub async fn open_stamped(store: &Store, path: &str) -> Result<(StoredArray, u64)> {
        let path = path.trim_matches('/');
        let bytes = match store.get(&format!("{path}/zarr.json")).await {
            // The v3 key is the one a missing array is named by: nums-cloud writes v3.
            Err(missing @ Error::NotFound { .. }) => {
                match store.get(&format!("{path}/.zarray")).await {
                    Err(Error::NotFound { .. }) => return Err(missing),
                    r => r?,
                }
            }
            r => r?,
        };
        let json: serde_json::Value =
            serde_json::from_slice(&bytes).map_err(|e| meta_err(path, e))?;
        Ok((Self::from_json(path, &json)?, stamp(&bytes)))
    }

    /// What identifies every chunk the array holds now (keys, sizes and versions; one LIST
    /// per thousand chunks), to notice chunks written again while a run reads them: an
    /// array written by other tools may change its chunks without its metadata.
    pub async fn chunks_fingerprint(&self, store: &Store) -> Result<u64> {
        let mut listed = store.list_versions(&format!("{}/", self.path)).await?;
        listed.sort();
        let mut text = String::new();
        for (k, size, version) in listed {
            text.push_str(&format!("{k}\t{size}\t{version}\n"));
        }
        Ok(stamp(text.as_bytes()))
    }

    /// Key of its metadata: `zarr.json` (`.zarray` for a Zarr v2 array).
    pub fn metadata_key(&self) -> String {
        let name = if self.v2 { ".zarray" } else { "zarr.json" };
        format!("{}/{name}", self.path)
    }

    /// Key of the chunk that holds block `idx`.
    pub fn block_key(&self, idx: &[u64]) -> String {
        format!("{}/{}", self.path, self.codec.chunk_key(idx))
    }

    /// Writes `zarr.json` (nums-cloud's own form, which every Zarr v3 reader accepts).
    pub async fn write_metadata(&self, store: &Store) -> Result<()> {
        self.write_metadata_with(store, None).await
    }

    /// Writes `zarr.json` with `attrs` under `attributes.nums_cloud` (what made the array;
    /// `"complete": true` says every block is written, so a missing one is an error).
    pub async fn write_metadata_with(
        &self,
        store: &Store,
        attrs: Option<serde_json::Value>,
    ) -> Result<()> {
        let mut z = zarr_json(&self.meta);
        if let Some(a) = attrs {
            z["attributes"][ATTRIBUTES_KEY] = a;
        }
        let json = serde_json::to_vec_pretty(&z).map_err(|e| meta_err(&self.path, e))?;
        store.put(&self.metadata_key(), Bytes::from(json)).await
    }

    fn chunk_shape(&self) -> Vec<NonZeroU64> {
        self.meta
            .block
            .iter()
            .map(|&b| NonZeroU64::new(b.max(1)).expect("positive"))
            .collect()
    }

    /// Encodes block `idx` to the bytes of its chunk.
    pub fn encode(&self, idx: &[u64], block: &Block) -> Result<Bytes> {
        let key = || self.block_key(idx);
        let expect = self.meta.block_shape(idx);
        if block.shape() != expect.as_slice() || block.dtype() != self.meta.dtype {
            return Err(Error::Corrupt {
                key: key(),
                message: format!(
                    "block is {} {:?}, the array wants {} {:?}",
                    block.dtype(),
                    block.shape(),
                    self.meta.dtype,
                    expect
                ),
            });
        }
        let full: Vec<usize> = self.meta.block.iter().map(|&b| b as usize).collect();
        // Zero-copy view of the values as little-endian bytes where the host is little-endian.
        let raw: Cow<'_, [u8]> = crate::with_block!(block, a => le_bytes(pad(a, &full, Elem::ZERO)),
            Bool(a) => Cow::Owned(pad(a, &full, false).iter().map(|&b| b as u8).collect()));
        if self.direct() {
            return zstd_encode(&raw)
                .map(Bytes::from)
                .map_err(|e| Error::Corrupt {
                    key: key(),
                    message: e.to_string(),
                });
        }
        let encoded = self
            .codec
            .codecs()
            .encode(
                ArrayBytes::new_flen(raw),
                &self.chunk_shape(),
                self.codec.data_type(),
                self.codec.fill_value(),
                &Default::default(),
            )
            .map_err(|e| Error::Corrupt {
                key: key(),
                message: e.to_string(),
            })?;
        Ok(Bytes::from(encoded.into_owned()))
    }

    /// Decodes the bytes of block `idx`'s chunk; `None` (no chunk stored) is the array's
    /// fill value.
    pub fn decode(&self, idx: &[u64], bytes: Option<Bytes>) -> Result<Block> {
        let key = || self.block_key(idx);
        let corrupt = |message: String| Error::Corrupt {
            key: key(),
            message,
        };
        let full: Vec<usize> = self.meta.block.iter().map(|&b| b as usize).collect();
        let shape = self.meta.block_shape(idx);
        let Some(bytes) = bytes else {
            return Ok(Block::full(self.meta.dtype, &shape, self.fill_value()));
        };
        if self.direct() {
            return self.decode_direct(&bytes, &full, &shape).map_err(corrupt);
        }
        self.decode_with_codec_chain(&bytes, &full, &shape)
            .map_err(corrupt)
    }

    /// nums-cloud's own codecs (`bytes` little-endian, `zstd` with checksum) on a
    /// little-endian host: [`encode`](Self::encode) and [`decode`](Self::decode) call zstd
    /// themselves. The frames are the ones zarrs writes (same library, level and flags:
    /// byte for byte), and a frame decompresses straight into the block's buffer.
    fn direct(&self) -> bool {
        self.direct_codec && self.native && cfg!(target_endian = "little")
    }

    /// This array with every block going through zarrs' codec chain, as nums-cloud did
    /// before it called zstd itself (for benchmarks comparing the two).
    pub fn with_codec_chain(mut self) -> StoredArray {
        self.direct_codec = false;
        self
    }

    /// Decodes a chunk through zarrs' codec chain, which any codecs the metadata names
    /// can use: the frame is decompressed into a byte buffer, then copied into the array.
    fn decode_with_codec_chain(
        &self,
        bytes: &[u8],
        full: &[usize],
        shape: &[usize],
    ) -> std::result::Result<Block, String> {
        let decoded = self
            .codec
            .codecs()
            .decode(
                Cow::Borrowed(bytes),
                &self.chunk_shape(),
                self.codec.data_type(),
                self.codec.fill_value(),
                &Default::default(),
            )
            .map_err(|e| e.to_string())?;
        let raw = decoded.into_fixed().map_err(|e| e.to_string())?;
        let n: usize = full.iter().product();
        if raw.len() != n * self.meta.dtype.size() {
            return Err(format!(
                "decoded {} bytes, expected {}",
                raw.len(),
                n * self.meta.dtype.size()
            ));
        }
        let block = Block::from_le_bytes(self.meta.dtype, full, &raw).expect("size checked");
        Ok(crate::map_block!(block, a => crop(a, shape)))
    }

    /// Decodes one of nums-cloud's own chunks with no copy: the zstd frame (its checksum
    /// checked) is decompressed into the array's buffer, which must be filled exactly.
    fn decode_direct(
        &self,
        bytes: &[u8],
        full: &[usize],
        shape: &[usize],
    ) -> std::result::Result<Block, String> {
        let n: usize = full.iter().product();
        Ok(
            crate::for_dtype!(self.meta.dtype, T => T::wrap(crop_vec(zstd_decode::<T>(bytes, n)?, full, shape)),
            bool => {
                let raw: Vec<u8> = zstd_decode(bytes, n)?;
                Block::Bool(crop_vec(raw.iter().map(|&b| b != 0).collect(), full, shape))
            }),
        )
    }

    /// Bytes held at once while block `idx` is read: its chunk's encoded bytes (at most
    /// zstd's bound for the chunk), the decoded chunk, and the cropped copy of an edge block
    /// (zarrs' codec chain, for codecs other than nums-cloud's, adds a byte buffer).
    pub fn decode_peak(&self, idx: &[u64]) -> u64 {
        let chunk = self.chunk_nbytes();
        let encoded = zstd::zstd_safe::compress_bound(chunk as usize) as u64;
        let chain = if self.direct() { 0 } else { chunk };
        encoded + chunk + chain + self.edge_copy(idx)
    }

    /// Bytes held at once while block `idx` is encoded, beyond the block itself: the padded
    /// copy of an edge block and the encoded bytes (at most zstd's bound for the chunk).
    pub fn encode_peak(&self, idx: &[u64]) -> u64 {
        let chunk = self.chunk_nbytes();
        zstd::zstd_safe::compress_bound(chunk as usize) as u64 + self.edge_copy(idx)
    }

    /// Bytes of one decoded chunk: the buffer a block is decoded into.
    pub fn chunk_nbytes(&self) -> u64 {
        self.meta.block.iter().product::<u64>() * self.meta.dtype.size() as u64
    }

    /// A padded or cropped copy for an edge block: a chunk's size.
    fn edge_copy(&self, idx: &[u64]) -> u64 {
        let shape = self.meta.block_shape(idx);
        let full = shape
            .iter()
            .zip(&self.meta.block)
            .all(|(&s, &b)| s as u64 == b);
        if full { 0 } else { self.chunk_nbytes() }
    }

    /// The array's `fill_value` as a number (what a chunk that was never written holds).
    pub fn fill_value(&self) -> Scalar {
        let b = self.codec.fill_value().as_ne_bytes();
        // zarrs holds it in the host's byte order: little-endian on every host nums-cloud
        // runs on (a big-endian one reads the encoded chunks through zarrs' chain).
        match Block::from_le_bytes(self.meta.dtype, &[], b) {
            Some(v) if cfg!(target_endian = "little") => v.first(),
            _ => Scalar::Int(0),
        }
    }

    /// Reads block `idx` from the store; a missing chunk is an error (nums-cloud writes all).
    pub async fn read_block(&self, store: &Store, idx: &[u64]) -> Result<Block> {
        Ok(Arc::unwrap_or_clone(
            self.read_shared(store, idx, false).await?,
        ))
    }

    /// Reads block `idx`, treating a missing chunk as the fill value (arrays written by others).
    pub async fn read_block_or_fill(&self, store: &Store, idx: &[u64]) -> Result<Block> {
        Ok(Arc::unwrap_or_clone(
            self.read_shared(store, idx, true).await?,
        ))
    }

    /// Block `idx` through this process's memory tier ([`crate::tier`]): from memory when
    /// it holds the store's current version, else read (a missing chunk is the fill value
    /// if `missing_is_fill`, else an error), decoded here, and kept there. (The driver's
    /// way: decoding on the blocking pool, its threads' malloc arenas held freed blocks
    /// and doubled the driver's peak memory.)
    pub async fn read_shared(
        &self,
        store: &Store,
        idx: &[u64],
        missing_is_fill: bool,
    ) -> Result<Arc<Block>> {
        self.read_tiered(store, idx, missing_is_fill, false).await
    }

    /// [`StoredArray::read_shared`], decoded on the blocking pool (a function's reads:
    /// several blocks decode at once, on all cores).
    pub async fn read_shared_on_pool(
        &self,
        store: &Store,
        idx: &[u64],
        missing_is_fill: bool,
    ) -> Result<Arc<Block>> {
        self.read_tiered(store, idx, missing_is_fill, true).await
    }

    async fn read_tiered(
        &self,
        store: &Store,
        idx: &[u64],
        missing_is_fill: bool,
        on_pool: bool,
    ) -> Result<Arc<Block>> {
        let key = self.block_key(idx);
        let shape = self.meta.block_shape(idx);
        let fetch = async {
            match store.get_stamped(&key).await {
                Ok((bytes, stamp)) => Ok((Some(bytes), stamp)),
                Err(Error::NotFound { .. }) if missing_is_fill => Ok((None, None)),
                Err(e) => Err(e),
            }
        };
        let decode = async |bytes| match on_pool {
            false => self.decode(idx, bytes),
            true => {
                let (arr, idx) = (self.clone(), idx.to_vec());
                tokio::task::spawn_blocking(move || arr.decode(&idx, bytes))
                    .await
                    .expect("decode task panicked")
            }
        };
        crate::tier::read_through(store, &key, self.meta.dtype, &shape, fetch, decode).await
    }

    /// What writes block `idx` of this array when the memory tier must
    /// ([`crate::tier::Tier::keep_unwritten`]).
    pub fn encoder(&self, idx: &[u64]) -> crate::tier::Encoder {
        let (arr, idx) = (self.clone(), idx.to_vec());
        Arc::new(move |b: &Block| arr.encode(&idx, b))
    }

    /// Writes block `idx` with one PUT (kept in the memory tier when it is on); returns
    /// the bytes written.
    pub async fn write_block(&self, store: &Store, idx: &[u64], block: &Block) -> Result<u64> {
        let bytes = self.encode(idx, block)?;
        let n = bytes.len() as u64;
        let key = self.block_key(idx);
        let stamp = store.put_stamped(&key, bytes, false).await?;
        let t = crate::tier::tier();
        if let Some(stamp) = stamp.filter(|_| t.on()) {
            t.keep(store, &key, stamp, self.meta.dtype, Arc::new(block.clone()));
        }
        Ok(n)
    }

    /// Reads every block into one in-memory array (a small one: a mask's values, a fit's
    /// sums, an output's preview); a missing chunk is an error (nums-cloud writes all).
    pub async fn read_whole(&self, store: &Store) -> Result<Block> {
        self.read_all(store, false).await
    }

    /// [`read_whole`](Self::read_whole), a missing chunk read as the fill value (arrays
    /// written by others).
    pub async fn read_whole_or_fill(&self, store: &Store) -> Result<Block> {
        self.read_all(store, true).await
    }

    async fn read_all(&self, store: &Store, missing_is_fill: bool) -> Result<Block> {
        let blocks: Vec<(Vec<u64>, Arc<Block>)> = futures::stream::iter(self.meta.blocks())
            .map(|idx| async move {
                let b = self.read_shared(store, &idx, missing_is_fill).await?;
                Ok::<_, Error>((idx, b))
            })
            .buffer_unordered(WHOLE_AT_ONCE)
            .try_collect()
            .await?;
        let shape: Vec<usize> = self.meta.shape.iter().map(|&s| s as usize).collect();
        if self.meta.grid().iter().skip(1).all(|&g| g <= 1) {
            let mut rows: Vec<(u64, &Block)> = (blocks.iter())
                .map(|(idx, b)| (idx.first().copied().unwrap_or(0), b.as_ref()))
                .collect();
            rows.sort_by_key(|r| r.0);
            let parts: Vec<&Block> = rows.into_iter().map(|r| r.1).collect();
            return Block::concat_rows(self.meta.dtype, &shape, &parts).ok_or_else(|| {
                meta_err(
                    &self.path,
                    "a block's dtype or shape differs from the array's",
                )
            });
        }
        let mut full = Block::zeros(self.meta.dtype, &shape);
        for (idx, b) in blocks {
            let info = block_slice(&self.meta, &idx);
            if !full.assign(&info, &b) {
                return Err(meta_err(
                    &self.path,
                    "a block's dtype differs from the array's",
                ));
            }
        }
        Ok(full)
    }

    /// Splits an in-memory array of the array's shape into blocks, each kept in this
    /// process's memory tier unwritten where it has room (values this process holds:
    /// written when another process is to read them, [`crate::tier::Tier::write_back`]),
    /// else written.
    pub async fn write_whole(&self, store: &Store, full: &Block) -> Result<()> {
        futures::stream::iter(self.meta.blocks())
            .map(|idx| async move {
                let info = block_slice(&self.meta, &idx);
                let block = crate::map_block!(full, a => a.slice(info.as_slice()).to_owned());
                let (key, block) = (self.block_key(&idx), Arc::new(block));
                let enc = self.encoder(&idx);
                let dtype = self.meta.dtype;
                if !crate::tier::tier().keep_unwritten(
                    store,
                    &key,
                    false,
                    dtype,
                    block.clone(),
                    enc,
                ) {
                    self.write_block(store, &idx, &block).await?;
                }
                Ok::<(), Error>(())
            })
            .buffer_unordered(WHOLE_AT_ONCE)
            .try_collect::<Vec<()>>()
            .await?;
        Ok(())
    }
}

/// Blocks [`StoredArray::read_whole`] and [`StoredArray::write_whole`] move at once.
const WHOLE_AT_ONCE: usize = 8;

/// Where block `idx` lies in the whole array, as a slice.
fn block_slice(meta: &ArrayMeta, idx: &[u64]) -> Vec<SliceInfoElem> {
    let o = meta.block_origin(idx);
    let s = meta.block_shape(idx);
    o.iter()
        .zip(&s)
        .map(|(&o, &s)| SliceInfoElem::from(o as isize..(o as isize + s as isize)))
        .collect()
}

/// The key of block `idx` of the array at `path` in nums-cloud's encoding (Zarr v3's
/// default chunk keys with `/`): `path/c/i/j`, `path/c` for a 0-d array.
pub fn chunk_key(path: &str, idx: &[u64]) -> String {
    let mut k = format!("{}/c", path.trim_matches('/'));
    for i in idx {
        k.push('/');
        k.push_str(&i.to_string());
    }
    k
}

/// A stamp of a `zarr.json`'s bytes: equal bytes, equal stamps (FNV-1a, stable across
/// builds).
fn stamp(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// zstd level for a chunk that barely compresses at [`ZSTD_LEVEL`] (float64 noise: 1.04):
/// a fast level stores its literals raw, which decodes about 3x faster (3.2 against 1.0
/// GB/s on one core here) and encodes about 2x faster, for about 4% more bytes
/// (`benches/src/codec.rs`). Any zstd decoder reads either frame; the level is not part
/// of the format.
const FAST_LEVEL: i32 = -1;

/// A chunk whose samples compress less than this at [`ZSTD_LEVEL`] is written at
/// [`FAST_LEVEL`].
const FAST_BELOW_RATIO: f64 = 1.15;

/// Chunks of at least this many bytes are sampled to choose their level (4 samples of
/// 1/16 of this, spread over the chunk: under 1% of its encoding time).
const SAMPLED_FROM: usize = 1 << 20;

/// The zstd level for a chunk: [`ZSTD_LEVEL`], or [`FAST_LEVEL`] for a large chunk that
/// barely compresses.
fn level_for(raw: &[u8]) -> std::io::Result<i32> {
    if raw.len() < SAMPLED_FROM {
        return Ok(ZSTD_LEVEL as i32);
    }
    let len = SAMPLED_FROM / 16;
    let mut packed = 0;
    for k in 0..4 {
        let at = raw.len() / 4 * k;
        packed += zstd::bulk::compress(&raw[at..at + len], ZSTD_LEVEL as i32)?.len();
    }
    Ok(if (4 * len) as f64 / (packed as f64) < FAST_BELOW_RATIO {
        FAST_LEVEL
    } else {
        ZSTD_LEVEL as i32
    })
}

/// Compresses a chunk's bytes as zarrs' `zstd` codec does for nums-cloud's metadata (the
/// same zstd, level and checksum flag; one thread, so the frame is the same byte for
/// byte), except that a large chunk that barely compresses is written at
/// [`FAST_LEVEL`]. The buffer is allocated once at zstd's bound.
fn zstd_encode(raw: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut c = zstd::bulk::Compressor::new(level_for(raw)?)?;
    c.include_checksum(true)?;
    let mut out = Vec::with_capacity(zstd::zstd_safe::compress_bound(raw.len()));
    c.compress_to_buffer(raw, &mut out)?;
    Ok(out)
}

/// Decompresses a chunk that must hold exactly `n` values of `T` (little-endian) into a
/// new buffer of `n` values, the kernel's own. The frame must carry a content checksum
/// (nums-cloud's metadata asks for one), which zstd verifies while it decompresses.
fn zstd_decode<T: bytemuck::Pod>(bytes: &[u8], n: usize) -> std::result::Result<Vec<T>, String> {
    if !frame_has_checksum(bytes) {
        return Err("not a zstd frame with a content checksum".into());
    }
    // Decompressed into the buffer's capacity, not zeroed first: a freed block the
    // functions' allocator hands out again is not cleared (128 MiB cost ~10 ms), and
    // fresh pages are the kernel's zeroed ones either way.
    let mut v: Vec<T> = Vec::with_capacity(n);
    let want = n * std::mem::size_of::<T>();
    let got = zstd::bulk::Decompressor::new()
        .and_then(|mut d| d.decompress_to_buffer(bytes, &mut Spare::new(&mut v, n)))
        .map_err(|e| format!("zstd: {e}"))?;
    if got != want {
        return Err(format!("decoded {got} bytes, expected {want}"));
    }
    Ok(v)
}

/// The first `n` values' room of a vector (`n` at most its capacity) as zstd's output
/// buffer: the vector's length is set once a whole number of values is written.
struct Spare<'a, T> {
    v: &'a mut Vec<T>,
    bytes: usize,
}

impl<'a, T: bytemuck::Pod> Spare<'a, T> {
    fn new(v: &'a mut Vec<T>, n: usize) -> Self {
        assert!(v.is_empty() && v.capacity() >= n);
        Spare {
            v,
            bytes: n * std::mem::size_of::<T>(),
        }
    }
}

// SAFETY: `as_mut_ptr` points at `capacity` writable bytes (the vector's reserved room),
// `as_slice` shows only the bytes of values marked written, and `filled_until(n)` (zstd
// wrote the first `n` bytes) marks whole values written: any `T: Pod` bit pattern is one.
unsafe impl<T: bytemuck::Pod> zstd::zstd_safe::WriteBuf for Spare<'_, T> {
    fn as_slice(&self) -> &[u8] {
        bytemuck::cast_slice(self.v.as_slice())
    }
    fn capacity(&self) -> usize {
        self.bytes
    }
    fn as_mut_ptr(&mut self) -> *mut u8 {
        self.v.as_mut_ptr().cast()
    }
    unsafe fn filled_until(&mut self, n: usize) {
        // SAFETY: the first `n` bytes (within the reserved room) were written.
        unsafe { self.v.set_len(n / std::mem::size_of::<T>().max(1)) };
    }
}

/// Whether `bytes` opens with a zstd frame header whose content-checksum flag is set.
fn frame_has_checksum(bytes: &[u8]) -> bool {
    const MAGIC: [u8; 4] = 0xFD2F_B528u32.to_le_bytes();
    bytes.len() > 4 && bytes[..4] == MAGIC && bytes[4] & 0b100 != 0
}

/// The values of a decoded chunk of shape `full`, cropped to an edge block's `shape`.
/// Where only the first axis is short (the usual edge: the last row block) the block is
/// the buffer's head, kept without a copy (the tail is returned to the allocator).
fn crop_vec<T: Clone>(mut v: Vec<T>, full: &[usize], shape: &[usize]) -> ArrayD<T> {
    if !shape.is_empty() && shape[1..] == full[1..] {
        v.truncate(shape.iter().product());
        v.shrink_to_fit();
        return ArrayD::from_shape_vec(IxDyn(shape), v).expect("shape");
    }
    crop(
        ArrayD::from_shape_vec(IxDyn(full), v).expect("shape"),
        shape,
    )
}

fn pad<'a, T: Clone>(a: &'a ArrayD<T>, full: &[usize], fill: T) -> Cow<'a, ArrayD<T>> {
    if a.shape() == full && a.is_standard_layout() {
        return Cow::Borrowed(a);
    }
    let mut out = ArrayD::from_elem(IxDyn(full), fill);
    out.slice_each_axis_mut(|ax| (0..a.shape()[ax.axis.index()]).into())
        .assign(a);
    Cow::Owned(out)
}

fn crop<T: Clone>(a: ArrayD<T>, shape: &[usize]) -> ArrayD<T> {
    if a.shape() == shape {
        return a;
    }
    let info: Vec<SliceInfoElem> = shape
        .iter()
        .map(|&n| SliceInfoElem::Slice {
            start: 0,
            end: Some(n as isize),
            step: 1,
        })
        .collect();
    a.slice(info.as_slice()).to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ragged_block_roundtrip() {
        let meta = ArrayMeta::new(vec![7, 5], vec![3, 4], DType::Float64);
        let arr = StoredArray::new("job/x", meta).unwrap();
        assert_eq!(arr.block_key(&[2, 1]), "job/x/c/2/1");
        assert_eq!(chunk_key("job/x", &[2, 1]), arr.block_key(&[2, 1]));
        let b = Block::F64(ArrayD::from_shape_fn(IxDyn(&[1, 1]), |_| 4.25));
        let bytes = arr.encode(&[2, 1], &b).unwrap();
        assert_eq!(arr.decode(&[2, 1], Some(bytes)).unwrap(), b);
    }

    #[test]
    fn corrupt_block_is_reported_by_key() {
        let meta = ArrayMeta::new(vec![4], vec![4], DType::Float64);
        let arr = StoredArray::new("j/y", meta).unwrap();
        let b = Block::F64(ArrayD::from_shape_fn(IxDyn(&[4]), |i| i[0] as f64));
        let mut bytes = arr.encode(&[0], &b).unwrap().to_vec();
        let n = bytes.len();
        bytes[n - 6] ^= 0xff;
        let e = arr.decode(&[0], Some(Bytes::from(bytes))).unwrap_err();
        assert!(e.to_string().contains("j/y/c/0"), "{e}");
    }

    #[test]
    fn bool_and_scalar() {
        let m = ArrayMeta::new(vec![3], vec![2], DType::Bool);
        let arr = StoredArray::new("b", m).unwrap();
        let b = Block::Bool(ArrayD::from_shape_vec(IxDyn(&[1]), vec![true]).unwrap());
        let bytes = arr.encode(&[1], &b).unwrap();
        assert_eq!(arr.decode(&[1], Some(bytes)).unwrap(), b);
        let s = StoredArray::new("s", ArrayMeta::new(vec![], vec![], DType::Float64)).unwrap();
        assert_eq!(s.block_key(&[]), "s/c");
        let b = Block::F64(ArrayD::from_elem(IxDyn(&[]), 2.5));
        let bytes = s.encode(&[], &b).unwrap();
        assert_eq!(s.decode(&[], Some(bytes)).unwrap(), b);
    }

    /// A Zarr v2 array in F order, as zarr-python writes one: its chunk keys (`0.0`), its
    /// chunks decoded column-major into the block, a missing one its fill value; the
    /// plan's metadata must be its own.
    #[test]
    fn zarr_v2_in_f_order_is_read_as_its_metadata_says() {
        let zarray = json!({
            "zarr_format": 2, "shape": [3, 3], "chunks": [3, 2], "dtype": "<i4",
            "order": "F", "compressor": null, "fill_value": -1, "filters": null,
            "dimension_separator": "."
        });
        let arr = StoredArray::from_json("p", &zarray).unwrap();
        assert!(!arr.native && !arr.complete && arr.v2);
        assert_eq!(
            arr.meta,
            ArrayMeta::new(vec![3, 3], vec![3, 2], DType::Int32)
        );
        assert_eq!(
            (arr.block_key(&[0, 1]), arr.metadata_key()),
            ("p/0.1".into(), "p/.zarray".into())
        );
        let column_major: Vec<u8> = [0i32, 3, 6, 1, 4, 7]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let want = ArrayD::from_shape_vec(IxDyn(&[3, 2]), vec![0i32, 1, 3, 4, 6, 7]).unwrap();
        assert_eq!(
            arr.decode(&[0, 0], Some(Bytes::from(column_major)))
                .unwrap(),
            Block::I32(want)
        );
        let fill = ArrayD::from_elem(IxDyn(&[3, 1]), -1i32);
        assert_eq!(arr.decode(&[0, 1], None).unwrap(), Block::I32(fill));
        let f = Foreign {
            store: StoreSpec {
                url: "file:///tmp/".into(),
                endpoint: None,
            },
            metadata: zarray,
            chunks: None,
        };
        assert!(StoredArray::foreign("p", &f, &arr.meta).is_ok());
        let other = ArrayMeta::new(vec![3, 3], vec![3, 3], DType::Int32);
        let e = StoredArray::foreign("p", &f, &other).unwrap_err();
        assert!(e.to_string().contains("the plan was made for"), "{e}");
    }

    /// zstd called directly writes zarrs' bytes exactly, and each path reads the other's,
    /// for every dtype and for full, first-axis-edge and other edge blocks.
    #[test]
    fn direct_codec_matches_zarrs_chain() {
        for dtype in DType::ALL {
            let meta = ArrayMeta::new(vec![7, 5], vec![3, 5], dtype);
            let direct = StoredArray::new("d/x", meta).unwrap();
            let chain = direct.clone().with_codec_chain();
            assert!(direct.direct() && !chain.direct());
            for idx in [[0u64, 0], [2, 0]] {
                let shape = direct.meta.block_shape(&idx);
                let a = ArrayD::from_shape_fn(IxDyn(&shape), |i| (i[0] * 5 + i[1]) as f64 - 3.5);
                let b = Block::from_f64(dtype, a);
                let bytes = direct.encode(&idx, &b).unwrap();
                assert_eq!(bytes, chain.encode(&idx, &b).unwrap(), "{dtype} {idx:?}");
                assert_eq!(direct.decode(&idx, Some(bytes.clone())).unwrap(), b);
                assert_eq!(chain.decode(&idx, Some(bytes)).unwrap(), b);
            }
        }
        // An edge block short on the last axis (cropped by a copy).
        let meta = ArrayMeta::new(vec![4, 7], vec![4, 3], DType::Float64);
        let arr = StoredArray::new("d/y", meta).unwrap();
        let b = Block::F64(ArrayD::from_shape_fn(IxDyn(&[4, 1]), |i| i[0] as f64));
        let bytes = arr.encode(&[0, 2], &b).unwrap();
        assert_eq!(arr.decode(&[0, 2], Some(bytes)).unwrap(), b);
    }

    /// A large chunk of noise is written at the fast level (literals raw: no smaller than
    /// the data) and one that compresses at the codec's level; zarrs reads both.
    #[test]
    fn noise_is_written_at_the_fast_level_and_zarrs_reads_it() {
        let n = 1 << 18; // 2 MiB of float64
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<f64> = (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
            })
            .collect();
        let smooth: Vec<f64> = (0..n).map(|i| (i / 64) as f64).collect();
        let meta = ArrayMeta::new(vec![n as u64], vec![n as u64], DType::Float64);
        let direct = StoredArray::new("d/n", meta).unwrap();
        let chain = direct.clone().with_codec_chain();
        for (v, fast) in [(noise, true), (smooth, false)] {
            let raw: Vec<u8> = v.iter().flat_map(|f| f.to_le_bytes()).collect();
            assert_eq!(level_for(&raw).unwrap() == FAST_LEVEL, fast);
            let b = Block::F64(ArrayD::from_shape_vec(IxDyn(&[n]), v).unwrap());
            let bytes = direct.encode(&[0], &b).unwrap();
            assert_eq!(
                bytes.len() as f64 >= raw.len() as f64,
                fast,
                "{}",
                bytes.len()
            );
            assert_eq!(chain.decode(&[0], Some(bytes.clone())).unwrap(), b);
            assert_eq!(direct.decode(&[0], Some(bytes)).unwrap(), b);
        }
    }

    /// The direct decoder refuses a frame without a checksum, a frame of the wrong size, a
    /// truncated frame, and a flipped bit anywhere that changes a value (the header's
    /// unused bit changes none: zstd ignores it).
    #[test]
    fn direct_decode_refuses_bad_frames() {
        let meta = ArrayMeta::new(vec![64], vec![64], DType::Float64);
        let arr = StoredArray::new("j/z", meta).unwrap();
        let raw: Vec<u8> = (0..64)
            .flat_map(|i| (i as f64).sqrt().to_le_bytes())
            .collect();
        let bad = |bytes: Vec<u8>| {
            let e = arr.decode(&[0], Some(Bytes::from(bytes))).unwrap_err();
            assert!(
                matches!(e, Error::Corrupt { ref key, .. } if key == "j/z/c/0"),
                "{e}"
            );
        };
        bad(zstd::bulk::compress(&raw, 1).unwrap());
        bad(zstd_encode(&raw[..256]).unwrap());
        bad(zstd_encode(&[raw.clone(), vec![0; 8]].concat()).unwrap());
        let good = zstd_encode(&raw).unwrap();
        bad(good[..good.len() - 3].to_vec());
        for i in 0..good.len() {
            let mut b = good.clone();
            b[i] ^= 0x10;
            if let Ok(Block::F64(a)) = arr.decode(&[0], Some(Bytes::from(b))) {
                let a: Vec<u8> = a.iter().flat_map(|v| v.to_le_bytes()).collect();
                assert_eq!(a, raw, "flipped byte {i} decoded to other values");
            }
        }
    }
}
