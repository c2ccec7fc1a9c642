//! cryptsetup's online re-encryption under a real kernel and Rampart's
//! offline one, each finishing what the other left: an ext4 file system on
//! a LUKS2 volume, mounted in the guest through kernel dm-crypt while
//! `cryptsetup reencrypt` runs on the active device (the kernel's
//! `NAME-overlay` and `NAME-hotzone-forward` mappings carry it), written
//! during the run, and intact (fsck, every file, the whole plaintext)
//! whichever side started and whichever finished.

use crate::helpers::common::{run, text};
use crate::helpers::kernel_support::*;
use crate::helpers::luks_support::{
    cryptsetup, cryptsetup_volume_key, has_hotzone, luks2_json, rampart_env,
};

use std::path::{Path, PathBuf};
use std::time::Duration;

const PBKDF2: &[&str] = &["--pbkdf", "pbkdf2", "--pbkdf-force-iterations", "1000"];
const MIB: u64 = 1 << 20;
/// The file system's size, the volume's plaintext (64 MiB with its header).
const DATA: u64 = 48 * MIB;

/// The files of the test file system (path inside it, contents), and the
/// one the guest writes into it while the reencryption runs.
struct Files {
    known: Vec<(&'static str, Vec<u8>)>,
    during: Vec<u8>,
}

impl Files {
    fn all(&self) -> Vec<(&str, &[u8])> {
        let mut all: Vec<(&str, &[u8])> = self.known.iter().map(|(n, b)| (*n, &b[..])).collect();
        all.push(("during.bin", &self.during));
        all
    }
}

/// A LUKS2 volume (4096-byte sectors) holding an ext4 file system of
/// known files, made on the host (`mkfs.ext4 -d`, `rampart import`), and
/// `during.src` in `dir` for the guest to copy in; returns the volume, its
/// passphrase file and the files.
fn ext4_volume(dir: &TempDir, seed: u64) -> (PathBuf, PathBuf, Files) {
    let files = Files {
        known: vec![
            ("big.bin", random_bytes(seed, 6 << 20)),
            ("small.bin", random_bytes(seed + 1, 300 << 10)),
            ("dir/note.txt", b"written on the host before any reencryption\n".to_vec()),
        ],
        during: random_bytes(seed + 2, 2 << 20),
    };
    let root = dir.join("files");
    for (name, bytes) in &files.known {
        let path = root.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    dir.file("during.src", &files.during);
    let image = dir.sparse("fs.img", DATA);
    // 4096-byte blocks: the kernel mounts no smaller ones on a mapping of
    // 4096-byte sectors.
    let mkfs =
        run("mkfs.ext4", &["-q", "-F", "-b", "4096", "-L", "known", "-d", p(&root), p(&image)]);
    ok("mkfs.ext4", mkfs);
    let key = dir.file("key", b"online reencryption passphrase");
    let vol = dir.join("vol");
    let size = (DATA + 16 * MIB).to_string();
    let mut format = vec!["format", p(&vol), "--size", &size, "--key-file", p(&key), "-q"];
    format.extend_from_slice(PBKDF2);
    ok("rampart format", rampart(&format));
    ok("rampart import", rampart(&["import", p(&vol), p(&image), "--key-file", p(&key)]));
    (vol, key, files)
}

/// Asserts `image` is a clean ext4 file system (`fsck.ext4 -fn`) holding
/// every file of `files` with its contents (read back by debugfs).
fn check_filesystem(dir: &TempDir, what: &str, image: &Path, files: &Files) {
    ok(&format!("{what}: fsck.ext4 -fn"), run("fsck.ext4", &["-fn", p(image)]));
    for (name, want) in files.all() {
        let out = dir.join("debugfs.out");
        let _ = std::fs::remove_file(&out);
        let request = format!("dump /{name} {}", p(&out));
        ok("debugfs", run("debugfs", &["-R", &request, p(image)]));
        let got = std::fs::read(&out).unwrap_or_default();
        assert_same(&format!("{what}: /{name}"), &got, want);
    }
}

/// `rampart dump --json`'s `reencryption` (null when none is in progress).
fn reencryption(vol: &Path) -> serde_json::Value {
    let out = ok("rampart dump --json", rampart(&["dump", "--json", p(vol)]));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["reencryption"].clone()
}

/// Asserts the header carries no trace of a reencryption, as cryptsetup
/// and Rampart read it.
fn assert_finished(what: &str, vol: &Path, key: &Path) {
    let json = luks2_json(vol, 0);
    assert_eq!(json["segments"].as_object().unwrap().len(), 1, "{what}: {json}");
    assert!(json["segments"]["0"].get("flags").is_none(), "{what}: {json}");
    assert!(json["config"].get("requirements").is_none(), "{what}: {json}");
    for (id, keyslot) in json["keyslots"].as_object().unwrap() {
        assert_eq!(keyslot["type"], "luks2", "{what}: keyslot {id}: {json}");
    }
    assert!(reencryption(vol).is_null(), "{what}: rampart dump shows a reencryption");
    ok(
        &format!("{what}: cryptsetup opens the result"),
        cryptsetup(&["open", "--test-passphrase", "--key-file", p(key), p(vol)]),
    );
}

/// The plaintext of `vol`, exported by Rampart to `dir/NAME`.
fn export(dir: &TempDir, vol: &Path, key: &Path, name: &str) -> PathBuf {
    let out = dir.join(name);
    ok("rampart export", rampart(&["export", p(vol), p(&out), "--key-file", p(key)]));
    out
}

/// The last `device_bytes` and `device_size` of cryptsetup's
/// `--progress-json` lines in `text`.
fn progress(text: &str) -> (u64, u64) {
    let last = text
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .unwrap_or_else(|| panic!("no progress line from cryptsetup:\n{text}"));
    let field = |name: &str| last[name].as_str().unwrap().parse::<u64>().unwrap();
    (field("device_bytes"), field("device_size"))
}

/// A `rampart reencrypt` killed in the middle of a hotzone (the crash
/// hook) is finished by the kernel: the guest's `cryptsetup open` repairs
/// the hotzone, `cryptsetup reencrypt --resume-only` runs on the mounted,
/// active device while a file is written into it, and the file system is
/// clean with every file, in the kernel's view and in Rampart's (the same
/// plaintext, under a new volume key).
#[test]
fn the_kernel_resumes_online_a_reencryption_rampart_crashed_in() {
    tool("qemu-system-x86_64");
    tool("cryptsetup");
    let dir = TempDir::new("kreenc-to-kernel");
    let (vol, key, files) = ext4_volume(&dir, 51);
    let old_key = cryptsetup_volume_key(&vol, &key);

    // Five 4 MiB hotzones done, half of the sixth written: a crash.
    let mut args = vec!["reencrypt", p(&vol), "--key-file", p(&key), "--hotzone-size", "4M"];
    args.extend_from_slice(PBKDF2);
    let out = rampart_env(&args, &[("RAMPART_REENCRYPT_CRASH_AFTER", "5")]);
    assert_eq!(
        out.status.code(),
        Some(137),
        "{}",
        describe("rampart reencrypt (crash hook)", &out)
    );
    let state = reencryption(&vol);
    assert_eq!(state["done_bytes"], 20 * MIB, "{state}");
    assert!(has_hotzone(&vol), "the crash left no hotzone in reencryption: {state}");

    let script = format!(
        r#"{STEP}
loop=$(losetup -f --show {vol})
step open cryptsetup open --key-file {key} $loop fs
step table-before dmsetup table fs
mkdir /tmp/mnt
step mount mount /dev/mapper/fs /tmp/mnt
cryptsetup reencrypt --resume-only --key-file {key} --hotzone-size 4M \
  --progress-json --progress-frequency 1 $loop >reencrypt.out 2>&1 &
pid=$!
step write dd if=during.src of=/tmp/mnt/during.bin bs=256k conv=fsync
if kill -0 $pid; then echo running; else echo finished; fi >after-write
rc=0; wait $pid || rc=$?; echo $rc >reencrypt.rc
cat reencrypt.out
step table-after dmsetup table fs
step umount umount /tmp/mnt
step fsck fsck.ext4 -fn /dev/mapper/fs
step read dd if=/dev/mapper/fs of=kernel-plain.img bs=1M
step close cryptsetup close fs
dmsetup ls >dm-after-close
losetup -d $loop
"#,
        vol = p(&vol),
        key = p(&key),
    );
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(600));
    guest.assert_ok("the online resume script");

    step_ok(&dir, "open");
    // The repaired volume maps as two segments: new key, then old key.
    let table = step_ok(&dir, "table-before");
    assert_eq!(table.lines().count(), 2, "dm table after open:\n{table}");
    assert!(table.lines().all(|l| l.contains(" crypt aes-xts-plain64 ")), "{table}");
    step_ok(&dir, "mount");
    step_ok(&dir, "write");
    let after_write = std::fs::read_to_string(dir.join("after-write")).unwrap();
    let reencrypt_out = std::fs::read_to_string(dir.join("reencrypt.out")).unwrap();
    assert_eq!(
        after_write.trim(),
        "running",
        "cryptsetup reencrypt finished before the file was written:\n{reencrypt_out}"
    );
    let rc = std::fs::read_to_string(dir.join("reencrypt.rc")).unwrap();
    assert_eq!(rc.trim(), "0", "cryptsetup reencrypt --resume-only failed:\n{reencrypt_out}");
    assert!(
        reencrypt_out.contains("Auto-detected active dm device 'fs'"),
        "cryptsetup did not re-encrypt online:\n{reencrypt_out}"
    );
    let (done, total) = progress(&reencrypt_out);
    assert_eq!((done, total), (DATA, DATA), "{reencrypt_out}");
    let table = step_ok(&dir, "table-after");
    assert_eq!(table.lines().count(), 1, "dm table after the run:\n{table}");
    step_ok(&dir, "umount");
    step_ok(&dir, "fsck");
    step_ok(&dir, "read");
    step_ok(&dir, "close");
    let left = std::fs::read_to_string(dir.join("dm-after-close")).unwrap();
    assert_eq!(left.trim(), "No devices found", "mappings left after close");

    // Rampart on the host reads what the kernel wrote, the same bytes.
    assert_finished("after the kernel's run", &vol, &key);
    assert_ne!(cryptsetup_volume_key(&vol, &key), old_key, "the volume key did not change");
    let host = export(&dir, &vol, &key, "host-plain.img");
    let kernel = std::fs::read(dir.join("kernel-plain.img")).unwrap();
    assert_same(
        "Rampart's plaintext against the kernel's",
        &std::fs::read(&host).unwrap(),
        &kernel,
    );
    check_filesystem(&dir, "after the kernel's run", &host, &files);
}

/// A `cryptsetup reencrypt` running online on the mounted volume in the
/// kernel, a file written meanwhile, is killed (SIGKILL) a third of the way
/// or more; after the guest tears down the mappings, `rampart reencrypt
/// --resume-only` on the host finishes it with the plaintext the kernel
/// showed before the kill, byte for byte, and the kernel, booted again,
/// opens and checks the result.
#[test]
fn rampart_resumes_an_online_kernel_reencryption_killed_midway() {
    tool("qemu-system-x86_64");
    tool("cryptsetup");
    let dir = TempDir::new("kreenc-from-kernel");
    let (vol, key, files) = ext4_volume(&dir, 61);
    let old_key = cryptsetup_volume_key(&vol, &key);
    let third = DATA / 3;

    let script = format!(
        r#"{STEP}
loop=$(losetup -f --show {vol})
step open cryptsetup open --key-file {key} $loop fs
mkdir /tmp/mnt
step mount mount /dev/mapper/fs /tmp/mnt
sync
cryptsetup reencrypt --key-file {key} {pbkdf} --hotzone-size 2M \
  --progress-json --progress-frequency 1 $loop >reencrypt.out 2>&1 &
pid=$!
step write dd if=during.src of=/tmp/mnt/during.bin bs=256k conv=fsync
# Read-only from here on: nothing is in flight when the run is killed.
step remount mount -o remount,ro /tmp/mnt
if kill -0 $pid; then echo running; else echo finished; fi >after-write
step snapshot dd if=/dev/mapper/fs of=plain-before-kill.img bs=1M
set +x
while kill -0 $pid 2>/dev/null; do
  done_bytes=$(tail -1 reencrypt.out | sed -n 's/.*"device_bytes":"\([0-9]*\)".*/\1/p')
  if [ "${{done_bytes:-0}}" -ge {third} ]; then kill -9 $pid; break; fi
  sleep 0.2
done
set -x
rc=0; wait $pid || rc=$?; echo $rc >killed.rc
cat reencrypt.out
dmsetup info -c >dm-after-kill
dmsetup table >table-after-kill
# A killed online run can leave its hotzone mapping suspended; resumed,
# the stack comes down (the file system writes nothing: read-only).
for dev in $(dmsetup info -c --noheadings -o name,attr | awk -F: '$2 ~ /s/ {{print $1}}'); do
  dmsetup resume $dev
done
step umount umount /tmp/mnt
step close cryptsetup close fs
dmsetup ls >dm-after-close
losetup -d $loop
"#,
        vol = p(&vol),
        key = p(&key),
        pbkdf = PBKDF2.join(" "),
    );
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(600));
    guest.assert_ok("the online reencryption script");

