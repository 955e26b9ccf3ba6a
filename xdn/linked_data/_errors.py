"""The kinds of :class:`~xdn.errors.LinkedDataError`, one per way a request can fail.

The HTTPS edge maps each kind to its status code (415, 413, 400, 400, 406); nothing here knows HTTP
beyond the names.
"""

from __future__ import annotations

from xdn.errors import LinkedDataError

__all__ = [
    "InvalidNotification",
    "InvalidRequest",
    "NotAcceptable",
    "PayloadTooLarge",
    "UnsupportedMediaType",
]


class UnsupportedMediaType(LinkedDataError):
    """A notification's media type (or its charset) is not one the inbox accepts."""


class PayloadTooLarge(LinkedDataError):
    """A notification is longer than the inbox's byte limit."""


class InvalidNotification(LinkedDataError):
    """A notification is not valid RDF in its media type, or fails the inbox's constraints."""


class InvalidRequest(LinkedDataError):
    """A request's target or query is malformed (e.g. a page cursor that is not a number)."""


class NotAcceptable(LinkedDataError):
    """No representation the resource offers is acceptable to the request's ``Accept``."""
