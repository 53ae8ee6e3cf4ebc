"""``python -m remote_module.codegen``: the same as ``remote-module-codegen``."""

from remote_module._generator.cli import entry_point

entry_point()
