use std::fs::File;
use std::io::Write;
use std::sync::mpsc;

use anyhow::Context;

use crate::cli::RandArgs;

const CHUNK: usize = 1 << 20;

/// Generates on every core and writes in order: AWS-LC's DRBG state is
/// per-thread, so generation scales, and the writer never waits on one.
pub fn run(args: &RandArgs) -> anyhow::Result<()> {
    let mut out: Box<dyn Write> = match &args.out {
        Some(path) => Box::new(
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let total = args.bytes;
    let chunks = total.div_ceil(CHUNK as u64);
    let workers = rampart_bench::available_cores().clamp(1, 8) as u64;

    std::thread::scope(|scope| -> anyhow::Result<()> {
        // Each worker owns the chunks congruent to its index; the writer
        // takes them round-robin, so output order is deterministic.
        let mut receivers = Vec::new();
        let (recycle_tx, recycle_rx): (Vec<_>, Vec<_>) =
            (0..workers).map(|_| mpsc::sync_channel::<Vec<u8>>(4)).unzip();
        for (index, recycled) in recycle_rx.into_iter().enumerate() {
            let (tx, rx) = mpsc::sync_channel::<anyhow::Result<Vec<u8>>>(2);
            receivers.push(rx);
            scope.spawn(move || {
                let mut chunk = index as u64;
                while chunk < chunks {
                    let len = (total - chunk * CHUNK as u64).min(CHUNK as u64) as usize;
                    let mut buffer = recycled.try_recv().unwrap_or_default();
                    buffer.resize(len, 0);
                    let filled = rampart_crypto::fill_random(&mut buffer)
                        .map(|()| buffer)
                        .context("random generator failed");
                    if tx.send(filled).is_err() {
                        return;
                    }
                    chunk += workers;
                }
            });
        }
        for chunk in 0..chunks {
            let worker = (chunk % workers) as usize;
            let buffer = receivers[worker].recv().context("random generator thread stopped")??;
            // `rampart rand ... | head -c N` is normal use: main ends a
            // command whose reader went away quietly.
            out.write_all(&buffer).context("cannot write random bytes")?;
            let _ = recycle_tx[worker].try_send(buffer);
        }
        out.flush().context("cannot write random bytes")
    })
}
