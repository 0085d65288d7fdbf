"""Models from a Hugging Face Hub (or a mirror): manifests, verified resumable fetch.

- :mod:`~inferfleet.hub.manifest`: list a repo at one commit (huggingface_hub's
  ``HfApi``) and read/write manifests;
- :mod:`~inferfleet.hub.wire`: the Hub's wire shapes (redirects, ``X-Linked-*``,
  status codes) and the one status-to-error mapping;
- :mod:`~inferfleet.hub.download`: one file, resumable, hashed while it streams;
- :mod:`~inferfleet.hub.fetch`: a declared file set, in parallel, with fragments;
- :mod:`~inferfleet.hub.auth`: where the token comes from and where it may go;
- :mod:`~inferfleet.hub.verified`: hashes of files on disk and the verify record.
"""
