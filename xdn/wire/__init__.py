"""Generated wire contract (``make proto``); do not edit the ``*_pb2*`` modules by hand."""
