"""Build and install c4fast, nets and selfplay (with the Cython atomics extension)."""

from Cython.Build import cythonize
from setuptools import Extension, find_packages, setup

extensions = [
    Extension("nets._atomics", ["nets/_atomics.pyx"], extra_compile_args=["-O3"]),
]

WEB = ["starlette>=0.37", "uvicorn>=0.27"]  # python -m selfplay.web
ONNX = ["onnxruntime>=1.17", "onnx>=1.15"]  # the CPU presets' inference engine (nets.backends "ort")

setup(
    name="c4fast",
    version="0.1.0",
    description="Fast AlphaZero for Saiblo Connect Four: Numba rules and MCTS, PyTorch nets",
    packages=find_packages(include=["c4fast", "c4fast.*", "nets", "nets.*", "selfplay", "selfplay.*"]),
    ext_modules=cythonize(extensions, language_level=3),
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.24,<2.6",  # numba 0.68 supports numpy < 2.6
        "numba>=0.60",
        "h5py>=3.8",
        "tqdm>=4.60",
        "tensorboard>=2.10",
        "torch>=2.2",  # constraints.txt pins the CPU build for the dev/CI machine
        *ONNX,
    ],
    package_data={"selfplay.web": ["static/*.html", "static/*.js", "static/*.css"]},
    extras_require={
        "notebook": ["matplotlib>=3.6", "nbclient>=0.7", "nbformat>=5.7", "ipykernel>=6"],
        "web": WEB,
        "cluster": ["ray>=2.9"],  # selfplay.cluster only; c4fast and nets never import ray
        # the browser tests also need Debian's chromium and chromium-driver (tests/run.sh installs them)
        "test": ["pytest>=7", "hypothesis>=6.80", "matplotlib>=3.6", "nbclient>=0.7",
                 "nbformat>=5.7", "ipykernel>=6", *WEB, "selenium>=4.11", "ray>=2.9"],
    },
    zip_safe=False,
)
