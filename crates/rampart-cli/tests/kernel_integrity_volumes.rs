//! LUKS2 volumes with authenticated encryption read and written by
//! Rampart's I/O layer (`rampart_volume::integrity`) and by the kernel
//! (dm-crypt over dm-integrity), in two boots of the test kernel:
//!
//! 1. The guest formats LUKS2 integrity volumes (`cryptsetup luksFormat
//!    --integrity hmac-sha256` in 512- and 4096-byte sectors,
//!    `hmac-sha512`, `aes-gcm-random` with `aead`; `--integrity-no-wipe`,
//!    volume keys from the host). Four it opens and writes (a known
//!    pattern at known sectors, across an interleave area boundary),
//!    copied while open (a journal to replay) and after the close; the
//!    others it leaves as formatted.
//! 2. On the host: Rampart reads the kernel-written volumes, crashed
//!    copies included, and gets exactly the pattern; Rampart's format
//!    gives the superblock and journal cryptsetup left, byte for byte;
//!    Rampart writes the formatted volumes (journal mode, with the
//!    journal lapped many times and partial sectors; direct mode; a
//!    committed journal whose copies home were lost; a wipe) and
//!    tampers with copies (a flipped bit, an old sector put back, two
//!    sectors swapped), which Rampart refuses naming the sector (an old
//!    version of a sector put back verifies: dm-crypt's tags bind data to
//!    its sector, not to its age, in the kernel as in Rampart).
//! 3. A second boot opens every Rampart-written volume with `cryptsetup
//!    open` and compares what it reads with what Rampart wrote (the wiped
//!    one reads as zeros everywhere), and reads the tampered sectors:
//!    the kernel refuses the flipped and swapped ones (EILSEQ, dm-crypt's
//!    `BLK_STS_PROTECTION`) while their neighbours read, and returns the
//!    old one.
//!
//! Images are made and opened in the guest's memory (`/run`) and copied
//! to the shared directory: loop devices over 9p files crash the guest
//! under dm-crypt with integrity (see `kernel_integrity_format`).

use crate::helpers::kernel_support::*;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rampart_luks::integrity::{Superblock, SUPERBLOCK_BYTES};
use rampart_luks::{IntegritySegment, Luks, SecretBytes};
use rampart_volume::{
    format_integrity, AuthenticatedDevice, BlockDevice, IntegrityMode, MemDevice,
};

/// A volume kind: (name suffix, cryptsetup options, key bits, volume key
/// bytes, sector size).
struct Kind {
    name: &'static str,
    options: &'static str,
    key_bits: u32,
    key_bytes: usize,
    sector: u32,
}

const KINDS: [Kind; 4] = [
    Kind {
        name: "hmac256",
        options: "--cipher aes-xts-plain64 --integrity hmac-sha256",
        key_bits: 512,
        key_bytes: 96,
        sector: 512,
    },
    Kind {
        name: "hmac256-4k",
        options: "--cipher aes-xts-plain64 --integrity hmac-sha256 --sector-size 4096",
        key_bits: 512,
        key_bytes: 96,
        sector: 4096,
    },
    Kind {
        name: "hmac512",
        options: "--cipher aes-xts-plain64 --integrity hmac-sha512",
        key_bits: 512,
        key_bytes: 128,
        sector: 512,
    },
    Kind {
        name: "aead",
        options: "--cipher aes-gcm-random --integrity aead",
        key_bits: 256,
        key_bytes: 32,
        sector: 512,
    },
];

/// The kernel's writes: (first 512-byte sector, pattern offset, bytes).
/// The second crosses the first interleave area's end (sector 32768).
const KERNEL_WRITES: [(u64, usize, usize); 3] =
    [(0, 0, 8192), (32760, 65536, 16384), (40000, 200_000, 65536)];

const GUEST_COMMON: &str = r#"mkdir -p res
work=/run/iv
mkdir -p $work
step() {
  s_name=$1; shift
  s_rc=0
  "$@" >res/$s_name.out 2>&1 || s_rc=$?
  echo $s_rc >res/$s_name.rc
  return $s_rc
}
fast="--pbkdf pbkdf2 --pbkdf-force-iterations 1000 --batch-mode --key-file pass""#;

