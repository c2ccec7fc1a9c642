//! The KMIP front end: binary TTLV messages (`rampart-kmip`) over TLS 1.2
//! or 1.3 with the same mandatory client certificates, client identities,
//! connection limits, timeouts and hash-chained audit as the REST API.
//! (The same port serves KMIP over HTTPS: [`super::kmip_connection`] tells
//! the two apart, [`super::kmip_http`] turns HTTP bodies into the messages
//! answered here.)
//!
//! A connection carries request messages one after another. Each is read
//! under the idle timeout: its length from the first 8 bytes (refused
//! before any buffer is allocated when over [`MAX_MESSAGE`]), then the
//! rest, decoded by the bounded reader. A message that decodes but does
//! not parse is answered with one failed batch item (Invalid Message) and
//! the connection stays usable; a message whose framing is wrong (not a
//! structure, too long) is answered the same way and the connection then
//! closed, since the next message's start is unknown. Every batch item is
//! audited as `kmip.<operation>`.
//!
//! Batches follow KMIP 1.4 §6.12, §6.13 and §7: items run in the order they
//! were sent, whatever the Batch Order Option (in order is what True asks
//! and one of the orders False allows); after a failure the Batch Error
//! Continuation Option decides (Stop, the default: the rest are not run;
//! Continue: they run; Undo: the items before it are undone, what they
//! changed put back by [`kmip_objects::UndoLog`]). A batch under Undo
//! holding an item that cannot be put back (Log, Interop, a part of a
//! stream) is refused whole, before anything runs, with Feature Not
//! Supported. The response honours
//! the Maximum Response Size (Response Too Large, §6.3); asynchronous
//! requests are refused per item.
//!
//! Operations: Discover Versions and Query here; the object operations of
//! the Baseline, Symmetric Key Lifecycle and Basic Cryptographic Server
//! profiles (Create, Register, Get, attributes, Locate, Activate, Revoke,
//! Destroy, Re-key, Check, Encrypt, Decrypt, MAC, MAC Verify, Hash, RNG
//! Retrieve, RNG Seed) in [`super::kmip_objects`],
//! over the REST API's store, policies and audit chain. Every other
//! operation (Get Usage Allocation among them) is answered Operation Not
//! Supported in a well-formed response.

use std::time::Duration;

use rampart_kmip::enums::{
    BatchErrorContinuationOption, ObjectType, Operation, QueryFunction, ResultReason, ResultStatus,
};
use rampart_kmip::message::{
    ProtocolVersion, RequestBatchItem, RequestMessage, ResponseBatchItem, ResponseHeader,
    ResponseMessage,
};
use rampart_kmip::payload::{negotiate_versions, parse_discover_versions, parse_query};
use rampart_kmip::tag::Tag;
use rampart_kmip::ttlv::{self, Item, HEADER_LEN};
use rampart_kmip::{KmipError, Limits as TtlvLimits};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::kmip_objects::{self, undoable, Session, Streams, UndoLog};
use super::service;
use super::state::State;
use crate::model::{now_ms, ClientInfo};

/// The standard KMIP port (IANA).
pub const DEFAULT_KMIP_PORT: u16 = 5696;

/// The largest request message accepted, header included.
pub const MAX_MESSAGE: usize = 1 << 20;

const TTLV_LIMITS: TtlvLimits =
    TtlvLimits { max_message_len: MAX_MESSAGE, max_depth: 16, max_items: 16_384 };

/// The protocol versions served, most preferred first.
pub const VERSIONS: [ProtocolVersion; 7] = [
    ProtocolVersion::V2_1,
    ProtocolVersion::V2_0,
    ProtocolVersion::V1_4,
    ProtocolVersion::V1_3,
    ProtocolVersion::V1_2,
    ProtocolVersion::V1_1,
    ProtocolVersion::V1_0,
];

/// The operations this front end serves, what Query Operations lists
/// (Interop only on a server started for interop testing): Discover
/// Versions and Query here, the rest in the object dispatch, gated by
/// this same table.
pub use super::kmip_objects::OPERATIONS;

