//! The container's memory limit, as the kernel enforces it: cgroup v2's `memory.max`, or
//! cgroup v1's `memory.limit_in_bytes`, of the cgroup this process runs in. What the host
//! sizes its guest-memory budget from (`wasmop run --guest-memory-mib`).

use std::path::Path;

/// The memory limit of this process's cgroup in bytes, if it has one.
pub fn memory_limit() -> Option<u64> {
    let v2 = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok();
    let v1 = || std::fs::read_to_string("/sys/fs/cgroup/memory/memory.limit_in_bytes").ok();
    let own = || own_cgroup_limit(Path::new("/proc/self/cgroup"), Path::new("/sys/fs/cgroup"));
    v2.as_deref()
        .and_then(parse_limit)
        .or_else(|| v1().as_deref().and_then(parse_limit))
        .or_else(own)
}

/// The limit of the v2 cgroup named in `proc_cgroup` (a line `0::/path`), under `root`:
/// where `/sys/fs/cgroup` is the host's hierarchy rather than the container's own.
fn own_cgroup_limit(proc_cgroup: &Path, root: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(proc_cgroup).ok()?;
    let path = text.lines().find_map(|l| l.strip_prefix("0::"))?;
    let file = root.join(path.trim_start_matches('/')).join("memory.max");
    parse_limit(&std::fs::read_to_string(file).ok()?)
}

/// A limit file's content: a number of bytes, or `max` (none). cgroup v1 writes "no limit"
/// as a number near `i64::MAX`.
fn parse_limit(text: &str) -> Option<u64> {
    let text = text.trim();
    if text == "max" {
        return None;
    }
    text.parse::<u64>().ok().filter(|b| *b < (1 << 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_as_the_kernel_writes_them() {
        assert_eq!(parse_limit("268435456\n"), Some(256 << 20));
        assert_eq!(parse_limit("max\n"), None);
        assert_eq!(parse_limit("9223372036854771712\n"), None);
        assert_eq!(parse_limit("garbage"), None);
    }

    #[test]
    fn the_cgroup_named_in_proc_self_cgroup() {
        let dir = std::env::temp_dir().join(format!("wasmop-cgroup-{}", std::process::id()));
        let group = dir.join("kubepods/pod1/c1");
        std::fs::create_dir_all(&group).unwrap();
        std::fs::write(group.join("memory.max"), "134217728\n").unwrap();
        let proc_cgroup = dir.join("cgroup");
        std::fs::write(&proc_cgroup, "0::/kubepods/pod1/c1\n").unwrap();
        assert_eq!(own_cgroup_limit(&proc_cgroup, &dir), Some(128 << 20));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
