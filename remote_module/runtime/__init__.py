"""The runtime, split by role (``ARCHITECTURE.md`` draws the layers):

- ``module``: the :class:`RemoteModule` class (what a caller holds);
- ``owner``: what runs on the owner (creating the module, parameters, state, training mode);
- ``wire``: what crosses the wire when a RemoteModule is sent over RPC;
- ``device``: parsing ``remote_device``;
- ``calls``: sending a generated method's call and waiting for it;
- ``values``: walkers over arguments and results, caller-side type checks;
- ``registry``: the generated modules loaded in this process (pre-generated or in memory),
  ``cache`` their on-disk render cache, ``generator`` the one door to the generator;
- ``contract``: the one module generated code imports.

Importing this package imports none of them; ``remote_module.RemoteModule`` loads the class.
"""
