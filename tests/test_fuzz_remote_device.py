"""``remote_device`` strings, fuzzed (issue 5, part 5): every string either parses into a
``RemoteDevice`` that prints back to an equal one, or is refused with a ``ValueError`` that
names it (or a one-line ``RuntimeError`` for a device torch cannot parse). No RPC.
"""

import re
from typing import Any

import pytest
import torch
from hypothesis import example, given

from remote_module import RemoteDevice, parse_remote_device
from remote_module.runtime.caller import arguments
from tests.support.expected import REMOTE_DEVICE_FORMAT
from tests.support.fuzzing import REMOTE_DEVICES, check_parse, fuzz


@fuzz(400)
@given(text=REMOTE_DEVICES)
@example("rank:\u00b2/cpu")
@example("rank:1/cpu")
@example("worker1")
@example("worker1/cuda:0")
@example("/cpu")
@example("worker1/")
@example("cpu")
@example("")
@example("w/\ud800")
def test_parse_remote_device_fuzzed(text: str) -> None:
    check_parse(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("worker1/cpu", RemoteDevice("worker1", torch.device("cpu"))),
        ("worker1", RemoteDevice("worker1", torch.device("cpu"))),
        ("rank:1/cuda:0", RemoteDevice(1, torch.device("cuda:0"))),
        ("rank:0", RemoteDevice(0, torch.device("cpu"))),
        ("trainer/meta", RemoteDevice("trainer", torch.device("meta"))),
    ],
)
def test_parse_remote_device_good_examples(text: str, expected: RemoteDevice) -> None:
    assert check_parse(text) == expected


@pytest.mark.parametrize("value", [None, 1, b"worker1/cpu", ("worker1", "cpu"), ["worker1/cpu"]])
def test_parse_remote_device_refuses_non_strings(value: Any) -> None:
    with pytest.raises(ValueError, match=re.escape(REMOTE_DEVICE_FORMAT)) as error:
        parse_remote_device(value)
    assert str(value) in str(error.value)


@fuzz(400)
@given(text=REMOTE_DEVICES)
@example("worker1/cpu")
@example("/cpu")
@example("rank:1/cpu")
@example("w\x00/cpu")
@example("w\t1/cpu")
@example("wörker/cpu")
@example("a/b/cpu")
def test_a_constructions_target_reads_as_the_parser_does(text: str) -> None:
    # What a construction reads from remote_device (with a shortcut for "<worker>/cpu"): the
    # parser's answer, or its error.
    try:
        parsed = parse_remote_device(text)
    except (ValueError, RuntimeError) as error:
        with pytest.raises(type(error)):
            arguments.target(text)
        return
    expected = (parsed.on, str(parsed.device), parsed.device.type != "cpu")
    assert arguments.target(text) == expected
    assert arguments.target(text) == expected  # remembered