    step_ok(&dir, "open");
    step_ok(&dir, "mount");
    step_ok(&dir, "write");
    step_ok(&dir, "remount");
    let reencrypt_out = std::fs::read_to_string(dir.join("reencrypt.out")).unwrap();
    let after_write = std::fs::read_to_string(dir.join("after-write")).unwrap();
    assert_eq!(
        after_write.trim(),
        "running",
        "cryptsetup reencrypt finished before the file was written:\n{reencrypt_out}"
    );
    assert!(
        reencrypt_out.contains("Auto-detected active dm device 'fs'"),
        "cryptsetup did not re-encrypt online:\n{reencrypt_out}"
    );
    step_ok(&dir, "snapshot");
    let killed = std::fs::read_to_string(dir.join("killed.rc")).unwrap();
    assert_eq!(killed.trim(), "137", "cryptsetup was not killed mid-run:\n{reencrypt_out}");
    let dm = std::fs::read_to_string(dir.join("dm-after-kill")).unwrap();
    assert!(dm.contains("fs-overlay"), "no online reencryption stack at the kill:\n{dm}");
    step_ok(&dir, "umount");
    step_ok(&dir, "close");
    let left = std::fs::read_to_string(dir.join("dm-after-close")).unwrap();
    assert_eq!(left.trim(), "No devices found", "mappings left after close");

