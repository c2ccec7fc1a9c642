//! Starting a reencryption on disk (`rampart_volume::reencrypt_start`):
//! an encryption in place under an attached header (the data it covers
//! moved out of the way first) or a detached one, finished and read back
//! through cryptsetup; what is refused, with nothing written; a decryption
//! set up only with a detached header; a relock that finds another key.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::sync::atomic::AtomicBool;

use rampart_crypto::{HashAlg, SecretBytes};
use rampart_luks::{FormatOptions, Luks, LuksVersion, PbkdfChoice, ReencryptMode};
use rampart_test_support::{tool, TempDir};
use rampart_volume::crashsim::SplitMix64;
use rampart_volume::reencrypt_plan::ReencryptSettings;
use rampart_volume::reencrypt_start::{
    require_luks2, start_decrypt, DecryptAttachedStart, EncryptStart, StartError,
};
use rampart_volume::{
    BlockDevice, Outcome, ReencryptOptions, Reencryption, Volume, VolumeError, VolumePaths,
};

const MIB: u64 = 1 << 20;
const PASSPHRASE: &[u8] = b"correct horse";

fn pbkdf() -> PbkdfChoice {
    rampart_test_support::fast_pbkdf2(HashAlg::Sha256)
}

fn random(seed: u64, len: u64) -> Vec<u8> {
    let mut rng = SplitMix64(seed);
    let mut out = vec![0u8; usize::try_from(len).unwrap()];
    for chunk in out.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next_u64().to_le_bytes()[..chunk.len()]);
    }
    out
}

fn refused<T: std::fmt::Debug>(result: Result<T, StartError>) -> String {
    match result {
        Err(StartError::Refused(message)) => message,
        other => panic!("wanted a refusal, got {other:?}"),
    }
}

fn finish(paths: &VolumePaths, old: &SecretBytes, new: &SecretBytes) {
    let job = Reencryption::open(paths, old, new).unwrap();
    let outcome = job.run(&ReencryptOptions::default(), &AtomicBool::new(false), &mut |_, _| {});
    assert!(matches!(outcome, Ok(Outcome::Finished)), "{outcome:?}");
}

fn read_back(paths: &VolumePaths) -> Vec<u8> {
    let (volume, _) = Volume::open(paths, PASSPHRASE, None, true).unwrap();
    let device = volume.device();
    let mut out = vec![0u8; usize::try_from(device.len()).unwrap()];
    device.read_at(&mut out, 0).unwrap();
    out
}

