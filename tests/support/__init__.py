"""What the tests share besides the fixtures in ``tests/conftest.py``.

- ``rpc_group``: a real RPC group on 127.0.0.1 (this process is ``worker0``), run by
  ``rpc_worker``; ``faulty_worker`` is a worker on torch's fault-injecting agent.
- ``interfaces``: the interfaces and modules most tests use (``LinearInterface``,
  ``ScaledLinear``, ``ShapesInterface``).
- ``runtime_helpers``, ``reliability_helpers``: modules, interfaces and RPC functions the
  runtime and reliability tests send to workers.
- ``expected``: what RemoteModule promises, as the tests compare it (the attributes that cross
  the wire, the texts of its errors).
- ``fuzzing``: the fuzz tests' hypothesis settings and ``remote_device`` strategies.
- ``fresh_worker``, ``fresh_caller``, ``fresh_modules``, ``fresh_broken``: rounds of new
  processes for ``tests/test_fresh_processes.py``, whose workers meet ``remote_module`` only
  through messages (``fresh_worker`` and ``fresh_modules`` import torch and the standard
  library only).

Every module here is importable on every worker, with no side effects on import, except
``fresh_broken``, whose import raises on purpose in a process started with
``RM_FRESH_FAIL_IMPORT`` set.
"""
