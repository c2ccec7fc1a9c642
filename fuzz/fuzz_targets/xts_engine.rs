//! Differential fuzzing of Rampart's AES-XTS engine: every CPU path this
//! machine has (VAES-512, VAES-256, AES-NI) against the AWS-LC path, on
//! keys, tweaks, sector sizes, sector counts, data unit lengths (with
//! ciphertext stealing) and buffer offsets taken from the input, sectors
//! also one per call in order on the same instance; plus a round trip.
//! Any difference or failed round trip aborts.
//!
//! Input layout: byte 0 selects key size and operation, bytes 1..3 the
//! sector size / unit length, byte 3 the buffer offset, then 64 key bytes,
//! 8 bytes of first tweak, 8 of step, 16 of full tweak, the rest is data.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rampart_crypto::{Xts, XtsPath};

const HEADER: usize = 4 + 64 + 8 + 8 + 16;
const SECTOR_SIZES: [usize; 8] = [16, 32, 48, 512, 1024, 2048, 4096, 528];

fuzz_target!(|input: &[u8]| {
    if input.len() < HEADER + 16 {
        return;
    }
    let (head, data) = input.split_at(HEADER);
    let key_len = if head[0] & 1 == 0 { 32 } else { 64 };
    let key = &head[4..4 + key_len];
    if key[..key_len / 2] == key[key_len / 2..] {
        assert!(Xts::new(key).is_err());
        return;
    }
    let first = u64::from_le_bytes(head[68..76].try_into().unwrap_or([0; 8]));
    let step = u64::from_le_bytes(head[76..84].try_into().unwrap_or([0; 8]));
    let tweak: [u8; 16] = head[84..100].try_into().unwrap_or([0; 16]);
    let offset = usize::from(head[3] % 64);
    let mut reference = Xts::with_path(key, XtsPath::AwsLc).expect("aws-lc path always exists");

    let as_units = head[0] & 2 != 0;
    let (len, sector) = if as_units {
        // One data unit of any length ≥ 16, ciphertext stealing included.
        let len = 16 + usize::from(u16::from_le_bytes([head[1], head[2]])) % (data.len() - 15);
        (len, len)
    } else {
        let sector = SECTOR_SIZES[usize::from(head[1] % 8)];
        (data.len() / sector * sector, sector)
    };
    if len == 0 {
        return;
    }
    let plain = &data[..len];
    let mut expected = plain.to_vec();
    if as_units {
        reference.encrypt_unit(&tweak, &mut expected).expect("unit");
    } else {
        reference.encrypt_sectors(&mut expected, sector, first, step).expect("sectors");
    }

    for path in XtsPath::ALL {
        if path == XtsPath::AwsLc || !path.available() {
            continue;
        }
        let mut xts = Xts::with_path(key, path).expect("available path");
        let mut storage = vec![0u8; offset + len];
        let buf = &mut storage[offset..];
        buf.copy_from_slice(plain);
        if as_units {
            xts.encrypt_unit(&tweak, buf).expect("unit");
            assert_eq!(buf, &expected[..], "{path:?} unit encrypt");
            xts.decrypt_unit(&tweak, buf).expect("unit");
        } else {
            xts.encrypt_sectors(buf, sector, first, step).expect("sectors");
            assert_eq!(buf, &expected[..], "{path:?} sectors encrypt");
            let mut out = vec![0u8; len];
            xts.decrypt_sectors_to(buf, &mut out, sector, first, step).expect("sectors");
            buf.copy_from_slice(&out);
            // One sector per call on the same instance: after the first,
            // each finds its tweak left ready by the call before.
            let mut single = plain.to_vec();
            for (i, one) in single.chunks_mut(sector).enumerate() {
                let number = first.wrapping_add(step.wrapping_mul(i as u64));
                xts.encrypt_sectors(one, sector, number, step).expect("one sector");
            }
            assert_eq!(single, expected, "{path:?} one sector per call");
        }
        assert_eq!(buf, plain, "{path:?} round trip");
    }
});
