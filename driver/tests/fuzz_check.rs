//! The check path (job file → graph → plan, what `nums-cloud check`, `plan` and `run` do
//! before anything runs) never panics, aborts, overflows its stack, hangs or eats memory,
//! whatever the job file says: a property run over thousands of job files generated from
//! a small grammar and mutated from a seed corpus (driver/tests/fuzz/, written by
//! scripts/fuzz_corpus.py), deterministic for a seed. The known crashes of issue 15 are
//! checked one by one, with the error each must give.
//!
//! Knobs (environment): `NUMS_FUZZ_CASES` (default 3000), `NUMS_FUZZ_SEED` (default 1),
//! `NUMS_FUZZ_SECONDS` (run until then instead of a case count), `NUMS_FUZZ_CASE_LIMIT_MS`
//! (per case; default 2000). `scripts/fuzz.sh` runs it longer. The case being checked is
//! written to `fuzz-current-case.toml` under cargo's test temp folder first, so that even an
//! abort (which no test can catch) leaves it behind.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nums_cloud::graph::{self, Built};
use nums_cloud::job::{Job, SchedulerKind};
use nums_cloud::plan::{dry_run_prefix, plan_with};

/// Counts the bytes allocated, so that each case's peak is measured, and refuses to go past
/// [`HARD_CAP`] (an allocation failure aborts with the case on disk, instead of taking the
/// machine's memory).
struct Counting;

