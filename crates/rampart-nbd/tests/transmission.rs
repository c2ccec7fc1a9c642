//! The transmission phase from a raw client: requests over the limits,
//! zero-length requests, structured reply chunks, FLUSH and FUA.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rampart_nbd::proto::*;
use rampart_nbd::{BlockDevice, ServerConfig};
use rampart_volume::MemDevice;

use crate::client::*;

/// The bytes of [`patterned`] at `offset..offset + len`.
fn pattern(offset: u64, len: u64) -> Vec<u8> {
    (offset..offset + len).map(|i| (i % 251) as u8).collect()
}

/// An error reply to `handle`, simple or structured: its errno.
async fn error_of(client: &mut Client, structured: bool, handle: u64) -> u32 {
    if !structured {
        let (error, got) = client.simple_reply().await;
        assert_eq!(got, handle);
        return error;
    }
    let chunk = client.chunk().await;
    assert_eq!((chunk.kind, chunk.handle), (REPLY_TYPE_ERROR, handle), "{chunk:?}");
    assert_eq!(chunk.flags & REPLY_FLAG_DONE, REPLY_FLAG_DONE, "{chunk:?}");
    let message_len = u16::from_be_bytes([chunk.payload[4], chunk.payload[5]]) as usize;
    assert_eq!(chunk.payload.len(), 6 + message_len, "{chunk:?}");
    assert!(std::str::from_utf8(&chunk.payload[6..]).is_ok(), "{chunk:?}");
    u32::from_be_bytes(chunk.payload[..4].try_into().unwrap())
}

/// A read that succeeds, simple or structured: its data.
async fn read_ok(
    client: &mut Client,
    structured: bool,
    handle: u64,
    offset: u64,
    len: u32,
) -> Vec<u8> {
    if !structured {
        return client.simple_read(handle, offset, len).await.unwrap();
    }
    client.request(0, CMD_READ, handle, offset, len).await;
    let chunk = client.chunk().await;
    assert_eq!((chunk.kind, chunk.handle), (REPLY_TYPE_OFFSET_DATA, handle), "{chunk:?}");
    assert_eq!(chunk.flags & REPLY_FLAG_DONE, REPLY_FLAG_DONE, "{chunk:?}");
    assert_eq!(chunk.payload.len(), 8 + len as usize, "offset and data");
    assert_eq!(u64::from_be_bytes(chunk.payload[..8].try_into().unwrap()), offset);
    chunk.payload[8..].to_vec()
}

/// Zero-length requests are refused as nbdkit refuses them (EINVAL, or
/// ENOSPC for the writes, whose range check it fails) and the connection
/// goes on; a FLUSH, which has no range, is served. With structured
/// replies a zero-length read gets an error chunk, never a data chunk
/// too short to hold an offset and a byte (which libnbd drops the
/// connection over).
#[tokio::test]
async fn zero_length_requests_are_refused_and_the_connection_goes_on() {
    for structured in [false, true] {
        let mut client = Client::open(patterned(), structured).await;
        let cases = [
            (CMD_READ, EINVAL),
            (CMD_WRITE, ENOSPC),
            (CMD_TRIM, EINVAL),
            (CMD_WRITE_ZEROES, ENOSPC),
            (CMD_CACHE, EINVAL),
            (CMD_BLOCK_STATUS, EINVAL),
        ];
        for (handle, (kind, errno)) in (1..).zip(cases) {
            client.request(0, kind, handle, 4096, 0).await;
            let error = error_of(&mut client, structured, handle).await;
            assert_eq!(error, errno, "zero-length command {kind}, structured: {structured}");
        }
        client.request(0, CMD_FLUSH, 10, 0, 0).await;
        assert_eq!(client.simple_reply().await, (0, 10), "a flush");
        let data = read_ok(&mut client, structured, 11, 4096, 512).await;
        assert_eq!(data, pattern(4096, 512), "structured: {structured}");
    }
}

/// A FLUSH has no range: the specification reserves its offset and length
/// as zero, and one that sets either is refused with EINVAL (as nbdkit
/// refuses it) while the connection goes on.
#[tokio::test]
async fn a_flush_with_a_range_is_refused_and_the_connection_goes_on() {
    for structured in [false, true] {
        let mut client = Client::open(patterned(), structured).await;
        for (handle, (offset, len)) in (1..).zip([(4096, 0), (0, 512), (4096, 512)]) {
            client.request(0, CMD_FLUSH, handle, offset, len).await;
            let error = error_of(&mut client, structured, handle).await;
            assert_eq!(error, EINVAL, "flush of {offset}+{len}, structured: {structured}");
        }
        client.request(0, CMD_FLUSH, 4, 0, 0).await;
        assert_eq!(client.simple_reply().await, (0, 4), "a flush of no range");
        let data = read_ok(&mut client, structured, 5, 4096, 512).await;
        assert_eq!(data, pattern(4096, 512), "structured: {structured}");
    }
}

