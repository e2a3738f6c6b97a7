"""The corpus folder: partition keys, scanning, validation of bad input, change detection, ranges."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from smb_core.corpus import (
    CorpusFile, DocumentError, changes_since, contiguous_ranges, partition_key, read_document, scan,
)
from smb_core.settings import Settings
from tests.conftest import write_doc

SAFE_KEY = re.compile(r"^[a-z0-9][a-z0-9-]*$")

TRICKY_NAMES = [
    "plain.md",
    "with space.md",
    "with  two   spaces.md",
    "a,b,c.md",
    "UPPER CASE.MD",
    "café/naïve résumé.md",
    "日本語のノート.md",
    "deep/nested/folder/doc.md",
    "deep/nested-folder-doc.md",
    "a b.md",
    "a-b.md",
    "a_b.md",
    "A B.md",
    "a b.markdown",
    "[brackets] (parens) & 'quotes'.md",
    "dots.in.name.md",
    "x" * 200 + ".md",
    "x" * 200 + "y.md",
    "---.md",
]


@pytest.mark.parametrize("name", TRICKY_NAMES)
def test_partition_key_is_safe_and_stable(name):
    key = partition_key(name)
    assert SAFE_KEY.match(key), key
    assert not {",", " ", "/", "\\", "[", "]"} & set(key)
    assert len(key) <= 60 + 1 + 12
    assert partition_key(name) == key


def test_partition_keys_are_unique_per_path_even_when_slugs_collide():
    keys = [partition_key(n) for n in TRICKY_NAMES]
    assert len(set(keys)) == len(TRICKY_NAMES)
    # these all slug to "a-b" but are different files
    assert partition_key("a b.md").startswith("a-b-") and partition_key("a_b.md").startswith("a-b-")
    assert partition_key("a b.md") != partition_key("a_b.md") != partition_key("A B.md")


def test_partition_keys_do_not_change_between_releases():
    """Dagster partitions are keyed by these strings: changing the scheme orphans every partition."""
    assert partition_key("notes/hello world.md") == "notes-hello-world-da0de640eb21"
    assert partition_key("people/mara-okafor.md") == "people-mara-okafor-21dd18024746"
    assert partition_key("日本語.md") == "doc-ebd69ee8df2c"
    assert partition_key("a,b.md") == "a-b-338919872437"


def test_scan_finds_markdown_recursively_sorted_and_skips_hidden_and_other_files(tmp_path: Path):
    root = tmp_path / "kbmd"
    for name in ["b.md", "a.markdown", "sub/c.md", "sub/deeper/d.MD", "notes.txt", ".hidden.md",
                 ".git/e.md", "sub/.cache/f.md", "image.png"]:
        write_doc(root, name, "# t\n")
    files = scan(root)
    assert [f.relative for f in files] == ["a.markdown", "b.md", "sub/c.md", "sub/deeper/d.MD"]
    first = files[0]
    assert first.path == root / "a.markdown"
    assert first.partition_key == partition_key("a.markdown")
    assert first.size == 4
    assert first.changed_ns == max((root / "a.markdown").stat().st_mtime_ns, (root / "a.markdown").stat().st_ctime_ns)


def test_scan_of_a_missing_folder_is_a_clear_error(tmp_path: Path):
    with pytest.raises(FileNotFoundError, match="corpus folder .*nope does not exist"):
        scan(tmp_path / "nope")


# ---- validation -------------------------------------------------------------------------------


def _read(root: Path, name: str, max_bytes: int = 2_000_000):
    (file,) = [f for f in scan(root) if f.relative == name]
    return read_document(file, root, max_bytes)


def test_good_document_is_read_with_hash_title_and_tags(tmp_path: Path):
    root = tmp_path / "kbmd"
    text = "---\ntitle: Front Title\ntags: [a, b]\n---\n\n# The Heading #\n\nSome text.\n"
    write_doc(root, "good.md", text)
    content = _read(root, "good.md")
    assert content.text == text
    import hashlib

    assert content.sha256 == hashlib.sha256(text.encode("utf-8")).hexdigest()
    assert content.title == "The Heading"
    assert content.tags == ["a", "b"]


@pytest.mark.parametrize(
    ("text", "title", "tags"),
    [
        ("---\ntitle: From Front Matter\ntags: x, y\n---\nno heading here\n", "From Front Matter", ["x", "y"]),
        ("just text, no heading\n", "my notes file", []),
    ],
)
def test_title_falls_back_to_front_matter_then_file_name(tmp_path: Path, text, title, tags):
    root = tmp_path / "kbmd"
    write_doc(root, "my-notes_file.md", text)
    content = _read(root, "my-notes_file.md")
    assert (content.title, content.tags) == (title, tags)


def _bad(root: Path, name: str, data: bytes) -> None:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


@pytest.mark.parametrize(
    ("name", "data", "reason"),
    [
        ("empty.md", b"", "file is empty"),
        ("blank.md", b"  \n\t\n", "file has only whitespace"),
        ("latin1.md", "# Café\n\nna\xefve\n".encode("latin-1"), "not valid UTF-8"),
        ("binary.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "binary file (contains NUL bytes)"),
        ("late-nul.md", b"# Text\n\n" + b"a" * 9000 + b"\x00tail\n", "binary file (contains NUL bytes)"),
        ("broken-yaml.md", b"---\ntitle: [unclosed\n---\n# T\n", "broken YAML front matter"),
        ("unclosed-fm.md", b"---\ntitle: x\n# T\nno closing fence\n", "broken YAML front matter"),
        ("list-fm.md", b"---\n- a\n- b\n---\n# T\n", "broken YAML front matter"),
        ("sub dir/empty, too.md", b"", "file is empty"),
    ],
)
def test_bad_documents_raise_document_error_naming_file_and_reason(tmp_path: Path, name, data, reason):
    root = tmp_path / "kbmd"
    _bad(root, name, data)
    with pytest.raises(DocumentError) as info:
        _read(root, name)
    assert info.value.path == name
    assert reason in info.value.reason
    assert str(info.value).startswith(f"{name}: ")


def test_file_over_the_size_limit_is_rejected(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("SMB_MAX_DOC_BYTES", "100")
    limit = Settings().max_doc_bytes
    assert limit == 100
    root = tmp_path / "kbmd"
    write_doc(root, "big.md", "# Big\n\n" + "word " * 40)
    write_doc(root, "small.md", "# Small\n\n" + "word " * 10)
    with pytest.raises(DocumentError) as info:
        _read(root, "big.md", limit)
    assert info.value.path == "big.md"
    assert info.value.reason == "file is 207 bytes, over the SMB_MAX_DOC_BYTES limit of 100"
    assert _read(root, "small.md", limit).title == "Small"


def test_symlink_pointing_outside_the_corpus_is_rejected(tmp_path: Path):
    root = tmp_path / "kbmd"
    root.mkdir()
    outside = write_doc(tmp_path, "secret.md", "# Secret\n\nnot part of the corpus\n")
    os.symlink(outside, root / "link.md")
    os.symlink(root / "real.md", root / "inside-link.md")
    write_doc(root, "real.md", "# Real\n\ntext\n")
    os.symlink(tmp_path / "gone.md", root / "dangling.md")
    with pytest.raises(DocumentError) as info:
        _read(root, "link.md")
    assert info.value.path == "link.md"
    assert "symlink points outside the corpus folder" in info.value.reason
    assert str(outside) in info.value.reason
    assert _read(root, "inside-link.md").title == "Real"
    with pytest.raises(DocumentError, match="dangling.md: file does not exist"):
        _read(root, "dangling.md")


def test_a_file_deleted_after_the_scan_is_a_document_error(tmp_path: Path):
    root = tmp_path / "kbmd"
    path = write_doc(root, "soon-gone.md", "# x\n")
    (file,) = scan(root)
    path.unlink()
    with pytest.raises(DocumentError, match="soon-gone.md: file does not exist"):
        read_document(file, root, 1000)


# ---- changes and ranges -----------------------------------------------------------------------


def _file(name: str, mtime: int) -> CorpusFile:
    return CorpusFile(Path("/c") / name, name, partition_key(name), mtime, 10)


def test_changes_since_splits_new_and_modified_and_advances_the_watermark():
    files = [_file("a.md", 100), _file("b.md", 200), _file("c.md", 300), _file("d.md", 50)]
    known = {partition_key("a.md"), partition_key("b.md"), partition_key("d.md")}
    changes = changes_since(files, known, watermark_ns=150)
    assert [f.relative for f in changes.new] == ["c.md"]
    assert [f.relative for f in changes.modified] == ["b.md"]
    assert changes.watermark_ns == 300


def test_changes_since_with_nothing_new_keeps_the_watermark():
    files = [_file("a.md", 100)]
    changes = changes_since(files, {partition_key("a.md")}, watermark_ns=100)
    assert (changes.new, changes.modified, changes.watermark_ns) == ([], [], 100)
    empty = changes_since([], set(), watermark_ns=77)
    assert (empty.new, empty.modified, empty.watermark_ns) == ([], [], 77)


def test_changes_since_first_tick_everything_is_new():
    files = [_file("a.md", 5), _file("b.md", 9)]
    changes = changes_since(files, set(), 0)
    assert [f.relative for f in changes.new] == ["a.md", "b.md"]
    assert changes.modified == [] and changes.watermark_ns == 9


@pytest.mark.parametrize(
    ("wanted", "max_size", "expected"),
    [
        ("abcdefg", 100, [("a", "g")]),
        ("abdeg", 100, [("a", "b"), ("d", "e"), ("g", "g")]),
        ("abcdefg", 3, [("a", "c"), ("d", "f"), ("g", "g")]),
        ("abcdefg", 1, [(k, k) for k in "abcdefg"]),
        ("bcdf", 2, [("b", "c"), ("d", "d"), ("f", "f")]),
        ("", 10, []),
        ("xyz", 10, []),
        ("g", 10, [("g", "g")]),
    ],
)
def test_contiguous_ranges(wanted, max_size, expected):
    assert contiguous_ranges(list("abcdefg"), set(wanted), max_size) == expected
