"""What every extractor returns, and helpers shared by the NLP and LLM extractors."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import Protocol

from smb_core.model import Claim, Concept, Edge, Entity, MemoryObject, Relationship, SourceDocument, SourceSpan


@dataclass
class Extraction:
    """Layer-1 objects found in one document. Objects with the same normalised name are one object."""

    entities: list[Entity] = field(default_factory=list)
    concepts: list[Concept] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    relationships: list[Relationship] = field(default_factory=list)
    #: Structural edges with no object behind them, e.g. a claim `references` the entities it names.
    edges: list[Edge] = field(default_factory=list)
    #: Names the document is about (its heading, the entity that opens it) with weights, for recall.
    names: list[tuple[str, float]] = field(default_factory=list)
    extractor: str = "nlp"

    def objects(self) -> list[MemoryObject]:
        return [*self.entities, *self.concepts, *self.claims, *self.relationships]

    def counts(self) -> dict[str, int]:
        return {
            "entity": len(self.entities),
            "concept": len(self.concepts),
            "claim": len(self.claims),
            "relationship": len(self.relationships),
        }


class Extractor(Protocol):
    name: str

    def extract(self, doc: SourceDocument, text: str) -> Extraction:
        """Extract layer-1 objects from `text`, the content of layer-0 document `doc`."""


def normalise_name(name: str) -> str:
    """Case-, accent- and punctuation-insensitive key used to identify the same name."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = re.sub(r"^(the|a|an)\s+", "", text.strip())
    text = re.sub(r"[^\w]+", " ", text)
    return " ".join(text.split())


_HONORIFIC = re.compile(r"^(dr|mr|mrs|ms|prof|sir|dame|lord|lady|st|saint)\s+")
#: A company's legal form at the end of its (normalised) name: a suffix that names nothing new.
_LEGAL_FORM = re.compile(r"(?<=\w)\s+(?:inc|incorporated|ltd|limited|llc|plc|gmbh|ag|s a|sa|n v|nv|b v|bv|"
                         r"pty ltd|s p a|spa|oy|ab)$")
#: Abbreviated first words of place names, as their full word.
_ABBREVIATED_PREFIX = {"mt": "mount", "ft": "fort"}
#: A trailing parenthesised qualifier, as in "Mercury (planet)" or "Algiers (film)".
QUALIFIER = re.compile(r"\s*\([^)]*\)\s*$")


def exact_key(name: str) -> str:
    """A name's exact key among its `blocking_keys`: normalised, with "&" spelled "and" ("R&B" is
    "r and b", never the initials "R.B.")."""
    return normalise_name(name.replace("&", " and "))


#: A title that tells namesakes apart: "John Whitcombe (footballer)", "Newbury, Berkshire".
_TITLE_QUALIFIER = re.compile(r"^(?P<name>.*?)\s*\((?P<qualifier>[^)]*)\)\s*$|^(?P<place>[^,]+),\s*(?P<region>.+)$")


def split_qualifier(title: str) -> tuple[str, str] | None:
    """(name, qualifier) of "John Whitcombe (footballer)" or "Newbury, Berkshire", normalised; the
    qualifier without spaces, so that "Washington, D.C." and "Washington, DC" have the same. None for a
    title without one."""
    m = _TITLE_QUALIFIER.match(title)
    if not m:
        return None
    return normalise_name(m["name"] or m["place"]), exact_key(m["qualifier"] or m["region"]).replace(" ", "")


def base_name(title: str) -> str:
    """A title's name without its qualifier, normalised: "Newbury, Ohio" and "Newbury" are both newbury."""
    split = split_qualifier(title)
    return split[0] if split else normalise_name(title)


#: Words an acronym may skip: "United States of America" is USA, yet "Department of Energy" is DOE, so
#: both spellings count, here (blocking keys) and where the extractor reads "Name (ACRONYM)".
MINOR_WORDS = frozenset({"of", "for", "and", "the", "on", "in", "at", "to", "de", "&"})


def initials(words: list[str]) -> set[str]:
    """The two spellings of an acronym of these words, lower-case: without and with the initials of
    MINOR_WORDS ("United States of America": usa, usoa; "Department of Energy": de, doe)."""
    return {"".join(w[0] for w in words if w.lower() not in MINOR_WORDS).lower(),
            "".join(w[0] for w in words).lower()}


