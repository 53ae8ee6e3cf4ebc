"""The caller's side: what a process holding a RemoteModule runs (``ARCHITECTURE.md`` draws
both sides).

- ``module``: the :class:`RemoteModule` class, ``refused`` what it refuses of ``nn.Module``;
- ``record``: all of one RemoteModule's own state (its call state, what is in flight, its
  failover plan);
- ``construction``: building one, every way in; ``arguments`` reads and checks its arguments;
- ``calls``: sending a generated method's call and waiting for it; ``keys`` the module's key
  in its owner's table; ``pending`` and ``replies`` what waits for a construction's or a
  request's reply;
- ``pickling``: what crosses the wire when a RemoteModule is sent over RPC;
- ``failover``: meeting a dead owner, and the checkpoints a holder asks for.

Everything here sends messages that name ``remote_module.runtime.owner`` only.
"""
