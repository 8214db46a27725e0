//! The process's peak resident memory per invocation (Linux: reset the high-water mark
//! through /proc/self/clear_refs, read VmHWM afterwards). Elsewhere both are no-ops and
//! the peak reads 0.

/// Large buffers (blocks) get their own mappings, returned to the system when freed, so
/// resident memory follows the blocks alive (glibc otherwise raises its mmap threshold
/// and keeps freed blocks in the heap, which the memory limit would count).
pub fn return_freed_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    unsafe {
        // SAFETY: mallopt only changes allocator tuning; called before any block exists.
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
}

/// Resets the high-water mark to the current resident size.
pub fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// Peak resident bytes since the last [`reset_peak`].
pub fn peak() -> u64 {
    status_kib("VmHWM:").unwrap_or(0) * 1024
}

/// Resident bytes of process `pid`: now, and the peak since it started or last reset it
/// (`VmRSS`, `VmHWM`; the function resets the peak at each invocation).
pub fn usage_of(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = field_kib(&s, "VmRSS:")? * 1024;
    let peak = field_kib(&s, "VmHWM:").map_or(rss, |k| k * 1024);
    Some((rss, peak.max(rss)))
}

fn status_kib(field: &str) -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    field_kib(&s, field)
}

fn field_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[cfg(test)]
mod tests {
    #[test]
    fn peak_sees_an_allocation() {
        super::reset_peak();
        let before = super::peak();
        let v = vec![1u8; 64 << 20];
        std::hint::black_box(&v);
        let after = super::peak();
        assert!(after >= before + (60 << 20), "{before} -> {after}");
    }
}