#: "R & B", "AT & T": an ampersand acronym written with spaces is the same acronym
_SPACED_AMPERSAND = re.compile(r"^\s*[A-Z]{1,3}(?:\s*&\s*[A-Z]{1,3})+\s*$")


def blocking_keys(name: str) -> set[str]:
    """Keys under which surface forms of one name meet: exact, and without qualifier/honorific; an
    expansion gets an `expansion:` key and an acronym an `acronym:` key, and only a pair of the two
    meets (see `partner_keys`), so "GPU indexing" and "graph index" never do. An acronym with an
    ampersand names two things joined ("R&B", "AT&T"): it meets only an expansion with an "and" in the
    same place ("Rhythm and Blues"), never a person's initials ("Richard Band")."""
    keys = {exact_key(name)}
    unqualified = exact_key(QUALIFIER.sub("", name))
    keys.add(_HONORIFIC.sub("", unqualified))
    keys.add(_LEGAL_FORM.sub("", unqualified))  # "Tallis Instruments Ltd." is Tallis Instruments
    first, _, rest = unqualified.partition(" ")
    if first in _ABBREVIATED_PREFIX and rest:
        keys.add(f"{_ABBREVIATED_PREFIX[first]} {rest}")  # "Mt. Arveld" is Mount Arveld
    compact = re.sub(r"[^A-Za-z&]", "", QUALIFIER.sub("", name))
    letters = compact.replace("&", "")
    if letters.isupper() and 2 <= len(letters) <= 6 and (len(name.split()) == 1 or _SPACED_AMPERSAND.match(name)):
        keys.add("acronym:" + compact.lower())
    else:
        words = unqualified.split()
        major = [w for w in words if w not in MINOR_WORDS]
        if len(major) >= 2:  # the spellings the extractor accepts for a defined acronym
            keys.update("expansion:" + spelling for spelling in initials(words))
            if "and" in words[1:-1]:
                keys.add("expansion:" + "".join("&" if w == "and" else w[0] for w in words
                                                if w == "and" or w not in MINOR_WORDS))
    return {k for k in keys if len(k) >= 2}


def partner_keys(keys: set[str]) -> set[str]:
    """The keys a name's keys meet: themselves, with acronym and expansion keys swapped."""
    swap = {"acronym:": "expansion:", "expansion:": "acronym:"}
    out = set()
    for key in keys:
        prefix = next((p for p in swap if key.startswith(p)), None)
        out.add(swap[prefix] + key[len(prefix):] if prefix else key)
    return out


def make_span(doc: SourceDocument, text: str, start: int, end: int) -> SourceSpan:
    """A span with character offsets into `text` and the 1-based lines they cover."""
    line_start = text.count("\n", 0, start) + 1
    line_end = line_start + text.count("\n", start, end)
    return SourceSpan(source_id=doc.id, start=start, end=end, line_start=line_start, line_end=line_end)


def object_id(model: type[MemoryObject], doc: SourceDocument, *parts: str) -> str:
    """Deterministic id for a layer-1 object of `doc`: re-extracting the same version upserts, never duplicates."""
    from smb_core.model import stable_id

    return stable_id(model.id_prefix, doc.id, *parts)


def claim_id(source_id: str, statement: str) -> str:
    """The id of `statement` as a claim of the document version `source_id`: one claim per normalised
    statement and document (so evolution can find the claim, and its vector, for a sentence)."""
    from smb_core.model import stable_id

    return stable_id(Claim.id_prefix, source_id, "claim", normalise_name(statement))


def authored_title(doc: SourceDocument, text: str) -> str | None:
    """The document's title if its author gave one (a `#` heading or front-matter title), not a file name."""
    from smb_core.extract.markdown_text import front_matter_end

    title = doc.title.strip()
    if re.search(rf"^#[ \t]+{re.escape(title)}[ \t#]*$", text, flags=re.MULTILINE):
        return title
    end = front_matter_end(text)
    return title if end and re.search(r"^title:", text[:end], flags=re.MULTILINE) else None
