//! A cgroup v1 memory limit per local function process, so that the kernel enforces
//! `memory_mb` as Lambda does. Where cgroups are not writable (a laptop without root),
//! `create` returns `None` and the supervisor's RSS polling alone enforces the limit.

use std::path::PathBuf;

pub struct MemoryCgroup {
    dir: PathBuf,
}

impl MemoryCgroup {
    pub fn create(name: &str, limit_bytes: u64) -> Option<MemoryCgroup> {
        let root = PathBuf::from("/sys/fs/cgroup/memory");
        if !root.join("memory.limit_in_bytes").exists() {
            return None;
        }
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

    pub fn add(&self, pid: u32) {
        let _ = std::fs::write(self.dir.join("cgroup.procs"), pid.to_string());
    }

    pub fn remove(self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}
