"""Generated modules rendered in memory live under this package's name.

Importing it makes the non-scriptable module available, so an owner that unpickles a
reference to ``remote_module._generated.non_scriptable._remote_forward`` finds it.
"""

from remote_module.codegen.registry import non_scriptable_module

non_scriptable_module()
