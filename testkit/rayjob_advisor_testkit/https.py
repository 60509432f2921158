"""A client of one of the advisor's HTTPS endpoints (the webhook's, the controller's progress endpoint), as their
callers reach them: over TLS, trusting the CA that signed the served certificate."""

from __future__ import annotations

import http.client
import ssl
import urllib.error
import urllib.parse
from collections.abc import Mapping


class Endpoint:
    """POSTs to ``url``, trusting the CA in the file ``ca``."""

    def __init__(self, url: str, ca: str) -> None:
        self.url = url
        self.context = ssl.create_default_context(cafile=ca)

    def post(
        self,
        body: bytes,
        headers: Mapping[str, str] | None = None,
        context: ssl.SSLContext | None = None,
        source: str | None = None,
    ) -> tuple[int, str, bytes]:
        """(HTTP status, reason, body) of the answer to any request body (trusting ``context``'s CA if given), sent
        from the address ``source`` if given (any of 127.0.0.0/8 on loopback: another client's). A connection or
        TLS failure raises ``urllib.error.URLError``."""
        url = urllib.parse.urlsplit(self.url)
        connection = http.client.HTTPSConnection(
            url.hostname or "", url.port, context=context or self.context, timeout=30,
            source_address=(source, 0) if source else None,
        )  # fmt: skip
        try:
            connection.request("POST", url.path, body, {"Content-Type": "application/json", **(headers or {})})
            answer = connection.getresponse()
            return answer.status, answer.reason, answer.read()
        except OSError as exc:  # as urllib raises it: a connection or TLS failure
            raise urllib.error.URLError(exc) from exc
        finally:
            connection.close()
