//! Whole-volume plaintext streams (`rampart_volume::stream`): ranges
//! checked before a byte moves, a round trip through export and import,
//! and an input of unknown length that outgrows the device stopped with
//! what was written said.

use rampart_volume::stream::{export, export_range, import, StreamError};
use rampart_volume::{BlockDevice, MemDevice};

const SIZE: u64 = 20 << 20;

fn refused<T: std::fmt::Debug>(result: Result<T, StreamError>) -> String {
    match result {
        Err(StreamError::Refused(message)) => message,
        other => panic!("wanted a refusal, got {other:?}"),
    }
}

fn device() -> MemDevice {
    MemDevice::new(usize::try_from(SIZE).unwrap())
}

fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8).collect()
}

#[test]
fn ranges_beyond_the_device_are_refused() {
    assert_eq!(export_range(SIZE, 10, Some(5)).unwrap(), 10..15);
    assert_eq!(export_range(SIZE, 10, None).unwrap(), 10..SIZE);
    assert_eq!(
        refused(export_range(SIZE, SIZE + 1, None)),
        format!("--offset {} lies beyond the volume ({SIZE} bytes)", SIZE + 1)
    );
    assert_eq!(
        refused(export_range(SIZE, 4, Some(u64::MAX))),
        format!("--offset/--length reach beyond the volume ({SIZE} bytes)")
    );
    let device = device();
    let mut input: &[u8] = &[0u8; 16];
    let message = refused(import(&mut input, "in.img", Some(SIZE), &device, 1, |_| {}));
    assert_eq!(
        message,
        format!(
            "in.img ({SIZE} bytes) does not fit in the volume ({} bytes from offset 1)",
            SIZE - 1
        )
    );
}

#[test]
fn an_import_comes_back_out_of_an_export_byte_for_byte() {
    let device = device();
    let data = pattern(9 << 20 | 123);
    let mut seen = 0;
    let mut input: &[u8] = &data;
    let written = import(&mut input, "-", None, &device, 4096, |n| seen += n).unwrap();
    assert_eq!((written, seen), (data.len() as u64, data.len() as u64));
    let mut out = Vec::new();
    let range = export_range(device.len(), 4096, Some(data.len() as u64)).unwrap();
    let exported = export(&device, range, &mut out, 2, |_| {}).unwrap();
    assert_eq!(exported, data.len() as u64);
    assert!(out == data, "the exported bytes");
}

#[test]
fn an_input_of_unknown_length_larger_than_the_device_is_stopped() {
    let device = device();
    let data = pattern(usize::try_from(SIZE).unwrap() + (1 << 20));
    let mut input: &[u8] = &data;
    let message = refused(import(&mut input, "-", None, &device, 0, |_| {}));
    assert_eq!(
        message,
        format!("the input is larger than the volume ({SIZE} bytes from offset 0); the first 16777216 bytes were written")
    );
    let mut head = vec![0u8; 16 << 20];
    device.read_at(&mut head, 0).unwrap();
    assert!(head[..] == data[..16 << 20], "the pieces before the refusal are written");
}
