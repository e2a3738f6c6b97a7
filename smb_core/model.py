"""Memory objects, their enums, and the markdown-with-YAML-front-matter form a person reads.

Every object in the bank is one of the pydantic models below. The markdown form is canonical for
humans: `to_markdown(obj)` and `from_markdown(text)` round-trip exactly.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timezone
from enum import Enum
from typing import Any, ClassVar, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class ModelError(ValueError):
    """An object, node or edge that does not fit the memory model."""


class MemoryType(str, Enum):
    CONCEPT = "concept"
    CANONICAL_CONCEPT = "canonical_concept"
    CANONICAL_ENTITY = "canonical_entity"
    CLAIM = "claim"
    ENTITY = "entity"
    RELATIONSHIP = "relationship"
    CLUSTER = "cluster"
    COMMUNITY = "community"
    TAXONOMY = "taxonomy"
    INSIGHT = "insight"
    QUESTION = "question"
    CONTRADICTION = "contradiction"
    SYNTHESIS = "synthesis"
    ABSTRACTION = "abstraction"
    NARRATIVE = "narrative"
    TIMELINE = "timeline"
    EVOLUTION = "evolution"
    AGENDA = "agenda"
    PLAN = "plan"
    DISCOVERED_RELATIONSHIP = "discovered_relationship"


class Status(str, Enum):
    ACTIVE = "active"
    MERGED = "merged"
    SPLIT = "split"
    DEPRECATED = "deprecated"
    SUPERSEDED = "superseded"


class NodeType(str, Enum):
    CONCEPT = "concept"
    ENTITY = "entity"
    CLAIM = "claim"
    INSIGHT = "insight"
    NARRATIVE = "narrative"
    ABSTRACTION = "abstraction"


class EdgeType(str, Enum):
    REFERENCES = "references"
    SUPPORTS = "supports"
    CONTRADICTS = "contradicts"
    EXTENDS = "extends"
    DERIVES_FROM = "derives_from"
    INSPIRED_BY = "inspired_by"
    EVOLVES_INTO = "evolves_into"
    RELATED_TO = "related_to"
    CONTAINS = "contains"
    EXPLAINS = "explains"


class EntityKind(str, Enum):
    PERSON = "person"
    ORGANIZATION = "organization"
    PLACE = "place"
    DATE = "date"
    WORK = "work"
    OTHER = "other"


def node_type(value: str | NodeType) -> NodeType:
    """Parse a node type, rejecting anything outside the six the spec allows."""
    return _member(NodeType, value, "node type")


def edge_type(value: str | EdgeType) -> EdgeType:
    """Parse an edge type, rejecting anything outside the ten the spec allows."""
    return _member(EdgeType, value, "edge type")


def memory_type(value: str | MemoryType) -> MemoryType:
    """Parse a memory type for a filter: a misspelt one is an error, not an empty answer."""
    return _member(MemoryType, value, "memory type")


def object_status(value: str | Status) -> Status:
    """Parse an object status for a filter, likewise."""
    return _member(Status, value, "status")


#: A contradiction's lifecycle: open until someone explains it or marks a side superseded; never deleted.
Resolution = Literal["open", "explained", "superseded"]
RESOLUTIONS: tuple[str, ...] = get_args(Resolution)


def resolution(value: str) -> str:
    """Check a contradiction's resolution (for a filter or `resolve`)."""
    if value not in RESOLUTIONS:
        raise ModelError(f"unknown resolution {value!r}; allowed: {', '.join(RESOLUTIONS)}")
    return value


def _member(enum: type[Enum], value: Any, what: str) -> Any:
    try:
        return enum(value)
    except ValueError:
        raise ModelError(f"unknown {what} {value!r}; allowed: {', '.join(m.value for m in enum)}") from None


def _ids_in(value: Any) -> list[str]:
    """The ids in a reference field: an id, a list of ids, or items that cite ids (`object_id`, `cites`)."""
    if not value:
        return []
    if isinstance(value, str):
        return [value]
    ids: list[str] = []
    for item in value:
        if isinstance(item, str):
            ids.append(item)
        else:  # a cited statement, a timeline event, an agenda item or a plan step
            ids += _ids_in(getattr(item, "object_id", None)) + _ids_in(getattr(item, "cites", None))
    return ids


