"""Model files on a host: what is declared, where it lives, whether it is the right bytes.

- :mod:`~inferfleet.artifacts.manifest`: the one manifest format and parser, and a
  model's declared file set (inline ``files:`` or its manifest, L-09);
- :mod:`~inferfleet.artifacts.locate`: the model's folder, and the main file a loader
  opens (part 1 of a split GGUF, L-04);
- :mod:`~inferfleet.artifacts.record`: the verification record (what was hashed, and
  the stat key it had then);
- :mod:`~inferfleet.artifacts.digests`: sha256 and git blob ids of files on disk;
- :mod:`~inferfleet.artifacts.verify`: the verify gate (sizes by stat, L-08; then
  hashes on all cores) used by ``up``, ``apply`` and ``models verify``;
- :mod:`~inferfleet.artifacts.materialise`: models shipped in a Python package;
- :mod:`~inferfleet.artifacts.safetensors`, :mod:`~inferfleet.artifacts.hfconfig`,
  :mod:`~inferfleet.artifacts.st_model`: a safetensors model's validated headers and
  ``config.json`` (what a vLLM budget needs), read through a byte source.

Nothing here talks to a Hub: :mod:`inferfleet.hub` downloads into these folders
and builds on this package, never the other way round.
"""
