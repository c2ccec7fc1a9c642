//! LUKS2 authenticated encryption (`rampart_volume::integrity`) in memory:
//! round trips per kind, sector size and mode; tampering (a flipped data
//! or tag bit, an old block put back, two blocks swapped) refused naming
//! the sector; partial-block writes against a model; reads during
//! commits from many threads; a journal lapped many times; refusals of superblocks Rampart cannot serve; and crash trials
//! in journal mode (a crash at every operation of a sequence, each block
//! old or new with a valid tag afterwards, every flushed block new).
//! The same code against the kernel: `rampart-cli`'s
//! `kernel_integrity_volumes`.

use std::collections::HashMap;
use std::io;
use std::sync::Arc;

use rampart_luks::integrity::{Superblock, SUPERBLOCK_BYTES};
use rampart_luks::{IntegrityKind, IntegritySegment, SecretBytes, SegmentIntegrity};
use rampart_volume::crashsim::{CrashSim, SplitMix64};
use rampart_volume::integrity::format_integrity_with_journal;
use rampart_volume::{
    format_integrity, AuthenticatedDevice, BlockDevice, IntegrityMode, MemDevice,
};

const OFFSET: u64 = 1 << 20;

/// Each block's value.
type Values = HashMap<u64, Vec<u8>>;

#[derive(Debug, Clone, Copy)]
enum Kind {
    Hmac256,
    Hmac512,
    Aead,
}

fn segment(kind: Kind, sector_size: u32) -> (IntegritySegment, SecretBytes) {
    let (integrity, encryption, key_len) = match kind {
        Kind::Hmac256 => (IntegrityKind::HmacSha256, "aes-xts-plain64", 96),
        Kind::Hmac512 => (IntegrityKind::HmacSha512, "aes-xts-plain64", 128),
        Kind::Aead => (IntegrityKind::Aead, "aes-gcm-random", 32),
    };
    let key: Vec<u8> = (0..key_len).map(|i| (i * 7 + 3) as u8).collect();
    let seg = IntegritySegment {
        offset: OFFSET,
        size: None,
        encryption: encryption.into(),
        sector_size,
        iv_tweak: 0,
        volume_key_bytes: key_len,
        integrity: SegmentIntegrity::new(integrity),
    };
    (seg, SecretBytes::new(key))
}

fn formatted(
    kind: Kind,
    sector: u32,
    size: usize,
    journal: u64,
) -> (Arc<MemDevice>, IntegritySegment, SecretBytes) {
    let (seg, key) = segment(kind, sector);
    let dev = Arc::new(MemDevice::new(size));
    if journal == 0 {
        format_integrity(&dev, &seg).unwrap();
    } else {
        format_integrity_with_journal(&dev, &seg, journal).unwrap();
    }
    (dev, seg, key)
}

