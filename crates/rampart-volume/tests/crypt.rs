#![allow(clippy::unwrap_used)]
//! The crypt layer against a direct computation with the crypto engine:
//! aligned and unaligned I/O, sector sizes, IV offsets, parallel requests.

use std::sync::Arc;

use rampart_crypto::{fill_random, SecretBytes, Xts};
use rampart_volume::{
    BlockDevice, CryptDevice, CryptLayout, FileDevice, MemDevice, SectorCipher, SectorCipherKind,
};

fn random(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill_random(&mut v).unwrap();
    v
}

fn xts_key() -> SecretBytes {
    let mut key = random(64);
    key[0] = !key[32];
    SecretBytes::new(key)
}

fn device(sector: u32, iv_tweak: u64, key: &SecretBytes) -> CryptDevice<MemDevice> {
    let layout = CryptLayout { offset: 8192, size: 4 << 20, sector_size: sector, iv_tweak };
    let cipher = SectorCipher::new(SectorCipherKind::AesXtsPlain64, key).unwrap();
    CryptDevice::new(MemDevice::new((4 << 20) + 8192), layout, cipher).unwrap()
}

#[test]
fn ciphertext_is_luks_layout_with_512_byte_tweak_units() {
    for sector in [512u32, 4096] {
        let key = xts_key();
        let dev = device(sector, 5, &key);
        let plain = random(64 * 1024);
        dev.write_at(&plain, 3 * 4096).unwrap();
        let raw = dev.inner().snapshot();
        let mut expected = plain.clone();
        // Tweak = byte offset / 512 + iv_tweak, stepping by sector/512.
        Xts::new(key.expose())
            .unwrap()
            .encrypt_sectors(&mut expected, sector as usize, 3 * 8 + 5, u64::from(sector / 512))
            .unwrap();
        assert_eq!(&raw[8192 + 3 * 4096..8192 + 3 * 4096 + plain.len()], &expected[..]);
    }
}

#[test]
fn unaligned_reads_and_writes_match_a_plain_model() {
    let key = xts_key();
    let dev = device(4096, 0, &key);
    let mut model = vec![0u8; 4 << 20];
    dev.write_at(&model, 0).unwrap();
    for round in 0..300u64 {
        let mut word = [0u8; 8];
        fill_random(&mut word).unwrap();
        let r = u64::from_le_bytes(word);
        let offset = (r % (4 << 20)) as usize;
        let max = (4 << 20) - offset;
        let len = ((r >> 32) as usize % 20000).min(max);
        if round % 2 == 0 {
            let data = random(len);
            dev.write_at(&data, offset as u64).unwrap();
            model[offset..offset + len].copy_from_slice(&data);
        } else {
            let mut got = vec![0u8; len];
            dev.read_at(&mut got, offset as u64).unwrap();
            assert_eq!(got, model[offset..offset + len], "read {len} at {offset}");
        }
    }
    let mut all = vec![0u8; 4 << 20];
    dev.read_at(&mut all, 0).unwrap();
    assert_eq!(all, model);
}

#[test]
fn large_requests_split_across_threads_equal_small_ones() {
    let key = xts_key();
    let a = device(4096, 0, &key);
    let b = device(4096, 0, &key);
    let data = random(3 << 20);
    a.write_at(&data, 4096).unwrap();
    for (i, chunk) in data.chunks(4096).enumerate() {
        b.write_at(chunk, 4096 + (i * 4096) as u64).unwrap();
    }
    assert_eq!(a.inner().snapshot(), b.inner().snapshot());
}

#[test]
fn concurrent_writes_into_one_sector_never_lose_each_other() {
    let key = xts_key();
    let dev = Arc::new(device(4096, 0, &key));
    dev.write_zeroes(0, 4096 * 4).unwrap();
    std::thread::scope(|s| {
        for t in 0..8u8 {
            let dev = Arc::clone(&dev);
            s.spawn(move || {
                for round in 0..200usize {
                    // Thread t owns bytes [t*512, t*512+512) of sector (round % 4).
                    let sector = (round % 4) as u64 * 4096;
                    let data = [t.wrapping_add(round as u8); 512];
                    dev.write_at(&data, sector + u64::from(t) * 512).unwrap();
                }
            });
        }
    });
    let mut all = vec![0u8; 4096 * 4];
    dev.read_at(&mut all, 0).unwrap();
    for sector in 0..4usize {
        for t in 0..8usize {
            // The last round that touched this sector for thread t.
            let last = (0..200).filter(|r| r % 4 == sector).max().unwrap();
            let expect = (t as u8).wrapping_add(last as u8);
            let start = sector * 4096 + t * 512;
            assert!(
                all[start..start + 512].iter().all(|&b| b == expect),
                "sector {sector} thread {t}"
            );
        }
    }
}

