//! The kernel's dm-crypt and Rampart's volumes, both ways, under the test
//! kernel (`scripts/kernel-vm`): stock `cryptsetup open` maps volumes
//! that Rampart formatted (LUKS2 with 512- and 4096-byte sectors, LUKS1,
//! a detached header), re-encrypted (new key, new cipher, key size and
//! sector size, new passphrase), cloned and encrypted in place from plain
//! images, and reads back exactly the data Rampart wrote, under the very
//! volume key Rampart's header holds; an ext4 file system written through
//! `rampart serve` passes the kernel's fsck and mounts; and file systems
//! the kernel wrote through dm-crypt (LUKS2, and LUKS1 with CBC-ESSIV)
//! are read by `rampart export` and `rampart serve`.
//!
//! The volumes live in the shared directory, which the guest mounts over
//! virtio-9p; cryptsetup cannot read a LUKS header from a regular file
//! there (9p reports an I/O block size of 258048 bytes, not a power of
//! two, and cryptsetup's block-wise reads fail with EIO), so the guest
//! puts every volume and header file on a loop device first, as it would
//! a disk.

use crate::helpers::kernel_support::*;
use crate::helpers::serve_support::{require, run, text, unix_uri, Serve, MIB, PBKDF2};

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The shell functions both guest scripts use. `step NAME STEP CMD...`
/// runs CMD with its output in `res/NAME.STEP` and its exit status in
/// `res/NAME.STEP.rc`, and returns that status (callers `|| return`, so a
/// failed step skips the steps that need it; the host then names it).
const STEPS: &str = r#"
mkdir -p res
step() {
  n=$1; s=$2; shift 2
  rc=0
  "$@" >res/$n.$s 2>&1 || rc=$?
  echo $rc >res/$n.$s.rc
  return $rc
}
"#;

/// Reads what the guest's `step` functions left, for assertions that
/// name the volume and the step.
struct Steps<'a> {
    dir: &'a TempDir,
    guest: &'a GuestRun,
}

impl Steps<'_> {
    /// The step's exit status and output; panics when it never ran.
    fn get(&self, volume: &str, step: &str) -> (i32, String) {
        let out = std::fs::read_to_string(self.dir.join(&format!("res/{volume}.{step}")));
        let rc = std::fs::read_to_string(self.dir.join(&format!("res/{volume}.{step}.rc")));
        match (rc, out) {
            (Ok(rc), Ok(out)) => (rc.trim().parse().unwrap(), out),
            _ => panic!(
                "{volume}: step `{step}` never ran under the kernel (an earlier step of the \
                 script failed)\n--- script output ---\n{}",
                self.guest.transcript
            ),
        }
    }

    /// Asserts that the step succeeded; returns its output.
    #[track_caller]
    fn ok(&self, volume: &str, step: &str) -> String {
        let (rc, out) = self.get(volume, step);
        assert_eq!(rc, 0, "{volume}: `{step}` failed under the kernel (status {rc}):\n{out}");
        out
    }

    /// Asserts that the step failed; returns its output.
    #[track_caller]
    fn fails(&self, volume: &str, step: &str) -> String {
        let (rc, out) = self.get(volume, step);
        assert_ne!(rc, 0, "{volume}: `{step}` succeeded under the kernel, and must not:\n{out}");
        out
    }
}

/// `rampart dump --json --dump-volume-key` of a volume (and its detached
/// header).
fn dump_with_key(vol: &Path, header: Option<&Path>, key: &Path) -> serde_json::Value {
    let mut args = vec!["dump", p(vol), "--json", "--dump-volume-key", "--key-file", p(key)];
    if let Some(header) = header {
        args.extend(["--header", p(header)]);
    }
    let out = ok(&format!("rampart dump {}", vol.display()), rampart(&args));
    serde_json::from_slice(&out.stdout).unwrap()
}

fn volume_key(dump: &serde_json::Value) -> String {
    dump["volume_key"].as_str().unwrap().to_owned()
}

/// `rampart ARGS` with the cheap KDF appended, asserting success.
fn rampart_ok(what: &str, args: &[&str]) {
    let mut all = args.to_vec();
    all.extend_from_slice(PBKDF2);
    ok(what, rampart(&all));
}

