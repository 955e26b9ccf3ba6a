"""Where a publication may go and what it reached: the site's and the publisher's decisions.

Theory of operation. Publishers are the roots of the dissemination tree (paper §III.C): a site
routes what it receives only downwards, to its local subscribers and its downlinks. So

* a document published at a site that has an uplink never reaches the rest of the network
  (at best the sub-tree below that site), and
* a document from a publisher whose signed policy the site does not enforce reaches nobody: no
  subscriber can be authorised for it.

Both used to be accepted in silence. Now a site states where it stands for the calling
publisher (:class:`Standing`) in its ``Membership`` and ``PublishAck`` replies, and

* the site refuses a ``Publish`` for the reason :func:`site_refusal` gives (the servicer maps
  it to ``FAILED_PRECONDITION``, with the uplink in the ``xdn-redirect`` trailer when known);
* the publisher checks the standing its site reports *before* it rekeys or encrypts anything
  (:func:`check_standing`): the same two refusals, and one about policy versions. The key
  service evaluates the publisher's *own* copy of its policy to decide who gets keys. If the
  site enforces a newer version, the copy is stale: keys would follow rules the administrator
  has replaced (a revoked grant still honoured, a new one not). That is refused, unless the
  operator allows it explicitly, which makes it a warning. A copy newer than the site's is
  only a warning: the site reloads signed policies when their files change.

Publishing is idempotent per publication. The publisher names each one by a ``publish_id`` (a
keyed digest of its document id and content) and the root site remembers, per document, the id
of the newest version it routed (:mod:`disseminator.publications`). The same content published
again — a retry after a crash, a lost acknowledgement, an operator's second try — is answered
:class:`PublishedBefore` (the version routed, its sequence number and the publisher's signed
message routed) instead of becoming a new version that every subscriber would receive again;
the publisher records and reports that version, and logs that message, not one it signed anew.

A document that reaches no subscriber now is not an error (the site may retain it for
subscribers who join later): :func:`describe_reach` says so in the publisher's output.

A site is a root when it has no configured uplink and its block has no super-concept; a site
whose block has one is never a root, even while it is still looking for its uplink.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdn.errors import UsageError

__all__ = [
    "PublishedBefore",
    "Reach",
    "Refusal",
    "Standing",
    "check_standing",
    "describe_reach",
    "site_refusal",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Standing:
    """Where one site stands for one publisher.

    Attributes:
        site: the site's name.
        root: it has no uplink, so what is published here can reach every site.
        policy_version: version of the publisher's policy the site enforces; 0: none.
        uplink: the site's uplink address, when known.
    """

    site: str
    root: bool
    policy_version: int
    uplink: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.site, str) or not self.site:
            raise ValueError("site must be a non-empty str")
        if isinstance(self.policy_version, bool) or not isinstance(self.policy_version, int):
            raise TypeError("policy_version must be an int")
        if self.policy_version < 0:
            raise ValueError("policy_version must not be negative")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedBefore:
    """A publication a site had routed already: what it routed then.

    Attributes:
        version: the document version routed.
        sequence: its number in the publisher's signed sequence (0: unsequenced).
        provenance: the publisher's signed provenance message routed (canonical N-Quads; empty
            when provenance was switched off).
    """

    version: int
    sequence: int = 0
    provenance: bytes = b""

    def __post_init__(self) -> None:
        if isinstance(self.version, bool) or not isinstance(self.version, int):
            raise TypeError("version must be an int")
        if self.version < 1:
            raise ValueError("version must be at least 1")
        if isinstance(self.sequence, bool) or not isinstance(self.sequence, int):
            raise TypeError("sequence must be an int")
        if self.sequence < 0:
            raise ValueError("sequence must not be negative")
        if not isinstance(self.provenance, bytes):
            raise TypeError("provenance must be bytes")


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """Why a site refuses a publication, and where to publish instead (when known)."""

    reason: str
    uplink: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Reach:
    """What one publish request reached at the site.

    Attributes:
        fragments: fragments of the document accepted (0: a version routed before).
        destinations: downlink sites and local subscribers a part of it was queued for.
        subscribers: registered subscribers (here or behind downlinks) granted a fragment.
        retained: the site keeps the document for subscribers who join later.
        before: the request's publication was routed before (nothing of it routed again).
    """

    fragments: int = 0
    destinations: int = 0
    subscribers: int = 0
    retained: bool = False
    before: PublishedBefore | None = None


def site_refusal(standing: Standing, publisher: str) -> Refusal | None:
    """Why ``standing.site`` must refuse a ``Publish`` from ``publisher``; ``None`` to accept.

    >>> site_refusal(Standing(site="d1", root=True, policy_version=2), "acme") is None
    True
    """
    site = standing.site
    if not standing.root:
        where = (
            f"its uplink is {standing.uplink}"
            if standing.uplink
            else "it is still looking for its uplink"
        )
        return Refusal(
            reason=f"site {site} is not a root site: it routes only to the sites and "
            "subscribers below it, so the rest of the network would never get this "
            f"publication; publish at the root site ({where})",
            uplink=standing.uplink,
        )
    if standing.policy_version == 0:
        return Refusal(
            reason=f"site {site} enforces no policy of publisher {publisher!r}, so no "
            "subscriber may receive its documents: add a [[publisher]] entry with its signed "
            "policy to the configuration of every site, then restart them",
        )
    return None


def check_standing(
    standing: Standing, *, publisher: str, policy_version: int, allow_older_policy: bool = False
) -> tuple[str, ...]:
    """The publisher's check of the site it is about to publish at; returns warnings.

    Args:
        standing: what the site reports.
        publisher: the publisher's name.
        policy_version: version of the policy the publisher's key service evaluates.
        allow_older_policy: publish even if the site enforces a newer policy (a warning).

    Raises:
        UsageError: the site would refuse (not a root, the publisher unknown there), or it
            enforces a newer version of the publisher's policy than ``policy_version``.
    """
    refused = site_refusal(standing, publisher)
    if refused is not None:
        raise UsageError(refused.reason)
    site, enforced = standing.site, standing.policy_version
    if enforced > policy_version:
        problem = (
            f"site {site} enforces version {enforced} of {publisher}'s policy, but this "
            f"publisher evaluates version {policy_version}: its key service would hand out "
            "keys by rules that were replaced"
        )
        if not allow_older_policy:
            raise UsageError(
                f"{problem}; publish with the current signed policy (--policy), or pass "
                "--allow-older-policy to publish anyway"
            )
        return (f"{problem} (published anyway: --allow-older-policy)",)
    if enforced < policy_version:
        return (
            f"site {site} still enforces version {enforced} of {publisher}'s policy, this "
            f"publisher evaluates version {policy_version}: until the site loads the new "
            "signed policy it routes by the old one",
        )
    return ()


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def describe_reach(reach: Reach, site: str) -> str:
    """One phrase for the publisher's output: who the document reached.

    >>> describe_reach(Reach(fragments=5, destinations=2, subscribers=3), "d1")
    'reached 3 subscribers (2 destinations at d1)'
    """
    if reach.before is not None:
        return (
            f"{site} had routed this content as v{reach.before.version} already; "
            "nothing new was queued"
        )
    if reach.fragments == 0:
        return f"{site} had routed this version before; nothing new was queued"
    if reach.subscribers:
        return (
            f"reached {_plural(reach.subscribers, 'subscriber')} "
            f"({_plural(reach.destinations, 'destination')} at {site})"
        )
    if reach.retained:
        return (
            "no subscriber is granted any of its concepts now; "
            f"{site} retains it for subscribers who join later"
        )
    return (
        "no subscriber is granted any of its concepts now, and "
        f"{site} retains no documents: nobody will receive it"
    )
