"""The walk below a site (deploy.site_tree) over in-memory sites, and how the tree is printed
(cli.admin._site_tree): checks, unreachable sites, loops, the bound on sites asked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import replace

import pytest

from cli.admin._site_tree import tree_counts, tree_json, tree_lines
from deploy.site_admin import DownlinkState, ProvenSite, SiteProbe, SiteReport, SubscriberState
from deploy.site_tree import TreeSite, disagreements, same_address, walk
from xdn.errors import XdnError

BLOCKS = {"d1": "ProductionProcess", "d2": "WorkOrder", "d3": "Production", "d4": "Machine"}


def _addr(name: str) -> str:
    return f"127.0.0.1:{5000 + int(name[1:])}"


def _link(name: str, *, address: str | None = None, connected: bool = True) -> DownlinkState:
    return DownlinkState(
        site=name,
        block=BLOCKS[name],
        connected=connected,
        members=1,
        queue_depth=0,
        address=_addr(name) if address is None else address,
    )


def _report(name: str, uplink: str | None, *below: DownlinkState, **extra: object) -> SiteReport:
    report = SiteReport(
        site=name,
        block=BLOCKS[name],
        view="full",
        root=uplink is None,
        uplink_address="" if uplink is None else _addr(uplink),
        uplink_connected=True,
        downlinks=below,
        address=_addr(name),
    )
    return replace(report, **extra)  # type: ignore[arg-type]


def _honest(report: SiteReport) -> SiteProbe:
    return SiteProbe(
        report=report,
        proven=ProvenSite(name=report.site, block=report.block, address=report.address),
    )


class _Sites:
    """Sites by address: what each answers (a probe) or how it fails (an error)."""

    def __init__(self, answers: Mapping[str, SiteProbe | XdnError]) -> None:
        self.answers = dict(answers)
        self.asked: list[str] = []

    async def __call__(self, address: str) -> SiteProbe:
        self.asked.append(address)
        answer = self.answers.get(address, XdnError(f"{address}: UNAVAILABLE: nothing there"))
        if isinstance(answer, XdnError):
            raise answer
        return answer


def _chain() -> dict[str, SiteProbe | XdnError]:
    """d1 → d2 → d3, d1 → d4, all honest."""
    return {
        _addr("d1"): _honest(_report("d1", None, _link("d2"), _link("d4"))),
        _addr("d2"): _honest(_report("d2", "d1", _link("d3"))),
        _addr("d3"): _honest(_report("d3", "d2")),
        _addr("d4"): _honest(_report("d4", "d1")),
    }


def _walk(answers: Mapping[str, SiteProbe | XdnError], **kw: int) -> tuple[TreeSite, _Sites]:
    sites = _Sites(answers)
    return asyncio.run(walk(_addr("d1"), sites, **kw)), sites


def test_every_site_below_is_asked_once_at_the_address_its_uplink_gives() -> None:
    root, sites = _walk(_chain())
    assert sorted(sites.asked) == sorted(_addr(n) for n in ("d1", "d2", "d3", "d4"))
    assert [(s.name, s.address) for s in root.sites()] == [
        (n, _addr(n)) for n in ("d1", "d2", "d3", "d4")
    ]
    assert all(s.disagreements == () and s.report is not None for s in root.sites())
    assert root.below[0].listed == _link("d2") and root.listed is None
    assert tree_counts(root).healthy


def test_an_unreachable_site_is_kept_with_the_reason_and_the_walk_goes_on() -> None:
    answers = _chain()
    answers[_addr("d2")] = XdnError(f"{_addr('d2')}: UNAVAILABLE: connection refused")
    root, sites = _walk(answers)
    d2, d4 = root.below
    assert d2.report is None and "connection refused" in d2.error and d2.below == ()
    assert d4.report is not None  # its sibling was asked all the same
    assert _addr("d3") not in sites.asked  # nothing says where d3 is but d2
    counts = tree_counts(root)
    assert (counts.sites, counts.unreachable, counts.healthy) == (3, 1, False)


def test_a_downlink_without_a_known_address_is_unreachable_and_not_asked() -> None:
    answers = _chain()
    answers[_addr("d1")] = _honest(_report("d1", None, _link("d2", address="")))
    root, sites = _walk(answers)
    assert root.below[0].error == "d1 knows no address of it (no live DHT record found)"
    assert sites.asked == [_addr("d1")]


def test_the_first_site_not_answering_is_an_error() -> None:
    with pytest.raises(XdnError, match="UNAVAILABLE"):
        _walk({})
    with pytest.raises(ValueError, match="max_sites"):
        _walk(_chain(), max_sites=0)


def _d2_says(probe: SiteProbe) -> tuple[str, ...]:
    return disagreements(
        probe,
        asked_at=_addr("d2"),
        listed=_link("d2"),
        uplink=_report("d1", None, _link("d2")),
        uplink_asked_at=_addr("d1"),
    )


@pytest.mark.parametrize(
    ("probe", "said"),
    [
        (_honest(_report("d2", "d1")), ()),
        (
            SiteProbe(report=_report("d2", "d1"), proven=None, proof_error="UNIMPLEMENTED: no"),
            ("who answers here is not proven (signed ping): UNIMPLEMENTED: no",),
        ),
        (
            SiteProbe(
                report=_report("d2", "d1"),
                proven=ProvenSite(name="d3", block="Production", address=_addr("d2")),
            ),
            ("the signed ping proves site d3, not d2",),
        ),
        (
            SiteProbe(
                report=_report("d2", "d1"),
                proven=ProvenSite(name="d2", block="Production", address=_addr("d2")),
            ),
            ("its certificate lets it serve block Production, not WorkOrder",),
        ),
        (
            SiteProbe(
                report=_report("d2", "d1"),
                proven=ProvenSite(name="d2", block="WorkOrder", address=_addr("d3")),
            ),
            (f"it announces {_addr('d3')}, not {_addr('d2')} where it was asked",),
        ),
        (
            _honest(_report("d2", "d1", site="d3", block="Production")),
            ("it says it is d3; d1 lists d2 here",),
        ),
        (
            _honest(_report("d2", "d1", block="Machine")),
            ("it says it serves Machine; d1 says WorkOrder",),
        ),
        (_honest(_report("d2", "d3")), (f"its uplink is {_addr('d3')}, not d1 ({_addr('d1')})",)),
        (
            _honest(_report("d2", "d1", uplink_address="")),
            (f"its uplink is not found yet, not d1 ({_addr('d1')})",),
        ),
        (_honest(_report("d2", None)), ("it says it is a root site; d1 lists it as a downlink",)),
        (_honest(_report("d2", "d3", view="publisher")), ()),  # shows no uplink to check
    ],
)
def test_what_a_downlink_says_is_held_against_its_proof_and_its_uplink(
    probe: SiteProbe, said: tuple[str, ...]
) -> None:
    assert _d2_says(probe) == said


def test_the_uplink_may_be_named_by_the_address_it_was_asked_at() -> None:
    moved = _report("d1", None, _link("d2"), address="")  # d1 announces no address yet
    probe = _honest(_report("d2", "d1"))
    assert (
        disagreements(
            probe,
            asked_at=_addr("d2"),
            listed=_link("d2"),
            uplink=moved,
            uplink_asked_at=_addr("d1"),
        )
        == ()
    )


@pytest.mark.parametrize(
    ("a", "b", "same"),
    [
        ("127.0.0.1:7000", "127.0.0.1:7000", True),
        ("localhost:7000", "127.0.0.1:7000", True),
        ("[::1]:7000", "127.0.0.2:7000", True),
        ("localhost:7000", "127.0.0.1:7001", False),
        ("site.example:7000", "127.0.0.1:7000", False),
        ("10.0.0.1:7000", "10.0.0.2:7000", False),
        ("localhost", "127.0.0.1", False),
    ],
)
def test_same_address(a: str, b: str, same: bool) -> None:
    assert same_address(a, b) is same and same_address(b, a) is same


def test_the_first_site_asked_by_localhost_agrees_by_another_name_it_does_not() -> None:
    answers = _chain()
    answers["localhost:5001"] = answers[_addr("d1")]
    root = asyncio.run(walk("localhost:5001", _Sites(answers)))
    assert [s.disagreements for s in root.sites()] == [()] * 4
    answers["d1.example:5001"] = answers[_addr("d1")]
    root = asyncio.run(walk("d1.example:5001", _Sites(answers)))
    assert root.disagreements == (
        f"it announces {_addr('d1')}, not d1.example:5001 where it was asked",
    )
    assert root.below[0].disagreements == ()  # d2's uplink is d1 by the address d1 announces


def test_a_loop_or_a_site_listed_twice_is_asked_once() -> None:
    answers = _chain()
    # d3 lists d1 (a loop); d4 claims to be d2 (already shown)
    answers[_addr("d3")] = _honest(_report("d3", "d2", _link("d1")))
    answers[_addr("d4")] = _honest(_report("d4", "d1", site="d2", block="WorkOrder"))
    root, sites = _walk(answers)
    assert sorted(sites.asked) == sorted(_addr(n) for n in ("d1", "d2", "d3", "d4"))
    loop = root.below[0].below[0].below[0]
    assert (loop.name, loop.repeated, loop.report) == ("d1", True, None)
    impostor = root.below[1]
    assert impostor.repeated and impostor.below == ()
    assert impostor.disagreements == ("it says it is d2; d1 lists d4 here",)


def test_the_walk_asks_at_most_max_sites() -> None:
    many = [
        DownlinkState(
            site=f"x{i}",
            block="Machine",
            connected=True,
            members=0,
            queue_depth=0,
            address=f"127.0.0.1:{6000 + i}",
        )
        for i in range(50)
    ]
    answers: dict[str, SiteProbe | XdnError] = {_addr("d1"): _honest(_report("d1", None, *many))}
    root, sites = _walk(answers, max_sites=5)
    assert len(sites.asked) == 5
    not_asked = [s for s in root.below if s.error.startswith("not asked")]
    assert len(not_asked) == 46 and len(root.below) == 50


def _small_tree() -> TreeSite:
    bob = SubscriberState(
        name="bob@" + "0f" * 16, grants={"p": ("C",)}, queue_depth=3, connected=False
    )
    amy = SubscriberState(name="amy@" + "1a" * 16, grants={}, queue_depth=1, connected=True)
    d2 = _report("d2", "d1", subscribers_total=3, subscribers=(amy, bob), queued_total=4)
    return TreeSite(
        address=_addr("d1"),
        report=_report("d1", None, _link("d2"), _link("d3")),
        below=(
            TreeSite(
                address=_addr("d2"),
                listed=_link("d2"),
                report=d2,
                disagreements=("it announces elsewhere",),
            ),
            TreeSite(
                address=_addr("d3"),
                listed=replace(_link("d3"), connected=False, queue_depth=7),
                error="UNAVAILABLE: refused",
            ),
        ),
    )


def test_the_tree_as_text() -> None:
    assert tree_lines(_small_tree()) == [
        f"d1 at {_addr('d1')}: block ProductionProcess, uplink none: a root site",
        "│  subscribers 0 (0 connected); 0 deliveries queued at the site",
        f"├─ d2 at {_addr('d2')}: block WorkOrder, uplink {_addr('d1')} (connected)",
        "│     link from d1: connected, 1 member(s) behind it, 0 queued for it",
        "│     subscribers 3 (the first 2: 1 connected; deepest queue: bob 3); "
        "4 deliveries queued at the site",
        "│     DISAGREES: it announces elsewhere",
        f"└─ d3 at {_addr('d3')}: UNREACHABLE: UNAVAILABLE: refused",
        "      link from d1: not connected, 1 member(s) behind it, 7 queued for it",
    ]
    counts = tree_counts(_small_tree())
    assert str(counts) == "3 site(s): 2 answered, 1 unreachable, 1 with disagreements"


def test_the_tree_as_json() -> None:
    data = json.loads(json.dumps(tree_json(_small_tree())))
    assert (data["site"], data["listed"], data["unreachable"]) == ("d1", None, None)
    d2, d3 = data["below"]
    assert d2["status"]["uplink"] == {"address": _addr("d1"), "connected": True, "root": False}
    assert [r["name"] for r in d2["status"]["subscribers"]] == [
        "amy@" + "1a" * 16,
        "bob@" + "0f" * 16,
    ]
    assert d2["disagreements"] == ["it announces elsewhere"] and d2["proven"] is None
    assert d3["status"] is None and d3["unreachable"] == "UNAVAILABLE: refused"
    assert d3["listed"] == {
        "site": "d3",
        "block": "Production",
        "connected": False,
        "members": 1,
        "queue_depth": 7,
    }
    proven = tree_json(
        TreeSite(
            address="a:1",
            report=_report("d1", None),
            proven=ProvenSite(name="d1", block="B", address="a:1"),
        )
    )
    assert proven["proven"] == {"site": "d1", "block": "B", "address": "a:1"}


def test_a_publisher_view_and_a_repeated_site_print_what_they_can() -> None:
    counts_only = _report("d1", None, view="publisher", subscribers_total=5)
    tree = TreeSite(
        address=_addr("d1"),
        report=counts_only,
        below=(TreeSite(address=_addr("d2"), listed=_link("d2"), repeated=True),),
    )
    assert tree_lines(tree) == [
        f"d1 at {_addr('d1')}: block ProductionProcess (publisher view: no links or queues shown)",
        f"└─ d2 at {_addr('d2')}: already shown above (not asked again)",
        "      link from d1: connected, 1 member(s) behind it, 0 queued for it",
    ]
    assert tree_counts(tree).sites == 1
