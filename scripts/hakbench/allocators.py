"""The allocators measured: HAKMEM from the build directory, glibc (no
preload), the Debian peers found in the system library directories, and the
optional peers built from source (snmalloc, mimalloc 3, rpmalloc) when a
peers directory holds them: $HAKMEM_PEERS_DIR (or --peers-dir), else
shared/peers beside the repository (for a git worktree, also beside the main
working tree).  The project never depends on the optional ones: absent means
skipped."""
import os
import shutil
import subprocess

from .common import INSTALL_HINT, ROOT


LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
            "/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
            "/usr/lib64", "/usr/lib", "/usr/local/lib")


PEERS = (
    ("mimalloc", ("libmimalloc.so.2", "libmimalloc.so"), "libmimalloc2.0", "libmimalloc-dev"),
    ("jemalloc", ("libjemalloc.so.2", "libjemalloc.so"), "libjemalloc2", "libjemalloc-dev"),
    ("tcmalloc", ("libtcmalloc_minimal.so.4", "libtcmalloc_minimal.so", "libtcmalloc.so.4"),
     "libtcmalloc-minimal4", "libtcmalloc-minimal4"),
)


# Optional peers: (name, file in the peers directory, what it is).
OPTIONAL_PEERS = (
    ("mimalloc3", "libmimalloc3.so", "mimalloc 3, built from source"),
    ("snmalloc", "libsnmallocshim.so", "snmalloc, built from source"),
    ("rpmalloc", "librpmalloc.so", "rpmalloc, built from source"),
)
PEERS_DIR_ENV = "HAKMEM_PEERS_DIR"
ALL_ALLOCATORS = ("hakmem", "hakmem-std", "glibc", "mimalloc", "jemalloc", "tcmalloc") \
    + tuple(p[0] for p in OPTIONAL_PEERS)
DEBIAN_PEERS = tuple(p[0] for p in PEERS)


class Allocator:
    def __init__(self, name, preload=None, env=None, package=None, note=None, extra=False):
        self.name = name
        self.preload = preload      # path to LD_PRELOAD, None for the C library
        self.env = dict(env or {})  # extra environment (A/B settings)
        self.package = package
        self.note = note            # what it is, when no Debian package says so
        self.extra = extra          # given with --lib: not a peer (no best-peer ratio)

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


def peers_dir_candidates(root=ROOT, environ=None):
    """Where optional peers may be, in order: $HAKMEM_PEERS_DIR alone when set
    (empty: none), else ../shared/peers from the repository and from the main
    working tree of a git worktree."""
    environ = os.environ if environ is None else environ
    if PEERS_DIR_ENV in environ:
        d = environ[PEERS_DIR_ENV]
        return [os.path.abspath(d)] if d else []
    dirs = [os.path.join(os.path.dirname(root), "shared", "peers")]
    try:
        out = subprocess.run(["git", "-C", root, "rev-parse", "--path-format=absolute",
                              "--git-common-dir"], capture_output=True, text=True, timeout=10)
        common = out.stdout.strip()
        if out.returncode == 0 and common:
            main_tree = os.path.dirname(os.path.normpath(common))
            dirs.append(os.path.join(os.path.dirname(main_tree), "shared", "peers"))
    except (OSError, subprocess.SubprocessError):
        pass
    seen = []
    for d in dirs:
        d = os.path.normpath(d)
        if d not in seen:
            seen.append(d)
    return seen


def find_optional_peer(name, dirs=None):
    """Path of optional peer `name` in the first peers directory holding it."""
    for peer, filename, _ in OPTIONAL_PEERS:
        if peer != name:
            continue
        for d in peers_dir_candidates() if dirs is None else dirs:
            path = os.path.join(d, filename)
            if os.path.isfile(path):
                return path
    return None


def peer_library(name):
    """Library of a Debian or optional peer by name, or None."""
    for peer, libs, _, _ in PEERS:
        if peer == name:
            return find_peer_library(libs)
    return find_optional_peer(name)


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


def discover_allocators(build_dir, wanted, log, std_build_dir=None):
    """Allocators present on this machine, in ALL_ALLOCATORS order.
    hakmem-std is the standard build's library (std_build_dir, which make
    bench builds beside the fast one): the issues' targets hold for both."""
    found = []
    for name in ALL_ALLOCATORS:
        if wanted and name not in wanted:
            continue
        if name == "hakmem-std":
            if std_build_dir:
                lib = os.path.join(std_build_dir, "libhakmem.so")
                if os.path.exists(lib):
                    found.append(Allocator("hakmem-std", os.path.abspath(lib),
                                           note="standard build", extra=True))
                else:
                    log("hakmem-std: %s not found (make bench builds it)" % lib)
        elif name == "hakmem":
            lib = os.path.join(build_dir, "libhakmem.so")
            if os.path.exists(lib):
                found.append(Allocator("hakmem", os.path.abspath(lib)))
            else:
                log("hakmem: %s not found (build it: make bench, or cmake --build %s)"
                    % (lib, build_dir))
        elif name == "glibc":
            found.append(Allocator("glibc", None, package="libc6"))
        elif name in DEBIAN_PEERS:
            for peer, libs, pkg, devpkg in PEERS:
                if peer != name:
                    continue
                path = find_peer_library(libs)
                if path:
                    found.append(Allocator(peer, path, package=pkg))
                else:
                    log("%s: not found; install it with %s (Debian package %s)"
                        % (peer, INSTALL_HINT, devpkg))
        else:
            path = find_optional_peer(name)
            note = [p[2] for p in OPTIONAL_PEERS if p[0] == name][0]
            if path:
                found.append(Allocator(name, path, note=note))
            elif wanted:
                log("%s: optional, not found in %s (set %s or --peers-dir)"
                    % (name, " or ".join(peers_dir_candidates()) or "no directory",
                       PEERS_DIR_ENV))
    return found


def extra_allocators(specs):
    """Allocators given as NAME=PATH on the command line (--lib), e.g. an
    older HAKMEM build to compare with; PATH may be a build directory."""
    out = []
    for spec in specs or ():
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit("--lib wants NAME=PATH, got %r" % spec)
        if name in ALL_ALLOCATORS:
            raise SystemExit("--lib %s: the name is taken by a standard allocator" % name)
        if os.path.isdir(path):
            path = os.path.join(path, "libhakmem.so")
        if not os.path.isfile(path):
            raise SystemExit("--lib %s: %s not found" % (name, path))
        out.append(Allocator(name, os.path.abspath(path), note="given with --lib", extra=True))
    return out
