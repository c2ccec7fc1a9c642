//! Streaming with constant memory: a reader thread fills batches of
//! segments, this thread seals or opens each batch's segments on every
//! core, and a writer thread writes them, so that reading, crypto and
//! writing overlap. At most [`BUFFERS`] batches of about [`BATCH_BYTES`]
//! exist at once, whatever the file size.
//!
//! A segment's finality (Tink's last-segment flag) is known only once the
//! input has ended, so the reader holds each full batch back until it has
//! read at least one byte of the next one.

use std::io::{Read, Write};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use rayon::prelude::*;

use crate::stream::{SegmentCipher, TAG_LEN};
use crate::{Error, Progress, Result, Summary};

/// Bytes of ciphertext per batch (at least one segment).
const BATCH_BYTES: usize = 4 << 20;
/// What a batch reads first when decrypting (it doubles up to the batch).
const FIRST_READ: usize = 64 << 10;
/// Batches in flight: one being read, one held back, one in the crypto,
/// one being written.
const BUFFERS: usize = 4;

/// Which part of a stream to decrypt.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Window {
    /// The index of the first segment the input starts with.
    pub first: u64,
    /// Whether the input ends where the stream ends (its last segment is
    /// the last one) rather than at a segment boundary inside it.
    pub to_stream_end: bool,
    /// Plaintext bytes to drop from the start of the first segment.
    pub skip: u64,
    /// Plaintext bytes to write at most.
    pub limit: u64,
}

struct Batch {
    buf: Vec<u8>,
    first: u64,
    /// Each segment's range in `buf` (ciphertext, tag included).
    slots: Vec<(usize, usize)>,
    last: bool,
}

/// Reads until `buf` is full or the input ends; returns the bytes read.
pub(crate) fn read_full(input: &mut (impl Read + ?Sized), buf: &mut [u8]) -> Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(filled)
}

fn segments_per_batch(cipher: &SegmentCipher) -> u64 {
    (BATCH_BYTES / cipher.params().segment_size as usize).max(1) as u64
}

