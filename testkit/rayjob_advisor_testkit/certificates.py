"""A throw-away CA and a server certificate for localhost, 127.0.0.1 and ::1, made with trustme (for HTTPS tests)."""

from __future__ import annotations

import pathlib

import trustme


def make_certificates(folder: pathlib.Path) -> tuple[pathlib.Path, pathlib.Path, pathlib.Path]:
    """(ca.pem, server.pem, server-key.pem) written in ``folder``; server.pem holds the chain up to the CA."""
    ca = trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1", "::1")
    paths = folder / "ca.pem", folder / "server.pem", folder / "server-key.pem"
    ca.cert_pem.write_to_path(str(paths[0]))
    for blob in server.cert_chain_pems:
        blob.write_to_path(str(paths[1]), append=True)
    server.private_key_pem.write_to_path(str(paths[2]))
    return paths
