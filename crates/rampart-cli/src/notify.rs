//! systemd's readiness notification (sd_notify(3)), for `Type=notify`
//! units: one datagram of `KEY=VALUE` lines to the `AF_UNIX` socket that
//! `$NOTIFY_SOCKET` names, a path or, with a leading `@`, an abstract
//! socket. Without `$NOTIFY_SOCKET` (not started by systemd) nothing is
//! sent.

use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Tells systemd that the service is ready, with a status line. A failure
/// is logged, not fatal: the service works, only its start is not
/// confirmed (systemd then times the start out and says so).
pub fn ready(status: &str) {
    let Some(socket) = std::env::var_os("NOTIFY_SOCKET") else { return };
    let status: String = status.chars().filter(|c| *c != '\n').collect();
    let message = format!("READY=1\nSTATUS={status}\nMAINPID={}\n", std::process::id());
    if let Err(e) = send(&socket, message.as_bytes()) {
        tracing::warn!(
            "cannot notify systemd of readiness through {}: {e}",
            socket.to_string_lossy()
        );
    }
}

fn send(socket: &std::ffi::OsStr, message: &[u8]) -> std::io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let bytes = socket.as_bytes();
    let address = match bytes.split_first() {
        Some((b'@', name)) => {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name)?
        }
        Some((b'/', _)) => SocketAddr::from_pathname(socket)?,
        _ => {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "NOTIFY_SOCKET is neither an absolute path nor an @abstract name",
            ))
        }
    };
    let sender = UnixDatagram::unbound()?;
    let sent = sender.send_to_addr(message, &address)?;
    if sent != message.len() {
        return Err(std::io::Error::other("the notification was truncated"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn datagrams_reach_path_and_abstract_sockets() {
        let dir = std::env::temp_dir().join(format!("rampart-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify");
        let receiver = UnixDatagram::bind(&path).unwrap();
        send(path.as_os_str(), b"READY=1\n").unwrap();
        let mut buf = [0u8; 64];
        let n = receiver.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");

        use std::os::linux::net::SocketAddrExt;
        let name = format!("rampart-notify-test-{}", std::process::id());
        let abstract_rx =
            UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(name.as_bytes()).unwrap())
                .unwrap();
        send(std::ffi::OsStr::new(&format!("@{name}")), b"READY=1\n").unwrap();
        let n = abstract_rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1\n");

        assert!(send(std::ffi::OsStr::new("relative"), b"x").is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
