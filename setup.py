"""The recorder's compiled modules; everything else is in pyproject.toml.

The modules ``warptrace/record/native.py`` names (the wrappers and what every recorded event
passes through) are compiled by Cython from their own Python source, with the machine's C
compiler, for the interpreter that runs the build. Optional: without a compiler or
Python's headers, without Cython (a build requirement, so pip brings it), or with
``WARPTRACE_PURE_PYTHON=1`` at build time, the install goes on without them and the
recorder runs the same modules as Python. Once every module is built, a stamp beside them
(``native-<cache tag>.json``) records the SHA-256 of each source compiled: the recorder
uses the compiled modules only while their sources are unchanged (``record/native.py``).
"""

import importlib.util
import json
import os
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def _native():
    """warptrace/record/native.py, loaded by path (importing warptrace would import Warp)."""
    spec = importlib.util.spec_from_file_location(
        "_warptrace_native_for_setup", os.path.join(HERE, "warptrace", "record", "native.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


native = _native()
# the digests of the sources as Cython reads them (not as they are once the build is over)
SOURCES = native.stamp_of(os.path.join(HERE, "warptrace"))


def _extensions():
    if os.environ.get(native.PURE_PYTHON_ENV, "") not in ("", "0") or sys.implementation.name != "cpython":
        return []
    try:
        from Cython.Build import cythonize
        from setuptools import Extension
    except ImportError:  # (a build without the build requirements: the Python source only)
        return []
    modules = [
        Extension(name, [os.path.relpath(native.source_path(name, os.path.join(HERE, "warptrace")), HERE)],
                  optional=True)
        for name in native.NATIVE_MODULES
    ]  # fmt: skip
    # the generated C goes to build/, not beside the sources; directives: the Python semantics
    # of the source (annotations are for mypy, not C types)
    directives = {"language_level": 3, "binding": True, "annotation_typing": False}
    built = cythonize(
        modules, build_dir=os.path.join("build", "cython"), compiler_directives=directives, quiet=True
    )
    for ext in built:  # (cythonize's extensions do not keep `optional`)
        ext.optional = True
    return built


class BuildNative(build_ext):
    """build_ext that writes the stamp once every native module is built (and removes a
    stamp and the modules of an earlier build first: a failed build leaves none of them)."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:
            self.parallel = os.cpu_count() or 1

    def build_extensions(self):
        if self.compiler.compiler_type == "unix":  # no debug information: a quicker build, smaller modules
            for ext in self.extensions:
                ext.extra_compile_args = [*ext.extra_compile_args, "-g0"]
        super().build_extensions()

    def _stamp(self):
        folder = os.path.dirname(self.get_ext_fullpath("warptrace.record.native"))
        return os.path.join(folder, os.path.basename(native.stamp_path()))

    def run(self):
        for path in [self._stamp(), *(self.get_ext_fullpath(ext.name) for ext in self.extensions)]:
            if os.path.exists(path):
                os.remove(path)
        super().run()
        if self.extensions and all(
            os.path.exists(self.get_ext_fullpath(ext.name)) for ext in self.extensions
        ):
            with open(self._stamp(), "w") as stamp:
                json.dump({"modules": SOURCES}, stamp, indent=1)
        else:
            for ext in self.extensions:  # all or none (see record/native.py)
                path = self.get_ext_fullpath(ext.name)
                if os.path.exists(path):
                    os.remove(path)

    def get_outputs(self):
        outputs = super().get_outputs()
        return [*outputs, self._stamp()] if os.path.exists(self._stamp()) else outputs


setup(ext_modules=_extensions(), cmdclass={"build_ext": BuildNative})