/// cryptsetup opens the volume with the passphrase (its keyslot and
/// digest are cryptsetup's).
fn cryptsetup_accepts(paths: &VolumePaths, dir: &TempDir) {
    let key_file = dir.file("passphrase", PASSPHRASE);
    let mut command = Command::new(tool("cryptsetup"));
    command.args(["open", "--test-passphrase", "--key-file"]).arg(&key_file);
    if let Some(header) = &paths.header {
        command.arg("--header").arg(header);
    }
    let out = command.arg(&paths.data).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn an_attached_header_moves_the_data_it_covers_to_the_end_first() {
    let dir = TempDir::new("encrypt-attached");
    let plain = random(1, 48 * MIB);
    let paths = VolumePaths::new(&dir.file("vol.img", &plain), None);
    let settings =
        ReencryptSettings { reduce_device_size: Some(32 * MIB), ..ReencryptSettings::default() };
    let start = EncryptStart::prepare(&paths, &settings).unwrap();
    let key = start.write(pbkdf(), PASSPHRASE).unwrap();
    let on_disk = std::fs::read(&paths.data).unwrap();
    // The first 16 MiB (the shift), which the header now covers, went to
    // the last 16 MiB before the header was written.
    assert!(on_disk[32 << 20..] == plain[..16 << 20], "the moved chunk");
    let (luks, _) = Luks::load(&std::fs::File::open(&paths.data).unwrap()).unwrap();
    let state = luks.reencrypt_state().unwrap().expect("an encryption in progress");
    assert_eq!(state.mode, ReencryptMode::Encrypt);
    finish(&paths, &SecretBytes::new(Vec::new()), &key);
    // The data keeps its size less the reduction.
    assert!(read_back(&paths)[..16 << 20] == plain[..16 << 20], "the plaintext");
    cryptsetup_accepts(&paths, &dir);
}

#[test]
fn a_detached_header_is_created_owner_only_and_only_when_written() {
    let dir = TempDir::new("encrypt-detached");
    let plain = random(2, 8 * MIB);
    let data = dir.file("vol.img", &plain);
    let header = dir.join("vol.hdr");
    let paths = VolumePaths::new(&data, Some(&header));
    let start = EncryptStart::prepare(&paths, &ReencryptSettings::default()).unwrap();
    assert!(!header.exists(), "nothing is written before the passphrase is in hand");
    let key = start.write(pbkdf(), PASSPHRASE).unwrap();
    assert_eq!(std::fs::metadata(&header).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(std::fs::read(&data).unwrap() == plain, "the data waits for the run");
    finish(&paths, &SecretBytes::new(Vec::new()), &key);
    assert!(read_back(&paths) == plain, "the plaintext");
    cryptsetup_accepts(&paths, &dir);
}

#[test]
fn an_encrypted_volume_or_header_is_never_encrypted_again() {
    let dir = TempDir::new("encrypt-refused");
    let data = dir.sparse("vol.img", 32 * MIB);
    let paths = VolumePaths::new(&data, None);
    let detached = dir.join("missing.hdr");
    let message = refused(EncryptStart::prepare(&paths, &ReencryptSettings::default()));
    assert!(message.starts_with("--encrypt needs room for the header"), "{message}");

    let opts = FormatOptions { pbkdf: pbkdf(), ..FormatOptions::default() };
    Luks::format(&paths.open_header(true).unwrap(), &opts, PASSPHRASE).unwrap();
    let before = std::fs::read(&data).unwrap();
    let settings =
        ReencryptSettings { reduce_device_size: Some(32 * MIB), ..ReencryptSettings::default() };
    let message = refused(EncryptStart::prepare(&paths, &settings));
    assert!(
        message.ends_with(
            "it is encrypted already (use `rampart reencrypt` without --encrypt to change its key)"
        ),
        "{message}"
    );

    // A detached header file that holds a header already is not overwritten.
    let plain = dir.sparse("plain.img", 8 * MIB);
    let message = refused(EncryptStart::prepare(
        &VolumePaths::new(&plain, Some(&data)),
        &ReencryptSettings::default(),
    ));
    assert!(
        message.ends_with("already holds a LUKS header: refusing to overwrite it"),
        "{message}"
    );
    assert!(std::fs::read(&data).unwrap() == before, "nothing was written");
    assert!(!detached.exists());
}

/// A LUKS2 volume of 8 MiB in `dir` whose header is detached.
fn detached_volume(dir: &TempDir) -> (VolumePaths, Luks, SecretBytes) {
    let data = dir.sparse("vol.img", 8 * MIB);
    let header = dir.sparse("vol.hdr", 0);
    let detached = VolumePaths::new(&data, Some(&header));
    let opts = FormatOptions {
        pbkdf: pbkdf(),
        detached_header: true,
        data_offset: Some(0),
        ..FormatOptions::default()
    };
    let (luks, key) =
        Luks::format(&detached.open_header(true).unwrap(), &opts, PASSPHRASE).unwrap();
    (detached, luks, key)
}

#[test]
fn a_decryption_in_place_is_recorded_only_under_a_detached_header() {
    let dir = TempDir::new("decrypt-start");
    let (detached, luks, key) = detached_volume(&dir);
    let data = detached.data.clone();

    let attached = VolumePaths::new(&data, None);
    let message =
        refused(start_decrypt(&attached, &ReencryptSettings::default(), &luks, &key, &pbkdf()));
    assert!(
        message.starts_with(&format!(
            "{} has its header attached: give --header NEWFILE",
            data.display()
        )),
        "{message}"
    );

    start_decrypt(&detached, &ReencryptSettings::default(), &luks, &key, &pbkdf()).unwrap();
    let (_, reloaded, _) = detached.load(false).unwrap();
    let state = reloaded.reencrypt_state().unwrap().expect("a decryption in progress");
    assert_eq!(state.mode, ReencryptMode::Decrypt);
}

#[test]
fn a_decryption_moving_an_attached_header_needs_an_idle_luks2_one() {
    let dir = TempDir::new("decrypt-attached-start");
    let new_header = dir.path().join("new.hdr");
    let plain = dir.sparse("plain.img", 8 * MIB);
    let moving = VolumePaths::new(&plain, Some(&new_header));
    match DecryptAttachedStart::prepare(&moving, &ReencryptSettings::default(), &new_header) {
        Err(error @ StartError::NoAttachedHeader { .. }) => assert_eq!(
            error.to_string(),
            format!(
                "{} does not exist, so {} must hold its LUKS2 header (to be exported to it)",
                new_header.display(),
                plain.display()
            )
        ),
        other => panic!("a header was found on plaintext: {other:?}"),
    }

    let settings = ReencryptSettings {
        cipher: Some("aes-xts-plain64".into()),
        ..ReencryptSettings::default()
    };
    let message = refused(DecryptAttachedStart::prepare(&moving, &settings, &new_header));
    assert!(message.starts_with("--decrypt takes no --cipher"), "{message}");

    let luks1 = dir.sparse("luks1.img", 8 * MIB);
    let opts = FormatOptions { pbkdf: pbkdf(), ..FormatOptions::default_for(LuksVersion::Luks1) };
    Luks::format(&VolumePaths::new(&luks1, None).open_header(true).unwrap(), &opts, PASSPHRASE)
        .unwrap();
    let message = refused(DecryptAttachedStart::prepare(
        &VolumePaths::new(&luks1, Some(&new_header)),
        &ReencryptSettings::default(),
        &new_header,
    ));
    assert_eq!(
        message,
        format!("{} is LUKS1: only LUKS2 volumes can be decrypted in place", luks1.display())
    );

    let luks2 = dir.sparse("luks2.img", 32 * MIB);
    let attached = VolumePaths::new(&luks2, None);
    let opts = FormatOptions { pbkdf: pbkdf(), ..FormatOptions::default() };
    Luks::format(&attached.open_header(true).unwrap(), &opts, PASSPHRASE).unwrap();
    let start = DecryptAttachedStart::prepare(
        &VolumePaths::new(&luks2, Some(&new_header)),
        &ReencryptSettings::default(),
        &new_header,
    )
    .unwrap();
    assert_eq!(start.header_path(), luks2.as_path());
    assert!(start.luks.reencrypt_state().unwrap().is_none());
    assert!(!new_header.exists(), "nothing is written before the key is asked for");
}

#[test]
fn a_relock_refuses_a_header_whose_key_changed_meanwhile() {
    let dir = TempDir::new("relock");
    let paths = VolumePaths::new(&dir.sparse("vol.img", 32 * MIB), None);
    let opts = FormatOptions { pbkdf: pbkdf(), ..FormatOptions::default() };
    let (_, key) = Luks::format(&paths.open_header(true).unwrap(), &opts, PASSPHRASE).unwrap();
    paths.relock(&key).unwrap();
    // Formatted again, by someone else, while the first key was in hand.
    Luks::format(&paths.open_header(true).unwrap(), &opts, PASSPHRASE).unwrap();
    match paths.relock(&key) {
        Err(error @ VolumeError::HeaderChanged(_)) => assert_eq!(
            error.to_string(),
            format!("the header of {} changed while its key was being recovered, and no longer holds that key; nothing was written", paths.data.display())
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn only_a_luks2_header_records_a_reencryption_in_progress() {
    let dir = TempDir::new("in-progress");
    let luks1 = dir.sparse("luks1.img", 8 * MIB);
    let paths = VolumePaths::new(&luks1, None);
    assert!(!rampart_volume::reencrypt_start::in_progress(&paths), "plaintext");
    let opts = FormatOptions { pbkdf: pbkdf(), ..FormatOptions::default_for(LuksVersion::Luks1) };
    let (luks, _) = Luks::format(&paths.open_header(true).unwrap(), &opts, PASSPHRASE).unwrap();
    assert!(!rampart_volume::reencrypt_start::in_progress(&paths));
    let message = refused(require_luks2(&luks, &luks1));
    assert_eq!(
        message,
        format!("{} is LUKS1: only LUKS2 volumes can be re-encrypted in place", luks1.display())
    );

    let (detached, luks, key) = detached_volume(&dir);
    let header = detached.header.clone().unwrap();
    require_luks2(&luks, &header).unwrap();
    assert!(!rampart_volume::reencrypt_start::in_progress(&detached));
    start_decrypt(&detached, &ReencryptSettings::default(), &luks, &key, &pbkdf()).unwrap();
    assert!(rampart_volume::reencrypt_start::in_progress(&detached));
}
