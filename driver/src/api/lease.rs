//! A session's claim on its store prefix (`api-<random>/session.json`), written before
//! the session stores anything there, and the reclaiming of prefixes whose session died
//! without closing (`os._exit`, SIGKILL, the OOM killer): their process is gone, so
//! nothing will ever remove what they kept.
//!
//! A prefix is reclaimed only when its session is known to be dead: it ran on this host
//! since its last boot (same host name and boot id) and no process with its pid and
//! start time exists. A session of another host, or one this host cannot check, is left
//! alone; so is a prefix with no claim (a session of an older version, whose liveness
//! cannot be known).

use nums_layout::store::Store;
use serde::{Deserialize, Serialize};

/// The claim's key under the session's prefix.
const CLAIM: &str = "session.json";

/// Who holds a prefix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Claim {
    pub host: String,
    /// `/proc/sys/kernel/random/boot_id`: a pid means nothing across a reboot.
    pub boot: String,
    pub pid: u32,
    /// The process' start time (field 22 of `/proc/<pid>/stat`): a pid reused by another
    /// process has another one.
    pub start: Option<u64>,
}

impl Claim {
    /// This process' claim.
    pub(crate) fn mine() -> Claim {
        let pid = std::process::id();
        Claim {
            host: host_name(),
            boot: boot_id(),
            pid,
            start: start_time(pid),
        }
    }

    /// Whether the claim's session is certainly gone: of this host and boot, and no
    /// process with its pid (and start time) lives.
    fn dead_here(&self, me: &Claim) -> bool {
        if self.host != me.host || self.boot.is_empty() || self.boot != me.boot {
            return false;
        }
        if self.pid == me.pid {
            return false;
        }
        match (self.start, start_time(self.pid)) {
            // The pid lives: the same process only if it started at the same time.
            (Some(was), Some(now)) => was != now,
            (_, Some(_)) => false,
            // No /proc entry: on Linux that process is gone; elsewhere ask the kernel.
            (_, None) if std::path::Path::new("/proc/self/stat").exists() => true,
            (_, None) => !pid_alive(self.pid),
        }
    }
}

/// Writes `prefix`'s claim, then removes the prefixes (`api-*`) of this host's sessions
/// that died without closing. Reclaiming is best effort: a store that cannot be listed
/// leaves them for a later session. Returns the prefixes removed.
pub(crate) async fn claim(store: &Store, prefix: &str) -> nums_layout::Result<Vec<String>> {
    let me = Claim::mine();
    let body = serde_json::to_vec(&me).expect("a claim serializes");
    store.put(&format!("{prefix}/{CLAIM}"), body.into()).await?;
    Ok(reclaim(store, Some(prefix), &me).await)
}

/// Removes the prefixes of sessions that died without closing (never `keep`'s, never a
/// live session's): see the module's docs.
pub(crate) async fn reclaim(store: &Store, keep: Option<&str>, me: &Claim) -> Vec<String> {
    let Ok((_, dirs)) = store.list_dir("").await else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for dir in dirs {
        let dir = dir.trim_end_matches('/').to_string();
        if !dir.starts_with("api-") || Some(dir.as_str()) == keep {
            continue;
        }
        let Ok(Some(bytes)) = store.get_opt(&format!("{dir}/{CLAIM}")).await else {
            continue;
        };
        let Ok(claim) = serde_json::from_slice::<Claim>(&bytes) else {
            continue;
        };
        if claim.dead_here(me) && store.delete_prefix(&dir).await.is_ok() {
            removed.push(dir);
        }
    }
    removed
}

fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_default()
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|b| b.trim().to_string())
        .unwrap_or_default()
}

/// Field 22 of `/proc/<pid>/stat` (after the command name, which may hold spaces).
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn pid_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: signal 0 only checks that the process exists; nothing is sent.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_process_is_never_dead_and_a_gone_one_is() {
        let me = Claim::mine();
        assert!(!me.dead_here(&me));
        // This test's parent (cargo's test harness' parent) lives.
        let parent = std::os::unix::process::parent_id();
        let live = Claim {
            pid: parent,
            start: start_time(parent),
            ..me.clone()
        };
        assert!(!live.dead_here(&me));
        // A child that has exited and been waited for is gone.
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("true runs");
        let gone_pid = child.id();
        child.wait().expect("waited");
        let gone = Claim {
            pid: gone_pid,
            start: Some(1),
            ..me.clone()
        };
        assert!(gone.dead_here(&me));
        // The same pid started at another time is another process: the claim's is gone.
        let reused = Claim {
            start: start_time(parent).map(|t| t + 1),
            ..live.clone()
        };
        assert!(reused.dead_here(&me));
        // Another host or boot: never judged.
        let elsewhere = Claim {
            host: format!("{}-other", me.host),
            ..gone.clone()
        };
        assert!(!elsewhere.dead_here(&me));
        let rebooted = Claim {
            boot: "another-boot".into(),
            ..gone
        };
        assert!(!rebooted.dead_here(&me));
    }
}