static CURRENT: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
const HARD_CAP: usize = 3 << 30;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if !reserve(l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc(l) };
        if p.is_null() {
            CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        if !reserve(l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as is.
        let p = unsafe { System.alloc_zeroed(l) };
        if p.is_null() {
            CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        CURRENT.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded as is.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() && !reserve(new - l.size()) {
            return std::ptr::null_mut();
        }
        // SAFETY: forwarded as is.
        let q = unsafe { System.realloc(p, l, new) };
        if q.is_null() {
            if new > l.size() {
                CURRENT.fetch_sub(new - l.size(), Ordering::Relaxed);
            }
        } else if new < l.size() {
            CURRENT.fetch_sub(l.size() - new, Ordering::Relaxed);
        }
        q
    }
}

fn reserve(n: usize) -> bool {
    let now = CURRENT.fetch_add(n, Ordering::Relaxed) + n;
    if now > HARD_CAP {
        CURRENT.fetch_sub(n, Ordering::Relaxed);
        return false;
    }
    PEAK.fetch_max(now, Ordering::Relaxed);
    true
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// What one case may take (memory above what was in use when it started).
const CASE_MEMORY: usize = 512 << 20;

/// The stack the check path runs on here: Rust's default for a spawned thread (tokio's
/// workers have the same; `nums-cloud` itself checks on its 8 MiB main thread).
const STACK: usize = 2 << 20;

fn env_num(key: &str, default: u64) -> u64 {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The folder cases live in (their job file's folder), with the inputs the corpus loads.
fn case_dir(tag: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fuzz-{tag}"));
    std::fs::create_dir_all(&d).unwrap();
    // in.npy: float64, shape (6, 4), C order.
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let mut header = "{'descr': '<f8', 'fortran_order': False, 'shape': (6, 4), }".to_string();
    while !(10 + header.len() + 1).is_multiple_of(64) {
        header.push(' ');
    }
    header.push('\n');
    npy.extend((header.len() as u16).to_le_bytes());
    npy.extend(header.as_bytes());
    for i in 0..24 {
        npy.extend((i as f64 * 0.5).to_le_bytes());
    }
    std::fs::write(d.join("in.npy"), npy).unwrap();
    std::fs::write(d.join("in.csv"), "# a comment\n1,2\n3,4\n5,6.5\n").unwrap();
    d
}

/// Graphs planned here have at most this many blocks. The planner is quadratic today
/// (measured, debug build: 5,000 blocks take 7 s of CPU, 10,000 take 32 s) and is being
/// made O(n log n) by its owner, to plan the 1,000,000 blocks the graph's limits allow;
/// raise this then. Graphs of any size are still built (and their limits checked).
const PLAN_BLOCKS: u64 = 3_000;

/// Panics known to be in code other work owns (issue 15, item 6), by file and message:
/// listed in the output and counted, not failed on. Delete an entry once its fix lands.
const OWNED_ELSEWHERE: &[(&str, &str)] = &[
    // reshape(): the product of the sizes asked for (`reshape(3000000, 9007199254740993)`).
    ("graph/funcs.rs", "attempt to multiply with overflow"),
    // dot() of a 3-D array and a 1-D or 0-d one (`dot(T, v)`), and of a 0-d and a 3-D one.
    ("graph/funcs.rs", "attempt to subtract with overflow"),
    ("graph/funcs.rs", "ndim > 0"),
    // concatenate() and stack() with `axis=()` or `axis=[]`.
    ("graph/funcs.rs", "index out of bounds"),
];

/// The check path, as `check` and `plan` take it, minus the stores' round trips: Ok, or
/// the error it reports. Inputs (`load`) are probed for real: cases only name files of
/// their own folder (cases naming S3 are skipped by the caller).
fn check(rt: &tokio::runtime::Runtime, dir: &Path, text: &str) -> Result<(), String> {
    let job = Job::parse(&dir.join("job.toml"), text).map_err(|e| e.to_string())?;
    let probes = rt
        .block_on(graph::probe(&job))
        .map_err(|e| format!("probe: {e}"))?;
    let built =
        graph::build_staged(&job, &probes, &HashMap::new()).map_err(|e| format!("graph: {e}"))?;
    let g = match built {
        Built::Done(g) => g,
        Built::NeedMask { graph, mask } => {
            // `run` computes the mask and builds again with its selection: do that with
            // every other position selected.
            let len = graph.nodes[mask].meta.len();
            let picked: Vec<u64> = (0..len).step_by(2).collect();
            let masks = HashMap::from([(mask, picked)]);
            graph::build_staged(&job, &probes, &masks).map_err(|e| format!("graph: {e}"))?;
            graph
        }
        Built::NeedValues { graph, .. } => graph,
    };
    if g.nodes.iter().map(|n| n.meta.num_blocks()).sum::<u64>() > PLAN_BLOCKS {
        return Ok(());
    }
    let prefix = dry_run_prefix(&job);
    for kind in [SchedulerKind::Lshs, SchedulerKind::Naive] {
        plan_with(&job, &g, kind, &prefix, &probes).map_err(|e| format!("plan: {e:#}"))?;
    }
    Ok(())
}

/// CPU time of the calling thread: what a case costs, whatever else the machine runs.
fn thread_cpu() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid pointer to a timespec; this clock exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// The outcome of one case in the worker.
enum Outcome {
    Done(Result<(), String>, Duration, usize),
    /// The message and where (file:line).
    Panicked(String, String),
}

static WHERE: std::sync::Mutex<String> = std::sync::Mutex::new(String::new());

/// Why a case failed the property.
#[derive(Debug)]
enum Failure {
    Panic { message: String, at: String },
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Panic { message, at } => write!(f, "panicked at {at}: {message}"),
            Failure::Other(m) => f.write_str(m),
        }
    }
}

/// Runs cases one at a time on a thread with a [`STACK`]-sized stack, each under
/// `catch_unwind`, measuring its CPU time and peak memory; a case over its CPU limit fails
/// the test with its text, and so does one that gives no answer within 30 times that in
/// wall time (a hang: the worker is left behind).
struct Worker {
    send: mpsc::Sender<String>,
    recv: mpsc::Receiver<Outcome>,
    limit: Duration,
    current: PathBuf,
    /// `current`, open: rewritten in place before each case (cheaper than a new file).
    file: std::fs::File,
}

impl Worker {
    fn new(dir: PathBuf) -> Worker {
        // Where the worker panicked, for the report (other threads panic as usual).
        static HOOK: std::sync::Once = std::sync::Once::new();
        HOOK.call_once(|| {
            let default = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                if std::thread::current().name() == Some("fuzz-worker") {
                    let mut at = info
                        .location()
                        .map(|l| format!("{}:{}", l.file(), l.line()))
                        .unwrap_or_default();
                    if at.starts_with("/rustc/") {
                        // In the standard library: the first frame of the workspace's.
                        let bt = std::backtrace::Backtrace::force_capture().to_string();
                        if let Some(l) = bt.lines().map(str::trim).find(|l| {
                            l.starts_with("at ")
                                && !l.contains("/rustc/")
                                && !l.contains("/.cargo/")
                                && !l.contains("fuzz_check.rs")
                        }) {
                            at = format!("{} (in {at})", &l[3..]);
                        }
                    }
                    *WHERE.lock().unwrap_or_else(|e| e.into_inner()) = at;
                } else {
                    default(info);
                }
            }));
        });
        let (send, cases) = mpsc::channel::<String>();
        let (done, recv) = mpsc::channel();
        std::thread::Builder::new()
            .name("fuzz-worker".into())
            .stack_size(STACK)
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                for text in cases {
                    let base = CURRENT.load(Ordering::Relaxed);
                    PEAK.store(base, Ordering::Relaxed);
                    let t = thread_cpu();
                    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        check(&rt, &dir, &text)
                    }));
                    let elapsed = thread_cpu().saturating_sub(t);
                    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
                    let out = match r {
                        Ok(r) => Outcome::Done(r, elapsed, peak),
                        Err(p) => Outcome::Panicked(
                            p.downcast_ref::<String>()
                                .cloned()
                                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                                .unwrap_or_default(),
                            WHERE.lock().unwrap_or_else(|e| e.into_inner()).clone(),
                        ),
                    };
                    if done.send(out).is_err() {
                        return;
                    }
                }
            })
            .unwrap();
        let current = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz-current-case.toml");
        Worker {
            send,
            recv,
            limit: Duration::from_millis(env_num("NUMS_FUZZ_CASE_LIMIT_MS", 2000)),
            file: std::fs::File::create(&current).unwrap(),
            current,
        }
    }

    /// Checks one case: the error it gave (None if it passed the check) and its CPU time,
    /// or why it failed the property.
    fn run(&self, text: &str) -> Result<(Option<String>, Duration), Failure> {
        // One case at a time in the whole process, so that peaks are each case's own.
        static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
        std::os::unix::fs::FileExt::write_all_at(&self.file, text.as_bytes(), 0).unwrap();
        self.file.set_len(text.len() as u64).unwrap();
        self.send.send(text.to_string()).unwrap();
        // A hang is judged in wall time, generously (a loaded machine); slowness in CPU time.
        match self.recv.recv_timeout(self.limit * 30) {
            Err(_) => Err(Failure::Other(format!(
                "no answer after {:?}",
                self.limit * 30
            ))),
            Ok(Outcome::Panicked(message, at)) => Err(Failure::Panic { message, at }),
            Ok(Outcome::Done(_, t, _)) if t > self.limit => Err(Failure::Other(format!(
                "took {t:?} of CPU, over {:?}",
                self.limit
            ))),
            Ok(Outcome::Done(_, _, peak)) if peak > CASE_MEMORY => Err(Failure::Other(format!(
                "allocated {} MiB at its peak, over {} MiB",
                peak >> 20,
                CASE_MEMORY >> 20
            ))),
            Ok(Outcome::Done(r, t, _)) => Ok((r.err(), t)),
        }
    }
}