fn random(rng: &mut SplitMix64, len: usize) -> Vec<u8> {
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

fn integrity_error(e: &io::Error, sector: u64) {
    assert_eq!(e.kind(), io::ErrorKind::InvalidData, "{e}");
    assert_eq!(
        e.to_string(),
        format!(
            "sector {sector} (byte {}) failed its integrity check (tag mismatch)",
            sector * 512
        )
    );
}

#[test]
fn round_trips_every_kind_sector_size_and_mode() {
    for kind in [Kind::Hmac256, Kind::Hmac512, Kind::Aead] {
        for sector in [512u32, 4096] {
            for mode in [IntegrityMode::Journal, IntegrityMode::Direct] {
                let what = format!("{kind:?} {sector} {mode:?}");
                let (mem, seg, key) = formatted(kind, sector, 24 << 20, 0);
                let mut rng = SplitMix64(sector as u64);
                let dev = AuthenticatedDevice::open(mem.clone(), &seg, &key, mode).unwrap();
                let len = dev.len();
                assert_eq!(len % u64::from(sector), 0);
                // Never written: refused like the kernel.
                let mut one = vec![0u8; sector as usize];
                integrity_error(&dev.read_at(&mut one, 0).unwrap_err(), 0);
                // The whole device in one large write (parallel pieces), read
                // back whole and in odd pieces.
                let all = random(&mut rng, len as usize);
                dev.write_at(&all, 0).unwrap();
                let mut back = vec![0u8; len as usize];
                dev.read_at(&mut back, 0).unwrap();
                assert!(back == all, "{what}");
                let mut piece = vec![0u8; 10_000];
                dev.read_at(&mut piece, 12_345).unwrap();
                assert!(piece == all[12_345..22_345], "{what}");
                dev.flush().unwrap();
                drop(dev);
                let dev = AuthenticatedDevice::open(mem.clone(), &seg, &key, mode).unwrap();
                dev.read_at(&mut back, 0).unwrap();
                assert!(back == all, "{what}: reopened");
                // Ciphertext on the disk, not plaintext.
                let loc = dev.geometry().locate(0).unwrap();
                let mut stored = vec![0u8; sector as usize];
                mem.read_at(&mut stored, loc.data_offset).unwrap();
                assert!(stored != all[..sector as usize], "{what}");
                let zeros_at = len / 2 / u64::from(sector) * u64::from(sector);
                dev.write_zeroes(zeros_at, 3 * u64::from(sector)).unwrap();
                dev.read_at(&mut one, zeros_at + u64::from(sector)).unwrap();
                assert!(one.iter().all(|&b| b == 0), "{what}");
            }
        }
    }
}

/// Flips and swaps at the disk; each read names the sector. An old
/// version of a block put back (data and tag) verifies, in the kernel as
/// here: dm-crypt's tags bind a block to its sector, not to its age.
#[test]
fn tampering_is_refused_naming_the_sector() {
    for kind in [Kind::Hmac256, Kind::Aead] {
        for sector in [512u32, 4096] {
            let (mem, seg, key) = formatted(kind, sector, 8 << 20, 0);
            let bs = sector as usize;
            let dev =
                AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
            let mut rng = SplitMix64(7);
            let old = random(&mut rng, 16 * bs);
            dev.write_at(&old, 0).unwrap();
            dev.flush().unwrap();
            let g = *dev.geometry();
            let tag = g.tag_size as usize;
            let stored = |block: u64| {
                let loc = g.locate(block * u64::from(sector / 512)).unwrap();
                let mut d = vec![0u8; bs];
                let mut t = vec![0u8; tag];
                mem.read_at(&mut d, loc.data_offset).unwrap();
                mem.read_at(&mut t, loc.tag_offset).unwrap();
                (loc, d, t)
            };
            let old_block3 = stored(3);
            let new = random(&mut rng, 16 * bs);
            dev.write_at(&new, 0).unwrap();
            dev.flush().unwrap();
            drop(dev);
            let units = u64::from(sector / 512);
            // A flipped data bit in block 1, a flipped tag bit in block 2,
            // block 3 put back as it was, blocks 5 and 6 swapped.
            let (loc1, mut d1, _) = stored(1);
            d1[100] ^= 0x10;
            mem.write_at(&d1, loc1.data_offset).unwrap();
            let (loc2, _, mut t2) = stored(2);
            t2[5] ^= 1;
            mem.write_at(&t2, loc2.tag_offset).unwrap();
            let (loc3, d3, t3) = old_block3;
            mem.write_at(&d3, loc3.data_offset).unwrap();
            mem.write_at(&t3, loc3.tag_offset).unwrap();
            let (loc5, d5, t5) = stored(5);
            let (loc6, d6, t6) = stored(6);
            mem.write_at(&d6, loc5.data_offset).unwrap();
            mem.write_at(&t6, loc5.tag_offset).unwrap();
            mem.write_at(&d5, loc6.data_offset).unwrap();
            mem.write_at(&t5, loc6.tag_offset).unwrap();
            let dev =
                AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
            let mut one = vec![0u8; bs];
            assert_eq!(dev.stats().blocks_replayed, 0);
            dev.read_at(&mut one, 3 * u64::from(sector)).unwrap();
            assert!(one == old[3 * bs..][..bs], "{kind:?} {sector}: the old block 3");
            for bad in [1u64, 2, 5, 6] {
                let e = dev
                    .read_at(&mut one, bad * u64::from(sector))
                    .map(|()| panic!("{kind:?} {sector}: block {bad} read"))
                    .unwrap_err();
                integrity_error(&e, bad * units);
                // Within a larger read too, and a partial one.
                let e = dev.read_at(&mut vec![0u8; 16 * bs], 0).unwrap_err();
                assert_eq!(e.kind(), io::ErrorKind::InvalidData);
                let e = dev.read_at(&mut [0u8; 7], bad * u64::from(sector) + 3).unwrap_err();
                integrity_error(&e, bad * units);
            }
            for good in [0u64, 4, 7, 15] {
                dev.read_at(&mut one, good * u64::from(sector)).unwrap();
                assert!(one == new[good as usize * bs..][..bs], "{kind:?} {sector}: block {good}");
            }
        }
    }
}

/// Unaligned writes (read, patch, rewrite a block) against a model, from
/// many threads at once into shared blocks.
#[test]
fn partial_block_writes_match_a_model() {
    for sector in [512u32, 4096] {
        let (mem, seg, key) = formatted(Kind::Hmac256, sector, 8 << 20, 0);
        let dev =
            AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
        let span = 64 * sector as usize;
        let mut model = vec![0u8; span];
        dev.write_at(&model, 0).unwrap();
        let mut rng = SplitMix64(u64::from(sector));
        for _ in 0..300 {
            let at = rng.below(span as u64 - 1) as usize;
            let len = 1 + rng.below((span - at).min(3 * sector as usize) as u64) as usize;
            let data = random(&mut rng, len);
            dev.write_at(&data, at as u64).unwrap();
            model[at..at + len].copy_from_slice(&data);
            if rng.below(5) == 0 {
                dev.flush().unwrap();
            }
        }
        let mut back = vec![0u8; span];
        dev.read_at(&mut back, 0).unwrap();
        assert!(back == model, "{sector}");
        // Threads patching bytes of the same blocks never lose each other's.
        std::thread::scope(|s| {
            for t in 0..4u8 {
                let dev = &dev;
                s.spawn(move || {
                    for i in 0..200usize {
                        let at = (i * 4 + usize::from(t)) as u64;
                        dev.write_at(&[t + 1], at).unwrap();
                        let mut b = [0u8; 1];
                        dev.read_at(&mut b, at).unwrap();
                        assert_eq!(b[0], t + 1);
                    }
                });
            }
        });
        let mut head = vec![0u8; 800];
        dev.read_at(&mut head, 0).unwrap();
        for (i, b) in head.iter().enumerate() {
            assert_eq!(*b, (i % 4) as u8 + 1, "{sector}: byte {i}");
        }
    }
}

/// Writers and readers on many threads while the journal commits behind
/// them: every read sees the block's latest write, whether it is in the
/// open sections, in a commit in progress or home; after a flush and a
/// reopening without a clean close, every block holds its last write.
#[test]
fn reads_see_every_write_while_commits_run() {
    // A journal of many sections, and one of a single section, where each
    // commit overwrites the one before it.
    for journal in [64 << 10, 512] {
        concurrent_writes_and_reads(journal);
    }
}

fn concurrent_writes_and_reads(journal: u64) {
    let (mem, seg, key) = formatted(Kind::Aead, 512, 6 << 20, journal);
    let dev = AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
    let sections = dev.geometry().journal.sections;
    assert!(journal > 512 || sections == 1, "{sections} sections");
    dev.wipe(&mut |_, _| {}).unwrap();
    let (threads, blocks_each, rounds) = (4u64, 256u64, 60u64);
    std::thread::scope(|s| {
        for t in 0..threads {
            let dev = &dev;
            s.spawn(move || {
                let mut rng = SplitMix64(t + 10);
                let mut mine = vec![0u8; (blocks_each * 512) as usize];
                let base = t * blocks_each;
                for round in 0..rounds {
                    let first = rng.below(blocks_each - 8);
                    let n = 1 + rng.below(8);
                    let data = random(&mut rng, (n * 512) as usize);
                    dev.write_at(&data, (base + first) * 512).unwrap();
                    mine[(first * 512) as usize..][..data.len()].copy_from_slice(&data);
                    let mut back = vec![0u8; mine.len()];
                    dev.read_at(&mut back, base * 512).unwrap();
                    assert!(back == mine, "thread {t} round {round}");
                    if t == 0 && round % 20 == 19 {
                        dev.flush().unwrap();
                    }
                }
                mine
            });
        }
    });
    let commits = dev.stats().commits;
    assert!(commits > 10, "{commits} commits in {sections} sections");
    let mut all = vec![0u8; (threads * blocks_each * 512) as usize];
    dev.read_at(&mut all, 0).unwrap();
    dev.flush().unwrap();
    let image = mem.snapshot();
    drop(dev);
    let crashed = Arc::new(MemDevice::new(image.len()));
    crashed.write_at(&image, 0).unwrap();
    let dev = AuthenticatedDevice::open(crashed, &seg, &key, IntegrityMode::Journal).unwrap();
    let mut after = vec![0u8; all.len()];
    dev.read_at(&mut after, 0).unwrap();
    assert!(after == all, "the reopened device differs");
}

/// A small journal lapped many times, with reopenings between (each
/// replays what is left, as the kernel does).
#[test]
fn journal_wraps_around_many_sections() {
    let (mem, seg, key) = formatted(Kind::Aead, 512, 6 << 20, 200 << 10);
    let dev = AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
    let sections = dev.geometry().journal.sections;
    assert!(sections >= 4, "{sections} sections");
    let mut rng = SplitMix64(3);
    let mut model: HashMap<u64, Vec<u8>> = HashMap::new();
    for round in 0..200 {
        let block = rng.below(2000);
        let n = 1 + rng.below(40);
        let data = random(&mut rng, n as usize * 512);
        dev.write_at(&data, block * 512).unwrap();
        for k in 0..n {
            model.insert(block + k, data[k as usize * 512..][..512].to_vec());
        }
        if round % 7 == 0 {
            dev.flush().unwrap();
        }
    }
    let stats = dev.stats();
    assert!(stats.commits > u64::from(sections) * 3, "{stats:?} for {sections} sections");
    for (block, want) in &model {
        let mut got = vec![0u8; 512];
        dev.read_at(&mut got, block * 512).unwrap();
        assert!(got == *want, "block {block}");
    }
    // Without the clean close (a crash after the last flush).
    dev.flush().unwrap();
    let image = mem.snapshot();
    drop(dev);
    let crashed = Arc::new(MemDevice::new(image.len()));
    crashed.write_at(&image, 0).unwrap();
    let dev =
        AuthenticatedDevice::open(crashed.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
    for (block, want) in &model {
        let mut got = vec![0u8; 512];
        dev.read_at(&mut got, block * 512).unwrap();
        assert!(got == *want, "block {block} after reopening");
    }
}

/// A journal committed but never copied home (the home writes lost) is
/// replayed on open, in both modes, and left empty.
#[test]
fn committed_journal_is_replayed() {
    for mode in [IntegrityMode::Journal, IntegrityMode::Direct] {
        let (mem, seg, key) = formatted(Kind::Hmac512, 4096, 8 << 20, 0);
        let dev =
            AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
        dev.wipe(&mut |_, _| {}).unwrap();
        let journal_end = dev.geometry().initial_bytes() + OFFSET;
        let before = mem.snapshot();
        let data = random(&mut SplitMix64(9), 20 * 4096);
        dev.write_at(&data, 8192).unwrap();
        dev.flush().unwrap();
        let after = mem.snapshot();
        drop(dev);
        // The journal as committed, the home locations as before.
        let mut image = before.clone();
        image[..journal_end as usize].copy_from_slice(&after[..journal_end as usize]);
        let crashed = Arc::new(MemDevice::new(image.len()));
        crashed.write_at(&image, 0).unwrap();
        let dev = AuthenticatedDevice::open(crashed.clone(), &seg, &key, mode).unwrap();
        assert_eq!(dev.stats().blocks_replayed, 20, "{mode:?}");
        let mut back = vec![0u8; data.len()];
        dev.read_at(&mut back, 8192).unwrap();
        assert!(back == data, "{mode:?}");
        drop(dev);
        let dev = AuthenticatedDevice::open(crashed.clone(), &seg, &key, mode).unwrap();
        assert_eq!(dev.stats().blocks_replayed, 0, "{mode:?}: the journal was emptied");
    }
}

#[test]
fn wipe_seals_zeros_everywhere() {
    for kind in [Kind::Hmac256, Kind::Aead] {
        let (mem, seg, key) = formatted(kind, 4096, 12 << 20, 0);
        let dev =
            AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
        dev.write_at(&[1u8; 4096], 0).unwrap();
        let mut calls = 0;
        let mut last = (0, 0);
        dev.wipe(&mut |done, total| {
            calls += 1;
            last = (done, total);
        })
        .unwrap();
        assert_eq!(last, (dev.len(), dev.len()));
        assert!(calls >= 1);
        let mut all = vec![1u8; dev.len() as usize];
        dev.read_at(&mut all, 0).unwrap();
        assert!(all.iter().all(|&b| b == 0), "{kind:?}");
        assert!(dev.stats().blocks_written_direct >= dev.len() / 4096);
    }
}

/// Superblocks Rampart refuses with one clear error, and random damage to
/// the superblock and journal never panics.
#[test]
fn refusals_and_damage() {
    let (mem, seg, key) = formatted(Kind::Hmac256, 512, 4 << 20, 0);
    let image = mem.snapshot();
    let at = OFFSET as usize;
    let open = |bytes: &[u8]| {
        let dev = MemDevice::new(bytes.len());
        dev.write_at(bytes, 0).unwrap();
        AuthenticatedDevice::open(dev, &seg, &key, IntegrityMode::Journal).map(|_| ())
    };
    open(&image).unwrap();
    let cases: [(usize, u8, &str); 5] = [
        (8, 6, "version 6"),
        (24, 0x1, "journal MAC"),
        (24, 0x4, "bitmap"),
        (10, 16, "tags"),
        (28, 3, "blocks"),
    ];
    for (offset, value, needle) in cases {
        let mut bad = image.clone();
        bad[at + offset] = if offset == 24 { bad[at + offset] | value } else { value };
        let err = open(&bad).unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
    let mut aead = seg.clone();
    aead.integrity.journal_encryption = "cbc(aes)".into();
    assert!(AuthenticatedDevice::open(
        MemDevice::new(image.len()),
        &aead,
        &key,
        IntegrityMode::Journal
    )
    .unwrap_err()
    .to_string()
    .contains("journal_encryption"));
    let sb = Superblock::parse(&image[at..at + SUPERBLOCK_BYTES]).unwrap();
    let journal_bytes = 8 * 512 + sb.journal_sections as usize * 44 * 1024;
    let mut rng = SplitMix64(11);
    for _ in 0..300 {
        let mut bad = image.clone();
        for _ in 0..1 + rng.below(4) {
            let i = at + rng.below(journal_bytes as u64) as usize;
            bad[i] = rng.next_u64() as u8;
        }
        if rng.below(3) == 0 {
            let i = at + 8 + rng.below(56) as usize;
            bad[i] = rng.next_u64() as u8;
        }
        let _ = open(&bad);
    }
}

/// Crash trials in journal mode: a sequence of writes (aligned, partial,
/// spanning many journal sections) and flushes, crashed before each of
/// its operations in turn; after the reboot every block reads (its tag
/// verifies), holds what the last completed flush left or a value
/// written since, and every flushed block is new.
#[test]
fn journal_mode_survives_a_crash_at_every_operation() {
    for (kind, sector) in [(Kind::Hmac256, 512u32), (Kind::Aead, 4096)] {
        let (mem, seg, key) = formatted(kind, sector, 4 << 20, 400 << 10);
        {
            let dev =
                AuthenticatedDevice::open(mem.clone(), &seg, &key, IntegrityMode::Direct).unwrap();
            dev.wipe(&mut |_, _| {}).unwrap();
        }
        let base = mem.snapshot();
        let bs = u64::from(sector);
        let blocks = 96u64;
        let run = |sim: &CrashSim, seed: u64| -> (Values, HashMap<u64, Vec<Vec<u8>>>) {
            let dev =
                AuthenticatedDevice::open(sim.clone(), &seg, &key, IntegrityMode::Journal).unwrap();
            let mut rng = SplitMix64(seed);
            let mut model = vec![0u8; (blocks * bs) as usize];
            let mut durable: HashMap<u64, Vec<u8>> =
                (0..blocks).map(|b| (b, vec![0u8; bs as usize])).collect();
            let mut since: HashMap<u64, Vec<Vec<u8>>> = HashMap::new();
            for _ in 0..24 {
                if rng.below(4) == 0 {
                    dev.flush().unwrap();
                    if !sim.has_crashed() {
                        for (b, mut values) in since.drain() {
                            durable.insert(b, values.pop().unwrap());
                        }
                    }
                    continue;
                }
                let (at, len) = if rng.below(3) == 0 {
                    let at = rng.below(blocks * bs - 10_000);
                    (at, 1 + rng.below(9_000))
                } else {
                    let first = rng.below(blocks - 40);
                    (first * bs, (1 + rng.below(40)) * bs)
                };
                let data = random(&mut rng, len as usize);
                dev.write_at(&data, at).unwrap();
                model[at as usize..(at + len) as usize].copy_from_slice(&data);
                for b in at / bs..(at + len).div_ceil(bs) {
                    since
                        .entry(b)
                        .or_default()
                        .push(model[(b * bs) as usize..][..bs as usize].to_vec());
                }
            }
            drop(dev);
            (durable, since)
        };
        let probe = CrashSim::new(base.clone(), 0);
        run(&probe, 1);
        let total = probe.ops();
        assert!(total > 30, "{total} operations");
        for crash in 0..total {
            let sim = CrashSim::new(base.clone(), crash * 31 + 5);
            sim.crash_at(crash);
            let (durable, since) = run(&sim, 1);
            let image = sim.crash_image();
            let after = Arc::new(MemDevice::new(image.len()));
            after.write_at(&image, 0).unwrap();
            let dev = AuthenticatedDevice::open(after.clone(), &seg, &key, IntegrityMode::Journal)
                .unwrap_or_else(|e| panic!("{kind:?}: crash at {crash}/{total}: {e}"));
            for b in 0..blocks {
                let mut got = vec![0u8; bs as usize];
                dev.read_at(&mut got, b * bs).unwrap_or_else(|e| {
                    panic!("{kind:?}: crash at {crash}/{total}: block {b}: {e}")
                });
                let ok = got == durable[&b] || since.get(&b).is_some_and(|v| v.contains(&got));
                assert!(
                    ok,
                    "{kind:?}: crash at {crash}/{total}: block {b} holds neither old nor new"
                );
            }
        }
    }
}
