//! The NBD server over an in-memory stream: the input is everything a
//! client sends (handshake, options, requests and their payloads), written
//! to the server and followed by end-of-file, while every reply is read
//! and discarded. The server must answer or disconnect, never panic or
//! hang, and end once the client has gone.

use std::sync::Arc;
use std::time::Duration;

use rampart_nbd::{Export, Server, ServerConfig};
use rampart_volume::MemDevice;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Size of the writable export (the empty name) and of the read-only one
/// (`ro`); small, so that each run allocates little.
const EXPORT_BYTES: usize = 1 << 20;

thread_local! {
    static RUNTIME: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
}

fn server() -> Server {
    let export = |name: &str, read_only| Export {
        name: name.to_owned(),
        description: format!("fuzz export {name}"),
        device: Arc::new(MemDevice::new(EXPORT_BYTES)),
        read_only,
    };
    let mut config = ServerConfig::new(vec![export("", false), export("ro", true)]);
    config.max_inflight_bytes = 64 << 20;
    config.limits.handshake_timeout = Duration::from_secs(30);
    Server::new(config).expect("a valid server configuration")
}

pub fn nbd_server(data: &[u8]) {
    let server = server();
    RUNTIME.with(|runtime| {
        runtime.block_on(async {
            let (mut client, end) = tokio::io::duplex(64 << 10);
            let serving = tokio::spawn(async move { server.serve_stream(end, "fuzz").await });
            let (mut reader, mut writer) = tokio::io::split(&mut client);
            let send = async {
                // The server may hang up mid-input: that is an answer too.
                let _ = writer.write_all(data).await;
                let _ = writer.shutdown().await;
            };
            let receive = async {
                let mut sink = [0u8; 16 << 10];
                while matches!(reader.read(&mut sink).await, Ok(n) if n > 0) {}
            };
            let finished = tokio::time::timeout(Duration::from_secs(20), async {
                tokio::join!(send, receive);
                serving.await
            })
            .await;
            match finished {
                Err(_) => panic!("the server did not end 20 s after the client's end of file"),
                Ok(Err(join)) => std::panic::resume_unwind(join.into_panic()),
                Ok(Ok(_)) => {}
            }
        });
    });
}
