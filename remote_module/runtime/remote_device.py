"""The public parser of ``remote_device``: :class:`RemoteDevice` and
:func:`parse_remote_device` (``"<workername>/<device>"``, ``"rank:<n>/<device>"`` or a bare
worker name, the device then ``cpu``). Loaded on first use, not with the package (a NamedTuple
class cost ~0.1 ms of every import); a construction reads ``remote_device`` through
``remote_module.runtime.caller.arguments.target``, which needs it only off its ``"<worker>/cpu"``
shortcut."""

from __future__ import annotations

from typing import NamedTuple

import torch

__all__ = ["RemoteDevice", "parse_remote_device"]

_PARSE_ERROR = "Could not parse remote_device: {}. The valid format is '<workername>/<device>'"


class RemoteDevice(NamedTuple):
    """A parsed ``remote_device``: the owner (worker name or rank) and the device on it."""

    on: str | int
    device: torch.device


def parse_remote_device(remote_device: str) -> RemoteDevice:
    """Parse ``"<workername>/<device>"``, ``"rank:<n>/<device>"`` or a bare worker name.

    A malformed string (an empty worker or device, more than one ``/``, a bad rank) raises
    ``ValueError`` naming it; a well-formed one whose device torch cannot parse raises
    ``RuntimeError`` (torch's type) whose one line quotes the whole string, says what is wrong
    with the device and ends with torch's own words.

    Example::

        >>> parse_remote_device("rank:1/cpu")
        RemoteDevice(on=1, device=device(type='cpu'))
    """
    if not isinstance(remote_device, str):
        raise ValueError(_PARSE_ERROR.format(remote_device))
    return _parse(remote_device)


def _parse(remote_device: str) -> RemoteDevice:
    error = ValueError(_PARSE_ERROR.format(remote_device))
    fields = remote_device.split("/")
    if len(fields) == 2:
        owner, device = fields
    elif len(fields) == 1 and not _is_local_device(fields[0]):
        owner, device = fields[0], "cpu"
    else:
        raise error
    if not owner or not device or not _encodable(owner):
        raise error
    parsed_device = _device(remote_device, device)
    parts = owner.split(":")
    if len(parts) == 1:
        return RemoteDevice(owner, parsed_device)
    if len(parts) == 2 and parts[0] == "rank" and parts[1].isascii() and parts[1].isdigit():
        return RemoteDevice(int(parts[1]), parsed_device)
    raise error


def _device(remote_device: str, device: str) -> torch.device:
    try:
        return torch.device(device)
    except RuntimeError as error:
        torch_says = str(error).split("\n", 1)[0]
    kind, colon, index = device.partition(":")
    if not kind:
        what = "the device type before ':' is missing"
    elif not _is_local_device(kind):
        what = f"{kind!r} is not a device type torch knows"
    elif colon and not index:
        what = "the device index after ':' is missing"
    else:
        what = f"{index!r} is not a device index (a number from 0, as in 'cuda:0')"
    # torch's words last: code matching them (torch's own tests do) still finds them.
    raise RuntimeError(
        f"Invalid device in remote_device {remote_device!r}: {what} ({torch_says})"
    ) from None


def _is_local_device(text: str) -> bool:
    """``"cpu"`` or ``"cuda:0"`` alone names a device, not a worker: upstream refuses it."""
    try:
        torch.device(text)
    except RuntimeError:
        return False
    return True


def _encodable(text: str) -> bool:
    """RPC sends worker names as UTF-8 C strings."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\x00" not in text
