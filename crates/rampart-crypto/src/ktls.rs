//! Kernel TLS (Linux kTLS): the record encryption of an established TLS
//! session handed to the kernel, so that application data is written and
//! read as plain bytes and sealed or opened on its way through the socket,
//! with no copy into a user-space record buffer.
//!
//! This module only speaks to the kernel: attaching the `tls` upper layer
//! protocol, installing one direction's key, and sending or receiving one
//! record with its content type. The handshake, and what to do with
//! alerts or handshake records, belong to the caller (the NBD server).

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

use zeroize::Zeroize;

use crate::SecretBytes;

/// The TLS record content types the caller needs to tell apart.
pub const RECORD_ALERT: u8 = 21;
/// A handshake record (after the handshake: a key update or a ticket).
pub const RECORD_HANDSHAKE: u8 = 22;
/// Application data.
pub const RECORD_APPLICATION_DATA: u8 = 23;

/// The protocol version the session negotiated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KtlsVersion {
    Tls12,
    Tls13,
}

/// The AEAD the session negotiated; Linux offloads these three.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KtlsCipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl KtlsCipher {
    fn key_len(self) -> usize {
        match self {
            Self::Aes128Gcm => 16,
            Self::Aes256Gcm | Self::Chacha20Poly1305 => 32,
        }
    }
}

/// Which direction of the socket a key is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KtlsDirection {
    Send,
    Receive,
}

/// One direction's traffic key, its 12-byte IV (for AES-GCM the 4-byte
/// implicit salt followed by the 8 bytes the kernel counts from) and the
/// sequence number of the next record.
pub struct KtlsKeys {
    pub cipher: KtlsCipher,
    pub key: SecretBytes,
    pub iv: SecretBytes,
    pub sequence: u64,
}

impl std::fmt::Debug for KtlsKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KtlsKeys")
            .field("cipher", &self.cipher)
            .field("sequence", &self.sequence)
            .finish_non_exhaustive()
    }
}

/// Attaches the kernel's `tls` upper layer protocol to a connected TCP
/// socket. Until a key is installed the socket carries bytes as before,
/// so a failure here (`ENOENT`: the kernel has no `tls` module) leaves
/// the connection usable for user-space TLS.
pub fn ktls_attach(socket: BorrowedFd<'_>) -> io::Result<()> {
    let name = b"tls";
    // SAFETY: `name` is valid for its length for the duration of the call;
    // the kernel copies it.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Installs `keys` for one direction of a socket that [`ktls_attach`]
/// prepared. From then on that direction's records are sealed (or opened)
/// by the kernel. The key material passes through one stack copy, wiped
/// after the call.
pub fn ktls_enable(
    socket: BorrowedFd<'_>,
    version: KtlsVersion,
    direction: KtlsDirection,
    keys: &KtlsKeys,
) -> io::Result<()> {
    let key = keys.key.expose();
    let iv = keys.iv.expose();
    if key.len() != keys.cipher.key_len() || iv.len() != 12 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "kernel TLS: key or IV of the wrong length for the cipher",
        ));
    }
    let info = libc::tls_crypto_info {
        version: match version {
            KtlsVersion::Tls12 => libc::TLS_1_2_VERSION,
            KtlsVersion::Tls13 => libc::TLS_1_3_VERSION,
        },
        cipher_type: match keys.cipher {
            KtlsCipher::Aes128Gcm => libc::TLS_CIPHER_AES_GCM_128,
            KtlsCipher::Aes256Gcm => libc::TLS_CIPHER_AES_GCM_256,
            KtlsCipher::Chacha20Poly1305 => libc::TLS_CIPHER_CHACHA20_POLY1305,
        },
    };
    let sequence = keys.sequence.to_be_bytes();
    let option = match direction {
        KtlsDirection::Send => libc::TLS_TX,
        KtlsDirection::Receive => libc::TLS_RX,
    };
    // The two AES-GCM structures differ only in their key's length: the
    // 12-byte IV is split into the 4-byte salt and the 8 counted bytes.
    macro_rules! install_gcm {
        ($info:ident, $key_len:literal) => {{
            let mut crypto = libc::$info {
                info,
                iv: [0; 8],
                key: [0; $key_len],
                salt: [0; 4],
                rec_seq: sequence,
            };
            crypto.salt.copy_from_slice(&iv[..4]);
            crypto.iv.copy_from_slice(&iv[4..]);
            crypto.key.copy_from_slice(key);
            let result = set_tls_option(socket, option, &crypto);
            crypto.key.zeroize();
            crypto.iv.zeroize();
            crypto.salt.zeroize();
            result
        }};
    }
    match keys.cipher {
        KtlsCipher::Aes128Gcm => install_gcm!(tls12_crypto_info_aes_gcm_128, 16),
        KtlsCipher::Aes256Gcm => install_gcm!(tls12_crypto_info_aes_gcm_256, 32),
        KtlsCipher::Chacha20Poly1305 => {
            let mut crypto = libc::tls12_crypto_info_chacha20_poly1305 {
                info,
                iv: [0; 12],
                key: [0; 32],
                salt: [],
                rec_seq: sequence,
            };
            crypto.iv.copy_from_slice(iv);
            crypto.key.copy_from_slice(key);
            let result = set_tls_option(socket, option, &crypto);
            crypto.key.zeroize();
            crypto.iv.zeroize();
            result
        }
    }
}

