"""Generated ``@torch.jit.interface`` classes, fuzzed (issue 5, part 5): random method and
argument names, types and literal (or not) defaults, and names and module identities that are
injection attempts. Every interface is either refused with a ``ValueError`` that names the
interface, the method and the argument, or generates code that compiles, scripts, keeps the
interface's signatures and contains no code that came from a name or a default value. No RPC.
"""

import ast
import builtins
import collections
import importlib
import inspect
import itertools
import keyword
import math
import re
import sys
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Optional, Protocol
from unittest import mock

import pytest
import torch
import torch.distributed.rpc as rpc
from hypothesis import Phase, assume, event, example, given, settings
from hypothesis import strategies as st
from torch import Tensor, nn
from torch.futures import Future

from remote_module import _compat, codegen
from remote_module.codegen import parse_interface
from remote_module.runtime.caller import route
from remote_module.runtime.caller.record import Record
from tests.support.fuzzing import fuzz

# A strategy writes the source of a module holding one ``@torch.jit.interface`` class (random
# method and argument names, types from the supported set, literal and non-literal defaults),
# imports it, and checks the generator either refuses it with a ValueError naming the
# interface, the method and the argument, or generates code that compiles, scripts and keeps
# the interface's signatures.


@dataclass(frozen=True)
class Ty:
    """A type annotation as the interface writes it."""

    text: str
    kind: str
    args: "tuple[Ty, ...]" = ()


@dataclass(frozen=True)
class Default:
    source: str  # as the interface writes it
    value: Any  # what Python sees (literal defaults only)
    literal: bool


@dataclass(frozen=True)
class Arg:
    name: str
    type: Ty
    default: Default | None


@dataclass(frozen=True)
class Meth:
    name: str
    args: tuple[Arg, ...]
    returns: Ty | None  # None: ``-> None``


INTERFACE_PRELUDE = '''\
"""Written by tests/test_fuzz_interfaces.py."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch
from torch import Tensor


class EvilInt(int):
    def __repr__(self) -> str:
        return "__import__('os').system('echo pwned')"


class EvilStr(str):
    def __repr__(self) -> str:
        return "__import__('os').system('echo pwned')"


class EvilFloat(float):
    def __repr__(self) -> str:
        return "__import__('os').system('echo pwned')"


class EvilTuple(tuple):
    def __repr__(self) -> str:
        return "(__import__('os').system('echo pwned'),)"


_FZ_NAN = float("nan")
_FZ_LIST = [1, 2]
_FZ_DICT = {"a": 1}
_FZ_OBJECT = object()
_FZ_PRINT = print
_FZ_TENSOR = torch.ones(1)
_FZ_DEVICE = torch.device("cpu")
_FZ_EVIL_INT = EvilInt(3)
_FZ_EVIL_STR = EvilStr("x")
_FZ_EVIL_FLOAT = EvilFloat(1.5)
_FZ_EVIL_TUPLE = EvilTuple((1,))
_FZ_TUPLE_WITH_LIST = (1, [2])
_FZ_BYTES = b"__import__('os')"
_FZ_COMPLEX = 1j
_FZ_ELLIPSIS = ...
'''
NON_LITERAL_DEFAULTS = [
    "_FZ_LIST",
    "_FZ_DICT",
    "_FZ_OBJECT",
    "_FZ_PRINT",
    "_FZ_TENSOR",
    "_FZ_DEVICE",
    "_FZ_EVIL_INT",
    "_FZ_EVIL_STR",
    "_FZ_EVIL_FLOAT",
    "_FZ_EVIL_TUPLE",
    "_FZ_TUPLE_WITH_LIST",
    "_FZ_BYTES",
    "_FZ_COMPLEX",
    "_FZ_ELLIPSIS",
]
NASTY_STRINGS = [
    "__import__('os').system('x')",
    "'); import os; ('",
    '"""\nimport os\n"""',
    "\\",
    "\\'",
    '"',
    "'",
    "\n",
    "\r\n",
    "\x00",
    "\u2028",
    "{{ interface }}",
    "{% raw %}",
    "# comment",
    "\u540d\u524d\U0001f600",
    "' + __import__('os').getcwd() + '",
]

