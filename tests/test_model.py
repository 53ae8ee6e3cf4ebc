"""The interface model: lossless round trip to source, type mapping, refusals, literal defaults."""

import ast
import inspect
import math
import re
import textwrap
import typing
from typing import Any, Dict, List, NamedTuple, Optional, Protocol, Set, Tuple, Union

import pytest
import torch
from hypothesis import example, given
from hypothesis import strategies as st
from torch import Tensor

from remote_module._generator import api
from remote_module._generator.model import Kind
from remote_module._generator.parse import parse_type, render_literal
from remote_module._shared import RESERVED_NAMES
from remote_module.codegen import Argument, Interface, Method, TypeRef, parse_interface
from tests.golden_interfaces import Box, ContainersInterface, Stats
from tests.support.interfaces import Pair

QUALIFIED = f"{__name__}."
NASTY = "'); import os; ('"


# Interfaces written in canonical form: exactly what ``str(method)`` prints, up to whitespace.
# fmt: off
@torch.jit.interface
class CanonicalInterface:
    def forward(
        self, x: Tensor, scale: float = 1.0, label: str = "w", flags: tuple[int, bool] = (1, True),
        maybe: Tensor | None = None, tiny: float = -2.5e-300, quote: str = '"\'\n',
    ) -> Tensor:
        pass

    def step_count(self) -> int:
        pass

    def nested(
        self, xs: list[Tensor], table: dict[str, list[int]], either: int | str = -2,
        big: float = float("inf"), small: float = float("-inf"), empty: tuple[()] = (),
        one: tuple[int] = (1,), deep: tuple[tuple[str, bool], int | None] = (("a", False), None),
    ) -> tuple[list[Tensor], Stats]:
        pass

    def boxed(self, box: Box, device: torch.device, stats: Stats, anything: Any) -> Box | None:
        pass
# fmt: on


@torch.jit.interface
class NoForwardInterface:
    def step(self, x: Tensor) -> Tensor:
        pass


class NotAnInterface:
    def forward(self, x: Tensor) -> Tensor:
        return x


@torch.jit.interface
class TensorDefaultInterface:
    def forward(self, x: Tensor, bias: Tensor = torch.ones(1)) -> Tensor:  # noqa: B008
        pass


@torch.jit.interface
class LambdaDefaultInterface:
    def forward(self, x: Tensor, times: int = (lambda: 1)) -> Tensor:  # type: ignore[assignment]
        pass


@torch.jit.interface
class ListDefaultInterface:
    def forward(self, x: Tensor, sizes: List[int] = [1, 2]) -> Tensor:  # noqa: B006
        pass


@torch.jit.interface
class ShadowingInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def train(self, mode: bool = True) -> int:
        pass


@torch.jit.interface
class ClashingInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def foo(self) -> int:
        pass

    def foo_async(self) -> int:
        pass


@torch.jit.interface
class WireClashInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def forward_wire(self, x: Tensor) -> Tensor:  # _remote_forward_wire: forward's wire twin
        pass


@torch.jit.interface
class KeyedClashInterface:
    def forward(self, x: Tensor) -> Tensor:
        pass

    def forward_keyed(self, x: Tensor) -> Tensor:  # _remote_forward_keyed: forward's keyed twin
        pass


# TorchScript refuses these at decoration time, so they are typing.Protocol interfaces (the
# eager family the model also serves).
class VarArgsStub(Protocol):
    def forward(self, x: Tensor, *rest: Tensor) -> Tensor: ...


class VarKwargsStub(Protocol):
    def forward(self, x: Tensor, **options: Tensor) -> Tensor: ...


class KeywordOnlyStub(Protocol):
    def forward(self, x: Tensor, *, scale: float = 1.0) -> Tensor: ...


class BytesStub(Protocol):
    def forward(self, x: Tensor, data: bytes) -> Tensor: ...


class SetStub(Protocol):
    def forward(self, x: Tensor, ids: Set[int]) -> Tensor: ...


class EllipsisTupleStub(Protocol):
    def forward(self, x: Tensor, sizes: Tuple[int, ...]) -> Tensor: ...


class TupleKeyStub(Protocol):
    def forward(self, x: Tensor, table: Dict[Tuple[int, int], int]) -> Tensor: ...


class BareListStub(Protocol):
    def forward(self, x: Tensor, items: List) -> Tensor: ...


class UnannotatedArgumentStub(Protocol):
    def forward(self, x, scale: float = 1.0) -> Tensor: ...  # type: ignore[no-untyped-def]


