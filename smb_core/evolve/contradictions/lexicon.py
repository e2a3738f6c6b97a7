"""Word tables the rules read: paraphrase classes of predicates, single-valued and repeatable events,
exclusive states, region levels, place features; plus `_fold` and `_stem`.

Kept apart from the code so the vocabulary can be read and extended in one place; nothing here needs spaCy.
"""

from __future__ import annotations

import unicodedata
from collections import defaultdict
from functools import lru_cache


def _table(spec: dict[str, str]) -> dict[str, frozenset[str]]:
    """{class: "lemma lemma ..."} -> {lemma: classes}."""
    out: dict[str, set[str]] = defaultdict(set)
    for cls, words in spec.items():
        for word in words.split():
            out[word.replace("_", " ")].add(cls)
    return {k: frozenset(v) for k, v in out.items()}


#: Predicate classes: verbs, and the nouns/adjectives that name the same relation or attribute.
_CLASSES = _table({
    "found": "found establish create cofound co-found founder cofounder co-founder creator establishment "
             "foundation incorporate",
    "bear": "bear birth birthplace",
    "die": "die death decease",
    "locate": "locate base headquarter headquarters situate sit hq",
    "direct": "direct director",
    "write": "write author writer pen",
    "compose": "compose composer",
    "design": "design architect designer",
    "release": "release launch publish ship debut premiere publication issue",
    "support": "support",
    "acquire": "acquire buy purchase acquisition",
    "hold_event": "hold host stage occur happen convene",
    "sign": "sign signature",
    "build": "build construct erect construction",
    "open": "open inaugurate opening",
    "win": "win winner",
    "employ": "employ employee staff workforce worker headcount",
    "population": "population resident inhabitant",
    "price": "cost price charge fee",
    "capacity": "seat capacity accommodate",
    "payload": "payload deliver carry lift",
    "score": "score",
    "reduce": "reduce cut decrease lower shrink",
    "increase": "increase raise boost",
    "length": "long length",
    "height": "high height tall elevation altitude stand rise",
    "depth": "deep depth",
    "weight": "weigh weight heavy mass",
    "contain": "contain consist comprise include feature use bundle",
    "require": "require need",
    "accept": "accept",
    "allow": "allow permit",
    "membership": "member fellow elect admit membership",
    "possess": "hold earn obtain receive possess gain",
    "marry": "marry married marriage wed spouse",
    "ceo": "ceo",
    "chair": "chair chairman chairwoman chairperson",
    "captain": "captain skipper",
    "president": "president",
    "coach": "coach manager",
    "editor": "editor",
    "mayor": "mayor",
    "introduce": "introduce",  # not "sponsor": an event or a bill has many sponsors
    "synthesise": "synthesise synthesize synthesis",
    "discover": "discover discovery discoverer",
    "invent": "invent inventor invention",
    "summit": "summit ascend ascent",
    "consecrate": "consecrate consecration",
    "last": "last",
    "range": "range",
    "speed": "speed fast",
    "produce": "produce generate output",
    "attend": "attend attendance",
    "serve": "serve",
})

#: Multi-word predicates recognised by (lemma, particle/preposition or object lemma).
_PHRASES = {
    ("take", "place"): "hold_event",
    ("come", "out"): "release",
    ("set", "up"): "found",
    ("pass", "away"): "die",
    ("ship", "with"): "contain",
    ("come", "with"): "contain",
    ("go", "to"): "win",  # "the prize went to X"
    ("go", "public"): "ipo",
    ("take", "over"): "acquire",
    ("tear", "down"): "ended",
    ("shut", "down"): "ended",
}

#: Classes whose date (and place) is that of a single event once the subject is fixed.
_SINGLE_EVENT = {"bear", "die", "found", "sign", "consecrate", "build", "release", "acquire", "invent",
                 "discover", "open", "hold_event", "synthesise", "summit", "ipo"}
