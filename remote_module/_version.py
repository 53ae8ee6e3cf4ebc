"""The version of remote_module; generated modules record it and are only used when it matches."""

__version__ = "0.2.2"
