"""Models used in place from the Hugging Face cache (``hf_cache:`` on a Hub source).

huggingface_hub keeps a repo as ``<hub cache>/<repo folder>/snapshots/<commit>/<path>``,
each file a link to a content-named blob. inferfleet never copies those files:
the model's folder *is* the snapshot of the declared commit, the verify gate
checks the declared files there (stat, then sha256; L-01, L-08), and the
verification record lives in inferfleet's own cache, so the Hugging Face cache
holds nothing of ours and ``hf cache`` lists only its own files. The repo
folder's name comes from huggingface_hub (``repo_folder_name``); nothing here
parses blobs or refs itself.
"""

from __future__ import annotations

from pathlib import Path

from inferfleet.fleetfile.fleet import HubSource


def repo_folder(repo: str) -> str:
    """huggingface_hub's folder name for a model repo in its cache."""
    from huggingface_hub.file_download import repo_folder_name

    return repo_folder_name(repo_id=repo, repo_type="model")


def snapshot_dir_on(source: HubSource, *, home: str) -> str:
    """The snapshot folder of ``source``'s commit on a host with this home (pure)."""
    root = source.hf_cache_root
    if root is None:
        raise ValueError("snapshot_dir_on needs a source with hf_cache")
    if root == "~" or root.startswith("~/"):
        root = f"{home.rstrip('/')}{root[1:]}"
    return f"{root.rstrip('/')}/{repo_folder(source.hub)}/snapshots/{source.revision}"


def record_path(repo: str, commit: str, cache_dir: Path) -> Path:
    """Where the verification record of a cache snapshot lives: in inferfleet's cache."""
    return cache_dir / "hf-cache-verified" / repo_folder(repo) / f"{commit}.json"


def library_cache() -> Path:
    """The hub cache huggingface_hub itself uses in this process (HF_HUB_CACHE, HF_HOME)."""
    from huggingface_hub import constants

    return Path(constants.HF_HUB_CACHE).expanduser()


def mismatch_note(source: HubSource, home: str) -> str:
    """A hint when this process's huggingface_hub cache is not the one the fleet names."""
    if source.hf_cache_root is None:
        return ""
    named = Path(snapshot_dir_on(source, home=home)).parents[2]
    here = library_cache()
    if named.absolute() == here.absolute():
        return ""
    return (
        f" (huggingface_hub here uses {here}, the fleet file names {named}: "
        f"write hf_cache: {here} if that is where your files are)"
    )
