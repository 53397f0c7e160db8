"""How the grader runs a student's code (and its own verifier): in a bubblewrap sandbox, or not
at all.

Every process that reads untrusted input (the worker that holds a student's solution, the
kernel that executes a notebook for the record, and the trusted verifier, which reads the
worker's replies) is started through :func:`command`:

- inside ``bwrap`` (bubblewrap): new PID, network, IPC and UTS namespaces (no network at all, no
  other process visible, every process gone when the sandbox's first process ends), and a file
  system built from nothing: the system's libraries (``/usr`` and a few files of ``/etc``), the
  interpreter and its packages, the course's data and the snapshot of mathref it is given, all
  read-only; a private ``/tmp`` and work folder (:data:`WORK`), each a tmpfs of at most
  ``limits["disk"]`` bytes. Not ``/``, not the course's notebooks, not the submissions, not
  the grader's outputs or the other submissions' work: none of it is there;
- never as root: a grader running as root starts bubblewrap as root (no user namespace) and the
  launcher drops to a uid of the sandbox's own, drawn from a range no account uses, with
  ``nobody``'s group (no capabilities, no supplementary groups) before the command starts, so
  that what the kernel counts per uid (the processes RLIMIT_NPROC limits, the user keyring) is
  not shared with any other sandbox (see :func:`sandbox_user`). Without root, the code runs as
  the grader's own user in a user namespace;
- in its own session and process group, killed as a whole when its time is up;
- with a scrubbed environment (no proxies, tokens or the grader's variables: see ``environment``);
- under rlimits (``python -m mathref.grade.sandbox`` sets them, drops the user, then runs the
  command): CPU time, address space, file size, number of processes, open files; and, where
  the grader can make one (as root, with a writable memory cgroup), in a memory cgroup that
  caps all the submission's processes together (:func:`memory_group`).

Without a working bubblewrap the grader refuses (:func:`require`) unless it is told
``unsafe=True`` (``--unsafe``): then only the rlimits, an own session and, as root, the user
``nobody`` (if it can run this Python; otherwise it refuses even then) stand between a
submission and the machine.
"""
import functools
import os
import pwd
import resource
import secrets
import shutil
import signal
import subprocess
import sys

LIMITS = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
          "nproc": resource.RLIMIT_NPROC, "nofile": resource.RLIMIT_NOFILE}
# per process (rlimits), except "memory" (all of a submission's processes together, where a
# cgroup can be made) and "disk" (each of the sandbox's two tmpfs: the work folder and /tmp)
DEFAULT_LIMITS = {"cpu": 600, "as": 8 * 2 ** 30, "fsize": 64 * 2 ** 20, "nproc": 512,
                  "nofile": 256, "memory": 8 * 2 ** 30, "disk": 256 * 2 ** 20}
# the trusted verifier's own limits: whatever a reply makes it hold, it cannot take the machine
# (torch and the checkers need under 1 GiB of address space; red team H5: it was 16 GiB)
VERIFIER_LIMITS = {"as": 4 * 2 ** 30, "fsize": 256 * 2 ** 20}
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_KEPT_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "MATHREF_DATA")
WORK = "/sandbox"   # the work folder inside the sandbox: a size-limited tmpfs
# the system's files a Python process needs (read-only); nothing else of the host is there
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
_ETC = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/passwd",
        "/etc/group", "/etc/nsswitch.conf", "/etc/localtime", "/etc/hosts", "/etc/alternatives")
INSTALL_HINT = ("install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap) and make sure it "
                "can create namespaces here, or pass --unsafe to grade without a sandbox "
                "(students' code can then read and change what the grader's user can)")


class SandboxUnavailable(RuntimeError):
    """Students' code cannot be isolated here, and the caller did not accept running it
    without isolation."""


def python():
    """The Python of this environment, by a path that does not go through a symlinked venv."""
    return os.path.join(os.path.realpath(sys.prefix), "bin", os.path.basename(sys.executable))


