"""``remote-module`` (``python -m remote_module``): sub-command ``demo``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from remote_module._shared import __version__


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``remote-module`` console script."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(
        prog="remote-module",
        description="remote_module: TorchScript-first remote nn.Modules on torch.distributed.rpc",
    )
    parser.add_argument("--version", action="version", version=f"remote-module {__version__}")
    parser.add_argument("command", choices=["demo"], help="demo: train a hybrid DDP + RPC model")
    if not args or args[0] not in ("demo",):
        parser.parse_args(args[:1] or ["--help"])
    from remote_module import demo

    return demo.main(args[1:])


if __name__ == "__main__":
    sys.exit(main())
