//! Fixed newstyle option haggling, up to the export a client enters
//! transmission with (or a clean ABORT).

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::config::TlsMode;
use crate::connection::BoxStream;
use crate::proto::*;
use crate::state::{Negotiated, Opened, ServerState};
use crate::Export;

/// A bounded cursor over an option's payload.
struct Payload<'a> {
    data: &'a [u8],
}

impl<'a> Payload<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.data.len() {
            return None;
        }
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        Some(head)
    }

    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }

    fn u32(&mut self) -> Option<u32> {
        self.take(4).map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A u32-length-prefixed string of at most [`MAX_STRING`] bytes.
    fn string(&mut self) -> Option<&'a str> {
        let len = self.u32()? as usize;
        if len > MAX_STRING {
            return None;
        }
        std::str::from_utf8(self.take(len)?).ok().filter(|s| !s.contains('\0'))
    }

    fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

struct State {
    structured: bool,
    tls: bool,
    /// The export name and whether `base:allocation` was selected for it.
    meta: Option<(String, bool)>,
    no_zeroes: bool,
}

async fn reply(stream: &mut BoxStream, option: u32, kind: u32, data: &[u8]) -> io::Result<()> {
    let len = u32::try_from(data.len()).map_err(|_| io::Error::other("option reply too long"))?;
    let mut header = [0u8; 20];
    header[..8].copy_from_slice(&OPTION_REPLY_MAGIC.to_be_bytes());
    header[8..12].copy_from_slice(&option.to_be_bytes());
    header[12..16].copy_from_slice(&kind.to_be_bytes());
    header[16..20].copy_from_slice(&len.to_be_bytes());
    stream.write_all(&header).await?;
    stream.write_all(data).await?;
    stream.flush().await
}

async fn error(stream: &mut BoxStream, option: u32, kind: u32, message: &str) -> io::Result<()> {
    reply(stream, option, kind, message.as_bytes()).await
}

fn transmission_flags(export: &Export, structured: bool) -> u16 {
    let mut flags = FLAG_HAS_FLAGS
        | FLAG_SEND_FLUSH
        | FLAG_SEND_FUA
        | FLAG_SEND_TRIM
        | FLAG_SEND_WRITE_ZEROES
        | FLAG_SEND_CACHE
        | FLAG_SEND_FAST_ZERO
        // Every connection shares one device, and a flush syncs the file
        // underneath, so a flush on any connection covers all of them.
        | FLAG_CAN_MULTI_CONN;
    if export.read_only {
        flags |= FLAG_READ_ONLY;
    }
    if structured {
        flags |= FLAG_SEND_DF;
    }
    flags
}

