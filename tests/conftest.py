"""Settings for the whole test process, applied before any test module imports grpc."""

import pytest
from hypothesis import HealthCheck, settings

from xdn.grpc_fork import disable_grpc_fork_handlers

# Integration tests leave gRPC threads in this process; the Spark tests then fork to start the
# JVM. See xdn/grpc_fork.py for why the fork handlers must be off.
disable_grpc_fork_handlers()

# Property tests check what is computed, not how fast: on a loaded machine neither an example's
# duration nor slow input generation may fail them (the suite must pass on a busy machine).
settings.register_profile("xdn", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("xdn")


# The slowest tests of `make test` go first, so that parallel test processes (pytest-xdist deals
# the first quarter of the list out in turn) start them at once instead of ending on them.
_SLOWEST_FIRST = (
    "tests/integration/test_thousand_subscribers.py",
    "tests/spark/test_audit.py",
    "tests/spark/test_audit_faults.py",
    "tests/faults/test_fault_campaign.py",
    "tests/integration/test_site_messages.py",
    "tests/integration/test_revocation.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        path = item.nodeid.split("::")[0]
        return _SLOWEST_FIRST.index(path) if path in _SLOWEST_FIRST else len(_SLOWEST_FIRST)

    items.sort(key=rank)  # (stable: the order within each file and among the rest is kept)
