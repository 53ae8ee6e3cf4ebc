"""A module that takes its time, for the documentation's timeout examples."""

import time

from torch import Tensor, nn


class Sleeper(nn.Module):
    """Returns ``x`` after ``seconds``."""

    def forward(self, x: Tensor, seconds: float = 0.0) -> Tensor:
        time.sleep(seconds)
        return x
