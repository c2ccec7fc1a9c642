//! dm-integrity images made by the real kernel, read by Rampart's format
//! code (`rampart_luks::integrity`): one boot of the test kernel
//! (`scripts/kernel-vm`) formats LUKS2 volumes with integrity
//! (`cryptsetup luksFormat --integrity`: HMAC-SHA256 in 512- and
//! 4096-byte sectors, HMAC-SHA512, AEAD with `aes-gcm-random`, and
//! `--integrity-no-journal`) and standalone dm-integrity devices
//! (`integritysetup format`: HMAC-SHA256 tags in journal mode, with a
//! journal MAC, crc32c in bitmap mode, crc32c in 4096-byte blocks), opens
//! each, writes a known pattern at known sectors through it, and closes
//! it cleanly. The host then checks, for every image, that:
//!
//! * the superblock parses, writes back byte for byte, agrees with
//!   `integritysetup dump` and the kernel's table, and is the superblock
//!   Rampart's emulation of the kernel's format would write;
//! * the geometry finds every written block where the kernel put it: the
//!   plaintext (standalone) or the ciphertext that decrypts to it under
//!   the volume key (LUKS2), and its tag, recomputed (crc32c or HMAC over
//!   salt, sector and data; dm-crypt's HMAC over sector, IV and
//!   ciphertext; AES-GCM's tag with the IV stored beside it);
//! * after a clean close the journal is empty and nothing is replayed;
//! * a copy of each device taken while it was still open, right after the
//!   writes were flushed (what a crash leaves), replays: its sections
//!   parse, their MACs verify, and applying the replay plan's writes gives
//!   every written block with a valid tag, also onto a copy whose written
//!   blocks were zeroed first (for the blocks the journal still holds);
//!   in bitmap mode, the writes are on the disk and the dirty bitmap
//!   covers them.
//!
//! Volume keys are given to `luksFormat` (`--volume-key-file`), so the
//! host knows them. The LUKS2 images are formatted with
//! `--integrity-no-wipe` (writing every sector through dm-crypt is slow
//! under emulation; never-written blocks keep tags that do not verify,
//! and nothing reads them). The images are made in the guest's memory and
//! copied to the shared directory: with loop devices over files of the
//! shared directory (9p), dm-crypt with integrity corrupted the guest
//! kernel's page lists (`list_add corruption` in
//! `crypt_free_buffer_pages`, then in the page allocator).

use crate::helpers::kernel_support::*;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use rampart_crypto::{plain64, Gcm, Mac, MacAlg, Xts};
use rampart_luks::integrity::{
    geometry::BitmapLayout, journal, replay_plan, Flags, FormatRequest, Geometry, JournalSection,
    Mode, Superblock, SUPERBLOCK_BYTES,
};
use rampart_luks::{IntegrityKind, Luks};

