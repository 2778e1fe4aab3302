"""The shell sandbox: which mode is in force, and the command line a shell command runs under.

``choose_sandbox(mode, workspace)`` turns the ``sandbox`` setting (``auto``, ``on``, ``off``;
parsed with the other settings by ``haltwise.config``) into a ``Sandbox``: ``auto`` confines
commands where bubblewrap (``bwrap``) is installed and works, and otherwise runs them unconfined
and says why; ``on`` raises ``SandboxUnavailableError`` instead; ``off`` never confines.
``Sandbox.argv(command)`` is what ``tools.Toolbox`` starts; nothing here runs a model's command.

Confined, a command sees the whole filesystem read-only (so compilers, interpreters and git
work), except:

- the workspace, bound read-write: the only writable folder of the real filesystem;
- ``/tmp``: a fresh, empty tmpfs, thrown away when the command ends. When the workspace is
  inside ``/tmp``, the folder of ``/tmp`` holding it is bound read-only, so that the workspace's
  neighbours stay as read-only as everything else;
- ``/dev`` and ``/proc``: fresh ones for the sandbox;
- ``/run/user`` (session sockets: D-Bus, ssh and gpg agents, Wayland) and Docker's socket are
  hidden, as a daemon outside would act for the command outside the sandbox (unless the
  workspace is inside ``/run/user``, which then stays visible, read-only but for the workspace).

It has no network (its own loopback only) unless ``allow_network``; its own PID namespace, so
that killing ``bwrap`` (a timeout, a cancel) kills every process the command started, however
detached; no capabilities, even when haltwise runs as root (root could remount ``/``
read-write); and its own session (it cannot type into the terminal). The environment is passed
unchanged: the sandbox limits what a command writes and reaches, not what it reads.
"""

from __future__ import annotations

import shutil
import stat
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..engine.errors import ConfigurationError

__all__ = ["Sandbox", "SandboxUnavailableError", "choose_sandbox", "unconfined"]

#: How to get bubblewrap, for the messages.
INSTALL_HINT = "install bubblewrap (apt install bubblewrap)"
#: Session and daemon sockets a confined command must not reach (a tmpfs over a folder,
#: /dev/null over a socket).
_HIDDEN = (Path("/run/user"), Path("/run/docker.sock"))
#: The longest the check that bubblewrap works may take, in seconds.
_PROBE_TIMEOUT = 10.0


class SandboxUnavailableError(ConfigurationError):
    """``sandbox = "on"``, and bubblewrap is not installed or cannot run here."""


@dataclass(frozen=True)
class Sandbox:
    """How shell commands run: confined by bubblewrap (``bwrap`` set) or as they are."""

    #: The mode asked for: ``auto``, ``on`` or ``off``.
    mode: str
    #: The workspace, resolved: the only folder a confined command may write.
    workspace: Path
    #: The ``bwrap`` executable when commands are confined; None when they run unconfined.
    bwrap: str | None = None
    #: Whether a confined command may use the network.
    allow_network: bool = False
    #: Why commands run unconfined (None when they are confined).
    reason: str | None = None
    #: The paths ``argv`` hides, as found when the sandbox was chosen.
    hidden: tuple[Path, ...] = field(default=(), repr=False)

    @property
    def confined(self) -> bool:
        return self.bwrap is not None

    @property
    def network(self) -> bool:
        """Whether commands can reach the network (an unconfined command always can)."""
        return self.allow_network or not self.confined

    def describe(self) -> str:
        """The mode in force, as the run's header shows it."""
        if not self.confined:
            return f"off ({self.reason})"
        network = "network allowed" if self.allow_network else "no network"
        return f"on (only the workspace is writable; {network})"

    def summary(self) -> dict[str, Any]:
        """The mode in force, for ``haltwise run --json``."""
        return {
            "mode": self.mode,
            "confined": self.confined,
            "network": self.network,
            "reason": self.reason,
        }

    def argv(self, command: str) -> list[str]:
        """The command line that runs the shell command ``command``."""
        shell = ["/bin/sh", "-c", command]
        if self.bwrap is None:
            return shell
        workspace = str(self.workspace)
        mounts = ["--ro-bind", "/", "/", "--tmpfs", "/tmp"]
        held = _tmp_folder_holding(self.workspace)
        if held is not None:
            mounts += ["--ro-bind", str(held), str(held)]
        # After /tmp, which would hide a workspace inside it; before /dev and /proc, which a
        # workspace of / would hide.
        mounts += ["--bind", workspace, workspace, "--dev", "/dev", "--proc", "/proc"]
        for path in self.hidden:
            if path == self.workspace or path in self.workspace.parents:
                continue  # hiding it would hide the workspace
            if path.is_dir():
                mounts += ["--tmpfs", str(path)]
            else:
                mounts += ["--ro-bind", "/dev/null", str(path)]
        network = ["--share-net"] if self.allow_network else []
        return [
            self.bwrap,
            *mounts,
            "--unshare-all",
            *network,
            "--cap-drop",
            "ALL",
            "--die-with-parent",
            "--new-session",
            "--chdir",
            workspace,
            "--",
            *shell,
        ]


def _tmp_folder_holding(workspace: Path) -> Path | None:
    """The entry of ``/tmp`` that holds ``workspace``, if the workspace is below it."""
    tmp = Path("/tmp").resolve()
    if tmp not in workspace.parents:
        return None
    top = tmp / workspace.relative_to(tmp).parts[0]
    return None if top == workspace else top


def _hidden_paths() -> tuple[Path, ...]:
    found = []
    for path in _HIDDEN:
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode) or stat.S_ISSOCK(mode):
            found.append(path)
    return tuple(found)


def unconfined(workspace: Path, reason: str, mode: str = "off") -> Sandbox:
    """Commands run as they are, for ``reason``."""
    return Sandbox(mode, workspace, reason=reason)


def probe(sandbox: Sandbox) -> str | None:
    """Why ``sandbox`` cannot run a command here (bubblewrap's own words), or None if it can."""
    try:
        done = subprocess.run(
            sandbox.argv("true"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=_PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return str(error)
    if done.returncode == 0:
        return None
    lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
    return lines[-1] if lines else f"bwrap exited with code {done.returncode}"


def choose_sandbox(
    mode: str,
    workspace: Path,
    *,
    allow_network: bool = False,
    source: str = "--sandbox",
    which: Callable[[str], str | None] = shutil.which,
    check: Callable[[Sandbox], str | None] = probe,
) -> Sandbox:
    """The sandbox in force for ``mode`` (set by ``source``, for messages). ``which`` finds
    ``bwrap``; ``check`` runs a trivial command under it (containers often forbid the user
    namespaces it needs)."""
    workspace = workspace.resolve()
    if mode == "off":
        return unconfined(workspace, f"set by {source}")
    bwrap = which("bwrap")
    if bwrap is None:
        if mode == "on":
            raise SandboxUnavailableError(
                f"{source} is on, but bubblewrap (bwrap) is not installed: {INSTALL_HINT}, "
                "or run commands unconfined with --sandbox off"
            )
        return unconfined(workspace, "bubblewrap not found", mode)
    sandbox = Sandbox(mode, workspace, bwrap, allow_network, hidden=_hidden_paths())
    failure = check(sandbox)
    if failure is None:
        return sandbox
    if mode == "on":
        raise SandboxUnavailableError(
            f"{source} is on, but bubblewrap cannot run here ({failure}); it needs user "
            "namespaces, which this container or kernel does not allow. Run commands "
            "unconfined with --sandbox off"
        )
    return unconfined(workspace, f"bubblewrap cannot run here: {failure}", mode)
