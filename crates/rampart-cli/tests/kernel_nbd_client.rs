//! The Linux kernel's own NBD client (`nbd-client`, the `nbd` module) on
//! `rampart serve`, both running under the test kernel
//! (`scripts/kernel-vm`): an ext4 file system made, mounted and written
//! through `/dev/nbdX` over a Unix socket, TCP and TLS (with a client
//! certificate), read back on the host through `rampart export`; and a
//! server killed with SIGKILL while the kernel's writes are in flight
//! loses none of the bytes whose flush it had acknowledged.

use crate::helpers::common::{output, run};
use crate::helpers::kernel_support::*;
use crate::helpers::serve_support::{
    issue_certificate, key_file, make_volume, require, CA_EXTENSIONS, CLIENT_EXTENSIONS, MIB,
    SERVER_EXTENSIONS,
};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Plaintext size of every volume here (the guest CPU is emulated).
const DATA: u64 = 64 * MIB;

/// fio's job: `size` (e.g. `16M`) of 4 KiB random writes, each block
/// with a crc32c header, then read back and verified (fio exits non-zero
/// on a bad block). `extra` is the I/O engine and other options.
fn fio_job(file: &str, size: &str, extra: &str) -> String {
    format!(
        "fio --name=verify --filename={file} --size={size} --rw=randwrite --bs=4k \
         --verify=crc32c --verify_fatal=1 {extra}"
    )
}

/// A test CA, a server certificate for localhost/127.0.0.1 and a client
/// certificate, made with the openssl CLI.
struct Pki {
    ca: PathBuf,
    server_cert: PathBuf,
    server_key: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
}

fn make_pki(dir: &TempDir) -> Pki {
    let d = dir.join("pki");
    std::fs::create_dir_all(&d).unwrap();
    issue_certificate(&d, "ca", "/CN=kernel NBD test CA", None, CA_EXTENSIONS);
    issue_certificate(&d, "server", "/CN=localhost", Some("ca"), SERVER_EXTENSIONS);
    issue_certificate(&d, "client", "/CN=kernel NBD client", Some("ca"), CLIENT_EXTENSIONS);
    Pki {
        ca: d.join("ca-cert.pem"),
        server_cert: d.join("server-cert.pem"),
        server_key: d.join("server-key.pem"),
        client_cert: d.join("client-cert.pem"),
        client_key: d.join("client-key.pem"),
    }
}

/// Shell functions every guest script here starts with: `wait_up PID FILE`
/// waits until `rampart serve` (PID) has printed its URI into FILE.
const SHELL_HELPERS: &str = r#"
wait_up() {
  for i in $(seq 300); do
    kill -0 $1
    if [ -s $2 ]; then return 0; fi
    sleep 0.1
  done
  echo "rampart serve printed no URI"; return 1
}
"#;

fn read(dir: &TempDir, name: &str) -> String {
    std::fs::read_to_string(dir.join(name))
        .unwrap_or_else(|e| panic!("the guest left no {name}: {e}"))
}

/// `rampart serve`'s closing summary line (logged when it stops).
#[track_caller]
fn summary(log: &str) -> &str {
    log.lines()
        .find(|line| line.contains("INFO served "))
        .unwrap_or_else(|| panic!("rampart serve logged no summary:\n{log}"))
}

/// The number in `summary` just before `what` (e.g. "bytes written").
#[track_caller]
fn counted(summary: &str, what: &str) -> u64 {
    let before = summary.split(what).next().unwrap();
    before
        .split_whitespace()
        .next_back()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of {what} in {summary}"))
}

/// The value of one metrics line (`name{labels}` exactly).
#[track_caller]
fn metric(metrics: &str, series: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or_else(|| panic!("no {series} in the metrics:\n{metrics}"))
}

/// `debugfs -R REQUEST IMAGE`'s standard output (its banner goes to stderr).
fn debugfs(image: &Path, request: &str) -> Vec<u8> {
    let out = ok(&format!("debugfs -R '{request}'"), run("debugfs", &["-R", request, p(image)]));
    out.stdout
}

