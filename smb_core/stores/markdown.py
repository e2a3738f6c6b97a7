"""The human-readable store: one markdown file with YAML front matter per object, by layer and kind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from smb_core.fsutil import atomic_write_text
from smb_core.model import MODEL_BY_TYPE, MemoryObject, SourceDocument, from_markdown, to_markdown

#: Folders of every layer, created up front so a person browsing the bank sees its shape.
LAYER_FOLDERS: dict[int, list[str]] = {
    0: ["source"],
    1: ["concepts", "claims", "entities", "relationships"],
    2: ["entities", "concepts", "clusters", "communities", "taxonomy"],
    3: ["insights", "contradictions", "questions"],
    4: ["syntheses", "abstractions", "relationships"],
    5: ["narratives", "timelines", "evolution"],
    6: ["agendas", "plans"],
}


class MarkdownStore:
    def __init__(self, root: Path) -> None:
        self.root = root

    def create_layout(self) -> None:
        for layer, folders in LAYER_FOLDERS.items():
            for folder in folders:
                (self.root / f"layer-{layer}" / folder).mkdir(parents=True, exist_ok=True)

    def write(self, obj: MemoryObject | SourceDocument) -> Path:
        path = self.root / (obj.file_path() if isinstance(obj, SourceDocument) else obj.path())
        atomic_write_text(path, to_markdown(obj))
        return path

    def read(self, relative_path: str) -> MemoryObject | SourceDocument:
        return from_markdown((self.root / relative_path).read_text(encoding="utf-8"))

    def exists(self, relative_path: str) -> bool:
        return (self.root / relative_path).is_file()

    def iter_paths(self, layer: int | None = None) -> Iterator[Path]:
        """Every object file (optionally of one layer); temp files of interrupted writes are skipped."""
        pattern = f"layer-{layer}/*/*.md" if layer is not None else "layer-*/*/*.md"
        return (p for p in self.root.glob(pattern) if not p.name.startswith("."))

    def count(self, layer: int | None = None) -> int:
        return sum(1 for _ in self.iter_paths(layer))


def memory_folders() -> set[str]:
    return {f"layer-{m.layer}/{m.folder}" for m in MODEL_BY_TYPE.values()}
