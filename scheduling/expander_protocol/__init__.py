"""cluster-autoscaler's gRPC expander protocol: the .proto files, their generated modules (``make protos``) and
the codec to the engine's types. Never imports Django."""
