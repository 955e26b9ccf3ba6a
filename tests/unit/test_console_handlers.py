"""The web console's handlers through aiohttp's test client: access, pages, check, diff, sign."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import pytest
from aiohttp.test_utils import TestClient, TestServer

from console import ConsoleConfig, TokenGate, build_app, latest_report
from deploy.pki import revoke_party
from tests.unit.console_fixtures import (
    ONTOLOGY,
    PUBLISHER,
    ConsoleWorld,
    bumped,
    console_config,
    console_world,
    without_deny,
)
from xdn import crypto
from xdn.ontology import Ontology, load_ontology
from xdn.policy import verify_policy_file

T = TypeVar("T")
Body = Callable[[TestClient], Awaitable[T]]  # type: ignore[type-arg]


@pytest.fixture(scope="module")
def ontology() -> Ontology:
    return load_ontology([ONTOLOGY])


@pytest.fixture
def world(tmp_path: Path) -> ConsoleWorld:
    return console_world(tmp_path)


def _run(config: ConsoleConfig, body: Body[T], *, login: bool = True) -> T:
    async def run() -> T:
        async with TestClient(TestServer(build_app(config))) as client:
            if login:
                assert isinstance(config.gate, TokenGate) and config.gate.token
                answer = await client.get(
                    f"/login?token={config.gate.token}", allow_redirects=False
                )
                assert answer.status == 303
            return await body(client)

    return asyncio.run(run())


async def _text(client: TestClient, path: str, status: int = 200) -> str:  # type: ignore[type-arg]
    answer = await client.get(path)
    text = await answer.text()
    assert answer.status == status, text
    return text


async def _post(
    client: TestClient,
    path: str,
    status: int = 200,  # type: ignore[type-arg]
    **form: str,
) -> str:
    answer = await client.post(path, data=form)
    text = await answer.text()
    assert answer.status == status, text
    return text


def test_without_the_token_every_page_is_refused_and_the_token_works_once(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    config = console_config(world, ontology)
    assert isinstance(config.gate, TokenGate)
    token = config.gate.token

    async def body(client: TestClient) -> None:  # type: ignore[type-arg]
        for path in ("/", "/ontology", f"/policies/{PUBLISHER}", "/who", "/sites", "/audit"):
            assert "not signed in" in await _text(client, path, 401)
        assert "wrong or already used" in await _text(client, "/login?token=guess", 403)
        await _post(client, f"/policies/{PUBLISHER}/sign", 401, draft="x")
        answer = await client.get(f"/login?token={token}", allow_redirects=False)
        assert answer.status == 303
        assert "HttpOnly" in answer.headers["Set-Cookie"]
        assert "SameSite=Strict" in answer.headers["Set-Cookie"]
        assert "Overview" in await _text(client, "/")
        client.session.cookie_jar.clear()
        assert "wrong or already used" in await _text(client, f"/login?token={token}", 403)
        assert "not signed in" in await _text(client, "/", 401)

    _run(config, body, login=False)


def test_pages_carry_a_strict_content_security_policy(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    async def body(client: TestClient) -> dict[str, str]:  # type: ignore[type-arg]
        answer = await client.get("/")
        return dict(answer.headers)

    headers = _run(console_config(world, ontology), body)
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert headers["Referrer-Policy"] == "no-referrer"


def test_the_ontology_page_draws_every_concept_and_containment(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    page = _run(console_config(world, ontology), lambda c: _text(c, "/ontology"))
    assert "<svg" in page and "no problem found" in page
    for concept in ontology.concepts:
        assert f'data-concept="{concept}"' in page
    assert page.count("marker-end=") == ontology.graph.number_of_edges()


def test_the_policy_page_shows_the_rules_the_signature_and_the_editor(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    page = _run(console_config(world, ontology), lambda c: _text(c, f"/policies/{PUBLISHER}"))
    for rule in ("R1", "C1", "C2"):
        assert f"<td>{rule}</td>" in page
    assert "signature verified" in page
    assert 'id="draft"' in page and "data-check=" in page
    assert "MachineSetting and sub-concepts" in page


def test_a_policy_whose_signature_does_not_verify_says_so(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    world.policy.write_text(bumped(world.policy.read_text(), 2))
    page = _run(console_config(world, ontology), lambda c: _text(c, f"/policies/{PUBLISHER}"))
    assert "signature does not verify" in page


def test_live_validation_answers_a_verdict_with_the_line_of_an_error(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    text = world.policy.read_text()

    async def body(client: TestClient) -> list[dict[str, object]]:  # type: ignore[type-arg]
        out = []
        other = text.replace(f'publisher = "{PUBLISHER}"', 'publisher = "other"')
        drafts = (
            bumped(text, 2),
            text.replace('"Production"', '"Nonsense"'),
            text,
            "[policy\n",
            other,
        )
        for draft in drafts:
            answer = await client.post(f"/policies/{PUBLISHER}/check", data={"draft": draft})
            assert answer.status == 200
            out.append(await answer.json())
        return out

    fine, unknown, same, broken, other = _run(console_config(world, ontology), body)
    assert fine["ok"] and fine["warnings"] == [] and "Valid: version 2" in str(fine["html"])
    assert not unknown["ok"] and "Nonsense" in str(unknown["error"])
    assert unknown["line"] == text.splitlines().index('concept = "Production"') + 1
    assert same["ok"] and "does not supersede the signed version 1" in str(same["warnings"])
    assert not broken["ok"] and broken["line"] == 1
    assert not other["ok"] and "not of 'production-dept'" in str(other["error"])


def test_checking_without_javascript_renders_the_page_with_the_draft_and_verdict(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    draft = world.policy.read_text().replace('"Production"', '"Nonsense"')
    page = _run(
        console_config(world, ontology),
        lambda c: _post(c, f"/policies/{PUBLISHER}", 400, draft=draft),
    )
    assert 'class="error"' in page and "Nonsense" in page
    assert "&quot;Nonsense&quot;" in page  # the draft is kept, escaped, in the editor


def test_the_diff_shows_the_rule_removed_and_who_gains_what(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    draft = without_deny(bumped(world.policy.read_text(), 2))
    page = _run(
        console_config(world, ontology),
        lambda c: _post(c, f"/policies/{PUBLISHER}/diff", draft=draft),
    )
    assert "signed version 1 → the draft's version 2" in page
    assert '<span class="loss">removed</span> C2: deny MachineSetting' in page
    # carl, a contractor, gains the machine settings; alice (Cred1) is not in the table.
    assert "<tr><td>carl</td><td>MachineSetting</td><td>—</td></tr>" in page
    assert "<td>alice</td>" not in page
    assert 'id="sign"' in page and "Sign version 2" in page


def test_a_diff_of_an_invalid_draft_shows_the_error_and_offers_no_signing(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    page = _run(
        console_config(world, ontology),
        lambda c: _post(c, f"/policies/{PUBLISHER}/diff", 400, draft="[policy]\n"),
    )
    assert 'class="error"' in page and 'id="sign"' not in page and 'id="back"' in page


def test_signing_writes_the_draft_and_a_signature_that_verifies_and_never_shows_the_key(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    draft = without_deny(bumped(world.policy.read_text(), 2))
    page = _run(
        console_config(world, ontology),
        lambda c: _post(c, f"/policies/{PUBLISHER}/sign", draft=draft.replace("\n", "\r\n")),
    )
    assert "Signed version 2" in page
    assert world.policy.read_text() == draft  # the browser's CRLF line ends normalised
    key = crypto.load_private_key_pem(world.key.read_bytes())
    assert verify_policy_file(world.policy, key.public_key()) == draft.encode()
    secret = world.key.read_text().split("-----")[2].strip()[:40]
    assert secret not in page


@pytest.mark.parametrize(
    ("change", "refusal"),
    [
        (lambda t: t, "does not supersede the signed version 1"),
        (lambda t: bumped(t, 2).replace('"Production"', '"Nonsense"'), "Nonsense"),
    ],
)
def test_signing_refuses_a_draft_sites_would_not_take_and_writes_nothing(
    world: ConsoleWorld, ontology: Ontology, change: Callable[[str], str], refusal: str
) -> None:
    before = (world.policy.read_bytes(), world.signature.read_bytes())
    page = _run(
        console_config(world, ontology),
        lambda c: _post(
            c, f"/policies/{PUBLISHER}/sign", 400, draft=change(world.policy.read_text())
        ),
    )
    assert "Not signed" in page and refusal in page
    assert (world.policy.read_bytes(), world.signature.read_bytes()) == before


def test_without_the_publishers_key_nothing_can_be_signed(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    config = console_config(world, ontology, with_key=False)
    draft = bumped(world.policy.read_text(), 2)

    async def body(client: TestClient) -> tuple[str, str]:  # type: ignore[type-arg]
        diff = await _post(client, f"/policies/{PUBLISHER}/diff", draft=draft)
        sign = await _post(client, f"/policies/{PUBLISHER}/sign", 400, draft=draft)
        return diff, sign

    diff, sign = _run(config, body)
    assert 'id="sign"' not in diff and "cannot be signed" in diff
    assert "--key production-dept=KEY.pem" in sign
    assert world.policy.read_text() != draft


def test_a_post_from_another_site_is_refused(world: ConsoleWorld, ontology: Ontology) -> None:
    draft = bumped(world.policy.read_text(), 2)

    async def body(client: TestClient) -> list[int]:  # type: ignore[type-arg]
        statuses = []
        for headers in ({"Origin": "http://evil.example"}, {"Sec-Fetch-Site": "cross-site"}):
            answer = await client.post(
                f"/policies/{PUBLISHER}/sign", data={"draft": draft}, headers=headers
            )
            statuses.append(answer.status)
        return statuses

    assert _run(console_config(world, ontology), body) == [403, 403]
    assert world.policy.read_text() != draft


def test_who_gets_what_for_every_known_subscriber_and_one_certificate(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    async def body(client: TestClient) -> tuple[str, str, str, str]:  # type: ignore[type-arg]
        return (
            await _text(client, "/who"),
            await _text(client, "/who/carl"),
            await _post(client, "/who", cert=(world.certs / "alice.pem").read_text()),
            await _post(client, "/who", 400, cert="not a certificate"),
        )

    grid, carl, alice, bad = _run(console_config(world, ontology), body)
    assert '<a href="/who/alice">alice</a></td><td>' in grid
    alice_row = grid.split('<a href="/who/alice">alice</a></td><td>')[1].split("</td>")[0]
    assert "WorkOrder" in alice_row and "MachineSetting" in alice_row
    carl_row = grid.split('<a href="/who/carl">carl</a></td><td>')[1].split("</td>")[0]
    assert "Production" in carl_row and "MachineSetting" not in carl_row
    assert "<td>deny</td><td>MachineSetting</td><td>C2</td>" in carl
    assert "certificate of alice (role subscriber)" in alice and "<td>R1</td>" in alice
    assert 'role="alert"' in bad


def test_a_revoked_subscriber_is_not_known(world: ConsoleWorld, ontology: Ontology) -> None:
    revoke_party(world.certs, "carl", now=datetime.now(UTC))
    for name in ("crl.pem", "ca.pem"):
        shutil.copy(world.certs / name, world.subscribers / name)
    grid = _run(console_config(world, ontology), lambda c: _text(c, "/who"))
    assert "/who/alice" in grid and "/who/carl" not in grid


def test_the_audit_report_is_the_newest_and_served_sandboxed(
    world: ConsoleWorld, ontology: Ontology, tmp_path: Path
) -> None:
    runs = tmp_path / "audits"
    for name, when in (("monday", 1_000_000), ("tuesday", 2_000_000)):
        report = runs / name / "report.html"
        report.parent.mkdir(parents=True)
        report.write_text(f"<html><body>audit of {name}<script>x()</script></body></html>")
        os.utime(report, (when, when))
    assert latest_report(runs) == runs / "tuesday" / "report.html"

    async def body(client: TestClient) -> tuple[str, str, str]:  # type: ignore[type-arg]
        page = await _text(client, "/audit")
        answer = await client.get("/audit/report.html")
        return page, await answer.text(), answer.headers["Content-Security-Policy"]

    page, report_text, csp = _run(console_config(world, ontology, audit=runs), body)
    assert "tuesday" in page and "audit of tuesday" in report_text
    assert csp.startswith("sandbox;") and "script-src" not in csp


def test_without_an_audit_report_the_page_says_how_to_give_one(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    page = _run(console_config(world, ontology), lambda c: _text(c, "/audit", 404))
    assert "--audit-report" in page


def test_an_unknown_publisher_is_not_found(world: ConsoleWorld, ontology: Ontology) -> None:
    _run(console_config(world, ontology), lambda c: _text(c, "/policies/nobody", 404))


def test_a_policy_file_broken_behind_the_consoles_back_is_reported_not_a_crash(
    world: ConsoleWorld, ontology: Ontology
) -> None:
    config = console_config(world, ontology)
    world.policy.write_text("[policy\n")

    async def body(client: TestClient) -> tuple[str, str]:  # type: ignore[type-arg]
        page = await _text(client, f"/policies/{PUBLISHER}", 500)
        diff = await _post(client, f"/policies/{PUBLISHER}/diff", 500, draft="[policy]\n")
        return page, diff

    page, diff = _run(config, body)
    assert "malformed TOML" in page and "malformed TOML" in diff
