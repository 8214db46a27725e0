//! `nums-cloud package`: builds the Lambda deployment zip. The `bootstrap` binary of
//! nums-function, for the provided.al2023 runtime, x86_64 or arm64, in the `lambda`
//! profile (fat LTO, one codegen unit, stripped) with OpenBLAS linked statically (Amazon
//! Linux 2023 has no libopenblas); zipped as `bootstrap` at the root, mode 0755.
//!
//! Everything a build needs is checked first, so a missing target, linker or OpenBLAS
//! ends with what to install rather than a wall of compiler errors.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, anyhow, bail};

/// A Lambda architecture, named as Lambda and Terraform name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Arch {
    #[value(name = "x86_64")]
    X86_64,
    #[value(name = "arm64")]
    Arm64,
}

impl Arch {
    pub(crate) fn lambda_name(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64",
            Arch::Arm64 => "arm64",
        }
    }
    fn triple(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-unknown-linux-gnu",
            Arch::Arm64 => "aarch64-unknown-linux-gnu",
        }
    }
    /// Debian's multiarch name (where libopenblas-dev:ARCH puts its files).
    fn multiarch(self) -> &'static str {
        match self {
            Arch::X86_64 => "x86_64-linux-gnu",
            Arch::Arm64 => "aarch64-linux-gnu",
        }
    }
    fn debian(self) -> &'static str {
        match self {
            Arch::X86_64 => "amd64",
            Arch::Arm64 => "arm64",
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct PackageOptions {
    pub arch: Arch,
    /// Where the zip goes; default: `target/lambda` of the workspace.
    pub out: Option<PathBuf>,
    /// The nums-cloud source tree; default: found from the current folder upwards, else
    /// the tree this binary was built from.
    pub source: Option<PathBuf>,
    /// The cargo profile: `lambda` for a deployment; `lambda-check` links the same binary in
    /// a fraction of the time, for tests of what is linked and how it answers.
    pub profile: String,
}

/// What `package` made.
#[derive(Debug, Clone)]
pub(crate) struct Packaged {
    pub zip: PathBuf,
    pub zip_bytes: u64,
    pub binary_bytes: u64,
    pub build_seconds: f64,
}

/// How the cross build links: the host's own toolchain, a GNU cross gcc, or cargo-zigbuild.
#[derive(Debug, Clone, PartialEq)]
enum Linker {
    Native,
    Gcc(String),
    Zig,
}

pub(crate) fn package(opts: &PackageOptions) -> anyhow::Result<Packaged> {
    let root = workspace_root(opts.source.as_deref())?;
    let arch = opts.arch;
    let triple = arch.triple();
    let linker = preflight(arch)?;
    let blas_dir = openblas_static_dir(arch)?;
    let fortran_dir = gfortran_static_dir(arch)?;

    let started = Instant::now();
    let mut cmd = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    cmd.current_dir(&root);
    cmd.arg(if linker == Linker::Zig {
        "zigbuild"
    } else {
        "build"
    });
    cmd.args([
        "--profile",
        &opts.profile,
        "--locked",
        "-p",
        "nums-function",
        "--bin",
        "bootstrap",
        "--features",
        "static-openblas",
        "--target",
        triple,
        "--message-format",
        "json-render-diagnostics",
    ]);
    let env_triple = triple.to_uppercase().replace('-', "_");
    let cc_triple = triple.replace('-', "_");
    // Blosc (Zarr stores of other tools) carries Snappy, which is C++: libstdc++ is linked
    // statically (below), so the C++ builds must not ask for the shared one, which Amazon
    // Linux's provided.al2023 lacks.
    let static_cxx = if linker == Linker::Zig {
        ""
    } else {
        cmd.env(format!("CXXSTDLIB_{cc_triple}"), "");
        " -C link-arg=-l:libstdc++.a"
    };
    // aws-lc (TLS to S3) skips its CPU-jitter entropy source, slow at every cold start.
    cmd.env("AWS_LC_SYS_NO_JITTER_ENTROPY", "1")
        // openblas-src: no pkg-config (it would pick the shared library); the static one here.
        .env("OPENBLAS_NO_PKG_CONFIG", "1")
        // OpenBLAS's LAPACK is Fortran: its runtime (libgfortran, libquadmath) is linked
        // statically too, so the binary needs nothing Amazon Linux lacks.
        .env(
            format!("CARGO_TARGET_{env_triple}_RUSTFLAGS"),
            format!(
                "-L native={} -L native={} -l static=gfortran -l static=quadmath{static_cxx}",
                blas_dir.display(),
                fortran_dir.display()
            ),
        );
    if let Linker::Gcc(gcc) = &linker {
        cmd.env(format!("CARGO_TARGET_{env_triple}_LINKER"), gcc)
            .env(format!("CC_{cc_triple}"), gcc)
            .env(
                format!("CXX_{cc_triple}"),
                format!("{}-g++", arch.multiarch()),
            );
    }
    cmd.stdout(Stdio::piped()).stderr(Stdio::inherit());
    tracing::info!(
        "package: building bootstrap for {} ({triple}, profile {}, OpenBLAS from {}); a cold build takes several minutes",
        arch.lambda_name(),
        opts.profile,
        blas_dir.display()
    );
    let mut child = cmd.spawn().context("cannot run cargo")?;
    let mut binary = None;
    for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
        let line = line?;
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(&line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact"
            && msg["target"]["name"] == "bootstrap"
            && let Some(exe) = msg["executable"].as_str()
        {
            binary = Some(PathBuf::from(exe));
        }
    }
    let status = child.wait()?;
    if !status.success() {
        bail!("cargo could not build the bootstrap binary ({status}); see the messages above");
    }
    let binary = binary.ok_or_else(|| anyhow!("cargo built no bootstrap binary"))?;
    let build_seconds = started.elapsed().as_secs_f64();

    let out = match &opts.out {
        Some(o) => o.clone(),
        None => root.join("target").join("lambda"),
    };
    std::fs::create_dir_all(&out).with_context(|| format!("cannot create {}", out.display()))?;
    let zip = out.join(format!("bootstrap-{}.zip", arch.lambda_name()));
    write_zip(&binary, &zip)?;
    Ok(Packaged {
        zip_bytes: std::fs::metadata(&zip)?.len(),
        binary_bytes: std::fs::metadata(&binary)?.len(),
        zip,
        build_seconds,
    })
}

/// `bootstrap` at the zip's root, executable, with a fixed date so that the same binary
/// gives the same zip (and Terraform's hash of it does not change for nothing).
pub(crate) fn write_zip(binary: &Path, zip_path: &Path) -> anyhow::Result<()> {
    let bytes =
        std::fs::read(binary).with_context(|| format!("cannot read {}", binary.display()))?;
    let file = std::fs::File::create(zip_path)
        .with_context(|| format!("cannot create {}", zip_path.display()))?;
    let mut z = zip::ZipWriter::new(file);
    let options = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated)
        .unix_permissions(0o755)
        .last_modified_time(zip::DateTime::default());
    z.start_file("bootstrap", options)?;
    z.write_all(&bytes)?;
    z.finish()?;
    Ok(())
}