fn set_tls_option<T>(socket: BorrowedFd<'_>, option: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a plain `#[repr(C)]` struct of the kernel's ABI,
    // valid for `size_of::<T>()` bytes for the duration of the call.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_TLS,
            option,
            std::ptr::from_ref(value).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Space for one control message carrying one byte (the record type).
/// `CMSG_SPACE(1)` is 24 on 64-bit Linux; 64 leaves room to spare and
/// keeps `cmsghdr` alignment.
#[repr(C, align(8))]
struct ControlSpace([u8; 64]);

/// Receives from a socket whose receive key the kernel holds: the bytes of
/// one or more application-data records, or the payload of one other record
/// (an alert, a handshake message), with its content type. Does not block
/// on a non-blocking socket (`WouldBlock`). A content type of
/// [`RECORD_APPLICATION_DATA`] with 0 bytes is the end of the stream.
pub fn ktls_recv(socket: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<(u8, usize)> {
    let mut control = ControlSpace([0; 64]);
    let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
    // SAFETY: an all-zero `msghdr` is valid (null name, no iovecs).
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &raw mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast();
    message.msg_controllen = control.0.len() as _;
    // SAFETY: `message` points at `iov` (over `buf`) and `control`, both
    // live and exclusively borrowed for the call.
    let received = unsafe { libc::recvmsg(socket.as_raw_fd(), &raw mut message, 0) };
    let Ok(received) = usize::try_from(received) else {
        return Err(io::Error::last_os_error());
    };
    let mut record_type = RECORD_APPLICATION_DATA;
    // SAFETY: `message` was filled by `recvmsg`; the CMSG_* helpers walk
    // only within `msg_control`/`msg_controllen`, which the kernel bounded
    // by the space it was given.
    unsafe {
        let mut header = libc::CMSG_FIRSTHDR(&raw const message);
        while !header.is_null() {
            if (*header).cmsg_level == libc::SOL_TLS
                && (*header).cmsg_type == libc::TLS_GET_RECORD_TYPE
                && (*header).cmsg_len as usize >= libc::CMSG_LEN(1) as usize
            {
                record_type = *libc::CMSG_DATA(header);
            }
            header = libc::CMSG_NXTHDR(&raw const message, header);
        }
    }
    Ok((record_type, received))
}

/// Sends `payload` as one record of content type `record_type` (an alert,
/// say) on a socket whose send key the kernel holds.
pub fn ktls_send_record(socket: BorrowedFd<'_>, record_type: u8, payload: &[u8]) -> io::Result<()> {
    let mut control = ControlSpace([0; 64]);
    let mut iov =
        libc::iovec { iov_base: payload.as_ptr().cast_mut().cast(), iov_len: payload.len() };
    // SAFETY: as in `ktls_recv`.
    let mut message: libc::msghdr = unsafe { std::mem::zeroed() };
    message.msg_iov = &raw mut iov;
    message.msg_iovlen = 1;
    message.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure size computation.
    message.msg_controllen = unsafe { libc::CMSG_SPACE(1) } as _;
    // SAFETY: `control` is aligned for `cmsghdr` and larger than
    // CMSG_SPACE(1), so the first header and its one data byte lie inside
    // it; the kernel only reads `payload` through `iov`.
    let sent = unsafe {
        let header = libc::CMSG_FIRSTHDR(&raw const message);
        (*header).cmsg_level = libc::SOL_TLS;
        (*header).cmsg_type = libc::TLS_SET_RECORD_TYPE;
        (*header).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(header) = record_type;
        libc::sendmsg(socket.as_raw_fd(), &raw const message, libc::MSG_NOSIGNAL)
    };
    match usize::try_from(sent) {
        Ok(n) if n == payload.len() => Ok(()),
        Ok(_) => Err(io::Error::new(io::ErrorKind::WriteZero, "kernel TLS: record sent in part")),
        Err(_) => Err(io::Error::last_os_error()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn keys_of_the_wrong_length_are_refused_before_the_kernel_sees_them() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let keys = KtlsKeys {
            cipher: KtlsCipher::Aes256Gcm,
            key: SecretBytes::new(vec![7; 16]),
            iv: SecretBytes::new(vec![0; 12]),
            sequence: 0,
        };
        let error = ktls_enable(client.as_fd(), KtlsVersion::Tls13, KtlsDirection::Send, &keys)
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidInput);
        assert!(!format!("{keys:?}").contains("7, 7"), "{keys:?}");
    }

    #[test]
    fn a_kernel_without_the_tls_module_refuses_the_attach_and_the_socket_still_works() {
        // Where the module is loaded (`/proc/net/tls_stat` exists) the
        // attach succeeds; the VM test of `rampart serve --ktls` covers it.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let attached = ktls_attach(server.as_fd());
        // Read after the attach, which may have loaded the module.
        let module = std::path::Path::new("/proc/net/tls_stat").exists()
            || std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
                .is_ok_and(|ulps| ulps.split_whitespace().any(|u| u == "tls"));
        assert_eq!(attached.is_ok(), module, "{attached:?}");
        use std::io::{Read, Write};
        client.write_all(b"still plain").unwrap();
        let mut got = [0u8; 11];
        server.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"still plain");
        server.write_all(b"back").unwrap();
        let mut back = [0u8; 4];
        client.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"back");
    }
}
