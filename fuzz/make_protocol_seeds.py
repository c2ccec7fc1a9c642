#!/usr/bin/env python3
"""Writes the seed corpora of the nbd_server, kms_request, kms_bundle,
kmip_ttlv, kmip_text and kms_audit_archive fuzz targets (corpus/<target>/). Run it again after changing
it and commit the result (the kms_bundle seeds get a new throwaway key pair
each time). The kms_bundle seeds need `openssl` (a throwaway
CA, certificate and key made for the corpus, used nowhere else)."""
import hashlib
import hmac
import json
import os
import struct
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))

NBDMAGIC = 0x4E42444D41474943
IHAVEOPT = 0x49484156454F5054
REQUEST_MAGIC = 0x25609513
OPT = dict(EXPORT_NAME=1, ABORT=2, LIST=3, STARTTLS=5, INFO=6, GO=7,
           STRUCTURED_REPLY=8, LIST_META_CONTEXT=9, SET_META_CONTEXT=10)
CMD = dict(READ=0, WRITE=1, DISC=2, FLUSH=3, TRIM=4, CACHE=5,
           WRITE_ZEROES=6, BLOCK_STATUS=7)
FUA, NO_HOLE, DF, REQ_ONE, FAST_ZERO = 1, 2, 4, 8, 16


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# --- NBD: what a client sends, from the client flags on ---------------------

def client_flags(no_zeroes=True):
    return struct.pack(">I", 1 | (2 if no_zeroes else 0))


def option(code, data=b""):
    return struct.pack(">QII", IHAVEOPT, code, len(data)) + data


def go(name=b"", infos=(), code=OPT["GO"]):
    return option(code, struct.pack(">I", len(name)) + name
                  + struct.pack(">H", len(infos)) + b"".join(struct.pack(">H", i) for i in infos))


def meta(code, export=b"", queries=(b"base:allocation",)):
    body = struct.pack(">I", len(export)) + export + struct.pack(">I", len(queries))
    body += b"".join(struct.pack(">I", len(q)) + q for q in queries)
    return option(code, body)


def request(cmd, offset=0, length=0, flags=0, handle=1, payload=b""):
    return struct.pack(">IHHQQI", REQUEST_MAGIC, flags, CMD[cmd], handle, offset, length) + payload


def nbd_seeds():
    data = bytes(range(256)) * 16  # 4 KiB
    io = (request("WRITE", 0, 4096, handle=1, payload=data)
          + request("READ", 0, 4096, handle=2)
          + request("WRITE", 8192, 512, FUA, 3, data[:512])
          + request("FLUSH", handle=4)
          + request("WRITE", 4000, 200, handle=5, payload=data[:200])  # partial sectors
          + request("TRIM", 65536, 65536, handle=6)
          + request("WRITE_ZEROES", 131072, 8192, NO_HOLE, 7)
          + request("CACHE", 0, 4096, handle=8)
          + request("READ", (1 << 20) - 512, 1024, handle=9)  # past the end
          + request("DISC", handle=10))
    write("nbd_server", "go-io", client_flags() + go(b"", (0, 1, 2, 3)) + io)
    write("nbd_server", "structured-block-status",
          client_flags() + option(OPT["STRUCTURED_REPLY"])
          + meta(OPT["LIST_META_CONTEXT"], queries=())
          + meta(OPT["SET_META_CONTEXT"]) + go()
          + request("WRITE", 0, 4096, handle=1, payload=data)
          + request("BLOCK_STATUS", 0, 1 << 20, handle=2)
          + request("BLOCK_STATUS", 0, 1 << 20, REQ_ONE, 3)
          + request("READ", 0, 8192, DF, 4)
          + request("WRITE_ZEROES", 0, 4096, FAST_ZERO, 5)
          + request("DISC", handle=6))
    write("nbd_server", "list-info-export-name",
          client_flags(no_zeroes=False) + option(OPT["LIST"]) + go(b"ro", (0, 1, 2, 3), OPT["INFO"])
          + go(b"missing") + option(OPT["STARTTLS"]) + option(99, b"junk")
          + option(OPT["EXPORT_NAME"], b"ro")
          + request("READ", 0, 512) + request("WRITE", 0, 512, payload=bytes(512))
          + request("DISC"))
    write("nbd_server", "abort", client_flags() + option(OPT["ABORT"]))
    write("nbd_server", "bad-request",
          client_flags() + go() + request("WRITE", 0, 0xFFFFFFFF)
          + struct.pack(">I", 0xDEADBEEF) + bytes(24))