# Names in the generated module and on RemoteModule, which a method or argument name may hit.
REMOTE_MODULE_ATTRIBUTES = {
    "on",
    "device",
    "is_device_map_set",
    "is_scriptable",
    "generated_methods",
    "module_rref",
    "timeout",
    "training",
    "remote_parameters",
    "get_module_rref",
    "init_from_module_rref",
    "remote_state_dict",
    "load_remote_state_dict",
    "train",
    "eval",
} | ({name for name in dir(nn.Module) if not name.startswith("_")} - {"forward"})
GENERATED_GLOBALS = {
    "torch",
    "Tensor",
    "RRef",
    "Future",
    "Module",
    "Callable",
    "Any",
    "TYPE_CHECKING",
    "GENERATOR_VERSION",
    "INTERFACE",
    "INTERFACE_FINGERPRINT",
    "MOVES_CPU_TENSORS_TO_DEVICE",
    "self",
}
SPECIAL_METHOD_NAMES = [
    # RemoteModule attributes
    "train",
    "to",
    "eval",
    "cuda",
    "parameters",
    "state_dict",
    "on",
    "device",
    "timeout",
    "module_rref",
    "remote_parameters",
    # globals and helpers of the generated module
    "torch",
    "rpc",
    "Tensor",
    "RRef",
    "Future",
    "List",
    "Optional",
    "GENERATOR_VERSION",
    "INTERFACE",
    "self",
    "_rm_x",
    "_rm_call",
    "_rm_module_interface_cls",
    "_remote_forward",
    "_generated_methods",
    "forward_async",
    # builtins the generated code uses, and soft keywords
    "str",
    "int",
    "bool",
    "isinstance",
    "print",
    "match",
    "case",
    "type",
    "_",
    # not ASCII; the last one is NFKC-normalised by Python ("fi" ligature)
    "\u00e4",
    "\u540d\u524d",
    "\ufb01le",
]
SPECIAL_ARGUMENT_NAMES = [
    "torch",
    "rpc",
    "Tensor",
    "Future",
    "List",
    "_rm_module",
    "_rm_device",
    "_rm_target",
    "_rm_result",
    "_remote_forward",
    "value",
    "device",
    "item",
    "key",
    "str",
    "float",
    "int",
    "isinstance",
    "forward",
    "match",
    "type",
    "_",
    "\u00e4",
    "\u540d\u524d",
]


def pick(values: list[str]) -> st.SearchStrategy[str]:
    """One of ``values``; spread more evenly than ``sampled_from``, which inside composite
    strategies keeps returning the first few."""
    return st.permutations(values).map(lambda shuffled: shuffled[0])


PLAIN_NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,6}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name)
)
# Mostly plain names, so that enough interfaces get past the refusals.
METHOD_NAMES = st.one_of(*[PLAIN_NAMES] * 4, pick(SPECIAL_METHOD_NAMES))
ARGUMENT_NAMES = st.one_of(*[PLAIN_NAMES] * 5, pick(SPECIAL_ARGUMENT_NAMES))

LEAF_TYPES = st.sampled_from(
    [Ty(name, name.lower()) for name in ("Tensor", "int", "float", "bool", "str")]
)


def _tuple_type(items: list[Ty]) -> Ty:
    body = ", ".join(item.text for item in items) or "()"
    return Ty(f"Tuple[{body}]", "tuple", tuple(items))


def _container_types(children: st.SearchStrategy[Ty]) -> st.SearchStrategy[Ty]:
    return st.one_of(
        children.map(lambda t: Ty(f"Optional[{t.text}]", "optional", (t,))),
        children.map(lambda t: Ty(f"List[{t.text}]", "list", (t,))),
        st.lists(children, max_size=3).map(_tuple_type),
        st.tuples(st.sampled_from(["str", "int"]), children).map(
            lambda kv: Ty(f"Dict[{kv[0]}, {kv[1].text}]", "dict", (Ty(kv[0], kv[0]), kv[1]))
        ),
    )


TYPES = st.recursive(LEAF_TYPES, _container_types, max_leaves=4)


def _float_default(value: float) -> Default:
    if math.isnan(value):
        return Default("_FZ_NAN", value, True)
    if math.isinf(value):
        return Default("1e999" if value > 0 else "-1e999", value, True)
    return Default(repr(value), value, True)


def _tuple_default(items: tuple[Default, ...]) -> Default:
    source = "(" + ", ".join(d.source for d in items) + ("," if len(items) == 1 else "") + ")"
    return Default(source, tuple(d.value for d in items), True)


def literal_defaults(ty: Ty) -> st.SearchStrategy[Default] | None:
    """Literal default values of type ``ty``; None when the type has none."""
    if ty.kind == "int":
        return st.integers(-(2**70), 2**70).map(lambda v: Default(repr(v), v, True))
    if ty.kind == "float":
        return st.floats().map(_float_default)
    if ty.kind == "bool":
        return st.booleans().map(lambda v: Default(repr(v), v, True))
    if ty.kind == "str":
        texts = st.one_of(st.text(max_size=12), st.sampled_from(NASTY_STRINGS))
        return texts.map(lambda v: Default(repr(v), v, True))
    if ty.kind == "optional":
        none = st.just(Default("None", None, True))
        inner = literal_defaults(ty.args[0])
        return none if inner is None else st.one_of(none, inner)
    if ty.kind == "tuple":
        items = [literal_defaults(arg) for arg in ty.args]
        if any(item is None for item in items):
            return None
        return st.tuples(*items).map(_tuple_default)  # type: ignore[arg-type]
    return None  # Tensor, List, Dict: no literal value