#[tokio::test]
async fn requests_beyond_the_export_are_refused_and_the_connection_goes_on() {
    for structured in [false, true] {
        let mut client = Client::open(patterned(), structured).await;
        for (handle, offset, len) in
            [(1, SIZE, 4096), (2, SIZE - 512, 4096), (3, u64::MAX - 511, 4096)]
        {
            client.request(0, CMD_READ, handle, offset, len).await;
            assert_eq!(error_of(&mut client, structured, handle).await, EINVAL, "{offset}+{len}");
        }
        // A write past the end: its payload is consumed and refused.
        let mut write = request_bytes(0, CMD_WRITE, 4, SIZE - 512, 4096);
        write.extend_from_slice(&[0xee; 4096]);
        client.send(&write).await;
        assert_eq!(error_of(&mut client, structured, 4).await, ENOSPC);
        client.request(0, CMD_WRITE_ZEROES, 5, SIZE, 512).await;
        assert_eq!(error_of(&mut client, structured, 5).await, ENOSPC);
        // Block status must start inside; it may reach past the end.
        if structured {
            client.request(0, CMD_BLOCK_STATUS, 6, SIZE, 512).await;
            assert_eq!(error_of(&mut client, structured, 6).await, EINVAL);
        }
        assert_eq!(
            read_ok(&mut client, structured, 7, SIZE - 512, 512).await,
            pattern(SIZE - 512, 512)
        );
    }
}

#[tokio::test]
async fn a_read_over_the_advertised_maximum_is_refused() {
    for structured in [false, true] {
        let mut client = Client::open(patterned(), structured).await;
        client.request(0, CMD_READ, 1, 0, MAX_REQUEST + 1).await;
        assert_eq!(error_of(&mut client, structured, 1).await, EINVAL);
        client.request(0, CMD_READ, 2, 0, u32::MAX).await;
        assert_eq!(error_of(&mut client, structured, 2).await, EINVAL);
        assert_eq!(read_ok(&mut client, structured, 3, 0, 4096).await, pattern(0, 4096));
    }
}

#[tokio::test]
async fn a_write_over_the_advertised_maximum_ends_the_connection() {
    let mut client = Client::open(patterned(), false).await;
    client.request(0, CMD_WRITE, 1, 0, MAX_REQUEST + 1).await;
    let error = client.closed().await.expect_err("a clean end");
    assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
}

#[tokio::test]
async fn unknown_commands_and_flags_are_refused() {
    for structured in [false, true] {
        let mut client = Client::open(patterned(), structured).await;
        client.request(0, 0x42, 1, 0, 512).await;
        assert_eq!(error_of(&mut client, structured, 1).await, EINVAL, "an unknown command");
        client.request(1 << 9, CMD_READ, 2, 0, 512).await;
        assert_eq!(error_of(&mut client, structured, 2).await, EINVAL, "an unknown flag");
        assert_eq!(read_ok(&mut client, structured, 3, 0, 512).await, pattern(0, 512));
    }
}

#[tokio::test]
async fn block_status_needs_a_negotiated_context() {
    let mut client = Client::open(patterned(), false).await;
    client.request(0, CMD_BLOCK_STATUS, 1, 0, 4096).await;
    assert_eq!(error_of(&mut client, false, 1).await, EINVAL);
}

#[tokio::test]
async fn a_bad_request_magic_ends_the_connection() {
    let mut client = Client::open(patterned(), false).await;
    client.send(&[0x42; 28]).await;
    let error = client.closed().await.expect_err("a clean end");
    assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
}

#[tokio::test]
async fn disconnect_ends_the_connection_cleanly() {
    let mut client = Client::open(patterned(), true).await;
    client.request(0, CMD_DISC, 1, 0, 0).await;
    client.closed().await.unwrap();
}

