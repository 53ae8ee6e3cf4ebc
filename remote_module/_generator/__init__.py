"""The generator: an interface class in, remote-module source out (its public face is
``remote_module.codegen``).

- ``model``: the frozen, typed model of an interface;
- ``parse``: reading an interface class into it, every check included (``parse_interface``);
- ``api`` and ``views``: names, declarations and the views templates render from; ``walkers``
  and ``layout`` what they lay out;
- ``render``: the Jinja environment and the templates in ``remote_module/templates``;
- ``cli``: ``remote-module-codegen``.

It imports nothing of the runtime, only the leaves (``remote_module._shared``): the runtime
reaches it through ``remote_module.runtime.generator`` alone, where no build-time module
serves an interface.
"""