#: Of those, the ones that recur unless marked first/original or scoped to one specific instance.
_NEEDS_MARK_DATE = {"open", "hold_event", "synthesise", "summit", "discover"}
#: Classes with one place per subject (birthplace, headquarters, the venue of one event).
_SINGLE_PLACE = {"bear", "die", "found", "sign", "consecrate", "build", "locate", "hold_event", "open"}
_NEEDS_MARK_PLACE = {"open", "hold_event", "locate"}
#: Person roles with one holder per subject: always, only when marked (first/lead/...), or at one time.
_ROLE_ALWAYS = {"found", "write", "direct", "compose", "introduce", "invent"}
_ROLE_MARKED = {"design", "synthesise", "summit", "discover", "win"}
_ROLE_AT_TIME = {"ceo", "chair", "captain", "president", "coach", "editor", "mayor"}
#: Classes repeated with different qualifiers (a release per country, a win per year).
_REPEATABLE = {"release", "hold_event", "open", "win", "acquire"}

_UNIQUE_MARKS = {"first", "original", "originally", "maiden", "inaugural", "founding", "initial", "initially",
                 "sole", "only", "main", "principal", "lead", "chief", "primary", "flagship", "current",
                 "currently", "incumbent"}
_FIRST_MARKS = {"first", "original", "originally", "maiden", "inaugural", "founding", "initial", "initially"}

#: Mutually exclusive states; a sentence is in a state when a (non-negated) trigger is its predicate.
_STATES = _table({
    "alive": "alive living",
    "dead": "die dead death decease",
    "cancelled": "cancel abandon scrap shelve",
    "completed": "release complete finish premiere",
    "ended": "discontinue cease terminate defunct dissolve disband demolish raze destroy deprecate "
             "unmaintained",
    "acquired": "acquire buy purchase",
    "independent": "independent",
    "stable": "stable",
    "unstable": "radioactive unstable",
    "open_source": "open-source",
    "proprietary": "proprietary closed-source",
    "settled": "settle",
    "tried": "trial verdict convict acquit",
    "crashed": "crash explode",
    "convicted": "convict",
    "acquitted": "acquit",
    "extinct": "extinct",
    "extant": "extant",
    "mandatory": "mandatory compulsory obligatory",
    "optional": "optional voluntary",
    "legal": "legal lawful",
    "illegal": "illegal unlawful",
    "compatible": "compatible",
    "incompatible": "incompatible",
    "public_company": "publicly-traded",
    "private_company": "privately-held",
})
_EXCLUSIVE = {
    frozenset({"alive", "dead"}), frozenset({"cancelled", "completed"}), frozenset({"acquired", "independent"}),
    frozenset({"stable", "unstable"}), frozenset({"open_source", "proprietary"}), frozenset({"settled", "tried"}),
    frozenset({"convicted", "acquitted"}), frozenset({"extinct", "extant"}), frozenset({"mandatory", "optional"}),
    frozenset({"legal", "illegal"}), frozenset({"compatible", "incompatible"}),
    frozenset({"ended", "ongoing"}), frozenset({"crashed", "uneventful"}),
    frozenset({"public_company", "private_company"}),
}
#: States that hold from an event on ("died in 2019"), so they clash with the other state only later.
_EVENT_STATES = {"dead", "cancelled", "ended", "acquired", "completed", "crashed", "settled", "tried"}
#: States that need a shared object ("crashed during its first flight" / "completed its first flight").
_OBJECT_STATES = {"crashed", "uneventful"}

#: Verbs and prepositions that negate the predicate they govern ("lacks X", "breaks compatibility").
_PRIVATIVE_HEADS = {"lack", "without", "break", "lose", "drop", "remove", "refuse", "fail", "deny", "omit",
                    "exclude", "forbid", "prohibit", "ban", "free"}
#: A predicate that is the negation of a class ("reject" = not accept).
_ANTONYM_VERBS = {"reject": "accept", "refuse": "accept", "forbid": "allow", "prohibit": "allow", "ban": "allow",
                  "exclude": "contain", "omit": "contain", "lack": "contain"}

_DIRECTION = {"north", "south", "east", "west", "northern", "southern", "eastern", "western", "northeast",
              "northwest", "southeast", "southwest", "northeastern", "northwestern", "southeastern",
              "southwestern", "upper", "lower", "inner", "outer", "left", "right", "front", "rear", "central"}
_ORDER = {"elder", "eldest", "older", "oldest", "younger", "youngest", "first", "second", "third", "fourth",
          "fifth", "sixth", "seventh", "eighth", "ninth", "tenth", "last", "previous", "next", "earlier",
          "later", "new", "old", "junior", "senior"}
