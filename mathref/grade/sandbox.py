"""How the grader runs a student's code: in a bubblewrap sandbox, or not at all.

Every untrusted process (the worker that holds a student's solution, the kernel that executes a
notebook for the record) is started through :func:`command`:

- inside ``bwrap`` (bubblewrap): new PID, network, IPC and UTS namespaces (no network at all, no
  other process visible, every process gone when the sandbox's first process ends), the whole
  file system read-only, an empty ``/tmp``, the submissions folder and the grader's outputs
  hidden, only the student's own temporary copy writable. The interpreter, the course and its
  data are bound back in after the private ``/tmp``, so a venv or clone under ``/tmp`` works;
- never as root: a grader running as root starts bubblewrap as root (no user namespace), hides
  every folder the unprivileged user could not enter (``/root`` among them) behind an empty one
  and binds back only the interpreter, the course and the data; inside, the launcher drops to
  the user ``nobody`` (no capabilities, no supplementary groups) before the student's code
  starts. Without root, the code runs as the grader's own user in a user namespace;
- in its own session and process group, killed as a whole when its time is up;
- with a scrubbed environment (no proxies, tokens or the grader's variables: see ``environment``);
- under rlimits (``python -m mathref.grade.sandbox`` sets them, drops the user, then runs the
  command): CPU time, address space, file size, number of processes, open files.

Without a working bubblewrap the grader refuses (:func:`require`) unless it is told
``unsafe=True`` (``--unsafe``): then only the rlimits, an own session and, as root, the user
``nobody`` (if it can run this Python; otherwise it refuses even then) stand between a
submission and the machine.
"""
import functools
import os
import pwd
import resource
import shutil
import signal
import stat
import subprocess
import sys

LIMITS = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
          "nproc": resource.RLIMIT_NPROC, "nofile": resource.RLIMIT_NOFILE}
DEFAULT_LIMITS = {"cpu": 600, "as": 8 * 2 ** 30, "fsize": 64 * 2 ** 20, "nproc": 512,
                  "nofile": 256}
# the trusted verifier's own limits: whatever a reply makes it hold, it cannot take the machine
VERIFIER_LIMITS = {"as": 16 * 2 ** 30, "fsize": 256 * 2 ** 20}
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_LAUNCHER = os.path.abspath(__file__)
_KEPT_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "MATHREF_DATA")
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
    """A minimal environment for student code: nothing of the grader's beyond PATH, the
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
    """What the sandboxed Python must see: the interpreter's prefixes (a venv and the Python it
    was made from), the course, and the course's data."""
    paths = {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix),
             os.path.realpath(sys.exec_prefix), _PACKAGE_ROOT}
    data = os.environ.get("MATHREF_DATA")
    if data and os.path.isdir(data):
        paths.add(os.path.realpath(data))
    return sorted(paths, key=lambda p: (p.count(os.sep), p))


def _ancestors(path):
    """'/a/b/c' -> ['/a', '/a/b'] (not '/' and not the path itself)."""
    parts = path.strip(os.sep).split(os.sep)[:-1]
    return [os.sep + os.sep.join(parts[:i + 1]) for i in range(len(parts))]


def _closed_to_others(path):
    """A folder that a user other than its owner and group cannot enter (no o+x)."""
    try:
        return not os.stat(path).st_mode & stat.S_IXOTH
    except OSError:
        return False


def _inside(path, folders):
    return any(path == f or path.startswith(f + os.sep) for f in folders)


def _bwrap_argv(workdir, readable, hidden, drop_root=None):
    """bwrap's arguments, in mount order. ``drop_root``: bubblewrap runs as root, so no user
    namespace is made, and CAP_SETUID/CAP_SETGID are kept for the launcher, which gives them up
    before it runs anything."""
    drop_root = os.geteuid() == 0 if drop_root is None else drop_root
    workdir = os.path.realpath(str(workdir))
    readable = [os.path.realpath(str(p)) for p in readable]
    argv = [shutil.which("bwrap"), "--die-with-parent", "--new-session"]
    if drop_root:
        argv += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
                 "--unshare-cgroup-try", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all"]
    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
             "--perms", "0755", "--tmpfs", "/tmp"]
    needed = _needed_paths()
    # empty folders: /tmp, and (dropping root) every folder on the way to a path the sandbox
    # needs that nobody could enter (/root); what is needed is bound back into them
    emptied = ["/tmp"]
    if drop_root:
        for folder in sorted({a for p in needed + readable + [workdir] for a in _ancestors(p) + [p]
                              if a != workdir and _closed_to_others(a)},
                             key=lambda p: (p.count(os.sep), p)):
            if not _inside(folder, emptied):
                argv += ["--perms", "0755", "--tmpfs", folder]
                emptied.append(folder)
    made = set()

    def bind(option, path):
        for folder in _ancestors(path):       # parents in an emptied folder: made enterable
            if folder not in made and _inside(folder, emptied) and folder not in emptied:
                argv.extend(["--perms", "0755", "--dir", folder])
                made.add(folder)
        argv.extend([option, path, path])

    for path in needed:
        if _inside(path, emptied):
            bind("--ro-bind", path)
    for path in hidden:
        path = os.path.realpath(str(path))
        if os.path.isdir(path):
            argv += ["--perms", "0755", "--tmpfs", path]
            emptied.append(path)
        elif os.path.exists(path):
            argv += ["--ro-bind", "/dev/null", path]
    for path in readable:
        bind("--ro-bind", path)
    bind("--bind", workdir)
    return argv + ["--chdir", workdir]


