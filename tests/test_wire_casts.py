"""The two halves of ``wire_dtype`` agree value for value.

Python calls of a RemoteModule with a ``wire_dtype`` cast their arguments and results with the
runtime's generic walkers (``remote_module.runtime.values``, which know no types); scripted
callers and the owner's TorchScript wire functions with the generated casters and restorers
(compiled, type-directed). Both must cast the same tensors to the same dtype, leave the same
values alone and record the dtypes in the same order, so that either side's restore undoes
the other's cast. No RPC: the walkers run here.
"""

from typing import Any, Dict, List, Optional, Tuple, Union

import pytest
import torch
from torch import Tensor

from remote_module import codegen
from remote_module._generator import api
from remote_module._generator.model import TypeRef
from remote_module.codegen import parse_interface
from remote_module.runtime import values
from tests.golden_interfaces import Stats

WIRE = torch.bfloat16


@torch.jit.interface
class CastProbeInterface:
    def forward(
        self,
        x: Tensor,
        maybe: Optional[Tensor],
        many: List[Tensor],
        table: Dict[str, Tensor],
        pair: Tuple[Tensor, int],
        stats: Stats,
        nested: List[Dict[str, Tensor]],
        both: Tuple[List[Tensor], Stats],
        either: Union[Tensor, List[Tensor], int],
    ) -> Tuple[List[Tensor], Stats]:
        pass


def _tensors() -> list[Tensor]:
    """Tensors of every kind a value may hold: floating ones of three dtypes (cast), an
    integer and a boolean one (left alone), an empty floating one (cast, and recorded)."""
    return [
        torch.linspace(-1.0, 1.0, 6).reshape(2, 3),
        torch.tensor([0.25, 0.5], dtype=torch.float64),
        torch.ones(3, dtype=torch.float16),
        torch.arange(4),
        torch.tensor([True, False]),
        torch.empty(0),
    ]


def _samples(type_: TypeRef) -> list[Any]:
    f32, f64, f16, i64, flags, empty = _tensors()
    samples: dict[str, list[Any]] = {
        "Tensor": [f32, f64, f16, i64, flags, empty],
        "Tensor | None": [None, f64, i64],
        "list[Tensor]": [[], [f32, i64, f16, flags]],
        "dict[str, Tensor]": [{}, {"b": f64, "a": i64, "c": f32}],
        "tuple[Tensor, int]": [(f16, 7), (i64, -1)],
        "Stats": [Stats(f32, 3), Stats(i64, 0)],
        "list[dict[str, Tensor]]": [[{"a": f32, "b": i64}, {}, {"c": f64}]],
        "tuple[list[Tensor], Stats]": [([f16, i64, empty], Stats(f64, 2))],
        "Tensor | list[Tensor] | int": [f64, [flags, f32], 5],
    }
    return samples[str(type_)]


def _flat(value: Any) -> list[Any]:
    """``value`` as a flat list of what a comparison needs: container shapes, tensors
    (dtype and values) and every other value, in order. A NamedTuple (TorchScript's rendering
    of one included) reads as its fields."""
    if isinstance(value, Tensor):
        return [("tensor", value.dtype, value.tolist())]
    if isinstance(value, tuple):
        kind = getattr(value, "_fields", "tuple")
        return [(kind, len(value)), *(leaf for item in value for leaf in _flat(item))]
    if isinstance(value, list):
        return [("list", len(value)), *(leaf for item in value for leaf in _flat(item))]
    if isinstance(value, dict):
        flat: list[Any] = [("dict", list(value))]
        return flat + [leaf for item in value.values() for leaf in _flat(item)]
    return [value]


def _walker(module: Any, kind: str, type_: TypeRef) -> Any:
    """The generated walker of ``kind`` ("cast", "restore") for ``type_``, compiled by
    TorchScript inside a small compiled function that also returns the dtype list (a Python
    list passed to TorchScript is a copy: what it appends stays there)."""
    name = api.walker_name(parse_interface(CastProbeInterface), kind, type_)
    # A tensor's walker is the contract's leaf helper (``_rm.cast_tensor``), the others the
    # generated module's own.
    owner = module._rm if name.startswith("_rm.") else module
    walker = getattr(owner, name.removeprefix("_rm."))
    namespace = {**vars(module), "walker": walker, "List": List, "Tuple": Tuple}
    annotation = str(type_)
    if kind == "cast":
        source = (
            f"def run(value: {annotation}, dtype: torch.dtype, sent: List[Tensor])"
            f" -> Tuple[{annotation}, List[Tensor]]:\n"
            "    return walker(value, dtype, sent), sent\n"
        )
    else:
        source = (
            f"def run(value: {annotation}, sent: List[Tensor]) -> {annotation}:\n"
            "    return walker(value, sent)\n"
        )
    compiled = _compile(source, namespace)
    if kind == "cast":

        def cast(value: Any, dtype: torch.dtype, sent: list[Tensor]) -> Any:
            result, recorded = compiled(value, dtype, [])
            sent.extend(recorded)
            return result

        return cast
    return compiled


