"""Keep ``fork`` + ``exec`` safe in processes that use gRPC.

gRPC's C core installs ``pthread_atfork`` handlers (its fork support is on by default). When
another thread is inside gRPC at the moment of ``fork()``, the core skips its parent-side
handler ("Other threads are currently calling into gRPC, skipping fork() handlers") but the
child still restarts the event engine's poller, whose epoll descriptor the child then closes
on its way to ``exec``. The child can die of SIGSEGV before it runs the new program.

``subprocess`` takes the plain ``fork()`` path whenever ``preexec_fn`` is given, and PySpark
gives one to launch its JVM, so a Spark audit started from a process with live gRPC threads
failed at random (``JAVA_GATEWAY_EXITED``), the more often the busier the machine: the longer
the child waits before ``exec``, the likelier the poller wakes first.

xdn never forks a process that goes on using gRPC; it forks only to ``exec``. Every entry point
(the ``xdn`` command, the test suite, the benchmarks) therefore turns the handlers off before
gRPC is first imported: the core reads the setting once, at import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import MutableMapping

__all__ = ["FORK_SUPPORT_VARIABLE", "disable_grpc_fork_handlers"]

FORK_SUPPORT_VARIABLE = "GRPC_ENABLE_FORK_SUPPORT"
_CORE_MODULE = "grpc._cython.cygrpc"


def disable_grpc_fork_handlers(environ: MutableMapping[str, str] = os.environ) -> None:
    """Turn gRPC's fork handlers off for this process and its children (unless set already).

    Raises:
        RuntimeError: gRPC is already loaded without the setting, so calling this is too late.
    """
    if _CORE_MODULE in sys.modules and FORK_SUPPORT_VARIABLE not in environ:
        raise RuntimeError(
            "disable_grpc_fork_handlers() must run before grpc is imported: gRPC reads "
            f"{FORK_SUPPORT_VARIABLE} once, when it loads"
        )
    environ.setdefault(FORK_SUPPORT_VARIABLE, "false")
