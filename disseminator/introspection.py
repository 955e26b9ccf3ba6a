"""The standard gRPC introspection services of a site: health checking and server reflection.

Health answers ``SERVING`` for every service the site serves (the dissemination service, the
DHT, health and reflection themselves), not only for the first, so a probe of any of them by
name works (``grpc_health_probe -service xdn.wire.v1.Dht``).

Reflection is served under both names clients use: ``grpc.reflection.v1alpha`` (what
grpcio-reflection 1.85 ships) and ``grpc.reflection.v1`` (what grpcurl, grpc-java and others
ask first). grpcio-reflection has no v1 module yet (grpc/grpc#38576); v1's messages are
v1alpha's, field for field, under another package name, so the v1 method is the v1alpha
servicer behind a generic handler that (de)serialises with v1alpha's message classes.
"""

from __future__ import annotations

from collections.abc import Sequence

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from grpc_reflection.v1alpha import reflection_pb2 as _v1alpha_pb2
from grpc_reflection.v1alpha._async import ReflectionServicer

__all__ = ["REFLECTION_V1", "Introspection"]

REFLECTION_V1 = "grpc.reflection.v1.ServerReflection"


class Introspection:
    """Health and reflection for ``services`` on ``server`` (before it starts)."""

    def __init__(self, server: grpc.aio.Server, services: Sequence[str]) -> None:
        self.health = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        self.names = (*services, health.SERVICE_NAME, reflection.SERVICE_NAME, REFLECTION_V1)
        reflection.enable_server_reflection(self.names, server)
        v1 = ReflectionServicer(self.names)
        server.add_generic_rpc_handlers((
            grpc.method_handlers_generic_handler(REFLECTION_V1, {
                "ServerReflectionInfo": grpc.stream_stream_rpc_method_handler(
                    v1.ServerReflectionInfo,
                    request_deserializer=_v1alpha_pb2.ServerReflectionRequest.FromString,
                    response_serializer=_v1alpha_pb2.ServerReflectionResponse.SerializeToString,
                ),
            }),
        ))

    async def serving(self) -> None:
        """Every served service answers ``SERVING``."""
        for name in self.names:
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    async def enter_graceful_shutdown(self) -> None:
        """Every service answers ``NOT_SERVING`` from now on."""
        await self.health.enter_graceful_shutdown()
