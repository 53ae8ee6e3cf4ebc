"""ranker: a user's own package, as Get started builds it (``docs/get-started.md``)."""