_GENDER = {"men", "women", "man", "woman", "male", "female", "boys", "girls", "boy", "girl", "mens", "womens",
           "ladies", "gentlemen"}
_SCOPE = {"domestic", "international", "national", "regional", "local", "foreign", "indoor", "outdoor",
          "single", "double", "singles", "doubles", "amateur", "professional", "youth", "under-21", "junior"}

_LIGHT_VERBS = {"be", "have", "reach", "get", "make", "do", "become", "remain", "measure", "total", "put",
                "run", "go", "take", "show", "list", "record", "report", "number"}

_ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
             "eighth": 8, "ninth": 9, "tenth": 10, "eleventh": 11, "twelfth": 12}
_VERSION_NOUNS = {"generation", "edition", "volume", "series", "season", "model", "version", "release",
                  "instalment", "installment", "part", "gen", "iteration", "revision", "episode", "book"}
#: "The town of X": the noun only says what kind of thing X is.
_CATEGORY_NOUNS = {"edition", "generation", "volume", "instalment", "installment", "town", "city", "village",
                   "island", "county", "province", "state", "region", "country", "district", "municipality",
                   "parish", "hamlet", "port", "version", "release", "compound", "element", "film", "novel",
                   "album", "song", "book", "company", "band", "language", "game", "programme", "program",
                   "series", "sequel"}
_TITLES = {"mr", "mrs", "ms", "dr", "prof", "sir", "dame", "lord", "lady", "senator", "sen", "rep", "st", "jr", "sr",
           "jnr", "snr", "duke", "duchess", "earl", "count", "countess", "baron", "baroness", "archduke",
           "archduchess", "emperor", "empress", "marquess", "viscount", "pope", "sultan", "tsar", "czar",
           "saint", "president", "king", "queen", "prince", "princess", "general", "captain", "judge",
           "the", "a", "an", "of", "and", "for", "in", "on", "at", "de", "la", "le", "von", "van", "der"}
#: Occupations that stand before a name as descriptors: "Composer Ilse Brandauer" is Ilse Brandauer.
_OCCUPATIONS = set("""actor actress architect artist astronomer athlete author banker biochemist biologist bishop
    boxer businessman businesswoman cardinal cellist chef chemist coach comedian composer conductor cricketer
    critic cyclist dancer designer diplomat director drummer economist editor engineer entrepreneur explorer
    farmer filmmaker footballer geographer geologist golfer guitarist historian illustrator inventor journalist
    judge jurist lawyer librarian linguist lyricist manager mathematician merchant minister missionary model
    musician novelist painter philosopher photographer physician physicist pianist pilot playwright poet
    politician priest producer professor psychologist publisher rapper researcher runner sailor scholar
    scientist screenwriter sculptor senator singer skier soldier songwriter sociologist sprinter statesman
    surgeon swimmer teacher theologian translator violinist writer""".split())

_GENERIC_PERSON = {"person", "man", "woman", "one", "individual", "people", "player", "team", "climber"}

_WORD_NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
                 "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30,
                 "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90,
                 "hundred": 100, "dozen": 12}
_MULTIPLIERS = {"thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12, "k": 1e3, "m": 1e6,
                "bn": 1e9}

#: Count nouns that measure the same thing ("4,200 people" employed = "4,200 employees").
_COUNT_CLASSES = _table({
    "headcount": "employee staff worker people person",
    "population": "resident inhabitant people citizen person",
    "audience": "fan spectator attendee visitor people person",
})