/// Runs option haggling. `Ok(None)` is a clean end (ABORT).
pub(crate) async fn negotiate(
    mut stream: BoxStream,
    shared: &ServerState,
) -> io::Result<Option<Negotiated>> {
    let mut greeting = [0u8; 18];
    greeting[..8].copy_from_slice(&NBDMAGIC.to_be_bytes());
    greeting[8..16].copy_from_slice(&IHAVEOPT.to_be_bytes());
    greeting[16..].copy_from_slice(&(FLAG_FIXED_NEWSTYLE | FLAG_NO_ZEROES).to_be_bytes());
    stream.write_all(&greeting).await?;
    stream.flush().await?;
    let client_flags = stream.read_u32().await?;
    if client_flags & !(FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES) != 0 {
        return Err(invalid(format!("unknown client flags {client_flags:#x}")));
    }
    let mut state = State {
        structured: false,
        tls: false,
        meta: None,
        no_zeroes: client_flags & FLAG_C_NO_ZEROES != 0,
    };
    loop {
        let magic = stream.read_u64().await?;
        if magic != IHAVEOPT {
            return Err(invalid(format!("bad option magic {magic:#x}")));
        }
        let option = stream.read_u32().await?;
        let len = stream.read_u32().await?;
        if len > MAX_OPTION {
            // Skip a moderately long payload to answer politely; a huge one
            // is not worth reading.
            if len > 1 << 20 {
                return Err(invalid(format!("option {option} with a {len}-byte payload")));
            }
            let mut sink = (&mut stream).take(u64::from(len));
            tokio::io::copy(&mut sink, &mut tokio::io::sink()).await?;
            error(&mut stream, option, REP_ERR_TOO_BIG, "option payload too large").await?;
            continue;
        }
        let mut data = vec![0u8; len as usize];
        stream.read_exact(&mut data).await?;

        if shared.tls_mode == TlsMode::Required
            && !state.tls
            && option != OPT_STARTTLS
            && option != OPT_ABORT
        {
            if option == OPT_EXPORT_NAME {
                return Err(invalid("EXPORT_NAME before STARTTLS on a TLS-only server".into()));
            }
            error(&mut stream, option, REP_ERR_TLS_REQD, "TLS is required: send NBD_OPT_STARTTLS")
                .await?;
            continue;
        }

        match option {
            OPT_EXPORT_NAME => {
                let name = std::str::from_utf8(&data)
                    .map_err(|_| invalid("export name is not UTF-8".into()))?;
                let Some(opened) = shared.export(name) else {
                    return Err(invalid(format!("unknown export '{name}'")));
                };
                let export = &opened.export;
                let mut answer = Vec::with_capacity(10 + 124);
                answer.extend_from_slice(&export.device.len().to_be_bytes());
                answer
                    .extend_from_slice(&transmission_flags(export, state.structured).to_be_bytes());
                if !state.no_zeroes {
                    answer.resize(answer.len() + 124, 0);
                }
                stream.write_all(&answer).await?;
                stream.flush().await?;
                return Ok(Some(enter(stream, opened, &state)));
            }
            OPT_ABORT => {
                let _ = reply(&mut stream, option, REP_ACK, &[]).await;
                let _ = stream.shutdown().await;
                return Ok(None);
            }
            OPT_LIST => {
                if !data.is_empty() {
                    error(&mut stream, option, REP_ERR_INVALID, "LIST takes no data").await?;
                    continue;
                }
                for export in &shared.open_exports() {
                    let mut entry = Vec::new();
                    entry.extend_from_slice(&(export.name.len() as u32).to_be_bytes());
                    entry.extend_from_slice(export.name.as_bytes());
                    entry.extend_from_slice(export.description.as_bytes());
                    reply(&mut stream, option, REP_SERVER, &entry).await?;
                }
                reply(&mut stream, option, REP_ACK, &[]).await?;
            }
            OPT_STARTTLS => {
                if !data.is_empty() {
                    error(&mut stream, option, REP_ERR_INVALID, "STARTTLS takes no data").await?;
                } else if state.tls {
                    error(&mut stream, option, REP_ERR_INVALID, "TLS is already active").await?;
                } else if let (Some(tls), false) = (&shared.tls, shared.tls_mode == TlsMode::Off) {
                    reply(&mut stream, option, REP_ACK, &[]).await?;
                    stream = tls.upgrade(stream, &shared.metrics).await?;
                    // Nothing negotiated in plain text carries over.
                    state = State {
                        structured: false,
                        tls: true,
                        meta: None,
                        no_zeroes: state.no_zeroes,
                    };
                } else {
                    error(&mut stream, option, REP_ERR_POLICY, "this server does not offer TLS")
                        .await?;
                }
            }
            OPT_INFO | OPT_GO => {
                let mut payload = Payload { data: &data };
                let parsed = (|| {
                    let name = payload.string()?;
                    let count = payload.u16()?;
                    let requests: Option<Vec<u16>> = (0..count).map(|_| payload.u16()).collect();
                    payload.is_empty().then_some((name, requests?))
                })();
                let Some((name, requests)) = parsed else {
                    error(&mut stream, option, REP_ERR_INVALID, "malformed INFO/GO request")
                        .await?;
                    continue;
                };
                let Some(opened) = shared.export(name) else {
                    error(
                        &mut stream,
                        option,
                        REP_ERR_UNKNOWN,
                        &format!("no export named '{name}'"),
                    )
                    .await?;
                    continue;
                };
                let export = &opened.export;
                let mut info = Vec::with_capacity(12);
                info.extend_from_slice(&INFO_EXPORT.to_be_bytes());
                info.extend_from_slice(&export.device.len().to_be_bytes());
                info.extend_from_slice(&transmission_flags(export, state.structured).to_be_bytes());
                reply(&mut stream, option, REP_INFO, &info).await?;
                if requests.contains(&INFO_NAME) {
                    let mut info = INFO_NAME.to_be_bytes().to_vec();
                    info.extend_from_slice(export.name.as_bytes());
                    reply(&mut stream, option, REP_INFO, &info).await?;
                }
                if requests.contains(&INFO_DESCRIPTION) {
                    let mut info = INFO_DESCRIPTION.to_be_bytes().to_vec();
                    info.extend_from_slice(export.description.as_bytes());
                    reply(&mut stream, option, REP_INFO, &info).await?;
                }
                // Always advertised: clients that ignore it are still served
                // (unaligned writes are read-modify-written below).
                let mut info = INFO_BLOCK_SIZE.to_be_bytes().to_vec();
                info.extend_from_slice(&512u32.to_be_bytes());
                info.extend_from_slice(&export.device.block_size().max(512).to_be_bytes());
                info.extend_from_slice(&MAX_REQUEST.to_be_bytes());
                reply(&mut stream, option, REP_INFO, &info).await?;
                reply(&mut stream, option, REP_ACK, &[]).await?;
                if option == OPT_GO {
                    return Ok(Some(enter(stream, opened, &state)));
                }
            }
            OPT_STRUCTURED_REPLY => {
                if data.is_empty() {
                    state.structured = true;
                    reply(&mut stream, option, REP_ACK, &[]).await?;
                } else {
                    error(&mut stream, option, REP_ERR_INVALID, "STRUCTURED_REPLY takes no data")
                        .await?;
                }
            }
            OPT_LIST_META_CONTEXT | OPT_SET_META_CONTEXT => {
                meta_context(&mut stream, shared, &mut state, option, &data).await?;
            }
            _ => {
                error(&mut stream, option, REP_ERR_UNSUP, "option not supported").await?;
            }
        }
    }
}