/// The guest script (see the module comment).
const GUEST: &str = r#"mkdir -p res
# The images are made in the guest's memory and copied here at the end
# (see the module comment).
work=/run/integrity
mkdir -p $work
step() {
  s_name=$1; shift
  s_rc=0
  "$@" >res/$s_name.out 2>&1 || s_rc=$?
  echo $s_rc >res/$s_name.rc
  return $s_rc
}
printf 'rampart-integrity' >pass
head -c 1048576 /dev/urandom >pattern.bin
head -c 32 /dev/urandom >tag.key
head -c 32 /dev/urandom >jmac.key
fast="--pbkdf pbkdf2 --pbkdf-force-iterations 1000 --batch-mode --key-file pass"
# No wipe: never-written sectors keep tags that do not verify, which
# nothing here reads.
# write NAME DEVICE: the pattern's first 8 KiB at logical sector 0, 64 KiB
# from byte 65536 at sector 34816 (the second interleave area), and the
# last 4 KiB of the device, each recorded in NAME.writes as "sector
# pattern-offset bytes"; each write is flushed (fsync), which commits the
# journal.
write() {
  w_name=$1 dev=$2
  size=$(blockdev --getsz $dev)
  echo $size >res/$w_name.sectors
  dd if=pattern.bin of=$dev bs=4096 count=2 oflag=direct conv=notrunc,fsync status=none
  echo "0 0 8192" >res/$w_name.writes
  dd if=pattern.bin of=$dev bs=4096 skip=16 seek=$((34816 / 8)) count=16 oflag=direct conv=notrunc,fsync status=none
  echo "34816 65536 65536" >>res/$w_name.writes
  last=$(( (size / 8 - 1) * 8 ))
  dd if=pattern.bin of=$dev bs=4096 skip=40 seek=$((last / 8)) count=1 oflag=direct conv=notrunc,fsync status=none
  echo "$last 163840 4096" >>res/$w_name.writes
  sync
}
luks() {
  n=$1 keybits=$2 keybytes=$3; shift 3
  truncate -s 40M $work/$n.img
  head -c $keybytes /dev/urandom >$n.vk
  loop=$(losetup -f --show $work/$n.img)
  step $n.format cryptsetup luksFormat --type luks2 $fast --volume-key-file $n.vk --key-size $keybits --integrity-no-wipe "$@" $loop || return 0
  step $n.dump cryptsetup luksDump $loop
  step $n.open cryptsetup open --key-file pass $open_args $loop $n || return 0
  dmsetup table $n >res/$n.table 2>&1 || true
  dmsetup table ${n}_dif >res/$n.table_dif 2>&1 || true
  step $n.write write $n /dev/mapper/$n
  # The device as a crash would leave it: open, written, flushed.
  cp --sparse=always $work/$n.img $n-crash.img
  step $n.close cryptsetup close $n
  losetup -d $loop
  cp --sparse=always $work/$n.img $n.img
  rm $work/$n.img
}
# standalone NAME FORMAT-ONLY-OPTIONS OPTIONS...
standalone() {
  n=$1 format_only=$2; shift 2
  truncate -s 24M $work/$n.img
  loop=$(losetup -f --show $work/$n.img)
  step $n.format integritysetup format --batch-mode $format_only "$@" $loop || return 0
  step $n.sbdump integritysetup dump $loop
  step $n.open integritysetup open "$@" $loop $n || return 0
  dmsetup table $n >res/$n.table 2>&1 || true
  step $n.write write $n /dev/mapper/$n
  cp --sparse=always $work/$n.img $n-crash.img
  step $n.close integritysetup close $n
  step $n.sbdump_after integritysetup dump $loop
  losetup -d $loop
  cp --sparse=always $work/$n.img $n.img
  rm $work/$n.img
}
luks luks-hmac256 512 96 --cipher aes-xts-plain64 --integrity hmac-sha256
luks luks-hmac256-4k 512 96 --cipher aes-xts-plain64 --integrity hmac-sha256 --sector-size 4096
luks luks-hmac512 512 128 --cipher aes-xts-plain64 --integrity hmac-sha512
luks luks-aead 256 32 --cipher aes-gcm-random --integrity aead
open_args=--integrity-no-journal luks luks-nojournal 512 96 --cipher aes-xts-plain64 --integrity hmac-sha256 --integrity-no-journal
standalone int-hmac "" --integrity hmac-sha256 --integrity-key-file tag.key --integrity-key-size 32
standalone int-jmac "" --integrity hmac-sha256 --integrity-key-file tag.key --integrity-key-size 32 --journal-integrity hmac-sha256 --journal-integrity-key-file jmac.key --journal-integrity-key-size 32
standalone int-bitmap "" --integrity-bitmap-mode
standalone int-crc-4k "--sector-size 4096"
cryptsetup --version >res/versions
integritysetup --version >>res/versions
uname -r >>res/versions
ls -l >res/ls"#;

/// How the host checks an image's tags and data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tags {
    /// Standalone: crc32c over (salt,) sector, data.
    Crc32c,
    /// Standalone: HMAC-SHA256 with `tag.key` over (salt,) sector, data.
    HmacSha256,
    /// LUKS2 `aes-xts-plain64` under dm-crypt's HMAC.
    LuksHmac(MacAlg),
    /// LUKS2 `aes-gcm-random`, `aead`.
    LuksAead,
}

