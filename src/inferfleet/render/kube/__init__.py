"""The fleet as Kubernetes manifests (``render --target kubernetes``).

One launch, many targets: each llm service's container argv comes from the
one launch resolver (:func:`inferfleet.render.launch.resolve`), its model
volume is filled by ``inferfleet models fetch`` + ``verify`` (the same size
and sha256 gates as on the hosts, L-01), its probes follow its health gate
(503 while loading, L-34), and the exposure policy (L-58) becomes network
policies. Pure: the fleet in, objects out, written byte-stable.
"""
