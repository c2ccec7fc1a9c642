#!/usr/bin/env python3
"""Independent check of Rampart's on-disk ciphertext (pyca/cryptography, never
Rampart's code), for the NBD serve tests.

  xts_check.py VOL DATA_OFFSET KEYHEX SECTOR IV_TWEAK PLAIN RANGE...

Each RANGE is START:LENGTH in plaintext bytes (multiples of SECTOR). The
ciphertext at VOL byte DATA_OFFSET + START is decrypted with AES-XTS under the
volume key, sector by sector, the tweak of the sector at segment byte B being
B / 512 + IV_TWEAK (dm-crypt's plain64: 512-byte units even for 4096-byte
sectors) as a 16-byte little-endian number, and compared with PLAIN's bytes
at START. Prints one line per range; exits 1 on the first mismatch.
"""

import sys

from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes


def main():
    vol, data_offset, keyhex, sector, iv_tweak, plain = sys.argv[1:7]
    data_offset, sector, iv_tweak = int(data_offset), int(sector), int(iv_tweak)
    key = bytes.fromhex(keyhex)
    with open(vol, "rb") as v, open(plain, "rb") as p:
        for spec in sys.argv[7:]:
            start, length = (int(x) for x in spec.split(":"))
            if start % sector or length % sector:
                raise SystemExit(f"range {spec} is not whole {sector}-byte sectors")
            v.seek(data_offset + start)
            ciphertext = v.read(length)
            p.seek(start)
            want = p.read(length)
            if len(ciphertext) != length or len(want) != length:
                raise SystemExit(f"range {spec} runs past the end of a file")
            got = bytearray()
            for i in range(0, length, sector):
                tweak = ((start + i) // 512 + iv_tweak).to_bytes(16, "little")
                d = Cipher(algorithms.AES(key), modes.XTS(tweak)).decryptor()
                got += d.update(ciphertext[i:i + sector]) + d.finalize()
            if bytes(got) != want:
                first = next(i for i in range(length) if got[i] != want[i])
                print(f"range {spec}: plaintext differs at byte {start + first}")
                sys.exit(1)
            if ciphertext == want:
                print(f"range {spec}: ciphertext equals plaintext")
                sys.exit(1)
            print(f"range {spec}: ok")


main()
