"""``remote-module-codegen``: render generated modules at build time.

    remote-module-codegen MODULE:INTERFACE [...] --output-dir DIR [--path DIR ...]
                          [--check] [--no-cuda] [--non-scriptable]

Writes one module per interface (its remote methods and its typed ``Remote<Interface>``
class) and an ``__init__.py`` that imports them all and exports the typed classes (importing
the package registers every module with the runtime). The module for RemoteModules without an
interface ships with remote_module (``remote_module._non_scriptable``, written by this CLI
with ``--non-scriptable``); a user package needs none, and one left there by an older
version is stale and never imported. Files are rewritten only when their bytes change;
``--check`` does the same comparison without writing.
"""

from __future__ import annotations

import argparse
import enum
import importlib
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from remote_module import _torchscript as torchscript
from remote_module._generator import api, refusals
from remote_module._generator.parse import parse_interface
from remote_module._generator.render import (
    GeneratedModule,
    render_interface,
    render_non_scriptable,
    render_package_init,
)
from remote_module._shared import __version__

__all__ = ["ExitCode", "GeneratedFile", "main", "plan"]

PROG = "remote-module-codegen"


class ExitCode(enum.IntEnum):
    OK = 0
    STALE = 1
    BAD_INPUT = 2


class BadInput(Exception):
    """Input the generator refuses; reported as one line on stderr with exit code 2."""


