"""fork + exec from a process whose gRPC is busy: every child reaches exec.

Each check runs in a fresh interpreter whose environment does not carry the setting, so what
is measured is what :func:`disable_grpc_fork_handlers` (or the ``xdn`` entry point) does.
Without it, about one child in four died of SIGSEGV on this machine in the same script.
"""

from __future__ import annotations

import os
import subprocess
import sys

from xdn.grpc_fork import FORK_SUPPORT_VARIABLE
from xdn.paths import REPO_ROOT

FORKS = 30

# A gRPC server and client busy in another thread, while the main thread forks children that
# linger in preexec_fn (as PySpark's launcher does, and as any child does on a loaded machine).
BUSY_GRPC_THEN_FORK = f"""
import asyncio, subprocess, sys, threading, time
from xdn.grpc_fork import disable_grpc_fork_handlers
disable_grpc_fork_handlers()
import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

started, stop = threading.Event(), threading.Event()

async def busy():
    server = grpc.aio.server()
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{{port}}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        while not stop.is_set():
            await stub.Check(health_pb2.HealthCheckRequest())
            started.set()
    await server.stop(None)

thread = threading.Thread(target=lambda: asyncio.run(busy()))
thread.start()
assert started.wait(60), "the gRPC calls never started"
reached = 0
for _ in range({FORKS}):
    child = subprocess.run(
        ["/bin/echo", "exec"], preexec_fn=lambda: time.sleep(0.2), capture_output=True
    )
    reached += child.returncode == 0 and child.stdout == b"exec\\n"
stop.set()
thread.join(60)
print(reached)
"""


def _python(script: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != FORK_SUPPORT_VARIABLE}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=300,
        check=False,
    )


def test_every_child_of_a_busy_grpc_process_reaches_exec() -> None:
    done = _python(BUSY_GRPC_THEN_FORK)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.strip().splitlines()[-1]) == FORKS, done.stderr[-2000:]
    assert "skipping fork() handlers" not in done.stderr


def test_it_must_run_before_grpc_loads() -> None:
    done = _python(
        "import grpc\n"
        "from xdn.grpc_fork import disable_grpc_fork_handlers\n"
        "disable_grpc_fork_handlers()\n"
    )
    assert done.returncode == 1
    assert "must run before grpc is imported" in done.stderr


def test_the_xdn_command_turns_the_handlers_off_before_any_subcommand_runs() -> None:
    done = _python(
        "import os, sys\n"
        "from cli.main import main\n"
        "main(['certs', 'show', '/nonexistent.pem'])\n"
        f"print(os.environ.get({FORK_SUPPORT_VARIABLE!r}))\n"
    )
    assert done.stdout.strip().splitlines()[-1] == "false", done.stdout + done.stderr


def test_a_setting_of_the_users_is_kept() -> None:
    env: dict[str, str] = {FORK_SUPPORT_VARIABLE: "1"}
    from xdn.grpc_fork import disable_grpc_fork_handlers

    disable_grpc_fork_handlers(env)
    assert env == {FORK_SUPPORT_VARIABLE: "1"}
