"""The shared byte layouts (xdn.binary), statement signing (xdn.statements), store opening."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from xdn import certs, crypto, statements
from xdn.binary import U64_MAX, Reader, Writer, check_name, check_u64
from xdn.errors import ProtocolError, SignatureError
from xdn.sqlitedb import open_db

MAGIC = b"XTS1"
_texts = st.text(max_size=20)


@given(
    st.integers(0, 255), st.integers(0, 2**32 - 1), st.integers(0, U64_MAX),
    st.binary(max_size=40), st.lists(_texts, max_size=5),
)
def test_writer_and_reader_round_trip(
    small: int, medium: int, large: int, blob: bytes, texts: list[str]
) -> None:
    out = Writer(MAGIC).u8(small).u32(medium).u64(large).blob(blob).u32(len(texts))
    for text in texts:
        out.text(text)
    inp = Reader(out.getvalue(), MAGIC)
    assert (inp.u8(), inp.u32(), inp.u64(), inp.blob()) == (small, medium, large, blob)
    assert [inp.text() for _ in range(inp.count(4, u32=True))] == texts
    inp.done()


def test_every_defect_is_a_protocol_error_naming_the_value() -> None:
    data = Writer(MAGIC).text("a").u64(2).getvalue()
    with pytest.raises(ProtocolError, match=r"^thing: not an encoded"):
        Reader(b"XXXX" + data[4:], MAGIC, what="thing")
    with pytest.raises(ProtocolError, match=r"^thing: truncated"):
        inp = Reader(data[:-1], MAGIC, what="thing")
        inp.text(), inp.u64()
    with pytest.raises(ProtocolError, match=r"^trailing bytes"):
        inp = Reader(data + b"\x00", MAGIC)
        inp.text(), inp.u64(), inp.done()
    with pytest.raises(ProtocolError, match="item count exceeds"):
        Reader(Writer(MAGIC).u64(3).getvalue(), MAGIC).count(1)
    with pytest.raises(ProtocolError, match="not UTF-8"):
        Reader(Writer(MAGIC).blob(b"\xff").getvalue(), MAGIC).text()


def test_validators() -> None:
    assert check_name("site", "", empty=True) == ""
    with pytest.raises(ValueError, match="must not be empty"):
        check_name("site", "")
    with pytest.raises(ValueError, match="control"):
        check_name("site", "a\x7fb")
    with pytest.raises(TypeError):
        check_name("site", b"a")
    with pytest.raises(TypeError):
        check_u64("n", True)
    with pytest.raises(ValueError, match="out of range"):
        check_u64("n", U64_MAX + 1)


def test_statements_sign_and_verify_bytes_or_statements() -> None:
    key = crypto.generate_private_key()

    class Note:
        def signed_bytes(self) -> bytes:
            return b"label\x00note"

    signature = statements.sign(Note(), key)
    statements.verify(b"label\x00note", signature, key.public_key())
    with pytest.raises(SignatureError):
        statements.verify(b"label\x00other", signature, key.public_key())
    ca_pem, ca_key = certs.create_ca("Test CA", now=datetime(2026, 1, 1, tzinfo=UTC))
    with pytest.raises(SignatureError):  # a certificate of another key
        statements.verify_by_certificate(Note(), signature, ca_pem)
    by_ca = statements.sign(Note(), crypto.load_private_key_pem(ca_key))
    statements.verify_by_certificate(Note(), by_ca, ca_pem)


def test_check_signed() -> None:
    statements.check_signed("note", 1, int, b"s")
    with pytest.raises(TypeError, match="note must be an int"):
        statements.check_signed("note", "1", int, b"s")
    for signature in (b"", "s", b"long"):
        with pytest.raises(ValueError, match="non-empty bytes"):
            statements.check_signed("note", 1, int, signature, most=3)


def test_open_db_creates_the_folder_and_the_schema(tmp_path: Path) -> None:
    schema = "CREATE TABLE IF NOT EXISTS t (k TEXT PRIMARY KEY);"
    path = tmp_path / "deep" / "state.db"
    db = open_db(path, schema)
    db.execute("INSERT INTO t VALUES ('a')")  # autocommit: visible to another connection
    again = open_db(path, schema)
    try:
        assert again.execute("SELECT k FROM t").fetchall() == [("a",)]
        assert again.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        db.close()
        again.close()
