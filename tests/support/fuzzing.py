"""What the fuzz tests share: their hypothesis settings, and ``remote_device`` strings with
the check every parsed (or refused) one must pass, for the parser's tests and the
constructor's."""

import os

import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from remote_module import RemoteDevice, parse_remote_device
from tests.support.expected import REMOTE_DEVICE_FORMAT

# A longer soak run: REMOTE_MODULE_FUZZ_SCALE=20 pytest tests/test_fuzz_*.py
FUZZ_SCALE = max(1, int(os.environ.get("REMOTE_MODULE_FUZZ_SCALE", "1")))


def fuzz(max_examples: int) -> settings:
    """hypothesis settings for the fuzz tests: no deadline (TorchScript and RPC take their
    time), a modest number of examples so each file runs in well under a minute on 2 cores."""
    return settings(
        max_examples=max_examples * FUZZ_SCALE,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


WORKER_PARTS = st.one_of(
    st.sampled_from(
        [
            "worker0",
            "worker1",
            "worker2",
            "trainer",
            "w",
            "rank:0",
            "rank:1",
            "rank:7",
            "rank:01",
            "rank:-1",
            "rank:+1",
            "rank:",
            "rank:x",
            "rank:1:2",
            "rank:\u00b2",  # SUPERSCRIPT TWO: str.isdigit() is True, int() refuses it
            "rank:\u0661",  # ARABIC-INDIC DIGIT ONE: a decimal digit int() accepts
            "RANK:1",
            "a:b",
            "",
            " ",
            "worker1 ",
            "\u00e4",
            "cpu",
            "cuda:0",
            "meta",
        ]
    ),
    st.text(max_size=8),
)
DEVICE_PARTS = st.one_of(
    st.sampled_from(
        [
            "cpu",
            "cpu:0",
            "cpu:1",
            "cuda",
            "cuda:0",
            "cuda:1",
            "cuda:-1",
            "cuda:x",
            "cuda:0:1",
            "cuda:99999999999999999999",
            "cuda:\u0663",
            "meta",
            "mps",
            "bogus",
            "CPU",
            "",
            " cpu",
            "rank:1",
            "worker1",
        ]
    ),
    st.text(max_size=8),
)
STRUCTURED_DEVICES = st.one_of(
    st.builds(lambda worker, device: f"{worker}/{device}", WORKER_PARTS, DEVICE_PARTS),
    WORKER_PARTS,
    st.builds(lambda w, d, more: f"{w}/{d}/{more}", WORKER_PARTS, DEVICE_PARTS, DEVICE_PARTS),
)
ARBITRARY_DEVICES = st.text(
    alphabet=st.one_of(st.sampled_from("/:rank0123456789 cpumetaworker"), st.characters()),
    max_size=24,
)
REMOTE_DEVICES = st.one_of(STRUCTURED_DEVICES, ARBITRARY_DEVICES)


def _device_part(text: str) -> str:
    fields = text.split("/")
    return fields[1] if len(fields) == 2 else fields[0]


def check_parse(text: str) -> RemoteDevice | None:
    """Parse ``text``; on success check the result, on failure check the error. Any exception
    type other than the two documented ones propagates and fails the calling test."""
    try:
        parsed = parse_remote_device(text)
    except ValueError as error:
        assert type(error) is ValueError, repr(error)
        assert text in str(error) and REMOTE_DEVICE_FORMAT in str(error), str(error)
        return None
    except RuntimeError as error:
        # A bad (non-empty) device string: one line quoting the whole text, then torch's words.
        with pytest.raises(RuntimeError) as from_torch:
            torch.device(_device_part(text))
        message, torch_says = str(error), str(from_torch.value).split("\n", 1)[0]
        assert message.startswith(f"Invalid device in remote_device {text!r}: "), message
        assert message.endswith(f"({torch_says})"), message
        assert "\n" not in message, message
        return None
    assert isinstance(parsed, RemoteDevice)
    on, device = parsed
    assert isinstance(device, torch.device)
    if isinstance(on, str):
        assert on and "/" not in on
        assert text == on or text.startswith(f"{on}/")
        again = f"{on}/{device}"
    else:
        assert type(on) is int and on >= 0, repr(on)
        assert text.startswith("rank:")
        again = f"rank:{on}/{device}"
    assert parse_remote_device(again) == parsed
    if "/" not in text:
        assert device == torch.device("cpu")
    return parsed