def environment(workdir, pythonpath, extra=None):
    """A minimal environment for sandboxed code: nothing of the grader's beyond PATH, the
    locale, and MATHREF_DATA (the course's data folder)."""
    env = {k: os.environ[k] for k in _KEPT_VARIABLES if k in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    env.update(HOME=str(workdir), TMPDIR=str(workdir), PYTHONPATH=str(pythonpath),
               PYTHONHASHSEED="0", PYTHONDONTWRITEBYTECODE="1", MPLBACKEND="Agg",
               MPLCONFIGDIR=os.path.join(str(workdir), ".matplotlib"),
               JUPYTER_RUNTIME_DIR=os.path.join(str(workdir), ".jupyter-runtime"),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", MATHREF_DEVICE="cpu",
               PYDEVD_DISABLE_FILE_VALIDATION="1")
    env.update(extra or {})
    return env


def _nobody():
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


# uids for sandboxes (as root): above the ranges that accounts use, directory services included
# (sssd maps domain users to 200,000 … 2,000,200,000), below (uid_t) −1
SANDBOX_UIDS = range(3_000_000_000, 3_000_000_000 + 2 ** 24)


def sandbox_user():
    """(uid, gid) for one sandbox started as root: a uid drawn from :data:`SANDBOX_UIDS` (two
    sandboxes running at once share it with probability 2⁻²⁴) and ``nobody``'s group. Under
    the one uid ``nobody`` for every sandbox, the kernel's per-uid counts were shared: with
    ``--jobs 2`` a submission that kept forking took every process slot RLIMIT_NPROC allows that
    uid, and a classmate's right answer, graded beside it, scored 0 (issue 33's red team, H5); a
    key one submission stored in the uid's keyring was read by a later run (F1)."""
    nobody = _nobody()
    return SANDBOX_UIDS[secrets.randbelow(len(SANDBOX_UIDS))], nobody[1]


@functools.lru_cache(maxsize=None)
def unprivileged_user():
    """(uid, gid) of ``nobody`` when the grader runs as root and ``nobody`` can run this
    environment's Python directly (a trial run), else None. Used only without bubblewrap."""
    if os.geteuid() != 0 or _nobody() is None:
        return None
    user = _nobody()
    try:
        run = subprocess.run([python(), "-c", "import mathref"], capture_output=True,
                             timeout=60, cwd="/", env={"PYTHONPATH": str(_PACKAGE_ROOT)},
                             **_user_options(user))
    except (OSError, subprocess.SubprocessError):
        return None
    return user if run.returncode == 0 else None


def _needed_paths():
    """What the sandboxed Python must see besides the system's files: the interpreter's
    prefixes (a venv and the Python it was made from) and the course's data."""
    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.realpath(sys.exec_prefix)}
    data = os.environ.get("MATHREF_DATA")
    if data and os.path.isdir(data):
        paths.add(os.path.realpath(data))
    return sorted(paths)


def _inside(path, folders):
    return any(path == f or path.startswith(f.rstrip(os.sep) + os.sep) for f in folders)


def _bwrap_argv(readable, disk, drop_root=None):
    """bwrap's arguments: an empty root with only the system's files, the interpreter, the
    data and ``readable`` bound in, read-only; a private ``/tmp`` and work folder (``WORK``),
    tmpfs of ``disk`` bytes each (and ``/dev/shm``). ``drop_root``: bubblewrap runs as root, so no user namespace
    is made, and CAP_SETUID/CAP_SETGID are kept for the launcher, which gives them up before
    it runs anything."""
    drop_root = os.geteuid() == 0 if drop_root is None else drop_root
    argv = [shutil.which("bwrap"), "--die-with-parent", "--new-session"]
    if drop_root:
        argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                 "--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all"]
    for path in _SYSTEM + _ETC:
        if os.path.islink(path) and os.path.dirname(path) == "/":
            argv += ["--symlink", os.readlink(path), path]
        elif os.path.exists(path):
            argv += ["--ro-bind", path, path]
    argv += ["--dev", "/dev", "--proc", "/proc"]
    for folder in ("/tmp", "/dev/shm", WORK):
        argv += ["--perms", "1777", "--size", str(int(disk)), "--tmpfs", folder]
    bound = [p for p in _SYSTEM if os.path.isdir(p) and not os.path.islink(p)]
    made = set()
    for path in _needed_paths() + sorted(os.path.realpath(str(p)) for p in readable):
        if _inside(path, bound):
            continue
        parts = path.strip(os.sep).split(os.sep)[:-1]
        for i in range(len(parts)):        # enterable parents (bwrap would make them 0700)
            folder = os.sep + os.sep.join(parts[:i + 1])
            if folder not in made and not _inside(folder, bound):
                argv += ["--perms", "0755", "--dir", folder]
                made.add(folder)
        argv += ["--ro-bind", path, path]
        bound.append(path)
    return argv + ["--chdir", WORK]