def utcnow() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def agent_run_id(agent: str) -> str:
    """The `run_id` of what an agent writes (`MemoryBank`, `remember`): not a Dagster run."""
    return f"agent:{agent}"


def by_agent(run_id: str | None) -> bool:
    """Whether an object was last written by an agent (re-extraction leaves such objects as they are)."""
    return (run_id or "").startswith("agent:")


def stable_id(prefix: str, *parts: str) -> str:
    """A deterministic id: the same inputs give the same id, so re-runs upsert instead of duplicating."""
    digest = hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:16]
    return f"{prefix}-{digest}"


class SourceSpan(BaseModel):
    """Where in a layer-0 document an object came from (character offsets and 1-based lines)."""

    model_config = ConfigDict(extra="forbid")

    source_id: str
    start: int
    end: int
    line_start: int
    line_end: int


class MemoryObject(BaseModel):
    """Fields every memory object carries, including provenance (`derived_from`, `source_spans`, `run_id`)."""

    model_config = ConfigDict(extra="forbid", use_enum_values=False, validate_assignment=True)

    #: Layer of the bank the type lives in, its folder under `layer-N/`, and its graph node type.
    layer: ClassVar[int] = 1
    folder: ClassVar[str] = ""
    node: ClassVar[NodeType | None] = None
    id_prefix: ClassVar[str] = "obj"
    #: Fields that name other objects or documents: an id, a list of ids, or items citing them
    #: (`object_id`, `cites`). `references()` reads them; an agent's new object may not name a missing id.
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from",)

    id: str
    type: MemoryType
    title: str
    description: str = ""
    confidence: float = Field(0.5, ge=0.0, le=1.0)
    status: Status = Status.ACTIVE
    status_reason: str = ""
    created: datetime = Field(default_factory=utcnow)
    modified: datetime = Field(default_factory=utcnow)
    embedding_id: str | None = None  # the Chroma id of its text's vector, shared by objects with that text
    graph_node_id: str | None = None
    source_ids: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    derived_from: list[str] = Field(default_factory=list)
    source_spans: list[SourceSpan] = Field(default_factory=list)
    run_id: str | None = None
    #: When `confidence` was last set by new independent evidence (None: when created). Confidence
    #: decays from there with the bank's half-life; see `smb_core.evolve.confidence`.
    reinforced_at: datetime | None = None
    #: Open contradictions that put this object in dispute, directly or through what it derives from.
    disputed_by: list[str] = Field(default_factory=list)
    body: str = ""

    @field_validator("title")
    @classmethod
    def _title_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("title must not be empty")
        return value

    def references(self) -> set[str]:
        """Ids this object names: its sources, what it derives from, its members, sides or citations."""
        return {i for name in self.reference_fields for i in _ids_in(getattr(self, name))} | set(self.source_ids)

    def text(self) -> str:
        """The text that represents this object for embedding and lexical search."""
        return f"{self.title}. {self.description}".strip(". ") if self.description else self.title

    def path(self) -> str:
        """Relative path of the markdown file inside the bank."""
        return f"layer-{self.layer}/{self.folder}/{self.id}.md"


class Concept(MemoryObject):
    layer: ClassVar[int] = 1
    folder: ClassVar[str] = "concepts"
    node: ClassVar[NodeType] = NodeType.CONCEPT
    id_prefix: ClassVar[str] = "con"

    type: MemoryType = MemoryType.CONCEPT
    aliases: list[str] = Field(default_factory=list)
    mentions: int = 1
    merged_into: str | None = None

    def text(self) -> str:
        return self.title


class Entity(MemoryObject):
    layer: ClassVar[int] = 1
    folder: ClassVar[str] = "entities"
    node: ClassVar[NodeType] = NodeType.ENTITY
    id_prefix: ClassVar[str] = "ent"

    type: MemoryType = MemoryType.ENTITY
    entity_kind: EntityKind = EntityKind.OTHER
    aliases: list[str] = Field(default_factory=list)
    mentions: int = 1
    merged_into: str | None = None

    def text(self) -> str:
        return self.title


