"""Layer 3 without an LLM: claims from different documents that cannot both be true.

`judge(a, b)` decides for two claim sentences, with general mechanisms over a spaCy parse:

1. *Same subject.* The sentences must share a name (a proper-noun run, a quoted title or a
   common-noun subject), and the arguments of the aligned predicates must be the same thing: "Halvard
   Berg's elder son" is not "Halvard Berg", "the Ohio plant" is not "the plant in Georgia", "Fennel DB 2.4"
   is not "Fennel DB 3.0".
2. *Same predicate.* Predicates align on the same lemma, a shared derivational stem
   (consecrate/consecration) or a small table of paraphrase classes (found/establish/create, ...).
3. *Different values of a single-valued slot.* Dates (a refinement such as 2019 vs March 2019 is
   compatible), numbers with units and approximation words (about/over/nearly give a tolerance or a
   bound), places (one containing the other is compatible; a country against a city is not decided),
   persons in a unique role (founder, first CEO, director of a film), opposite polarity of the same
   predicate and object, and a small table of mutually exclusive states (alive/died, cancelled/released).
4. *Same time.* Statements dated differently ("CEO from 2015 to 2019" / "CEO since 2020"), scoped by
   since/until, or about different versions, editions or parts are not contradictions.

Precision matters more than recall: whenever a rule cannot tell, it says nothing. A subject that is a
pronoun or an anaphoric description ("He", "the film") is unknown, so such a claim matches nothing.

`find_contradictions` generates candidates sub-quadratically (claims referencing an entity or concept of
the same normalised name, plus ANN over claim embeddings), keeps pairs whose claims share a referenced
name, skips documents about different same-named subjects ("X (footballer)" / "X (politician)"), resolves
a leading he/she/it/they to the document's subject when the extractor did, and turns each verdict into a
Contradiction object (deterministic id, never rewritten once stored), two `contradicts` edges and a Question.

The package, by responsibility: `lexicon` (word tables), `sentences` (one analysed sentence and the parse
cache), `arguments` (what a predicate's arguments are and where its values attach), `rules` (`judge` and
the rules), `finder` (`find_contradictions`: candidates in a bank and the objects written for a verdict).
"""

from __future__ import annotations

from smb_core.evolve.contradictions.finder import ContradictionResult, find_contradictions
from smb_core.evolve.contradictions.rules import Verdict, judge

__all__ = ["ContradictionResult", "Verdict", "find_contradictions", "judge"]
