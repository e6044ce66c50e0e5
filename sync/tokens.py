"""Where a desk keeps its sync token: the system keyring when there is one, otherwise a file in
the data folder that only its owner can read. Never in settings.json.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

SERVICE = "dynadesk-sync"
TOKEN_FILE = "sync-token.json"


def _keyring() -> Any:
    """The keyring module when a real backend is available, else None."""
    try:
        import keyring
        from keyring.backends import fail
    except ImportError:  # pragma: no cover - keyring is a dependency
        return None
    try:
        backend = keyring.get_keyring()
    except Exception:  # a broken keyring configuration is the same as none
        return None
    if isinstance(backend, fail.Keyring) or getattr(backend, "priority", 0) <= 0:
        return None
    try:
        from keyring.backends import null

        if isinstance(backend, null.Keyring):
            return None
    except ImportError:
        pass
    return keyring


class TokenStore:
    """Tokens of one data folder, by server URL (one desk can talk to one server per profile)."""

    def __init__(self, root: Path, *, use_keyring: bool = True):
        self.root = Path(root)
        self.file = self.root / TOKEN_FILE
        self._keyring = _keyring() if use_keyring else None

    @property
    def where(self) -> str:
        if self._keyring is not None:
            return f"the system keyring ({type(self._keyring.get_keyring()).__name__})"
        return f"{self.file} (readable only by you)"

    def _user(self, server_url: str) -> str:
        return f"{server_url.rstrip('/')} @ {self.root}"

    def get(self, server_url: str) -> str | None:
        if self._keyring is not None:
            try:
                token = self._keyring.get_password(SERVICE, self._user(server_url))
                if token:
                    return str(token)
            except Exception as exc:  # a locked or failing keyring: fall back to the file
                log.warning("the system keyring could not be read (%s); trying the token file", exc)
        return self._read_file().get(server_url.rstrip("/"))

    def set(self, server_url: str, token: str) -> str:
        """Store the token; returns where it went."""
        if self._keyring is not None:
            try:
                self._keyring.set_password(SERVICE, self._user(server_url), token)
                self._forget_in_file(server_url)
                return self.where
            except Exception as exc:
                log.warning("the system keyring refused the token (%s); keeping it in %s", exc, self.file)
        tokens = self._read_file()
        tokens[server_url.rstrip("/")] = token
        self._write_file(tokens)
        return f"{self.file} (readable only by you)"

    def delete(self, server_url: str) -> None:
        if self._keyring is not None:
            try:
                self._keyring.delete_password(SERVICE, self._user(server_url))
            except Exception:
                pass
        self._forget_in_file(server_url)

    def _forget_in_file(self, server_url: str) -> None:
        tokens = self._read_file()
        if tokens.pop(server_url.rstrip("/"), None) is not None:
            self._write_file(tokens)

    def _read_file(self) -> dict[str, str]:
        try:
            mode = self.file.stat().st_mode
        except FileNotFoundError:
            return {}
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            # Someone loosened it: tighten it again before trusting what is inside.
            log.warning("%s was readable by others; its permissions are reset to owner-only", self.file)
            os.chmod(self.file, 0o600)
        try:
            data = json.loads(self.file.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError) as exc:
            log.warning("%s cannot be read (%s); no token is known", self.file, exc)
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def _write_file(self, tokens: dict[str, str]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        # mkstemp creates the file with mode 0600 before anything is written into it.
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".sync-token-", suffix=".json")
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(tokens, handle)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.file)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