def _normalized(name: str) -> str:
    return unicodedata.normalize("NFKC", name)


CLEAN_METHOD_NAMES = PLAIN_NAMES.filter(
    lambda name: (
        name not in REMOTE_MODULE_ATTRIBUTES
        and f"{name}_async" not in REMOTE_MODULE_ATTRIBUTES
        and name not in dir(builtins)
        and not name.endswith("_async")
    )
)
CLEAN_ARGUMENT_NAMES = PLAIN_NAMES.filter(lambda name: name != "self")
ANOMALIES = ["method name", "argument name", "non-literal default", "twin", "no forward"]


@st.composite
def arguments(draw: st.DrawFn, name: str, clean: bool) -> Arg:
    ty = draw(TYPES)
    literal = literal_defaults(ty)
    if not clean and draw(st.integers(0, 3)) == 3:
        return Arg(name, ty, Default(draw(pick(NON_LITERAL_DEFAULTS)), None, False))
    if literal is not None and draw(st.booleans()):
        return Arg(name, ty, draw(literal))
    return Arg(name, ty, None)


def _ordered(args: list[Arg]) -> tuple[Arg, ...]:
    """Python: arguments without a default come first."""
    return tuple(sorted(args, key=lambda arg: arg.default is not None))


@st.composite
def methods(draw: st.DrawFn, name: str, clean: bool) -> Meth:
    names_strategy = CLEAN_ARGUMENT_NAMES if clean else ARGUMENT_NAMES
    names = draw(
        st.lists(names_strategy, max_size=4, unique_by=_normalized).filter(
            lambda found: "self" not in found
        )
    )
    args = [draw(arguments(arg_name, clean)) for arg_name in names]
    returns = draw(st.one_of(st.none(), TYPES))
    return Meth(name, _ordered(args), returns)


@st.composite
def interfaces(draw: st.DrawFn) -> list[Meth]:
    """An interface: clean, clean but for one anomaly, or anything goes."""
    mode = draw(st.sampled_from(["clean", "one anomaly", "one anomaly", "wild"]))
    if mode == "wild":
        names = draw(st.lists(METHOD_NAMES, max_size=3, unique_by=_normalized))
        if draw(st.integers(0, 9)) != 9:
            names = ["forward", *(name for name in names if name != "forward")]
        if names and draw(st.booleans()):  # a foo / foo_async pair
            twin = draw(st.sampled_from(names)) + "_async"
            if _normalized(twin) not in {_normalized(n) for n in names}:
                names.append(twin)
        spec = [draw(methods(name, clean=False)) for name in names]
    else:
        others = draw(st.lists(CLEAN_METHOD_NAMES, max_size=2, unique_by=_normalized))
        names = ["forward", *(name for name in others if name != "forward")]
        spec = [draw(methods(name, clean=True)) for name in names]
        if mode == "one anomaly":
            spec = draw(_with_anomaly(spec))
    # Declaration order is random; the generator puts forward first.
    return list(draw(st.permutations(spec)))


@st.composite
def _with_anomaly(draw: st.DrawFn, spec: list[Meth]) -> list[Meth]:
    anomaly = draw(st.sampled_from(ANOMALIES))
    taken = {_normalized(method.name) for method in spec}
    if anomaly == "no forward":
        return [method for method in spec if method.name != "forward"]
    if anomaly == "twin":
        twin = f"{draw(pick(sorted(taken)))}_async"
        return [*spec, draw(methods(twin, clean=True))]
    if anomaly == "method name":
        # also a name that is another method's remote function in the generated module
        remote_names = [f"_remote_{name}" for name in sorted(taken)]
        name = draw(st.one_of(pick(SPECIAL_METHOD_NAMES), pick(remote_names)))
        if _normalized(name) in taken:
            return spec
        return [*spec, draw(methods(name, clean=True))]
    index = draw(st.integers(0, len(spec) - 1))
    method = spec[index]
    taken_args = {_normalized(arg.name) for arg in method.args}
    if anomaly == "argument name":
        # also the name of this method's remote function in the generated module
        remote_name = f"_remote_{_normalized(method.name)}"
        name = draw(st.one_of(pick(SPECIAL_ARGUMENT_NAMES), st.just(remote_name)))
        if _normalized(name) in taken_args:
            return spec
        arg = draw(arguments(name, clean=True))
    else:
        name = draw(CLEAN_ARGUMENT_NAMES.filter(lambda n: _normalized(n) not in taken_args))
        default = Default(draw(pick(NON_LITERAL_DEFAULTS)), None, False)
        arg = Arg(name, draw(TYPES), default)
    changed = Meth(method.name, _ordered([*method.args, arg]), method.returns)
    return [*spec[:index], changed, *spec[index + 1 :]]


