//! libnbd (through nbdsh) against a served Unix socket: zero-length
//! requests, which libnbd only sends with its strict checks off, are
//! refused with the errno nbdkit gives and the connection goes on, with
//! and without structured replies.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use rampart_nbd::{Bound, Server, ServerConfig};

use crate::client::{export, patterned};

/// For each kind of reply and each command with a zero length: the error
/// libnbd reports, then whether a read on the same connection still works.
/// `uri` is set before it runs.
const SCRIPT: &str = r#"
calls = [
    ("read", lambda h: h.pread(0, 4096)),
    ("write", lambda h: h.pwrite(b"", 4096)),
    ("trim", lambda h: h.trim(0, 4096)),
    ("zero", lambda h: h.zero(0, 4096)),
    ("cache", lambda h: h.cache(0, 4096)),
    ("block_status", lambda h: h.block_status(0, 4096, lambda *args: 0)),
]
for structured in (False, True):
    for name, call in calls:
        h = nbd.NBD()
        h.set_request_structured_replies(structured)
        h.add_meta_context("base:allocation")
        h.connect_uri(uri)
        assert h.get_structured_replies_negotiated() == structured
        h.set_strict_mode(0)
        try:
            call(h)
            outcome = "accepted"
        except nbd.Error as error:
            outcome = str(error.errno)
        alive = h.pread(512, 0) == bytes(i % 251 for i in range(512))
        print(structured, name, outcome, alive)
        h.shutdown()
"#;

/// `nbdsh` runs `python3 -m nbd`; Debian's python3 has the module
/// (python3-libnbd) even when another python3 comes first on PATH.
fn nbdsh() -> Command {
    let mut command = Command::new("nbdsh");
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![PathBuf::from("/usr/bin"), PathBuf::from("/bin")];
    dirs.extend(std::env::split_paths(&path));
    command.env("PATH", std::env::join_paths(dirs).unwrap());
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn libnbd_sees_zero_length_requests_refused_and_the_connection_alive() {
    let dir = std::env::temp_dir().join(format!("rampart-nbd-libnbd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("nbd.sock");
    let server = Server::new(ServerConfig::new(vec![export("", patterned())])).unwrap();
    let listener = Bound::unix(&socket).unwrap();
    let uri = listener.uri(false, "");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(vec![listener], async {
        let _ = stopped.await;
    }));

    let output = tokio::task::spawn_blocking(move || {
        // A Rust string literal is a Python one for a socket path.
        let script = format!("uri = {uri:?}\n{SCRIPT}");
        nbdsh().args(["-n", "-c", &script]).output()
    });
    let output = tokio::time::timeout(Duration::from_secs(60), output).await.unwrap().unwrap();
    let output = output.expect("nbdsh (libnbd's shell, python3-libnbd) must be installed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "nbdsh failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut expected = String::new();
    for structured in ["False", "True"] {
        for (name, errno) in [
            ("read", "EINVAL"),
            ("write", "ENOSPC"),
            ("trim", "EINVAL"),
            ("zero", "ENOSPC"),
            ("cache", "EINVAL"),
            ("block_status", "EINVAL"),
        ] {
            expected.push_str(&format!("{structured} {name} {errno} True\n"));
        }
    }
    assert_eq!(stdout, expected);

    stop.send(()).unwrap();
    running.await.unwrap().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
}
