"""``python -m remote_module.codegen``: the same as ``remote-module-codegen``."""

from remote_module.codegen.cli import entry_point

entry_point()