class Claim(MemoryObject):
    layer: ClassVar[int] = 1
    folder: ClassVar[str] = "claims"
    node: ClassVar[NodeType] = NodeType.CLAIM
    id_prefix: ClassVar[str] = "clm"

    type: MemoryType = MemoryType.CLAIM
    statement: str
    subject: str = ""
    predicate: str = ""
    object: str = ""
    negated: bool = False

    def text(self) -> str:
        return self.statement


class Relationship(MemoryObject):
    """A typed link between two objects; in the graph it is the edge itself (keyed by this id)."""

    layer: ClassVar[int] = 1
    folder: ClassVar[str] = "relationships"
    node: ClassVar[None] = None
    id_prefix: ClassVar[str] = "rel"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "head", "tail")

    type: MemoryType = MemoryType.RELATIONSHIP
    head: str
    tail: str
    edge_type: EdgeType = EdgeType.RELATED_TO
    predicate: str = ""
    evidence: str = ""

    def __init__(self, **data: Any) -> None:
        if "edge_type" in data:  # an unknown type is a ModelError, not a pydantic ValidationError
            data["edge_type"] = edge_type(data["edge_type"])
        super().__init__(**data)

    @field_validator("edge_type", mode="before")
    @classmethod
    def _known_edge(cls, value: Any) -> EdgeType:
        return edge_type(value)

    def text(self) -> str:
        return self.evidence or self.title


class CanonicalEntity(Entity):
    """Layer 2: one real-world entity that several documents name, possibly under different names."""

    layer: ClassVar[int] = 2
    folder: ClassVar[str] = "entities"
    id_prefix: ClassVar[str] = "cen"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "members")

    type: MemoryType = MemoryType.CANONICAL_ENTITY
    members: list[str] = Field(default_factory=list)


class CanonicalConcept(Concept):
    """Layer 2: one concept merged from its mentions across documents (or split off an overloaded one)."""

    layer: ClassVar[int] = 2
    folder: ClassVar[str] = "concepts"
    id_prefix: ClassVar[str] = "ccn"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "members")

    type: MemoryType = MemoryType.CANONICAL_CONCEPT
    members: list[str] = Field(default_factory=list)
    sense: str = ""


class Grouping(MemoryObject):
    """Layer 2: a set of objects that belong together (embedding cluster, graph community, taxonomy node)."""

    layer: ClassVar[int] = 2
    node: ClassVar[NodeType] = NodeType.CONCEPT
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "members")

    members: list[str] = Field(default_factory=list)
    method: str = ""


class Cluster(Grouping):
    folder: ClassVar[str] = "clusters"
    id_prefix: ClassVar[str] = "clu"
    type: MemoryType = MemoryType.CLUSTER


class Community(Grouping):
    folder: ClassVar[str] = "communities"
    id_prefix: ClassVar[str] = "com"
    type: MemoryType = MemoryType.COMMUNITY


class Taxonomy(Grouping):
    folder: ClassVar[str] = "taxonomy"
    id_prefix: ClassVar[str] = "tax"
    type: MemoryType = MemoryType.TAXONOMY
    broader: str | None = None


class Insight(MemoryObject):
    layer: ClassVar[int] = 3
    folder: ClassVar[str] = "insights"
    node: ClassVar[NodeType] = NodeType.INSIGHT
    id_prefix: ClassVar[str] = "ins"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "about", "evidence")

    type: MemoryType = MemoryType.INSIGHT
    kind: str = "observation"
    about: list[str] = Field(default_factory=list)  # the objects the insight is about
    evidence: list[str] = Field(default_factory=list)  # the claims it cites
    #: how strongly the bank shows it, comparable within a kind: the claims tying a bridge to its weaker
    #: side, the documents naming a gap, the documents agreeing on a statement (plans take the strongest first)
    weight: float = 0.0


class Question(MemoryObject):
    layer: ClassVar[int] = 3
    folder: ClassVar[str] = "questions"
    node: ClassVar[NodeType] = NodeType.INSIGHT
    id_prefix: ClassVar[str] = "qst"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "about")

    type: MemoryType = MemoryType.QUESTION
    question: str
    about: list[str] = Field(default_factory=list)
    answered: bool = False

    def text(self) -> str:
        return self.question


