//! The library API from a plain `main` (no test harness, no async code): the example
//! program's tour (`examples/api_tour.rs`) run on a relative file store with the local
//! backend, with the Lambda backend against the local Lambda-compatible endpoint
//! (`nums-cloud endpoint`, through aws-sdk-lambda as on AWS), and on a real S3 server
//! (Garage, when `scripts/setup.sh` has installed it); and a deployment whose region the
//! environment does not name, refused with a typed error.

#[allow(dead_code)]
#[path = "../examples/api_tour.rs"]
mod tour;

use std::io::BufRead;
use std::process::{Child, Command, Stdio};

use nums_cloud::Error;
use nums_cloud::api::{Backend, Session};

const BIN: &str = env!("CARGO_BIN_EXE_nums-cloud");

/// A child process stopped with SIGTERM (so that it stops its own children) on drop.
struct Helper(Child);

impl Drop for Helper {
    fn drop(&mut self) {
        // SAFETY: a plain signal to a child of this process.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
    }
}

/// Starts `cmd` and reads its standard output up to `until` (inclusive).
fn start(cmd: &mut Command, until: impl Fn(&str) -> bool) -> (Helper, Vec<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
    let helper = Helper(child);
    let mut lines = Vec::new();
    loop {
        let mut line = String::new();
        if out.read_line(&mut line).expect("read") == 0 {
            panic!("{cmd:?} ended before it was ready: {lines:?}");
        }
        lines.push(line.trim().to_string());
        if until(line.trim()) {
            return (helper, lines);
        }
    }
}

fn main() {
    let dir = std::env::temp_dir().join(format!("nums-api-main-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::env::set_current_dir(&dir).expect("cd");

    // The helpers start first: this program sets environment variables below, which is
    // only sound while it has one thread.
    let garage_bin = std::env::var("NUMS_CACHE")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|_| {
            std::path::Path::new(&std::env::var("HOME").unwrap_or_default())
                .join(".cache/nums-cloud")
        })
        .join("garage-2.5.0/bin/garage");
    let garage = garage_bin.is_file().then(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/garage.py");
        start(Command::new("python3").arg(script), |l| {
            l.starts_with("export AWS_EC2")
        })
    });
    let mut exported: std::collections::BTreeMap<String, String> = [
        ("AWS_ACCESS_KEY_ID", "test"),
        ("AWS_SECRET_ACCESS_KEY", "test"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    for l in garage.iter().flat_map(|(_, lines)| lines) {
        for kv in l.trim_start_matches("export ").split_whitespace() {
            let (k, v) = kv.split_once('=').expect("k=v");
            exported.insert(k.to_string(), v.to_string());
        }
    }
    let s3 = match (
        exported.remove("NUMS_S3_ENDPOINT"),
        exported.remove("NUMS_S3_BUCKET"),
    ) {
        (Some(e), Some(b)) => Some((e, b)),
        _ => None,
    };
    let env = exported;
    let (_endpoint, lines) = start(
        Command::new(BIN)
            .args([
                "endpoint",
                "--function",
                "api-tour",
                "--workers",
                "2",
                "--memory-mb",
                "1024",
            ])
            .args(["--timeout-seconds", "120", "--command", BIN, "function"])
            .envs(&env),
        |l| l.starts_with("http://127.0.0.1:"),
    );
    let lambda_url = lines.last().expect("url").clone();
    for (k, v) in &env {
        // SAFETY: no other thread exists yet.
        unsafe { std::env::set_var(k, v) };
    }
    // SAFETY: as above.
    unsafe { std::env::set_var("AWS_ENDPOINT_URL_LAMBDA", &lambda_url) };

    // Each tour below sends every compute to the backend it names (in_process_bytes 0);
    // this one runs its small computes in this process, as a session does by default.
    println!("tour: relative file store, in this process");
    let s = Session::new("file://data").expect("session");
    tour::tour(&s).expect("tour, in this process");
    assert!(s.counts().in_process > 0, "{:?}", s.counts());

    println!("tour: relative file store, local backend");
    let s = Session::new("file://data")
        .expect("session")
        .function_binary(BIN)
        .in_process_bytes(0);
    tour::tour(&s).expect("tour, local backend");
    assert_eq!(s.counts().in_process, 0, "{:?}", s.counts());
    assert!(
        dir.join("data").is_dir(),
        "the store resolved against the working directory"
    );

    println!("tour: Lambda backend (the local Lambda-compatible endpoint)");
    let s = Session::new("file://data")
        .expect("session")
        .backend(Backend::Lambda)
        .function("api-tour")
        .memory_mb(1024)
        .in_process_bytes(0);
    tour::tour(&s).expect("tour, lambda backend");

    match &s3 {
        Some((endpoint, bucket)) => {
            println!("tour: S3 store (Garage), local backend");
            let s = Session::new(&format!("s3://{bucket}/api-tour"))
                .expect("session")
                .endpoint(endpoint)
                .expect("endpoint")
                .function_binary(BIN)
                .in_process_bytes(0);
            tour::tour(&s).expect("tour, S3 store");
        }
        None => println!("skipped: the S3 store (Garage is not installed: bash scripts/setup.sh)"),
    }

    // A deployment in another region than the environment's: refused before it runs.
    let tf = dir.join("terraform-output.json");
    std::fs::write(
        &tf,
        r#"{"function_name": {"value": "api-tour"}, "storage_url": {"value": "s3://nums-b/jobs"},
            "region": {"value": "eu-west-1"}, "memory_mb": {"value": 1024}}"#,
    )
    .expect("write");
    // The region the AWS SDK would use: the environment's, else the profile's in the
    // AWS config file.
    let config = dir.join("aws-config");
    std::fs::write(&config, "[default]\nregion = eu-north-1\n").expect("write");
    // SAFETY: the sessions above are dropped, their runtimes with them: no other thread
    // reads the environment now.
    unsafe {
        std::env::remove_var("AWS_REGION");
        std::env::remove_var("AWS_DEFAULT_REGION");
        std::env::remove_var("AWS_PROFILE");
        std::env::set_var("AWS_CONFIG_FILE", &config);
    }
    let s = Session::from_infra(&tf).expect("deployment");
    match s.ones(&[2]).compute_blocking::<f64>() {
        Err(Error::Config { setting, message }) => {
            assert_eq!(setting, "from_infra");
            assert!(
                message.contains("eu-west-1")
                    && message.contains("region \"eu-north-1\"")
                    && message.contains("AWS_REGION"),
                "{message}"
            );
        }
        other => panic!("expected Error::Config, got {other:?}"),
    }

    std::env::set_current_dir(std::env::temp_dir()).expect("cd");
    std::fs::remove_dir_all(&dir).expect("clean up");
    println!("ok");
}
