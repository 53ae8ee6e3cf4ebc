"""Parsing ``remote_device``: ``"<workername>/<device>"``, ``"rank:<n>/<device>"`` or a bare
worker name (the device then defaults to ``cpu``); and whether RPC has a device map to the
worker it names."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import torch
import torch.distributed.rpc as rpc

from remote_module.runtime.errors import UnknownWorkerError

__all__ = ["RemoteDevice", "is_device_map_set", "parse_remote_device", "target", "worker_info"]

_PARSE_ERROR = "Could not parse remote_device: {}. The valid format is '<workername>/<device>'"


class RemoteDevice(NamedTuple):
    """A parsed ``remote_device``: the owner (worker name or rank) and the device on it."""

    on: str | int
    device: torch.device


def parse_remote_device(remote_device: str) -> RemoteDevice:
    """Parse ``"<workername>/<device>"``, ``"rank:<n>/<device>"`` or a bare worker name.

    A malformed string (an empty worker or device, more than one ``/``, a bad rank) raises
    ``ValueError`` naming it; a well-formed one whose device torch does not know raises
    torch's own ``RuntimeError``.

    Example::

        >>> parse_remote_device("rank:1/cpu")
        RemoteDevice(on=1, device=device(type='cpu'))
    """
    if not isinstance(remote_device, str):
        raise ValueError(_PARSE_ERROR.format(remote_device))
    return _parse(remote_device)


def target(remote_device: str) -> tuple[str | int, str, bool]:
    """The owner, the device's text, and whether it is not the CPU: what a construction needs
    of ``remote_device``, which it parses as :func:`parse_remote_device` does."""
    if type(remote_device) is not str:
        parse_remote_device(remote_device)  # raises: not a string
    return _target(remote_device)


# Every construction asks; a program uses a handful of remote devices.
@functools.lru_cache(maxsize=256)
def _target(remote_device: str) -> tuple[str | int, str, bool]:
    owner, _, device = remote_device.partition("/")
    if device == "cpu" and owner and owner.isascii() and owner.isprintable() and ":" not in owner:
        # "<workername>/cpu", as _parse reads it, without torch.device and the parse: in a
        # fresh process they cost more than everything else before the request.
        return (owner, "cpu", False)
    parsed = _parse(remote_device)
    return (parsed.on, str(parsed.device), parsed.device.type != "cpu")


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
    parsed_device = torch.device(device)  # torch's own RuntimeError for a bad device
    parts = owner.split(":")
    if len(parts) == 1:
        return RemoteDevice(owner, parsed_device)
    if len(parts) == 2 and parts[0] == "rank" and parts[1].isascii() and parts[1].isdigit():
        return RemoteDevice(int(parts[1]), parsed_device)
    raise error


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


def is_device_map_set(on: str | int) -> bool:
    """Whether the current RPC agent has a device map to ``on`` (which must be a worker): fixed
    for an agent's lifetime, so asked once per agent and owner."""
    agent = rpc._get_current_rpc_agent()
    if _device_maps_of[0] is not agent:
        _device_maps.clear()
        _device_maps_of[0] = agent
    known = _device_maps.get(on)
    if known is None:
        known = _device_maps[on] = bool(agent._get_device_map(_worker_info(agent, on)))
    return known


# owner -> whether the agent in _device_maps_of has a device map to it
_device_maps: dict[str | int, bool] = {}
_device_maps_of: list[Any] = [None]


def worker_info(on: str | int) -> Any:
    """The current RPC group's ``WorkerInfo`` of ``on`` (a worker name or rank); an unknown one
    raises :class:`UnknownWorkerError`."""
    return _worker_info(rpc._get_current_rpc_agent(), on)


def _worker_info(agent: Any, on: str | int) -> Any:
    if isinstance(on, str):
        try:
            return agent.get_worker_info(on)
        except (RuntimeError, TypeError) as error:
            raise UnknownWorkerError(
                f"RemoteModule: no RPC worker named {on!r} ({error})"
            ) from None
    for info in agent.get_worker_infos():
        if info.id == on:
            return info
    raise UnknownWorkerError(f"RemoteModule: no RPC worker has rank {on}")