struct Image {
    name: &'static str,
    tags: Tags,
    mode: Mode,
    block: u32,
}

const IMAGES: [Image; 9] = [
    Image {
        name: "luks-hmac256",
        tags: Tags::LuksHmac(MacAlg::HmacSha256),
        mode: Mode::Journal,
        block: 512,
    },
    Image {
        name: "luks-hmac256-4k",
        tags: Tags::LuksHmac(MacAlg::HmacSha256),
        mode: Mode::Journal,
        block: 4096,
    },
    Image {
        name: "luks-hmac512",
        tags: Tags::LuksHmac(MacAlg::HmacSha512),
        mode: Mode::Journal,
        block: 512,
    },
    Image { name: "luks-aead", tags: Tags::LuksAead, mode: Mode::Journal, block: 512 },
    Image {
        name: "luks-nojournal",
        tags: Tags::LuksHmac(MacAlg::HmacSha256),
        mode: Mode::Direct,
        block: 512,
    },
    Image { name: "int-hmac", tags: Tags::HmacSha256, mode: Mode::Journal, block: 512 },
    Image { name: "int-jmac", tags: Tags::HmacSha256, mode: Mode::Journal, block: 512 },
    Image { name: "int-bitmap", tags: Tags::Crc32c, mode: Mode::Bitmap, block: 512 },
    Image { name: "int-crc-4k", tags: Tags::Crc32c, mode: Mode::Journal, block: 4096 },
];

#[test]
fn kernel_made_integrity_images_read_by_the_format_code() {
    let dir = TempDir::new("kernel-integrity");
    let guest = run_in_kernel(&dir, GUEST, &[], Duration::from_secs(1500));
    guest.assert_ok("making dm-integrity images");
    for image in &IMAGES {
        check_image(dir.path(), image);
    }
}