fn show(text: &str) -> String {
    if text.len() <= 3000 {
        return text.to_string();
    }
    let mut a = 1500;
    while !text.is_char_boundary(a) {
        a -= 1;
    }
    let mut b = text.len() - 1000;
    while !text.is_char_boundary(b) {
        b += 1;
    }
    format!(
        "{} [... {} bytes ...] {}",
        &text[..a],
        text.len() - a - (text.len() - b),
        &text[b..]
    )
}

// ---- the known crashes, one by one ----

/// Each reproducer from issue 15, item 6 (and the limits the brief asks for), with words
/// its error must contain.
fn known_cases() -> Vec<(&'static str, String, Vec<&'static str>)> {
    let head = "name = \"k\"\n[arrays]\nX = { random = \"normal\", shape = [7, 5], seed = 1 }\n";
    let chain = |n: usize| {
        let mut t = String::from("[arrays]\na0 = { zeros = [3] }\n");
        for i in 1..n {
            t += &format!("a{i} = \"a{} + 1\"\n", i - 1);
        }
        t + &format!("[outputs]\na{} = \"o.npy\"\n", n - 1)
    };
    vec![
        (
            "call left open",
            format!("{head}y = \"sum(\"\n"),
            vec!["job.toml:4: arrays.y:", "expected ')'"],
        ),
        (
            "call left open after an argument",
            format!("{head}y = \"X.sum(axis=0\"\n"),
            vec!["arrays.y:", "expected ')'"],
        ),
        (
            "6000 parentheses",
            format!("{head}y = \"{}X{}\"\n", "(".repeat(6000), ")".repeat(6000)),
            vec!["arrays.y:", "nested more than 256 levels"],
        ),
        (
            "a 100000-term chain",
            format!("{head}y = \"{}\"\n", vec!["X"; 100_000].join("+")),
            vec!["arrays.y:", "characters long"],
        ),
        (
            "a 1000-term chain",
            format!("{head}y = \"{}\"\n", vec!["X"; 1000].join(" + ")),
            vec!["arrays.y:", "nested more than 256 levels"],
        ),
        (
            "TOML nested 10000 deep",
            format!("{head}y = {}1{}\n", "[".repeat(10_000), "]".repeat(10_000)),
            vec!["job.toml:4:", "nested more than 32 levels"],
        ),
        (
            "TOML inline tables nested 10000 deep",
            format!("{head}y = {}{}\n", "{a=".repeat(10_000), "}".repeat(10_000)),
            vec!["job.toml:4:", "nested more than 32 levels"],
        ),
        ("a chain of 2000 arrays", chain(2000), vec![]),
        (
            "a chain of 10001 arrays",
            chain(10_001),
            vec!["arrays:", "10001 arrays", "more than the 10000"],
        ),
        (
            "10^12 x 16 in blocks of 250 x 16",
            "[arrays]\nZ = { zeros = [1000000000000, 16], block = [250, 16] }\n[outputs]\nZ = \"z.npy\"\n".into(),
            vec![
                "job.toml:2: arrays.Z.block:",
                "makes 4000000000 blocks, more than the 1000000 an array may have",
                "blocks of (1000000, 16) would do",
            ],
        ),
        (
            "3000000 in blocks of 1",
            "[arrays]\nZ = { zeros = [3000000], block = [1] }\nY = \"Z + 1\"\n[outputs]\nY = \"y.npy\"\n".into(),
            vec!["arrays.Z.block:", "3000000 blocks", "blocks of (3,) would do"],
        ),
        (
            "blocks of the whole job",
            {
                let mut t = String::from("[arrays]\n");
                for i in 0..18 {
                    t += &format!("Z{i} = {{ zeros = [900000], block = [1] }}\n");
                }
                t + "[outputs]\nZ17 = \"z.npy\"\n"
            },
            vec![
                "job.toml:19: arrays.Z17.block:",
                "the job has 16200000 blocks in all, more than the 16000000 allowed",
                "Z0 (900000), Z1 (900000), Z10 (900000)",
            ],
        ),
        (
            "an outer product past 2^50 elements",
            "[arrays]\nv = { zeros = [1125899906842624], block = [1125899906842624] }\nY = \"outer(v, v)\"\n".into(),
            vec!["arrays.Y:", "elements"],
        ),
        (
            "broadcasting past 2^64 elements",
            "[arrays]\nv = { zeros = [1125899906842624], block = [1125899906842624] }\nY = \"v[:, None, None] * v[None, :, None] * v\"\n".into(),
            vec!["arrays.Y:", "elements"],
        ),
        (
            "slices with the largest steps and bounds",
            format!("{head}y = \"X[::9223372036854775807, ::-9223372036854775808] + X[-9223372036854775808:9223372036854775807, 1::-9223372036854775807].sum()\"\n"),
            vec![],
        ),
        (
            // Counts per block, never positions, so any length is planned.
            "a mask along an axis of 2^50",
            "[arrays]\nv = { zeros = [1125899906842624], block = [1125899906842624] }\nY = \"v[v > 0]\"\n".into(),
            vec![],
        ),
        (
            "zeros() past 2^64 elements",
            "[arrays]\nY = \"zeros((4294967296, 4294967296, 4294967296))\"\n".into(),
            vec!["arrays.Y:", "elements"],
        ),
    ]
}