class UnannotatedReturnStub(Protocol):
    def forward(self, x: Tensor):  # type: ignore[no-untyped-def]
        ...


class Scored(NamedTuple):
    score: Tensor
    label: int


class UnionWithNamedTupleStub(Protocol):
    def forward(self, x: Tensor) -> Scored | Tensor: ...


class BadReturnStub(Protocol):
    def forward(self, x: Tensor) -> bytes: ...


# ---------------------------------------------------------------------------------------------
# Round trip: every method prints itself back as its source signature.


def _source_signature(fn: Any) -> str:
    """The ``def name(...) -> T`` of ``fn``'s source, without the trailing colon."""
    source = textwrap.dedent(inspect.getsource(fn))
    (node,) = ast.parse(source).body
    assert isinstance(node, ast.FunctionDef)
    lines = source.splitlines(keepends=True)
    return "".join(lines[: node.body[0].lineno - 1]).rstrip().removesuffix(":")


def _normalise(signature: str) -> str:
    """One line, no space inside the parameter list's parentheses, no magic trailing comma."""
    text = re.sub(r"\s+", " ", signature).strip()
    text = re.sub(r"^(def \w+)\( ", r"\1(", text)
    return re.sub(r",? \) -> ", ") -> ", text)


def test_every_method_round_trips_to_its_source_signature() -> None:
    interface = parse_interface(CanonicalInterface)
    assert [method.name for method in interface.methods] == [
        "forward",
        "step_count",
        "nested",
        "boxed",
    ]
    for method in interface.methods:
        source = _source_signature(getattr(CanonicalInterface, method.name))
        assert _normalise(str(method)) == _normalise(source)


def test_argument_prints_with_its_default() -> None:
    forward = parse_interface(CanonicalInterface).methods[0]
    decls = [str(argument) for argument in forward.arguments]
    assert decls == [
        "x: Tensor",
        "scale: float = 1.0",
        'label: str = "w"',
        "flags: tuple[int, bool] = (1, True)",
        "maybe: Tensor | None = None",
        "tiny: float = -2.5e-300",
        "quote: str = '\"\\'\\n'",
    ]
    assert [api.Binding(a.name, str(a.type), a.default).decl() for a in forward.arguments] == decls
    # The printed default evaluates to the value Python gave the signature.
    parameters = inspect.signature(CanonicalInterface.forward).parameters
    for argument in forward.arguments:
        if argument.default is not None:
            assert ast.literal_eval(argument.default) == parameters[argument.name].default


def test_zero_argument_method_prints_only_self() -> None:
    step_count = parse_interface(CanonicalInterface).methods[1]
    assert step_count.arguments == ()
    assert str(step_count) == "def step_count(self) -> int"


def test_interface_prints_as_a_class_of_signatures() -> None:
    interface = parse_interface(CanonicalInterface)
    lines = str(interface).splitlines()
    assert lines[0] == "class CanonicalInterface:"
    assert lines[1:] == [f"    {method}" for method in interface.methods]
    assert interface.qualified_name == f"{QUALIFIED}CanonicalInterface"


def test_model_is_frozen_with_tuple_fields() -> None:
    interface = parse_interface(CanonicalInterface)
    method = interface.methods[0]
    for obj, field in [
        (interface, "methods"),
        (method, "arguments"),
        (method.arguments[0], "name"),
        (method.returns, "name"),
    ]:
        with pytest.raises(AttributeError):
            setattr(obj, field, None)
    assert hash(interface) == hash(parse_interface(CanonicalInterface))
    assert isinstance(interface.methods, tuple)
    assert isinstance(method.arguments, tuple)
    assert all(isinstance(m, Method) for m in interface.methods)
    assert all(isinstance(a, Argument) for a in method.arguments)
    assert isinstance(method.returns, TypeRef)
    assert isinstance(interface, Interface)


def test_parsing_is_deterministic() -> None:
    assert parse_interface(CanonicalInterface) == parse_interface(CanonicalInterface)
    first = parse_interface(CanonicalInterface).fingerprint
    assert first == parse_interface(CanonicalInterface).fingerprint
    assert re.fullmatch(r"[0-9a-f]{16}", first)


# ---------------------------------------------------------------------------------------------
# Types.