async fn meta_context(
    stream: &mut BoxStream,
    shared: &ServerState,
    state: &mut State,
    option: u32,
    data: &[u8],
) -> io::Result<()> {
    if !state.structured {
        return error(stream, option, REP_ERR_INVALID, "negotiate structured replies first").await;
    }
    let mut payload = Payload { data };
    let parsed = (|| {
        let name = payload.string()?;
        let count = payload.u32()?;
        // Each query takes at least 4 bytes, which bounds the count.
        if count as usize > data.len() / 4 {
            return None;
        }
        let queries: Option<Vec<&str>> = (0..count).map(|_| payload.string()).collect();
        payload.is_empty().then_some((name, queries?))
    })();
    let Some((name, queries)) = parsed else {
        return error(stream, option, REP_ERR_INVALID, "malformed meta context request").await;
    };
    if shared.export(name).is_none() {
        return error(stream, option, REP_ERR_UNKNOWN, &format!("no export named '{name}'")).await;
    }
    let listing = option == OPT_LIST_META_CONTEXT;
    let selected = queries.iter().any(|q| *q == BASE_ALLOCATION || (listing && *q == "base:"))
        || (listing && queries.is_empty());
    if selected {
        let id = if listing { 0 } else { BASE_ALLOCATION_ID };
        let mut context = id.to_be_bytes().to_vec();
        context.extend_from_slice(BASE_ALLOCATION.as_bytes());
        reply(stream, option, REP_META_CONTEXT, &context).await?;
    }
    if !listing {
        state.meta = Some((name.to_owned(), selected));
    }
    reply(stream, option, REP_ACK, &[]).await
}

fn enter(stream: BoxStream, opened: Opened, state: &State) -> Negotiated {
    let base_allocation = state.structured
        && matches!(&state.meta, Some((name, true)) if *name == opened.export.name);
    Negotiated { stream, opened, structured: state.structured, base_allocation }
}

fn invalid(message: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message)
}