/// The kernel's NBD client attaches `rampart serve` over a Unix socket,
/// over TCP and over TLS with a client certificate (the TLS server also
/// refuses the plain-text client): each time ext4 is made and mounted on
/// `/dev/nbdX`, fio writes 16 MiB (8 over TCP and TLS) of 4 KiB blocks
/// with O_DIRECT and verifies every block's crc32c through the kernel, and a known file is
/// copied in. On the host, `rampart export` gives back each volume: it
/// passes `fsck.ext4 -fn`, the known file reads back byte for byte, and
/// fio re-verifies every block of its file.
#[test]
fn kernel_nbd_client_carries_ext4_and_fio_over_unix_tcp_and_tls() {
    require(&["nbd-client", "fio", "mkfs.ext4", "fsck.ext4", "debugfs", "openssl"]);
    tool("python3");
    tool("qemu-system-x86_64");
    let started = std::time::Instant::now();
    let dir = TempDir::new("knbd");
    let key = key_file(&dir);
    let pki = make_pki(&dir);
    // Each transport and the MiB fio writes through it.
    let rounds = [("unix", 16), ("tcp", 8), ("tls", 8)];
    let mut known = Vec::new();
    for (seed, (name, _)) in rounds.iter().enumerate() {
        make_volume(&dir, &format!("{name}.vol"), DATA);
        // Sizes that are not a whole number of blocks, so the file's end
        // is checked too.
        let bytes = random_bytes(100 + seed as u64, (MIB + 12_345 * (seed as u64 + 1)) as usize);
        dir.file(&format!("known-{name}.bin"), &bytes);
        known.push(bytes);
    }
    let fio = fio_job("/tmp/mnt/f", "${size}M", "--direct=1 --ioengine=libaio --iodepth=16");
    let tls_serve = format!(
        "--tls-cert {} --tls-key {} --tls-client-ca {}",
        p(&pki.server_cert),
        p(&pki.server_key),
        p(&pki.ca)
    );
    let tls_client = format!(
        "-certfile {} -keyfile {} -cacertfile {} -tlshostname localhost",
        p(&pki.client_cert),
        p(&pki.client_key),
        p(&pki.ca)
    );
    let script = format!(
        r#"R={rampart}
cd {dir}
mkdir -p /tmp/mnt
{SHELL_HELPERS}
metrics() {{
  python3 -c 'import sys, urllib.request as u; print(u.urlopen("http://127.0.0.1:%s/metrics" % sys.argv[1]).read().decode())' $1
}}
# round NAME DEVICE METRICS-PORT FIO-MIB SERVE-ARGS NBD-CLIENT-ARGS [PLAIN-TEXT-ARGS]
round() {{
  name=$1 dev=$2 mport=$3 size=$4
  shift
  RAMPART_LOG=debug $R serve $name.vol=$name --key-file {key} --handshake-timeout 120s --metrics-listen 127.0.0.1:$mport $4 \
    >$name-serve.out 2>$name-serve.log &
  pid=$!
  wait_up $pid $name-serve.out
  if [ -n "$6" ]; then
    # A plain-text client is refused: the server demands TLS.
    if nbd-client $6 /dev/nbd9 -N $name -b 4096 -t 30 >$name-plain.out 2>&1; then
      echo attached >$name-plain.status; nbd-client -d /dev/nbd9
    else
      echo refused >$name-plain.status
    fi
  fi
  nbd-client $5 $dev -N $name -b 4096 -t 60
  blockdev --getsize64 $dev >$name-size
  cat /sys/block/$(basename $dev)/queue/write_cache >$name-write-cache
  mkfs.ext4 -q $dev
  mount $dev /tmp/mnt
  {fio} --output-format=json --output=$name-fio.json
  cp known-$name.bin /tmp/mnt/known
  umount /tmp/mnt
  metrics $mport >$name-metrics
  nbd-client -d $dev
  kill -TERM $pid
  wait $pid
}}
round unix /dev/nbd0 10900 16 "--socket /tmp/unix.sock" "-unix /tmp/unix.sock"
round tcp /dev/nbd1 10901 8 "--listen 127.0.0.1:10809" "127.0.0.1 10809"
round tls /dev/nbd2 10902 8 "--listen 127.0.0.1:10810 {tls_serve}" "127.0.0.1 10810 {tls_client}" \
  "127.0.0.1 10810"
echo done >guest-done
"#,
        rampart = rampart_bin(),
        dir = p(dir.path()),
        key = p(&key),
    );
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(600));
    guest.assert_ok("ext4 and fio through nbd-client over a Unix socket, TCP and TLS");
    assert_eq!(read(&dir, "guest-done"), "done\n", "{}", guest.transcript);
    let guest_time = started.elapsed();

    let plain = read(&dir, "tls-plain.status");
    assert_eq!(
        plain,
        "refused\n",
        "plain-text nbd-client on the TLS server: {}",
        read(&dir, "tls-plain.out")
    );

    for ((name, mib), known) in rounds.iter().zip(&known) {
        let fio_bytes = mib * MIB;
        let what = format!("the {name} round");
        assert_eq!(read(&dir, &format!("{name}-size")).trim(), DATA.to_string(), "{what}: size");
        // The server advertises FLUSH: the kernel runs the device write-back.
        assert_eq!(
            read(&dir, &format!("{name}-write-cache")).trim(),
            "write back",
            "{what}: the kernel's cache mode of the device"
        );
        let report: serde_json::Value =
            serde_json::from_str(&read(&dir, &format!("{name}-fio.json"))).unwrap();
        let job = &report["jobs"][0];
        assert_eq!(job["error"], 0, "{what}: fio {job}");
        assert_eq!(job["write"]["io_bytes"], fio_bytes, "{what}: fio's writes");
        // The verify phase read every block back.
        assert_eq!(job["read"]["io_bytes"], fio_bytes, "{what}: fio's verify reads");

        let log = read(&dir, &format!("{name}-serve.log"));
        let summary = summary(&log);
        // nbd-client hangs up without NBD_OPT_ABORT after a refusal: the
        // plain-text try on the TLS server is the one connection that ends
        // in an error there.
        let refused = usize::from(*name == "tls");
        assert!(summary.contains(&format!("({refused} ended by errors")), "{what}: {summary}");
        assert_eq!(
            log.matches("connection ended:").count(),
            refused,
            "{what}: connections that ended in an error\n{log}"
        );
        assert!(summary.contains("(0 failed)"), "{what}: {summary}");
        assert!(counted(summary, "bytes written") >= fio_bytes + MIB, "{what}: {summary}");
        assert!(counted(summary, "bytes read") >= fio_bytes, "{what}: {summary}");
        let metrics = read(&dir, &format!("{name}-metrics"));
        let handshakes = metric(&metrics, "rampart_nbd_tls_handshakes_total{result=\"ok\"}");
        assert_eq!(handshakes, u64::from(*name == "tls"), "{what}: TLS handshakes\n{metrics}");

        // The host reads the volume back through rampart export.
        let image = dir.join(&format!("{name}.img"));
        let vol = dir.join(&format!("{name}.vol"));
        ok(
            &format!("rampart export of {what}"),
            rampart(&["export", p(&vol), p(&image), "--key-file", p(&key)]),
        );
        assert_eq!(std::fs::metadata(&image).unwrap().len(), DATA, "{what}: exported size");
        ok(&format!("fsck.ext4 -fn of {what}"), run("fsck.ext4", &["-fn", p(&image)]));
        assert_same(&format!("{what}: /known"), &debugfs(&image, "cat /known"), known);
        let fio_file = dir.join(&format!("{name}-f.out"));
        debugfs(&image, &format!("dump /f {}", p(&fio_file)));
        assert_eq!(std::fs::metadata(&fio_file).unwrap().len(), fio_bytes, "{what}: fio's file");
        let verify = fio_job(
            p(&fio_file),
            &format!("{mib}M"),
            "--ioengine=psync --verify_only --output-format=json",
        );
        let mut command = Command::new(tool("bash"));
        command.args(["-c", &verify]).current_dir(dir.path());
        let out = output(command);
        let what_verify = format!("{what}: fio --verify_only of its file on the host");
        assert!(out.status.success(), "{}", describe(&what_verify, &out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["jobs"][0]["read"]["io_bytes"], fio_bytes, "{what_verify}: blocks read");
        std::fs::remove_file(&image).unwrap();
    }
    eprintln!("guest {guest_time:?}, whole test {:?}", started.elapsed());
}