@pytest.mark.parametrize(
    ("annotation", "kind", "text"),
    [
        (Tensor, Kind.TENSOR, "Tensor"),
        (int, Kind.SCALAR, "int"),
        (float, Kind.SCALAR, "float"),
        (bool, Kind.SCALAR, "bool"),
        (str, Kind.SCALAR, "str"),
        (complex, Kind.SCALAR, "complex"),
        (torch.device, Kind.SCALAR, "torch.device"),
        (torch.dtype, Kind.SCALAR, "torch.dtype"),
        (Any, Kind.SCALAR, "Any"),
        (None, Kind.NONE, "None"),
        (type(None), Kind.NONE, "None"),
        (List[int], Kind.LIST, "list[int]"),
        (list[int], Kind.LIST, "list[int]"),
        (List[Tensor], Kind.LIST, "list[Tensor]"),
        (Tuple[int, str], Kind.TUPLE, "tuple[int, str]"),
        (tuple[int, str], Kind.TUPLE, "tuple[int, str]"),
        (Tuple[()], Kind.TUPLE, "tuple[()]"),
        (Dict[str, Tensor], Kind.DICT, "dict[str, Tensor]"),
        (dict[int, list[float]], Kind.DICT, "dict[int, list[float]]"),
        (Optional[Tensor], Kind.OPTIONAL, "Tensor | None"),
        (Tensor | None, Kind.OPTIONAL, "Tensor | None"),
        (int | None, Kind.OPTIONAL, "int | None"),
        (None | int, Kind.OPTIONAL, "int | None"),
        (Union[int, None], Kind.OPTIONAL, "int | None"),
        (Union[int, str], Kind.UNION, "int | str"),
        (int | str, Kind.UNION, "int | str"),
        (Union[int, str, None], Kind.UNION, "int | str | None"),
        (
            dict[str, list[Optional[tuple[Tensor, int]]]],
            Kind.DICT,
            "dict[str, list[tuple[Tensor, int] | None]]",
        ),
        (Pair, Kind.NAMED_TUPLE, "Pair"),
        (Stats, Kind.NAMED_TUPLE, "Stats"),
        (Box, Kind.CLASS, "Box"),
    ],
    ids=str,
)
def test_annotation_maps_to_typeref(annotation: Any, kind: Kind, text: str) -> None:
    type_ = parse_type(annotation, "where")
    assert (type_.kind, str(type_)) == (kind, text)


def test_named_types_carry_their_import_location() -> None:
    pair = parse_type(Pair, "where")
    assert (pair.module, pair.qualname, pair.fields) == (
        "tests.support.interfaces",
        "Pair",
        ("first", "second"),
    )
    assert [str(field) for field in pair.args] == ["Tensor", "int"]
    box = parse_type(Box, "where")
    assert (box.module, box.qualname) == ("tests.golden_interfaces", "Box")
    interface = parse_interface(ContainersInterface)
    assert [t.name for t in interface.named_types] == ["Box", "Stats"]
    assert api.imports(interface) == (
        api.ImportLine("tests.golden_interfaces", ("Box", "ContainersInterface", "Stats")),
    )


def test_pep_585_and_604_spellings_parse_like_typing_ones() -> None:
    forward = parse_interface(ContainersInterface).methods[0]
    assert [str(argument) for argument in forward.arguments] == [
        "x: Tensor",
        "many: list[Tensor]",
        "table: dict[str, Tensor]",
        "pair: tuple[Tensor, int]",
        "maybe: Tensor | None = None",
        "count: int | None = None",
    ]
    assert str(forward.returns) == "Stats"


@pytest.mark.parametrize(
    ("annotation", "holds"),
    [
        (Tensor, True),
        (int, False),
        (str, False),
        (Optional[Tensor], True),
        (Optional[int], False),
        (List[Tensor], True),
        (Dict[str, Tensor], True),
        (Dict[Tensor, int], False),  # keys are never moved
        (Tuple[int, str], False),
        (Tuple[int, Tensor], True),
        (Pair, True),
        (Box, False),
        (Union[int, Tensor], True),
    ],
    ids=str,
)
def test_contains_tensor(annotation: Any, holds: bool) -> None:
    assert parse_type(annotation, "where").contains_tensor is holds


# ---------------------------------------------------------------------------------------------
# Refusals: a ValueError that names the interface, the method and the argument.


def _refusal(interface_cls: object) -> str:
    with pytest.raises(ValueError) as raised:
        parse_interface(interface_cls)
    return str(raised.value)