/// The folder holding the workspace's Cargo.toml (the one that lists `function`).
fn workspace_root(given: Option<&Path>) -> anyhow::Result<PathBuf> {
    let is_root = |d: &Path| {
        std::fs::read_to_string(d.join("Cargo.toml"))
            .is_ok_and(|t| t.contains("[workspace]") && t.contains("\"function\""))
    };
    if let Some(d) = given {
        return if is_root(d) {
            Ok(d.to_path_buf())
        } else {
            Err(anyhow!(
                "{}: not the nums-cloud source tree (no workspace Cargo.toml listing \"function\")",
                d.display()
            ))
        };
    }
    let cwd = std::env::current_dir()?;
    let built_from = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    cwd.ancestors()
        .find(|d| is_root(d))
        .map(Path::to_path_buf)
        .or_else(|| is_root(&built_from).then_some(built_from))
        .ok_or_else(|| {
            anyhow!(
                "package builds from the nums-cloud source tree: run it inside the checkout or pass --source DIR"
            )
        })
}

fn host_triple() -> anyhow::Result<String> {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .context("cannot run rustc")?;
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: ").map(str::to_string))
        .ok_or_else(|| anyhow!("rustc -vV names no host"))
}

fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(program).is_file()))
}

/// The Rust target and a linker for it, or what to install.
fn preflight(arch: Arch) -> anyhow::Result<Linker> {
    let triple = arch.triple();
    let host = host_triple()?;
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .context("cannot run rustc")?;
    let sysroot = PathBuf::from(String::from_utf8_lossy(&sysroot.stdout).trim());
    if !sysroot
        .join("lib/rustlib")
        .join(triple)
        .join("lib")
        .is_dir()
    {
        bail!(
            "the Rust target {triple} is not installed; install it with:\n    rustup target add {triple}"
        );
    }
    if host == triple {
        return Ok(Linker::Native);
    }
    let gcc = format!("{}-gcc", arch.multiarch());
    if on_path(&gcc) {
        return Ok(Linker::Gcc(gcc));
    }
    if on_path("cargo-zigbuild") && (on_path("zig") || on_path("python-zig")) {
        return Ok(Linker::Zig);
    }
    bail!(
        "building for {} on {host} needs a cross linker; either\n    \
         apt-get install gcc-{ma} g++-{ma}   (Debian: a GNU cross toolchain), or\n    \
         pip install cargo-zigbuild ziglang   (PyPI: zig as the linker)",
        arch.lambda_name(),
        ma = arch.multiarch()
    )
}

