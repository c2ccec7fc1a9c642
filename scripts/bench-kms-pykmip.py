"""PyKMIP's side of scripts/bench-kms (run with the venv's python).

  bench-kms-pykmip.py serve DIR PORT
      PyKMIP's server on 127.0.0.1:PORT, TLS 1.2 with client certificates
      (DIR/ca.pem, DIR/server.pem, DIR/server.key), SQLite in DIR.
  bench-kms-pykmip.py bench DIR PORT SECONDS CONCURRENCY[,CONCURRENCY...]
      Creates an AES-256 key, encrypts one 32-byte secret under it (CBC,
      PKCS#5 padding), then for each concurrency runs that many client
      processes, each with its own kept-open TLS connection, decrypting the
      ciphertext in a loop for SECONDS; prints JSON like `rampart kms bench
      --json` (runs: concurrency, operations, ops_per_second, p50_ms, p99_ms).
  bench-kms-pykmip.py bench-kmip DIR PORT SECONDS CONCURRENCY[,...] OP[,OP...]
      The operations of `rampart kms bench --kmip` on an AES-256 key, in
      the same client processes: `get` (Get of the key) and `encrypt`
      (AES-256-GCM Encrypt of 64 bytes, 16-byte tag; PyKMIP's server picks
      the IV, and its client returns the ciphertext and IV, not the tag);
      prints {"kmip": [{"operation", "runs"}...]} like `--kmip --json`.
      Also `create-key-pair-rsa-2048` (a new RSA-2048 pair each time) and
      `sign-rsa-2048-pss` (Sign of 64 bytes, PSS with SHA-256, by an
      RSA-2048 private key made and activated before the runs): PyKMIP's
      server signs with RSA only and makes no EC key pairs.
"""

import json
import logging
import multiprocessing
import os
import sys
import time
import warnings

warnings.simplefilter("ignore")

from kmip import enums  # noqa: E402
from kmip.pie.client import ProxyKmipClient  # noqa: E402

PARAMS = {
    "cryptographic_algorithm": enums.CryptographicAlgorithm.AES,
    "block_cipher_mode": enums.BlockCipherMode.CBC,
    "padding_method": enums.PaddingMethod.PKCS5,
}


def client(d, port):
    c = ProxyKmipClient(
        hostname="127.0.0.1",
        port=port,
        cert=os.path.join(d, "client.pem"),
        key=os.path.join(d, "client.key"),
        ca=os.path.join(d, "ca.pem"),
        ssl_version="PROTOCOL_TLSv1_2",
        config_file=os.path.join(d, "client.conf"),
    )
    c.open()
    return c


def serve(d, port):
    from kmip.services.server import KmipServer

    os.makedirs(os.path.join(d, "policies"), exist_ok=True)
    server = KmipServer(
        hostname="127.0.0.1",
        port=port,
        certificate_path=os.path.join(d, "server.pem"),
        key_path=os.path.join(d, "server.key"),
        ca_path=os.path.join(d, "ca.pem"),
        auth_suite="TLS1.2",
        config_path=None,
        log_path=os.path.join(d, "pykmip-server.log"),
        policy_path=os.path.join(d, "policies"),
        enable_tls_client_auth=True,
        logging_level="WARNING",
        database_path=os.path.join(d, "pykmip.db"),
    )
    with server:
        server.serve()


GCM = {
    "cryptographic_algorithm": enums.CryptographicAlgorithm.AES,
    "block_cipher_mode": enums.BlockCipherMode.GCM,
    "tag_length": 16,
}
PAYLOAD = os.urandom(64)


def op_get(c, uid):
    key = c.get(uid)
    if len(key.value) != 32:
        raise SystemExit("PyKMIP's Get returned no 32-byte key")


def op_encrypt(c, uid):
    data, iv = c.encrypt(PAYLOAD, uid=uid, cryptographic_parameters=GCM)
    if len(data) != len(PAYLOAD) or not iv:
        raise SystemExit("PyKMIP's GCM Encrypt returned no ciphertext or IV")


PSS = {
    "cryptographic_algorithm": enums.CryptographicAlgorithm.RSA,
    "padding_method": enums.PaddingMethod.PSS,
    "hashing_algorithm": enums.HashingAlgorithm.SHA_256,
}


def create_rsa_pair(c):
    return c.create_key_pair(
        enums.CryptographicAlgorithm.RSA,
        2048,
        public_usage_mask=[enums.CryptographicUsageMask.VERIFY],
        private_usage_mask=[enums.CryptographicUsageMask.SIGN],
    )