#[test]
fn in_place_writes_equal_copying_writes() {
    let key = xts_key();
    let a = device(4096, 3, &key);
    let b = device(4096, 3, &key);
    for (offset, len) in [(0usize, 8192usize), (100, 50_000), (4096 * 7 + 5, 3), (12_288, 2 << 20)]
    {
        let data = random(len);
        a.write_at(&data, offset as u64).unwrap();
        let mut scratch = data.clone();
        b.write_at_mut(&mut scratch, offset as u64).unwrap();
    }
    assert_eq!(a.inner().snapshot(), b.inner().snapshot());
}

#[test]
fn out_of_range_requests_are_errors_not_panics() {
    let key = xts_key();
    let dev = device(4096, 0, &key);
    let mut buf = [0u8; 16];
    assert!(dev.read_at(&mut buf, (4 << 20) - 8).is_err());
    assert!(dev.write_at(&buf, u64::MAX - 4).is_err());
    assert!(dev.discard(u64::MAX, 2).is_err());
    assert!(dev.write_zeroes(4 << 20, 1).is_err());
    // A layout that does not fit the device is refused at construction.
    let layout = CryptLayout { offset: 8192, size: 8 << 20, sector_size: 4096, iv_tweak: 0 };
    let cipher = SectorCipher::new(SectorCipherKind::AesXtsPlain64, &key).unwrap();
    assert!(CryptDevice::new(MemDevice::new(1 << 20), layout, cipher).is_err());
}

#[test]
fn write_zeroes_reads_back_as_zeros() {
    let key = xts_key();
    let dev = device(512, 0, &key);
    dev.write_at(&random(100_000), 1000).unwrap();
    dev.write_zeroes(1500, 50_000).unwrap();
    let mut got = vec![1u8; 50_000];
    dev.read_at(&mut got, 1500).unwrap();
    assert!(got.iter().all(|&b| b == 0));
}

