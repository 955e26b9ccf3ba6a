"""``xdn cluster up|down|status TOPOLOGY``: a local multi-site network for development."""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["register"]


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
    for sub in cluster.topology.subscribers:
        print(f"  subscriber {sub.name}: xdn subscribe --connect {addresses[sub.site]} "
              f"--name {sub.name} --certs {cluster.net.certs}")
    return 0


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
