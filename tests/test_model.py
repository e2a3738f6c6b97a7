"""The memory model: markdown front-matter round trips and rejection of unknown node/edge types."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from smb_core.model import (
    MODEL_BY_TYPE, Abstraction, Agenda, AgendaItem, CitedStatement, Claim, DiscoveredRelationship, Evolution,
    PlanStep, Concept, Contradiction, Edge, EdgeType, Entity, EntityKind, Insight,
    MemoryType, ModelError, Narrative, NodeType, Plan, Question, Relationship, SourceDocument, SourceSpan, Status,
    Synthesis, Timeline, TimelineEvent, edge_type, from_markdown, model_for, node_type, split_front_matter,
    stable_id, to_markdown,
)
from smb_core.stores.graph import GraphStore

T0 = datetime(2024, 3, 1, 9, 30, 0, tzinfo=timezone.utc)
T1 = datetime(2024, 3, 2, 18, 5, 7, 123456, tzinfo=timezone(timedelta(hours=2)))
SPAN = SourceSpan(source_id="src-0123456789abcdef", start=10, end=42, line_start=3, line_end=4)

#: Values YAML would read back as something else if they were not quoted.
TRICKY_TAGS = ["yes", "no", "null", "on", "2021", "1e3", "0x1f", "- dash", "# hash", "a: b", "ünïcödé 名前", ""]

COMMON = dict(
    description="Line one.\n---\nLine three, after a fence-like line.\n  indented: still text",
    confidence=0.7321,
    status=Status.DEPRECATED,
    created=T0,
    modified=T1,
    source_ids=["src-0123456789abcdef", "src-fedcba9876543210"],
    tags=TRICKY_TAGS,
    derived_from=["ent-1", "con-2"],
    source_spans=[SPAN],
    run_id="run-42",
    body="# Heading\n\n---\nfake: front matter\n---\n\nBody with trailing spaces   \n\n\n",
)

OBJECTS = [
    Concept(id="con-1", title="vector index", aliases=["vector indexes", "ANN index"], mentions=4,
            merged_into="con-9", **COMMON),
    Entity(id="ent-1", title="Mara Okafor", entity_kind=EntityKind.PERSON, aliases=["Okafor", "Dr. Okafor"],
           mentions=3, **COMMON),
    Claim(id="clm-1", title="Aurora does not support online updates",
          statement="The Aurora index does not support online updates: it needs a rebuild.",
          subject="The Aurora index", predicate="not support", object="online updates", negated=True,
          disputed_by=["ctr-1"], **COMMON),
    Relationship(id="rel-1", title="Okafor founded Lumen Labs", head="ent-1", tail="ent-2",
                 edge_type=EdgeType.DERIVES_FROM, predicate="found in", evidence="Okafor founded Lumen Labs.",
                 **COMMON),
    Insight(id="ins-1", title="Insight", kind="pattern", evidence=["clm-1", "clm-2"], **COMMON),
    Question(id="qst-1", title="Question", question="Why did Aurora need NVMe?", about=["ent-1"], answered=True,
             **COMMON),
    Contradiction(id="ctr-1", title="Founding year", claim_ids=["clm-1", "clm-2"], attribute="founded",
                  resolution="explained", explanation="Two sources disagree.", **COMMON),
    Synthesis(id="syn-1", title="Synthesis", theme="indexing",
              statements=[CitedStatement(text="Aurora needs a rebuild.", object_id="clm-1", span=SPAN)], **COMMON),
    Abstraction(id="abs-1", title="Abstraction", level=2, members=["con-1", "con-2"], **COMMON),
    DiscoveredRelationship(id="drl-1", title="Okafor related to Aurora", head="ent-1", tail="ent-3",
                           edge_type=EdgeType.RELATED_TO, method="bridge", evidence_path=["ent-1", "ent-2", "ent-3"],
                           **COMMON),
    Narrative(id="nar-1", title="Narrative", subject="ent-1",
              statements=[CitedStatement(text="Founded in 2017.", object_id="clm-1", date="2017")], **COMMON),
    Timeline(id="tml-1", title="Timeline", subject="ent-1",
             events=[TimelineEvent(date="2017", text="Lumen Labs founded", object_id="clm-1"),
                     TimelineEvent(date="1914", end="1918", approximate=True, text="War", span=SPAN)], **COMMON),
    Evolution(id="evo-1", title="Cycle 1", cycle="cycle-00001", changes={"merged": 3}, **COMMON),
    Agenda(id="agd-1", title="Agenda", items=[AgendaItem(object_id="ctr-1", score=0.9, reason="12 objects depend on it",
                                                          settle_with="the founding record")], **COMMON),
    Plan(id="pln-1", title="Plan", steps=[PlanStep(action="read: the record", cites=["ctr-1"])], **COMMON),
]

SOURCE = SourceDocument(
    id="src-0123456789abcdef", path="people/mara okafor.md", partition_key="people-mara-okafor-1a2b3c4d",
    sha256="ab" * 32, version=2, title="Dr. Mara Okafor", bytes=321, ingested_at=T0, status=Status.SUPERSEDED,
    supersedes="src-fedcba9876543210", tags=["people", "no"], provenance="corpus", run_id="run-1",
    body="---\ntitle: Dr. Mara Okafor\ntags: [people]\n---\n\n# Dr. Mara Okafor\n\nShe founded Lumen Labs.\n",
)


def _minimal(model: type) -> object:
    """An instance of any memory model (present or future) with every field it requires filled in."""
    values = {"id": f"{model.id_prefix}-min", "title": f"minimal {model.__name__}", **COMMON}
    for name, field in model.model_fields.items():
        if field.is_required() and name not in values:
            values[name] = ["clm-a", "clm-b"] if "list" in str(field.annotation) else f"{name} value"
    return model(**values)


@pytest.mark.parametrize("obj", [*OBJECTS, SOURCE], ids=lambda o: type(o).__name__)
def test_object_to_markdown_and_back_is_exact(obj):
    md = to_markdown(obj)
    back = from_markdown(md)
    assert type(back) is type(obj)
    assert back == obj
    assert back.body == obj.body
    assert to_markdown(back) == md


@pytest.mark.parametrize("model", list(MODEL_BY_TYPE.values()), ids=lambda m: m.__name__)
def test_every_registered_memory_type_round_trips(model):
    obj = _minimal(model)
    md = to_markdown(obj)
    assert from_markdown(md) == obj
    assert to_markdown(from_markdown(md)) == md
    assert obj.path() == f"layer-{model.layer}/{model.folder}/{obj.id}.md"


@pytest.mark.parametrize("obj", [*OBJECTS, SOURCE], ids=lambda o: type(o).__name__)
def test_markdown_shape_is_front_matter_then_verbatim_body(obj):
    md = to_markdown(obj)
    assert md.startswith("---\nid: ")
    front, body = split_front_matter(md)
    assert body == obj.body
    assert "body" not in front
    assert front["id"] == obj.id
    if isinstance(obj, SourceDocument):
        assert "type" not in front and front["sha256"] == "ab" * 32
    else:
        assert front["type"] == obj.type.value
        assert front["tags"] == TRICKY_TAGS  # YAML-ambiguous strings survive as strings


HAND_WRITTEN_SOURCE = """\
---
id: src-1
path: notes/a b.md
partition_key: notes-a-b-12345678
sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
version: 1
title: 'yes'
bytes: 12
ingested_at: '2024-03-01T09:30:00Z'
status: active
supersedes: null
tags:
- x
provenance: corpus
run_id: null
---
# Notes

