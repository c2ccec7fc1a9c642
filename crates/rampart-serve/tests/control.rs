//! The control protocol end to end over a socket pair: the requester's
//! side (`remote`) against the server's (`control::answer`) on a target
//! that records what it was asked.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rampart_crypto::SecretBytes;
use rampart_serve::control::{answer, ControlTarget};
use rampart_serve::protocol::{DecryptAttached, Event, RunOptions, MAX_KEY, MAX_LINE};
use rampart_serve::remote::{reencrypt_remote, start_decrypt_attached_remote};
use rampart_serve::ServeError;
use rampart_volume::Outcome;

/// What the fake target was asked, and how it answers.
#[derive(Debug, Default)]
struct Recorder {
    keys: Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
    runs: Mutex<Vec<RunOptions>>,
    headers: Mutex<Vec<PathBuf>>,
    /// Run until told to stop (instead of finishing at once).
    wait_for_stop: bool,
    refuse_decryption: bool,
}

const TOTAL: u64 = 3 << 20;

impl ControlTarget for Recorder {
    fn reencrypt(
        &self,
        run: RunOptions,
        old_key: &SecretBytes,
        new_key: &SecretBytes,
        stop: &AtomicBool,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Outcome, ServeError> {
        self.keys.lock().unwrap().push((old_key.expose().to_vec(), new_key.expose().to_vec()));
        self.runs.lock().unwrap().push(run);
        if self.wait_for_stop {
            progress(1 << 20, TOTAL);
            let deadline = Instant::now() + Duration::from_secs(10);
            while !stop.load(Ordering::Relaxed) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            return Ok(Outcome::Stopped { done: 1 << 20 });
        }
        for done in [0, 1 << 20, 2 << 20, TOTAL] {
            progress(done, TOTAL);
        }
        Ok(Outcome::Finished)
    }

    fn start_decrypt_attached(
        &self,
        request: &DecryptAttached,
        key: &SecretBytes,
    ) -> Result<(), ServeError> {
        if self.refuse_decryption {
            return Err(ServeError::AlreadyReencrypting(PathBuf::from("/dev/vol")));
        }
        self.keys.lock().unwrap().push((key.expose().to_vec(), Vec::new()));
        self.headers.lock().unwrap().push(request.header.clone());
        Ok(())
    }
}

/// A server end answering one request on a thread, and the requester's end.
fn served(target: Arc<Recorder>) -> (UnixStream, std::thread::JoinHandle<()>) {
    let (client, server) = UnixStream::pair().unwrap();
    let thread = std::thread::spawn(move || answer(&*target, server));
    (client, thread)
}

/// Sends `bytes` as a raw request and reads the one event line answered.
fn raw_request(bytes: &[u8]) -> Event {
    let (mut client, thread) = served(Arc::new(Recorder::default()));
    client.write_all(bytes).unwrap();
    client.shutdown(std::net::Shutdown::Write).unwrap();
    let mut line = String::new();
    BufReader::new(&client).read_line(&mut line).unwrap();
    thread.join().unwrap();
    serde_json::from_str(&line).unwrap()
}

fn request_line(op: &str, old: usize, new: usize) -> String {
    format!(
        "{{\"op\":\"{op}\",\"old_key_bytes\":{old},\"new_key_bytes\":{new},\
         \"hotzone_size\":null,\"stop_after\":null}}\n"
    )
}

fn error_message(event: Event) -> String {
    match event {
        Event::Error { message } => message,
        other => panic!("expected an error, got {other:?}"),
    }
}

#[test]
fn a_reencrypt_request_is_answered_with_progress_then_the_outcome() {
    let target = Arc::new(Recorder::default());
    let (client, thread) = served(Arc::clone(&target));
    let old = SecretBytes::from_slice(&[1; 64]);
    let new = SecretBytes::from_slice(&[2; 32]);
    let run = RunOptions { hotzone_size: Some(1 << 20), stop_after: Some(4) };
    let mut seen = Vec::new();
    let outcome =
        reencrypt_remote(client, &old, &new, run, &AtomicBool::new(false), &mut |d, t| {
            seen.push((d, t));
        })
        .unwrap();
    thread.join().unwrap();
    assert_eq!(outcome, Outcome::Finished);
    assert_eq!(seen, [(0, TOTAL), (1 << 20, TOTAL), (2 << 20, TOTAL), (TOTAL, TOTAL)]);
    assert_eq!(*target.keys.lock().unwrap(), [(vec![1; 64], vec![2; 32])]);
    assert_eq!(*target.runs.lock().unwrap(), [run]);
}

#[test]
fn an_interrupted_requester_stops_the_run_at_the_servers_end() {
    let target = Arc::new(Recorder { wait_for_stop: true, ..Recorder::default() });
    let (client, thread) = served(Arc::clone(&target));
    let interrupted = AtomicBool::new(true);
    let outcome = reencrypt_remote(
        client,
        &SecretBytes::new(Vec::new()),
        &SecretBytes::from_slice(&[9; 64]),
        RunOptions::default(),
        &interrupted,
        &mut |_, _| {},
    )
    .unwrap();
    thread.join().unwrap();
    assert_eq!(outcome, Outcome::Stopped { done: 1 << 20 });
    // The plaintext side of an encryption carries no key.
    assert_eq!(*target.keys.lock().unwrap(), [(Vec::new(), vec![9; 64])]);
}

#[test]
fn malformed_and_oversize_requests_are_refused() {
    let message = error_message(raw_request(b"{not json\n"));
    assert!(message.starts_with("a malformed request: "), "{message}");
    // A line that does not end within the bound is cut there.
    let mut long = b"{\"op\":\"reencrypt\",\"pad\":\"".to_vec();
    long.extend(std::iter::repeat_n(b'x', 4 * MAX_LINE as usize));
    long.extend_from_slice(b"\"}\n");
    let message = error_message(raw_request(&long));
    assert!(message.starts_with("a malformed request: "), "{message}");
    assert_eq!(error_message(raw_request(b"")).split(':').next(), Some("a malformed request"));
}

#[test]
fn keys_beyond_the_bound_or_cut_short_are_refused() {
    let message = error_message(raw_request(request_line("reencrypt", MAX_KEY + 1, 0).as_bytes()));
    assert_eq!(message, format!("a volume key of {} bytes", MAX_KEY + 1));
    let message = error_message(raw_request(request_line("reencrypt", 0, 1 << 30).as_bytes()));
    assert_eq!(message, format!("a volume key of {} bytes", 1 << 30));
    let mut short = request_line("reencrypt", 64, 0).into_bytes();
    short.extend_from_slice(&[0; 10]);
    let message = error_message(raw_request(&short));
    assert!(message.starts_with("the request ended early: "), "{message}");
}

#[test]
fn requests_the_server_does_not_take_are_refused() {
    let message = error_message(raw_request(request_line("format", 0, 0).as_bytes()));
    assert_eq!(message, "unknown request 'format'");
    let message = error_message(raw_request(request_line("reencrypt", 0, 0).as_bytes()));
    assert_eq!(message, "no volume key");
    // A decryption's start without its parameters is no known request.
    let mut bare = request_line("decrypt-attached", 1, 0).into_bytes();
    bare.push(7);
    assert_eq!(error_message(raw_request(&bare)), "unknown request 'decrypt-attached'");
    let with_new_key = "{\"op\":\"decrypt-attached\",\"old_key_bytes\":1,\"new_key_bytes\":1,\
         \"hotzone_size\":null,\"stop_after\":null,\"decrypt_attached\":{\"header\":\"/h\",\
         \"resilience\":\"journal\",\"resilience_hash\":null,\"digest_hash\":\"sha256\",\
         \"quick_digest\":false}}\n\x01\x02";
    let message = error_message(raw_request(with_new_key.as_bytes()));
    assert_eq!(message, "a decryption takes the volume key and no new key");
}

fn decrypt_attached() -> DecryptAttached {
    DecryptAttached {
        header: PathBuf::from("/srv/vol.header"),
        resilience: "checksum".into(),
        resilience_hash: Some("sha256".into()),
        digest_hash: "sha256".into(),
        quick_digest: true,
    }
}

#[test]
fn a_decryption_start_is_acknowledged_or_its_refusal_reported() {
    let target = Arc::new(Recorder::default());
    let (client, thread) = served(Arc::clone(&target));
    start_decrypt_attached_remote(client, decrypt_attached(), &SecretBytes::from_slice(&[5; 64]))
        .unwrap();
    thread.join().unwrap();
    assert_eq!(*target.headers.lock().unwrap(), [PathBuf::from("/srv/vol.header")]);
    assert_eq!(*target.keys.lock().unwrap(), [(vec![5; 64], Vec::new())]);

    let target = Arc::new(Recorder { refuse_decryption: true, ..Recorder::default() });
    let (client, thread) = served(target);
    let error = start_decrypt_attached_remote(
        client,
        decrypt_attached(),
        &SecretBytes::from_slice(&[5; 64]),
    )
    .unwrap_err();
    thread.join().unwrap();
    assert_eq!(error.to_string(), "the server: /dev/vol is already being re-encrypted");
}

/// Runs `reencrypt_remote` against a server end that answers `reply`
/// (then closes).
fn against_reply(reply: &[u8]) -> Result<Outcome, ServeError> {
    let (client, mut server) = UnixStream::pair().unwrap();
    server.write_all(reply).unwrap();
    // Kept open for reading, so that the request can be written.
    server.shutdown(std::net::Shutdown::Write).unwrap();
    let result = reencrypt_remote(
        client,
        &SecretBytes::from_slice(&[1; 32]),
        &SecretBytes::from_slice(&[2; 32]),
        RunOptions::default(),
        &AtomicBool::new(false),
        &mut |_, _| {},
    );
    drop(server);
    result
}

#[test]
fn a_server_that_goes_away_floods_or_garbles_is_reported() {
    assert!(matches!(against_reply(b""), Err(ServeError::ServerStopped)));
    // Progress, then nothing: the server was killed mid-run.
    let progress = b"{\"event\":\"progress\",\"done\":1,\"total\":2}\n";
    assert!(matches!(against_reply(progress), Err(ServeError::ServerStopped)));
    let flood = vec![b'x'; 3 * MAX_LINE as usize];
    assert!(matches!(against_reply(&flood), Err(ServeError::LineTooLong)));
    assert!(matches!(
        against_reply(b"{\"event\":\"fireworks\"}\n"),
        Err(ServeError::MalformedAnswer(_))
    ));
    assert!(matches!(against_reply(b"{\"event\":\"initialised\"}\n"), Err(ServeError::OutOfTurn)));
    let error = against_reply(b"{\"event\":\"error\",\"message\":\"no room\"}\n").unwrap_err();
    assert_eq!(error.to_string(), "the server: no room");
    let stopped = b"{\"event\":\"stopped\",\"done\":5,\"total\":9}\n";
    assert_eq!(against_reply(stopped).unwrap(), Outcome::Stopped { done: 5 });
}

#[test]
fn a_decryption_request_carries_the_resilience_and_digest_asked_for() {
    use rampart_crypto::HashAlg;
    use rampart_luks::{PbkdfChoice, Resilience};

    let header = PathBuf::from("/srv/vol.header");
    let checksum = Resilience::Checksum { hash: HashAlg::Sha512, block_size: 4096 };
    let forced = PbkdfChoice { forced_iterations: Some(1000), ..PbkdfChoice::default() };
    let start = DecryptAttached::new(header.clone(), &checksum, &forced);
    assert_eq!(start.header, header);
    assert_eq!(
        (start.resilience.as_str(), start.resilience_hash.as_deref()),
        ("checksum", Some("sha512"))
    );
    assert_eq!((start.digest_hash.as_str(), start.quick_digest), ("sha256", true));

    let start = DecryptAttached::new(header, &Resilience::Journal, &PbkdfChoice::default());
    assert_eq!((start.resilience.as_str(), start.resilience_hash), ("journal", None));
    assert!(!start.quick_digest);
}
