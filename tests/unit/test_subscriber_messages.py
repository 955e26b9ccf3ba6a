"""What the subscriber says when its stream ends, and per accepted document (issue #20)."""

from __future__ import annotations

import logging

from cli.main import _QuietCancelledRequests
from subscriber.messages import UNSUBSCRIBED_REASON, accepted_line, stream_end
from xdn.grpc_tls import handshake_hint

_BAD_SIGNATURE = (
    "failed to connect to all addresses; last error: UNKNOWN: ipv4:127.0.0.1:35241: Tls "
    "handshake failed (TSI_PROTOCOL_FAILURE): SSL_ERROR_SSL: error:1a000064:ECDSA "
    "routines:OPENSSL_internal:BAD_SIGNATURE: certificate signature failure"
)


def test_unsubscribed_at_our_request_is_a_clean_end() -> None:
    ending = stream_end(
        "alice", "127.0.0.1:1", "PERMISSION_DENIED",
        f"subscription ended by the site: {UNSUBSCRIBED_REASON}",
    )
    assert ending.kind == "done"
    assert ending.text == "alice: unsubscribed at 127.0.0.1:1; subscription ended"
    assert "PERMISSION_DENIED" not in ending.text


def test_other_ends_by_the_site_stay_refusals() -> None:
    ending = stream_end(
        "alice", "a:1", "PERMISSION_DENIED",
        "subscription ended by the site: no policy grants it anything any more",
    )
    assert ending.kind == "refused"
    assert "no policy grants it anything any more" in ending.text


def test_a_revoked_certificate_is_said_plainly() -> None:
    ending = stream_end("carol", "a:1", "UNAUTHENTICATED", "certificate of 'carol' was revoked")
    assert ending.kind == "refused"
    assert ending.text.startswith("your certificate (carol.pem in --certs) was revoked by the CA")
    assert "the site a:1 refused it" in ending.text


def test_a_ca_mismatch_stops_with_a_hint() -> None:
    ending = stream_end("alice", "127.0.0.1:35241", "UNAVAILABLE", _BAD_SIGNATURE)
    assert ending.kind == "refused"
    assert "the site's certificate is not signed by the CA in --certs" in ending.text
    assert "is this the cluster's CA?" in ending.text


def test_our_certificate_refused_by_the_site() -> None:
    hint = handshake_hint("Tls handshake failed: SSLV3_ALERT_BAD_CERTIFICATE")
    assert hint is not None and "the site refused our certificate" in hint


def test_a_site_that_is_down_is_retried() -> None:
    assert stream_end("a", "x:1", "UNAVAILABLE", "failed to connect: Connection refused").kind \
        == "lost"
    assert handshake_hint("Connection refused") is None


def test_core_internal_error_is_explained_and_retried() -> None:
    ending = stream_end("a", "x:1", "INTERNAL", "Internal error from Core")
    assert ending.kind == "lost"
    assert "Internal error from Core" not in ending.text
    assert "before its reason arrived" in ending.text


def test_accepted_line() -> None:
    line = accepted_line(
        "alice", publisher="production-dept", document="order", version=3, fragments=7,
        size=1234,
    )
    assert line == "alice: accepted production-dept order v3: 7 fragments, 1234 bytes of view"


def _record(name: str, message: str) -> logging.LogRecord:
    return logging.LogRecord(name, logging.DEBUG, "f", 1, "%s", (message,), None)


def _raised(error: str) -> str:
    return (
        "Client request_iterator raised exception:\nTraceback (most recent call last):\n"
        '  File "x.py", line 1, in outgoing\n    await arrival\n' + error + "\n"
    )


def test_shutdown_cancellation_traceback_is_dropped() -> None:
    quiet = _QuietCancelledRequests()
    assert not quiet.filter(_record("grpc.aio._call", _raised("asyncio.exceptions.CancelledError")))
    assert quiet.filter(_record("grpc.aio._call", _raised("ValueError: real")))
    assert quiet.filter(_record("subscriber.client", _raised("asyncio.exceptions.CancelledError")))


def test_any_command_failing_a_handshake_gets_the_hint() -> None:
    from cli.main import _hint
    from xdn.errors import UsageError

    assert _hint(UsageError(f"unsubscribe at 127.0.0.1:1: UNAVAILABLE: {_BAD_SIGNATURE}")) \
        .startswith("\nxdn: hint: TLS handshake failed: the site's certificate is not signed")
    assert _hint(UsageError("cannot read x")) == ""
