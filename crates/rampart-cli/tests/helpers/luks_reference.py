#!/usr/bin/env python3
"""Independent reference for the LUKS interop tests (pyca/cryptography and
hashlib, never Rampart's code).

Subcommands:
  decrypt VOL OFFSET LENGTH CIPHER KEYHEX SECTOR IVTWEAK OUT
      Decrypt LENGTH bytes of ciphertext at byte OFFSET of VOL (the start of
      the crypt segment) and write the plaintext to OUT.
  encrypt VOL OFFSET CIPHER KEYHEX SECTOR IVTWEAK IN
      Encrypt the bytes of IN and write them at byte OFFSET of VOL (the start
      of the crypt segment).
  rewrite-json VOL JSONFILE
      Replace the JSON area of both LUKS2 header copies with the bytes of
      JSONFILE (zero padded) and recompute both SHA-256 checksums.
  check-headers VOL
      Verify both LUKS2 header copies: magic, checksum, the same seqid and
      the same JSON. Prints one summary line; exits 1 when anything is wrong.

IVs as dm-crypt computes them for LUKS: the IV number of the sector starting
at segment byte B is B / 512 + IVTWEAK (512-byte units even for 4096-byte
sectors); plain64 is its 64-bit little-endian value padded to 16 bytes;
essiv:sha256 encrypts that block with AES-256 under SHA-256(volume key).
"""

import hashlib
import struct
import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

CIPHERS = ("aes-xts-plain64", "aes-cbc-plain64", "aes-cbc-essiv:sha256")


def iv_block(cipher, key, iv_number):
    plain64 = (iv_number % (1 << 64)).to_bytes(16, "little")
    if cipher == "aes-cbc-essiv:sha256":
        salt = hashlib.sha256(key).digest()
        enc = Cipher(algorithms.AES(salt), modes.ECB()).encryptor()
        return enc.update(plain64) + enc.finalize()
    return plain64


def sector_cipher(cipher, key, iv_number):
    if cipher not in CIPHERS:
        raise SystemExit(f"unsupported cipher {cipher}")
    iv = iv_block(cipher, key, iv_number)
    if cipher == "aes-xts-plain64":
        return Cipher(algorithms.AES(key), modes.XTS(iv))
    return Cipher(algorithms.AES(key), modes.CBC(iv))


def crypt(direction, data, cipher, key, sector, iv_tweak):
    if len(data) % sector:
        raise SystemExit(f"length {len(data)} is not a multiple of the sector size {sector}")
    out = bytearray()
    for start in range(0, len(data), sector):
        c = sector_cipher(cipher, key, start // 512 + iv_tweak)
        ctx = c.encryptor() if direction == "encrypt" else c.decryptor()
        out += ctx.update(data[start:start + sector]) + ctx.finalize()
    return bytes(out)


def cmd_decrypt(vol, offset, length, cipher, keyhex, sector, iv_tweak, out):
    offset, length, sector, iv_tweak = int(offset), int(length), int(sector), int(iv_tweak)
    with open(vol, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    if len(data) != length:
        raise SystemExit(f"{vol} ends before byte {offset + length}")
    plain = crypt("decrypt", data, cipher, bytes.fromhex(keyhex), sector, iv_tweak)
    with open(out, "wb") as f:
        f.write(plain)


def cmd_encrypt(vol, offset, cipher, keyhex, sector, iv_tweak, inp):
    offset, sector, iv_tweak = int(offset), int(sector), int(iv_tweak)
    with open(inp, "rb") as f:
        plain = f.read()
    data = crypt("encrypt", plain, cipher, bytes.fromhex(keyhex), sector, iv_tweak)
    with open(vol, "r+b") as f:
        f.seek(offset)
        f.write(data)


MAGIC = (b"LUKS\xba\xbe", b"SKUL\xba\xbe")


def header_size(f):
    f.seek(0)
    first = f.read(16)
    if first[:6] == MAGIC[0]:
        return struct.unpack(">Q", first[8:16])[0]
    raise SystemExit("the primary header has no LUKS2 magic; cannot find hdr_size")


def checksum(area):
    area = bytearray(area)
    area[448:512] = bytes(64)
    return hashlib.sha256(area).digest()


def cmd_rewrite_json(vol, json_file):
    with open(json_file, "rb") as f:
        text = f.read()
    with open(vol, "r+b") as f:
        size = header_size(f)
        if len(text) > size - 4096:
            raise SystemExit(f"JSON of {len(text)} bytes does not fit in {size - 4096}")
        for offset in (0, size):
            f.seek(offset)
            area = bytearray(f.read(size))
            area[4096:] = text + bytes(size - 4096 - len(text))
            area[448:512] = bytes(64)
            area[448:480] = checksum(area)
            f.seek(offset)
            f.write(area)


def cmd_check_headers(vol):
    problems = []
    copies = []
    with open(vol, "rb") as f:
        size = header_size(f)
        for index, offset in enumerate((0, size)):
            f.seek(offset)
            area = f.read(size)
            if area[:6] != MAGIC[index]:
                problems.append(f"copy {index}: bad magic {area[:6]!r}")
            if struct.unpack(">H", area[6:8])[0] != 2:
                problems.append(f"copy {index}: version is not 2")
            if struct.unpack(">Q", area[8:16])[0] != size:
                problems.append(f"copy {index}: hdr_size differs")
            if struct.unpack(">Q", area[256:264])[0] != offset:
                problems.append(f"copy {index}: hdr_offset is not {offset}")
            alg = area[72:104].rstrip(b"\0")
            if alg != b"sha256":
                problems.append(f"copy {index}: csum_alg {alg!r}")
            if area[448:480] != checksum(area) or any(area[480:512]):
                problems.append(f"copy {index}: checksum mismatch")
            seqid = struct.unpack(">Q", area[16:24])[0]
            copies.append((seqid, area[4096:].rstrip(b"\0")))
    if copies[0][0] != copies[1][0]:
        problems.append(f"seqids differ: {copies[0][0]} and {copies[1][0]}")
    if copies[0][1] != copies[1][1]:
        problems.append("JSON areas differ")
    if problems:
        print("; ".join(problems))
        raise SystemExit(1)
    print(f"both header copies valid, seqid {copies[0][0]}, hdr_size {size}")


def main():
    commands = {
        "decrypt": (cmd_decrypt, 8),
        "encrypt": (cmd_encrypt, 7),
        "rewrite-json": (cmd_rewrite_json, 2),
        "check-headers": (cmd_check_headers, 1),
    }
    if len(sys.argv) < 2 or sys.argv[1] not in commands:
        raise SystemExit(__doc__)
    func, nargs = commands[sys.argv[1]]
    if len(sys.argv) != 2 + nargs:
        raise SystemExit(__doc__)
    func(*sys.argv[2:])


if __name__ == "__main__":
    main()
