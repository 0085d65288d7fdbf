"""Bring an existing setup in: other tools' configs become fleet-file blocks.

Each importer reads one format (llama-swap's ``config.yaml``, ...) into
:class:`inferfleet.importers.result.Imported`, the blocks to add to a fleet
file plus what has no equivalent, line by line. Command lines are read with
the runtime adapters' own flag tables (:mod:`inferfleet.importers.llamacpp`),
the fleet file is edited in place with comments kept
(:mod:`inferfleet.importers.fleetedit`), and the CLI proves the import by
comparing each service's rendered argv with the original
(:mod:`inferfleet.importers.compare`).
"""
