"""Example interfaces and modules; their generated stubs live in ``examples/generated``."""