#[test]
fn known_crashes_give_clear_errors() {
    let dir = case_dir("known");
    let worker = Worker::new(dir);
    let mut failed = Vec::new();
    for (what, text, words) in known_cases() {
        match worker.run(&text) {
            Err(why) => failed.push(format!("{what}: {why}")),
            Ok((err, _)) => {
                let err = err.unwrap_or_default();
                if words.is_empty() {
                    if !err.is_empty() {
                        failed.push(format!("{what}: expected no error, got {err}"));
                    }
                } else if let Some(w) = words.iter().find(|w| !err.contains(*w)) {
                    failed.push(format!("{what}: error lacks {w:?}: {err:?}"));
                }
            }
        }
    }
    assert!(failed.is_empty(), "\n{}", failed.join("\n"));
}

// ---- every function with every kind of argument ----

/// Arguments of every kind: a number, a 0-d array, 1-D, 2-D, 3-D, bool, int64, a tuple
/// (the sweep's arrays are small: one to a few blocks).
const KINDS: &[&str] = &["2", "A.sum()", "v", "A", "T", "M", "I", "(A, A)"];

#[test]
fn every_function_with_every_kind_of_argument() {
    let head = "[arrays]\nv = { random = \"normal\", shape = [5], block = [2] }\nA = { random = \"normal\", shape = [7, 5], block = [3, 2] }\nT = { random = \"normal\", shape = [4, 3, 5], block = [3, 2, 2] }\nI = { random = \"integers\", low = -6, high = 7, shape = [7, 5], block = [3, 2] }\nM = \"A > 0\"\n";
    let worker = Worker::new(case_dir("sweep"));
    let (mut n, mut failed, mut elsewhere) = (0, Vec::new(), HashMap::<String, u64>::new());
    // The error of one call, or None; failures of the property are collected.
    let mut check = |call: String| -> Option<String> {
        n += 1;
        let text = format!("{head}Y = \"{call}\"\n[outputs]\nY = \"y.npy\"\n");
        match worker.run(&text) {
            Ok((err, _)) => err,
            Err(Failure::Panic { message, at })
                if OWNED_ELSEWHERE
                    .iter()
                    .any(|(f, m)| at.contains(f) && message.contains(m)) =>
            {
                *elsewhere.entry(format!("{at}: {message}")).or_default() += 1;
                None
            }
            Err(why) => {
                failed.push(format!("{call}: {why}"));
                None
            }
        }
    };
    for f in graph::function_names() {
        check(format!("{f}()"));
        for a in KINDS {
            check(format!("{f}({a})"));
            for b in KINDS {
                check(format!("{f}({a}, {b})"));
            }
        }
        // Every value of every keyword the function takes, with arrays of every kind.
        for (k, vs) in KWARGS {
            let probe = check(format!("{f}(A, {k}={})", vs[0]));
            if probe.is_some_and(|e| e.contains("unexpected keyword argument")) {
                continue;
            }
            for v in vs.iter() {
                for a in &KINDS[1..] {
                    check(format!("{f}({a}, {k}={v})"));
                }
            }
        }
    }
    for (what, count) in &elsewhere {
        eprintln!("known, owned elsewhere: {count} calls panicked at {what}");
    }
    eprintln!("{n} calls checked");
    assert!(failed.is_empty(), "\n{}", failed.join("\n"));
}

// ---- the property run ----

/// Numbers that find edges: zero, one, negatives, the limits, past them, and floats.
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "7",
    "255",
    "256",
    "65536",
    "3000000",
    "1000000000000",
    "1125899906842624",
    "1125899906842625",
    "4294967296",
    "9007199254740993",
    "9223372036854775807",
    "-9223372036854775808",
    "99999999999999999999",
    "1e308",
    "1e309",
    "-0.0",
    "0.5",
    "nan",
    "inf",
    "-inf",
    "1e-320",
];

/// Tokens inserted by mutation: the expression language's and TOML's.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ":",
    "::",
    "...",
    ".",
    "=",
    "\"",
    "'",
    "#",
    "\n",
    " ",
    "+",
    "-",
    "*",
    "/",
    "//",
    "%",
    "**",
    "@",
    "<",
    "==",
    "&",
    "|",
    "^",
    "~",
    "sum(",
    "X",
    "A",
    "v",
    "T",
    "M",
    "I",
    "None",
    "True",
    "np.",
    "np.nan",
    "np.inf",
    ".T",
    ".shape",
    ".size",
    "axis=",
    "axis=[]",
    "axis=()",
    "keepdims=True",
    "dtype='int64'",
    "dtype='bool'",
    "[:, None]",
    "[::-1]",
    "[0]",
    "[-1]",
    "[1:2]",
    "[...]",
    "[[0, 1]]",
    "[X > 0]",
    "reshape(",
    "einsum(",
    "'ij,jk->ik'",
    "'i->'",
    "dot(",
    "outer(",
    "concatenate(",
    "vstack(",
    "stack(",
    "transpose(",
    "where(",
    "arange(",
    "linspace(",
    "eye(",
    "zeros(",
    "full(",
    "[arrays]",
    "[outputs]",
    "[compute]",
    "[storage]",
    "block = [1]",
    "block = [1, 1]",
    "block = []",
    "shape = []",
    "zeros = [",
    "ones = [",
    "random = \"normal\"",
    "dtype = \"int64\"",
    "expr = ",
    "workers = ",
    "memory_mb = ",
    "scheduler = \"naive\"",
    "load = \"in.npy\"",
    "load = \"in.csv\"",
    "load = \"\"",
    "load = \".\"",
    "= \"X + 1\"\n",
    "= \"",
];

