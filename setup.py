"""Builds the `posenc._posenc` extension with CMake for `pip install .` (metadata: pyproject.toml).

The module is CMake's target posenc_python (python/CMakeLists.txt), built for the interpreter running pip. The
CMake build directory is POSENC_CMAKE_BUILD_DIR when set (an existing build tree: only what is out of date is
rebuilt), else build/pip-<python version> in the source tree. Only the library and the module are built: no tests,
benchmarks or MPI.
"""
import os
import pathlib
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        build_dir = os.environ.get("POSENC_CMAKE_BUILD_DIR") or str(
            ROOT / "build" / f"pip-{sys.version_info.major}.{sys.version_info.minor}")
        if not (pathlib.Path(build_dir) / "CMakeCache.txt").exists():
            subprocess.check_call([
                "cmake", "-S", str(ROOT), "-B", build_dir, "-DCMAKE_BUILD_TYPE=Release",
                "-DPOSENC_BUILD_TESTS=OFF", "-DPOSENC_BUILD_BENCHMARKS=OFF", "-DPOSENC_WITH_MPI=OFF",
                "-DPOSENC_BUILD_PYTHON=ON", f"-DPOSENC_PYTHON_EXECUTABLE={sys.executable}",
            ] + (["-G", "Ninja"] if shutil.which("ninja") else []))
        subprocess.check_call(["cmake", "--build", build_dir, "--target", "posenc_python", "-j", str(os.cpu_count() or 1)])
        built = list((pathlib.Path(build_dir) / "python" / "posenc").glob("_posenc*.so"))
        if len(built) != 1:
            raise RuntimeError(f"expected one _posenc*.so under {build_dir}/python/posenc, found {built}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(ext_modules=[CMakeExtension("posenc._posenc")], cmdclass={"build_ext": CMakeBuild},
      options={"build": {"build_base": str(ROOT / "build" / "setuptools")}})
