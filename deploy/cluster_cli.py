"""``xdn cluster up|down|status TOPOLOGY``: a local multi-site network for development."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deploy.cluster import Topology

__all__ = ["client_commands", "register"]


def _cluster(args: argparse.Namespace) -> object:
    from deploy.cluster import Cluster, load_topology

    workdir = args.workdir or Path("build") / "cluster" / args.topology.stem
    return Cluster(load_topology(args.topology), workdir, verbose=args.verbose > 0)


def _up(args: argparse.Namespace) -> int:
    from deploy.cluster import Cluster

    cluster = _cluster(args)
    assert isinstance(cluster, Cluster)
    addresses = cluster.up(timeout=args.timeout)
    print(f"cluster up in {cluster.workdir}")
    for site in cluster.topology.sites:
        pid = cluster.pid_file(site.name).read_text().strip()
        print(f"  {site.name:<12} {site.block:<22} {addresses[site.name]:<21} pid {pid:<8} "
              f"metrics {cluster.metrics_url(site.name) or '-'}")
        if (web := cluster.web_url(site.name)) is not None:
            print(f"  {'':<12} web {web}  inbox: {web}inbox/")
    for line in client_commands(cluster.topology, cluster.workdir, addresses):
        print(line)
    return 0


def _relative(path: Path) -> Path:
    """``path`` relative to the working directory when under it (shorter commands)."""
    try:
        return path.resolve().relative_to(Path.cwd().resolve())
    except ValueError:
        return path


def _sample(publisher: str) -> str:
    """A sample document of ``publisher`` in the repository, else a placeholder."""
    from xdn.paths import REPO_ROOT

    found = sorted((REPO_ROOT / "ontology" / "samples").glob(f"{publisher}-*.xml"))
    return str(_relative(found[0])) if found else "DOC.xml"


def client_commands(topology: Topology, workdir: Path, addresses: Mapping[str, str]) -> list[str]:
    """The complete ``xdn subscribe`` / ``xdn publish`` / ``xdn unsubscribe`` commands for the
    cluster's clients (certificates, policies and state in ``workdir``), and where the policies
    the sites enforce live."""
    work = _relative(workdir)
    certs, state = work / "certs", work / "clients"
    roots = [s for s in topology.sites if s.uplink is None]
    lines = []
    for sub in topology.subscribers:
        lines += [
            f"  subscriber {sub.name}: xdn -v subscribe --connect {addresses[sub.site]} "
            f"--name {sub.name} --certs {certs} --out {work / 'inbox' / sub.name} "
            f"--state-dir {state}",
            f"  {'':<{len(sub.name) + 11}} xdn unsubscribe --connect {addresses[sub.site]} "
            f"--name {sub.name} --certs {certs} --state-dir {state}",
        ]
    for pub in topology.publishers if roots else ():
        lines.append(
            f"  publisher {pub.name}: xdn publish {_sample(pub.name)} "
            f"--connect {addresses[roots[0].name]} --name {pub.name} --certs {certs} "
            f"--mapping {_relative(pub.mapping)} "
            f"--policy {work / 'policies' / pub.policy.name} --state-dir {state}"
        )
    if topology.publishers:
        lines.append(
            f"  policies: the sites enforce the cluster's own copies, re-signed with each "
            f"publisher's key in {work / 'policies'}/ (not the repository's policies/); to change "
            f"one, edit the copy, then `xdn policy sign {work / 'policies'}/NAME.toml "
            f"--key {certs}/NAME.key` (the sites reload it)"
        )
    return lines


def _status(args: argparse.Namespace) -> int:
    from deploy.cluster import Cluster

    cluster = _cluster(args)
    assert isinstance(cluster, Cluster)
    rows = cluster.status()
    print(f"{'site':<12} {'block':<22} {'pid':>8} {'alive':<6} {'port':>6} "
          f"{'health':<16} {'queued':>7}")
    for row in rows:
        queued = "-" if row.queued is None else f"{row.queued:g}"
        print(f"{row.name:<12} {row.block:<22} {row.pid or '-':>8} "
              f"{'yes' if row.alive else 'no':<6} {row.port or '-':>6} {row.health:<16} "
              f"{queued:>7}")
        if row.web_url is not None:
            print(f"  web {row.web_url}  inbox: {row.inbox_url}")
    serving = sum(1 for r in rows if r.health == "SERVING")
    print(f"{serving}/{len(rows)} sites serving")
    return 0 if serving == len(rows) else 3


def _down(args: argparse.Namespace) -> int:
    from deploy.cluster import Cluster

    cluster = _cluster(args)
    assert isinstance(cluster, Cluster)
    outcome = cluster.down(timeout=args.timeout)
    for name, how in outcome.items():
        print(f"  {name}: {how}")
    print(f"cluster down ({sum(1 for h in outcome.values() if h != 'not running')} stopped)")
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``xdn cluster up|down|status``."""
    parser = subparsers.add_parser(
        "cluster",
        help="run N local sites from a topology file in the background",
        description="Start, inspect and stop a development network of disseminator sites "
        "described by a topology TOML (see deploy/topologies/). Sites run detached; their "
        "pids live in WORKDIR/run/.",
    )
    sub = parser.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    for name, func, help_text, timeout in (
        ("up", _up, "lay out PKI and configs, start every site detached", 60.0),
        ("status", _status, "pid, port, gRPC health and queue depth of every site "
         "(exit 3 unless all serve)", 3.0),
        ("down", _down, "SIGTERM every site (SIGKILL after --timeout), remove pid files", 15.0),
    ):
        action = sub.add_parser(name, help=help_text, description=help_text)
        action.add_argument("topology", type=Path, help="topology TOML")
        action.add_argument(
            "--workdir", type=Path, default=None,
            help="where the PKI, configs, state and pid files live "
            "(default build/cluster/TOPOLOGY-NAME)",
        )
        action.add_argument("--timeout", type=float, default=timeout,
                            help=f"seconds (default {timeout:g})")
        action.set_defaults(func=func)
