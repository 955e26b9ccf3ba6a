"""Hostile XML: a typed HostileXmlError, never expansion, fetching, a crash or a hang.

Each attack has its own test, run against every reader of the codec: the document input of the
encoder (streamed and in memory) and the encrypted export input of the decoder (streamed and in
memory).
"""

from __future__ import annotations

import http.server
import io
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from xdn import crypto
from xdn.codec import (
    ConceptKey,
    decode_file,
    encode_document,
    encode_file,
    from_encrypted_xml,
)
from xdn.errors import HostileXmlError
from xdn.mapping import parse_mapping
from xdn.ontology import Ontology
from xdn.xmlsafe import Limits

SIGNER = crypto.generate_private_key()
ONTOLOGY = Ontology.from_edges(iri="urn:o", concepts=["Item"], edges=[])
MAPPING = parse_mapping(
    b'[namespaces]\nx = "urn:x"\n[concepts]\nItem = ["//item"]\n',
    ONTOLOGY,
    source="hostile.toml",
    schema="hostile",
)
KEYS = {"Item": ConceptKey(publisher="p", concept="Item", epoch=1, group_key=bytes(32))}

Reader = Callable[[bytes, Limits], object]


def _encode_streamed(data: bytes, limits: Limits) -> object:
    return encode_file(io.BytesIO(data), io.BytesIO(), mapping=MAPPING, document_id="d",
                       publisher="p", version=1, issued_at_ms=0, keys=KEYS, signer=SIGNER,
                       limits=limits, streaming=True)  # fmt: skip


def _encode_in_memory(data: bytes, limits: Limits) -> object:
    return encode_document(io.BytesIO(data), mapping=MAPPING, document_id="d", publisher="p",
                           version=1, issued_at_ms=0, keys=KEYS, signer=SIGNER, limits=limits,
                           streaming=False)  # fmt: skip


def _decode_streamed(data: bytes, limits: Limits) -> object:
    return decode_file(io.BytesIO(data), io.BytesIO(), publisher_key=SIGNER.public_key(),
                       keys={("p", "Item", 1): bytes(32)}, limits=limits)  # fmt: skip


def _decode_in_memory(data: bytes, limits: Limits) -> object:
    return from_encrypted_xml(data, limits=limits)


DOCUMENT_READERS: dict[str, Reader] = {
    "encode-streamed": _encode_streamed,
    "encode-in-memory": _encode_in_memory,
}
EXPORT_READERS: dict[str, Reader] = {
    "decode-streamed": _decode_streamed,
    "decode-in-memory": _decode_in_memory,
}


def valid_export() -> bytes:
    out = io.BytesIO()
    _encode_streamed(b"<doc><item>one</item><item>two</item></doc>", Limits())
    encode_file(io.BytesIO(b"<doc><item>one</item><item>two</item></doc>"), out,
                mapping=MAPPING, document_id="d", publisher="p", version=1, issued_at_ms=0,
                keys=KEYS, signer=SIGNER)  # fmt: skip
    return out.getvalue()


EXPORT = valid_export()
ROOT_START = EXPORT.index(b"<xdn:encrypted-document")
DECLARATION, BODY = EXPORT[:ROOT_START], EXPORT[ROOT_START:]


def document(prolog: bytes = b"", body: bytes = b"<item>x</item>") -> bytes:
    return b'<?xml version="1.0"?>\n' + prolog + b"<doc>" + body + b"</doc>"


def export(prolog: bytes = b"", inside: bytes = b"") -> bytes:
    """The valid export with a prolog before its root and ``inside`` in its first fragment."""
    marker = b"</xenc:EncryptionProperty>"
    body = BODY.replace(marker, inside + marker, 1)
    return DECLARATION + prolog + body


def cases(make: Callable[[str], tuple[bytes, Limits]]) -> list[Any]:
    readers = {**DOCUMENT_READERS, **EXPORT_READERS}
    return [pytest.param(name, make(name), id=name) for name in readers]


def run(reader: str, data: bytes, limits: Limits) -> None:
    readers = {**DOCUMENT_READERS, **EXPORT_READERS}
    with pytest.raises(HostileXmlError):
        readers[reader](data, limits)


def test_the_payload_carriers_are_valid() -> None:
    for name, reader in DOCUMENT_READERS.items():
        assert reader(document(), Limits()) is not None, name
    for name, reader in EXPORT_READERS.items():
        assert reader(export(), Limits()) is not None, name


LAUGHS = b"""<!DOCTYPE doc [
 <!ENTITY lol "lol">
 <!ENTITY lol1 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
 <!ENTITY lol2 "&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;&lol1;">
 <!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">
 <!ENTITY lol4 "&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;&lol3;">
 <!ENTITY lol5 "&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;&lol4;">
 <!ENTITY lol6 "&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;&lol5;">
 <!ENTITY lol7 "&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;&lol6;">
 <!ENTITY lol8 "&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;&lol7;">
 <!ENTITY lol9 "&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;&lol8;">
]>
"""


