//! The real programs the tests drive.

use std::path::PathBuf;

/// Finds `name` on PATH (or in the sbin directories, where cryptsetup and
/// losetup live); fails the test, naming `scripts/test`, when it is not
/// installed. A missing peer is a failure, never a silent skip.
pub fn tool(name: &str) -> PathBuf {
    let mut dirs: Vec<PathBuf> =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).collect()).unwrap_or_default();
    dirs.extend(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from));
    for dir in dirs {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return candidate;
        }
    }
    panic!(
        "`{name}` is not installed, and this test needs it: run scripts/test, which installs \
         the test dependencies (Debian: cryptsetup-bin qemu-utils nbdkit libnbd-bin \
         python3-libnbd fio fuse3 e2fsprogs postgresql; PyPI: cryptography schemathesis)"
    );
}
