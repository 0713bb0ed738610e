"""The attention packages' faces: each public name loads from its module on first access.

A face lists its modules; the names are each module's own ``__all__``, read from the module's
source (the ``__all__ = [...]`` literal) instead of by importing it: ``import
gglspeedup.attention`` then imports neither torch nor Numba, and no module has to read a table of
the face's (which is how the list of layers used to be kept). ``tests/test_attention_face.py``
checks that every module's imported ``__all__`` is the one read here.
"""

from __future__ import annotations

import ast
import importlib
import os
import re

__all__ = ["read_names", "Face"]

_ALL = re.compile(r"^__all__ = (\[[^\]]*\])", re.MULTILINE)


def read_names(package: str, folder: str, modules) -> dict[str, str]:
    """``{name: "package.module"}`` for every name in the ``__all__`` list of each module of
    ``modules`` (files in ``folder``), in order; raises ``ImportError`` for a module whose
    ``__all__`` is not a literal list of strings or that repeats another module's name."""
    names: dict[str, str] = {}
    for module in modules:
        with open(os.path.join(folder, f"{module}.py"), encoding="utf-8") as source:
            found = _ALL.search(source.read())
        listed = ast.literal_eval(found.group(1)) if found else None
        if not isinstance(listed, list) or not all(isinstance(name, str) for name in listed):
            raise ImportError(f"{package}.{module} needs a literal __all__ = [...] list of names (its face reads it)")
        for name in listed:
            if name in names:
                raise ImportError(f"{package}: {name!r} is in the __all__ of both {names[name]} and {module}")
            names[name] = f"{package}.{module}"
    return names


class Face:
    """A package's ``__getattr__`` and ``__dir__`` over ``names`` (``{name: module}``): a name is
    imported from its module on first access and then kept in the package's namespace."""

    def __init__(self, package: str, namespace: dict, names: dict[str, str]):
        self.package, self.namespace, self.names = package, namespace, names

    def getattr(self, name: str):
        module = self.names.get(name)
        if module is None:
            raise AttributeError(f"module {self.package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        self.namespace[name] = value
        return value

    def dir(self) -> list[str]:
        return sorted(set(self.namespace) | set(self.names))