class Contradiction(MemoryObject):
    """Two claims that cannot both hold. First-class and never deleted; only its lifecycle changes."""

    layer: ClassVar[int] = 3
    folder: ClassVar[str] = "contradictions"
    node: ClassVar[NodeType] = NodeType.INSIGHT
    id_prefix: ClassVar[str] = "ctr"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "claim_ids")

    type: MemoryType = MemoryType.CONTRADICTION
    claim_ids: list[str]
    attribute: str = ""
    resolution: Resolution = "open"
    explanation: str = ""


class CitedStatement(BaseModel):
    """One statement of a synthesis or narrative and the object (and source span) that backs it."""

    model_config = ConfigDict(extra="forbid")

    text: str
    object_id: str
    span: SourceSpan | None = None
    date: str | None = None  # normalised date when the statement is dated (narratives)


class Synthesis(MemoryObject):
    """Layer 4: claims from at least three documents on one theme, integrated; every statement cited."""

    layer: ClassVar[int] = 4
    folder: ClassVar[str] = "syntheses"
    node: ClassVar[NodeType] = NodeType.ABSTRACTION
    id_prefix: ClassVar[str] = "syn"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "statements")

    type: MemoryType = MemoryType.SYNTHESIS
    theme: str = ""
    method: str = "extractive"  # extractive | llm
    statements: list[CitedStatement] = Field(default_factory=list)


class Abstraction(MemoryObject):
    layer: ClassVar[int] = 4
    folder: ClassVar[str] = "abstractions"
    node: ClassVar[NodeType] = NodeType.ABSTRACTION
    id_prefix: ClassVar[str] = "abs"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "members")

    type: MemoryType = MemoryType.ABSTRACTION
    kind: str = "abstraction"  # abstraction | meta_concept
    level: int = 1
    members: list[str] = Field(default_factory=list)


class DiscoveredRelationship(Relationship):
    """Layer 4: a link between two entities or concepts that no single document states, inferred
    through the graph; `evidence_path` is the evidence (node ids from head to tail)."""

    layer: ClassVar[int] = 4
    folder: ClassVar[str] = "relationships"
    id_prefix: ClassVar[str] = "drl"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "head", "tail", "evidence_path")

    type: MemoryType = MemoryType.DISCOVERED_RELATIONSHIP
    method: str = ""  # shared_neighbours | bridge | transitive
    evidence_path: list[str] = Field(default_factory=list)


class Narrative(MemoryObject):
    layer: ClassVar[int] = 5
    folder: ClassVar[str] = "narratives"
    node: ClassVar[NodeType] = NodeType.NARRATIVE
    id_prefix: ClassVar[str] = "nar"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "subject", "statements")

    type: MemoryType = MemoryType.NARRATIVE
    subject: str = ""  # id of the entity, concept or community the narrative is about
    statements: list[CitedStatement] = Field(default_factory=list)

    def text(self) -> str:
        return self.title  # the description only restates the title's name and dates (see Timeline.text)


class TimelineEvent(BaseModel):
    """A dated event; `date` is ISO 8601 to the precision known (`1874`, `1874-06`, `1874-06-02`)."""

    model_config = ConfigDict(extra="forbid")

    date: str
    end: str | None = None  # for ranges ("1914-1918")
    approximate: bool = False  # "around 1870", "the early 1900s"
    text: str
    object_id: str | None = None
    span: SourceSpan | None = None


class Timeline(MemoryObject):
    layer: ClassVar[int] = 5
    folder: ClassVar[str] = "timelines"
    node: ClassVar[NodeType] = NodeType.NARRATIVE
    id_prefix: ClassVar[str] = "tml"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "subject", "events")

    type: MemoryType = MemoryType.TIMELINE
    subject: str = ""
    events: list[TimelineEvent] = Field(default_factory=list)

    def text(self) -> str:
        """The title ("Timeline of X, 1502-1558"): the description repeats its name and dates with a count
        of events, which doubled what a full cycle embedded for layer 5 (37 s of 418 at 3,000 passages)."""
        return self.title


