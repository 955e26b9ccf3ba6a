"""Step 7 of ``xdn demo``: linked data over HTTPS, and the receipts in the root site's inbox.

1. alice dereferences the message URI d2 minted for her (from d2's endpoint, as alice) and
   verifies its chain under the CA alone;
2. production-dept posts an ``as:Announce`` of it to its root site's inbox (d1) and lists it;
3. carol's receipts of the documents she got at subscribe time (d2's ``retained-`` hops) were
   signed only once their keys came, and went with her acknowledgement of the key delivery
   that opened them; they are also posted, as carol, to d2's inbox — each her own signed
   receipt, as her provenance log holds it, joined to the message d2 sent her (``200``: d2 has
   it already; ``201`` had the acknowledgement not come yet) — an inbox used as a sender would;
4. d1's inbox must then list, within a deadline, a receipt of every document version each
   subscriber accepted, each read by its publisher (a publisher is listed the receipts of its
   own documents only) and verified under the CA: who received what, by which path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import UTC, datetime
from urllib.parse import unquote

from deploy.network import LocalNetwork, wait_until
from deploy.web_client import WebClient
from xdn import certs, provenance, rdf
from xdn import linked_data as ld
from xdn.errors import PeerError
from xdn.receipts import Receipt, read_receipt

__all__ = ["linked_data_step"]

Say = Callable[[str], None]


def linked_data_step(net: LocalNetwork, say: Say) -> bool:
    """Run step 7; whether every check held."""
    say("[7/8] linked data over HTTPS: a message URI dereferenced, the publisher site's inbox")
    uri = _dereference(net, say)
    if uri is None:
        return False
    publisher = WebClient(net.web_url("d1"), certs=net.certs, name="production-dept")
    notification = {
        "@context": "https://www.w3.org/ns/activitystreams", "@id": "", "type": "Announce",
        "actor": certs.node_uri("production-dept"), "object": uri,
        "summary": "alice's copy of a production-dept document, as d2 sent it",
    }
    posted = publisher.request("POST", "/inbox/", body=json.dumps(notification).encode(),
                               content_type="application/ld+json")
    listing = publisher.request("GET", "/inbox/", accept="text/turtle").body.decode()
    count = listing.count(certs.node_uri("d1") + "inbox/") - 1  # (the inbox names itself)
    say(f"      production-dept: POST {net.web_url('d1')}inbox/ → {posted.status} "
        f"{posted.location}; the inbox lists {count} notification(s)")
    held_ok = _post_held_receipts(net, "carol", "d2", say)
    return (posted.status == 201 and count >= 1 and held_ok
            and _receipts_at_the_root(net, say))


def _dereference(net: LocalNetwork, say: Say) -> str | None:
    """alice reads d2's message to her and verifies it; its URI."""
    d2 = certs.node_uri("d2")
    pattern = re.compile(rf"<({re.escape(d2)}msg/[^>#]*/subscriber-alice[^>#]*)#")
    log = net.logs / "d2.nq"
    if not wait_until(lambda: log.exists() and pattern.search(log.read_text()) is not None, 30):
        say("      FAILED: d2 logged no message to alice")
        return None
    found = pattern.search(log.read_text())
    assert found is not None
    uri = found.group(1)
    alice = WebClient(net.web_url("d2"), certs=net.certs, name="alice")
    message = provenance.Message.from_nquads(
        alice.request("GET", uri, accept="application/n-quads").body
    )
    provenance.ChainVerifier((net.certs / "ca.pem").read_bytes()).verify(
        message, at=datetime.now(UTC)
    )
    path = " → ".join(e.sender.removeprefix("https://").split(".")[0]
                      for e in message.envelopes())
    say(f"      alice: GET {uri}")
    say(f"        from d2's endpoint {net.web_url('d2')}: {len(message.quads)} statements, "
        f"hops {path} → alice, every signature verified under the CA alone")
    return uri