def _entity_case(name: str, declaration: bytes) -> tuple[bytes, Limits]:
    if name in DOCUMENT_READERS:
        return document(declaration, b"<item>&x;</item>"), Limits()
    prolog = declaration.replace(b"<!DOCTYPE doc", b"<!DOCTYPE xdn:encrypted-document")
    return export(prolog, b"<x>&x;</x>"), Limits()


@pytest.mark.parametrize(("reader", "case"), cases(lambda n: _entity_case(n, LAUGHS.replace(
    b'<!ENTITY lol9', b'<!ENTITY x "&lol9;"><!ENTITY lol9'))))  # fmt: skip
def test_entity_expansion_billion_laughs(reader: str, case: tuple[bytes, Limits]) -> None:
    run(reader, *case)


@pytest.mark.parametrize(
    ("reader", "case"),
    cases(lambda n: _entity_case(n, b'<!DOCTYPE doc [<!ENTITY x SYSTEM "file:///etc/passwd">]>')),
)
def test_external_entity_file(reader: str, case: tuple[bytes, Limits]) -> None:
    run(reader, *case)


@pytest.fixture
def http_server() -> Iterator[tuple[str, list[str]]]:
    hits: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"leaked")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", hits
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("reader", [*DOCUMENT_READERS, *EXPORT_READERS])
def test_external_entity_http(reader: str, http_server: tuple[str, list[str]]) -> None:
    url, hits = http_server
    declaration = f'<!DOCTYPE doc [<!ENTITY x SYSTEM "{url}/entity">]>'.encode()
    run(reader, *_entity_case(reader, declaration))
    external = f'<!DOCTYPE doc SYSTEM "{url}/doc.dtd">'.encode()
    run(reader, *_entity_case(reader, external))
    assert hits == []


@pytest.mark.parametrize(
    ("reader", "case"),
    cases(lambda n: _entity_case(n, b"<!DOCTYPE doc [<!ELEMENT doc ANY>]>")),
)
def test_dtd(reader: str, case: tuple[bytes, Limits]) -> None:
    run(reader, *case)


def _deep(name: str) -> tuple[bytes, Limits]:
    nest = b"<n>" * 300 + b"</n>" * 300
    if name in DOCUMENT_READERS:
        return document(body=b"<item>" + nest + b"</item>"), Limits()
    return export(inside=nest), Limits()


@pytest.mark.parametrize(("reader", "case"), cases(_deep))
def test_deep_nesting(reader: str, case: tuple[bytes, Limits]) -> None:
    run(reader, *case)


def _huge_text(name: str) -> tuple[bytes, Limits]:
    text = b"t" * 20_000
    if name in DOCUMENT_READERS:
        return document(body=b"<item>" + text + b"</item>"), Limits(max_text_bytes=10_000)
    return export(inside=b"<x>" + text + b"</x>"), Limits(max_text_bytes=10_000)


@pytest.mark.parametrize(("reader", "case"), cases(_huge_text))
def test_huge_text_node(reader: str, case: tuple[bytes, Limits]) -> None:
    run(reader, *case)


def _huge_tail(name: str) -> tuple[bytes, Limits]:
    tail = b"t" * 300_000  # larger than a parser read, so still growing at its element's end
    if name in DOCUMENT_READERS:
        body = b"<item><a>x</a>" + tail + b"<b/></item>"
        return document(body=body), Limits(max_text_bytes=100_000)
    marker = b"</xenc:EncryptedData>"
    return EXPORT.replace(marker, marker + tail, 1), Limits(max_text_bytes=100_000)


@pytest.mark.parametrize(("reader", "case"), cases(_huge_tail))
def test_huge_tail_text(reader: str, case: tuple[bytes, Limits]) -> None:
    run(reader, *case)


@pytest.mark.parametrize("reader", [*DOCUMENT_READERS, *EXPORT_READERS])
def test_malformed_xml(reader: str) -> None:
    data = document(body=b"<item>") if reader in DOCUMENT_READERS else EXPORT[:-40]
    run(reader, data, Limits())


def test_hostile_documents_on_disk_too(tmp_path: Path) -> None:
    path = tmp_path / "laughs.xml"
    path.write_bytes(document(LAUGHS, b"<item>&lol9;</item>"))
    with pytest.raises(HostileXmlError):
        encode_file(path, io.BytesIO(), mapping=MAPPING, document_id="d", publisher="p",
                    version=1, issued_at_ms=0, keys=KEYS, signer=SIGNER)  # fmt: skip
