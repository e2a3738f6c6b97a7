"""Graph communities of canonical entities and concepts (Louvain, via networkx), as layer-2 documents.

The community graph links entities and concepts (merged members counted as their canonical object)
that are referenced by the same claims. Recomputing it is a bounded global pass (run when due, see
`cycle.GLOBAL_REFRESH_SHARE`): it keeps at most `MAX_LINKS` links, the strongest. A community's id is
derived from its most central members, so it stays the same across cycles while its core
membership does.
"""

from __future__ import annotations

import networkx as nx

from smb_core.bank import Bank
from smb_core.evolve.cycle import Cycle
from smb_core.model import Community, Edge, EdgeType, stable_id
from smb_core.stores.metadata import id_filter

MIN_SIZE = 3
#: Members a community links (`contains`) and lists in its body, most central first; the rest are kept in
#: `members` only. What is told about a community (its timeline) is about these.
LINKED_MEMBERS = 200
SEED = 7
#: Links the graph keeps, the strongest (most claims) first. Every pair of things one claim names is a
#: link, so their number grows with the bank: 624k links between 328k things at 5,600 documents (108k
#: of them named together by more than one claim), about ten times that at 50,000. In networkx a link
#: takes about 470 bytes, and communities, bridges, abstractions and discoveries each load the graph
#: (computed once per cycle): at this cap about 140 MB, and Louvain runs in about 30 s. A large bank
#: keeps the links that several claims make and drops one-claim pairs first, which say only that one
#: sentence named both.
MAX_LINKS = 300_000


def cooccurrence_graph(bank: Bank, max_links: int = MAX_LINKS, cycle: str | None = None) -> nx.Graph:
    """Entities and concepts (a merged one as its canonical object), linked with the number of active
    claims that reference both; each edge keeps one of those claims, to cite. At most `max_links`
    edges: the heaviest, then by ids (the same every time). With `cycle` (its key), the links are
    computed once per cycle and kept in the bank (a table of at most `max_links` rows): communities,
    bridges, abstractions and discoveries then read one graph, where each layer built it anew (40-50 s
    and 2.2-2.5 GB peak RSS at 2.6 million objects)."""
    rows = _stored_links(bank, cycle, max_links) if cycle else None
    if rows is None:
        rows = _links(bank, max_links)
        if cycle:
            with bank.writing() as db:  # only the latest cycle's: a re-run of it reads the same graph
                db.con.execute("DELETE FROM cooccurrence")
                db.insert_rows("cooccurrence", ["cycle", "max_links", "a", "b", "w", "claim"],
                               [(cycle, max_links, *row) for row in rows])
                db.con.execute("INSERT OR REPLACE INTO meta VALUES ('cooccurrence', ?)", [f"{cycle} {max_links}"])
    with bank.reading() as db:
        where, params = id_filter("id", sorted({n for a, b, _, _ in rows for n in (a, b)}))
        titles = dict(db.sql(f"SELECT id, title FROM objects WHERE {where}", params))
    rows.sort(key=lambda r: (r[0], r[1]))  # insertion order decides Louvain's visiting order: keep it by id
    graph = nx.Graph()
    for a, b, weight, claim in rows:
        graph.add_edge(a, b, weight=weight, claim=claim)
    nx.set_node_attributes(graph, {n: titles.get(n, n) for n in graph.nodes}, "title")
    return graph


def _stored_links(bank: Bank, cycle: str, max_links: int) -> list[tuple] | None:
    """The links stored for this cycle (and cap), or None if there are none (an empty graph is stored)."""
    with bank.reading() as db:
        if db.sql("SELECT value FROM meta WHERE key = 'cooccurrence'") != [(f"{cycle} {max_links}",)]:
            return None
        return db.sql("SELECT a, b, w, claim FROM cooccurrence WHERE cycle = ?", [cycle])


def _links(bank: Bank, max_links: int) -> list[tuple]:
    """(a, b, claims naming both, the first of them), the heaviest `max_links`."""
    with bank.reading() as db:
        return db.sql(
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
            GROUP BY a.node, b.node ORDER BY w DESC, a.node, b.node LIMIT ?
            """, [max_links]
        )


def detect(bank: Bank, cycle: Cycle) -> tuple[list[Community], list[Edge]]:
    graph = cooccurrence_graph(bank, cycle=cycle.key)
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
        body = "\n".join(f"- {graph.nodes[n]['title']} (`{n}`)" for n in centrality[:LINKED_MEMBERS])
        communities.append(Community(
            id=cid, title=f"Community: {', '.join(titles[:3])}", members=centrality,
            description=f"{len(group)} entities and concepts often named together: {', '.join(titles)}",
            method="louvain", derived_from=centrality[:50], run_id=cycle.run_id, confidence=0.6,
            tags=[cycle.tag], body=f"## Members\n\n{body}\n",
        ))
        edges.extend(Edge.between(cid, member, EdgeType.CONTAINS) for member in centrality[:LINKED_MEMBERS])
    return communities, edges

