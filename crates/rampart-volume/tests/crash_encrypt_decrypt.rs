//! Encryption and decryption in place over a simulated disk with a
//! volatile write cache (`rampart_volume::crashsim`), crashed before a
//! random operation of the run (data, resilience area and header writes
//! and flushes alike), then resumed from what the medium kept: the resumed
//! run finishes, and the volume then holds exactly the plaintext it held
//! before — through the new key after an encryption (with a data shift,
//! backward, moved or in place under a detached header, or in place,
//! forward), as plain bytes after a decryption
//! (backward, or forward moving the data down over an exported attached
//! header). With checksum resilience the disk's atomic write unit is
//! the checksum block (4096 bytes), as cryptsetup requires.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use rampart_luks::{
    DataCipher, EncryptPlan, FormatOptions, HashAlg, Luks, MemoryIo, MetadataIo, PbkdfChoice,
    Resilience, SecretBytes,
};
use rampart_volume::crashsim::{CrashSim, SplitMix64};
use rampart_volume::{
    sector_cipher_kind, BlockDevice, CryptDevice, CryptLayout, MemDevice, Outcome,
    ReencryptOptions, Reencryption, SectorCipher,
};

const IMAGE: usize = 4 << 20;
const DATA_OFFSET: u64 = 1 << 20;
const HOTZONE: u64 = 256 << 10;

fn pbkdf() -> PbkdfChoice {
    rampart_test_support::fast_pbkdf2(HashAlg::Sha256)
}

fn none() -> SecretBytes {
    SecretBytes::new(Vec::new())
}

fn random(seed: u64, len: usize) -> Vec<u8> {
    let mut rng = SplitMix64(seed);
    let mut out = vec![0u8; len];
    for chunk in out.chunks_mut(8) {
        let v = rng.next_u64().to_le_bytes();
        chunk.copy_from_slice(&v[..chunk.len()]);
    }
    out
}

fn crypt<D: BlockDevice>(device: D, offset: u64, sector: u32, key: &SecretBytes) -> CryptDevice<D> {
    let size = (device.len() - offset) / u64::from(sector) * u64::from(sector);
    let layout = CryptLayout { offset, size, sector_size: sector, iv_tweak: 0 };
    let cipher = SectorCipher::new(sector_cipher_kind(DataCipher::AesXtsPlain64), key).unwrap();
    CryptDevice::new(device, layout, cipher).unwrap()
}

/// The bytes of a medium from `base` on, as a device of their own: the
/// data device when the header shares the medium before it (so that one
/// simulated crash hits both).
struct Window {
    sim: CrashSim,
    base: u64,
}

