"""Model files: materialise, verify (size by stat, sha256) and manifests."""
