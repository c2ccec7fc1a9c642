#![allow(clippy::unwrap_used)]
//! A real filesystem on `rampart serve`, as a user would mount it: nbdfuse
//! exposes the export as a file, losetup makes it a block device, mkfs.ext4
//! and mount put files (with a sha256sum manifest) on it; after unmounting
//! everything and stopping the server with SIGTERM, a new server, nbdfuse
//! and loop device show the same files, and e2fsck finds the filesystem
//! clean. Every mount, loop device and FUSE mount is undone by guards, even
//! when the test fails.

use crate::helpers::serve_support as support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::*;

/// Fails the test, saying why, when FUSE, loop devices or mounting are not
/// available here.
fn require_kernel_features(dir: &TempDir) {
    assert!(
        Path::new("/dev/fuse").exists(),
        "/dev/fuse is unavailable: the filesystem test needs FUSE (load the fuse module, or give \
         the container --device /dev/fuse and CAP_SYS_ADMIN); scripts/test installs fuse3"
    );
    let out = run("losetup", &["-f"]);
    assert!(
        out.status.success() && text(&out.stdout).starts_with("/dev/loop"),
        "loop devices are unavailable (`losetup -f` failed): the filesystem test needs them \
         (load the loop module, or run the container privileged): {}",
        describe("losetup -f", &out)
    );
    // Mounting needs privilege: try a tmpfs.
    let probe = dir.join("probe");
    std::fs::create_dir_all(&probe).unwrap();
    let out = run("mount", &["-t", "tmpfs", "-o", "size=1m", "none", p(&probe)]);
    assert!(
        out.status.success(),
        "cannot mount filesystems here (the filesystem test needs root or CAP_SYS_ADMIN): {}",
        describe("mount -t tmpfs", &out)
    );
    ok("umount", run("umount", &[p(&probe)]));
}

/// Retries `program args` until it succeeds (devices can stay busy for a
/// moment after the layer above lets go).
fn retry(what: &str, program: &str, args: &[&str]) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = run(program, args);
        if out.status.success() {
            return;
        }
        assert!(Instant::now() < deadline, "{}", describe(what, &out));
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// nbdfuse serving an NBD URI as the file `MOUNTPOINT/nbd`.
struct Fuse {
    mountpoint: PathBuf,
    child: Option<Child>,
}

impl Fuse {
    fn mount(mountpoint: &Path, uri: &str, pidfile: &Path) -> Self {
        std::fs::create_dir_all(mountpoint).unwrap();
        let _ = std::fs::remove_file(pidfile);
        let child = Command::new(tool("nbdfuse"))
            .args(["-P", p(pidfile), p(mountpoint), uri])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let mut fuse = Self { mountpoint: mountpoint.to_owned(), child: Some(child) };
        let deadline = Instant::now() + Duration::from_secs(20);
        while !pidfile.exists() {
            if let Some(status) = fuse.child.as_mut().unwrap().try_wait().unwrap() {
                fuse.child = None;
                panic!("nbdfuse {uri} exited ({status}) before it was ready");
            }
            assert!(Instant::now() < deadline, "nbdfuse did not become ready within 20 s");
            std::thread::sleep(Duration::from_millis(20));
        }
        fuse
    }

    fn file(&self) -> PathBuf {
        self.mountpoint.join("nbd")
    }

    /// `fusermount3 -u`, then nbdfuse must exit 0.
    fn unmount(mut self) {
        retry("fusermount3 -u", "fusermount3", &["-u", p(&self.mountpoint)]);
        let mut child = self.child.take().unwrap();
        let status = wait_timeout(&mut child, Duration::from_secs(20))
            .unwrap_or_else(|| panic!("nbdfuse did not exit after fusermount3 -u"));
        assert!(status.success(), "nbdfuse exited {status}");
    }
}

