//! KMIP over HTTPS on the KMIP port (KMIP Additional Message Encodings
//! Version 1.0 §2, the profiles' HTTPS, XML and JSON Server profiles):
//! each request message is the body of a `POST /kmip` over the same
//! mutually authenticated TLS as binary KMIP, in the encoding its
//! Content-Type names: `application/octet-stream` for TTLV, `text/xml`
//! for the TTLV-XML encoding, `application/json` for the JSON one. The
//! answer is 200 with the response message in the same encoding, a
//! Content-Length and `Cache-Control: no-cache` (§2.5), whatever the
//! message's outcome: a KMIP error is a KMIP response. HTTP errors are
//! kept for what is not a KMIP request at all (another path or method,
//! an unknown Content-Type, a body over the limit).
//!
//! A text message is converted to TTLV and answered by
//! [`super::kmip::handle_message`] like any other, so the Maximum
//! Response Size counts the TTLV length, as §4 and §6 say. Streamed
//! operations (Correlation Values) last as long as the HTTP connection.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::HeaderValue;
use hyper::server::conn::http1;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use rampart_kmip::ttlv::{self, Item};
use rampart_kmip::xml::{self, XmlLimits};
use rampart_kmip::{json, KmipError, Limits as TtlvLimits};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Mutex;

use super::kmip::{audit, error_response, handle_message, MAX_MESSAGE};
use super::kmip_objects::Streams;
use super::state::State;
use crate::model::ClientInfo;

/// The target URI (§2.3: servers SHOULD support `/kmip`).
pub const PATH: &str = "/kmip";

/// The largest XML or JSON body: text spells each byte as two hex digits
/// and each tag as a name, so a message of [`MAX_MESSAGE`] TTLV bytes
/// takes a few times that.
const MAX_TEXT: usize = 4 * MAX_MESSAGE;

const TEXT_LIMITS: XmlLimits = XmlLimits { max_len: MAX_TEXT, max_depth: 16, max_elements: 16_384 };

/// Reading back our own response: larger than any request, as a
/// response may be (within the client's Maximum Response Size).
const RESPONSE_LIMITS: TtlvLimits =
    TtlvLimits { max_message_len: 64 << 20, max_depth: 32, max_items: 1 << 20 };

/// A message encoding, from the request's Content-Type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Ttlv,
    Xml,
    Json,
}

impl Encoding {
    fn of(request: &Request<Incoming>) -> Option<Self> {
        let value = request.headers().get(hyper::header::CONTENT_TYPE)?.to_str().ok()?;
        let mime = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        match mime.as_str() {
            "application/octet-stream" => Some(Self::Ttlv),
            "text/xml" | "application/xml" => Some(Self::Xml),
            "application/json" => Some(Self::Json),
            _ => None,
        }
    }

    fn content_type(self) -> &'static str {
        match self {
            Self::Ttlv => "application/octet-stream",
            Self::Xml => "text/xml",
            Self::Json => "application/json",
        }
    }

    fn max_body(self) -> usize {
        match self {
            Self::Ttlv => MAX_MESSAGE,
            Self::Xml | Self::Json => MAX_TEXT,
        }
    }

    /// The request as TTLV bytes.
    fn decode(self, body: &[u8]) -> Result<Vec<u8>, KmipError> {
        let text = || {
            std::str::from_utf8(body)
                .map_err(|_| KmipError::BadEncoding("the message is not UTF-8 text".into()))
        };
        let item = match self {
            Self::Ttlv => return Ok(body.to_vec()),
            Self::Xml => {
                let mut elements = xml::parse_document(text()?, &TEXT_LIMITS)?;
                if elements.len() != 1 {
                    return Err(KmipError::BadEncoding(format!(
                        "an XML message is one element, not {}",
                        elements.len()
                    )));
                }
                let element = elements.pop().unwrap_or_default();
                xml::to_item(&element)?
            }
            Self::Json => json::from_json(text()?, &TEXT_LIMITS)?,
        };
        Ok(item.encode()?)
    }

    /// A TTLV response in this encoding.
    fn encode(self, response: Vec<u8>) -> Vec<u8> {
        if self == Self::Ttlv {
            return response;
        }
        let item: Item = match ttlv::decode(&response, &RESPONSE_LIMITS) {
            Ok(item) => item,
            Err(err) => {
                tracing::error!("cannot re-encode a KMIP response: {err}");
                match ttlv::decode(
                    &error_response(&KmipError::GeneralFailure(err.to_string())),
                    &RESPONSE_LIMITS,
                ) {
                    Ok(item) => item,
                    Err(_) => return Vec::new(),
                }
            }
        };
        match self {
            Self::Xml => xml::to_xml(&item).into_bytes(),
            _ => json::to_json(&item).into_bytes(),
        }
    }
}

/// Serves HTTP/1.1 on an authenticated KMIP connection until it closes.
pub(super) async fn serve<S>(
    state: Arc<State>,
    fp: String,
    client: Option<ClientInfo>,
    stream: S,
    peer: SocketAddr,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let limits = state.limits.clone();
    let mut http = http1::Builder::new();
    // As on the REST port: the header timeout is also the keep-alive one.
    http.timer(TokioTimer::new())
        .keep_alive(true)
        .header_read_timeout(limits.idle_timeout)
        .max_header_size(limits.max_header_bytes);
    let context = Arc::new(Connection { state, fp, client, streams: Mutex::default() });
    let service = hyper::service::service_fn(move |request| {
        let context = Arc::clone(&context);
        async move { Ok::<_, std::convert::Infallible>(context.answer(request).await) }
    });
    if let Err(error) = http.serve_connection(TokioIo::new(stream), service).await {
        tracing::debug!("KMIP HTTPS connection from {peer} ended: {error}");
    }
}

struct Connection {
    state: Arc<State>,
    fp: String,
    client: Option<ClientInfo>,
    streams: Mutex<Streams>,
}

impl Connection {
    async fn answer(&self, request: Request<Incoming>) -> Response<Full<Bytes>> {
        if request.uri().path() != PATH {
            return plain(StatusCode::NOT_FOUND, "KMIP over HTTPS is served at /kmip\n");
        }
        if request.method() != Method::POST {
            let mut response =
                plain(StatusCode::METHOD_NOT_ALLOWED, "KMIP requests are POSTed to /kmip\n");
            response.headers_mut().insert(hyper::header::ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        let Some(encoding) = Encoding::of(&request) else {
            return plain(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "the Content-Type must be application/octet-stream (TTLV), text/xml or \
                 application/json\n",
            );
        };
        let body = match Limited::new(request.into_body(), encoding.max_body()).collect().await {
            Ok(body) => body.to_bytes(),
            Err(_) => {
                return plain(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "the KMIP message is longer than this server accepts\n",
                )
            }
        };
        let response = match &self.client {
            None => {
                let who = format!("cert:{}", &self.fp[..self.fp.len().min(16)]);
                let err = KmipError::AuthenticationNotSuccessful;
                audit(&self.state, &who, "kmip.message", "denied", err.to_string()).await;
                error_response(&err)
            }
            Some(client) => match encoding.decode(&body) {
                Ok(message) => {
                    let mut streams = self.streams.lock().await;
                    handle_message(&self.state, client, &message, &mut streams).await
                }
                Err(err) => {
                    audit(&self.state, &client.name, "kmip.message", "invalid", err.to_string())
                        .await;
                    error_response(&err)
                }
            },
        };
        let mut response = Response::new(Full::new(Bytes::from(encoding.encode(response))));
        let headers = response.headers_mut();
        headers
            .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static(encoding.content_type()));
        headers.insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        response
    }
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(hyper::header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response
}
