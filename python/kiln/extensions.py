"""The native extensions, imported on first use with an error that says what is missing.

Why a module of its own: kiln.compiler (which compiles) and kiln.gpu (whose programs show their IR through the
compiler) both need the extensions, and neither may import the other's module in both directions.
"""

import importlib


def _extension(module, missing):
    """The extension ``module``, or an ImportError that says what is missing (``missing`` with the cause)."""
    try:
        return importlib.import_module(module, __package__)
    except ImportError as error:
        raise ImportError(missing.format(error=error)) from None


def native():
    """The compiler extension."""
    return _extension("._kiln", "Kiln's compiler extension is not built for this Python ({error}); programs can "
                                "still be loaded from compiled files or the disk cache")


def native_host():
    """The CPU host backend extension."""
    return _extension("._kiln_host", "Kiln's CPU host backend is not built for this Python ({error}); GPU programs "
                                     "can still be loaded from compiled files or the disk cache")
