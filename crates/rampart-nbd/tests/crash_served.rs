//! The NBD server in front of an encrypted device on a simulated disk with
//! a volatile write cache (`rampart_volume::crashsim`), crashed at a random
//! operation while a client writes, with and without FUA, zeroes, trims
//! and flushes. Every write the client saw acknowledged with FUA, and every
//! write acknowledged before a FLUSH whose reply it saw, must be on the
//! disk a reboot finds (unless overwritten since); no sector may hold data
//! never written to it.

use std::collections::HashMap;
use std::sync::Arc;

use rampart_crypto::SecretBytes;
use rampart_nbd::proto::*;
use rampart_nbd::{Export, Server, ServerConfig};
use rampart_volume::crashsim::{CrashSim, SplitMix64};
use rampart_volume::{
    BlockDevice, CryptDevice, CryptLayout, MemDevice, SectorCipher, SectorCipherKind,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

const SECTOR: u64 = 512;
const SECTORS: u64 = 128;
const HEADER: u64 = 4096;

fn crypt<D: BlockDevice>(device: D, key: &SecretBytes) -> CryptDevice<D> {
    let layout =
        CryptLayout { offset: HEADER, size: SECTORS * SECTOR, sector_size: 512, iv_tweak: 0 };
    let cipher = SectorCipher::new(SectorCipherKind::AesXtsPlain64, key).unwrap();
    CryptDevice::new(device, layout, cipher).unwrap()
}

/// A minimal client: fixed newstyle, `NBD_OPT_GO` to the default export,
/// simple replies, one request at a time.
struct Client {
    stream: DuplexStream,
    handle: u64,
}

impl Client {
    async fn connect(mut stream: DuplexStream) -> Self {
        let mut hello = [0u8; 18];
        stream.read_exact(&mut hello).await.unwrap();
        assert_eq!(hello[..8], NBDMAGIC.to_be_bytes());
        let flags = FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES;
        stream.write_all(&flags.to_be_bytes()).await.unwrap();
        let mut go = Vec::new();
        go.extend_from_slice(&IHAVEOPT.to_be_bytes());
        go.extend_from_slice(&OPT_GO.to_be_bytes());
        go.extend_from_slice(&6u32.to_be_bytes());
        go.extend_from_slice(&[0; 6]); // empty name, no info requests
        stream.write_all(&go).await.unwrap();
        loop {
            let mut reply = [0u8; 20];
            stream.read_exact(&mut reply).await.unwrap();
            let kind = u32::from_be_bytes(reply[12..16].try_into().unwrap());
            let len = u32::from_be_bytes(reply[16..20].try_into().unwrap());
            let mut data = vec![0u8; len as usize];
            stream.read_exact(&mut data).await.unwrap();
            match kind {
                REP_ACK => break,
                REP_INFO => {}
                other => panic!("option reply {other:#x}"),
            }
        }
        Self { stream, handle: 0 }
    }

    /// Sends one request and waits for its reply; returns the error code.
    async fn request(&mut self, flags: u16, kind: u16, offset: u64, len: u32, data: &[u8]) -> u32 {
        self.handle += 1;
        let mut head = Vec::with_capacity(28 + data.len());
        head.extend_from_slice(&REQUEST_MAGIC.to_be_bytes());
        head.extend_from_slice(&flags.to_be_bytes());
        head.extend_from_slice(&kind.to_be_bytes());
        head.extend_from_slice(&self.handle.to_be_bytes());
        head.extend_from_slice(&offset.to_be_bytes());
        head.extend_from_slice(&len.to_be_bytes());
        head.extend_from_slice(data);
        self.stream.write_all(&head).await.unwrap();
        let mut reply = [0u8; 16];
        self.stream.read_exact(&mut reply).await.unwrap();
        assert_eq!(u64::from_be_bytes(reply[8..16].try_into().unwrap()), self.handle);
        u32::from_be_bytes(reply[4..8].try_into().unwrap())
    }
}

async fn trial(seed: u64, key: &SecretBytes, image: &[u8]) {
    let mut rng = SplitMix64(seed);
    let sim = CrashSim::new(image.to_vec(), seed);
    let steps = 30;
    sim.crash_at(rng.next_u64() % (steps * 2));
    let mut config = ServerConfig::new(vec![Export {
        name: String::new(),
        description: String::new(),
        device: Arc::new(crypt(sim.clone(), key)),
        read_only: false,
    }]);
    config.max_inflight_bytes = 16 << 20;
    let server = Server::new(config).unwrap();
    let (near, far) = tokio::io::duplex(1 << 20);
    let serving = tokio::spawn(async move { server.serve_stream(far, "crash test").await });
    let mut client = Client::connect(near).await;

    let mut model = vec![0u8; (SECTORS * SECTOR) as usize];
    let mut durable: HashMap<u64, Vec<u8>> =
        (0..SECTORS).map(|s| (s, vec![0u8; SECTOR as usize])).collect();
    let mut since: HashMap<u64, Vec<Vec<u8>>> = HashMap::new();
    let sector_of =
        |model: &[u8], s: u64| model[(s * SECTOR) as usize..][..SECTOR as usize].to_vec();
    for _ in 0..steps {
        let choice = rng.next_u64() % 10;
        let first = rng.next_u64() % (SECTORS - 8);
        let count = 1 + rng.next_u64() % 8;
        let (offset, len) = (first * SECTOR, count * SECTOR);
        let range = offset as usize..(offset + len) as usize;
        if choice >= 8 {
            assert_eq!(client.request(0, CMD_FLUSH, 0, 0, &[]).await, 0);
            if !sim.has_crashed() {
                for (s, mut values) in since.drain() {
                    durable.insert(s, values.pop().unwrap());
                }
            }
            continue;
        }
        let fua = choice < 3;
        let flags = if fua { CMD_FLAG_FUA } else { 0 };
        let error = match choice {
            6 => {
                model[range].fill(0);
                client.request(flags, CMD_WRITE_ZEROES, offset, len as u32, &[]).await
            }
            7 => {
                // TRIM promises nothing about the contents: the model
                // takes whatever a read returns afterwards.
                let error = client.request(0, CMD_TRIM, offset, len as u32, &[]).await;
                let mut now = vec![0u8; len as usize];
                BlockDevice::read_at(&crypt(sim.clone(), key), &mut now, offset).unwrap();
                model[range].copy_from_slice(&now);
                error
            }
            _ => {
                let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
                model[range].copy_from_slice(&data);
                client.request(flags, CMD_WRITE, offset, len as u32, &data).await
            }
        };
        assert_eq!(error, 0);
        let acknowledged_durable = fua && choice != 7 && !sim.has_crashed();
        for s in first..first + count {
            let value = sector_of(&model, s);
            if acknowledged_durable {
                // FUA: this write is durable; earlier unflushed writes to
                // the sector are superseded.
                since.remove(&s);
                durable.insert(s, value);
            } else {
                since.entry(s).or_default().push(value);
            }
        }
    }
    drop(client);
    serving.await.unwrap().unwrap();

    let after = sim.crash_image();
    let mem = MemDevice::new(after.len());
    mem.write_at(&after, 0).unwrap();
    let back = crypt(mem, key);
    for s in 0..SECTORS {
        let mut got = vec![0u8; SECTOR as usize];
        back.read_at(&mut got, s * SECTOR).unwrap();
        let ok = got == durable[&s] || since.get(&s).is_some_and(|v| v.contains(&got));
        assert!(ok, "seed {seed}: sector {s} lost an acknowledged write or holds foreign data");
    }
}

#[test]
fn acknowledged_fua_and_flushed_writes_survive_every_crash() {
    let key = SecretBytes::new((1..=64u8).collect());
    let image = {
        // Zeros as plaintext, as a freshly formatted volume reads.
        let sim = CrashSim::new(vec![0; (HEADER + SECTORS * SECTOR) as usize], 0);
        crypt(sim.clone(), &key).write_zeroes(0, SECTORS * SECTOR).unwrap();
        sim.cached_image()
    };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    for seed in 0..1500 {
        runtime.block_on(trial(seed, &key, &image));
    }
}
