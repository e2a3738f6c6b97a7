"""The optional LLM as a judge in evolution: are two mentions one thing? do two claims contradict?

Used only when `Settings.llm == "ollama"`; the rules decide everything otherwise. Pairs go to the LLM
`BATCH` at a time with a JSON schema, and one judge (one per cycle phase) sends at most `MAX_REQUESTS`
requests, so an LLM's cost per cycle is bounded whatever the corpus size. The first `LLMError` stops
the LLM for the rest of the phase (a server that is down would otherwise cost a timeout per batch):
the pairs it did not answer come back without an answer and with the reason, and the caller keeps the
rules' decision for them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel

from smb_core.llm import LLMError, LLMOutput, OllamaClient
from smb_core.model import Entity, MemoryObject
from smb_core.settings import Settings

log = logging.getLogger(__name__)

#: Pairs per request: small enough for a model to keep them apart, large enough to save round trips.
BATCH = 8
#: Requests per judge (per cycle phase): at most BATCH * MAX_REQUESTS = 200 pairs go to the LLM.
MAX_REQUESTS = 25
_CONTEXT_CHARS = 300


def enabled(settings: Settings) -> bool:
    return settings.llm == "ollama"


# ---- what the LLM is asked to return ---------------------------------------------------------


class SameThing(LLMOutput):
    same: bool
    reason: str = ""


class SameThings(LLMOutput):
    answers: list[SameThing]


class ContradictionAnswer(LLMOutput):
    contradiction: bool
    kind: Literal["date", "number", "place", "person_role", "polarity", "exclusive_predicate", "none"] = "none"
    attribute: str = ""
    explanation: str = ""

    def as_verdict(self) -> tuple[str, str, str] | None:
        """(kind, attribute, explanation) when the LLM reports a contradiction of a known kind, else None."""
        if not self.contradiction or self.kind == "none":
            return None
        attribute = " ".join(self.attribute.split()) or self.kind.replace("_", " ")
        return self.kind, attribute, " ".join(self.explanation.split()) or "judged by the LLM"


class ContradictionAnswers(LLMOutput):
    answers: list[ContradictionAnswer]


SAME_PROMPT = """You decide whether two mentions from different documents name the same real-world thing
(the same person, organization, place, work or idea), not merely similar or related things. Homonyms
are different things (Jordan the person and Jordan the country; a planet and a product named after it).
The pairs are numbered; answer with JSON only: one item per pair, in the same order, with same
(true/false) and a short reason."""

CONTRADICTION_PROMPT = """You decide whether two statements from different documents contradict each other:
they cannot both be true of the same subject at the same time. Statements about different subjects,
different times, different versions or parts, or where one only adds detail to the other (2019 / March
2019, Lisbon / Portugal) are compatible. The pairs are numbered; answer with JSON only: one item per
pair, in the same order, with contradiction (true/false); kind: date, number, place, person_role (who
held a unique role), polarity (one affirms what the other denies), exclusive_predicate (states that
exclude each other, such as alive/dead), or none when compatible; attribute: what they disagree on in
a few words (e.g. founding year); explanation: one sentence."""


# ---- the judge --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Judged:
    """The LLM's answer for one pair, or None with the reason the rules must decide instead."""

    answer: Any = None
    error: str = ""


class LLMJudge:
    """One cycle phase's LLM and its request budget. Each request opens its own client: at most
    MAX_REQUESTS per phase, so connection reuse is worth nothing and callers need nothing to close."""

    def __init__(self, settings: Settings, max_requests: int = MAX_REQUESTS, batch: int = BATCH) -> None:
        self.settings = settings
        self.max_requests = max_requests
        self.batch = batch
        self.requests = 0
        self.error = ""  # set by the first LLMError: no more requests this phase

    def same_things(self, pairs: list[tuple[MemoryObject, MemoryObject]]) -> list[Judged]:
        """Per pair of entities/concepts: `Judged(SameThing)` or the reason the rule decides."""
        items = [f"A: {_mention(a)}\nB: {_mention(b)}" for a, b in pairs]
        return self._judge(items, SAME_PROMPT, SameThings)

    def contradictions(self, pairs: list[tuple[tuple[str, str], tuple[str, str]]]) -> list[Judged]:
        """Per pair of ((statement, document title), (statement, document title)): `Judged(ContradictionAnswer)`."""
        items = [f'A (from "{ta}"): {a}\nB (from "{tb}"): {b}' for (a, ta), (b, tb) in pairs]
        return self._judge(items, CONTRADICTION_PROMPT, ContradictionAnswers)

    def _judge(self, items: list[str], system: str, schema: type[BaseModel]) -> list[Judged]:
        out: list[Judged] = []
        for start in range(0, len(items), self.batch):
            out += self._ask(items[start:start + self.batch], system, schema)
        return out

    def _ask(self, batch: list[str], system: str, schema: type[BaseModel]) -> list[Judged]:
        if self.error:
            return [Judged(error=self.error)] * len(batch)
        if self.requests >= self.max_requests:
            return [Judged(error=f"over the budget of {self.max_requests} LLM requests per cycle")] * len(batch)
        self.requests += 1
        numbered = "\n\n".join(f"Pair {i}:\n{item}" for i, item in enumerate(batch, 1))
        messages = [{"role": "system", "content": system}, {"role": "user", "content": numbered}]
        try:
            with OllamaClient(self.settings) as client:
                answers = client.chat_json(messages, schema).answers
        except LLMError as exc:
            self.error = f"LLM unavailable, rules used: {exc}"
            log.warning("%s", self.error)
            return [Judged(error=self.error)] * len(batch)
        if len(answers) != len(batch):  # cannot tell which answer is whose: this batch goes to the rules
            return [Judged(error=f"LLM answered {len(answers)} of {len(batch)} pairs")] * len(batch)
        return [Judged(answer=a) for a in answers]


def _mention(obj: MemoryObject) -> str:
    kind = obj.entity_kind.value if isinstance(obj, Entity) else obj.type.value
    context = " ".join(obj.description.split())
    if len(context) > _CONTEXT_CHARS:
        context = context[:_CONTEXT_CHARS] + "…"
    return f'"{obj.title}" ({kind})' + (f", in context: {context}" if context else "")
