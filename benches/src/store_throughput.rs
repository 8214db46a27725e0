//! Store throughput: the same data written and read as nums-cloud blocks (Zarr chunks,
//! bytes + zstd, one PUT/GET each) and as raw objects through object_store, side by side
//! in one run. The raw figure is the physical ceiling of block I/O on that store.
//!
//!     cargo run --release -p nums-benches --bin store_throughput -- \
//!         --url s3://bucket/bench --endpoint http://127.0.0.1:3900 [--blocks 32] [--mib 8]
//!
//! Without --url it uses a temporary folder (file://).

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use ndarray::{ArrayD, IxDyn};
use nums_layout::{ArrayMeta, Block, DType, Store, StoreSpec, StoredArray};

const CONCURRENCY: usize = 16;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// Smooth-ish but not trivially compressible values: a random walk, like real data.
fn data(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    let mut acc = 0.0;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            acc += (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            acc
        })
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let blocks: u64 = arg("--blocks")
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(32);
    let mib: u64 = arg("--mib").map(|s| s.parse()).transpose()?.unwrap_or(8);
    let tmp = std::env::temp_dir().join(format!("nums-bench-{}", std::process::id()));
    let spec = match arg("--url") {
        Some(url) => StoreSpec {
            url,
            endpoint: arg("--endpoint"),
        },
        None => StoreSpec {
            url: url::Url::from_directory_path(&tmp)
                .expect("abs")
                .to_string(),
            endpoint: None,
        },
    };
    let store = Store::open(&spec).context("open store")?;
    store.check().await.context("store unreachable")?;
    let rows = mib * (1 << 20) / 8 / 1024;
    let meta = ArrayMeta::new(vec![rows * blocks, 1024], vec![rows, 1024], DType::Float64);
    let arr = Arc::new(StoredArray::new("bench/blocks", meta.clone())?);
    let n = (rows * 1024) as usize;
    let payloads: Vec<Arc<Block>> = (0..blocks)
        .map(|i| {
            let a = ArrayD::from_shape_vec(IxDyn(&[rows as usize, 1024]), data(n, i + 1))
                .expect("shape");
            Arc::new(Block::F64(a))
        })
        .collect();
    let raw: Vec<Bytes> = payloads
        .iter()
        .map(|b| match b.as_ref() {
            Block::F64(a) => {
                Bytes::from(a.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())
            }
            _ => unreachable!("float64 blocks"),
        })
        .collect();
    let total = (n * 8) as f64 * blocks as f64;
    let mbps = |secs: f64| total / secs / 1e6;
    println!(
        "store {spec}: {blocks} blocks of {mib} MiB float64 ({:.0} MB), {CONCURRENCY} requests in flight",
        total / 1e6
    );

    // Raw objects: PUT and GET the uncompressed bytes.
    let t = Instant::now();
    futures::stream::iter(raw.iter().enumerate())
        .map(|(i, b)| {
            let s = store.clone();
            async move { s.put(&format!("bench/raw/{i}"), b.clone()).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    let raw_put = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let got: Vec<Bytes> = futures::stream::iter(0..blocks)
        .map(|i| {
            let s = store.clone();
            async move { s.get(&format!("bench/raw/{i}")).await }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect()
        .await?;
    let raw_get = t.elapsed().as_secs_f64();
    anyhow::ensure!(
        got.iter().map(|b| b.len()).sum::<usize>() as f64 == total,
        "raw read size"
    );

    // nums-cloud blocks: encode (bytes + zstd) and PUT; GET and decode, as a function does.
    let t = Instant::now();
    futures::stream::iter(0..blocks)
        .map(|i| {
            let (s, a, b) = (store.clone(), arr.clone(), payloads[i as usize].clone());
            async move {
                let a2 = a.clone();
                let bytes = tokio::task::spawn_blocking(move || a2.encode(&[i, 0], &b)).await??;
                s.put(&a.block_key(&[i, 0]), bytes).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<()>>()
        .await?;
    let blk_put = t.elapsed().as_secs_f64();
    let stored: u64 = futures::stream::iter(0..blocks)
        .map(|i| {
            let (s, a) = (store.clone(), arr.clone());
            async move { s.get(&a.block_key(&[i, 0])).await.map(|b| b.len() as u64) }
        })
        .buffer_unordered(CONCURRENCY)
        .try_collect::<Vec<u64>>()
        .await?
        .iter()
        .sum();
    let t = Instant::now();
    let decoded: Vec<Block> = futures::stream::iter(0..blocks)
        .map(|i| {
            let (s, a) = (store.clone(), arr.clone());
            async move {
                let bytes = s.get(&a.block_key(&[i, 0])).await?;
                let a2 = a.clone();
                let b =
                    tokio::task::spawn_blocking(move || a2.decode(&[i, 0], Some(bytes))).await??;
                anyhow::Ok(b)
            }
        })
        .buffered(CONCURRENCY)
        .try_collect()
        .await?;
    let blk_get = t.elapsed().as_secs_f64();
    for (i, b) in decoded.iter().enumerate() {
        anyhow::ensure!(b == payloads[i].as_ref(), "block {i} read back differs");
    }
    store.delete_prefix("bench").await?;
    let _ = std::fs::remove_dir_all(&tmp);

    println!("{:<28}{:>12}{:>12}", "", "write MB/s", "read MB/s");
    println!(
        "{:<28}{:>12.0}{:>12.0}",
        "raw objects (object_store)",
        mbps(raw_put),
        mbps(raw_get)
    );
    println!(
        "{:<28}{:>12.0}{:>12.0}",
        "nums-cloud blocks (zstd)",
        mbps(blk_put),
        mbps(blk_get)
    );
    println!(
        "{:<28}{:>12.2}{:>12.2}",
        "ratio blocks / raw",
        raw_put / blk_put,
        raw_get / blk_get
    );
    println!(
        "compression: {:.0} MB stored for {:.0} MB of data (ratio {:.2})",
        stored as f64 / 1e6,
        total / 1e6,
        total / stored as f64
    );
    Ok(())
}