/// The KMIP 2.1 server profiles claimed in Query Profiles (Profile Name
/// values, 2.1 §11.41): those whose every mandatory test case in the
/// OASIS KMIP Profiles 2.1 passes (`tests/kmip_conformance.rs` fails
/// when a claimed one does not). Not claimed: Advanced Cryptographic
/// (CS-AC-M-6 as published cannot pass), PKCS#11 (no PKCS#11 operation),
/// and every KMIP 1.x profile, whose Baseline has no published cases to
/// prove it by.
pub const PROFILES: [u32; 14] = [
    0x12B, // Baseline Server
    0x107, // Tape Library Server
    0x109, // Symmetric Key Lifecycle Server
    0x10B, // Asymmetric Key Lifecycle Server
    0x10D, // Basic Cryptographic Server
    0x111, // RNG Cryptographic Server
    0x115, // Symmetric Key Foundry Server
    0x117, // Opaque Managed Object Store Server
    0x11D, // Storage Array with Self Encrypting Drive Server
    0x11F, // HTTPS Server
    0x121, // JSON Server
    0x123, // XML Server
    0x125, // AES XTS Server
    0x127, // Quantum Safe Server
];

/// The object types Create, Create Key Pair and Register make (what Query
/// Objects lists, with Templates to a KMIP 1.x client).
pub const OBJECT_TYPES: [ObjectType; 7] = [
    ObjectType::CERTIFICATE,
    ObjectType::SYMMETRIC_KEY,
    ObjectType::PUBLIC_KEY,
    ObjectType::PRIVATE_KEY,
    ObjectType::SPLIT_KEY,
    ObjectType::SECRET_DATA,
    ObjectType::OPAQUE_OBJECT,
];

/// Why a connection ended.
#[derive(Debug)]
pub(super) enum Ended {
    Closed,
    Io(std::io::Error),
    Idle,
    Framing,
    Unauthenticated,
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Closed => f.write_str("closed by the client"),
            Self::Io(e) => write!(f, "{e}"),
            Self::Idle => f.write_str("idle timeout"),
            Self::Framing => f.write_str("unframable message"),
            Self::Unauthenticated => f.write_str("unregistered client certificate"),
        }
    }
}

pub(super) async fn read_exact_within<S: AsyncRead + Unpin>(
    stream: &mut S,
    buf: &mut [u8],
    limit: Duration,
) -> Result<(), Ended> {
    match tokio::time::timeout(limit, stream.read_exact(buf)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(Ended::Closed),
        Ok(Err(e)) => Err(Ended::Io(e)),
        Err(_) => Err(Ended::Idle),
    }
}

pub(super) async fn serve_messages<S: AsyncRead + AsyncWrite + Unpin>(
    state: &State,
    fp: &str,
    stream: &mut S,
    idle: Duration,
) -> Result<(), Ended> {
    let mut streams = Streams::default();
    loop {
        let mut header = [0u8; HEADER_LEN];
        read_exact_within(stream, &mut header, idle).await?;
        // Each message is the client's as it is now: a client revoked
        // while its connection stays open is refused from its next
        // message on (the identity is cached until it changes).
        let client = state.identify(fp).await.ok();
        let client = client.as_ref();
        let len = ttlv::message_len(&header, &TTLV_LIMITS).map_err(KmipError::from);
        let (response, end) = match len {
            Ok(len) => {
                let mut message = vec![0u8; len];
                message[..HEADER_LEN].copy_from_slice(&header);
                read_exact_within(stream, &mut message[HEADER_LEN..], idle).await?;
                match client {
                    Some(client) => {
                        (handle_message(state, client, &message, &mut streams).await, None)
                    }
                    None => {
                        let err = KmipError::AuthenticationNotSuccessful;
                        audit(
                            state,
                            &format!("cert:{}", &fp[..fp.len().min(16)]),
                            "kmip.message",
                            "denied",
                            err.to_string(),
                        )
                        .await;
                        (error_response(&err), Some(Ended::Unauthenticated))
                    }
                }
            }
            Err(err) => {
                let who = client.map_or_else(
                    || format!("cert:{}", &fp[..fp.len().min(16)]),
                    |c| c.name.clone(),
                );
                audit(state, &who, "kmip.message", "invalid", err.to_string()).await;
                (error_response(&err), Some(Ended::Framing))
            }
        };
        stream.write_all(&response).await.map_err(Ended::Io)?;
        stream.flush().await.map_err(Ended::Io)?;
        if let Some(end) = end {
            return Err(end);
        }
    }
}

