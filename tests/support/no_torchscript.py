"""Run as ``python -m tests.support.no_torchscript OUTPUT_DIR`` by
``tests/test_without_torchscript.py``, in processes where TorchScript is unavailable:
RemoteModules without an interface and with a ``typing.Protocol`` interface across real RPC
workers, a typed class the CLI generated in that world, and what needs TorchScript. Prints
what it saw as one JSON line."""

import json
import sys
from typing import Any

import torch
from torch import Tensor, nn


class FakeScriptInterface:
    """Marked like a @torch.jit.interface class (which cannot be made here)."""

    __torch_script_interface__ = "__torch__.tests.support.no_torchscript.FakeScriptInterface"

    def forward(self, x: Tensor) -> Tensor:
        raise NotImplementedError


def main(generated_dir: str) -> dict[str, Any]:
    import remote_module
    from remote_module import RemoteModule
    from tests.scorer.model import Scorer, ScorerProtocol
    from tests.support.rpc_group import rpc_group

    seen: dict[str, Any] = {
        "script_patched": getattr(torch.jit.script, "_rm_removed", False),
        "version": remote_module.__version__,
    }
    sys.path.insert(0, generated_dir)
    from gen_protocol import RemoteScorerProtocol

    x = torch.ones(3, 4)
    with rpc_group(2):
        plain = RemoteModule("worker1/cpu", nn.Linear, args=(4, 2))
        seen["plain"] = [list(plain(x).shape), list(plain.forward_async(x).wait().shape)]
        seen["plain_parameters"] = len(plain.remote_parameters())
        seen["plain_eval"] = plain.eval() is plain and not plain.training
        protocol = RemoteModule("worker1/cpu", Scorer, module_interface_cls=ScorerProtocol)
        scored = protocol.forward(x, scale=2.0)
        seen["protocol"] = [type(scored).__name__, protocol.is_scriptable, len(scored.score)]
        seen["protocol_async"] = type(protocol.top_async(x, k=1).wait()[0]).__name__
        # @remote_module.interface gives a Protocol interface here.
        from tests.support.decorated import SummerInterface
        from tests.support.decorated_module import Summer

        summer = RemoteModule("worker1/cpu", Summer, module_interface_cls=SummerInterface)
        seen["decorated"] = [summer.is_scriptable, float(summer(x).total), summer.features()]
        typed = RemoteScorerProtocol("worker1/cpu", Scorer)
        seen["typed"] = [type(typed).__name__, type(typed(x)).__name__]
        # The compile route needs no TorchScript: one graph, and a program.
        from tests.support.compile_helpers import Affine, AffineProtocol, Hybrid

        for name, interface in (("compiled_plain", None), ("compiled_protocol", AffineProtocol)):
            model = Hybrid(RemoteModule("worker1/cpu", Affine, module_interface_cls=interface))
            explained = torch._dynamo.explain(model)(x[:, :4])
            compiled = torch.compile(model, fullgraph=True)(x[:, :4])
            program = torch.export.export(model, (x[:, :4],)).module()(x[:, :4])
            eager = model(x[:, :4])
            seen[name] = [
                explained.graph_count,
                explained.graph_break_count,
                bool(torch.allclose(compiled, eager)),
                bool(torch.allclose(program, eager)),
            ]
        try:
            RemoteModule("worker1/cpu", nn.Identity, module_interface_cls=FakeScriptInterface)
        except RuntimeError as error:
            seen["needs_torchscript"] = [type(error).__name__, str(error)]
    return seen


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1])))