/// One volume the kernel maps in the first test, and what it must find.
struct Mapped {
    /// The device-mapper name, and how the assertions name the volume.
    name: &'static str,
    vol: PathBuf,
    header: Option<PathBuf>,
    key: PathBuf,
    /// The plaintext the mapping must start with, and its length.
    expected: PathBuf,
    bytes: u64,
    /// The mapping's size in bytes.
    size: u64,
    cipher: &'static str,
    key_bits: usize,
    sector: u64,
    /// A volume key the kernel must no longer be given (the source's).
    not_key: Option<String>,
    /// A passphrase that must no longer open the volume.
    refused: Option<PathBuf>,
}

/// A volume whose mapping holds 8 MiB, all of them `expected`, with
/// LUKS2's default cipher and sector size; tests change what differs.
fn mapped(
    name: &'static str,
    vol: PathBuf,
    header: Option<PathBuf>,
    key: &Path,
    expected: PathBuf,
) -> Mapped {
    Mapped {
        name,
        vol,
        header,
        key: key.to_owned(),
        expected,
        bytes: 8 * MIB,
        size: 8 * MIB,
        cipher: "aes-xts-plain64",
        key_bits: 512,
        sector: 4096,
        not_key: None,
        refused: None,
    }
}

/// Stock cryptsetup under the kernel opens every kind of volume Rampart
/// writes (LUKS2 with 512- and 4096-byte sectors, LUKS1, a detached
/// header; after `rampart reencrypt` to a new key, cipher, key size and
/// sector size or to a new passphrase; `rampart clone` of LUKS2 and LUKS1;
/// plain images encrypted in place by `rampart reencrypt --encrypt`, with
/// the header attached or detached): dm-crypt's table carries the cipher,
/// sector size, data offset and volume key Rampart's header holds, and
/// the mapped device reads exactly the plaintext Rampart wrote.
#[test]
fn kernel_dm_crypt_opens_what_rampart_formats_reencrypts_clones_and_encrypts() {
    require(&["qemu-system-x86_64", "cryptsetup", "dmsetup", "losetup", "blockdev", "cmp"]);
    let dir = TempDir::new("kdm-open");
    let key = dir.file("key", b"dm-crypt interop passphrase");
    let key2 = dir.file("key2", b"the passphrase after the change");
    const DATA: u64 = 8 * MIB;
    let data = |name: &str, seed: u64| dir.file(name, &random_bytes(seed, DATA as usize));
    let mut cases = Vec::new();
    let format = |vol: &Path, size: &str, extra: &[&str]| {
        let mut args = vec!["format", p(vol), "--size", size, "--key-file", p(&key), "-q"];
        args.extend_from_slice(extra);
        rampart_ok(&format!("rampart format {}", vol.display()), &args);
    };
    let import = |vol: &Path, header: Option<&Path>, data: &Path| {
        let mut args = vec!["import", p(vol), p(data), "--key-file", p(&key)];
        if let Some(header) = header {
            args.extend(["--header", p(header)]);
        }
        ok(&format!("rampart import into {}", vol.display()), rampart(&args));
    };

    // 1. Formatted by Rampart, data imported.
    let (l2_512, d_512) = (dir.join("luks2-512.vol"), data("luks2-512.bin", 1));
    format(&l2_512, "24M", &["--sector-size", "512"]);
    import(&l2_512, None, &d_512);
    cases.push(Mapped { sector: 512, ..mapped("luks2-512", l2_512, None, &key, d_512) });

    let (l2_4k, d_4k) = (dir.join("luks2-4096.vol"), data("luks2-4096.bin", 2));
    format(&l2_4k, "24M", &["--sector-size", "4096"]);
    import(&l2_4k, None, &d_4k);
    cases.push(mapped("luks2-4096", l2_4k.clone(), None, &key, d_4k.clone()));

    let (l1, d_l1) = (dir.join("luks1.vol"), data("luks1.bin", 3));
    format(&l1, "10M", &["--type", "luks1"]);
    import(&l1, None, &d_l1);
    cases.push(Mapped { sector: 512, ..mapped("luks1", l1.clone(), None, &key, d_l1.clone()) });

    let (det, det_hdr, d_det) =
        (dir.join("detached.vol"), dir.join("detached.hdr"), data("detached.bin", 4));
    format(&det, "8M", &["--header", p(&det_hdr)]);
    import(&det, Some(&det_hdr), &d_det);
    cases.push(mapped("detached", det, Some(det_hdr), &key, d_det));

    // 2. Re-encrypted: a new volume key with a new cipher, key size and
    // sector size; and a new key under a new passphrase.
    let (re_c, d_re_c) = (dir.join("reenc-cipher.vol"), data("reenc-cipher.bin", 5));
    format(&re_c, "24M", &["--sector-size", "512"]);
    import(&re_c, None, &d_re_c);
    let before = volume_key(&dump_with_key(&re_c, None, &key));
    rampart_ok(
        "rampart reencrypt reenc-cipher.vol (aes-cbc-essiv:sha256, 256 bits, 4096-byte sectors)",
        &[
            "reencrypt",
            p(&re_c),
            "--key-file",
            p(&key),
            "-c",
            "aes-cbc-essiv:sha256",
            "-s",
            "256",
            "--sector-size",
            "4096",
            "-q",
        ],
    );
    cases.push(Mapped {
        cipher: "aes-cbc-essiv:sha256",
        key_bits: 256,
        not_key: Some(before),
        ..mapped("reenc-cipher", re_c, None, &key, d_re_c)
    });

    let (re_k, d_re_k) = (dir.join("reenc-key.vol"), data("reenc-key.bin", 6));
    format(&re_k, "24M", &[]);
    import(&re_k, None, &d_re_k);
    let before = volume_key(&dump_with_key(&re_k, None, &key));
    rampart_ok(
        "rampart reencrypt reenc-key.vol --new-key-file",
        &["reencrypt", p(&re_k), "--key-file", p(&key), "--new-key-file", p(&key2), "-q"],
    );
    cases.push(Mapped {
        not_key: Some(before),
        refused: Some(key.clone()),
        ..mapped("reenc-key", re_k, None, &key2, d_re_k)
    });

    // Clones: LUKS2 under a new passphrase, LUKS1 under the same one.
    let clone2 = dir.join("clone-luks2.vol");
    rampart_ok(
        "rampart clone luks2-4096.vol",
        &["clone", p(&l2_4k), p(&clone2), "--key-file", p(&key), "--new-key-file", p(&key2)],
    );
    cases.push(Mapped {
        not_key: Some(volume_key(&dump_with_key(&l2_4k, None, &key))),
        refused: Some(key.clone()),
        ..mapped("clone-luks2", clone2, None, &key2, d_4k)
    });

    let clone1 = dir.join("clone-luks1.vol");
    rampart_ok("rampart clone luks1.vol", &["clone", p(&l1), p(&clone1), "--key-file", p(&key)]);
    cases.push(Mapped {
        sector: 512,
        not_key: Some(volume_key(&dump_with_key(&l1, None, &key))),
        ..mapped("clone-luks1", clone1, None, &key, d_l1)
    });

    // Plain images encrypted in place: the data shifted up behind a new
    // 8 MiB header (--reduce-device-size 16M on 24 MiB: the mapping is
    // 16 MiB, of which the first 24 - 16 = 8 MiB hold the image's data, as
    // with cryptsetup), and with a detached header, where it stays put.
    let image = random_bytes(7, (24 * MIB) as usize);
    let enc = dir.file("encrypt.vol", &image);
    let d_enc = dir.file("encrypt.bin", &image[..DATA as usize]);
    rampart_ok(
        "rampart reencrypt --encrypt --reduce-device-size 16M",
        &[
            "reencrypt",
            p(&enc),
            "--encrypt",
            "--reduce-device-size",
            "16M",
            "--key-file",
            p(&key),
            "-q",
        ],
    );
    cases.push(Mapped { size: 16 * MIB, ..mapped("encrypt", enc, None, &key, d_enc) });

    let d_enc_det = data("encrypt-detached.bin", 8);
    let enc_det = dir.join("encrypt-detached.vol");
    std::fs::copy(&d_enc_det, &enc_det).unwrap();
    let enc_det_hdr = dir.join("encrypt-detached.hdr");
    rampart_ok(
        "rampart reencrypt --encrypt --header",
        &[
            "reencrypt",
            p(&enc_det),
            "--encrypt",
            "--header",
            p(&enc_det_hdr),
            "--key-file",
            p(&key),
            "-q",
        ],
    );
    cases.push(mapped("encrypt-detached", enc_det, Some(enc_det_hdr), &key, d_enc_det));

    // One boot: each volume (and header) on a loop device, opened by
    // cryptsetup (the key in the table, not the keyring, so that the
    // table shows it), read and compared, closed.
    let mut script = String::from(STEPS);
    script.push_str(
        r#"
# check NAME VOL HEADER|- KEY BYTES EXPECTED [REFUSED_KEY]
check() {
  step $1 losetup losetup -f --show "$2" || return 0
  loop=$(cat res/$1.losetup)
  opt=
  if [ "$3" != - ]; then
    step $1 losetup-header losetup -f --show "$3" || return 0
    opt="--header $(cat res/$1.losetup-header)"
  fi
  if [ -n "$7" ]; then
    step $1 open-old-passphrase cryptsetup open --test-passphrase $opt --key-file "$7" $loop || true
  fi
  if step $1 open cryptsetup open --disable-keyring $opt --key-file "$4" $loop $1; then
    step $1 size blockdev --getsize64 /dev/mapper/$1 || true
    step $1 table dmsetup table --showkeys $1 || true
    step $1 cmp cmp -n "$5" /dev/mapper/$1 "$6" || true
    step $1 close cryptsetup close $1 || true
  fi
  losetup -d $loop
  if [ "$3" != - ]; then losetup -d $(cat res/$1.losetup-header); fi
}
"#,
    );
    for c in &cases {
        script.push_str(&format!(
            "check {} {} {} {} {} {} {}\n",
            c.name,
            p(&c.vol),
            c.header.as_deref().map_or("-", p),
            p(&c.key),
            c.bytes,
            p(&c.expected),
            c.refused.as_deref().map_or("", p),
        ));
    }
    script.push_str("dmsetup ls >res/dmsetup-ls 2>&1\nlosetup -a >res/losetup-a\n");
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(900));
    guest.assert_ok("opening Rampart's volumes with cryptsetup");
    let steps = Steps { dir: &dir, guest: &guest };

    for c in &cases {
        let name = c.name;
        let open = steps.ok(name, "open");
        let dump = dump_with_key(&c.vol, c.header.as_deref(), &c.key);
        let size: u64 = steps.ok(name, "size").trim().parse().unwrap();
        assert_eq!(size, c.size, "{name}: the kernel's mapping has {size} bytes, not {}", c.size);
        // "0 SECTORS crypt CIPHER KEY IV_OFFSET DEVICE OFFSET [N OPTIONS]"
        let table = steps.ok(name, "table");
        let fields: Vec<&str> = table.split_whitespace().collect();
        assert!(
            fields.len() >= 8 && fields[2] == "crypt",
            "{name}: not a crypt table: {table} {open}"
        );
        assert_eq!(fields[3], c.cipher, "{name}: the kernel's cipher ({table})");
        let kernel_key = fields[4];
        assert_eq!(kernel_key.len() * 4, c.key_bits, "{name}: the kernel's key size ({table})");
        assert_eq!(
            kernel_key,
            volume_key(&dump),
            "{name}: the kernel maps another volume key than Rampart's header holds"
        );
        if let Some(old) = &c.not_key {
            assert_ne!(kernel_key, old, "{name}: the kernel still maps the source's volume key");
        }
        let offset = dump["data_offset"].as_u64().unwrap() / 512;
        assert_eq!(
            fields[7],
            offset.to_string(),
            "{name}: the data offset in the kernel's table ({table})"
        );
        let sector = fields
            .iter()
            .find_map(|f| f.strip_prefix("sector_size:"))
            .map_or(512, |s| s.parse::<u64>().unwrap());
        assert_eq!(sector, c.sector, "{name}: the kernel's sector size ({table})");
        let cmp = steps.get(name, "cmp");
        assert_eq!(
            cmp.0, 0,
            "{name}: /dev/mapper/{name} does not read the {} bytes Rampart wrote: {}",
            c.bytes, cmp.1
        );
        steps.ok(name, "close");
        if c.refused.is_some() {
            steps.fails(name, "open-old-passphrase");
        }
    }
    let left = std::fs::read_to_string(dir.join("res/dmsetup-ls")).unwrap();
    assert!(left.contains("No devices found"), "mappings left open: {left}");
}

