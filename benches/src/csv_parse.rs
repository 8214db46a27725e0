//! The CSV import kernel on one core: a task's byte range parsed into its block
//! (`nums_function::import::parse_csv`), against the floor of finding its line ends
//! (memchr) and of parsing its fields with `str::parse::<f64>` alone, in MB/s of text.
//!
//!     cargo run --release -p nums-benches --bin csv_parse [FILE.csv] [MiB]
//!
//! Without a file, 64 MiB of `np.savetxt`'s default format (`%.18e`, 21 columns).

use std::time::Instant;

use nums_function::import::{CsvAt, parse_csv};

fn text(mib: usize) -> Vec<u8> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut out = Vec::with_capacity(mib << 20);
    while out.len() < mib << 20 {
        for c in 0..21 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let x = (s >> 11) as f64 / (1u64 << 53) as f64 * 4.0 - 2.0;
            let f = format!("{x:.18e}");
            out.extend_from_slice(f.as_bytes());
            out.push(if c == 20 { b'\n' } else { b',' });
        }
    }
    out
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mib: usize = args.get(2).map_or(Ok(64), |s| s.parse())?;
    let mut bytes = match args.get(1) {
        Some(p) => std::fs::read(p)?,
        None => text(mib),
    };
    // Whole lines only.
    bytes.truncate((mib << 20).min(bytes.len()));
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    bytes.truncate(end);
    let rows = memchr::memchr_iter(b'\n', &bytes).count();
    let first = &bytes[..memchr::memchr(b'\n', &bytes).unwrap_or(0)];
    let columns = first.split(|&b| b == b',').count() as u64;
    let keep: Vec<u64> = (0..columns).collect();
    let mb = bytes.len() as f64 / 1e6;
    println!("{mb:.0} MB, {rows} rows x {columns} columns");
    for _ in 0..2 {
        let t = Instant::now();
        let n = memchr::memchr_iter(b'\n', &bytes).count();
        let lines = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut sum = 0.0;
        for line in bytes.split(|&b| b == b'\n') {
            for f in line.split(|&b| b == b',') {
                sum += std::str::from_utf8(f)
                    .ok()
                    .and_then(|s| s.parse::<f64>().ok())
                    .unwrap_or(0.0);
            }
        }
        let floats = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let at = CsvAt { line: 1, skip: 0 };
        let v = parse_csv::<f64>(&bytes, "x.csv", at, rows, columns, &keep, b',')
            .map_err(anyhow::Error::msg)?;
        let parse = t.elapsed().as_secs_f64();
        assert_eq!(v.len(), rows * columns as usize);
        println!(
            "line ends {:.0} MB/s ({n}); split + str::parse {:.0} MB/s ({sum:.3}); parse_csv {:.0} MB/s",
            mb / lines,
            mb / floats,
            mb / parse
        );
    }
    Ok(())
}