def interface_source(class_name: str, spec: list[Meth]) -> str:
    lines = [INTERFACE_PRELUDE, "", "@torch.jit.interface", f"class {class_name}:"]
    if not spec:
        lines.append("    pass")
    for method in spec:
        params = ["self"]
        for arg in method.args:
            decl = f"{arg.name}: {arg.type.text}"
            params.append(decl if arg.default is None else f"{decl} = {arg.default.source}")
        returns = "None" if method.returns is None else method.returns.text
        lines += [f"    def {method.name}({', '.join(params)}) -> {returns}:", "        pass", ""]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Problem:
    method: str
    argument: str | None
    why: str


def expected_problems(spec: list[Meth]) -> tuple[list[Problem], list[Problem]]:
    """What the generator must refuse, and what it may refuse (or else must get right)."""
    must: list[Problem] = []
    may: list[Problem] = []
    names = {_normalized(method.name) for method in spec}
    if "forward" not in names:
        must.append(Problem("forward", None, "no forward"))
    for method in spec:
        name = _normalized(method.name)
        if name.startswith("_rm_") or name in GENERATED_GLOBALS:
            must.append(Problem(name, None, "generated-module name"))
        if name in REMOTE_MODULE_ATTRIBUTES or f"{name}_async" in REMOTE_MODULE_ATTRIBUTES:
            must.append(Problem(name, None, "RemoteModule attribute"))
        if f"{name}_async" in names:
            must.append(Problem(name, None, "_async twin clash"))
        if name in dir(builtins) or name.startswith("_remote_") or name == "_generated_methods":
            may.append(Problem(name, None, "shadows a name the generated code uses"))
        if not name.isascii() or name != method.name:
            may.append(Problem(name, None, "not ASCII"))
        for arg in method.args:
            arg_name = _normalized(arg.name)
            if arg_name.startswith("_rm_") or arg_name in GENERATED_GLOBALS:
                must.append(Problem(name, arg_name, "generated-module name"))
            if arg.default is not None and not arg.default.literal:
                must.append(Problem(name, arg_name, "non-literal default"))
            if arg_name.startswith("_remote_"):
                may.append(Problem(name, arg_name, "shadows a remote function"))
            if not arg_name.isascii() or arg_name != arg.name:
                may.append(Problem(name, arg_name, "not ASCII"))
            if _has_big_int(arg.default):
                may.append(Problem(name, arg_name, "int default outside int64"))
    return must, may


def _has_big_int(default: Default | None) -> bool:
    def big(value: Any) -> bool:
        if isinstance(value, tuple):
            return any(big(item) for item in value)
        return type(value) is int and not -(2**63) <= value < 2**63

    return default is not None and default.literal and big(default.value)


def _same_default(left: Any, right: Any) -> bool:
    """Equal and of the same type, all the way down; NaN equals NaN, -0.0 is not 0.0."""
    if type(left) is not type(right):
        return False
    if isinstance(left, tuple):
        return len(left) == len(right) and all(map(_same_default, left, right))
    if isinstance(left, float):
        if math.isnan(left):
            return math.isnan(right)
        return left == right and math.copysign(1, left) == math.copysign(1, right)
    return bool(left == right)


# Every call the generated module may make, as a dotted name; anything else came from input.
ALLOWED_CALLS = {
    "_rm.check_fresh",
    "_rm_rref.local_value",
    "torch.device",
    "_rm.is_scripting",
    "_rm.count_call",
    "_rm.rpc_async",
    "_rm.fork",
    "_rm_future.wait",
    "future.wait",
    "self.module_rref.owner",
    "_rm.call",
    "_rm.call_async",
    "_rm.register",
    "_rm.move_to_device",
    "_rm.keyed_module",
    "_rm_module_for_key",
    "_rm.move_tensor",
    "_rm.cast_tensor",
    "_rm.restore_tensor",
    "isinstance",
    "value.items",
    "float",
}
# Generated helpers: walkers (movers, decoders, wire casters and restorers, named after the
# types they handle), the decoders of futures, and the wire results.
GENERATED_HELPER = re.compile(r"_rm_(move|decode|cast|restore|wait_decode)_\w+|_rm_\w+_wire_result")
ALLOWED_IMPORTS = {
    "typing",
    "torch",
    "torch.distributed.rpc",
    "torch.futures",
    "remote_module.runtime",
}


