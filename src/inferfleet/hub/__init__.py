"""Models from a Hugging Face Hub (or a mirror): listings, verified resumable fetch.

- :mod:`~inferfleet.hub.manifest`: list a repo at one commit (huggingface_hub's
  ``HfApi``) and write it as a manifest (the format is
  :mod:`inferfleet.artifacts.manifest`);
- :mod:`~inferfleet.hub.wire`: the Hub's wire shapes (redirects, ``X-Linked-*``,
  status codes) and the one status-to-error mapping;
- :mod:`~inferfleet.hub.download`: one file, resumable, hashed while it streams;
- :mod:`~inferfleet.hub.fetch`: a declared file set, in parallel, with fragments;
- :mod:`~inferfleet.hub.fetch_plan`: a fleet file's model as a fetch job;
- :mod:`~inferfleet.hub.auth`: where the token comes from and where it may go.

Files on disk (manifests, the verification record, the verify gate) are
:mod:`inferfleet.artifacts`; this package builds on it, never the reverse.
"""
