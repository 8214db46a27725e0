//! Where a function's time goes when it reads blocks from a local file store: the same
//! stored chunks (64 MiB of random float64, as nums-cloud writes them) read from the page
//! cache step by step and whole, one thread, side by side in one run: through
//! object_store (as before) and as mapped files (`Store::get` now), and zstd decoding into
//! a new buffer (what a function does) against a reused one (the cost of first touching a
//! new buffer's pages).
//!
//!     cargo run --release -p nums-benches --bin read_path [-- --blocks 8 --mib 64 --reps 5]

use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use ndarray::{ArrayD, IxDyn};
use nums_layout::{ArrayMeta, Block, DType, Store, StoreSpec, StoredArray};
use object_store::ObjectStoreExt;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn noise(n: usize, seed: u64) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        })
        .collect()
}

const STEPS: [&str; 6] = [
    "read_block: object_store get + decode (before)",
    "read_block: Store::get + decode (now)",
    "object_store get (local, before)",
    "Store::get (a mapped file: read by the decode)",
    "zstd decode into a new buffer (as a function)",
    "zstd decode into a reused buffer",
];

fn main() -> anyhow::Result<()> {
    let reps: usize = arg("--reps").map(|s| s.parse()).transpose()?.unwrap_or(5);
    let blocks: u64 = arg("--blocks").map(|s| s.parse()).transpose()?.unwrap_or(8);
    let mib: u64 = arg("--mib").map(|s| s.parse()).transpose()?.unwrap_or(64);
    let secs = tokio::runtime::Runtime::new()?.block_on(steps(blocks, mib, reps))?;
    let total = ((blocks * mib) << 20) as f64;
    println!(
        "{blocks} chunks of {mib} MiB random float64 (zstd as nums-cloud writes them) read from \
         the page cache of a file:// store, one thread; best of {reps}"
    );
    println!("{:<48}{:>10}{:>10}", "step", "GB/s", "x first");
    for (step, s) in STEPS.iter().zip(&secs) {
        println!("{step:<48}{:>10.2}{:>9.2}x", total / s / 1e9, secs[0] / s);
    }
    Ok(())
}

/// Each step's best seconds over all chunks, in the order of [`STEPS`].
async fn steps(blocks: u64, mib: u64, reps: usize) -> anyhow::Result<Vec<f64>> {
    let tmp = std::env::temp_dir().join(format!("nums-read-path-{}", std::process::id()));
    std::fs::create_dir_all(&tmp)?;
    let spec = StoreSpec {
        url: url::Url::from_directory_path(&tmp)
            .expect("abs")
            .to_string(),
        endpoint: None,
    };
    let store = Store::open(&spec).context("open store")?;
    let fs = object_store::local::LocalFileSystem::new_with_prefix(&tmp)?;
    let rows = mib * (1 << 20) / 8 / 1024;
    let meta = ArrayMeta::new(vec![rows * blocks, 1024], vec![rows, 1024], DType::Float64);
    let arr = Arc::new(StoredArray::new("bench/blocks", meta)?);
    let n = (rows * 1024) as usize;
    let keys: Vec<String> = (0..blocks).map(|i| arr.block_key(&[i, 0])).collect();
    for i in 0..blocks {
        let a = ArrayD::from_shape_vec(IxDyn(&[rows as usize, 1024]), noise(n, i + 1))?;
        arr.write_block(&store, &[i, 0], &Block::F64(a)).await?;
    }
    let old_get = |k: &str| {
        let (fs, path) = (&fs, object_store::path::Path::from(k));
        async move { anyhow::Ok(fs.get(&path).await?.bytes().await?) }
    };
    let encoded: Vec<bytes::Bytes> =
        futures::future::try_join_all(keys.iter().map(|k| old_get(k))).await?;
    let mut reused = vec![0f64; n];
    let mut secs = Vec::new();
    // Each step over all chunks, `reps` times (the first also warms the page cache); the
    // best time counts, as the machine is shared.
    macro_rules! step {
        ($body:block) => {{
            let mut best = f64::MAX;
            for _ in 0..reps {
                let t = Instant::now();
                $body
                best = best.min(t.elapsed().as_secs_f64());
            }
            secs.push(best);
        }};
    }
    step!({
        for (i, k) in keys.iter().enumerate() {
            let b = old_get(k).await?;
            std::hint::black_box(arr.decode(&[i as u64, 0], Some(b))?);
        }
    });
    step!({
        for i in 0..blocks {
            std::hint::black_box(arr.read_block(&store, &[i, 0]).await?);
        }
    });
    step!({
        for k in &keys {
            std::hint::black_box(old_get(k).await?);
        }
    });
    step!({
        for k in &keys {
            std::hint::black_box(store.get(k).await?);
        }
    });
    step!({
        for (i, b) in encoded.iter().enumerate() {
            std::hint::black_box(arr.decode(&[i as u64, 0], Some(b.clone()))?);
        }
    });
    step!({
        for b in &encoded {
            // SAFETY: any bytes are valid f64 values; u8 has alignment 1.
            let out =
                unsafe { std::slice::from_raw_parts_mut(reused.as_mut_ptr().cast::<u8>(), n * 8) };
            zstd::bulk::decompress_to_buffer(b, out)?;
        }
    });
    std::fs::remove_dir_all(&tmp)?;
    Ok(secs)
}
