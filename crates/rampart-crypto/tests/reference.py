#!/usr/bin/env python3
"""Independent reference for the differential test: pyca/cryptography (OpenSSL).

Reads one JSON request per line on stdin and answers one JSON line each.
Sector semantics (plain64 tweaks/IVs, ESSIV) are computed here from the
dm-crypt definitions, not taken from Rampart.
"""
import hashlib
import json
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM


def plain64(n):
    return (n % (1 << 64)).to_bytes(8, "little") + bytes(8)


def xts(req, data):
    key = bytes.fromhex(req["key"])
    out = bytearray()
    size = req["sector_size"]
    for i in range(0, len(data), size):
        tweak = plain64(req["first"] + (i // size) * req["step"])
        c = Cipher(algorithms.AES(key), modes.XTS(tweak))
        op = c.encryptor() if req["encrypt"] else c.decryptor()
        out += op.update(data[i:i + size]) + op.finalize()
    return bytes(out)


def cbc(req, data):
    key = bytes.fromhex(req["key"])
    essiv = None
    if req["iv_mode"] == "essiv":
        salt = hashlib.sha256(key).digest()
        essiv = Cipher(algorithms.AES(salt), modes.ECB()).encryptor()
    out = bytearray()
    size = req["sector_size"]
    for i in range(0, len(data), size):
        iv = plain64(req["first"] + (i // size) * req["step"])
        if essiv is not None:
            iv = essiv.update(iv)
        c = Cipher(algorithms.AES(key), modes.CBC(iv))
        op = c.encryptor() if req["encrypt"] else c.decryptor()
        out += op.update(data[i:i + size]) + op.finalize()
    return bytes(out)


def gcm(req, data):
    aead = AESGCM(bytes.fromhex(req["key"]))
    sealed = aead.encrypt(bytes.fromhex(req["nonce"]), data, bytes.fromhex(req["aad"]))
    return sealed


def main():
    for line in sys.stdin:
        req = json.loads(line)
        data = bytes.fromhex(req["data"])
        out = {"xts": xts, "cbc": cbc, "gcm": gcm}[req["op"]](req, data)
        sys.stdout.write(json.dumps({"out": out.hex()}) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
