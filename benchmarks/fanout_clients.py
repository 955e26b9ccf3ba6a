"""Thousands of light subscriber streams in one process: the load side of the fan-out benchmark.

Each session is one mutual-TLS channel with its own certificate speaking the subscriber side of
``Subscribe`` as the site requires it (request, heartbeat, signed lease once ``Subscribed`` names
the site, an ``Ack`` per delivery), and nothing else: it neither decrypts nor verifies, so that
the benchmark measures the site, not the subscribers. The same sessions are pointed at the real
site and at the bare streaming server (:mod:`benchmarks.bare_fanout`), which cannot tell them
from each other.

The process is driven by one-line commands on stdin and answers one JSON line per command on
stdout:

* ``connect ADDRESS`` — open every session (at most :data:`OPENING` at a time); answers once all
  got ``Subscribed``;
* ``expect K`` — answers once every session has received K documents since it connected, with
  the monotonic time the last one arrived (``time.monotonic`` is one clock for every process of
  the machine);
* ``capture`` — from now on, the sessions named in the spec's ``capture`` keep the messages
  they receive; ``dump DIR`` writes them (``<profile>.bin``: length-prefixed ServerMessages, the
  ``Subscribed`` first);
* ``join NAME ADDRESS`` — opens one more session (from the spec's ``spare``) and answers with
  the seconds from its first request to its first document;
* ``stall`` — every session stops reading its stream (and so acknowledging) until ``close``,
  but keeps sending heartbeats: the subscriber that never reads, which the site must not let slow
  the others;
* ``close`` — ends every session; ``quit`` — exits.

Run: ``python -m benchmarks.fanout_clients SPEC.json`` (see :func:`_load_spec`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import struct
import sys
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from xdn import certs, crypto, lease
from xdn.collector import tune_for_service
from xdn.grpc_tls import CHANNEL_OPTIONS, TlsFiles, channel_credentials
from xdn.wire.v1 import dissemination_pb2 as pb

OPENING = 64  # sessions waiting for Subscribed at once
HEARTBEAT_S = 5.0
_SUBSCRIBE = "/{}/Subscribe".format(pb.DESCRIPTOR.services_by_name["Disseminator"].full_name)


@dataclass(slots=True)
class _Session:
    name: str
    tls: TlsFiles
    profile: int
    concepts: tuple[str, ...] = ()
    capture: bool = False
    spare: bool = False  # opened by ``join``: not one of the sessions ``expect`` waits for
    documents: int = 0
    arrivals: list[float] = field(default_factory=list)  # when each document came (monotonic)
    started_at: float = 0.0
    first_document_at: float = 0.0
    last_sent: float = 0.0
    heartbeat_s: float = HEARTBEAT_S
    kept: list[bytes] = field(default_factory=list)
    outgoing: asyncio.Queue[pb.ClientMessage] = field(default_factory=asyncio.Queue)
    task: asyncio.Task[None] | None = None
    subscribed: asyncio.Event = field(default_factory=asyncio.Event)
    first_document: asyncio.Event = field(default_factory=asyncio.Event)


class _Swarm:
    def __init__(self, sessions: list[_Session], spare: dict[str, _Session]) -> None:
        self.sessions = sessions
        self.spare = spare
        self.capturing = False
        self.stalled = False
        self._never = asyncio.Event()  # what a stalled session waits for
        self.target = 0
        self.waiting = 0
        self.all_reached = asyncio.Event()
        self._opening = asyncio.Semaphore(OPENING)

    def _note_document(self, session: _Session) -> None:
        session.documents += 1
        session.arrivals.append(time.monotonic())
        if session.first_document_at == 0.0:
            session.first_document_at = session.arrivals[-1]
            session.first_document.set()
        if self.target and session.documents == self.target and not session.spare:
            self.waiting -= 1
            if self.waiting == 0:
                self.all_reached.set()

    async def _run(self, session: _Session, address: str) -> None:
        session.outgoing = asyncio.Queue()
        session.outgoing.put_nowait(pb.ClientMessage(
            subscribe=pb.SubscribeRequest(concepts=session.concepts, retained=True)
        ))
        session.heartbeat_s = HEARTBEAT_S
        session.outgoing.put_nowait(_heartbeat(HEARTBEAT_S))

        async def requests() -> AsyncIterator[pb.ClientMessage]:
            while True:
                yield await session.outgoing.get()

        async with grpc.aio.secure_channel(
            address, channel_credentials(session.tls), options=CHANNEL_OPTIONS
        ) as channel:
            call = channel.stream_stream(
                _SUBSCRIBE, request_serializer=pb.ClientMessage.SerializeToString,
                response_deserializer=None,
            )(requests())
            async for raw in call:
                if self.stalled:
                    await self._never.wait()  # reads no more: the site's writes back up
                message = pb.ServerMessage.FromString(raw)
                kind = message.WhichOneof("kind")
                if kind == "heartbeat":
                    continue
                if session.capture and self.capturing:
                    session.kept.append(raw)
                if kind == "subscribed":
                    session.outgoing.put_nowait(pb.ClientMessage(lease=_lease(session, message)))
                    asked = message.subscribed.heartbeat_ms / 1000  # a busy site asks for less
                    if asked > session.heartbeat_s:
                        session.heartbeat_s = asked
                        session.outgoing.put_nowait(_heartbeat(asked))
                    if session.capture:
                        session.kept.insert(0, raw)
                    session.subscribed.set()
                    continue
                delivery = message.delivery
                if delivery.sequence:
                    session.outgoing.put_nowait(
                        pb.ClientMessage(ack=pb.Ack(sequence=delivery.sequence))
                    )
                    session.last_sent = time.monotonic()
                if delivery.WhichOneof("body") == "dissemination":
                    self._note_document(session)

    async def open(self, session: _Session, address: str) -> None:
        async with self._opening:
            session.subscribed = asyncio.Event()
            session.documents = 0
            session.arrivals = []
            session.started_at = session.last_sent = time.monotonic()
            session.task = asyncio.ensure_future(self._run(session, address))
            done, _ = await asyncio.wait(
                [session.task, asyncio.ensure_future(session.subscribed.wait())],
                return_when=asyncio.FIRST_COMPLETED,
            )
            if session.task in done:
                session.task.result()  # raises why the stream ended
                raise RuntimeError(f"{session.name}: stream ended before Subscribed")

    async def connect(self, address: str) -> dict[str, object]:
        started = time.monotonic()
        outcomes = await asyncio.gather(
            *(self.open(session, address) for session in self.sessions), return_exceptions=True
        )
        failed = [(s.name, o) for s, o in zip(self.sessions, outcomes, strict=True) if o]
        if failed:
            name, error = failed[0]
            return {"error": f"{len(failed)} of {len(self.sessions)} sessions did not subscribe "
                             f"within {time.monotonic() - started:.0f} s; {name}: {error!r}"}
        return {"connected": len(self.sessions), "seconds": time.monotonic() - started}

    async def expect(self, count: int) -> dict[str, object]:
        self.target = count
        self.all_reached.clear()
        self.waiting = sum(s.documents < count for s in self.sessions)
        if self.waiting:
            await self._wait_watching(self.all_reached.wait(), self.sessions)
        self.target = 0
        return {"reached": count, "last_at": max(s.arrivals[count - 1] for s in self.sessions)}

    async def _wait_watching(
        self, waiting: Coroutine[Any, Any, object], sessions: list[_Session]
    ) -> None:
        """Wait, but fail at once when one of ``sessions``' streams ends."""
        tasks = [s.task for s in sessions if s.task is not None]
        waiter = asyncio.ensure_future(waiting)
        done, _ = await asyncio.wait([waiter, *tasks], return_when=asyncio.FIRST_COMPLETED)
        if waiter not in done:
            waiter.cancel()
            ended = next(t for t in tasks if t in done)
            ended.result()
            raise RuntimeError("a session's stream ended")

    async def join(self, name: str, address: str) -> dict[str, object]:
        session = self.spare[name]
        started = time.monotonic()
        await self.open(session, address)
        await self._wait_watching(session.first_document.wait(), [session])
        return {"joined": name, "seconds": session.first_document_at - started}

    async def close(self) -> dict[str, object]:
        everyone = [*self.sessions, *self.spare.values()]
        for session in everyone:
            if session.task is not None:
                session.task.cancel()
        for session in everyone:
            if session.task is not None:
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await session.task
                session.task = None
        self.stalled = False  # (sessions opened from now on read)
        return {"closed": len(everyone)}

    def dump(self, directory: Path) -> dict[str, object]:
        directory.mkdir(parents=True, exist_ok=True)
        written = {}
        for session in self.sessions:
            if session.capture:
                path = directory / f"{session.profile}.bin"
                with path.open("wb") as out:
                    for raw in session.kept:
                        out.write(struct.pack(">I", len(raw)) + raw)
                written[session.profile] = len(session.kept)
        return {"dumped": written}

    async def heartbeats(self) -> None:
        """A heartbeat on every stream idle for its interval, as a subscriber sends them."""
        while True:
            await asyncio.sleep(HEARTBEAT_S / 10)
            now = time.monotonic()
            for session in [*self.sessions, *self.spare.values()]:
                if session.task is not None and now - session.last_sent >= session.heartbeat_s:
                    session.last_sent = now
                    session.outgoing.put_nowait(_heartbeat(session.heartbeat_s))


