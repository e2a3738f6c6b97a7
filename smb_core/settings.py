"""All SMB_* settings in one place, read from the environment and an optional `.env` file."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Runtime configuration; every field maps to an `SMB_<NAME>` environment variable."""

    model_config = SettingsConfigDict(env_prefix="SMB_", env_file=".env", extra="ignore")

    memory_bank_dir: Path = Field(Path("./memory-bank"), description="Where the memory bank lives.")
    kbmd_dir: Path = Field(Path("./kbmd"), description="Markdown documents to ingest.")
    llm: Literal["none", "ollama"] = Field("none", description="Optional LLM for extraction/evolution.")
    ollama_host: str = Field("http://localhost:11434", description="Ollama server URL.")
    ollama_model: str = Field("qwen2.5-coder:32b", description="Ollama chat model.")
    ollama_timeout_seconds: float = Field(120.0, description="Per-request timeout for Ollama calls.")
    embedding_model: str = Field(
        "minilm-int8",
        description="`minilm-int8` (embedded, offline) or `ollama:<model>`, e.g. `ollama:nomic-embed-text`.",
    )
    chroma_host: str | None = Field(None, description="Use a Chroma server at this host instead of the embedded store.")
    chroma_port: int = Field(8000, description="Port of the Chroma server when `SMB_CHROMA_HOST` is set.")
    max_doc_bytes: int = Field(2_000_000, description="Documents larger than this are rejected.")
    duckdb_memory_limit: str = Field(
        "2GB", description="Memory one DuckDB session may use before it spills to disk (DuckDB's own default is "
                           "80% of RAM, which a whole-bank check query would take).")
    lock_timeout_seconds: float = Field(60.0, description="How long a reader or writer waits for the bank lock.")
    evolution_interval_seconds: int = Field(3600, description="Seconds between scheduled evolution cycles.")
    evolution_min_new_docs: int = Field(20, description="New documents that trigger an evolution cycle early.")
    contradiction_claims_per_cycle: int = Field(
        25_000, description="Claims one cycle checks for contradictions at most: its own new claims first, then "
                            "those earlier cycles left; the rest wait for the next cycles (0: no limit).")
    confidence_half_life_days: float = Field(
        365.0, description="Confidence halves after this many days without new independent sources (0: no decay).")
    confidence_floor: float = Field(0.05, description="Objects whose decayed confidence falls below this are deprecated.")


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (cached; call `get_settings.cache_clear()` after changing the environment)."""
    return Settings()
