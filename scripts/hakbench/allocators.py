"""The allocators measured: HAKMEM from the build directory, glibc (no
preload), the Debian peers found in the system library directories."""
import os
import shutil
import subprocess

from .common import INSTALL_HINT


LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
            "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
            "/usr/lib64", "/usr/lib", "/usr/local/lib")


PEERS = (
    ("mimalloc", ("libmimalloc.so.2", "libmimalloc.so"), "libmimalloc2.0", "libmimalloc-dev"),
    ("jemalloc", ("libjemalloc.so.2", "libjemalloc.so"), "libjemalloc2", "libjemalloc-dev"),
    ("tcmalloc", ("libtcmalloc_minimal.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so.4"),
     "libtcmalloc-minimal4", "libtcmalloc-minimal4"),
)


ALL_ALLOCATORS = ("hakmem", "glibc", "mimalloc", "jemalloc", "tcmalloc")


class Allocator:
    def __init__(self, name, preload=None, env=None, package=None):
        self.name = name
        self.preload = preload      # path to LD_PRELOAD, None for the C library
        self.env = dict(env or {})  # extra environment (A/B settings)
        self.package = package

    def environment(self, base=None):
        env = dict(os.environ if base is None else base)
        env.pop("LD_PRELOAD", None)
        env.update(self.env)
        if self.preload:
            env["LD_PRELOAD"] = self.preload
        return env

    def __repr__(self):
        return "Allocator(%r, %r)" % (self.name, self.preload)


def find_peer_library(names, dirs=LIB_DIRS):
    for d in dirs:
        for n in names:
            path = os.path.join(d, n)
            if os.path.exists(path):
                return path
    return None


def package_version(package):
    if not package or not shutil.which("dpkg-query"):
        return None
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f=${Version}", package],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def glibc_version():
    try:
        return os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        return None


def discover_allocators(build_dir, wanted, log):
    """Allocators present on this machine, in ALL_ALLOCATORS order."""
    found = []
    for name in ALL_ALLOCATORS:
        if wanted and name not in wanted:
            continue
        if name == "hakmem":
            lib = os.path.join(build_dir, "libhakmem.so")
            if os.path.exists(lib):
                found.append(Allocator("hakmem", os.path.abspath(lib)))
            else:
                log("hakmem: %s not found (build it: make bench, or cmake --build %s)"
                    % (lib, build_dir))
        elif name == "glibc":
            found.append(Allocator("glibc", None, package="libc6"))
        else:
            for peer, libs, pkg, devpkg in PEERS:
                if peer != name:
                    continue
                path = find_peer_library(libs)
                if path:
                    found.append(Allocator(peer, path, package=pkg))
                else:
                    log("%s: not found; install it with %s (Debian package %s)"
                        % (peer, INSTALL_HINT, devpkg))
    return found