def _dotted(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    if isinstance(node, ast.Call):
        return "<call>"
    return f"<{type(node).__name__}>"


def check_generated_source_is_safe(source: str, interface_module: str, spec: list[Meth]) -> None:
    """Parse the generated module: only the known imports and calls, ``float`` only for the
    non-finite literals; so no name or default of the interface became code."""
    compile(source, "<fuzzed generated module>", "exec")
    tree = ast.parse(source)
    method_calls = (
        {f"_rm_module.{_normalized(method.name)}" for method in spec}
        | {f"_remote_{_normalized(method.name)}" for method in spec}  # from the wire twins
        | {f"self.{_normalized(method.name)}_async" for method in spec}  # scripted sync ones
        | {f"_rm_run_{_normalized(method.name)}" for method in spec}  # the shared bodies
    )
    for node in tree.body:
        assert isinstance(
            node, (ast.Expr, ast.Import, ast.ImportFrom, ast.Assign, ast.FunctionDef, ast.ClassDef)
        ), ast.dump(node)
        if isinstance(node, ast.Expr):
            assert isinstance(node.value, ast.Constant) or _dotted(node.value) == "<call>"
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            assert {alias.name for alias in node.names} <= ALLOWED_IMPORTS, ast.dump(node)
        elif isinstance(node, ast.ImportFrom):
            assert node.module in ALLOWED_IMPORTS | {interface_module}, ast.dump(node)
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            assert (
                name in ALLOWED_CALLS or name in method_calls or GENERATED_HELPER.fullmatch(name)
            ), f"unexpected call {name}: {ast.unparse(node)}"
            if name == "float":
                assert [ast.literal_eval(arg) for arg in node.args] in (
                    ["inf"],
                    ["-inf"],
                    ["nan"],
                ), ast.unparse(node)


def _valid_value(ty: Ty | None) -> Any:
    """A value of type ``ty`` the caller-side type check accepts."""
    assert ty is not None
    simple = {"tensor": torch.zeros(1), "int": 0, "float": 0.5, "bool": False, "str": "s"}
    if ty.kind in simple:
        return simple[ty.kind]
    if ty.kind == "tuple":
        return tuple(_valid_value(arg) for arg in ty.args)
    return {"optional": None, "list": [], "dict": {}}[ty.kind]


class _FakeRRef:
    def owner(self) -> str:
        return "fake-owner"

    def owner_name(self) -> str:
        return "fake-owner"


class _FakeRemoteModule:
    """What the caller-side stubs read from ``self``; ``reference``: the module's key in its
    owner's table (calls send the keyed twin), or its RRef (calls send the RRef)."""

    module_rref = _FakeRRef()
    device = "cpu"
    is_device_map_set = False
    is_scriptable = True
    timeout = 12.5
    wire_dtype = None
    batching = None

    def __init__(self, reference: Any, generated: Any) -> None:
        self._rm_record = Record(generated)
        self._rm_record.reference = reference
        route.choose(self)  # as the creation reply or the key's adoption would


def check_caller_stubs(generated: Any, cls: type, spec: list[Meth]) -> None:
    """The caller-side stubs keep the interface's signature, check argument types before
    sending, and send the right remote function with the arguments (positional, keyword or
    defaulted) in order. RPC is replaced by a recorder: nothing leaves this process."""
    sent: list[tuple[Any, ...]] = []

    def fake_rpc_async(to: Any, fn: Any, args: Any, kwargs: Any = None, timeout: Any = None) -> Any:
        sent.append((to, fn, args, kwargs, timeout))
        future: Future[Any] = Future()
        future.set_result("result")
        return future

    def fake_invoke_script(to: str, name: str, args: Any, kwargs: Any, timeout: float) -> Any:
        # How compiled remote functions are sent: by qualified name, no rpc.rpc_async.
        return fake_rpc_async(to, name, args, kwargs, timeout)

    fake_self = _FakeRemoteModule(_FakeRemoteModule.module_rref, generated)
    keyed_self = _FakeRemoteModule(7, generated)
    stubs = {fn.__name__: fn for fn in generated._generated_methods}
    with (
        mock.patch.object(rpc, "rpc_async", fake_rpc_async),
        mock.patch.object(_compat, "invoke_rpc_torchscript", fake_invoke_script),
    ):
        for method in spec:
            name = _normalized(method.name)
            remote = getattr(generated, f"_remote_{name}")
            assert remote.__name__ == f"_remote_{name}"
            # Loading it for use compiled it (the owner runs it, a caller reads its schema).
            compiled = torch.jit._state._python_cu.find_function(
                torch._jit_internal._qualified_name(remote)
            )
            assert compiled is not None, (name, remote)
            interface_signature = inspect.signature(getattr(cls, name))
            for stub_name in (name, f"{name}_async"):
                stub = stubs[stub_name]
                signature = inspect.signature(stub)
                assert list(signature.parameters) == list(interface_signature.parameters)
                for param, expected in zip(
                    signature.parameters.values(),
                    interface_signature.parameters.values(),
                    strict=True,
                ):
                    assert param.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD
                    if expected.default is inspect.Parameter.empty:
                        assert param.default is inspect.Parameter.empty, param
                    else:
                        assert _same_default(param.default, expected.default), (
                            param,
                            expected,
                        )
                names = [_normalized(arg.name) for arg in method.args]
                if names:
                    # A wrong type for every argument: refused on the caller, naming the first.
                    sent.clear()
                    with pytest.raises(TypeError) as error:
                        stub(fake_self, *[object() for _ in names])
                    assert stub_name.removesuffix("_async") in str(error.value)
                    assert f"'{names[0]}'" in str(error.value), str(error.value)
                    assert not sent
                values = [_valid_value(arg.type) for arg in method.args]
                required = [arg for arg in method.args if arg.default is None]
                defaults = [arg.default.value for arg in method.args if arg.default is not None]
                calls = [
                    (tuple(values), {}),
                    ((), dict(zip(names, values, strict=True))),
                    (tuple(values[: len(required)]), {}),
                ]
                keyed = getattr(generated, f"_remote_{name}_keyed")
                targets = [(fake_self, remote, fake_self.module_rref), (keyed_self, keyed, 7)]
                for (args, kwargs), (self_, target, reference) in itertools.product(calls, targets):
                    sent.clear()
                    result = stub(self_, *args, **kwargs)
                    if stub_name.endswith("_async"):
                        result = result.wait()
                    assert result == "result"
                    ((to, fn, rpc_args, _kwargs, timeout),) = sent
                    assert (to, timeout) == ("fake-owner", 12.5)
                    assert fn == torch._jit_internal._qualified_name(target)
                    assert rpc_args[:3] == (reference, "cpu", False)
                    expected_args = list(args) + list(kwargs.values())
                    if len(expected_args) < len(values):
                        expected_args += defaults
                    assert len(rpc_args) == 3 + len(values)
                    for got, want in zip(rpc_args[3:], expected_args, strict=True):
                        assert got is want or _same_default(got, want), (got, want)


_counter = itertools.count()


@pytest.fixture(scope="module")
def interface_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the fuzzed interface modules are written; on ``sys.path`` for this module."""
    path = tmp_path_factory.mktemp("fuzzed_interfaces")
    sys.path.insert(0, str(path))
    try:
        yield path
    finally:
        sys.path.remove(str(path))
        for name in [name for name in sys.modules if name.startswith("fuzzed_interface_")]:
            del sys.modules[name]


def import_interface(directory: Path, source: str) -> type:
    """Write ``source`` as a fresh module, import it, return its ``FuzzedInterface``."""
    module_name = f"fuzzed_interface_{next(_counter)}"
    (directory / f"{module_name}.py").write_text(source, encoding="utf-8")
    importlib.invalidate_caches()
    return importlib.import_module(module_name).FuzzedInterface


def _problem_named(message: str, qualified: str, problems: list[Problem]) -> bool:
    for problem in problems:
        if f"{qualified}.{problem.method}" not in message and not (
            problem.method == "forward" and "forward" in message and qualified in message
        ):
            continue
        if problem.argument is None or f"'{problem.argument}'" in message:
            return True
    return False


def check_interface(directory: Path, spec: list[Meth]) -> str:
    """One fuzzed interface, end to end: written, imported, refused or generated and checked.
    Returns the outcome: ``accepted``, ``refused``, or why TorchScript rejected it."""
    source = interface_source("FuzzedInterface", spec)
    compile(source, "<fuzzed interface>", "exec")  # the strategy writes valid Python
    try:
        cls = import_interface(directory, source)
    except Exception as error:  # TorchScript's own refusal of the interface
        return f"TorchScript rejected the interface: {type(error).__name__}"
    qualified = f"{cls.__module__}.FuzzedInterface"
    # A private method (``def __m``: Python stores it as ``_FuzzedInterface__m``) is not part
    # of the interface, for TorchScript nor for the generator.
    spec = [method for method in spec if not _normalized(method.name).startswith("__")]
    must, may = expected_problems(spec)
    try:
        sources = [codegen.render_scriptable(cls), codegen.render_scriptable(cls, False)]
    except ValueError as error:
        message = str(error)
        assert qualified in message, message
        assert must or may, f"refused an interface with nothing wrong: {message}"
        assert _problem_named(message, qualified, must + may), (message, must, may)
        # the in-memory path refuses the same way
        with pytest.raises(ValueError):
            codegen.instantiate_scriptable_remote_module_template(cls)
        return "refused"
    assert not must, f"accepted although it must be refused: {must}"
    assert sources == [codegen.render_scriptable(cls), codegen.render_scriptable(cls, False)]
    for text in sources:
        check_generated_source_is_safe(text, cls.__module__, spec)
    # Loading it runs torch.jit.script on every remote function.
    generated = codegen.instantiate_scriptable_remote_module_template(cls)
    expected_order = sorted(spec, key=lambda method: _normalized(method.name) != "forward")
    expected_names = [
        stub
        for method in expected_order
        for stub in (f"{_normalized(method.name)}_async", _normalized(method.name))
    ]
    assert [fn.__name__ for fn in generated._generated_methods] == expected_names
    for fn in generated._generated_methods:
        if fn.__name__ != "_generated_methods":  # rebound to the list itself, by design
            assert getattr(generated, fn.__name__) is fn, fn.__name__
    check_caller_stubs(generated, cls, spec)
    return "accepted"


def test_generated_interfaces_fuzzed(interface_dir: Path) -> None:
    stats: collections.Counter[str] = collections.Counter()

    # No shrinking: every step re-imports and re-scripts an interface, and a failing example
    # is readable as it is (the regressions below hold the minimal ones).
    @settings(fuzz(150), phases=[Phase.explicit, Phase.reuse, Phase.generate])
    @given(spec=interfaces())
    def run(spec: list[Meth]) -> None:
        outcome = check_interface(interface_dir, spec)
        stats[outcome] += 1
        event(outcome)
        assume(not outcome.startswith("TorchScript"))

    run()
    # How often TorchScript itself refused the written interface (skipped examples).
    print(f"\ngenerated interfaces: {dict(stats)}")
    assert stats["accepted"] >= 5 and stats["refused"] >= 5, dict(stats)
    rejected = sum(count for key, count in stats.items() if key.startswith("TorchScript"))
    assert rejected <= stats["accepted"] + stats["refused"], dict(stats)


TENSOR, INT, FLOAT, BOOL, STR = (
    Ty(n, n.lower()) for n in ("Tensor", "int", "float", "bool", "str")
)
X = Arg("x", TENSOR, None)
REGRESSIONS = {
    # Every literal the generator must keep as it is.
    "literal defaults": [
        Meth(
            "forward",
            (
                X,
                Arg("code", STR, Default(repr(NASTY_STRINGS[0]), NASTY_STRINGS[0], True)),
                Arg("quotes", STR, Default(repr("'\"\\\n\u2028"), "'\"\\\n\u2028", True)),
                Arg("inf", FLOAT, Default("-1e999", -math.inf, True)),
                Arg("nan", FLOAT, Default("_FZ_NAN", math.nan, True)),
                Arg("zero", FLOAT, Default("-0.0", -0.0, True)),
                Arg("big", INT, Default(repr(2**63 - 1), 2**63 - 1, True)),
                Arg(
                    "pair",
                    _tuple_type([INT, _tuple_type([STR, BOOL])]),
                    Default("(1, ('a', True))", (1, ("a", True)), True),
                ),
                Arg(
                    "maybe",
                    Ty("Optional[Tensor]", "optional", (TENSOR,)),
                    Default("None", None, True),
                ),
            ),
            TENSOR,
        )
    ],
    "method named _generated_methods": [
        Meth("forward", (X,), TENSOR),
        Meth("_generated_methods", (), INT),
    ],
    # The stub of method `_remote_forward` replaces forward's remote function.
    "method named _remote_forward": [
        Meth("forward", (X,), TENSOR),
        Meth("_remote_forward", (), INT),
    ],
    # forward's stub passes its argument `_remote_forward` as the function to run remotely.
    "argument named _remote_forward": [
        Meth("forward", (Arg("_remote_forward", TENSOR, None),), TENSOR)
    ],
    # `def str(...)` in the generated module shadows the builtin for every later method's
    # type hints: the caller-side type check of `label` accepts anything.
    "method named str": [
        Meth("forward", (X,), TENSOR),
        Meth("str", (), INT),
        Meth("label", (Arg("k", STR, Default("'a'", "a", True)),), STR),
    ],
    # `_`'s twin would be `__async`, but `def __async` is private (stored mangled): no clash.
    "private method named like a twin": [
        Meth("forward", (X,), TENSOR),
        Meth("_", (), None),
        Meth("__async", (), None),
    ],
    "method named int": [
        Meth("forward", (X,), TENSOR),
        Meth("int", (), BOOL),
        Meth("count", (Arg("k", Ty("Optional[int]", "optional", (INT,)), None),), INT),
    ],
}


@pytest.mark.parametrize("spec", list(REGRESSIONS.values()), ids=list(REGRESSIONS))
def test_generated_interface_regressions(interface_dir: Path, spec: list[Meth]) -> None:
    """Interfaces the fuzzer found (or that it reaches only rarely), checked every run."""
    assert check_interface(interface_dir, spec) in ("accepted", "refused")


# --- names and identities that are not identifiers ------------------------------------------

NOT_IDENTIFIERS = [
    *keyword.kwlist,
    "",
    "1x",
    "a b",
    "a-b",
    "x; import os",
    "x\nimport os",
    "forward(self): pass\nimport os\ndef x",
    "\u00e4-b",
    "x#",
]


def _forward(self: Any, x: Tensor) -> Tensor:
    return x


def _other(self: Any) -> int:
    return 0


@fuzz(60)
@given(name=st.one_of(st.sampled_from(NOT_IDENTIFIERS), st.text(max_size=10)))
def test_method_names_that_are_not_identifiers_are_refused(name: str) -> None:
    """Names a ``class`` statement cannot write still reach the model through a class built
    with ``type()``: they are refused, named in the message."""
    assume(not name.startswith("__") and name != "forward")
    namespace = {"__module__": __name__, "forward": _forward, name: _other}
    cls = type("PlainInterface", (Protocol,), namespace)
    qualified = f"{__name__}.PlainInterface"
    try:
        interface = parse_interface(cls)
    except ValueError as error:
        assert qualified in str(error) and repr(name) in str(error), str(error)
        return
    assert name.isidentifier() and not keyword.iskeyword(name), name
    assert [method.name for method in interface.methods] == ["forward", name]


class FuzzPoint(NamedTuple):
    x: Tensor
    label: str


@torch.jit.interface
class IdentityProbeInterface:
    def forward(self, x: Tensor, point: Optional[FuzzPoint] = None) -> Tensor:
        pass


IDENTITY_PAYLOADS = [
    "fuzz import IdentityProbeInterface as _x\nprint('INJECTED')#",
    "os; import os",
    "a.b\nimport os",
    '"""',
    "a b",
    "1abc",
    "class",
    "a..b",
    "",
    __name__,  # this module: a real one
    "\u00e4.b",
]