const NAMES: &[&str] = &["A", "B", "C", "v", "w", "T", "M", "I", "F", "X", "Z"];

/// The conformance inputs (driver/tests/fuzz/corpus/conformance*.toml): shapes 7x5, 5x4,
/// 5x5, 5, 7, 4x3x5, 6x5x4, 5x3, 4x3; int64 I and J, float32 F, bool M.
const INPUTS: &[&str] = &[
    "A", "B", "P", "C", "S", "v", "w", "T", "X", "U", "V", "I", "J", "F", "M", "N",
];

/// Keyword arguments of the functions, with values ordinary and at the edges.
const KWARGS: &[(&str, &[&str])] = &[
    (
        "axis",
        &[
            "0",
            "1",
            "-1",
            "2",
            "3",
            "-4",
            "()",
            "[]",
            "(0, 1)",
            "(0, 0)",
            "None",
            "[0, 2]",
            "1.5",
            "(-1, -2, -3)",
        ],
    ),
    ("keepdims", &["True", "False", "1"]),
    (
        "dtype",
        &[
            "'float32'",
            "'int64'",
            "'bool'",
            "'float64'",
            "'complex'",
            "1",
            "float",
        ],
    ),
    (
        "k",
        &[
            "0",
            "1",
            "-1",
            "100",
            "-9223372036854775808",
            "9223372036854775807",
        ],
    ),
    ("ddof", &["0", "1", "7", "-1", "1000", "1.5"]),
    (
        "axes",
        &[
            "0",
            "1",
            "2",
            "3",
            "([0], [1])",
            "([1], [0])",
            "[]",
            "()",
            "((0, 1), (1, 0))",
            "(1, 0)",
            "-1",
            "([0, 0], [1, 1])",
            "([5], [0])",
        ],
    ),
    (
        "shape",
        &[
            "(3, 4)",
            "()",
            "(0,)",
            "-1",
            "(-1, 5)",
            "(1125899906842624, 2)",
            "(5, -1, -1)",
        ],
    ),
    ("fill_value", &["1", "np.nan", "True", "-0.0"]),
    ("endpoint", &["True", "False"]),
    ("num", &["0", "1", "5", "1000000000000", "-1"]),
    ("N", &["0", "1", "3", "-1", "1000000"]),
    ("M", &["0", "1", "3", "-1", "1000000"]),
    ("axis1", &["0", "1", "-1", "5"]),
    ("axis2", &["0", "1", "-1", "5"]),
    ("a_min", &["0", "None", "np.nan", "A"]),
    ("a_max", &["1", "None", "-np.inf", "v"]),
    ("start", &["0", "1.5", "-3", "1e300"]),
    ("stop", &["10", "0", "1e300", "-1e300"]),
    ("step", &["1", "0", "-1", "1e-300", "0.5"]),
    ("offset", &["0", "1", "-5"]),
    ("out", &["A"]),
];

/// einsum subscripts, valid and not.
const SUBSCRIPTS: &[&str] = &[
    "'ij,jk->ik'",
    "'ij->ji'",
    "'ii'",
    "'ii->i'",
    "'ijk->'",
    "'i,i'",
    "'->'",
    "'ij->jj'",
    "'ijk,jf,kf->if'",
    "'...i->i'",
    "'i,j->ij'",
    "''",
    "'abcdefghijklmnopqrstuvwxyz'",
    "'ij,jk'",
    "'I->i'",
];

struct Fuzzer {
    rng: fastrand::Rng,
    corpus: Vec<String>,
    exprs: Vec<String>,
}

