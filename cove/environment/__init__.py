"""The environment: one live conversation's runtime (sandbox worker, extensions, variable index)."""