pub(super) fn error_response(err: &KmipError) -> Vec<u8> {
    ResponseMessage::error(ProtocolVersion::V1_0, now_ms() / 1000, err)
        .encode_bounded(None)
        .unwrap_or_default()
}

pub(super) async fn audit(
    state: &State,
    client: &str,
    operation: &str,
    outcome: &str,
    detail: String,
) -> bool {
    audit_key(state, client, operation, None, outcome, detail).await
}

async fn audit_key(
    state: &State,
    client: &str,
    operation: &str,
    key: Option<(String, Option<u32>)>,
    outcome: &str,
    detail: String,
) -> bool {
    let (key, version) = match key {
        Some((k, v)) => (Some(k), v),
        None => (None, None),
    };
    let draft = service::audit::entry(client.to_owned(), operation, key, version, outcome, detail);
    match state.audit(draft).await {
        Ok(()) => true,
        Err(error) => {
            state.metrics.audit_failed();
            tracing::error!("cannot audit a KMIP request: {error}");
            false
        }
    }
}

/// The audit name of an operation: `kmip.get_attributes`, or the number
/// for one KMIP does not define.
fn operation_name(op: Operation) -> String {
    match op.name() {
        Some(name) => format!("kmip.{}", name.to_ascii_lowercase().replace([' ', '-'], "_")),
        None => format!("kmip.0x{:08X}", op.0),
    }
}

/// Answers one framed message (any bytes: it is decoded here).
pub(crate) async fn handle_message(
    state: &State,
    client: &ClientInfo,
    bytes: &[u8],
    streams: &mut Streams,
) -> Vec<u8> {
    let decoded = ttlv::decode(bytes, &TTLV_LIMITS).map_err(KmipError::from);
    let request = match decoded.and_then(|item| RequestMessage::parse(&item)) {
        Ok(request) => request,
        Err(err) => {
            audit(state, &client.name, "kmip.message", "invalid", err.to_string()).await;
            return error_response(&err);
        }
    };
    let version = request.header.protocol_version;
    let now = now_ms() / 1000;
    if !VERSIONS.contains(&version) {
        // Answered in the newest version the client's major number knows.
        let answer = VERSIONS
            .iter()
            .copied()
            .find(|v| v.major <= version.major)
            .unwrap_or(ProtocolVersion::V1_0);
        let err = KmipError::UnsupportedVersion { major: version.major, minor: version.minor };
        audit(state, &client.name, "kmip.message", "invalid", err.to_string()).await;
        return ResponseMessage::error(answer, now, &err).encode_bounded(None).unwrap_or_default();
    }
    let max = request.header.maximum_response_size;
    let response = if request.header.asynchronous_indicator {
        for item in &request.batch_items {
            audit(
                state,
                &client.name,
                &operation_name(item.operation),
                "invalid",
                "asynchronous operations are not supported".into(),
            )
            .await;
        }
        request.refuse_async(version, now)
    } else {
        run_batch(state, client, &request, now, streams).await
    };
    response
        .encode_bounded(max)
        .unwrap_or_else(|err| error_response(&KmipError::GeneralFailure(err.to_string())))
}