def _post_held_receipts(net: LocalNetwork, who: str, site: str, say: Say) -> bool:
    """Post ``who``'s receipts of the documents ``site`` replayed to it at subscribe time."""
    node = certs.node_uri(site)
    replays = re.compile(rf"<({re.escape(node)}msg/([^/>#]+)/v([0-9]+)/retained-{who}[^>#]*)#")
    hops = sorted(set(replays.findall((net.logs / f"{site}.nq").read_text())))
    own = [q for q in rdf.parse_nquads((net.logs / f"{who}.nq").read_bytes()) if q.g is not None]
    client = WebClient(net.web_url(site), certs=net.certs, name=who)
    ok = True
    for uri, document, version in hops:
        mine = provenance.message_uri(certs.node_uri(who), unquote(document), f"v{version}",
                                      "received")
        graphs = [q for q in own if q.g is not None and q.g.value.startswith(mine + "#")]
        if not graphs:
            continue  # not accepted (yet): nothing to post
        served = provenance.Message.from_nquads(
            client.request("GET", uri, accept="application/n-quads").body
        )
        receipt = provenance.Message(quads=served.quads | frozenset(graphs))
        try:
            reply = client.request("POST", "/inbox/", body=receipt.to_nquads(),
                                   content_type="application/n-quads")
        except PeerError as exc:
            say(f"      FAILED: {who}'s receipt of {document} v{version}: {exc}")
            ok = False
            continue
        say(f"      {who}: POST her receipt of {unquote(document)} v{version} (held until its "
            f"keys came) to {site}'s inbox → {reply.status} "
            f"{reply.location}")
    return ok


def _receipts_at_the_root(net: LocalNetwork, say: Say) -> bool:
    """Wait (60 s at most) until d1's inbox lists a receipt of every document version each
    subscriber accepted, each read by its publisher — who is listed its own receipts only —
    and verified under the CA; say who received what."""
    verifier = provenance.ChainVerifier((net.certs / "ca.pem").read_bytes())
    wanted = {
        (name, str(r["publisher"]), str(r["document"]), int(str(r["version"])))
        for name in net.subscribers for r in net.received(name)
    }
    clients = {
        publisher: WebClient(net.web_url("d1"), certs=net.certs, name=publisher)
        for publisher in sorted({w[1] for w in wanted})
    }
    read: dict[str, Receipt] = {}
    failures: list[str] = []

    def listed_to(publisher: str, client: WebClient) -> bool:
        """Read the receipts listed to ``publisher``; ``False`` on a failure (recorded)."""
        target = "/inbox/"
        while target:
            reply = client.request("GET", target, accept="application/n-quads")
            for found in re.findall(rb"<[^>]*/inbox/(receipt-[0-9a-f]+)>", reply.body):
                if (key := found.decode()) not in read:
                    body = client.request("GET", f"/inbox/{key}",
                                          accept="application/n-quads").body
                    try:
                        read[key] = read_receipt(body, verifier, at=datetime.now(UTC),
                                                 max_bytes=16 * 1024 * 1024)
                    except PeerError as exc:
                        failures.append(f"d1's receipt {key} does not verify: {exc}")
                        return False
                if read[key].publisher.name != publisher:
                    failures.append(f"d1 lists {publisher} a receipt of "
                                    f"{read[key].publisher.name}'s {read[key].document_id}")
                    return False
            target = ld.parse_links(reply.links).get("next", "")
        return True

    def arrived() -> bool:
        if not all(listed_to(publisher, client) for publisher, client in clients.items()):
            return True
        return wanted <= {_said(r) for r in read.values()}

    ok = wait_until(arrived, 60.0)
    listed = {_said(r): r for r in read.values()}
    say(f"      d1's inbox: {len(read)} delivery receipt(s) from the whole network, each read "
        "by its publisher (listed its own only) and verified under the CA:")
    for key in sorted(listed):
        r = listed[key]
        say(f"        {key[0]} received {key[1]}'s {key[2]} v{key[3]} "
            f"({r.fragments} fragments, via {' → '.join(r.sites)})")
    missing = wanted - set(listed)
    for line in failures + ([f"no receipt at d1 of {sorted(missing)}"] if missing else []):
        say(f"      FAILED: {line}")
    return ok and not missing and not failures and len(read) == len(listed)


def _said(receipt: Receipt) -> tuple[str, str, str, int]:
    """Who received which document version, as a receipt says."""
    return (receipt.subscriber.name, receipt.publisher.name, receipt.document_id,
            receipt.version or 0)