def op_create_key_pair_rsa(c, uid):
    public, private = create_rsa_pair(c)
    if not public or not private:
        raise SystemExit("PyKMIP's Create Key Pair returned no Unique Identifiers")


def op_sign_rsa_pss(c, uid):
    if len(c.sign(PAYLOAD, uid=uid, cryptographic_parameters=PSS)) != 256:
        raise SystemExit("PyKMIP's Sign returned no RSA-2048 signature")


OPS = {
    "get": ("get", op_get),
    "encrypt": ("encrypt-aes-256-gcm", op_encrypt),
    "create-key-pair-rsa-2048": ("create-key-pair-rsa-2048", op_create_key_pair_rsa),
    "sign-rsa-2048-pss": ("sign-rsa-2048-pss", op_sign_rsa_pss),
}


def worker(d, port, uid, ciphertext, iv, expected, start_at, seconds, out, op=None):
    c = client(d, port)

    def once():
        if op is not None:
            OPS[op][1](c, uid)
        elif c.decrypt(ciphertext, uid=uid, cryptographic_parameters=PARAMS, iv_counter_nonce=iv) != expected:
            raise SystemExit("PyKMIP decrypted to the wrong plaintext")

    # One operation before the clock starts (the connection is open already).
    once()
    while time.time() < start_at:
        time.sleep(0.001)
    latencies = []
    end = start_at + seconds
    while True:
        t = time.perf_counter()
        if time.time() >= end:
            break
        once()
        latencies.append(time.perf_counter() - t)
    c.close()
    out.put(latencies)


def bench(d, port, seconds, concurrencies, ops=None):
    logging.disable(logging.CRITICAL)
    admin = client(d, port)
    uid = admin.create(
        enums.CryptographicAlgorithm.AES,
        256,
        cryptographic_usage_mask=[enums.CryptographicUsageMask.ENCRYPT, enums.CryptographicUsageMask.DECRYPT],
    )
    admin.activate(uid)
    secret = os.urandom(32)
    iv = os.urandom(16)
    ciphertext, _ = admin.encrypt(secret, uid=uid, cryptographic_parameters=PARAMS, iv_counter_nonce=iv)
    signer = None
    if ops is not None and "sign-rsa-2048-pss" in ops:
        _, signer = create_rsa_pair(admin)
        admin.activate(signer)
    admin.close()
    if ops is None:
        runs = measure(d, port, seconds, concurrencies, (uid, ciphertext, iv, secret), None)
        print(json.dumps({"operation": "decrypt (AES-256-CBC)", "runs": runs}, indent=2))
        return
    reports = []
    for op in ops:
        on = signer if op == "sign-rsa-2048-pss" else uid
        runs = measure(d, port, seconds, concurrencies, (on, ciphertext, iv, secret), op)
        reports.append({"operation": OPS[op][0], "runs": runs})
    print(json.dumps({"kmip": reports}, indent=2))


def measure(d, port, seconds, concurrencies, key, op):
    uid, ciphertext, iv, secret = key
    runs = []
    for n in concurrencies:
        out = multiprocessing.Queue()
        start_at = time.time() + 1.0 + 0.1 * n
        procs = [
            multiprocessing.Process(target=worker, args=(d, port, uid, ciphertext, iv, secret, start_at, seconds, out, op))
            for _ in range(n)
        ]
        for p in procs:
            p.start()
        latencies = []
        for _ in procs:
            latencies.extend(out.get(timeout=seconds + 120))
        for p in procs:
            p.join()
            if p.exitcode != 0:
                raise SystemExit(f"a PyKMIP client process failed ({p.exitcode})")
        latencies.sort()

        def pct(p):
            return latencies[min(len(latencies) * p // 100, len(latencies) - 1)] * 1000.0 if latencies else 0.0

        runs.append(
            {
                "concurrency": n,
                "operations": len(latencies),
                "ops_per_second": len(latencies) / seconds,
                "p50_ms": pct(50),
                "p99_ms": pct(99),
            }
        )
    return runs


if __name__ == "__main__":
    mode, d, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with open(os.path.join(d, "client.conf"), "w") as f:
        f.write("[client]\n")
    if mode == "serve":
        serve(d, port)
    elif mode == "bench":
        bench(d, port, float(sys.argv[4]), [int(c) for c in sys.argv[5].split(",")])
    elif mode == "bench-kmip":
        ops = sys.argv[6].split(",")
        if any(op not in OPS for op in ops):
            raise SystemExit(__doc__)
        bench(d, port, float(sys.argv[4]), [int(c) for c in sys.argv[5].split(",")], ops)
    else:
        raise SystemExit(__doc__)