impl BlockDevice for Window {
    fn len(&self) -> u64 {
        BlockDevice::len(&self.sim) - self.base
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        BlockDevice::read_at(&self.sim, buf, self.base + offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        BlockDevice::write_at(&self.sim, buf, self.base + offset)
    }
    fn flush(&self) -> std::io::Result<()> {
        BlockDevice::flush(&self.sim)
    }
    fn discard(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.sim.discard(self.base + offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> std::io::Result<()> {
        self.sim.write_zeroes(self.base + offset, len)
    }
}

/// Runs (or resumes) the job on `sim` to its end or to the simulated power
/// cut; returns whether it finished.
fn run(sim: &CrashSim, old: &SecretBytes, new: &SecretBytes) -> bool {
    run_at(sim, 0, old, new)
}

/// [`run`] with the data device from byte `base` of the medium (0: the
/// header is attached, or shares its data device's start).
fn run_at(sim: &CrashSim, base: u64, old: &SecretBytes, new: &SecretBytes) -> bool {
    let data: Arc<dyn BlockDevice> =
        if base == 0 { Arc::new(sim.clone()) } else { Arc::new(Window { sim: sim.clone(), base }) };
    let job = match Reencryption::open_on(data, Arc::new(sim.clone()), old, new) {
        Ok(job) => job,
        Err(_) if sim.has_crashed() => return false,
        Err(e) => panic!("cannot open the reencryption: {e}"),
    };
    let options = ReencryptOptions { hotzone_size: Some(HOTZONE), ..Default::default() };
    match job.run(&options, &AtomicBool::new(false), &mut |_, _| {}) {
        Ok(Outcome::Finished) => true,
        Ok(other) => panic!("unexpected outcome {other:?}"),
        Err(_) if sim.has_crashed() => false,
        Err(e) => panic!("the run failed without a crash: {e}"),
    }
}

/// Crashes a run from `image` at `cases` random operations, resumes each,
/// and hands the finished medium to `verify`.
fn trials(
    what: &str,
    image: &[u8],
    keys: (&SecretBytes, &SecretBytes),
    tear: u64,
    cases: u64,
    verify: &dyn Fn(&str, &CrashSim),
) {
    trials_at(what, image, 0, keys, tear, cases, verify);
}

/// [`trials`] with the data device from byte `base` of the medium.
fn trials_at(
    what: &str,
    image: &[u8],
    base: u64,
    keys: (&SecretBytes, &SecretBytes),
    tear: u64,
    cases: u64,
    verify: &dyn Fn(&str, &CrashSim),
) {
    let run = |sim: &CrashSim, old: &SecretBytes, new: &SecretBytes| run_at(sim, base, old, new);
    let counter = CrashSim::with_tear(image.to_vec(), 0, tear);
    assert!(run(&counter, keys.0, keys.1), "{what}: the run did not finish");
    verify(&format!("{what}: no crash"), &counter);
    let total = counter.ops();
    let mut rng = SplitMix64(tear + cases);
    for case in 0..cases {
        let at = rng.below(total);
        let sim = CrashSim::with_tear(image.to_vec(), case + 1, tear);
        sim.crash_at(at);
        let _ = run(&sim, keys.0, keys.1);
        assert!(sim.has_crashed(), "{what}: no crash at operation {at} of {total}");
        let after = CrashSim::with_tear(sim.crash_image(), case + 100, tear);
        match Luks::load(&after) {
            Ok((luks, _)) if luks.reencrypt_state().unwrap().is_some() => {
                assert!(run(&after, keys.0, keys.1), "{what}: the resumed run did not finish");
            }
            Ok(_) => {}
            // An encryption crashed before its header was written: the
            // plaintext is where it was; nothing to resume.
            Err(e) => panic!("{what}: crash at {at} of {total}: no header: {e}"),
        }
        verify(&format!("{what}: crash at operation {at} of {total}"), &after);
    }
}

fn assert_plain(what: &str, got: &[u8], want: &[u8]) {
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b);
        panic!("{what}: plaintext differs at {first:?}");
    }
}

#[test]
fn encryption_with_a_data_shift_survives_crashes_anywhere() {
    for sector in [4096u32, 512] {
        let shift: u64 = 512 << 10;
        let plain = random(u64::from(sector), IMAGE);
        // The first `shift` bytes copied to the end (the moved segment),
        // then the header, as `rampart reencrypt --encrypt` does.
        let io = MemoryIo::from_vec(plain.clone());
        let tail = IMAGE as u64 - shift;
        io.write_at(tail, &plain[..shift as usize]).unwrap();
        let opts = FormatOptions {
            pbkdf: pbkdf(),
            sector_size: sector,
            data_offset: Some(shift),
            ..FormatOptions::default()
        };
        let plan = EncryptPlan {
            resilience: Resilience::None,
            device_len: IMAGE as u64,
            shift: Some(shift),
        };
        let (_, key) = Luks::format_encrypt(&io, &opts, b"pass", &plan).unwrap();
        let kept = IMAGE - 2 * shift as usize;
        let verify = |what: &str, sim: &CrashSim| {
            let (luks, _) = Luks::load(sim).unwrap();
            assert!(luks.reencrypt_state().unwrap().is_none(), "{what}");
            assert!(luks.verify_volume_key(&key).unwrap(), "{what}: not the new key");
            let segment = luks.segment().unwrap();
            assert_eq!((segment.offset, segment.sector_size), (shift, sector), "{what}");
            let device = crypt(sim.clone(), shift, sector, &key);
            let mut got = vec![0u8; kept];
            device.read_at(&mut got, 0).unwrap();
            assert_plain(what, &got, &plain[..kept]);
        };
        // The moved data never overlaps what a hotzone writes: any tearing.
        trials(&format!("shift {sector}"), &io.into_vec(), (&none(), &key), 512, 40, &verify);
    }
}

/// A header at the start of the image whose data, from `DATA_OFFSET`, is
/// plaintext about to be encrypted in place (forward, as with a detached
/// header).
fn to_encrypt(sector: u32, resilience: Resilience, plain: &[u8]) -> (Vec<u8>, SecretBytes) {
    let io = MemoryIo::from_vec(plain.to_vec());
    let opts = FormatOptions {
        pbkdf: pbkdf(),
        sector_size: sector,
        keyslots_size: Some(512 << 10),
        data_offset: Some(DATA_OFFSET),
        ..FormatOptions::default()
    };
    let plan = EncryptPlan { resilience, device_len: IMAGE as u64, shift: None };
    let (_, key) = Luks::format_encrypt(&io, &opts, b"pass", &plan).unwrap();
    (io.into_vec(), key)
}

#[test]
fn encryption_and_decryption_in_place_survive_crashes_anywhere() {
    let checksum = Resilience::Checksum { hash: HashAlg::Sha256, block_size: 4096 };
    for (sector, resilience, tear) in [
        (4096u32, checksum.clone(), 4096u64),
        (512, checksum, 4096),
        (512, Resilience::Journal, 512),
    ] {
        let what = format!("{sector} {}", resilience.name());
        let plain = random(u64::from(sector) + 1, IMAGE);
        let data = &plain[DATA_OFFSET as usize..];
        let (image, key) = to_encrypt(sector, resilience.clone(), &plain);
        let encrypted = |what: &str, sim: &CrashSim| {
            let (luks, _) = Luks::load(sim).unwrap();
            assert!(luks.reencrypt_state().unwrap().is_none(), "{what}");
            assert!(luks.verify_volume_key(&key).unwrap(), "{what}: not the new key");
            let device = crypt(sim.clone(), DATA_OFFSET, sector, &key);
            let mut got = vec![0u8; data.len()];
            device.read_at(&mut got, 0).unwrap();
            assert_plain(what, &got, data);
        };
        trials(&format!("encrypt {what}"), &image, (&none(), &key), tear, 25, &encrypted);

        // The encrypted volume, decrypted (backward).
        let done = CrashSim::with_tear(image.clone(), 0, tear);
        assert!(run(&done, &none(), &key));
        let (mut luks, _) = Luks::load(&done).unwrap();
        luks.reencrypt_init_decrypt(&done, &key, resilience.clone(), &pbkdf()).unwrap();
        let decrypted = |what: &str, sim: &CrashSim| {
            let (luks, _) = Luks::load(sim).unwrap();
            assert!(luks.reencrypt_state().unwrap().is_none(), "{what}");
            assert!(luks.active_keyslots().is_empty(), "{what}: keyslots left");
            let mut got = vec![0u8; data.len()];
            MetadataIo::read_at(sim, DATA_OFFSET, &mut got).unwrap();
            assert_plain(what, &got, data);
        };
        trials(
            &format!("decrypt {what}"),
            &done.cached_image(),
            (&key, &none()),
            tear,
            25,
            &decrypted,
        );
    }
}

/// cryptsetup's `--reduce-device-size` with a detached header: the data is
/// encrypted where it lies, backward, in hotzones of the shift, with
/// nothing moved; Rampart's record of each hotzone's plaintext in the
/// resilience area repairs one a crash interrupted. The header shares the
/// medium here (data from `DATA_OFFSET`) so that one crash hits both.
#[test]
fn encryption_in_place_with_a_data_shift_survives_crashes_anywhere() {
    for sector in [4096u32, 512] {
        let shift: u64 = 256 << 10;
        let plain = random(u64::from(sector) + 7, IMAGE);
        let data = &plain[DATA_OFFSET as usize..];
        let io = MemoryIo::from_vec(plain.clone());
        let opts = FormatOptions {
            pbkdf: pbkdf(),
            sector_size: sector,
            keyslots_size: Some(512 << 10),
            detached_header: true,
            data_offset: Some(DATA_OFFSET),
            ..FormatOptions::default()
        };
        let plan = EncryptPlan {
            resilience: Resilience::None,
            device_len: IMAGE as u64,
            shift: Some(shift),
        };
        let (_, key) = Luks::format_encrypt(&io, &opts, b"pass", &plan).unwrap();
        let (luks, _) = Luks::load(&io).unwrap();
        let state = luks.reencrypt_state().unwrap().unwrap();
        assert!(state.in_place_shift(), "{state:?}");
        assert_eq!(state.direction.name(), "backward");
        let verify = |what: &str, sim: &CrashSim| {
            let (luks, _) = Luks::load(sim).unwrap();
            assert!(luks.reencrypt_state().unwrap().is_none(), "{what}");
            assert!(luks.verify_volume_key(&key).unwrap(), "{what}: not the new key");
            let device = crypt(sim.clone(), DATA_OFFSET, sector, &key);
            let mut got = vec![0u8; data.len()];
            device.read_at(&mut got, 0).unwrap();
            assert_plain(what, &got, data);
        };
        // The checksum block (4096 bytes) is the atomic write unit.
        trials(
            &format!("in-place shift {sector}"),
            &io.into_vec(),
            (&none(), &key),
            4096,
            40,
            &verify,
        );
    }
}

/// cryptsetup 2.6's `reencrypt --decrypt --header NEWFILE` on an attached
/// header: the header exported, the first data-offset bytes of ciphertext
/// copied to the start of the device, then the data decrypted forward,
/// each hotzone written `shift` bytes below where it is read, the moved
/// chunk last, in place under its checksums. The exported header and the
/// data device share one medium here (header first) so that one crash
/// hits both.
#[test]
fn decryption_moving_the_data_down_survives_crashes_anywhere() {
    for sector in [4096u32, 512] {
        let shift: u64 = 512 << 10;
        let data_len = (2 << 20) + (128 << 10);
        let plain = random(u64::from(sector) + 11, data_len);
        // The attached volume: header, then the data under its key.
        let io = MemoryIo::new(shift as usize + data_len);
        let opts = FormatOptions {
            pbkdf: pbkdf(),
            sector_size: sector,
            keyslots_size: Some(384 << 10),
            data_offset: Some(shift),
            ..FormatOptions::default()
        };
        let (_, key) = Luks::format(&io, &opts, b"pass").unwrap();
        let mem = Arc::new(MemDevice::new(shift as usize + data_len));
        mem.write_at(&io.into_vec(), 0).unwrap();
        crypt(Arc::clone(&mem), shift, sector, &key).write_at(&plain, 0).unwrap();
        let attached = mem.snapshot();
        // What the initialisation leaves: the header exported, the first
        // chunk of ciphertext moved to the start of the device.
        let header = MemoryIo::from_vec(attached[..shift as usize].to_vec());
        let mut moved = attached.clone();
        moved.copy_within(shift as usize..2 * shift as usize, 0);
        let (mut luks, _) = Luks::load(&header).unwrap();
        let checksum = Resilience::Checksum { hash: HashAlg::Sha256, block_size: 4096 };
        let resilience = Resilience::Datashift {
            kind: "datashift-checksum".into(),
            shift,
            checksum: match checksum {
                Resilience::Checksum { hash, block_size } => Some((hash, block_size)),
                _ => None,
            },
        };
        luks.reencrypt_init_decrypt_shift(&header, &key, resilience, moved.len() as u64, &pbkdf())
            .unwrap();
        let state = luks.reencrypt_state().unwrap().unwrap();
        assert!(state.decrypt_shift(), "{state:?}");
        let mut medium = header.into_vec();
        medium.extend_from_slice(&moved);
        let verify = |what: &str, sim: &CrashSim| {
            let (luks, _) = Luks::load(sim).unwrap();
            assert!(luks.reencrypt_state().unwrap().is_none(), "{what}");
            assert!(luks.active_keyslots().is_empty(), "{what}: keyslots left");
            let mut got = vec![0u8; data_len];
            MetadataIo::read_at(sim, shift, &mut got).unwrap();
            assert_plain(what, &got, &plain);
        };
        let what = format!("decrypt moving {sector}");
        trials_at(&what, &medium, shift, (&key, &none()), 4096, 40, &verify);
    }
}
