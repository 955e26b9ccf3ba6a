"""xdn.xmlsafe bounds: depth counts every element, comment and PI; text nodes by length."""

from __future__ import annotations

import pytest

from xdn.errors import HostileXmlError
from xdn.xmlsafe import Limits, parse_bytes


def _nested(depth: int, leaf: bytes = b"") -> bytes:
    return b"<n>" * (depth - 1) + (leaf or b"<n/>") + b"</n>" * (depth - 1)


@pytest.mark.parametrize("leaf", [b"", b"<!-- c -->", b"<?pi x?>"])
def test_depth_at_the_limit_passes_and_one_deeper_is_refused(leaf: bytes) -> None:
    parse_bytes(_nested(4, leaf), limits=Limits(max_depth=4))
    with pytest.raises(HostileXmlError, match=r"<bytes>:1: nesting deeper than 3 elements"):
        parse_bytes(_nested(4, leaf), limits=Limits(max_depth=3))


def test_text_longer_than_the_limit_is_refused_in_text_and_tail() -> None:
    for body in (b"<a>" + b"t" * 50 + b"</a>", b"<a><b/>" + b"t" * 50 + b"</a>"):
        with pytest.raises(HostileXmlError, match="text node larger than 40 bytes"):
            parse_bytes(body, limits=Limits(max_text_bytes=40))
        parse_bytes(body, limits=Limits(max_text_bytes=50))
