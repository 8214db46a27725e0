//! LSHS against naive on the same machine, store and data: (a) one Newton step of logistic
//! regression, (b) X.T @ X, (c) a chain of elementwise ops ending in a sum. For each it
//! runs `nums-cloud run --stats` under both schedulers and prints store bytes moved, peak
//! intermediate bytes held in the store, invocations, GB-seconds and wall time, with ratios.
//!
//!     bash scripts/bench.sh lshs [--gb 4] [--block-mb 64] [--workers 2] [--memory-mb 2048] [--generate]
//!
//! By default X is written to the store once by a setup job and every run reads it in
//! place; with --generate each run makes X itself (seeded, so the same data).
//! (scripts/bench.sh starts Garage on 127.0.0.1 and passes --url and --endpoint.)

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, bail};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn num(name: &str, default: f64) -> anyhow::Result<f64> {
    Ok(arg(name).map(|s| s.parse()).transpose()?.unwrap_or(default))
}

const D: u64 = 128;

fn job(name: &str, scheduler: &str, storage: &str, compute: &str, x: &str, body: &str) -> String {
    format!(
        "name = \"{name}-{scheduler}\"\n{storage}\n[compute]\n{compute}scheduler = \"{scheduler}\"\n\
         [arrays]\nX = {x}\n{body}"
    )
}

fn main() -> anyhow::Result<()> {
    let gb = num("--gb", 4.0)?;
    let block_mb = num("--block-mb", 64.0)?;
    let workers = num("--workers", 2.0)? as u64;
    let memory_mb = num("--memory-mb", 2048.0)? as u64;
    let rows = (gb * 1e9 / (8 * D) as f64).ceil() as u64;
    let block_rows = (block_mb * (1 << 20) as f64 / (8 * D) as f64) as u64;
    let generate = std::env::args().any(|a| a == "--generate");
    let url = arg("--url");
    let storage = match (url.clone(), arg("--endpoint")) {
        (Some(u), Some(e)) => format!("[storage]\nurl = \"{u}\"\nendpoint = \"{e}\""),
        (Some(u), None) => format!("[storage]\nurl = \"{u}\""),
        _ => String::new(),
    };
    let compute = format!("workers = {workers}\nmemory_mb = {memory_mb}\n");
    let exe = std::env::current_exe()?;
    let bin: PathBuf = exe.parent().context("exe dir")?.join("nums-cloud");
    if !bin.exists() {
        bail!(
            "{} not found: cargo build --release -p nums-cloud",
            bin.display()
        );
    }
    let dir = std::env::temp_dir().join(format!("nums-bench-lshs-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let make_x = format!(
        "{{ random = \"normal\", shape = [{rows}, {D}], seed = 1, block = [{block_rows}, {D}] }}"
    );
    let x = if generate {
        make_x
    } else {
        // Setup: a job whose output X is kept in the store; the runs read it in place.
        let root = url
            .clone()
            .unwrap_or_else(|| format!("file://{}/store", dir.display()));
        let at = format!("{}/bench-data/X", root.trim_end_matches('/'));
        let setup = format!(
            "name = \"bench-data\"\n{}\n[compute]\n{compute}[arrays]\nX = {make_x}\n[outputs]\nX = \"{at}\"\n",
            if storage.is_empty() {
                format!("[storage]\nurl = \"{root}\"")
            } else {
                storage.clone()
            }
        );
        let path = dir.join("setup.toml");
        std::fs::write(&path, setup)?;
        let out = Command::new(&bin)
            .arg("run")
            .arg(&path)
            .arg("--quiet")
            .output()?;
        if !out.status.success() {
            bail!("setup failed:\n{}", String::from_utf8_lossy(&out.stderr));
        }
        format!("{{ load = \"{at}\" }}")
    };
    let storage = if storage.is_empty() && !generate {
        format!("[storage]\nurl = \"file://{}/store\"", dir.display())
    } else {
        storage
    };
    let workloads = [
        (
            "logreg",
            "(a) logistic regression, one Newton step",
            "U = { random = \"uniform\", shape = [ROWS], seed = 2, block = [BR] }\n\
             y = \"U > 0.5\"\nb = { zeros = [128] }\nmu = \"sigmoid(X @ b)\"\n\
             g = \"X.T @ (mu - y)\"\nH = \"X.T @ (X * (mu * (1 - mu))[:, None])\"\n\
             [outputs]\ng = \"g.npy\"\nH = \"H.npy\"\n",
        ),
        (
            "gram",
            "(b) X.T @ X",
            "G = \"X.T @ X\"\n[outputs]\nG = \"G.npy\"\n",
        ),
        (
            "chain",
            "(c) elementwise chain ending in a sum",
            "s = \"sum(exp(X * 0.5) + sqrt(abs(X)) * 2 - X / 3, axis=0)\"\n[outputs]\ns = \"s.npy\"\n",
        ),
    ];
    println!(
        "X: {rows} x {D} float64 ({:.2} GB) in blocks of {block_rows} rows ({:.0} MiB), {}; {workers} workers, memory_mb = {memory_mb}",
        (rows * D * 8) as f64 / 1e9,
        (block_rows * D * 8) as f64 / (1 << 20) as f64,
        if generate {
            "generated in each run"
        } else {
            "stored once, read in place by each run"
        }
    );
    let header = format!(
        "{:<44}{:>12}{:>12}{:>8}{:>10}{:>10}{:>10}",
        "", "store GB", "interm. GB", "invoc.", "GB-s", "wall s", "peak MiB"
    );
    let mut results = Vec::new();
    for (name, title, body) in workloads {
        let body = body
            .replace("ROWS", &rows.to_string())
            .replace("BR", &block_rows.to_string());
        println!("\n{title}\n{header}");
        let mut row = Vec::new();
        for sched in ["lshs", "naive"] {
            let d = dir.join(format!("{name}-{sched}"));
            std::fs::create_dir_all(&d)?;
            let path = d.join("job.toml");
            std::fs::write(&path, job(name, sched, &storage, &compute, &x, &body))?;
            let stats = d.join("stats.json");
            let out = Command::new(&bin)
                .arg("run")
                .arg(&path)
                .arg("--quiet")
                .arg("--stats")
                .arg(&stats)
                .output()?;
            if !out.status.success() {
                bail!(
                    "{name} {sched} failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let s: serde_json::Value = serde_json::from_slice(&std::fs::read(&stats)?)?;
            let f = |k: &str| s[k].as_f64().unwrap_or(f64::NAN);
            let moved = f("s3_bytes_read") + f("s3_bytes_written");
            let r = [
                moved / 1e9,
                f("peak_intermediate_bytes") / 1e9,
                f("invocations"),
                f("gb_seconds"),
                f("wall_seconds"),
                f("peak_memory_bytes") / (1 << 20) as f64,
            ];
            println!(
                "{:<44}{:>12.2}{:>12.2}{:>8.0}{:>10.1}{:>10.1}{:>10.0}",
                sched, r[0], r[1], r[2], r[3], r[4], r[5]
            );
            row.push(r);
        }
        let ratio = |i: usize| {
            if row[0][i] > 0.0 {
                row[1][i] / row[0][i]
            } else {
                f64::INFINITY
            }
        };
        println!(
            "{:<44}{:>11.1}x{:>11.1}x{:>7.1}x{:>9.1}x{:>9.1}x",
            "naive / lshs",
            ratio(0),
            ratio(1),
            ratio(2),
            ratio(3),
            ratio(4)
        );
        results.push((name, row));
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