#: Places that contain cities: countries, continents, regions, US states, and the like. A city is never
#: compared with one of these (we cannot tell whether it lies inside), only places of the same level.
_REGIONS = {
    "country": """afghanistan albania algeria andorra angola argentina armenia australia austria azerbaijan
        bahamas bahrain bangladesh barbados belarus belgium belize benin bhutan bolivia bosnia botswana brazil
        brunei bulgaria burkina_faso burundi cambodia cameroon canada chad chile china colombia comoros congo
        costa_rica croatia cuba cyprus czechia czech_republic denmark djibouti dominica dominican_republic
        ecuador egypt el_salvador eritrea estonia eswatini ethiopia fiji finland france gabon gambia georgia
        germany ghana greece grenada guatemala guinea guyana haiti honduras hungary iceland india indonesia iran
        iraq ireland israel italy ivory_coast jamaica japan jordan kazakhstan kenya kiribati kosovo kuwait
        kyrgyzstan laos latvia lebanon lesotho liberia libya liechtenstein lithuania luxembourg madagascar malawi
        malaysia maldives mali malta mauritania mauritius mexico micronesia moldova monaco mongolia montenegro
        morocco mozambique myanmar burma namibia nauru nepal netherlands holland new_zealand nicaragua niger
        nigeria north_korea north_macedonia macedonia norway oman pakistan palau palestine panama
        papua_new_guinea paraguay peru philippines poland portugal qatar romania russia rwanda samoa
        san_marino saudi_arabia senegal serbia seychelles sierra_leone singapore slovakia slovenia
        solomon_islands somalia south_africa south_korea korea south_sudan spain sri_lanka sudan suriname
        sweden switzerland syria taiwan tajikistan tanzania thailand togo tonga trinidad tunisia turkey
        turkmenistan tuvalu uganda ukraine united_arab_emirates uae united_kingdom uk britain great_britain
        united_states usa us america uruguay uzbekistan vanuatu vatican venezuela vietnam yemen zambia zimbabwe
        england scotland wales northern_ireland soviet_union ussr yugoslavia czechoslovakia prussia""",
    "continent": "europe asia africa antarctica oceania north_america south_america latin_america",
    "region": """scandinavia nordic_countries balkans middle_east near_east far_east caribbean iberia
        iberian_peninsula siberia patagonia benelux baltics baltic_states central_asia southeast_asia
        east_asia south_asia western_europe eastern_europe central_europe northern_europe southern_europe
        west_africa east_africa north_africa southern_africa central_america new_england midwest
        the_west_coast west_coast east_coast bavaria catalonia andalusia tuscany lombardy sicily sardinia
        flanders wallonia quebec ontario british_columbia alberta manitoba saskatchewan nova_scotia
        new_south_wales victoria queensland tasmania western_australia south_australia""",
    "us_state": """alabama alaska arizona arkansas california colorado connecticut delaware florida hawaii
        idaho illinois indiana iowa kansas kentucky louisiana maine maryland massachusetts michigan
        minnesota mississippi missouri montana nebraska nevada new_hampshire new_jersey new_mexico
        new_york_state north_carolina north_dakota ohio oklahoma oregon pennsylvania rhode_island
        south_carolina south_dakota tennessee texas utah vermont virginia washington_state west_virginia
        wisconsin wyoming""",
}
_REGION_LEVEL = {name.replace("_", " "): level for level, names in _REGIONS.items() for name in names.split()}
#: Place names ending in one of these name a kind of place below or beside a city.
_PLACE_FEATURES = {"street", "road", "avenue", "square", "district", "quarter", "park", "desert", "valley",
                   "river", "lake", "mountains", "mountain", "mount", "island", "islands", "bay", "coast",
                   "county", "province", "region", "state", "peninsula", "sea", "ocean", "forest", "hills",
                   "borough", "neighbourhood", "neighborhood", "town", "old town", "harbour", "harbor",
                   "airport", "station", "stadium", "hall", "building", "shipyard", "dockyard", "campus"}


@lru_cache(maxsize=200_000)
def _fold(text: str) -> str:
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    return text


def _stem(word: str) -> str:
    """A crude derivational stem so that consecrate/consecration and conduct/conductor meet."""
    w = word.lower()
    for suffix in ("ibility", "ability", "isation", "ization", "ations", "ation", "ition", "ature", "ments",
                   "ment", "ance", "ence", "ible", "able", "ings", "ing", "ers", "ors", "ees", "ity", "ate",
                   "ise", "ize", "er", "or", "ee", "ed", "es", "e", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 4:
            return w[: -len(suffix)]
    return w


#: Verbs that only say that an event happened ("took place", "was held", "made its first flight"): values
#: attached to them belong to a noun predicate of their clause, and the date rule compares two first events
#: only when both are told with one of these (or with the same verb).
_OCCURRENCE_VERBS = {"take", "operate", "make", "hold", "occur", "happen", "be", "fly", "run", "stage", "have",
                     "play", "conduct", "complete", "perform", "undertake", "come"}
