#!/usr/bin/env python3
"""Writes the seed corpora of the nbd_server, kms_request and kms_bundle
fuzz targets (corpus/<target>/). Run it again after changing
it and commit the result (the kms_bundle seeds get a new throwaway key pair
each time). The kms_bundle seeds need `openssl` (a throwaway
CA, certificate and key made for the corpus, used nowhere else)."""
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


if __name__ == "__main__":
    nbd_seeds()
    kms_request_seeds()
    kms_bundle_seeds()