def _heartbeat(interval_s: float) -> pb.ClientMessage:
    return pb.ClientMessage(heartbeat=pb.Heartbeat(interval_ms=int(interval_s * 1000)))


def _lease(session: _Session, message: pb.ServerMessage) -> bytes:
    """The session's signed lease for the site that answered (named in ``Subscribed``)."""
    subscribed = message.subscribed
    member = certs.credential_from_pem(session.tls.cert_pem).member_id
    now_ms = int(time.time() * 1000)
    issued = lease.issue(
        member=member, site=subscribed.served_by, block=subscribed.block,
        now_ms=now_ms, period_ms=4 * 3600 * 1000,
    )
    return lease.sign(issued, crypto.load_private_key_pem(session.tls.key_pem)).to_bytes()


def _load_spec(path: Path) -> tuple[list[_Session], dict[str, _Session]]:
    """``{"certs": DIR, "sessions": [[name, profile], ...], "capture": [name, ...],
    "spare": [[name, profile], ...], "concepts": {profile: [concept, ...]}}`` (a profile
    without concepts asks for everything its policy grants)."""
    spec = json.loads(path.read_text())
    directory = Path(spec["certs"])
    capture = set(spec.get("capture", ()))
    concepts = {int(k): tuple(v) for k, v in spec.get("concepts", {}).items()}

    def session(name: str, profile: int, *, spare: bool = False) -> _Session:
        return _Session(
            name=name, tls=TlsFiles.from_dir(directory, name), profile=profile,
            concepts=concepts.get(profile, ()), capture=name in capture, spare=spare,
        )

    sessions = [session(name, profile) for name, profile in spec["sessions"]]
    spare = {name: session(name, profile, spare=True) for name, profile in spec.get("spare", ())}
    return sessions, spare


async def _serve(spec: Path) -> None:
    sessions, spare = _load_spec(spec)
    swarm = _Swarm(sessions, spare)
    beats = asyncio.ensure_future(swarm.heartbeats())
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while line := (await reader.readline()).decode().split():
            command, args = line[0], line[1:]
            if command == "quit":
                break
            if command == "connect":
                answer = await swarm.connect(args[0])
            elif command == "expect":
                answer = await swarm.expect(int(args[0]))
            elif command == "capture":
                swarm.capturing = True
                answer = {"capturing": True}
            elif command == "dump":
                answer = swarm.dump(Path(args[0]))
            elif command == "join":
                answer = await swarm.join(args[0], args[1])
            elif command == "stall":
                swarm.stalled = True
                answer = {"stalled": len(swarm.sessions)}
            elif command == "close":
                answer = await swarm.close()
            else:
                answer = {"error": f"unknown command {command!r}"}
            print(json.dumps(answer), flush=True)
    finally:
        beats.cancel()
        await swarm.close()


def main() -> None:
    tune_for_service()  # (as the site does: the same for both servers they measure)
    asyncio.run(_serve(Path(sys.argv[1])))


if __name__ == "__main__":
    main()
