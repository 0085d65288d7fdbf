"""Hub models met in an import (``-hf REPO:TAG``, a vLLM repo id), listed when the Hub answers.

Online, the model's manifest is built the way ``inferfleet models manifest``
builds it (sizes, sha256, the revision resolved to its commit, which the
model block then pins); offline (``HF_HUB_OFFLINE``) or when the Hub does
not answer, the model is marked to resolve: its manifest path is in the
block and the output gives the command that writes it. A Hub that answers
"no such repo" (or no file for the tag) is a problem with the line.
"""

from __future__ import annotations

from inferfleet.artifacts.manifest import Manifest
from inferfleet.errors import FleetError
from inferfleet.hub.auth import resolve_token
from inferfleet.hub.fetch_plan import endpoint
from inferfleet.hub.manifest import build_manifest
from inferfleet.hub.model_ref import manifest_globs, parse_ref
from inferfleet.importers.result import Imported
from inferfleet.io.offline import offline


def resolve_hub_models(imported: Imported) -> dict[str, Manifest]:
    """Manifest path (relative to the fleet file) -> manifest, for the Hub models listed."""
    found: dict[str, Manifest] = {}
    if not imported.hub_refs:
        return found
    to_resolve = "marked to resolve: run `inferfleet models manifest {ref} --out {path}`"
    if offline():
        for name, (text, where) in imported.hub_refs.items():
            mark = to_resolve.format(ref=text, path=imported.models[name]["manifest"])
            imported.note(where, f"{text}: HF_HUB_OFFLINE is set; {mark}")
        return found
    base = endpoint(None)
    token = resolve_token(token_file=None)
    for name, (text, where) in imported.hub_refs.items():
        block = imported.models[name]
        ref = parse_ref(text)
        if ref is None:
            imported.problem(
                where, f"{text!r} is not a Hub repo reference", "write OWNER/NAME[:TAG]"
            )
            continue
        try:
            made = build_manifest(
                endpoint=base,
                repo=ref.repo,
                revision=ref.revision,
                includes=manifest_globs(ref),
                token=token,
            )
        except FleetError as exc:
            # The Hub said no (no such repo, gated, refused): a problem; else it did not answer.
            if getattr(exc, "status", None) in (401, 403, 404):
                imported.problem(where, f"{text}: {exc.message}", exc.hint)
            else:
                mark = to_resolve.format(ref=text, path=block["manifest"])
                imported.note(where, f"{text}: the Hub did not answer ({exc.message}); {mark}")
            continue
        if not any(e.path.endswith(".gguf") or e.kind != "parts" for e in made.entries):
            imported.problem(where, f"{text}: no file of {ref.repo} matches")
            continue
        if made.commit:
            block["source"]["revision"] = made.commit  # pinned (L-42)
        found[block["manifest"]] = made
        imported.note(
            where,
            f"{text}: listed on the Hub at {made.commit or ref.revision}: "
            f"{len(made.entries)} file(s) into {block['manifest']}",
        )
    return found
