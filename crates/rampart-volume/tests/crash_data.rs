//! The data path (a LUKS2 volume's `CryptDevice`) over a simulated disk
//! with a volatile write cache (`rampart_volume::crashsim`), crashed at a
//! random operation of a random sequence of aligned and unaligned writes,
//! zeroings and flushes. After every crash the header loads and unlocks,
//! and every crypt sector holds what the last completed flush left there,
//! or one of the values written to it since (a write not yet flushed may
//! be lost, or overtaken by an earlier one; with crypt sectors larger than
//! the disk's atomic unit a torn unflushed sector may hold anything).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;

use rampart_luks::{FormatOptions, HashAlg, Luks, MemoryIo, SecretBytes};
use rampart_volume::crashsim::{CrashSim, SplitMix64};
use rampart_volume::{
    sector_cipher_kind, BlockDevice, CryptDevice, CryptLayout, MemDevice, SectorCipher,
};

const IMAGE: usize = 3 << 20;

fn formatted(sector_size: u32) -> (Vec<u8>, SecretBytes) {
    let io = MemoryIo::new(IMAGE);
    let opts = FormatOptions {
        pbkdf: rampart_test_support::fast_pbkdf2(HashAlg::Sha256),
        keyslots_size: Some(1 << 20),
        data_offset: Some(2 << 20),
        sector_size,
        ..FormatOptions::default()
    };
    let (_, key) = Luks::format(&io, &opts, b"pass").unwrap();
    (io.into_vec(), key)
}

fn crypt<D: BlockDevice>(device: D, luks: &Luks, key: &SecretBytes) -> CryptDevice<D> {
    let segment = luks.segment().unwrap();
    let layout = CryptLayout {
        offset: segment.offset,
        size: (device.len() - segment.offset) / u64::from(segment.sector_size)
            * u64::from(segment.sector_size),
        sector_size: segment.sector_size,
        iv_tweak: segment.iv_tweak,
    };
    let cipher = SectorCipher::new(sector_cipher_kind(segment.cipher), key).unwrap();
    CryptDevice::new(device, layout, cipher).unwrap()
}

/// Per crypt sector: the value the last completed flush made durable, and
/// the values written since.
#[derive(Default)]
struct Expect {
    durable: HashMap<u64, Vec<u8>>,
    since: HashMap<u64, Vec<Vec<u8>>>,
}

fn trial(sector: u64, seed: u64, image: &[u8], key: &SecretBytes) {
    let mut rng = SplitMix64(seed);
    let sim = CrashSim::new(image.to_vec(), seed);
    let luks = Luks::load(&sim).unwrap().0;
    let dev = crypt(sim.clone(), &luks, key);
    // Writes stay in the first 64 sectors, so that they overlap.
    let span = 64 * sector;
    let mut model = vec![0u8; span as usize];
    dev.read_at(&mut model, 0).unwrap();
    let mut expect = Expect::default();
    for s in 0..64 {
        let at = (s * sector) as usize;
        expect.durable.insert(s, model[at..at + sector as usize].to_vec());
    }
    let steps = 40;
    sim.crash_at(sim.ops() + rng.below(steps * 3));
    for _ in 0..steps {
        match rng.below(10) {
            0..=5 => {
                let aligned = rng.below(2) == 0;
                let (offset, len) = if aligned {
                    (rng.below(60) * sector, (1 + rng.below(4)) * sector)
                } else {
                    (rng.below(span - 9000), 1 + rng.below(9000))
                };
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                dev.write_at(&data, offset).unwrap();
                model[offset as usize..(offset + len) as usize].copy_from_slice(&data);
                touched(&mut expect, &model, sector, offset, len);
            }
            6 => {
                let (offset, len) = (rng.below(60) * sector, sector * (1 + rng.below(3)));
                dev.write_zeroes(offset, len).unwrap();
                model[offset as usize..(offset + len) as usize].fill(0);
                touched(&mut expect, &model, sector, offset, len);
            }
            _ => {
                dev.flush().unwrap();
                if !sim.has_crashed() {
                    for (s, mut values) in expect.since.drain() {
                        expect.durable.insert(s, values.pop().unwrap());
                    }
                }
            }
        }
    }
    // Reboot: the header must load and unlock, and the data obey the rules.
    let after = sim.crash_image();
    let meta = MemoryIo::from_vec(after.clone());
    let (luks, _) = Luks::load(&meta).unwrap();
    let (_, again) = luks.unlock(&meta, b"pass", None).unwrap();
    assert_eq!(again, *key);
    let mem = MemDevice::new(after.len());
    mem.write_at(&after, 0).unwrap();
    let back = crypt(mem, &luks, key);
    let torn_any = sector > 512;
    for s in 0..64 {
        let mut got = vec![0u8; sector as usize];
        back.read_at(&mut got, s * sector).unwrap();
        let durable = &expect.durable[&s];
        match expect.since.get(&s) {
            None => assert!(got == *durable, "seed {seed}: flushed sector {s} lost"),
            Some(_) if torn_any => {}
            Some(values) => assert!(
                got == *durable || values.contains(&got),
                "seed {seed}: sector {s} holds data never written to it"
            ),
        }
    }
}

fn touched(expect: &mut Expect, model: &[u8], sector: u64, offset: u64, len: u64) {
    for s in offset / sector..(offset + len).div_ceil(sector) {
        let at = (s * sector) as usize;
        expect.since.entry(s).or_default().push(model[at..at + sector as usize].to_vec());
    }
}

#[test]
fn flushed_writes_survive_every_crash_512_byte_sectors() {
    let (image, key) = formatted(512);
    for seed in 0..600 {
        trial(512, seed, &image, &key);
    }
}

#[test]
fn flushed_writes_survive_every_crash_4096_byte_sectors() {
    let (image, key) = formatted(4096);
    for seed in 0..400 {
        trial(4096, seed, &image, &key);
    }
}
