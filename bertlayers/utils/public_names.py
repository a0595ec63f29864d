"""Public namespaces that name classes living higher in the house.

`bertlayers.layers` lists every layer a user composes, XLNet's and ELECTRA's included, but those
live in their family's folder above the layers tier. Importing them here would be an import up
the tiers (and a cycle at start-up), so a namespace names them and resolves each on first use
(PEP 562), as keras-hub's generated `api/` package names classes from its model folders.
"""

import importlib


def forwarded_names(namespace, forwarded):
    """(`__getattr__`, `__dir__`) for module `namespace` that resolve `forwarded` {name: module} lazily."""
    module_names = dict(forwarded)

    def __getattr__(name):
        if name not in module_names:
            raise AttributeError(f"module {namespace!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module_names[name]), name)

    def __dir__():
        return sorted(set(importlib.import_module(namespace).__dict__) | set(module_names))

    return __getattr__, __dir__
