"""Correct uses of the typed classes ``remote-module-codegen`` writes, as a user's code would
make them: ``mypy --strict`` and pyright (strict) accept every line, and ``assert_type`` pins
what they infer. Checked by ``tests/test_type_checking.py`` against a package the CLI generated
from ``tests/scorer``; never imported by the test suite."""

from scorer.generated import RemoteScorerInterface, RemoteScorerProtocol
from scorer.model import Scored, Scorer
from torch import Tensor
from torch.distributed.rpc import RRef
from torch.futures import Future
from torch.nn import Parameter
from typing_extensions import assert_type

from remote_module import RemoteModule


def use_the_torchscript_interface(x: Tensor) -> None:
    rm = RemoteScorerInterface("worker1/cpu", Scorer, args=(4,), timeout=5.0)
    assert_type(rm, RemoteScorerInterface)
    assert isinstance(rm, RemoteModule)
    assert_type(rm.forward(x), Scored)
    assert_type(rm.forward(x, scale=2.0), Scored)
    assert_type(rm(x, 2.0), Scored)
    future: Future[Scored] = rm.forward_async(x)  # a torch future where one is expected
    assert_type(future.wait(), Scored)
    assert_type(rm.forward_async(x).wait(), Scored)
    assert_type(rm.forward_async(x).then(lambda done: done.wait().label), Future[int])
    assert_type(rm.forward(x).score, Tensor)
    assert_type(rm.forward(x).label, int)
    assert_type(rm.stats(), dict[str, float])
    stats: Future[dict[str, float]] = rm.stats_async()
    assert_type(stats.wait(), dict[str, float])
    assert_type(rm.top(x, k=3), list[Scored])
    assert_type(rm.best(x, threshold=None), Scored | None)
    assert_type(rm.table_async(x).wait(), dict[str, Scored])
    assert_type(rm.pair(x), tuple[Scored, Tensor])
    assert_type(rm.train(), RemoteScorerInterface)
    assert_type(rm.remote_parameters(), list[RRef[Parameter]])
    again = RemoteScorerInterface.init_from_module_rref("worker1/cpu", rm.get_module_rref())
    assert_type(again, RemoteScorerInterface)


def use_the_protocol(x: Tensor) -> None:
    rm = RemoteScorerProtocol("worker1/cpu", Scorer, kwargs={"features": 4})
    assert_type(rm.forward(x), Scored)
    assert_type(rm(x), Scored)
    top: Future[list[Scored]] = rm.top_async(x, 1)
    assert_type(top.wait(), list[Scored])
    best = rm.best(x)
    assert_type(best, Scored | None)
    if best is not None:
        assert_type(best.label, int)


async def await_the_futures(x: Tensor) -> None:
    rm = RemoteScorerInterface("worker1/cpu", Scorer, args=(4,))
    assert_type(await rm.forward_async(x), Scored)
    assert_type((await rm.forward_async(x, 2.0)).label, int)
    assert_type(await rm.stats_async(), dict[str, float])
    assert_type(await rm.pair_async(x), tuple[Scored, Tensor])
    protocol = RemoteScorerProtocol("worker1/cpu", Scorer)
    assert_type(await protocol.top_async(x, 1), list[Scored])
    assert_type(await protocol.best_async(x), Scored | None)
    assert_type(await protocol.table_async(x), dict[str, Scored])


def untyped_remote_module_stays_dynamic(x: Tensor) -> None:
    rm = RemoteModule("worker1/cpu", Scorer)
    rm.forward(x)
    rm.anything_generated(x)
