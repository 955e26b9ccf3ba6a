"""The sites below a site, walked through their Admin services, each answer held against the rest.

Theory of operation. :func:`walk` asks one site for its status, then each downlink it lists at
the gRPC address it gives for it (the downlink's signed DHT record, as that site found it:
``AdminDownlink.address``), then their downlinks, and so on, each level's sites at once. It
needs no topology file: only the first address, and a certificate every site shows its full
status to (``admin``, ``auditor``, ``site``). How a site is asked is injected (a
:data:`Probe`, in practice :func:`deploy.site_admin.probe_site`), so the walk and its checks
run here without sockets.

Sites are not trusted, so a site's word is checked wherever another word or a proof says the
same thing (:func:`disagreements`):

* who answers at the address: its signed ping (:class:`~deploy.site_admin.ProvenSite`) must
  name the site the status names, with the block the status gives, and announce the address
  asked (a site relaying another's proof is caught there; :func:`same_address`);
* what the uplink says of it: the name and block under which its uplink lists it;
* what it says of its uplink: a downlink's uplink must be the site that lists it (its
  announced address, or the one it was asked at).

A site that does not answer is kept in the tree as unreachable, with the reason, and the walk
goes on elsewhere. A site listed twice (two uplinks claim it, or a loop) is asked once and
shown again as already shown; the walk asks at most ``max_sites`` sites, so a dishonest site
listing thousands of downlinks cannot make it run on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from deploy.site_admin import DownlinkState, ProvenSite, SiteProbe, SiteReport
from xdn.errors import XdnError

__all__ = [
    "MAX_SITES",
    "Probe",
    "TreeSite",
    "disagreements",
    "is_loopback",
    "same_address",
    "walk",
]

MAX_SITES = 200
PARALLEL = 8  # sites asked at once

Probe = Callable[[str], Awaitable[SiteProbe]]


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeSite:
    """One site of the tree: how its uplink lists it, what it says, what does not agree.

    Attributes:
        address: where it was asked ("": its uplink knows no address of it).
        listed: the row its uplink lists it with (``None``: the site the walk started at).
        report: its status (``None``: it was not reached; ``error`` says why).
        error: why it was not reached.
        proven: who proved to answer at ``address`` (``None``: see ``disagreements``).
        disagreements: what its answer says that another word or a proof contradicts.
        repeated: shown elsewhere in the tree already (not asked again).
        below: its downlinks, in the order it lists them.
    """

    address: str
    listed: DownlinkState | None = None
    report: SiteReport | None = None
    error: str = ""
    proven: ProvenSite | None = None
    disagreements: tuple[str, ...] = ()
    repeated: bool = False
    below: tuple[TreeSite, ...] = ()

    @property
    def name(self) -> str:
        """The site's name: as it says, else as its uplink lists it."""
        if self.report is not None:
            return self.report.site
        return self.listed.site if self.listed is not None else self.address

    def sites(self) -> list[TreeSite]:
        """This site and every one below it, depth first."""
        return [self, *(s for child in self.below for s in child.sites())]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Uplink:
    """The site that listed a downlink, as the checks need it."""

    report: SiteReport
    asked_at: str


def disagreements(
    probe: SiteProbe,
    *,
    asked_at: str,
    listed: DownlinkState | None = None,
    uplink: SiteReport | None = None,
    uplink_asked_at: str = "",
) -> tuple[str, ...]:
    """What in ``probe`` another word or a proof contradicts (module docstring), as sentences.

    Args:
        probe: the site's status and the proof of who answered.
        asked_at: the address it was asked at.
        listed: the row its uplink lists it with (``None``: the first site asked).
        uplink: that uplink's status.
        uplink_asked_at: where the uplink was asked.
    """
    report, proven, found = probe.report, probe.proven, []
    if proven is None:
        found.append(f"who answers here is not proven (signed ping): {probe.proof_error}")
    else:
        if proven.name != report.site:
            found.append(f"the signed ping proves site {proven.name}, not {report.site}")
        elif proven.block != report.block:
            found.append(f"its certificate lets it serve block {proven.block}, not {report.block}")
        if not same_address(proven.address, asked_at):
            found.append(f"it announces {proven.address}, not {asked_at} where it was asked")
    if listed is None or uplink is None:
        return tuple(found)
    if report.site != listed.site:
        found.append(f"it says it is {report.site}; {uplink.site} lists {listed.site} here")
    elif listed.block and report.block != listed.block:
        found.append(f"it says it serves {report.block}; {uplink.site} says {listed.block}")
    if report.view == "full":
        found.extend(_uplink_disagreement(report, uplink, uplink_asked_at))
    return tuple(found)