/// Fills a batch for encryption: each segment's plaintext goes where its
/// ciphertext will be, leaving room for the tag. Returns whether the input
/// ended.
fn fill_plaintext(
    cipher: &SegmentCipher,
    input: &mut (dyn Read + Send),
    batch: &mut Batch,
) -> Result<bool> {
    let params = cipher.params();
    let mut at = 0;
    for index in batch.first..batch.first + segments_per_batch(cipher) {
        let room = params.plaintext_len(index);
        if batch.buf.len() < at + room + TAG_LEN {
            batch.buf.resize(at + room + TAG_LEN, 0);
        }
        let read = read_full(input, &mut batch.buf[at..at + room])?;
        // Segment 0 exists even for an empty input (one empty last segment).
        if read > 0 || index == 0 {
            batch.slots.push((at, read + TAG_LEN));
            at += read + TAG_LEN;
        }
        if read < room {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Fills a batch for decryption: whole ciphertext segments, the last one
/// possibly short. Returns whether the input ended.
fn fill_ciphertext(
    cipher: &SegmentCipher,
    input: &mut (dyn Read + Send),
    batch: &mut Batch,
) -> Result<bool> {
    let params = cipher.params();
    let end = batch.first + segments_per_batch(cipher);
    let capacity: usize = (batch.first..end).map(|i| params.ciphertext_len(i)).sum();
    // Read in doubling steps, so that a small file does not size (and
    // zero) a whole batch: a 13-byte file took 1,450 page faults, 1,024
    // of them for this buffer.
    let mut read = 0;
    let mut size = capacity.min(FIRST_READ);
    loop {
        if batch.buf.len() < size {
            batch.buf.resize(size, 0);
        }
        read += read_full(input, &mut batch.buf[read..size])?;
        if read < size || size == capacity {
            break;
        }
        size = size.saturating_mul(2).min(capacity);
    }
    let mut at = 0;
    for index in batch.first..end {
        if at == read {
            break;
        }
        let len = params.ciphertext_len(index).min(read - at);
        if len < TAG_LEN {
            return Err(Error::Truncated);
        }
        batch.slots.push((at, len));
        at += len;
    }
    Ok(read < capacity)
}

type Fill = fn(&SegmentCipher, &mut (dyn Read + Send), &mut Batch) -> Result<bool>;

/// The reader thread: batches in order, each marked last or not.
fn reader(
    cipher: &SegmentCipher,
    input: &mut (dyn Read + Send),
    fill: Fill,
    first: u64,
    pool: &Receiver<Vec<u8>>,
    out: &SyncSender<Result<Batch>>,
) {
    let mut next = first;
    let mut held: Option<Batch> = None;
    loop {
        let Ok(buf) = pool.recv() else { return };
        let mut batch = Batch { buf, first: next, slots: Vec::new(), last: false };
        let ended = match fill(cipher, input, &mut batch) {
            Ok(ended) => ended,
            Err(e) => {
                let _ = out.send(Err(e));
                return;
            }
        };
        next += batch.slots.len() as u64;
        if batch.slots.is_empty() {
            let _ = out.send(match held.take() {
                Some(mut held) => {
                    held.last = true;
                    Ok(held)
                }
                None => Err(Error::Truncated),
            });
            return;
        }
        if let Some(held) = held.take() {
            if out.send(Ok(held)).is_err() {
                return;
            }
        }
        if ended {
            batch.last = true;
            let _ = out.send(Ok(batch));
            return;
        }
        held = Some(batch);
    }
}

/// Runs the three stages; `process` seals or opens a batch's segments,
/// `write` writes a processed batch and returns the plaintext bytes.
// The three stages' ends and their two callbacks: a struct would only
// rename them.
#[allow(clippy::too_many_arguments)]
fn run(
    cipher: &SegmentCipher,
    input: &mut (dyn Read + Send),
    output: &mut (dyn Write + Send),
    fill: Fill,
    first: u64,
    process: &(dyn Fn(&mut Batch) -> Result<()> + Sync),
    write: &(dyn Fn(&mut (dyn Write + Send), &Batch) -> Result<u64> + Sync),
    progress: Progress<'_>,
) -> Result<Summary> {
    std::thread::scope(|scope| {
        let (pool_tx, pool_rx) = sync_channel::<Vec<u8>>(BUFFERS);
        for _ in 0..BUFFERS {
            let _ = pool_tx.send(Vec::new());
        }
        let (read_tx, read_rx) = sync_channel::<Result<Batch>>(1);
        let (write_tx, write_rx) = sync_channel::<Batch>(1);
        scope.spawn(move || reader(cipher, input, fill, first, &pool_rx, &read_tx));
        let returns = pool_tx.clone();
        let writer = scope.spawn(move || -> Result<Summary> {
            let mut summary = Summary::default();
            for batch in write_rx {
                let plain = write(output, &batch)?;
                summary.plaintext_bytes += plain;
                summary.segments += batch.slots.len() as u64;
                summary.ciphertext_bytes += batch.slots.iter().map(|s| s.1 as u64).sum::<u64>();
                progress(plain);
                let _ = returns.send(batch.buf);
            }
            output.flush()?;
            Ok(summary)
        });
        drop(pool_tx);
        let mut failure = None;
        for batch in read_rx.iter() {
            let mut batch = match batch {
                Ok(batch) => batch,
                Err(e) => {
                    failure = Some(e);
                    break;
                }
            };
            if let Err(e) = process(&mut batch) {
                failure = Some(e);
                break;
            }
            let last = batch.last;
            if write_tx.send(batch).is_err() || last {
                break;
            }
        }
        drop(read_rx);
        drop(write_tx);
        let written = writer.join().unwrap_or_else(|_| {
            Err(Error::Io(std::io::Error::other("the writer thread panicked")))
        });
        match failure {
            Some(e) => Err(e),
            None => written,
        }
    })
}

/// The segments of a batch, each with its index and finality.
fn segments(batch: &mut Batch) -> Vec<(u64, bool, &mut [u8])> {
    let count = batch.slots.len();
    let mut out = Vec::with_capacity(count);
    let mut rest: &mut [u8] = &mut batch.buf;
    let mut consumed = 0;
    for (n, &(start, len)) in batch.slots.iter().enumerate() {
        let tail = std::mem::take(&mut rest);
        let (_, tail) = tail.split_at_mut(start - consumed);
        let (segment, tail) = tail.split_at_mut(len);
        rest = tail;
        consumed = start + len;
        out.push((batch.first + n as u64, batch.last && n + 1 == count, segment));
    }
    out
}

pub(crate) fn encrypt(
    cipher: &SegmentCipher,
    input: &mut (dyn Read + Send),
    output: &mut (dyn Write + Send),
    progress: Progress<'_>,
) -> Result<Summary> {
    let process = |batch: &mut Batch| -> Result<()> {
        segments(batch)
            .into_par_iter()
            .try_for_each(|(index, last, segment)| cipher.seal(index, last, segment))
    };
    let write = |output: &mut (dyn Write + Send), batch: &Batch| -> Result<u64> {
        let end = batch.slots.last().map_or(0, |(start, len)| start + len);
        output.write_all(&batch.buf[..end])?;
        Ok((end - batch.slots.len() * TAG_LEN) as u64)
    };
    run(cipher, input, output, fill_plaintext, 0, &process, &write, progress)
}

pub(crate) fn decrypt(
    cipher: &SegmentCipher,
    input: &mut (dyn Read + Send),
    output: &mut (dyn Write + Send),
    window: &Window,
    progress: Progress<'_>,
) -> Result<Summary> {
    let to_stream_end = window.to_stream_end;
    let process = |batch: &mut Batch| -> Result<()> {
        if !to_stream_end {
            batch.last = false;
        }
        let results: Vec<Result<()>> = segments(batch)
            .into_par_iter()
            .map(|(index, last, segment)| cipher.open(index, last, segment))
            .collect();
        results.into_iter().collect()
    };
    // Where the window starts and ends, in plaintext bytes from the start
    // of the input's first segment.
    let params = *cipher.params();
    let base = params.plaintext_offset(window.first);
    let (skip, limit) = (window.skip, window.limit);
    let write = |output: &mut (dyn Write + Send), batch: &Batch| -> Result<u64> {
        let mut written = 0;
        for (n, &(start, len)) in batch.slots.iter().enumerate() {
            let index = batch.first + n as u64;
            let plain = (len - TAG_LEN) as u64;
            let at = params.plaintext_offset(index) - base;
            let from = skip.saturating_sub(at).min(plain);
            let to = (skip.saturating_add(limit)).saturating_sub(at).min(plain);
            if to > from {
                output.write_all(&batch.buf[start + from as usize..start + to as usize])?;
                written += to - from;
            }
        }
        Ok(written)
    };
    run(cipher, input, output, fill_ciphertext, window.first, &process, &write, progress)
}