/// The folder holding the static Fortran runtime (`libgfortran.a`) for the target, which
/// OpenBLAS's LAPACK needs.
fn gfortran_static_dir(arch: Arch) -> anyhow::Result<PathBuf> {
    let ma = arch.multiarch();
    let found = std::fs::read_dir(format!("/usr/lib/gcc/{ma}"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|d| d.join("libgfortran.a").is_file())
        .max();
    found.ok_or_else(|| {
        let pkg = if arch == Arch::X86_64 {
            "libgfortran-12-dev".to_string()
        } else {
            format!("libgfortran-12-dev:{}", arch.debian())
        };
        anyhow::anyhow!(
            "no static Fortran runtime (libgfortran.a) under /usr/lib/gcc/{ma}: OpenBLAS's LAPACK needs it; install it with:\n    apt-get install -y {pkg}"
        )
    })
}

/// The folder holding a static `libopenblas.a` for the target.
fn openblas_static_dir(arch: Arch) -> anyhow::Result<PathBuf> {
    if let Some(d) = std::env::var_os("NUMS_OPENBLAS_LIB_DIR") {
        let d = PathBuf::from(d);
        if d.join("libopenblas.a").is_file() {
            return Ok(d);
        }
        bail!(
            "NUMS_OPENBLAS_LIB_DIR={}: no libopenblas.a there",
            d.display()
        );
    }
    let ma = arch.multiarch();
    let candidates = [
        format!("/usr/lib/{ma}/openblas-pthread"),
        format!("/usr/lib/{ma}"),
        "/usr/lib64".to_string(),
    ];
    for c in &candidates {
        let d = PathBuf::from(c);
        if d.join("libopenblas.a").is_file() {
            return Ok(d);
        }
    }
    let deb = arch.debian();
    let (add_arch, pkg) = if arch == Arch::X86_64 {
        (String::new(), "libopenblas-dev".to_string())
    } else {
        (
            format!("dpkg --add-architecture {deb} && apt-get update && "),
            format!("libopenblas-dev:{deb}"),
        )
    };
    bail!(
        "no static OpenBLAS (libopenblas.a) for {} in {}; install it with:\n    {add_arch}apt-get install -y {pkg}\n\
         or point NUMS_OPENBLAS_LIB_DIR at a folder holding libopenblas.a",
        arch.lambda_name(),
        candidates.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The zip holds one entry, `bootstrap`, executable, byte-for-byte the binary; the same
    /// binary makes the same zip.
    #[test]
    fn zip_has_executable_bootstrap_at_root() {
        let dir = std::env::temp_dir().join(format!("nums-package-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bin = dir.join("bin");
        std::fs::write(&bin, b"\x7fELF not really, but bytes all the same").unwrap();
        let (a, b) = (dir.join("a.zip"), dir.join("b.zip"));
        write_zip(&bin, &a).unwrap();
        write_zip(&bin, &b).unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
        let mut z = zip::ZipArchive::new(std::fs::File::open(&a).unwrap()).unwrap();
        assert_eq!(z.len(), 1);
        let mut f = z.by_name("bootstrap").unwrap();
        assert_eq!(f.unix_mode().unwrap() & 0o777, 0o755);
        let mut got = Vec::new();
        std::io::Read::read_to_end(&mut f, &mut got).unwrap();
        assert_eq!(got, std::fs::read(&bin).unwrap());
        std::fs::remove_dir_all(dir).ok();
    }

    /// A source folder that is not the workspace is named in the error.
    #[test]
    fn wrong_source_is_named() {
        let e = workspace_root(Some(Path::new("/")))
            .unwrap_err()
            .to_string();
        assert!(e.contains("not the nums-cloud source tree"), "{e}");
    }
}
