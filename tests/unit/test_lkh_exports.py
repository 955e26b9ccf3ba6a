"""The public API of xdn.lkh is declared once, in its __all__, and pinned here."""

from __future__ import annotations

import xdn.lkh

PUBLIC = {
    "DocumentKeyGrant",
    "Enrolment",
    "EpochChange",
    "EpochGapError",
    "GroupController",
    "GroupHeader",
    "KeySigner",
    "MemberKeys",
    "MemberPath",
    "NodeRow",
    "Rand",
    "RekeyMessage",
    "Signed",
    "WrappedKey",
    "ceil_log2",
    "group_key_of",
    "open_document_keys",
    "open_enrolment",
    "seal_document_keys",
    "seal_path",
    "signed_bytes",
    "verify_key_message",
}


def test_all_is_pinned_and_importable() -> None:
    assert set(xdn.lkh.__all__) == PUBLIC
    assert len(xdn.lkh.__all__) == len(PUBLIC)
    for name in PUBLIC:
        assert getattr(xdn.lkh, name) is not None


def test_no_other_public_names_leak() -> None:
    leaked = {
        name
        for name in vars(xdn.lkh)
        if not name.startswith("_") and name not in PUBLIC and name != "annotations"
    }
    assert leaked == set()
