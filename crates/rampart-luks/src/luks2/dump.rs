//! Human (`cryptsetup luksDump`-like) and JSON views of a LUKS2 header.

use std::fmt::Write as _;

use serde_json::{json, Value};

use super::json::{b64_decode, DigestJson, Kdf, Keyslot, SegmentJson, SizeField};
use super::Luks2;

fn hex_block(bytes: &[u8], indent: &str) -> String {
    let mut out = String::new();
    for (i, chunk) in bytes.chunks(16).enumerate() {
        if i > 0 {
            out.push('\n');
            out.push_str(indent);
        }
        for b in chunk {
            let _ = write!(out, "{b:02x} ");
        }
    }
    out
}

fn b64_hex(text: &str, indent: &str) -> String {
    b64_decode(text, "value").map_or_else(|_| "(invalid)".to_owned(), |b| hex_block(&b, indent))
}

fn priority_name(p: Option<i64>) -> &'static str {
    match p {
        Some(0) => "ignored",
        Some(2) => "preferred",
        _ => "normal",
    }
}

fn dump_text(h: &Luks2) -> String {
    let meta = &h.meta;
    let mut out = String::new();
    let _ = writeln!(out, "LUKS header information");
    let _ = writeln!(out, "Version:       \t2");
    let _ = writeln!(out, "Epoch:         \t{}", h.bin.seqid);
    let _ = writeln!(out, "Metadata area: \t{} [bytes]", h.bin.hdr_size);
    let _ = writeln!(out, "Keyslots area: \t{} [bytes]", meta.config.keyslots_size.0);
    let _ = writeln!(out, "UUID:          \t{}", h.bin.uuid);
    let label = String::from_utf8_lossy(&h.bin.label);
    let subsystem = String::from_utf8_lossy(&h.bin.subsystem);
    let _ =
        writeln!(out, "Label:         \t{}", if label.is_empty() { "(no label)" } else { &label });
    let _ = writeln!(
        out,
        "Subsystem:     \t{}",
        if subsystem.is_empty() { "(no subsystem)" } else { &subsystem }
    );
    let flags = meta.config.flags.clone().unwrap_or_default();
    if flags.is_empty() {
        let _ = writeln!(out, "Flags:       \t(no flags)");
    } else {
        let _ = writeln!(out, "Flags:       \t{} ", flags.join(" "));
    }
    let reqs = meta.mandatory_requirements();
    if !reqs.is_empty() {
        let _ = writeln!(out, "Requirements:\t{} ", reqs.join(" "));
    }
    if let Ok(Some(state)) = super::reencrypt::state(meta) {
        let _ = writeln!(out, "\nReencryption:");
        let _ = writeln!(out, "\tmode:       {}", state.mode.name());
        let _ = writeln!(out, "\tdirection:  {}", state.direction.name());
        let _ = writeln!(out, "\tresilience: {}", state.resilience.name());
        if state.complete {
            let _ = writeln!(out, "\tprogress:   all data re-encrypted; cleanup pending");
        } else if state.decrypt_shift() {
            let shifted_done = state.layout.iter().any(|&(l, s)| l && s.is_none());
            if shifted_done {
                let _ = writeln!(
                    out,
                    "\tprogress:   all data moved down {} bytes and decrypted but the first {} bytes (decrypted last)",
                    state.shift, state.shift
                );
            } else {
                let _ = writeln!(
                    out,
                    "\tprogress:   {} bytes moved down {} bytes and decrypted (the first {} bytes last)",
                    state.done, state.shift, state.shift
                );
            }
        } else if state.direction == super::reencrypt::ReencryptDirection::Forward {
            let _ = writeln!(out, "\tprogress:   {} bytes re-encrypted", state.done);
        } else {
            let _ = writeln!(out, "\tprogress:   backward, from the end of the data");
        }
        if let Some((start, len)) = state.hotzone {
            let _ = writeln!(
                out,
                "\thotzone:    {len} bytes at {start} interrupted (recovered on resume)"
            );
        }
    }
    let _ = writeln!(out, "\nData segments:");
    for (id, seg) in &meta.segments {
        let _ = writeln!(out, "  {id}: {}", seg.kind());
        let _ = writeln!(out, "\toffset: {} [bytes]", seg.offset());
        match seg.size() {
            SizeField::Dynamic => {
                let _ = writeln!(out, "\tlength: (whole device)");
            }
            SizeField::Bytes(n) => {
                let _ = writeln!(out, "\tlength: {n} [bytes]");
            }
        }
        if let SegmentJson::Crypt(c) = seg {
            let _ = writeln!(out, "\tcipher: {}", c.encryption);
            let _ = writeln!(out, "\tsector: {} [bytes]", c.sector_size);
            if c.iv_tweak.0 != 0 {
                let _ = writeln!(out, "\tIV tweak: {}", c.iv_tweak.0);
            }
            if let Some(kind) =
                c.integrity.as_ref().and_then(|i| i.get("type")).and_then(Value::as_str)
            {
                let _ = writeln!(out, "\tintegrity: {kind}");
            }
        }
        let seg_flags = seg.flags();
        if !seg_flags.is_empty() {
            let _ = writeln!(out, "\tflags : {} ", seg_flags.join(" "));
        }
    }
    let _ = writeln!(out, "\nKeyslots:");
    for (id, ks) in &meta.keyslots {
        let _ = writeln!(out, "  {id}: {}", ks.kind());
        let Keyslot::Luks2(ks) = ks else {
            if let Ok(Some((rid, r))) = super::reencrypt::reencrypt_keyslot(meta) {
                if rid == *id {
                    let _ = writeln!(out, "\tMode:       {}", r.mode);
                    let _ = writeln!(out, "\tDirection:  {}", r.direction);
                    let _ = writeln!(out, "\tResilience: {}", r.area.kind);
                    if let (Some(hash), Some(ss)) = (&r.area.hash, r.area.sector_size) {
                        let _ = writeln!(out, "\tHash:       {hash}");
                        let _ = writeln!(out, "\tHash data:  {ss} [bytes]");
                    }
                    if let Some(shift) = r.area.shift_size {
                        let _ = writeln!(out, "\tShift size: {} [bytes]", shift.0);
                    }
                    let _ = writeln!(out, "\tArea offset:{} [bytes]", r.area.offset.0);
                    let _ = writeln!(out, "\tArea length:{} [bytes]", r.area.size.0);
                    if let Some((digest, _)) = meta.digest_of_keyslot(*id) {
                        let _ = writeln!(out, "\tDigest ID:  {digest}");
                    }
                }
            }
            continue;
        };
        let _ = writeln!(out, "\tKey:        {} bits", u64::from(ks.key_size) * 8);
        let _ = writeln!(out, "\tPriority:   {}", priority_name(ks.priority));
        let _ = writeln!(out, "\tCipher:     {}", ks.area.encryption);
        let _ = writeln!(out, "\tCipher key: {} bits", ks.area.key_size.saturating_mul(8));
        let salt = match &ks.kdf {
            Kdf::Pbkdf2 { hash, iterations, salt } => {
                let _ = writeln!(out, "\tPBKDF:      pbkdf2");
                let _ = writeln!(out, "\tHash:       {hash}");
                let _ = writeln!(out, "\tIterations: {iterations}");
                salt
            }
            Kdf::Argon2i { time, memory, cpus, salt }
            | Kdf::Argon2id { time, memory, cpus, salt } => {
                let name =
                    if matches!(ks.kdf, Kdf::Argon2i { .. }) { "argon2i" } else { "argon2id" };
                let _ = writeln!(out, "\tPBKDF:      {name}");
                let _ = writeln!(out, "\tTime cost:  {time}");
                let _ = writeln!(out, "\tMemory:     {memory}");
                let _ = writeln!(out, "\tThreads:    {cpus}");
                salt
            }
            Kdf::Other => {
                let _ = writeln!(out, "\tPBKDF:      (a type Rampart does not implement)");
                &String::new()
            }
        };
        let _ = writeln!(out, "\tSalt:       {}", b64_hex(salt, "\t            "));
        let _ = writeln!(out, "\tAF stripes: {}", ks.af.stripes);
        let _ = writeln!(out, "\tAF hash:    {}", ks.af.hash);
        let _ = writeln!(out, "\tArea offset:{} [bytes]", ks.area.offset.0);
        let _ = writeln!(out, "\tArea length:{} [bytes]", ks.area.size.0);
        if let Some((digest, _)) = meta.digest_of_keyslot(*id) {
            let _ = writeln!(out, "\tDigest ID:  {digest}");
        }
    }
    let _ = writeln!(out, "Tokens:");
    for (id, token) in &meta.tokens {
        let kind = token.get("type").and_then(Value::as_str).unwrap_or("?");
        let _ = writeln!(out, "  {id}: {kind}");
        if let Some(desc) = token.get("key_description").and_then(Value::as_str) {
            let _ = writeln!(out, "\tDescription: {desc}");
        }
        for slot in token.get("keyslots").and_then(Value::as_array).into_iter().flatten() {
            let _ = writeln!(out, "\tKeyslot:    {}", slot.as_str().unwrap_or("?"));
        }
    }
    let _ = writeln!(out, "Digests:");
    for (id, digest) in &meta.digests {
        match digest {
            DigestJson::Pbkdf2(d) => {
                let _ = writeln!(out, "  {id}: pbkdf2");
                let _ = writeln!(out, "\tHash:       {}", d.hash);
                let _ = writeln!(out, "\tIterations: {}", d.iterations);
                let _ = writeln!(out, "\tSalt:       {}", b64_hex(&d.salt, "\t            "));
                let _ = writeln!(out, "\tDigest:     {}", b64_hex(&d.digest, "\t            "));
            }
            DigestJson::Other { raw, .. } => {
                let kind = raw.get("type").and_then(Value::as_str).unwrap_or("?");
                let _ = writeln!(out, "  {id}: {kind}");
            }
        }
    }
    out
}

