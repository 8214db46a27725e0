//! A cgroup v1 memory limit per local function process, so that the kernel enforces
//! `memory_mb` as Lambda does, and tells whether it killed the process for memory (the
//! group's `oom_kill` count). Where cgroups are not writable (a laptop without root),
//! `create` returns `None` and the supervisor's RSS polling alone enforces the limit.

use std::path::{Path, PathBuf};

const ROOT: &str = "/sys/fs/cgroup/memory";
/// Every group this module makes is named `nums-cloud-<driver pid>-<slot>`.
const PREFIX: &str = "nums-cloud-";

pub(crate) struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    pub(crate) fn create(name: &str, limit_bytes: u64) -> Option<MemoryCgroup> {
        let root = Path::new(ROOT);
        if !root.join("memory.limit_in_bytes").exists() {
            return None;
        }
        remove_stale(root);
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).ok()?;
        // Headroom over memory_mb for the kernel's page cache of the process's own files;
        // the supervisor's RSS check fires first at the exact limit.
        let ok = std::fs::write(
            dir.join("memory.limit_in_bytes"),
            (limit_bytes + (limit_bytes / 8)).to_string(),
        )
        .is_ok();
        if !ok {
            let _ = std::fs::remove_dir(&dir);
            return None;
        }
        Some(MemoryCgroup { dir })
    }

    pub(crate) fn add(&self, pid: u32) {
        let _ = std::fs::write(self.dir.join("cgroup.procs"), pid.to_string());
    }

    /// How many processes of the group the kernel has killed for going over its limit
    /// (`oom_kill` in `memory.oom_control`, Linux 4.13 and later).
    pub(crate) fn oom_kills(&self) -> Option<u64> {
        let s = std::fs::read_to_string(self.dir.join("memory.oom_control")).ok()?;
        s.lines()
            .find_map(|l| l.strip_prefix("oom_kill "))
            .and_then(|v| v.trim().parse().ok())
    }

    /// Removes the group; call it once its processes have been reaped.
    pub(crate) fn remove(self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Removes the groups of drivers that died without removing theirs (killed, or the
/// machine's OOM killer); a group still holding a process is left alone by the kernel.
fn remove_stale(root: &Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(PREFIX))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}