def trusted(argv, limits=None):
    """``argv`` (a trusted process of the grader's) started under rlimits of its own."""
    return _launcher(dict(VERIFIER_LIMITS, **(limits or {}))) + list(argv)


def _launcher(limits, user=None):
    """``python -I -S sandbox.py --limits... [--user=uid:gid] --``: the first process of the
    sandbox."""
    argv = [python(), "-I", "-S", _LAUNCHER]
    argv += [f"--{name}={value}" for name, value in limits.items()]
    if user:
        argv.append(f"--user={user[0]}:{user[1]}")
    return argv + ["--"]


@functools.lru_cache(maxsize=None)
def bwrap_works():
    """Whether bubblewrap is installed and can make its sandbox here: a trial run of the real
    thing (the launcher, the dropped user, this Python importing mathref from the course)."""
    if not shutil.which("bwrap") or (os.geteuid() == 0 and _nobody() is None):
        return False
    import tempfile
    with tempfile.TemporaryDirectory(prefix="mathref-grade-trial-") as tmp:
        user = _nobody() if os.geteuid() == 0 else None
        if user:
            os.chown(tmp, *user)
        argv = _bwrap_argv(tmp, [], []) + _launcher(DEFAULT_LIMITS, user) + [
            python(), "-c", "import os, sys, mathref; sys.exit(os.geteuid() == 0)"]
        try:
            run = subprocess.run(argv, capture_output=True, timeout=120, cwd=tmp,
                                 env={"PYTHONPATH": _PACKAGE_ROOT, "PATH": "/usr/bin:/bin"})
        except (OSError, subprocess.SubprocessError):
            return False
    return run.returncode == 0


def require(unsafe=False):
    """The one-line description of the isolation the grading will have; raises
    :class:`SandboxUnavailable` where students' code cannot be isolated and ``unsafe`` is not
    given, and, as root, where not even the user ``nobody`` can run this Python."""
    if bwrap_works():
        who = "as user nobody (dropped from root)" if os.geteuid() == 0 \
            else f"as uid {os.geteuid()} in a user namespace"
        return f"bubblewrap sandbox (no network, private PID namespace, read-only files), {who}, rlimits"
    if not unsafe:
        raise SandboxUnavailable("the grader will not run students' code without its sandbox: "
                                 + INSTALL_HINT)
    if os.geteuid() == 0 and not unprivileged_user():
        raise SandboxUnavailable("without bubblewrap, as root, students' code would run as root "
                                 "(the user nobody cannot run this Python); refusing even with "
                                 "--unsafe: install bubblewrap, or grade as an ordinary user")
    who = "as user nobody" if os.geteuid() == 0 else f"as uid {os.geteuid()}"
    return f"UNSAFE: no sandbox (--unsafe), {who}, rlimits and an own session only"


def _user_options(user):
    if not user:
        return {}
    return {"user": user[0], "group": user[1], "extra_groups": []}


def command(argv, workdir, readable=(), hidden=(), limits=None, unsafe=False):
    """(argv, Popen keyword arguments) to run ``argv`` sandboxed in ``workdir``. Raises
    :class:`SandboxUnavailable` as :func:`require` does."""
    require(unsafe)
    limits = dict(DEFAULT_LIMITS, **(limits or {}))
    if bwrap_works():
        user = _nobody() if os.geteuid() == 0 else None
        if user:
            os.chown(workdir, *user)
        full = _bwrap_argv(workdir, readable, hidden) + _launcher(limits, user) + list(argv)
        return full, dict(cwd=str(workdir), start_new_session=True)
    user = unprivileged_user()
    if user:
        os.chown(workdir, *user)
    return _launcher(limits) + list(argv), dict(cwd=str(workdir), start_new_session=True,
                                                **_user_options(user))


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
    if user:   # inside the sandbox, as root: become nobody for good before anything else runs
        os.setgroups([])
        os.setgid(user[1])
        os.setuid(user[0])
        if os.getuid() == 0 or os.geteuid() == 0:
            raise SystemExit("sandbox: could not drop root")
    os.execvp(argv[split + 1], argv[split + 1:])


if __name__ == "__main__":
    _launch(sys.argv[1:])