/// `rampart serve` killed with SIGKILL while the kernel's NBD client has
/// writes in flight loses nothing it acknowledged after a flush: 16 MiB
/// written in four O_DIRECT parts, each followed by a flush (dd
/// conv=fsync) that completed, then a writer streaming into the rest of
/// the volume; the server is killed while the block layer shows writes
/// in flight and they are reaching the server, the writer fails with an
/// I/O error. The flushed 16 MiB read back byte for byte through a fresh
/// server and the kernel client in the guest, and on the host through
/// `rampart export`.
#[test]
fn kernel_nbd_client_keeps_every_flushed_byte_when_the_server_is_killed_mid_write() {
    require(&["nbd-client", "dd", "timeout"]);
    tool("qemu-system-x86_64");
    let started = std::time::Instant::now();
    let dir = TempDir::new("knbd-kill");
    let key = key_file(&dir);
    let vol = make_volume(&dir, "kill.vol", DATA);
    let flushed_len = 16 * MIB;
    let flushed = random_bytes(2024, flushed_len as usize);
    dir.file("flushed.bin", &flushed);
    let script = format!(
        r#"R={rampart}
cd {dir}
{SHELL_HELPERS}
io() {{ awk '/^wchar:/ {{ print $2 }}' /proc/$1/io; }}
RAMPART_LOG=debug $R serve {vol}=kill --key-file {key} --socket /tmp/kill.sock \
  >serve1.out 2>serve1.log &
pid=$!
wait_up $pid serve1.out
nbd-client -unix /tmp/kill.sock /dev/nbd0 -N kill -b 4096 -t 10
cat /sys/block/nbd0/queue/write_cache >write-cache
# Four parts of 4 MiB, each acknowledged and then flushed (conv=fsync:
# dd exits 0 only once the kernel's FLUSH was answered).
for i in 0 1 2 3; do
  dd if=flushed.bin of=/dev/nbd0 bs=1M skip=$((i * 4)) seek=$((i * 4)) count=4 \
    oflag=direct conv=fsync status=none
  echo "part $i flushed" >>flushes
done
base=$(io $pid)
# The writer streams into the rest of the volume (never a flush) until
# a write fails; 20 whole passes would mean the kill came too late.
(
  pass=0
  while [ $pass -lt 20 ]; do
    if ! dd if=/dev/urandom of=/dev/nbd0 bs=1M seek=16 count=48 oflag=direct status=none \
      2>>writer.err; then
      echo "failed in pass $pass" >writer.status; exit 0
    fi
    pass=$((pass + 1))
  done
  echo "completed $pass passes" >writer.status
) &
writer=$!
# Kill once the writer's data is reaching the server (4 MiB past the
# flushed part) and while the block layer holds writes in flight.
# The in-flight count that allowed the kill is the one recorded (read
# again, it may be caught between two of the writer's requests).
for i in $(seq 600); do
  now=$(io $pid)
  inflight=$(cat /sys/block/nbd0/inflight)
  if [ $((now - base)) -ge $((4 << 20)) ] && [ "$(echo $inflight | awk '{{ print $2 }}')" -gt 0 ]; then
    break
  fi
  sleep 0.05
done
kill -9 $pid
echo $inflight >inflight
echo $((now - base)) >streamed
status=0
wait $pid || status=$?
echo $status >serve1.status
wait $writer
timeout 60 nbd-client -d /dev/nbd0 || echo "nbd-client -d: $?"
dmesg >dmesg.txt
# A fresh server: the kernel client reads the flushed part back.
RAMPART_LOG=debug $R serve {vol}=kill --key-file {key} --socket /tmp/kill2.sock \
  >serve2.out 2>serve2.log &
pid=$!
wait_up $pid serve2.out
nbd-client -unix /tmp/kill2.sock /dev/nbd1 -N kill -b 4096 -t 30
dd if=/dev/nbd1 of=back.bin bs=1M count=16 iflag=direct status=none
nbd-client -d /dev/nbd1
kill -TERM $pid
wait $pid
echo done >guest-done
"#,
        rampart = rampart_bin(),
        dir = p(dir.path()),
        vol = p(&vol),
        key = p(&key),
    );
    let guest = run_in_kernel(&dir, &script, &[], Duration::from_secs(600));
    guest.assert_ok("the kill of rampart serve under nbd-client's writes");
    assert_eq!(read(&dir, "guest-done"), "done\n", "{}", guest.transcript);
    let guest_time = started.elapsed();

    // Every flush was acknowledged, which needs a server that takes them.
    assert_eq!(read(&dir, "write-cache").trim(), "write back", "the server must advertise FLUSH");
    let flushes = read(&dir, "flushes");
    assert_eq!(flushes.lines().count(), 4, "flushed parts: {flushes}");

    // Proof that the kill came while writes were in flight.
    assert_eq!(read(&dir, "serve1.status").trim(), "137", "the server's end (SIGKILL)");
    let inflight = read(&dir, "inflight");
    let writes_in_flight: u64 = inflight.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(writes_in_flight > 0, "no writes in flight at the kill: {inflight}");
    let streamed: u64 = read(&dir, "streamed").trim().parse().unwrap();
    assert!(streamed >= 4 * MIB, "the writer's data had not reached the server: {streamed}");
    let writer = read(&dir, "writer.status");
    assert!(writer.starts_with("failed in pass"), "the writer was not cut off: {writer}");
    let writer_err = read(&dir, "writer.err");
    assert!(writer_err.contains("Input/output error"), "the writer's error: {writer_err}");
    let dmesg = read(&dir, "dmesg.txt");
    assert!(
        dmesg.lines().any(|l| l.contains("I/O error, dev nbd0") && l.contains("(WRITE)")),
        "the kernel reported no failed write on nbd0:\n{dmesg}"
    );

    // Every flushed byte, through the kernel in the guest and on the host.
    assert_same(
        "the flushed part read back through a fresh server and nbd-client",
        &std::fs::read(dir.join("back.bin")).unwrap(),
        &flushed,
    );
    let out = ok(
        "rampart export after the kill",
        rampart(&[
            "export",
            p(&vol),
            "-",
            "--key-file",
            p(&key),
            "--length",
            &flushed_len.to_string(),
        ]),
    );
    assert_same("the flushed part through rampart export", &out.stdout, &flushed);
    eprintln!("guest {guest_time:?}, whole test {:?}", started.elapsed());
}