def _uplink_disagreement(report: SiteReport, uplink: SiteReport, asked_at: str) -> list[str]:
    if report.root:
        return [f"it says it is a root site; {uplink.site} lists it as a downlink"]
    known = {a for a in (uplink.address, asked_at) if a}
    if any(same_address(report.uplink_address, a) for a in known):
        return []
    where = report.uplink_address or "not found yet"
    return [f"its uplink is {where}, not {uplink.site} ({' or '.join(sorted(known))})"]


def same_address(a: str, b: str) -> bool:
    """Whether two ``HOST:PORT`` name the same place: equal, or the same port on loopback
    (``localhost:7000`` is ``127.0.0.1:7000``). Other names of one host cannot be told apart
    here: a site asked by another name than the one it announces is said to disagree."""
    if a == b:
        return True
    (host_a, _, port_a), (host_b, _, port_b) = a.rpartition(":"), b.rpartition(":")
    return bool(port_a) and port_a == port_b and is_loopback(host_a) and is_loopback(host_b)


def is_loopback(host: str) -> bool:
    """Whether a host name or address (``[::1]`` too) is this machine's loopback."""
    host = host.strip("[]").lower()
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _Walk:
    def __init__(self, probe: Probe, max_sites: int) -> None:
        self._probe = probe
        self._left = max_sites
        self._seen: set[str] = set()  # site names and addresses claimed
        self._gate = asyncio.Semaphore(PARALLEL)

    def _claim(self, *keys: str) -> bool:
        """Claim a site (by its name and address) for this walk; False if claimed before."""
        keys = tuple(k for k in keys if k)
        if any(k in self._seen for k in keys):
            return False
        self._seen.update(keys)
        return True

    async def first(self, address: str) -> TreeSite:
        self._left -= 1
        answer = await self._probe(address)
        self._claim(answer.report.site, address, answer.report.address)
        return await self._grow(address, answer, None, None)

    async def downlink(self, up: _Uplink, listed: DownlinkState) -> TreeSite:
        address = listed.address
        if not self._claim(listed.site, address):
            return TreeSite(address=address, listed=listed, repeated=True)
        if not address:
            return TreeSite(
                address="",
                listed=listed,
                error=(f"{up.report.site} knows no address of it (no live DHT record found)"),
            )
        if self._left <= 0:
            return TreeSite(
                address=address,
                listed=listed,
                error=("not asked: the walk asked as many sites as it may (--max-sites)"),
            )
        self._left -= 1
        try:
            async with self._gate:
                answer = await self._probe(address)
        except XdnError as exc:
            return TreeSite(address=address, listed=listed, error=str(exc))
        return await self._grow(address, answer, up, listed)

    async def _grow(
        self, address: str, answer: SiteProbe, up: _Uplink | None, listed: DownlinkState | None
    ) -> TreeSite:
        """The site ``answer`` describes, checked, with the sites below it."""
        report = answer.report
        found = disagreements(
            answer,
            asked_at=address,
            listed=listed,
            uplink=up.report if up else None,
            uplink_asked_at=up.asked_at if up else "",
        )
        here = TreeSite(
            address=address, listed=listed, report=report, proven=answer.proven, disagreements=found
        )
        if listed is not None and report.site != listed.site and not self._claim(report.site):
            return dataclasses.replace(here, repeated=True)  # it claims a site already shown
        nearer = _Uplink(report=report, asked_at=address)
        below = await asyncio.gather(*(self.downlink(nearer, d) for d in report.downlinks))
        return dataclasses.replace(here, below=tuple(below))


async def walk(address: str, probe: Probe, *, max_sites: int = MAX_SITES) -> TreeSite:
    """The site at ``address`` and every site below it (module docstring).

    Raises:
        XdnError: the first site did not answer (``probe``'s error: the walk has no start).
        ValueError: ``max_sites`` is not positive.
    """
    if max_sites < 1:
        raise ValueError("max_sites must be positive")
    return await _Walk(probe, max_sites).first(address)