    // What the kill left: cryptsetup's reencryption, a third done or more.
    let state = reencryption(&vol);
    assert_eq!(state["mode"], "reencrypt", "{state}");
    assert_eq!(state["resilience"], "checksum", "{state}");
    let done = state["done_bytes"].as_u64().unwrap();
    assert!((third..DATA).contains(&done), "progress at the kill: {state}");
    let hot = has_hotzone(&vol);

    // Rampart finishes it on the host.
    let out = ok(
        "rampart reencrypt --resume-only",
        rampart(&["reencrypt", "--resume-only", p(&vol), "--key-file", p(&key)]),
    );
    assert!(
        text(&out.stderr).contains("Re-encrypted") || text(&out.stdout).contains("Re-encrypted"),
        "{}",
        describe("rampart reencrypt --resume-only", &out)
    );
    assert_finished(&format!("after Rampart's resume (hotzone in progress: {hot})"), &vol, &key);
    assert_ne!(cryptsetup_volume_key(&vol, &key), old_key, "the volume key did not change");
    let host = export(&dir, &vol, &key, "host-plain.img");
    let before = std::fs::read(dir.join("plain-before-kill.img")).unwrap();
    assert_eq!(before.len() as u64, DATA, "the kernel's snapshot");
    assert_same(
        "Rampart's plaintext against the kernel's before the kill",
        &std::fs::read(&host).unwrap(),
        &before,
    );
    check_filesystem(&dir, "after Rampart's resume", &host, &files);

    // The kernel opens the result again: same plaintext, clean file system.
    let script = format!(
        r#"{STEP}
loop=$(losetup -f --show {vol})
step reopen cryptsetup open --key-file {key} $loop fs
step retable dmsetup table fs
step refsck fsck.ext4 -fn /dev/mapper/fs
step reread dd if=/dev/mapper/fs of=kernel-final.img bs=1M
step reclose cryptsetup close fs
losetup -d $loop
"#,
        vol = p(&vol),
        key = p(&key),
    );
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(300));
    guest.assert_ok("the reopen script");
    step_ok(&dir, "reopen");
    let table = step_ok(&dir, "retable");
    assert_eq!(table.lines().count(), 1, "dm table of the finished volume:\n{table}");
    step_ok(&dir, "refsck");
    step_ok(&dir, "reread");
    step_ok(&dir, "reclose");
    assert_same(
        "the kernel's plaintext of Rampart's result",
        &std::fs::read(dir.join("kernel-final.img")).unwrap(),
        &std::fs::read(&host).unwrap(),
    );
}
