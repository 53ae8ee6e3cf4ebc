"""A user's package, as the README shows one: interfaces, a module implementing them, and the
code ``remote-module-codegen`` generated for them (``generated/``, checked by
``scripts/check-generated``)."""
