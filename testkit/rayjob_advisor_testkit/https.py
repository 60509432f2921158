"""A client of one of the advisor's HTTPS endpoints (the webhook's, the controller's progress endpoint), as their
callers reach them: over TLS, trusting the CA that signed the served certificate."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from collections.abc import Mapping


class Endpoint:
    """POSTs to ``url``, trusting the CA in the file ``ca``."""

    def __init__(self, url: str, ca: str) -> None:
        self.url = url
        self.context = ssl.create_default_context(cafile=ca)

    def post(
        self, body: bytes, headers: Mapping[str, str] | None = None, context: ssl.SSLContext | None = None
    ) -> tuple[int, str, bytes]:
        """(HTTP status, reason, body) of the answer to any request body (trusting ``context``'s CA if given)."""
        request = urllib.request.Request(self.url, body, {"Content-Type": "application/json", **(headers or {})})
        try:
            with urllib.request.urlopen(request, context=context or self.context, timeout=30) as answer:
                return answer.status, answer.reason, answer.read()
        except urllib.error.HTTPError as error:
            with error:
                return error.code, error.reason, error.read()