/// The files every file system here holds: a short text and an odd-sized
/// random file.
const NOTE: &[u8] = b"written through rampart serve, read by the kernel\n";

fn fsck_and_cat(what: &str, image: &Path, file: &str) -> Vec<u8> {
    ok(&format!("fsck.ext4 -fn on {what}"), run("fsck.ext4", &["-fn", p(image)]));
    let request = format!("cat /{file}");
    let out =
        ok(&format!("debugfs cat /{file} on {what}"), run("debugfs", &["-R", &request, p(image)]));
    out.stdout
}

/// File systems both ways: ext4 images (`mkfs.ext4 -d`) written with
/// nbdcopy through `rampart serve` into a LUKS2 and a LUKS1 volume pass
/// the kernel's `fsck.ext4 -fn` on the dm-crypt mapping and mount with
/// their files intact; and ext4 file systems the kernel made and wrote
/// through dm-crypt on volumes `cryptsetup luksFormat` made (LUKS2 with
/// 4096-byte sectors, LUKS1 with aes-cbc-essiv:sha256) read back through
/// `rampart export` and `rampart serve` as clean file systems holding the
/// files the kernel wrote.
#[test]
fn kernel_dm_crypt_and_rampart_serve_read_each_others_file_systems() {
    require(&[
        "qemu-system-x86_64",
        "cryptsetup",
        "losetup",
        "mkfs.ext4",
        "fsck.ext4",
        "debugfs",
        "nbdcopy",
        "cmp",
    ]);
    let dir = TempDir::new("kdm-fs");
    let key = dir.file("key", b"file system passphrase");
    let tree = dir.join("tree");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("note.txt"), NOTE).unwrap();
    let random = random_bytes(21, 1_234_567);
    std::fs::write(tree.join("random.bin"), &random).unwrap();
    let kernel_file = dir.file("kernel.bin", &random_bytes(22, 777_777));

    // Rampart's side: a 32 MiB ext4 image copied through rampart serve
    // into a LUKS2 and a LUKS1 volume, each 32 MiB of plaintext.
    const FS: u64 = 32 * MIB;
    let image = dir.join("fs.img");
    ok(
        "mkfs.ext4 -d",
        run("mkfs.ext4", &["-q", "-F", "-b", "4096", "-d", p(&tree), p(&image), "32M"]),
    );
    let served2 = dir.join("served-luks2.vol");
    let served1 = dir.join("served-luks1.vol");
    for (vol, size, kind) in [(&served2, "48M", "luks2"), (&served1, "34M", "luks1")] {
        rampart_ok(
            &format!("rampart format {kind}"),
            &["format", p(vol), "--size", size, "--type", kind, "--key-file", p(&key), "-q"],
        );
    }
    let socket = dir.join("nbd.sock");
    let specs = [format!("{}=luks2", p(&served2)), format!("{}=luks1", p(&served1))];
    let mut server = Serve::start(
        &[&specs[0], &specs[1], "--key-file", p(&key), "--socket", p(&socket)],
        dir.join("serve.log"),
        2,
    );
    for name in ["luks2", "luks1"] {
        ok(
            &format!("nbdcopy of the ext4 image into the {name} export"),
            run("nbdcopy", &[p(&image), &unix_uri(&socket, name)]),
        );
    }
    server.stop();

    // The kernel's side: two volumes cryptsetup formats, on which the
    // kernel makes and writes ext4.
    let made2 = dir.sparse("kernel-luks2.vol", 48 * MIB);
    let made1 = dir.sparse("kernel-luks1.vol", 34 * MIB);

    let mut script = String::from(STEPS);
    script.push_str(&format!(
        r#"
mkdir -p /tmp/mnt
# read NAME VOL: the kernel checks and mounts what rampart serve wrote
read_back() {{
  step $1 losetup losetup -f --show "$2" || return 0
  loop=$(cat res/$1.losetup)
  if step $1 open cryptsetup open --key-file {key} $loop $1; then
    step $1 fsck fsck.ext4 -fn /dev/mapper/$1 || true
    if step $1 mount mount -o ro /dev/mapper/$1 /tmp/mnt; then
      step $1 cmp-note cmp /tmp/mnt/note.txt {tree}/note.txt || true
      step $1 cmp-random cmp /tmp/mnt/random.bin {tree}/random.bin || true
      step $1 umount umount /tmp/mnt || true
    fi
    step $1 close cryptsetup close $1 || true
  fi
  losetup -d $loop
}}
# write NAME VOL FORMAT_OPTIONS...: the kernel formats, makes ext4, writes
write() {{
  n=$1; vol=$2; shift 2
  step $n losetup losetup -f --show "$vol" || return 0
  loop=$(cat res/$n.losetup)
  if step $n luksFormat cryptsetup luksFormat --batch-mode --pbkdf pbkdf2 \
      --pbkdf-force-iterations 1000 --key-file {key} "$@" $loop &&
    step $n open cryptsetup open --key-file {key} $loop $n; then
    if step $n mkfs mkfs.ext4 -q /dev/mapper/$n &&
      step $n mount mount /dev/mapper/$n /tmp/mnt; then
      step $n write-file cp {kernel_file} /tmp/mnt/kernel.bin || true
      step $n write-note sh -c "echo 'written by the kernel on $n' >/tmp/mnt/note.txt" || true
      step $n umount umount /tmp/mnt || true
    fi
    step $n close cryptsetup close $n || true
  fi
  losetup -d $loop
}}
read_back served-luks2 {served2}
read_back served-luks1 {served1}
write kernel-luks2 {made2} --type luks2 --sector-size 4096
write kernel-luks1 {made1} --type luks1 --cipher aes-cbc-essiv:sha256 --key-size 256
dmsetup ls >res/dmsetup-ls 2>&1
sync
"#,
        key = p(&key),
        tree = p(&tree),
        kernel_file = p(&kernel_file),
        served2 = p(&served2),
        served1 = p(&served1),
        made2 = p(&made2),
        made1 = p(&made1),
    ));
    let guest = run_in_kernel(&dir, &script, &["ext4"], Duration::from_secs(900));
    guest.assert_ok("the file system checks under the kernel");
    let steps = Steps { dir: &dir, guest: &guest };

    for name in ["served-luks2", "served-luks1"] {
        steps.ok(name, "open");
        let fsck = steps.get(name, "fsck");
        assert_eq!(
            fsck.0, 0,
            "{name}: the kernel's fsck.ext4 -fn finds the file system written through rampart \
             serve damaged (status {}):\n{}",
            fsck.0, fsck.1
        );
        steps.ok(name, "mount");
        for file in ["cmp-note", "cmp-random"] {
            steps.ok(name, file);
        }
        steps.ok(name, "umount");
        steps.ok(name, "close");
    }
    let left = std::fs::read_to_string(dir.join("res/dmsetup-ls")).unwrap();
    assert!(left.contains("No devices found"), "mappings left open: {left}");

    // Rampart reads what the kernel wrote: export and serve.
    let mut exported = Vec::new();
    for (name, vol) in [("kernel-luks2", &made2), ("kernel-luks1", &made1)] {
        for step in
            ["luksFormat", "open", "mkfs", "mount", "write-file", "write-note", "umount", "close"]
        {
            steps.ok(name, step);
        }
        let out = dir.join(&format!("{name}.img"));
        ok(
            &format!("{name}: rampart export of the volume the kernel wrote"),
            rampart(&["export", p(vol), p(&out), "--key-file", p(&key)]),
        );
        let size = std::fs::metadata(&out).unwrap().len();
        assert_eq!(size, FS, "{name}: rampart export gave {size} bytes of plaintext, not {FS}");
        let what = format!("{name} (the kernel's file system, as rampart export decrypts it)");
        assert_same(
            &format!("{name}: /kernel.bin"),
            &fsck_and_cat(&what, &out, "kernel.bin"),
            &random_bytes(22, 777_777),
        );
        let note = fsck_and_cat(&what, &out, "note.txt");
        assert_eq!(
            text(&note),
            format!("written by the kernel on {name}\n"),
            "{name}: /note.txt as rampart export decrypts it"
        );
        exported.push((name, vol, out));
    }
    let specs: Vec<String> =
        exported.iter().map(|(name, vol, _)| format!("{}={name}", p(vol))).collect();
    let socket = dir.join("read.sock");
    let mut server = Serve::start(
        &[&specs[0], &specs[1], "--key-file", p(&key), "--socket", p(&socket), "--read-only"],
        dir.join("serve-read.log"),
        2,
    );
    for (name, _, out) in &exported {
        let copy = dir.join(&format!("{name}.served.img"));
        ok(
            &format!("{name}: nbdcopy from rampart serve"),
            run("nbdcopy", &[&unix_uri(&socket, name), p(&copy)]),
        );
        assert_same(
            &format!("{name}: the file system rampart serve serves vs rampart export"),
            &std::fs::read(&copy).unwrap(),
            &std::fs::read(out).unwrap(),
        );
        let what = format!("{name} (the kernel's file system, as rampart serve serves it)");
        assert_same(
            &format!("{name}: /kernel.bin served"),
            &fsck_and_cat(&what, &copy, "kernel.bin"),
            &random_bytes(22, 777_777),
        );
    }
    server.stop();
}
