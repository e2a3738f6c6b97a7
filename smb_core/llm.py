"""Optional Ollama client: structured chat output and embeddings over Ollama's HTTP API.

The product works without an LLM; this module is only used when `SMB_LLM=ollama` (extraction) or
`SMB_EMBEDDING_MODEL=ollama:<model>` (embeddings). Every failure becomes an `LLMError` that names the
host and model, so callers can log one line and fall back to the no-LLM path.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from typing import Any, Callable, TypeVar

import httpx
import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError

from smb_core.settings import Settings

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


def _all_required(schema: dict[str, Any]) -> None:
    """Advertise every field as required so Ollama's grammar always emits it; defaults keep parsing lenient."""
    schema["required"] = list(schema.get("properties", {}))


class LLMOutput(BaseModel):
    """Base of every schema the LLM answers with (extraction, evolution judges): extra keys ignored."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_all_required)
T = TypeVar("T")

_EXCERPT = 300


class LLMError(RuntimeError):
    """Ollama could not give a usable answer (server down, timeout, HTTP error, bad or invalid output)."""


class _BadOutput(Exception):
    """The server answered 200 but the content is unusable; worth retrying."""


def _excerpt(text: str, limit: int = _EXCERPT) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit] + "…"


def _normalise_host(host: str) -> str:
    """Accept `OLLAMA_HOST`-style values such as `localhost:11434` as well as full URLs."""
    host = host.strip().rstrip("/")
    if not re.match(r"^https?://", host, re.IGNORECASE):
        host = f"http://{host}"
    return host


class _OllamaHTTP:
    """Shared transport: one `httpx.Client`, bounded retries with exponential backoff, clear errors."""

    def __init__(self, settings: Settings, model: str, *, attempts: int = 3, backoff_seconds: float = 0.5) -> None:
        self.host = _normalise_host(settings.ollama_host)
        self.model = model
        self.timeout = float(settings.ollama_timeout_seconds)
        self.attempts = max(1, int(attempts))
        self.backoff_seconds = max(0.0, float(backoff_seconds))
        # trust_env=False: Ollama is a local/LAN service, a system HTTP proxy must not intercept it.
        self._http = httpx.Client(base_url=self.host, timeout=httpx.Timeout(self.timeout), trust_env=False)

    def _where(self) -> str:
        return f"Ollama at {self.host} (model {self.model!r})"

    def _request(self, method: str, path: str, payload: dict[str, Any] | None, parse: Callable[[Any], T]) -> T:
        """Send one request, retrying transient failures; `parse` raises `_BadOutput` for unusable content."""
        last: str = "no attempt made"
        for attempt in range(1, self.attempts + 1):
            try:
                response = self._http.request(method, path, json=payload)
            except httpx.ConnectError as exc:
                last = f"cannot connect to {self._where()}: {exc or 'connection refused'}; is `ollama serve` running?"
            except httpx.TimeoutException:
                last = f"{self._where()} timed out after {self.timeout:g}s on {path}"
            except httpx.UnsupportedProtocol as exc:
                raise LLMError(f"invalid Ollama host {self.host!r}: {exc}") from None
            except httpx.TransportError as exc:
                last = f"request to {self._where()} failed: {type(exc).__name__}: {exc}"
            else:
                status = response.status_code
                if status == 404:
                    raise LLMError(
                        f"{self._where()} returned HTTP 404 on {path}: {_excerpt(response.text)}; "
                        f"the model is probably not installed: run `ollama pull {self.model}`"
                    )
                if 400 <= status < 500:
                    raise LLMError(f"{self._where()} returned HTTP {status} on {path}: {_excerpt(response.text)}")
                if status >= 500:
                    last = f"{self._where()} returned HTTP {status} on {path}: {_excerpt(response.text)}"
                else:
                    try:
                        try:
                            data = response.json()
                        except ValueError:
                            raise _BadOutput(f"invalid JSON response body: {_excerpt(response.text)!r}") from None
                        return parse(data)
                    except _BadOutput as exc:
                        last = f"{self._where()} on {path}: {exc}"
            if attempt < self.attempts:
                log.debug("ollama attempt %d/%d failed: %s", attempt, self.attempts, last)
                time.sleep(self.backoff_seconds * 2 ** (attempt - 1))
        raise LLMError(f"{last} (gave up after {self.attempts} attempt{'s' if self.attempts != 1 else ''})")

    def list_models(self) -> list[str]:
        """Names of the models the server has pulled (`GET /api/tags`); useful for a health check."""

        def parse(data: Any) -> list[str]:
            if not isinstance(data, dict) or not isinstance(data.get("models"), list):
                raise _BadOutput("response has no 'models' list")
            return [str(m.get("name") or m.get("model")) for m in data["models"] if isinstance(m, dict)]

        return self._request("GET", "/api/tags", None, parse)

    def close(self) -> None:
        self._http.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _strip_fences(content: str) -> str:
    """Some models wrap JSON in ```json fences even with structured outputs; tolerate that."""
    match = re.fullmatch(r"\s*```(?:json)?\s*(.*?)\s*```\s*", content, re.DOTALL | re.IGNORECASE)
    return match.group(1) if match else content


class OllamaClient(_OllamaHTTP):
    """Chat with JSON-schema-constrained output (Ollama "structured outputs"), validated by pydantic."""

    def __init__(
        self,
        settings: Settings,
        *,
        model: str | None = None,
        attempts: int = 3,
        backoff_seconds: float = 0.5,
    ) -> None:
        super().__init__(settings, model or settings.ollama_model, attempts=attempts, backoff_seconds=backoff_seconds)

    def chat_json(self, messages: list[dict], schema: type[M], *, temperature: float = 0.0) -> M:
        """POST /api/chat (non-streaming) with `format` = the schema; return the validated model instance."""
        payload = {
            "model": self.model,
            "messages": messages,
            "stream": False,
            "format": schema.model_json_schema(),
            "options": {"temperature": temperature},
        }

        def parse(data: Any) -> M:
            message = data.get("message") if isinstance(data, dict) else None
            content = message.get("content") if isinstance(message, dict) else None
            if not isinstance(content, str):
                raise _BadOutput(f"response has no message.content: {_excerpt(json.dumps(data))}")
            try:
                value = json.loads(_strip_fences(content))
            except ValueError as exc:
                raise _BadOutput(f"model returned invalid JSON ({exc}): {_excerpt(content)!r}") from None
            try:
                return schema.model_validate(value)
            except ValidationError as exc:
                problems = "; ".join(
                    f"{'.'.join(str(p) for p in err['loc']) or '<root>'}: {err['msg']}" for err in exc.errors()[:5]
                )
                raise _BadOutput(
                    f"model JSON does not validate against schema {schema.__name__} "
                    f"({exc.error_count()} error(s): {problems})"
                ) from None

        return self._request("POST", "/api/chat", payload, parse)


class OllamaEmbedder(_OllamaHTTP):
    """`Embedder` backed by Ollama's `/api/embed`; embeds each distinct text once, in batches."""

    def __init__(
        self,
        settings: Settings,
        model: str = "nomic-embed-text",
        *,
        batch_size: int = 64,
        attempts: int = 3,
        backoff_seconds: float = 0.5,
    ) -> None:
        super().__init__(settings, model, attempts=attempts, backoff_seconds=backoff_seconds)
        self.name = f"ollama:{model}"
        self.batch_size = max(1, int(batch_size))
        self._dim: int | None = None
        self._lock = threading.Lock()

    @property
    def dim(self) -> int:
        """Vector size; learnt from the first response (asking the server once if nothing was embedded yet)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    def _embed_batch(self, batch: list[str]) -> np.ndarray:
        def parse(data: Any) -> np.ndarray:
            rows = data.get("embeddings") if isinstance(data, dict) else None
            if not isinstance(rows, list) or len(rows) != len(batch):
                got = len(rows) if isinstance(rows, list) else "no"
                raise _BadOutput(f"expected {len(batch)} embeddings, got {got}")
            try:
                matrix = np.asarray(rows, dtype=np.float32)
            except (TypeError, ValueError):
                raise _BadOutput("embeddings are not a rectangular list of numbers") from None
            if matrix.ndim != 2 or matrix.shape[1] == 0 or not np.isfinite(matrix).all():
                raise _BadOutput(f"embeddings have unusable shape {matrix.shape} or non-finite values")
            return matrix

        return self._request("POST", "/api/embed", {"model": self.model, "input": batch}, parse)

    def embed(self, texts: list[str]) -> np.ndarray:
        """One L2-normalised float32 row per text, in input order."""
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        unique = list(dict.fromkeys(texts))
        rows: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(unique), self.batch_size):
                batch = unique[start : start + self.batch_size]
                matrix = self._embed_batch(batch)
                if self._dim is None:
                    self._dim = int(matrix.shape[1])
                elif matrix.shape[1] != self._dim:
                    raise LLMError(
                        f"{self._where()} returned {matrix.shape[1]}-dimensional embeddings, expected {self._dim}"
                    )
                norms = np.clip(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12, None)
                for text, row in zip(batch, matrix / norms):
                    rows[text] = row
        return np.stack([rows[t] for t in texts]).astype(np.float32, copy=False)
