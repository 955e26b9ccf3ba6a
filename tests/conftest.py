"""Settings for the whole test process, applied before any test module imports grpc."""

from xdn.grpc_fork import disable_grpc_fork_handlers

# Integration tests leave gRPC threads in this process; the Spark tests then fork to start the
# JVM. See xdn/grpc_fork.py for why the fork handlers must be off.
disable_grpc_fork_handlers()
