"""The ``xdn`` command line: help for every subcommand, clean errors."""

from __future__ import annotations

import pytest

from xdn.cli import build_parser, main

SUBCOMMANDS = (
    "demo",
    "certs",
    "disseminator",
    "publish",
    "subscribe",
    "ontology",
    "mapping",
    "policy",
    "provenance",
    "generate",
    "audit",
)


def test_help_lists_every_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for name in SUBCOMMANDS:
        assert f"    {name}" in out, name


@pytest.mark.parametrize("name", SUBCOMMANDS)
def test_each_subcommand_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([name, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("usage: xdn " + name)


def test_missing_file_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["certs", "show", "/nonexistent/cert.pem"])
    assert code == 1
    assert capsys.readouterr().err == (
        "xdn: error: /nonexistent/cert.pem: No such file or directory\n"
    )


def test_bad_certificate_is_refused_not_a_traceback(
    tmp_path: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.pem"  # type: ignore[operator]
    bad.write_bytes(b"not a certificate")
    assert main(["certs", "show", str(bad)]) == 2
    assert capsys.readouterr().err.startswith("xdn: refused: not a PEM X.509 certificate")


def test_parser_is_built_once_per_call() -> None:
    assert build_parser().prog == "xdn"


def test_subscribe_heartbeat_defaults_to_five_seconds_and_refuses_nonsense(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["subscribe", "--connect", "h:1", "--name", "a", "--certs", "c", "--out", "o"]
    assert build_parser().parse_args(base).heartbeat == 5.0
    assert build_parser().parse_args([*base, "--heartbeat", "0.5"]).heartbeat == 0.5
    for bad in ("0", "-1", "soon"):
        with pytest.raises(SystemExit):
            build_parser().parse_args([*base, "--heartbeat", bad])
        assert "--heartbeat" in capsys.readouterr().err


def test_subscribe_retention_has_defaults_and_refuses_nonsense(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["subscribe", "--connect", "h:1", "--name", "a", "--certs", "c", "--out", "o"]
    args = build_parser().parse_args(base)
    assert (args.retention_days, args.keep_documents, args.keep_epochs) == (30.0, 100_000, 32)
    args = build_parser().parse_args(
        [*base, "--retention-days", "0.5", "--keep-documents", "10", "--keep-epochs", "4"]
    )
    assert (args.retention_days, args.keep_documents, args.keep_epochs) == (0.5, 10, 4)
    for option, bad in (("--retention-days", "0"), ("--retention-days", "a week"),
                        ("--keep-epochs", "0"), ("--keep-documents", "-3")):  # fmt: skip
        with pytest.raises(SystemExit):
            build_parser().parse_args([*base, option, bad])
        assert option in capsys.readouterr().err
