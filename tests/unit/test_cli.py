"""The ``xdn`` command line: help for every subcommand, clean errors."""

from __future__ import annotations

import pytest

from cli.main import build_parser, main

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


SUBSCRIBE_REFUSALS = (
    ("--heartbeat", "soon", "'soon' is not a number of seconds"),
    ("--heartbeat", "0", "the heartbeat interval must be 0.001 to 86400 seconds"),
    ("--heartbeat", "nan", "the heartbeat interval must be 0.001 to 86400 seconds"),
    ("--crl-grace", "-1", "the CRL grace must be 0 to 2.592e+06 seconds"),
    ("--max-held", "many", "'many' is not a whole number"),
    ("--max-held", "0", "must be at least 1"),
    ("--max-held-mib", "-1", "must be at least 1"),
    ("--lease", "604801", "a lease (a week at most) must be 1 to 604800 seconds"),
    ("--lease", "an hour", "'an hour' is not a number of seconds"),
    ("--checkpoint-max-age", "0.5", "the checkpoint age bound must be 1 to 2.592e+06 seconds"),
    ("--retention-days", "0", "the retention must be more than 0 and at most 36500 days"),
    ("--retention-days", "36501", "the retention must be more than 0 and at most 36500 days"),
    ("--retention-days", "nan", "the retention must be more than 0 and at most 36500 days"),
    ("--retention-days", "a week", "'a week' is not a number of days"),
    ("--keep-documents", "-3", "must be at least 1"),
    ("--keep-documents", "1e5", "'1e5' is not a whole number"),
    ("--keep-epochs", "0", "must be at least 1"),
    ("--keep-epochs", "1.5", "'1.5' is not a whole number"),
)


@pytest.mark.parametrize(("option", "bad", "message"), SUBSCRIBE_REFUSALS)
def test_subscribe_refuses_a_bad_bound_with_a_clear_message(
    option: str, bad: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["subscribe", "--connect", "h:1", "--name", "a", "--certs", "c", "--out", "o"]
    with pytest.raises(SystemExit) as exit_info:
        build_parser().parse_args([*base, option, bad])
    assert exit_info.value.code == 2
    last = capsys.readouterr().err.splitlines()[-1]
    assert last == f"xdn subscribe: error: argument {option}: {message}"


def test_subscribe_bounds_accept_their_edges() -> None:
    base = ["subscribe", "--connect", "h:1", "--name", "a", "--certs", "c", "--out", "o"]
    args = build_parser().parse_args([
        *base, "--heartbeat", "0.001", "--crl-grace", "0", "--max-held", "1",
        "--lease", "604800", "--checkpoint-max-age", "2592000", "--retention-days", "36500",
        "--keep-documents", "1", "--keep-epochs", "1",
    ])  # fmt: skip
    assert (args.heartbeat, args.crl_grace, args.max_held, args.lease) == (0.001, 0.0, 1, 604800.0)
    assert (args.checkpoint_max_age, args.retention_days) == (2_592_000.0, 36_500.0)
    assert (args.keep_documents, args.keep_epochs) == (1, 1)
    assert (type(args.max_held), type(args.retention_days)) == (int, float)
