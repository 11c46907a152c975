#!/usr/bin/env python3
"""wire_record.py: what crosses the wire, for the handshake tests.

  wire_record.py proxy LISTEN_PORT SERVER_PORT OUT SECONDS
      forwards TCP connections from 127.0.0.1:LISTEN_PORT to the server,
      appending every byte either way to OUT (a packet capture without
      the packets), for at most SECONDS.
  wire_record.py replay SERVER_PORT CAPTURE
      connects to the server, takes its challenge, and sends the first
      hello found in CAPTURE (a recorded client's); prints the server's
      answer and exits 0 if the hello was refused.
"""
import socket
import struct
import sys
import threading
import time


def pump(src, dst, out, lock):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            with lock:
                out.write(b)
                out.flush()
            dst.sendall(b)
    except OSError:
        pass
    for s in (src, dst):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def proxy(listen_port, server_port, path, seconds):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", listen_port))
    ls.listen(16)
    ls.settimeout(0.5)
    out, lock = open(path, "ab"), threading.Lock()
    end = time.time() + seconds
    while time.time() < end:
        try:
            c, _ = ls.accept()
        except socket.timeout:
            continue
        s = socket.create_connection(("127.0.0.1", server_port))
        for a, b in ((c, s), (s, c)):
            threading.Thread(target=pump, args=(a, b, out, lock), daemon=True).start()


def first_hello(capture):
    """The first record-marked message that follows a challenge: the hello
    (a connection closed before its hello leaves a challenge alone)."""
    i = capture.find(b"CICADACH")
    while i >= 0:
        rest = capture[i + 40:]
        if len(rest) >= 4 and not rest.startswith(b"CICADACH"):
            mark = struct.unpack(">I", rest[:4])[0]
            if mark & 0x80000000 and 0 < (mark & 0x7FFFFFFF) < 65536:
                return rest[:4 + (mark & 0x7FFFFFFF)]
        i = capture.find(b"CICADACH", i + 8)
    sys.exit("replay: no hello in the capture")


def replay(server_port, path):
    hello = first_hello(open(path, "rb").read())
    s = socket.create_connection(("127.0.0.1", server_port), timeout=10)
    challenge = b""
    while len(challenge) < 40:
        challenge += s.recv(40 - len(challenge))
    s.sendall(hello)
    answer = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            answer += b
    except socket.timeout:
        pass
    text = answer.decode("latin-1")
    print("replay: server answered %d bytes%s" % (len(answer), ": wrong token" if "wrong token" in text else ""))
    return 0 if "wrong token" in text else 1


if __name__ == "__main__":
    if sys.argv[1] == "proxy":
        proxy(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], float(sys.argv[5]))
    elif sys.argv[1] == "replay":
        sys.exit(replay(int(sys.argv[2]), sys.argv[3]))
    else:
        sys.exit(__doc__)