/// Boot 1: `kernel NAME KEYBITS OPTIONS` formats, writes and copies;
/// `formatted NAME KEYBITS OPTIONS` formats only.
const GUEST_MAKE: &str = r#"
fmt_volume() {
  n=$1 keybits=$2; shift 2
  truncate -s 40M $work/$n.img
  loop=$(losetup -f --show $work/$n.img)
  step $n.format cryptsetup luksFormat --type luks2 $fast --volume-key-file $n.vk --key-size $keybits --integrity-no-wipe "$@" $loop || return 0
}
kernel() {
  fmt_volume "$@"
  n=$1
  step $n.open cryptsetup open --key-file pass $loop $n || return 0
  dd if=pattern.bin of=/dev/mapper/$n bs=4096 count=2 oflag=direct conv=notrunc,fsync status=none
  dd if=pattern.bin of=/dev/mapper/$n bs=4096 skip=16 seek=$((32760 / 8)) count=4 oflag=direct conv=notrunc,fsync status=none
  dd if=pattern.bin of=/dev/mapper/$n bs=8192 iflag=skip_bytes skip=200000 seek=$((40000 / 16)) count=8 oflag=direct conv=notrunc,fsync status=none
  sync
  echo written >res/$n.written
  # As a crash leaves it: open, written, flushed.
  cp --sparse=always $work/$n.img $n-crash.img
  step $n.close cryptsetup close $n
  losetup -d $loop
  cp --sparse=always $work/$n.img $n.img
  rm $work/$n.img
}
formatted() {
  fmt_volume "$@"
  n=$1
  losetup -d $loop
  cp --sparse=always $work/$n.img $n.img
  rm $work/$n.img
}
"#;

/// Boot 2: `check NAME [OPEN OPTIONS]` compares each range of NAME.ranges
/// ("offset bytes", at those bytes of NAME.expect in turn) with what
/// dm-crypt reads; `zeros NAME` compares the whole device with zeros;
/// `tampered NAME BLOCK BAD GOOD` reads the bad and good blocks.
const GUEST_CHECK: &str = r#"
attach() {
  n=$1; shift
  cp $n.img $work/$n.img
  loop=$(losetup -f --show $work/$n.img)
  step $n.open cryptsetup open --key-file pass "$@" $loop $n || return 1
}
detach() {
  step $1.close cryptsetup close $1 || true
  losetup -d $loop
  rm $work/$1.img
}
compare() {
  n=$1 pos=0
  while read off len; do
    # Direct: a buffered read takes whole pages, and the sectors beside
    # a written one may never have been written.
    dd if=/dev/mapper/$n of=$work/got bs=65536 iflag=direct,skip_bytes,count_bytes skip=$off count=$len status=none
    dd if=$n.expect of=$work/want bs=65536 iflag=skip_bytes,count_bytes skip=$pos count=$len status=none
    cmp $work/got $work/want || return 1
    pos=$((pos + len))
  done <$n.ranges
}
check() {
  n=$1; shift
  attach $n "$@" || return 0
  step $n.compare compare $n || true
  detach $n
}
zeros() {
  n=$1
  attach $n || return 0
  step $n.zeros cmp -n $(blockdev --getsize64 /dev/mapper/$n) /dev/mapper/$n /dev/zero || true
  detach $n
}
tampered() {
  n=$1 bs=$2 bad=$3 good=$4
  attach $n || return 0
  step $n.bad dd if=/dev/mapper/$n of=res/$n.block bs=$bs skip=$bad count=1 iflag=direct status=none || true
  step $n.good dd if=/dev/mapper/$n of=/dev/null bs=$bs skip=$good count=1 iflag=direct status=none || true
  detach $n
}
"#;

