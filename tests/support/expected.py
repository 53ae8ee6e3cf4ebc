"""What RemoteModule promises users, as the tests compare it: the attributes that cross the
wire and the texts of its errors, which match upstream ``torch.distributed.nn.RemoteModule``'s
(the README's "How it differs from upstream" lists where ours differ)."""

# What crosses the wire when a RemoteModule is sent over RPC, in this order.
PICKLED_ATTRIBUTES = (
    "on",
    "device",
    "is_device_map_set",
    "is_scriptable",
    "generated_methods",
    "module_rref",
)
PICKLE_ERROR = (
    "Cannot pickle RemoteModule in python pickler. RemoteModule can only be pickled when using RPC"
)
NOT_A_MODULE_ERROR = (
    "Expect `module_cls(*args, **kwargs)` returns an instance of <class nn.Module>, "
    "but it returns an instance of <class 'int'>."
)
REMOTE_DEVICE_FORMAT = "The valid format is '<workername>/<device>'"


def bad_remote_device_error(remote_device: str) -> str:
    """The whole message of the ``ValueError`` for a ``remote_device`` that does not parse."""
    return f"Could not parse remote_device: {remote_device}. {REMOTE_DEVICE_FORMAT}"


def unsupported_method_error(name: str) -> str:
    """The whole message of the ``ValueError`` an ``nn.Module`` method RemoteModule does not
    support raises (``parameters`` adds a pointer to ``remote_parameters``)."""
    return f"Method ``{name}`` not supported for RemoteModule"