async fn run_batch(
    state: &State,
    client: &ClientInfo,
    request: &RequestMessage,
    now: i64,
    streams: &mut Streams,
) -> ResponseMessage {
    let version = request.header.protocol_version;
    let continuation = request.header.batch_error_continuation;
    let undo = continuation == BatchErrorContinuationOption::UNDO;
    let mut items = Vec::with_capacity(request.batch_items.len());
    if undo {
        if let Some(item) = request.batch_items.iter().find(|i| !undoable(i)) {
            let err = KmipError::FeatureNotSupported(format!(
                "Batch Error Continuation Option Undo with {} (a log entry, an interop \
                 step or a part of a stream cannot be undone)",
                item.operation
            ));
            for item in &request.batch_items {
                audit(
                    state,
                    &client.name,
                    &operation_name(item.operation),
                    "invalid",
                    err.to_string(),
                )
                .await;
                items.push(ResponseBatchItem::failure(
                    Some(item.operation),
                    item.unique_batch_item_id.clone(),
                    &err,
                ));
            }
            return ResponseMessage {
                header: ResponseHeader { protocol_version: version, time_stamp: now },
                batch_items: items,
            };
        }
    }
    let mut failed = false;
    let mut session = Session {
        state,
        client,
        version,
        placeholder: None,
        touched: None,
        note: None,
        streams,
        undo: undo.then(UndoLog::default),
    };
    for item in &request.batch_items {
        let op_name = operation_name(item.operation);
        if failed && continuation != BatchErrorContinuationOption::CONTINUE {
            items.push(ResponseBatchItem::not_run(
                item.operation,
                item.unique_batch_item_id.clone(),
            ));
            audit(
                state,
                &client.name,
                &op_name,
                "invalid",
                "not run: an earlier batch item failed".into(),
            )
            .await;
            continue;
        }
        session.touched = None;
        session.note = None;
        let result = dispatch(&mut session, item).await;
        let (response, outcome, detail) = match result {
            Ok(fields) => (
                ResponseBatchItem::success(
                    item.operation,
                    item.unique_batch_item_id.clone(),
                    fields,
                ),
                "ok",
                session.note.take().unwrap_or_else(|| "Success".to_owned()),
            ),
            Err(err) => {
                failed = true;
                let err = err.for_version(version);
                let outcome = match err.result_reason() {
                    ResultReason::PERMISSION_DENIED
                    | ResultReason::AUTHENTICATION_NOT_SUCCESSFUL => "denied",
                    ResultReason::GENERAL_FAILURE | ResultReason::CRYPTOGRAPHIC_FAILURE => "error",
                    _ => "invalid",
                };
                let detail = format!("{}: {err}", err.result_reason());
                (
                    ResponseBatchItem::failure(
                        Some(item.operation),
                        item.unique_batch_item_id.clone(),
                        &err,
                    ),
                    outcome,
                    detail,
                )
            }
        };
        let touched = session.touched.take();
        if !audit_key(state, &client.name, &op_name, touched, outcome, detail).await {
            // Never answer what could not be audited.
            let err = KmipError::GeneralFailure("the audit log cannot be written".into());
            items.push(ResponseBatchItem::failure(
                Some(item.operation),
                item.unique_batch_item_id.clone(),
                &err,
            ));
            failed = true;
            continue;
        }
        debug_assert!(response.result_status == ResultStatus::SUCCESS || failed);
        let first_failure = failed && response.result_status != ResultStatus::SUCCESS;
        items.push(response);
        if undo && first_failure {
            undo_before(&mut session, &mut items, &request.batch_items).await;
        }
    }
    ResponseMessage {
        header: ResponseHeader { protocol_version: version, time_stamp: now },
        batch_items: items,
    }
}

