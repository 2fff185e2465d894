"""torch_tiles' PEP 517 build backend: setuptools' own, plus the choice of the torch to compile against.

torch_tiles._C is C++ against ATen (at::Tensor, TORCH_LIBRARY), whose ABI changes between torch releases,
so it must be compiled against the torch it will be loaded with. pip builds in an isolated environment
that hides the packages of the environment it installs into; left alone, a build would either find no
torch or install a second one. So:

- The target environment (the one pip runs from and installs into) already has torch: the build asks
  for no torch, and the hooks that run setup.py append that environment's site-packages to sys.path,
  after the build environment's own packages, so that `import torch` in setup.py finds the installed
  torch. Nothing is downloaded or installed for torch, and the extension is compiled against the very
  files it will load, whatever index or local build they came from.
- It has none: the build asks for $TILES_BUILD_TORCH, by default DEFAULT_TORCH (the version CI builds
  and tests against), in the isolated build environment.
- Either way setup.py writes `torch==<the version built against>` into the wheel's dependencies: in an
  empty environment pip then installs that torch; in one that has it, nothing more.

`pip install --no-build-isolation .` skips all this: torch is importable as it is, the hooks change
nothing, and the build starts at once (no build environment to populate).
"""
import importlib.metadata
import importlib.util
import os
import sys
import sysconfig

from setuptools import build_meta as _setuptools
from setuptools.build_meta import build_sdist, get_requires_for_build_sdist  # noqa: F401  (unchanged hooks)

DEFAULT_TORCH = "torch==2.13.0"


def _say(message):
    print(f"torch_tiles: {message}", file=sys.stderr, flush=True)


def _target_torch():
    """(version, site-packages dir) of torch in the environment this interpreter belongs to, or None.

    Under pip's build isolation the hooks run on the target environment's interpreter with its
    site-packages removed from sys.path; sysconfig still names them (pip computes the same paths to
    remove them)."""
    paths = sysconfig.get_paths()
    for site_dir in dict.fromkeys([paths["purelib"], paths["platlib"]]):
        for dist in importlib.metadata.distributions(name="torch", path=[site_dir]):
            return dist.version, site_dir
    return None


def _torch_importable():
    return importlib.util.find_spec("torch") is not None


def _use_target_torch():
    """Makes the target environment's torch importable when the build environment has none."""
    if _torch_importable():
        return
    found = _target_torch()
    if found is not None:
        version, site_dir = found
        if site_dir not in sys.path:
            sys.path.append(site_dir)  # after the build environment's packages: they keep precedence
        _say(f"building against the installed torch {version} ({site_dir})")


def get_requires_for_build_wheel(config_settings=None):
    # setuptools' own hook runs setup.py to collect setup_requires (which we do not use), and setup.py
    # cannot run before torch is there: answer without it. pyproject.toml lists the rest.
    if _torch_importable() or _target_torch() is not None:
        return []
    torch = os.environ.get("TILES_BUILD_TORCH", DEFAULT_TORCH)
    _say(f"no torch in the target environment: building against {torch}, which becomes a dependency")
    return [torch]


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    _use_target_torch()
    return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    _use_target_torch()
    return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)


def get_requires_for_build_editable(config_settings=None):
    return get_requires_for_build_wheel(config_settings)


def prepare_metadata_for_build_editable(metadata_directory, config_settings=None):
    _use_target_torch()
    return _setuptools.prepare_metadata_for_build_editable(metadata_directory, config_settings)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    _use_target_torch()
    return _setuptools.build_editable(wheel_directory, config_settings, metadata_directory)
