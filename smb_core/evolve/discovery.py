"""Discovered relationships: links between entities or concepts that no single document states.

Two general signals, both read off the graph rather than any one text:

- shared neighbours: A and C are each named together with B (in the co-occurrence graph of
  `communities.cooccurrence_graph`) but never in the same document, so B connects them; scored with
  Adamic-Adar, which trusts rare bridges more than hubs that are named with everything;
- transitive: A extends B and B extends C (taxonomy or extracted relations) gives A extends C.

Candidates are bounded per node (neighbours of neighbours, hubs skipped, at most a few dozen each),
so the pass is linear in the number of nodes, not quadratic; at most `MAX_PER_CYCLE` new ones are
written per cycle, those touching this cycle's documents first. Earlier ones stay while they hold
(both ends active, still no document naming both) and are superseded once they do not.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass

import networkx as nx

from smb_core.bank import Bank
from smb_core.evolve import communities
from smb_core.evolve.cycle import Cycle
from smb_core.model import DiscoveredRelationship, EdgeType, stable_id
from smb_core.stores.metadata import id_filter

MAX_PER_CYCLE = 50
#: A bridge named with more nodes than this explains nothing (a hub such as the company itself).
MAX_BRIDGE_DEGREE = 40
#: Neighbours followed per node and per bridge (strongest first): bounds the work per node.
FANOUT = 25
#: Candidates kept per endpoint, so one busy node cannot take the whole budget.
PER_NODE = 3
#: Adamic-Adar score to keep: two shared neighbours, or one bridge named with at most about six things
#: (1 / ln 6 = 0.56); a single bridge of a busy node is a coincidence, not a relationship.
MIN_SCORE = 0.55
_NUMERIC = re.compile(r"^[\d\s.,:/-]+$")


@dataclass
class Node:
    id: str
    title: str
    type: str
    kind: str
    sources: frozenset[str]

    @property
    def endpoint(self) -> bool:
        """Named things worth relating: entities (not dates or numbers) and multi-word concepts that
        several documents name (canonical). A single common noun ("company", "team") or a phrase of one
        document ("long time", "single goal") is named with everything and relates nothing in particular."""
        if self.kind == "date" or _NUMERIC.match(self.title):
            return False
        return self.type in ("entity", "canonical_entity") or (
            self.type == "canonical_concept" and len(self.title.split()) > 1)


def _nodes(bank: Bank, ids: list[str]) -> dict[str, Node]:
    where, params = id_filter("id", ids)
    with bank.reading() as db:
        rows = db.sql("SELECT id, title, type, coalesce(json_extract_string(data, '$.entity_kind'), ''), source_ids "
                      f"FROM objects WHERE status = 'active' AND {where}", params)
    return {r[0]: Node(r[0], r[1], r[2], r[3], frozenset(r[4] or [])) for r in rows}


def discover(bank: Bank, cycle: Cycle, graph: nx.Graph | None = None) -> list[DiscoveredRelationship]:
    """New discovered relationships of this cycle, best first, at most MAX_PER_CYCLE. Each becomes a graph
    edge head -> tail when written; its evidence path is kept in `evidence_path` and `derived_from`."""
    graph = communities.cooccurrence_graph(bank) if graph is None else graph
    extends = _extends_graph(bank)
    nodes = _nodes(bank, sorted(set(graph.nodes) | set(extends.nodes)))
    touched = set(cycle.source_ids)
    found = {**_transitive(extends, nodes), **_shared_neighbours(graph, nodes)}
    ranked = sorted(found.values(), key=lambda c: (not (touched & (nodes[c[0][0]].sources | nodes[c[0][-1]].sources)),
                                                   -c[2], c[0]))
    chosen = ranked[:MAX_PER_CYCLE]
    hop_claims = _hop_claims(bank, [(p[i], p[i + 1]) for p, _, _, _ in chosen for i in range(len(p) - 1)])
    return [_relationship(cycle, nodes, graph, path, method, score, edge_type, hop_claims)
            for path, method, score, edge_type in chosen]


def still_valid(bank: Bank) -> list[DiscoveredRelationship]:
    """Active discovered relationships whose ends are still active and still named in no common document."""
    with bank.reading() as db:
        rows = db.sql(
            """
            SELECT r.id FROM objects r
            JOIN objects h ON h.id = json_extract_string(r.data, '$.head') AND h.status = 'active'
            JOIN objects t ON t.id = json_extract_string(r.data, '$.tail') AND t.status = 'active'
            WHERE r.type = 'discovered_relationship' AND r.status = 'active'
              AND NOT list_has_any(h.source_ids, t.source_ids)
            """
        )
        return list(db.get_objects([r[0] for r in rows]).values())


def _extends_graph(bank: Bank) -> nx.DiGraph:
    """Stated `extends` edges between entities/concepts, with merged members mapped to their canonical object."""
    with bank.reading() as db:
        rows = db.sql(
            """
            WITH canon AS (
                SELECT id, coalesce(json_extract_string(data, '$.merged_into'), id) AS node FROM objects
                WHERE status IN ('active', 'merged')
                  AND type IN ('entity', 'concept', 'canonical_entity', 'canonical_concept')
            )
            SELECT DISTINCT h.node, t.node FROM edges e JOIN canon h ON h.id = e.head JOIN canon t ON t.id = e.tail
            WHERE e.edge_type = 'extends' AND h.node <> t.node
              AND coalesce(e.object_id, '') NOT LIKE 'drl-%'  -- stated, not discovered: a re-run sees the same input
            """
        )
    return nx.DiGraph(rows)


def _transitive(extends: nx.DiGraph, nodes: dict[str, Node]) -> dict[tuple[str, str], tuple]:
    """A extends B, B extends C, and no document relates A and C: A extends C."""
    out = {}
    for a in sorted(extends.nodes):
        for b in sorted(extends.successors(a))[:FANOUT]:
            for c in sorted(extends.successors(b))[:FANOUT]:
                if c == a or extends.has_edge(a, c) or a not in nodes or c not in nodes:
                    continue
                if nodes[a].sources & nodes[c].sources:
                    continue
                out[(a, c)] = ([a, b, c], "transitive", 1.0, EdgeType.EXTENDS)
    return out


def _shared_neighbours(graph: nx.Graph, nodes: dict[str, Node]) -> dict[tuple[str, str], tuple]:
    """Pairs of unlinked endpoints with a common, non-hub neighbour, from different documents only."""
    def strongest(n: str) -> list[str]:
        return sorted(graph.neighbors(n), key=lambda m: (-graph[n][m]["weight"], m))[:FANOUT]

    bridges = {n for n in graph.nodes if n in nodes and nodes[n].endpoint and graph.degree(n) <= MAX_BRIDGE_DEGREE}
    per_node: dict[str, list[tuple]] = defaultdict(list)
    for a in sorted(graph.nodes):
        if a not in nodes or not nodes[a].endpoint:
            continue
        common: dict[str, list[str]] = defaultdict(list)
        for b in strongest(a):
            if b in bridges:
                for c in strongest(b):
                    if c != a and c in nodes and nodes[c].endpoint and not graph.has_edge(a, c):
                        common[c].append(b)
        for c, via in common.items():
            if a < c and not (nodes[a].sources & nodes[c].sources):
                score = sum(1 / math.log(max(graph.degree(b), 2)) for b in via)
                if score >= MIN_SCORE:
                    via = sorted(via, key=lambda b: (graph.degree(b), b))
                    method = "shared_neighbours" if len(via) > 1 else "bridge"
                    per_node[a].append(([a, via[0], c], method, score, EdgeType.RELATED_TO, via))
    out: dict[tuple[str, str], tuple] = {}
    count: dict[str, int] = defaultdict(int)
    for candidate in sorted((c for cs in per_node.values() for c in cs), key=lambda c: (-c[2], c[0])):
        a, c = candidate[0][0], candidate[0][-1]
        if count[a] < PER_NODE and count[c] < PER_NODE:
            count[a] += 1
            count[c] += 1
            out[(a, c)] = candidate[:4]
    return out


def _hop_claims(bank: Bank, hops: list[tuple[str, str]]) -> dict[tuple[str, str], list[tuple[str, str]]]:
    """For each hop (x, y) of an evidence path, the claims (id, statement) that reference both ends."""
    if not hops:
        return {}
    ends = sorted({n for hop in hops for n in hop})
    with bank.reading() as db:
        rows = db.sql(
            """
            WITH canon AS (
                SELECT id AS member, coalesce(json_extract_string(data, '$.merged_into'), id) AS node FROM objects
                WHERE status IN ('active', 'merged') AND (id IN (SELECT unnest($1))
                   OR json_extract_string(data, '$.merged_into') IN (SELECT unnest($1)))
            ),
            refs AS (SELECT DISTINCT e.head AS claim, c.node FROM edges e JOIN canon c ON c.member = e.tail
                     WHERE e.edge_type = 'references')
            SELECT a.node, b.node, o.id, o.text FROM refs a JOIN refs b ON a.claim = b.claim AND a.node <> b.node
            JOIN objects o ON o.id = a.claim AND o.status = 'active' AND o.type = 'claim'
            ORDER BY o.id
            """,
            [ends],
        )
    wanted = set(hops) | {(y, x) for x, y in hops}
    out: dict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
    for x, y, claim, text in rows:
        if (x, y) in wanted and len(out[(x, y)]) < 2:
            out[(x, y)].append((claim, text))
    return out


def _relationship(cycle: Cycle, nodes: dict[str, Node], graph: nx.Graph, path: list[str], method: str,
                  score: float, edge_type: EdgeType, hop_claims: dict) -> DiscoveredRelationship:
    a, c = nodes[path[0]], nodes[path[-1]]
    names = [nodes[n].title if n in nodes else n for n in path]
    via = ", ".join(names[1:-1])
    if edge_type == EdgeType.EXTENDS:
        title = f"{a.title} is a kind of {c.title} (via {via})"
        description = (f"{a.title} extends {via}, which extends {c.title}; no document relates {a.title} "
                       f"to {c.title} directly.")
        predicate = "is a kind of"
    else:
        title = f"{a.title} is related to {c.title} through {via}"
        description = (f"No document names {a.title} and {c.title} together, but both are named with {via} "
                       f"(in different documents), which connects them.")
        predicate = "related through " + via
    lines = ["## Evidence path", ""]
    claims: list[str] = []
    for x, y in zip(path, path[1:]):
        hop = hop_claims.get((x, y)) or hop_claims.get((y, x)) or []
        label = f"{nodes[x].title if x in nodes else x} → {nodes[y].title if y in nodes else y}"
        lines.append(f"- {label}")
        for claim, text in hop:
            lines.append(f"  - {text} [{claim}](../../layer-1/claims/{claim}.md)")
            claims.append(claim)
    common = sorted(set(graph[path[0]]) & set(graph[path[-1]])) if path[0] in graph and path[-1] in graph else []
    if len(common) > 1:
        lines += ["", "## All shared neighbours", ""]
        lines += [f"- {nodes[n].title if n in nodes else n} (`{n}`)" for n in common[:20]]
    lines += ["", f"Method: {method}; score {score:.2f}. Sources of {a.title}: {len(a.sources)} documents; "
                  f"of {c.title}: {len(c.sources)}; none in common."]
    sources = sorted(set().union(*(nodes[n].sources for n in path if n in nodes)))
    return DiscoveredRelationship(
        id=stable_id("drl", path[0], edge_type.value, path[-1]), title=title, description=description,
        head=path[0], tail=path[-1], edge_type=edge_type, predicate=predicate, evidence=description,
        method=method, evidence_path=path, derived_from=list(path), source_ids=sources,
        confidence=round(min(0.7, 0.3 + 0.15 * score), 2), run_id=cycle.run_id, tags=[cycle.tag],
        body="\n".join(lines) + "\n",
    )
