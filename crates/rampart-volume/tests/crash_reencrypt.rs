//! Re-encryption over a simulated disk with a volatile write cache
//! (`rampart_volume::crashsim`), crashed before a random operation of the
//! run (data, resilience area and header writes and flushes alike), then
//! resumed from what the medium kept: the resumed run finishes, and the
//! volume then reads, through the new key only, exactly the plaintext it
//! held before. With checksum resilience the disk's atomic write unit is
//! the checksum block (4096 bytes), as cryptsetup requires; the journal
//! survives any tearing.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rampart_luks::{
    DataCipher, FormatOptions, HashAlg, Luks, MemoryIo, PbkdfChoice, Resilience, SecretBytes,
};
use rampart_volume::crashsim::{CrashSim, SplitMix64};
use rampart_volume::{
    sector_cipher_kind, BlockDevice, CryptDevice, CryptLayout, Outcome, ReencryptOptions,
    Reencryption, SectorCipher,
};

const IMAGE: usize = 4 << 20;
const DATA_OFFSET: u64 = 2 << 20;
const HOTZONE: u64 = 256 << 10;

fn pbkdf() -> PbkdfChoice {
    rampart_test_support::fast_pbkdf2(HashAlg::Sha256)
}

fn crypt<D: BlockDevice>(device: D, sector: u32, key: &SecretBytes) -> CryptDevice<D> {
    let size = (device.len() - DATA_OFFSET) / u64::from(sector) * u64::from(sector);
    let layout = CryptLayout { offset: DATA_OFFSET, size, sector_size: sector, iv_tweak: 0 };
    let cipher = SectorCipher::new(sector_cipher_kind(DataCipher::AesXtsPlain64), key).unwrap();
    CryptDevice::new(device, layout, cipher).unwrap()
}

/// A volume with random plaintext whose reencryption is initialised:
/// (image, plaintext, old key, new key).
fn initialised(
    sector: u32,
    new_sector: u32,
    resilience: Resilience,
) -> (Vec<u8>, Vec<u8>, SecretBytes, SecretBytes) {
    let io = MemoryIo::new(IMAGE);
    let opts = FormatOptions {
        pbkdf: pbkdf(),
        keyslots_size: Some(1 << 20),
        data_offset: Some(DATA_OFFSET),
        sector_size: sector,
        ..FormatOptions::default()
    };
    let (mut luks, old_key) = Luks::format(&io, &opts, b"pass").unwrap();
    let image = io.into_vec();
    let sim = CrashSim::new(image, 1);
    let device = crypt(sim.clone(), sector, &old_key);
    let mut rng = SplitMix64(7);
    let mut plain = vec![0u8; device.len() as usize];
    for chunk in plain.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    device.write_at(&plain, 0).unwrap();
    device.flush().unwrap();
    let new_key = SecretBytes::new((0..64u8).map(|i| i.wrapping_mul(37).wrapping_add(5)).collect());
    luks.reencrypt_init(
        &sim,
        &old_key,
        &new_key,
        DataCipher::AesXtsPlain64,
        new_sector,
        resilience,
        &pbkdf(),
        &[b"pass"],
    )
    .unwrap();
    (sim.cached_image(), plain, old_key, new_key)
}

/// Runs (or resumes) the reencryption on `sim` to its end or to the
/// simulated power cut; returns whether it finished.
fn run(sim: &CrashSim, old: &SecretBytes, new: &SecretBytes) -> bool {
    let data: Arc<dyn BlockDevice> = Arc::new(sim.clone());
    let job = match Reencryption::open_on(data, Arc::new(sim.clone()), old, new) {
        Ok(job) => job,
        Err(e) if sim.has_crashed() => {
            let _ = e;
            return false;
        }
        Err(e) => panic!("cannot open the reencryption: {e}"),
    };
    let options = ReencryptOptions { hotzone_size: Some(HOTZONE), ..Default::default() };
    match job.run(&options, &AtomicBool::new(false), &mut |_, _| {}) {
        Ok(Outcome::Finished) => true,
        Ok(other) => panic!("unexpected outcome {other:?}"),
        Err(_) if sim.has_crashed() => false,
        Err(e) => panic!("reencryption failed without a crash: {e}"),
    }
}

fn check(sector: u32, new_sector: u32, resilience: Resilience, tear: u64, cases: u64) {
    let what = format!("{sector}->{new_sector} {}", resilience.name());
    let (image, plain, old, new) = initialised(sector, new_sector, resilience);
    // How many operations a whole run takes.
    let counter = CrashSim::with_tear(image.clone(), 0, tear);
    assert!(run(&counter, &old, &new), "{what}: the run did not finish");
    let total = counter.ops();
    let mut rng = SplitMix64(u64::from(sector) * 31 + u64::from(new_sector));
    for case in 0..cases {
        let at = rng.below(total);
        let sim = CrashSim::with_tear(image.clone(), case + 1, tear);
        sim.crash_at(at);
        let _ = run(&sim, &old, &new);
        assert!(sim.has_crashed(), "{what}: no crash at operation {at} of {total}");
        let after = CrashSim::with_tear(sim.crash_image(), case + 100, tear);
        let (luks, _) = Luks::load(&after).unwrap();
        if luks.reencrypt_state().unwrap().is_some() {
            assert!(run(&after, &old, &new), "{what}: the resumed run did not finish");
        }
        let (luks, _) = Luks::load(&after).unwrap();
        assert!(luks.reencrypt_state().unwrap().is_none(), "{what}: crash at {at}");
        assert!(luks.verify_volume_key(&new).unwrap(), "{what}: crash at {at}: not the new key");
        let segment = luks.segment().unwrap();
        assert_eq!(segment.sector_size, new_sector, "{what}");
        let device = crypt(after.clone(), new_sector, &new);
        let mut got = vec![0u8; plain.len()];
        device.read_at(&mut got, 0).unwrap();
        if got != plain {
            let first = got.iter().zip(&plain).position(|(a, b)| a != b);
            panic!("{what}: crash at operation {at} of {total}: plaintext differs at {first:?}");
        }
    }
}

#[test]
fn checksum_resilience_survives_crashes_anywhere() {
    check(4096, 4096, Resilience::Checksum { hash: HashAlg::Sha256, block_size: 4096 }, 4096, 40);
    check(512, 4096, Resilience::Checksum { hash: HashAlg::Sha256, block_size: 4096 }, 4096, 20);
}

#[test]
fn journal_resilience_survives_crashes_anywhere() {
    check(4096, 4096, Resilience::Journal, 512, 40);
    check(512, 512, Resilience::Journal, 512, 20);
}