@pytest.mark.parametrize(
    "value", [42, "tests.support.interfaces:LinearInterface", len, typing], ids=repr
)
def test_refuses_non_class(value: object) -> None:
    message = _refusal(value)
    assert repr(value) in message
    assert "not a class" in message


def test_refuses_class_without_jit_interface() -> None:
    message = _refusal(NotAnInterface)
    assert f"{QUALIFIED}NotAnInterface" in message
    assert "@torch.jit.interface" in message
    assert "typing.Protocol" in message


def test_refuses_interface_without_forward() -> None:
    message = _refusal(NoForwardInterface)
    assert f"{QUALIFIED}NoForwardInterface" in message
    assert "'forward'" in message


def test_refuses_locally_defined_interface() -> None:
    @torch.jit.interface
    class LocalInterface:
        def forward(self, x: Tensor) -> Tensor:
            pass

    message = _refusal(LocalInterface)
    assert f"{QUALIFIED}test_refuses_locally_defined_interface.<locals>.LocalInterface" in message
    assert "module level" in message


@pytest.mark.parametrize(
    ("interface_cls", "argument", "shown"),
    [
        (TensorDefaultInterface, "bias", "tensor([1.])"),
        (LambdaDefaultInterface, "times", "<lambda>"),
        (ListDefaultInterface, "sizes", "[1, 2]"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_refuses_non_literal_default(interface_cls: type, argument: str, shown: str) -> None:
    message = _refusal(interface_cls)
    assert f"{QUALIFIED}{interface_cls.__name__}.forward" in message
    assert f"argument '{argument}'" in message
    assert shown in message
    assert "not a literal" in message


@pytest.mark.parametrize(
    ("stub", "argument", "kind"),
    [
        (VarArgsStub, "rest", "variadic positional"),
        (VarKwargsStub, "options", "variadic keyword"),
        (KeywordOnlyStub, "scale", "keyword-only"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_refuses_variadic_and_keyword_only_parameters(stub: type, argument: str, kind: str) -> None:
    message = _refusal(stub)
    assert f"{QUALIFIED}{stub.__name__}.forward" in message
    assert f"argument '{argument}'" in message
    assert kind in message


@pytest.mark.parametrize(
    ("stub", "argument", "shown"),
    [
        (BytesStub, "argument 'data'", "bytes"),
        (SetStub, "argument 'ids'", "Set[int]"),
        (EllipsisTupleStub, "argument 'sizes'", "tuple[T, ...]"),
        (TupleKeyStub, "argument 'table'", "dict keys of type tuple[int, int]"),
        (BareListStub, "argument 'items'", "list needs an element type"),
        (BadReturnStub, "return type", "bytes"),
        (UnannotatedArgumentStub, "argument 'x'", "no type annotation"),
        (UnannotatedReturnStub, "forward", "no return annotation"),
        (UnionWithNamedTupleStub, "return type", "union holding a NamedTuple"),
    ],
    ids=lambda value: getattr(value, "__name__", None),
)
def test_refuses_unsupported_type(stub: type, argument: str, shown: str) -> None:
    message = _refusal(stub)
    assert f"{QUALIFIED}{stub.__name__}.forward" in message
    assert argument in message
    assert shown in message


def test_refuses_method_that_shadows_remote_module() -> None:
    message = _refusal(ShadowingInterface)
    assert f"{QUALIFIED}ShadowingInterface.train" in message
    assert "shadow" in message


@pytest.mark.parametrize(
    "name",
    ["train", "eval", "to", "cuda", "parameters", "state_dict", "remote_parameters", "module_rref"],
)
def test_reserved_method_names_are_refused(name: str) -> None:
    assert name in RESERVED_NAMES

    def method(self: Any) -> int: ...

    def forward(self: Any, x: Tensor) -> Tensor: ...

    namespace = {"__module__": __name__, "forward": forward, name: method}
    stub = type(f"Reserved_{name}", (Protocol,), namespace)
    stub.__qualname__ = stub.__name__
    message = _refusal(stub)
    assert f"{QUALIFIED}Reserved_{name}.{name}" in message
    assert repr(name) in message


def test_forward_itself_is_not_reserved() -> None:
    assert "forward" not in RESERVED_NAMES


def test_refuses_method_clashing_with_a_generated_twin() -> None:
    message = _refusal(ClashingInterface)
    assert f"{QUALIFIED}ClashingInterface.foo" in message
    assert "'foo_async'" in message


@pytest.mark.parametrize(
    ("interface", "twin"), [(WireClashInterface, "wire"), (KeyedClashInterface, "keyed")]
)
def test_refuses_a_remote_function_clashing_with_a_remote_twin(interface: Any, twin: str) -> None:
    message = _refusal(interface)
    assert f"{QUALIFIED}{interface.__name__}.forward:" in message
    assert f"'forward_{twin}'" in message and f"_remote_forward_{twin};" in message


# ---------------------------------------------------------------------------------------------
# Literal defaults: rendered text evaluates back to the value, and nothing else.

_FLOAT_CALLS = {'float("inf")': math.inf, 'float("-inf")': -math.inf, 'float("nan")': math.nan}
_NON_FINITE = {"inf", "-inf", "nan"}
_LITERAL_NODES = (
    ast.Expression,
    ast.Constant,
    ast.Tuple,
    ast.UnaryOp,
    ast.USub,
    ast.Load,
    ast.Name,
)

_literals = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=True)
    | st.text()
    | st.sampled_from(["", NASTY, "\n", "\\", "'\"", "\x00", "\u2028", "日本語 🎉", '"""'])
    | st.just(()),
    lambda children: st.lists(children, max_size=4).map(tuple),
    max_leaves=12,
)


def _evaluate(text: str) -> object:
    """``text`` as a value, accepting only literal syntax plus ``float("inf")``-style calls."""
    tree = ast.parse(text, mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            assert isinstance(node.func, ast.Name) and node.func.id == "float", ast.dump(node)
            assert not node.keywords, ast.dump(node)
            (argument,) = node.args
            assert isinstance(argument, ast.Constant) and argument.value in _NON_FINITE
        else:
            assert isinstance(node, _LITERAL_NODES), ast.dump(node)
            if isinstance(node, ast.Name):
                assert node.id == "float"
    if "float(" not in text:
        return ast.literal_eval(text)
    return eval(compile(tree, "<default>", "eval"), {"__builtins__": {}, "float": float})


def _same(left: object, right: object) -> bool:
    """Equal values of the same types all the way down (``True == 1`` is not enough)."""
    if type(left) is not type(right):
        return False
    if isinstance(left, tuple):
        assert isinstance(right, tuple)
        return len(left) == len(right) and all(map(_same, left, right))
    if isinstance(left, float) and isinstance(right, float) and math.isnan(left):
        return math.isnan(right)
    return left == right


@given(_literals)
@example(math.inf)
@example((-math.inf, (NASTY, -0.0, None)))
@example(10**100)
def test_render_literal_round_trips(value: object) -> None:
    text = render_literal(value, "where")
    assert "\n" not in text
    assert _same(_evaluate(text), value)


@pytest.mark.parametrize("value", [math.inf, -math.inf, math.nan])
def test_non_finite_floats_render_as_float_calls(value: float) -> None:
    text = render_literal(value, "where")
    assert text in _FLOAT_CALLS
    assert _same(_evaluate(text), value)


def test_code_in_a_string_default_stays_data() -> None:
    for value in [NASTY, '"); import os; ("', "\\'); import os; ('", "'''; import os; '''"]:
        text = render_literal(value, "where")
        tree = ast.parse(f"x = {text}")
        assert [type(node) for node in tree.body] == [ast.Assign]
        assert ast.literal_eval(text) == value


@pytest.mark.parametrize(
    "value",
    [[1], {"a": 1}, {1}, b"bytes", 1j, torch.ones(1), len, object(), (1, [2]), 1.5 + 0j],
    ids=repr,
)
def test_render_literal_refuses_non_literals(value: object) -> None:
    with pytest.raises(ValueError, match=r"Iface\.forward, argument 'x'.*not a literal"):
        render_literal(value, "Iface.forward, argument 'x'")


def test_render_literal_refuses_subclasses_of_literal_types() -> None:
    class Colour(int):
        pass

    class Name(str):
        pass

    for value in [Colour(1), Name("n")]:
        with pytest.raises(ValueError, match="not a literal"):
            render_literal(value, "where")


def test_private_methods_are_not_part_of_the_interface() -> None:
    # `def __helper` in a class body is stored as `_Private__helper`; TorchScript leaves it
    # out of an interface, and so does the generator (for a Protocol too).
    def forward(self: Any, x: Tensor) -> Tensor: ...

    def __helper(self: Any) -> int: ...

    namespace = {"__module__": __name__, "forward": forward, "_Private__helper": __helper}
    stub = type("Private", (Protocol,), namespace)
    assert [method.name for method in parse_interface(stub).methods] == ["forward"]