impl Fuzzer {
    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.rng.usize(..xs.len())]
    }

    fn number(&mut self) -> String {
        if self.rng.bool() {
            self.rng.i64(-3..12).to_string()
        } else {
            self.pick(NUMBERS).to_string()
        }
    }

    /// A size: mostly small, at times zero or huge.
    fn size(&mut self) -> u64 {
        match self.rng.u8(..20) {
            0 => 0,
            1 => 1 << self.rng.u32(20..52),
            2 => self.rng.u64(1..5_000_000),
            3 => [1_000_000_000_000, 3_000_000, 4_294_967_296][self.rng.usize(..3)],
            _ => self.rng.u64(1..12),
        }
    }

    fn dims(&mut self, rank: usize) -> String {
        let d: Vec<String> = (0..rank).map(|_| self.size().to_string()).collect();
        format!("[{}]", d.join(", "))
    }

    /// A leaf array definition (a TOML value).
    fn leaf(&mut self, i: u64) -> String {
        let rank = self.rng.usize(0..4);
        let shape = self.dims(rank);
        let mut parts = vec![match self.rng.u8(..6) {
            0 => format!("random = \"normal\", shape = {shape}, seed = {i}"),
            1 => format!("random = \"uniform\", shape = {shape}"),
            2 => format!(
                "random = \"integers\", low = {}, high = {}, shape = {shape}",
                self.number(),
                self.number()
            ),
            3 => format!("zeros = {shape}"),
            4 => format!("ones = {shape}"),
            _ => format!("full = {shape}, value = {}", self.number()),
        }];
        if self.rng.u8(..3) == 0 {
            let r = if self.rng.u8(..8) == 0 {
                self.rng.usize(0..4)
            } else {
                rank
            };
            let b = self.dims(r);
            parts.push(format!("block = {b}"));
        }
        if self.rng.u8(..6) == 0 {
            let d = self.pick(&["float64", "float32", "int64", "bool", "complex"]);
            parts.push(format!("dtype = \"{d}\""));
        }
        format!("{{ {} }}", parts.join(", "))
    }

    /// A random expression of the language, at most `depth` levels.
    fn expr(&mut self, names: &[String], depth: u32) -> String {
        if depth == 0 || self.rng.u8(..10) < 3 {
            return match self.rng.u8(..10) {
                0..=5 if !names.is_empty() => self.pick(names).clone(),
                6 => self.number(),
                7 => self
                    .pick(&[
                        "np.pi", "np.nan", "np.inf", "True", "None", "'ij->ji'", "...",
                    ])
                    .to_string(),
                8 => {
                    let i = self.rng.usize(..self.exprs.len());
                    self.exprs[i].clone()
                }
                _ => self.number(),
            };
        }
        let d = depth - 1;
        match self.rng.u8(..12) {
            0 | 1 => {
                let op = self.pick(&[
                    "+", "-", "*", "/", "//", "%", "**", "@", "<", "<=", "==", "!=", "&", "|", "^",
                ]);
                format!("{} {op} {}", self.expr(names, d), self.expr(names, d))
            }
            2 => format!("{}{}", self.pick(&["-", "~", "+"]), self.expr(names, d)),
            3 | 4 => {
                let funcs = graph::function_names();
                let f = *self.pick(&funcs);
                let n = self.rng.usize(0..4);
                let mut args: Vec<String> = (0..n).map(|_| self.expr(names, d)).collect();
                if self.rng.bool() {
                    let k = self.pick(&[
                        "axis",
                        "keepdims",
                        "dtype",
                        "k",
                        "M",
                        "ddof",
                        "shape",
                        "fill_value",
                        "endpoint",
                        "num",
                        "axes",
                        "axis1",
                        "axis2",
                        "out",
                        "step",
                    ]);
                    let v = match self.rng.u8(..4) {
                        0 => "()".to_string(),
                        1 => format!("({}, {})", self.number(), self.number()),
                        2 => "'float32'".to_string(),
                        _ => self.number(),
                    };
                    args.push(format!("{k}={v}"));
                }
                format!("{f}({})", args.join(", "))
            }
            5 | 6 => {
                let n = self.rng.usize(1..4);
                let items: Vec<String> = (0..n)
                    .map(|_| match self.rng.u8(..8) {
                        0 => ":".into(),
                        1 => format!("{}:{}", self.number(), self.number()),
                        2 => format!("::{}", self.number()),
                        3 => "None".into(),
                        4 => "...".into(),
                        5 => format!("[{}, {}]", self.number(), self.number()),
                        6 => self.expr(names, d),
                        _ => self.number(),
                    })
                    .collect();
                format!("{}[{}]", self.expr(names, d), items.join(", "))
            }
            7 => format!(
                "{}{}",
                self.expr(names, d),
                self.pick(&[".T", ".shape", ".ndim", ".size", ".sum()", ".mean(axis=0)"])
            ),
            8 => format!(
                "{}.reshape({}, {})",
                self.expr(names, d),
                self.number(),
                self.number()
            ),
            9 => format!("({}, {})", self.expr(names, d), self.expr(names, d)),
            _ => format!("({})", self.expr(names, d)),
        }
    }

    /// A whole job: a few leaves, a few expressions, some outputs.
    fn job(&mut self) -> String {
        let mut t = String::from("name = \"g\"\n");
        if self.rng.u8(..4) == 0 {
            t += &format!(
                "[compute]\nworkers = {}\nmemory_mb = {}\nscheduler = \"{}\"\n",
                self.pick(&["1", "2", "7", "1000", "0"]),
                self.pick(&["128", "512", "2048", "10240", "100"]),
                self.pick(&["lshs", "naive"])
            );
        }
        t += "[arrays]\n";
        let mut names: Vec<String> = Vec::new();
        for i in 0..self.rng.u64(0..4) {
            let n = self.pick(NAMES).to_string();
            let leaf = self.leaf(i);
            t += &format!("{n} = {leaf}\n");
            names.push(n);
        }
        let mut outs = Vec::new();
        for i in 0..self.rng.usize(1..4) {
            let e = self.expr(&names, 4).replace('\\', "").replace('"', "'");
            let n = format!("e{i}");
            if self.rng.u8(..4) == 0 {
                let rank = self.rng.usize(0..3);
                let b = self.dims(rank);
                t += &format!("{n} = {{ expr = \"{e}\", block = {b} }}\n");
            } else {
                t += &format!("{n} = \"{e}\"\n");
            }
            names.push(n.clone());
            outs.push(n);
        }
        t += "[outputs]\n";
        for n in outs {
            if self.rng.bool() {
                let ext = self.pick(&["npy", "zarr"]);
                t += &format!("{n} = \"out/{n}.{ext}\"\n");
            }
        }
        t
    }

    /// One argument of a function call: mostly an input array.
    fn arg(&mut self) -> String {
        let names: Vec<String> = INPUTS.iter().map(|s| s.to_string()).collect();
        match self.rng.u8(..20) {
            0..=12 => self.pick(INPUTS).to_string(),
            13 => self.number(),
            14 => format!("[{}, {}]", self.pick(INPUTS), self.pick(INPUTS)),
            15 => format!("({}, {}.T)", self.pick(INPUTS), self.pick(INPUTS)),
            16 => self.pick(SUBSCRIPTS).to_string(),
            17 => format!("({}, {})", self.number(), self.number()),
            _ => self.expr(&names, 1),
        }
    }

    /// A job over the conformance inputs calling functions with arrays of every shape and
    /// dtype, and keyword arguments at their edges.
    fn call_job(&mut self) -> String {
        let mut t = self.table_head();
        for i in 0..self.rng.usize(1..4) {
            let funcs = graph::function_names();
            let f = *self.pick(&funcs);
            let n = *self.pick(&[0, 1, 1, 2, 2, 2, 3]);
            let mut args: Vec<String> = (0..n).map(|_| self.arg()).collect();
            for _ in 0..self.rng.usize(0..3) {
                let (k, vs) = *self.pick(KWARGS);
                let v = *self.pick(vs);
                args.push(format!("{k}={v}"));
            }
            let call = if !args.is_empty() && self.rng.u8(..5) == 0 {
                let first = args.remove(0);
                format!("{first}.{f}({})", args.join(", "))
            } else {
                format!("{f}({})", args.join(", "))
            };
            t += &format!("c{i} = \"{}\"\n", call.replace('"', "'"));
        }
        t + "[outputs]\nc0 = \"o.npy\"\n"
    }

    /// The conformance corpus job up to its first expression: the inputs.
    fn table_head(&self) -> String {
        let base = self
            .corpus
            .iter()
            .position(|c| c.contains("c0 = "))
            .unwrap();
        self.corpus[base]
            .lines()
            .take_while(|l| !l.starts_with("c0 = "))
            .map(|l| format!("{l}\n"))
            .collect()
    }

    /// A job over the conformance inputs, with expressions from the tables (at times
    /// combined).
    fn table_job(&mut self) -> String {
        let names: Vec<String> = INPUTS.iter().map(|s| s.to_string()).collect();
        let mut t = self.table_head();
        for i in 0..self.rng.usize(1..4) {
            let e = if self.rng.bool() {
                let j = self.rng.usize(..self.exprs.len());
                self.exprs[j].clone()
            } else {
                self.expr(&names, 3)
            };
            t += &format!("c{i} = \"{}\"\n", e.replace('"', "'"));
        }
        t + "[outputs]\nc0 = \"o.npy\"\n"
    }

    /// Changes `text` in one of the ways that find crashes.
    fn mutate(&mut self, text: &mut String) {
        let at = |rng: &mut fastrand::Rng, t: &String| {
            let mut i = rng.usize(..=t.len());
            while !t.is_char_boundary(i) {
                i -= 1;
            }
            i
        };
        match self.rng.u8(..11) {
            // Byte flip: a random printable character somewhere.
            0 => {
                if !text.is_empty() {
                    let i = at(&mut self.rng, text);
                    let end = text[i..].chars().next().map_or(i, |c| i + c.len_utf8());
                    let c = self.rng.u8(32..127) as char;
                    text.replace_range(i..end, &c.to_string());
                }
            }
            // Token insertion.
            1 | 2 => {
                let i = at(&mut self.rng, text);
                let tok = self.pick(TOKENS);
                text.insert_str(i, tok);
            }
            // Deletion of a few characters.
            3 => {
                let i = at(&mut self.rng, text);
                let mut j = (i + self.rng.usize(1..9)).min(text.len());
                while !text.is_char_boundary(j) {
                    j += 1;
                }
                text.replace_range(i..j, "");
            }
            // A number replaced by an edge.
            4 | 5 => {
                let starts: Vec<usize> = text
                    .char_indices()
                    .filter(|&(i, c)| {
                        c.is_ascii_digit()
                            && text[..i]
                                .chars()
                                .next_back()
                                .is_none_or(|p| !p.is_ascii_alphanumeric() && p != '.')
                    })
                    .map(|(i, _)| i)
                    .collect();
                if !starts.is_empty() {
                    let i = *self.pick(&starts);
                    let len = text[i..]
                        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
                        .unwrap_or(text.len() - i);
                    let n = self.pick(NUMBERS);
                    text.replace_range(i..i + len, n);
                }
            }
            // Deep nesting, in an expression or in TOML.
            6 => {
                let n = *self.pick(&[10usize, 200, 255, 256, 257, 1000, 6000, 20_000]);
                let (open, close) = *self.pick(&[
                    ("(", ")"),
                    ("[", "]"),
                    ("-", ""),
                    ("sum(", ")"),
                    ("{a=", "}"),
                ]);
                let i = at(&mut self.rng, text);
                let j = at(&mut self.rng, text).max(i);
                text.insert_str(j, &close.repeat(n));
                text.insert_str(i, &open.repeat(n));
            }
            // A long chain of arrays, or of operators.
            7 => {
                let n = *self.pick(&[3usize, 300, 2000]);
                let mut add = String::from("\n[arrays]\nq0 = { ones = [4] }\n");
                for k in 1..n {
                    add += &format!("q{k} = \"q{} * 2\"\n", k - 1);
                }
                if self.rng.bool() {
                    add += &format!("qq = \"{}\"\n", vec!["q0"; n].join(" + "));
                }
                // A second [arrays] header is a TOML error; put it first when there is none.
                if let Some(p) = text.find("[arrays]\n") {
                    text.insert_str(p + 9, &add[10..]);
                } else {
                    text.push_str(&add);
                }
            }
            // A line repeated, removed or moved.
            8 => {
                let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
                if !lines.is_empty() {
                    let i = self.rng.usize(..lines.len());
                    match self.rng.u8(..3) {
                        0 => {
                            let l = lines[i].clone();
                            lines.insert(self.rng.usize(..=lines.len()), l);
                        }
                        1 => {
                            lines.remove(i);
                        }
                        _ => {
                            let j = self.rng.usize(..lines.len());
                            lines.swap(i, j);
                        }
                    }
                    *text = lines.join("\n") + "\n";
                }
            }
            // An expression replaced by a random one.
            9 => {
                let quoted: Vec<usize> = text.match_indices(" = \"").map(|(i, _)| i + 4).collect();
                if !quoted.is_empty() {
                    let i = *self.pick(&quoted);
                    if let Some(len) = text[i..].find('"') {
                        let names: Vec<String> = NAMES.iter().map(|s| s.to_string()).collect();
                        let e = self.expr(&names, 4).replace('"', "'");
                        text.replace_range(i..i + len, &e);
                    }
                }
            }
            // Lines spliced in from another corpus file.
            _ => {
                let other = self.rng.usize(..self.corpus.len());
                let lines: Vec<&str> = self.corpus[other].lines().collect();
                if !lines.is_empty() {
                    let a = self.rng.usize(..lines.len());
                    let b = (a + self.rng.usize(1..5)).min(lines.len());
                    let piece = lines[a..b].join("\n") + "\n";
                    let i = at(&mut self.rng, text);
                    let i = text[..i].rfind('\n').map_or(0, |p| p + 1);
                    text.insert_str(i, &piece);
                }
            }
        }
    }

    fn case(&mut self) -> String {
        let mut text = match self.rng.u8(..10) {
            0 | 1 => self.job(),
            2 => self.table_job(),
            3 | 4 => self.call_job(),
            _ => {
                let i = self.rng.usize(..self.corpus.len());
                self.corpus[i].clone()
            }
        };
        // Unchanged two times in five: generated jobs reach deep only when they parse.
        if self.rng.u8(..5) >= 2 {
            for _ in 0..self.rng.usize(1..4) {
                self.mutate(&mut text);
            }
        }
        text
    }
}

