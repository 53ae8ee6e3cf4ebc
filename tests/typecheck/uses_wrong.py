"""Wrong uses of the typed classes: ``mypy --strict`` and pyright (strict) each report an error
on every line marked ``# error`` and on no other line. Checked by
``tests/test_type_checking.py``; never imported by the test suite."""

from scorer.generated import RemoteScorerInterface, RemoteScorerProtocol
from scorer.model import Scorer
from torch import Tensor


def wrong_uses(x: Tensor) -> None:
    rm = RemoteScorerInterface("worker1/cpu", Scorer)
    rm.forward("not a tensor")  # error: a wrong argument type
    rm.forward()  # error: a missing argument
    rm.forward(x, scale="big")  # error: a wrong keyword argument type
    rm.forwrd(x)  # error: an unknown method
    rm.stats_asnyc()  # error: an unknown twin
    print(rm.forward(x).scroe)  # error: an unknown attribute of a result
    print(rm.forward_async(x).wait().labels)  # error: the same through the future
    print(rm.top(x, k="two"))  # error: a wrong type for a defaulted argument
    print(rm.stats()["weight_sum"].upper())  # error: a float has no upper()
    RemoteScorerInterface("worker1/cpu", Scorer, timeout="5")  # error: a wrong option type
    protocol = RemoteScorerProtocol("worker1/cpu", Scorer)
    print(protocol.stats(1))  # error: too many arguments
    print(protocol.pair(x)[0].score.nonexistent)  # error: Tensor has no such attribute


async def wrong_awaits(x: Tensor) -> None:
    rm = RemoteScorerInterface("worker1/cpu", Scorer)
    print((await rm.forward_async(x)).scroe)  # error: an unknown attribute of an awaited result
    print(await rm.forward(x))  # error: a result is no future: nothing to await
    protocol = RemoteScorerProtocol("worker1/cpu", Scorer)
    print((await protocol.stats_async())["weight_sum"].upper())  # error: a float has no upper()
