//! A PKCS#11 load generator (scripts/bench-pkcs11): THREADS threads,
//! each with a session of its own, repeat one operation for SECONDS on a
//! key made before the clock starts, through any module:
//!
//! ```text
//! pkcs11-bench MODULE PIN encrypt-4k|sign-ecdsa-p256 THREADS SECONDS
//! ```
//!
//! prints `{"operation", "threads", "operations", "ops_per_second",
//! "p50_ms", "p99_ms"}` as one JSON line. `encrypt-4k` is AES-256-GCM of
//! 4 KiB (a fresh IV each time), `sign-ecdsa-p256` `CKM_ECDSA` of a
//! 32-byte digest. The first token with a slot is used; the keys are session
//! objects, gone when the run ends.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use cryptoki::context::{CInitializeArgs, Pkcs11};
use cryptoki::mechanism::aead::GcmParams;
use cryptoki::mechanism::Mechanism;
use cryptoki::object::Attribute;
use cryptoki::session::UserType;
use cryptoki::types::AuthPin;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, module, pin, operation, threads, seconds] = &args[..] else {
        eprintln!("usage: pkcs11-bench MODULE PIN encrypt-4k|sign-ecdsa-p256 THREADS SECONDS");
        std::process::exit(2);
    };
    let threads: usize = threads.parse().unwrap();
    let duration = Duration::from_secs_f64(seconds.parse().unwrap());
    let context = Pkcs11::new(module).unwrap();
    context.initialize(CInitializeArgs::OsThreads).unwrap();
    let slot = context.get_slots_with_token().unwrap()[0];
    let setup = context.open_rw_session(slot).unwrap();
    setup.login(UserType::User, Some(&AuthPin::new(pin.clone()))).unwrap();
    let encrypt = operation == "encrypt-4k";
    let (key, public) = if encrypt {
        let key = setup
            .generate_key(
                &Mechanism::AesKeyGen,
                &[
                    Attribute::ValueLen(32.into()),
                    Attribute::Encrypt(true),
                    Attribute::Sensitive(true),
                    Attribute::Token(false),
                ],
            )
            .unwrap();
        (key, None)
    } else {
        let p256 = vec![0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07];
        let (public, private) = setup
            .generate_key_pair(
                &Mechanism::EccKeyPairGen,
                &[Attribute::EcParams(p256), Attribute::Verify(true), Attribute::Token(false)],
                &[Attribute::Sign(true), Attribute::Sensitive(true), Attribute::Token(false)],
            )
            .unwrap();
        (private, Some(public))
    };
    let sessions: Vec<_> = (0..threads).map(|_| context.open_ro_session(slot).unwrap()).collect();
    let start = Instant::now();
    let latencies: Vec<Duration> = std::thread::scope(|scope| {
        let workers: Vec<_> = sessions
            .into_iter()
            .enumerate()
            .map(|(t, session)| {
                scope.spawn(move || {
                    // Sign: a SHA-256 digest's worth, signed with CKM_ECDSA
                    // (SoftHSM2 has no CKM_ECDSA_SHA256).
                    let data = vec![t as u8; if encrypt { 4096 } else { 32 }];
                    let mut latencies = Vec::new();
                    let mut counter = 0u64;
                    while start.elapsed() < duration {
                        let begun = Instant::now();
                        if encrypt {
                            counter += 1;
                            let mut iv = [0u8; 12];
                            iv[..8].copy_from_slice(&counter.to_be_bytes());
                            iv[8] = t as u8;
                            let params = GcmParams::new(&mut iv, &[], 128.into()).unwrap();
                            session.encrypt(&Mechanism::AesGcm(params), key, &data).unwrap();
                        } else {
                            session.sign(&Mechanism::Ecdsa, key, &data).unwrap();
                        }
                        latencies.push(begun.elapsed());
                    }
                    latencies
                })
            })
            .collect();
        workers.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    let elapsed = start.elapsed();
    let _ = public;
    let mut sorted = latencies;
    sorted.sort_unstable();
    let percentile = |p: usize| {
        sorted
            .get((sorted.len() * p / 100).min(sorted.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1000.0)
    };
    println!(
        "{{\"operation\": \"{operation}\", \"threads\": {threads}, \"operations\": {}, \
         \"ops_per_second\": {:.1}, \"p50_ms\": {:.3}, \"p99_ms\": {:.3}}}",
        sorted.len(),
        sorted.len() as f64 / elapsed.as_secs_f64(),
        percentile(50),
        percentile(99)
    );
}
