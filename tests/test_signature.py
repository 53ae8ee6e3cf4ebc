"""The constructor's real signature, as tools read it (API.md, Runtime): ``inspect``,
``help()`` and editors see upstream's four parameters, ``module_interface_cls``, then the
keyword-only options, not ``*args, **kwargs``."""

from __future__ import annotations

import inspect
import pydoc

from remote_module import RemoteModule

UPSTREAM = ["remote_device", "module_cls", "args", "kwargs"]
KEYWORD_ONLY = [
    "_module_interface_cls",
    "timeout",
    "wire_dtype",
    "standby",
    "checkpoint_every",
    "fake",
    "batching",
]


def test_init_shows_the_real_parameters() -> None:
    parameters = inspect.signature(RemoteModule.__init__).parameters
    assert list(parameters) == ["self", *UPSTREAM, "module_interface_cls", *KEYWORD_ONLY]
    kinds = {name: parameter.kind for name, parameter in parameters.items()}
    positional = inspect.Parameter.POSITIONAL_OR_KEYWORD
    assert all(kinds[name] is positional for name in [*UPSTREAM, "module_interface_cls"])
    assert all(kinds[name] is inspect.Parameter.KEYWORD_ONLY for name in KEYWORD_ONLY)
    defaults = {name: parameter.default for name, parameter in parameters.items()}
    assert defaults["args"] is None and defaults["kwargs"] is None
    assert defaults["module_interface_cls"] is None and defaults["timeout"] is None


def test_the_class_signature_is_the_constructors_without_self() -> None:
    parameters = list(inspect.signature(RemoteModule).parameters)
    assert parameters == [*UPSTREAM, "module_interface_cls", *KEYWORD_ONLY]


def test_help_shows_them() -> None:
    text = pydoc.render_doc(RemoteModule, renderer=pydoc.plaintext)
    init = next(line for line in text.splitlines() if "__init__(self" in line)
    assert "remote_device" in init and "module_interface_cls" in init, init
    assert "*args" not in init and "**kwargs" not in init, init
