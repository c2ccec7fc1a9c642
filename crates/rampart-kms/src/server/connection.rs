//! Accepting connections and the TLS handshake, shared by the REST and
//! KMIP listeners.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_rustls::TlsAcceptor;

use super::service::audit;
use super::state::State;
use crate::pki::fingerprint;

/// Accepts connections on `listener` until `shutdown` resolves, at most
/// `max_connections` at once (further ones are closed at once: a flood
/// costs an accept and a close each, and never queues ahead of others),
/// and runs `serve` on each.
pub(crate) async fn accept_loop<F, Fut>(
    state: &Arc<State>,
    listener: TcpListener,
    shutdown: impl std::future::Future<Output = ()>,
    serve: F,
) where
    F: Fn(Arc<State>, tokio::net::TcpStream, SocketAddr) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let permits =
        Arc::new(Semaphore::new(state.limits.max_connections.min(Semaphore::MAX_PERMITS)));
    tokio::pin!(shutdown);
    loop {
        let (tcp, peer) = tokio::select! {
            () = &mut shutdown => return,
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(error) => {
                    tracing::warn!("accept failed: {error}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = Arc::clone(&permits).try_acquire_owned() else {
            drop(tcp);
            if state.metrics.connection_refused() {
                tracing::warn!(
                    "refused a connection from {peer}: {} are open (--max-connections)",
                    state.limits.max_connections
                );
            }
            continue;
        };
        let _ = tcp.set_nodelay(true);
        let connection = serve(Arc::clone(state), tcp, peer);
        tokio::spawn(async move {
            connection.await;
            drop(permit);
        });
    }
}

/// The TLS handshake under the handshake timeout; the stream and the
/// SHA-256 fingerprint of the client certificate. Refused certificates
/// (rustls errors, InvalidData) are audited as `audit_operation`; a peer
/// that just hung up is not.
pub(crate) async fn tls_handshake(
    state: &State,
    acceptor: &TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    audit_operation: &str,
) -> Option<(tokio_rustls::server::TlsStream<tokio::net::TcpStream>, String)> {
    let stream = tls_accept(state, acceptor, tcp, peer, audit_operation).await?;
    // Always present with a mandatory client verifier; refuse otherwise.
    let fp = peer_fingerprint(&stream)?;
    Some((stream, fp))
}

/// The TLS handshake under the handshake timeout (see [`tls_handshake`]);
/// on the REST listener a client certificate is optional here.
pub(super) async fn tls_accept(
    state: &State,
    acceptor: &TlsAcceptor,
    tcp: tokio::net::TcpStream,
    peer: SocketAddr,
    audit_operation: &str,
) -> Option<tokio_rustls::server::TlsStream<tokio::net::TcpStream>> {
    let stream = match tokio::time::timeout(state.limits.handshake_timeout, acceptor.accept(tcp))
        .await
    {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            if error.kind() == std::io::ErrorKind::InvalidData {
                state.metrics.tls_refused();
                tracing::info!("refused a TLS handshake from {peer}: {error}");
                let draft = audit::refused_peer(audit_operation, format!("peer {peer}: {error}"));
                if let Err(e) = state.audit(draft).await {
                    tracing::error!("cannot audit a refused handshake: {e}");
                }
            }
            return None;
        }
        Err(_) => {
            state.metrics.handshake_timed_out();
            tracing::debug!("dropped {peer}: no TLS handshake within the handshake timeout");
            return None;
        }
    };
    Some(stream)
}

/// The SHA-256 fingerprint of the verified client certificate, if any.
pub(super) fn peer_fingerprint(
    stream: &tokio_rustls::server::TlsStream<tokio::net::TcpStream>,
) -> Option<String> {
    stream.get_ref().1.peer_certificates()?.first().map(|cert| fingerprint(cert))
}