def _launcher(lib, limits, user=None):
    """``python -I -S LIB/mathref/grade/sandbox.py --limits... [--user=uid:gid] --``: the
    first process of the sandbox (the copy in the snapshot ``lib`` it can see)."""
    argv = [python(), "-I", "-S", os.path.join(str(lib), "mathref", "grade", "sandbox.py")]
    argv += [f"--{name}={value}" for name, value in limits.items() if name in LIMITS]
    if user:
        argv.append(f"--user={user[0]}:{user[1]}")
    return argv + ["--"]


@functools.lru_cache(maxsize=None)
def bwrap_works():
    """Whether bubblewrap is installed and can make its sandbox here: a trial run of the real
    thing (the launcher, the dropped user, this Python importing mathref from the course)."""
    if not shutil.which("bwrap") or (os.geteuid() == 0 and _nobody() is None):
        return False
    user = sandbox_user() if os.geteuid() == 0 else None
    argv = _bwrap_argv([_PACKAGE_ROOT], DEFAULT_LIMITS["disk"]) + \
        _launcher(_PACKAGE_ROOT, DEFAULT_LIMITS, user) + [
            python(), "-c", "import os, sys, mathref; sys.exit(os.geteuid() == 0)"]
    try:
        run = subprocess.run(argv, capture_output=True, timeout=120, cwd="/",
                             env={"PYTHONPATH": _PACKAGE_ROOT, "PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.SubprocessError):
        return False
    return run.returncode == 0


def require(unsafe=False):
    """The one-line description of the isolation the grading will have; raises
    :class:`SandboxUnavailable` where students' code cannot be isolated and ``unsafe`` is not
    given, and, as root, where not even the user ``nobody`` can run this Python."""
    memory = "a memory cgroup per submission" if memory_group_root() else \
        "no memory cgroup (per-process limits only)"
    if bwrap_works():
        who = "as a uid of its own per sandbox (dropped from root)" if os.geteuid() == 0 \
            else f"as uid {os.geteuid()} in a user namespace"
        return (f"bubblewrap sandbox (no network, private PID namespace, only the interpreter, "
                f"the data and mathref without its checkers, read-only), {who}, rlimits, {memory}")
    if not unsafe:
        raise SandboxUnavailable("the grader will not run students' code without its sandbox: "
                                 + INSTALL_HINT)
    if os.geteuid() == 0 and not unprivileged_user():
        raise SandboxUnavailable("without bubblewrap, as root, students' code would run as root "
                                 "(the user nobody cannot run this Python); refusing even with "
                                 "--unsafe: install bubblewrap, or grade as an ordinary user")
    who = "as user nobody" if os.geteuid() == 0 else f"as uid {os.geteuid()}"
    return f"UNSAFE: no sandbox (--unsafe), {who}, rlimits and an own session only, {memory}"


def _user_options(user):
    if not user:
        return {}
    return {"user": user[0], "group": user[1], "extra_groups": []}


# ----------------------------------------------------------------------------- memory cgroup

_CGROUP_CANDIDATES = ("/sys/fs/cgroup/memory", "/sys/fs/cgroup")


@functools.lru_cache(maxsize=None)
def memory_group_root():
    """The memory cgroup this process is in, if the grader (as root) can make groups in it:
    cgroup v1's memory controller or cgroup v2; else None (then only per-process limits)."""
    if os.geteuid() != 0:
        return None
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            lines = [line.strip().split(":", 2) for line in f]
    except OSError:
        return None
    for _, controllers, path in lines:
        for base in _CGROUP_CANDIDATES:
            v1 = "memory" in controllers.split(",") and base.endswith("/memory")
            v2 = controllers == "" and not base.endswith("/memory")
            limit = "memory.limit_in_bytes" if v1 else "memory.max"
            folder = os.path.join(base, path.lstrip("/"))
            if (v1 or v2) and os.path.isfile(os.path.join(folder, limit)) \
                    and os.access(folder, os.W_OK):
                return folder
    return None


def memory_group(name, limit):
    """A new memory cgroup capping its processes together at ``limit`` bytes (no swap beyond
    it where the kernel lets us say so), or None where none can be made."""
    root = memory_group_root()
    if root is None:
        return None
    folder = os.path.join(root, name)
    try:
        os.mkdir(folder)
        v1 = os.path.exists(os.path.join(folder, "memory.limit_in_bytes"))
        settings = ([("memory.limit_in_bytes", limit), ("memory.memsw.limit_in_bytes", limit)]
                    if v1 else [("memory.max", limit), ("memory.swap.max", 0)])
        for key, value in settings:
            try:
                with open(os.path.join(folder, key), "w") as f:
                    f.write(str(int(value)))
            except OSError:
                if key in ("memory.limit_in_bytes", "memory.max"):
                    raise
    except OSError:
        remove_memory_group(folder)
        return None
    return folder


def remove_memory_group(folder):
    """Remove a group made by :func:`memory_group` (its processes must be gone)."""
    if folder:
        try:
            os.rmdir(folder)
        except OSError:
            pass


def _join_group(folder):
    """A preexec_fn: the child joins the memory group before it runs anything."""
    def join():
        name = "tasks" if os.path.exists(os.path.join(folder, "tasks")) else "cgroup.procs"
        with open(os.path.join(folder, name), "w") as f:
            f.write(str(os.getpid()))
    return join


def command(argv, lib, workdir, readable=(), limits=None, unsafe=False, group=None):
    """(argv, Popen keyword arguments, env included) to run ``argv`` sandboxed, with the
    snapshot ``lib`` (a folder holding ``mathref``) on its PYTHONPATH. Under bubblewrap its
    work folder is a fresh tmpfs (``workdir`` on the host is not seen); with ``unsafe`` and no
    bubblewrap it is ``workdir``. ``group``: a memory cgroup to join. Raises
    :class:`SandboxUnavailable` as :func:`require` does."""
    require(unsafe)
    limits = dict(DEFAULT_LIMITS, **(limits or {}))
    options = dict(start_new_session=True)
    if group and (bwrap_works() or not unprivileged_user()):  # joined before the user changes
        options["preexec_fn"] = _join_group(group)
    if bwrap_works():
        user = sandbox_user() if os.geteuid() == 0 else None
        full = _bwrap_argv([lib, *readable], limits["disk"]) + _launcher(lib, limits, user) \
            + list(argv)
        return full, dict(options, cwd="/", env=environment(WORK, lib))
    user = unprivileged_user()
    if user:
        os.chown(workdir, *user)
    return _launcher(lib, limits) + list(argv), dict(
        options, cwd=str(workdir), env=environment(workdir, lib), **_user_options(user))


def kill_group(process):
    """Kill ``process`` and its whole process group (the sandbox's PID namespace goes with it)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        process.kill()
    except (ProcessLookupError, OSError):
        pass
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        pass


def _launch(argv):
    """Set the rlimits given as --name=value, then exec the command after ``--``."""
    split = argv.index("--")
    user = None
    for option in argv[:split]:
        name, value = option[2:].split("=", 1)
        if name == "user":
            user = tuple(int(v) for v in value.split(":"))
            continue
        value = int(value)
        soft, hard = resource.getrlimit(LIMITS[name])
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(LIMITS[name], (value, value))
    if user:   # inside the sandbox, as root: become the sandbox's user for good before anything runs
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SystemExit("sandbox: could not drop root")
    os.execvp(argv[split + 1], argv[split + 1:])


if __name__ == "__main__":
    _launch(sys.argv[1:])