@dataclass(frozen=True)
class GeneratedFile:
    name: str
    source: str


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``remote-module-codegen`` and ``python -m remote_module.codegen``."""
    try:
        options = _parser().parse_args(argv)
        for root in reversed(options.path):  # the first --path is searched first
            if not Path(root).is_dir():
                raise BadInput(f"--path {root}: no such directory")
            sys.path.insert(0, str(Path(root).resolve()))
        files = plan(
            options.interfaces,
            move_tensors=not options.no_cuda,
            non_scriptable=options.non_scriptable,
        )
        output_dir = Path(options.output_dir)
        if options.check:
            return _check(files, output_dir)
        _write(files, output_dir)
    except BadInput as error:
        print(f"{PROG}: error: {' '.join(str(error).split())}", file=sys.stderr)
        return ExitCode.BAD_INPUT
    return ExitCode.OK


def plan(
    specs: Sequence[str], move_tensors: bool = True, non_scriptable: bool = False
) -> list[GeneratedFile]:
    """The files to generate for ``MODULE:INTERFACE`` specs, in a deterministic order;
    ``non_scriptable``: also the module for RemoteModules without an interface (remote_module's
    own build writes the one it ships)."""
    files: dict[str, GeneratedFile] = {}
    modules = [GeneratedModule("non_scriptable")] if non_scriptable else []
    for spec in specs:
        # Importing the interface runs its @torch.jit.interface: TorchScript we use on purpose.
        with torchscript.on_purpose():
            interface_cls = _load(spec)
        try:
            interface = parse_interface(interface_cls)
        except ValueError as error:
            raise BadInput(str(error)) from None
        name = api.module_file_name(interface.name)
        if name in files or name in ("non_scriptable.py", "__init__.py"):
            raise BadInput(f"{spec}: another interface also generates {name}; rename one")
        files[name] = GeneratedFile(name, render_interface(interface, move_tensors))
        modules.append(GeneratedModule(name.removesuffix(".py"), api.typed_class_name(interface)))
    if non_scriptable:
        files["non_scriptable.py"] = GeneratedFile("non_scriptable.py", render_non_scriptable())
    files["__init__.py"] = GeneratedFile("__init__.py", render_package_init(modules))
    return [files[name] for name in sorted(files)]


def _load(spec: str) -> type:
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise BadInput(f"{spec!r} is not MODULE:INTERFACE")
    # An interface TorchScript refuses is read by the generator's checks instead, which name
    # the method and the argument (TorchScript's text is a source excerpt over many lines).
    with refusals.kept() as refused:
        try:
            module = importlib.import_module(module_name)
        except Exception as error:  # any import-time failure is the user's input
            if not refused:
                _cannot_import(spec, module_name, error)
    if refused:
        sys.modules.pop(module_name, None)  # imported with a plain class in the interface's place
        if not torchscript.available():
            _unavailable(spec, module_name, refused[0].error)
        raise BadInput(refusals.explain(refused[0]))
    target: object = module
    for part in attribute.split("."):
        if not hasattr(target, part):
            raise BadInput(f"{spec}: module {module_name} has no attribute {attribute!r}")
        target = getattr(target, part)
    if not isinstance(target, type):
        raise BadInput(
            f"{spec}: {attribute} is not a class (a @torch.jit.interface or a typing.Protocol)"
        )
    return target


def _cannot_import(spec: str, module_name: str, error: Exception) -> NoReturn:
    if not torchscript.available():
        _unavailable(spec, module_name, error)
    hint = ""
    if isinstance(error, ModuleNotFoundError) and module_name.startswith(str(error.name)):
        # The user's own module, not one it imports: most likely an import root missing.
        hint = " (run from the directory that holds it, or add that directory with --path DIR)"
    why = refusals.one_line(error) or str(error)  # TorchScript's, without its source excerpt
    raise BadInput(f"{spec}: cannot import {module_name}: {why}{hint}") from None


def _unavailable(spec: str, module_name: str, error: Exception) -> NoReturn:
    raise BadInput(
        f"{spec}: cannot import {module_name}: TorchScript is unavailable in this process, "
        f"and a @torch.jit.interface needs it ({type(error).__name__}: {error}); a "
        "typing.Protocol interface does not"
    ) from None


def _check(files: list[GeneratedFile], output_dir: Path) -> int:
    problems = []
    for file in files:
        path = output_dir / file.name
        if not path.exists():
            problems.append(f"{path} is missing")
        elif path.read_text(encoding="utf-8") != file.source:
            problems.append(f"{path} is stale")
    for problem in problems:
        print(f"{PROG}: {problem}; run {PROG} again", file=sys.stderr)
    return ExitCode.STALE if problems else ExitCode.OK


def _write(files: list[GeneratedFile], output_dir: Path) -> None:
    try:
        output_dir.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise BadInput(f"cannot create output directory {output_dir}: {error.strerror}") from None
    for file in files:
        path = output_dir / file.name
        if path.exists() and path.read_text(encoding="utf-8") == file.source:
            continue
        try:
            path.write_text(file.source, encoding="utf-8")
        except OSError as error:
            raise BadInput(f"cannot write {path}: {error.strerror}") from None


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise BadInput(message)


def _parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(
        prog=PROG,
        description=(
            "Render remote-module code for interface classes (@torch.jit.interface or "
            "typing.Protocol): one importable module per interface with its remote methods "
            "and its typed Remote<Interface> class, plus the package's __init__.py. Run it at "
            "build time; --check in CI tells when the files are stale."
        ),
    )
    parser.add_argument(
        "interfaces",
        nargs="*",
        metavar="MODULE:INTERFACE",
        help="interfaces to generate, e.g. mypkg.scorer:ScorerInterface (default: none, "
        "which writes only __init__.py)",
    )
    parser.add_argument(
        "--output-dir",
        required=True,
        metavar="DIR",
        help="directory (a package) for the generated modules; created when missing (required)",
    )
    parser.add_argument(
        "--path",
        action="append",
        default=[],
        metavar="DIR",
        help="add DIR to the import roots MODULE is found from; repeatable (default: only "
        "the current directory)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when a file is missing or stale (default: write)",
    )
    parser.add_argument(
        "--no-cuda",
        action="store_true",
        help="leave out moving CPU tensors to the module's device, for CPU-only "
        "deployments (default: movement generated)",
    )
    parser.add_argument(
        "--non-scriptable",
        action="store_true",
        help="also write non_scriptable.py, the module for RemoteModules built without an "
        "interface, which remote_module ships; for remote_module's own build (default: not "
        "written)",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    return parser


def entry_point() -> None:
    """Console-script entry: ``main()`` with the current directory importable."""
    # Like ``python -m``: modules named on the command line resolve from the current directory.
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
