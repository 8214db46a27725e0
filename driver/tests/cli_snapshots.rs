//! Snapshots of what the CLI prints (`check`, `check --json`, `plan`, `plan --json`, `run`,
//! and `check`'s errors) on the fixed jobs in `tests/snapshots-jobs/`, run by the built
//! binary in a temporary folder. Paths and measured figures (times, memory, cost) are
//! replaced by placeholders; everything else, the plan's projections included, must match
//! `tests/snapshots/` exactly. After an intended change of output:
//! `INSTA_UPDATE=always cargo test -p nums-cloud --test cli_snapshots`, then review the diff.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh folder holding a copy of `job` as `job.toml`; removed on drop.
struct Workdir(PathBuf);

impl Workdir {
    fn new(job: &str, test: &str) -> Workdir {
        let dir =
            std::env::temp_dir().join(format!("nums-cloud-snap-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/snapshots-jobs")
            .join(job);
        std::fs::copy(&src, dir.join("job.toml")).unwrap();
        Workdir(dir)
    }

    /// Runs `nums-cloud ARGS job.toml` here: (exit code, standard output, standard error).
    fn nums(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_nums-cloud"))
            .args(args)
            .arg("job.toml")
            .current_dir(&self.0)
            .env_remove("RUST_LOG")
            .env("NO_COLOR", "1")
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8(out.stdout).unwrap(),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    /// insta settings that make this folder's paths and a run's measured figures stable.
    fn settings(&self) -> insta::Settings {
        let mut s = insta::Settings::clone_current();
        s.set_snapshot_path("snapshots");
        s.set_prepend_module_to_snapshot(false);
        s.add_filter(&regex_escape(&self.0.display().to_string()), "[DIR]");
        s
    }
}

impl Drop for Workdir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn regex_escape(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '/' || c == '_' || c == '-' {
                c.to_string()
            } else {
                format!("\\{c}")
            }
        })
        .collect()
}

/// `nums-cloud CMD` and `CMD --json` on the small job, snapshotted as `CMD` and `CMD_json`.
fn text_and_json(cmd: &str) {
    let w = Workdir::new("small.toml", cmd);
    let (code, text, err) = w.nums(&[cmd]);
    assert_eq!(code, 0, "{err}");
    let (code, json, err) = w.nums(&[cmd, "--json"]);
    assert_eq!(code, 0, "{err}");
    w.settings().bind(|| {
        insta::assert_snapshot!(cmd, text);
        insta::assert_snapshot!(format!("{cmd}_json"), json);
    });
}

#[test]
fn check_text_and_json() {
    text_and_json("check");
}

#[test]
fn plan_text_and_json() {
    text_and_json("plan");
}

#[test]
fn check_errors() {
    for (job, name) in [
        ("bad_outputs.toml", "check_error_outputs"),
        ("bad_expr.toml", "check_error_expr"),
    ] {
        let w = Workdir::new(job, name);
        let (code, out, err) = w.nums(&["check"]);
        assert_ne!(code, 0, "{out}");
        w.settings().bind(|| insta::assert_snapshot!(name, err));
    }
}

#[test]
fn run_summary() {
    let w = Workdir::new("small.toml", "run");
    let (code, out, err) = w.nums(&["-q", "run"]);
    assert_eq!(code, 0, "{err}");
    let mut s = w.settings();
    // What a run measures varies from run to run: wall and function times, peak memory
    // and what follows from them (GB-seconds, cost).
    for (re, to) in [
        (r"finished in [0-9.]+ s", "finished in [T] s"),
        (
            r"[0-9.]+ s in functions \([0-9.]+ s compute, [0-9.]+ s store I/O\)",
            "[T] s in functions ([T] s compute, [T] s store I/O)",
        ),
        (
            r"peak [0-9.]+ [KMG]?i?B of the (\S+ \S+) limit per invocation \([0-9.]+%\)",
            "peak [MEM] of the $1 limit per invocation ([P]%)",
        ),
        (r"[0-9.]+ GB-s, \$[0-9.]+", "[GBS] GB-s, $[USD]"),
    ] {
        s.add_filter(re, to);
    }
    s.bind(|| insta::assert_snapshot!("run", out));
    // The outputs are where the summary says.
    assert!(w.0.join("out/y.npy").is_file() && w.0.join("out/G.zarr/zarr.json").is_file());
}

/// A job of several stages runs in a debug build, whose plans are checked against the
/// invariants at every stage: a merge whose runs were blocks read in place once read a
/// block nothing made (tests/test_sorting.py's quantile job failed with MissingBlock).
#[test]
fn a_staged_median_of_nan_columns_keeps_every_plan_valid() {
    let w = Workdir::new("staged_median.toml", "staged");
    let (code, _, err) = w.nums(&["-q", "run"]);
    assert_eq!(code, 0, "{err}");
    // The three medians (the .npy's last 24 bytes): NaN, as NumPy's of NaN columns.
    let npy = std::fs::read(w.0.join("out/m.npy")).unwrap();
    let values: Vec<f64> = npy[npy.len() - 24..]
        .chunks(8)
        .map(|b| f64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert!(
        values.len() == 3 && values.iter().all(|v| v.is_nan()),
        "{values:?}"
    );
}