fn corpus() -> (Vec<String>, Vec<String>) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz");
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("corpus"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    let corpus: Vec<String> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let exprs = std::fs::read_to_string(root.join("expressions.txt"))
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    (corpus, exprs)
}

#[test]
fn check_never_panics_hangs_or_explodes() {
    let (corpus, exprs) = corpus();
    assert!(corpus.len() >= 20 && exprs.len() >= 200);
    let seed = env_num("NUMS_FUZZ_SEED", 1);
    let cases = env_num("NUMS_FUZZ_CASES", 3000);
    let until = std::env::var("NUMS_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(|s| Instant::now() + Duration::from_secs(s));
    let worker = Worker::new(case_dir(&format!("seed{seed}")));
    eprintln!(
        "fuzzing the check path: seed {seed}, the current case is in {}",
        worker.current.display()
    );
    let mut f = Fuzzer {
        rng: fastrand::Rng::with_seed(seed),
        corpus,
        exprs,
    };
    let started = Instant::now();
    let (mut n, mut refused, mut accepted, mut slowest) = (0u64, 0u64, 0u64, Duration::ZERO);
    let mut failures: Vec<String> = Vec::new();
    let mut elsewhere: HashMap<String, u64> = HashMap::new();
    loop {
        match until {
            Some(t) if Instant::now() >= t => break,
            None if n >= cases => break,
            _ => {}
        }
        let text = f.case();
        if text.contains("s3:") {
            continue; // no network here
        }
        n += 1;
        match worker.run(&text) {
            Ok((err, cpu)) => {
                refused += err.is_some() as u64;
                accepted += err.is_none() as u64;
                slowest = slowest.max(cpu);
            }
            Err(Failure::Panic { message, at })
                if OWNED_ELSEWHERE
                    .iter()
                    .any(|(f, m)| at.contains(f) && message.contains(m)) =>
            {
                *elsewhere.entry(format!("{at}: {message}")).or_default() += 1;
            }
            Err(why) => {
                let hang = matches!(&why, Failure::Other(m) if m.starts_with("no answer"));
                failures.push(format!("case {n} (seed {seed}): {why}\n{}", show(&text)));
                if failures.len() >= 5 || hang {
                    break;
                }
            }
        }
    }
    eprintln!(
        "{n} cases in {:.1} s ({refused} refused with an error, {} accepted), slowest {slowest:?} of CPU",
        started.elapsed().as_secs_f64(),
        accepted
    );
    for (what, count) in &elsewhere {
        eprintln!("known, owned elsewhere: {count} cases panicked at {what}");
    }
    assert!(
        failures.is_empty(),
        "{} of {n} cases failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    // Not only errors: a useful share of the cases must get through the whole check.
    assert!(
        accepted >= n / 20,
        "only {accepted} of {n} cases passed the check"
    );
}