#[tokio::test]
async fn structured_replies_carry_one_done_chunk_of_the_right_type_and_length() {
    let mut client = Client::open(patterned(), true).await;
    // A large read goes out of the request buffer, a small one batched.
    for (handle, len) in [(1, 64 << 10), (2, 100)] {
        assert_eq!(read_ok(&mut client, true, handle, 512, len).await, pattern(512, len.into()));
    }
    // Block status: one extent of the context, covering what is left
    // when the request reaches past the end.
    for (handle, offset, len, covered) in [(3, 0, 8192, 8192), (4, SIZE - 512, 4096, 512)] {
        client.request(0, CMD_BLOCK_STATUS, handle, offset, len).await;
        let chunk = client.chunk().await;
        assert_eq!((chunk.kind, chunk.handle), (REPLY_TYPE_BLOCK_STATUS, handle), "{chunk:?}");
        assert_eq!(chunk.flags & REPLY_FLAG_DONE, REPLY_FLAG_DONE);
        assert_eq!(chunk.payload.len(), 12, "{chunk:?}");
        let word = |i: usize| u32::from_be_bytes(chunk.payload[i..i + 4].try_into().unwrap());
        assert_eq!((word(0), word(4), word(8)), (BASE_ALLOCATION_ID, covered, 0));
    }
    // Requests without data may be answered by a simple reply.
    let mut write = request_bytes(0, CMD_WRITE, 5, 0, 512);
    write.extend_from_slice(&[7; 512]);
    client.send(&write).await;
    assert_eq!(client.simple_reply().await, (0, 5));
    assert_eq!(read_ok(&mut client, true, 6, 0, 512).await, vec![7; 512]);
}

#[tokio::test]
async fn read_only_exports_refuse_writes() {
    let mut export = export("", patterned());
    export.read_only = true;
    let mut client = Client::connect(ServerConfig::new(vec![export])).await;
    client.send_flags(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES).await;
    let (_, flags) = client.go("").await;
    assert_eq!(flags & FLAG_READ_ONLY, FLAG_READ_ONLY);
    assert_eq!(client.simple_write(1, 0, &[1; 512], 0).await, EPERM);
    for (handle, kind) in [(2, CMD_TRIM), (3, CMD_WRITE_ZEROES)] {
        client.request(0, kind, handle, 0, 512).await;
        assert_eq!(client.simple_reply().await, (EPERM, handle));
    }
    assert_eq!(client.simple_read(4, 0, 512).await.unwrap(), pattern(0, 512));
}

/// A memory device that counts its flushes.
#[derive(Debug)]
struct Flushed {
    inner: MemDevice,
    flushes: AtomicU64,
}

impl BlockDevice for Flushed {
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.inner.read_at(buf, offset)
    }
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_at(buf, offset)
    }
    fn flush(&self) -> io::Result<()> {
        self.flushes.fetch_add(1, Ordering::SeqCst);
        self.inner.flush()
    }
    fn discard(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.discard(offset, len)
    }
    fn write_zeroes(&self, offset: u64, len: u64) -> io::Result<()> {
        self.inner.write_zeroes(offset, len)
    }
}

/// FLUSH and every FUA request are acknowledged only after the device
/// was flushed; writes without FUA are not flushed.
#[tokio::test]
async fn flush_and_fua_are_acknowledged_after_a_device_flush() {
    let device =
        Arc::new(Flushed { inner: MemDevice::new(SIZE as usize), flushes: AtomicU64::new(0) });
    let mut client = Client::open(Arc::clone(&device) as Arc<dyn BlockDevice>, false).await;
    let flushes = || device.flushes.load(Ordering::SeqCst);
    assert_eq!(client.simple_write(1, 0, &[1; 4096], 0).await, 0);
    assert_eq!(flushes(), 0, "a write without FUA");
    assert_eq!(client.simple_write(2, 4096, &[2; 4096], CMD_FLAG_FUA).await, 0);
    assert_eq!(flushes(), 1, "a FUA write");
    client.request(0, CMD_FLUSH, 3, 0, 0).await;
    assert_eq!(client.simple_reply().await, (0, 3));
    assert_eq!(flushes(), 2, "a flush");
    for (handle, kind) in [(4, CMD_TRIM), (5, CMD_WRITE_ZEROES)] {
        client.request(CMD_FLAG_FUA, kind, handle, 8192, 4096).await;
        assert_eq!(client.simple_reply().await, (0, handle));
    }
    assert_eq!(flushes(), 4, "FUA trim and write zeroes");
    let data = client.simple_read(6, 0, 12288).await.unwrap();
    assert_eq!(&data[..4096], &[1; 4096]);
    assert_eq!(&data[4096..8192], &[2; 4096]);
    assert_eq!(&data[8192..], &[0; 4096]);
}
