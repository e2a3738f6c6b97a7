"""Taxonomy (broader/narrower concepts) and embedding clusters, as layer-2 documents.

Taxonomy from two general signals: the head noun of a multi-word concept ("graph index" is a kind
of "index") when the broader concept exists in the bank, and "X is a/an Y" claims naming a known
concept Y. Narrower `extends` broader and broader `contains` narrower. Clusters are connected
groups of concepts whose vectors are close (nearest neighbours from Chroma, never all pairs).
"""

from __future__ import annotations

import re
from collections import defaultdict

import networkx as nx

from smb_core.bank import Bank
from smb_core.evolve.cycle import Cycle
from smb_core.extract.base import normalise_name
from smb_core.model import CanonicalConcept, Cluster, Edge, EdgeType, Taxonomy, stable_id

CLUSTER_SIMILARITY = 0.72
CLUSTER_NEIGHBOURS = 6
_IS_A = re.compile(r"^(?P<x>.+?)\s+(?:is|was|are|were)\s+(?:a|an|one of the)\s+(?P<y>.+?)[.]?$", re.IGNORECASE)


def _concept_nodes(db, statuses: tuple[str, ...] = ("active",)) -> dict[str, tuple[str, str]]:
    """Concepts that stand for themselves (canonical ones, and unmerged layer-1 ones): id -> (name, title)."""
    rows = db.sql("SELECT id, title FROM objects WHERE status IN (SELECT unnest(?::VARCHAR[])) "
                  "AND type IN ('concept', 'canonical_concept')", [list(statuses)])
    return {i: (normalise_name(t), t) for i, t in rows}


def build_taxonomy(bank: Bank, cycle: Cycle) -> tuple[list[Taxonomy], list[Edge]]:
    with bank.reading() as db:
        nodes = _concept_nodes(db)
        # a split concept stays the broader term of its senses' narrower kinds ("drama film" is a "film")
        broader_nodes = {**nodes, **_concept_nodes(db, ("split",))}
        claims = db.sql("SELECT id, text FROM objects WHERE type = 'claim' AND status = 'active' "
                        "AND text ILIKE '% is a%'")
    by_name: dict[str, list[str]] = defaultdict(list)
    for node_id, (name, _) in broader_nodes.items():
        by_name[name].append(node_id)
    narrower: dict[str, set[str]] = defaultdict(set)
    evidence: dict[tuple[str, str], str] = {}
    for node_id, (name, _) in nodes.items():
        words = name.split()
        for cut in range(1, len(words)):
            head = " ".join(words[cut:])
            for broader in by_name.get(head, []):
                narrower[broader].add(node_id)
                evidence[(broader, node_id)] = "head noun"
            if head in by_name:
                break
    for claim_id, text in claims:
        match = _IS_A.match(text.strip())
        if not match:
            continue
        x, y = normalise_name(match["x"]), normalise_name(match["y"])
        for size in range(len(y.split()), 0, -1):
            head = " ".join(y.split()[-size:])
            if head in by_name and x in by_name:
                for broader in by_name[head]:
                    for child in by_name[x]:
                        if child != broader and child in nodes:
                            narrower[broader].add(child)
                            evidence[(broader, child)] = claim_id
                break
    taxonomies, edges = [], []
    for broader, children in sorted(narrower.items()):
        children = sorted(children - {broader})
        if not children:
            continue
        title = broader_nodes[broader][1]
        sources = sorted({evidence[(broader, c)] for c in children} - {"head noun"})
        taxonomies.append(Taxonomy(
            id=stable_id("tax", broader), title=f"Kinds of {title}", broader=broader, members=children,
            method="head-noun+is-a", derived_from=[broader, *children, *sources][:60], run_id=cycle.run_id,
            description=f"{len(children)} narrower concepts of {title}: "
                        + ", ".join(nodes[c][1] for c in children[:10]),
            body="## Narrower concepts\n\n" + "\n".join(f"- {nodes[c][1]} (`{c}`)" for c in children) + "\n",
            confidence=0.6, tags=[cycle.tag],
        ))
        for child in children:
            edges.append(Edge.between(broader, child, EdgeType.CONTAINS))
            edges.append(Edge.between(child, broader, EdgeType.EXTENDS))
    return taxonomies, edges


def build_clusters(bank: Bank, cycle: Cycle) -> tuple[list[Cluster], list[Edge]]:
    """Clusters of canonical concepts (those named in several documents): a bounded global pass."""
    with bank.reading() as db:
        nodes = {i: v for i, v in _concept_nodes(db).items() if i.startswith(CanonicalConcept.id_prefix)}
    ids = sorted(nodes)
    vectors = bank.vectors_of(ids)
    ids = [i for i in ids if i in vectors]
    graph = nx.Graph()
    graph.add_nodes_from(ids)
    prefix = f"{CanonicalConcept.id_prefix}-"  # active ones: `nodes`
    for node, found in zip(ids, bank.nearest([vectors[i] for i in ids], CLUSTER_NEIGHBOURS, prefix=prefix)):
        for other, similarity in found:
            if other != node and other in nodes and similarity >= CLUSTER_SIMILARITY:
                graph.add_edge(node, other)
    clusters, edges = [], []
    for component in nx.connected_components(graph):
        if len(component) < 3:
            continue
        members = sorted(component, key=lambda n: (-graph.degree(n), n))
        cid = stable_id("clu", *sorted(members[:3]))
        names = [nodes[m][1] for m in members]
        clusters.append(Cluster(
            id=cid, title=f"Cluster: {', '.join(names[:3])}", members=members, method="ann-threshold",
            description=f"{len(members)} concepts with close meanings: {', '.join(names[:10])}",
            derived_from=members[:60], run_id=cycle.run_id, confidence=0.5, tags=[cycle.tag],
            body="## Members\n\n" + "\n".join(f"- {nodes[m][1]} (`{m}`)" for m in members) + "\n",
        ))
        edges.extend(Edge.between(cid, m, EdgeType.CONTAINS) for m in members)
    return clusters, edges