def _compile(source: str, namespace: dict[str, Any]) -> Any:
    """``run`` of ``source``, compiled with ``namespace``'s names in scope."""
    locals().update(namespace)  # the compilation unit resolves names from this frame
    run = torch.jit.CompilationUnit(source).run
    return run


def _types() -> list[TypeRef]:
    return list(api.movable_types(parse_interface(CastProbeInterface)))


@pytest.fixture(scope="module")
def generated() -> Any:
    return codegen.instantiate_scriptable_remote_module_template(CastProbeInterface, True)


def test_every_shape_is_sampled() -> None:
    assert sorted(map(str, _types())) == sorted(
        [
            "Tensor",
            "Tensor | None",
            "list[Tensor]",
            "dict[str, Tensor]",
            "tuple[Tensor, int]",
            "Stats",
            "list[dict[str, Tensor]]",
            "tuple[list[Tensor], Stats]",
            "Tensor | list[Tensor] | int",
        ]
    )


@pytest.mark.parametrize("type_", _types(), ids=str)
def test_typed_and_generic_casts_agree(type_: TypeRef, generated: Any) -> None:
    cast = _walker(generated, "cast", type_)
    for value in _samples(type_):
        typed_sent: list[Tensor] = []
        generic_sent: list[Tensor] = []
        typed = cast(value, WIRE, typed_sent)
        generic = values.cast_to_wire(value, WIRE, generic_sent)
        assert _flat(typed) == _flat(generic), value
        assert [t.dtype for t in typed_sent] == [t.dtype for t in generic_sent], value
        assert all(t.numel() == 0 for t in typed_sent + generic_sent)
        # As the owner casts a scripted module's result: the same, NamedTuples as tuples.
        plain = _flat(values.cast_to_wire(value, WIRE, [], named=False))
        assert plain == [_unnamed(leaf) for leaf in _flat(typed)]
        floating = [leaf for leaf in _flat(value) if _is_floating(leaf)]
        assert [leaf[1] for leaf in floating] == [t.dtype for t in generic_sent]
        assert all(leaf[1] == WIRE for leaf in _flat(generic) if _is_floating(leaf))


@pytest.mark.parametrize("type_", _types(), ids=str)
def test_either_restore_undoes_either_cast(type_: TypeRef, generated: Any) -> None:
    cast = _walker(generated, "cast", type_)
    restore = _walker(generated, "restore", type_)
    for value in _samples(type_):
        typed_sent: list[Tensor] = []
        generic_sent: list[Tensor] = []
        typed = cast(value, WIRE, typed_sent)
        generic = values.cast_to_wire(value, WIRE, generic_sent)
        back = [
            restore(generic, list(generic_sent)),
            values.restore_from_wire(typed, list(typed_sent)),
            restore(typed, list(typed_sent)),
            values.restore_from_wire(generic, list(generic_sent)),
        ]
        expected = _flat(values.restore_from_wire(generic, list(generic_sent)))
        # Dtypes as they were; values as bfloat16 left them, the same on every path.
        assert [_dtypes(flat) for flat in map(_flat, back)] == [_dtypes(_flat(value))] * 4
        assert [_flat(restored) for restored in back] == [expected] * 4


def _unnamed(leaf: Any) -> Any:
    """A NamedTuple's shape in :func:`_flat` as a plain tuple's."""
    if isinstance(leaf, tuple) and isinstance(leaf[0], tuple):
        return ("tuple", leaf[1])
    return leaf


def _is_floating(leaf: Any) -> bool:
    return isinstance(leaf, tuple) and leaf[0] == "tensor" and leaf[1].is_floating_point


def _dtypes(flat: list[Any]) -> list[Any]:
    return [leaf[1] if isinstance(leaf, tuple) and leaf[0] == "tensor" else leaf for leaf in flat]