fn to_json(h: &Luks2) -> Value {
    let meta = &h.meta;
    let first = meta.segments.values().next();
    let (cipher, sector_size, integrity) = match first {
        Some(SegmentJson::Crypt(c)) => (
            Value::from(c.encryption.clone()),
            Value::from(c.sector_size),
            c.integrity.as_ref().and_then(|i| i.get("type")).cloned().unwrap_or(Value::Null),
        ),
        _ => (Value::Null, Value::Null, Value::Null),
    };
    let key_bits = meta
        .segments
        .keys()
        .next()
        .and_then(|id| super::segment::volume_key_size(meta, *id).ok())
        .map_or(Value::Null, |n| Value::from(n * 8));
    let keyslots: Vec<Value> = meta
        .keyslots
        .iter()
        .map(|(id, ks)| {
            let digest = meta.digest_of_keyslot(*id).map(|(d, _)| d);
            let Keyslot::Luks2(ks) = ks else {
                let area = ks.area();
                return json!({"id": id, "type": ks.kind(), "area_offset": area.offset,
                    "area_size": area.size, "digest": digest});
            };
            let kdf = match &ks.kdf {
                Kdf::Pbkdf2 { hash, iterations, .. } => {
                    json!({"type": "pbkdf2", "hash": hash, "iterations": iterations})
                }
                Kdf::Argon2i { time, memory, cpus, .. } => {
                    json!({"type": "argon2i", "time": time, "memory_kib": memory, "threads": cpus})
                }
                Kdf::Argon2id { time, memory, cpus, .. } => {
                    json!({"type": "argon2id", "time": time, "memory_kib": memory, "threads": cpus})
                }
                Kdf::Other => json!({"type": "unknown"}),
            };
            json!({
                "id": id,
                "type": "luks2",
                "key_bits": u64::from(ks.key_size) * 8,
                "priority": priority_name(ks.priority),
                "cipher": ks.area.encryption,
                "cipher_key_bits": ks.area.key_size.saturating_mul(8),
                "kdf": kdf,
                "af_stripes": ks.af.stripes,
                "af_hash": ks.af.hash,
                "area_offset": ks.area.offset.0,
                "area_size": ks.area.size.0,
                "digest": digest,
            })
        })
        .collect();
    let tokens: Vec<Value> = meta
        .tokens
        .iter()
        .map(|(id, t)| {
            json!({
                "id": id,
                "type": t.get("type").cloned().unwrap_or(Value::Null),
                "keyslots": t.get("keyslots").cloned().unwrap_or(Value::Null),
                "json": t,
            })
        })
        .collect();
    json!({
        "version": 2,
        "uuid": h.bin.uuid,
        "label": h.label(),
        "subsystem": h.subsystem(),
        "epoch": h.bin.seqid,
        "metadata_size": h.bin.hdr_size,
        "keyslots_size": meta.config.keyslots_size.0,
        "data_offset": h.data_offset(),
        "sector_size": sector_size,
        "cipher": cipher,
        "integrity": integrity,
        "key_bits": key_bits,
        "flags": meta.config.flags.clone().unwrap_or_default(),
        "requirements": meta.mandatory_requirements(),
        "keyslots": keyslots,
        "tokens": tokens,
        "reencryption": reencryption_json(meta),
    })
}

fn reencryption_json(meta: &super::json::Metadata) -> Value {
    match super::reencrypt::state(meta) {
        Ok(Some(s)) => json!({
            "mode": s.mode.name(),
            "direction": s.direction.name(),
            "resilience": s.resilience.name(),
            "done_bytes": s.done,
            "complete": s.complete,
            "hotzone": s.hotzone.map(|(o, l)| json!({"offset": o, "length": l})),
            "old_cipher": s.old.cipher.map_or("plain", |c| c.spec()),
            "new_cipher": s.new.cipher.map_or("plain", |c| c.spec()),
            "old_sector_size": s.old.sector_size,
            "new_sector_size": s.new.sector_size,
        }),
        Ok(None) => Value::Null,
        Err(e) => json!({"error": e.to_string()}),
    }
}

impl Luks2 {
    pub(crate) fn to_json(&self) -> Value {
        to_json(self)
    }

    pub(crate) fn dump_text(&self) -> String {
        dump_text(self)
    }
}