Body.
"""


def test_hand_written_markdown_to_object_and_back_is_exact():
    doc = from_markdown(HAND_WRITTEN_SOURCE)
    assert isinstance(doc, SourceDocument)
    assert doc.title == "yes" and doc.version == 1 and doc.ingested_at == T0 and doc.tags == ["x"]
    assert doc.body == "# Notes\n\nBody.\n"
    assert to_markdown(doc) == HAND_WRITTEN_SOURCE


def test_markdown_of_a_real_claim_round_trips_from_text():
    md = to_markdown(OBJECTS[2])
    assert to_markdown(from_markdown(md)) == md
    assert "negated: true" in md and "edge_type" not in md


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("no front matter at all\n", "no front matter"),
        ("---\nid: x\ntitle: t\n", "no closing"),
        ("---\nid: [unclosed\n---\nbody", "not valid YAML"),
        ("---\n- a list\n---\n", "must be a YAML mapping"),
        ("---\nid: x\ntype: gizmo\ntitle: t\n---\n", "unknown memory type 'gizmo'"),
        ("---\nid: x\ntype: concept\ntitle: t\nconfidence: 7\n---\n", "does not match the model"),
        ("---\nid: x\ntype: concept\ntitle: t\nsurprise: 1\n---\n", "does not match the model"),
        ("---\nid: x\ntype: relationship\ntitle: t\nhead: a\ntail: b\nedge_type: likes\n---\n", "unknown edge type"),
    ],
)
def test_from_markdown_rejects_bad_files_with_model_error(text, message):
    with pytest.raises(ModelError, match=message):
        from_markdown(text)


def test_model_for_rejects_types_without_a_model():
    assert model_for("claim") is Claim
    for type_ in (t for t in MemoryType if t not in MODEL_BY_TYPE):
        with pytest.raises(ModelError, match=f"unknown memory type '{type_.value}'"):
            model_for(type_.value)
    with pytest.raises(ModelError, match="unknown memory type 'gizmo'"):
        model_for("gizmo")


# ---- node and edge types --------------------------------------------------------------------


def test_node_and_edge_types_are_the_allowed_sets():
    assert {t.value for t in NodeType} == {"concept", "entity", "claim", "insight", "narrative", "abstraction"}
    assert {t.value for t in EdgeType} == {
        "references", "supports", "contradicts", "extends", "derives_from", "inspired_by", "evolves_into",
        "related_to", "contains", "explains",
    }
    assert node_type("claim") is NodeType.CLAIM
    assert edge_type("derives_from") is EdgeType.DERIVES_FROM


def test_unknown_node_type_is_a_model_error_listing_the_allowed_ones():
    with pytest.raises(ModelError) as info:
        node_type("document")
    assert "unknown node type 'document'" in str(info.value)
    assert "allowed: concept, entity, claim, insight, narrative, abstraction" in str(info.value)


def test_unknown_edge_type_is_a_model_error_listing_the_allowed_ones():
    with pytest.raises(ModelError) as info:
        edge_type("likes")
    assert "unknown edge type 'likes'" in str(info.value)
    assert "related_to" in str(info.value) and "explains" in str(info.value)


def test_relationship_with_unknown_edge_type_is_a_model_error():
    with pytest.raises(ModelError, match="unknown edge type 'likes'"):
        Relationship(id="rel-x", title="x likes y", head="a", tail="b", edge_type="likes")
    assert Relationship(id="rel-x", title="t", head="a", tail="b", edge_type="supports").edge_type is EdgeType.SUPPORTS


def test_edge_with_unknown_type_is_a_model_error():
    with pytest.raises(ModelError, match="unknown edge type 'likes'"):
        Edge.between("a", "b", "likes")
    with pytest.raises(ModelError, match="unknown edge type 'likes'"):
        Edge(id="e", head="a", tail="b", edge_type="likes")
    edge = Edge.between("a", "b", "supports", weight=0.5)
    assert (edge.edge_type, edge.weight, edge.id) == (EdgeType.SUPPORTS, 0.5, stable_id("edg", "a", "supports", "b"))


def test_graph_store_rejects_unknown_types_and_writes_nothing(tmp_path: Path):
    graph = GraphStore(tmp_path / "graph")
    with pytest.raises(ModelError, match="unknown node type 'document'"):
        graph.append(nodes=[("n1", {"type": "document"})])
    with pytest.raises(ModelError, match="unknown edge type 'likes'"):
        graph.append(nodes=[("n1", {"type": "concept"})], edges=[("n1", "n1", "e1", {"edge_type": "likes"})])
    with pytest.raises(ModelError, match="unknown node type"):
        graph.append(nodes=[("n1", {})])
    assert not graph.log_path.exists()
    assert GraphStore(tmp_path / "graph").stats()["nodes"] == 0


def test_stable_id_is_deterministic_and_separates_parts():
    assert stable_id("con", "a", "b") == stable_id("con", "a", "b")
    assert stable_id("con", "a", "b").startswith("con-") and len(stable_id("con", "a")) == 4 + 16
    assert stable_id("con", "ab", "c") != stable_id("con", "a", "bc")


def test_blank_title_and_out_of_range_confidence_are_rejected():
    with pytest.raises(ValueError, match="title must not be empty"):
        Concept(id="c", title="   ")
    with pytest.raises(ValueError, match="less than or equal to 1"):
        Concept(id="c", title="t", confidence=1.5)