# --- Key manager request bodies: selector byte + JSON ---------------------

OPERATIONS = ["sys.unseal", "key.create", "client.issue", "key.rotate", "key.revoke",
              "key.destroy", "key.wrap", "key.unwrap", "key.export"]


def kms_request_seeds():
    csr = ("-----BEGIN CERTIFICATE REQUEST-----\nMIIBADCBpwIBADAQMQ4wDAYDVQQDDAVob3N0MTBZ\n"
           "-----END CERTIFICATE REQUEST-----\n")
    bodies = {
        "sys.unseal": [{"share": "01" + "ab" * 32}, {"share": "zz"}],
        "key.create": [{"name": "vol-keys", "allow": ["label:region=eu", "client:host1"],
                        "exportable": False}, {"name": "k"}],
        "client.issue": [{"name": "host1", "labels": {"region": "eu", "rack": "r7"},
                          "admin": False, "csr": csr, "days": 30}],
        "key.rotate": [{}],
        "key.revoke": [{"reason": "host lost", "version": 1}, {"reason": "a\u0007b"}],
        "key.destroy": [{"version": 2}, {}],
        "key.wrap": [{"plaintext": "c2VjcmV0", "context": "bHVrcy11dWlk"}],
        "key.unwrap": [{"ciphertext": "rampart:v1:vol-keys:1:" + "QUJD" * 12, "context": ""}],
        "key.export": [{"version": 1}],
    }
    for op, items in bodies.items():
        sel = OPERATIONS.index(op)
        for i, body in enumerate(items):
            write("kms_request", f"{op}-{i}", bytes([sel]) + json.dumps(body).encode())
    write("kms_request", "empty-body", bytes([3]))


# --- Bundle files ------------------------------------------------------------

