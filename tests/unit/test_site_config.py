"""Site configuration: read, resolved, validated with messages naming the problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from disseminator.config import SiteConfig, load_site_config
from xdn.errors import ConfigError

GOOD = """
[site]
name = "d2"
listen = "127.0.0.1:0"
block = "WorkOrder"
uplink = "127.0.0.1:5000"

[tls]
ca = "certs/ca.pem"
cert = "certs/d2.pem"
key = "/abs/d2.key"

[ontology]
files = ["onto.owl"]

[[publisher]]
name = "production-dept"
certificate = "certs/production-dept.pem"
policy = "policies/production-dept.toml"
"""


def test_good_config_resolves_relative_paths(tmp_path: Path) -> None:
    path = tmp_path / "d2.toml"
    path.write_text(GOOD)
    config = load_site_config(path)
    assert config.name == "d2"
    assert config.uplink == "127.0.0.1:5000"
    assert config.ca == tmp_path / "certs" / "ca.pem"
    assert config.key == Path("/abs/d2.key")
    assert config.ontology_files == (tmp_path / "onto.owl",)
    assert config.publishers[0].policy == tmp_path / "policies" / "production-dept.toml"
    assert config.state_dir == tmp_path / "state" / "d2"


@pytest.mark.parametrize(
    ("broken", "message"),
    [
        (GOOD.replace('listen = "127.0.0.1:0"', 'listen = "nowhere"'), "HOST:PORT"),
        (GOOD.replace('block = "WorkOrder"\n', ""), "'block'"),
        (GOOD.replace("[tls]", "[tlz]"), r"missing \[tls\]"),
        (GOOD.replace('files = ["onto.owl"]', "files = []"), "at least one OWL file"),
        (GOOD.replace('name = "d2"', 'name = "d2'), "invalid TOML"),
        (GOOD.replace('uplink = "127.0.0.1:5000"', "uplink = 5"), "uplink must be"),
    ],
)
def test_broken_configs_name_the_problem(tmp_path: Path, broken: str, message: str) -> None:
    path = tmp_path / "site.toml"
    path.write_text(broken)
    with pytest.raises(ConfigError, match=message):
        load_site_config(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_site_config(tmp_path / "nope.toml")


def test_a_site_refuses_to_start_for_a_block_its_certificate_does_not_authorise(
    tmp_path: Path,
) -> None:
    import asyncio
    from datetime import UTC, datetime

    from deploy.pki import Party, ensure_ca, issue_party
    from disseminator.daemon import serve
    from xdn import certs
    from xdn.paths import REPO_ROOT

    now = datetime.now(UTC)
    ensure_ca(tmp_path / "certs", now=now)
    issue_party(
        tmp_path / "certs",
        Party(name="d2", role="site", attributes={certs.BLOCK_FIELD: "Production"}),
        now=now,
    )
    path = tmp_path / "d2.toml"
    path.write_text(
        GOOD.replace('key = "/abs/d2.key"', 'key = "certs/d2.key"').replace(
            'files = ["onto.owl"]', f'files = ["{REPO_ROOT / "ontology" / "production.owl"}"]'
        )
    )
    with pytest.raises(ConfigError, match=r"authorises block 'Production', but site\.block is"):
        asyncio.run(serve(load_site_config(path)))
def _loaded(tmp_path: Path, settings: str = "") -> SiteConfig:
    """Load GOOD with ``settings`` (TOML lines) added to its ``[site]`` table."""
    path = tmp_path / "d2.toml"
    path.write_text(GOOD.replace("[tls]", f"{settings}\n\n[tls]"))
    return load_site_config(path)


def test_heartbeat_and_drain_default_and_can_be_set(tmp_path: Path) -> None:
    config = _loaded(tmp_path)
    assert (config.heartbeat_seconds, config.drain_seconds) == (5.0, 10.0)
    config = _loaded(tmp_path, "heartbeat_seconds = 0.5\ndrain_seconds = 0")
    assert (config.heartbeat_seconds, config.drain_seconds) == (0.5, 0.0)


def test_the_routed_window_defaults_and_can_be_set(tmp_path: Path) -> None:
    config = _loaded(tmp_path)
    assert (config.routed_retention_days, config.routed_per_publisher) == (7.0, 100_000)
    config = _loaded(tmp_path, "routed_retention_days = 0.5\nrouted_per_publisher = 50")
    assert (config.routed_retention_days, config.routed_per_publisher) == (0.5, 50)


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("heartbeat_seconds = 0", "heartbeat_seconds must be between"),
        ("heartbeat_seconds = 1e9", "heartbeat_seconds must be between"),
        ('heartbeat_seconds = "5"', "heartbeat_seconds must be a number"),
        ("drain_seconds = -1", "drain_seconds must not be negative"),
        ("routed_retention_days = 0", "routed_retention_days must be positive"),
        ('routed_retention_days = "7"', "routed_retention_days must be a number of days"),
        ("routed_per_publisher = 0", "routed_per_publisher at least 1"),
        ("routed_per_publisher = 1.5", "routed_per_publisher must be a whole number"),
    ],
)
def test_bad_heartbeat_drain_or_routed_window_settings_are_refused(
    tmp_path: Path, setting: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _loaded(tmp_path, setting)


def test_the_newest_policy_version_a_site_enforced_is_never_lowered(tmp_path: Path) -> None:
    from disseminator.store import Store

    store = Store(tmp_path / "site.sqlite")
    store.record_policies({"p": (3, "c")})
    store.record_policies({"p": (2, "b"), "q": (1, "a")})  # an older one does not replace it
    store.close()
    assert Store(tmp_path / "site.sqlite").enforced_policies() == {"p": (3, "c"), "q": (1, "a")}


def test_a_policy_that_would_roll_back_the_enforced_one_is_refused() -> None:
    from deploy.network import ONTOLOGY
    from disseminator.daemon import check_no_rollback, enforced_versions
    from xdn.errors import PolicyError
    from xdn.ontology import load_ontology
    from xdn.paths import REPO_ROOT
    from xdn.policy import PolicySet, parse_policy

    ontology = load_ontology([ONTOLOGY])
    text = (REPO_ROOT / "policies" / "production-dept.toml").read_bytes()
    policies = PolicySet.of(ontology, [parse_policy(text, ontology)])
    (version, digest) = enforced_versions(policies)["production-dept"]
    check_no_rollback(policies, {})  # nothing enforced yet
    check_no_rollback(policies, {"production-dept": (version, digest)})  # the same document
    check_no_rollback(policies, {"production-dept": (version - 1, "older")})
    with pytest.raises(PolicyError, match=f"would roll back version {version + 1}"):
        check_no_rollback(policies, {"production-dept": (version + 1, digest)})
    with pytest.raises(PolicyError, match=f"would roll back version {version},"):
        check_no_rollback(policies, {"production-dept": (version, "another document")})


def test_the_web_endpoint_is_off_unless_web_listen_is_set(tmp_path: Path) -> None:
    config = _loaded(tmp_path)
    assert config.web.listen is None
    config = _loaded(tmp_path, 'web_listen = "127.0.0.1:0"')
    assert (config.web.listen, config.web.host, config.web.port) == ("127.0.0.1:0", "127.0.0.1", 0)
    assert config.web.notification_bytes == 256 * 1024


def test_web_limits_are_read_from_their_table(tmp_path: Path) -> None:
    path = tmp_path / "d2.toml"
    path.write_text(GOOD.replace("[tls]", 'web_listen = "127.0.0.1:8443"\n\n[web]\n'
                                 "notification_bytes = 1024\nrequest_seconds = 2.5\n\n[tls]"))
    config = load_site_config(path)
    assert (config.web.port, config.web.notification_bytes, config.web.request_seconds) == (
        8443, 1024, 2.5,
    )
    # what the site's DHT record announces: web_listen's host and the bound port, unless
    # [web] advertise says otherwise (e.g. behind a NAT, or listening on 0.0.0.0)
    assert config.web.advertise is None and config.web.advertised(8443) == "127.0.0.1:8443"
    path.write_text(GOOD.replace("[tls]", 'web_listen = "0.0.0.0:8443"\n\n[web]\n'
                                 'advertise = "d2.example.org:443"\n\n[tls]'))
    assert load_site_config(path).web.advertised(8443) == "d2.example.org:443"


@pytest.mark.parametrize(
    ("settings", "table", "message"),
    [
        ('web_listen = "nowhere"', "", "web_listen must be HOST:PORT"),
        ("", 'advertise = "d2.example.org"', "web.advertise must be HOST:PORT"),
        ("", 'advertise = "d2.example.org:0"', "web.advertise must be HOST:PORT"),
        ("", "advertise = 443", "web.advertise must be HOST:PORT"),
        ("web_listen = 8443", "", "web_listen must be HOST:PORT"),
        ("", "notification_byte = 5", r"unknown keys \['notification_byte'\]"),
        ("", "notification_bytes = 0", "web.notification_bytes must be a positive number"),
        ("", "inbox_notifications = 1.5", "web.inbox_notifications must be a whole number"),
        ("", 'request_seconds = "30"', "web.request_seconds must be a positive number"),
    ],
)
def test_bad_web_settings_are_refused(
    tmp_path: Path, settings: str, table: str, message: str
) -> None:
    path = tmp_path / "d2.toml"
    path.write_text(GOOD.replace("[tls]", f"{settings}\n\n[web]\n{table}\n\n[tls]"))
    with pytest.raises(ConfigError, match=message):
        load_site_config(path)
