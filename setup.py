"""The Cython atomics extension; everything else about the package is in pyproject.toml."""

from Cython.Build import cythonize
from setuptools import Extension, setup

setup(
    ext_modules=cythonize([Extension("nets._atomics", ["nets/_atomics.pyx"], extra_compile_args=["-O3"])],
                          language_level=3),
    zip_safe=False,
)