/// A crypt segment over a file reads its ciphertext in place from the
/// mapped page cache: every read, aligned or not, small or split across
/// cores, after writes through the file device, equals the same reads over
/// memory, for XTS and the legacy CBC cipher.
#[test]
fn reads_from_the_mapped_page_cache_equal_reads_from_memory() {
    let dir = std::env::temp_dir().join(format!("rampart-crypt-file-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (kind, key, sector) in [
        (SectorCipherKind::AesXtsPlain64, xts_key(), 4096u32),
        (SectorCipherKind::AesXtsPlain64, xts_key(), 512),
        (SectorCipherKind::AesCbcEssivSha256, SecretBytes::new(random(32)), 512),
    ] {
        let path = dir.join("volume");
        let _ = std::fs::remove_file(&path);
        let file = std::fs::File::create_new(&path).unwrap();
        file.set_len((4 << 20) + 8192).unwrap();
        drop(file);
        let layout = CryptLayout { offset: 8192, size: 4 << 20, sector_size: sector, iv_tweak: 9 };
        let on_file = CryptDevice::new(
            FileDevice::open(&path, false).unwrap(),
            layout,
            SectorCipher::new(kind, &key).unwrap(),
        )
        .unwrap();
        let in_memory = CryptDevice::new(
            MemDevice::new((4 << 20) + 8192),
            layout,
            SectorCipher::new(kind, &key).unwrap(),
        )
        .unwrap();
        let plain = random(4 << 20);
        on_file.write_at(&plain, 0).unwrap();
        in_memory.write_at(&plain, 0).unwrap();
        for (offset, len) in [(0u64, 4 << 20), (4096, 256 << 10), (777, 5000), (3 << 20, 1 << 20)] {
            let mut a = vec![0u8; len];
            let mut b = vec![1u8; len];
            on_file.read_at(&mut a, offset).unwrap();
            in_memory.read_at(&mut b, offset).unwrap();
            assert_eq!(a, b, "{kind:?} sector {sector}: {len} bytes at {offset}");
            assert_eq!(a, plain[offset as usize..offset as usize + len]);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Re-encryption reading the old ciphertext from the mapped page cache
/// (a file lends it) and reading it into the buffer (memory does not):
/// the same new ciphertext and the same checksums of the old one as a
/// read followed by `recrypt_sectors`.
#[test]
fn re_encryption_from_the_mapped_page_cache_equals_reading_first() {
    use rampart_crypto::HashAlg;
    let dir = std::env::temp_dir().join(format!("rampart-crypt-recrypt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("volume");
    let file = std::fs::File::create_new(&path).unwrap();
    file.set_len((4 << 20) + 8192).unwrap();
    drop(file);
    let (old_key, new_key) = (xts_key(), xts_key());
    let layout = CryptLayout { offset: 8192, size: 4 << 20, sector_size: 4096, iv_tweak: 3 };
    let cipher =
        |key: &SecretBytes| SectorCipher::new(SectorCipherKind::AesXtsPlain64, key).unwrap();
    let raw: Arc<dyn BlockDevice> = Arc::new(FileDevice::open(&path, false).unwrap());
    let memory: Arc<dyn BlockDevice> = Arc::new(MemDevice::new((4 << 20) + 8192));
    let plain = random(4 << 20);
    let mut pairs = Vec::new();
    for inner in [&raw, &memory] {
        let old = CryptDevice::new(Arc::clone(inner), layout, cipher(&old_key)).unwrap();
        let new = CryptDevice::new(Arc::clone(inner), layout, cipher(&new_key)).unwrap();
        old.write_at(&plain, 0).unwrap();
        pairs.push((old, new, Arc::clone(inner)));
    }
    for (offset, len) in [(0u64, 4usize << 20), (8192, 512 << 10), (1 << 20, 4096)] {
        let mut expected = vec![0u8; len];
        pairs[1].2.read_at(&mut expected, 8192 + offset).unwrap();
        let mut expected_sums = vec![0u8; len / 4096 * 32];
        pairs[1]
            .0
            .recrypt_sectors(
                &pairs[1].1,
                &mut expected,
                offset,
                Some((HashAlg::Sha256, 4096, &mut expected_sums)),
            )
            .unwrap();
        for (old, new, _) in &pairs {
            let mut got = vec![7u8; len];
            let mut sums = vec![0u8; len / 4096 * 32];
            old.read_recrypt_sectors(
                new,
                &mut got,
                offset,
                Some((HashAlg::Sha256, 4096, &mut sums)),
            )
            .unwrap();
            assert!(got == expected, "{len} bytes at {offset}");
            assert_eq!(sums, expected_sums, "{len} bytes at {offset}");
            let mut none = vec![9u8; len];
            old.read_recrypt_sectors(new, &mut none, offset, None).unwrap();
            assert!(none == expected, "{len} bytes at {offset}, no checksums");
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Someone truncates the file under a served volume: reads of what is gone
/// are errors (the mapped pages raise SIGBUS, which the read survives and
/// reports through pread), reads of what is left still decrypt.
#[test]
fn a_file_truncated_under_the_device_gives_read_errors_not_a_crash() {
    let dir = std::env::temp_dir().join(format!("rampart-crypt-trunc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("volume");
    let file = std::fs::File::create_new(&path).unwrap();
    file.set_len(2 << 20).unwrap();
    let key = xts_key();
    let layout = CryptLayout { offset: 0, size: 2 << 20, sector_size: 4096, iv_tweak: 0 };
    let dev = CryptDevice::new(
        FileDevice::open(&path, false).unwrap(),
        layout,
        SectorCipher::new(SectorCipherKind::AesXtsPlain64, &key).unwrap(),
    )
    .unwrap();
    let plain = random(2 << 20);
    dev.write_at(&plain, 0).unwrap();
    let mut all = vec![0u8; 2 << 20];
    dev.read_at(&mut all, 0).unwrap();
    assert_eq!(all, plain);
    file.set_len(1 << 20).unwrap();
    let error = dev.read_at(&mut all[..256 << 10], (3 << 20) / 2).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::UnexpectedEof, "{error}");
    let mut head = vec![0u8; 64 << 10];
    dev.read_at(&mut head, 4096).unwrap();
    assert_eq!(head, plain[4096..4096 + (64 << 10)]);
    std::fs::remove_dir_all(&dir).unwrap();
}