/// Pseudo-random bytes, each call from its own seed.
fn rnd(len: usize) -> Vec<u8> {
    static SEED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    random_bytes(SEED.fetch_add(1, std::sync::atomic::Ordering::Relaxed), len)
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn res(dir: &Path, name: &str) -> (String, String) {
    let rc = std::fs::read_to_string(dir.join(format!("res/{name}.rc")))
        .unwrap_or_else(|_| panic!("guest step {name} never ran"))
        .trim()
        .to_owned();
    let out = std::fs::read_to_string(dir.join(format!("res/{name}.out"))).unwrap_or_default();
    (rc, out)
}

#[track_caller]
fn res_ok(dir: &Path, name: &str) {
    let (rc, out) = res(dir, name);
    assert_eq!(rc, "0", "guest step {name} failed:\n{out}");
}

/// A volume image in memory with its segment and key.
struct Volume {
    mem: Arc<MemDevice>,
    segment: IntegritySegment,
    key: SecretBytes,
}

fn load(dir: &Path, file: &str, vk: &str) -> Volume {
    let bytes = read(dir, file);
    let mem = Arc::new(MemDevice::new(bytes.len()));
    mem.write_at(&bytes, 0).unwrap();
    let (header, _) = Luks::load(&std::fs::File::open(dir.join(file)).unwrap()).unwrap();
    let segment = header.integrity_segment().unwrap().unwrap();
    Volume { mem, segment, key: SecretBytes::new(read(dir, vk)) }
}

impl Volume {
    fn open(&self, mode: IntegrityMode) -> AuthenticatedDevice<Arc<MemDevice>> {
        AuthenticatedDevice::open(self.mem.clone(), &self.segment, &self.key, mode).unwrap()
    }

    fn save(&self, dir: &Path, file: &str) {
        save_sparse(&dir.join(file), &self.mem.snapshot());
    }
}

/// Writes an image leaving its zero runs as holes (the images go through
/// the shared directory to the guest).
fn save_sparse(path: &Path, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::File::create(path).unwrap();
    file.set_len(bytes.len() as u64).unwrap();
    for (i, chunk) in bytes.chunks(64 << 10).enumerate() {
        if chunk.iter().any(|&b| b != 0) {
            file.write_all_at(chunk, (i * (64 << 10)) as u64).unwrap();
        }
    }
}

/// What Rampart wrote to a volume: the plaintext of every written block.
struct Model {
    bytes: Vec<u8>,
    written: Vec<bool>,
    sector: usize,
}

impl Model {
    fn new(len: u64, sector: u32) -> Self {
        Self {
            bytes: vec![0; len as usize],
            written: vec![false; (len / u64::from(sector)) as usize],
            sector: sector as usize,
        }
    }

    fn write(&mut self, dev: &impl BlockDevice, data: &[u8], at: u64) {
        dev.write_at(data, at).unwrap();
        let at = at as usize;
        self.bytes[at..at + data.len()].copy_from_slice(data);
        for b in at / self.sector..(at + data.len()).div_ceil(self.sector) {
            self.written[b] = true;
        }
    }

    /// Runs of written blocks (byte offset, bytes).
    fn ranges(&self) -> Vec<(usize, usize)> {
        let mut out: Vec<(usize, usize)> = Vec::new();
        for (b, &w) in self.written.iter().enumerate() {
            if !w {
                continue;
            }
            match out.last_mut() {
                Some((off, len)) if *off + *len == b * self.sector => *len += self.sector,
                _ => out.push((b * self.sector, self.sector)),
            }
        }
        out
    }

    /// NAME.ranges and NAME.expect for the guest's `check`.
    fn save(&self, dir: &Path, name: &str) {
        let mut ranges = String::new();
        let mut expect = Vec::new();
        for (off, len) in self.ranges() {
            ranges.push_str(&format!("{off} {len}\n"));
            expect.extend_from_slice(&self.bytes[off..off + len]);
        }
        std::fs::write(dir.join(format!("{name}.ranges")), ranges).unwrap();
        std::fs::write(dir.join(format!("{name}.expect")), expect).unwrap();
    }

    /// Reads every written run back through Rampart.
    fn verify(&self, dev: &impl BlockDevice, what: &str) {
        for (off, len) in self.ranges() {
            let mut got = vec![0u8; len];
            dev.read_at(&mut got, off as u64)
                .unwrap_or_else(|e| panic!("{what}: {off}+{len}: {e}"));
            assert!(got == self.bytes[off..off + len], "{what}: {off}+{len} differs");
        }
    }
}

#[track_caller]
fn refused(e: &io::Error, sector: u64, what: &str) {
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{what}: {e}");
    assert!(e.to_string().starts_with(&format!("sector {sector} (byte ")), "{what}: {e}");
}

#[test]
fn kernel_integrity_volumes_rampart_and_dm_crypt_agree() {
    let dir = TempDir::new("kernel-integrity-volumes");
    let d = dir.path();
    std::fs::write(d.join("pass"), b"rampart-integrity").unwrap();
    let pattern = rnd(1 << 20);
    std::fs::write(d.join("pattern.bin"), &pattern).unwrap();
    let mut script = format!("{GUEST_COMMON}\n{GUEST_MAKE}\n");
    for kind in &KINDS {
        for prefix in ["k", "r", "d", "j", "w"] {
            let name = format!("{prefix}-{}", kind.name);
            std::fs::write(d.join(format!("{name}.vk")), rnd(kind.key_bytes)).unwrap();
            let verb = if prefix == "k" { "kernel" } else { "formatted" };
            script.push_str(&format!("{verb} {name} {} {}\n", kind.key_bits, kind.options));
        }
    }
    let started = std::time::Instant::now();
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(1200));
    guest.assert_ok("making LUKS2 integrity volumes");
    eprintln!("boot 1: {:?}", started.elapsed());

    let mut check = format!("{GUEST_COMMON}\n{GUEST_CHECK}\n");
    let mut compared = Vec::new();
    let mut tampers = Vec::new();
    for kind in &KINDS {
        let name = kind.name;
        // (a) What the kernel wrote, through Rampart, clean and crashed.
        let k = format!("k-{name}");
        for step in ["format", "open", "close"] {
            res_ok(d, &format!("{k}.{step}"));
        }
        for file in [format!("{k}.img"), format!("{k}-crash.img")] {
            let v = load(d, &file, &format!("{k}.vk"));
            let dev = v.open(IntegrityMode::Journal);
            if file.contains("crash") {
                assert!(dev.stats().blocks_replayed > 0, "{file}: nothing replayed");
            }
            for (sector, from, len) in KERNEL_WRITES {
                let mut got = vec![0u8; len];
                dev.read_at(&mut got, sector * 512).unwrap_or_else(|e| panic!("{file}: {e}"));
                assert!(got == pattern[from..from + len], "{file}: sector {sector}");
            }
            // Never written (no wipe): refused, as by the kernel.
            let e = dev.read_at(&mut vec![0u8; 4096], 20_000 * 512).unwrap_err();
            refused(&e, 20_000, &file);
        }

        // Rampart's format: the superblock and journal cryptsetup left.
        let r = format!("r-{name}");
        res_ok(d, &format!("{r}.format"));
        let v = load(d, &format!("{r}.img"), &format!("{r}.vk"));
        let formatted = v.mem.snapshot();
        let blank = MemDevice::new(formatted.len());
        let geometry = format_integrity(&blank, &v.segment).unwrap();
        let (start, end) =
            (v.segment.offset as usize, (v.segment.offset + geometry.initial_bytes()) as usize);
        let ours = blank.snapshot();
        let differs = (start..end).find(|&i| ours[i] != formatted[i]);
        assert!(
            differs.is_none(),
            "{r}: format differs from cryptsetup's from byte {} of the superblock: ours {:02x?}, \
             cryptsetup's {:02x?}",
            differs.unwrap_or(0) - start,
            &ours[differs.unwrap_or(0)..][..32],
            &formatted[differs.unwrap_or(0)..][..32]
        );
        let sb = Superblock::parse(&formatted[start..start + SUPERBLOCK_BYTES]).unwrap();
        assert_eq!(sb.block_bytes(), kind.sector, "{r}");

        // (b) Rampart writes in journal mode: a large write across the
        // area boundary lapping the journal, partial sectors, the last
        // block, an old version of one block kept for (c).
        let sector = u64::from(kind.sector);
        let dev = v.open(IntegrityMode::Journal);
        let mut model = Model::new(dev.len(), kind.sector);
        let big = rnd(3 << 20);
        model.write(&dev, &big, 15 << 20);
        model.write(&dev, &rnd(64 << 10), 0);
        model.write(&dev, &rnd(1000), 12_345);
        model.write(&dev, &rnd(3), 4 * sector + 7);
        model.write(&dev, &rnd(sector as usize), dev.len() - sector);
        dev.flush().unwrap();
        let g = *dev.geometry();
        let stored = |mem: &MemDevice, block: u64| {
            let loc = g.locate(block * sector / 512).unwrap();
            let mut bytes = vec![0u8; sector as usize];
            let mut tag = vec![0u8; g.tag_size as usize];
            mem.read_at(&mut bytes, loc.data_offset).unwrap();
            mem.read_at(&mut tag, loc.tag_offset).unwrap();
            (loc, bytes, tag)
        };
        let old = stored(&v.mem, 3);
        let old_plain = model.bytes[3 * sector as usize..][..sector as usize].to_vec();
        model.write(&dev, &rnd(sector as usize), 3 * sector);
        for _ in 0..40 {
            let at = (15 << 20) + 4096 * (big.len() as u64 / 4096 / 3);
            model.write(&dev, &rnd(64 << 10), at);
        }
        model.verify(&dev, &r);
        let stats = dev.stats();
        assert!(stats.commits > u64::from(g.journal.sections), "{r}: {stats:?}");
        drop(dev);
        model.verify(&v.open(IntegrityMode::Journal), &format!("{r} reopened"));
        v.save(d, &format!("{r}.img"));
        model.save(d, &r);
        check.push_str(&format!("check {r}\n"));
        compared.push(r.clone());

        // (c) Tampered copies: block 1's data flipped, block 3's old
        // version put back, blocks 5 and 6 swapped.
        for (t, bad) in [("flip", 1u64), ("old", 3), ("swap", 5)] {
            let name = format!("t{t}-{name}");
            let tv = load(d, &format!("{r}.img"), &format!("{r}.vk"));
            match t {
                "flip" => {
                    let (loc, mut bytes, _) = stored(&tv.mem, 1);
                    bytes[17] ^= 0x40;
                    tv.mem.write_at(&bytes, loc.data_offset).unwrap();
                }
                "old" => {
                    let (loc, bytes, tag) = &old;
                    tv.mem.write_at(bytes, loc.data_offset).unwrap();
                    tv.mem.write_at(tag, loc.tag_offset).unwrap();
                }
                _ => {
                    let (l5, b5, t5) = stored(&tv.mem, 5);
                    let (l6, b6, t6) = stored(&tv.mem, 6);
                    tv.mem.write_at(&b6, l5.data_offset).unwrap();
                    tv.mem.write_at(&t6, l5.tag_offset).unwrap();
                    tv.mem.write_at(&b5, l6.data_offset).unwrap();
                    tv.mem.write_at(&t5, l6.tag_offset).unwrap();
                }
            }
            let dev = tv.open(IntegrityMode::Journal);
            let mut one = vec![0u8; sector as usize];
            if t == "old" {
                dev.read_at(&mut one, bad * sector).unwrap();
                assert!(one == old_plain, "{name}: the old block");
            } else {
                let e = dev.read_at(&mut one, bad * sector).unwrap_err();
                refused(&e, bad * sector / 512, &name);
            }
            dev.read_at(&mut one, 8 * sector).unwrap();
            drop(dev);
            std::fs::copy(d.join(format!("{r}.vk")), d.join(format!("{name}.vk"))).unwrap();
            tv.save(d, &format!("{name}.img"));
            check.push_str(&format!("tampered {name} {sector} {bad} 8\n"));
            tampers.push((name, (t == "old").then(|| old_plain.clone())));
        }

        // Direct mode (`--integrity-no-journal`).
        let dn = format!("d-{name}");
        let v = load(d, &format!("{dn}.img"), &format!("{dn}.vk"));
        let dev = v.open(IntegrityMode::Direct);
        let mut model = Model::new(dev.len(), kind.sector);
        model.write(&dev, &rnd(2 << 20), (16 << 20) - (1 << 20));
        model.write(&dev, &rnd(8 * sector as usize), 0);
        model.write(&dev, &rnd(777), 3 * sector + 5);
        dev.flush().unwrap();
        model.verify(&dev, &dn);
        assert_eq!(dev.stats().commits, 0);
        drop(dev);
        v.save(d, &format!("{dn}.img"));
        model.save(d, &dn);
        check.push_str(&format!("check {dn} --integrity-no-journal\n"));
        compared.push(dn);

        // A committed journal whose copies home were lost: the kernel
        // replays what Rampart left.
        let j = format!("j-{name}");
        let v = load(d, &format!("{j}.img"), &format!("{j}.vk"));
        let before = v.mem.snapshot();
        let dev = v.open(IntegrityMode::Journal);
        let mut model = Model::new(dev.len(), kind.sector);
        model.write(&dev, &rnd(48 << 10), 8 * sector);
        dev.flush().unwrap();
        let journal_end = (v.segment.offset + dev.geometry().initial_bytes()) as usize;
        let after = v.mem.snapshot();
        drop(dev);
        let mut image = before;
        image[..journal_end].copy_from_slice(&after[..journal_end]);
        save_sparse(&d.join(format!("{j}.img")), &image);
        let reopened = load(d, &format!("{j}.img"), &format!("{j}.vk"));
        let dev = reopened.open(IntegrityMode::Journal);
        assert!(dev.stats().blocks_replayed > 0, "{j}");
        model.verify(&dev, &j);
        drop(dev);
        save_sparse(&d.join(format!("{j}.img")), &image);
        model.save(d, &j);
        check.push_str(&format!("check {j}\n"));
        compared.push(j);

        // Wiped: every sector reads as zeros.
        let w = format!("w-{name}");
        let v = load(d, &format!("{w}.img"), &format!("{w}.vk"));
        let dev = v.open(IntegrityMode::Journal);
        let started = std::time::Instant::now();
        dev.wipe(&mut |_, _| {}).unwrap();
        eprintln!("{w}: wipe of {} bytes in {:?}", dev.len(), started.elapsed());
        let mut all = vec![1u8; dev.len() as usize];
        dev.read_at(&mut all, 0).unwrap();
        assert!(all.iter().all(|&b| b == 0), "{w}");
        drop(dev);
        v.save(d, &format!("{w}.img"));
        check.push_str(&format!("zeros {w}\n"));
    }

    let started = std::time::Instant::now();
    let guest = run_in_kernel(&dir, &check, &[], Duration::from_secs(1200));
    guest.assert_ok("reading Rampart's volumes");
    eprintln!("boot 2: {:?}", started.elapsed());
    for name in &compared {
        res_ok(d, &format!("{name}.open"));
        res_ok(d, &format!("{name}.compare"));
    }
    for kind in &KINDS {
        res_ok(d, &format!("w-{}.zeros", kind.name));
    }
    for (name, old) in &tampers {
        res_ok(d, &format!("{name}.good"));
        if let Some(old) = old {
            res_ok(d, &format!("{name}.bad"));
            assert!(
                read(d, &format!("res/{name}.block")) == *old,
                "{name}: the kernel's old block"
            );
            continue;
        }
        let (rc, out) = res(d, &format!("{name}.bad"));
        assert_ne!(rc, "0", "{name}: the kernel read a tampered sector");
        // dm-crypt fails the read with BLK_STS_PROTECTION: EILSEQ.
        assert!(
            out.contains("Input/output error") || out.contains("Invalid or incomplete multibyte"),
            "{name}: {out}"
        );
    }
}
