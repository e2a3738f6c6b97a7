"""Graph communities of canonical entities and concepts (Louvain, via networkx), as layer-2 documents.

The community graph links canonical objects that are referenced by the same claims; it is small
compared with the whole graph (one node per distinct thing, not per mention), so recomputing it
is a bounded global pass (run when due, see `cycle.GLOBAL_REFRESH_SHARE`). A community's id is
derived from its most central members, so it stays the same across cycles while its core
membership does.
"""

from __future__ import annotations

import networkx as nx

from smb_core.bank import Bank
from smb_core.evolve.cycle import Cycle
from smb_core.model import Community, Edge, EdgeType, stable_id

MIN_SIZE = 3
SEED = 7


def cooccurrence_graph(bank: Bank) -> nx.Graph:
    """Canonical entities/concepts, weighted by how many active claims reference both (through their
    members); each edge keeps one of those claims, to cite."""
    with bank.reading() as db:
        rows = db.sql(
            """
            WITH canon AS (
                SELECT o.id AS member, coalesce(json_extract_string(o.data, '$.merged_into'), o.id) AS node
                FROM objects o WHERE o.status IN ('active', 'merged')
                  AND o.type IN ('entity', 'concept', 'canonical_entity', 'canonical_concept')
            ),
            -- what active claims name: not superseded versions, nor a plan or insight citing several things
            refs AS (
                SELECT DISTINCT e.head AS claim, c.node FROM edges e JOIN canon c ON c.member = e.tail
                JOIN objects cl ON cl.id = e.head AND cl.type = 'claim' AND cl.status = 'active'
                WHERE e.edge_type = 'references'
            )
            SELECT a.node, b.node, count(*) AS w, min(a.claim) FROM refs a JOIN refs b ON a.claim = b.claim AND a.node < b.node
            GROUP BY a.node, b.node ORDER BY a.node, b.node
            """
        )
        titles = dict(db.sql("SELECT id, title FROM objects WHERE type IN ('entity', 'concept', "
                             "'canonical_entity', 'canonical_concept')"))
    graph = nx.Graph()
    for a, b, weight, claim in rows:
        graph.add_edge(a, b, weight=weight, claim=claim)
    nx.set_node_attributes(graph, {n: titles.get(n, n) for n in graph.nodes}, "title")
    return graph


def detect(bank: Bank, cycle: Cycle) -> tuple[list[Community], list[Edge]]:
    graph = cooccurrence_graph(bank)
    if graph.number_of_nodes() == 0:
        return [], []
    groups = nx.community.louvain_communities(graph, weight="weight", seed=SEED)
    communities, edges = [], []
    for group in groups:
        if len(group) < MIN_SIZE:
            continue
        sub = graph.subgraph(group)
        centrality = sorted(group, key=lambda n: (-sub.degree(n, weight="weight"), n))
        core = centrality[:3]
        cid = stable_id("com", *sorted(core))
        titles = [graph.nodes[n]["title"] for n in centrality[:8]]
        body = "\n".join(f"- {graph.nodes[n]['title']} (`{n}`)" for n in centrality[:200])
        communities.append(Community(
            id=cid, title=f"Community: {', '.join(titles[:3])}", members=centrality,
            description=f"{len(group)} entities and concepts often named together: {', '.join(titles)}",
            method="louvain", derived_from=centrality[:50], run_id=cycle.run_id, confidence=0.6,
            tags=[cycle.tag], body=f"## Members\n\n{body}\n",
        ))
        edges.extend(Edge.between(cid, member, EdgeType.CONTAINS) for member in centrality[:200])
    return communities, edges