def kms_bundle_seeds():
    with tempfile.TemporaryDirectory() as tmp:
        def run(*args):
            subprocess.run(args, cwd=tmp, check=True, capture_output=True)
        run("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256",
            "-nodes", "-keyout", "ca.key", "-out", "ca.pem", "-days", "36500",
            "-subj", "/CN=rampart fuzz corpus CA")
        run("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "client.key", "-out", "client.csr", "-subj", "/CN=host1")
        run("openssl", "x509", "-req", "-in", "client.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", "client.pem", "-days", "36500")
        run("openssl", "pkcs8", "-topk8", "-nocrypt", "-in", "client.key", "-out", "client.p8")
        read = lambda n: open(os.path.join(tmp, n)).read()
        bundle = {"format": "rampart-kms-bundle/v1", "name": "host1",
                  "endpoints": ["https://127.0.0.1:8443", "https://[::1]:8443", "kms.example:443"],
                  "ca_cert": read("ca.pem"), "cert": read("client.pem"), "key": read("client.p8")}
    write("kms_bundle", "bundle", json.dumps(bundle, indent=2).encode())
    write("kms_bundle", "bundle-bad-format",
          json.dumps(dict(bundle, format="rampart-kms-bundle/v9")).encode())
    write("kms_bundle", "bundle-no-endpoints", json.dumps(dict(bundle, endpoints=[])).encode())


# --- KMIP: TTLV request messages as clients send them ----------------------

def ttlv(tag, typ, value):
    """One TTLV item: value is bytes (already encoded) or a list of items."""
    if typ == 1:
        body = b"".join(value)
        return struct.pack(">I", tag)[1:] + bytes([1]) + struct.pack(">I", len(body)) + body
    pad = (8 - len(value) % 8) % 8
    return struct.pack(">I", tag)[1:] + bytes([typ]) + struct.pack(">I", len(value)) + value + b"\0" * pad


def t_int(tag, v): return ttlv(tag, 2, struct.pack(">i", v))
def t_enum(tag, v): return ttlv(tag, 5, struct.pack(">I", v))
def t_bool(tag, v): return ttlv(tag, 6, struct.pack(">Q", int(v)))
def t_text(tag, v): return ttlv(tag, 7, v.encode())
def t_bytes(tag, v): return ttlv(tag, 8, v)
def t_struct(tag, *items): return ttlv(tag, 1, list(items))


def attribute(name, value):
    return t_struct(0x420008, t_text(0x42000A, name), value)


def kmip_request(items, major=1, minor=4, extra_header=()):
    header = t_struct(0x420077,
                      t_struct(0x420069, t_int(0x42006A, major), t_int(0x42006B, minor)),
                      *extra_header, t_int(0x42000D, len(items)))
    batch = [t_struct(0x42000F, t_enum(0x42005C, op), t_struct(0x420079, *payload))
             for op, payload in items]
    return t_struct(0x420078, header, *batch)


CSR = bytes.fromhex(
    "308193304702010030143112301006035504030c0966757a7a2d73656564302a300506032b65700321006d06"
    "66ea6c953150377384edd3a07124aac9df9dc47180a0ece050c5d30f3ee0a000300506032b65700341006bf5"
    "e1841c633feabebba36af78bc5be276711828e9076588c1caa20e5b464eacdcb176e5f28245c637893d83e5f"
    "2577ef290bc6b965bbdc06002c4fcd577b0c")


def kmip_ttlv_seeds():
    uid = t_text(0x420094, "1")
    aes256 = [attribute("Cryptographic Algorithm", t_enum(0x42000B, 3)),
              attribute("Cryptographic Length", t_int(0x42000B, 256)),
              attribute("Cryptographic Usage Mask", t_int(0x42000B, 12)),
              attribute("Name", t_struct(0x42000B, t_text(0x420055, "vm-key"), t_enum(0x420054, 1)))]
    params_gcm = t_struct(0x42002B, t_enum(0x420011, 9), t_enum(0x420028, 3), t_int(0x4200CE, 16))
    seeds = {
        "discover-versions": kmip_request([(0x1E, [t_struct(0x420069, t_int(0x42006A, 2), t_int(0x42006B, 1)),
                                                   t_struct(0x420069, t_int(0x42006A, 1), t_int(0x42006B, 4))])]),
        "query": kmip_request([(0x18, [t_enum(0x420074, 1), t_enum(0x420074, 2), t_enum(0x420074, 3)])]),
        "create-aes256": kmip_request([(0x01, [t_enum(0x420057, 2), t_struct(0x420091, *aes256)])]),
        "create-activate-get-placeholder": kmip_request(
            [(0x01, [t_enum(0x420057, 2), t_struct(0x420091, *aes256)]), (0x12, []), (0x0A, [])],
            extra_header=[t_enum(0x42000E, 1)]),
        "register-secret": kmip_request([(0x03, [t_enum(0x420057, 7), t_struct(0x420091),
            t_struct(0x420085, t_enum(0x420086, 1), t_struct(0x420040, t_enum(0x420042, 2),
                     t_struct(0x420045, t_bytes(0x420043, b"password"))))])]),
        "get-wrapped": kmip_request([(0x0A, [uid, t_struct(0x420047, t_enum(0x42009E, 1),
            t_struct(0x420036, t_text(0x420094, "2"),
                     t_struct(0x42002B, t_enum(0x420011, 0x0D))))])]),
        "locate-max-offset": kmip_request([(0x08, [t_int(0x42004F, 10), t_int(0x4200D4, 1),
            attribute("Object Type", t_enum(0x42000B, 2)), attribute("x-vm", t_text(0x42000B, "vm1"))])]),
        "add-modify-delete-attribute": kmip_request([
            (0x0D, [uid, attribute("x-purpose", t_text(0x42000B, "test"))]),
            (0x0E, [uid, attribute("x-purpose", t_text(0x42000B, "prod"))]),
            (0x0F, [uid, t_text(0x42000A, "x-purpose"), t_int(0x420009, 0)])]),
        "revoke-destroy": kmip_request([(0x13, [uid, t_struct(0x420081, t_enum(0x420082, 2),
                                                t_text(0x420080, "lost"))]), (0x14, [uid])]),
        "encrypt-gcm": kmip_request([(0x1F, [uid, params_gcm, t_bytes(0x4200C2, bytes(64)),
                                             t_bytes(0x4200FE, b"aad")])],
                                    extra_header=[t_int(0x420050, 4096)]),
        "mac": kmip_request([(0x23, [uid, t_struct(0x42002B, t_enum(0x420028, 9)),
                                     t_bytes(0x4200C2, bytes(range(16)))])], minor=2),
        "async-indicator": kmip_request([(0x0A, [uid])], extra_header=[t_bool(0x420007, True)]),
        "rekey-key-pair-offset": kmip_request([(0x1D, [t_text(0x420066, "pair/1"),
            ttlv(0x420058, 10, struct.pack(">I", 3600)),
            t_struct(0x420065, attribute("Cryptographic Usage Mask", t_int(0x42000B, 1))),
            t_struct(0x42006E, attribute("Cryptographic Usage Mask", t_int(0x42000B, 2)))])]),
        "create-key-pair-certify-get": kmip_request([
            (0x02, [t_struct(0x42001F, attribute("Cryptographic Algorithm", t_enum(0x42000B, 6)),
                             attribute("Cryptographic Length", t_int(0x42000B, 256)))]),
            (0x06, []), (0x0A, [])]),
        # A PKCS#10 request of an Ed25519 key made once by `openssl req`
        # (1.x Certificate Request, 2.x Certificate Request Value).
        "certify-pkcs10": kmip_request([(0x06, [t_enum(0x420019, 2), t_bytes(0x420018, CSR)])]),
        "recertify-pkcs10-2-1": kmip_request([(0x07, [uid, t_enum(0x420019, 2),
            t_bytes(0x420140, CSR), ttlv(0x420058, 10, struct.pack(">I", 60))])], major=2, minor=1),
        "unknown-operation": kmip_request([(0x99, [t_text(0x540001, "vendor")])], major=2, minor=1),
        "response": t_struct(0x42007B, t_struct(0x42007A,
            t_struct(0x420069, t_int(0x42006A, 1), t_int(0x42006B, 4)),
            ttlv(0x420092, 9, struct.pack(">q", 1205495800)), t_int(0x42000D, 1)),
            t_struct(0x42000F, t_enum(0x42005C, 0x0A), t_enum(0x42007F, 1), t_enum(0x42007E, 1),
                     t_text(0x42007D, "no such object"))),
        "spec-structure": bytes.fromhex("420020010000002042000405000000040000"
                                        "00FE0000000042000502000000040000"
                                        "00FF00000000"),
    }
    for name, data in seeds.items():
        write("kmip_ttlv", name, data)


# --- Audit archives: the chain written here, independently of the Rust ----

AUDIT_ROOT = b"\x5a" * 32  # the root key of fuzz/src/audit.rs
MAX_SEQ = (1 << 63) - 1


def audit_mac_key(root):
    # HKDF-SHA256 (RFC 5869), empty salt, one block of output.
    prk = hmac.new(b"", root, hashlib.sha256).digest()
    return hmac.new(prk, b"rampart-kms audit mac v1" + b"\x01", hashlib.sha256).digest()


def canonical(seq, e):
    def field(b):
        return struct.pack(">I", len(b)) + b
    version = b"" if e.get("version") is None else str(e["version"]).encode()
    return (b"rampart-kms-audit-v1" + field(str(seq).encode()) + field(str(e["time_ms"]).encode())
            + field(e["client"].encode()) + field(e["operation"].encode())
            + field((e.get("key") or "").encode()) + field(version)
            + field(e["outcome"].encode()) + field(e["detail"].encode()))


def archive(anchor_seq, anchor_hash, drafts, last_seq=None, macs=True):
    """An exported segment of `drafts` after the anchor, chained and MACed."""
    mac_key = audit_mac_key(AUDIT_ROOT)
    header = dict(format="rampart-kms-audit-export", version=1, anchor_seq=anchor_seq,
                  anchor_hash=anchor_hash.hex(), first_seq=anchor_seq + 1,
                  last_seq=anchor_seq + len(drafts) if last_seq is None else last_seq,
                  exported_ms=1764300000000)
    lines = [json.dumps(header)]
    prev = anchor_hash
    for i, d in enumerate(drafts):
        seq = anchor_seq + 1 + i
        h = hashlib.sha256(prev + canonical(seq, d)).digest()
        entry = dict(seq=seq, prev_hash=prev.hex(), **d, hash=h.hex())
        if macs and not d.get("sealed"):
            entry["mac"] = hmac.new(mac_key, h, hashlib.sha256).hexdigest()
        entry.pop("sealed", None)
        lines.append(json.dumps(entry, ensure_ascii=False))
        prev = h
    return ("\n".join(lines) + "\n").encode()


def kms_audit_archive_seeds():
    def draft(n, **kw):
        d = dict(time_ms=1764300000000 + n, client="host-0000042", operation="key.unwrap",
                 key="disk-key", version=1, outcome="ok", detail="200")
        d.update(kw)
        return {k: v for k, v in d.items() if v is not None}
    drafts = [draft(1, operation="key.create", client="admin", version=None),
              draft(2),
              draft(3, outcome="denied", detail="403 policy: label role=db required"),
              draft(4, operation="audit.export", key=None, version=None, detail="until 3"),
              draft(5, client="-", operation="unseal", key=None, version=None, sealed=True),
              draft(6, detail="200 \u00e9t\u00e9 \u2603 \"quoted\" \\ tab\t", version=4294967295,
                    time_ms=-1)]
    seeds = {
        "from-genesis": archive(0, bytes(32), drafts),
        "after-prune": archive(1000, hashlib.sha256(b"entry 1000").digest(), drafts[1:4]),
        "empty-range": archive(7, hashlib.sha256(b"entry 7").digest(), []),
        "near-max-seq": archive(MAX_SEQ - 3, hashlib.sha256(b"late").digest(), drafts[:3]),
        "beyond-max-seq": archive(MAX_SEQ - 1, hashlib.sha256(b"late").digest(), drafts[:3]),
        "no-macs": archive(0, bytes(32), drafts[:3], macs=False),
        "header-says-more": archive(0, bytes(32), drafts[:2], last_seq=5),
    }
    for name, data in seeds.items():
        write("kms_audit_archive", name, data)


def kmip_text_seeds():
    """A few messages of the published KMIP Profiles test cases
    (crates/rampart-kms/tests/kmip/conformance/: every object type
    registered, key pairs, signatures, RSA encryption) in their XML, and each also
    turned into the JSON encoding here, by KMIP Additional Message Encodings
    4.1.6's rules: Integers, Long Integers and Intervals as numbers (masks
    as '|'-separated names), Booleans as JSON booleans, the rest as strings."""
    import xml.etree.ElementTree as ET
    root = os.path.join(HERE, "..", "crates", "rampart-kms", "tests", "kmip", "conformance")
    cases = ["1.4/SKLC/SKLC-M-1-14.xml", "2.1/SKLC/SKLC-M-1-21.xml", "1.4/CS-BC/CS-BC-M-GCM-1-14.xml",
             "2.1/BL/BL-M-1-21.xml", "1.4/CS-AC/CS-AC-M-1-14.xml", "2.1/AKLC/AKLC-M-1-21.xml",
             "1.4/MSGENC-JSON/MSGENC-JSON-M-1-14.xml", "1.4/OMOS/OMOS-M-1-14.xml",
             "2.1/BL/BL-M-6-21.xml", "2.1/BL/BL-M-7-21.xml", "2.1/BL/BL-M-8-21.xml",
             "2.1/BL/BL-M-9-21.xml", "2.1/BL/BL-M-10-21.xml", "2.1/BL/BL-M-12-21.xml",
             "2.1/BL/BL-M-13-21.xml", "1.4/CS-AC/CS-AC-M-OAEP-1-14.xml",
             "2.1/CS-AC/CS-AC-M-3-21.xml"]

    def to_json(e):
        out = {"tag": e.tag}
        typ = e.get("type")
        if typ is None:
            out["value"] = [to_json(c) for c in e]
            return out
        out["type"] = typ
        v = e.get("value", "")
        if typ in ("Integer", "LongInteger", "Interval"):
            try:
                out["value"] = int(v)
            except ValueError:
                out["value"] = "|".join(v.split())
        elif typ == "Boolean":
            out["value"] = v == "true"
        else:
            out["value"] = v
        return out

    for case in cases:
        doc = ET.parse(os.path.join(root, case)).getroot()
        name = os.path.basename(case)[:-4]
        for n, message in enumerate(list(doc)[:4]):
            # Placeholders ($NOW, $UNIQUE_IDENTIFIER_0) are not values.
            if any(v.startswith("$") for e in message.iter() for v in [e.get("value", "")]):
                continue
            kind = "request" if message.tag == "RequestMessage" else "response"
            write("kmip_text", f"{name}-{n}-{kind}.xml", ET.tostring(message))
            write("kmip_text", f"{name}-{n}-{kind}.json", json.dumps(to_json(message)).encode())


# pkcs11_module: the byte language of fuzz/src/pkcs11.rs (u8 choices,
# little-endian u16 lengths).
P11_MECHANISMS = ["AES_KEY_GEN", "GENERIC_SECRET_KEY_GEN", "RSA_PKCS_KEY_PAIR_GEN",
                  "EC_KEY_PAIR_GEN", "EC_EDWARDS_KEY_PAIR_GEN", "AES_GCM", "AES_CBC_PAD",
                  "AES_CTR", "AES_KEY_WRAP", "AES_KEY_WRAP_KWP", "SHA256_HMAC",
                  "SHA512_HMAC", "RSA_PKCS", "RSA_PKCS_PSS", "SHA256_RSA_PKCS_PSS",
                  "RSA_PKCS_OAEP", "SHA384_RSA_PKCS", "ECDSA", "ECDSA_SHA256", "EDDSA",
                  "SHA_1", "SHA256", "SHA512"]
P11_ATTRIBUTES = ["CLASS", "KEY_TYPE", "LABEL", "ID", "VALUE", "VALUE_LEN", "TOKEN",
                  "PRIVATE", "SENSITIVE", "EXTRACTABLE", "ENCRYPT", "DECRYPT", "SIGN",
                  "VERIFY", "WRAP", "UNWRAP", "MODULUS", "MODULUS_BITS",
                  "PUBLIC_EXPONENT", "EC_PARAMS", "EC_POINT"]


def p11_bytes(data):
    return struct.pack("<H", len(data)) + data


def p11_data(data):
    return b"\x00" + p11_bytes(data)


def p11_output(size, query=False):
    return bytes([0 if query else 1]) + struct.pack("<H", size)


def p11_template(*attributes):
    """(name, kind, value): kind 0 a CK_BBOOL, 1 a CK_ULONG, 2 bytes."""
    out = bytes([len(attributes)])
    for name, kind, value in attributes:
        out += bytes([P11_ATTRIBUTES.index(name), kind])
        out += bytes([value]) if kind == 0 else (
            struct.pack("<H", value) if kind == 1 else p11_bytes(value))
        out += b"\x02"  # the value's pointer and length
    return out


def p11_mechanism(name, parameter=b"\x00"):
    return bytes([P11_MECHANISMS.index(name)]) + parameter + b"\x01"


def p11_call(which, session=0, body=b""):
    return bytes([which, session]) + body


def pkcs11_module_seeds():
    open_session = p11_call(4, 0xE0, b"\x00\x00")
    login = p11_call(9, 0, p11_data(b"1234") + b"\x00")
    gcm = p11_mechanism("AES_GCM", b"\x02" + p11_bytes(b"\x07" * 12) + p11_bytes(b"aad")
                        + b"\x80\x00")
    seeds = {
        "digest": open_session + p11_call(26, 0, p11_mechanism("SHA256"))
        + p11_call(27, 0, p11_data(b"abc") + p11_output(64) + b"\x03"),
        "digest-multi-part-length-query": open_session
        + p11_call(26, 0, p11_mechanism("SHA512")) + p11_call(28, 0, p11_data(b"ab") + b"\x02")
        + p11_call(29, 0, p11_output(0, query=True) + b"\x03")
        + p11_call(29, 0, p11_output(64) + b"\x03"),
        "random": open_session + p11_call(33, 0, struct.pack("<H", 48)),
        "slots-and-mechanisms": p11_call(0, 0, p11_output(64) + b"\x01")
        + p11_call(1, 0, b"\x00\x00") + p11_call(2, 0, p11_output(512) + b"\x00")
        + p11_call(3, 0, b"\x05\x00") + p11_call(37, 0, b"\x01"),
        "login-find": open_session + login
        + p11_call(11, 0, p11_template(("LABEL", 2, b"db"), ("CLASS", 1, 4)))
        + p11_call(12, 0, b"\x08") + p11_call(13, 0),
        "generate-key": open_session + login + p11_call(
            20, 0, p11_mechanism("AES_KEY_GEN")
            + p11_template(("VALUE_LEN", 1, 32), ("TOKEN", 0, 1), ("ENCRYPT", 0, 1))),
        "generate-ec-pair": open_session + login + p11_call(
            21, 0, p11_mechanism("EC_KEY_PAIR_GEN")
            + p11_template(("EC_PARAMS", 2, bytes.fromhex("06082a8648ce3d030107")))
            + p11_template(("SIGN", 0, 1), ("SENSITIVE", 0, 1))),
        "gcm-encrypt": open_session + login + p11_call(22, 0, gcm + b"\x05")
        + p11_call(27, 0, p11_data(b"plaintext") + p11_output(64) + b"\x00"),
        "sign-verify": open_session + login + p11_call(24, 0, p11_mechanism("ECDSA_SHA256") + b"\x03")
        + p11_call(27, 0, p11_data(b"message") + p11_output(64) + b"\x02")
        + p11_call(25, 0, p11_mechanism("ECDSA_SHA256") + b"\x04")
        + p11_call(30, 0, p11_data(b"message") + p11_data(b"\x01" * 64)),
        "create-get-attributes": open_session + login
        + p11_call(19, 0, p11_template(("CLASS", 1, 4), ("KEY_TYPE", 1, 0x1F),
                                       ("VALUE", 2, b"\x0f" * 32), ("TOKEN", 0, 0)))
        + p11_call(14, 0, p11_template(("LABEL", 2, b"\x00" * 32), ("VALUE_LEN", 1, 0)) + b"\x01"),
        "wrap-unwrap": open_session + login
        + p11_call(35, 0, p11_mechanism("AES_KEY_WRAP") + p11_output(40) + b"\x01\x02")
        + p11_call(36, 0, p11_mechanism("AES_KEY_WRAP_KWP") + p11_data(b"\xa6" * 24)
                   + p11_template(("CLASS", 1, 4)) + b"\x01"),
    }
    for name, calls in seeds.items():
        # NULL arguments to C_Initialize; the same with the caller's threads
        # only (CKF_LIBRARY_CANT_CREATE_OS_THREADS).
        write("pkcs11_module", name, b"\x00" + calls)
        write("pkcs11_module", name + "-no-threads", b"\x21" + calls)


if __name__ == "__main__":
    nbd_seeds()
    kms_request_seeds()
    kms_bundle_seeds()
    kmip_ttlv_seeds()
    kms_audit_archive_seeds()
    kmip_text_seeds()
    pkcs11_module_seeds()
