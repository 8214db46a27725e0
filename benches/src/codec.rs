//! zstd levels for blocks, side by side on one core: level 1 (the codec's level) against
//! negative ("fast") levels, which store literals raw instead of Huffman-coding them.
//! Random float64 barely compresses at any level (its mantissas are noise) but level 1
//! spends most of its decode time on the literals; the question is what the fast levels
//! give up on data that does compress. Every frame is standard zstd with a checksum, so
//! any Zarr reader decodes it whatever the level.
//!
//!     cargo run --release -p nums-benches --bin codec

use std::time::Instant;

fn normal(n: usize, seed: u64) -> Vec<f64> {
    // splitmix64 + Box-Muller: noise like `random = "normal"`.
    let mut s = seed;
    let mut next = || {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (u, v) = (next().max(1e-300), next());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        })
        .collect()
}

fn bytes_of(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn main() -> anyhow::Result<()> {
    let n = 8 << 20; // 64 MiB of float64
    let noise = normal(n, 1);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("normal float64", bytes_of(&noise)),
        (
            "normal rounded to 3 decimals",
            bytes_of(
                &noise
                    .iter()
                    .map(|x| (x * 1e3).round() / 1e3)
                    .collect::<Vec<_>>(),
            ),
        ),
        (
            "small integers as float64",
            bytes_of(&noise.iter().map(|x| (x * 10.0).round()).collect::<Vec<_>>()),
        ),
        (
            "arange * 0.5",
            bytes_of(&(0..n).map(|i| i as f64 * 0.5).collect::<Vec<_>>()),
        ),
        ("zeros", vec![0u8; n * 8]),
        (
            "int64 labels 0/1",
            (0..n)
                .flat_map(|i| ((noise[i] > 0.0) as i64).to_le_bytes())
                .collect(),
        ),
    ];
    println!(
        "{:<30} {:>6} {:>8} {:>10} {:>10}",
        "data (64 MiB)", "level", "ratio", "enc MB/s", "dec MB/s"
    );
    for (name, raw) in &cases {
        for level in [1, -1, -3, -7] {
            let mut c = zstd::bulk::Compressor::new(level)?;
            c.include_checksum(true)?;
            let t = Instant::now();
            let enc = c.compress(raw)?;
            let te = t.elapsed().as_secs_f64();
            let mut out = vec![0u8; raw.len()];
            let mut d = zstd::bulk::Decompressor::new()?;
            let t = Instant::now();
            for _ in 0..3 {
                d.decompress_to_buffer(&enc, &mut out)?;
            }
            let td = t.elapsed().as_secs_f64() / 3.0;
            assert!(out == *raw);
            let mb = raw.len() as f64 / 1e6;
            println!(
                "{:<30} {:>6} {:>8.3} {:>10.0} {:>10.0}",
                name,
                level,
                raw.len() as f64 / enc.len() as f64,
                mb / te,
                mb / td
            );
        }
    }
    Ok(())
}