/// Undoes the items before the last (failed) one: KMIP 1.4 §6.13. What
/// they changed is put back and they are answered Operation Undone, naming
/// the objects they named (as the profiles' BL-M-2 shows); when
/// the store cannot put it back, they are answered General Failure
/// instead, since their effects then stand in part.
async fn undo_before(
    session: &mut Session<'_>,
    items: &mut [ResponseBatchItem],
    sent: &[RequestBatchItem],
) {
    let (state, client) = (session.state, session.client);
    let restored = session.undo().await;
    if let Err(err) = &restored {
        tracing::error!("cannot undo a KMIP batch: {err}");
    }
    let last = items.len() - 1;
    for (done, sent) in items[..last].iter_mut().zip(sent) {
        if done.result_status != ResultStatus::SUCCESS {
            continue;
        }
        let (item, outcome, detail) = match &restored {
            Ok(_) => (
                ResponseBatchItem::undone(
                    done.operation,
                    done.unique_batch_item_id.take(),
                    done.payload.take(),
                ),
                "invalid",
                "undone: a later batch item failed".to_owned(),
            ),
            Err(err) => {
                let err = KmipError::GeneralFailure(format!(
                    "a later batch item failed and this one could not be undone: {err}"
                ));
                let detail = err.to_string();
                let item = ResponseBatchItem::failure(
                    done.operation,
                    done.unique_batch_item_id.take(),
                    &err,
                );
                (item, "error", detail)
            }
        };
        *done = item;
        audit(state, &client.name, &operation_name(sent.operation), outcome, detail).await;
    }
}

async fn dispatch(
    session: &mut Session<'_>,
    item: &RequestBatchItem,
) -> Result<Vec<Item>, KmipError> {
    let version = session.version;
    match item.operation {
        Operation::DISCOVER_VERSIONS => {
            let client = parse_discover_versions(&item.payload)?;
            Ok(negotiate_versions(&client, &VERSIONS)
                .into_iter()
                .map(ProtocolVersion::to_item)
                .collect())
        }
        Operation::QUERY => query(session.state, version, &parse_query(&item.payload)?),
        // Everything else needs the key manager unsealed.
        _ if session.state.root().is_none() => {
            Err(KmipError::GeneralFailure("the key manager is sealed".into()))
        }
        op => session.run(op, &item.payload).await,
    }
}

fn query(
    state: &State,
    version: ProtocolVersion,
    functions: &[QueryFunction],
) -> Result<Vec<Item>, KmipError> {
    let mut out = Vec::new();
    for f in functions {
        match *f {
            QueryFunction::OPERATIONS => {
                let listed =
                    OPERATIONS.iter().filter(|op| kmip_objects::listed(state, **op, version));
                out.extend(listed.map(|op| Item::enumeration(Tag::OPERATION, op.0)));
            }
            QueryFunction::OBJECTS => {
                out.extend(OBJECT_TYPES.iter().map(|t| Item::enumeration(Tag::OBJECT_TYPE, t.0)));
                // KMIP 1.x Templates; 2.x has none (2.1 §11.34).
                if version < ProtocolVersion::V2_0 {
                    out.push(Item::enumeration(Tag::OBJECT_TYPE, ObjectType::TEMPLATE.0));
                }
            }
            QueryFunction::SERVER_INFORMATION => {
                out.push(Item::text(Tag::VENDOR_IDENTIFICATION, "Rampart"));
                let mut info = vec![Item::text(Tag(0x42_012D), "rampart-kms")];
                if version >= ProtocolVersion::V2_0 {
                    info.push(Item::text(Tag(0x42_012F), env!("CARGO_PKG_VERSION")));
                }
                out.push(Item::structure(Tag::SERVER_INFORMATION, info));
            }
            QueryFunction::PROFILES if version >= ProtocolVersion::V2_0 => {
                for name in PROFILES {
                    out.push(Item::structure(
                        Tag(0x42_00EB),
                        vec![
                            Item::enumeration(Tag(0x42_00EC), name),
                            Item::structure(
                                Tag(0x42_0142),
                                vec![Item::int(Tag(0x42_0143), 2), Item::int(Tag(0x42_0144), 1)],
                            ),
                        ],
                    ));
                }
            }
            // Application namespaces, extensions, attestation types, RNGs,
            // validations, capabilities, registration methods (and profiles
            // to a 1.x client): Rampart has none to list, which is a valid
            // (empty) answer.
            _ => {}
        }
    }
    Ok(out)
}
