"""How the grader runs a student's code: bubblewrap when it works here, plain limits otherwise.

Every untrusted process (the worker that holds a student's solution, the kernel that executes a
notebook for the record) is started through :func:`command`:

- in its own session and process group, killed as a whole when its time is up;
- as the unprivileged user ``nobody`` when the grader runs as root (files the student's code can
  write are then only its own temporary folder);
- with a scrubbed environment (no proxies, tokens or the grader's variables: see ``environment``);
- under rlimits (``python -m mathref.grade.sandbox`` sets them, then runs the command): CPU time,
  address space, file size, number of processes, open files;
- inside ``bwrap`` (bubblewrap) when it is installed and a trial run works: new user, PID, network,
  IPC and UTS namespaces (no network at all, no other process visible, every process gone when the
  sandbox's first process ends), the whole file system read-only, an empty ``/tmp``, the
  submissions folder and the grader's outputs hidden, only the student's own temporary copy
  writable.
"""
import functools
import os
import pwd
import resource
import shutil
import signal
import subprocess
import sys

LIMITS = {"cpu": resource.RLIMIT_CPU, "as": resource.RLIMIT_AS, "fsize": resource.RLIMIT_FSIZE,
          "nproc": resource.RLIMIT_NPROC, "nofile": resource.RLIMIT_NOFILE}
DEFAULT_LIMITS = {"cpu": 600, "as": 8 * 2 ** 30, "fsize": 64 * 2 ** 20, "nproc": 512,
                  "nofile": 256}
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_KEPT_VARIABLES = ("PATH", "LANG", "LC_ALL", "TZ", "MATHREF_DATA")


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


@functools.lru_cache(maxsize=None)
def unprivileged_user():
    """(uid, gid) of ``nobody`` when the grader runs as root and ``nobody`` can run this
    environment's Python (a trial run), else None (stay this user)."""
    if os.geteuid() != 0:
        return None
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    user = entry.pw_uid, entry.pw_gid
    try:
        run = subprocess.run([python(), "-c", "import mathref"], capture_output=True,
                             timeout=60, cwd="/", env={"PYTHONPATH": str(_PACKAGE_ROOT)},
                             **_user_options(user))
    except (OSError, subprocess.SubprocessError):
        return None
    return user if run.returncode == 0 else None


def _bwrap_argv(workdir, readable, hidden):
    argv = [shutil.which("bwrap"), "--die-with-parent", "--new-session", "--unshare-all",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for path in hidden:
        if os.path.isdir(path):
            argv += ["--tmpfs", str(path)]
        elif os.path.exists(path):
            argv += ["--ro-bind", "/dev/null", str(path)]
    for path in readable:
        argv += ["--ro-bind", str(path), str(path)]
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir)]
    return argv


@functools.lru_cache(maxsize=None)
def bwrap_works():
    """Whether bubblewrap is installed and can make its namespaces here (a trial run, as the
    user the students' code will run as)."""
    if not shutil.which("bwrap"):
        return False
    import tempfile
    with tempfile.TemporaryDirectory(prefix="mathref-grade-trial-") as tmp:
        user = unprivileged_user()
        if user:
            os.chown(tmp, *user)
        try:
            run = subprocess.run(_bwrap_argv(tmp, [], []) + ["/bin/true"], capture_output=True,
                                 timeout=60, **_user_options(user))
        except (OSError, subprocess.SubprocessError):
            return False
    return run.returncode == 0


def mode():
    """A one-line description of the isolation in effect."""
    if unprivileged_user():
        who = "as user nobody"
    elif os.geteuid() == 0:
        who = "as root outside the sandbox (user nobody cannot run this Python)"
    else:
        who = f"as uid {os.geteuid()}"
    if bwrap_works():
        return f"bubblewrap sandbox (no network, private PID namespace, read-only files), {who}, rlimits"
    return f"plain limits (bubblewrap unavailable), {who}, rlimits, own session"


def _user_options(user):
    if not user:
        return {}
    return {"user": user[0], "group": user[1], "extra_groups": []}


def command(argv, workdir, readable=(), hidden=(), limits=None):
    """(argv, Popen keyword arguments) to run ``argv`` sandboxed in ``workdir``."""
    limits = dict(DEFAULT_LIMITS, **(limits or {}))
    prefix = [python(), "-I", "-S", os.path.abspath(__file__)]
    prefix += [f"--{name}={value}" for name, value in limits.items()] + ["--"]
    if bwrap_works():
        argv = _bwrap_argv(workdir, readable, hidden) + list(argv)
    user = unprivileged_user()
    if user:
        os.chown(workdir, *user)
    return prefix + list(argv), dict(cwd=str(workdir), start_new_session=True,
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
    for option in argv[:split]:
        name, value = option[2:].split("=", 1)
        value = int(value)
        soft, hard = resource.getrlimit(LIMITS[name])
        if hard != resource.RLIM_INFINITY:
            value = min(value, hard)
        resource.setrlimit(LIMITS[name], (value, value))
    os.execvp(argv[split + 1], argv[split + 1:])


if __name__ == "__main__":
    _launch(sys.argv[1:])
