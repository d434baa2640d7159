"""The Hugging Face Hub, through `huggingface_hub` (the `hub` extra, imported lazily): download one file or a whole
snapshot of a dataset (cached in the Hugging Face cache: `HF_HOME` / `HF_HUB_CACHE`; `HF_HUB_OFFLINE=1` reads the cache only;
`HF_ENDPOINT` points at a mirror) and upload a folder as a dataset repository.

Every failure is one :class:`HubError` line that names the dataset and what to set or do, never a traceback nor
the library's retry chatter: the Hub is often out of reach (no network, a proxy, a missing token) and the user
needs to know which. An upload is refused before any request when `HF_HUB_OFFLINE` is set or no token is found
(`HF_TOKEN`, or `hf auth login`).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clawgym.core.errors import ClawgymError

HUB_EXTRA = "pip install 'clawgym[hub]'"


class HubError(ClawgymError):
    """The Hub could not give or take a dataset; the message is one line."""


def _hub() -> Any:
    try:
        import huggingface_hub
    except ImportError:
        raise HubError(f"the Hugging Face Hub needs huggingface_hub ({HUB_EXTRA})") from None
    return huggingface_hub


def hub_offline() -> bool:
    """Whether `HF_HUB_OFFLINE` asks for the cache only (as huggingface_hub reads it)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().upper() in ("1", "ON", "YES", "TRUE")


def endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or "https://huggingface.co"


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """huggingface_hub's retry warnings off for the duration (its result or error is reported in one line). Its
    logging module sets the library's level when first imported, so it is imported before the level is set."""
    from huggingface_hub.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity(logging.ERROR)
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _unreachable(exc: BaseException) -> bool:
    """A connection that failed before any answer (DNS, refused, timeout, proxy): httpx's TransportError or an
    OSError that is not an HTTP answer."""
    names = {c.__name__ for c in type(exc).__mro__}
    return bool(names & {"TransportError", "ConnectionError", "Timeout"}) or (
        isinstance(exc, OSError) and "HTTPError" not in names)


def _status(exc: BaseException) -> int | None:
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:200]}" if text else type(exc).__name__


def download_failure(repo_id: str, filename: str | None, exc: BaseException) -> str:
    """Why `filename` of the dataset `repo_id` (None: the whole dataset) could not be had, and what to set, in
    words."""
    from huggingface_hub import errors

    what = f"the dataset {repo_id} ({filename})" if filename else f"the dataset {repo_id}"
    if isinstance(exc, errors.LocalEntryNotFoundError):
        if hub_offline():
            return f"{what} is not in the Hugging Face cache and HF_HUB_OFFLINE is set (unset it where the Hub is reachable)"
        return (f"cannot reach the Hugging Face Hub at {endpoint()} for {what}, and it is not in the Hugging Face "
                "cache (set HF_ENDPOINT to a reachable mirror, or HF_HOME to a cache that holds it)")
    if isinstance(exc, errors.GatedRepoError):
        return f"{what} is gated on the Hugging Face Hub: accept its terms and set HF_TOKEN (or `hf auth login`)"
    if isinstance(exc, errors.RepositoryNotFoundError):
        return f"the dataset {repo_id} was not found on the Hugging Face Hub (a private one needs HF_TOKEN)"
    if isinstance(exc, errors.RevisionNotFoundError):
        return f"the dataset {repo_id} has no such revision on the Hugging Face Hub"
    if isinstance(exc, errors.EntryNotFoundError):
        return f"the dataset {repo_id} has no file {filename}"
    if _unreachable(exc):
        return f"cannot reach the Hugging Face Hub at {endpoint()} for {what} (set HF_ENDPOINT to a reachable mirror)"
    return f"cannot get {what} from the Hugging Face Hub ({_first_line(exc)})"


def download_file(repo_id: str, filename: str, revision: str | None = None, instead: str | None = None) -> Path:
    """The local path of `filename` in the dataset repository `repo_id` (`hf_hub_download`: downloaded once, then
    from the cache). `instead` says what the user can do without the Hub; it ends the error line."""
    hub = _hub()
    download = hub.hf_hub_download  # imported now (huggingface_hub imports its modules lazily)
    try:
        with _quiet():
            return Path(download(repo_id, filename, repo_type="dataset", revision=revision))
    except Exception as exc:  # noqa: BLE001 (every failure of the Hub or the cache, whatever its type, is one line)
        raise HubError(download_failure(repo_id, filename, exc) + (f"; or {instead}" if instead else "")) from None


def snapshot_dataset(repo_id: str, revision: str | None = None, instead: str | None = None) -> Path:
    """The local folder of the dataset repository `repo_id` (`snapshot_download`: downloaded once, then from the
    cache). `instead` says what the user can do without the Hub; it ends the error line."""
    hub = _hub()
    snapshot = hub.snapshot_download
    try:
        with _quiet():
            return Path(snapshot(repo_id, repo_type="dataset", revision=revision))
    except Exception as exc:  # noqa: BLE001 (every failure of the Hub or the cache, whatever its type, is one line)
        raise HubError(download_failure(repo_id, None, exc) + (f"; or {instead}" if instead else "")) from None


def push_folder(folder: str | os.PathLike, repo_id: str, private: bool = False,
                message: str = "Upload with clawgym") -> str:
    """Upload `folder` to the dataset repository `repo_id` (created when missing, `private` then); returns the
    commit URL. Refused before any request when HF_HUB_OFFLINE is set or there is no token."""
    hub = _hub()
    refused = f"cannot push to the Hugging Face dataset {repo_id}"
    if hub_offline():
        raise HubError(f"{refused}: HF_HUB_OFFLINE is set (unset it to upload); {folder} is written")
    if not hub.get_token():
        raise HubError(f"{refused}: no Hugging Face token (set HF_TOKEN, or run `hf auth login`); {folder} is written")
    api = hub.HfApi()
    try:
        with _quiet():
            api.create_repo(repo_id, repo_type="dataset", exist_ok=True, private=private)
            info = api.upload_folder(repo_id=repo_id, folder_path=str(folder), repo_type="dataset",
                                     commit_message=message)
    except Exception as exc:  # noqa: BLE001 (every failure of the Hub, whatever its type, is one line)
        status = _status(exc)
        if status == 401:
            why = "the token was refused (check HF_TOKEN)"
        elif status == 403:
            why = "the token may not write there (a write token, and a namespace it owns)"
        elif _unreachable(exc):
            why = f"cannot reach the Hugging Face Hub at {endpoint()} (set HF_ENDPOINT to a reachable one)"
        else:
            why = _first_line(exc)
        raise HubError(f"{refused}: {why}; {folder} is written") from None
    return str(getattr(info, "commit_url", info))