fn read(dir: &Path, name: &str) -> Vec<u8> {
    std::fs::read(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn res(dir: &Path, name: &str) -> String {
    String::from_utf8(read(dir, &format!("res/{name}"))).unwrap()
}

/// Asserts that the guest step `step` of image `name` succeeded.
#[track_caller]
fn step_ok(dir: &Path, name: &str, step: &str) {
    let rc = std::fs::read_to_string(dir.join(format!("res/{name}.{step}.rc")))
        .unwrap_or_else(|_| panic!("{name}: step `{step}` never ran under the kernel"));
    let out =
        std::fs::read_to_string(dir.join(format!("res/{name}.{step}.out"))).unwrap_or_default();
    assert_eq!(rc.trim(), "0", "{name}: `{step}` failed under the kernel:\n{out}");
}

/// What the checks of one image need.
struct Loaded {
    bytes: Vec<u8>,
    sb: Superblock,
    geometry: Geometry,
    volume_key: Vec<u8>,
}

fn check_image(dir: &Path, image: &Image) {
    let name = image.name;
    for step in ["format", "open", "write", "close"] {
        step_ok(dir, name, step);
    }
    let clean = load(dir, image, &format!("{name}.img"));
    check_superblock(dir, image, &clean);
    assert_eq!(check_written(dir, image, &clean, &clean.bytes, None), written_blocks(dir, image));

    // Closed cleanly: an empty journal (bitmap mode: the bitmap is
    // cleared and the journal area rewritten as an empty journal).
    let sections = parse_journal(dir, image, &clean);
    let summaries: Vec<_> = sections.iter().map(JournalSection::summary).collect();
    assert!(
        summaries.iter().all(|s| !s.has_entries && !s.unknown_commit_id),
        "{name}: {summaries:?}"
    );
    let plan = replay_plan(&summaries, image.mode).unwrap();
    assert_eq!(plan.replay, None, "{name}: {plan:?}");
    assert!(!clean.sb.flags.contains(Flags::DIRTY_BITMAP), "{name}: {:?}", clean.sb);

    // As a crash would have left it.
    let crash = load(dir, image, &format!("{name}-crash.img"));
    assert_eq!(crash.geometry, clean.geometry, "{name}: geometry after a crash");
    let what = format!("{name} (crashed)");
    match image.mode {
        Mode::Journal => {
            let sections = parse_journal(dir, image, &crash);
            let summaries: Vec<_> = sections.iter().map(JournalSection::summary).collect();
            assert!(summaries.iter().all(|s| !s.unknown_commit_id), "{what}: {summaries:?}");
            let plan = replay_plan(&summaries, image.mode).unwrap();
            // Written through the journal and flushed: every section is
            // consistent, so all replay and the device goes on from them.
            let (first, count) =
                plan.replay.unwrap_or_else(|| panic!("{what}: nothing to replay: {plan:?}"));
            let layout = crash.geometry.journal;
            assert_eq!((count, plan.clear), (layout.sections, None), "{what}: {plan:?}");
            let tag_size = usize::from(crash.sb.tag_size);
            let block = image.block as usize;
            // The replay, onto the crashed device and onto a copy whose
            // written blocks and tags are zeroed: the first must give every
            // write, the second every write the journal still holds.
            let mut replayed = crash.bytes.clone();
            let mut from_journal = crash.bytes.clone();
            for (first, _, len) in writes(dir, image) {
                for k in 0..(len / block) as u64 {
                    let loc =
                        crash.geometry.locate(first + k * u64::from(image.block / 512)).unwrap();
                    from_journal[loc.data_offset as usize..][..block].fill(0);
                    from_journal[loc.tag_offset as usize..][..tag_size].fill(0);
                }
            }
            let mut in_journal = BTreeSet::new();
            for i in journal::sections_in_order(first, count, layout.sections) {
                let section = &sections[i as usize];
                let raw = section_bytes(&crash, i);
                for w in section.replay_writes(&crash.geometry) {
                    assert!(!w.misaligned, "{what}: {w:?}");
                    let data = section.entry_block(raw, &layout, w.entry).unwrap();
                    let tag = &section.entries[w.entry as usize].tag;
                    let loc = crash.geometry.locate(w.sector).unwrap();
                    for bytes in [&mut replayed, &mut from_journal] {
                        bytes[loc.data_offset as usize..][..block].copy_from_slice(&data);
                        bytes[loc.tag_offset as usize..][..tag_size].copy_from_slice(tag);
                    }
                    in_journal.insert(w.sector);
                }
            }
            assert_eq!(
                check_written(dir, image, &crash, &replayed, None),
                written_blocks(dir, image),
                "{what}"
            );
            let from_journal = check_written(dir, image, &crash, &from_journal, Some(&in_journal));
            assert!(from_journal > 0, "{what}: no written block in the journal ({in_journal:?})");
        }
        Mode::Bitmap => {
            // Written in place; the dirty bitmap (at the start of the
            // journal area) covers every write.
            assert!(crash.sb.flags.contains(Flags::DIRTY_BITMAP), "{what}: {:?}", crash.sb);
            check_written(dir, image, &crash, &crash.bytes, None);
            let bitmap = BitmapLayout::from_superblock(&crash.geometry, &crash.sb);
            let area = crash.geometry.journal_section_offset(0) as usize;
            for (sector, _, _) in writes(dir, image) {
                let (byte, bit) = bitmap.bit_of(sector);
                assert!(
                    crash.bytes[area + byte as usize] & (1 << bit) != 0,
                    "{what}: sector {sector} not dirty"
                );
            }
        }
        Mode::Direct => {
            check_written(dir, image, &crash, &crash.bytes, None);
        }
    }
}

/// Reads an image, its superblock and geometry (and for LUKS2, checks the
/// header's integrity segment against the superblock).
fn load(dir: &Path, image: &Image, file: &str) -> Loaded {
    let name = image.name;
    let bytes = read(dir, file);
    let device_sectors = bytes.len() as u64 / 512;
    let (start, volume_key) = if name.starts_with("luks") {
        let f = std::fs::File::open(dir.join(file)).unwrap();
        let (header, _) = Luks::load(&f).unwrap_or_else(|e| panic!("{name}: {e}"));
        let seg =
            header.integrity_segment().unwrap().unwrap_or_else(|| panic!("{name}: no integrity"));
        // cryptsetup writes no journal encryption and no journal MAC.
        seg.integrity.check_journal().unwrap();
        let vk = read(dir, &format!("{name}.vk"));
        assert_eq!(seg.volume_key_bytes, vk.len(), "{name}: volume key size");
        assert_eq!(seg.sector_size, image.block, "{name}: sector size");
        let kind = match image.tags {
            Tags::LuksHmac(MacAlg::HmacSha512) => IntegrityKind::HmacSha512,
            Tags::LuksHmac(_) => IntegrityKind::HmacSha256,
            _ => IntegrityKind::Aead,
        };
        assert_eq!(seg.integrity.kind, kind, "{name}");
        let layout = seg.integrity.key_layout(vk.len()).unwrap();
        assert_eq!(layout.integrity.is_some(), kind != IntegrityKind::Aead, "{name}");
        let tags = seg.integrity.tag_layout(&seg.encryption).unwrap();
        let area = &bytes[seg.offset as usize..][..SUPERBLOCK_BYTES];
        let sb = Superblock::parse(area).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(usize::from(sb.tag_size), tags.tag_size(), "{name}: tag size");
        (seg.offset / 512, vk)
    } else {
        (0, Vec::new())
    };
    let area = &bytes[start as usize * 512..][..SUPERBLOCK_BYTES];
    let sb = Superblock::parse(area).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(&sb.to_bytes()[..], area, "{file}: superblock written back");
    let geometry =
        Geometry::new(&sb, start, device_sectors).unwrap_or_else(|e| panic!("{file}: {e}"));
    Loaded { bytes, sb, geometry, volume_key }
}

/// The superblock against the tools, the kernel's table and Rampart's
/// emulation of the kernel's format.
fn check_superblock(dir: &Path, image: &Image, l: &Loaded) {
    let name = image.name;
    let (sb, geometry) = (&l.sb, &l.geometry);
    let luks = name.starts_with("luks");
    assert_eq!(sb.block_bytes(), image.block, "{name}: block size");
    assert_eq!(sb.version, sb.version_for(image.mode == Mode::Bitmap), "{name}: version of {sb:?}");
    assert!(sb.flags.contains(Flags::FIXED_PADDING), "{name}: {sb:?}");
    // LUKS2 tags come from dm-crypt: no internal hash, no salt.
    assert_eq!(sb.flags.contains(Flags::FIXED_HMAC), !luks, "{name}: {sb:?}");
    assert_eq!(name == "int-jmac", sb.flags.contains(Flags::JOURNAL_MAC), "{name}");
    if !luks {
        compare_with_dump(sb, &res(dir, &format!("{name}.sbdump.out")), name);
    }
    if sb.flags.contains(Flags::JOURNAL_MAC) && sb.flags.contains(Flags::FIXED_HMAC) {
        // The superblock's own MAC, under the journal MAC key.
        let (input, stored) = sb.mac_parts(32).unwrap();
        let mut m = Mac::new(MacAlg::HmacSha256, &read(dir, "jmac.key"));
        m.update(&input);
        assert_eq!(stored, m.finish().expose(), "{name}: superblock MAC");
    }
    let sectors: u64 = res(dir, &format!("{name}.sectors")).trim().parse().unwrap();
    assert_eq!(sb.provided_data_sectors, sectors, "{name}: the device the kernel provided");
    let table = res(dir, &format!("{name}.{}", if luks { "table_dif" } else { "table" }));
    let fields: Vec<&str> = table.split_whitespace().collect();
    assert_eq!(fields[2], "integrity", "{name}: {table}");
    assert_eq!(fields[4], geometry.start.to_string(), "{name}: superblock offset in {table}");
    assert_eq!(fields[5], sb.tag_size.to_string(), "{name}: {table}");
    let journal_sectors = format!("journal_sectors:{}", geometry.journal.sectors());
    assert!(fields.contains(&journal_sectors.as_str()), "{name}: {journal_sectors} in {table}");
    let mut request =
        FormatRequest::new(sb.tag_size, sb.block_bytes(), geometry.start, geometry.device_sectors);
    request.flags =
        Flags(sb.flags.0 & (Flags::JOURNAL_MAC | Flags::FIXED_PADDING | Flags::FIXED_HMAC));
    request.salt = sb.salt;
    let (formatted, _) = Geometry::format(&request).unwrap();
    assert_eq!(formatted.journal_sections, sb.journal_sections, "{name}: journal sections");
    assert_eq!(
        formatted.provided_data_sectors, sb.provided_data_sectors,
        "{name}: provided sectors"
    );
    assert_eq!(formatted.log2_interleave_sectors, sb.log2_interleave_sectors, "{name}");
    let bitmap = BitmapLayout::of(geometry, 0);
    assert_eq!(
        bitmap.log2_blocks_per_bit(geometry),
        sb.log2_blocks_per_bitmap_bit,
        "{name}: bitmap"
    );
}

/// The guest's writes: (first sector, offset in the pattern, bytes).
fn writes(dir: &Path, image: &Image) -> Vec<(u64, usize, usize)> {
    res(dir, &format!("{}.writes", image.name))
        .lines()
        .map(|line| {
            let v: Vec<u64> = line.split_whitespace().map(|f| f.parse().unwrap()).collect();
            (v[0], v[1] as usize, v[2] as usize)
        })
        .collect()
}

/// How many blocks the guest wrote.
fn written_blocks(dir: &Path, image: &Image) -> usize {
    writes(dir, image).iter().map(|(_, _, len)| len / image.block as usize).sum()
}

/// Every written block (of the sectors in `only`, if given), where the
/// geometry says it is in `bytes`; returns how many were checked.
fn check_written(
    dir: &Path,
    image: &Image,
    l: &Loaded,
    bytes: &[u8],
    only: Option<&BTreeSet<u64>>,
) -> usize {
    let mut checked = 0;
    let pattern = read(dir, "pattern.bin");
    let block = image.block as usize;
    let tag_size = usize::from(l.sb.tag_size);
    for (first, from, len) in writes(dir, image) {
        for k in 0..len / block {
            let sector = first + (k * block / 512) as u64;
            if only.is_some_and(|only| !only.contains(&sector)) {
                continue;
            }
            checked += 1;
            let plain = &pattern[from + k * block..][..block];
            let loc = l.geometry.locate(sector).unwrap();
            let data = &bytes[loc.data_offset as usize..][..block];
            let tag = &bytes[loc.tag_offset as usize..][..tag_size];
            let what = format!("{}: sector {sector} (area {})", image.name, loc.area);
            check_block(image.tags, &l.sb, &l.volume_key, dir, sector, plain, data, tag, &what);
        }
    }
    checked
}

/// Section `i`'s bytes.
fn section_bytes(l: &Loaded, i: u32) -> &[u8] {
    let at = l.geometry.journal_section_offset(i) as usize;
    &l.bytes[at..at + l.geometry.journal.section_bytes()]
}

/// Every journal section, each MAC checked.
fn parse_journal(dir: &Path, image: &Image, l: &Loaded) -> Vec<JournalSection> {
    let layout = l.geometry.journal;
    (0..layout.sections)
        .map(|i| {
            let section = JournalSection::parse(section_bytes(l, i), i, &layout)
                .unwrap_or_else(|e| panic!("{}: {e}", image.name));
            if let Some(mac) = section.mac {
                let mut m = Mac::new(MacAlg::HmacSha256, &read(dir, "jmac.key"));
                m.update(&section.mac_input(&l.sb));
                let mut want = [0u8; 64];
                want[..32].copy_from_slice(m.finish().expose());
                assert_eq!(mac, want, "{}: MAC of journal section {i}", image.name);
            }
            section
        })
        .collect()
}

/// Compares the superblock with `integritysetup dump`'s lines (2.6's
/// "field value" form).
fn compare_with_dump(sb: &Superblock, dump: &str, name: &str) {
    let field = |key: &str| {
        dump.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("{name}: no {key} in\n{dump}"))
            .trim()
            .to_owned()
    };
    assert_eq!(field("superblock_version"), sb.version.to_string(), "{name}");
    assert_eq!(field("log2_interleave_sectors"), sb.log2_interleave_sectors.to_string(), "{name}");
    assert_eq!(field("integrity_tag_size"), sb.tag_size.to_string(), "{name}");
    assert_eq!(field("journal_sections"), sb.journal_sections.to_string(), "{name}");
    assert_eq!(field("provided_data_sectors"), sb.provided_data_sectors.to_string(), "{name}");
    assert_eq!(field("sector_size"), sb.block_bytes().to_string(), "{name}");
    assert_eq!(
        field("log2_blocks_per_bitmap"),
        sb.log2_blocks_per_bitmap_bit.to_string(),
        "{name}"
    );
    assert_eq!(field("flags").split_whitespace().collect::<Vec<_>>(), sb.flags.names(), "{name}");
}

/// Checks one block's data and tag on the disk against its plaintext.
#[allow(clippy::too_many_arguments)]
fn check_block(
    tags: Tags,
    sb: &Superblock,
    volume_key: &[u8],
    dir: &Path,
    sector: u64,
    plain: &[u8],
    data: &[u8],
    tag: &[u8],
    what: &str,
) {
    let salted = sb.flags.contains(Flags::FIXED_HMAC);
    let mut input = Vec::new();
    if salted {
        input.extend_from_slice(&sb.salt);
    }
    input.extend_from_slice(&sector.to_le_bytes());
    match tags {
        Tags::Crc32c | Tags::HmacSha256 => {
            assert!(data == plain, "{what}: the plaintext is not where the geometry says");
            input.extend_from_slice(data);
            let want = if tags == Tags::Crc32c {
                crc32c(&input).to_le_bytes().to_vec()
            } else {
                let mut m = Mac::new(MacAlg::HmacSha256, &read(dir, "tag.key"));
                m.update(&input);
                m.finish().expose().to_vec()
            };
            assert_eq!(tag, &want[..], "{what}: tag");
        }
        Tags::LuksHmac(alg) => {
            // dm-crypt: XTS under the key's first part, plain64 IV of the
            // 512-byte sector; HMAC under the rest over sector, IV and
            // ciphertext.
            let mac_len = alg.output_len();
            let (enc, mac_key) = volume_key.split_at(volume_key.len() - mac_len);
            let mut clear = data.to_vec();
            Xts::new(enc).unwrap().decrypt_unit(&plain64(sector), &mut clear).unwrap();
            assert!(clear == plain, "{what}: the ciphertext is not where the geometry says");
            let mut m = Mac::new(alg, mac_key);
            m.update(&sector.to_le_bytes());
            m.update(&plain64(sector));
            m.update(data);
            assert_eq!(tag, m.finish().expose(), "{what}: dm-crypt's HMAC");
        }
        Tags::LuksAead => {
            // dm-crypt: the GCM tag, then the random IV; the associated
            // data is the sector and the IV.
            let gcm_tag: [u8; 16] = tag[..16].try_into().unwrap();
            let iv: [u8; 12] = tag[16..28].try_into().unwrap();
            let mut aad = sector.to_le_bytes().to_vec();
            aad.extend_from_slice(&iv);
            let mut clear = data.to_vec();
            Gcm::new(volume_key).unwrap().open(&iv, &aad, &mut clear, &gcm_tag).unwrap_or_else(
                |e| panic!("{what}: AES-GCM does not open the block the geometry found: {e}"),
            );
            assert!(clear == plain, "{what}: AES-GCM plaintext");
        }
    }
}

/// CRC-32C (Castagnoli), as the kernel's `crc32c` hash gives it.
fn crc32c(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82f6_3b78 } else { crc >> 1 };
        }
    }
    !crc
}