class Evolution(MemoryObject):
    """Layer 5: what one cycle changed in the bank, as a readable changelog."""

    layer: ClassVar[int] = 5
    folder: ClassVar[str] = "evolution"
    node: ClassVar[NodeType] = NodeType.NARRATIVE
    id_prefix: ClassVar[str] = "evo"

    type: MemoryType = MemoryType.EVOLUTION
    cycle: str
    changes: dict[str, int] = Field(default_factory=dict)


class AgendaItem(BaseModel):
    """One open question or contradiction on the agenda, why it ranks where it does, and what would settle it."""

    model_config = ConfigDict(extra="forbid")

    object_id: str
    score: float
    reason: str
    settle_with: str = ""


class Agenda(MemoryObject):
    layer: ClassVar[int] = 6
    folder: ClassVar[str] = "agendas"
    node: ClassVar[NodeType] = NodeType.NARRATIVE
    id_prefix: ClassVar[str] = "agd"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "items")

    type: MemoryType = MemoryType.AGENDA
    items: list[AgendaItem] = Field(default_factory=list)


class PlanStep(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: str
    cites: list[str] = Field(default_factory=list)  # ids of the objects the step comes from


class Plan(MemoryObject):
    layer: ClassVar[int] = 6
    folder: ClassVar[str] = "plans"
    node: ClassVar[NodeType] = NodeType.NARRATIVE
    id_prefix: ClassVar[str] = "pln"
    reference_fields: ClassVar[tuple[str, ...]] = ("derived_from", "steps")

    type: MemoryType = MemoryType.PLAN
    steps: list[PlanStep] = Field(default_factory=list)


MODEL_BY_TYPE: dict[MemoryType, type[MemoryObject]] = {
    MemoryType.CONCEPT: Concept,
    MemoryType.ENTITY: Entity,
    MemoryType.CANONICAL_ENTITY: CanonicalEntity,
    MemoryType.CANONICAL_CONCEPT: CanonicalConcept,
    MemoryType.CLUSTER: Cluster,
    MemoryType.COMMUNITY: Community,
    MemoryType.TAXONOMY: Taxonomy,
    MemoryType.CLAIM: Claim,
    MemoryType.RELATIONSHIP: Relationship,
    MemoryType.INSIGHT: Insight,
    MemoryType.QUESTION: Question,
    MemoryType.CONTRADICTION: Contradiction,
    MemoryType.SYNTHESIS: Synthesis,
    MemoryType.ABSTRACTION: Abstraction,
    MemoryType.NARRATIVE: Narrative,
    MemoryType.TIMELINE: Timeline,
    MemoryType.EVOLUTION: Evolution,
    MemoryType.AGENDA: Agenda,
    MemoryType.PLAN: Plan,
    MemoryType.DISCOVERED_RELATIONSHIP: DiscoveredRelationship,
}


def model_for(type_: str | MemoryType) -> type[MemoryObject]:
    return MODEL_BY_TYPE[memory_type(type_)]


class Edge(BaseModel):
    """A typed edge of the knowledge graph; `object_id` is set when a Relationship object backs it."""

    model_config = ConfigDict(extra="forbid")

    id: str
    head: str
    tail: str
    edge_type: EdgeType
    weight: float = 1.0
    object_id: str | None = None

    def __init__(self, **data: Any) -> None:
        if "edge_type" in data:  # an unknown type is a ModelError, not a pydantic ValidationError
            data["edge_type"] = edge_type(data["edge_type"])
        super().__init__(**data)

    @field_validator("edge_type", mode="before")
    @classmethod
    def _known_edge(cls, value: Any) -> EdgeType:
        return edge_type(value)

    @classmethod
    def between(cls, head: str, tail: str, type_: str | EdgeType, weight: float = 1.0) -> Edge:
        kind = edge_type(type_)
        return cls(id=stable_id("edg", head, kind.value, tail), head=head, tail=tail, edge_type=kind, weight=weight)


class SourceDocument(BaseModel):
    """A layer-0 document version: an immutable, content-hashed copy of one file from the corpus."""

    model_config = ConfigDict(extra="forbid")

    id: str
    path: str
    partition_key: str
    sha256: str
    version: int
    title: str
    bytes: int
    ingested_at: datetime = Field(default_factory=utcnow)
    status: Status = Status.ACTIVE
    supersedes: str | None = None
    tags: list[str] = Field(default_factory=list)
    provenance: str = "corpus"
    run_id: str | None = None
    body: str = ""

    def file_path(self) -> str:
        return f"layer-0/source/{self.id}.md"


# ---- markdown with YAML front matter -------------------------------------------------------

_FENCE = "---\n"
#: libyaml's C implementation when present: ten times faster, same safe subset of YAML.
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: Tags of the plain JSON values front matter holds (what PyYAML's SafeRepresenter gives them).
_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_SEQ, _MAP = "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
_REPRESENTER = yaml.representer.SafeRepresenter()


def _yaml_node(value: Any) -> yaml.Node:
    """The node SafeRepresenter makes for a JSON value (block style, no aliases), built directly: its
    generic dispatch was nearly all of the cost of writing a layer-1 object's file during ingest."""
    kind = type(value)
    if kind is str:
        return yaml.ScalarNode(_STR, value)
    if kind is dict:
        return yaml.MappingNode(_MAP, [(_yaml_node(k), _yaml_node(v)) for k, v in value.items()], flow_style=False)
    if kind is list:
        return yaml.SequenceNode(_SEQ, [_yaml_node(v) for v in value], flow_style=False)
    if kind is bool:
        return yaml.ScalarNode(_BOOL, "true" if value else "false")
    if kind is int:
        return yaml.ScalarNode(_INT, str(value))
    if value is None:
        return yaml.ScalarNode(_NULL, "null")
    return _REPRESENTER.represent_data(value)  # floats and anything rarer


def to_markdown(obj: BaseModel) -> str:
    """Serialise to `---\\n<yaml>---\\n<body>`; every field but `body` goes to the front matter."""
    front = obj.model_dump(mode="json", exclude={"body"})
    yaml_text = yaml.serialize(_yaml_node(front), Dumper=_Dumper, allow_unicode=True, width=10_000)
    return f"{_FENCE}{yaml_text}{_FENCE}{getattr(obj, 'body', '')}"


def _front_matter_end(text: str) -> int:
    """Where the closing fence's line starts (-1: no front matter); ModelError if it never closes."""
    if not text.startswith(_FENCE):
        return -1
    end = text.find(f"\n{_FENCE}", len(_FENCE) - 1)
    if end == -1:
        raise ModelError("front matter starts with '---' but has no closing '---' line")
    return end


def markdown_body(text: str) -> str:
    """The body of a bank markdown file without parsing its front matter: hashing every layer-0 copy
    on each ingest run costs a file read, not a YAML parse, per document."""
    end = _front_matter_end(text)
    return text if end == -1 else text[end + 1 + len(_FENCE) :]


def split_front_matter(text: str) -> tuple[dict[str, Any], str]:
    """Split leading YAML front matter from the body; raise ModelError if it is malformed."""
    end = _front_matter_end(text)
    if end == -1:
        return {}, text
    try:
        data = yaml.load(text[len(_FENCE) : end + 1], Loader=_Loader) or {}
    except yaml.YAMLError as exc:  # one line, with the place in the file (PyYAML's message spans five)
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2}, column {mark.column + 1})" if mark else ""
        raise ModelError(f"front matter is not valid YAML: {getattr(exc, 'problem', None) or exc}{where}") from None
    if not isinstance(data, dict):
        raise ModelError("front matter must be a YAML mapping")
    return data, text[end + 1 + len(_FENCE) :]


def from_markdown(text: str) -> MemoryObject | SourceDocument:
    """Parse a bank markdown file back into its model (a memory object or a layer-0 source)."""
    front, body = split_front_matter(text)
    if not front:
        raise ModelError("memory file has no front matter")
    try:
        if "type" not in front and "sha256" in front:
            return SourceDocument.model_validate({**front, "body": body})
        return model_for(front.get("type", "")).model_validate({**front, "body": body})
    except ValidationError as exc:
        raise ModelError(f"front matter does not match the model: {exc}") from None
