"""The runtime, split by role (``ARCHITECTURE.md`` draws the layers):

- ``module``: the :class:`RemoteModule` class (what a caller holds), ``refused`` what it
  refuses of ``nn.Module``, ``record`` its per-instance state;
- ``construction``: building one, every way in; ``arguments`` reads and checks its arguments,
  ``remote_device`` parses ``remote_device``;
- ``owner``: what runs on the owner (creating the module, parameters, state, training mode),
  ``keys`` the owner's table of modules and the caller's key in it;
- ``calls``: sending a generated method's call and waiting for it; ``pending`` and ``replies``
  what waits for a construction's or a request's reply;
- ``wire``: what crosses the wire when a RemoteModule is sent over RPC;
- ``values``: walkers over arguments and results, caller-side type checks;
- ``errors``: naming a failed remote operation (``script_errors`` reads TorchScript's text
  of one);
- ``failover`` and ``standby``: a module that survives its owner's death;
- ``registry``: the generated modules loaded in this process (pre-generated or in memory),
  ``cache`` their on-disk render cache, ``generator`` the one door to the generator;
- ``contract``: the one module generated code imports.

Importing this package imports none of them; ``remote_module.RemoteModule`` loads what a first
construction and call need, the rest loads with its first use.
"""
