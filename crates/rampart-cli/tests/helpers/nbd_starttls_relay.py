"""Lets a plain TLS client speak to an NBD server that needs STARTTLS.

Usage: nbd_starttls_relay.py SERVER_PORT

Connects to the NBD server on 127.0.0.1:SERVER_PORT, does the fixed
newstyle greeting and NBD_OPT_STARTTLS in plain text, then accepts one
connection on a free port of 127.0.0.1 and relays bytes both ways, so that
the TLS handshake and everything after it run between that client (say
`openssl s_client`, which can send a TLS 1.3 KeyUpdate) and the server.
Prints "ready PORT" once listening; exits when either side closes.
"""

import selectors
import socket
import struct
import sys

NBDMAGIC = b"NBDMAGIC"
IHAVEOPT = b"IHAVEOPT"
OPT_STARTTLS = 5
REPLY_MAGIC = 0x3E889045565A9
REP_ACK = 1


def read_exactly(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise SystemExit(f"server closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def main():
    server_port = int(sys.argv[1])
    server = socket.create_connection(("127.0.0.1", server_port))
    greeting = read_exactly(server, 18)
    if greeting[:16] != NBDMAGIC + IHAVEOPT:
        raise SystemExit(f"not an NBD newstyle server: {greeting!r}")
    server.sendall(struct.pack(">I", 1))  # NBD_FLAG_C_FIXED_NEWSTYLE
    server.sendall(IHAVEOPT + struct.pack(">II", OPT_STARTTLS, 0))
    magic, option, kind, length = struct.unpack(">QIII", read_exactly(server, 20))
    if (magic, option, kind, length) != (REPLY_MAGIC, OPT_STARTTLS, REP_ACK, 0):
        raise SystemExit(f"STARTTLS refused: {(hex(magic), option, kind, length)}")

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    print("ready", listener.getsockname()[1], flush=True)
    client, _ = listener.accept()

    selector = selectors.DefaultSelector()
    selector.register(client, selectors.EVENT_READ, server)
    selector.register(server, selectors.EVENT_READ, client)
    while True:
        for key, _ in selector.select():
            data = key.fileobj.recv(65536)
            if not data:
                return
            key.data.sendall(data)


if __name__ == "__main__":
    main()