@fuzz(60)
@given(
    target=st.sampled_from(["interface", "named type"]),
    attribute=st.sampled_from(["__module__", "__qualname__", "__name__"]),
    value=st.one_of(st.sampled_from(IDENTITY_PAYLOADS), st.text(max_size=12)),
)
@example("interface", "__module__", IDENTITY_PAYLOADS[0])
@example("named type", "__qualname__", "FuzzPoint as _x\nimport os#")
def test_interface_identity_cannot_inject_code(target: str, attribute: str, value: str) -> None:
    """The generated imports and header are written from the interface's (and its named
    types') module and name: values that are not dotted identifiers are refused, never
    written into the source. Only rendered here; nothing generated is executed."""
    assume(not (target == "interface" and attribute == "__name__"))  # not used by the model
    cls = IdentityProbeInterface if target == "interface" else FuzzPoint
    original = getattr(cls, attribute)
    try:
        setattr(cls, attribute, value)
    except ValueError:  # Python itself refuses it (a NUL in a type's name)
        assume(False)
    try:
        try:
            source = codegen.render_scriptable(IdentityProbeInterface)
        except ValueError as error:
            assert value in str(error) or repr(value) in str(error), str(error)
            return
    finally:
        setattr(cls, attribute, original)
    module = value if attribute == "__module__" else cls.__module__
    names = [value] if attribute != "__module__" else []
    assert all(part.isidentifier() and not keyword.iskeyword(part) for part in module.split("."))
    assert all(name.isidentifier() and not keyword.iskeyword(name) for name in names)
    tree = ast.parse(source)  # a bad name that slipped through would fail here or below
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    # (Python reads identifiers NFKC-normalised: a module "\u00b5" is imported as "\u03bc")
    assert imported <= ALLOWED_IMPORTS | {__name__, _normalized(module)}, imported
    calls = {_dotted(node.func) for node in ast.walk(tree) if isinstance(node, ast.Call)}
    assert all(
        name in ALLOWED_CALLS
        # (a type named "\u00aa" is called as "a": Python reads identifiers NFKC-normalised)
        or name
        in (
            "_rm_module.forward",
            "_remote_forward",
            "_rm_run_forward",
            "self.forward_async",
            "FuzzPoint",
            _normalized(value),
        )
        or GENERATED_HELPER.fullmatch(name)
        for name in calls
    ), calls