impl Drop for Fuse {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = run("fusermount3", &["-u", "-z", p(&self.mountpoint)]);
            if wait_timeout(&mut child, Duration::from_secs(5)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// A loop device over a file.
struct Loop(Option<String>);

impl Loop {
    fn attach(file: &Path) -> Self {
        let out = ok("losetup -f --show", run("losetup", &["-f", "--show", p(file)]));
        let device = text(&out.stdout).trim().to_owned();
        assert!(device.starts_with("/dev/loop"), "losetup printed {device:?}");
        Self(Some(device))
    }

    fn device(&self) -> &str {
        self.0.as_deref().unwrap()
    }

    fn detach(mut self) {
        let device = self.0.take().unwrap();
        retry("losetup -d", "losetup", &["-d", &device]);
    }
}

impl Drop for Loop {
    fn drop(&mut self) {
        if let Some(device) = self.0.take() {
            let _ = run("losetup", &["-d", &device]);
        }
    }
}

/// A mounted filesystem.
struct Mounted(Option<PathBuf>);

impl Mounted {
    fn mount(device: &str, at: &Path) -> Self {
        std::fs::create_dir_all(at).unwrap();
        ok("mount", run("mount", &["-t", "ext4", device, p(at)]));
        Self(Some(at.to_owned()))
    }

    fn unmount(mut self) {
        let at = self.0.take().unwrap();
        retry("umount", "umount", &[p(&at)]);
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if let Some(at) = self.0.take() {
            if !run("umount", &[p(&at)]).status.success() {
                let _ = run("umount", &["-l", p(&at)]);
            }
        }
    }
}

fn sha256sum(dir: &Path, args: &[&str]) -> String {
    let mut command = Command::new(tool("sha256sum"));
    command.current_dir(dir).args(args);
    text(&ok(&format!("sha256sum {args:?}"), output(command)).stdout)
}

#[test]
fn ext4_on_nbdfuse_loop_device_survives_a_server_restart() {
    require(&[
        "nbdfuse",
        "fusermount3",
        "losetup",
        "mkfs.ext4",
        "e2fsck",
        "mount",
        "umount",
        "sha256sum",
    ]);
    let dir = TempDir::new("fs");
    require_kernel_features(&dir);
    let key = key_file(&dir);
    let vol = make_volume(&dir, "vol", 64 * MIB);
    let socket = dir.join("s.sock");
    let fuse_dir = dir.join("mnt");
    let fs_dir = dir.join("fs");
    let pidfile = dir.join("nbdfuse.pid");
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("big.bin", random_bytes(1, 5 * MIB as usize + 4321)),
        ("sub/dir/small.bin", random_bytes(2, 123_457)),
        ("notes.txt", b"written through rampart serve, nbdfuse, loop and ext4\n".to_vec()),
    ];

    // Make the filesystem and write the files.
    {
        let mut server = Serve::start(
            &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
            dir.join("serve1.log"),
            1,
        );
        let fuse = Fuse::mount(&fuse_dir, server.uri(), &pidfile);
        assert_eq!(std::fs::metadata(fuse.file()).unwrap().len(), 64 * MIB);
        let device = Loop::attach(&fuse.file());
        ok("mkfs.ext4", run("mkfs.ext4", &["-q", "-F", "-L", "rampart4", device.device()]));
        let mount = Mounted::mount(device.device(), &fs_dir);
        for (name, bytes) in &files {
            let path = fs_dir.join(name);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, bytes).unwrap();
        }
        let names: Vec<&str> = files.iter().map(|(n, _)| *n).collect();
        let sums = sha256sum(&fs_dir, &names);
        std::fs::write(fs_dir.join("SHA256SUMS"), &sums).unwrap();
        ok("sync", run("sync", &[p(&fs_dir)]));
        mount.unmount();
        device.detach();
        fuse.unmount();
        server.assert_alive("unmounting");
        server.stop();
    }

    // The volume file holds ciphertext only: no ext4 superblock magic in
    // plain sight, but one in the decrypted export.
    let plain = export_range(&vol, &key, 1024, 1024);
    assert_eq!(&plain[56..58], &[0x53, 0xef], "no ext4 superblock in the plaintext");
    assert_eq!(&plain[120..128], b"rampart4", "the ext4 label");
    let raw = std::fs::read(&vol).unwrap();
    assert!(!raw.windows(8).any(|w| w == b"rampart4"), "the label is visible in the volume file");
    drop(raw);

    // A new server: the same files.
    let mut server = Serve::start(
        &[p(&vol), "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve2.log"),
        1,
    );
    let fuse = Fuse::mount(&fuse_dir, server.uri(), &pidfile);
    let device = Loop::attach(&fuse.file());
    let fsck = run("e2fsck", &["-f", "-n", device.device()]);
    assert!(fsck.status.success(), "{}", describe("e2fsck -fn after the restart", &fsck));
    let mount = Mounted::mount(device.device(), &fs_dir);
    let check = sha256sum(&fs_dir, &["-c", "SHA256SUMS"]);
    assert_eq!(check.matches(": OK").count(), files.len(), "{check}");
    for (name, bytes) in &files {
        assert_same(name, &std::fs::read(fs_dir.join(name)).unwrap(), bytes);
    }
    mount.unmount();
    device.detach();
    fuse.unmount();
    server.assert_alive("the second mount");
    server.stop();
}
